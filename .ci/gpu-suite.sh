#!/usr/bin/env bash
# The GPU suite, run on the GPU machine from the repository root:
#
#   bash .ci/gpu-suite.sh
#
#  1. build-gpu-sys:  the system (Ubuntu) Open MPI, not CUDA-aware, so device
#                     buffers take the staging path. Build + the whole ctest.
#  2. build-gpu-cuda: the CUDA-aware Open MPI of .gpu/ (use_cuda_aware_mpi,
#                     -DMPI_HOME=$CUDA_AWARE_MPI): the direct path. Build + ctest.
#  3. compute-sanitizer memcheck, racecheck and synccheck on GPU test binaries
#     of the staging build.
#  4. The jacobi example on the device, in both builds (if built).
#  5. The benchmarks, in both builds (tests/bench/run_all.py: report, CSV
#     and plots under $OUT/perf).
#  6. mpi_stress with device buffers (MPI_STRESS_MEM=device) at 4 ranks x 16
#     threads, in both builds: the staging path in 4 KiB pieces (sys) and the
#     direct path for every message (cuda); its final line goes to the table.
#     Under compute-sanitizer (step 3) the same run once per tool.
#
# PTSC_GPU_BENCH=0 leaves the benchmarks out (about 100 s), PTSC_GPU_SANITIZER=0
# the compute-sanitizer runs (up to 150 s each), PTSC_GPU_CTEST=0 the two ctest
# runs (about 450 s together; the builds still run). One call of at most ten
# minutes fits the suite with benchmarks and sanitizer off, or the benchmarks
# and sanitizer with ctest off. PTSC_GPU_CTEST_LABEL=gpu runs only the tests
# of that ctest label, PTSC_GPU_CTEST_REGEX=RE only those whose names match
# (ctest -R; a partial run, for a short call). PTSC_GPU_BUILDS="sys" or "cuda" runs one build
# (default both), so that the whole suite of each fits a call;
# PTSC_GPU_DIFF_OPS (default 600) sets the length of the mpi_diff schedules.
# PTSC_GPU_STRESS=0 leaves the mpi_stress device runs out (step 6, expected
# well under a minute per build, at most 300 s; and its sanitizer runs, at
# most 120 s each); PTSC_GPU_STRESS_ROUNDS (default 50) sets the rounds of
# step 6, 1024 messages each. PTSC_GPU_SAN_STRESS="RANKS THREADS ROUNDS MSGS"
# (default "4 16 50 16", the size of step 6: 51200 messages; 6144 took 1 to
# 3 s under each tool on the H200) sizes the mpi_stress runs under
# compute-sanitizer, PTSC_GPU_SAN_LIMIT (default 120) their timeout in seconds.
# Logs go to $OUT (default ./gpu-out); the summary table is printed last and
# saved as $OUT/summary.md. Budget: about 8 minutes. Exit status: 0 when
# every step passed, 1 otherwise (every step runs regardless).
set -u -o pipefail

ROOT=$(pwd)
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 8)}
T0=$(date +%s)

if [ ! -f .gpu/prelude.sh ]; then
  echo "gpu-suite: .gpu/prelude.sh missing: run ../shared/gpu/stage.sh on the host first" >&2
  exit 2
fi
# shellcheck disable=SC1091
source .gpu/prelude.sh

ROWS=()
FAILED=0
# The knobs are read here and kept out of the programs' environment (ptsc
# warns about PTSC_ variables it does not know).
GPU_CTEST=${PTSC_GPU_CTEST:-1}
GPU_BENCH=${PTSC_GPU_BENCH:-1}
GPU_SANITIZER=${PTSC_GPU_SANITIZER:-1}
GPU_LABEL=${PTSC_GPU_CTEST_LABEL:-}
GPU_REGEX=${PTSC_GPU_CTEST_REGEX:-}
GPU_BUILDS=${PTSC_GPU_BUILDS:-sys cuda}
GPU_DIFF_OPS=${PTSC_GPU_DIFF_OPS:-600}
GPU_STRESS=${PTSC_GPU_STRESS:-1}
GPU_STRESS_ROUNDS=${PTSC_GPU_STRESS_ROUNDS:-50}
GPU_SAN_STRESS=${PTSC_GPU_SAN_STRESS:-4 16 50 16}
GPU_SAN_LIMIT=${PTSC_GPU_SAN_LIMIT:-120}
unset PTSC_GPU_CTEST PTSC_GPU_BENCH PTSC_GPU_SANITIZER PTSC_GPU_CTEST_LABEL PTSC_GPU_CTEST_REGEX PTSC_GPU_BUILDS PTSC_GPU_DIFF_OPS \
  PTSC_GPU_STRESS PTSC_GPU_STRESS_ROUNDS PTSC_GPU_SAN_STRESS PTSC_GPU_SAN_LIMIT
want() { case " $GPU_BUILDS " in *" $1 "*) return 0 ;; esac; return 1; }

# row STEP STATUS DETAIL SECONDS
row() { ROWS+=("| $1 | $2 | $3 | $4 |"); [ "$2" = "PASS" ] || [ "$2" = "SKIP" ] || FAILED=1; }

# run_step NAME TIMEOUT_S CMD...: runs CMD with its output in $OUT/NAME.log.
# Sets STEP_RC and STEP_SECS.
run_step() {
  local name=$1 limit=$2
  shift 2
  local t=$(date +%s)
  echo "== $name: $*" | tee "$OUT/$name.log"
  timeout --kill-after=10 "$limit" "$@" >>"$OUT/$name.log" 2>&1
  STEP_RC=$?
  STEP_SECS=$(($(date +%s) - t))
  echo "   -> rc $STEP_RC in ${STEP_SECS}s"
}

# san_step NAME TIMEOUT CMD...: run_step for a compute-sanitizer run. When the
# run failed with nothing but the tool's own "Internal Sanitizer Error" (it
# loses track of a kernel launch now and then when several host threads
# launch at once, and counts that as an error), it runs once more, as
# NAME-rerun; SAN_NOTE says so and the row reports the second run.
san_step() {
  local name=$1
  SAN_NOTE=""
  run_step "$@"
  if [ "$STEP_RC" -ne 0 ] && grep -q 'Internal Sanitizer Error' "$OUT/$name.log" &&
    ! grep -Eq 'Race reported|Invalid (__global__|__shared__|__local__)|Barrier error|Uninitialized|Program hit|Leaked' "$OUT/$name.log"; then
    shift
    SAN_NOTE="first run: internal sanitizer error only, see $name.log; rerun: "
    name="$name-rerun"
    run_step "$name" "$@"
    SAN_LOG="$OUT/$name.log"
  else
    SAN_LOG="$OUT/$name.log"
  fi
}

# stress_row NAME LABEL [DETAIL]: the row of an mpi_stress run of run_step NAME:
# its final line (or SKIPPED line), the path it took, and a timeout or the
# watchdog's deadline where the run met one.
stress_row() {
  local name=$1 label=$2 extra=${3:-} st=PASS line info why=""
  line=$(grep -E '^mpi_stress: (sent|SKIPPED)' "$OUT/$name.log" | tail -1 | sed 's/^mpi_stress: //')
  info=$(grep -E '^mpi_stress: device buffers' "$OUT/$name.log" | head -1 | sed 's/^mpi_stress: device buffers; //')
  if [ "$STEP_RC" -eq 124 ] || [ "$STEP_RC" -eq 137 ]; then
    st=FAIL
    why="TIMEOUT after ${STEP_SECS}s; "
  elif grep -q 'watchdog: no completion' "$OUT/$name.log"; then
    st=FAIL
    why="watchdog deadline; "
  elif [ "$STEP_RC" -ne 0 ]; then
    st=FAIL
  elif echo "$line" | grep -q '^SKIPPED'; then
    st=SKIP
  elif [ -z "$line" ]; then
    st=FAIL
  fi
  row "$label" "$st" "$why${line:-no final line}${info:+ ($info)}${extra:+; $extra} (rc $STEP_RC)" "$STEP_SECS"
}

# ctest_counts LOG: "P passed, F failed, S skipped of N" from ctest's last lines
# ("100% tests passed out of N" or "X% tests passed, F tests failed out of N").
ctest_counts() {
  local log=$1 line total failed skipped
  line=$(grep -E 'tests passed' "$log" | tail -1)
  total=$(echo "$line" | sed -n 's/.*out of \([0-9]*\).*/\1/p')
  failed=$(echo "$line" | sed -n 's/.* \([0-9]*\) tests failed.*/\1/p')
  skipped=$(grep -c '\*\*\*Skipped' "$log")
  if [ -z "$total" ]; then
    echo "no ctest summary"
  else
    failed=${failed:-0}
    echo "$((total - failed - skipped)) passed, $failed failed, $skipped skipped of $total"
  fi
}

# Fortran (the module, the Fortran tests and f_gpu_interpose_np2_preload_staged,
# label gpu): the GPU machine has gfortran-13 but no `gfortran`, which CMake
# looks for and Open MPI's mpif90 runs; name it for both.
FORTRAN_ARGS=()
if ! command -v gfortran >/dev/null 2>&1; then
  for fc in gfortran-14 gfortran-13 gfortran-12; do
    if command -v "$fc" >/dev/null 2>&1; then
      FORTRAN_ARGS=(-DCMAKE_Fortran_COMPILER="$fc")
      export OMPI_FC=$fc
      break
    fi
  done
fi

# build_and_test TAG BUILD_DIR [CMAKE_ARGS...]
build_and_test() {
  local tag=$1 dir=$2
  shift 2
  run_step "$tag-configure" 180 cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTSC_WITH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DPTSC_DIFF_OPS="$GPU_DIFF_OPS" ${FORTRAN_ARGS[@]+"${FORTRAN_ARGS[@]}"} "$@"
  if [ "$STEP_RC" -ne 0 ]; then
    row "$tag configure" FAIL "see $tag-configure.log" "$STEP_SECS"
    return
  fi
  grep -E "ptsc: CUDA layer|MPI" "$OUT/$tag-configure.log" | head -3 >>"$OUT/$tag-info.txt"
  grep -E "ptsc: Fortran" "$OUT/$tag-configure.log" | head -1 >>"$OUT/$tag-info.txt"
  # The system Open MPI has Fortran bindings: there the Fortran module and
  # f_gpu_interpose_np2_preload_staged (label gpu) must be built. A row, not
  # PTSC_WITH_FORTRAN=ON, so that a missing Fortran does not cost the build
  # (the CUDA-aware Open MPI may have no Fortran bindings: not required).
  if [ "$tag" = sys ]; then
    if grep -q "ptsc: Fortran with" "$OUT/$tag-configure.log"; then
      row "$tag Fortran" PASS "$(sed -n 's/.*ptsc: Fortran with //p' "$OUT/$tag-configure.log" | head -1)" "-"
    else
      row "$tag Fortran" FAIL "not built: $(grep -o 'ptsc: Fortran off.*' "$OUT/$tag-configure.log" | head -1)" "-"
    fi
  fi
  run_step "$tag-build" 300 cmake --build "$dir" -j "$JOBS"
  if [ "$STEP_RC" -ne 0 ]; then
    row "$tag build" FAIL "see $tag-build.log" "$STEP_SECS"
    return
  fi
  row "$tag build" PASS "$(grep -c 'warning:' "$OUT/$tag-build.log") warnings" "$STEP_SECS"
  [ -x "$dir/src/ptsc-info" ] && "$dir/src/ptsc-info" >"$OUT/$tag-ptsc-info.txt" 2>&1
  if [ "$GPU_CTEST" = 0 ]; then
    row "$tag ctest (all)" SKIP "PTSC_GPU_CTEST=0" "-"
    return
  fi
  # The whole suite: unit, mpi, doc, format, examples and gpu (labels).
  run_step "$tag-ctest" 480 ctest --test-dir "$dir" -j 4 ${GPU_LABEL:+-L "$GPU_LABEL"} ${GPU_REGEX:+-R "$GPU_REGEX"} --output-on-failure --timeout 300 \
    --output-junit "$OUT/$tag-ctest.xml"
  local st=PASS
  [ "$STEP_RC" -eq 0 ] || st=FAIL
  row "$tag ctest (${GPU_LABEL:-all}${GPU_REGEX:+, -R $GPU_REGEX})" "$st" "$(ctest_counts "$OUT/$tag-ctest.log")" "$STEP_SECS"
  # The per-case tables the GPU tests print, gathered for docs/gpu-results.md.
  grep -E '^\|' "$dir/Testing/Temporary/LastTest.log" >"$OUT/$tag-tables.md" 2>/dev/null || true
  local gl
  gl=$(grep -E '^ *[0-9]+/[0-9]+ +Test +#[0-9]+: (gpu_|example_jacobi_device)' "$OUT/$tag-ctest.log" |
    sed -E 's/.*Test +#[0-9]+: ([^ ]+) [ .]*[*]*([A-Za-z]+).*/\1 \2/' | tr '\n' ';' | sed 's/;/; /g')
  local gst=PASS
  echo "$gl" | grep -q 'Passed' || gst=SKIP
  echo "$gl" | grep -qE 'Failed|Timeout|Exception|Not' && gst=FAIL
  row "$tag gpu tests" "$gst" "${gl:-none ran}" "-"
}

# 1. System MPI: the staging path.
want sys && build_and_test sys build-gpu-sys

# 3. compute-sanitizer: memcheck, racecheck and synccheck on the staging
#    build's GPU tests that exercise ptsc's copies, events and pools (each
#    rank runs under the tool).
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
BIN=build-gpu-sys/tests/gpu
if ! want sys; then
  row "compute-sanitizer" SKIP "runs on the sys build" "-"
elif [ "$GPU_SANITIZER" = 0 ]; then
  row "compute-sanitizer" SKIP "PTSC_GPU_SANITIZER=0" "-"
elif [ -x "$SAN" ] && [ -x "$BIN/test_gpu_stagepool" ]; then
  for tool in memcheck racecheck synccheck; do
    for t in "test_gpu_stagepool 1" "test_gpu_staging 2" "test_gpu_memory 2"; do
      set -- $t
      name="sanitizer-$tool-$1"
      san_step "$name" 150 mpiexec -n "$2" --oversubscribe "$SAN" --tool "$tool" --error-exitcode 99 "$BIN/$1"
      st=PASS
      [ "$STEP_RC" -eq 0 ] || st=FAIL
      [ "$STEP_RC" -eq 77 ] && st=SKIP
      errs=$(grep -Eo '(ERROR|RACECHECK) SUMMARY: [0-9]+ (error|hazard)' "$SAN_LOG" | sort | uniq -c | tr -s ' ' | tr '\n' ';')
      row "compute-sanitizer $tool: $1 ($2 ranks)" "$st" "$SAN_NOTE${errs:-no summary} (rc $STEP_RC)" "$STEP_SECS"
    done
  done
  # mpi_stress with device buffers, small (384 messages): the program's own
  # copies, ptsc's syncs and staging under each tool. Bounded: the watchdog
  # ends the job at 100 s, the step's timeout at 120 s; the row says which.
  if [ "$GPU_STRESS" = 0 ]; then
    row "compute-sanitizer: mpi_stress" SKIP "PTSC_GPU_STRESS=0" "-"
  elif [ ! -x build-gpu-sys/tests/mpi_stress ]; then
    row "compute-sanitizer: mpi_stress" FAIL "build-gpu-sys/tests/mpi_stress missing (build failed?)" "-"
  else
    for tool in memcheck racecheck synccheck; do
      name="sanitizer-$tool-mpi_stress"
      # shellcheck disable=SC2086
      set -- $GPU_SAN_STRESS
      san_step "$name" "$GPU_SAN_LIMIT" env MPI_STRESS_MEM=device PTSC_MAX_THREADS="$2" OMP_NUM_THREADS="$2" \
        PTSCTEST_DEADLINE=$((GPU_SAN_LIMIT - 20)) OMPI_MCA_mpi_yield_when_idle=1 \
        mpiexec -n "$1" --oversubscribe "$SAN" --tool "$tool" --error-exitcode 99 build-gpu-sys/tests/mpi_stress "$3" "$4"
      errs=$(grep -Eo '(ERROR|RACECHECK) SUMMARY: [0-9]+ (error|hazard)' "$SAN_LOG" | sort | uniq -c | tr -s ' ' | tr '\n' ';')
      stress_row "$(basename "$SAN_LOG" .log)" "compute-sanitizer $tool: mpi_stress device ($1 ranks x $2 threads, $3 x $4)" \
        "$SAN_NOTE${errs:-no summary}"
    done
  fi
elif [ ! -x "$SAN" ]; then
  row "compute-sanitizer" SKIP "compute-sanitizer not installed" "-"
else
  row "compute-sanitizer" FAIL "GPU test binaries missing in $BIN (build failed?)" "-"
fi

# 4a. The example on the device, staging path.
run_jacobi() {
  local tag=$1 dir=$2
  if [ -x "$dir/examples/jacobi" ]; then
    run_step "$tag-jacobi" 120 env PTSC_MAX_THREADS=4 OMP_NUM_THREADS=4 PTSC_STATS=1 \
      mpiexec -n 2 --oversubscribe "$dir/examples/jacobi" --device
    local st=PASS
    [ "$STEP_RC" -eq 0 ] || st=FAIL
    [ "$STEP_RC" -eq 77 ] && st=SKIP
    row "$tag jacobi --device (2 ranks x 4 threads)" "$st" "rc $STEP_RC; $(grep -Eo 'PASS|FAIL' "$OUT/$tag-jacobi.log" |
      sort | uniq -c | tr '\n' ' ')" "$STEP_SECS"
  else
    row "$tag jacobi" SKIP "not built" "-"
  fi
}
want sys && run_jacobi sys build-gpu-sys

# 6. mpi_stress with device buffers, 4 ranks x 16 threads (64 threads on the
#    machine's cores), GPU_STRESS_ROUNDS rounds of 16 messages per endpoint.
#    run_stress TAG DIR PATH_TEXT VAR=VALUE...: the variables choose the path.
run_stress() {
  local tag=$1 dir=$2 path=$3
  shift 3
  if [ "$GPU_STRESS" = 0 ]; then
    row "$tag mpi_stress device" SKIP "PTSC_GPU_STRESS=0" "-"
    return
  fi
  if [ ! -x "$dir/tests/mpi_stress" ]; then
    row "$tag mpi_stress device" SKIP "not built" "-"
    return
  fi
  run_step "$tag-stress" 300 env "$@" MPI_STRESS_MEM=device PTSC_MAX_THREADS=16 OMP_NUM_THREADS=16 \
    PTSCTEST_DEADLINE=280 OMPI_MCA_mpi_yield_when_idle=1 \
    mpiexec -n 4 --oversubscribe "$dir/tests/mpi_stress" "$GPU_STRESS_ROUNDS" 16
  stress_row "$tag-stress" "$tag mpi_stress device (4 ranks x 16 threads, $GPU_STRESS_ROUNDS x 16, $path)"
}
want sys && run_stress sys build-gpu-sys "staging, 4 KiB pieces" PTSC_STAGING=always PTSC_STAGING_CHUNK=4k

# 5. Benchmarks (the direct path only in the CUDA-aware build): every program
#    of tests/bench through tests/bench/run_all.py, which writes the report,
#    one CSV per table and (with matplotlib) the plots under $OUT/perf as
#    h200-TAG-<date>*; without python3, the run_bench target's tables.
run_bench() {
  local tag=$1 dir=$2
  if [ "$GPU_BENCH" = 0 ]; then
    row "$tag benchmarks" SKIP "PTSC_GPU_BENCH=0" "-"
    return
  fi
  if command -v python3 >/dev/null; then
    run_step "$tag-bench" 300 python3 tests/bench/run_all.py "$dir" "$OUT/perf" --machine "h200-$tag"
  else
    run_step "$tag-bench" 240 cmake --build "$dir" --target run_bench
  fi
  local st=PASS
  [ "$STEP_RC" -eq 0 ] || st=FAIL
  grep -E '^(\||#|[A-Za-z].*:)' "$OUT/$tag-bench.log" | grep -v '^== ' >"$OUT/$tag-bench.md" || true
  row "$tag benchmarks" "$st" "tables in $tag-bench.md and perf/" "$STEP_SECS"
}
want sys && run_bench sys build-gpu-sys

# 2. CUDA-aware MPI: the direct path, in its own tree.
if want cuda; then
  use_cuda_aware_mpi
  build_and_test cuda build-gpu-cuda -DMPI_HOME="$CUDA_AWARE_MPI" -DMPIEXEC_EXECUTABLE="$CUDA_AWARE_MPI/bin/mpiexec"
  run_jacobi cuda build-gpu-cuda
  run_stress cuda build-gpu-cuda "direct" PTSC_STAGING=never PTSC_DIRECT_MIN=0
  run_bench cuda build-gpu-cuda
fi

# Summary, last.
{
  echo
  echo "## GPU suite summary ($(date -u +%Y-%m-%dT%H:%MZ), $(($(date +%s) - T0)) s total)"
  echo
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /'
  echo
  echo "| step | result | detail | seconds |"
  echo "|---|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
  echo
  echo "Logs: $OUT"
} | tee "$OUT/summary.md"
# At most eight files come back from the GPU machine: keep the summary, the
# benchmark and race tables, and pack every log into one archive.
# The benchmark reports, CSV and plots (run_all.py's perf/ tree) go into
# perf.tgz, whole.
# (Only the kinds present: with ctest off there is no .xml, and a missing
# name would fail tar and keep every log, more than eight files.)
(cd "$OUT" && shopt -s nullglob && logs=(./*.log ./*.txt ./*.xml) && [ ${#logs[@]} -gt 0 ] &&
  tar czf logs.tgz "${logs[@]}" && rm -f "${logs[@]}")
[ -d "$OUT/perf" ] && (cd "$OUT" && tar czf perf.tgz perf && rm -rf perf)
exit $FAILED
