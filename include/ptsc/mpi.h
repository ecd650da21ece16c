/*
 * libptsc-mpi's own calls, for programs that run under it (ptsc-run,
 * LD_PRELOAD, or linked with ptsc::ptsc-mpi before libmpi) and want to
 * say more than plain MPI calls can. Bindings find them by name instead
 * (dlsym, ctypes, ccall); without the interposer loaded they do not exist,
 * so a program that must also run without it looks them up.
 */
#ifndef PTSC_MPI_H
#define PTSC_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Name the stream this thread's device buffers come from (a cudaStream_t),
 * for work that is not on the thread's per-thread default stream: task
 * streams of CUDA.jl, CuPy's current stream, non-blocking streams. Until
 * the thread names another or NULL (back to its per-thread default
 * stream), PTSC_SYNC_SCOPE=thread and auto wait for this stream's work
 * before MPI touches a device, managed or pinned buffer of this thread.
 * The stream must stay valid while it is named. Returns MPI_SUCCESS (0).
 */
int ptsc_mpi_set_stream(void *stream);

/**
 * 1 while the interposer is active (between MPI_Init and MPI_Finalize),
 * else 0; fills the counters of this process that are not NULL: buffer
 * arguments seen, syncs made, failures, buffers staged.
 */
int ptsc_mpi_interposer(unsigned long *seen, unsigned long *synced, unsigned long *failed,
                        unsigned long *staged);

/** Buffers the race check (PTSC_SYNC_CHECK with PTSC_SYNC_SCOPE=none) found
 * handed to MPI while work on their thread's stream still ran. */
unsigned long ptsc_mpi_races(void);

#ifdef __cplusplus
}
#endif

#endif
