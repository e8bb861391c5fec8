/* The pool of batch mappings (rmlprep/_native/fastbpe.c includes this after map_huge).
 *
 * A batch of 8 MB of ids' bound or more writes its result and its workers' side vectors into
 * mappings (fastbpe.c, "batches"). Freed, their written parts come here, and the next batch's
 * mappings get them back in place of fresh pages. */

/* Batch mappings (results, side vectors) freed by their owners are kept here for the next batch
 * instead of being unmapped: a batch's result is otherwise fresh memory on every call, and on this
 * VM fresh 2 MB pages cost their zeroing and, when the host took them back (free page reporting),
 * a host fault per page besides (bench/README.md, twentieth sitting). What is kept is the part of a
 * mapping its batch wrote (its 2 MB pages; the rest of the reserved range is unmapped, as a live
 * result's is), with where it lay in its mapping: a batch whose mapping is at least that large gets
 * those pages moved (mremap, no copy) to the same place in its own, where a batch of the same
 * texts writes its ids again. At most POOL_N parts and POOL_KEEP bytes, the oldest unmapped first.
 * A lock of its own (the GIL is held in both places today; a free-threaded build would not be). */
#define POOL_N 4
#define POOL_KEEP ((size_t)64 << 20)
static struct {
    uint8_t *p;       /* NULL: empty */
    size_t len, off;  /* its bytes, and where they began in their mapping */
    uint64_t age;     /* when it was given back (g_pool_clock) */
} g_pool[POOL_N];
static size_t g_pool_bytes;
static uint64_t g_pool_clock;
static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;

/* map_huge(bytes, MAP_NORESERVE), with the pool's newest part that fits moved into place. */
static void *map_take(size_t bytes)
{
    uint8_t *q = map_huge(bytes, MAP_NORESERVE);
#if defined(MREMAP_MAYMOVE) && defined(MREMAP_FIXED) && !defined(FASTBPE_NO_MREMAP)
    if (q == NULL)
        return NULL;
    pthread_mutex_lock(&g_pool_lock);
    int best = -1;
    for (int k = 0; k < POOL_N; k++)
        if (g_pool[k].p && g_pool[k].off + g_pool[k].len <= bytes && (best < 0 || g_pool[k].age > g_pool[best].age))
            best = k;
    uint8_t *p = NULL;
    size_t len = 0, off = 0;
    if (best >= 0) {
        p = g_pool[best].p;
        len = g_pool[best].len;
        off = g_pool[best].off;
        g_pool_bytes -= len;
        g_pool[best].p = NULL;
    }
    pthread_mutex_unlock(&g_pool_lock);
    if (p != NULL && mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, q + off) == MAP_FAILED)
        munmap(p, len); /* q stays as it was: fresh */
#endif
    return q;
}

/* Mapping [map, map + len) of map_take cut down to the 2 MB pages holding [a, b) (at least the
 * page holding a, where b == a): the rest unmapped. The part left is [*lo, *hi). */
static void map_trim(void *map, size_t len, const void *a, const void *b, uintptr_t *lo_out, uintptr_t *hi_out)
{
    uintptr_t m = (uintptr_t)map, e = m + len;
    uintptr_t lo = (uintptr_t)a & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)b + (b == a) + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    lo = lo < m ? m : lo >= e ? e - 4096 : lo;
    hi = hi > e ? e : hi <= lo ? lo + 4096 : hi;
    if (lo > m)
        munmap(map, lo - m);
    if (hi < e)
        munmap((void *)hi, e - hi);
    *lo_out = lo;
    *hi_out = hi;
}

/* Done with [p, p + keep), which began `off` bytes into its mapping: kept in the pool, the oldest
 * parts unmapped to make room, unless it alone is over POOL_KEEP (then unmapped). */
static void map_keep(void *p, size_t keep, size_t off)
{
    uintptr_t lo = (uintptr_t)p;
#if defined(MREMAP_MAYMOVE) && defined(MREMAP_FIXED) && !defined(FASTBPE_NO_MREMAP)
    struct {
        void *p;
        size_t len;
    } out[POOL_N + 1];
    int nout = 0;
    pthread_mutex_lock(&g_pool_lock);
    if (keep > POOL_KEEP) {
        out[nout].p = (void *)lo;
        out[nout++].len = keep;
    } else {
        for (;;) {
            int free_k = -1, old_k = -1;
            for (int k = 0; k < POOL_N; k++) {
                if (g_pool[k].p == NULL)
                    free_k = k;
                else if (old_k < 0 || g_pool[k].age < g_pool[old_k].age)
                    old_k = k;
            }
            if (free_k >= 0 && g_pool_bytes + keep <= POOL_KEEP) {
                g_pool[free_k].p = (uint8_t *)lo;
                g_pool[free_k].len = keep;
                g_pool[free_k].off = off;
                g_pool[free_k].age = ++g_pool_clock;
                g_pool_bytes += keep;
                break;
            }
            out[nout].p = g_pool[old_k].p; /* old_k >= 0: the pool is full or over POOL_KEEP */
            out[nout++].len = g_pool[old_k].len;
            g_pool_bytes -= g_pool[old_k].len;
            g_pool[old_k].p = NULL;
        }
    }
    pthread_mutex_unlock(&g_pool_lock);
    for (int k = 0; k < nout; k++)
        munmap(out[k].p, out[k].len);
#else
    (void)off;
    munmap((void *)lo, keep);
#endif
}

/* map_trim to [a, b), then map_keep what is left. */
static void map_give_range(void *map, size_t len, const void *a, const void *b)
{
    uintptr_t lo, hi;
    map_trim(map, len, a, b, &lo, &hi);
    map_keep((void *)lo, hi - lo, lo - (uintptr_t)map);
}
