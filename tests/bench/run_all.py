#!/usr/bin/env python3
"""Run every ptsc benchmark of a build, save their markdown, write one CSV
per table, a combined report and PNG plots of the key ratios.

    tests/bench/run_all.py BUILD_DIR OUT_DIR [--machine NAME] [--repeats N]
                           [--quick] [--only bench_host,bench_scope,...]
                           [--args PROGRAM=ARGS ...] [--note TEXT]
    tests/bench/run_all.py --plots-only OUT_DIR/<machine>-<date>-data

OUT_DIR receives
    <machine>-<date>.md               the report (the programs' tables, the
                                      merged lane-rate table, the plots)
    img/<machine>-<date>-*.png        the plots (about 800 x 500)
    <machine>-<date>-data/raw/*.md    each run's output as printed
    <machine>-<date>-data/csv/*.csv   one file per table (tables.json lists them)

The programs warm up themselves and report medians of interleaved rounds;
--repeats N runs each program N times and reports the cell-wise median of
the numeric cells (the raw outputs of every repeat are kept). Rows a program
prints as "skipped" (no GPU, too few thread slots) are kept in the tables
and left out of the plots.

Needs python3 only; the plots need matplotlib. Without it in this
interpreter the driver tries /usr/bin/python3 for the plots, and otherwise
says so and writes the report without plots.
"""
import argparse
import csv
import datetime
import json
import os
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys

# (job name, program, needs mpiexec -n 2, environment, arguments)
JOBS = [
    ("bench_host-dup", "bench_host", True,
     {"PTSC_MAX_THREADS": "16", "OMP_NUM_THREADS": "16", "PTSC_COMM": "dup"}, []),
    ("bench_host-shared", "bench_host", True,
     {"PTSC_MAX_THREADS": "16", "OMP_NUM_THREADS": "16", "PTSC_COMM": "shared"}, ["--only", "rate"]),
    ("bench_scope", "bench_scope", True,
     {"PTSC_MAX_THREADS": "16", "OMP_NUM_THREADS": "16", "PTSC_STATS": "1"}, []),
    ("bench_staging", "bench_staging", True, {"PTSC_MAX_THREADS": "1", "OMP_NUM_THREADS": "1"}, []),
    ("bench_classify", "bench_classify", False, {"PTSC_MAX_THREADS": "1", "OMP_NUM_THREADS": "1"}, []),
    ("bench_sync-per-thread", "bench_sync", False,
     {"PTSC_MAX_THREADS": "1", "OMP_NUM_THREADS": "1", "PTSC_STREAM": "per-thread"}, []),
    ("bench_sync-owned", "bench_sync", False,
     {"PTSC_MAX_THREADS": "1", "OMP_NUM_THREADS": "1", "PTSC_STREAM": "owned"}, []),
    ("bench_interpose", "bench_interpose", True, {}, []),
]
# bench_overlap: one run per path and progress mode (both fixed at ptsc_init).
# direct prints skipped rows where MPI is not CUDA-aware.
OVERLAP_PATHS = [
    ("staged", {"PTSC_STAGING": "always"}),
    ("framed", {"PTSC_STAGING": "always", "PTSC_STAGING_CHUNK": "256k"}),
    ("direct", {"PTSC_STAGING": "never", "PTSC_DIRECT_MIN": "0"}),
]
for _path, _env in OVERLAP_PATHS:
    for _progress in ("thread", "caller"):
        JOBS.append(("bench_overlap-%s-%s" % (_path, _progress), "bench_overlap", True,
                     dict({"PTSC_MAX_THREADS": "1", "OMP_NUM_THREADS": "1", "PTSC_PROGRESS": _progress}, **_env), []))
TIMEOUT_S = 1200


def say(msg):
    print("run_all: " + msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Markdown tables
# ---------------------------------------------------------------------------

def cells(line):
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


def parse_tables(text):
    """Tables of a program's markdown: [{"title", "header", "rows"}]; the
    title is the last "## " heading above the table."""
    tables, title, lines, i = [], "", text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            title = line.lstrip("#").strip()
        if (line.startswith("|") and i + 1 < len(lines)
                and re.match(r"^\|[\s:|-]+\|\s*$", lines[i + 1])):
            header = cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                row = cells(lines[i])
                rows.append(row + [""] * (len(header) - len(row)))
                i += 1
            tables.append({"title": title, "header": header, "rows": rows})
            continue
        i += 1
    return tables


def number(s):
    """A cell as a float, or None ("skipped", "-", "n/a", "1.2..3.4")."""
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def median_tables(runs):
    """Cell-wise median of the numeric cells over repeats whose tables have
    the same shape; otherwise the first run's tables."""
    first = runs[0]
    if len(runs) == 1 or any(len(r) != len(first) for r in runs):
        return first
    out = []
    for k, t in enumerate(first):
        same = all(len(r[k]["rows"]) == len(t["rows"]) and r[k]["header"] == t["header"] for r in runs)
        if not same:
            out.append(t)
            continue
        rows = []
        for j, row in enumerate(t["rows"]):
            new = []
            for c, cell in enumerate(row):
                vals = [number(r[k]["rows"][j][c]) if c < len(r[k]["rows"][j]) else None for r in runs]
                if c == 0 or any(v is None for v in vals):
                    new.append(cell)
                else:
                    decimals = len(cell.split(".")[1]) if "." in cell else 0
                    new.append("%.*f" % (decimals, statistics.median(vals)))
            rows.append(new)
        out.append({"title": t["title"], "header": t["header"], "rows": rows})
    return out


def table_md(t):
    out = ["| " + " | ".join(t["header"]) + " |",
           "|" + "|".join("---:" if i else "---" for i in range(len(t["header"]))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in t["rows"]]
    return "\n".join(out)


def write_csv(path, t):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(t["header"])
        w.writerows(t["rows"])


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return {"header": rows[0], "rows": rows[1:]} if rows else {"header": [], "rows": []}


SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def size_text(b):
    for unit in ("GiB", "MiB", "KiB"):
        if b >= SIZE_UNITS[unit] and b % SIZE_UNITS[unit] == 0:
            return "%d %s" % (b // SIZE_UNITS[unit], unit)
    return "%d B" % b


def size_bytes(s):
    m = re.match(r"^\s*(\d+)\s*(B|KiB|MiB|GiB)\s*$", s or "")
    return int(m.group(1)) * SIZE_UNITS[m.group(2)] if m else None


# ---------------------------------------------------------------------------
# The merged lane-rate table (one bench_host run per PTSC_COMM mode)
# ---------------------------------------------------------------------------

def merge_rate(by_job):
    def rate_table(job):
        for t in by_job.get(job, []):
            if "message rate" in t["title"]:
                return t
        return None

    dup, shared = rate_table("bench_host-dup"), rate_table("bench_host-shared")
    if not dup or not shared:
        return None
    header = ["threads", "raw msg/s (dup run)", "dup msg/s", "dup / raw", "raw msg/s (shared run)",
              "shared msg/s", "shared / raw", "shared / dup"]
    srows = {r[0]: r for r in shared["rows"]}
    rows = []
    for r in dup["rows"]:
        s = srows.get(r[0])
        if s is None or number(r[1]) is None or number(s[1]) is None:
            rows.append([r[0], "skipped", "", "", "", "", "", ""])
            continue
        ratio = "%.3f" % (number(s[2]) / number(r[2])) if number(r[2]) else "-"
        rows.append([r[0], r[1], r[2], r[3], s[1], s[2], s[3], ratio])
    return {"title": "bench_host: lane message rate, PTSC_COMM=dup and shared (merged)", "header": header,
            "rows": rows}


def merge_overlap(by_job):
    """The bench_overlap runs (one per path and progress mode) in one table."""
    header, rows = None, []
    for job, tables in by_job.items():
        if not job.startswith("bench_overlap-"):
            continue
        for t in tables:
            if "bench_overlap" in t["title"]:
                header = header or t["header"]
                if t["header"] == header:
                    rows += t["rows"]
    if not header:
        return None
    return {"title": "bench_overlap: wait after the computation, every path and progress mode (merged)",
            "header": header, "rows": rows}


# ---------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------

def find_table(index, job, title_part):
    for e in index:
        if e["job"] == job and title_part in e["title"]:
            return e
    return None


def make_plots(data_dir, img_dir, stem):
    """Draws the plots from the CSV files; returns [(file, caption)]."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    with open(os.path.join(data_dir, "tables.json")) as f:
        index = json.load(f)
    os.makedirs(img_dir, exist_ok=True)
    made = []

    def load(e):
        return read_csv(os.path.join(data_dir, e["csv"]))

    def save(fig, name, caption):
        path = os.path.join(img_dir, "%s-%s.png" % (stem, name))
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        try:  # a palette image is a third of the size
            from PIL import Image
            Image.open(path).convert("RGB").quantize(colors=64).save(path, optimize=True)
        except Exception:  # noqa: BLE001 (Pillow is optional)
            pass
        made.append((os.path.basename(path), caption))

    def col(t, name):
        return t["header"].index(name) if name in t["header"] else None

    def size_axis(ax, xs):
        ax.set_xscale("log", base=2)
        xs = sorted(set(xs))
        ax.set_xticks(xs)
        ax.set_xticklabels([size_text(v) for v in xs], rotation=45, ha="right")
        ax.minorticks_off()
        ax.set_xlabel("message size")

    def ratio_axis(ax):
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        steps = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100) if hi / lo > 8 else \
            (0.25, 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 4)
        ticks = [v for v in steps if lo <= v <= hi]
        ax.set_yticks(ticks)
        ax.set_yticklabels(["%g" % v for v in ticks])
        ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())

    def log_y(ax):
        # Log y with plain labels at 1, 2, 5 x 10^k, so small values can be read.
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1, 2, 5)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: "%g" % v))
        ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())

    def rng(s):
        m = re.match(r"^([-\d.]+)\.\.([-\d.]+)$", s or "")
        return (float(m.group(1)), float(m.group(2))) if m else None

    # Host ping-pong: ptsc / raw against size, per pair count, per-round range as error bars.
    e = find_table(index, "bench_host-dup", "ping-pong")
    if e:
        t = load(e)
        ci, cr, cs = col(t, "ptsc / raw"), col(t, "ptsc / raw min..max"), col(t, "pairs")
        fig, ax = plt.subplots(figsize=(8, 5))
        xs = []
        for pairs in sorted({r[cs] for r in t["rows"]}, key=lambda p: int(p) if p.isdigit() else 0):
            pts = [(size_bytes(r[0]), number(r[ci]), rng(r[cr]) if cr is not None else None)
                   for r in t["rows"] if r[cs] == pairs and number(r[ci]) is not None]
            if not pts:
                continue
            x = [p[0] for p in pts]
            y = [p[1] for p in pts]
            xs += x
            err = [[max(0, p[1] - p[2][0]) if p[2] else 0 for p in pts],
                   [max(0, p[2][1] - p[1]) if p[2] else 0 for p in pts]]
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label="%s pair%s" % (pairs, "" if pairs == "1" else "s"))
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        size_axis(ax, xs)
        ratio_axis(ax)
        ax.set_ylabel("ptsc / raw MPI, half round trip (>1: ptsc slower)")
        ax.set_title("Host ping-pong: ptsc_send/recv vs MPI_Send/Recv (median, bars: per-round range)")
        ax.legend()
        save(fig, "host-pingpong-ratio", "Host ping-pong, ptsc / raw against size, 1 and 8 thread pairs")

    # Lane message rate: msg/s and ratio to raw against threads, dup and shared.
    e = find_table(index, "merged", "lane message rate")
    if e:
        t = load(e)
        rows = [r for r in t["rows"] if number(r[1]) is not None]
        if rows:
            x = [int(r[0]) for r in rows]
            fig, (a1, a2) = plt.subplots(1, 2, figsize=(8, 5))
            a1.plot(x, [number(r[1]) for r in rows], "o-", label="raw MPI, one comm + tags (dup run)")
            a1.plot(x, [number(r[4]) for r in rows], "o:", color="C0", alpha=0.6, label="raw MPI (shared run)")
            a1.plot(x, [number(r[2]) for r in rows], "s-", label="ptsc, PTSC_COMM=dup")
            a1.plot(x, [number(r[5]) for r in rows], "^-", label="ptsc, PTSC_COMM=shared")
            a1.set_yscale("log")
            a1.set_ylabel("8 B messages/s, all threads")
            a2.plot(x, [number(r[3]) for r in rows], "s-", color="C1", label="dup / raw")
            a2.plot(x, [number(r[6]) for r in rows], "^-", color="C2", label="shared / raw")
            a2.axhline(1.0, color="grey", lw=0.8, ls="--")
            a2.set_ylabel("ptsc / raw (<1: ptsc slower)")
            for a in (a1, a2):
                a.set_xscale("log", base=2)
                a.set_xticks(x)
                a.set_xticklabels([str(v) for v in x])
                a.set_xlabel("threads per rank")
                a.legend(fontsize=8)
            ratio_axis(a2)
            fig.suptitle("Lane message rate: PTSC_COMM=dup vs shared vs raw MPI")
            save(fig, "lane-rate", "Lane message rate against threads per rank, dup / shared / raw")

    # bench_staging: GB/s against size, one line per GB/s column.
    e = find_table(index, "bench_staging", "ping-pong")
    if e:
        t = load(e)
        fig, ax = plt.subplots(figsize=(11, 5.5))
        drawn, xs = 0, []
        colors = list(plt.get_cmap("tab10").colors) + ["black", "gold"]
        for c, name in enumerate(t["header"]):
            if c == 0 or " / " in name:  # ratio columns
                continue
            pts = [(size_bytes(r[0]), number(r[c])) for r in t["rows"] if number(r[c]) is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "osv^D<>ph*Xd"[c % 12] + "-",
                        color=colors[(c - 1) % 12], label=name)
                xs += [p[0] for p in pts]
                drawn += 1
        if drawn:
            size_axis(ax, xs)
            # Log y: the sizes span 4 KiB to 64 MiB and the rates three
            # orders of magnitude; on a linear axis all below 16 MiB is flat.
            log_y(ax)
            ax.grid(True, which="major", alpha=0.3)
            ax.set_ylabel("GB/s (2 x size / round trip)")
            ax.set_title("bench_staging: ping-pong bandwidth per transfer path")
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
            save(fig, "staging-gbps", "bench_staging GB/s against size, per column")
        else:
            plt.close(fig)

    # bench_scope: msg/s against threads, one line per scope.
    e = find_table(index, "bench_scope", "sync scope before")
    if e:
        t = load(e)
        rows = [r for r in t["rows"] if number(r[1]) is not None]
        if rows:
            fig, ax = plt.subplots(figsize=(8, 5))
            x = [int(r[0]) for r in rows]
            for c, name in enumerate(t["header"]):
                # The no-communication ceiling too: the y axis is log, so
                # it no longer flattens the other lines.
                if name.endswith("msg/s") and "/" not in name.replace("msg/s", ""):
                    style = {"color": "grey", "ls": "--"} if name.startswith("no communication") else {}
                    ax.plot(x, [number(r[c]) for r in rows], marker="o", label=name.replace(" msg/s", ""), **style)
            ax.set_xscale("log", base=2)
            log_y(ax)
            ax.grid(True, which="major", alpha=0.3)
            ax.set_xticks(x)
            ax.set_xticklabels([str(v) for v in x])
            ax.set_xlabel("threads per rank")
            ax.set_ylabel("messages/s, all threads")
            ax.set_title("bench_scope: message rate per sync scope")
            ax.legend(title="scope", fontsize=8)
            save(fig, "scope-rate", "bench_scope messages/s against threads, per scope")
    return made


def plots_with_fallback(data_dir, img_dir, stem):
    """Plots here, or through /usr/bin/python3 when this interpreter lacks
    matplotlib; [] with a message when neither has it."""
    try:
        import matplotlib  # noqa: F401
        return make_plots(data_dir, img_dir, stem)
    except ImportError:
        pass
    other = "/usr/bin/python3"
    if os.path.realpath(other) != os.path.realpath(sys.executable) and os.access(other, os.X_OK) and \
            subprocess.run([other, "-c", "import matplotlib"], capture_output=True).returncode == 0:
        say("matplotlib is missing in %s; plotting with %s" % (sys.executable, other))
        r = subprocess.run([other, os.path.abspath(__file__), "--plots-only", data_dir, "--img-dir", img_dir],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return json.loads(r.stdout or "[]")
        say("plotting failed: " + r.stderr.strip()[-500:])
        return []
    say("no plots: matplotlib is not installed (apt-get install python3-matplotlib, or pip install matplotlib)")
    return []


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------

def first_line(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        out = (r.stdout + r.stderr).strip().splitlines()
        return out[0].strip() if out else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def cmake_cache(build):
    vals = {}
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            for line in f:
                m = re.match(r"^([A-Za-z_0-9]+):[A-Z]+=(.*)$", line.strip())
                if m:
                    vals[m.group(1)] = m.group(2)
    except OSError:
        pass
    return vals


def machine_facts(mpiexec):
    facts = ["%d cores (os.cpu_count)" % (os.cpu_count() or 0)]
    try:
        with open("/etc/os-release") as f:
            m = re.search(r'^PRETTY_NAME="?([^"\n]*)', f.read(), re.M)
            if m:
                facts.append(m.group(1))
    except OSError:
        pass
    gpus = ""
    if shutil.which("nvidia-smi"):
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
        gpus = "; ".join(l.strip() for l in r.stdout.splitlines() if l.strip())
    facts.append(gpus or "no GPU")
    try:
        facts.append("load average at the start %.1f / %.1f / %.1f" % os.getloadavg())
    except OSError:
        pass
    facts.append("mpiexec %s: %s" % (mpiexec, first_line([mpiexec, "--version"]) or "?"))
    mv = first_line(["mpichversion"]) if shutil.which("mpichversion") else ""
    if mv:
        facts.append("installed MPICH: " + re.sub(r"\s+", " ", mv))
    if shutil.which("ompi_info"):
        r = subprocess.run(["ompi_info", "--version"], capture_output=True, text=True)
        v = r.stdout.strip().splitlines()
        if v:
            facts.append("installed " + v[0].strip())
    return facts, bool(gpus)


def run_job(build, job, mpiexec, quick, extra_env, raw_dir, rep, more_args, launch_args=()):
    name, prog, mpi, env_add, args = job
    args = args + more_args.get(prog, [])
    exe = os.path.join(build, "tests", "bench", prog)
    if not os.access(exe, os.X_OK):
        return None, "%s not built (cmake --build %s --target %s)" % (exe, build, prog)
    cmd = [exe] + args + (["--quick"] if quick else [])
    if mpi:
        launch = [mpiexec, "-n", "2"]
        if re.search(r"Open MPI|OpenRTE", first_line([mpiexec, "--version"])):
            launch.append("--oversubscribe")
        cmd = launch + list(launch_args) + cmd
    env = dict(os.environ)
    env.update(extra_env)
    env.update(env_add)
    shown = " ".join(["%s=%s" % kv for kv in env_add.items()] + [os.path.relpath(c) if c == exe else c for c in cmd])
    say("%s (repeat %d): %s" % (name, rep + 1, shown))
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s: %s" % (TIMEOUT_S, shown)
    with open(os.path.join(raw_dir, "%s.run%d.md" % (name, rep + 1)), "w") as f:
        f.write(r.stdout)
    if r.stderr.strip():
        with open(os.path.join(raw_dir, "%s.run%d.stderr" % (name, rep + 1)), "w") as f:
            f.write(r.stderr)
    if r.returncode != 0:
        return None, "exit status %d: %s\n\n    %s" % (r.returncode, shown, r.stderr.strip()[-800:].replace("\n", "\n    "))
    return (shown, r.stdout), None


def demote(text):
    return re.sub(r"^(#+) ", lambda m: "#" + m.group(1) + " ", text, flags=re.M)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", help="build directory (holds tests/bench/bench_*)")
    ap.add_argument("out", nargs="?", help="output directory (docs/perf for results to keep)")
    ap.add_argument("--machine", default=re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname()),
                    help="machine name in the file names (default: the host name)")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--repeats", type=int, default=1, help="runs of each program (cell-wise median)")
    ap.add_argument("--quick", action="store_true", help="pass --quick to every program (a smoke run)")
    ap.add_argument("--only", default="", help="comma list of programs (bench_host,bench_scope,...)")
    ap.add_argument("--mpiexec", default="", help="mpiexec to use (default: the build's MPIEXEC_EXECUTABLE)")
    ap.add_argument("--launch-args", default="", metavar="ARGS",
                    help="more mpiexec arguments for the 2-rank programs, e.g. '--bind-to none' (Open MPI binds "
                    "each of 2 ranks to one core by default, which the progress agent then shares)")
    ap.add_argument("--args", action="append", default=[], metavar="PROGRAM=ARGS",
                    help='extra arguments of one program, e.g. --args "bench_scope=--reps 200" (repeatable)')
    ap.add_argument("--note", default="", help="a paragraph for the top of the report")
    ap.add_argument("--plots-only", metavar="DATA_DIR", help="only draw the plots from DATA_DIR's CSV files")
    ap.add_argument("--img-dir", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.plots_only:
        data = a.plots_only.rstrip("/")
        stem = os.path.basename(data)[:-len("-data")] if data.endswith("-data") else os.path.basename(data)
        img = a.img_dir or os.path.join(os.path.dirname(data), "img")
        if a.img_dir:  # called by plots_with_fallback: answer in JSON
            print(json.dumps(make_plots(data, img, stem)))
        else:
            for f, cap in plots_with_fallback(data, img, stem):
                print(os.path.join(img, f) + ": " + cap)
        return 0
    if not a.build or not a.out:
        ap.error("BUILD_DIR and OUT_DIR are required")
    if a.repeats < 1:
        ap.error("--repeats must be at least 1")

    more_args = {}
    for spec in a.args:
        prog, sep, rest = spec.partition("=")
        if not sep or prog not in {j[1] for j in JOBS}:
            ap.error("--args wants PROGRAM=ARGS with one of %s" % ", ".join(sorted({j[1] for j in JOBS})))
        more_args.setdefault(prog, []).extend(rest.split())
    build = os.path.abspath(a.build)
    cache = cmake_cache(build)
    mpiexec = a.mpiexec or cache.get("MPIEXEC_EXECUTABLE") or shutil.which("mpiexec") or "mpiexec"
    only = [s for s in a.only.split(",") if s]
    jobs = [j for j in JOBS if not only or j[1] in only]
    stem = "%s-%s" % (a.machine, a.date)
    data = os.path.join(a.out, stem + "-data")
    raw_dir, csv_dir, img_dir = os.path.join(data, "raw"), os.path.join(data, "csv"), os.path.join(a.out, "img")
    for d in (raw_dir, csv_dir):
        os.makedirs(d, exist_ok=True)
    extra_env = {}
    if os.geteuid() == 0:  # Open MPI refuses root otherwise
        extra_env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    facts, have_gpu = machine_facts(mpiexec)

    results, errors, by_job, index = [], [], {}, []
    for job in jobs:
        outs, shown = [], ""
        for rep in range(a.repeats):
            res, err = run_job(build, job, mpiexec, a.quick, extra_env, raw_dir, rep, more_args, shlex.split(a.launch_args))
            if err:
                say("%s: %s" % (job[0], err.splitlines()[0]))
                errors.append((job[0], err))
                break
            shown = res[0]
            outs.append(res[1])
        if not outs:
            continue
        tables = median_tables([parse_tables(o) for o in outs])
        by_job[job[0]] = tables
        results.append((job[0], shown, outs[0], tables, len(outs)))
        for k, t in enumerate(tables):
            fname = "%s-%d.csv" % (job[0], k + 1)
            write_csv(os.path.join(csv_dir, fname), t)
            index.append({"job": job[0], "title": t["title"], "csv": "csv/" + fname})
    merged = merge_rate(by_job)
    if merged:
        write_csv(os.path.join(csv_dir, "bench_host-rate-merged.csv"), merged)
        index.append({"job": "merged", "title": merged["title"], "csv": "csv/bench_host-rate-merged.csv"})
    overlap = merge_overlap(by_job)
    if overlap:
        write_csv(os.path.join(csv_dir, "bench_overlap-merged.csv"), overlap)
        index.append({"job": "merged", "title": overlap["title"], "csv": "csv/bench_overlap-merged.csv"})
    with open(os.path.join(data, "tables.json"), "w") as f:
        json.dump(index, f, indent=1)

    plots = plots_with_fallback(data, img_dir, stem)

    rel = lambda p: os.path.relpath(p, a.out)
    md = ["# Benchmarks: %s, %s" % (a.machine, a.date), ""]
    md.append("Machine: " + "; ".join(facts) + ".")
    md.append("")
    md.append("Build: `%s` (%s, MPI from `%s`)." % (os.path.relpath(build), cache.get("CMAKE_BUILD_TYPE") or "default build type",
                                                      cache.get("MPI_C_COMPILER", "?")))
    md.append("")
    md.append("Command: `tests/bench/run_all.py %s`." % shlex.join(sys.argv[1:]))
    md.append("")
    if not have_gpu:
        md.append("No GPU: every buffer is host memory and the device columns print \"skipped\". Absolute times "
                  "on a machine like this are not meaningful (ranks and threads share the cores with whatever "
                  "else runs); only the ratios, measured side by side in one run, say something.")
        md.append("")
    if a.note:
        md += [a.note, ""]
    md.append("Each program's tables are medians of interleaved rounds (see the program's text)%s. Raw outputs "
              "and one CSV per table: [%s](%s)." % (
                  "; with %d repeats, the cell-wise median of the repeats" % a.repeats if a.repeats > 1 else "",
                  rel(data) + "/", rel(data) + "/"))
    md.append("")
    if errors:
        md.append("## Runs that failed")
        md.append("")
        for name, err in errors:
            md.append("- %s: %s" % (name, err))
        md.append("")
    if plots:
        md.append("## Plots")
        md.append("")
        for f, cap in plots:
            md.append("![%s](%s)" % (cap, rel(os.path.join(img_dir, f))))
            md.append("")
    if merged:
        md.append("## bench_host: lane message rate, both PTSC_COMM modes (merged)")
        md.append("")
        md.append("From the two bench_host runs below (`PTSC_COMM=dup`, and `PTSC_COMM=shared --only rate`); "
                  "each ratio to raw is taken within its own run, `shared / dup` across the runs.")
        md.append("")
        md.append(table_md(merged))
        md.append("")
    if overlap:
        md.append("## bench_overlap: every path and progress mode (merged)")
        md.append("")
        md.append("From the bench_overlap runs below, one per path and PTSC_PROGRESS mode; wait / transfer is "
                  "the wait after a computation of twice the transfer time (goal: under 0.05 from 1 MiB up).")
        md.append("")
        md.append(table_md(overlap))
        md.append("")
    for name, shown, out, tables, n in results:
        md.append("## %s" % name)
        md.append("")
        md.append("`%s`%s" % (shown, " (median of %d runs)" % n if n > 1 else ""))
        md.append("")
        if n > 1:  # the text of the first run, the tables of the median
            parts = []
            for t in tables:
                parts.append("#### " + t["title"] + "\n\n" + table_md(t))
            md.append("\n\n".join(parts))
        else:
            md.append(demote(out).rstrip())
        md.append("")
    report = os.path.join(a.out, stem + ".md")
    with open(report, "w") as f:
        f.write("\n".join(md).rstrip() + "\n")
    say("report: %s; CSV: %s; plots: %s" % (report, csv_dir, ", ".join(f for f, _ in plots) or "none"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
