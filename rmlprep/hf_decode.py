"""Hugging Face ``tokenizers`` decoding: a tokenizer.json's decoder chain, step by step.

``tokenizers`` decodes ids by looking each one up as a token string and running the file's
decoder over the list of strings (``Tokenizer::decode``). Each step maps a list of strings to a
list of strings; ``Sequence`` runs its steps in order; the strings left at the end are joined.
With no decoder (``"decoder": null``) the tokens are joined with ``" "``. The chain is a pure
function of the token strings, so rmlprep runs the same steps (a spec's ``decode_chain``, read
by :meth:`rmlprep.hf_components._Reader.decoder`):

- ``("ByteLevel",)``: every token whose characters are all in the GPT-2 byte alphabet becomes
  its bytes, any other its UTF-8; all are concatenated and read as UTF-8 with U+FFFD for each
  maximal invalid subsequence (``String::from_utf8_lossy``); one string is left.
- ``("ByteFallback",)``: a run of ``<0xXX>`` tokens (6 bytes, ``XX`` read by
  ``u8::from_str_radix``: two hex digits, either case, or ``+`` and one) becomes its text if
  the run is valid UTF-8 as a whole, else one U+FFFD per token of the run.
- ``("Fuse",)``: all strings joined into one.
- ``("Strip", content, start, stop)``: from each string, up to ``start`` leading and ``stop``
  trailing ``content`` characters (tokenizers panics when ``stop`` reaches past the string's
  start or the cuts cross; rmlprep raises :class:`~rmlprep.errors.UnsupportedTokenizer` there).
- ``("Replace", old, new)``: every non-overlapping ``old`` (a ``String`` pattern) in each string.
- ``("Metaspace", replacement, strip_first)``: ``replacement`` becomes ``" "``; in the first
  string it is removed (every one of them) unless the prepend scheme is ``never``.
- ``("WordPiece", prefix, cleanup)``: each string after the first loses ``prefix`` or gains a
  leading space; ``cleanup`` then rewrites ``" ."`` -> ``"."``, ``" n't"`` -> ``"n't"``, ...
- ``("BPEDecoder", suffix)``: ``suffix`` becomes ``" "``, in the last string ``""``.
- ``("CTC", pad_token, word_delimiter_token, cleanup)``: repeated strings collapse, the pad
  token is removed, with cleanup the WordPiece cleanup runs and the delimiter becomes ``" "``;
  empty strings are dropped.
- ``("Refuse", message)``: a step rmlprep does not reproduce exactly (a ``Regex`` Replace, a
  step tokenizers itself cannot read); decoding raises
  :class:`~rmlprep.errors.UnsupportedTokenizer` with ``message``, which names the JSON path.
  Loading and encoding are not affected.

Before the chain: an id the file gives no token (a gap in ``model.vocab``) is dropped, and with
``skip_special_tokens`` so is every id whose decoding string is the content of a ``special``
added token (``AddedVocabulary::is_special_token``). An added token matched on normalized text
is looked up by its normalized content (``simple_id_to_token``). Unlike tokenizers, an id out of
range is an error (:class:`~rmlprep.errors.TokenIdError`), not dropped.

Source: tokenizers ``tokenizer/mod.rs`` (``decode``, ``Decoder::decode``,
``step_decode_stream``), ``decoders/{bpe,byte_fallback,ctc,fuse,sequence,strip,wordpiece}.rs``,
``normalizers/replace.rs``, ``pre_tokenizers/{byte_level,metaspace}.rs``,
``tokenizer/added_vocabulary.rs``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from .errors import UnsupportedTokenizer
from .segment import SPACE, make_normalizer
from .spec import BYTE_LEVEL, SENTENCEPIECE, TokenizerSpec, TokenType
from .unicode import unicode_to_bytes

__all__ = ["ChainDecoder", "run_chain", "decode_strings", "STEP_FIELDS"]

#: each step's fields after its name (what a spec's ``decode_chain`` may hold)
STEP_FIELDS = {
    "ByteLevel": (), "ByteFallback": (), "Fuse": (), "Strip": (str, int, int), "Replace": (str, str),
    "Metaspace": (str, bool), "WordPiece": (str, bool), "BPEDecoder": (str,), "CTC": (str, str, bool),
    "Refuse": (str,),
}

#: tokenizers ``decoders/wordpiece.rs`` ``cleanup``, in its order
_CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
            (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))

# a 6-byte token "<0x" + two ASCII characters + ">" whose two characters u8::from_str_radix(_, 16)
# reads (a leading "+" is accepted); a 6-byte token with one 2-byte character there is no byte
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2}|\+[0-9A-Fa-f])>")
_BYTE_CHARS = frozenset("<0x>+123456789ABCDEFabcdef")

_CHAR_BYTES: dict[str, int] | None = None


def _char_bytes() -> dict[str, int]:
    global _CHAR_BYTES
    if _CHAR_BYTES is None:
        _CHAR_BYTES = dict(unicode_to_bytes())
    return _CHAR_BYTES


def _cleanup(s: str) -> str:
    for old, new in _CLEANUP:
        s = s.replace(old, new)
    return s


def byte_level_bytes(token: str) -> bytes:
    """A token's bytes as tokenizers' ``ByteLevel`` decoder takes them: through the byte alphabet
    when every character is in it, else its UTF-8."""
    cb = _char_bytes()
    try:
        return bytes([cb[c] for c in token])
    except KeyError:
        return token.encode("utf-8", "surrogatepass")


def _byte_fallback(tokens: list[str]) -> list[str]:
    out: list[str] = []
    run = bytearray()

    def flush() -> None:
        try:
            out.append(bytes(run).decode("utf-8"))
        except UnicodeDecodeError:
            out.extend(["\ufffd"] * len(run))
        run.clear()

    for t in tokens:
        m = _BYTE_TOKEN.fullmatch(t) if len(t) == 6 else None
        if m is not None:
            run.append(int(m.group(1), 16))
            continue
        if run:
            flush()
        out.append(t)
    if run:
        flush()
    return out


def _fallback_text(data: bytes) -> str:
    """ByteFallback then Fuse on tokens joined as bytes: each piece's UTF-8 (surrogates passed),
    each byte token ``b"\\xff"`` + its byte (0xFF never occurs in UTF-8, so a byte run starts
    at its first 0xFF and goes on pair by pair). A valid run is its text, an invalid one U+FFFD
    per token. When the join without the markers is valid UTF-8 every run is valid (a piece
    starts and ends on a character boundary), so it is the text."""
    if 0xFF not in data:
        return data.decode("utf-8", "surrogatepass")
    if b"\xff\xff" not in data:  # no byte 0xFF, which is never valid: the markers can go
        try:
            return data.replace(b"\xff", b"").decode("utf-8")
        except UnicodeDecodeError:
            pass
    out = []
    pos, end, find = 0, len(data), data.find
    while (s := find(b"\xff", pos)) >= 0:
        out.append(data[pos:s].decode("utf-8", "surrogatepass"))
        e = s + 2
        while e < end and data[e] == 0xFF:
            e += 2
        run = data[s + 1:e:2]
        try:
            out.append(run.decode("utf-8"))
        except UnicodeDecodeError:
            out.append("\ufffd" * len(run))
        pos = e
    out.append(data[pos:].decode("utf-8", "surrogatepass"))
    return "".join(out)


def _strip(token: str, content: str, start: int, stop: int, where: str) -> str:
    n = len(token)
    cut_start = 0
    for i in range(min(start, n)):
        if token[i] != content:
            break
        cut_start = i + 1
    cut_stop = n
    for i in range(stop):
        k = n - i - 1
        if k < 0:
            raise UnsupportedTokenizer(f"{where}: Strip(stop={stop}) reaches past the start of {token!r}, where "
                                       "tokenizers panics; rmlprep does not decode these ids")
        if token[k] != content:
            break
        cut_stop = k
    if cut_start > cut_stop:
        raise UnsupportedTokenizer(f"{where}: Strip(start={start}, stop={stop}) cuts {token!r} past itself, where "
                                   "tokenizers panics; rmlprep does not decode these ids")
    return token[cut_start:cut_stop]


def run_chain(chain: Sequence[tuple], tokens: list[str], where: str = "decoder",
              byte_tokens: list[bytes] | None = None) -> str:
    """Decode token strings as tokenizers' decoder ``chain`` does (see the module docstring).

    Args:
        chain: the spec's ``decode_chain``; ``()`` is the null decoder (join with ``" "``).
        tokens: the token strings, gaps and skipped special tokens already left out.
        where: the file, for error messages.
        byte_tokens: when the chain starts with ``ByteLevel``, each token's bytes
            (:func:`byte_level_bytes`), precomputed by the caller; else None.
    Returns:
        The decoded text.
    Raises:
        UnsupportedTokenizer: the chain holds a step rmlprep does not reproduce, or a ``Strip``
            step meets a token where tokenizers panics.
    """
    for step in chain:
        if step[0] == "Refuse":
            raise UnsupportedTokenizer(step[1])
    if not chain:
        return " ".join(tokens)
    steps = iter(chain)
    if byte_tokens is not None:
        next(steps)  # the leading ByteLevel, done by the caller's table
        tokens = [b"".join(byte_tokens).decode("utf-8", "replace")]
    for step in steps:
        kind = step[0]
        if kind == "ByteLevel":
            tokens = [b"".join(map(byte_level_bytes, tokens)).decode("utf-8", "replace")]
        elif kind == "ByteFallback":
            tokens = _byte_fallback(tokens)
        elif kind == "Fuse":
            tokens = ["".join(tokens)]
        elif kind == "Strip":
            _, content, start, stop = step
            tokens = [_strip(t, content, start, stop, where) for t in tokens]
        elif kind == "Replace":
            _, old, new = step
            tokens = [t.replace(old, new) for t in tokens]
        elif kind == "Metaspace":
            _, rep, strip_first = step
            tokens = [t.replace(rep, "" if i == 0 and strip_first else " ") for i, t in enumerate(tokens)]
        elif kind == "WordPiece":
            _, prefix, cleanup = step
            out = []
            for i, t in enumerate(tokens):
                if i:
                    t = t[len(prefix):] if t.startswith(prefix) else " " + t
                out.append(_cleanup(t) if cleanup else t)
            tokens = out
        elif kind == "BPEDecoder":
            last = len(tokens) - 1
            tokens = [t.replace(step[1], "" if i == last else " ") for i, t in enumerate(tokens)]
        elif kind == "CTC":
            _, pad, delim, cleanup = step
            out = []
            for t, _group in itertools.groupby(tokens):
                t = t.replace(pad, "")
                if cleanup:
                    t = _cleanup(t).replace(delim, " ")
                if t:
                    out.append(t)
            tokens = out
        else:  # a spec built by hand with a step no loader writes
            raise UnsupportedTokenizer(f"{where}: decode_chain step {step!r} is not a decoder step rmlprep knows")
    return "".join(tokens)


_JOINS = ("Fuse", "ByteLevel")


def _window_safe(chain: Sequence[tuple]) -> bool:
    """Whether decoding a window of ids (a few already decoded ones, then new ones) and taking
    what extends the decoding of those few gives the same text as decoding everything: true
    when every step before the first join (Fuse, ByteLevel) works per token or only on the
    first one, and after it only joins, a one-character Replace and a leading Strip of at most
    one character follow (the chains real files ship). tokenizers' ``DecodeStream`` assumes it."""
    joined = False
    for step in chain:
        kind = step[0]
        if kind in _JOINS:
            joined = True
        elif not joined:
            if kind not in ("Replace", "ByteFallback", "Metaspace", "WordPiece", "Strip"):
                return False
        elif not ((kind == "Replace" and len(step[1]) == 1) or (kind == "Strip" and step[2] <= 1 and step[3] == 0)):
            return False
    return True


def decode_strings(spec: TokenizerSpec) -> list[str]:
    """The string tokenizers decodes each id from: the vocab, with an added token matched on
    normalized text replaced by its normalized content when the spec normalizes
    (``AddedVocabulary::simple_id_to_token``: ``"<Think>"`` under Lowercase decodes as
    ``"<think>"``). A new list, one entry per id; also what :func:`rmlprep.tokenizer_build._token_bytes`
    takes the raw bytes of."""
    vocab = list(spec.vocab)
    normalize = make_normalizer(spec.normalizers)
    if normalize is not None:
        for a in spec.added_token_flags:
            if a.normalized:
                vocab[a.id] = normalize(vocab[a.id])
    return vocab


class ChainDecoder:
    """The decoding tables of one spec with a ``decode_chain`` (a Hugging Face tokenizer.json).

    The two chains real files ship decode from one bytes table per id, which shares the
    Tokenizer's raw token bytes (``Tokenizer._bytes``; only a gap id, which decodes to ``b""``,
    and the few ids whose decoding bytes differ are its own; a list of references, 8 bytes an
    id, and with ``skip_special_tokens`` a second one whose skipped ids are ``b""``, so no id is
    tested against a set): ``ByteLevel`` first (GPT-2,
    Llama 3, Qwen, GPT-4o: a token's bytes), and leading ``Replace`` steps, ``ByteFallback``,
    ``Fuse`` (Llama 2, Mistral, Phi-3, Gemma: the replaced token's UTF-8, or a ``<0xXX>``
    token's byte after a 0xFF marker, :func:`_fallback_text`). The ids' bytes are joined once
    and read as UTF-8; the steps after the join run on the one string left. Other chains run
    step by step on the token strings (:func:`run_chain`).

    Attributes:
        tokens: the string tokenizers decodes each id from (None: an id without a token).
        skip: ids dropped by ``skip_special_tokens``.
        windowed: whether a stream may decode a window of ids (:func:`_window_safe`).
    """

    __slots__ = ("chain", "tokens", "skip", "where", "refusal", "windowed", "_spec", "_token_bytes", "_drop",
                 "_drop_skip", "_join", "_rest", "_table", "_skip_table", "_n_replace", "_replaced", "_byte_of",
                 "_has_fallback", "_one")

    def __init__(self, spec: TokenizerSpec, token_bytes: list[bytes]):
        """``token_bytes``: the spec's raw bytes per id (:func:`rmlprep.tokenizer_build._token_bytes`,
        the Tokenizer's ``_bytes``), shared, never changed."""
        self.chain = chain = spec.decode_chain
        self.where = spec.name or "tokenizer.json"
        self._spec = spec
        self._token_bytes = token_bytes
        vocab: list[str | None] = decode_strings(spec)  # type: ignore[assignment]
        types = spec.token_types
        gaps = [i for i, t in enumerate(types) if t == TokenType.UNUSED]
        for i in gaps:  # an id model.vocab leaves without a token: tokenizers drops it
            vocab[i] = None
        specials = {spec.vocab[i] for i, t in enumerate(types) if t == TokenType.CONTROL}
        self.tokens = vocab
        self.skip = frozenset(i for i, t in enumerate(vocab) if t is not None and t in specials)
        self._drop = frozenset(gaps)
        self._drop_skip = self.skip | self._drop
        self.refusal = next((s[1] for s in chain if s[0] == "Refuse"), None)
        self.windowed = _window_safe(chain)
        # leading Replace steps work on each token alone: done once per id, on first use
        k = self._n_replace = next((k for k, s in enumerate(chain) if s[0] != "Replace"), len(chain))
        self._replaced: list[str | None] | None = None
        # the join step the bytes table does, and the steps left after it
        self._join: str | None = None
        self._rest: tuple = ()
        if chain[:1] == (("ByteLevel",),):
            self._join, self._rest = "ByteLevel", chain[1:]
        elif chain[k:k + 2] == (("ByteFallback",), ("Fuse",)):
            self._join, self._rest = "ByteFallback", chain[k + 2:]
        self._table: list[bytes] | None = None
        self._skip_table: list[bytes] | None = None
        self._byte_of: dict[int, int] | None = None
        self._has_fallback = any(s[0] == "ByteFallback" for s in chain)
        self._one: tuple[dict[int, str], dict[int, str]] = ({}, {})  # decode_one's, per skip_special_tokens

    def _tables(self, skip_special_tokens: bool) -> list[bytes]:
        """The bytes table, built on first use; with ``skip_special_tokens`` its copy in which
        the skipped ids decode to ``b""`` (a lookup, not a set test, per id)."""
        if self._table is None:
            self._table = self._build_table()
        if not skip_special_tokens:
            return self._table
        if self._skip_table is None:
            table = self._table
            if self.skip:
                table = list(table)  # never the shared Tokenizer._bytes, nor the plain table
                for i in self.skip:
                    table[i] = b""
            self._skip_table = table
        return self._skip_table

    def _build_table(self) -> list[bytes]:
        """The bytes each id decodes to before the join: ``token_bytes`` where it agrees."""
        spec, tokens, base = self._spec, self.tokens, self._token_bytes
        fixes: dict[int, bytes] = {}
        if self._join == "ByteLevel":
            if spec.kind != BYTE_LEVEL:
                base = [b"" if t is None else byte_level_bytes(t) for t in tokens]
            elif not spec.decode_added_byte_level:
                # _token_bytes gives a byte-level spec's bytes as ByteLevel takes them, but the
                # UTF-8 of control and user-defined tokens without decode_added_byte_level
                for i, t in enumerate(spec.token_types):
                    if t in (TokenType.CONTROL, TokenType.USER_DEFINED) and tokens[i] is not None:
                        fixes[i] = byte_level_bytes(tokens[i])
        else:
            fixes = {i: bytes([0xFF, b]) for i, b in self._byte_ids().items()}
            if not (spec.kind == SENTENCEPIECE and self.chain[:self._n_replace] == (("Replace", SPACE, " "),)):
                base = [b"" if t is None else t.encode("utf-8", "surrogatepass") for t in self._replaced_tokens()]
            # else _token_bytes gives a SentencePiece spec's tokens with "▁" -> " " in UTF-8
        fixes = {i: b for i, b in fixes.items() if base[i] != b}
        if base is self._token_bytes and (self._drop or fixes):
            base = list(base)  # the same bytes objects, 8 bytes an id
        for i in self._drop:
            base[i] = b""
        for i, b in fixes.items():
            base[i] = b
        return base

    def _byte_ids(self) -> dict[int, int]:
        """id -> byte, for each token ByteFallback reads as a byte after the leading Replace steps."""
        if self._byte_of is None:
            # a Replace whose pattern and content hold none of a byte token's characters, its
            # content not empty, neither makes a byte token nor unmakes one ("▁" -> " ")
            inert = all(s[2] and not _BYTE_CHARS.intersection(s[1] + s[2]) for s in self.chain[:self._n_replace])
            tokens = self.tokens if inert else self._replaced_tokens()
            self._byte_of = {i: int(t[3:5], 16) for i, t in enumerate(tokens)
                             if t is not None and len(t) == 6 and _BYTE_TOKEN.fullmatch(t)}
        return self._byte_of

    def _replaced_tokens(self) -> list[str | None]:
        """Each id's string after the chain's leading Replace steps."""
        if self._replaced is None:
            k = self._n_replace
            if not k:
                self._replaced = self.tokens
            else:
                out = []
                for t in self.tokens:
                    if t is not None:
                        for step in self.chain[:k]:
                            t = t.replace(step[1], step[2])
                    out.append(t)
                self._replaced = out
        return self._replaced

    def decode_one(self, i: int, skip_special_tokens: bool = False) -> str:
        """``decode([i], skip_special_tokens)``, kept per id: a stream decoder's window after it
        emits is usually one id, decoded again as the next window's prefix (tokenizers'
        ``step_decode_stream`` decodes it each time)."""
        memo = self._one[1 if skip_special_tokens else 0]  # any truthy value, as decode takes it (None, numpy bools)
        text = memo.get(i)
        if text is None:
            text = memo[i] = self.decode([i], skip_special_tokens)
        return text

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """The text tokenizers' ``decode(ids, skip_special_tokens)`` gives.

        ``ids`` must hold no negative id; an id past the vocab raises IndexError and a
        non-integer one TypeError (the caller checks them and names the id).
        """
        if self.refusal is not None:
            raise UnsupportedTokenizer(self.refusal)
        join = self._join
        if join is not None:
            table = self._skip_table if skip_special_tokens else self._table
            if table is None:
                table = self._tables(skip_special_tokens)
            data = b"".join([table[i] for i in ids])
            if join == "ByteLevel":
                text = data.decode("utf-8", "replace")
            else:
                text = _fallback_text(data)
            return run_chain(self._rest, [text], self.where) if self._rest else text
        drop = self._drop_skip if skip_special_tokens else self._drop
        kept = [i for i in ids if i not in drop] if drop else ids
        toks = self._replaced_tokens()
        return run_chain(self.chain[self._n_replace:], [toks[i] for i in kept], self.where)

    def holds_back(self, token_id: int) -> bool:
        """A stream must not emit after ``token_id``: a ByteFallback run it may continue can
        still turn the run's text into U+FFFD."""
        return self._has_fallback and token_id in self._byte_ids()


