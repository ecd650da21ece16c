#!/usr/bin/env bash
# Run a command with a time limit; if it is still running then, print the
# host stacks of every process whose command line matches PATTERN (gdb, or
# cuda-gdb where there is no gdb, as on the GPU machine), then kill it.
#
#   bash .ci/gpu-stacks.sh LIMIT_S PATTERN CMD...
#   e.g. bash .ci/gpu-stacks.sh 60 examples/jacobi \
#          mpiexec -n 2 build/examples/jacobi --device --exchange enqueue -t 3
#
# Exit status: the command's, or 124 when it hung.
set -u
lim=$1 pat=$2
shift 2
"$@" &
pid=$!
for _ in $(seq 1 "$lim"); do
  sleep 1
  kill -0 "$pid" 2>/dev/null || break
done
if ! kill -0 "$pid" 2>/dev/null; then
  wait "$pid"
  exit $?
fi
dbg=$(command -v gdb || command -v cuda-gdb || true)
echo "gpu-stacks: still running after ${lim}s; stacks (${dbg:-no debugger found}):"
# The matching processes, not this script (nor its subshells).
others() {
  for q in $(pgrep -f "$pat"); do
    tr '\0' ' ' </proc/"$q"/cmdline 2>/dev/null | grep -q "gpu-stacks.sh" || echo "$q"
  done
}
for p in $(others); do
  case "$(cat /proc/"$p"/comm 2>/dev/null)" in mpirun | mpiexec | orterun | hydra_pmi_proxy) continue ;; esac
  echo "---- pid $p ($(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | cut -c1-120))"
  [ -n "$dbg" ] && timeout 60 "$dbg" -batch -p "$p" -ex "thread apply all bt 16" 2>&1 |
    grep -E "^Thread|^#" | grep -v " in ?? ()"
done
kill -9 "$pid" $(others) 2>/dev/null
wait "$pid" 2>/dev/null
exit 124
