/* rmlprep._fastbpe: the compiled hot path of rmlprep's BPE encoder.
 *
 * One Encoder per tokenizer, built by rmlprep/native.py from an indexed Tokenizer. It encodes one
 * text segment (specials already cut out, normalizers and prefix space applied; SentencePiece
 * text already spelled with U+2581) exactly as the pure-Python path of rmlprep/tokenizer.py:
 *
 *   byte-level:    hand-written pre-split matchers (GPT-2, Llama 3, Qwen2, digit splits) over the
 *                  str's code points -> per piece: UTF-8 bytes, whole-token lookup when the spec
 *                  says ignore_merges, the bounded piece cache, else the merge loop.
 *   SentencePiece: words split as tokenizer._encode_sentencepiece does -> code-point symbols
 *                  (unknown characters are barriers that never merge) -> the merge loop ->
 *                  byte fallback <0xXX> / unk for unknown characters.
 *
 * The merge loop is rmlprep/bpe.py's: lowest (priority, position) first, where priority is the
 * merge rank, or the dense rank of -score in scores mode (equal scores share a rank, so ties go
 * leftmost). Short words use a scan for the minimum (same order, no heap); long ones a binary
 * heap of (priority << 32 | position) keys whose staleness is checked by looking the current
 * pair up again (equal priority at an equal position is the same choice).
 *
 * Threads: tables are read-only after construction. Each call takes one of a few cache slots
 * (piece cache + scratch buffers) with a try-lock, or runs uncached if all are busy, and
 * releases the GIL for long texts and for batches, so 2 threads use 2 cores.
 *
 * Source: rmlprep/bpe.py, rmlprep/tokenizer.py, rmlprep/pretokenize.py (the reference).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unicode_classes.h"

#define KIND_BYTE_LEVEL 0
#define KIND_SENTENCEPIECE 1

#define PAT_GPT2 1
#define PAT_LLAMA3 2
#define PAT_QWEN2 3
#define PAT_DIGITS 4
#define PAT_DIGITS_INDIVIDUAL 5
#define MAX_STAGES 8

#define SP_WHOLE 0
#define SP_WORDS 1
#define SP_SPACE_SPLIT 2
#define SP_SPACE 0x2581u

#define BARRIER 0x80000000u /* SentencePiece symbol of an unknown character: BARRIER | index */
#define DEAD 0xFFFFFFFFu
#define NO_RANK 0xFFFFFFFFu

#define N_SLOTS 8
#define CACHE_KEY_MAX 256          /* bytes; longer pieces are not cached */
#define CACHE_SLOTS_MAX (1u << 19) /* hash slots per generation; at most half are used */
#define CACHE_KEYS_MAX (8u << 20)  /* bytes of keys per generation */
#define CACHE_VALS_MAX (2u << 20)  /* ids per generation */
#define SMALL_WORD 48              /* symbols; up to this the merge loop scans instead of a heap */
#define GIL_RELEASE_CHARS 4096
#define SCRATCH_KEEP (1u << 20)    /* scratch above this many bytes is freed after a call */

static inline int cls_of(uint32_t c)
{
    return RML_CLASS_STAGE2[RML_CLASS_STAGE1[c >> 8]][c & 0xFF];
}

/* ---------------------------------------------------------------------------------------- */
/* hashing */

static inline uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static inline uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0x243F6A8885A308D3ULL ^ (n * 0x9E3779B97F4A7C15ULL);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0x9E3779B97F4A7C15ULL;
    return mix64(h);
}

static size_t pow2_at_least(size_t n)
{
    size_t s = 16;
    while (s < n)
        s <<= 1;
    return s;
}

/* (left id, right id) -> (priority, merged id) */
typedef struct {
    uint64_t key;
    uint32_t rank;
    uint32_t merged;
} PairEntry;

typedef struct {
    PairEntry *tab;
    size_t mask;
} PairMap;

#define PAIR_EMPTY 0xFFFFFFFFFFFFFFFFULL

static inline const PairEntry *pair_get(const PairMap *m, uint32_t a, uint32_t b)
{
    if ((a | b) & BARRIER || m->tab == NULL)
        return NULL;
    uint64_t key = ((uint64_t)a << 32) | b;
    size_t i = (size_t)mix64(key) & m->mask;
    for (;;) {
        const PairEntry *e = &m->tab[i];
        if (e->key == key)
            return e;
        if (e->key == PAIR_EMPTY)
            return NULL;
        i = (i + 1) & m->mask;
    }
}

static inline void pair_prefetch(const PairMap *m, uint32_t a, uint32_t b)
{
    if (m->tab != NULL) {
        uint64_t key = ((uint64_t)a << 32) | b;
        __builtin_prefetch(&m->tab[(size_t)mix64(key) & m->mask]);
    }
}

/* bytes -> id (whole-token lookup) */
typedef struct {
    uint64_t hash;
    uint32_t off;
    uint32_t len;
    int32_t id;
} StrEntry;

typedef struct {
    StrEntry *tab;
    size_t mask;
    uint8_t *blob;
} StrMap;

static inline int32_t strmap_get(const StrMap *m, const uint8_t *k, size_t n)
{
    if (m->tab == NULL)
        return -1;
    uint64_t h = hash_bytes(k, n);
    size_t i = (size_t)h & m->mask;
    for (;;) {
        const StrEntry *e = &m->tab[i];
        if (e->id < 0)
            return -1;
        if (e->hash == h && e->len == n && memcmp(m->blob + e->off, k, n) == 0)
            return e->id;
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

typedef struct {
    uint64_t hash;
    uint32_t koff, klen, voff, vlen; /* klen == 0: empty slot */
} CacheEntry;

/* Front cache: direct-mapped, pieces of up to 16 bytes with up to 4 ids, inline (no pointer
 * chasing); small enough to stay in L2, so frequent pieces never touch the big tables. */
#define L1_BITS 13
#define L1_KEY 16
#define L1_IDS 4
typedef struct {
    uint64_t k0, k1; /* the key, zero-padded */
    uint8_t klen;    /* 0: empty */
    uint8_t nids;
    uint32_t ids[L1_IDS];
} L1Entry;

typedef struct {
    CacheEntry *tab;
    uint32_t mask, count;
    uint8_t *keys;
    size_t kn, kcap;
    uint32_t *vals;
    size_t vn, vcap;
} Cache;

struct Encoder;
struct Slot;

typedef struct {
    const struct Encoder *E;
    struct Slot *slot; /* NULL: no cache (all slots busy, or splitter test mode) */
    IdVec *out;
    int collect;
    const void *base;
    uint8_t *u8;
    size_t u8cap;
    uint32_t *sym, *rk, *mg;
    int32_t *nxt, *prv;
    uint64_t *heap;
    size_t symcap;
} Ctx;

/* The piece cache has two generations: lookups try the young one, then the old one (a hit there
 * is copied into the young one); when the young one is full the old one is dropped and the young
 * one becomes old. Pieces in use survive a turnover, one-off pieces do not. */
typedef struct Slot {
    pthread_mutex_t lock;
    L1Entry *l1;
    Cache gen[2];
    int young;
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
    PairMap pairs;
    uint64_t *bytepair; /* byte-level: [b1 << 8 | b2] -> rank << 32 | merged, or ~0 (L2-sized) */
    StrMap whole;
    CpMap cps;
    PyObject **ints; /* a PyLong per id, so building the result list allocates nothing */
    Py_ssize_t n_vocab;
    Slot slots[N_SLOTS];
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

static inline int reserve_u8(Ctx *x, size_t n)
{
    if (n <= x->u8cap)
        return 0;
    return grow((void **)&x->u8, &x->u8cap, n, 1);
}

static int reserve_syms(Ctx *x, size_t n)
{
    if (n <= x->symcap)
        return 0;
    size_t c = pow2_at_least(n);
    uint32_t *sym = realloc(x->sym, c * 4), *rk, *mg;
    if (sym == NULL)
        return -1;
    x->sym = sym;
    if ((rk = realloc(x->rk, c * 4)) == NULL)
        return -1;
    x->rk = rk;
    if ((mg = realloc(x->mg, c * 4)) == NULL)
        return -1;
    x->mg = mg;
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
    free(x->sym);
    free(x->rk);
    free(x->mg);
    free(x->nxt);
    free(x->prv);
    free(x->heap);
    x->u8 = NULL;
    x->sym = x->rk = x->mg = NULL;
    x->nxt = x->prv = NULL;
    x->heap = NULL;
    x->u8cap = x->symcap = 0;
}

static void ctx_trim(Ctx *x)
{
    if (x->u8cap > SCRATCH_KEEP || x->symcap * 28 > SCRATCH_KEEP)
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

/* ---------------------------------------------------------------------------------------- */
/* piece cache (bounded: cleared when full) */

static inline L1Entry *l1_slot(Slot *c, const uint8_t *k, size_t n, uint64_t *k0, uint64_t *k1)
{
    uint64_t a = 0, b = 0;
    if (n > 8) {
        memcpy(&a, k, 8);
        memcpy(&b, k + 8, n - 8);
    } else {
        memcpy(&a, k, n);
    }
    *k0 = a;
    *k1 = b;
    uint64_t h = (a * 0x9E3779B97F4A7C15ULL) ^ ((b + n) * 0xC2B2AE3D27D4EB4FULL);
    return &c->l1[(h ^ (h >> 29)) >> (64 - L1_BITS)];
}

/* 1 and the ids pushed when k is in the front cache. */
static inline int l1_get(Ctx *x, const uint8_t *k, size_t n)
{
    Slot *c = x->slot;
    if (c->l1 == NULL || n > L1_KEY)
        return 0;
    uint64_t k0, k1;
    const L1Entry *e = l1_slot(c, k, n, &k0, &k1);
    if (e->klen != n || e->k0 != k0 || e->k1 != k1)
        return 0;
    IdVec *o = x->out;
    if (o->n + L1_IDS > o->cap && grow((void **)&o->v, &o->cap, o->n + L1_IDS, 4) < 0)
        return 0;
    memcpy(o->v + o->n, e->ids, sizeof(e->ids));
    o->n += e->nids;
    return 1;
}

static inline void l1_put(Ctx *x, const uint8_t *k, size_t n, const uint32_t *ids, size_t m)
{
    Slot *c = x->slot;
    if (n > L1_KEY || n == 0 || m > L1_IDS)
        return;
    if (c->l1 == NULL && (c->l1 = calloc((size_t)1 << L1_BITS, sizeof(L1Entry))) == NULL)
        return;
    uint64_t k0, k1;
    L1Entry *e = l1_slot(c, k, n, &k0, &k1);
    e->k0 = k0;
    e->k1 = k1;
    e->klen = (uint8_t)n;
    e->nids = (uint8_t)m;
    memcpy(e->ids, ids, m * 4);
}

static void cache_clear(Cache *c)
{
    if (c->tab)
        memset(c->tab, 0, (size_t)(c->mask + 1) * sizeof(CacheEntry));
    c->count = 0;
    c->kn = c->vn = 0;
}

static void cache_free(Cache *c)
{
    free(c->tab);
    free(c->keys);
    free(c->vals);
    memset(c, 0, sizeof(*c));
}

static void cache_put_gen(Slot *sl, Cache *c, uint64_t h, const uint8_t *k, size_t n, const uint32_t *ids,
                          size_t m);

static int cache_get_gen(Ctx *x, Cache *c, uint64_t h, const uint8_t *k, size_t n)
{
    if (c->tab == NULL)
        return 0;
    size_t i = (size_t)h & c->mask;
    for (;;) {
        const CacheEntry *e = &c->tab[i];
        if (e->klen == 0)
            return 0;
        if (e->hash == h && e->klen == n && memcmp(c->keys + e->koff, k, n) == 0) {
            IdVec *o = x->out;
            if (o->n + e->vlen > o->cap && grow((void **)&o->v, &o->cap, o->n + e->vlen, 4) < 0)
                return 0; /* the caller recomputes and fails on its own allocation */
            memcpy(o->v + o->n, c->vals + e->voff, (size_t)e->vlen * 4);
            o->n += e->vlen;
            return 1;
        }
        i = (i + 1) & c->mask;
    }
}

static int cache_get(Ctx *x, uint64_t h, const uint8_t *k, size_t n)
{
    Slot *sl = x->slot;
    if (cache_get_gen(x, &sl->gen[sl->young], h, k, n))
        return 1;
    Cache *old = &sl->gen[!sl->young];
    size_t start = x->out->n;
    if (!cache_get_gen(x, old, h, k, n))
        return 0;
    /* promote: copy into the young generation (may turn the generations over) */
    cache_put_gen(sl, &sl->gen[sl->young], h, k, n, x->out->v + start, x->out->n - start);
    return 1;
}

static void cache_insert(Cache *c, const CacheEntry *src)
{
    size_t i = (size_t)src->hash & c->mask;
    while (c->tab[i].klen != 0)
        i = (i + 1) & c->mask;
    c->tab[i] = *src;
    c->count++;
}

/* Remember k -> ids; failures only mean the entry is not kept. */
static void cache_put(Ctx *x, uint64_t h, const uint8_t *k, size_t n, const uint32_t *ids, size_t m)
{
    Slot *sl = x->slot;
    cache_put_gen(sl, &sl->gen[sl->young], h, k, n, ids, m);
}

static void cache_put_gen(Slot *sl, Cache *c, uint64_t h, const uint8_t *k, size_t n, const uint32_t *ids,
                          size_t m)
{
    if (n == 0 || n > CACHE_KEY_MAX || m > 0xFFFF)
        return;
    int full = c->tab != NULL && ((c->mask + 1 >= CACHE_SLOTS_MAX && (size_t)(c->count + 1) * 2 > (size_t)c->mask + 1) ||
                                  c->kn + n > CACHE_KEYS_MAX || c->vn + m > CACHE_VALS_MAX);
    if (full) {
        /* young generation full: drop the old one, the young one becomes old */
        Cache *old = &sl->gen[!sl->young];
        cache_clear(old);
        sl->young = !sl->young;
        c = old;
    }
    if (c->tab == NULL) {
        c->tab = calloc(1024, sizeof(CacheEntry));
        if (c->tab == NULL)
            return;
        c->mask = 1023;
    }
    if ((size_t)(c->count + 1) * 2 > (size_t)c->mask + 1) { /* grow (below CACHE_SLOTS_MAX) */
        size_t size = (size_t)c->mask + 1;
        CacheEntry *old = c->tab;
        CacheEntry *nt = calloc(size * 2, sizeof(CacheEntry));
        if (nt == NULL)
            return;
        c->tab = nt;
        c->mask = (uint32_t)(size * 2 - 1);
        c->count = 0;
        for (size_t i = 0; i < size; i++)
            if (old[i].klen)
                cache_insert(c, &old[i]);
        free(old);
    }
    if (grow((void **)&c->keys, &c->kcap, c->kn + n, 1) < 0 ||
        grow((void **)&c->vals, &c->vcap, c->vn + m + 1, 4) < 0)
        return;
    CacheEntry e = {h, (uint32_t)c->kn, (uint32_t)n, (uint32_t)c->vn, (uint32_t)m};
    memcpy(c->keys + c->kn, k, n);
    memcpy(c->vals + c->vn, ids, m * 4);
    c->kn += n;
    c->vn += m;
    cache_insert(c, &e);
}

/* ---------------------------------------------------------------------------------------- */
/* the merge loop: x->sym[0..n) -> merged ids in x->sym[0..m), returns m */

/* bytes: the piece's bytes when sym[i] is byte i's symbol (no byte dropped), else NULL */
static size_t merge_scan(Ctx *x, size_t n, const uint8_t *bytes)
{
    const PairMap *P = &x->E->pairs;
    uint32_t *sym = x->sym, *rk = x->rk, *mg = x->mg;
    if (bytes != NULL && x->E->bytepair != NULL) {
        const uint64_t *bp = x->E->bytepair;
        for (size_t i = 0; i + 1 < n; i++) {
            uint64_t v = bp[(size_t)bytes[i] << 8 | bytes[i + 1]];
            rk[i] = (uint32_t)(v >> 32);
            mg[i] = (uint32_t)v;
        }
    } else {
        for (size_t i = 0; i + 1 < n; i++) /* independent lookups: let their misses overlap */
            pair_prefetch(P, sym[i], sym[i + 1]);
        for (size_t i = 0; i + 1 < n; i++) {
            const PairEntry *p = pair_get(P, sym[i], sym[i + 1]);
            rk[i] = p ? p->rank : NO_RANK;
            mg[i] = p ? p->merged : 0;
        }
    }
    while (n > 1) {
        uint32_t best = NO_RANK;
        size_t b = 0;
        for (size_t i = 0; i + 1 < n; i++) /* strict <: leftmost on equal priority */
            if (rk[i] < best) {
                best = rk[i];
                b = i;
            }
        if (best == NO_RANK)
            break;
        sym[b] = mg[b];
        if (b + 2 < n) {
            memmove(sym + b + 1, sym + b + 2, (n - b - 2) * 4);
            memmove(rk + b + 1, rk + b + 2, (n - b - 2) * 4);
            memmove(mg + b + 1, mg + b + 2, (n - b - 2) * 4);
        }
        n--;
        if (b > 0 && b + 1 < n) /* both new pairs at once: overlap their misses */
            pair_prefetch(P, sym[b - 1], sym[b]);
        if (b + 1 < n) {
            const PairEntry *p = pair_get(P, sym[b], sym[b + 1]);
            rk[b] = p ? p->rank : NO_RANK;
            mg[b] = p ? p->merged : 0;
        }
        if (b > 0) {
            const PairEntry *p = pair_get(P, sym[b - 1], sym[b]);
            rk[b - 1] = p ? p->rank : NO_RANK;
            mg[b - 1] = p ? p->merged : 0;
        }
    }
    return n;
}

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
            const PairEntry *p = pair_get(P, sym[i], sym[i + 1]);
            if (p)
                heap[hn++] = ((uint64_t)p->rank << 32) | i;
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
        const PairEntry *p = pair_get(P, sym[i], sym[j]);
        if (p == NULL || p->rank != rank)
            continue; /* stale */
        uint32_t merged = p->merged;
        sym[i] = merged;
        sym[j] = DEAD;
        int32_t k = nxt[j];
        nxt[i] = k;
        if (k >= 0) {
            prv[k] = (int32_t)i;
            const PairEntry *q = pair_get(P, merged, sym[k]);
            if (q)
                heap_push(heap, &hn, ((uint64_t)q->rank << 32) | i);
        }
        int32_t h = prv[i];
        if (h >= 0) {
            const PairEntry *q = pair_get(P, sym[h], merged);
            if (q)
                heap_push(heap, &hn, ((uint64_t)q->rank << 32) | (uint32_t)h);
        }
    }
    size_t m = 0;
    for (int32_t i = 0; i >= 0; i = nxt[i])
        sym[m++] = sym[i];
    return m;
}

static size_t merge_loop(Ctx *x, size_t n, const uint8_t *bytes)
{
    if (n < 2)
        return n;
    if (n <= SMALL_WORD)
        return merge_scan(x, n, bytes);
    return merge_heap(x, n);
}

/* Byte-level piece given as UTF-8 bytes (may point into x->u8). */
static int encode_bytes_piece(Ctx *x, const uint8_t *b, size_t nb)
{
    const struct Encoder *E = x->E;
    if (x->slot != NULL && l1_get(x, b, nb))
        return 0;
    size_t start = x->out->n;
    if (E->ignore_merges) {
        int32_t w = strmap_get(&E->whole, b, nb);
        if (w >= 0) {
            if (push_id(x, (uint32_t)w) < 0)
                return -1;
            goto remember;
        }
    }
    uint64_t h = 0;
    int cacheable = x->slot != NULL && nb <= CACHE_KEY_MAX;
    if (cacheable) {
        h = hash_bytes(b, nb);
        if (cache_get(x, h, b, nb))
            goto remember;
    }
    if (reserve_syms(x, nb) < 0)
        return -1;
    size_t n = 0;
    int plain = 1;
    for (size_t i = 0; i < nb; i++) {
        int32_t t = E->byte_ids[b[i]];
        if (t < 0) {
            plain = 0;
            if (E->unk_id < 0)
                continue; /* dropped, as Hugging Face BPE does without an unk token */
            t = E->unk_id;
        }
        x->sym[n++] = (uint32_t)t;
    }
    size_t m = merge_loop(x, n, plain ? b : NULL);
    IdVec *o = x->out;
    if (o->n + m > o->cap && grow((void **)&o->v, &o->cap, o->n + m, 4) < 0)
        return -1;
    memcpy(o->v + o->n, x->sym, m * 4);
    if (cacheable)
        cache_put(x, h, b, nb, o->v + o->n, m);
    o->n += m;
remember:
    if (x->slot != NULL)
        l1_put(x, b, nb, x->out->v + start, x->out->n - start);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* per-kind copies */

#define CP_T uint8_t
#define SFX(name) name##_1
#include "split_impl.h"
#undef CP_T
#undef SFX

#define CP_T uint16_t
#define SFX(name) name##_2
#include "split_impl.h"
#undef CP_T
#undef SFX

#define CP_T uint32_t
#define SFX(name) name##_4
#include "split_impl.h"
#undef CP_T
#undef SFX

static int run_any(Ctx *x, const void *data, int kind, Py_ssize_t n)
{
    x->base = data;
    switch (kind) {
    case PyUnicode_1BYTE_KIND:
        return run_text_1(x, (const uint8_t *)data, n);
    case PyUnicode_2BYTE_KIND:
        return run_text_2(x, (const uint16_t *)data, n);
    default:
        return run_text_4(x, (const uint32_t *)data, n);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* slots */

static Slot *slot_acquire(Encoder *E)
{
    for (int k = 0; k < N_SLOTS; k++)
        if (pthread_mutex_trylock(&E->slots[k].lock) == 0)
            return &E->slots[k];
    return NULL;
}

/* Context for one call: a slot's (cache + warm scratch) or a private one (`tmp`). */
static Ctx *ctx_begin(Encoder *E, Slot *sl, Ctx *tmp, IdVec *tmp_out)
{
    Ctx *x;
    if (sl) {
        x = &sl->ctx;
        x->out = &sl->out;
    } else {
        memset(tmp, 0, sizeof(*tmp));
        memset(tmp_out, 0, sizeof(*tmp_out));
        x = tmp;
        x->out = tmp_out;
    }
    x->E = E;
    x->slot = sl;
    x->collect = 0;
    x->out->n = 0;
    return x;
}

static void ctx_end(Slot *sl, Ctx *x)
{
    if (sl) {
        ctx_trim(x);
        if (sl->out.cap > SCRATCH_KEEP / 4) {
            free(sl->out.v);
            sl->out.v = NULL;
            sl->out.cap = 0;
        }
        pthread_mutex_unlock(&sl->lock);
    } else {
        ctx_free_scratch(x);
        free(x->out->v);
        x->out->v = NULL;
        x->out->cap = 0;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Python type */

static PyObject *ids_to_list(Encoder *E, const IdVec *o)
{
    PyObject *list = PyList_New((Py_ssize_t)o->n);
    if (list == NULL)
        return NULL;
    for (size_t i = 0; i < o->n; i++) {
        uint32_t t = o->v[i];
        PyObject *v;
        if ((Py_ssize_t)t < E->n_vocab) {
            v = E->ints[t];
            Py_INCREF(v);
        } else {
            v = PyLong_FromUnsignedLong(t);
            if (v == NULL) {
                Py_DECREF(list);
                return NULL;
            }
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
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

static PyObject *Encoder_encode_text(Encoder *E, PyObject *text)
{
    if (ready_str(text) < 0)
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Slot *sl = slot_acquire(E);
    Ctx tmp;
    IdVec tmp_out;
    Ctx *x = ctx_begin(E, sl, &tmp, &tmp_out);
    int rc;
    if (n >= GIL_RELEASE_CHARS) {
        Py_BEGIN_ALLOW_THREADS
        rc = run_any(x, data, kind, n);
        Py_END_ALLOW_THREADS
    } else {
        rc = run_any(x, data, kind, n);
    }
    PyObject *res = rc < 0 ? PyErr_NoMemory() : ids_to_list(E, x->out);
    ctx_end(sl, x);
    return res;
}

static PyObject *Encoder_encode_batch(Encoder *E, PyObject *texts)
{
    PyObject *tup = PySequence_Tuple(texts); /* holds the strs while the GIL is released */
    if (tup == NULL)
        return NULL;
    Py_ssize_t nt = PyTuple_GET_SIZE(tup);
    const void **data = PyMem_Malloc(sizeof(void *) * (size_t)(nt + 1));
    int *kinds = PyMem_Malloc(sizeof(int) * (size_t)(nt + 1));
    Py_ssize_t *lens = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(nt + 1));
    PyObject *offs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * (nt + 1)));
    PyObject *res = NULL;
    if (!data || !kinds || !lens || !offs) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *s = PyTuple_GET_ITEM(tup, i);
        if (ready_str(s) < 0) {
            PyErr_Format(PyExc_TypeError, "texts[%zd] is %.100s, expected str", i, Py_TYPE(s)->tp_name);
            goto done;
        }
        data[i] = PyUnicode_DATA(s);
        kinds[i] = PyUnicode_KIND(s);
        lens[i] = PyUnicode_GET_LENGTH(s);
    }
    int64_t *off = (int64_t *)PyBytes_AS_STRING(offs);
    Slot *sl = slot_acquire(E);
    Ctx tmp;
    IdVec tmp_out;
    Ctx *x = ctx_begin(E, sl, &tmp, &tmp_out);
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nt && rc == 0; i++) {
        off[i] = (int64_t)x->out->n;
        rc = run_any(x, data[i], kinds[i], lens[i]);
    }
    off[nt] = (int64_t)x->out->n;
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_NoMemory();
    } else {
        PyObject *ids = PyBytes_FromStringAndSize((const char *)x->out->v, (Py_ssize_t)(4 * x->out->n));
        if (ids) {
            res = PyTuple_Pack(2, ids, offs);
            Py_DECREF(ids);
        }
    }
    ctx_end(sl, x);
done:
    PyMem_Free(data);
    PyMem_Free(kinds);
    PyMem_Free(lens);
    Py_XDECREF(offs);
    Py_DECREF(tup);
    return res;
}

static PyObject *Encoder_split_text(Encoder *E, PyObject *text)
{
    if (ready_str(text) < 0)
        return NULL;
    Ctx tmp;
    IdVec tmp_out;
    Ctx *x = ctx_begin(E, NULL, &tmp, &tmp_out);
    x->collect = 1;
    int rc = run_any(x, PyUnicode_DATA(text), PyUnicode_KIND(text), PyUnicode_GET_LENGTH(text));
    PyObject *res = NULL;
    if (rc < 0) {
        PyErr_NoMemory();
    } else if ((res = PyList_New((Py_ssize_t)(x->out->n / 2))) != NULL) {
        for (size_t i = 0; i < x->out->n / 2; i++) {
            PyObject *t = Py_BuildValue("(II)", x->out->v[2 * i], x->out->v[2 * i + 1]);
            if (t == NULL) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, (Py_ssize_t)i, t);
        }
    }
    ctx_end(NULL, x);
    return res;
}

static PyObject *Encoder_clear_cache(Encoder *E, PyObject *Py_UNUSED(ignored))
{
    for (int k = 0; k < N_SLOTS; k++) {
        Slot *sl = &E->slots[k];
        pthread_mutex_lock(&sl->lock);
        cache_free(&sl->gen[0]);
        cache_free(&sl->gen[1]);
        free(sl->l1);
        sl->l1 = NULL;
        ctx_free_scratch(&sl->ctx);
        free(sl->out.v);
        memset(&sl->out, 0, sizeof(sl->out));
        pthread_mutex_unlock(&sl->lock);
    }
    Py_RETURN_NONE;
}

static PyObject *Encoder_cache_info(Encoder *E, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (int k = 0; k < N_SLOTS; k++) {
        Slot *sl = &E->slots[k];
        size_t bytes = sl->l1 ? ((size_t)1 << L1_BITS) * sizeof(L1Entry) : 0, entries = 0;
        for (int g = 0; g < 2; g++) {
            Cache *c = &sl->gen[g];
            if (c->tab == NULL)
                continue;
            bytes += ((size_t)c->mask + 1) * sizeof(CacheEntry) + c->kcap + c->vcap * 4;
            entries += c->count;
        }
        if (bytes == 0)
            continue;
        PyObject *d = Py_BuildValue("{sisnsn}", "slot", k, "entries", (Py_ssize_t)entries, "bytes",
                                    (Py_ssize_t)bytes);
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

static int build_pairs(Encoder *E, PyObject *pairs_obj)
{
    /* pairs: buffer of uint32 quadruples (left, right, rank, merged) */
    Py_buffer v;
    if (get_buffer(pairs_obj, &v, 16, "pairs") < 0)
        return -1;
    size_t n = (size_t)v.len / 16;
    const uint32_t *q = v.buf;
    size_t size = pow2_at_least(n + n / 3 + 2); /* load <= 3/4: a smaller table misses less */
    E->pairs.tab = malloc(size * sizeof(PairEntry));
    if (E->pairs.tab == NULL) {
        PyBuffer_Release(&v);
        PyErr_NoMemory();
        return -1;
    }
    E->pairs.mask = size - 1;
    for (size_t i = 0; i < size; i++)
        E->pairs.tab[i].key = PAIR_EMPTY;
    for (size_t r = 0; r < n; r++) {
        uint32_t a = q[4 * r], b = q[4 * r + 1];
        if ((a | b | q[4 * r + 3]) & BARRIER || q[4 * r + 2] == NO_RANK) {
            PyBuffer_Release(&v);
            PyErr_Format(PyExc_ValueError, "pairs[%zu]: id or rank out of range", r);
            return -1;
        }
        uint64_t key = ((uint64_t)a << 32) | b;
        size_t i = (size_t)mix64(key) & E->pairs.mask;
        while (E->pairs.tab[i].key != PAIR_EMPTY && E->pairs.tab[i].key != key)
            i = (i + 1) & E->pairs.mask;
        if (E->pairs.tab[i].key == key && E->pairs.tab[i].rank <= q[4 * r + 2])
            continue; /* first (lowest) priority wins for a repeated pair */
        E->pairs.tab[i].key = key;
        E->pairs.tab[i].rank = q[4 * r + 2];
        E->pairs.tab[i].merged = q[4 * r + 3];
    }
    PyBuffer_Release(&v);
    return 0;
}

static int build_whole(Encoder *E, PyObject *keys, PyObject *ids_obj)
{
    /* keys: list of bytes; ids: buffer of int32, same length */
    if (keys == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(keys, "whole_keys must be a sequence of bytes");
    if (seq == NULL)
        return -1;
    Py_buffer v;
    if (get_buffer(ids_obj, &v, 4, "whole_ids") < 0) {
        Py_DECREF(seq);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int rc = -1;
    if ((Py_ssize_t)(v.len / 4) != n) {
        PyErr_SetString(PyExc_ValueError, "whole_keys and whole_ids differ in length");
        goto out;
    }
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyBytes_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "whole_keys must hold bytes");
            goto out;
        }
        total += (size_t)PyBytes_GET_SIZE(k);
    }
    size_t size = pow2_at_least((size_t)n * 2 + 2);
    E->whole.blob = malloc(total + 1);
    E->whole.tab = malloc(size * sizeof(StrEntry));
    if (!E->whole.blob || !E->whole.tab) {
        PyErr_NoMemory();
        goto out;
    }
    E->whole.mask = size - 1;
    for (size_t i = 0; i < size; i++)
        E->whole.tab[i].id = -1;
    const int32_t *ids = v.buf;
    size_t off = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *k = PySequence_Fast_GET_ITEM(seq, r);
        const uint8_t *kb = (const uint8_t *)PyBytes_AS_STRING(k);
        size_t kn = (size_t)PyBytes_GET_SIZE(k);
        uint64_t h = hash_bytes(kb, kn);
        size_t i = (size_t)h & E->whole.mask;
        while (E->whole.tab[i].id >= 0)
            i = (i + 1) & E->whole.mask;
        memcpy(E->whole.blob + off, kb, kn);
        E->whole.tab[i] = (StrEntry){h, (uint32_t)off, (uint32_t)kn, ids[r]};
        off += kn;
    }
    rc = 0;
out:
    PyBuffer_Release(&v);
    Py_DECREF(seq);
    return rc;
}

static int build_cps(Encoder *E, PyObject *cps_obj)
{
    /* cps: buffer of (code point, id) uint32 pairs */
    Py_buffer v;
    if (get_buffer(cps_obj, &v, 8, "cps") < 0)
        return -1;
    size_t n = (size_t)v.len / 8;
    const uint32_t *q = v.buf;
    E->cps.bmp = malloc(0x10000 * sizeof(int32_t));
    size_t astral = 0;
    for (size_t r = 0; r < n; r++)
        astral += q[2 * r] >= 0x10000;
    size_t size = pow2_at_least(astral * 2 + 2);
    E->cps.tab = malloc(size * sizeof(CpEntry));
    if (!E->cps.bmp || !E->cps.tab) {
        PyBuffer_Release(&v);
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
            PyBuffer_Release(&v);
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
    PyBuffer_Release(&v);
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

static PyObject *Encoder_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"kind", "stages", "byte_ids", "fallback_ids", "unk_id", "ignore_merges",
                             "byte_fallback", "sp_split", "pairs", "whole_keys", "whole_ids", "cps",
                             "vocab_size", NULL};
    int kind, unk_id, ignore_merges, byte_fallback, sp_split;
    Py_ssize_t vocab_size;
    PyObject *stages, *byte_ids, *fallback_ids, *pairs, *whole_keys, *whole_ids, *cps;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iOOOipiiOOOOn", kwlist, &kind, &stages, &byte_ids,
                                     &fallback_ids, &unk_id, &ignore_merges, &byte_fallback, &sp_split,
                                     &pairs, &whole_keys, &whole_ids, &cps, &vocab_size))
        return NULL;
    if (kind != KIND_BYTE_LEVEL && kind != KIND_SENTENCEPIECE) {
        PyErr_Format(PyExc_ValueError, "kind %d is not 0 (byte-level) or 1 (SentencePiece)", kind);
        return NULL;
    }
    if (vocab_size <= 0 || vocab_size >= (Py_ssize_t)BARRIER) {
        PyErr_Format(PyExc_ValueError, "vocab_size %zd out of range", vocab_size);
        return NULL;
    }
    Encoder *E = (Encoder *)type->tp_alloc(type, 0);
    if (E == NULL)
        return NULL;
    for (int k = 0; k < N_SLOTS; k++)
        pthread_mutex_init(&E->slots[k].lock, NULL);
    E->kind = kind;
    E->unk_id = unk_id;
    E->ignore_merges = ignore_merges;
    E->byte_fallback = byte_fallback;
    E->sp_split = sp_split;
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
        if (p < PAT_GPT2 || p > PAT_DIGITS_INDIVIDUAL) {
            Py_DECREF(st);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "stages[%d] = %ld is not a known pattern code", k, p);
            goto fail;
        }
        E->stages[k] = (int)p;
    }
    Py_DECREF(st);
    if (copy_ids256(E->byte_ids, byte_ids, "byte_ids") < 0 ||
        copy_ids256(E->fallback_ids, fallback_ids, "fallback_ids") < 0 || build_pairs(E, pairs) < 0 ||
        build_whole(E, whole_keys, whole_ids) < 0 || build_cps(E, cps) < 0)
        goto fail;
    if (kind == KIND_BYTE_LEVEL) {
        E->bytepair = malloc(65536 * sizeof(uint64_t));
        if (E->bytepair == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        for (int b1 = 0; b1 < 256; b1++)
            for (int b2 = 0; b2 < 256; b2++) {
                const PairEntry *p = E->byte_ids[b1] < 0 || E->byte_ids[b2] < 0
                                         ? NULL
                                         : pair_get(&E->pairs, (uint32_t)E->byte_ids[b1], (uint32_t)E->byte_ids[b2]);
                E->bytepair[b1 << 8 | b2] = p ? ((uint64_t)p->rank << 32 | p->merged) : ~(uint64_t)0;
            }
    }
    E->ints = PyMem_Calloc((size_t)vocab_size, sizeof(PyObject *));
    if (E->ints == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    E->n_vocab = vocab_size;
    for (Py_ssize_t i = 0; i < vocab_size; i++)
        if ((E->ints[i] = PyLong_FromSsize_t(i)) == NULL)
            goto fail;
    return (PyObject *)E;
fail:
    Py_DECREF(E);
    return NULL;
}

static void Encoder_dealloc(Encoder *E)
{
    for (int k = 0; k < N_SLOTS; k++) {
        Slot *sl = &E->slots[k];
        cache_free(&sl->gen[0]);
        cache_free(&sl->gen[1]);
        free(sl->l1);
        ctx_free_scratch(&sl->ctx);
        free(sl->out.v);
        pthread_mutex_destroy(&sl->lock);
    }
    free(E->pairs.tab);
    free(E->bytepair);
    free(E->whole.tab);
    free(E->whole.blob);
    free(E->cps.bmp);
    free(E->cps.tab);
    if (E->ints) {
        for (Py_ssize_t i = 0; i < E->n_vocab; i++)
            Py_XDECREF(E->ints[i]);
        PyMem_Free(E->ints);
    }
    Py_TYPE(E)->tp_free((PyObject *)E);
}

static PyMethodDef Encoder_methods[] = {
    {"encode_text", (PyCFunction)Encoder_encode_text, METH_O,
     "encode_text(text: str) -> list[int]: ids of one prepared text segment."},
    {"encode_batch", (PyCFunction)Encoder_encode_batch, METH_O,
     "encode_batch(texts: Sequence[str]) -> (ids: bytes, offsets: bytes)\n\n"
     "ids: uint32 native-endian, all texts' ids back to back; offsets: int64, len(texts) + 1\n"
     "entries, text i is ids[offsets[i]:offsets[i+1]]. Releases the GIL while encoding."},
    {"split_text", (PyCFunction)Encoder_split_text, METH_O,
     "split_text(text: str) -> list[(start, end)]: the pieces (byte-level) or words\n"
     "(SentencePiece) as code-point offsets, without encoding them."},
    {"clear_cache", (PyCFunction)Encoder_clear_cache, METH_NOARGS, "Free every piece cache and scratch buffer."},
    {"cache_info", (PyCFunction)Encoder_cache_info, METH_NOARGS,
     "cache_info() -> list of {slot, entries, bytes} for the piece caches in use."},
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
    "Compiled hot path of rmlprep's BPE encoder (see rmlprep/native.py).", -1, NULL,
};

PyMODINIT_FUNC PyInit__fastbpe(void)
{
    if (PyType_Ready(&EncoderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&fastbpe_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&EncoderType);
    if (PyModule_AddObject(m, "Encoder", (PyObject *)&EncoderType) < 0 ||
        PyModule_AddStringConstant(m, "UNICODE_VERSION", RML_UNICODE_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "PAT_GPT2", PAT_GPT2) < 0 ||
        PyModule_AddIntConstant(m, "PAT_LLAMA3", PAT_LLAMA3) < 0 ||
        PyModule_AddIntConstant(m, "PAT_QWEN2", PAT_QWEN2) < 0 ||
        PyModule_AddIntConstant(m, "PAT_DIGITS", PAT_DIGITS) < 0 ||
        PyModule_AddIntConstant(m, "PAT_DIGITS_INDIVIDUAL", PAT_DIGITS_INDIVIDUAL) < 0 ||
        PyModule_AddIntConstant(m, "SP_WHOLE", SP_WHOLE) < 0 ||
        PyModule_AddIntConstant(m, "SP_WORDS", SP_WORDS) < 0 ||
        PyModule_AddIntConstant(m, "SP_SPACE_SPLIT", SP_SPACE_SPLIT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
