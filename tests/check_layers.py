#!/usr/bin/env python3
"""Check that the files of src/ depend on each other as a layered DAG.

A file depends on another when it names a ptsc__* function or variable that
the other defines (not static). Inline functions and macros of the internal
header count as what they name: a file that calls ptsc__wait_begin depends
on watchdog.c, which defines ptsc__waits. gpu_none.c is left out (it mirrors
gpu_cuda.c: one of the two is built); interpose.c, interpose_fortran.c and
tools/*.c are leaves (nothing in the library may depend on them; the
Fortran entry points use interpose.c, a leaf on a leaf).

Exits 1, printing each cycle found, when a strongly connected component has
more than one file or the library depends on a leaf; with --graph prints the
layers bottom to top.

    python3 tests/check_layers.py [SRC_DIR] [--graph]
"""
import os
import re
import sys

SKIP = {"gpu_none.c"}
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\S")
SYM = re.compile(r"^ptsc__\w+$")


def strip(text):
    """Text with comments, string and character literals blanked."""
    out = re.sub(
        r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
        lambda m: "\n" * m.group(0).count("\n") + " ",
        text,
        flags=re.S,
    )
    return out.replace("\\\n", " ")


def split_pp(text):
    """(code without preprocessor lines, the preprocessor lines)."""
    code, pp = [], []
    for line in text.split("\n"):
        (pp if line.lstrip().startswith("#") else code).append(line)
    return "\n".join(code), pp


def definitions(code):
    """Names a file defines at file scope and names it keeps static."""
    defined, static = set(), set()
    depth, stmt = 0, []
    for tok in TOKEN.findall(code):
        if depth > 0:
            depth += {"{": 1, "}": -1}.get(tok, 0)
            continue
        if macro_call(stmt) and tok not in ("{", ";", "="):
            stmt = []  # MACRO(...) at file scope with no ';' (X-macro expansions): not a declaration
        if tok == "{" or tok == ";":
            if "extern" not in stmt and "typedef" not in stmt:
                name = declared_name(stmt, tok == "{")
                if name:
                    (static if "static" in stmt else defined).add(name)
            if tok == "{":
                depth = 1
            # A variable's initialiser (= { ... }) ends with its own ';'.
            stmt = [] if tok == ";" or "=" not in stmt else stmt + ["{}"]
            continue
        stmt.append(tok)
    return defined, static


MACRO = re.compile(r"^[A-Z][A-Z0-9_]*$")


def macro_call(stmt):
    """Whether stmt is exactly MACRO( ... ) with its parentheses closed."""
    if len(stmt) < 3 or not MACRO.match(stmt[0]) or stmt[1] != "(" or stmt[-1] != ")":
        return False
    depth = 0
    for i, t in enumerate(stmt[1:], 1):
        depth += {"(": 1, ")": -1}.get(t, 0)
        if depth == 0:
            return i == len(stmt) - 1
    return False


def declared_name(stmt, body):
    """The function (with a body) or variable a file-scope statement defines."""
    if not stmt:
        return None
    if "(" in stmt:
        first = stmt.index("(")
        if "=" in stmt and stmt.index("=") < first:  # int x = f(...);
            return last_ident(stmt[: stmt.index("=")])
        if not body and stmt[-1] == ")":
            return None  # a prototype
        name = stmt[first - 1] if first > 0 else None
        return name if name and IDENT.fullmatch(name) and name != "__attribute__" else None
    if body and "=" not in stmt:
        return None  # struct / enum / union definition
    return last_ident(stmt[: stmt.index("=")] if "=" in stmt else stmt)


def last_ident(toks):
    depth = 0
    for tok in reversed(toks):
        depth += {"]": 1, "[": -1}.get(tok, 0)
        if depth == 0 and IDENT.fullmatch(tok):
            return tok
    return None


def header_expansions(text):
    """Inline functions and macros of a header -> the ptsc__ names they use."""
    code = strip(text)
    refs = {}
    for m in re.finditer(r"^\s*#\s*define\s+(\w+)(.*)$", code, flags=re.M):
        refs[m.group(1)] = set(IDENT.findall(m.group(2)))
    for m in re.finditer(r"static\s+inline\b[^;{]*?\b(\w+)\s*\([^;{]*\)\s*\{", code):
        depth, i = 1, m.end()
        while depth and i < len(code):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        refs[m.group(1)] = set(IDENT.findall(code[m.end() : i]))
    # Close over macros and inlines that use each other.
    changed = True
    while changed:
        changed = False
        for name, used in refs.items():
            more = set().union(*(refs[u] for u in used if u in refs and u != name)) - used
            if more:
                used |= more
                changed = True
    return refs


def load(src):
    files = sorted(f for f in os.listdir(src) if f.endswith(".c") and f not in SKIP)
    tools = os.path.join(src, "tools")
    leaves = {"interpose.c", "interpose_fortran.c"}
    if os.path.isdir(tools):
        for f in sorted(os.listdir(tools)):
            if f.endswith(".c"):
                files.append("tools/" + f)
                leaves.add("tools/" + f)
    expand = {}
    for h in sorted(f for f in os.listdir(src) if f.endswith(".h")):
        with open(os.path.join(src, h)) as fh:
            expand.update(header_expansions(fh.read()))
    defs, uses = {}, {}
    owner = {}
    for f in files:
        with open(os.path.join(src, f)) as fh:
            text = strip(fh.read())
        code, pp = split_pp(text)
        defined, static = definitions(code)
        names = set(IDENT.findall(text))
        for n in list(names):
            names |= expand.get(n, set())
        defs[f] = {n for n in defined if SYM.match(n)}
        uses[f] = {n for n in names if SYM.match(n)} - defined - static
        for n in defs[f]:
            owner.setdefault(n, f)
    graph = {f: {} for f in files}
    for f in files:
        for n in sorted(uses[f]):
            g = owner.get(n)
            if g and g != f:
                graph[f].setdefault(g, []).append(n)
    return graph, leaves


def sccs(graph):
    """Tarjan's algorithm; components in reverse topological order."""
    index, low, onstack, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        onstack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in onstack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                onstack.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def cycle_in(graph, comp):
    """One cycle through the component's first file, as a list of files."""
    members, start = set(comp), comp[0]
    prev, todo = {start: None}, [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return [start] + list(reversed(path))[1:] + [start] if len(path) > 1 else [start, v, start]
            if w in members and w not in prev:
                prev[w] = v
                todo.append(w)
    return comp


def layers(graph):
    level = {}

    def depth(v):
        if v not in level:
            level[v] = 0
            level[v] = 1 + max((depth(w) for w in graph[v]), default=-1)
        return level[v]

    for v in graph:
        depth(v)
    by = {}
    for v, n in level.items():
        by.setdefault(n, []).append(v)
    return [sorted(by[n]) for n in sorted(by)]


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    src = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    graph, leaves = load(src)
    bad = 0
    for comp in sccs(graph):
        if len(comp) > 1:
            bad += 1
            cyc = cycle_in(graph, comp)
            print(f"cycle among {len(comp)} files: {' '.join(comp)}")
            for a, b in zip(cyc, cyc[1:]):
                print(f"  {a} -> {b}: {', '.join(graph[a][b])}")
    for f in sorted(graph):
        if f in leaves:
            continue
        for g in sorted(set(graph[f]) & leaves):
            bad += 1
            print(f"{f} depends on the leaf {g}: {', '.join(graph[f][g])}")
    if bad:
        return 1
    if "--graph" in argv:
        lib = {f: deps for f, deps in graph.items() if f not in leaves}
        for n, files in enumerate(layers(lib)):
            print(f"{n}: {' '.join(files)}")
        print(f"leaves: {' '.join(sorted(leaves & set(graph)))}")
        for f in sorted(graph):
            for g in sorted(graph[f]):
                print(f"  {f} -> {g}: {', '.join(graph[f][g])}")
    print(f"src/: {len(graph)} files, no cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
