"""Read a tiktoken rank file (``<base64 token> <rank>`` per line) into a :class:`TokenizerSpec`.

tiktoken has no merge list: a piece is taken whole when it is a token, else the adjacent pair
whose concatenated bytes have the lowest rank merges first (leftmost on ties) until none is a
token. That is the spec's *scores* mode with ``score = -rank`` and ``ignore_merges=True``. The
tokens are spelled in the GPT-2 byte alphabet (:func:`rmlprep.unicode.bytes_to_unicode`) so the
byte-level encoder applies unchanged; ids are the ranks.

Special tokens are not in the file: they come from a known encoding name (``"gpt2"``,
``"r50k_base"``, ``"p50k_base"``, ``"cl100k_base"``, ``"o200k_base"``, ``"llama3"``) or from
``special_tokens=``. A known name also gives tiktoken's pattern; a ``pattern=`` given explicitly
is read as fancy-regex reads it (tiktoken's engine: a bare ``$`` is the end of the text, see
:func:`rmlprep.pretokenize.text_anchors`).
Ids between the ranks and the specials that neither uses (cl100k's 100256, for example) are
filled with ``UNUSED`` placeholders that no text encodes to and that decoding refuses
(``TokenIdError``), as tiktoken's ``decode``/``decode_bytes`` raise ``KeyError`` for them.

Source: tiktoken ``load.py`` (``load_tiktoken_bpe``), ``src/lib.rs`` (``byte_pair_merge``),
``tiktoken_ext/openai_public.py``; Meta ``llama3/tokenizer.py`` (special tokens).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from .errors import LoaderError, UnsupportedTokenizer
from .pretokenize import CL100K_PATTERN, O200K_PATTERN
from .spec import BYTE_LEVEL, TokenizerSpec, TokenType
from .unicode import bytes_to_unicode

__all__ = ["spec_from_tiktoken", "KNOWN_ENCODINGS", "read_tiktoken_ranks", "looks_like_tiktoken"]

_ENDOFTEXT = "<|endoftext|>"

# tiktoken's own patterns, verbatim (fancy-regex syntax; translated by rmlprep.pretokenize).
# cl100k_base's is *not* the Llama 3 pattern: the two split runs of whitespace before a line
# break differently (`\s++$|\s*[\r\n]` vs `\s*[\r\n]+`).
__all__ += ["CL100K_PATTERN", "O200K_PATTERN"]


def _llama3_specials() -> dict[str, int]:
    names = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>",
        "<|reserved_special_token_2|>",
        "<|reserved_special_token_3|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|reserved_special_token_4|>",
        "<|eot_id|>",
    ] + [f"<|reserved_special_token_{i}|>" for i in range(5, 256 - 5)]
    return {name: 128000 + i for i, name in enumerate(names)}


def _known() -> dict[str, dict]:
    from .pretokenize import GPT2_PATTERN, LLAMA3_PATTERN

    # r50k's pattern ('(?:[sdmt]|ll|ve|re)| ?\p{L}++|...|\s++$|\s+(?!\S)|\s) splits exactly as
    # the GPT-2 pattern (checked with `regex` on 320k texts), so the GPT-2 pattern is used.
    # sha256: of the published rank file (tiktoken_ext/openai_public.py expected_hash for the
    # OpenAI encodings; Meta's llama3 tokenizer.model as llama-models==0.3.0 ships it).
    gpt2 = {"pattern": GPT2_PATTERN, "special_tokens": {_ENDOFTEXT: 50256}, "n_ranks": 50256,
            "bos": _ENDOFTEXT, "eos": _ENDOFTEXT,
            "sha256": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"}
    return {
        "gpt2": gpt2,
        "r50k_base": gpt2,
        "p50k_base": {**gpt2, "n_ranks": 50280,
                      "sha256": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"},
        "cl100k_base": {
            "pattern": CL100K_PATTERN,
            "special_tokens": {_ENDOFTEXT: 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                               "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
            "n_ranks": 100256, "bos": None, "eos": _ENDOFTEXT,
            "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        },
        "o200k_base": {
            "pattern": O200K_PATTERN,
            "special_tokens": {_ENDOFTEXT: 199999, "<|endofprompt|>": 200018},
            "n_ranks": 199998, "bos": None, "eos": _ENDOFTEXT,
            "sha256": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        },
        "llama3": {
            "pattern": LLAMA3_PATTERN, "special_tokens": _llama3_specials(), "n_ranks": 128000,
            "bos": "<|begin_of_text|>", "eos": "<|end_of_text|>",
            "sha256": "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
        },
    }


#: name -> {"pattern", "special_tokens", "n_ranks", "bos", "eos", "sha256"} for the encodings
#: rmlprep knows (``sha256``: of the published rank file, one ``<base64> <rank>\n`` line per rank
#: in rank order).
KNOWN_ENCODINGS: Mapping[str, Mapping] = MappingProxyType(_known())

_EOT_TOKENS = ("<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>")

#: Largest rank or special id accepted: ids are uint32 in shards and int32 in the reference
#: libraries; a rank is checked by its digit count before it is turned into an int.
MAX_ID = 2**31 - 1
_MAX_RANK_DIGITS = len(str(MAX_ID))
#: Most placeholder ids allowed between the last rank and the ids given in ``special_tokens=``
#: (cl100k has 16, o200k 19): an argument cannot make rmlprep allocate a vocabulary far larger
#: than its tokens. The known encodings' ids are rmlprep's own constants and are not limited.
MAX_UNUSED_IDS = 1 << 16


def looks_like_tiktoken(path: str | os.PathLike, *, probe_lines: int = 8) -> bool:
    """True when the first lines of ``path`` are ``<base64> <int>`` (a tiktoken rank file)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    lines = [ln for ln in head.split(b"\n")[:probe_lines] if ln.strip()]
    if len(head.split(b"\n")) > 1:
        lines = lines[: max(1, len(lines) - (0 if head.endswith(b"\n") else 1))]  # last may be cut
    if not lines:
        return False
    for ln in lines:
        parts = ln.split()
        if len(parts) != 2 or not parts[1].isdigit():
            return False
        try:
            base64.b64decode(parts[0], validate=True)
        except (binascii.Error, ValueError):
            return False
    return True


def read_tiktoken_ranks(path: str | os.PathLike) -> dict[bytes, int]:
    """Parse a rank file into ``{token bytes: rank}``.

    Raises:
        LoaderError: as :func:`_read_ranks`.
    """
    return _read_ranks(Path(path))[0]


def _read_ranks(p: Path) -> tuple[dict[bytes, int], dict[int, int], str]:
    """``({token bytes: rank}, {rank: line number}, sha256 of the file's bytes)``.

    Raises:
        LoaderError: missing file, a line that is not ``<base64> <rank>``, bad base64, a
            rank above :data:`MAX_ID`, a repeated token or a repeated rank (the message gives
            the line number).
    """
    try:
        data = p.read_bytes()
    except OSError as e:
        raise LoaderError(f"{p}: cannot read the tiktoken rank file ({e.strerror or e})") from None
    ranks: dict[bytes, int] = {}
    line_of_rank: dict[int, int] = {}
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise LoaderError(f"{p}: line {lineno}: expected '<base64 token> <rank>', got {line[:80]!r}")
        try:
            tok = binascii.a2b_base64(parts[0], strict_mode=True)  # base64.b64decode(validate=True), minus its wrapper
        except (binascii.Error, ValueError):
            raise LoaderError(
                f"{p}: line {lineno}: {parts[0][:80].decode('latin-1')!r} is not valid base64"
            ) from None
        if len(parts[1]) > _MAX_RANK_DIGITS or int(parts[1]) > MAX_ID:
            raise LoaderError(
                f"{p}: line {lineno}: rank {parts[1][:24].decode('ascii')}"
                f"{'...' if len(parts[1]) > 24 else ''} ({len(parts[1])} digits) is above {MAX_ID}, "
                "the largest token id rmlprep accepts"
            )
        rank = int(parts[1])
        if tok in ranks:
            raise LoaderError(f"{p}: line {lineno}: token {tok!r} repeats (first rank {ranks[tok]})")
        if rank in line_of_rank:
            raise LoaderError(f"{p}: line {lineno}: rank {rank} repeats (first on line {line_of_rank[rank]})")
        ranks[tok] = rank
        line_of_rank[rank] = lineno
    if not ranks:
        raise LoaderError(f"{p}: the tiktoken rank file has no tokens")
    return ranks, line_of_rank, hashlib.sha256(data).hexdigest()


def _guess_name(p: Path, n_ranks: int) -> str | None:
    stem = p.name.split(".")[0]
    if stem in KNOWN_ENCODINGS:
        return stem
    by_size = [n for n, e in KNOWN_ENCODINGS.items() if e["n_ranks"] == n_ranks and n not in ("r50k_base",)]
    return by_size[0] if len(by_size) == 1 else None


def _check_known_ranks(p: Path, name: str, ranks: dict[bytes, int], digest: str) -> None:
    """Refuse a rank file that is not the published file of the known encoding ``name``.

    A rank file cut short at a line boundary parses cleanly as a smaller vocabulary, and the file
    of another encoding parses too: either would encode text to other ids than tiktoken's
    ``name``, without a word. So the number of ranks must be the encoding's, and the ranks the
    published ones: the file's sha256, or (a copy with other line endings or spacing) that of
    the same ranks written one ``<base64> <rank>\\n`` line each in rank order, equals the
    published sha256 (tiktoken ``openai_public.py`` ``expected_hash``, which tiktoken itself
    checks; Meta's llama3 ``tokenizer.model``).

    Raises:
        LoaderError: the count differs (both counts given), or the ranks are not the published ones.
    """
    known = KNOWN_ENCODINGS[name]
    want = known["n_ranks"]
    if len(ranks) != want:
        cut = "cut short" if len(ranks) < want else "longer than the published file"
        raise LoaderError(
            f"{p}: {len(ranks)} ranks, but the tiktoken encoding {name!r} has {want}: the file is {cut} or "
            "another encoding; use the complete file, or give pattern= and special_tokens= for a "
            "rank file of your own"
        )
    if digest == known["sha256"]:
        return
    canon = hashlib.sha256()
    for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        canon.update(base64.b64encode(tok) + b" %d\n" % rank)
    if canon.hexdigest() != known["sha256"]:
        raise LoaderError(
            f"{p}: {want} ranks as {name!r} has, but not its published ranks (sha256 of the ranks "
            f"{canon.hexdigest()[:16]}..., published {known['sha256'][:16]}...); use the published file, or "
            "give pattern= and special_tokens= for a rank file of your own"
        )


def _needs_name(what: str) -> LoaderError:
    """The error for a rank file whose encoding is not known: ``what``, then how to name it from
    Python. ``e.needs_name`` holds ``what`` alone, so a caller with other words for the name (the
    config's ``tokenizer.name``, the CLI's ``--name``) can say it its way
    (:func:`rmlprep.load.open_tokenizer`)."""
    e = LoaderError(f"{what}; pass name= (one of {sorted(KNOWN_ENCODINGS)}) or pattern= and special_tokens=")
    e.needs_name = what  # type: ignore[attr-defined]
    return e


def spec_from_tiktoken(
    path: str | os.PathLike,
    *,
    name: str | None = None,
    pattern: str | None = None,
    special_tokens: Mapping[str, int] | None = None,
    check_ranks: bool = True,
) -> TokenizerSpec:
    """Build a byte-level spec from a tiktoken rank file.

    Args:
        path: the rank file (``<base64 token> <rank>`` per line).
        name: a known encoding (see :data:`KNOWN_ENCODINGS`) giving the pattern and the special
            tokens; guessed from the file name (``cl100k_base.tiktoken``) or, failing that, from
            the number of ranks (50256 -> gpt2, 128000 -> llama3, ...) when not given.
        pattern: the pre-split regex in tiktoken's (fancy-regex) syntax, overriding the known one;
            its bare ``^``/``$`` are stored as ``\\A``/``\\z`` (:func:`~rmlprep.pretokenize.text_anchors`).
        special_tokens: ``{text: id}`` (overrides the known ones).
        check_ranks: with a known ``name`` (given or guessed), the file must be that encoding's
            published rank file, by its number of ranks and its sha256
            (:func:`_check_known_ranks`): a file cut short at a line boundary is refused, not
            read as a smaller vocabulary. False takes the known pattern and special tokens
            over a rank file of your own (tests, trimmed vocabularies).
    Returns:
        A spec with ``scores = -rank`` (specials and placeholders score 0 and never merge),
        ``ignore_merges=True``, bos/eos/eot from the known encoding, ``add_bos=False`` (tiktoken
        adds nothing; pass ``add_bos=True`` to :func:`rmlprep.load_tokenizer` for Llama 3).
    Raises:
        LoaderError: a malformed file (line number given); a known encoding's file with another
            number of ranks or other ranks than the published one; a rank above :data:`MAX_ID`; a
            single byte without a rank (the bytes are named); ranks with a gap that no special
            token fills; more than :data:`MAX_UNUSED_IDS` unused ids before the ids of
            ``special_tokens=``; a
            special id that collides with a rank; an unknown ``name``; no name, no pattern
            and nothing to guess from.
        UnsupportedTokenizer: the pattern uses a regex construct rmlprep cannot translate
            (backreferences, \\X, \\b, ...; named in the message).
    """
    p = Path(path)
    ranks, line_of_rank, digest = _read_ranks(p)
    # tiktoken encodes every byte of a piece that no merge covers by its single-byte rank; a file
    # without one cannot encode text holding that byte (tiktoken panics), so refuse it here.
    no_rank = [b for b in range(256) if bytes((b,)) not in ranks]
    if no_rank:
        shown = ", ".join(f"0x{b:02X}" for b in no_rank[:32])
        raise LoaderError(
            f"{p}: {len(no_rank)} of the 256 single bytes have no rank ({shown}"
            f"{', ...' if len(no_rank) > 32 else ''}); a tiktoken rank file must give every byte a "
            "rank, or text holding those bytes cannot be encoded"
        )
    known = None
    if name is None and pattern is None:
        name = _guess_name(p, len(ranks))
        if name is None:
            raise _needs_name(f"{p}: cannot tell which tiktoken encoding this is ({len(ranks)} ranks)")
    if name is not None:
        known = KNOWN_ENCODINGS.get(name)
        if known is None and pattern is None:
            raise _needs_name(f"{p}: unknown tiktoken encoding name {name!r}")
        if known is not None and check_ranks:
            _check_known_ranks(p, name, ranks, digest)
    from .pretokenize import compile_pre_split, text_anchors

    # Known patterns are stored verbatim: their only `$` is in `\s++$`, where end-of-text,
    # before-final-newline and end-of-line agree (the possessive run took every newline).
    pat = text_anchors(pattern) if pattern is not None else known["pattern"]  # type: ignore[index]
    specials = dict(special_tokens if special_tokens is not None else (known or {}).get("special_tokens", {}))

    try:
        compile_pre_split([pat])
    except UnsupportedTokenizer as e:
        raise UnsupportedTokenizer(f"{p}: tiktoken encoding {name or 'pattern'!r}: {e}") from None

    for text, sid in specials.items():
        if not isinstance(text, str) or not text:
            raise LoaderError(f"{p}: special token {text!r} is not a non-empty string")
        if not isinstance(sid, int) or isinstance(sid, bool) or not 0 <= sid <= MAX_ID:
            raise LoaderError(f"{p}: special token {text!r} has id {sid!r}; ids are ints in 0..{MAX_ID}")

    # ids: ranks, then specials; every id below the top must be a rank or a special, except
    # ids above the last rank (cl100k leaves 100256 unused), which become placeholders. Checked
    # on the sets of ids, never by walking the id range a file claims.
    by_id: dict[int, str] = {}
    b2u = bytes_to_unicode()  # as a str.translate table over the latin-1 reading of the bytes
    for tok, rank in ranks.items():
        by_id[rank] = tok.decode("latin-1").translate(b2u)
    max_rank = max(by_id)
    if len(by_id) != max_rank + 1:
        covered = set(by_id) | set(specials.values())
        first = next(i for i in range(len(covered) + 1) if i not in covered)
        if first < max_rank:
            nxt = min(r for r in by_id if r > first)
            raise LoaderError(
                f"{p}: line {line_of_rank[nxt]}: rank {nxt} leaves rank {first} unused; a rank file must "
                "number its tokens without gaps (gaps filled by special tokens are allowed)"
            )
    top = max([max_rank, *specials.values()])
    n_unused = top + 1 - len(set(by_id).union(specials.values()))
    if special_tokens is not None and n_unused > MAX_UNUSED_IDS:  # a known encoding's ids are ours
        raise LoaderError(
            f"{p}: the special token ids reach {top} but the ranks end at {max_rank}: {n_unused} unused "
            f"ids in between, more than the {MAX_UNUSED_IDS} rmlprep fills with placeholders; give the "
            "specials ids right after the ranks"
        )
    types: dict[int, int] = {i: int(TokenType.NORMAL) for i in by_id}
    for text, sid in specials.items():
        if sid in by_id:
            raise LoaderError(f"{p}: special token {text!r} id {sid} is already the rank of {by_id[sid]!r}")
        by_id[sid] = text
        types[sid] = int(TokenType.CONTROL)
    n = max(by_id) + 1
    vocab: list[str] = []
    token_types: list[int] = []
    scores: list[float] = []
    for i in range(n):
        tok = by_id.get(i)
        if tok is None:
            vocab.append(f"<unused {i}>")  # a space is not in the byte alphabet: never matched
            token_types.append(int(TokenType.UNUSED))
            scores.append(0.0)
        else:
            vocab.append(tok)
            token_types.append(types[i])
            scores.append(-float(i) if types[i] == TokenType.NORMAL else 0.0)
    index = {t: i for i, t in enumerate(vocab)}
    if len(index) != n:
        raise LoaderError(f"{p}: a special token's text equals a rank's token; give distinct special tokens")

    def id_of(text: str | None) -> int | None:
        return specials.get(text) if text is not None else None

    bos_id = id_of(known.get("bos")) if known else None
    eos_id = id_of(known.get("eos")) if known else None
    eot = [specials[t] for t in _EOT_TOKENS if t in specials]
    if eos_id is not None and vocab[eos_id] == _ENDOFTEXT:
        eot.append(eos_id)
    return TokenizerSpec(
        kind=BYTE_LEVEL,
        vocab=tuple(vocab),
        token_types=tuple(token_types),
        merges=(),
        scores=tuple(scores),
        pre_split=(pat,),
        bos_id=bos_id,
        eos_id=eos_id,
        eot_ids=tuple(sorted(set(eot))),
        ignore_merges=True,
        name=name or p.name,
    )
