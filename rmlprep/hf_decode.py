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
from .segment import make_normalizer
from .spec import TokenizerSpec, TokenType
from .unicode import unicode_to_bytes

__all__ = ["ChainDecoder", "run_chain", "STEP_FIELDS"]

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


class ChainDecoder:
    """The decoding tables of one spec with a ``decode_chain`` (a Hugging Face tokenizer.json).

    Attributes:
        tokens: the string tokenizers decodes each id from (None: an id without a token).
        skip: ids dropped by ``skip_special_tokens``.
    """

    __slots__ = ("chain", "tokens", "skip", "where", "_bytes", "refusal", "windowed", "_gaps", "_n_replace",
                 "_replaced")

    def __init__(self, spec: TokenizerSpec):
        self.chain = spec.decode_chain
        self.where = spec.name or "tokenizer.json"
        vocab: list[str | None] = list(spec.vocab)
        normalize = make_normalizer(spec.normalizers)
        if normalize is not None:
            for a in spec.added_token_flags:
                if a.normalized:
                    vocab[a.id] = normalize(vocab[a.id])
        types = spec.token_types
        for i, t in enumerate(types):
            if t == TokenType.UNUSED:  # an id model.vocab leaves without a token: tokenizers drops it
                vocab[i] = None
        specials = {spec.vocab[i] for i, t in enumerate(types) if t == TokenType.CONTROL}
        self.tokens = vocab
        self.skip = frozenset(i for i, t in enumerate(vocab) if t is not None and t in specials)
        self._bytes: list[bytes | None] | None = None
        self.refusal = next((s[1] for s in self.chain if s[0] == "Refuse"), None)
        self.windowed = _window_safe(self.chain)
        self._gaps = frozenset(i for i, t in enumerate(vocab) if t is None)
        # leading Replace steps work on each token alone: done once per id, on first use
        self._n_replace = next((k for k, s in enumerate(self.chain) if s[0] != "Replace"), len(self.chain))
        self._replaced: list[str | None] | None = None

    def _byte_table(self) -> list[bytes | None]:
        if self._bytes is None:
            self._bytes = [None if t is None else byte_level_bytes(t) for t in self.tokens]
        return self._bytes

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """The text tokenizers' ``decode(ids, skip_special_tokens)`` gives (ids already checked)."""
        if self.refusal is not None:
            raise UnsupportedTokenizer(self.refusal)
        drop = self.skip | self._gaps if skip_special_tokens else self._gaps
        kept = [i for i in ids if i not in drop] if drop else ids
        chain = self.chain
        if chain and chain[0] == ("ByteLevel",):
            table = self._byte_table()
            return run_chain(chain, [], self.where, [table[i] for i in kept])
        k = self._n_replace
        if k:
            if self._replaced is None:
                out = []
                for t in self.tokens:
                    if t is not None:
                        for step in chain[:k]:
                            t = t.replace(step[1], step[2])
                    out.append(t)
                self._replaced = out
            toks = self._replaced
            return run_chain(chain[k:], [toks[i] for i in kept], self.where)
        toks = self.tokens
        return run_chain(chain, [toks[i] for i in kept], self.where)

    def holds_back(self, token_id: int) -> bool:
        """A stream must not emit after ``token_id``: a ByteFallback run it may continue can
        still turn the run's text into U+FFFD."""
        t = self.tokens[token_id]
        return (t is not None and len(t) == 6 and _BYTE_TOKEN.fullmatch(t) is not None
                and any(s[0] == "ByteFallback" for s in self.chain))
