#!/usr/bin/env python3
"""Check the mutation table (.ci/mutations.txt) against the tree.

Every row's original text must occur exactly once in its file, and its
replacement must differ from it: otherwise .ci/mutate.sh, which runs on
demand, would fail on that row long after a refactor moved the code. The
tests named by each row's regex are checked there, not here.

    python3 tests/check_mutations.py [ROOT]
"""
import os
import sys


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    table = os.path.join(root, ".ci", "mutations.txt")
    bad, rows = 0, 0
    for n, line in enumerate(open(table), 1):
        if line.startswith("#") or not line.strip():
            continue
        parts = [p.strip() for p in line.rstrip("\n").split(" | ")]
        if len(parts) != 5:
            print("%s:%d: %d fields, not 5 (name | file | original | replacement | regex)" % (table, n, len(parts)))
            bad += 1
            continue
        rows += 1
        name, path, orig, repl = parts[:4]
        try:
            text = open(os.path.join(root, path)).read()
        except OSError as e:
            print("%s:%d: %s: %s" % (table, n, name, e))
            bad += 1
            continue
        count = text.count(orig)
        if count != 1:
            print("%s:%d: %s: the original text occurs %d times in %s, not once" % (table, n, name, count, path))
            bad += 1
        if orig == repl:
            print("%s:%d: %s: the replacement equals the original" % (table, n, name))
            bad += 1
    print("mutation table: %d rows, %d problems" % (rows, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
