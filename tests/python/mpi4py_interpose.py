"""libptsc-mpi (src/interpose.c) under mpi4py: MPI calls made through a
language binding reach the interposer.

An mpi4py program with numpy buffers and the buffer-style (uppercase)
calls: Send/Recv (the receive larger than the message), Isend/Irecv and
Waitall, Sendrecv, Bcast, Allreduce (also in place), Reduce, Gather,
Allgather, Alltoall and Scatter. Every result is checked against values
computed locally.

MPI_INTERPOSE_EXPECT=yes requires the interposer to be loaded (found in
the process through ctypes), active, and to have seen exactly the buffer
arguments this program passed to intercepted calls, counted below as the
interposer counts them (tests/mpi/mpi_interpose.c does the same in C);
with PTSC_STAGING=always and no device each of them must have been
staged. MPI_INTERPOSE_EXPECT=no requires it to be absent.

Prints "PASSED mpi4py_interpose" on rank 0 when every rank passed, "FAIL"
on each failed check, and exits nonzero on failure. Run on 2 to 8 ranks:

    mpiexec -n 2 build/src/ptsc-run python3 tests/python/mpi4py_interpose.py
"""

import ctypes
import os
import sys

import numpy as np
from mpi4py import MPI

N = 64
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
failed = 0

# Buffer arguments passed to intercepted calls, as the interposer counts
# them: each pointer that is not NULL, MPI_IN_PLACE or MPI_BOTTOM, once per
# call (a Sendrecv's two count 2); a rooted call's root-only buffer
# (Reduce's and Gather's receive, Scatter's send) only at the root, where
# MPI reads it. Non-blocking calls count when called; the completion calls
# (Wait*, Test*) count nothing.
expect_bufs = 0


def bufs(n):
    global expect_bufs
    expect_bufs += n


def check(cond, what):
    global failed
    if not cond:
        print("mpi4py_interpose [rank %d] FAIL: %s" % (rank, what),
              flush=True)
        failed += 1


def check_data(what, got, want):
    """`got` equals `want` element by element; the first difference is
    reported."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        check(False, "%s: shape %s, expected %s"
              % (what, got.shape, want.shape))
        return
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = bad[0]
        check(False, "%s: %d elements wrong, element %d is %s, expected %s"
              % (what, bad.size, i, got.flat[i], want.flat[i]))


def abort_on_exception(kind, value, tb):
    """An exception on one rank ends the job (the others would wait in
    their next call)."""
    sys.__excepthook__(kind, value, tb)
    print("mpi4py_interpose [rank %d] FAIL: %s: %s"
          % (rank, kind.__name__, value), flush=True)
    comm.Abort(1)


sys.excepthook = abort_on_exception


def row(frm, to):
    """The N int32 elements rank `frm` sends to rank `to`."""
    return (frm * 1000000 + to * 1000 + np.arange(N)).astype(np.int32)


def rows(f):
    """One row per rank j: f(j), as a (size, N) array."""
    return np.array([f(j) for j in range(size)], dtype=np.int32)


def interposer():
    """ptsc_mpi_interposer's (active, seen, synced, failed, staged), or
    None when the library is not in the process. CDLL(None) searches the
    global scope: the preloaded library comes before libmpi (which mpi4py
    loads with RTLD_GLOBAL)."""
    try:
        query = ctypes.CDLL(None).ptsc_mpi_interposer
    except AttributeError:
        return None
    query.restype = ctypes.c_int
    query.argtypes = [ctypes.POINTER(ctypes.c_ulong)] * 4
    n = [ctypes.c_ulong(0) for _ in range(4)]
    active = query(*[ctypes.byref(c) for c in n])
    return (active,) + tuple(c.value for c in n)


def point_to_point():
    nxt, prv = (rank + 1) % size, (rank - 1 + size) % size
    sb, want = row(rank, nxt), row(prv, rank)

    # Send / Recv around the ring (even ranks send first), the receive
    # buffer twice the message: MPI writes N elements, the rest stays.
    rb = np.full(2 * N, -1, dtype=np.int32)
    st = MPI.Status()
    bufs(2)
    if rank % 2 == 0:
        comm.Send([sb, MPI.INT], dest=nxt, tag=1)
        comm.Recv([rb, MPI.INT], source=prv, tag=1, status=st)
    else:
        comm.Recv([rb, MPI.INT], source=prv, tag=1, status=st)
        comm.Send([sb, MPI.INT], dest=nxt, tag=1)
    got = st.Get_count(MPI.INT)
    check(got == N, "Recv: count %d, expected %d" % (got, N))
    check_data("Recv", rb[:N], want)
    check_data("Recv past the message", rb[N:], np.full(N, -1))

    # Isend / Irecv completed by one Waitall.
    rb = np.zeros(N, dtype=np.int32)
    bufs(2)
    reqs = [comm.Irecv(rb, source=prv, tag=2),
            comm.Isend(sb, dest=nxt, tag=2)]
    MPI.Request.Waitall(reqs)
    check_data("Isend/Irecv", rb, want)

    # Sendrecv: two buffers in one call.
    rb = np.zeros(N, dtype=np.int32)
    bufs(2)
    comm.Sendrecv(sb, dest=nxt, sendtag=3, recvbuf=rb, source=prv,
                  recvtag=3)
    check_data("Sendrecv", rb, want)


def collectives():
    root = size - 1
    at_root = rank == root
    k = np.arange(N, dtype=np.float64)

    # Bcast: one buffer on every rank (sent from the root, received
    # elsewhere).
    b = 1000.0 * root + k if at_root else np.zeros(N)
    bufs(1)
    comm.Bcast(b, root=root)
    check_data("Bcast", b, 1000.0 * root + k)

    # Allreduce, then in place (the receive buffer alone counts).
    s = rank + k
    total = size * k + sum(range(size))
    r = np.zeros(N)
    bufs(2)
    comm.Allreduce(s, r, op=MPI.SUM)
    check_data("Allreduce", r, total)
    r = 2.0 * rank + k
    bufs(1)
    comm.Allreduce(MPI.IN_PLACE, r, op=MPI.MAX)
    check_data("Allreduce in place", r, 2.0 * (size - 1) + k)

    # Reduce: the receive buffer at the root only (None elsewhere).
    r = np.zeros(N) if at_root else None
    bufs(2 if at_root else 1)
    comm.Reduce(s, r, op=MPI.SUM, root=root)
    if at_root:
        check_data("Reduce", r, total)

    # Gather: a row from each rank into the root's buffer.
    g = np.zeros((size, N), dtype=np.int32) if at_root else None
    bufs(2 if at_root else 1)
    comm.Gather(row(rank, root), g, root=root)
    if at_root:
        check_data("Gather", g, rows(lambda j: row(j, root)))

    # Allgather: every rank's row everywhere.
    g = np.zeros((size, N), dtype=np.int32)
    bufs(2)
    comm.Allgather(row(rank, 0), g)
    check_data("Allgather", g, rows(lambda j: row(j, 0)))

    # Alltoall: row j goes to rank j.
    g = np.zeros((size, N), dtype=np.int32)
    bufs(2)
    comm.Alltoall(rows(lambda j: row(rank, j)), g)
    check_data("Alltoall", g, rows(lambda j: row(j, rank)))

    # Scatter: the root's send buffer (None elsewhere), row j to rank j.
    sa = rows(lambda j: row(root, j)) if at_root else None
    rb = np.zeros(N, dtype=np.int32)
    bufs(2 if at_root else 1)
    comm.Scatter(sa, rb, root=root)
    check_data("Scatter", rb, row(root, rank))


def check_interposer(want, before, after):
    if want == "no":
        check(before is None and after is None,
              "libptsc-mpi is loaded but should not be")
        return
    if want != "yes":
        check(False, "set MPI_INTERPOSE_EXPECT to yes or no")
        return
    if before is None or after is None:
        check(False, "libptsc-mpi is not loaded (no ptsc_mpi_interposer)")
        return
    check(before[0] == 1 and after[0] == 1,
          "libptsc-mpi loaded but not active")
    seen, synced, bad, staged = (a - b for a, b in zip(after[1:], before[1:]))
    check(seen == expect_bufs,
          "libptsc-mpi saw %d buffer arguments, the program passed %d"
          % (seen, expect_bufs))
    check(synced == 0 and bad == 0,
          "host buffers: %d syncs, %d failures (expected none)"
          % (synced, bad))
    # PTSC_STAGING=always without a device stages host buffers, and every
    # call here is one that stages (point-to-point, blocking collectives on
    # an intracommunicator): all of them, or none without staging.
    staging = os.environ.get("PTSC_STAGING") == "always"
    want_staged = expect_bufs if staging else 0
    check(staged == want_staged and (staged > 0 or not staging),
          "%d of %d buffer arguments staged, expected %d"
          % (staged, expect_bufs, want_staged))
    if rank == 0:
        print("mpi4py_interpose: interposer active, %d of %d buffer "
              "arguments seen, %d staged" % (seen, expect_bufs, staged),
              flush=True)


def main():
    if not 2 <= size <= 8:
        if rank == 0:
            print("mpi4py_interpose: FAIL: run it on 2 to 8 ranks",
                  flush=True)
        return 1
    before = interposer()
    point_to_point()
    collectives()
    after = interposer()
    check_interposer(os.environ.get("MPI_INTERPOSE_EXPECT"), before, after)

    # After the counters were read: this call is not among those counted.
    total = np.zeros(1, dtype=np.int64)
    comm.Allreduce(np.array([failed], dtype=np.int64), total, op=MPI.SUM)
    if rank == 0:
        if total[0]:
            print("mpi4py_interpose: %d failed checks" % total[0],
                  flush=True)
        else:
            print("PASSED mpi4py_interpose", flush=True)
    return 1 if total[0] else 0


if __name__ == "__main__":
    sys.exit(main())
