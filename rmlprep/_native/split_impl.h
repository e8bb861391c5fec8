/* Per-kind code of the native encoder: included by fastbpe.c three times, with CP_T set to the
 * code-unit type of a PyUnicode kind (uint8_t, uint16_t, uint32_t) and SFX(name) naming the copy.
 * Reading the str's own buffer avoids a UCS4 copy of the text (a 10 MB document stays 10 MB).
 *
 * Pre-split matchers, one per known pattern, return the end of the match that starts at i in a
 * text [0, e) (e is the end of the piece a chained stage is working on: the lookahead (?!\S) sees
 * the piece end as the text end, as re does on each piece). Each is the pattern's alternatives
 * tried in order (leftmost alternative wins, greedy runs with the one backtracking step
 * \s+(?!\S) and \s*[\r\n]+ need); the comments quote the alternative being matched.
 */

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static Py_ssize_t SFX(m_gpt2)(const CP_T *s, Py_ssize_t i, Py_ssize_t e)
{
    uint32_t c = s[i];
    if (c == '\'' && i + 1 < e) {
        uint32_t d = s[i + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd')
            return i + 2;
        if (i + 2 < e) {
            uint32_t f = s[i + 2];
            if ((d == 'r' && f == 'e') || (d == 'v' && f == 'e') || (d == 'l' && f == 'l'))
                return i + 3;
        }
    }
    int k = cls_of(c);
    Py_ssize_t j = i;
    if (c == ' ' && i + 1 < e) {
        int k2 = cls_of(s[i + 1]);
        if (k2 != RML_SPACE) { /* " ?" joins the run that follows */
            k = k2;
            j = i + 1;
        }
    }
    if (k != RML_SPACE) { /* ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ */
        j++;
        while (j < e && cls_of(s[j]) == k)
            j++;
        return j;
    }
    j = i + 1; /* \s+(?!\S) backs off one space before a non-space; else \s+ */
    while (j < e && cls_of(s[j]) == RML_SPACE)
        j++;
    if (j == e || j - i == 1)
        return j;
    return j - 1;
}

/* Llama 3 (maxd 3) and Qwen2 (maxd 1):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxd}
 * | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static Py_ssize_t SFX(m_llama3)(const CP_T *s, Py_ssize_t i, Py_ssize_t e, Py_ssize_t maxd)
{
    uint32_t c = s[i];
    if (c == '\'' && i + 1 < e) {
        uint32_t d = s[i + 1];
        if (RML_FOLD_S(d) || RML_FOLD_T(d) || RML_FOLD_M(d) || RML_FOLD_D(d))
            return i + 2;
        if (i + 2 < e) {
            uint32_t f = s[i + 2];
            if ((RML_FOLD_R(d) && RML_FOLD_E(f)) || (RML_FOLD_V(d) && RML_FOLD_E(f)) ||
                (RML_FOLD_L(d) && RML_FOLD_L(f)))
                return i + 3;
        }
    }
    int k = cls_of(c);
    Py_ssize_t j;
    if (k == RML_LETTER) { /* \p{L}+ (the optional prefix matched nothing) */
        j = i + 1;
        while (j < e && cls_of(s[j]) == RML_LETTER)
            j++;
        return j;
    }
    if (k != RML_NUMBER && c != '\r' && c != '\n' && i + 1 < e && cls_of(s[i + 1]) == RML_LETTER) {
        j = i + 2; /* [^\r\n\p{L}\p{N}]\p{L}+ */
        while (j < e && cls_of(s[j]) == RML_LETTER)
            j++;
        return j;
    }
    if (k == RML_NUMBER) { /* \p{N}{1,maxd} */
        j = i + 1;
        while (j < e && j - i < maxd && cls_of(s[j]) == RML_NUMBER)
            j++;
        return j;
    }
    j = i; /* ?[^\s\p{L}\p{N}]+[\r\n]* */
    if (c == ' ' && i + 1 < e && cls_of(s[i + 1]) == RML_OTHER)
        j = i + 1;
    if (cls_of(s[j]) == RML_OTHER) {
        j++;
        while (j < e && cls_of(s[j]) == RML_OTHER)
            j++;
        while (j < e && (s[j] == '\r' || s[j] == '\n'))
            j++;
        return j;
    }
    /* c is White_Space: the run [i, j) */
    j = i + 1;
    while (j < e && cls_of(s[j]) == RML_SPACE)
        j++;
    for (Py_ssize_t p = j - 1; p >= i; p--) /* \s*[\r\n]+: ends after the run's last CR/LF */
        if (s[p] == '\r' || s[p] == '\n')
            return p + 1;
    if (j == e || j - i == 1) /* \s+(?!\S) | \s+ */
        return j;
    return j - 1;
}

static int SFX(emit_piece)(Ctx *x, const CP_T *s, Py_ssize_t n);

/* Run stage `st` over [a, e) and pass each piece on (to the next stage or to BPE). */
static int SFX(split_stage)(Ctx *x, const CP_T *s, Py_ssize_t a, Py_ssize_t e, int st)
{
    const Encoder *E = x->E;
    if (st == E->nstages)
        return SFX(emit_piece)(x, s + a, e - a);
    int pat = E->stages[st];
    Py_ssize_t i = a, m;
    switch (pat) {
    case PAT_GPT2:
        while (i < e) {
            m = SFX(m_gpt2)(s, i, e);
            if (SFX(split_stage)(x, s, i, m, st + 1) < 0)
                return -1;
            i = m;
        }
        return 0;
    case PAT_LLAMA3:
    case PAT_QWEN2: {
        Py_ssize_t maxd = pat == PAT_LLAMA3 ? 3 : 1;
        while (i < e) {
            m = SFX(m_llama3)(s, i, e, maxd);
            if (SFX(split_stage)(x, s, i, m, st + 1) < 0)
                return -1;
            i = m;
        }
        return 0;
    }
    case PAT_DIGITS:
    case PAT_DIGITS_INDIVIDUAL: { /* \p{N}+ or \p{N}, Isolated: matches and the gaps between */
        Py_ssize_t gap = a;
        while (i < e) {
            if (cls_of(s[i]) != RML_NUMBER) {
                i++;
                continue;
            }
            if (i > gap && SFX(split_stage)(x, s, gap, i, st + 1) < 0)
                return -1;
            m = i + 1;
            if (pat == PAT_DIGITS)
                while (m < e && cls_of(s[m]) == RML_NUMBER)
                    m++;
            if (SFX(split_stage)(x, s, i, m, st + 1) < 0)
                return -1;
            i = gap = m;
        }
        if (e > gap && SFX(split_stage)(x, s, gap, e, st + 1) < 0)
            return -1;
        return 0;
    }
    }
    return 0;
}

/* UTF-8 of n code points into x->u8 (lone surrogates as 3 bytes, like "surrogatepass"). */
static Py_ssize_t SFX(to_utf8)(Ctx *x, const CP_T *s, Py_ssize_t n)
{
    if (reserve_u8(x, (size_t)n * 4) < 0)
        return -1;
    uint8_t *o = x->u8;
    for (Py_ssize_t i = 0; i < n; i++)
        o = put_utf8(o, s[i]);
    return o - x->u8;
}

/* Byte-level: one piece -> ids (whole-token lookup, cache, merge loop). */
static int SFX(emit_byte_level)(Ctx *x, const CP_T *s, Py_ssize_t n)
{
    const Encoder *E = x->E;
    if (n == 1 && s[0] < 0x80) { /* one byte: its symbol is the answer */
        int32_t t = E->byte_ids[s[0]];
        if (t < 0)
            t = E->unk_id;
        return t < 0 ? 0 : push_id(x, (uint32_t)t);
    }
    Py_ssize_t nb = SFX(to_utf8)(x, s, n);
    if (nb < 0)
        return -1;
    return encode_bytes_piece(x, x->u8, (size_t)nb);
}

/* SentencePiece: one word (code points) -> ids. */
static int SFX(emit_sp_word)(Ctx *x, const CP_T *s, Py_ssize_t n)
{
    const Encoder *E = x->E;
    Py_ssize_t nb = SFX(to_utf8)(x, s, n);
    if (nb < 0)
        return -1;
    if (x->slot != NULL && l1_get(x, x->u8, (size_t)nb))
        return 0;
    size_t start = x->out->n;
    if (E->ignore_merges) {
        int32_t w = strmap_get(&E->whole, x->u8, (size_t)nb);
        if (w >= 0) {
            if (push_id(x, (uint32_t)w) < 0)
                return -1;
            goto remember;
        }
    }
    uint64_t h = 0;
    int cacheable = x->slot != NULL && nb <= CACHE_KEY_MAX;
    if (cacheable) {
        h = hash_bytes(x->u8, (size_t)nb);
        if (cache_get(x, h, x->u8, (size_t)nb))
            goto remember;
    }
    if (reserve_syms(x, (size_t)n) < 0)
        return -1;
    uint32_t *sym = x->sym;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t t = cpmap_get(&E->cps, s[i]);
        sym[i] = t >= 0 ? (uint32_t)t : (BARRIER | (uint32_t)i);
    }
    size_t m = merge_loop(x, (size_t)n, NULL);
    for (size_t k = 0; k < m; k++) {
        uint32_t t = x->sym[k];
        if (!(t & BARRIER)) {
            if (push_id(x, t) < 0)
                return -1;
            continue;
        }
        uint32_t c = s[t & ~BARRIER];
        if (E->byte_fallback) {
            uint8_t buf[4], *end = put_utf8(buf, c);
            for (uint8_t *p = buf; p < end; p++) {
                int32_t f = E->fallback_ids[*p];
                if (f < 0)
                    f = E->unk_id;
                if (f >= 0 && push_id(x, (uint32_t)f) < 0)
                    return -1;
            }
        } else if (E->unk_id >= 0 && push_id(x, (uint32_t)E->unk_id) < 0) {
            return -1;
        }
    }
    if (cacheable) /* x->u8 still holds the key: the merge loop does not touch it */
        cache_put(x, h, x->u8, (size_t)nb, x->out->v + start, x->out->n - start);
remember:
    if (x->slot != NULL)
        l1_put(x, x->u8, (size_t)nb, x->out->v + start, x->out->n - start);
    return 0;
}

static int SFX(emit_piece)(Ctx *x, const CP_T *s, Py_ssize_t n)
{
    if (n <= 0)
        return 0;
    if (x->collect) { /* splitter test mode: (start, end) code-point offsets */
        uint32_t a = (uint32_t)(s - (const CP_T *)x->base);
        if (push_id(x, a) < 0 || push_id(x, a + (uint32_t)n) < 0)
            return -1;
        return 0;
    }
    return x->E->kind == KIND_BYTE_LEVEL ? SFX(emit_byte_level)(x, s, n) : SFX(emit_sp_word)(x, s, n);
}

/* SentencePiece segment -> words, as tokenizer._encode_sentencepiece splits it. */
static int SFX(sp_text)(Ctx *x, const CP_T *s, Py_ssize_t n)
{
    const Encoder *E = x->E;
    if (E->sp_split == SP_WHOLE)
        return SFX(emit_piece)(x, s, n);
    Py_ssize_t w = 0;
    for (Py_ssize_t i = 1; i < n; i++) {
        if (s[i] != SP_SPACE)
            continue;
        if (E->sp_split == SP_WORDS && s[i - 1] == SP_SPACE)
            continue; /* a run of "▁" stays with the word that follows */
        if (SFX(emit_piece)(x, s + w, i - w) < 0)
            return -1;
        w = i;
    }
    return SFX(emit_piece)(x, s + w, n - w);
}

static int SFX(run_text)(Ctx *x, const CP_T *s, Py_ssize_t n)
{
    if (n == 0)
        return 0;
    if (x->E->kind == KIND_BYTE_LEVEL)
        return SFX(split_stage)(x, s, 0, n, 0);
    return SFX(sp_text)(x, s, n);
}
