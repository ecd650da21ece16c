/* Every thread greets the same thread index on the next rank, in a ring.
 * Run: mpiexec -n 2 ./hello   (PTSC_MAX_THREADS / OMP_NUM_THREADS set the threads) */
#include <ptsc.h>
#include <stdio.h>

static int greet(ptsc_ctx_t *ctx, void *arg)
{
    int rank, nranks, t, me[2], from[2];
    (void)arg;
    ptsc_rank(&rank);
    ptsc_size(&nranks, NULL);
    ptsc_ctx_index(ctx, &t);
    me[0] = rank;
    me[1] = t;
    /* Addressed by (rank, thread): the message can only match thread t's receive. */
    int rc = ptsc_sendrecv(ctx, me, 2, MPI_INT, (rank + 1) % nranks, t, 0, from, 2, MPI_INT,
                           (rank + nranks - 1) % nranks, t, 0);
    if (rc == PTSC_OK)
        printf("rank %d thread %d: hello from rank %d thread %d\n", rank, t, from[0], from[1]);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = ptsc_init(&argc, &argv);
    if (rc == PTSC_OK)
        rc = ptsc_omp_run(0, greet, NULL);
    if (rc != PTSC_OK)
        fprintf(stderr, "hello: %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
    ptsc_finalize();
    return rc == PTSC_OK ? 0 : 1;
}
