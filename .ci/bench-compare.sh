#!/usr/bin/env bash
# Old against new on the same machine in the same run: builds two revisions
# and runs the no-regression benchmarks of both alternately, several rounds,
# then prints one table, old against new.
#
#   bash .ci/bench-compare.sh OLD_REV [NEW_REV]      (NEW_REV: HEAD)
#
# Measured, per revision and round (tests/bench/bench_host, 2 ranks, the
# same runs as run_all.py's bench_host jobs):
#   - PTSC_COMM=dup: the host ping-pong (8 B, 1 and 8 thread pairs: half a
#     round trip, ptsc / raw MPI) and the lane message rate (8 B, 1..16
#     threads: msg/s, ptsc / raw);
#   - PTSC_COMM=shared --only rate: the lane message rate again.
# Together: the merged lane-rate table of run_all.py. The rounds alternate
# the order (old, new, then new, old, ...) so that drift of the machine's
# load lands on both; each cell of the table is the median over the rounds,
# with the range. The ratio to raw MPI is measured inside each run (raw and
# ptsc interleaved by bench_host itself), so it is the figure that survives
# a loaded machine; the absolute columns are there to read beside it.
#
# Knobs (environment):
#   ROUNDS=5              rounds (each runs both revisions once)
#   CMP_DIR=/tmp/bench-compare-<user>   worktrees, builds and raw outputs
#                         (kept; a second call reuses builds of the same commit)
#   CMP_MPI=sys|cuda      on the GPU machine (where .gpu/prelude.sh exists):
#                         the system Open MPI (default) or the CUDA-aware one
#                         of .gpu/ (use_cuda_aware_mpi, -DMPI_HOME), as
#                         .ci/gpu-suite.sh builds them
#   CMP_CMAKE_ARGS=...    more cmake arguments for both builds (default: with
#                         a GPU -DPTSC_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90,
#                         else -DPTSC_WITH_CUDA=OFF)
#   CMP_TARGET_MS=        bench_host --target-ms (default: its own, 30 ms per
#                         ping-pong measurement, 150 ms per rate measurement)
#   CMP_TIMEOUT=600       seconds per benchmark run
#   CMP_THREADS=16        thread slots per rank (PTSC_MAX_THREADS, OMP_NUM_THREADS):
#                         the lane rate runs 1, 2, 4 .. up to it; on a 2-core
#                         machine 2 (more threads than cores measure the
#                         machine's scheduling, and stalled runs for minutes)
#   CMP_OLD_ENV=, CMP_NEW_ENV=  variables for one side's runs only, e.g.
#                         CMP_NEW_ENV="PTSC_PROGRESS=caller" (OLD_REV and
#                         NEW_REV may then be the same commit)
#   CMP_RAW=DIR           no builds, no runs: the table of the raw outputs in
#                         DIR (a raw-* folder of an earlier call, its ROUNDS)
# Both revisions build with the same compiler, flags and MPI; the ranks run
# with PTSC_MAX_THREADS=OMP_NUM_THREADS=$CMP_THREADS and the rest of the
# environment as it is (PTSC_PROGRESS etc. apply to both, where known).
# Exit status: 0 when every build and run succeeded.
set -u -o pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "${1#-}" != "$1" ]; then
  sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
# A revision may also be a source tree (a folder: where there is no git
# history, as on the GPU machine; `git archive REV | tar -x -C DIR` makes
# one, and DIR/.rev may hold its label), and NEW_REV may be "." (the tree
# the script runs in).
ROOT=$(git rev-parse --show-toplevel 2>/dev/null || pwd)
cd "$ROOT" || exit 2
declare -A SRC=()
resolve() { # resolve NAME REV: sets the variable NAME (a commit, or a label for a tree)
  if [ -d "$2" ]; then
    SRC[${1,,}]=$(cd "$2" && pwd)
    printf -v "$1" '%s' "$(cat "$2/.rev" 2>/dev/null || basename "${SRC[${1,,}]}")"
  else
    local sha
    sha=$(git rev-parse --verify "$2^{commit}") || { echo "bench-compare: no such revision: $2" >&2; exit 2; }
    printf -v "$1" '%s' "$sha"
  fi
}
resolve OLD "$1"
resolve NEW "${2:-HEAD}"
label() { # label NAME SHA
  if [ -n "${SRC[$1]:-}" ]; then echo "$2 (source tree ${SRC[$1]})"; else git log -1 --format='%h %s' "$2" | cut -c1-100; fi
}
ROUNDS=${ROUNDS:-5}
CMP_DIR=${CMP_DIR:-/tmp/bench-compare-$(id -un)}
CMP_MPI=${CMP_MPI:-sys}
CMP_TIMEOUT=${CMP_TIMEOUT:-600}
CMP_THREADS=${CMP_THREADS:-16}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
mkdir -p "$CMP_DIR" || exit 2
CMP_DIR=$(cd "$CMP_DIR" && pwd)
RAW=$CMP_DIR/raw-$(date -u +%Y%m%dT%H%M%S)
if [ -n "${CMP_RAW:-}" ]; then
  RAW=$CMP_RAW
else
  mkdir -p "$RAW"
fi

# The GPU machine: its prelude (Criterion, mpirun as root, the CUDA-aware MPI).
MPI_ARGS=()
HAVE_GPU=0
if [ -f .gpu/prelude.sh ]; then
  # shellcheck disable=SC1091
  source .gpu/prelude.sh
  if [ "$CMP_MPI" = cuda ]; then
    use_cuda_aware_mpi
    MPI_ARGS=(-DMPI_HOME="$CUDA_AWARE_MPI")
  fi
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && HAVE_GPU=1
if [ -n "${CMP_CMAKE_ARGS+x}" ]; then
  read -r -a EXTRA <<<"$CMP_CMAKE_ARGS"
elif [ "$HAVE_GPU" = 1 ]; then
  EXTRA=(-DPTSC_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90)
else
  EXTRA=(-DPTSC_WITH_CUDA=OFF)
fi
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# build NAME SHA: a detached worktree at SHA and its build of bench_host.
build() {
  local name=$1 sha=$2 src=$CMP_DIR/src-$1 bld=$CMP_DIR/build-$1
  if [ -n "${SRC[$name]:-}" ]; then
    src=${SRC[$name]}
  elif [ -d "$src" ] && [ "$(git -C "$src" rev-parse HEAD 2>/dev/null)" != "$sha" ]; then
    git worktree remove --force "$src" >/dev/null 2>&1 || rm -rf "$src"
    git worktree prune
    rm -rf "$bld"
  fi
  if [ ! -d "$src" ]; then
    git worktree add --detach "$src" "$sha" >"$RAW/$name-worktree.log" 2>&1 || {
      echo "bench-compare: git worktree add $sha failed (see $RAW/$name-worktree.log)" >&2
      return 1
    }
  fi
  echo "bench-compare: building $name ($(label "$name" "$sha" | cut -c1-70)) in $bld" >&2
  cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTSC_BUILD_EXAMPLES=OFF ${MPI_ARGS[@]+"${MPI_ARGS[@]}"} \
    "${EXTRA[@]}" >"$RAW/$name-configure.log" 2>&1 &&
    cmake --build "$bld" -j "$JOBS" --target bench_host >"$RAW/$name-build.log" 2>&1 || {
    echo "bench-compare: build of $name failed (see $RAW/$name-configure.log, $RAW/$name-build.log)" >&2
    return 1
  }
}

# The table of the raw outputs in $RAW.
table() {
  python3 - "$RAW" "$ROUNDS" <<'EOF'
import re, statistics, sys, os
raw, rounds = sys.argv[1], int(sys.argv[2])

def rows(path, title):
    """Data rows of the table under the heading containing `title`."""
    try:
        text = open(path).read()
    except OSError:
        return []
    out, on, lines = [], False, text.splitlines()
    sep = lambda l: re.match(r"^\|[\s:|-]+\|$", l.strip())
    for i, line in enumerate(lines):
        if line.startswith("#"):
            on = title in line
        elif on and line.startswith("|") and not sep(line) and not (i + 1 < len(lines) and sep(lines[i + 1])):
            out.append([c.strip() for c in line.strip().strip("|").split("|")])
    return out

def num(s):
    try:
        return float(s)
    except ValueError:
        return None

# metric -> rev -> [values over rounds]
vals = {}
order = []
def add(metric, rev, v):
    if metric not in vals:
        vals[metric] = {"old": [], "new": []}
        order.append(metric)
    if v is not None:
        vals[metric][rev].append(v)

for r in range(1, rounds + 1):
    for rev in ("old", "new"):
        dup = os.path.join(raw, "%s-r%d-dup.md" % (rev, r))
        shared = os.path.join(raw, "%s-r%d-shared.md" % (rev, r))
        for row in rows(dup, "ping-pong"):
            if row[0] == "8 B" and len(row) >= 5:
                add("8 B ping-pong, %s pair(s): ptsc / raw" % row[1], rev, num(row[4]))
                add("8 B ping-pong, %s pair(s): ptsc us" % row[1], rev, num(row[3]))
        for mode, path in (("dup", dup), ("shared", shared)):
            for row in rows(path, "lane message rate"):
                if len(row) >= 4:
                    add("lane rate %s threads, %s: ptsc / raw" % (row[0], mode), rev, num(row[3]))
                    add("lane rate %s threads, %s: ptsc msg/s" % (row[0], mode), rev, num(row[2]))

def fmt(v):
    return "%.3f" % v if v < 100 else "%.0f" % v

print("Median over %d rounds (min..max). For ptsc / raw: below 1 in the ping-pong and above 1 in the rate is "
      "ptsc's advantage; new / old compares the two medians (ping-pong: above 1 means new is slower; "
      "rate: below 1 means new is slower)." % rounds)
print()
print("| metric | old | new | new / old | old min..max | new min..max |")
print("|---|---:|---:|---:|---|---|")
for m in order:
    o, n = vals[m]["old"], vals[m]["new"]
    if not o or not n:
        print("| %s | %s | %s | - | | |" % (m, fmt(statistics.median(o)) if o else "skipped",
                                          fmt(statistics.median(n)) if n else "skipped"))
        continue
    mo, mn = statistics.median(o), statistics.median(n)
    print("| %s | %s | %s | %.3f | %s..%s | %s..%s |" % (m, fmt(mo), fmt(mn), mn / mo if mo else float("nan"),
                                                        fmt(min(o)), fmt(max(o)), fmt(min(n)), fmt(max(n))))
EOF
}
if [ -n "${CMP_RAW:-}" ]; then
  table
  exit
fi

build old "$OLD" || exit 1
build new "$NEW" || exit 1
cache() { sed -n "s/^$1:[A-Z]*=//p" "$CMP_DIR/build-$2/CMakeCache.txt" | head -1; }
MPIEXEC=$(cache MPIEXEC_EXECUTABLE new)
MPIEXEC=${MPIEXEC:-mpiexec}
LAUNCH=("$MPIEXEC" -n 2)
"$MPIEXEC" --version 2>&1 | grep -qE "Open MPI|OpenRTE" && LAUNCH+=(--oversubscribe)
TARGET=()
[ -n "${CMP_TARGET_MS:-}" ] && TARGET=(--target-ms "$CMP_TARGET_MS")

FAILED=0
# run NAME ROUND MODE ARGS...: one bench_host run of revision NAME.
run() {
  local name=$1 round=$2 mode=$3
  shift 3
  local out=$RAW/$name-r$round-$mode.md side_env=()
  if [ "$name" = old ]; then
    read -r -a side_env <<<"${CMP_OLD_ENV:-}"
  else
    read -r -a side_env <<<"${CMP_NEW_ENV:-}"
  fi
  env ${side_env[@]+"${side_env[@]}"} PTSC_MAX_THREADS="$CMP_THREADS" OMP_NUM_THREADS="$CMP_THREADS" PTSC_COMM="$mode" timeout "$CMP_TIMEOUT" "${LAUNCH[@]}" \
    "$CMP_DIR/build-$name/tests/bench/bench_host" ${TARGET[@]+"${TARGET[@]}"} "$@" >"$out" 2>"${out%.md}.stderr"
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "bench-compare: $name round $round PTSC_COMM=$mode: exit status $rc (see ${out%.md}.stderr)" >&2
    FAILED=1
  fi
}

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
T0=$(date +%s)
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for v in $order; do
    echo "bench-compare: round $r/$ROUNDS: $v" >&2
    run "$v" "$r" dup
    run "$v" "$r" shared --only rate
  done
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)

echo "# bench-compare: $(label old "$OLD" | cut -d' ' -f1) (old) against $(label new "$NEW" | cut -d' ' -f1) (new)"
echo
echo "Command: \`ROUNDS=$ROUNDS${CMP_TARGET_MS:+ CMP_TARGET_MS=$CMP_TARGET_MS}$([ "$CMP_THREADS" = 16 ] || echo " CMP_THREADS=$CMP_THREADS")${CMP_OLD_ENV:+ CMP_OLD_ENV=\"$CMP_OLD_ENV\"}${CMP_NEW_ENV:+ CMP_NEW_ENV=\"$CMP_NEW_ENV\"} bash .ci/bench-compare.sh $*\`, $(date -u '+%Y-%m-%d %H:%M UTC'), $(($(date +%s) - T0)) s of runs."
echo
echo "Machine: $(nproc) cores; $(if [ "$HAVE_GPU" = 1 ]; then nvidia-smi -L | head -1; else echo no GPU; fi); load average $LOAD0 at the start, $LOAD1 at the end; MPI: $("$MPIEXEC" --version 2>&1 | head -1); cmake: ${MPI_ARGS[*]:-} ${EXTRA[*]}."
echo
echo "- old: $(label old "$OLD")${CMP_OLD_ENV:+; run with $CMP_OLD_ENV}"
echo "- new: $(label new "$NEW")${CMP_NEW_ENV:+; run with $CMP_NEW_ENV}"
echo
table
echo
echo "Raw outputs: $RAW"
exit $FAILED
