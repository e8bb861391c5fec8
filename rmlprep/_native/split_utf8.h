/* Pre-split matchers of the native encoder, over UTF-8 (included once by fastbpe.c).
 *
 * A text arrives as UTF-8 bytes s[0, n) plus a class array k[0, n): every byte of a character
 * carries that character's class flags (unicode_classes.h: LETTER, NUMBER, SPACE, and o200k's
 * UPPER / LOWER sets). A run of characters of one class is then a run of equal bytes in k, which
 * SSE2 finds 16 bytes at a time without a branch per character.
 *
 * Each matcher returns the end of the match that starts at byte i of a text [0, e): e is the end
 * of the piece a chained stage is working on, so lookaheads ((?!\S), $) see the piece end as the
 * text end, as re does on each piece. Each is its pattern's alternatives tried in order (leftmost
 * alternative wins; greedy runs, with the backtracking steps the patterns need written out); the
 * comments quote the alternative being matched. The text is well-formed UTF-8 (lone surrogates
 * as their 3-byte "surrogatepass" form), so a lead byte says how long its character is.
 *
 * GPT-2's, Llama 3's, Qwen2's and o200k's patterns as a last stage have block splitters as well
 * (split_gpt2_last, split_llama3_last, split_o200k_last): piece starts worked out for 64 bytes at
 * once from bit masks, without the per-piece chain of dependent loads of a matcher loop; the
 * matchers remain the definition (RMLPREP_SPLIT_SCALAR=1 runs them instead; the tests compare).
 *
 * Source: the pattern strings in rmlprep/pretokenize.py; the pure-Python splitter and the
 * `regex`-module fixtures (fixtures/pretokenizer.json) are the reference.
 */

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define CL_L RML_LETTER
#define CL_N RML_NUMBER
#define CL_S RML_SPACE
#define CL_U RML_UPPER
#define CL_W RML_LOWER
#define CL_LNS (CL_L | CL_N | CL_S)

static uint8_t ASCII_CLS[128];

static inline unsigned cls_cp(uint32_t c)
{
    return RML_CLASS_STAGE2[RML_CLASS_STAGE1[c >> 8]][c & 0xFF];
}

/* Bytes of the character whose lead byte is b (well-formed UTF-8). */
static inline size_t u8len(uint8_t b)
{
    return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

/* Code point of the multi-byte character at s (s[0] >= 0x80), its length in *len. */
static inline uint32_t dec_multi(const uint8_t *s, size_t *len)
{
    uint8_t b = s[0];
    if (b < 0xE0) {
        *len = 2;
        return ((uint32_t)(b & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if (b < 0xF0) {
        *len = 3;
        return ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    *len = 4;
    uint32_t c = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                 ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    return c > 0x10FFFF ? 0xFFFD : c;
}

static inline uint32_t dec_at(const uint8_t *s, size_t *len)
{
    if (s[0] < 0x80) {
        *len = 1;
        return s[0];
    }
    return dec_multi(s, len);
}

/* ---------------------------------------------------------------------------------------- */
/* class arrays */

#if defined(__SSE2__)
/* Class flags of 16 ASCII bytes (letters, digits, White_Space; A-Z UPPER, a-z LOWER). */
static inline __m128i ascii_classes16(__m128i v)
{
    const __m128i bias = _mm_set1_epi8((char)0x80);
    __m128i lower = _mm_or_si128(v, _mm_set1_epi8(0x20));
    /* unsigned x - lo < width, as a signed compare of (x - lo) ^ 0x80 */
    __m128i alpha = _mm_cmplt_epi8(_mm_xor_si128(_mm_sub_epi8(lower, _mm_set1_epi8('a')), bias),
                                   _mm_set1_epi8((char)(0x80 + 26)));
    __m128i upper = _mm_cmplt_epi8(_mm_xor_si128(_mm_sub_epi8(v, _mm_set1_epi8('A')), bias),
                                   _mm_set1_epi8((char)(0x80 + 26)));
    __m128i digit = _mm_cmplt_epi8(_mm_xor_si128(_mm_sub_epi8(v, _mm_set1_epi8('0')), bias),
                                   _mm_set1_epi8((char)(0x80 + 10)));
    __m128i space = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')),
                                 _mm_cmplt_epi8(_mm_xor_si128(_mm_sub_epi8(v, _mm_set1_epi8(9)), bias),
                                                _mm_set1_epi8((char)(0x80 + 5))));
    __m128i k = _mm_and_si128(alpha, _mm_set1_epi8(CL_L));
    k = _mm_or_si128(k, _mm_and_si128(upper, _mm_set1_epi8(CL_U)));
    k = _mm_or_si128(k, _mm_and_si128(_mm_andnot_si128(upper, alpha), _mm_set1_epi8(CL_W)));
    k = _mm_or_si128(k, _mm_and_si128(digit, _mm_set1_epi8(CL_N)));
    return _mm_or_si128(k, _mm_and_si128(space, _mm_set1_epi8(CL_S)));
}
static int simd_classes_ok = 0; /* ascii_classes16 agrees with the table (checked at import) */
#endif

/* k[0, n) for UTF-8 s[0, n). */
static void classify_utf8(const uint8_t *s, size_t n, uint8_t *k)
{
    size_t i = 0;
    while (i < n) {
#if defined(__SSE2__)
        if (simd_classes_ok && i + 16 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
            if (!_mm_movemask_epi8(v)) {
                _mm_storeu_si128((__m128i *)(k + i), ascii_classes16(v));
                i += 16;
                continue;
            }
        }
#endif
        uint8_t b = s[i];
        if (b < 0x80) {
            k[i++] = ASCII_CLS[b];
            continue;
        }
        size_t l;
        uint8_t c = (uint8_t)cls_cp(dec_multi(s + i, &l));
        for (size_t q = 0; q < l; q++)
            k[i + q] = c;
        i += l;
    }
}

/* End of the run from j (< e) of bytes whose class & mask == want; k is readable to e + 15. */
static inline size_t run_eq(const uint8_t *k, size_t j, size_t e, unsigned mask, unsigned want)
{
#if defined(__SSE2__)
    const __m128i vm = _mm_set1_epi8((char)mask), vw = _mm_set1_epi8((char)want);
    while (j < e) {
        __m128i v = _mm_and_si128(_mm_loadu_si128((const __m128i *)(k + j)), vm);
        unsigned stop = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vw)) & 0xFFFF;
        if (stop) {
            j += (size_t)__builtin_ctz(stop);
            return j < e ? j : e;
        }
        j += 16;
    }
    return e;
#else
    while (j < e && (k[j] & mask) == want)
        j++;
    return j;
#endif
}

/* End of the run from j of bytes with any class flag of `set`. */
static inline size_t run_any(const uint8_t *k, size_t j, size_t e, unsigned set)
{
#if defined(__SSE2__)
    const __m128i vs = _mm_set1_epi8((char)set), zero = _mm_setzero_si128();
    while (j < e) {
        __m128i v = _mm_and_si128(_mm_loadu_si128((const __m128i *)(k + j)), vs);
        unsigned stop = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, zero));
        if (stop) {
            j += (size_t)__builtin_ctz(stop);
            return j < e ? j : e;
        }
        j += 16;
    }
    return e;
#else
    while (j < e && (k[j] & set))
        j++;
    return j;
#endif
}

static inline size_t run_crlf(const uint8_t *s, size_t j, size_t e)
{
    while (j < e && (s[j] == '\r' || s[j] == '\n'))
        j++;
    return j;
}

/* Start of the character that ends at byte j. */
static inline size_t char_before(const uint8_t *s, size_t j)
{
    j--;
    while ((s[j] & 0xC0) == 0x80)
        j--;
    return j;
}

/* The end of a White_Space run [i, j) for \s+(?!\S) | \s+: all of it at the text end or when
 * it is one character, else all but its last character. */
static inline size_t ws_backoff(const uint8_t *s, size_t i, size_t j, size_t e)
{
    if (j == e)
        return j;
    size_t last = char_before(s, j);
    return last == i ? j : last;
}

/* The end of the last CR or LF in [i, j), or 0. */
static inline size_t last_crlf_end(const uint8_t *s, size_t i, size_t j)
{
    for (size_t p = j; p > i; p--)
        if (s[p - 1] == '\r' || s[p - 1] == '\n')
            return p;
    return 0;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at i (s[i] == '\''): the end, or 0. */
static inline size_t contraction_ci(const uint8_t *s, size_t i, size_t e)
{
    if (i + 1 >= e)
        return 0;
    size_t ld, lf;
    uint32_t d = dec_at(s + i + 1, &ld);
    if (RML_FOLD_S(d) || RML_FOLD_T(d) || RML_FOLD_M(d) || RML_FOLD_D(d))
        return i + 1 + ld;
    if (i + 1 + ld >= e)
        return 0;
    uint32_t f = dec_at(s + i + 1 + ld, &lf);
    if ((RML_FOLD_R(d) && RML_FOLD_E(f)) || (RML_FOLD_V(d) && RML_FOLD_E(f)) || (RML_FOLD_L(d) && RML_FOLD_L(f)))
        return i + 1 + ld + lf;
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* matchers */

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static inline size_t m_gpt2(const uint8_t *s, const uint8_t *k, size_t i, size_t e)
{
    uint8_t c = s[i];
    if (c == '\'' && i + 1 < e) {
        uint8_t d = s[i + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd')
            return i + 2;
        if (i + 2 < e) {
            uint8_t f = s[i + 2];
            if ((d == 'r' && f == 'e') || (d == 'v' && f == 'e') || (d == 'l' && f == 'l'))
                return i + 3;
        }
    }
    unsigned ki = k[i] & 7;
    size_t j = i;
    if (c == ' ' && i + 1 < e && (k[i + 1] & 7) != CL_S) { /* " ?" joins the run that follows */
        ki = k[i + 1] & 7;
        j = i + 1;
    }
    if (ki != CL_S) /* ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ */
        return run_eq(k, j + 1, e, 7, ki);
    /* \s+(?!\S) backs off one character before a non-space; else \s+ */
    return ws_backoff(s, i, run_eq(k, i + 1, e, 7, CL_S), e);
}

/* Llama 3 (maxd 3), Qwen2 (maxd 1) and cl100k_base (maxd 3, at_end 1):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxd}
 * | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * cl100k_base spells the same alternatives possessively ('(?i:[sdmt]|ll|ve|re), ?+, ++) and adds
 * \s++$ before \s*[\r\n]: a White_Space run that reaches the end is one piece. The possessive
 * forms change nothing here: no later part of their alternative could take characters back.
 * Always inlined (as gcc inlines m_gpt2 untold): called out of line it cost ~14 instructions of
 * call, prologue and epilogue per piece (bench/README.md). */
static inline __attribute__((always_inline)) size_t m_llama3(const uint8_t *s, const uint8_t *k, size_t i,
                                                             size_t e, size_t maxd, int at_end)
{
    uint8_t c = s[i];
    if (c == '\'') {
        size_t m = contraction_ci(s, i, e);
        if (m)
            return m;
    }
    unsigned ki = k[i] & 7;
    if (ki == CL_L) /* \p{L}+ (the optional prefix matched nothing) */
        return run_eq(k, i + 1, e, CL_L, CL_L);
    size_t j = i + u8len(c);
    if (ki != CL_N && c != '\r' && c != '\n' && j < e && (k[j] & CL_L)) /* [^\r\n\p{L}\p{N}]\p{L}+ */
        return run_eq(k, j + 1, e, CL_L, CL_L);
    if (ki == CL_N) { /* \p{N}{1,maxd} */
        for (size_t d = 1; d < maxd && j < e && (k[j] & CL_N); d++)
            j += u8len(s[j]);
        return j;
    }
    /* ?[^\s\p{L}\p{N}]+[\r\n]* */
    if (c == ' ' && j < e && (k[j] & 7) == 0)
        return run_crlf(s, run_eq(k, j + 1, e, 7, 0), e);
    if (ki == 0)
        return run_crlf(s, run_eq(k, i + 1, e, 7, 0), e);
    /* c is White_Space */
    j = run_eq(k, i + 1, e, 7, CL_S);
    if (at_end && j == e) /* \s++$ */
        return j;
    size_t nl = last_crlf_end(s, i, j);
    if (nl) /* \s*[\r\n]+: ends after the run's last CR/LF */
        return nl;
    return ws_backoff(s, i, j, e); /* \s+(?!\S) | \s+ */
}

/* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ from p: the end, or 0.
 * The upper run is greedy; when no lower-set character follows it, the regex backs the run off
 * to its last character that is also in the lower set (Lm, Lo, M), which then ends the match. */
static inline size_t o200k_upper_lower(const uint8_t *s, const uint8_t *k, size_t p, size_t e)
{
    /* most words start outside the upper set (a lowercase letter): no run to scan */
    size_t j = (k[p] & CL_U) ? run_any(k, p + 1, e, CL_U) : p;
    if (j < e && (k[j] & CL_W))
        return run_any(k, j + 1, e, CL_W);
    while (j > p) { /* back off to the end of the run's last lower-set character */
        size_t q = char_before(s, j);
        if (k[q] & CL_W)
            return j;
        j = q;
    }
    return 0;
}

/* A letter match ending at m, with (?i:'s|'t|'re|'ve|'m|'ll|'d)? after it. */
static inline size_t o200k_contraction(const uint8_t *s, size_t m, size_t e)
{
    if (m < e && s[m] == '\'') {
        size_t t = contraction_ci(s, m, e);
        if (t)
            return t;
    }
    return m;
}

/* o200k_base:
 * [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 * |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 * |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * Always inlined, as m_llama3. */
static inline __attribute__((always_inline)) size_t m_o200k(const uint8_t *s, const uint8_t *k, size_t i,
                                                            size_t e)
{
    uint8_t c = s[i];
    unsigned ki = k[i];
    size_t m;
    if (c == ' ' && i + 1 < e && (k[i + 1] & (CL_U | CL_W)) == CL_W) /* " word": the prefix, no upper run */
        return o200k_contraction(s, run_any(k, i + 2, e, CL_W), e);
    if (ki & CL_L) { /* a letter: no prefix; the first alternative, else [U]+[W]* (an Ll starts a
                        match of the first, so a failure leaves an upper-set run) */
        m = o200k_upper_lower(s, k, i, e);
        return o200k_contraction(s, m ? m : run_any(k, i + 1, e, CL_U), e);
    }
    size_t j = i + u8len(c);
    /* the prefix [^\r\n\p{L}\p{N}] can be taken: it is tried first, then the match without it */
    int pre = !(ki & CL_N) && c != '\r' && c != '\n' && j < e;
    m = 0;
    if (pre)
        m = o200k_upper_lower(s, k, j, e); /* first alternative, prefix taken */
    if (!m && (ki & (CL_U | CL_W)))
        m = o200k_upper_lower(s, k, i, e); /* first alternative, no prefix */
    if (!m) { /* second alternative: [U]+[W]* (the first failed, so no W follows the U run) */
        if (pre && (k[j] & CL_U))
            m = run_any(k, j, e, CL_U);
        else if (ki & CL_U)
            m = run_any(k, i, e, CL_U);
    }
    if (m)
        return o200k_contraction(s, m, e);
    if (ki & CL_N) { /* \p{N}{1,3} */
        for (int d = 1; d < 3 && j < e && (k[j] & CL_N); d++)
            j += u8len(s[j]);
        return j;
    }
    /* ?[^\s\p{L}\p{N}]+[\r\n/]* */
    size_t o = (size_t)-1;
    if (c == ' ' && j < e && !(k[j] & CL_LNS))
        o = j;
    else if (!(ki & CL_LNS))
        o = i;
    if (o != (size_t)-1) {
        size_t t = run_eq(k, o + 1, e, CL_LNS, 0);
        while (t < e && (s[t] == '\r' || s[t] == '\n' || s[t] == '/'))
            t++;
        return t;
    }
    /* White_Space: \s*[\r\n]+ | \s+(?!\S) | \s+ */
    j = run_eq(k, i + 1, e, 7, CL_S);
    size_t nl = last_crlf_end(s, i, j);
    if (nl)
        return nl;
    return ws_backoff(s, i, j, e);
}

/* ---------------------------------------------------------------------------------------- */
/* stages */

static int push_piece(Ctx *x, size_t a, size_t n);
static int flush(Ctx *x);
static int split_scalar = 0; /* RMLPREP_SPLIT_SCALAR=1 at import: the matchers' loops instead of the block
                              * splitters (split_gpt2_last, split_llama3_last); the tests compare the two */

/* Each match of the stage's matcher over [a, e), passed to the next stage, or (last stage)
 * appended to the batch of pieces. */
#define STAGE_LOOP(MATCH)                                                   \
    do {                                                                    \
        if (last && !x->collect) {                                          \
            Span *sp_ = x->span;                                            \
            size_t ns_ = x->nspan;                                          \
            while (i < e) {                                                 \
                size_t m_ = (MATCH);                                        \
                sp_[ns_].a = (uint32_t)i;                                   \
                sp_[ns_].n = (uint32_t)(m_ - i);                            \
                if (++ns_ == BATCH) {                                       \
                    x->nspan = ns_;                                         \
                    if (flush(x) < 0)                                       \
                        return -1;                                          \
                    ns_ = 0;                                                \
                }                                                           \
                i = m_;                                                     \
            }                                                               \
            x->nspan = ns_;                                                 \
        } else if (last) {                                                  \
            while (i < e) {                                                 \
                size_t m_ = (MATCH);                                        \
                if (push_piece(x, i, m_ - i) < 0)                           \
                    return -1;                                              \
                i = m_;                                                     \
            }                                                               \
        } else {                                                            \
            while (i < e) {                                                 \
                size_t m_ = (MATCH);                                        \
                if (split_stage(x, i, m_, st + 1) < 0)                      \
                    return -1;                                              \
                i = m_;                                                     \
            }                                                               \
        }                                                                   \
    } while (0)

#if defined(__SSE2__)
/* One bit per byte of 64 bytes at p: bit q set where p[q] has its top bit set after each byte is
 * shifted left by `shift` (a class flag moved to the top: 7 for bit 0, 6 for bit 1, 5 for bit 2). */
#define MASK64(EXPR)                                                                              \
    ((uint64_t)(uint16_t)_mm_movemask_epi8(EXPR(0)) | (uint64_t)(uint16_t)_mm_movemask_epi8(EXPR(1)) << 16 | \
     (uint64_t)(uint16_t)_mm_movemask_epi8(EXPR(2)) << 32 | (uint64_t)(uint16_t)_mm_movemask_epi8(EXPR(3)) << 48)
/* Emit the piece [A_, A_ + N_): to the collected pieces, or to the span batch (flushed when full);
 * reads the caller's x, collect, sp_ and ns_ (split_gpt2_last, split_windows). */
#define EMIT_PIECE(A_, N_)                                                                        \
    do {                                                                                          \
        if (collect) {                                                                            \
            if (push_piece(x, (A_), (N_)) < 0)                                                    \
                return -1;                                                                        \
        } else {                                                                                  \
            sp_[ns_].a = (uint32_t)(A_);                                                          \
            sp_[ns_].n = (uint32_t)(N_);                                                          \
            if (++ns_ == BATCH) {                                                                 \
                x->nspan = ns_;                                                                   \
                if (flush(x) < 0)                                                                 \
                    return -1;                                                                    \
                ns_ = 0;                                                                          \
            }                                                                                     \
        }                                                                                         \
    } while (0)

/* GPT-2's pattern (m_gpt2) as the last stage, over [a, e) 64 bytes at a time: where pieces start
 * is worked out for the 64 bytes at once from bit masks of the class array and the text, then
 * the pieces are read off the set bits. m_gpt2 finds each piece's end from the previous one's
 * (a chain of dependent loads, SIMD compares and a broadcast of the run's class per piece, ~44
 * instructions a piece); here the chain per piece is a bit scan.
 *
 * A piece starts at byte p (a character start; the classes L, N, S of a character are on all
 * of its bytes) where
 *  - its class (L, N, S or none) differs from byte p - 1's: every run of one class is a piece, and
 *    [^\s\p{L}\p{N}]+ is the run of "none";
 *  - except where byte p - 1 is a space (U+0020) and p is not White_Space: " ?" joins the space to
 *    the run after it (and the space starts the piece: it ends a White_Space run, below, or
 *    follows another class);
 *  - or p is the last character of a White_Space run followed by a non-White_Space character
 *    (\s+(?!\S) gives back one character; a run of one character starts there anyway). A run
 *    that reaches e is one piece ((?!\S) holds at the end);
 *  - and the contractions 's 't 'm 'd 're 've 'll, tried first at every piece start: an
 *    apostrophe that starts a piece and is followed by one ends its piece after it (the letters
 *    after it start a new one).
 * Those are m_gpt2's alternatives restated; the splitter tests and fuzz cases compare the two. */
static int split_gpt2_last(Ctx *x, size_t a, size_t e)
{
    const uint8_t *s = x->text, *k = x->cls;
    uint8_t sb[64 + 16], kb[64 + 16]; /* the last (partial) block, zero-padded */
    uint64_t cl = 0, cn = 0, cw = 0, csp = 0; /* byte b - 1's L, N, S flags, and whether it is a space */
    uint64_t fset = 0, fclr = 0;               /* piece starts a contraction sets / clears in this block */
    size_t start = a, b = a;
    int collect = x->collect;
    Span *sp_ = x->span;
    size_t ns_ = x->nspan;
    while (b < e) {
        const uint8_t *bs, *bk;
        size_t len = e - b;
        uint64_t look; /* byte b + 64 is White_Space */
        if (len > 64) {
            bs = s + b;
            bk = k + b;
            len = 64;
            look = (k[b + 64] >> 2) & 1;
        } else {
            memset(sb, 0, sizeof(sb));
            memset(kb, 0, sizeof(kb));
            memcpy(sb, s + b, len);
            memcpy(kb, k + b, len);
            bs = sb;
            bk = kb;
            look = 0;
        }
        const __m128i vsp = _mm_set1_epi8(' '), vap = _mm_set1_epi8('\'');
#define KV(q) _mm_loadu_si128((const __m128i *)(bk + 16 * (q)))
#define SV(q) _mm_loadu_si128((const __m128i *)(bs + 16 * (q)))
#define E_L(q) _mm_slli_epi16(KV(q), 7)
#define E_N(q) _mm_slli_epi16(KV(q), 6)
#define E_W(q) _mm_slli_epi16(KV(q), 5)
#define E_SP(q) _mm_cmpeq_epi8(SV(q), vsp)
#define E_AP(q) _mm_cmpeq_epi8(SV(q), vap)
#define E_HI(q) SV(q)
        uint64_t L = MASK64(E_L), N = MASK64(E_N), W = MASK64(E_W), SP = MASK64(E_SP), AP = MASK64(E_AP);
        uint64_t HI = MASK64(E_HI); /* bytes >= 0x80 */
#undef KV
#undef SV
#undef E_L
#undef E_N
#undef E_W
#undef E_SP
#undef E_AP
#undef E_HI
        uint64_t valid = len == 64 ? ~0ULL : (1ULL << len) - 1;
        uint64_t chg = (L ^ (L << 1 | cl)) | (N ^ (N << 1 | cn)) | (W ^ (W << 1 | cw));
        uint64_t join = (SP << 1 | csp) & ~W;
        uint64_t ends = W & ~(W >> 1 | look << 63); /* the last byte of each White_Space run */
        if (b + len == e)
            ends &= ~(1ULL << (len - 1)); /* a run reaching e is one piece */
        uint64_t bnd = ((chg & ~join) | ends | fset) & ~fclr & valid;
        fset = fclr = 0;
        if (b == a)
            bnd &= ~1ULL; /* a starts the first piece */
        if (ends & HI) { /* a run ending in a multi-byte character: back to its first byte */
            uint64_t m = ends & HI;
            while (m) {
                unsigned p = (unsigned)__builtin_ctzll(m);
                m &= m - 1;
                bnd &= ~(1ULL << p);
                size_t q = b + p;
                while ((s[q] & 0xC0) == 0x80)
                    q--;
                if (q >= b)
                    bnd |= 1ULL << (q - b);
                else if (q > start) { /* in the previous block, after its last piece start */
                    EMIT_PIECE(start, q - start);
                    start = q;
                }
            }
        }
        uint64_t apc = AP & (bnd | (b == a)); /* apostrophes starting a piece */
        while (apc) {
            unsigned p = (unsigned)__builtin_ctzll(apc);
            apc &= apc - 1;
            size_t P = b + p, end = 0;
            if (P + 1 < e) {
                uint8_t d = s[P + 1];
                if (d == 's' || d == 't' || d == 'm' || d == 'd')
                    end = P + 2;
                else if (P + 2 < e) {
                    uint8_t f = s[P + 2];
                    if ((d == 'r' && f == 'e') || (d == 'v' && f == 'e') || (d == 'l' && f == 'l'))
                        end = P + 3;
                }
            }
            if (!end)
                continue;
            for (size_t q = P + 1; q <= end; q++) { /* no start inside, one at its end */
                uint64_t bit = q - b < 64 ? 1ULL << (q - b) : 0, nbit = q - b >= 64 ? 1ULL << (q - b - 64) : 0;
                if (q < end) {
                    bnd &= ~bit;
                    fclr |= nbit;
                } else if (q < e) {
                    bnd |= bit;
                    fset |= nbit;
                }
            }
        }
        while (bnd) {
            size_t P = b + (size_t)__builtin_ctzll(bnd);
            bnd &= bnd - 1;
            EMIT_PIECE(start, P - start);
            start = P;
        }
        cl = L >> 63;
        cn = N >> 63;
        cw = W >> 63;
        csp = SP >> 63;
        b += len;
    }
    if (e > start)
        EMIT_PIECE(start, e - start);
    if (!collect)
        x->nspan = ns_;
    return 0;
}
/* Llama 3's (maxd 3) and Qwen2's (maxd 1) pattern (m_llama3 without cl100k's \s++$) as the last
 * stage, a window of 64 bytes at a time, as split_gpt2_last. Each window starts at a piece start
 * b, so the regex's matching from b does not depend on the text before b: the window is split as
 * if the text began there. Piece starts found in the window's first 56 bytes are final (every rule
 * below looks at most a few characters ahead within the window, or scans the text itself); the
 * next window starts at the last of them. A piece longer than that is left to m_llama3.
 *
 * A piece starts at byte p (a character start) where its class (L, N, White_Space or none:
 * "O") differs from byte p - 1's, and at every maxd-th character of a run of N (\p{N}{1,maxd}),
 * except:
 *  - an L run's start, when the character X before it is White_Space other than CR/LF, or an O
 *    character that is the only one of its run and not after a space: [^\r\n\p{L}\p{N}]?\p{L}+
 *    joins X to the run (X starts a match: the last character of a White_Space run always does,
 *    and a lone O character after an L, N or White_Space character other than a space does);
 *  - an O run's start after a space: " ?[^\s\p{L}\p{N}]+" joins the space (the last character of
 *    its White_Space run);
 *  - a White_Space run's start right after an O run when it starts with CR/LF: [\r\n]* after the
 *    O run takes those CR/LF (and the piece ends after them);
 *  - and within a White_Space run: a piece ends after its last CR/LF (\s*[\r\n]+) when
 *    White_Space other than CR/LF follows it to the run's end, and before its last character
 *    when that is not CR/LF and the run does not reach e (\s+(?!\S) gives one back);
 *  - a contraction ((?i:'s|'t|'re|'ve|'m|'ll|'d)) at an apostrophe that starts a piece is a
 *    piece (the letters after it start the next).
 * Those are m_llama3's alternatives restated; the tests compare the two.
 *
 * o200k (o2, maxd 3) differs in three places: a contraction is a suffix of a letter piece (once),
 * not a piece of its own; the O run takes [\r\n/]*, not [\r\n]*; and the letter alternatives
 * cut a letter run where a letter of the upper set alone (Lu, Lt) follows one of the lower set.
 * That last rule is the regex's only in a window without marks (in both sets, not letters) and
 * without both Lm/Lo (both sets) and Lu/Lt: such a window, or an O run after a '/' the O run
 * before took, is split by m_o200k up to its 56th byte. */
static inline __attribute__((always_inline)) int split_windows(Ctx *x, size_t a, size_t e, size_t maxd, int o2)
{
    const uint8_t *s = x->text, *k = x->cls;
    uint8_t sb[64 + 16], kb[64 + 16]; /* the last window, zero-padded */
    size_t b = a;
    int collect = x->collect;
    Span *sp_ = x->span;
    size_t ns_ = x->nspan;
#define BIT(q) (1ULL << (q))
    while (b < e) {
        const uint8_t *bs, *bk;
        size_t len = e - b;
        int last = len <= 64;
        if (!last) {
            bs = s + b;
            bk = k + b;
            len = 64;
        } else {
            memset(sb, 0, sizeof(sb));
            memset(kb, 0, sizeof(kb));
            memcpy(sb, s + b, len);
            memcpy(kb, k + b, len);
            bs = sb;
            bk = kb;
        }
        const __m128i vcr = _mm_set1_epi8('\r'), vlf = _mm_set1_epi8('\n'), vsp = _mm_set1_epi8(' '),
                      vap = _mm_set1_epi8('\''), vc0 = _mm_set1_epi8(-64);
#define KV(q) _mm_loadu_si128((const __m128i *)(bk + 16 * (q)))
#define SV(q) _mm_loadu_si128((const __m128i *)(bs + 16 * (q)))
#define E_L(q) _mm_slli_epi16(KV(q), 7)
#define E_N(q) _mm_slli_epi16(KV(q), 6)
#define E_W(q) _mm_slli_epi16(KV(q), 5)
#define E_CR(q) _mm_or_si128(_mm_cmpeq_epi8(SV(q), vcr), _mm_cmpeq_epi8(SV(q), vlf))
#define E_SP(q) _mm_cmpeq_epi8(SV(q), vsp)
#define E_AP(q) _mm_cmpeq_epi8(SV(q), vap)
#define E_CONT(q) _mm_cmplt_epi8(SV(q), vc0)
#define E_U(q) _mm_slli_epi16(KV(q), 4)
#define E_LO(q) _mm_slli_epi16(KV(q), 3)
        uint64_t L = MASK64(E_L), N = MASK64(E_N), W = MASK64(E_W), CR = MASK64(E_CR), SP = MASK64(E_SP),
                 AP = MASK64(E_AP), CONT = MASK64(E_CONT);
        uint64_t U = 0, LO = 0; /* o200k: the upper and lower sets */
        if (o2) {
            U = MASK64(E_U);
            LO = MASK64(E_LO);
        }
#undef KV
#undef SV
#undef E_L
#undef E_N
#undef E_W
#undef E_CR
#undef E_SP
#undef E_AP
#undef E_CONT
#undef E_U
#undef E_LO
        uint64_t V = len == 64 ? ~0ULL : BIT(len) - 1;
        /* o200k: a window holding a mark (in the sets, not a letter), or both a character of the
         * lower and upper sets (Lm, Lo) and one of the upper set alone (Lu, Lt), goes to m_o200k:
         * its letter alternatives backtrack between the sets ("中A中B" is "中A中", "B") */
        if (o2 && (((U | LO) & ~L & V) || ((U & LO & V) && (U & ~LO & V))))
            goto scalar;
        uint64_t O = ~(L | N | W) & V, CS = ~CONT & V;
        uint64_t L1 = L << 1, N1 = N << 1, W1 = W << 1, O1 = O << 1;
        uint64_t bnd = ((L ^ L1) | (N ^ N1) | (W ^ W1) | (O ^ O1)) & V;
        /* \p{N}{1,maxd}: a piece at every maxd-th character of an N run */
        if (maxd == 1)
            bnd |= N & CS;
        else {
            uint64_t runs = N & ~N1 & (N >> maxd); /* runs of more than maxd bytes */
            while (runs) {
                unsigned p = (unsigned)__builtin_ctzll(runs);
                runs &= runs - 1;
                size_t c = 0;
                for (unsigned q = p; q < 64 && (N >> q & 1); q++)
                    if (CS >> q & 1) {
                        if (c && c % maxd == 0)
                            bnd |= BIT(q);
                        c++;
                    }
            }
        }
        /* White_Space runs: the last character when not CR/LF and the run does not reach e */
        uint64_t WE = W & ~(W >> 1); /* last byte of each run (a run reaching bit 63 looks ended: not committed) */
        uint64_t bo = WE & ~CR;
        if (last)
            bo &= ~BIT(len - 1);
        bnd |= bo & ~CONT;
        for (uint64_t m = bo & CONT; m;) {
            unsigned p = (unsigned)__builtin_ctzll(m);
            m &= m - 1;
            while (CONT >> p & 1) /* b is a character start: p stops at 0 at the latest */
                p--;
            bnd |= BIT(p);
        }
        /* \s*[\r\n]+ ends after the run's last CR/LF when White_Space other than CR/LF follows to the run's end */
        uint64_t Y = W & ~CR;
        for (uint64_t m = Y & (CR << 1); m;) {
            unsigned q = (unsigned)__builtin_ctzll(m);
            m &= m - 1;
            uint64_t rest = ~Y >> q;
            int good;
            if (rest) {
                unsigned j = q + (unsigned)__builtin_ctzll(rest);
                good = j >= 64 || !(W >> j & 1);
            } else { /* the run goes on past the window: read on in the text */
                size_t j = b + 64;
                while (j < e && (k[j] & CL_S) && s[j] != '\r' && s[j] != '\n')
                    j++;
                good = j >= e || !(k[j] & CL_S);
            }
            if (good)
                bnd |= BIT(q);
        }
        /* [^\r\n\p{L}\p{N}]?\p{L}+: the character before an L run joins it */
        uint64_t LS = L & ~L1 & ~1ULL;
        uint64_t join = LS & W1 & ~(CR << 1);
        join |= LS & O1 & ~(CONT << 1) & ~(O << 2) & ~(SP << 2);
        for (uint64_t m = LS & O1 & (CONT << 1); m;) { /* X is an O character of 2-4 bytes */
            unsigned p = (unsigned)__builtin_ctzll(m);
            m &= m - 1;
            unsigned q = p - 1;
            while (CONT >> q & 1)
                q--;
            if (q == 0 || (!(O >> (q - 1) & 1) && !(SP >> (q - 1) & 1)))
                join |= BIT(p);
        }
        bnd &= ~join;
        bnd &= ~(O & ~O1 & (SP << 1)); /* " ?[^\s\p{L}\p{N}]+": the space joins an O run */
        /* [\r\n]* ([\r\n/]* in o200k) after an O run: the White_Space run starting there starts after
         * them (after the joins above: o200k's '/' taken so would otherwise join letters after it) */
        for (uint64_t m = W & CR & O1; m;) {
            unsigned p = (unsigned)__builtin_ctzll(m);
            m &= m - 1;
            if (!o2) {
                bnd &= ~BIT(p);
                uint64_t rest = ~CR >> p;
                if (rest)
                    bnd |= BIT(p + (unsigned)__builtin_ctzll(rest)) & V;
                continue;
            }
            size_t t = b + p;
            while (t < e && (s[t] == '\r' || s[t] == '\n' || s[t] == '/'))
                t++;
            if (s[t - 1] == '/' && t < e && !(k[t] & CL_LNS))
                goto scalar; /* an O run after a '/' so taken starts a match of its own */
            for (size_t q = b + p; q < t && q < b + 64; q++)
                bnd &= ~BIT(q - b);
            if (t < b + 64 && t < e)
                bnd |= BIT(t - b);
        }
        /* o200k: [U]*[W]+ | [U]+[W]* inside a letter run: a piece starts at an upper-set-only letter
         * after a lower-set one (in the windows left here: no marks, not both Lm/Lo and Lu/Lt) */
        if (o2)
            bnd |= U & ~LO & CS & (LO << 1);
        /* contractions, at apostrophes that start a piece (in order: one may start the next); in
         * o200k a suffix of a letter piece, once: at an apostrophe after a letter piece's end */
        size_t sfx_end = 0;
        for (uint64_t m = AP & V; m;) {
            unsigned p = (unsigned)__builtin_ctzll(m);
            m &= m - 1;
            if (!o2 && p && !(bnd >> p & 1))
                continue;
            if (o2 && (!p || !(bnd >> p & 1) || !(L >> (p - 1) & 1) || b + p == sfx_end))
                continue; /* p == 0: a start the window before kept, so no suffix there */
            size_t end = contraction_ci(s, b + p, e);
            if (!end)
                continue;
            for (size_t q = b + p + (o2 ? 0 : 1); q < end && q < b + 64; q++)
                bnd &= ~BIT(q - b);
            if (end < b + 64 && end < e)
                bnd |= BIT(end - b);
            sfx_end = end;
        }
        bnd &= ~1ULL;
        if (last) {
            size_t start = b;
            while (bnd) {
                size_t P = b + (size_t)__builtin_ctzll(bnd);
                bnd &= bnd - 1;
                EMIT_PIECE(start, P - start);
                start = P;
            }
            EMIT_PIECE(start, e - start);
            break;
        }
        bnd &= BIT(57) - 1; /* final: the starts in the first 56 bytes */
        if (!bnd) { /* a piece of more than 56 bytes */
            size_t m = o2 ? m_o200k(s, k, b, e) : m_llama3(s, k, b, e, maxd, 0);
            EMIT_PIECE(b, m - b);
            b = m;
            continue;
        }
        size_t start = b;
        while (bnd) {
            size_t P = b + (size_t)__builtin_ctzll(bnd);
            bnd &= bnd - 1;
            EMIT_PIECE(start, P - start);
            start = P;
        }
        b = start;
        continue;
    scalar: /* o200k: this window's first 56 bytes (or the rest) piece by piece */
        for (size_t lim = last ? e : b + 56; b < lim;) {
            size_t m = m_o200k(s, k, b, e);
            EMIT_PIECE(b, m - b);
            b = m;
        }
    }
#undef BIT
#undef MASK64
#undef EMIT_PIECE
    if (!collect)
        x->nspan = ns_;
    return 0;
}

static int split_llama3_last(Ctx *x, size_t a, size_t e, size_t maxd)
{
    return split_windows(x, a, e, maxd, 0);
}

static int split_o200k_last(Ctx *x, size_t a, size_t e)
{
    return split_windows(x, a, e, 3, 1);
}
#endif

/* Run stage `st` over [a, e) of x->text and pass each piece on (to the next stage or to BPE). */
static int split_stage(Ctx *x, size_t a, size_t e, int st)
{
    const Encoder *E = x->E;
    if (st == E->nstages)
        return push_piece(x, a, e - a);
    const uint8_t *s = x->text, *k = x->cls;
    int pat = E->stages[st], last = st + 1 == E->nstages;
    size_t i = a;
    switch (pat) {
    case PAT_GPT2:
#if defined(__SSE2__)
        if (last && !split_scalar)
            return split_gpt2_last(x, a, e);
#endif
        STAGE_LOOP(m_gpt2(s, k, i, e));
        return 0;
    case PAT_LLAMA3:
    case PAT_CL100K:
#if defined(__SSE2__)
        if (last && pat == PAT_LLAMA3 && !split_scalar)
            return split_llama3_last(x, a, e, 3);
#endif
        STAGE_LOOP(m_llama3(s, k, i, e, 3, pat == PAT_CL100K));
        return 0;
    case PAT_QWEN2:
#if defined(__SSE2__)
        if (last && !split_scalar)
            return split_llama3_last(x, a, e, 1);
#endif
        STAGE_LOOP(m_llama3(s, k, i, e, 1, 0));
        return 0;
    case PAT_O200K:
#if defined(__SSE2__)
        if (last && !split_scalar)
            return split_o200k_last(x, a, e);
#endif
        STAGE_LOOP(m_o200k(s, k, i, e));
        return 0;
    case PAT_DIGITS:
    case PAT_DIGITS_INDIVIDUAL: { /* \p{N}+ or \p{N}, Isolated: matches and the gaps between */
        while (i < e) {
            size_t g = run_eq(k, i, e, CL_N, 0); /* the gap before the next number */
            if (g > i && split_stage(x, i, g, st + 1) < 0)
                return -1;
            if (g == e)
                break;
            size_t m = pat == PAT_DIGITS ? run_any(k, g + 1, e, CL_N) : g + u8len(s[g]);
            if (split_stage(x, g, m, st + 1) < 0)
                return -1;
            i = m;
        }
        return 0;
    }
    }
    return 0;
}

/* SentencePiece segment -> words, as tokenizer._encode_sentencepiece splits it: before each "▁"
 * (SP_SPACE_SPLIT), before each "▁" that follows a character other than "▁" (SP_WORDS), or not at
 * all (SP_WHOLE). "▁" is E2 96 81 in UTF-8 and no other character contains that byte sequence. */
static int sp_words(Ctx *x, size_t n)
{
    const Encoder *E = x->E;
    const uint8_t *s = x->text;
    if (E->sp_split == SP_WHOLE)
        return push_piece(x, 0, n);
    size_t w = 0, i = 1;
    while (i + 2 < n) {
        const uint8_t *q = memchr(s + i, 0xE2, n - 2 - i);
        if (q == NULL)
            break;
        i = (size_t)(q - s);
        if (s[i + 1] != 0x96 || s[i + 2] != 0x81) {
            i++;
            continue;
        }
        int after_space = i >= 3 && s[i - 3] == 0xE2 && s[i - 2] == 0x96 && s[i - 1] == 0x81;
        if (!(E->sp_split == SP_WORDS && after_space)) { /* a run of "▁" stays with the word after it */
            if (push_piece(x, w, i - w) < 0)
                return -1;
            w = i;
        }
        i += 3;
    }
    return push_piece(x, w, n - w);
}
