"""The GGUF pre-tokenizer table: what each ``tokenizer.ggml.pre`` name of llama.cpp means, and the
split patterns rmlprep runs for it (:data:`GGUF_PRE_SPLIT`), or why it refuses the name
(:data:`GGUF_PRE_REFUSED`). Built once from the table generated from llama.cpp's own source
(:mod:`rmlprep._gguf_pre_table`, ``tools/make_gguf_pre_table.py``); where llama.cpp runs an
adapted regex and states the tokenizer.json original beside it, the original runs
(:func:`_build_table`). :mod:`rmlprep.gguf` reads a file's keys with it.

Source: llama.cpp ``src/llama-vocab.cpp`` (``llama_vocab::impl::load``, the
``llm_tokenizer_bpe`` constructor), ``src/unicode.cpp`` (the custom splits).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ._gguf_pre_table import PRE_NAMES, PRE_TYPES

__all__ = ["GGUFPre", "GGUF_PRE_SPLIT", "GGUF_PRE_REFUSED"]


@dataclass(frozen=True, slots=True)
class GGUFPre:
    """What one ``tokenizer.ggml.pre`` name means in llama.cpp, and what rmlprep runs for it.

    Attributes:
        pre_type: llama.cpp's ``LLAMA_VOCAB_PRE_TYPE_*`` without the prefix.
        patterns: split regexes, applied in order with Hugging Face ``Isolated`` behaviour
            (llama.cpp ``unicode_regex_split`` keeps matches and the gaps between them).
        ignore_merges: a piece that is a token as a whole is taken whole (Llama 3).
        add_bos: llama.cpp's default for ``add_bos_token`` when the key is absent.
        byte_encode: False: tokens are raw UTF-8 with spaces as "▁" and ``<0xXX>`` byte
            tokens (Gemma 4), not the GPT-2 byte alphabet.
        no_bos: llama.cpp sets no bos id by default (GLM).
        normalizers: applied before splitting, as the family's tokenizer.json does (Qwen: NFC);
            llama.cpp applies none (see :data:`_HF_NORMALIZERS`).
        behaviors: per pattern ``(behavior, invert)`` as ``TokenizerSpec.pre_split_behaviors``;
            empty for llama.cpp's own splits (every pattern ``Isolated``).
    """

    pre_type: str
    patterns: tuple[str, ...]
    ignore_merges: bool = False
    add_bos: bool = False
    byte_encode: bool = True
    no_bos: bool = False
    normalizers: tuple[tuple[str, ...], ...] = ()
    behaviors: tuple[tuple[str, bool], ...] = ()


# llama.cpp writes the GPT-2 regex without its last alternative "|\s+". Under Isolated splitting
# the two are the same: "\s+(?!\S)" fails only on a single whitespace character followed by a
# non-space that no other alternative takes from there, and that character is then a gap piece
# of its own, exactly the piece "\s+" would match. rmlprep uses the tokenizer.json form so the
# known-pattern fast path applies (tests/test_gguf.py checks the equivalence on real text).
_GPT2_LLAMA_CPP = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"""

# llama.cpp splits "\p{AFMoE_digits}" with custom code (unicode_regex_split_custom_afmoe): a
# run of numbers (\p{N}) is cut into its first len % 3 characters (when not 0) and then groups
# of three ("1234567" -> "1", "234", "567"). This regex makes the same cuts under Isolated
# splitting. llama.cpp also glues the text before a run onto the run's first group, but the
# patterns after it never match a number followed by more text, so their pieces are the same.
_AFMOE_DIGITS = r"\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))"

# llama.cpp's KIMI_K2 type lists only "\p{Han}+", a trigger for custom code standing for the
# pat_str of Kimi-K2's tokenization_kimi.py (quoted in unicode.cpp); rmlprep runs that pattern, as
# tiktoken does (Script=Han, "&&"). llama.cpp's stand-in Han test misses radicals, 々 〇 and
# extensions G..I; this follows tiktoken there.
_KIMI_K2 = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""", r""" ?[^\s\p{L}\p{N}]+[\r\n]*""", r"""\s*[\r\n]+""", r"""\s+(?!\S)""", r"""\s+""",
])


def _original_of_adapted() -> dict[str, str]:
    """llama.cpp regex -> the tokenizer.json original that llama.cpp states beside it."""
    out: dict[str, str] = {}
    for d in PRE_TYPES.values():
        for r, o in zip(d["regexes"], d["originals"]):
            if o is not None and o != r:
                out[r] = o
    return out


#: Names whose family's tokenizer.json normalizes text before splitting, which llama.cpp skips:
#: Qwen2, Qwen2.5 and Qwen3 ship ``"normalizer": {"type": "NFC"}``, so a decomposed accent
#: ("e" + U+0301) is one token "é" in the model's training data but two in llama.cpp. rmlprep
#: follows the tokenizer.json here (departing from llama.cpp) since the model was trained on
#: its ids. Only families whose tokenizer.json was checked are listed.
#: (Qwen3.5's, pre "qwen35", does not normalize: its llama.cpp vectors keep "e" + U+0301 as two
#: tokens.)
_HF_NORMALIZERS: dict[str, tuple[tuple[str, ...], ...]] = {"qwen2": (("nfc",),)}

#: Pre types rmlprep refuses, with the reason (named in the error). Empty: every type of the
#: vendored llama.cpp loads; a type that cannot be followed exactly goes here, not into a guess.
_REFUSED_TYPES: dict[str, str] = {}

# WHITESPACE (model and pre "whitespace", jina-embeddings-v2-base-zh): BPE over raw UTF-8 tokens
# whose tokenizer.json has the Lowercase normalizer and the Whitespace pre-tokenizer (llama.cpp
# PR 18756), which keeps the matches of \w+|[^\w\s]+ (Oniguruma's \w): Split Removed + invert.
# llama.cpp runs BPE on each \S+ run instead; the ids agree unless a merge joins a word and a
# non-word character, which a vocabulary trained behind Whitespace cannot hold. Spaces become
# tabs first (both dropped), since the raw-UTF-8 BPE path writes a space as "▁" before splitting.
_WHITESPACE = GGUFPre(pre_type="WHITESPACE", patterns=(r"\w+|[^\w\s]+",), byte_encode=False,
                      normalizers=(("replace", " ", "\t"),), behaviors=(("removed", True),))


def _build_table() -> tuple[dict[str, GGUFPre], dict[str, str]]:
    """Every name of the generated llama.cpp table -> GGUFPre, or -> the refusal reason.

    The regexes are llama.cpp's, with four rewrites: where llama.cpp gives the original
    tokenizer.json regex beside an adapted one (its "(?i:...)" rewritten as "[sS]" classes for
    its own engine, or o200k's classes emulated with lookaheads), the original runs, since it
    is what the model's Hugging Face tokenizer and so its training data used; the same adapted
    regex in another type (DBRX, GLM) maps to the same original; the GPT-2 regex and the AFMoE
    digit split are replaced by provably equal regexes (see above); Kimi-K2's trigger
    ``\\p{Han}+`` by the tiktoken pattern its custom code stands for. Tiny Aya's digit split
    ``\\d{1,3}(?=(?:\\d{3})*\\b)`` runs as written, with Oniguruma's word boundary as its
    tokenizer.json does (llama.cpp runs the AFMoE digit split for it, which also cuts a digit
    run that a letter follows, "12a" -> "12", where the regex does not).
    """
    from .pretokenize import GPT2_PATTERN

    originals = _original_of_adapted()
    equal = {_GPT2_LLAMA_CPP: GPT2_PATTERN, "\\p{AFMoE_digits}": _AFMOE_DIGITS, "\\p{Han}+": _KIMI_K2}
    table: dict[str, GGUFPre] = {}
    refused: dict[str, str] = {}
    for name, (pre_type, flags) in PRE_NAMES.items():
        if pre_type in _REFUSED_TYPES:
            refused[name] = f"pre-tokenizer type {pre_type}: {_REFUSED_TYPES[pre_type]}"
            continue
        if pre_type == "WHITESPACE":
            table[name] = _WHITESPACE
            continue
        d = PRE_TYPES[pre_type]
        patterns = []
        for r, o in zip(d["regexes"], d["originals"]):
            p = o if o is not None else originals.get(r, r)
            patterns.append(equal.get(p, p))
        table[name] = GGUFPre(
            pre_type=pre_type,
            patterns=tuple(patterns),
            ignore_merges=bool(flags.get("ignore_merges", False)),
            add_bos=bool(flags.get("add_bos", False)),
            byte_encode=bool(d["byte_encode"]),
            no_bos="special_bos_id" in flags and flags["special_bos_id"] is None,
            normalizers=_HF_NORMALIZERS.get(name, ()),
        )
    return table, refused


_TABLE, _REFUSED = _build_table()

#: ``tokenizer.ggml.pre`` name -> meaning, for every name of llama.cpp's table rmlprep loads.
#: Source: the generated :mod:`rmlprep._gguf_pre_table` (llama.cpp ``src/llama-vocab.cpp``:
#: ``llama_vocab::impl::load`` and the ``llm_tokenizer_bpe`` constructor).
GGUF_PRE_SPLIT: Mapping[str, GGUFPre] = MappingProxyType(_TABLE)
#: ``tokenizer.ggml.pre`` names of llama.cpp's table that rmlprep refuses -> the reason.
GGUF_PRE_REFUSED: Mapping[str, str] = MappingProxyType(_REFUSED)
