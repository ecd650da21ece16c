#!/usr/bin/env bash
# A short first call on the GPU machine for the stream-ordered calls
# (ptsc_*_enqueue), before the whole suite: both builds of the targets that
# use them, then on each build the enqueued and the captured-graph jacobi
# (2 ranks x 3 threads, device), test_gpu_enqueue (per-thread and owned
# streams) and bench_enqueue. Each run has a time limit; a run still going
# then gets the stacks of its processes (.ci/gpu-stacks.sh) and is killed,
# so a hang names where it waits. About 3 to 5 minutes.
#
#   OUT=dir bash .ci/gpu-enqueue-check.sh     (from the repository root)
#
# Logs go to $OUT/logs.tgz, the table of results to $OUT/summary.txt and
# stdout. Exit status: 0 when every run passed.
set -u
if [ ! -f .gpu/prelude.sh ]; then
  echo "gpu-enqueue-check: .gpu/prelude.sh missing: run ../shared/gpu/stage.sh on the host first" >&2
  exit 2
fi
# shellcheck disable=SC1091
source .gpu/prelude.sh
O=${OUT:-./gpu-out}
mkdir -p "$O"
O=$(cd "$O" && pwd)
FAILED=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/summary.txt"
T="jacobi test_gpu_enqueue bench_enqueue"
CFG=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTSC_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90)
(cmake -S . -B build-gpu-sys "${CFG[@]}" >"$O/configure-sys.log" 2>&1 &&
  cmake --build build-gpu-sys -j 8 --target $T >"$O/build-sys.log" 2>&1
  echo "sys build rc $?") &
(use_cuda_aware_mpi
  cmake -S . -B build-gpu-cuda "${CFG[@]}" -DMPI_HOME="$CUDA_AWARE_MPI" \
    -DMPIEXEC_EXECUTABLE="$CUDA_AWARE_MPI/bin/mpiexec" >"$O/configure-cuda.log" 2>&1 &&
  cmake --build build-gpu-cuda -j 8 --target $T >"$O/build-cuda.log" 2>&1
  echo "cuda build rc $?") &
wait
export PTSC_TIMEOUT=20 # the programs set CUDA_DEVICE_MAX_CONNECTIONS=32 themselves
# run NAME LIMIT PATTERN CMD...: one line of the table.
run() {
  local name=$1 t rc
  shift
  t=$(date +%s)
  bash .ci/gpu-stacks.sh "$@" >"$O/$name.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || FAILED=1
  echo "$name rc=$rc $(($(date +%s) - t))s $(grep -Eo 'PASS[A-Z_]*|FAIL[A-Z_]*|bench_enqueue: done' "$O/$name.log" |
    sort | uniq -c | tr -s ' ' | tr '\n' ';')" | tee -a "$O/summary.txt"
}
for b in sys cuda; do
  [ "$b" = cuda ] && use_cuda_aware_mpi
  D=build-gpu-$b
  J=(env PTSC_MAX_THREADS=3 OMP_NUM_THREADS=3 mpirun -n 2 --bind-to none "$D/examples/jacobi" --device -t 3
    -x 96 -y 100 -i 60)
  run "$b-jacobi-enqueue" 60 examples/jacobi "${J[@]}" --exchange enqueue
  run "$b-jacobi-graph" 60 examples/jacobi "${J[@]}" --exchange graph
  run "$b-test-enqueue" 90 test_gpu_enqueue mpirun -n 2 --bind-to none "$D/tests/gpu/test_gpu_enqueue"
  run "$b-test-enqueue-owned" 90 test_gpu_enqueue env PTSC_STREAM=owned mpirun -n 2 --bind-to none \
    "$D/tests/gpu/test_gpu_enqueue"
  run "$b-bench-enqueue" 150 bench_enqueue mpirun -n 2 --bind-to none "$D/tests/bench/bench_enqueue"
done
(cd "$O" && tar czf logs.tgz ./*.log && rm -f ./*.log)
exit $FAILED
