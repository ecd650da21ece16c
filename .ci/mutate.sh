#!/usr/bin/env bash
# Mutation check: does the test suite catch deliberate bugs?
#
#   bash .ci/mutate.sh [--worktree] [--no-baseline] [--only 'NAME|NAME'] [TABLE]
#
# Copies the repository to a scratch directory ($MUTATE_DIR, default
# /tmp/ptsc-mutate): the files of HEAD (git archive), or with --worktree the
# tracked and untracked-but-not-ignored files as they are in the working
# tree. Builds it once (-DPTSC_WERROR=OFF), runs the listed tests unmutated
# (the baseline: they must pass, or a failure would prove nothing), then for
# each row of the table (default .ci/mutations.txt):
#   1. replaces the row's original text, which must occur exactly once in
#      the file, with the replacement;
#   2. rebuilds the library and only the test programs the row's tests run;
#   3. runs those tests (ctest -R REGEX);
#   4. restores the file.
# A mutation is CAUGHT when some listed test fails, MISSED when they all
# pass. Table rows: `name | file | original text | replacement | ctest regex`,
# fields split at " | " (so the code in a row must not contain " | ");
# blank lines and lines starting with # are skipped.
#
# Exit status: 0 when every mutation was caught; 1 when one was missed, its
# original text is not found exactly once, its regex names no test, the
# mutant or the baseline does not build, or the baseline fails. Summary table
# last (markdown). JOBS (default 2) sets the build parallelism. Runs on
# demand, not in CI: about 10 minutes on two cores.
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TABLE=$ROOT/.ci/mutations.txt
WORK=${MUTATE_DIR:-/tmp/ptsc-mutate}
JOBS=${JOBS:-2}
MODE=head
BASELINE=1
ONLY=
while [ $# -gt 0 ]; do
  case $1 in
  --worktree) MODE=worktree ;;
  --no-baseline) BASELINE=0 ;;
  --only) ONLY=$2; shift ;;
  -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
  *) TABLE=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") ;;
  esac
  shift
done
[ -f "$TABLE" ] || { echo "mutate: no table $TABLE" >&2; exit 2; }

SRC=$WORK/src
BLD=$WORK/build
LOG=$WORK/logs
T0=$(date +%s)

# --- the copy ---------------------------------------------------------------
rm -rf "$SRC" "$LOG"
mkdir -p "$SRC" "$LOG"
if [ "$MODE" = head ]; then
  git -C "$ROOT" archive HEAD | tar -xm -C "$SRC" || exit 2
  REV=$(git -C "$ROOT" rev-parse --short HEAD)
else
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 -I{} sh -c '[ -e "$1" ] && printf "%s\0" "$1"' _ {} |
    tar --null -T - -cf -) | tar -x -C "$SRC" || exit 2
  REV="$(git -C "$ROOT" rev-parse --short HEAD) + working tree"
fi
echo "mutate: $REV copied to $SRC"

# --- the table --------------------------------------------------------------
NAMES=() FILES=() ORIGS=() REPLS=() REGEXES=()
BAD_TABLE=0
lineno=0
while IFS= read -r line || [ -n "$line" ]; do
  lineno=$((lineno + 1))
  case $line in '' | '#'*) continue ;; esac
  fields=$(python3 -c 'import sys; f=[x.strip() for x in sys.argv[1].split(" | ")]; print(len(f)); [print(x) for x in f]' "$line")
  n=$(echo "$fields" | head -1)
  if [ "$n" != 5 ]; then
    echo "mutate: $TABLE:$lineno: $n fields, expected 5" >&2
    BAD_TABLE=1
    continue
  fi
  mapfile -t f < <(echo "$fields" | tail -n +2)
  [ -n "$ONLY" ] && [[ ! ${f[0]} =~ ^($ONLY)$ ]] && continue
  NAMES+=("${f[0]}") FILES+=("${f[1]}") ORIGS+=("${f[2]}") REPLS+=("${f[3]}") REGEXES+=("${f[4]}")
done <"$TABLE"
[ ${#NAMES[@]} -gt 0 ] || { echo "mutate: no mutations selected" >&2; exit 2; }

# --- build once -------------------------------------------------------------
echo "mutate: configuring and building $BLD (-j$JOBS)"
if ! cmake -S "$SRC" -B "$BLD" -DPTSC_WERROR=OFF -DPTSC_BUILD_EXAMPLES=OFF -DPTSC_TEST_TIMEOUT=60 \
  >"$LOG/configure.log" 2>&1; then
  echo "mutate: configure failed, see $LOG/configure.log" >&2
  exit 1
fi

# targets REGEX: the programs the tests matching REGEX run (the executable
# or -DPROGRAM= of their commands that lies in the build tree; for a unit
# test whose program is not built yet, from its name). A test run under
# ptsc-run (a script, not a target) needs libptsc-mpi, which it preloads.
targets() {
  ctest --test-dir "$BLD" -R "$1" --show-only=json-v1 2>/dev/null | python3 -c '
import json, os, sys
bld = sys.argv[1]
seen = []
for t in json.load(sys.stdin).get("tests", []):
    # A program not built yet has no command: unit_X runs test_X.
    cmd = t.get("command") or [bld + "/tests/test_" + t["name"][len("unit_"):]]
    for a in cmd:
        a = a.split("=", 1)[1] if a.startswith("-DPROGRAM=") else a
        name = os.path.basename(a)
        name = "ptsc-mpi" if name == "ptsc-run" else name
        if a.startswith(bld + "/") and name not in seen:
            seen.append(name)
print(" ".join(seen))' "$BLD"
}
ntests() { ctest --test-dir "$BLD" -N -R "$1" 2>/dev/null | sed -n 's/^Total Tests: *//p'; }
build() { # LOGFILE TARGET...
  local log=$1
  shift
  cmake --build "$BLD" -j"$JOBS" --target ptsc "$@" >"$log" 2>&1
}

ALL_RE=$(printf '%s|' "${REGEXES[@]}")
ALL_RE=${ALL_RE%|}
ALL_TARGETS=$(targets "$ALL_RE")
if ! build "$LOG/build.log" $ALL_TARGETS; then
  echo "mutate: the unmutated tree does not build, see $LOG/build.log" >&2
  exit 1
fi

# --- baseline ---------------------------------------------------------------
if [ "$BASELINE" = 1 ]; then
  echo "mutate: baseline: $(ntests "$ALL_RE") tests unmutated"
  if ! ctest --test-dir "$BLD" -R "$ALL_RE" >"$LOG/baseline.log" 2>&1; then
    grep -E '\(Failed|\(Timeout|Not Run' "$LOG/baseline.log" >&2
    echo "mutate: the baseline fails, see $LOG/baseline.log: fix that first" >&2
    exit 1
  fi
fi

# --- mutations --------------------------------------------------------------
ROWS=()
STATUS=0
for i in "${!NAMES[@]}"; do
  name=${NAMES[$i]} file=${FILES[$i]} re=${REGEXES[$i]}
  t=$(date +%s)
  result= detail=
  # Apply: the original text must occur exactly once.
  cp "$SRC/$file" "$WORK/saved" 2>/dev/null
  applied=$(python3 - "$SRC/$file" "${ORIGS[$i]}" "${REPLS[$i]}" <<'EOF'
import sys
path, orig, repl = sys.argv[1:4]
try:
    text = open(path).read()
except OSError:
    print("file not found"); sys.exit()
n = text.count(orig)
if n != 1:
    print("original text found %d times" % n); sys.exit()
open(path, "w").write(text.replace(orig, repl))
print("ok")
EOF
  )
  count=$(ntests "$re")
  if [ "$applied" != ok ]; then
    result=ERROR detail="$file: $applied"
  elif [ -z "$count" ] || [ "$count" = 0 ]; then
    result=ERROR detail="no test matches $re"
  else
    tg=$(targets "$re")
    if ! build "$LOG/$name.build.log" $tg; then
      result=ERROR detail="the mutant does not build ($LOG/$name.build.log)"
    else
      ctest --test-dir "$BLD" -R "$re" >"$LOG/$name.ctest.log" 2>&1
      failed=$(grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(\*\*\*|Failed|Timeout|Exception)' "$LOG/$name.ctest.log" |
        sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+).*/\1/' | tr '\n' ' ')
      nfail=$(echo "$failed" | wc -w)
      if [ "$nfail" -gt 0 ]; then
        result=CAUGHT detail="$nfail of $count failed: ${failed% }"
      else
        result=MISSED detail="all $count passed"
      fi
    fi
  fi
  # Restore, and rebuild what the mutant changed at the next row's build.
  [ -f "$WORK/saved" ] && cp "$WORK/saved" "$SRC/$file" && touch "$SRC/$file"
  rm -f "$WORK/saved"
  [ "$result" = CAUGHT ] || STATUS=1
  secs=$(($(date +%s) - t))
  echo "mutate: $name: $result ($detail) ${secs}s"
  ROWS+=("| $name | \`$file\` | $result | $detail | ${secs}s |")
done

ncaught=0
for r in "${ROWS[@]}"; do case $r in *" CAUGHT "*) ncaught=$((ncaught + 1)) ;; esac; done
[ "$BAD_TABLE" = 1 ] && STATUS=1
echo
echo "Mutation check of $REV, $(date -u +%Y-%m-%d): $ncaught of ${#ROWS[@]} caught, $(($(date +%s) - T0)) s"
echo
echo "| mutation | file | result | tests | time |"
echo "|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
exit $STATUS
