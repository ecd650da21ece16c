/*
 * Memory: the buffer-class cache as pure functions (memory.c), checked on
 * machines without a GPU against a model of memory whose classes change
 * under the cache, and the per-call shortcuts of the argument checks
 * (predefined datatype sizes, p2p.c) against MPI's own answers.
 */
#include "ptsc_internal.h"
#include "test_util.h"

#include <stdint.h>

TestSuite(memory, .init = ptsc_test_clean_env, .timeout = 60);

#define BLOCK ((uintptr_t)1 << PTSC__MEMCACHE_BLOCK_SHIFT)

static const ptsc_memclass_t classes[] = {PTSC_MEM_DEVICE, PTSC_MEM_MANAGED, PTSC_MEM_PINNED, PTSC_MEM_HOST};

static ptsc__memcache_t *new_cache(void)
{
    ptsc__memcache_t *mc = calloc(1, sizeof *mc);
    cr_assert(mc != NULL);
    return mc;
}

static int needs_sync(ptsc_memclass_t c) { return c != PTSC_MEM_HOST; }
static int staged_class(ptsc_memclass_t c) { return c == PTSC_MEM_DEVICE || c == PTSC_MEM_MANAGED; }

Test(memory, rule_keeps_only_what_may_go_stale_safely)
{
    for (int staging = 0; staging < 2; staging++) {
        /* safe: device and managed per block; pinned per block only when
         * nothing is staged; pageable host never. */
        cr_expect_eq(ptsc__memcache_rule(PTSC__MEMCACHE_SAFE, 0, staging, PTSC_MEM_DEVICE),
                     PTSC__MEMKEEP_BLOCK);
        cr_expect_eq(ptsc__memcache_rule(PTSC__MEMCACHE_SAFE, 0, staging, PTSC_MEM_MANAGED),
                     PTSC__MEMKEEP_BLOCK);
        cr_expect_eq(ptsc__memcache_rule(PTSC__MEMCACHE_SAFE, 0, staging, PTSC_MEM_PINNED),
                     staging ? PTSC__MEMKEEP_NONE : PTSC__MEMKEEP_BLOCK);
        cr_expect_eq(ptsc__memcache_rule(PTSC__MEMCACHE_SAFE, 0, staging, PTSC_MEM_HOST), PTSC__MEMKEEP_NONE);
        /* host: the same, plus pageable host per exact address, never per block. */
        cr_expect_eq(ptsc__memcache_rule(PTSC__MEMCACHE_HOST, 0, staging, PTSC_MEM_HOST),
                     PTSC__MEMKEEP_EXACT);
        cr_expect_eq(ptsc__memcache_rule(PTSC__MEMCACHE_HOST, 0, staging, PTSC_MEM_PINNED),
                     staging ? PTSC__MEMKEEP_NONE : PTSC__MEMKEEP_BLOCK);
        cr_expect_eq(ptsc__memcache_rule(PTSC__MEMCACHE_HOST, 0, staging, PTSC_MEM_DEVICE),
                     PTSC__MEMKEEP_BLOCK);
        /* off: nothing. */
        for (int k = 0; k < 4; k++)
            cr_expect_eq(ptsc__memcache_rule(PTSC__MEMCACHE_OFF, 0, staging, classes[k]), PTSC__MEMKEEP_NONE);
        /* Tracked (CUDA's memory calls bump the epoch): safe keeps pageable
         * host per exact address, never per block, and pinned per block even
         * while staging (no address changes class unseen); device and
         * managed as untracked; off still keeps nothing. */
        for (int mode = PTSC__MEMCACHE_SAFE; mode <= PTSC__MEMCACHE_HOST; mode++) {
            cr_expect_eq(ptsc__memcache_rule(mode, 1, staging, PTSC_MEM_HOST), PTSC__MEMKEEP_EXACT);
            cr_expect_eq(ptsc__memcache_rule(mode, 1, staging, PTSC_MEM_DEVICE), PTSC__MEMKEEP_BLOCK);
            cr_expect_eq(ptsc__memcache_rule(mode, 1, staging, PTSC_MEM_MANAGED), PTSC__MEMKEEP_BLOCK);
            cr_expect_eq(ptsc__memcache_rule(mode, 1, staging, PTSC_MEM_PINNED), PTSC__MEMKEEP_BLOCK);
        }
        for (int k = 0; k < 4; k++)
            cr_expect_eq(ptsc__memcache_rule(PTSC__MEMCACHE_OFF, 1, staging, classes[k]), PTSC__MEMKEEP_NONE);
    }
}

Test(memory, block_entry_covers_every_offset_of_its_block_only)
{
    ptsc__memcache_t *mc = new_cache();
    uintptr_t base = (uintptr_t)0x7f0000000000 + 3 * BLOCK;
    ptsc_memclass_t c;
    ptsc__memcache_store(mc, (void *)(base + 100), 1, PTSC__MEMKEEP_BLOCK, PTSC_MEM_DEVICE);
    for (uintptr_t off = 0; off < BLOCK; off += 8) {
        c = PTSC_MEM_HOST;
        cr_assert(ptsc__memcache_lookup(mc, (void *)(base + off), 1, PTSC__MEMCACHE_SAFE, 0, &c),
                  "offset %zu", (size_t)off);
        cr_assert_eq(c, PTSC_MEM_DEVICE);
    }
    cr_expect(!ptsc__memcache_lookup(mc, (void *)(base - 1), 1, PTSC__MEMCACHE_SAFE, 0, &c));
    cr_expect(!ptsc__memcache_lookup(mc, (void *)(base + BLOCK), 1, PTSC__MEMCACHE_SAFE, 0, &c));
    free(mc);
}

/* A halo exchange: many messages at offsets into one 1 MiB allocation. Each
 * block it touches misses once; every later call hits. */
Test(memory, halo_offsets_into_one_allocation_hit_after_one_miss_per_block)
{
    ptsc__memcache_t *mc = new_cache();
    const uintptr_t base = (uintptr_t)0x7f1000000000;
    const size_t bytes = (size_t)1 << 20, stride = 1000; /* rows of 1000 bytes: several per block */
    int misses = 0, blocks = 0;
    uintptr_t last_block = UINTPTR_MAX;
    for (int pass = 0; pass < 3; pass++) {
        for (size_t off = 0; off < bytes; off += stride) {
            const void *p = (const void *)(base + off);
            ptsc_memclass_t c;
            if (pass == 0 && ((uintptr_t)p >> PTSC__MEMCACHE_BLOCK_SHIFT) != last_block) {
                blocks++;
                last_block = (uintptr_t)p >> PTSC__MEMCACHE_BLOCK_SHIFT;
            }
            if (!ptsc__memcache_lookup(mc, p, 1, PTSC__MEMCACHE_SAFE, 0, &c)) {
                misses++;
                ptsc__memcache_store(mc, p, 1, PTSC__MEMKEEP_BLOCK, PTSC_MEM_DEVICE);
            } else {
                cr_assert_eq(c, PTSC_MEM_DEVICE);
            }
        }
        /* 256 blocks fill the 256 slots exactly once each only by chance;
         * the first pass misses once per block, later ones only on slot
         * collisions between blocks. */
        if (pass == 0)
            cr_assert_eq(misses, blocks, "first pass: %d misses for %d blocks", misses, blocks);
    }
    /* Far fewer misses than calls: with exact addresses, every row would be
     * its own entry and 1049 rows cannot share 256 slots. */
    cr_expect_lt(misses, 2 * blocks, "%d misses over 3 passes of %d blocks", misses, blocks);
    free(mc);
}

Test(memory, host_entries_are_exact_and_only_in_host_or_tracked_mode)
{
    ptsc__memcache_t *mc = new_cache();
    char *buf = malloc(3 * BLOCK);
    cr_assert(buf);
    ptsc_memclass_t c;
    ptsc__memcache_store(mc, buf + 8, 1, PTSC__MEMKEEP_EXACT, PTSC_MEM_HOST);
    cr_expect(ptsc__memcache_lookup(mc, buf + 8, 1, PTSC__MEMCACHE_HOST, 0, &c));
    cr_expect_eq(c, PTSC_MEM_HOST);
    /* A neighbour in the same block may be a registered range: not covered. */
    cr_expect(!ptsc__memcache_lookup(mc, buf + 16, 1, PTSC__MEMCACHE_HOST, 0, &c));
    cr_expect(!ptsc__memcache_lookup(mc, buf + 7, 1, PTSC__MEMCACHE_HOST, 0, &c));
    /* In the safe mode the exact table is consulted only when tracked. */
    cr_expect(!ptsc__memcache_lookup(mc, buf + 8, 1, PTSC__MEMCACHE_SAFE, 0, &c));
    cr_expect(ptsc__memcache_lookup(mc, buf + 8, 1, PTSC__MEMCACHE_SAFE, 1, &c));
    cr_expect_eq(c, PTSC_MEM_HOST);
    cr_expect(!ptsc__memcache_lookup(mc, buf + 16, 1, PTSC__MEMCACHE_SAFE, 1, &c));
    cr_expect(!ptsc__memcache_lookup(mc, buf + 8, 1, PTSC__MEMCACHE_OFF, 0, &c));
    cr_expect(!ptsc__memcache_lookup(mc, buf + 8, 1, PTSC__MEMCACHE_OFF, 1, &c));
    /* NONE stores nothing. */
    ptsc__memcache_store(mc, buf + 64, 1, PTSC__MEMKEEP_NONE, PTSC_MEM_HOST);
    cr_expect(!ptsc__memcache_lookup(mc, buf + 64, 1, PTSC__MEMCACHE_HOST, 0, &c));
    free(buf);
    free(mc);
}

Test(memory, a_new_epoch_drops_every_entry)
{
    ptsc__memcache_t *mc = new_cache();
    ptsc_memclass_t c;
    const void *d = (const void *)(uintptr_t)0x7f2000000000, *h = (const void *)(uintptr_t)0x600010;
    ptsc__memcache_store(mc, d, 5, PTSC__MEMKEEP_BLOCK, PTSC_MEM_MANAGED);
    ptsc__memcache_store(mc, h, 5, PTSC__MEMKEEP_EXACT, PTSC_MEM_HOST);
    cr_expect(ptsc__memcache_lookup(mc, d, 5, PTSC__MEMCACHE_HOST, 0, &c));
    cr_expect(ptsc__memcache_lookup(mc, h, 5, PTSC__MEMCACHE_HOST, 0, &c));
    cr_expect(!ptsc__memcache_lookup(mc, d, 6, PTSC__MEMCACHE_HOST, 0, &c));
    cr_expect(!ptsc__memcache_lookup(mc, h, 6, PTSC__MEMCACHE_HOST, 0, &c));
    /* A zeroed table (a thread's first call) holds nothing: init starts at epoch 1. */
    ptsc__memcache_t *fresh = new_cache();
    cr_expect(!ptsc__memcache_lookup(fresh, NULL, 1, PTSC__MEMCACHE_HOST, 0, &c));
    cr_expect(!ptsc__memcache_lookup(fresh, (const void *)(uintptr_t)BLOCK, 1, PTSC__MEMCACHE_HOST, 0, &c));
    free(fresh);
    free(mc);
}

Test(memory, block_answer_wins_over_an_exact_host_answer)
{
    ptsc__memcache_t *mc = new_cache();
    ptsc_memclass_t c;
    const uintptr_t a = (uintptr_t)0x7f3000000040;
    /* Host first (host mode), then the block holds pinned bytes: the answer
     * that needs a sync wins. */
    ptsc__memcache_store(mc, (const void *)a, 1, PTSC__MEMKEEP_EXACT, PTSC_MEM_HOST);
    ptsc__memcache_store(mc, (const void *)(a + 512), 1, PTSC__MEMKEEP_BLOCK, PTSC_MEM_PINNED);
    cr_assert(ptsc__memcache_lookup(mc, (const void *)a, 1, PTSC__MEMCACHE_HOST, 0, &c));
    cr_expect_eq(c, PTSC_MEM_PINNED);
    free(mc);
}

/* ------------------------------------------------------------------------ */
/* A model of memory changing under the cache                                */
/* ------------------------------------------------------------------------ */

/* NB blocks, each pageable host, pinned (allocated pinned), device or
 * managed, plus byte ranges of pageable blocks that cudaHostRegister pinned
 * (CUDA tracks registrations per byte range, so a block may mix both). */
#define NB 64
typedef struct {
    ptsc_memclass_t block[NB];
    unsigned char registered[NB][BLOCK / 64]; /* 64-byte granules of host blocks pinned in place */
} model_t;

static const uintptr_t model_base = (uintptr_t)0x7e0000000000;

static ptsc_memclass_t truth(const model_t *m, uintptr_t a)
{
    size_t b = (size_t)((a - model_base) >> PTSC__MEMCACHE_BLOCK_SHIFT);
    if (m->block[b] != PTSC_MEM_HOST)
        return m->block[b];
    return m->registered[b][(a & (BLOCK - 1)) / 64] ? PTSC_MEM_PINNED : PTSC_MEM_HOST;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Classify as ptsc__mem_classify does, with the model as CUDA. */
static ptsc_memclass_t classify(ptsc__memcache_t *mc, const model_t *m, uintptr_t a, uint64_t epoch, int mode,
                                int tracked, int staging)
{
    ptsc_memclass_t c;
    if (ptsc__memcache_lookup(mc, (const void *)a, epoch, mode, tracked, &c))
        return c;
    c = truth(m, a);
    ptsc__memcache_store(mc, (const void *)a, epoch, ptsc__memcache_rule(mode, tracked, staging, c), c);
    return c;
}

/* How the model's CUDA tells ptsc of a memory call (memtrack.c):
 *  NONE    not at all, and ptsc knows it (no CUPTI): the untracked rule;
 *  EXIT    a bump at the exit of every call, as memtrack.c does;
 *  ENTRY   a bump at the entry instead (wrong: see below);
 *  SILENT  not at all, though ptsc believes it is tracked (a call missing
 *          from memtrack.c's table, or a subscriber that never fires). */
enum { TRACK_NONE, TRACK_EXIT, TRACK_ENTRY, TRACK_SILENT };

/* One of the eight buffers of block b (see run_model), from random bits. */
static uintptr_t model_addr(size_t b, uint64_t r)
{
    return model_base + b * BLOCK + (uintptr_t)((r >> 8) % 8) * (BLOCK / 8) + (uintptr_t)((r >> 16) % 2);
}

/* Random frees and reuses of blocks as any class, registrations inside
 * pageable blocks, and lookups at random addresses (many per block). Each
 * answer is checked against the truth: `forget` says whether the program
 * calls ptsc_mem_forget after every change, `track` how ptsc learns of the
 * change itself. While each change is in flight, another thread classifies
 * a buffer of the same block (it may see the memory before or after the
 * change, so that answer is not checked, but it is cached as the rule
 * says): that is what a bump at the call's entry gets wrong. Returns how
 * many answers skipped a needed sync or a needed staging copy. */
static int run_model(int mode, int track, int staging, int forget, int steps)
{
    model_t *m = calloc(1, sizeof *m);
    ptsc__memcache_t *mc = new_cache();
    cr_assert(m && mc);
    const int tracked = track != TRACK_NONE;
    for (int b = 0; b < NB; b++)
        m->block[b] = classes[next() % 4];
    uint64_t epoch = 1;
    int missing = 0;
    for (int s = 0; s < steps; s++) {
        uint64_t r = next();
        size_t b = (size_t)((r >> 40) % NB); /* bits apart from those that pick the step */
        int change = r % 16 == 0 || (r % 16 == 1 && m->block[b] == PTSC_MEM_HOST);
        if (change) {
            /* The call's entry, then a concurrent classification. */
            if (track == TRACK_ENTRY)
                epoch++;
            (void)classify(mc, m, model_addr(b, r >> 24), epoch, mode, tracked, staging);
        }
        if (r % 16 == 0) { /* free and reuse the block as another class */
            m->block[b] = classes[(r >> 8) % 4];
            memset(m->registered[b], 0, sizeof m->registered[b]);
        } else if (change) { /* cudaHostRegister in place */
            size_t g0 = (size_t)((r >> 8) % (BLOCK / 64)), n = 1 + (size_t)((r >> 20) % 8);
            for (size_t g = g0; g < g0 + n && g < BLOCK / 64; g++)
                m->registered[b][g] = 1;
        } else {
            /* Eight buffers per block, each at a fixed address plus a small
             * offset, so that exact entries are looked up again. */
            uintptr_t a = model_addr(b, r);
            ptsc_memclass_t want = truth(m, a), got = classify(mc, m, a, epoch, mode, tracked, staging);
            if ((needs_sync(want) && !needs_sync(got)) ||
                (staging && staged_class(want) && !staged_class(got)))
                missing++;
        }
        if (change) {
            /* The call's exit (CUPTI's callback), then the program's forget. */
            if (track == TRACK_EXIT)
                epoch++;
            epoch += forget;
        }
    }
    free(m);
    free(mc);
    return missing;
}

Test(memory, safe_mode_never_misses_a_sync_or_a_staging_copy)
{
    for (int staging = 0; staging < 2; staging++) {
        cr_expect_eq(run_model(PTSC__MEMCACHE_SAFE, TRACK_NONE, staging, 0, 200000), 0, "staging %d",
                     staging);
        cr_expect_eq(run_model(PTSC__MEMCACHE_OFF, TRACK_NONE, staging, 0, 200000), 0, "staging %d", staging);
        /* PTSC_MEM_CACHE=off never subscribes; were it tracked, still nothing is kept. */
        cr_expect_eq(run_model(PTSC__MEMCACHE_OFF, TRACK_SILENT, staging, 0, 200000), 0, "staging %d",
                     staging);
    }
}

/* Tracked: pageable answers are kept per address, and every memory call
 * bumps the epoch at its exit; nothing is missed, with no help from the
 * program. */
Test(memory, safe_mode_tracked_never_misses_a_sync_or_a_staging_copy)
{
    for (int staging = 0; staging < 2; staging++) {
        cr_expect_eq(run_model(PTSC__MEMCACHE_SAFE, TRACK_EXIT, staging, 0, 200000), 0, "staging %d",
                     staging);
        /* host mode gains the same guarantee, whether or not the program forgets. */
        cr_expect_eq(run_model(PTSC__MEMCACHE_HOST, TRACK_EXIT, staging, 0, 200000), 0, "staging %d",
                     staging);
        cr_expect_eq(run_model(PTSC__MEMCACHE_HOST, TRACK_EXIT, staging, 1, 200000), 0, "staging %d",
                     staging);
    }
}

/* The model catches a tracker that is wrong: one that misses calls (the
 * rule believes it is tracked, no bump comes), and one that bumps at the
 * call's entry, where a classification made during the call is cached
 * under the new epoch with what the memory was before. */
Test(memory, tracked_rule_needs_every_bump_at_exit)
{
    for (int staging = 0; staging < 2; staging++) {
        cr_expect_gt(run_model(PTSC__MEMCACHE_SAFE, TRACK_SILENT, staging, 0, 200000), 0, "staging %d",
                     staging);
        cr_expect_gt(run_model(PTSC__MEMCACHE_SAFE, TRACK_ENTRY, staging, 0, 200000), 0, "staging %d",
                     staging);
    }
}

Test(memory, host_mode_is_exact_when_the_program_forgets_after_each_change)
{
    for (int staging = 0; staging < 2; staging++)
        cr_expect_eq(run_model(PTSC__MEMCACHE_HOST, TRACK_NONE, staging, 1, 200000), 0, "staging %d",
                     staging);
}

/* Why host mode needs the program's ptsc_mem_forget: without it, memory
 * registered or reused after its pageable answer was cached is missed. */
Test(memory, host_mode_without_forget_misses_syncs)
{
    cr_expect_gt(run_model(PTSC__MEMCACHE_HOST, TRACK_NONE, 0, 0, 200000), 0);
}

/* ------------------------------------------------------------------------ */
/* Configuration and the public calls                                        */
/* ------------------------------------------------------------------------ */

Test(memory, mem_cache_variable)
{
    ptsc__config_t cfg;
    PTSC_ASSERT_OK(ptsc__config_load(&cfg));
    cr_expect_eq(cfg.mem_cache, PTSC__MEMCACHE_SAFE);
    const char *names[] = {"safe", "host", "off"};
    const int modes[] = {PTSC__MEMCACHE_SAFE, PTSC__MEMCACHE_HOST, PTSC__MEMCACHE_OFF};
    for (int i = 0; i < 3; i++) {
        setenv("PTSC_MEM_CACHE", names[i], 1);
        PTSC_ASSERT_OK(ptsc__config_load(&cfg));
        cr_expect_eq(cfg.mem_cache, modes[i], "PTSC_MEM_CACHE=%s", names[i]);
    }
    setenv("PTSC_MEM_CACHE", "all", 1);
    PTSC_ASSERT_ERR(ptsc__config_load(&cfg), PTSC_ERR_CONFIG);
    cr_expect(strstr(ptsc_last_error(), "PTSC_MEM_CACHE") != NULL, "%s", ptsc_last_error());
}

/* On a machine without a device every buffer is host memory, whatever the
 * mode, and no CUDA call is made. */
Test(memory, host_buffers_are_host_in_host_mode)
{
    setenv("PTSC_MEM_CACHE", "host", 1);
    ptsc_test_init(1, NULL);
    char buf[64];
    for (int k = 0; k < 3; k++) {
        ptsc_memclass_t c = PTSC_MEM_DEVICE;
        PTSC_ASSERT_OK(ptsc_mem_class(buf + k, &c));
        cr_expect_eq(c, PTSC_MEM_HOST);
        PTSC_ASSERT_OK(ptsc_mem_forget());
    }
    ptsc_test_finalize();
}

/* The predefined types whose sizes the argument checks know without asking
 * MPI: the same sizes, the same contiguity as MPI's own answers. */
Test(memory, predefined_datatype_sizes_match_mpi)
{
    ptsc_test_init(1, NULL);
    const MPI_Datatype types[] = {MPI_BYTE,
                                  MPI_CHAR,
                                  MPI_UNSIGNED_CHAR,
                                  MPI_SIGNED_CHAR,
                                  MPI_INT8_T,
                                  MPI_UINT8_T,
                                  MPI_DOUBLE,
                                  MPI_FLOAT,
                                  MPI_INT,
                                  MPI_UNSIGNED,
                                  MPI_LONG,
                                  MPI_UNSIGNED_LONG,
                                  MPI_LONG_LONG,
                                  MPI_LONG_LONG_INT,
                                  MPI_UNSIGNED_LONG_LONG,
                                  MPI_SHORT,
                                  MPI_INT32_T,
                                  MPI_UINT32_T,
                                  MPI_INT64_T,
                                  MPI_UINT64_T,
                                  MPI_DOUBLE_INT,
                                  MPI_C_DOUBLE_COMPLEX};
    char buf[8];
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        MPI_Count want = 0;
        size_t got = 0;
        cr_assert_eq(MPI_Type_size_x(types[i], &want), MPI_SUCCESS);
        PTSC_ASSERT_OK(ptsc__check_buf(buf, 3, types[i], "test", &got));
        cr_expect_eq(got, 3 * (size_t)want, "type %zu: %zu bytes, MPI says 3 x %lld", i, got,
                     (long long)want);
        MPI_Count lb, ext, tlb, text;
        MPI_Type_get_extent_x(types[i], &lb, &ext);
        MPI_Type_get_true_extent_x(types[i], &tlb, &text);
        cr_expect_eq(ptsc__type_is_contiguous(types[i]), lb == 0 && tlb == 0 && ext == want && text == want,
                     "type %zu", i);
    }
    /* A derived type is asked every time: free it and build another under
     * what may be the same handle. */
    for (int n = 1; n <= 3; n++) {
        MPI_Datatype t;
        MPI_Type_contiguous(n, MPI_DOUBLE, &t);
        MPI_Type_commit(&t);
        size_t got = 0;
        PTSC_ASSERT_OK(ptsc__check_buf(buf, 1, t, "test", &got));
        cr_expect_eq(got, (size_t)n * sizeof(double));
        MPI_Type_free(&t);
    }
    ptsc_test_finalize();
}
