/* rmlprep._fastbpe: the compiled hot path of rmlprep's BPE encoder.
 *
 * One Encoder per tokenizer, built by rmlprep/native.py from an indexed Tokenizer. It encodes one
 * text segment (specials already cut out, normalizers and prefix space applied; SentencePiece
 * text already spelled with U+2581) exactly as the pure-Python path of rmlprep/tokenizer.py:
 *
 *   byte-level:    the text as UTF-8 (a str is converted once; an ASCII str is read in place) ->
 *                  hand-written pre-split matchers (GPT-2, Llama 3, Qwen2, cl100k_base,
 *                  o200k_base, digit splits; split_utf8.h) -> per piece: the piece cache, else
 *                  the whole-token lookup when the spec says ignore_merges, else the merge loop
 *                  (a non-ASCII piece first cut where no merge joins two bytes, its parts merged
 *                  and cached alone, when the vocabulary joins few such pairs: resolve_parts).
 *   SentencePiece: words split as tokenizer._encode_sentencepiece does -> the piece cache, else
 *                  code-point symbols (unknown characters are barriers that never merge, or are
 *                  skipped before merging without unk and byte fallback, as tokenizers does) -> the
 *                  merge loop -> byte fallback <0xXX> / unk for unknown characters.
 *
 * Pieces are handled in batches: the splitter fills a batch, then every piece's cache slot is
 * hashed and prefetched before any is probed, so the probes' cache misses overlap instead of
 * queueing one behind the other.
 *
 * The merge loop is rmlprep/bpe.py's: lowest (priority, position) first, where priority is the
 * merge rank, or the dense rank of -score in scores mode (equal scores share a rank, so ties go
 * leftmost). Short words use a scan for the minimum (same order, no heap), words of 49-255
 * symbols the same scan over the minima of blocks of 16 keys (merge_blocks); longer ones a binary
 * heap of (priority << 32 | position) keys whose staleness is checked by looking the current
 * pair up again (equal priority at an equal position is the same choice).
 *
 * The piece cache (one per slot) is an open-addressing table of 32-byte entries: a piece of up
 * to 16 bytes is its own key (two words) and up to 3 ids sit inline; longer keys and id lists
 * live in arenas. It grows to CACHE_SLOTS_MAX slots; when full, a sweep keeps only the entries hit
 * since the last sweep (one-off pieces go, pieces in use stay), so memory is bounded.
 *
 * Threads: tables are read-only after construction. Each call takes one of a few cache slots
 * (piece cache + scratch buffers) with a try-lock, or runs uncached if all are busy, and
 * releases the GIL for long texts and for batches, so 2 threads use 2 cores. A batch on n
 * threads takes n slots (scratch) and, when no other batch holds it, one piece cache shared by its
 * workers (so a piece is learned once, not once per worker; see "the shared piece cache"), and
 * writes its ids in document order without a copy of all of them at the end (see "batches").
 *
 * Source: rmlprep/bpe.py, rmlprep/tokenizer.py, rmlprep/pretokenize.py (the reference).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unicode_classes.h"
#include "normalize_qc.h"

#define KIND_BYTE_LEVEL 0
#define KIND_SENTENCEPIECE 1

#define PAT_GPT2 1
#define PAT_LLAMA3 2
#define PAT_QWEN2 3
#define PAT_DIGITS 4
#define PAT_DIGITS_INDIVIDUAL 5
#define PAT_CL100K 6
#define PAT_O200K 7
#define PAT_MAX 7
#define MAX_STAGES 8

#define SP_WHOLE 0
#define SP_WORDS 1
#define SP_SPACE_SPLIT 2

#define BARRIER 0x80000000u /* SentencePiece symbol of an unknown character: BARRIER | index */
#define DEAD 0xFFFFFFFFu
#define NO_RANK 0xFFFFFFFFu

#define N_SLOTS 8
#define MAX_THREADS 64            /* batch workers */
#define BATCH 128                  /* pieces hashed and prefetched together */
#define SHORT_KEY 16               /* bytes; keys up to this are stored inline */
#define CACHE_KEY_MAX 256          /* bytes; longer pieces are not cached */
#define CACHE_SLOTS_MIN (1u << 12) /* grows x4 to the max: both powers of 4 */
#define CACHE_SLOTS_MAX (1u << 20) /* 32 MB of slots; at most 5/8 are used */
#define CACHE_KEYS_MAX (16u << 20) /* bytes of long keys */
#define CACHE_VALS_MAX (4u << 20)  /* ids of long id lists */
#define INLINE_IDS 3
#define ARENA_PAD 8                /* ids of room past the piece cache's id arena (copy_ids8) */
#define FRONT_BITS 13              /* front cache: 8192 entries, 256 KB */
#define USED 0x8000u               /* CEntry.nids flag: hit since the last sweep */
#define SMALL_WORD 48              /* symbols; up to this the merge loop scans instead of a heap */
#define GIL_RELEASE_BYTES 4096
#define SCRATCH_KEEP (1u << 20)    /* scratch above this many bytes is freed after a call */
#define OUT_KEEP (32u << 20)       /* a slot keeps an id vector up to this many bytes between calls */
#define PAD 16                     /* readable bytes after a converted text (whole-word key loads) */

/* ---------------------------------------------------------------------------------------- */
/* hashing */

static inline uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static inline uint64_t mum(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* Hash of a key of up to SHORT_KEY bytes given as two zero-padded words. */
static inline uint64_t hash_short(uint64_t k0, uint64_t k1, size_t n)
{
    return mum(k0 ^ 0x243F6A8885A308D3ULL, k1 ^ (0x13198A2E03707344ULL + n));
}

static inline uint64_t hash_long(const uint8_t *p, size_t n)
{
    uint64_t h = 0xA4093822299F31D0ULL ^ n;
    while (n >= 16) {
        uint64_t a, b;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        h = mum(a ^ h, b ^ 0x082EFA98EC4E6C89ULL);
        p += 16;
        n -= 16;
    }
    uint64_t a = 0, b = 0;
    if (n > 8) {
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, n - 8);
    } else {
        memcpy(&a, p, n);
    }
    return mum(a ^ h, b ^ 0x452821E638D01377ULL);
}

static const uint64_t MASK_LO[SHORT_KEY + 1] = {
    0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFFULL, 0xFFFFFFFFFFULL, 0xFFFFFFFFFFFFULL, 0xFFFFFFFFFFFFFFULL,
    ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL,
};
static const uint64_t MASK_HI[SHORT_KEY + 1] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFFULL, 0xFFFFFFFFFFULL, 0xFFFFFFFFFFFFULL, 0xFFFFFFFFFFFFFFULL, ~0ULL,
};

/* The two zero-padded words of a key of n <= SHORT_KEY bytes at p; `safe`: 16 bytes are readable. */
static inline void load_short(const uint8_t *p, size_t n, int safe, uint64_t *k0, uint64_t *k1)
{
    uint64_t a = 0, b = 0;
    if (safe) {
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        a &= MASK_LO[n];
        b &= MASK_HI[n];
    } else if (n > 8) {
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, n - 8);
    } else {
        memcpy(&a, p, n);
    }
    *k0 = a;
    *k1 = b;
}

/* The hash of any key (short keys by their words, as the tables store them). */
static inline uint64_t hash_key(const uint8_t *p, size_t n, int safe, uint64_t *k0, uint64_t *k1)
{
    if (n <= SHORT_KEY) {
        load_short(p, n, safe, k0, k1);
        return hash_short(*k0, *k1, n);
    }
    *k0 = *k1 = 0;
    return hash_long(p, n);
}

static size_t pow2_at_least(size_t n)
{
    size_t s = 16;
    while (s < n)
        s <<= 1;
    return s;
}

/* ---------------------------------------------------------------------------------------- */
/* read-only tables */

/* Big tables (pair map, whole-token map, piece caches) are read at random: on 2 MB pages
 * (transparent huge pages, where the kernel allows them on request) a lookup costs one TLB
 * entry instead of a page walk. */
#define HUGE_PAGE (2u << 20)

static void *big_alloc(size_t bytes)
{
    if (bytes < HUGE_PAGE)
        return malloc(bytes);
    void *p;
    size_t rounded = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    if (posix_memalign(&p, HUGE_PAGE, rounded) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return p;
}

static void *big_calloc(size_t bytes)
{
    void *p = big_alloc(bytes);
    if (p != NULL)
        memset(p, 0, bytes);
    return p;
}

/* An anonymous mapping of `bytes` (a multiple of 4096) starting on a 2 MB boundary, on 2 MB pages
 * where the kernel allows them on request, or NULL. Aligned, every 2 MB of it can be a huge page
 * (an unaligned start leaves up to 2 MB before the first boundary on 4 KB pages: up to 511 faults
 * for memory written first). Unmapped with munmap(p, bytes). */
static void *map_huge(size_t bytes, int flags)
{
    uint8_t *m = mmap(NULL, bytes + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > m)
        munmap(m, (size_t)(p - m));
    if (p + bytes < m + bytes + HUGE_PAGE)
        munmap(p + bytes, (size_t)(m + bytes + HUGE_PAGE - (p + bytes)));
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

#include "map_pool.h"

/* A zeroed table of `bytes`, freed with zfree(p, bytes). From 2 MB on it is its own mapping:
 * the kernel's pages are already zero (no memset touching them a second time, which calloc of
 * a reused heap block would need) and can be huge pages from the first touch. */
static void *zalloc(size_t bytes)
{
    if (bytes < HUGE_PAGE)
        return calloc(1, bytes);
    return map_huge((bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE, 0);
}

static void zfree(void *p, size_t bytes)
{
    if (p == NULL)
        return;
    if (bytes < HUGE_PAGE)
        free(p);
    else
        munmap(p, (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
}

/* (left id, right id) -> value, one 8-byte slot each: left | right << 21 | value << 42 (ids and
 * values below 2^21 - 1). When every pair has a priority of its own (merges: the rank) the value
 * is that priority and the merged id is merged_of[value]; otherwise (scores: equal scores share
 * a priority) the value is the merged id and its priority is prio_of[value]. Where priorities
 * rise with the merged ids (direct) the value is the merged id and stands for its priority.
 * Half the bytes of a (key, rank, merged) entry: GPT-2's table fits in L2. */
#define PK_BITS 21
#define PK_LIMIT ((1u << PK_BITS) - 1)
#define PK_KEY ((1ULL << (2 * PK_BITS)) - 1)
#define PAIR_EMPTY 0xFFFFFFFFFFFFFFFFULL
#define NO_VALUE 0xFFFFFFFFu

#define PAIR_FILTER_BITS 21 /* 2**21 bits: 256 KB, L2-resident */

typedef struct {
    uint64_t *tab;
    size_t mask;
    uint64_t shift;   /* 64 - log2(table size): a pair's home slot is the top bits of its hash */
    uint64_t *filter; /* one bit per hash of a pair: most absent pairs are known absent here */
    int by_rank;
    int direct;          /* priority rises with the merged id: the value is both (no by_rank) */
    uint32_t *merged_of; /* by_rank: priority -> merged id */
    uint32_t *prio_of;   /* else: merged id -> priority */
} PairMap;

static inline uint64_t pair_key(uint32_t a, uint32_t b)
{
    return (uint64_t)a | ((uint64_t)b << PK_BITS);
}

/* A pair key's hash: one multiply (Fibonacci hashing). Only its top bits are read: the home
 * slot is the top log2(table size) bits (pair_slot), the filter bit the top PAIR_FILTER_BITS;
 * each bit of the product depends on every key bit below it, so the top ones on all 42. mix64
 * (two shift-xors around the multiply) cost 3 more instructions per pair looked up. */
static inline uint64_t pair_hash(uint64_t key)
{
    return key * 0x9E3779B97F4A7C15ULL;
}

static inline size_t pair_slot(const PairMap *m, uint64_t h)
{
    return (size_t)(h >> m->shift);
}

static inline size_t pair_fbit(uint64_t h)
{
    return (size_t)(h >> (64 - PAIR_FILTER_BITS));
}

/* The value of pair (a, b), whose key and hash are given, or NO_VALUE (no merge; barrier symbols
 * never merge). */
/* The value of pair key `key` (hash h) in a map with a table, or NO_VALUE: the probe alone, for a
 * caller that has ruled out barrier symbols and a missing table (merge_scan_lean's words). */
static inline uint32_t pair_value_lean(const PairMap *m, uint64_t key, uint64_t h)
{
    size_t fb = pair_fbit(h);
    if (!(m->filter[fb >> 6] >> (fb & 63) & 1))
        return NO_VALUE;
    size_t i = pair_slot(m, h);
    for (;;) {
        uint64_t s = m->tab[i];
        if ((s & PK_KEY) == key)
            return (uint32_t)(s >> (2 * PK_BITS));
        if (s == PAIR_EMPTY)
            return NO_VALUE;
        i = (i + 1) & m->mask;
    }
}

static inline uint32_t pair_value_kh(const PairMap *m, uint32_t a, uint32_t b, uint64_t key, uint64_t h)
{
    if ((a | b) & BARRIER || m->tab == NULL)
        return NO_VALUE;
    return pair_value_lean(m, key, h);
}

static inline uint32_t pair_value(const PairMap *m, uint32_t a, uint32_t b)
{
    uint64_t key = pair_key(a, b);
    return pair_value_kh(m, a, b, key, pair_hash(key));
}

static inline void pair_prefetch(const PairMap *m, uint32_t a, uint32_t b)
{
    if (m->tab != NULL)
        __builtin_prefetch(&m->tab[pair_slot(m, pair_hash(pair_key(a, b)))]);
}

static inline uint32_t v_prio(const PairMap *m, uint32_t v)
{
    return v == NO_VALUE ? NO_RANK : (m->by_rank || m->direct) ? v : m->prio_of[v];
}

static inline uint32_t v_merged(const PairMap *m, uint32_t v)
{
    return m->by_rank ? m->merged_of[v] : v;
}

/* token bytes -> id (the whole-token lookup): slots of fingerprint << 32 | id (0: empty), the
 * fingerprint from the key's hash; a fingerprint match is confirmed against the token's bytes. */
typedef struct {
    uint64_t *tab;
    size_t mask;
    uint8_t *blob;
    uint32_t *off, *len; /* per id */
    uint64_t *filter;    /* one bit per hash value's bits 40..56: most absent keys are known absent
                            from this (L2-sized) bitmap, without touching the table */
} WholeMap;

#define FILTER_BITS 20 /* 2**20 bits: 128 KB */

static inline size_t filter_bit(uint64_t h)
{
    return (size_t)(h >> 40) & ((1u << FILTER_BITS) - 1);
}

static inline uint32_t whole_fp(uint64_t h)
{
    return (uint32_t)(h >> 32) | 1;
}

static inline int32_t whole_get(const WholeMap *m, const uint8_t *p, size_t n, uint64_t h)
{
    if (m->tab == NULL || n == 0)
        return -1;
    if (m->filter != NULL && !(m->filter[filter_bit(h) >> 6] >> (filter_bit(h) & 63) & 1))
        return -1;
    uint32_t fp = whole_fp(h);
    size_t i = (size_t)h & m->mask;
    for (;;) {
        uint64_t s = m->tab[i];
        if (s == 0)
            return -1;
        if ((uint32_t)(s >> 32) == fp) {
            uint32_t id = (uint32_t)s;
            if (m->len[id] == n && memcmp(m->blob + m->off[id], p, n) == 0)
                return (int32_t)id;
        }
        i = (i + 1) & m->mask;
    }
}

/* code point -> id of the single-character token (SentencePiece symbols) */
typedef struct {
    uint32_t cp;
    int32_t id;
} CpEntry;

typedef struct {
    int32_t *bmp;  /* 0x10000 entries, -1 = none */
    CpEntry *tab;  /* code points above the BMP */
    size_t mask;
} CpMap;

static inline int32_t cpmap_get(const CpMap *m, uint32_t c)
{
    if (c < 0x10000)
        return m->bmp[c];
    if (m->tab == NULL)
        return -1;
    size_t i = (size_t)mix64(c) & m->mask;
    for (;;) {
        const CpEntry *e = &m->tab[i];
        if (e->cp == c)
            return e->id;
        if (e->cp == DEAD)
            return -1;
        i = (i + 1) & m->mask;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* encoder, cache slots, per-call context */

typedef struct {
    uint32_t *v;
    size_t n, cap;
} IdVec;

/* A cached piece. klen == 0: empty. klen <= SHORT_KEY: k0, k1 are the key; else k0 is its hash
 * and k1 its offset in `keys`. nids & ~USED <= INLINE_IDS: the ids are inline; else ids[0] is
 * their offset in `vals`. */
typedef struct {
    uint64_t k0, k1;
    uint16_t klen;
    uint16_t nids;
    uint32_t ids[INLINE_IDS];
} CEntry;

struct Shared;

typedef struct {
    CEntry *front; /* direct-mapped copies of recently used entries (L2-sized), cleared by a sweep */
    CEntry *tab;
    uint32_t mask, count, limit;
    uint8_t *keys;
    size_t kn, kcap;
    uint32_t *vals;
    size_t vn, vcap;
    uint64_t sweeps;
    /* a batch worker's view of the shared cache (see "the shared piece cache"): tab, keys, vals
     * are the shared ones, front is the worker's own; NULL: a private cache */
    struct Shared *shared;
    uint32_t credits;     /* inserts this worker may still make without taking more */
    size_t kpos, kend;    /* the worker's chunk of the shared keys arena */
    size_t vpos, vend;    /* and of the shared vals arena */
    int full;             /* the shared cache took no more: the worker goes back to its slot's */
} Cache;

struct Encoder;
struct Slot;

typedef struct {
    uint32_t a, n; /* byte offset in the text, length */
} Span;

typedef struct {
    const struct Encoder *E;
    struct Slot *slot; /* NULL: no slot (all slots busy, or splitter test mode) */
    Cache *cache;      /* the slot's piece cache, a batch worker's view of the shared one, or NULL */
    IdVec *out;
    int collect;
    int sur;             /* set_text: the converted str held a surrogate code unit */
    const uint8_t *text; /* the current text, UTF-8 */
    size_t tlen;
    size_t readable;     /* bytes readable from text (tlen, or tlen + PAD for a converted text) */
    size_t nspan;
    Span span[BATCH];
    uint64_t kh[BATCH], k0[BATCH], k1[BATCH];
    uint8_t *u8;  /* a converted text */
    size_t u8cap;
    uint8_t *cls; /* byte-level: the text's class array (split_utf8.h) */
    size_t clscap;
    uint32_t *sym, *rk, *mg, *cps;
    int32_t *nxt, *prv;
    uint64_t *heap;
    size_t symcap;
    uint32_t *rids; /* flush: the ids of a batch's pieces the front did not answer */
    size_t ridcap;
} Ctx;

typedef struct Slot {
    pthread_mutex_t lock;
    int gen; /* fork_gen when its lock was last taken */
    Cache cache;
    Ctx ctx;
    IdVec out;
} Slot;

typedef struct Encoder {
    PyObject_HEAD
    int kind;
    int nstages;
    int stages[MAX_STAGES];
    int32_t byte_ids[256];
    int32_t fallback_ids[256];
    int32_t unk_id;
    int ignore_merges;
    int byte_fallback;
    int sp_split;
    int fuse_unk; /* a run of unknown characters in one piece is one unk (tokenizers' merge_word) */
    int all_bytes; /* every byte has a symbol (byte_ids[b] >= 0): a byte-level piece maps byte by byte */
    PairMap pairs;
    uint32_t *bytepair; /* byte-level: [b1 << 8 | b2] -> the byte symbols' pair value, or NO_VALUE */
    int lean; /* byte-level, PairMap.direct, a pair table: 1, the merge loop's lean builds
                 (merge_scan_lean, merge_blocks_lean); 2, their SSE4.1 builds (the CPU has it);
                 at most RMLPREP_NATIVE_LEAN (lean_limit) */
    uint64_t *joinable; /* byte-level: bit b1 << 8 | b2 set when some merge joins a symbol ending in
                           byte b1 to one starting with b2; NULL: pieces are never cut (resolve_parts) */
    WholeMap whole;
    CpMap cps;
    Py_ssize_t n_ids; /* every id the Encoder writes is below this, and in the int table (ints_reserve) */
    Slot slots[N_SLOTS];
    struct Shared *shared; /* the batches' shared piece cache (NULL until a batch of 2+ workers) */
    pthread_mutex_t shared_lock; /* held by the batch using it */
    int shared_gen;               /* fork_gen when shared_lock was last taken */
} Encoder;

/* ---------------------------------------------------------------------------------------- */
/* buffers */

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (q == NULL)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* The piece cache's arenas (long keys, long id lists) double as grow()'s buffers do, but from 2 MB
 * on an arena is its own mapping (map_huge) and doubles by mremap, which moves its pages to the
 * new place instead of copying them into fresh ones: a realloc copied each doubling's whole arena
 * into new heap pages, 0.6-0.9 k of the ~2.5 k page faults of a cold batch worker (perf, GPT-2 on
 * text-multilingual.jsonl). `used` elements are kept. Freed with arena_free(p, *cap, elem). */
static int arena_grow(void **p, size_t *cap, size_t used, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    size_t ob = *cap * elem, nb = c * elem;
    void *q;
    if (nb < HUGE_PAGE) {
        if ((q = realloc(*p, nb)) == NULL)
            return -1;
    } else if ((q = map_huge(nb, 0)) == NULL) {
        return -1;
    } else if (ob < HUGE_PAGE) { /* the first mapping: the small arena copied in once */
        if (used)
            memcpy(q, *p, used * elem);
        free(*p);
    } else {
#if defined(MREMAP_MAYMOVE) && defined(MREMAP_FIXED) && !defined(FASTBPE_NO_MREMAP)
        /* the old mapping moved over the new one (aligned: its 2 MB pages move whole) */
        void *r = mremap(*p, ob, nb, MREMAP_MAYMOVE | MREMAP_FIXED, q);
        if (r == MAP_FAILED) {
            munmap(q, nb);
            return -1;
        }
#else
        /* no mremap (Linux only: macOS, the BSDs; -DFASTBPE_NO_MREMAP tries this on Linux): copied */
        if (used)
            memcpy(q, *p, used * elem);
        munmap(*p, ob);
#endif
    }
    *p = q;
    *cap = c;
    return 0;
}

static void arena_free(void *p, size_t cap, size_t elem)
{
    if (p == NULL)
        return;
    if (cap * elem < HUGE_PAGE)
        free(p);
    else
        munmap(p, cap * elem);
}

static inline int reserve_out(IdVec *o, size_t extra)
{
    if (o->n + extra <= o->cap)
        return 0;
    return grow((void **)&o->v, &o->cap, o->n + extra, 4);
}

static int reserve_syms(Ctx *x, size_t n)
{
    if (n <= x->symcap)
        return 0;
    size_t c = pow2_at_least(n);
    uint32_t **u32s[] = {&x->sym, &x->rk, &x->mg, &x->cps};
    for (size_t k = 0; k < 4; k++) {
        uint32_t *q = realloc(*u32s[k], c * 4);
        if (q == NULL)
            return -1;
        *u32s[k] = q;
    }
    int32_t *nxt = realloc(x->nxt, c * 4), *prv;
    if (nxt == NULL)
        return -1;
    x->nxt = nxt;
    if ((prv = realloc(x->prv, c * 4)) == NULL)
        return -1;
    x->prv = prv;
    uint64_t *heap = realloc(x->heap, c * 16); /* live pairs + stale entries < 2 per symbol */
    if (heap == NULL)
        return -1;
    x->heap = heap;
    x->symcap = c;
    return 0;
}

static void ctx_free_scratch(Ctx *x)
{
    free(x->u8);
    free(x->cls);
    x->cls = NULL;
    x->clscap = 0;
    free(x->sym);
    free(x->rk);
    free(x->mg);
    free(x->cps);
    free(x->nxt);
    free(x->prv);
    free(x->heap);
    free(x->rids);
    x->rids = NULL;
    x->ridcap = 0;
    x->u8 = NULL;
    x->sym = x->rk = x->mg = x->cps = NULL;
    x->nxt = x->prv = NULL;
    x->heap = NULL;
    x->u8cap = x->symcap = 0;
}

static void ctx_trim(Ctx *x)
{
    if (x->u8cap > SCRATCH_KEEP || x->clscap > SCRATCH_KEEP || x->symcap * 32 > SCRATCH_KEEP ||
        x->ridcap * 4 > SCRATCH_KEEP)
        ctx_free_scratch(x);
}

static inline int push_id(Ctx *x, uint32_t t)
{
    IdVec *o = x->out;
    if (o->n == o->cap && grow((void **)&o->v, &o->cap, o->n + 1, 4) < 0)
        return -1;
    o->v[o->n++] = t;
    return 0;
}

static inline uint8_t *put_utf8(uint8_t *o, uint32_t c)
{
    if (c < 0x80) {
        *o++ = (uint8_t)c;
    } else if (c < 0x800) {
        *o++ = (uint8_t)(0xC0 | (c >> 6));
        *o++ = (uint8_t)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) { /* lone surrogates too, as "surrogatepass" writes them */
        *o++ = (uint8_t)(0xE0 | (c >> 12));
        *o++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        *o++ = (uint8_t)(0x80 | (c & 0x3F));
    } else {
        *o++ = (uint8_t)(0xF0 | (c >> 18));
        *o++ = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
        *o++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        *o++ = (uint8_t)(0x80 | (c & 0x3F));
    }
    return o;
}

#include "split_utf8.h"

/* ---------------------------------------------------------------------------------------- */
/* str -> UTF-8 (surrogatepass), once per text */

/* Bytes of n code units of `kind` in UTF-8 at most. */
static inline size_t utf8_bound(int kind, size_t n)
{
    return n * (kind == PyUnicode_1BYTE_KIND ? 2 : kind == PyUnicode_2BYTE_KIND ? 3 : 4);
}

/* One code point to UTF-8 at *o and, when *k is not NULL, its class on each of its bytes;
 * with sp, a space is written as U+2581 (SentencePiece text). */
static inline void put_cp(uint8_t **o, uint8_t **k, uint32_t c, int sp)
{
    uint8_t *o0 = *o;
    if (sp && c == ' ')
        c = 0x2581;
    *o = put_utf8(o0, c);
    if (*k) { /* one 4-byte store (the class array has PAD bytes of room past the text) */
        uint32_t w = (c < 0x80 ? ASCII_CLS[c] : (uint8_t)cls_cp(c)) * 0x01010101u;
        memcpy(*k, &w, 4);
        *k += *o - o0;
    }
}

/* Code points below U+0800 (ASCII, Latin-1, Latin Extended, Greek, Cyrillic, Armenian, Hebrew,
 * Arabic, ...): the UTF-8 bytes (one or two) in bits 0-15, the class twice in bits 16-31, the
 * length from bit 32 (filled at import). 16 KB. */
static uint64_t U2_TAB[0x800];

/* A byte-level code point below U+0800 to UTF-8 at *o and its class on each byte at *k, without a
 * branch: both 2-byte stores are made whatever the length (the buffers have PAD bytes of room). */
static inline void put_small(uint8_t **o, uint8_t **k, uint32_t c)
{
    uint64_t e = U2_TAB[c];
    uint16_t u = (uint16_t)e, w = (uint16_t)(e >> 16);
    memcpy(*o, &u, 2);
    memcpy(*k, &w, 2);
    size_t l = (size_t)(e >> 32);
    *o += l;
    *k += l;
}

static inline int has_space8(uint64_t v) /* a 0x20 byte among 8 ASCII bytes */
{
    uint64_t x = v ^ 0x2020202020202020ULL;
    return ((x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL) != 0;
}

/* A str's code units to UTF-8 (and, byte-level, its class array). Always inlined into set_text,
 * whose calls pass k and sp as constants (byte-level: the class array, no U+2581; SentencePiece:
 * no class array, U+2581), so put_cp does not test sp (nor, SentencePiece, k) per character.
 * Where 16 code units hold a non-ASCII one, the 16 are converted one by one: testing each
 * position again for an ASCII block cost ~20 instructions per character of a run of letters
 * outside ASCII (Cyrillic, Greek, Chinese). */
static inline __attribute__((always_inline)) size_t to_utf8_1(const uint8_t *s, size_t n, uint8_t *o0, uint8_t *k,
                                                              int sp)
{
    uint8_t *o = o0;
    size_t i = 0;
    while (i < n) {
#if defined(__SSE2__)
        if (k && simd_classes_ok && i + 16 <= n) { /* byte-level: 16 ASCII characters at once */
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
            if (!_mm_movemask_epi8(v)) {
                _mm_storeu_si128((__m128i *)o, v);
                _mm_storeu_si128((__m128i *)k, ascii_classes16(v));
                o += 16;
                k += 16;
                i += 16;
                continue;
            }
            for (size_t e = i + 16; i < e; i++) /* a non-ASCII one among them: the 16 one by one */
                put_small(&o, &k, s[i]);
            continue;
        }
#endif
        if (k) { /* byte-level, the last characters (or no SSE2) */
            put_small(&o, &k, s[i++]);
            continue;
        }
        if (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (!(v & 0x8080808080808080ULL) && !(sp && has_space8(v))) {
                memcpy(o, &v, 8);
                if (k)
                    for (int q = 0; q < 8; q++)
                        *k++ = ASCII_CLS[o[q]];
                o += 8;
                i += 8;
                continue;
            }
        }
        put_cp(&o, &k, s[i++], sp);
    }
    return (size_t)(o - o0);
}

static inline __attribute__((always_inline)) size_t to_utf8_2(const uint16_t *s, size_t n, uint8_t *o0, uint8_t *k,
                                                              int sp, int *sur)
{
    uint8_t *o = o0;
    size_t i = 0;
    unsigned bad = 0; /* a surrogate code unit seen (tested only off the ASCII and < U+0800 paths) */
    while (i < n) {
#if defined(__SSE2__)
        if (k && simd_classes_ok && i + 16 <= n) { /* byte-level: 16 ASCII characters at once */
            __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 8));
            __m128i hi = _mm_and_si128(_mm_or_si128(a, b), _mm_set1_epi16((short)0xFF80));
            if (_mm_movemask_epi8(_mm_cmpeq_epi16(hi, _mm_setzero_si128())) == 0xFFFF) {
                __m128i v = _mm_packus_epi16(a, b);
                _mm_storeu_si128((__m128i *)o, v);
                _mm_storeu_si128((__m128i *)k, ascii_classes16(v));
                o += 16;
                k += 16;
                i += 16;
                continue;
            }
            for (size_t e = i + 16; i < e; i++) { /* a non-ASCII one among them: the 16 one by one */
                if (s[i] < 0x800)
                    put_small(&o, &k, s[i]);
                else {
                    bad |= (uint32_t)s[i] - 0xD800u < 0x800u;
                    put_cp(&o, &k, s[i], sp);
                }
            }
            continue;
        }
#endif
        if (k && s[i] < 0x800) { /* byte-level, the last characters (or no SSE2) */
            put_small(&o, &k, s[i++]);
            continue;
        }
        if (i + 4 <= n) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (!(v & 0xFF80FF80FF80FF80ULL) && !(sp && has_space8(v | 0xFF00FF00FF00FF00ULL))) {
                for (int q = 0; q < 4; q++)
                    o[q] = (uint8_t)s[i + q];
                if (k)
                    for (int q = 0; q < 4; q++)
                        *k++ = ASCII_CLS[o[q]];
                o += 4;
                i += 4;
                continue;
            }
        }
        bad |= (uint32_t)s[i] - 0xD800u < 0x800u;
        put_cp(&o, &k, s[i++], sp);
    }
    *sur = (int)bad;
    return (size_t)(o - o0);
}

static inline __attribute__((always_inline)) size_t to_utf8_4(const uint32_t *s, size_t n, uint8_t *o0, uint8_t *k,
                                                              int sp, int *sur)
{
    uint8_t *o = o0;
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad |= s[i] - 0xD800u < 0x800u;
        put_cp(&o, &k, s[i], sp);
    }
    *sur = (int)bad;
    return (size_t)(o - o0);
}

/* UTF-8 with every space written as U+2581 (E2 96 81). */
static size_t utf8_sp(const uint8_t *s, size_t n, uint8_t *o0)
{
    uint8_t *o = o0;
    while (n) {
        const uint8_t *q = memchr(s, ' ', n);
        size_t run = q ? (size_t)(q - s) : n;
        memcpy(o, s, run);
        o += run;
        if (!q)
            break;
        *o++ = 0xE2;
        *o++ = 0x96;
        *o++ = 0x81;
        s = q + 1;
        n -= run + 1;
    }
    return (size_t)(o - o0);
}

#define KIND_UTF8 0 /* set_text: the data is UTF-8 bytes */

/* Bytes of a text after set_text at most (SentencePiece spells a space in 3), and so its ids at
 * most: every id covers at least one byte (a merge of byte or code-point symbols, a byte
 * fallback, an unk for a whole character). */
static inline size_t text_bound(int sp, int kind, int ascii, size_t n)
{
    if (kind == KIND_UTF8 || ascii)
        return sp ? 3 * n : n;
    return sp && kind == PyUnicode_1BYTE_KIND ? 3 * n : utf8_bound(kind, n);
}

/* Point x->text at the UTF-8 of a text: a str's data (kind 1, 2, 4; an ASCII str read in place)
 * or UTF-8 bytes (KIND_UTF8, read in place). x->sur: whether a converted str held a surrogate
 * code unit (found during the conversion, so no second scan; 0 for in-place text). Byte-level: x->cls gets its class array.
 * SentencePiece: spaces become U+2581 here (the text is always copied). -1: out of memory. */
static int set_text(Ctx *x, const void *data, int kind, int ascii, size_t n)
{
    int byte_level = x->E->kind == KIND_BYTE_LEVEL, sp = !byte_level;
    int in_place = byte_level && (ascii || kind == KIND_UTF8);
    size_t bound = text_bound(sp, kind, ascii, n);
    if (byte_level && bound + PAD > x->clscap && grow((void **)&x->cls, &x->clscap, bound + PAD, 1) < 0)
        return -1;
    uint8_t *k = byte_level ? x->cls : NULL;
    x->sur = 0;
    if (in_place) {
        x->text = data;
        x->tlen = n;
        x->readable = n;
        classify_utf8(data, n, k);
    } else {
        if (bound + PAD > x->u8cap && grow((void **)&x->u8, &x->u8cap, bound + PAD, 1) < 0)
            return -1;
        size_t m;
        int sur = 0;
        if (kind == KIND_UTF8 || ascii)
            m = utf8_sp(data, n, x->u8); /* SentencePiece (byte-level reads these in place) */
        else if (kind == PyUnicode_1BYTE_KIND) /* constant k, sp: a copy of each for each kind of text */
            m = byte_level ? to_utf8_1(data, n, x->u8, k, 0) : to_utf8_1(data, n, x->u8, NULL, 1);
        else if (kind == PyUnicode_2BYTE_KIND)
            m = byte_level ? to_utf8_2(data, n, x->u8, k, 0, &sur) : to_utf8_2(data, n, x->u8, NULL, 1, &sur);
        else
            m = byte_level ? to_utf8_4(data, n, x->u8, k, 0, &sur) : to_utf8_4(data, n, x->u8, NULL, 1, &sur);
        memset(x->u8 + m, 0, PAD);
        x->text = x->u8;
        x->tlen = m;
        x->readable = m + PAD;
        x->sur = sur;
    }
    if (k)
        memset(x->cls + x->tlen, 0, PAD);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* piece cache */

static void cache_free(Cache *c)
{
    free(c->front);
    if (c->tab)
        zfree(c->tab, ((size_t)c->mask + 1) * sizeof(CEntry));
    arena_free(c->keys, c->kcap, 1);
    arena_free(c->vals, c->vcap, 4);
    memset(c, 0, sizeof(*c));
}

static inline uint64_t entry_hash(const CEntry *e)
{
    return e->klen <= SHORT_KEY ? hash_short(e->k0, e->k1, e->klen) : e->k0;
}

/* Put entry src, whose hash is h (entry_hash), in the first free slot from its home. */
static inline void cache_place_h(Cache *c, const CEntry *src, uint64_t h)
{
    size_t i = (size_t)h & c->mask;
    while (c->tab[i].klen != 0)
        i = (i + 1) & c->mask;
    c->tab[i] = *src;
    c->count++;
}

static void cache_place(Cache *c, const CEntry *src)
{
    cache_place_h(c, src, entry_hash(src));
}

/* Every entry of the old table (`size` slots) placed in c's new one. The new table is fresh memory
 * several times the old one's size, read at random: each entry's home slot is requested
 * REHASH_AHEAD entries before it is placed, so the misses overlap instead of coming one at a time. */
#define REHASH_AHEAD 16
static void cache_rehash(Cache *c, const CEntry *old, size_t size)
{
    const CEntry *q[REHASH_AHEAD];
    uint64_t qh[REHASH_AHEAD];
    size_t nq = 0;
    for (size_t i = 0; i < size; i++) {
        if (!old[i].klen)
            continue;
        uint64_t h = entry_hash(&old[i]);
        __builtin_prefetch(&c->tab[(size_t)h & c->mask], 1);
        size_t k = nq % REHASH_AHEAD;
        if (nq >= REHASH_AHEAD)
            cache_place_h(c, q[k], qh[k]);
        q[k] = &old[i];
        qh[k] = h;
        nq++;
    }
    for (size_t j = nq > REHASH_AHEAD ? nq - REHASH_AHEAD : 0; j < nq; j++)
        cache_place_h(c, q[j % REHASH_AHEAD], qh[j % REHASH_AHEAD]);
}

static int cache_alloc(Cache *c, size_t slots)
{
    CEntry *t = zalloc(slots * sizeof(CEntry));
    if (t == NULL)
        return -1;
    c->tab = t;
    c->mask = (uint32_t)(slots - 1);
    c->count = 0;
    c->limit = (uint32_t)(slots / 8 * 5);
    return 0;
}

/* Full: keep the entries hit since the last sweep (their arena data compacted), drop the rest;
 * if that still leaves it over half full, drop everything. Failures leave it empty. */
static void cache_sweep(Cache *c)
{
    CEntry *old = c->tab;
    size_t size = (size_t)c->mask + 1, kept = 0;
    for (size_t i = 0; i < size; i++)
        kept += old[i].klen && (old[i].nids & USED);
    uint8_t *okeys = c->keys;
    uint32_t *ovals = c->vals;
    size_t okcap = c->kcap, ovcap = c->vcap;
    c->keys = NULL;
    c->vals = NULL;
    c->kn = c->kcap = c->vn = c->vcap = 0;
    c->sweeps++;
    if (c->front)
        memset(c->front, 0, sizeof(CEntry) << FRONT_BITS); /* its arena offsets are stale */
    if (cache_alloc(c, size) < 0) {
        c->tab = old;
        memset(old, 0, size * sizeof(CEntry));
        c->count = 0;
        arena_free(okeys, okcap, 1);
        arena_free(ovals, ovcap, 4);
        return;
    }
    if (kept * 2 <= c->limit) {
        for (size_t i = 0; i < size; i++) {
            CEntry e = old[i];
            if (!e.klen || !(e.nids & USED))
                continue;
            e.nids &= ~USED;
            if (e.klen > SHORT_KEY) {
                if (arena_grow((void **)&c->keys, &c->kcap, c->kn, c->kn + e.klen, 1) < 0)
                    continue;
                memcpy(c->keys + c->kn, okeys + e.k1, e.klen);
                e.k1 = c->kn;
                c->kn += e.klen;
            }
            if (e.nids > INLINE_IDS) {
                if (arena_grow((void **)&c->vals, &c->vcap, c->vn, c->vn + e.nids + ARENA_PAD, 4) < 0)
                    continue;
                memcpy(c->vals + c->vn, ovals + e.ids[0], (size_t)e.nids * 4);
                e.ids[0] = (uint32_t)c->vn;
                c->vn += e.nids;
            }
            cache_place(c, &e);
        }
    }
    zfree(old, size * sizeof(CEntry));
    arena_free(okeys, okcap, 1);
    arena_free(ovals, ovcap, 4);
}

static inline CEntry *front_slot(const Cache *c, uint64_t h)
{
    return &c->front[h >> (64 - FRONT_BITS)];
}

/* A new entry's lengths, and its key and ids where they are inline; the caller stores a long key
 * (k0 = its hash, k1 = its offset) and long ids (ids[0] = their offset) where its cache keeps them. */
static inline __attribute__((always_inline)) void centry_init(CEntry *e, size_t n, uint64_t k0, uint64_t k1,
                                                              const uint32_t *ids, size_t m)
{
    e->klen = (uint16_t)n;
    e->nids = (uint16_t)m;
    if (n <= SHORT_KEY) {
        e->k0 = k0;
        e->k1 = k1;
    }
    if (m <= INLINE_IDS) {
        memset(e->ids, 0, sizeof(e->ids));
        memcpy(e->ids, ids, m * 4);
    }
}

/* Remember piece -> ids (in the table and the front); failures only mean it is not kept. Always
 * inlined: with a second caller (resolve_part) gcc called it out of line, 1.2% more instructions
 * in a cold Llama 3 pass (callgrind). */
static inline __attribute__((always_inline)) void pcache_put(Cache *c, uint64_t h, const uint8_t *p, size_t n,
                                                            uint64_t k0, uint64_t k1, const uint32_t *ids, size_t m)
{
    if (n == 0 || n > CACHE_KEY_MAX || m > 0x7FFF)
        return;
    /* the front first: a table implies a front (every lookup of a table probes the front first;
     * a table left without one by a failed calloc was a NULL read at the next lookup) */
    if (c->front == NULL && (c->front = calloc((size_t)1 << FRONT_BITS, sizeof(CEntry))) == NULL)
        return;
    if (c->tab == NULL && cache_alloc(c, CACHE_SLOTS_MIN) < 0)
        return;
    if ((n > SHORT_KEY && c->kn + n > CACHE_KEYS_MAX) || (m > INLINE_IDS && c->vn + m > CACHE_VALS_MAX))
        cache_sweep(c);
    if (c->count + 1 > c->limit) {
        size_t size = (size_t)c->mask + 1;
        if (size >= CACHE_SLOTS_MAX) {
            cache_sweep(c);
        } else {
            /* four times the slots (CACHE_SLOTS_MIN to MAX are powers of 4): a cold pass places each
             * entry 1.3-1.5 times where doubling placed it 2-2.5 times (a growth places again every entry
             * of the table it leaves), and the table is 5/32 to 5/8 full */
            CEntry *old = c->tab;
            if (cache_alloc(c, size * 4) < 0) {
                c->tab = old;
                return;
            }
            cache_rehash(c, old, size);
            zfree(old, size * sizeof(CEntry));
        }
        if (c->tab == NULL)
            return;
    }
    CEntry e;
    centry_init(&e, n, k0, k1, ids, m);
    if (n > SHORT_KEY) {
        if (arena_grow((void **)&c->keys, &c->kcap, c->kn, c->kn + n, 1) < 0)
            return;
        memcpy(c->keys + c->kn, p, n);
        e.k0 = h;
        e.k1 = c->kn;
        c->kn += n;
    }
    if (m > INLINE_IDS) {
        if (arena_grow((void **)&c->vals, &c->vcap, c->vn, c->vn + m + ARENA_PAD, 4) < 0)
            return;
        memcpy(c->vals + c->vn, ids, m * 4);
        e.ids[0] = (uint32_t)c->vn;
        c->vn += m;
    }
    cache_place_h(c, &e, h); /* h is entry_hash(&e): hash_key's, as the caller computed it */
    *front_slot(c, h) = e;
}

static inline int entry_is(const Cache *c, const CEntry *e, uint64_t h, const uint8_t *p, size_t n,
                           uint64_t k0, uint64_t k1)
{
    if (n <= SHORT_KEY)
        return e->klen == n && e->k0 == k0 && e->k1 == k1;
    return e->klen == n && e->k0 == h && memcmp(c->keys + e->k1, p, n) == 0;
}

static inline long entry_ids(const Cache *c, const CEntry *e, uint32_t *dst)
{
    size_t m = e->nids & ~USED;
    if (m <= INLINE_IDS)
        memcpy(dst, e->ids, sizeof(e->ids));
    else
        memcpy(dst, c->vals + e->ids[0], m * 4);
    return (long)m;
}

/* The ids of a cached piece written at dst (room for max(n, INLINE_IDS) ids), their count, or -1.
 * The front is tried first; a hit in the table marks the entry used and copies it to the front. */
static inline long pcache_get(Cache *c, uint64_t h, const uint8_t *p, size_t n, uint64_t k0, uint64_t k1,
                             uint32_t *dst)
{
    CEntry *f = front_slot(c, h);
    if (entry_is(c, f, h, p, n, k0, k1))
        return entry_ids(c, f, dst);
    size_t i = (size_t)h & c->mask;
    CEntry *e;
    for (;;) {
        e = &c->tab[i];
        if (entry_is(c, e, h, p, n, k0, k1))
            break;
        if (e->klen == 0)
            return -1;
        i = (i + 1) & c->mask;
    }
    e->nids |= USED;
    *f = *e;
    return entry_ids(c, e, dst);
}

/* ---------------------------------------------------------------------------------------- */
/* the shared piece cache */

/* A batch of 2+ workers shares one piece cache (E->shared), so a piece one worker has merged is a
 * hit for the others: with a cache each, every worker learned the common pieces cold (GPT-2, one
 * cold batch: 2 x 112-148 k entries against 230 k on one thread on the Debian sample, +13%; +7.7%
 * on text-multilingual.jsonl). One batch holds it at a time (E->shared_lock, try-locked; a batch
 * that does not get it uses the slots' caches, as a 1-worker batch and every other call do).
 *
 * It never grows, sweeps or moves while a batch runs: before the workers start, shared_prepare
 * (alone) grows it to take the batch's text at one new entry per SHARED_BYTES_PER_ENTRY, or sweeps
 * it as a slot's cache is swept. During the batch entries are only added. A worker claims an empty
 * entry by a CAS of its klen from 0 to KLEN_BUSY, writes the entry, then stores klen with release;
 * a reader loads klen with acquire and reads the rest only when it is its key's length (KLEN_BUSY
 * never is), so what it reads was written before that store and is never written again; the one
 * later write is the USED bit of nids, a relaxed atomic store read by relaxed atomic loads. Two
 * workers missing the same piece at once may both add it (the same ids: the second is never found).
 * A worker takes insert credits (SHARED_CREDITS at a time) from `count` and chunks of the arenas
 * from `kn`/`vn` by atomic fetch-add, so no shared counter is written per insert; a worker that
 * finds the table or an arena full goes back to its slot's cache for the rest of the batch. Each
 * entry's ids in the vals arena are padded with zeros to a multiple of 8: copy_ids8 reads 8 at a
 * time, and must not read ids another worker may be writing. Each worker reads through its own
 * front (front[t], copies of entries it found or added), so a hit writes nothing shared. */
#define KLEN_BUSY 0xFFFFu
#define SHARED_CREDITS 256
#define SHARED_CHUNK (16u << 10)     /* bytes of keys, and ids of vals, taken at a time */
/* a batch's text bytes per new entry it may add (GPT-2: 27 on the first 2.9 MB of
 * text-multilingual.jsonl, 49-72 over whole corpora) */
#define SHARED_BYTES_PER_ENTRY 24
#define SHARED_KEYS_BYTES ((size_t)CACHE_KEYS_MAX)
#define SHARED_VALS_IDS ((size_t)CACHE_VALS_MAX)

typedef struct Shared {
    CEntry *tab;
    uint32_t mask, limit;
    uint32_t count;  /* entries, + the credits the workers hold during a batch */
    uint8_t *keys;   /* SHARED_KEYS_BYTES, reserved (pages touched as used) */
    size_t kn;       /* bytes used (during a batch: handed out in chunks) */
    uint32_t *vals;  /* SHARED_VALS_IDS, reserved */
    size_t vn;
    uint64_t sweeps;
    CEntry *front[MAX_THREADS]; /* worker t's front */
} Shared;

static void shared_free(Shared *S)
{
    if (S == NULL)
        return;
    if (S->tab)
        zfree(S->tab, ((size_t)S->mask + 1) * sizeof(CEntry));
    if (S->keys)
        munmap(S->keys, SHARED_KEYS_BYTES);
    if (S->vals)
        munmap(S->vals, SHARED_VALS_IDS * 4);
    for (int t = 0; t < MAX_THREADS; t++)
        free(S->front[t]);
    free(S);
}

static void table_place(CEntry *tab, uint32_t mask, const CEntry *src)
{
    size_t i = (size_t)entry_hash(src) & mask;
    while (tab[i].klen != 0)
        i = (i + 1) & mask;
    tab[i] = *src;
}

/* A table of `size` slots holding the entries of the old one (all, or with `sweep` those hit since
 * the last sweep, their arena data compacted into fresh arenas, or none if they would fill more
 * than half of it). No worker runs. 0, or -1 leaving S as it was. */
static int shared_rebuild(Shared *S, size_t size, int sweep)
{
    size_t osize = S->tab ? (size_t)S->mask + 1 : 0;
    uint32_t limit = (uint32_t)(size / 8 * 5);
    size_t kept = 0;
    for (size_t i = 0; i < osize; i++)
        kept += S->tab[i].klen && (!sweep || (S->tab[i].nids & USED));
    int keep = !sweep || kept * 2 <= limit;
    CEntry *t = zalloc(size * sizeof(CEntry));
    uint8_t *keys = sweep ? map_huge(SHARED_KEYS_BYTES, MAP_NORESERVE) : S->keys;
    uint32_t *vals = sweep ? map_huge(SHARED_VALS_IDS * 4, MAP_NORESERVE) : S->vals;
    if (t == NULL || keys == NULL || vals == NULL) {
        if (t)
            zfree(t, size * sizeof(CEntry));
        if (sweep && keys)
            munmap(keys, SHARED_KEYS_BYTES);
        if (sweep && vals)
            munmap(vals, SHARED_VALS_IDS * 4);
        return -1;
    }
    size_t kn = sweep ? 0 : S->kn, vn = sweep ? 0 : S->vn, count = 0;
    for (size_t i = 0; keep && i < osize; i++) {
        CEntry e = S->tab[i];
        if (!e.klen || (sweep && !(e.nids & USED)))
            continue;
        if (sweep) {
            e.nids &= ~USED;
            if (e.klen > SHORT_KEY) {
                memcpy(keys + kn, S->keys + e.k1, e.klen);
                e.k1 = kn;
                kn += e.klen;
            }
            if (e.nids > INLINE_IDS) {
                size_t m = e.nids, r = (m + 7) & ~(size_t)7;
                memcpy(vals + vn, S->vals + e.ids[0], r * 4);
                e.ids[0] = (uint32_t)vn;
                vn += r;
            }
        }
        table_place(t, (uint32_t)(size - 1), &e);
        count++;
    }
    if (S->tab)
        zfree(S->tab, osize * sizeof(CEntry));
    if (sweep) {
        munmap(S->keys, SHARED_KEYS_BYTES);
        munmap(S->vals, SHARED_VALS_IDS * 4);
        S->sweeps++;
        for (int k = 0; k < MAX_THREADS; k++) /* their arena offsets are stale */
            if (S->front[k])
                memset(S->front[k], 0, sizeof(CEntry) << FRONT_BITS);
    }
    S->tab = t;
    S->mask = (uint32_t)(size - 1);
    S->limit = limit;
    S->count = (uint32_t)count;
    S->keys = keys;
    S->vals = vals;
    S->kn = kn;
    S->vn = vn;
    return 0;
}

/* Before a batch whose text is `bytes` (no worker runs): room for its expected new entries, the
 * table doubled up to CACHE_SLOTS_MAX; swept when that is not enough and it is over half full, or
 * an arena is over 3/4 used. 0, or -1: not usable for this batch. */
static int shared_prepare(Shared *S, uint64_t bytes)
{
    if (S->keys == NULL) {
        S->keys = map_huge(SHARED_KEYS_BYTES, MAP_NORESERVE);
        S->vals = map_huge(SHARED_VALS_IDS * 4, MAP_NORESERVE);
        if (S->keys == NULL || S->vals == NULL)
            return -1;
    }
    size_t want = (size_t)S->count + (size_t)(bytes / SHARED_BYTES_PER_ENTRY) + SHARED_CREDITS * MAX_THREADS;
    size_t size = S->tab ? (size_t)S->mask + 1 : CACHE_SLOTS_MIN / 2, grown = size;
    while (grown < CACHE_SLOTS_MAX && grown / 8 * 5 < want)
        grown *= 2;
    int sweep = (grown / 8 * 5 < want && S->count * 2 > S->limit) || S->kn > SHARED_KEYS_BYTES / 4 * 3 ||
                S->vn > SHARED_VALS_IDS / 4 * 3;
    if ((grown != size || sweep || S->tab == NULL) && shared_rebuild(S, grown, sweep) < 0)
        return S->tab ? 0 : -1; /* kept as it is: a full table sends the workers to their slots */
    return 0;
}

/* Before a batch on one worker (its slot's cache), whose text is `bytes`: the table grown at once to
 * the size its 4x steps would reach for one new entry per SHARED_BYTES_PER_ENTRY bytes (as the
 * shared cache is sized), capped at CACHE_SLOTS_MAX, so the batch does not place the table's
 * entries again at every step. Failure leaves the table as it was. */
static void cache_presize(Cache *c, uint64_t bytes)
{
    size_t want = (size_t)c->count + (size_t)(bytes / SHARED_BYTES_PER_ENTRY);
    size_t size = c->tab ? (size_t)c->mask + 1 : 0, grown = CACHE_SLOTS_MIN;
    while (grown < CACHE_SLOTS_MAX && grown / 8 * 5 < want)
        grown *= 4;
    if (grown <= size || grown == CACHE_SLOTS_MIN)
        return; /* as large already, or the first table a put makes */
    if (c->front == NULL && (c->front = calloc((size_t)1 << FRONT_BITS, sizeof(CEntry))) == NULL)
        return; /* a table implies a front (the lookups probe it first) */
    CEntry *old = c->tab;
    if (cache_alloc(c, grown) < 0) /* changes nothing when it fails */
        return;
    cache_rehash(c, old, size);
    zfree(old, size * sizeof(CEntry));
}

/* Worker t's view of S for one batch. 0, or -1 (no memory for its front). */
static int shared_view(Shared *S, int t, Cache *v)
{
    memset(v, 0, sizeof(*v));
    if (S->front[t] == NULL && (S->front[t] = calloc((size_t)1 << FRONT_BITS, sizeof(CEntry))) == NULL)
        return -1;
    v->front = S->front[t];
    v->tab = S->tab;
    v->mask = S->mask;
    v->limit = S->limit;
    v->keys = S->keys;
    v->vals = S->vals;
    v->sweeps = S->sweeps;
    v->shared = S;
    return 0;
}

/* A batch worker's view (Batch.view), alone on its cache lines: worker t writes its credits and
 * arena cursors on every put, and packed side by side they shared a line with the next worker's
 * front and table pointers, read on every lookup (false sharing). */
typedef struct {
    _Alignas(64) Cache c;
} ViewLine;

/* After the batch (its workers joined): the credits and arena chunks the views did not use are
 * given back (a chunk only when it is the last one handed out). */
static void shared_end(Shared *S, ViewLine *vl, int n)
{
    for (int t = 0; t < n; t++)
        S->count -= vl[t].c.credits;
    if (S->kn > SHARED_KEYS_BYTES)
        S->kn = SHARED_KEYS_BYTES;
    if (S->vn > SHARED_VALS_IDS)
        S->vn = SHARED_VALS_IDS;
    for (int pass = 0; pass < n; pass++)
        for (int t = 0; t < n; t++) {
            Cache *v = &vl[t].c;
            if (v->kend && v->kend == S->kn) {
                S->kn = v->kpos;
                v->kend = 0;
            }
            if (v->vend && v->vend == S->vn) {
                S->vn = v->vpos;
                v->vend = 0;
            }
        }
}

/* `need` units from the worker's chunk [*pos, *end), a new chunk taken from *used when it has too
 * few; the offset, or -1 when the arena of `cap` units is full. */
static inline long shared_take(size_t *pos, size_t *end, size_t *used, size_t cap, size_t need)
{
    if (*end == 0 || *pos + need > *end) {
        size_t chunk = need > SHARED_CHUNK ? need : SHARED_CHUNK;
        size_t at = __atomic_fetch_add(used, chunk, __ATOMIC_RELAXED);
        if (at + chunk > cap) {
            *end = 0;
            return -1;
        }
        *pos = at;
        *end = at + chunk;
    }
    size_t at = *pos;
    *pos += need;
    return (long)at;
}

static __attribute__((noinline)) void scache_put(Cache *v, uint64_t h, const uint8_t *p, size_t n, uint64_t k0,
                                                 uint64_t k1, const uint32_t *ids, size_t m)
{
    Shared *S = v->shared;
    if (n == 0 || n > CACHE_KEY_MAX || m > 0x7FFF || v->full)
        return;
    if (v->credits == 0) {
        uint32_t at = __atomic_fetch_add(&S->count, SHARED_CREDITS, __ATOMIC_RELAXED);
        if (at + SHARED_CREDITS > v->limit) {
            __atomic_fetch_sub(&S->count, SHARED_CREDITS, __ATOMIC_RELAXED);
            v->full = 1;
            return;
        }
        v->credits = SHARED_CREDITS;
    }
    CEntry e;
    centry_init(&e, n, k0, k1, ids, m);
    if (n > SHORT_KEY) {
        long at = shared_take(&v->kpos, &v->kend, &S->kn, SHARED_KEYS_BYTES, n);
        if (at < 0) {
            v->full = 1;
            return;
        }
        memcpy(v->keys + at, p, n);
        e.k0 = h;
        e.k1 = (uint64_t)at;
    }
    if (m > INLINE_IDS) {
        size_t r = (m + 7) & ~(size_t)7;
        long at = shared_take(&v->vpos, &v->vend, &S->vn, SHARED_VALS_IDS, r);
        if (at < 0) {
            v->full = 1;
            return;
        }
        memcpy(v->vals + at, ids, m * 4);
        memset(v->vals + at + m, 0, (r - m) * 4);
        e.ids[0] = (uint32_t)at;
    }
    v->credits--;
    size_t i = (size_t)h & v->mask;
    CEntry *d;
    for (;;) {
        d = &v->tab[i];
        uint16_t kl = __atomic_load_n(&d->klen, __ATOMIC_RELAXED);
        if (kl == 0 && __atomic_compare_exchange_n(&d->klen, &kl, (uint16_t)KLEN_BUSY, 0, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED))
            break;
        if (kl == 0)
            continue; /* lost the CAS to another worker: look at this entry again */
        i = (i + 1) & v->mask;
    }
    d->k0 = e.k0;
    d->k1 = e.k1;
    d->nids = e.nids;
    memcpy(d->ids, e.ids, sizeof(e.ids));
    __atomic_store_n(&d->klen, e.klen, __ATOMIC_RELEASE);
    *front_slot(v, h) = e;
}

static inline long scache_get(Cache *v, uint64_t h, const uint8_t *p, size_t n, uint64_t k0, uint64_t k1,
                              uint32_t *dst)
{
    CEntry *f = front_slot(v, h);
    if (entry_is(v, f, h, p, n, k0, k1))
        return entry_ids(v, f, dst);
    size_t i = (size_t)h & v->mask;
    for (;;) {
        CEntry *e = &v->tab[i];
        uint16_t kl = __atomic_load_n(&e->klen, __ATOMIC_ACQUIRE);
        if (kl == 0)
            return -1;
        if (kl == n && (n <= SHORT_KEY ? e->k0 == k0 && e->k1 == k1
                                       : e->k0 == h && memcmp(v->keys + e->k1, p, n) == 0)) {
            uint16_t nd = __atomic_load_n(&e->nids, __ATOMIC_RELAXED);
            if (!(nd & USED))
                __atomic_store_n(&e->nids, (uint16_t)(nd | USED), __ATOMIC_RELAXED);
            f->k0 = e->k0;
            f->k1 = e->k1;
            f->klen = kl;
            f->nids = nd & ~USED;
            memcpy(f->ids, e->ids, sizeof(f->ids));
            return entry_ids(v, f, dst);
        }
        i = (i + 1) & v->mask;
    }
}

/* The piece cache a Ctx uses: a slot's own, or a batch worker's view of the shared one. */
static inline __attribute__((always_inline)) long cache_get(Cache *c, uint64_t h, const uint8_t *p, size_t n,
                                                            uint64_t k0, uint64_t k1, uint32_t *dst)
{
    if (c->shared)
        return scache_get(c, h, p, n, k0, k1, dst);
    return pcache_get(c, h, p, n, k0, k1, dst);
}

static inline __attribute__((always_inline)) void cache_put(Cache *c, uint64_t h, const uint8_t *p, size_t n,
                                                            uint64_t k0, uint64_t k1, const uint32_t *ids, size_t m)
{
    if (c->shared)
        scache_put(c, h, p, n, k0, k1, ids, m);
    else
        pcache_put(c, h, p, n, k0, k1, ids, m);
}

/* ---------------------------------------------------------------------------------------- */
/* the merge loop: x->sym[0..n) -> merged ids in x->sym[0..m), returns m */

/* bytes: the piece's bytes when sym[i] is byte i's symbol (no byte dropped), else NULL.
 * Up to SMALL_WORD symbols: the pairs live in small stack arrays, linked by index (a merge
 * unlinks its right symbol: no shifting), and each pair's key is priority << 6 | position, so
 * the lowest key is the lowest priority, leftmost on ties (positions keep the text's order),
 * found by a branch-free scan. mg[i] keeps the pair value only when neither the priority nor a
 * table gives the merged id (scores with tied priorities). */
/* Keys are int32_t: priorities are below 2^21, so keys below 2^29 and PR_NONE (no pair) the
 * largest. gcc vectorizes the scans, and SSE2 has a signed 32-bit compare but no unsigned one:
 * with unsigned keys it biased both sides of every compare (two more instructions per 4 keys). */
#define PR_NONE 0x7FFFFFFF
#define SCAN_LANES 16 /* words of up to this many symbols: every scan reads this many keys */

static inline int32_t pr_key(uint32_t prio, size_t i)
{
    return prio == NO_RANK ? PR_NONE : (int32_t)(prio << 6 | (uint32_t)i);
}

/* nx and pv of merge_scan and merge_blocks before any merge: i + 1 and i - 1 (0xFF before the
 * first), copied in whole with fixed-size copies instead of written symbol by symbol */
static uint8_t LINK_NEXT[256], LINK_PREV[256];

/* A merge makes two new pairs, (merged, sym[r]) and (sym[l], merged), each when its neighbour
 * exists (< n): their keys and hashes, and both table slots requested before either is read, so
 * their misses overlap (the merge loops of merge_scan_body, scan_word_step and the long words). */
static inline __attribute__((always_inline)) void request_new_pairs(const PairMap *P, const uint32_t *sym, size_t n,
                                                                   uint32_t merged, size_t r, size_t l,
                                                                   uint64_t *kr, uint64_t *hr, uint64_t *kl,
                                                                   uint64_t *hl)
{
    if (r < n) {
        *kr = pair_key(merged, sym[r]);
        *hr = pair_hash(*kr);
        __builtin_prefetch(&P->tab[pair_slot(P, *hr)]);
    }
    if (l < n) {
        *kl = pair_key(sym[l], merged);
        *hl = pair_hash(*kl);
        __builtin_prefetch(&P->tab[pair_slot(P, *hl)]);
    }
}

/* Words of up to SMALL_WORD symbols. lean (a constant): the Encoder's `lean` holds (PairMap.direct,
 * so a value is both the merged id and its priority; byte-level symbols, never a barrier; a pair
 * table), and the loop reads no mg[] and tests neither. */
static inline __attribute__((always_inline)) size_t merge_scan_body(Ctx *x, size_t n, const uint8_t *bytes,
                                                                     const int lean)
{
    const PairMap *P = &x->E->pairs;
    uint32_t *sym = x->sym;
    int32_t pr[SMALL_WORD];
    uint32_t mg[SMALL_WORD];
    uint8_t nx[SMALL_WORD], pv[SMALL_WORD];
    memcpy(nx, LINK_NEXT, SMALL_WORD);
    memcpy(pv, LINK_PREV, SMALL_WORD);
    for (size_t i = 0; i < SCAN_LANES; i++) /* short words scan all SCAN_LANES keys: unused ones */
        pr[i] = PR_NONE;                    /* stay PR_NONE (a fixed fill, no memset call) */
    if (bytes != NULL && x->E->bytepair != NULL) {
        const uint32_t *bp = x->E->bytepair;
        for (size_t i = 0; i + 1 < n; i++) {
            uint32_t v = bp[(size_t)bytes[i] << 8 | bytes[i + 1]];
            pr[i] = pr_key(lean ? v : v_prio(P, v), i);
            if (!lean)
                mg[i] = v;
        }
    } else {
        for (size_t i = 0; i + 1 < n; i++) /* independent lookups: let their misses overlap */
            pair_prefetch(P, sym[i], sym[i + 1]);
        for (size_t i = 0; i + 1 < n; i++) {
            uint64_t key = pair_key(sym[i], sym[i + 1]);
            uint32_t v = lean ? pair_value_lean(P, key, pair_hash(key)) : pair_value(P, sym[i], sym[i + 1]);
            pr[i] = pr_key(lean ? v : v_prio(P, v), i);
            if (!lean)
                mg[i] = v;
        }
    }
    size_t hi = n - 1; /* pairs start below hi */
    for (;;) {
        int32_t best = PR_NONE;
        if (n <= SCAN_LANES) { /* a fixed trip count: no mispredicted loop exit */
            for (size_t i = 0; i < SCAN_LANES; i++)
                best = pr[i] < best ? pr[i] : best;
        } else {
            for (size_t i = 0; i < hi; i++)
                best = pr[i] < best ? pr[i] : best;
        }
        if (best == PR_NONE)
            break;
        size_t b = best & 63, d = nx[b], r = nx[d], l = pv[b];
        uint32_t prio = (uint32_t)best >> 6;
        uint32_t merged = lean ? prio : P->by_rank ? P->merged_of[prio] : P->direct ? prio : mg[b];
        uint64_t kr = 0, hr = 0, kl = 0, hl = 0;
        request_new_pairs(P, sym, n, merged, r, l, &kr, &hr, &kl, &hl);
        sym[b] = merged;
        nx[b] = (uint8_t)r;
        pr[d] = PR_NONE;
        if (r < n) {
            pv[r] = (uint8_t)b;
            uint32_t v = lean ? pair_value_lean(P, kr, hr) : pair_value_kh(P, merged, sym[r], kr, hr);
            pr[b] = pr_key(lean ? v : v_prio(P, v), b);
            if (!lean)
                mg[b] = v;
        } else {
            pr[b] = PR_NONE;
            hi = b; /* b is the last symbol: no pair starts at or after it */
        }
        if (l < n) {
            uint32_t v = lean ? pair_value_lean(P, kl, hl) : pair_value_kh(P, sym[l], merged, kl, hl);
            pr[l] = pr_key(lean ? v : v_prio(P, v), l);
            if (!lean)
                mg[l] = v;
        }
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i = nx[i])
        sym[m++] = sym[i];
    return m;
}

static size_t merge_scan(Ctx *x, size_t n, const uint8_t *bytes)
{
    return merge_scan_body(x, n, bytes, 0);
}

static size_t merge_scan_lean(Ctx *x, size_t n, const uint8_t *bytes)
{
    return merge_scan_body(x, n, bytes, 1);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The same for a CPU with SSE4.1 (E->lean == 2, asked at load; the module is built for SSE2): the
 * scan's minimum of 16 keys in pminsd, where SSE2 compares and blends (pcmpgtd, pand, pandn, por)
 * (merge_blocks_lean41: pminud) */
__attribute__((target("sse4.1"))) static size_t merge_scan_lean41(Ctx *x, size_t n, const uint8_t *bytes)
{
    return merge_scan_body(x, n, bytes, 1);
}
#define HAVE_LEAN41 1
#else
#define merge_scan_lean41 merge_scan_lean
#define HAVE_LEAN41 0
#endif

/* Two missed words merged at once. A word's merges are a chain: each one's scan waits for the
 * pair lookups of the one before (a filter word and a table slot, often beyond L1), so one word
 * leaves the core idle for most of each step. Two independent words, a step of each in turn,
 * overlap one's lookups with the other's scan. For the lean build only (merge_scan_body with
 * lean = 1, bytes given, a byte-pair table), words of 2 to SCAN_LANES symbols mapped byte by byte:
 * each word's steps are merge_scan_body's, so its ids are too. */
typedef struct {
    int32_t pr[SCAN_LANES];
    uint8_t nx[SCAN_LANES], pv[SCAN_LANES];
} ScanWord;

static inline __attribute__((always_inline)) void scan_word_init(const Encoder *E, ScanWord *w, uint32_t *sym,
                                                                 const uint8_t *bytes, size_t n)
{
    memcpy(w->nx, LINK_NEXT, SCAN_LANES);
    memcpy(w->pv, LINK_PREV, SCAN_LANES);
    for (size_t i = 0; i < SCAN_LANES; i++)
        w->pr[i] = PR_NONE;
    for (size_t i = 0; i < n; i++)
        sym[i] = (uint32_t)E->byte_ids[bytes[i]];
    for (size_t i = 0; i + 1 < n; i++)
        w->pr[i] = pr_key(E->bytepair[(size_t)bytes[i] << 8 | bytes[i + 1]], i);
}

/* One merge (merge_scan_body's loop body, lean, n <= SCAN_LANES); 0 when no pair is left. */
static inline __attribute__((always_inline)) int scan_word_step(const PairMap *P, ScanWord *w, uint32_t *sym,
                                                                size_t n)
{
    int32_t best = PR_NONE;
    for (size_t i = 0; i < SCAN_LANES; i++)
        best = w->pr[i] < best ? w->pr[i] : best;
    if (best == PR_NONE)
        return 0;
    size_t b = best & 63, d = w->nx[b], r = w->nx[d], l = w->pv[b];
    uint32_t merged = (uint32_t)best >> 6;
    uint64_t kr = 0, hr = 0, kl = 0, hl = 0;
    request_new_pairs(P, sym, n, merged, r, l, &kr, &hr, &kl, &hl);
    sym[b] = merged;
    w->nx[b] = (uint8_t)r;
    w->pr[d] = PR_NONE;
    if (r < n) {
        w->pv[r] = (uint8_t)b;
        w->pr[b] = pr_key(pair_value_lean(P, kr, hr), b);
    } else {
        w->pr[b] = PR_NONE;
    }
    if (l < n)
        w->pr[l] = pr_key(pair_value_lean(P, kl, hl), l);
    return 1;
}

static inline __attribute__((always_inline)) size_t scan_word_out(const ScanWord *w, uint32_t *sym, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i = w->nx[i])
        sym[m++] = sym[i];
    return m;
}

#ifndef MERGE_GROUP
#define MERGE_GROUP 2
#endif
/* Words q < k (k <= MERGE_GROUP; bytes p[q], n[q] symbols) merged into sym + q * SCAN_LANES, their
 * id counts in m[q]: a step of each live word in turn. */
static inline __attribute__((always_inline)) void merge_group_body(const Encoder *E, size_t k, const uint8_t *const *p,
                                                                   const size_t *n, uint32_t *sym, size_t *m)
{
    const PairMap *P = &E->pairs;
    ScanWord W[MERGE_GROUP];
    int live[MERGE_GROUP];
    for (size_t q = 0; q < k; q++) {
        scan_word_init(E, &W[q], sym + q * SCAN_LANES, p[q], n[q]);
        live[q] = 1;
    }
    for (int all = 1; all;) { /* every word live: a step of each, no test (k a constant: unrolled) */
        for (size_t q = 0; q < k; q++)
            all &= live[q] = scan_word_step(P, &W[q], sym + q * SCAN_LANES, n[q]);
    }
    for (size_t q = 0; q < k; q++) /* the words left, one after the other */
        while (live[q])
            live[q] = scan_word_step(P, &W[q], sym + q * SCAN_LANES, n[q]);
    for (size_t q = 0; q < k; q++)
        m[q] = scan_word_out(&W[q], sym + q * SCAN_LANES, n[q]);
}

static void merge_group(const Encoder *E, size_t k, const uint8_t *const *p, const size_t *n, uint32_t *sym, size_t *m)
{
    if (k == MERGE_GROUP)
        merge_group_body(E, MERGE_GROUP, p, n, sym, m);
    else
        merge_group_body(E, k, p, n, sym, m);
}

#if HAVE_LEAN41
__attribute__((target("sse4.1"))) static void merge_group41(const Encoder *E, size_t k, const uint8_t *const *p,
                                                            const size_t *n, uint32_t *sym, size_t *m)
{
    if (k == MERGE_GROUP)
        merge_group_body(E, MERGE_GROUP, p, n, sym, m);
    else
        merge_group_body(E, k, p, n, sym, m);
}
#else
#define merge_group41 merge_group
#endif

static inline void heap_down(uint64_t *h, size_t n, size_t i)
{
    uint64_t v = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

static inline void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v)
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static size_t merge_heap(Ctx *x, size_t n)
{
    const PairMap *P = &x->E->pairs;
    uint32_t *sym = x->sym;
    int32_t *nxt = x->nxt, *prv = x->prv;
    uint64_t *heap = x->heap;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        nxt[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        prv[i] = (int32_t)i - 1;
        if (i + 1 < n) {
            uint32_t r = v_prio(P, pair_value(P, sym[i], sym[i + 1]));
            if (r != NO_RANK)
                heap[hn++] = ((uint64_t)r << 32) | i;
        }
    }
    for (size_t i = hn / 2; i-- > 0;)
        heap_down(heap, hn, i);
    /* size <= (n - 1) initial + 2 pushes per merge - 1 pop per merge < 2n entries */
    while (hn) {
        uint64_t top = heap[0];
        heap[0] = heap[--hn];
        if (hn)
            heap_down(heap, hn, 0);
        uint32_t i = (uint32_t)top, rank = (uint32_t)(top >> 32);
        if (sym[i] == DEAD)
            continue;
        int32_t j = nxt[i];
        if (j < 0)
            continue;
        uint32_t v = pair_value(P, sym[i], sym[j]);
        if (v == NO_VALUE || v_prio(P, v) != rank)
            continue; /* stale */
        uint32_t merged = v_merged(P, v);
        sym[i] = merged;
        sym[j] = DEAD;
        int32_t k = nxt[j];
        nxt[i] = k;
        if (k >= 0) {
            prv[k] = (int32_t)i;
            uint32_t r = v_prio(P, pair_value(P, merged, sym[k]));
            if (r != NO_RANK)
                heap_push(heap, &hn, ((uint64_t)r << 32) | i);
        }
        int32_t h = prv[i];
        if (h >= 0) {
            uint32_t r = v_prio(P, pair_value(P, sym[h], merged));
            if (r != NO_RANK)
                heap_push(heap, &hn, ((uint64_t)r << 32) | (uint32_t)h);
        }
    }
    size_t m = 0;
    for (int32_t i = 0; i >= 0; i = nxt[i])
        sym[m++] = sym[i];
    return m;
}

/* Words of SMALL_WORD + 1 to 255 symbols (a Chinese or Japanese run without spaces, uncut):
 * merge_scan's linked pairs, keyed priority << 8 | position (priorities < 2^21), with the minimum
 * of each block of 16 keys kept: a merge rescans the blocks of the (at most 3) keys it changed,
 * then the 16 block minima, where merge_scan rescans every key and the heap pops stale entries
 * and looks each popped pair up again (Llama 3 on the Debian sample: merge_heap 232 M
 * instructions, merge_blocks 199 M for the same words; bench/README.md). */
#define BLOCK_WORD 255
static inline __attribute__((always_inline)) size_t merge_blocks_body(Ctx *x, size_t n, const uint8_t *bytes,
                                                                       const int lean)
{
    const PairMap *P = &x->E->pairs;
    uint32_t *sym = x->sym;
    uint32_t pr[256], mg[256], bmin[16];
    uint8_t nx[256], pv[256];
    size_t nb = (n + 15) / 16; /* blocks over the symbols: a merge clears its right symbol's key */
    memcpy(nx, LINK_NEXT, sizeof(nx));
    memcpy(pv, LINK_PREV, sizeof(pv));
    for (size_t i = n - 1; i < nb * 16; i++)
        pr[i] = PR_NONE;
    for (size_t b = nb; b < 16; b++)
        bmin[b] = PR_NONE;
    if (bytes != NULL && x->E->bytepair != NULL) {
        const uint32_t *bp = x->E->bytepair;
        for (size_t i = 0; i + 1 < n; i++) {
            uint32_t v = bp[(size_t)bytes[i] << 8 | bytes[i + 1]], r = lean ? v : v_prio(P, v);
            pr[i] = r == NO_RANK ? PR_NONE : r << 8 | (uint32_t)i;
            if (!lean)
                mg[i] = v;
        }
    } else {
        for (size_t i = 0; i + 1 < n; i++)
            pair_prefetch(P, sym[i], sym[i + 1]);
        for (size_t i = 0; i + 1 < n; i++) {
            uint64_t key = pair_key(sym[i], sym[i + 1]);
            uint32_t v = lean ? pair_value_lean(P, key, pair_hash(key)) : pair_value(P, sym[i], sym[i + 1]);
            uint32_t r = lean ? v : v_prio(P, v);
            pr[i] = r == NO_RANK ? PR_NONE : r << 8 | (uint32_t)i;
            if (!lean)
                mg[i] = v;
        }
    }
    for (size_t b = 0; b < nb; b++) {
        uint32_t m = PR_NONE;
        for (size_t i = 0; i < 16; i++)
            m = pr[b * 16 + i] < m ? pr[b * 16 + i] : m;
        bmin[b] = m;
    }
    for (;;) {
        uint32_t best = PR_NONE;
        for (size_t b = 0; b < 16; b++)
            best = bmin[b] < best ? bmin[b] : best;
        if (best == PR_NONE)
            break;
        size_t b = best & 255, d = nx[b], r = nx[d], l = pv[b];
        uint32_t prio = best >> 8;
        uint32_t merged = lean ? prio : P->by_rank ? P->merged_of[prio] : P->direct ? prio : mg[b];
        uint64_t kr = 0, hr = 0, kl = 0, hl = 0;
        request_new_pairs(P, sym, n, merged, r, l, &kr, &hr, &kl, &hl);
        sym[b] = merged;
        nx[b] = (uint8_t)r;
        pr[d] = PR_NONE;
        if (r < n) {
            pv[r] = (uint8_t)b;
            uint32_t v = lean ? pair_value_lean(P, kr, hr) : pair_value_kh(P, merged, sym[r], kr, hr);
            uint32_t rk = lean ? v : v_prio(P, v);
            pr[b] = rk == NO_RANK ? PR_NONE : rk << 8 | (uint32_t)b;
            if (!lean)
                mg[b] = v;
        } else {
            pr[b] = PR_NONE;
        }
        if (l < n) {
            uint32_t v = lean ? pair_value_lean(P, kl, hl) : pair_value_kh(P, sym[l], merged, kl, hl);
            uint32_t rk = lean ? v : v_prio(P, v);
            pr[l] = rk == NO_RANK ? PR_NONE : rk << 8 | (uint32_t)l;
            if (!lean)
                mg[l] = v;
        }
        size_t touched[3] = {b >> 4, d < n ? d >> 4 : b >> 4, l < n ? l >> 4 : b >> 4};
        for (size_t t = 0; t < 3; t++) {
            size_t k = touched[t];
            if ((t == 1 && k == touched[0]) || (t == 2 && (k == touched[0] || k == touched[1])))
                continue;
            uint32_t m = PR_NONE;
            for (size_t i = 0; i < 16; i++)
                m = pr[k * 16 + i] < m ? pr[k * 16 + i] : m;
            bmin[k] = m;
        }
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i = nx[i])
        sym[m++] = sym[i];
    return m;
}

static size_t merge_blocks(Ctx *x, size_t n, const uint8_t *bytes)
{
    return merge_blocks_body(x, n, bytes, 0);
}

static size_t merge_blocks_lean(Ctx *x, size_t n, const uint8_t *bytes)
{
    return merge_blocks_body(x, n, bytes, 1);
}

#if HAVE_LEAN41
__attribute__((target("sse4.1"))) static size_t merge_blocks_lean41(Ctx *x, size_t n, const uint8_t *bytes)
{
    return merge_blocks_body(x, n, bytes, 1);
}
#else
#define merge_blocks_lean41 merge_blocks_lean
#endif

static size_t merge_loop(Ctx *x, size_t n, const uint8_t *bytes)
{
    if (n < 2)
        return n;
    if (n <= SMALL_WORD)
        return x->E->lean == 2 ? merge_scan_lean41(x, n, bytes)
               : x->E->lean    ? merge_scan_lean(x, n, bytes)
                               : merge_scan(x, n, bytes);
    if (n <= BLOCK_WORD)
        return x->E->lean == 2 ? merge_blocks_lean41(x, n, bytes)
               : x->E->lean    ? merge_blocks_lean(x, n, bytes)
                               : merge_blocks(x, n, bytes);
    return merge_heap(x, n);
}

/* ---------------------------------------------------------------------------------------- */
/* one piece on a cache miss: its ids at dst (room for n + INLINE_IDS), their count, or -1 */

/* A plain piece (every byte has a symbol) merged from its bytes: its ids at dst, their count. */
static long merge_bytes(Ctx *x, const uint8_t *p, size_t n, uint32_t *dst)
{
    const int32_t *byte_ids = x->E->byte_ids;
    for (size_t i = 0; i < n; i++)
        x->sym[i] = (uint32_t)byte_ids[p[i]];
    size_t m = merge_loop(x, n, p);
    memcpy(dst, x->sym, m * 4);
    return (long)m;
}

static inline int joins(const uint64_t *J, uint8_t a, uint8_t b)
{
    size_t k = (size_t)a << 8 | b;
    return (int)(J[k >> 6] >> (k & 63) & 1);
}

/* A plain part of 1-3 bytes merged without the cache (a character of a Chinese or Japanese run
 * cut apart): its byte pairs' values from the byte-pair table, the lower priority first (the left
 * one on a tie), then the one pair left. */
static inline long merge_tiny(const Encoder *E, const uint8_t *q, size_t n, uint32_t *dst)
{
    const PairMap *P = &E->pairs;
    uint32_t s0 = (uint32_t)E->byte_ids[q[0]];
    if (n == 1) {
        dst[0] = s0;
        return 1;
    }
    uint32_t s1 = (uint32_t)E->byte_ids[q[1]], v01 = E->bytepair[(size_t)q[0] << 8 | q[1]];
    if (n == 2) {
        if (v01 == NO_VALUE) {
            dst[0] = s0;
            dst[1] = s1;
            return 2;
        }
        dst[0] = v_merged(P, v01);
        return 1;
    }
    uint32_t s2 = (uint32_t)E->byte_ids[q[2]], v12 = E->bytepair[(size_t)q[1] << 8 | q[2]];
    uint32_t p01 = v_prio(P, v01), p12 = v_prio(P, v12);
    if (p01 == NO_RANK && p12 == NO_RANK) {
        dst[0] = s0;
        dst[1] = s1;
        dst[2] = s2;
        return 3;
    }
    uint32_t a, b;
    if (p01 <= p12) {
        a = v_merged(P, v01);
        b = s2;
    } else {
        a = s0;
        b = v_merged(P, v12);
    }
    uint32_t v = pair_value(P, a, b);
    if (v == NO_VALUE) {
        dst[0] = a;
        dst[1] = b;
        return 2;
    }
    dst[0] = v_merged(P, v);
    return 1;
}

/* One part of a cut piece (resolve_parts): from the cache, else merged and remembered. The cache's
 * entry for some bytes is what those bytes encode to as a piece, which is their merge unless the
 * whole-token lookup answers first (ignore_merges): a part that is a whole token is merged
 * without the cache. */
static long resolve_part(Ctx *x, Cache *c, const uint8_t *q, size_t n, uint32_t *dst)
{
    const Encoder *E = x->E;
    if (n <= 3)
        return merge_tiny(E, q, n, dst);
    if (c == NULL || n > CACHE_KEY_MAX)
        return merge_bytes(x, q, n, dst);
    uint64_t k0, k1, h = hash_key(q, n, (size_t)(q - x->text) + SHORT_KEY <= x->readable, &k0, &k1);
    if (E->ignore_merges && whole_get(&E->whole, q, n, h) >= 0)
        return merge_bytes(x, q, n, dst);
    if (c->tab != NULL) {
        long m = cache_get(c, h, q, n, k0, k1, dst);
        if (m >= 0)
            return m;
    }
    long m = merge_bytes(x, q, n, dst);
    cache_put(c, h, q, n, k0, k1, dst, (size_t)m);
    return m;
}

/* A missed plain piece cut where no merge can join: between bytes b1, b2 whose bit in
 * E->joinable is clear, no merge ever joins the symbol ending at b1 to the one starting at b2
 * (every merge joins a symbol's last byte to the next one's first, build_joinable), so the merge
 * loop never crosses that point and the piece's ids are its parts' ids, each part merged alone
 * (the lowest pair of the whole is the lowest of its part; a part's pairs never change with
 * another part's merges). The parts are looked up in the piece cache and remembered there: a run
 * of Chinese or Japanese characters without spaces (one `\p{L}+` piece) is rarely seen twice,
 * its characters and words often. Returns -2 when the piece has no such point. Not inlined: kept
 * out of flush's loop, whose other pieces (cache hits) it would slow. */
static __attribute__((noinline)) long resolve_parts(Ctx *x, const uint8_t *p, size_t n, uint32_t *dst)
{
    const uint64_t *J = x->E->joinable;
    uint64_t high = 0; /* ASCII pieces are not cut: most byte pairs of words join, the scan would not pay */
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        high |= w;
    }
    for (; i < n; i++)
        high |= p[i];
    if (!(high & 0x8080808080808080ULL))
        return -2;
    size_t e = 1;
    while (e < n && joins(J, p[e - 1], p[e]))
        e++;
    if (e >= n)
        return -2;
    Cache *c = x->cache;
    size_t k = 0;
    for (size_t s = 0;;) {
        long m = resolve_part(x, c, p + s, e - s, dst + k);
        if (m < 0)
            return -1;
        k += (size_t)m;
        if (e >= n)
            break;
        s = e++;
        while (e < n && joins(J, p[e - 1], p[e]))
            e++;
    }
    return (long)k;
}

static long resolve_byte_level(Ctx *x, const uint8_t *p, size_t n, uint64_t h, uint64_t k0, uint64_t k1,
                               uint32_t *dst)
{
    const Encoder *E = x->E;
    if (E->ignore_merges) {
        int32_t w = whole_get(&E->whole, p, n, h);
        if (w >= 0) {
            dst[0] = (uint32_t)w;
            return 1;
        }
    }
    if (reserve_syms(x, n) < 0)
        return -1;
    if (E->joinable != NULL) { /* every byte has a symbol */
        long m = resolve_parts(x, p, n, dst);
        if (m != -2)
            return m;
        return merge_bytes(x, p, n, dst);
    }
    if (E->all_bytes) /* no unknown byte to drop or fuse: the plain map, no test per byte */
        return merge_bytes(x, p, n, dst);
    size_t ns = 0;
    int plain = 1, prev_unknown = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t t = E->byte_ids[p[i]];
        if (t < 0) {
            plain = 0;
            if (E->unk_id < 0)
                continue; /* dropped, as Hugging Face BPE does without an unk token */
            if (prev_unknown && E->fuse_unk)
                continue; /* one unk for the run, before merging (tokenizers' merge_word) */
            prev_unknown = 1;
            t = E->unk_id;
        } else {
            prev_unknown = 0;
        }
        x->sym[ns++] = (uint32_t)t;
    }
    size_t m = merge_loop(x, ns, plain ? p : NULL);
    memcpy(dst, x->sym, m * 4);
    return (long)m;
}

static long resolve_sentencepiece(Ctx *x, const uint8_t *p, size_t n, uint64_t h, uint64_t k0, uint64_t k1,
                                  uint32_t *dst)
{
    const Encoder *E = x->E;
    if (E->ignore_merges) {
        int32_t w = whole_get(&E->whole, p, n, h);
        if (w >= 0) {
            dst[0] = (uint32_t)w;
            return 1;
        }
    }
    if (reserve_syms(x, n) < 0)
        return -1;
    uint32_t *sym = x->sym, *cps = x->cps;
    size_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t c = dec_at(p + i, &l);
        i += l;
        int32_t t = cpmap_get(&E->cps, c);
        if (t < 0 && !E->byte_fallback && E->unk_id < 0)
            continue; /* skipped before merging, so its neighbours can merge (tokenizers' merge_word) */
        if (t < 0 && E->fuse_unk && ns > 0 && (sym[ns - 1] & BARRIER))
            continue; /* one unk for the run of this piece, before merging (merge_word) */
        cps[ns] = c;
        sym[ns] = t >= 0 ? (uint32_t)t : (BARRIER | (uint32_t)ns);
        ns++;
    }
    size_t m = merge_loop(x, ns, NULL);
    size_t k = 0;
    for (size_t q = 0; q < m; q++) {
        uint32_t t = x->sym[q];
        if (!(t & BARRIER)) {
            dst[k++] = t;
            continue;
        }
        uint32_t c = cps[t & ~BARRIER];
        if (E->byte_fallback) {
            uint8_t buf[4], *end = put_utf8(buf, c);
            for (uint8_t *b = buf; b < end; b++) {
                int32_t f = E->fallback_ids[*b];
                if (f < 0)
                    f = E->unk_id;
                if (f >= 0)
                    dst[k++] = (uint32_t)f;
            }
        } else if (E->unk_id >= 0) {
            dst[k++] = (uint32_t)E->unk_id;
        }
    }
    return (long)k;
}

/* ---------------------------------------------------------------------------------------- */
/* pieces: batched, hashed and prefetched, then looked up or resolved */

/* Ids of a cached piece kept in the arena: copied 8 at a time (the arena and every id vector a
 * flush writes keep ARENA_PAD ids of room past their end, so the last step may overrun). */
static inline void copy_ids8(uint32_t *dst, const uint32_t *src, size_t m)
{
    for (size_t q = 0; q < m; q += 8)
        memcpy(dst + q, src + q, 32);
}

/* where a piece's ids are after phases 1 and 2 (src[i]; off[i] counts ids from that base) */
#define SRC_FID 0   /* fid[][]: inline ids of a front hit, or a one-byte piece's id */
#define SRC_ARENA 1 /* the cache's id arena (c->vals): a front hit's long ids */
#define SRC_RIDS 2  /* x->rids: a piece phase 2 looked up in the table or resolved */

_Static_assert(BATCH <= 256, "flush keeps a batch's indices in uint8_t");

/* Room in x->rids for `more` ids past its first `used`, plus the copy_ids8 overrun. */
static inline int reserve_rids(Ctx *x, size_t used, size_t more)
{
    return grow((void **)&x->rids, &x->ridcap, used + more + INLINE_IDS + ARENA_PAD, 4);
}

/* After a sweep in phase 2: the pieces phase 1 answered from the arena (their offsets stale now)
 * looked up again, else resolved, into x->rids from rn on. Rare; kept out of flush, so gcc keeps
 * phase 2's one cache_get inlined. */
static __attribute__((noinline)) int flush_relookup(Ctx *x, size_t np, uint8_t *src, uint32_t *off, uint32_t *cnt,
                                                    size_t rn, size_t bytes)
{
    Cache *c = x->cache;
    int byte_level = x->E->kind == KIND_BYTE_LEVEL;
    if (reserve_rids(x, rn, bytes) < 0)
        return -1;
    for (size_t i = 0; i < np; i++) {
        if (src[i] != SRC_ARENA)
            continue;
        size_t n = x->span[i].n;
        const uint8_t *p = x->text + x->span[i].a;
        uint32_t *r = x->rids + rn;
        long m = cache_get(c, x->kh[i], p, n, x->k0[i], x->k1[i], r);
        if (m < 0) {
            m = byte_level ? resolve_byte_level(x, p, n, x->kh[i], x->k0[i], x->k1[i], r)
                           : resolve_sentencepiece(x, p, n, x->kh[i], x->k0[i], x->k1[i], r);
            if (m < 0)
                return -1;
            cache_put(c, x->kh[i], p, n, x->k0[i], x->k1[i], r, (size_t)m);
        }
        src[i] = SRC_RIDS;
        off[i] = (uint32_t)rn;
        cnt[i] = (uint32_t)m;
        rn += (size_t)m;
    }
    return 0;
}

/* Whether resolve_byte_level would merge this missed piece byte by byte (merge_bytes): not a whole
 * token looked up first (ignore_merges), and not cut at points no merge joins (resolve_parts cuts
 * no ASCII piece; without E->joinable every byte has a symbol). */
static inline int scan_pairable(const Ctx *x, const uint8_t *p, size_t n, uint64_t h)
{
    const Encoder *E = x->E;
    if (E->joinable != NULL) {
        uint64_t high = 0, w;
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            memcpy(&w, p + i, 8);
            high |= w;
        }
        for (; i < n; i++)
            high |= p[i];
        if (high & 0x8080808080808080ULL)
            return 0;
    }
    return !E->ignore_merges || whole_get(&E->whole, p, n, h) < 0;
}

/* The pending pieces pend[0, np) of flush's phase 2 merged together (merge_group), their ids
 * written where phase 2 reserved room (x->rids + off[i]) and remembered. Not inlined: flush's loop
 * keeps its registers for the cache hits. */
static __attribute__((noinline)) int flush_group(Ctx *x, const size_t *pend, size_t np, const uint32_t *off,
                                                 uint32_t *cnt)
{
    const uint8_t *p[MERGE_GROUP] = {0};
    size_t n[MERGE_GROUP] = {0}, m[MERGE_GROUP];
    for (size_t q = 0; q < np; q++) {
        p[q] = x->text + x->span[pend[q]].a;
        n[q] = x->span[pend[q]].n;
    }
    (x->E->lean == 2 ? merge_group41 : merge_group)(x->E, np, p, n, x->sym, m);
    for (size_t q = 0; q < np; q++) {
        size_t i = pend[q];
        uint32_t *r = x->rids + off[i];
        memcpy(r, x->sym + q * SCAN_LANES, m[q] * 4);
        cache_put(x->cache, x->kh[i], p[q], n[q], x->k0[i], x->k1[i], r, m[q]);
        cnt[i] = (uint32_t)m[q];
    }
    return 0;
}

/* A batch's ids, in three phases. 1: keys, hashes and the front; a front hit (or a one-byte
 * piece) is answered from it and a miss prefetches its table slot and joins the list of misses.
 * 2: the misses alone, looked up in the table, else resolved and remembered, their ids written
 * to x->rids. 3: every piece's ids copied out in text order from where phases 1 and 2 left them,
 * one branch-free copy a piece. Phase 2 cannot reread the front (its puts may overwrite it); an
 * arena offset read in phase 1 holds while no sweep compacts the arena (else it is looked up
 * again after phase 2). Walking phase 2 over the misses only and writing out in a phase of its
 * own took the per-piece branches on how a piece was answered (front hit or not, inline or arena
 * ids, everything before it out or not) out of the warm pass: 3.4 M simulated mispredicts of a
 * warm GPT-2 pass over text-multilingual.jsonl, 2.2 M of them in flush. */
static int flush(Ctx *x)
{
    const Encoder *E = x->E;
    size_t np = x->nspan;
    x->nspan = 0;
    if (np == 0)
        return 0;
    const uint8_t *t = x->text;
    /* the spans are in text order and do not overlap: their bytes bound their ids */
    size_t bytes = x->span[np - 1].a + x->span[np - 1].n - x->span[0].a;
    if (reserve_out(x->out, bytes + INLINE_IDS + ARENA_PAD) < 0)
        return -1;
    Cache *c = x->cache;
    int byte_level = E->kind == KIND_BYTE_LEVEL;
    uint32_t fid[BATCH + 3][INLINE_IDS]; /* + 3: copy_ids8 reads 8 ids from the last one */
    uint32_t off[BATCH];
    uint32_t cnt[BATCH]; /* a resolved piece may hold more than 65535 ids (100k bytes, one SentencePiece word) */
    uint8_t src[BATCH], miss[BATCH];
    size_t nm = 0;
    int probe = c && c->tab && c->front; /* phase 1 puts nothing: tested once */
    const CEntry *front = probe ? c->front : NULL;
    uint64_t sweeps = probe ? c->sweeps : 0;
    for (size_t i = 0; i < np; i++) {
        size_t a = x->span[i].a, n = x->span[i].n;
        if (n == 1 && byte_level) { /* one byte: its symbol is the answer */
            int32_t id = E->byte_ids[t[a]];
            if (id < 0)
                id = E->unk_id;
            fid[i][0] = (uint32_t)id;
            cnt[i] = id >= 0;
            src[i] = SRC_FID;
            off[i] = (uint32_t)(i * INLINE_IDS);
            continue;
        }
        uint64_t h = hash_key(t + a, n, a + SHORT_KEY <= x->readable, &x->k0[i], &x->k1[i]);
        x->kh[i] = h;
        if (!probe || n > CACHE_KEY_MAX) {
            miss[nm++] = (uint8_t)i;
            continue;
        }
        const CEntry *f = &front[h >> (64 - FRONT_BITS)];
        if (!entry_is(c, f, h, t + a, n, x->k0[i], x->k1[i])) {
            __builtin_prefetch(&c->tab[(size_t)h & c->mask]);
            miss[nm++] = (uint8_t)i;
            continue;
        }
        size_t m = f->nids & ~USED;
        memcpy(fid[i], f->ids, sizeof(f->ids));
        int arena = m > INLINE_IDS;
        src[i] = arena ? SRC_ARENA : SRC_FID;
        off[i] = arena ? f->ids[0] : (uint32_t)(i * INLINE_IDS);
        cnt[i] = (uint32_t)m;
    }
    if (nm) {
        /* each miss writes at most max(n, INLINE_IDS) ids and leaves its m <= n: a miss finds
         * room for n + INLINE_IDS + ARENA_PAD, as when it wrote into the output */
        size_t rn = 0;
        if (reserve_rids(x, 0, bytes) < 0)
            return -1;
        /* words merged in groups (merge_group): a missed piece that would be merged byte by byte with
         * the lean scan waits (its ids' room reserved in x->rids) until MERGE_GROUP of them are
         * pending; a piece equal to a pending one takes that one's ids (`same`) */
        int grouping = byte_level && c != NULL && E->lean && E->bytepair != NULL &&
                       (E->joinable != NULL || E->all_bytes) && reserve_syms(x, MERGE_GROUP * SCAN_LANES) == 0;
        size_t pend[MERGE_GROUP], ng = 0, ns = 0;
        uint8_t same[BATCH], same_of[BATCH];
        for (size_t k = 0; k < nm; k++) {
            size_t i = miss[k], a = x->span[i].a, n = x->span[i].n;
            const uint8_t *p = t + a;
            uint32_t *r = x->rids + rn;
            int cacheable = c && n <= CACHE_KEY_MAX;
            long m = -1;
            if (cacheable && c->tab)
                m = cache_get(c, x->kh[i], p, n, x->k0[i], x->k1[i], r);
            if (m < 0 && grouping && n >= 2 && n <= SCAN_LANES && scan_pairable(x, p, n, x->kh[i])) {
                size_t q = 0;
                while (q < ng && !(x->span[pend[q]].n == n && x->kh[pend[q]] == x->kh[i] &&
                                   memcmp(t + x->span[pend[q]].a, p, n) == 0))
                    q++;
                src[i] = SRC_RIDS;
                if (q < ng) { /* the same piece as a pending one */
                    same[ns] = (uint8_t)i;
                    same_of[ns++] = (uint8_t)pend[q];
                    continue;
                }
                pend[ng++] = i;
                off[i] = (uint32_t)rn;
                rn += n;
                if (ng == MERGE_GROUP && flush_group(x, pend, ng, off, cnt) < 0)
                    return -1;
                ng = ng == MERGE_GROUP ? 0 : ng;
                if (ng == 0) { /* resolved: the pieces equal to them take their ids */
                    for (size_t e = 0; e < ns; e++) {
                        off[same[e]] = off[same_of[e]];
                        cnt[same[e]] = cnt[same_of[e]];
                    }
                    ns = 0;
                }
                continue;
            } else if (m < 0) {
                m = byte_level ? resolve_byte_level(x, p, n, x->kh[i], x->k0[i], x->k1[i], r)
                               : resolve_sentencepiece(x, p, n, x->kh[i], x->k0[i], x->k1[i], r);
                if (m < 0)
                    return -1;
                if (cacheable)
                    cache_put(c, x->kh[i], p, n, x->k0[i], x->k1[i], r, (size_t)m);
            }
            src[i] = SRC_RIDS;
            off[i] = (uint32_t)rn;
            cnt[i] = (uint32_t)m;
            rn += (size_t)m;
        }
        if (ng > 0 && flush_group(x, pend, ng, off, cnt) < 0) /* the last group, not full */
            return -1;
        for (size_t e = 0; e < ns; e++) {
            off[same[e]] = off[same_of[e]];
            cnt[same[e]] = cnt[same_of[e]];
        }
        if (probe && c->sweeps != sweeps && flush_relookup(x, np, src, off, cnt, rn, bytes) < 0)
            return -1; /* phase 1's arena offsets are stale: looked up again */
    }
    /* phase 3: out in text order (c->vals read now: the puts of phase 2 may have moved it) */
    const uint32_t *base[3] = {&fid[0][0], probe ? c->vals : NULL, x->rids};
    uint32_t *o = x->out->v + x->out->n;
    for (size_t i = 0; i < np; i++) {
        const uint32_t *from = base[src[i]] + off[i];
        size_t m = cnt[i];
        memcpy(o, from, 32); /* up to 8 ids with no test (every base has room to read 8) */
        for (size_t q = 8; q < m; q += 8)
            memcpy(o + q, from + q, 32);
        o += m;
    }
    x->out->n = (size_t)(o - x->out->v);
    return 0;
}

static int push_piece(Ctx *x, size_t a, size_t n)
{
    if (n == 0)
        return 0;
    if (x->collect) { /* splitter test mode: (start, end) byte offsets */
        if (push_id(x, (uint32_t)a) < 0 || push_id(x, (uint32_t)(a + n)) < 0)
            return -1;
        return 0;
    }
    Span *s = &x->span[x->nspan++];
    s->a = (uint32_t)a;
    s->n = (uint32_t)n;
    if (x->nspan == BATCH)
        return flush(x);
    return 0;
}

/* Encode x->text[0, tlen) (appending to x->out). */
static int run_text(Ctx *x)
{
    size_t n = x->tlen;
    x->nspan = 0;
    if (n == 0)
        return 0;
    int rc = x->E->kind == KIND_BYTE_LEVEL ? split_stage(x, 0, n, 0) : sp_words(x, n);
    if (rc < 0)
        return -1;
    return flush(x);
}

/* A str: converted (or read in place), then encoded. Texts over 4 GB are refused (offsets are
 * 32-bit): -2. */
static int run_str(Ctx *x, const void *data, int kind, int ascii, Py_ssize_t n)
{
    if ((size_t)n > 0xFFFFFFF0u / 4)
        return -2;
    if (set_text(x, data, kind, ascii, (size_t)n) < 0)
        return -1;
    return run_text(x);
}

/* run_str, but a str holding a surrogate code unit (found by the conversion) is not encoded: -3. */
static int run_str_nosur(Ctx *x, const void *data, int kind, int ascii, Py_ssize_t n)
{
    if ((size_t)n > 0xFFFFFFF0u / 4)
        return -2;
    if (set_text(x, data, kind, ascii, (size_t)n) < 0)
        return -1;
    if (x->sur)
        return -3;
    return run_text(x);
}

/* ---------------------------------------------------------------------------------------- */
/* slots */

/* Forks this process is removed from its first one (each child's is its parent's + 1). A lock
 * taken in an earlier generation and still held was held by a thread of a parent process, which
 * does not exist in this one: nothing here will unlock it (clear_cache leaves it). */
static int fork_gen;

static void fork_child(void)
{
    __atomic_add_fetch(&fork_gen, 1, __ATOMIC_RELAXED);
    pthread_mutex_init(&g_pool_lock, NULL); /* a parent's thread may have held it: held briefly, never across a call */
}

static inline void mark_gen(int *gen)
{
    __atomic_store_n(gen, __atomic_load_n(&fork_gen, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

/* Lock m (its holder's generation at *gen), waiting for the holder with the GIL released, unless
 * the holder was a thread of a parent process (held since before a fork): then 0, not locked. */
static int lock_unless_forked(pthread_mutex_t *m, int *gen)
{
    if (pthread_mutex_trylock(m) != 0) {
        if (__atomic_load_n(gen, __ATOMIC_RELAXED) != __atomic_load_n(&fork_gen, __ATOMIC_RELAXED))
            return 0;
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(m);
        Py_END_ALLOW_THREADS
    }
    mark_gen(gen);
    return 1;
}

static Slot *slot_acquire(Encoder *E)
{
    for (int k = 0; k < N_SLOTS; k++)
        if (pthread_mutex_trylock(&E->slots[k].lock) == 0) {
            mark_gen(&E->slots[k].gen);
            return &E->slots[k];
        }
    return NULL;
}

/* Context for one call: a slot's (cache + warm scratch) or a private one (malloc'd, `*own`). */
static Ctx *ctx_begin(Encoder *E, Slot *sl, IdVec *tmp_out)
{
    Ctx *x;
    if (sl) {
        x = &sl->ctx;
        x->out = &sl->out;
    } else {
        x = calloc(1, sizeof(Ctx));
        if (x == NULL)
            return NULL;
        memset(tmp_out, 0, sizeof(*tmp_out));
        x->out = tmp_out;
    }
    x->E = E;
    x->slot = sl;
    x->cache = sl ? &sl->cache : NULL;
    x->collect = 0;
    x->nspan = 0;
    x->out->n = 0;
    return x;
}

static void ctx_end(Slot *sl, Ctx *x)
{
    if (sl) {
        ctx_trim(x);
        if (sl->out.cap * 4 > OUT_KEEP) {
            free(sl->out.v);
            sl->out.v = NULL;
            sl->out.cap = 0;
        }
        pthread_mutex_unlock(&sl->lock);
    } else if (x) {
        ctx_free_scratch(x);
        free(x->out->v);
        x->out->v = NULL;
        x->out->cap = 0;
        free(x);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Python type */

/* The result lists' ints: one PyLong per id below the largest vocabulary loaded in the process,
 * shared by every Encoder and never freed (CPython keeps its small ints the same way), so building
 * a result list allocates no int.
 *
 * On CPython 3.11 (64-bit, no refcount debugging) the table's ints are also pinned: each one's
 * reference count is raised by INTS_PIN once, and a result list stores them without taking a
 * reference. Freeing such a list still releases one per item, so the count drifts down by one per
 * id handed out, from 2**60: it cannot reach zero in any process's lifetime (at 10**9 ids a second,
 * 36 years), which is what CPython 3.12's immortal objects rely on too. What this saves is a
 * read-modify-write of a random int object per id: for GPT-2 50k objects (1.6 MB) and for o200k
 * 200k (6.4 MB) beyond the L2, where the writes missed; callgrind and paired CPU in bench/README.md.
 * Python 3.12+ changed how reference counts are split and checked, so there the lists take their
 * references as usual. */
#if PY_VERSION_HEX < 0x030C0000 && SIZEOF_VOID_P == 8 && !defined(Py_REF_DEBUG) && !defined(Py_GIL_DISABLED)
#define INTS_PIN ((Py_ssize_t)1 << 60)
#endif

static PyObject **g_ints;
static Py_ssize_t g_nints;

/* Make ints 0 .. n - 1 exist in the table (the GIL held). */
static int ints_reserve(Py_ssize_t n)
{
    if (n <= g_nints)
        return 0;
    PyObject **t = PyMem_Realloc(g_ints, (size_t)n * sizeof(PyObject *));
    if (t == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    g_ints = t;
    for (; g_nints < n; g_nints++) {
        PyObject *v = PyLong_FromSsize_t(g_nints);
        if (v == NULL)
            return -1;
#ifdef INTS_PIN
        Py_SET_REFCNT(v, Py_REFCNT(v) + INTS_PIN);
#endif
        g_ints[g_nints] = v;
    }
    return 0;
}

/* Result memory from malloc faulted in by the page run, not page by page (the GIL held).
 *
 * A result a caller keeps is fresh memory: a cold pass of `encode` per document over the 13.5 MB
 * multilingual corpus keeps 42 MB of list items (GPT-2: 5.26 M ids at 8 bytes), faulted in 4 KB at a
 * time as the ids are written, ~10 k faults. A C loop writing 28 MB of fresh memory on this VM: 9-13
 * ms page by page, 5-6 ms with one MADV_POPULATE_WRITE per 128 KB before writing (no data changes;
 * pages already there are left). A call over pages already there is a wasted syscall (a warm pass
 * reusing freed items: +4% when every result was populated), so only memory new to the process is
 * populated: glibc's main heap (below the program break) grows at its top, so the part of a block
 * past the highest point populated before (`g_fresh_hwm`, lowered when the heap shrinks), and a
 * block from elsewhere (glibc gives blocks of 128 KB and more their own mapping, at first) from
 * PREFAULT_OWN bytes on, whole. Runs under PREFAULT_MIN are left to the faults (a syscall costs more
 * than a few faults). Only the block itself: populating ahead of it zeroes lines that leave the cache
 * before they are written. A wrong guess costs a syscall or today's faults, nothing else. Numbers
 * in bench/README.md (twenty-second sitting). */
#if defined(__linux__) && defined(__GLIBC__) && !defined(Py_GIL_DISABLED)
#include <unistd.h>
#define PREFAULT_MIN ((uintptr_t)32 << 10)
#define PREFAULT_OWN ((size_t)128 << 10)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL, then it is not asked again */
#endif
static uintptr_t g_fresh_hwm;
static int g_fresh_off;

static void prefault_fresh(void *p, size_t bytes)
{
    if (g_fresh_off || bytes < PREFAULT_MIN)
        return;
    uintptr_t a = (uintptr_t)p, e = a + bytes, lo;
    uintptr_t brk = (uintptr_t)sbrk(0);
    if (brk != (uintptr_t)-1 && a < brk) {
        if (g_fresh_hwm > brk)
            g_fresh_hwm = brk; /* the heap was trimmed: what lay above is gone */
        if (e <= g_fresh_hwm)
            return;
        lo = a > g_fresh_hwm ? a : g_fresh_hwm;
        g_fresh_hwm = e;
    } else if (bytes >= PREFAULT_OWN) {
        lo = a;
    } else {
        return;
    }
    lo = (lo + 4095) & ~(uintptr_t)4095; /* a page begun before is there already */
    uintptr_t hi = (e + 4095) & ~(uintptr_t)4095;
    if (hi < lo + PREFAULT_MIN)
        return;
    if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) != 0 && (errno == EINVAL || errno == EPERM || errno == ENOSYS))
        g_fresh_off = 1; /* a kernel without it, or a sandbox refusing it */
}
#else
static void prefault_fresh(void *p, size_t bytes)
{
    (void)p;
    (void)bytes;
}
#endif

/* A list of the ids (the GIL held). Every id an Encoder writes is below its n_ids (Encoder_new),
 * so each item is the table's int: no test per id, no int made, nothing that can fail after the
 * item array is allocated. Its item array is written once, from the front: PyList_New would
 * first zero it (a calloc: a second pass over up to 8 bytes per id). */
static PyObject *ids_to_list(Encoder *E, const IdVec *o)
{
    (void)E;
    Py_ssize_t n = (Py_ssize_t)o->n;
#ifdef Py_GIL_DISABLED
    /* The free-threaded build keeps a list's capacity in a header before its items, so the item
     * array cannot come from PyMem_Malloc: fill a list made by PyList_New. */
    PyObject *list = PyList_New(n);
#else
    PyObject *list = PyList_New(0);
#endif
    if (list == NULL)
        return NULL;
    /* A list of ints cannot be part of a reference cycle: keep it out of the cyclic GC, whose
     * passes over millions of ids in live result lists cost as much as encoding them (CPython
     * untracks tuples and dicts of atomic values the same way). Only a list later made to hold
     * a container that refers back to it would escape collection. */
    PyObject_GC_UnTrack(list);
    if (n == 0)
        return list;
#ifdef Py_GIL_DISABLED
    PyObject **items = ((PyListObject *)list)->ob_item;
#else
    PyObject **items = PyMem_Malloc((size_t)n * sizeof(PyObject *));
    if (items == NULL) {
        Py_DECREF(list);
        return PyErr_NoMemory();
    }
    prefault_fresh(items, (size_t)n * sizeof(PyObject *));
#endif
    PyObject *const *ints = g_ints;
    const uint32_t *v = o->v;
    /* the table is read at random (1.6 MB of pointers at 200k ids): each id's slot is requested 16
     * ids ahead, in a loop of its own so the ids of the tail cost no test of the look-ahead. With
     * pinned ints (INTS_PIN) an item is the table's pointer and nothing else is touched. */
    Py_ssize_t i = 0;
    for (; i + 20 <= n; i += 4) { /* four at a time: the loop's own test and step once per four */
        for (int q = 0; q < 4; q++)
            __builtin_prefetch(&ints[v[i + 16 + q]]);
        for (int q = 0; q < 4; q++) {
            items[i + q] = ints[v[i + q]];
#ifndef INTS_PIN
            Py_INCREF(items[i + q]);
#endif
        }
    }
    for (; i < n; i++) {
        items[i] = ints[v[i]];
#ifndef INTS_PIN
        Py_INCREF(items[i]);
#endif
    }
#ifndef Py_GIL_DISABLED
    PyListObject *l = (PyListObject *)list;
    l->ob_item = items;
    l->allocated = n;
    Py_SET_SIZE(list, n);
#endif
    return list;
}

static int ready_str(PyObject *s)
{
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.100s", Py_TYPE(s)->tp_name);
        return -1;
    }
    return PyUnicode_READY(s);
}

static PyObject *run_error(int rc)
{
    if (rc == -2)
        return PyErr_Format(PyExc_ValueError, "a text of 1 GiB or more cannot be encoded in one piece; "
                                              "split it first");
    return PyErr_NoMemory();
}

static PyObject *idbuf_copy(const IdVec *o);

/* The ids of one prepared text: a list (array 0), or an IdBuffer of uint32 (array 1). */
/* nosur: a str holding a surrogate code unit is not encoded: None (found by the conversion). */
static PyObject *encode_text_as(Encoder *E, PyObject *text, int array, int nosur)
{
    if (ready_str(text) < 0)
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text), ascii = PyUnicode_IS_ASCII(text);
    const void *data = PyUnicode_DATA(text);
    Slot *sl = slot_acquire(E);
    IdVec tmp_out;
    Ctx *x = ctx_begin(E, sl, &tmp_out);
    if (x == NULL) {
        if (sl)
            pthread_mutex_unlock(&sl->lock);
        return PyErr_NoMemory();
    }
    int rc;
    if (n >= GIL_RELEASE_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        rc = nosur ? run_str_nosur(x, data, kind, ascii, n) : run_str(x, data, kind, ascii, n);
        Py_END_ALLOW_THREADS
    } else {
        rc = nosur ? run_str_nosur(x, data, kind, ascii, n) : run_str(x, data, kind, ascii, n);
    }
    PyObject *res = rc == -3 ? Py_NewRef(Py_None)
                    : rc < 0 ? run_error(rc)
                    : array  ? idbuf_copy(x->out)
                             : ids_to_list(E, x->out);
    ctx_end(sl, x);
    return res;
}

static PyObject *Encoder_encode_text(Encoder *E, PyObject *text)
{
    return encode_text_as(E, text, 0, 0);
}

static PyObject *Encoder_encode_text_array(Encoder *E, PyObject *text)
{
    return encode_text_as(E, text, 1, 0);
}

static PyObject *Encoder_encode_text_nosur(Encoder *E, PyObject *text)
{
    return encode_text_as(E, text, 0, 1);
}

static PyObject *Encoder_encode_text_array_nosur(Encoder *E, PyObject *text)
{
    return encode_text_as(E, text, 1, 1);
}

/* ---------------------------------------------------------------------------------------- */
/* IdBuffer: a uint32 id array handed to Python without a copy (the buffer protocol; numpy reads
 * it with frombuffer), freed with the object. */

typedef struct {
    PyObject_HEAD
    uint32_t *v;
    Py_ssize_t n;
    Py_ssize_t exports;
    void *map;      /* NULL: v is malloc'd; else v lies in this mapping of map_len bytes */
    size_t map_len;
    size_t map_off; /* where the mapping began in the batch's (map_keep) */
} IdBuffer;

static int IdBuffer_getbuffer(IdBuffer *self, Py_buffer *view, int flags)
{
    if (PyBuffer_FillInfo(view, (PyObject *)self, self->v, self->n * 4, 1, flags) < 0)
        return -1;
    if (flags & PyBUF_FORMAT)
        view->format = "I";
    view->itemsize = 4;
    self->exports++;
    return 0;
}

static void IdBuffer_releasebuffer(IdBuffer *self, Py_buffer *Py_UNUSED(view))
{
    self->exports--;
}

static void IdBuffer_dealloc(IdBuffer *self)
{
    if (self->map)
        map_keep(self->map, self->map_len, self->map_off);
    else
        free(self->v);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t IdBuffer_len(IdBuffer *self)
{
    return self->n * 4;
}

static PyBufferProcs IdBuffer_as_buffer = {
    (getbufferproc)IdBuffer_getbuffer,
    (releasebufferproc)IdBuffer_releasebuffer,
};

static PySequenceMethods IdBuffer_as_sequence = {.sq_length = (lenfunc)IdBuffer_len};

static PyTypeObject IdBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rmlprep._fastbpe.IdBuffer",
    .tp_basicsize = sizeof(IdBuffer),
    .tp_dealloc = (destructor)IdBuffer_dealloc,
    .tp_as_buffer = &IdBuffer_as_buffer,
    .tp_as_sequence = &IdBuffer_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "uint32 token ids (a read-only buffer of native-endian uint32; len() is in bytes).",
};

/* An IdBuffer owning o's ids (trimmed to size); o is left empty. */
static PyObject *idbuf_take(IdVec *o)
{
    IdBuffer *b = PyObject_New(IdBuffer, &IdBufferType);
    if (b == NULL)
        return NULL;
    b->v = NULL;
    b->map = NULL;
    uint32_t *v = o->v;
    if (o->n == 0) {
        v = malloc(4); /* o keeps its vector when this fails (it was freed first: o's pointer dangled) */
        if (v != NULL)
            free(o->v);
    } else if (o->cap > o->n + o->n / 8) {
        uint32_t *t = realloc(v, o->n * 4);
        if (t != NULL)
            v = t;
    }
    if (v == NULL) {
        Py_DECREF(b); /* dealloc frees NULL */
        return PyErr_NoMemory();
    }
    b->v = v;
    b->n = (Py_ssize_t)o->n;
    b->exports = 0;
    o->v = NULL;
    o->n = o->cap = 0;
    return (PyObject *)b;
}

/* An IdBuffer holding a copy of o's ids (o, a slot's vector kept between calls, is left as it is):
 * 4 bytes per id, where a list takes 8 per id in its item array. */
static PyObject *idbuf_copy(const IdVec *o)
{
    IdBuffer *b = PyObject_New(IdBuffer, &IdBufferType);
    if (b == NULL)
        return NULL;
    b->map = NULL;
    b->n = 0;
    b->exports = 0;
    b->v = malloc(o->n ? o->n * 4 : 4);
    if (b->v == NULL) {
        Py_DECREF(b);
        return PyErr_NoMemory();
    }
    if (o->n)
        memcpy(b->v, o->v, o->n * 4);
    b->n = (Py_ssize_t)o->n;
    return (PyObject *)b;
}

/* An IdBuffer of the n ids at v inside the mapping [map, map + len) of map_take, cut down to the 2 MB
 * pages holding them (map_trim), which it gives to the pool (map_keep) when freed. Also on
 * failure too. */
static PyObject *idbuf_of_map(uint8_t *map, size_t len, uint32_t *v, size_t n)
{
    uintptr_t lo, hi;
    map_trim(map, len, v, v + n, &lo, &hi);
    IdBuffer *b = PyObject_New(IdBuffer, &IdBufferType);
    if (b == NULL) {
        map_keep((void *)lo, hi - lo, lo - (uintptr_t)map);
        return NULL;
    }
    b->v = v;
    b->n = (Py_ssize_t)n;
    b->exports = 0;
    b->map = (void *)lo;
    b->map_len = hi - lo;
    b->map_off = lo - (uintptr_t)map;
    return (PyObject *)b;
}

/* ---------------------------------------------------------------------------------------- */
/* batches: documents in units of about total / (32 * threads) bytes, each worker owning a
 * contiguous range of units (so its piece cache sees related text) and, once done, taking units
 * from the other end of the other ranges (so no worker idles while another has work left; the
 * last unit is what one worker may still be on when the other runs out, so units are small).
 *
 * The ids land in document order without a serial copy at the end: the result is one mapping,
 * reserved at the ids' upper bound (text_bound) and touched only where ids are written. Worker 0 encodes its range from the back, each document's ids copied in just
 * below the previous ones, ending at `mid`, the bound of range 0; worker 1 encodes its range from
 * the front, its documents' ids copied in from `mid` up. So ranges 0 and 1 meet at `mid` and
 * the result starts where range 0's ids start. Units a worker takes from another range (and
 * every unit of workers 2 and up) go to that worker's side vector and are copied into place
 * after the join: a few units, where a copy of all ids after the join was a serial pass writing
 * (and first touching) 4 bytes per token, 10-20% of a 2-thread batch's wall time; the pages those
 * units land on are faulted in before the join by the worker whose range is all taken
 * (prefault_stolen), so the copy after it only copies. The
 * per-document copies are made while the ids are still in cache, on both cores at once. One
 * thread writes its range from the front. With the mapping, the side vectors are mappings too,
 * reserved at the bound of the ranges a worker can take units from (never grown: a realloc'd
 * side vector copied itself at each doubling, 0.5-1 k of worker 1's page faults per cold call)
 * and on 2 MB pages.
 *
 * The mapping is taken from MAP_MIN_BYTES of bound on, on 2 MB pages (transparent huge pages on
 * request, like the big tables): first touching 14 MB of ids costs ~8 ms in 3.6 k page faults on
 * this VM, ~0.75 ms in 7 huge ones, and more where the host took those pages back. The written
 * parts of freed mappings (result and side vectors) go to a pool and are moved into the next
 * batch's mappings (map_take, map_keep), so a batch after one whose result was freed writes into
 * pages already there: no fault, nothing zeroed. Below that (or when the mapping fails) the workers append to their slots'
 * vectors, kept between calls: one worker's is handed over whole, 2+ workers' units are copied
 * into one vector after the join (a small copy at that size; a fresh mapping of 4 KB pages for
 * 1 MB of ids cost more, ~0.5 ms of faults per call). */

#define UNIT_MIN_BYTES (64u << 10)
#define UNIT_MAX_BYTES (1u << 20)
#define MAP_MIN_BYTES (4 * (size_t)HUGE_PAGE) /* ids' bound from which the result is a mapping */

typedef struct {
    const void *data;
    Py_ssize_t len; /* code units (str) or bytes (UTF-8) */
    int kind;       /* PyUnicode kind, or KIND_UTF8 */
    int ascii;      /* read in place: ASCII str or UTF-8 bytes */
    int utf8;       /* UTF-8 bytes: validated before use */
} DocRef;

#define TO_SIDE 0 /* batch_unit: append to the worker's side vector (its slot's without a mapping) */
#define TO_BACK 1 /* worker 0, range 0 from the back: each document's ids below map[back] */
#define TO_FWD 2  /* worker 1, range 1 from the front: each document's ids from map[fwd] on */

typedef struct Batch {
    Encoder *E;
    const DocRef *docs;
    Py_ssize_t nt;
    int64_t *doc_n;          /* ids of each document */
    uint8_t *sur;            /* NULL, or set for each str holding a surrogate code unit (encode_batch surrogates) */
    Py_ssize_t *unit_first;  /* first document of each unit, nunits + 1 entries */
    IdVec **unit_vec;        /* the side vector holding each unit's ids; NULL: in the mapping */
    size_t *unit_pos;        /* where they start in it */
    size_t nunits;
    uint64_t ranges[MAX_THREADS]; /* per worker: next unit << 32 | end unit (taken with CAS) */
    uint64_t ranges0[MAX_THREADS]; /* the same before any is taken */
    const uint64_t *unit_bound;   /* ids' bound (text_bound) of each unit */
    int nworkers;
    Ctx *ctx[MAX_THREADS];
    IdVec side[MAX_THREADS]; /* with the mapping: each worker's units from other ranges */
    size_t side_map[MAX_THREADS]; /* bytes of a side vector that is a mapping (0: malloc'd) */
    IdVec whole;             /* the result of 2+ workers without a mapping */
    Shared *shared;          /* the shared piece cache this batch holds (E->shared_lock), or NULL */
    ViewLine view[MAX_THREADS]; /* each worker's view of it (the Batch is allocated 64-aligned) */
    uint32_t *map;           /* the result (NULL: below MAP_MIN_BYTES, or the mapping failed) */
    size_t map_len;          /* bytes */
    size_t mid, back, fwd;   /* ids: where ranges 0 and 1 meet; worker 0's and worker 1's cursors */
    size_t bound_hi;         /* ids: the mapping's size */
    int failed;              /* set once: -1 out of memory, -2 text too long, -3 invalid UTF-8 */
    Py_ssize_t bad_doc;
} Batch;

static long take_unit(uint64_t *r, int front)
{
    uint64_t v = __atomic_load_n(r, __ATOMIC_ACQUIRE);
    for (;;) {
        uint32_t f = (uint32_t)(v >> 32), b = (uint32_t)v;
        if (f >= b)
            return -1;
        uint64_t nv = front ? ((uint64_t)(f + 1) << 32 | b) : ((uint64_t)f << 32 | (b - 1));
        if (__atomic_compare_exchange_n(r, &v, nv, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return front ? (long)f : (long)(b - 1);
    }
}

/* Well-formed UTF-8 (no surrogates, no overlongs, nothing above U+10FFFF). */
static int utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (!(v & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        uint8_t b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        size_t l;
        uint32_t lo = 0x80, hi = 0xBF, c;
        if (b >= 0xC2 && b <= 0xDF) {
            l = 2;
        } else if (b >= 0xE0 && b <= 0xEF) {
            l = 3;
            if (b == 0xE0)
                lo = 0xA0;
            else if (b == 0xED)
                hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            l = 4;
            if (b == 0xF0)
                lo = 0x90;
            else if (b == 0xF4)
                hi = 0x8F;
        } else {
            return 0;
        }
        if (i + l > n)
            return 0;
        c = s[i + 1];
        if (c < lo || c > hi)
            return 0;
        for (size_t q = 2; q < l; q++)
            if ((s[i + q] & 0xC0) != 0x80)
                return 0;
        i += l;
    }
    return 1;
}

static void batch_fail(Batch *B, int rc, Py_ssize_t doc)
{
    int zero = 0;
    if (__atomic_compare_exchange_n(&B->failed, &zero, rc, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        B->bad_doc = doc;
}

/* One document on worker t, its ids appended to x->out; 0, or -1 after batch_fail. */
static int batch_doc(Batch *B, Ctx *x, Py_ssize_t i)
{
    const DocRef *d = &B->docs[i];
    size_t before = x->out->n;
    if (d->utf8 && !utf8_valid(d->data, (size_t)d->len)) {
        batch_fail(B, -3, i);
        return -1;
    }
    if (x->cache && x->cache->full) /* the shared cache took no more: the slot's, as without it */
        x->cache = x->slot ? &x->slot->cache : NULL;
    int rc = run_str(x, d->data, d->kind, d->ascii, d->len);
    if (rc < 0) {
        batch_fail(B, rc, i);
        return -1;
    }
    if (B->sur)
        B->sur[i] = (uint8_t)x->sur; /* found by set_text's conversion, in this worker */
    B->doc_n[i] = (int64_t)(x->out->n - before);
    return 0;
}

/* Unit u on worker t (`to`: TO_SIDE, TO_BACK, TO_FWD). In the mapping, each document is encoded
 * into the slot's vector (x->out, reused) and copied into place. */
static void batch_unit(Batch *B, int t, size_t u, int to)
{
    Ctx *x = B->ctx[t];
    Py_ssize_t first = B->unit_first[u], last = B->unit_first[u + 1];
    if (to == TO_SIDE) { /* without a mapping: the slot's own vector (kept between calls) */
        IdVec *own = x->out;
        if (B->map)
            x->out = &B->side[t];
        B->unit_vec[u] = x->out;
        B->unit_pos[u] = x->out->n;
        for (Py_ssize_t i = first; i < last && !__atomic_load_n(&B->failed, __ATOMIC_RELAXED); i++) {
            const DocRef *d = &B->docs[i];
            /* a mapped side vector cannot grow: its reserve covers every unit it can take (flush
             * reserves at most the document's bound + INLINE_IDS + ARENA_PAD past its ids) */
            if (B->side_map[t] && x->out->n + text_bound(B->E->kind != KIND_BYTE_LEVEL, d->kind, d->ascii,
                                                         (size_t)d->len) + 64 > x->out->cap) {
                batch_fail(B, -1, i); /* cannot happen: ids <= text_bound */
                break;
            }
            if (batch_doc(B, x, i) < 0)
                break;
        }
        x->out = own;
        return;
    }
    B->unit_vec[u] = NULL;
    for (Py_ssize_t k = 0; k < last - first && !__atomic_load_n(&B->failed, __ATOMIC_RELAXED); k++) {
        Py_ssize_t i = to == TO_BACK ? last - 1 - k : first + k;
        x->out->n = 0;
        if (batch_doc(B, x, i) < 0)
            return;
        size_t n = x->out->n;
        if (n > (to == TO_BACK ? B->back : B->bound_hi - B->fwd)) { /* cannot happen: ids <= text_bound */
            batch_fail(B, -1, i);
            return;
        }
        if (to == TO_BACK) {
            B->back -= n;
            memcpy(B->map + B->back, x->out->v, n * 4);
        } else {
            memcpy(B->map + B->fwd, x->out->v, n * 4);
            B->fwd += n;
        }
    }
    x->out->n = 0;
}

typedef struct {
    Batch *B;
    int t;
} WorkerArg;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL and nothing is done */
#endif

/* Two workers on the mapping, worker t's own range done: the result pages the other worker's units
 * from range t will be copied into after the join, faulted in now (MADV_POPULATE_WRITE: no data
 * changes, pages already there untouched). Those units end up beside this worker's part: below
 * `back` (range 0, stolen from its front) or above `fwd` (range 1, from its back), so the place is
 * known once this worker's range is all taken; their ids are estimated from their text bound at
 * this worker's own ids per bound. This runs while the other worker is still on its last units
 * (the time this worker would wait), where the copy after the join touched those pages first, on
 * one core: 1-2 huge pages (0.25 ms each), 5 ms each when the host has taken the memory back
 * (bench/README.md, twenty-first sitting). An estimate short of the ids leaves the rest to the copy,
 * as before; one over them faults a page the result does not keep. */
static void prefault_stolen(Batch *B, int t)
{
    uint32_t first = (uint32_t)(B->ranges0[t] >> 32), end = (uint32_t)B->ranges0[t];
    /* every unit is taken (each take moves a cursor by one, so they met): [first, cut) went to the
     * other worker (range 0: its front) or [cut, end) (range 1: its back) */
    uint32_t cut = (uint32_t)(__atomic_load_n(&B->ranges[t], __ATOMIC_ACQUIRE) >> 32);
    uint64_t own_b = 0, other_b = 0;
    for (uint32_t u = first; u < end; u++)
        *((t == 0) == (u < cut) ? &other_b : &own_b) += B->unit_bound[u];
    size_t own_ids = t == 0 ? B->mid - B->back : B->fwd - B->mid;
    if (other_b == 0 || own_b == 0)
        return;
    uint64_t est = (uint64_t)((double)own_ids * ((double)other_b / (double)own_b));
    est += est / 8; /* a margin: the parts' ids per byte differ */
    uintptr_t lo, hi;
    if (t == 0) {
        size_t at = est < B->back ? B->back - (size_t)est : 0;
        lo = (uintptr_t)(B->map + at) & ~(uintptr_t)4095;
        hi = (uintptr_t)(B->map + B->back) & ~(uintptr_t)4095; /* the page holding `back` is there */
    } else {
        size_t at = est < B->bound_hi - B->fwd ? B->fwd + (size_t)est : B->bound_hi;
        lo = ((uintptr_t)(B->map + B->fwd) + 4095) & ~(uintptr_t)4095;
        hi = ((uintptr_t)(B->map + at) + 4095) & ~(uintptr_t)4095;
    }
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
}

static void *batch_worker(void *arg)
{
    Batch *B = ((WorkerArg *)arg)->B;
    int t = ((WorkerArg *)arg)->t;
    int mapped = B->map != NULL;
    /* with 2+ workers range 0 is encoded from the back (ending where range 1 starts): its owner
     * takes units there, the others from the front; a lone worker writes from the front */
    int back = mapped && t == 0 && B->nworkers > 1;
    int own_front = !back;
    int own_to = !mapped || t >= 2 ? TO_SIDE : back ? TO_BACK : TO_FWD;
    long u;
    while ((u = take_unit(&B->ranges[t], own_front)) >= 0)
        batch_unit(B, t, (size_t)u, own_to);
    if (mapped && B->nworkers == 2 && !__atomic_load_n(&B->failed, __ATOMIC_RELAXED))
        prefault_stolen(B, t);
    for (int k = 1; k < B->nworkers; k++) { /* then help the others, from the other end */
        int o = (t + k) % B->nworkers;
        int front = mapped && o == 0; /* range 0 is encoded from the back */
        while ((u = take_unit(&B->ranges[o], front)) >= 0)
            batch_unit(B, t, (size_t)u, TO_SIDE);
    }
    return NULL;
}

/* Encode docs[0, nt) on up to num_threads workers (GIL released); returns (ids, offsets): an
 * IdBuffer of uint32 ids and bytes of int64 offsets. */
static PyObject *encode_docs(Encoder *E, const DocRef *docs, Py_ssize_t nt, int num_threads, uint8_t *sur)
{
    Batch *B = aligned_alloc(_Alignof(Batch), sizeof(Batch)); /* sizeof is a multiple of the alignment */
    if (B != NULL)
        memset(B, 0, sizeof(Batch));
    PyObject *offs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * (nt + 1)));
    PyObject *res = NULL;
    Slot *slots[MAX_THREADS] = {0};
    IdVec *priv = NULL;
    uint64_t *unit_bytes = NULL, *unit_bound = NULL, range_bound[MAX_THREADS] = {0};
    if (B == NULL || offs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    B->E = E;
    B->docs = docs;
    B->nt = nt;
    B->sur = sur;
    /* units of whole documents, about total / (32 * threads) bytes each */
    uint64_t total = 0;
    for (Py_ssize_t i = 0; i < nt; i++)
        total += (uint64_t)docs[i].len * (uint64_t)(docs[i].utf8 ? 1 : docs[i].kind);
    uint64_t target = total / (32 * (uint64_t)num_threads);
    target = target < UNIT_MIN_BYTES ? UNIT_MIN_BYTES : target > UNIT_MAX_BYTES ? UNIT_MAX_BYTES : target;
    B->unit_first = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(nt + 2));
    unit_bytes = PyMem_Malloc(sizeof(uint64_t) * (size_t)(nt + 1));
    unit_bound = PyMem_Malloc(sizeof(uint64_t) * (size_t)(nt + 1));
    B->doc_n = PyMem_Calloc((size_t)nt + 1, sizeof(int64_t));
    if (!B->unit_first || !unit_bytes || !unit_bound || !B->doc_n) {
        PyErr_NoMemory();
        goto done;
    }
    int sp = E->kind != KIND_BYTE_LEVEL;
    size_t nu = 0;
    uint64_t acc = 0, accb = 0;
    B->unit_first[0] = 0;
    for (Py_ssize_t i = 0; i < nt; i++) {
        acc += (uint64_t)docs[i].len * (uint64_t)(docs[i].utf8 ? 1 : docs[i].kind);
        accb += text_bound(sp, docs[i].kind, docs[i].ascii, (size_t)docs[i].len);
        if (acc >= target || i + 1 == nt) {
            unit_bytes[nu] = acc;
            unit_bound[nu] = accb;
            B->unit_first[++nu] = i + 1;
            acc = accb = 0;
        }
    }
    B->nunits = nu;
    B->unit_bound = unit_bound;
    B->unit_vec = PyMem_Calloc(nu + 1, sizeof(IdVec *));
    B->unit_pos = PyMem_Calloc(nu + 1, sizeof(size_t));
    if (!B->unit_vec || !B->unit_pos) {
        PyErr_NoMemory();
        goto done;
    }
    int nw = num_threads < 1 ? 1 : num_threads > MAX_THREADS ? MAX_THREADS : num_threads;
    if ((size_t)nw > nu)
        nw = nu ? (int)nu : 1;
    B->nworkers = nw;
    /* contiguous ranges of about equal bytes; the mapping's meeting point: range 0's bound */
    {
        size_t u = 0;
        uint64_t done_bytes = 0, bound = 0;
        for (int t = 0; t < nw; t++) {
            size_t start = u;
            uint64_t goal = total * (uint64_t)(t + 1) / (uint64_t)nw, before = bound;
            while (u < nu && (t == nw - 1 || done_bytes + unit_bytes[u] / 2 < goal)) {
                done_bytes += unit_bytes[u];
                bound += unit_bound[u];
                u++;
            }
            B->ranges[t] = B->ranges0[t] = ((uint64_t)start << 32) | u;
            range_bound[t] = bound - before;
            if (t == 0)
                B->mid = (size_t)bound;
        }
        B->bound_hi = (size_t)bound;
    }
    if ((B->bound_hi + 1) * 4 >= MAP_MIN_BYTES) {
        /* reserved, not committed: only the pages the ids are written to are touched */
        if (nw == 1)
            B->mid = 0; /* one worker writes its range from the front */
        B->map_len = ((B->bound_hi + 1) * 4 + 4095) & ~(size_t)4095;
        B->map = map_take(B->map_len);
        B->back = B->fwd = B->mid;
        for (int t = 0; B->map != NULL && nw > 1 && t < nw; t++) {
            /* ids of the ranges it can take units from (workers 2 and up: their own too), + flush's
             * reserve beyond them; NULL: grown as before */
            size_t cap = (size_t)(t >= 2 ? B->bound_hi : B->bound_hi - range_bound[t]) + 256;
            size_t bytes = (cap * 4 + 4095) & ~(size_t)4095;
            if ((B->side[t].v = map_take(bytes)) != NULL) {
                B->side[t].cap = cap;
                B->side_map[t] = bytes;
            }
        }
    }
    priv = PyMem_Calloc((size_t)nw, sizeof(IdVec));
    if (priv == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (int t = 0; t < nw; t++) {
        slots[t] = slot_acquire(E);
        B->ctx[t] = ctx_begin(E, slots[t], &priv[t]);
        if (B->ctx[t] == NULL) {
            if (slots[t])
                pthread_mutex_unlock(&slots[t]->lock);
            slots[t] = NULL;
            for (int k = 0; k < t; k++)
                ctx_end(slots[k], B->ctx[k]);
            PyErr_NoMemory();
            goto done;
        }
    }
    if (nw == 1 && B->ctx[0]->cache != NULL)
        cache_presize(B->ctx[0]->cache, total);
    /* 2+ workers share one piece cache when no other batch holds it (else each uses its slot's) */
    if (nw > 1 && pthread_mutex_trylock(&E->shared_lock) == 0) {
        mark_gen(&E->shared_gen);
        if (E->shared == NULL)
            E->shared = calloc(1, sizeof(Shared));
        int ok = E->shared != NULL && shared_prepare(E->shared, total) == 0;
        for (int t = 0; ok && t < nw; t++)
            ok = shared_view(E->shared, t, &B->view[t].c) == 0;
        if (ok) {
            B->shared = E->shared;
            for (int t = 0; t < nw; t++)
                B->ctx[t]->cache = &B->view[t].c;
        } else {
            pthread_mutex_unlock(&E->shared_lock);
        }
    }
    int64_t *off = (int64_t *)PyBytes_AS_STRING(offs);
    uint64_t ntok = 0;
    uint32_t *res_v = NULL; /* the result, in the mapping */
    IdVec *result = NULL;   /* else the result */
    int placed = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_t th[MAX_THREADS];
    WorkerArg args[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 1; t < nw; t++) {
        args[t] = (WorkerArg){B, t};
        started[t] = pthread_create(&th[t], NULL, batch_worker, &args[t]) == 0;
    }
    args[0] = (WorkerArg){B, 0};
    batch_worker(&args[0]);
    for (int t = 1; t < nw; t++) {
        if (started[t])
            pthread_join(th[t], NULL);
    }
    for (int t = 1; t < nw; t++) /* a worker that could not start: its range is done here */
        if (!started[t]) {
            long u;
            while ((u = take_unit(&B->ranges[t], 1)) >= 0)
                batch_unit(B, 0, (size_t)u, TO_SIDE);
        }
    if (B->shared) {
        shared_end(B->shared, B->view, nw);
        B->shared = NULL;
        pthread_mutex_unlock(&E->shared_lock);
    }
    for (Py_ssize_t i = 0; i < nt; i++) {
        off[i] = (int64_t)ntok;
        ntok += (uint64_t)B->doc_n[i];
    }
    off[nt] = (int64_t)ntok;
    if (!B->failed) { /* the units that are not in place yet, copied in */
        uint32_t *dst = NULL;
        if (B->map) {
            /* the ids written in place start at `back`: those of the first unit written in place */
            size_t a = 0;
            while (a < B->nunits && B->unit_vec[a] != NULL)
                a++;
            dst = res_v = a < B->nunits ? B->map + B->back - off[B->unit_first[a]] : B->map;
            placed = 1;
        } else { /* one worker wrote its units in order into its vector; else all are copied */
            result = nw == 1 ? B->ctx[0]->out : &B->whole;
            if (ntok <= result->cap || grow((void **)&result->v, &result->cap, (size_t)ntok, 4) == 0) {
                dst = result->v;
                result->n = (size_t)ntok;
                placed = 1;
            }
        }
        for (size_t u = 0; placed && u < B->nunits; u++) {
            IdVec *src = B->unit_vec[u];
            Py_ssize_t first = B->unit_first[u], last = B->unit_first[u + 1];
            if (src != NULL && src->v + B->unit_pos[u] != dst + off[first])
                memcpy(dst + off[first], src->v + B->unit_pos[u], (size_t)(off[last] - off[first]) * 4);
        }
    }
    Py_END_ALLOW_THREADS
    if (B->failed) {
        if (B->failed == -3)
            PyErr_Format(PyExc_ValueError, "texts[%zd] is not well-formed UTF-8", B->bad_doc);
        else
            run_error(B->failed);
    } else if (!placed) {
        PyErr_NoMemory();
    } else {
        PyObject *ids;
        if (B->map) {
            ids = idbuf_of_map((uint8_t *)B->map, B->map_len, res_v, (size_t)ntok);
            B->map = NULL; /* unmapped by it */
        } else {
            ids = idbuf_take(result);
        }
        if (ids != NULL) {
            res = PyTuple_Pack(2, ids, offs);
            Py_DECREF(ids);
        }
    }
    for (int t = 0; t < nw; t++)
        ctx_end(slots[t], B->ctx[t]);
done:
    if (B) {
        PyMem_Free(B->unit_first);
        PyMem_Free(B->doc_n);
        PyMem_Free(B->unit_vec);
        PyMem_Free(B->unit_pos);
        for (int t = 0; t < MAX_THREADS; t++)
            if (B->side_map[t])
                map_give_range(B->side[t].v, B->side_map[t], B->side[t].v, B->side[t].v + B->side[t].n);
            else
                free(B->side[t].v);
        free(B->whole.v);
        if (B->map)
            munmap(B->map, B->map_len);
        free(B);
    }
    PyMem_Free(unit_bytes);
    PyMem_Free(unit_bound);
    PyMem_Free(priv);
    Py_XDECREF(offs);
    return res;
}

static PyObject *Encoder_encode_batch(Encoder *E, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"texts", "num_threads", "surrogates", NULL};
    PyObject *texts;
    int num_threads = 1, want_sur = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|ip", kwlist, &texts, &num_threads, &want_sur))
        return NULL;
    if (num_threads < 1)
        return PyErr_Format(PyExc_ValueError, "num_threads = %d; give 1 or more", num_threads);
    PyObject *tup = PySequence_Tuple(texts); /* holds the strs while the GIL is released */
    if (tup == NULL)
        return NULL;
    Py_ssize_t nt = PyTuple_GET_SIZE(tup);
    DocRef *docs = PyMem_Malloc(sizeof(DocRef) * (size_t)(nt + 1));
    uint8_t *sur = want_sur ? PyMem_Calloc((size_t)nt + 1, 1) : NULL;
    PyObject *res = NULL;
    if (docs == NULL || (want_sur && sur == NULL)) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *s = PyTuple_GET_ITEM(tup, i);
        if (ready_str(s) < 0) {
            PyErr_Format(PyExc_TypeError, "texts[%zd] is %.100s, expected str", i, Py_TYPE(s)->tp_name);
            goto done;
        }
        docs[i] = (DocRef){PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s), PyUnicode_KIND(s), PyUnicode_IS_ASCII(s), 0};
    }
    res = encode_docs(E, docs, nt, num_threads, sur);
    if (res != NULL && want_sur) { /* (ids, offsets, the indices of the strs holding a surrogate) */
        PyObject *rows = PyList_New(0), *full = NULL;
        for (Py_ssize_t i = 0; rows != NULL && i < nt; i++) {
            PyObject *k = sur[i] ? PyLong_FromSsize_t(i) : NULL;
            if (sur[i] && (k == NULL || PyList_Append(rows, k) < 0))
                Py_CLEAR(rows);
            Py_XDECREF(k);
        }
        if (rows != NULL)
            full = PyTuple_Pack(3, PyTuple_GET_ITEM(res, 0), PyTuple_GET_ITEM(res, 1), rows);
        Py_XDECREF(rows);
        Py_SETREF(res, full);
    }
done:
    PyMem_Free(docs);
    PyMem_Free(sur);
    Py_DECREF(tup);
    return res;
}

static int get_buffer(PyObject *obj, Py_buffer *view, size_t itemsize, const char *what);

static PyObject *Encoder_encode_utf8(Encoder *E, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"data", "offsets", "num_threads", NULL};
    PyObject *data_obj, *off_obj;
    int num_threads = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|i", kwlist, &data_obj, &off_obj, &num_threads))
        return NULL;
    if (num_threads < 1)
        return PyErr_Format(PyExc_ValueError, "num_threads = %d; give 1 or more", num_threads);
    Py_buffer dv, ov;
    if (PyObject_GetBuffer(data_obj, &dv, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (get_buffer(off_obj, &ov, 8, "offsets") < 0) {
        PyBuffer_Release(&dv);
        return NULL;
    }
    PyObject *res = NULL;
    const int64_t *o = ov.buf;
    Py_ssize_t nt = ov.len / 8 - 1;
    DocRef *docs = NULL;
    if (nt < 0) {
        PyErr_SetString(PyExc_ValueError, "offsets: need at least one entry");
        goto done;
    }
    docs = PyMem_Malloc(sizeof(DocRef) * (size_t)(nt + 1));
    if (docs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nt; i++) {
        if (o[i] < 0 || o[i + 1] < o[i] || o[i + 1] > dv.len) {
            PyErr_Format(PyExc_ValueError, "offsets[%zd:%zd] = (%lld, %lld) out of the %zd-byte data", i, i + 2,
                         (long long)o[i], (long long)o[i + 1], dv.len);
            goto done;
        }
        docs[i] = (DocRef){(const uint8_t *)dv.buf + o[i], (Py_ssize_t)(o[i + 1] - o[i]), KIND_UTF8, 1, 1};
    }
    res = encode_docs(E, docs, nt, num_threads, NULL);
done:
    PyMem_Free(docs);
    PyBuffer_Release(&dv);
    PyBuffer_Release(&ov);
    return res;
}

static PyObject *Encoder_split_text(Encoder *E, PyObject *text)
{
    if (ready_str(text) < 0)
        return NULL;
    IdVec tmp_out;
    Ctx *x = ctx_begin(E, NULL, &tmp_out);
    if (x == NULL)
        return PyErr_NoMemory();
    x->collect = 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int rc = run_str(x, PyUnicode_DATA(text), PyUnicode_KIND(text), PyUnicode_IS_ASCII(text), n);
    PyObject *res = NULL;
    size_t *cp_of = NULL;
    if (rc < 0) {
        run_error(rc);
    } else if ((cp_of = malloc((x->tlen + 1) * sizeof(size_t))) == NULL) {
        PyErr_NoMemory();
    } else if ((res = PyList_New((Py_ssize_t)(x->out->n / 2))) != NULL) {
        /* byte offsets -> code-point offsets */
        size_t k = 0;
        for (size_t b = 0; b < x->tlen; b++) {
            cp_of[b] = k;
            k += (x->text[b] & 0xC0) != 0x80;
        }
        cp_of[x->tlen] = k;
        for (size_t i = 0; i < x->out->n / 2; i++) {
            PyObject *t = Py_BuildValue("(nn)", (Py_ssize_t)cp_of[x->out->v[2 * i]],
                                        (Py_ssize_t)cp_of[x->out->v[2 * i + 1]]);
            if (t == NULL) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, (Py_ssize_t)i, t);
        }
    }
    free(cp_of);
    ctx_end(NULL, x);
    return res;
}

static PyObject *Encoder_clear_cache(Encoder *E, PyObject *Py_UNUSED(ignored))
{
    /* a lock held since before a fork (an encode in another thread of the parent process) is
     * never unlocked here: that slot, or the shared cache, is left as it is */
    for (int k = 0; k < N_SLOTS; k++) {
        Slot *sl = &E->slots[k];
        if (!lock_unless_forked(&sl->lock, &sl->gen))
            continue;
        cache_free(&sl->cache);
        ctx_free_scratch(&sl->ctx);
        free(sl->out.v);
        memset(&sl->out, 0, sizeof(sl->out));
        pthread_mutex_unlock(&sl->lock);
    }
    if (lock_unless_forked(&E->shared_lock, &E->shared_gen)) {
        shared_free(E->shared);
        E->shared = NULL;
        pthread_mutex_unlock(&E->shared_lock);
    }
    Py_RETURN_NONE;
}

static PyObject *Encoder_joinable_pairs(Encoder *E, PyObject *Py_UNUSED(ignored))
{
    if (E->joinable == NULL)
        Py_RETURN_NONE;
    long n = 0;
    for (size_t i = 0; i < 65536 / 64; i++)
        n += __builtin_popcountll(E->joinable[i]);
    return PyLong_FromLong(n);
}

static PyObject *Encoder_merge_build(Encoder *E, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromLong(E->lean);
}

static PyObject *Encoder_cache_info(Encoder *E, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (int k = 0; k < N_SLOTS; k++) {
        Slot *sl = &E->slots[k];
        Cache *c = &sl->cache;
        /* read under the slot's lock: an encode in another thread (GIL released) may be growing
           or sweeping this cache; a slot in use right now is left out, as the shared cache is */
        if (pthread_mutex_trylock(&sl->lock) != 0)
            continue;
        mark_gen(&sl->gen);
        if (c->tab == NULL) {
            pthread_mutex_unlock(&sl->lock);
            continue;
        }
        size_t bytes = ((size_t)c->mask + 1) * sizeof(CEntry) + c->kcap + c->vcap * 4;
        PyObject *d = Py_BuildValue("{sisnsnsnsK}", "slot", k, "entries", (Py_ssize_t)c->count, "slots",
                                    (Py_ssize_t)c->mask + 1, "bytes", (Py_ssize_t)bytes, "sweeps",
                                    (unsigned long long)c->sweeps);
        pthread_mutex_unlock(&sl->lock);
        if (d == NULL || PyList_Append(out, d) < 0) {
            Py_XDECREF(d);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(d);
    }
    /* slot -1: the batches' shared cache, read under its lock (a batch, GIL released, may be
       creating it or growing its table right now: E->shared, S->tab), left out while one holds it */
    if (pthread_mutex_trylock(&E->shared_lock) == 0) {
        mark_gen(&E->shared_gen);
        Shared *S = E->shared;
        if (S == NULL || S->tab == NULL) {
            pthread_mutex_unlock(&E->shared_lock);
            return out;
        }
        size_t bytes = ((size_t)S->mask + 1) * sizeof(CEntry) + S->kn + S->vn * 4;
        PyObject *d = Py_BuildValue("{sisnsnsnsK}", "slot", -1, "entries", (Py_ssize_t)S->count, "slots",
                                    (Py_ssize_t)S->mask + 1, "bytes", (Py_ssize_t)bytes, "sweeps",
                                    (unsigned long long)S->sweeps);
        pthread_mutex_unlock(&E->shared_lock);
        if (d == NULL || PyList_Append(out, d) < 0) {
            Py_XDECREF(d);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(d);
    }
    return out;
}

/* ---------------------------------------------------------------------------------------- */
/* construction */

static int get_buffer(PyObject *obj, Py_buffer *view, size_t itemsize, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->len % (Py_ssize_t)itemsize != 0) {
        PyErr_Format(PyExc_ValueError, "%s: buffer of %zd bytes is not a whole number of %zu-byte items",
                     what, view->len, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int build_cps(Encoder *E, const uint32_t *q, size_t n);

/* The pair table from uint32 quadruples (left, right, priority, merged). */
static int build_pair_table(Encoder *E, const uint32_t *q, size_t n, Py_ssize_t vocab_size)
{
    PairMap *P = &E->pairs;
    uint32_t max_prio = 0;
    for (size_t r = 0; r < n; r++) {
        const uint32_t *e = q + 4 * r;
        if (e[0] >= (uint32_t)vocab_size || e[1] >= (uint32_t)vocab_size || e[3] >= (uint32_t)vocab_size ||
            e[2] >= PK_LIMIT) {
            PyErr_Format(PyExc_ValueError, "pairs[%zu]: id or priority out of range", r);
            return -1;
        }
        if (e[2] > max_prio)
            max_prio = e[2];
    }
    /* the value kind: priorities of their own (merges) or merged ids (scores) */
    uint32_t *seen = calloc((size_t)max_prio + 1, 4);
    P->prio_of = malloc((size_t)vocab_size * 4);
    if (seen == NULL || P->prio_of == NULL) {
        free(seen);
        PyErr_NoMemory();
        return -1;
    }
    memset(P->prio_of, 0xFF, (size_t)vocab_size * 4);
    int distinct = 1, consistent = 1;
    for (size_t r = 0; r < n; r++) {
        const uint32_t *e = q + 4 * r;
        if (seen[e[2]]++)
            distinct = 0;
        if (P->prio_of[e[3]] == NO_RANK)
            P->prio_of[e[3]] = e[2];
        else if (P->prio_of[e[3]] != e[2])
            consistent = 0;
    }
    /* the priority rises with the merged id (tiktoken ranks; the merges of every Hugging Face
     * byte-level vocabulary at hand): the merged id stands for its priority, and the merge loop
     * reads neither merged_of nor prio_of */
    int increasing = consistent;
    {
        uint32_t last = 0;
        int first = 1;
        for (Py_ssize_t j = 0; j < vocab_size && increasing; j++) {
            uint32_t pr = P->prio_of[j];
            if (pr == NO_RANK)
                continue;
            if (!first && pr <= last)
                increasing = 0;
            last = pr;
            first = 0;
        }
    }
    P->by_rank = distinct && !increasing;
    P->direct = increasing;
    if (increasing) {
        free(seen);
        free(P->prio_of);
        P->prio_of = NULL;
    } else if (distinct) {
        free(P->prio_of);
        P->prio_of = NULL;
        P->merged_of = (uint32_t *)seen; /* reused: priority -> merged id */
        for (size_t r = 0; r < n; r++)
            P->merged_of[q[4 * r + 2]] = q[4 * r + 3];
    } else {
        free(seen);
        if (!consistent) {
            PyErr_SetString(PyExc_ValueError, "pairs: a merged id with two priorities while priorities repeat");
            return -1;
        }
    }
    size_t size = pow2_at_least(n + n / 3 + 2); /* load <= 3/4 */
    P->tab = big_alloc(size * sizeof(uint64_t));
    if (P->tab == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    P->mask = size - 1;
    P->shift = 64 - (uint64_t)__builtin_ctzll(size);
    memset(P->tab, 0xFF, size * sizeof(uint64_t));
    P->filter = calloc((size_t)1 << (PAIR_FILTER_BITS - 6), 8);
    if (P->filter == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t r = 0; r < n; r++) {
        size_t fb = pair_fbit(pair_hash(pair_key(q[4 * r], q[4 * r + 1])));
        P->filter[fb >> 6] |= 1ULL << (fb & 63);
    }
    for (size_t r = 0; r < n; r++) {
        const uint32_t *e = q + 4 * r;
        uint64_t key = pair_key(e[0], e[1]);
        uint64_t val = P->by_rank ? e[2] : e[3]; /* direct: the merged id stands for its priority */
        size_t i = pair_slot(P, pair_hash(key));
        while (P->tab[i] != PAIR_EMPTY && (P->tab[i] & PK_KEY) != key)
            i = (i + 1) & P->mask;
        uint32_t old = (uint32_t)(P->tab[i] >> (2 * PK_BITS)); /* direct: both sides in merged ids */
        if (P->tab[i] != PAIR_EMPTY && (P->by_rank || P->direct ? old : P->prio_of[old]) <= (P->direct ? e[3] : e[2]))
            continue; /* first (lowest) priority wins for a repeated pair */
        P->tab[i] = key | (val << (2 * PK_BITS));
    }
    return 0;
}

#define T_NORMAL 1
#define T_CONTROL 3
#define T_USER_DEFINED 4
#define T_UNUSED 5

/* The vocabulary's strings as UTF-8, each once (token strings are unique), with an index. */
typedef struct {
    uint8_t *blob;
    uint32_t *off, *len;
    WholeMap index; /* every token: UTF-8 -> id (fingerprinted slots, as the whole-token map) */
} Vocab;

static void vocab_free(Vocab *v)
{
    free(v->blob);
    free(v->off);
    free(v->len);
    free(v->index.tab);
    free(v->index.filter);
    memset(v, 0, sizeof(*v));
}

/* A WholeMap over the entries of `ids` (keys in blob/off/len, which it borrows). */
static int index_ids(WholeMap *W, uint8_t *blob, uint32_t *off, uint32_t *len, const uint32_t *ids, size_t n)
{
    size_t size = pow2_at_least(n * 2 + 2);
    W->tab = big_calloc(size * sizeof(uint64_t));
    if (W->tab == NULL)
        return -1;
    W->mask = size - 1;
    W->filter = calloc((size_t)1 << (FILTER_BITS - 6), 8);
    if (W->filter == NULL)
        return -1;
    W->blob = blob;
    W->off = off;
    W->len = len;
    for (size_t r = 0; r < n; r++) {
        uint32_t id = ids[r];
        const uint8_t *k = blob + off[id];
        uint64_t k0, k1, h = hash_key(k, len[id], 0, &k0, &k1);
        if (len[id] == 0 || whole_get(W, k, len[id], h) >= 0)
            continue; /* no empty keys; a repeated key keeps its first id */
        size_t i = (size_t)h & W->mask;
        while (W->tab[i] != 0)
            i = (i + 1) & W->mask;
        W->tab[i] = ((uint64_t)whole_fp(h) << 32) | id;
        W->filter[filter_bit(h) >> 6] |= 1ULL << (filter_bit(h) & 63);
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* Scores mode: every split of a NORMAL / USER_DEFINED token (at code-point boundaries) into two
 * tokens is a pair whose priority is the dense rank of -score (tokenizer._pair_from_scores). */
static int build_score_pairs(Encoder *E, const Vocab *V, const uint8_t *types, const double *scores,
                             Py_ssize_t nv)
{
    double *neg = malloc((size_t)nv * sizeof(double));
    uint32_t *prio = malloc((size_t)nv * 4);
    size_t cap = 1024, n = 0;
    uint32_t *q = malloc(cap * 16);
    int rc = -1;
    if (!neg || !prio || !q) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < nv; i++)
        neg[i] = -scores[i] + 0.0; /* -0.0 and 0.0 are one score */
    qsort(neg, (size_t)nv, sizeof(double), cmp_double);
    size_t nd = 0;
    for (Py_ssize_t i = 0; i < nv; i++)
        if (nd == 0 || neg[nd - 1] != neg[i])
            neg[nd++] = neg[i];
    for (Py_ssize_t i = 0; i < nv; i++) {
        double x = -scores[i] + 0.0;
        size_t lo = 0, hi = nd; /* dense rank: position among the distinct values */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (neg[mid] < x)
                lo = mid + 1;
            else
                hi = mid;
        }
        prio[i] = (uint32_t)lo;
    }
    for (Py_ssize_t j = 0; j < nv; j++) {
        if (types[j] != T_NORMAL && types[j] != T_USER_DEFINED)
            continue;
        const uint8_t *k = V->blob + V->off[j];
        size_t len = V->len[j];
        for (size_t c = u8len(k[0]); c < len; c += u8len(k[c])) {
            uint64_t k0, k1;
            int32_t a = whole_get(&V->index, k, c, hash_key(k, c, 0, &k0, &k1));
            if (a < 0)
                continue;
            int32_t b = whole_get(&V->index, k + c, len - c, hash_key(k + c, len - c, 0, &k0, &k1));
            if (b < 0)
                continue;
            if (n == cap) {
                uint32_t *nq = realloc(q, cap * 2 * 16);
                if (nq == NULL) {
                    PyErr_NoMemory();
                    goto out;
                }
                q = nq;
                cap *= 2;
            }
            uint32_t *e = q + 4 * n++;
            e[0] = (uint32_t)a;
            e[1] = (uint32_t)b;
            e[2] = prio[j];
            e[3] = (uint32_t)j;
        }
    }
    rc = build_pair_table(E, q, n, nv);
out:
    free(neg);
    free(prio);
    free(q);
    return rc;
}

/* Everything read from the vocabulary: the pair table (given, or from the scores), the
 * whole-token map (ignore_merges: byte-level tokens spelled in the byte alphabet, as raw bytes;
 * SentencePiece tokens as UTF-8), the single-character symbols of SentencePiece. */
static int build_vocab(Encoder *E, PyObject *keys_obj, PyObject *types_obj, PyObject *scores_obj,
                       PyObject *u2b_obj, PyObject *pairs_obj, Py_ssize_t nv)
{
    PyObject *seq = PySequence_Fast(keys_obj, "vocab_keys must be a sequence of bytes");
    if (seq == NULL)
        return -1;
    Py_buffer tv = {0}, sv = {0}, uv = {0}, pv = {0};
    Vocab V = {0};
    uint32_t *ids = NULL, *cps = NULL;
    int rc = -1;
    if (PySequence_Fast_GET_SIZE(seq) != nv) {
        PyErr_Format(PyExc_ValueError, "vocab_keys: %zd keys for a vocab of %zd", PySequence_Fast_GET_SIZE(seq), nv);
        goto out;
    }
    if (get_buffer(types_obj, &tv, 1, "types") < 0)
        goto out;
    if (tv.len != nv) {
        PyErr_SetString(PyExc_ValueError, "types: one byte per token expected");
        goto out;
    }
    const uint8_t *types = tv.buf;
    size_t total = 0;
    for (Py_ssize_t i = 0; i < nv; i++) {
        PyObject *k = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyBytes_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "vocab_keys must hold bytes");
            goto out;
        }
        total += (size_t)PyBytes_GET_SIZE(k);
    }
    if (total > 0xFFFFFFF0u) {
        PyErr_SetString(PyExc_ValueError, "vocab_keys: more than 4 GB of token text");
        goto out;
    }
    V.blob = malloc(total + 1);
    V.off = malloc((size_t)nv * 4);
    V.len = malloc((size_t)nv * 4);
    ids = malloc((size_t)nv * 4);
    if (!V.blob || !V.off || !V.len || !ids) {
        PyErr_NoMemory();
        goto out;
    }
    size_t off = 0;
    for (Py_ssize_t i = 0; i < nv; i++) {
        PyObject *k = PySequence_Fast_GET_ITEM(seq, i);
        size_t kn = (size_t)PyBytes_GET_SIZE(k);
        memcpy(V.blob + off, PyBytes_AS_STRING(k), kn);
        V.off[i] = (uint32_t)off;
        V.len[i] = (uint32_t)kn;
        off += kn;
        ids[i] = (uint32_t)i;
    }
    /* pairs */
    if (pairs_obj != Py_None) {
        if (get_buffer(pairs_obj, &pv, 16, "pairs") < 0 ||
            build_pair_table(E, pv.buf, (size_t)pv.len / 16, nv) < 0)
            goto out;
    } else if (scores_obj != Py_None) {
        if (get_buffer(scores_obj, &sv, 8, "scores") < 0)
            goto out;
        if (sv.len != nv * 8) {
            PyErr_SetString(PyExc_ValueError, "scores: one double per token expected");
            goto out;
        }
        if (index_ids(&V.index, V.blob, V.off, V.len, ids, (size_t)nv) < 0) {
            PyErr_NoMemory();
            goto out;
        }
        if (build_score_pairs(E, &V, types, sv.buf, nv) < 0)
            goto out;
    }
    /* whole-token map */
    if (E->ignore_merges) {
        WholeMap *W = &E->whole;
        W->blob = malloc(total + 1);
        W->off = calloc((size_t)nv, 4);
        W->len = calloc((size_t)nv, 4);
        if (!W->blob || !W->off || !W->len) {
            PyErr_NoMemory();
            goto out;
        }
        const int16_t *u2b = NULL;
        if (E->kind == KIND_BYTE_LEVEL) {
            if (get_buffer(u2b_obj, &uv, 2, "u2b") < 0)
                goto out;
            if (uv.len != 512 * 2) {
                PyErr_SetString(PyExc_ValueError, "u2b: 512 int16 entries expected");
                goto out;
            }
            u2b = uv.buf;
        }
        size_t wo = 0, nw = 0;
        for (Py_ssize_t i = 0; i < nv; i++) {
            if (types[i] != T_NORMAL && types[i] != T_USER_DEFINED)
                continue; /* the whole-piece lookup takes only normal / user-defined tokens */
            const uint8_t *k = V.blob + V.off[i];
            size_t kn = V.len[i], m = 0;
            if (u2b) { /* spelled in the byte alphabet: one byte per character, else no piece equals it */
                int ok = 1;
                for (size_t c = 0; c < kn;) {
                    size_t l;
                    uint32_t cp = dec_at(k + c, &l);
                    c += l;
                    if (cp >= 512 || u2b[cp] < 0) {
                        ok = 0;
                        break;
                    }
                    W->blob[wo + m++] = (uint8_t)u2b[cp];
                }
                if (!ok)
                    continue;
            } else {
                memcpy(W->blob + wo, k, kn);
                m = kn;
            }
            W->off[i] = (uint32_t)wo;
            W->len[i] = (uint32_t)m;
            wo += m;
            ids[nw++] = (uint32_t)i;
        }
        uint8_t *blob = W->blob;
        uint32_t *woff = W->off, *wlen = W->len;
        if (index_ids(W, blob, woff, wlen, ids, nw) < 0) {
            PyErr_NoMemory();
            goto out;
        }
    }
    /* SentencePiece symbols: single-character tokens other than control / unused ones */
    if (E->kind == KIND_SENTENCEPIECE) {
        cps = malloc((size_t)nv * 8);
        if (cps == NULL) {
            PyErr_NoMemory();
            goto out;
        }
        size_t nc = 0;
        for (Py_ssize_t i = 0; i < nv; i++) {
            if (types[i] == T_CONTROL || types[i] == T_UNUSED || V.len[i] == 0)
                continue;
            size_t l;
            uint32_t cp = dec_at(V.blob + V.off[i], &l);
            if (l != V.len[i])
                continue;
            cps[2 * nc] = cp;
            cps[2 * nc + 1] = (uint32_t)i;
            nc++;
        }
        if (build_cps(E, cps, nc) < 0)
            goto out;
    }
    rc = 0;
out:
    vocab_free(&V);
    free(ids);
    free(cps);
    if (tv.obj)
        PyBuffer_Release(&tv);
    if (sv.obj)
        PyBuffer_Release(&sv);
    if (uv.obj)
        PyBuffer_Release(&uv);
    if (pv.obj)
        PyBuffer_Release(&pv);
    Py_DECREF(seq);
    return rc;
}

static int build_cps(Encoder *E, const uint32_t *q, size_t n)
{
    /* (code point, id) pairs; a repeated code point keeps its last id */
    E->cps.bmp = malloc(0x10000 * sizeof(int32_t));
    size_t astral = 0;
    for (size_t r = 0; r < n; r++)
        astral += q[2 * r] >= 0x10000;
    size_t size = pow2_at_least(astral * 2 + 2);
    E->cps.tab = malloc(size * sizeof(CpEntry));
    if (!E->cps.bmp || !E->cps.tab) {
        PyErr_NoMemory();
        return -1;
    }
    E->cps.mask = size - 1;
    for (size_t i = 0; i < 0x10000; i++)
        E->cps.bmp[i] = -1;
    for (size_t i = 0; i < size; i++)
        E->cps.tab[i].cp = DEAD;
    for (size_t r = 0; r < n; r++) {
        uint32_t c = q[2 * r];
        int32_t id = (int32_t)q[2 * r + 1];
        if (c > 0x10FFFF || id < 0) {
            PyErr_Format(PyExc_ValueError, "cps[%zu]: code point or id out of range", r);
            return -1;
        }
        if (c < 0x10000) {
            E->cps.bmp[c] = id;
            continue;
        }
        size_t i = (size_t)mix64(c) & E->cps.mask;
        while (E->cps.tab[i].cp != DEAD && E->cps.tab[i].cp != c)
            i = (i + 1) & E->cps.mask;
        E->cps.tab[i] = (CpEntry){c, id};
    }
    return 0;
}

static int copy_ids256(int32_t *dst, PyObject *obj, const char *what)
{
    Py_buffer v;
    if (get_buffer(obj, &v, 4, what) < 0)
        return -1;
    if (v.len != 256 * 4) {
        PyBuffer_Release(&v);
        PyErr_Format(PyExc_ValueError, "%s: expected 256 int32 entries", what);
        return -1;
    }
    memcpy(dst, v.buf, 256 * 4);
    PyBuffer_Release(&v);
    return 0;
}

/* Byte-level: E->joinable, the byte pairs (b1, b2) some merge joins, as a symbol ending in byte b1
 * and one starting with b2 (resolve_parts cuts pieces elsewhere). Each token's first and last
 * bytes come from its key (spelled in the byte alphabet, u2b); every pair of the table must join
 * tokens with known ends into one with the left's first byte and the right's last, and every
 * byte's symbol must be that byte, else nothing is cut (E->joinable stays NULL). */
static int build_joinable(Encoder *E, PyObject *keys_obj, PyObject *u2b_obj, Py_ssize_t nv)
{
    const PairMap *P = &E->pairs;
    if (P->tab == NULL || u2b_obj == Py_None)
        return 0;
    for (int b = 0; b < 256; b++)
        if (E->byte_ids[b] < 0)
            return 0;
    Py_buffer uv = {0};
    if (get_buffer(u2b_obj, &uv, 2, "u2b") < 0)
        return -1;
    PyObject *seq = PySequence_Fast(keys_obj, "vocab_keys must be a sequence of bytes");
    int16_t *ends = seq ? malloc((size_t)nv * 2 * sizeof(int16_t)) : NULL; /* first, last byte; -1 */
    uint64_t *J = calloc(65536 / 64, 8);
    int rc = -1, ok = 1;
    if (seq == NULL)
        goto out;
    if (ends == NULL || J == NULL || uv.len != 512 * 2 || PySequence_Fast_GET_SIZE(seq) != nv) {
        if (ends == NULL || J == NULL)
            PyErr_NoMemory();
        else
            rc = 0; /* build_vocab has checked these; nothing is cut */
        goto out;
    }
    const int16_t *u2b = uv.buf;
    for (Py_ssize_t i = 0; i < nv; i++) {
        PyObject *k = PySequence_Fast_GET_ITEM(seq, i);
        const uint8_t *s = (const uint8_t *)PyBytes_AS_STRING(k);
        size_t n = (size_t)PyBytes_GET_SIZE(k), l, j = n;
        ends[2 * i] = ends[2 * i + 1] = -1;
        if (n == 0)
            continue;
        while (j > 0 && (s[j - 1] & 0xC0) == 0x80)
            j--;
        if (j == 0)
            continue;
        uint32_t first = dec_at(s, &l), last = dec_at(s + j - 1, &l);
        ends[2 * i] = first < 512 ? u2b[first] : -1;
        ends[2 * i + 1] = last < 512 ? u2b[last] : -1;
    }
    for (int b = 0; b < 256 && ok; b++)
        ok = ends[2 * E->byte_ids[b]] == b && ends[2 * E->byte_ids[b] + 1] == b;
    for (size_t i = 0; i <= P->mask && ok; i++) {
        uint64_t e = P->tab[i];
        if (e == PAIR_EMPTY)
            continue;
        uint32_t a = (uint32_t)(e & PK_LIMIT), b = (uint32_t)(e >> PK_BITS & PK_LIMIT);
        uint32_t m = v_merged(P, (uint32_t)(e >> (2 * PK_BITS)));
        int16_t a0 = ends[2 * a], a1 = ends[2 * a + 1], b0 = ends[2 * b], b1 = ends[2 * b + 1];
        if ((Py_ssize_t)m >= nv || a0 < 0 || a1 < 0 || b0 < 0 || b1 < 0 || ends[2 * m] != a0 ||
            ends[2 * m + 1] != b1) {
            ok = 0;
            break;
        }
        size_t bit = (size_t)a1 << 8 | (size_t)b0;
        J[bit >> 6] |= 1ULL << (bit & 63);
    }
    /* A vocabulary whose merges join over a quarter of the pairs (a continuation byte, a lead
     * byte), the boundaries between non-ASCII characters, is not cut: its runs of other scripts
     * than Latin rarely have a point to cut at, and the scans for one cost more instructions than
     * the merges they save (of the 3264 pairs Llama 3 joins 1081, Qwen2.5 920, o200k 1401,
     * GPT-2 57; bench/README.md has the counts). */
    size_t joined = 0;
    for (size_t a = 0x80; a < 0xC0; a++)
        for (size_t b = 0xC2; b < 0xF5; b++)
            joined += J[(a << 8 | b) >> 6] >> ((a << 8 | b) & 63) & 1;
    if (ok && joined * 4 <= (0xC0 - 0x80) * (0xF5 - 0xC2)) {
        E->joinable = J;
        J = NULL;
    }
    rc = 0;
out:
    free(J);
    free(ends);
    Py_XDECREF(seq);
    if (uv.obj)
        PyBuffer_Release(&uv);
    return rc;
}

/* The highest merge-loop build an Encoder may take, from RMLPREP_NATIVE_LEAN when it is made: 0 the
 * generic merge loop, 1 the lean build for SSE2, 2 (or unset) the best the spec and the CPU allow.
 * The lean builds are chosen by the spec and the SSE4.1 one by the CPU, so a machine with SSE4.1
 * never runs the SSE2 lean build unless told: tests/test_native.py compares every build's ids
 * (and a measurement can pair them). -1 with ValueError set for another value. */
static int lean_limit(void)
{
    const char *s = getenv("RMLPREP_NATIVE_LEAN");
    if (s == NULL || s[0] == '\0')
        return 2;
    if ((s[0] == '0' || s[0] == '1' || s[0] == '2') && s[1] == '\0')
        return s[0] - '0';
    PyErr_Format(PyExc_ValueError,
                 "RMLPREP_NATIVE_LEAN=%s: give 0 (the generic merge loop), 1 (the lean build for SSE2) or 2 "
                 "(the best the CPU allows, as when unset)", s);
    return -1;
}

static PyObject *Encoder_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"kind", "stages", "byte_ids", "fallback_ids", "unk_id", "ignore_merges",
                             "byte_fallback", "sp_split", "vocab_keys", "types", "pairs", "scores", "u2b",
                             "fuse_unk", NULL};
    int kind, unk_id, ignore_merges, byte_fallback, sp_split, fuse_unk = 0;
    PyObject *stages, *byte_ids, *fallback_ids, *vocab_keys, *types, *pairs, *scores, *u2b;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iOOOipiiOOOOO|p", kwlist, &kind, &stages, &byte_ids,
                                     &fallback_ids, &unk_id, &ignore_merges, &byte_fallback, &sp_split,
                                     &vocab_keys, &types, &pairs, &scores, &u2b, &fuse_unk))
        return NULL;
    Py_ssize_t vocab_size = PyObject_Length(vocab_keys);
    if (vocab_size < 0)
        return NULL;
    if (kind != KIND_BYTE_LEVEL && kind != KIND_SENTENCEPIECE) {
        PyErr_Format(PyExc_ValueError, "kind %d is not 0 (byte-level) or 1 (SentencePiece)", kind);
        return NULL;
    }
    if (vocab_size <= 0 || vocab_size >= (Py_ssize_t)PK_LIMIT) {
        PyErr_Format(PyExc_ValueError, "vocab_size %zd out of range", vocab_size);
        return NULL;
    }
    if (sp_split < SP_WHOLE || sp_split > SP_SPACE_SPLIT) {
        PyErr_Format(PyExc_ValueError, "sp_split %d is not a known word split", sp_split);
        return NULL;
    }
    int limit = lean_limit();
    if (limit < 0)
        return NULL;
    Encoder *E = (Encoder *)type->tp_alloc(type, 0);
    if (E == NULL)
        return NULL;
    for (int k = 0; k < N_SLOTS; k++)
        pthread_mutex_init(&E->slots[k].lock, NULL);
    pthread_mutex_init(&E->shared_lock, NULL);
    E->kind = kind;
    E->unk_id = unk_id;
    E->ignore_merges = ignore_merges;
    E->byte_fallback = byte_fallback;
    E->sp_split = sp_split;
    E->fuse_unk = fuse_unk && unk_id >= 0 && !byte_fallback;
    PyObject *st = PySequence_Fast(stages, "stages must be a sequence of pattern codes");
    if (st == NULL)
        goto fail;
    E->nstages = (int)PySequence_Fast_GET_SIZE(st);
    if (E->nstages > MAX_STAGES) {
        Py_DECREF(st);
        PyErr_Format(PyExc_ValueError, "at most %d pre-split stages", MAX_STAGES);
        goto fail;
    }
    for (int k = 0; k < E->nstages; k++) {
        long p = PyLong_AsLong(PySequence_Fast_GET_ITEM(st, k));
        if (p < PAT_GPT2 || p > PAT_MAX) {
            Py_DECREF(st);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "stages[%d] = %ld is not a known pattern code", k, p);
            goto fail;
        }
        E->stages[k] = (int)p;
    }
    Py_DECREF(st);
    if (copy_ids256(E->byte_ids, byte_ids, "byte_ids") < 0 ||
        copy_ids256(E->fallback_ids, fallback_ids, "fallback_ids") < 0 ||
        build_vocab(E, vocab_keys, types, scores, u2b, pairs, vocab_size) < 0)
        goto fail;
    E->all_bytes = 1;
    for (int b = 0; b < 256; b++)
        E->all_bytes &= E->byte_ids[b] >= 0;
    if (kind == KIND_BYTE_LEVEL) {
        E->bytepair = malloc(65536 * sizeof(uint32_t));
        if (E->bytepair == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        for (int b1 = 0; b1 < 256; b1++)
            for (int b2 = 0; b2 < 256; b2++)
                E->bytepair[b1 << 8 | b2] =
                    E->byte_ids[b1] < 0 || E->byte_ids[b2] < 0
                        ? NO_VALUE
                        : pair_value(&E->pairs, (uint32_t)E->byte_ids[b1], (uint32_t)E->byte_ids[b2]);
        if (build_joinable(E, vocab_keys, u2b, vocab_size) < 0)
            goto fail;
        E->lean = E->pairs.direct && E->pairs.tab != NULL;
#if HAVE_LEAN41
        if (E->lean && __builtin_cpu_supports("sse4.1"))
            E->lean = 2;
#endif
        if (E->lean > limit)
            E->lean = limit;
    }
    /* every id written is below n_ids: merged and whole-token ids are checked against the vocabulary
     * (build_vocab), the byte, fallback and unk ids are counted here (ids_to_list reads the int
     * table without a test) */
    Py_ssize_t n_ids = vocab_size;
    for (int b = 0; b < 256; b++) {
        if (E->byte_ids[b] >= n_ids)
            n_ids = (Py_ssize_t)E->byte_ids[b] + 1;
        if (E->fallback_ids[b] >= n_ids)
            n_ids = (Py_ssize_t)E->fallback_ids[b] + 1;
    }
    if (E->unk_id >= n_ids)
        n_ids = (Py_ssize_t)E->unk_id + 1;
    if (ints_reserve(n_ids) < 0)
        goto fail;
    E->n_ids = n_ids;
    return (PyObject *)E;
fail:
    Py_DECREF(E);
    return NULL;
}

static void Encoder_dealloc(Encoder *E)
{
    for (int k = 0; k < N_SLOTS; k++) {
        Slot *sl = &E->slots[k];
        cache_free(&sl->cache);
        ctx_free_scratch(&sl->ctx);
        free(sl->out.v);
        pthread_mutex_destroy(&sl->lock);
    }
    shared_free(E->shared);
    pthread_mutex_destroy(&E->shared_lock);
    free(E->pairs.tab);
    free(E->pairs.filter);
    free(E->pairs.merged_of);
    free(E->pairs.prio_of);
    free(E->bytepair);
    free(E->joinable);
    free(E->whole.tab);
    free(E->whole.blob);
    free(E->whole.off);
    free(E->whole.len);
    free(E->whole.filter);
    free(E->cps.bmp);
    free(E->cps.tab);
    Py_TYPE(E)->tp_free((PyObject *)E);
}

/* Module function: indices of the strs that hold a surrogate code point (kinds 2 and 4). */
/* Whether a ready str holds a surrogate code point (never in a 1-byte-kind str). */
static int str_has_surrogate(PyObject *s)
{
    int kind = PyUnicode_KIND(s);
    Py_ssize_t len = PyUnicode_GET_LENGTH(s);
    if (kind == PyUnicode_2BYTE_KIND) {
        const uint16_t *d = (const uint16_t *)PyUnicode_DATA(s);
        uint16_t acc = 0;
        for (Py_ssize_t j = 0; j < len; j++)
            acc |= (uint16_t)((uint16_t)(d[j] - 0xD800) < 0x800);
        return acc != 0;
    }
    if (kind == PyUnicode_4BYTE_KIND) {
        const uint32_t *d = (const uint32_t *)PyUnicode_DATA(s);
        uint32_t acc = 0;
        for (Py_ssize_t j = 0; j < len; j++)
            acc |= (uint32_t)(d[j] - 0xD800u < 0x800u);
        return acc != 0;
    }
    return 0;
}

static PyObject *has_surrogate(PyObject *Py_UNUSED(mod), PyObject *s)
{
    if (ready_str(s) < 0)
        return NULL;
    return PyBool_FromLong(str_has_surrogate(s));
}

static PyObject *surrogate_rows(PyObject *Py_UNUSED(mod), PyObject *texts)
{
    PyObject *seq = PySequence_Fast(texts, "surrogate_rows expects a sequence of str");
    if (seq == NULL)
        return NULL;
    PyObject *out = PyList_New(0);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyUnicode_Check(s) || PyUnicode_READY(s) < 0)
            continue; /* not a str: the caller's validation reports it */
        if (str_has_surrogate(s)) {
            PyObject *k = PyLong_FromSsize_t(i);
            if (k == NULL || PyList_Append(out, k) < 0)
                Py_CLEAR(out);
            Py_XDECREF(k);
        }
    }
    Py_DECREF(seq);
    return out;
}

/* Normalization quick check (UAX #15, "Detecting Normalization Forms") that also says where
 * the text may change. A code point that is Yes for the form (``mask``: RML_NQC_NFC or
 * RML_NQC_NFKC) with combining class 0 is a normalization boundary: nothing after it combines
 * or reorders with anything before it, so the form of the text is the forms of the runs between
 * boundaries put together. A run is "suspect" when it holds a code point that is No or Maybe,
 * or nonzero classes out of order; every other run is already in the form.
 *
 * Returns 0 when no run is suspect (the text is in the form), 1 with the suspect spans written
 * as [start, end) code-point pairs to *spans (merged where they touch; *nspans pairs; the caller
 * frees *spans), 2 when the text holds a code point unassigned in the table's Unicode version
 * (a newer unicodedata may make it combine with anything: normalize the whole text), -1 out of
 * memory. ``first``: the form's RML_NQC_*_FIRST (every code point below it is Yes, class 0). */
#define NQC_VAL(cp) RML_NQC_STAGE2[RML_NQC_STAGE1[(cp) >> RML_NQC_SHIFT]][(cp) & ((1u << RML_NQC_SHIFT) - 1)]
#define NQC_UNASSIGNED 0xFF

/* The last index of the run of code units below ``first`` that starts at j (d[j] < first):
 * 16, 8 or 4 units at a time (SSE2), so mostly-ASCII text in a 2- or 4-byte str (one curly quote
 * or dash makes it one) costs little more than its memory reads. */
static inline Py_ssize_t nqc_skip_uint8_t(const uint8_t *d, Py_ssize_t j, Py_ssize_t len, uint32_t first)
{
#if defined(__SSE2__)
    const __m128i lim = _mm_set1_epi8((char)(first - 1)), zero = _mm_setzero_si128();
    while (j + 17 <= len) {
        __m128i v = _mm_loadu_si128((const __m128i *)(d + j + 1));
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_subs_epu8(v, lim), zero)) != 0xFFFF)
            break;
        j += 16;
    }
#endif
    while (j + 1 < len && d[j + 1] < first)
        j++;
    return j;
}

static inline Py_ssize_t nqc_skip_uint16_t(const uint16_t *d, Py_ssize_t j, Py_ssize_t len, uint32_t first)
{
#if defined(__SSE2__)
    const __m128i lim = _mm_set1_epi16((short)(first - 1)), zero = _mm_setzero_si128();
    while (j + 9 <= len) {
        __m128i v = _mm_loadu_si128((const __m128i *)(d + j + 1));
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_subs_epu16(v, lim), zero)) != 0xFFFF)
            break;
        j += 8;
    }
#endif
    while (j + 1 < len && d[j + 1] < first)
        j++;
    return j;
}

static inline Py_ssize_t nqc_skip_uint32_t(const uint32_t *d, Py_ssize_t j, Py_ssize_t len, uint32_t first)
{
#if defined(__SSE2__)
    const __m128i lim = _mm_set1_epi32((int)first);
    while (j + 5 <= len) {
        __m128i v = _mm_loadu_si128((const __m128i *)(d + j + 1));
        if (_mm_movemask_epi8(_mm_cmplt_epi32(v, lim)) != 0xFFFF)
            break;
        j += 4;
    }
#endif
    while (j + 1 < len && d[j + 1] < first)
        j++;
    return j;
}

#define NQC_SCAN(T)                                                                              \
    do {                                                                                         \
        const T *d = (const T *)PyUnicode_DATA(s);                                               \
        unsigned last = 0;                                                                       \
        Py_ssize_t bound = 0; /* the last boundary at or before j */                            \
        for (Py_ssize_t j = 0; j < len; j++) {                                                   \
            uint32_t cp = d[j];                                                                  \
            if (cp < first) {                                                                    \
                last = 0;                                                                        \
                bound = j = nqc_skip_##T(d, j, len, first);                                      \
                continue;                                                                        \
            }                                                                                    \
            unsigned v = NQC_VAL(cp), r = v & RML_NQC_RANK;                                      \
            if (!((v & mask) | (r != 0 && last > r))) {                                          \
                if (r == 0)                                                                      \
                    bound = j;                                                                   \
                last = r;                                                                        \
                continue;                                                                        \
            }                                                                                    \
            if (v == NQC_UNASSIGNED)                                                             \
                goto whole;                                                                      \
            Py_ssize_t k = j + 1; /* the next boundary after j, or the end */                  \
            for (; k < len; k++) {                                                               \
                uint32_t c2 = d[k];                                                              \
                if (c2 < first)                                                                  \
                    break;                                                                       \
                unsigned v2 = NQC_VAL(c2);                                                       \
                if (v2 == NQC_UNASSIGNED)                                                        \
                    goto whole;                                                                  \
                if (!(v2 & mask) && !(v2 & RML_NQC_RANK))                                        \
                    break;                                                                       \
            }                                                                                    \
            if (n > 0 && out[2 * n - 1] == bound) {                                              \
                out[2 * n - 1] = k;                                                              \
            } else {                                                                             \
                if (n == cap) {                                                                  \
                    Py_ssize_t *grown = PyMem_Realloc(out, sizeof(Py_ssize_t) * 4 * (cap ? cap : 4)); \
                    if (grown == NULL)                                                           \
                        goto oom;                                                                \
                    out = grown;                                                                 \
                    cap = 2 * (cap ? cap : 4);                                                   \
                }                                                                                \
                out[2 * n] = bound;                                                              \
                out[2 * n + 1] = k;                                                              \
                n++;                                                                             \
            }                                                                                    \
            /* k is a boundary (or the end): go on from it */                                    \
            bound = k;                                                                           \
            last = 0;                                                                            \
            j = k - 1;                                                                           \
        }                                                                                        \
    } while (0)

static int str_nf_suspects(PyObject *s, unsigned mask, uint32_t first, Py_ssize_t **spans, Py_ssize_t *nspans)
{
    Py_ssize_t *out = NULL, n = 0, cap = 0;
    *spans = NULL;
    *nspans = 0;
    if (PyUnicode_IS_ASCII(s))
        return 0;
    Py_ssize_t len = PyUnicode_GET_LENGTH(s);
    switch (PyUnicode_KIND(s)) {
    case PyUnicode_1BYTE_KIND:
        if (first > 0xFF)
            return 0;
        NQC_SCAN(uint8_t);
        break;
    case PyUnicode_2BYTE_KIND:
        NQC_SCAN(uint16_t);
        break;
    default:
        NQC_SCAN(uint32_t);
        break;
    }
    *spans = out;
    *nspans = n;
    return n > 0;
whole:
    PyMem_Free(out);
    return 2;
oom:
    PyMem_Free(out);
    return -1;
}

static PyObject *nf_suspects(PyObject *s, unsigned mask, uint32_t first)
{
    if (ready_str(s) < 0)
        return NULL;
    Py_ssize_t *spans, n;
    int rc = str_nf_suspects(s, mask, first, &spans, &n);
    if (rc == 0)
        Py_RETURN_NONE;
    if (rc < 0)
        return PyErr_NoMemory();
    if (rc == 2)
        return Py_BuildValue("[nn]", (Py_ssize_t)0, PyUnicode_GET_LENGTH(s));
    PyObject *list = PyList_New(2 * n);
    for (Py_ssize_t i = 0; list != NULL && i < 2 * n; i++) {
        PyObject *x = PyLong_FromSsize_t(spans[i]);
        if (x == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, x);
    }
    PyMem_Free(spans);
    return list;
}

static PyObject *nfc_suspects(PyObject *Py_UNUSED(mod), PyObject *s)
{
    return nf_suspects(s, RML_NQC_NFC, RML_NQC_NFC_FIRST);
}

static PyObject *nfkc_suspects(PyObject *Py_UNUSED(mod), PyObject *s)
{
    return nf_suspects(s, RML_NQC_NFKC, RML_NQC_NFKC_FIRST);
}

static PyObject *map_pool_info(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored))
{
    size_t len[POOL_N], off[POOL_N];
    uint64_t age[POOL_N];
    int n = 0;
    pthread_mutex_lock(&g_pool_lock);
    for (int k = 0; k < POOL_N; k++)
        if (g_pool[k].p != NULL) {
            len[n] = g_pool[k].len;
            off[n] = g_pool[k].off;
            age[n++] = g_pool[k].age;
        }
    pthread_mutex_unlock(&g_pool_lock);
    PyObject *out = PyList_New(0);
    for (int done = 0; out != NULL && done < n; done++) { /* newest first */
        int b = -1;
        for (int k = 0; k < n; k++)
            if (age[k] && (b < 0 || age[k] > age[b]))
                b = k;
        PyObject *t = Py_BuildValue("(nn)", (Py_ssize_t)len[b], (Py_ssize_t)off[b]);
        age[b] = 0;
        if (t == NULL || PyList_Append(out, t) < 0)
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return out;
}

static PyMethodDef module_methods[] = {
    {"map_pool_info", map_pool_info, METH_NOARGS,
     "map_pool_info() -> list[(bytes, offset)]: the parts of freed batch mappings kept for the next batch,\n"
     "newest first: each one's size and where it began in its mapping (at most 64 MiB in all)."},
    {"has_surrogate", has_surrogate, METH_O,
     "has_surrogate(text: str) -> bool: whether the str holds a surrogate code point (lone or paired)."},
    {"surrogate_rows", surrogate_rows, METH_O,
     "surrogate_rows(texts: Sequence[str]) -> list[int]: indices of the strs holding a surrogate code point."},
    {"nfc_suspects", nfc_suspects, METH_O,
     "nfc_suspects(text: str) -> None | list[int]: None when the NFC quick check proves the text\n"
     "is in NFC; else [start0, end0, start1, end1, ...]: the code-point spans, each between two\n"
     "normalization boundaries, outside which the text is in NFC ([0, len] when it holds a code\n"
     "point unassigned in the table's Unicode version)."},
    {"nfkc_suspects", nfkc_suspects, METH_O,
     "nfkc_suspects(text: str) -> None | list[int]: nfc_suspects for NFKC."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef Encoder_methods[] = {
    {"encode_text", (PyCFunction)Encoder_encode_text, METH_O,
     "encode_text(text: str) -> list[int]: ids of one prepared text segment."},
    {"encode_text_array", (PyCFunction)Encoder_encode_text_array, METH_O,
     "encode_text_array(text: str) -> IdBuffer: encode_text's ids as a buffer of native-endian uint32."},
    {"encode_text_nosur", (PyCFunction)Encoder_encode_text_nosur, METH_O,
     "encode_text_nosur(text: str) -> list[int] | None: encode_text, or None when the str holds a surrogate code unit."},
    {"encode_text_array_nosur", (PyCFunction)Encoder_encode_text_array_nosur, METH_O,
     "encode_text_array_nosur(text: str) -> IdBuffer | None: encode_text_array, or None when the str holds a surrogate."},
    {"encode_batch", (PyCFunction)(void (*)(void))Encoder_encode_batch, METH_VARARGS | METH_KEYWORDS,
     "encode_batch(texts: Sequence[str], num_threads=1, surrogates=False) -> (ids: buffer, offsets: bytes)\n\n"
     "ids: uint32 native-endian (bytes, or an IdBuffer handed over without a copy), all texts' ids back to back; offsets: int64, len(texts) + 1\n"
     "entries, text i is ids[offsets[i]:offsets[i+1]]. Releases the GIL while encoding; with\n"
     "num_threads > 1 the texts are shared among that many threads. surrogates=True: (ids, offsets, rows),\n"
     "rows the indices of the strs holding a surrogate code unit, found by each worker's conversion\n"
     "(their ids are of the code units as surrogatepass writes them: the caller encodes them again)."},
    {"encode_utf8", (PyCFunction)(void (*)(void))Encoder_encode_utf8, METH_VARARGS | METH_KEYWORDS,
     "encode_utf8(data: buffer, offsets: buffer of int64, num_threads=1) -> (ids: buffer, offsets: bytes)\n\n"
     "encode_batch for texts given as UTF-8 bytes: text i is data[offsets[i]:offsets[i+1]] (the\n"
     "layout of an Arrow string column). ValueError names a text that is not well-formed UTF-8."},
    {"split_text", (PyCFunction)Encoder_split_text, METH_O,
     "split_text(text: str) -> list[(start, end)]: the pieces (byte-level) or words\n"
     "(SentencePiece) as code-point offsets, without encoding them."},
    {"clear_cache", (PyCFunction)Encoder_clear_cache, METH_NOARGS, "Free every piece cache and scratch buffer."},
    {"joinable_pairs", (PyCFunction)Encoder_joinable_pairs, METH_NOARGS,
     "joinable_pairs() -> int | None: how many byte pairs (b1, b2) some merge joins (a missed piece is\n"
     "cut between the other pairs and its parts merged alone), None when pieces are never cut."},
    {"merge_build", (PyCFunction)Encoder_merge_build, METH_NOARGS,
     "merge_build() -> int: the merge loop's build for words of up to 255 symbols: 0 the generic one,\n"
     "1 the lean build (a byte-level spec whose pair values are both merged id and priority), 2 its\n"
     "SSE4.1 copy (the CPU has SSE4.1); at most RMLPREP_NATIVE_LEAN when the Encoder was made."},
    {"cache_info", (PyCFunction)Encoder_cache_info, METH_NOARGS,
     "cache_info() -> list of {slot, entries, slots, bytes, sweeps} for the piece caches in use."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rmlprep._fastbpe.Encoder",
    .tp_basicsize = sizeof(Encoder),
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Native BPE encoder for one tokenizer (build it with rmlprep.native.make_native).",
    .tp_methods = Encoder_methods,
    .tp_new = Encoder_new,
};

static struct PyModuleDef fastbpe_module = {
    PyModuleDef_HEAD_INIT, "rmlprep._fastbpe",
    "Compiled hot path of rmlprep's BPE encoder (see rmlprep/native.py).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__fastbpe(void)
{
    static int atfork_done;
    if (!atfork_done && pthread_atfork(NULL, NULL, fork_child) == 0) /* the generation of each lock's holder */
        atfork_done = 1;
    for (uint32_t c = 0; c < 128; c++)
        ASCII_CLS[c] = (uint8_t)cls_cp(c);
    for (uint32_t c = 0; c < 0x800; c++) {
        uint8_t b[4];
        put_utf8(b, c);
        U2_TAB[c] = (c < 0x80 ? c : (uint32_t)b[0] | (uint32_t)b[1] << 8) | (cls_cp(c) & 0xFF) * 0x01010000u |
                    (uint64_t)(c < 0x80 ? 1 : 2) << 32;
    }
    for (int i = 0; i < 256; i++) {
        LINK_NEXT[i] = (uint8_t)(i + 1);
        LINK_PREV[i] = (uint8_t)(i - 1);
    }
#if defined(__SSE2__)
    {
        uint8_t in[128], got[128];
        for (int c = 0; c < 128; c++)
            in[c] = (uint8_t)c;
        for (int q = 0; q < 128; q += 16)
            _mm_storeu_si128((__m128i *)(got + q), ascii_classes16(_mm_loadu_si128((const __m128i *)(in + q))));
        simd_classes_ok = memcmp(got, ASCII_CLS, 128) == 0;
    }
    {
        const char *v = getenv("RMLPREP_SPLIT_SCALAR"); /* tests: the matchers' loops, no block splitter */
        split_scalar = v != NULL && strcmp(v, "1") == 0;
    }
#endif
    if (PyType_Ready(&EncoderType) < 0 || PyType_Ready(&IdBufferType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&fastbpe_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&EncoderType);
    if (PyModule_AddObject(m, "Encoder", (PyObject *)&EncoderType) < 0 ||
        PyModule_AddStringConstant(m, "UNICODE_VERSION", RML_UNICODE_VERSION) < 0 ||
        PyModule_AddStringConstant(m, "NORMALIZE_UNICODE_VERSION", RML_NQC_UNICODE_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "PAT_GPT2", PAT_GPT2) < 0 ||
        PyModule_AddIntConstant(m, "PAT_LLAMA3", PAT_LLAMA3) < 0 ||
        PyModule_AddIntConstant(m, "PAT_QWEN2", PAT_QWEN2) < 0 ||
        PyModule_AddIntConstant(m, "PAT_DIGITS", PAT_DIGITS) < 0 ||
        PyModule_AddIntConstant(m, "PAT_DIGITS_INDIVIDUAL", PAT_DIGITS_INDIVIDUAL) < 0 ||
        PyModule_AddIntConstant(m, "PAT_CL100K", PAT_CL100K) < 0 ||
        PyModule_AddIntConstant(m, "PAT_O200K", PAT_O200K) < 0 ||
        PyModule_AddIntConstant(m, "SP_WHOLE", SP_WHOLE) < 0 ||
        PyModule_AddIntConstant(m, "SP_WORDS", SP_WORDS) < 0 ||
        PyModule_AddIntConstant(m, "SP_SPACE_SPLIT", SP_SPACE_SPLIT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
