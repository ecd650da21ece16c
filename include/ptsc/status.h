/* ptsc status codes: the one list every status, name and message derives from. */
#ifndef PTSC_STATUS_H
#define PTSC_STATUS_H

/*
 * X(name, value, message). PTSC_OK is 0 and every error is negative, so
 * `if (rc < 0)` and `if (rc != PTSC_OK)` are both valid tests. Values are
 * part of the ABI: append new codes, never renumber.
 */
#define PTSC_STATUS_LIST(X)                                                             \
    X(PTSC_OK, 0, "success")                                                            \
    X(PTSC_ERR_ARG, -1, "invalid argument")                                             \
    X(PTSC_ERR_NULL_BUFFER, -2, "NULL buffer with a count above zero")                  \
    X(PTSC_ERR_COUNT, -3, "negative count")                                             \
    X(PTSC_ERR_RANK, -4, "rank out of range")                                           \
    X(PTSC_ERR_THREAD, -5, "thread index out of range")                                 \
    X(PTSC_ERR_TAG, -6, "tag out of range (see ptsc_tag_max)")                          \
    X(PTSC_ERR_NOT_INITIALIZED, -7, "ptsc_init has not been called")                    \
    X(PTSC_ERR_FINALIZED, -8, "ptsc has been finalized")                                \
    X(PTSC_ERR_ALREADY_INITIALIZED, -9, "ptsc_init called twice")                       \
    X(PTSC_ERR_THREAD_TAKEN, -10, "thread index already attached by a live thread")     \
    X(PTSC_ERR_THREAD_LEVEL, -11, "MPI was initialised below MPI_THREAD_MULTIPLE")      \
    X(PTSC_ERR_NOT_ATTACHED, -12, "calling thread has no ptsc context")                 \
    X(PTSC_ERR_ALREADY_ATTACHED, -13, "calling thread is already attached")             \
    X(PTSC_ERR_WRONG_THREAD, -14, "context used from a thread that does not own it")    \
    X(PTSC_ERR_CONFIG, -15, "bad PTSC_* configuration value")                           \
    X(PTSC_ERR_MPI, -16, "MPI call failed (ptsc_last_error has MPI's message)")         \
    X(PTSC_ERR_CUDA, -17, "CUDA call failed (ptsc_last_error has CUDA's message)")      \
    X(PTSC_ERR_NO_MEMORY, -18, "out of memory")                                         \
    X(PTSC_ERR_CAPTURING, -19, "sync requested while a stream is being graph-captured") \
    X(PTSC_ERR_RACE, -20, "device buffer handed to MPI while its stream is still busy") \
    X(PTSC_ERR_UNSUPPORTED, -21, "operation not supported in this configuration")       \
    X(PTSC_ERR_NESTED, -22, "nested OpenMP parallel region (see ptsc_omp_attach)")      \
    X(PTSC_ERR_TRUNCATE, -23, "message size does not match the receive buffer")         \
    X(PTSC_ERR_NO_DEVICE, -24, "no CUDA device available")                              \
    X(PTSC_ERR_INTERNAL, -25, "internal error")                                         \
    X(PTSC_ERR_PENDING, -26, "requests of the thread are still in flight")              \
    X(PTSC_ERR_CANCELLED, -27, "receive cancelled before a message matched it")         \
    X(PTSC_ERR_MISMATCH, -28, "world collective: participants disagree or one failed")

/** Status returned by every ptsc call: PTSC_OK (0) or a negative error. */
typedef enum {
#define PTSC__STATUS_ENUM(name, value, msg) name = value,
    PTSC_STATUS_LIST(PTSC__STATUS_ENUM)
#undef PTSC__STATUS_ENUM
} ptsc_status_t;

/** Number of status codes (PTSC_OK included); codes are 0 .. -(PTSC_STATUS_COUNT-1). */
#define PTSC_STATUS_COUNT 29

#endif /* PTSC_STATUS_H */
