"""Read a Hugging Face ``tokenizer.json`` (BPE models) into a :class:`TokenizerSpec`.

The file is a ``"type"``-tagged tree: normalizer, pre_tokenizer, model, post_processor,
decoder, added_tokens. Each component is read on its own, Sequences are flattened, and every
component rmlprep cannot reproduce exactly is refused with :class:`UnsupportedTokenizer` naming
its JSON path (``model.type = 'Unigram' is not supported; rmlprep supports BPE``) instead of
being ignored.

Two families are supported, told apart by their *space style*:

- byte-level BPE (GPT-2, Llama 3, Qwen2/3, SmolLM, DeepSeek, GPT-4o, gpt-oss): a ``ByteLevel``
  pre-tokenizer, optionally after ``Split`` regexes and ``Digits``;
- SentencePiece-style BPE (Llama 2, Mistral, Gemma 1-3, Phi-3): spaces become ``"▁"``, either by
  a ``Replace(" ", "▁")`` normalizer (optionally after ``Prepend("▁")``, the "legacy" form; then
  ``Split``/``Digits`` may follow) or by a ``Metaspace`` pre-tokenizer.

Exactly one space style must be present.

``Split`` takes every behaviour (``Removed``, ``Isolated``, ``MergedWithPrevious``,
``MergedWithNext``, ``Contiguous``) and ``invert`` (:mod:`rmlprep.split`). Two combinations are
rewritten to what the fast (and native) path runs, each proved by a test: a known tiling pattern
whose behaviour cannot differ from ``Isolated`` (GPT-4o: o200k with ``Removed`` + ``invert``,
:func:`rmlprep.pretokenize.isolated_equivalent`), and a ``String`` split on ``" "`` after
``Replace(" ", "▁")``, which never matches (Gemma 2/3) and is dropped.

Added tokens: ``special: true`` ones are control tokens, the others user-defined and matched even
with ``parse_special=False`` (tokenizers' ``encode_special_tokens``); ``normalized: true`` ones are
matched by their normalized content on the normalized text (a second pass), and decode from it;
``lstrip``/``rstrip`` take White_Space; ``single_word`` is refused. In a byte-level file every
token decodes through the byte alphabet (``"<Ġx>"`` -> ``"< x>"``). An id that ``model.vocab``
leaves without a token (GPT-4o has 19) becomes an unreachable UNUSED placeholder; tokenizers
decodes it to nothing, rmlprep to the placeholder's text.

Source: tokenizers ``tokenizer/serialization.rs``, ``normalizers/*.rs``,
``pre_tokenizers/{byte_level,metaspace,split,digits}.rs``, ``models/bpe/{model,serialization}.rs``,
``tokenizer/added_vocabulary.rs``, ``processors/template.rs``, ``decoders/*.rs``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import LoaderError, UnsupportedTokenizer
from .pretokenize import (
    BEHAVIOR_OF_JSON,
    DIGITS_INDIVIDUAL_PATTERN,
    DIGITS_PATTERN,
    GPT2_PATTERN,
    ISOLATED,
    isolated_equivalent,
)
from .segment import make_normalizer
from .spec import BYTE_LEVEL, SENTENCEPIECE, AddedTokenFlags, TokenizerSpec, TokenType

__all__ = ["spec_from_tokenizer_json", "read_tokenizer_config", "END_OF_TURN_TOKENS"]

_SPACE = "\u2581"
_BYTE_TOKEN = re.compile(r"<0x[0-9A-F]{2}>")

#: Tokens that end a chat turn, wherever a vocabulary has them. ``<|endoftext|>`` only counts
#: when it is the model's eos (base models), since chat models use it as padding.
END_OF_TURN_TOKENS = ("<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>")

# Sequence normalizers/pre-tokenizers/decoders nest a few levels in real files; a deeper tree is
# refused before it can exhaust the stack.
_MAX_SEQUENCE_DEPTH = 32

# escaping a literal for the pre-split pattern language (Oniguruma / regex syntax)
_REGEX_META = set("\\.^$|?*+()[]{}")


def _escape(s: str) -> str:
    return "".join("\\" + c if c in _REGEX_META else c for c in s)


class _Reader:
    """Walks one tokenizer.json tree; every error names the file and the JSON path."""

    def __init__(self, data: Mapping[str, Any], where: str):
        self.data = data
        self.where = where

    # -- errors ----------------------------------------------------------------------------
    def unsupported(self, jpath: str, what: str, fix: str = "") -> UnsupportedTokenizer:
        return UnsupportedTokenizer(f"{self.where}: {jpath} {what}{'; ' + fix if fix else ''}")

    def bad(self, jpath: str, what: str) -> LoaderError:
        return LoaderError(f"{self.where}: {jpath} {what}")

    def obj(self, node: Any, jpath: str) -> Mapping[str, Any]:
        if not isinstance(node, Mapping):
            raise self.bad(jpath, f"is {type(node).__name__}, expected a JSON object")
        return node

    def typ(self, node: Any, jpath: str) -> str:
        t = self.obj(node, jpath).get("type")
        if not isinstance(t, str):
            raise self.bad(f"{jpath}.type", "is missing or not a string")
        return t

    def flatten(self, node: Any, jpath: str, key: str, depth: int = 0) -> list[tuple[Any, str]]:
        """Expand nested ``Sequence`` components into (component, json path) pairs.

        Raises:
            LoaderError: Sequences nested deeper than ``_MAX_SEQUENCE_DEPTH``, or a
                Sequence whose list is not a JSON array.
        """
        if node is None:
            return []
        if isinstance(node, Mapping) and node.get("type") == "Sequence":
            if depth >= _MAX_SEQUENCE_DEPTH:
                raise self.bad(jpath, f"nests Sequence components more than {_MAX_SEQUENCE_DEPTH} deep")
            children = node.get(key) or []
            if not isinstance(children, list):
                raise self.bad(f"{jpath}.{key}", f"is {type(children).__name__}, expected a JSON array")
            out: list[tuple[Any, str]] = []
            for i, child in enumerate(children):
                out.extend(self.flatten(child, f"{jpath}.{key}[{i}]", key, depth + 1))
            return out
        return [(node, jpath)]

    def string_pattern(self, node: Mapping[str, Any], jpath: str) -> tuple[str, str]:
        """(kind, value) of a ``{"String": ...}`` or ``{"Regex": ...}`` pattern."""
        pat = self.obj(node.get("pattern"), f"{jpath}.pattern")
        if len(pat) != 1 or next(iter(pat)) not in ("String", "Regex"):
            raise self.bad(f"{jpath}.pattern", f"= {dict(pat)!r} is neither {{'String': ...}} nor {{'Regex': ...}}")
        kind, value = next(iter(pat.items()))
        if not isinstance(value, str):
            raise self.bad(f"{jpath}.pattern.{kind}", "is not a string")
        return kind, value

    # -- normalizer ------------------------------------------------------------------------
    def normalizer(self) -> dict[str, Any]:
        """Returns {"steps": [...], "prepend": bool, "replace_space": bool}."""
        steps: list[tuple[str, ...]] = []
        prepend = False
        replace_space = False
        for node, jp in self.flatten(self.data.get("normalizer"), "normalizer", "normalizers"):
            t = self.typ(node, jp)
            if t in ("NFC", "NFKC", "NFD", "NFKD", "Lowercase"):
                if replace_space or prepend:
                    raise self.unsupported(f"{jp}.type", f"= {t!r} after the space normalizers is not supported")
                steps.append((t.lower(),))
            elif t == "Prepend":
                if node.get("prepend") != _SPACE:
                    raise self.unsupported(f"{jp}.prepend", f"= {node.get('prepend')!r} is not supported; "
                                           f"rmlprep supports Prepend({_SPACE!r}) only")
                if prepend or replace_space:
                    raise self.unsupported(jp, "Prepend must come once, before Replace(' ', '\u2581')")
                prepend = True
            elif t == "Replace":
                kind, old = self.string_pattern(node, jp)
                new = node.get("content")
                if kind != "String":
                    raise self.unsupported(f"{jp}.pattern", "Regex replace is not supported; rmlprep supports "
                                           "String patterns")
                if not isinstance(new, str):
                    raise self.bad(f"{jp}.content", "is not a string")
                if old == " " and new == _SPACE:
                    replace_space = True
                elif not old:
                    raise self.unsupported(f"{jp}.pattern", "an empty Replace pattern is not supported")
                elif any(c in (" ", _SPACE) for c in old + new):
                    raise self.unsupported(jp, f"Replace({old!r}, {new!r}) touching spaces is not supported")
                else:
                    if replace_space or prepend:
                        raise self.unsupported(jp, "Replace after the space normalizers is not supported")
                    steps.append(("replace", old, new))
            else:
                raise self.unsupported(f"{jp}.type", f"= {t!r} is not supported; rmlprep supports NFC, NFKC, "
                                       "NFD, NFKD, Lowercase, Replace, Prepend and Sequence normalizers")
        if prepend and not replace_space:
            raise self.unsupported("normalizer", "Prepend('\u2581') without Replace(' ', '\u2581') is not supported")
        return {"steps": steps, "prepend": prepend, "replace_space": replace_space}

    # -- pre-tokenizer ---------------------------------------------------------------------
    def pre_tokenizer(self, norm: Mapping[str, Any]) -> dict[str, Any]:
        """Returns {"patterns", "behaviors", "byte_level", "metaspace"} (``norm``: :meth:`normalizer`)."""
        patterns: list[str] = []
        behaviors: list[tuple[str, bool]] = []
        byte_level: dict[str, Any] | None = None
        metaspace: dict[str, Any] | None = None
        comps = self.flatten(self.data.get("pre_tokenizer"), "pre_tokenizer", "pretokenizers")
        for k, (node, jp) in enumerate(comps):
            t = self.typ(node, jp)
            if byte_level is not None or metaspace is not None:
                raise self.unsupported(f"{jp}.type", f"= {t!r} after a {'ByteLevel' if byte_level else 'Metaspace'}"
                                       " pre-tokenizer is not supported; it must come last")
            if t == "Split":
                kind, pat = self.string_pattern(node, jp)
                beh = BEHAVIOR_OF_JSON.get(node.get("behavior"))
                if beh is None:
                    raise self.bad(f"{jp}.behavior", f"= {node.get('behavior')!r} is not one of "
                                   f"{sorted(BEHAVIOR_OF_JSON)}")
                invert = node.get("invert", False)
                if not isinstance(invert, bool):
                    raise self.bad(f"{jp}.invert", f"= {invert!r} is not true or false")
                if not pat:
                    raise self.unsupported(f"{jp}.pattern", "an empty Split pattern is not supported")
                if kind == "String" and norm["replace_space"] and " " in pat:
                    # Replace(' ', '▁') left no ' ' in the text, so this Split never matches: the
                    # segment stays one piece (Gemma 2/3), unless Removed+invert drops it whole
                    if beh == "removed" and invert:
                        raise self.unsupported(jp, f"Split({pat!r}, Removed, invert) after Replace(' ', "
                                               "'\u2581') removes all text; not supported")
                    continue
                regex = pat if kind == "Regex" else _escape(pat)
                if isolated_equivalent(regex, beh, invert):
                    beh, invert = ISOLATED  # e.g. GPT-4o's Removed+invert over o200k: same pieces
                patterns.append(regex)
                behaviors.append((beh, invert))
            elif t == "Digits":
                patterns.append(DIGITS_INDIVIDUAL_PATTERN if node.get("individual_digits") else DIGITS_PATTERN)
                behaviors.append(ISOLATED)
            elif t == "ByteLevel":
                if node.get("add_prefix_space") and k > 0:
                    raise self.unsupported(f"{jp}.add_prefix_space", "= true after another pre-tokenizer (a space "
                                           "before every piece) is not supported")
                if node.get("use_regex", True):
                    patterns.append(GPT2_PATTERN)
                    behaviors.append(ISOLATED)
                byte_level = {"add_prefix_space": bool(node.get("add_prefix_space", False)), "path": jp}
            elif t == "Metaspace":
                if patterns:
                    raise self.unsupported(jp, "Metaspace after Split/Digits is not supported")
                rep = node.get("replacement", _SPACE)
                if rep != _SPACE:
                    raise self.unsupported(f"{jp}.replacement", f"= {rep!r} is not supported; rmlprep supports "
                                           f"{_SPACE!r}")
                scheme = node.get("prepend_scheme")
                if scheme is None:  # files from tokenizers < 0.14
                    scheme = "always" if node.get("add_prefix_space", True) else "never"
                if scheme not in ("first", "always", "never"):
                    raise self.unsupported(f"{jp}.prepend_scheme", f"= {scheme!r} is not supported")
                metaspace = {"scheme": scheme, "split": bool(node.get("split", True)), "path": jp}
            else:
                raise self.unsupported(f"{jp}.type", f"= {t!r} is not supported; rmlprep supports ByteLevel, "
                                       "Metaspace, Split, Digits and Sequence pre-tokenizers")
        if metaspace is None and byte_level is None and patterns and not norm["replace_space"]:
            raise self.unsupported("pre_tokenizer", "Split/Digits without a ByteLevel pre-tokenizer or a "
                                   "Replace(' ', '\u2581') normalizer are not supported")
        if all(b == ISOLATED for b in behaviors):
            behaviors = []
        return {"patterns": patterns, "behaviors": behaviors, "byte_level": byte_level, "metaspace": metaspace}

    # -- model -----------------------------------------------------------------------------
    def model(self) -> dict[str, Any]:
        m = self.obj(self.data.get("model"), "model")
        t = m.get("type", "BPE" if "merges" in m else None)
        if t != "BPE":
            raise self.unsupported("model.type", f"= {t!r} is not supported; rmlprep supports BPE")
        for key in ("continuing_subword_prefix", "end_of_word_suffix"):
            if m.get(key):
                raise self.unsupported(f"model.{key}", f"= {m[key]!r} is not supported; rmlprep supports BPE "
                                       "without subword prefixes or suffixes")
        if m.get("dropout") not in (None, 0, 0.0, 1.0):
            raise self.unsupported("model.dropout", f"= {m['dropout']!r} is not supported (BPE dropout is random)")
        vocab = self.obj(m.get("vocab"), "model.vocab")
        n = len(vocab)
        top = n + _MAX_ID_GAPS  # ids may leave a few gaps (GPT-4o: 19), never absurd ones
        for tok, i in vocab.items():
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < top:
                raise self.bad(f"model.vocab[{tok!r}]", f"= {i!r} is not an id in range(0, {top}) (the vocab has "
                               f"{n} tokens; at most {_MAX_ID_GAPS} ids may be left unused)")
        size = max(vocab.values(), default=-1) + 1
        tokens: list[str | None] = [None] * size
        for tok, i in vocab.items():
            if tokens[i] is not None:
                raise self.bad(f"model.vocab[{tok!r}]", f"= {i} is also the id of {tokens[i]!r}")
            tokens[i] = tok
        raw_merges = m.get("merges", [])
        if not isinstance(raw_merges, list):
            raise self.bad("model.merges", "is not a list")
        merges: list[tuple[str, str]] = []
        for r, mg in enumerate(raw_merges):
            if isinstance(mg, str):
                parts = mg.split(" ")
            elif isinstance(mg, list):
                parts = mg
            else:
                parts = []
            if len(parts) != 2 or not all(isinstance(p, str) for p in parts):
                raise self.bad(f"model.merges[{r}]", f"= {mg!r} is not 'left right' or [left, right]")
            merges.append((parts[0], parts[1]))
        unk = m.get("unk_token")
        if unk is not None and not isinstance(unk, str):
            raise self.bad("model.unk_token", f"is {type(unk).__name__}, expected a string or null")
        return {
            "tokens": tokens,
            "entries": n,
            "merges": merges,
            "unk_token": unk,
            "byte_fallback": bool(m.get("byte_fallback", False)),
            "fuse_unk": bool(m.get("fuse_unk", False)),
            "ignore_merges": bool(m.get("ignore_merges", False)),
        }

    # -- added tokens ----------------------------------------------------------------------
    def added_tokens(self, tokens: list[str | None], entries: int) -> list[tuple[int, dict[str, Any], str]]:
        """Assign ids as tokenizers' ``AddedVocabulary::add_tokens`` does; fills/extends ``tokens``.

        A token already in the model vocab (or added before) keeps that id; a new one gets the
        next id from the model's vocab size (its number of ``entries``, which is the top id + 1
        unless the ids leave gaps), filling a gap or extending the list. The file's ``id`` field
        is not used.
        """
        raw = self.data.get("added_tokens") or []
        if not isinstance(raw, list):
            raise self.bad("added_tokens", "is not a list")
        index = {t: i for i, t in enumerate(tokens) if t is not None}
        out: list[tuple[int, dict[str, Any], str]] = []
        next_id = entries
        for k, a in enumerate(raw):
            jp = f"added_tokens[{k}]"
            a = self.obj(a, jp)
            content = a.get("content")
            if not isinstance(content, str) or not content:
                raise self.bad(f"{jp}.content", "is missing or empty")
            tid = index.get(content)
            if tid is None:
                tid, next_id = next_id, next_id + 1
                if tid < len(tokens) and tokens[tid] is not None:
                    raise self.unsupported(jp, f"{content!r} would get id {tid}, which model.vocab gives "
                                           f"{tokens[tid]!r} (the model's ids leave gaps); not supported")
                tokens.extend([None] * (tid + 1 - len(tokens)))
                tokens[tid] = content
                index[content] = tid
            out.append((tid, a, jp))
        return out

    # -- post-processor --------------------------------------------------------------------
    def post_processor(self, index: Mapping[str, int]) -> tuple[int | None, int | None]:
        """(id added before, id added after) a single sequence by add_special_tokens=True."""
        before: int | None = None
        after: int | None = None
        for node, jp in self.flatten(self.data.get("post_processor"), "post_processor", "processors"):
            t = self.typ(node, jp)
            if t == "ByteLevel":
                continue
            if t != "TemplateProcessing":
                raise self.unsupported(f"{jp}.type", f"= {t!r} is not supported; rmlprep supports "
                                       "TemplateProcessing, ByteLevel and Sequence post-processors")
            single = node.get("single")
            if not isinstance(single, list):
                raise self.bad(f"{jp}.single", "is not a list")
            specials = self.obj(node.get("special_tokens") or {}, f"{jp}.special_tokens")
            seen_a = False
            pre: list[int] = []
            post: list[int] = []
            for i, piece in enumerate(single):
                piece = self.obj(piece, f"{jp}.single[{i}]")
                if "Sequence" in piece:
                    seq = self.obj(piece["Sequence"], f"{jp}.single[{i}].Sequence")
                    if seen_a or seq.get("id") != "A":
                        raise self.unsupported(f"{jp}.single[{i}]", "is not the one sequence $A")
                    seen_a = True
                elif "SpecialToken" in piece:
                    name = self.obj(piece["SpecialToken"], f"{jp}.single[{i}].SpecialToken").get("id")
                    if not isinstance(name, str):
                        raise self.bad(f"{jp}.single[{i}].SpecialToken.id", "is missing or not a string")
                    st = specials.get(name)
                    ids = st.get("ids") if isinstance(st, Mapping) else None
                    if not isinstance(ids, list) or not ids:
                        tid = index.get(name)
                        if tid is None:
                            raise self.bad(f"{jp}.special_tokens", f"has no ids for {name!r}")
                        ids = [tid]
                    for k, tid in enumerate(ids):
                        if not isinstance(tid, int) or isinstance(tid, bool) or not 0 <= tid < len(index):
                            raise self.bad(f"{jp}.special_tokens[{name!r}].ids[{k}]",
                                           f"= {tid!r} is not a token id in range(0, {len(index)})")
                    (post if seen_a else pre).extend(ids)
                else:
                    raise self.bad(f"{jp}.single[{i}]", f"= {dict(piece)!r} is neither Sequence nor SpecialToken")
            if not seen_a:
                raise self.unsupported(f"{jp}.single", "has no $A sequence")
            if len(pre) > 1 or len(post) > 1:
                raise self.unsupported(f"{jp}.single", f"adds {pre} before and {post} after the text; rmlprep "
                                       "supports at most one token on each side")
            if pre:
                before = pre[0]
            if post:
                after = post[0]
        return before, after

    # -- decoder ---------------------------------------------------------------------------
    def decoder(self, sentencepiece: bool) -> str:
        """The spec's decode_strip_prefix for the decoder chain."""
        strip = "none"
        for node, jp in self.flatten(self.data.get("decoder"), "decoder", "decoders"):
            t = self.typ(node, jp)
            if t in ("ByteLevel", "ByteFallback", "Fuse"):
                continue
            if t == "Replace":
                kind, old = self.string_pattern(node, jp)
                if not (kind == "String" and old == _SPACE and node.get("content") == " " and sentencepiece):
                    raise self.unsupported(jp, f"Replace({old!r}, {node.get('content')!r}) is not supported; "
                                           "rmlprep supports Replace('\u2581', ' ') in SentencePiece-style files")
            elif t == "Strip":
                if node.get("content") != " " or node.get("start") != 1 or node.get("stop", 0) != 0:
                    raise self.unsupported(jp, f"Strip(content={node.get('content')!r}, start={node.get('start')!r},"
                                           f" stop={node.get('stop')!r}) is not supported; rmlprep supports "
                                           "Strip(' ', 1, 0)")
                strip = "text"
            elif t == "Metaspace":
                if not sentencepiece:
                    raise self.unsupported(jp, "a Metaspace decoder in a byte-level file is not supported")
                scheme = node.get("prepend_scheme")
                if scheme is None:
                    scheme = "always" if node.get("add_prefix_space", True) else "never"
                if scheme != "never":
                    strip = "first_token"
            else:
                raise self.unsupported(f"{jp}.type", f"= {t!r} is not supported; rmlprep supports ByteLevel, "
                                       "Metaspace, Replace, ByteFallback, Fuse, Strip and Sequence decoders")
        return strip


#: At most this many ids below the top id may have no token in model.vocab.
_MAX_ID_GAPS = 65536


def _gap_token(i: int, index: Mapping[str, int]) -> str:
    """A placeholder for an id without a token: contains a space, so no byte-level or
    SentencePiece-style piece ever equals it, and unique."""
    tok = f"<unused id {i}>"
    while tok in index:
        tok = f"<{tok}>"
    return tok


def _token_content(value: Any) -> str | None:
    """tokenizer_config.json spells special tokens as a string or {"content": ...}."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def read_tokenizer_config(path: str | os.PathLike) -> dict[str, Any] | None:
    """Read ``tokenizer_config.json`` (None when the file does not exist).

    Raises:
        LoaderError: the file is not valid JSON or not an object.
    """
    p = Path(path)
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # ValueError: JSON errors, huge ints
        raise LoaderError(f"{p}: not valid JSON ({_json_error(e)})") from None
    except OSError as e:
        raise LoaderError(f"{p}: cannot read ({e.strerror or e})") from None
    if not isinstance(data, dict):
        raise LoaderError(f"{p}: expected a JSON object, got {type(data).__name__}")
    return data


def _json_error(e: Exception) -> str:
    if isinstance(e, RecursionError):
        return "arrays or objects nested too deeply for Python's JSON parser"
    return str(e)


def _load_json(path_or_dict: str | os.PathLike | Mapping[str, Any]) -> tuple[Mapping[str, Any], str, str]:
    if isinstance(path_or_dict, Mapping):
        return path_or_dict, "tokenizer.json", ""
    p = Path(path_or_dict)
    if not p.is_file():
        raise LoaderError(f"{p}: no such file; give the path of a tokenizer.json")
    try:
        with open(p, "rb") as f:
            data = json.loads(f.read())
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # ValueError: JSON errors, huge ints
        raise LoaderError(f"{p}: not valid JSON ({_json_error(e)}); is this a tokenizer.json?") from None
    except OSError as e:
        raise LoaderError(f"{p}: cannot read ({e.strerror or e})") from None
    if not isinstance(data, dict):
        raise LoaderError(f"{p}: expected a JSON object at the top level, got {type(data).__name__}")
    return data, str(p), p.parent.name


def spec_from_tokenizer_json(
    path_or_dict: str | os.PathLike | Mapping[str, Any], *, config: Mapping[str, Any] | None = None
) -> tuple[TokenizerSpec, str | None]:
    """Build a spec from a Hugging Face ``tokenizer.json`` (BPE models only).

    Args:
        path_or_dict: the file, or its parsed JSON.
        config: the parsed ``tokenizer_config.json`` beside it, if any: ``bos_token``,
            ``eos_token``, ``pad_token``, ``add_bos_token``, ``add_eos_token`` and
            ``chat_template`` are read from it. Without it (or without those keys) bos/eos and
            add_bos/add_eos come from the post-processor.
    Returns:
        ``(spec, chat_template)``; the template is None when the config has none.
    Raises:
        LoaderError: the file is not a valid tokenizer.json (the message starts with the path
            and names the JSON path).
        UnsupportedTokenizer: a component rmlprep does not implement (Unigram/WordPiece models,
            BERT normalizers, subword prefixes, both or neither space style, ...).
    """
    data, where, default_name = _load_json(path_or_dict)
    r = _Reader(data, where)
    norm = r.normalizer()
    pre = r.pre_tokenizer(norm)
    model = r.model()

    styles = []
    if pre["byte_level"] is not None:
        styles.append(f"ByteLevel pre-tokenizer ({pre['byte_level']['path']})")
    if pre["metaspace"] is not None:
        styles.append(f"Metaspace pre-tokenizer ({pre['metaspace']['path']})")
    if norm["replace_space"]:
        styles.append("Replace(' ', '\u2581') normalizer")
    if len(styles) != 1:
        raise r.unsupported(
            "normalizer/pre_tokenizer",
            f"has {'both ' + ' and '.join(styles) if styles else 'no space handling'}; rmlprep needs exactly one "
            "space style: a ByteLevel pre-tokenizer, a Metaspace pre-tokenizer, or Replace(' ', '\u2581')",
        )

    kw: dict[str, Any] = {}
    if pre["byte_level"] is not None:
        kind = BYTE_LEVEL
        kw["add_prefix_space"] = pre["byte_level"]["add_prefix_space"]
        kw["prefix_scheme"] = "always"  # ByteLevel prepends to every segment between added tokens
        kw["prefix_if_missing"] = True
        if model["byte_fallback"]:
            raise r.unsupported("model.byte_fallback", "= true with a ByteLevel pre-tokenizer is not supported")
    else:
        kind = SENTENCEPIECE
        if pre["metaspace"] is not None:
            ms = pre["metaspace"]
            kw["add_prefix_space"] = ms["scheme"] != "never"
            kw["prefix_scheme"] = "first" if ms["scheme"] == "first" else "always"
            kw["prefix_if_missing"] = True
            kw["split_on_space"] = ms["split"]
        else:
            # legacy form: Prepend("▁") normalizes every non-empty segment between added tokens
            kw["add_prefix_space"] = norm["prepend"]
            kw["prefix_scheme"] = "always"
            kw["prefix_if_missing"] = False

    tokens: list[str | None] = model["tokens"]  # type: ignore[assignment]
    model_size = len(tokens)
    added = r.added_tokens(tokens, model["entries"])
    index = {t: i for i, t in enumerate(tokens) if t is not None}

    types = [int(TokenType.NORMAL)] * len(tokens)
    for i, t in enumerate(tokens):
        if t is None:  # an id no token has (tokenizers decodes it to nothing): a placeholder
            tokens[i] = _gap_token(i, index)
            types[i] = int(TokenType.UNUSED)
    if kind == SENTENCEPIECE and model["byte_fallback"]:
        for i in range(model_size):
            if _BYTE_TOKEN.fullmatch(tokens[i]):
                types[i] = int(TokenType.BYTE)
    unk_id = None
    if model["unk_token"] is not None:
        unk_id = index.get(model["unk_token"])
        if unk_id is None:
            raise r.bad("model.unk_token", f"= {model['unk_token']!r} is not in the vocab")
        types[unk_id] = int(TokenType.UNKNOWN)

    flags: list[AddedTokenFlags] = []
    normalize_steps = norm["steps"]
    normalize = make_normalizer(normalize_steps)
    for tid, a, jp in added:
        content = tokens[tid]
        normalized = bool(a.get("normalized", not a.get("special", False)))
        if a.get("single_word", False):
            raise r.unsupported(f"{jp}.single_word", f"= true for {content!r} is not supported (no real "
                                "tokenizer.json uses it; rmlprep does not implement it)")
        if normalized:
            if norm["prepend"]:
                raise r.unsupported(f"{jp}.normalized", f"= true for {content!r} with a Prepend normalizer is not "
                                    "supported (the reference matches it after the prefix is added)")
            if kind == SENTENCEPIECE and (" " in content or _SPACE in content):
                raise r.unsupported(f"{jp}.normalized", f"= true for {content!r}, which holds a space, is not "
                                    "supported in a SentencePiece-style file")
            if normalize is not None and not normalize(content):
                raise r.unsupported(f"{jp}.normalized", f"= true for {content!r}, which normalizes to '', is not "
                                    "supported")
        types[tid] = int(TokenType.CONTROL if a.get("special", False) else TokenType.USER_DEFINED)
        f = AddedTokenFlags(
            id=tid,
            lstrip=bool(a.get("lstrip", False)),
            rstrip=bool(a.get("rstrip", False)),
            single_word=bool(a.get("single_word", False)),
            normalized=normalized,
        )
        if f.lstrip or f.rstrip or f.single_word or f.normalized:
            flags.append(f)

    pp_before, pp_after = r.post_processor(index)
    strip = r.decoder(kind == SENTENCEPIECE)

    cfg = config or {}

    def config_id(key: str, default: int | None) -> int | None:
        if key not in cfg:
            return default
        content = _token_content(cfg[key])
        if content is None:
            return None
        if content not in index:
            raise LoaderError(f"{where}: tokenizer_config.json {key} = {content!r} is not in the vocab")
        return index[content]

    # add_special_tokens=True adds what the config says, else what the post-processor adds (and
    # then the post-processor's tokens are the bos/eos it adds)
    bos_id = config_id("bos_token", pp_before)
    eos_id = config_id("eos_token", pp_after)
    if "add_bos_token" in cfg:
        add_bos = bool(cfg["add_bos_token"]) and bos_id is not None
    else:
        add_bos = pp_before is not None
        bos_id = pp_before if add_bos else bos_id
    if "add_eos_token" in cfg:
        add_eos = bool(cfg["add_eos_token"]) and eos_id is not None
    else:
        add_eos = pp_after is not None
        eos_id = pp_after if add_eos else eos_id
    pad_id = None
    if "pad_token" in cfg:
        content = _token_content(cfg["pad_token"])
        pad_id = index.get(content) if content is not None else None

    eot = [index[t] for t in END_OF_TURN_TOKENS if t in index]
    if eos_id is not None and tokens[eos_id] == "<|endoftext|>":
        eot.append(eos_id)

    chat_template = cfg.get("chat_template")
    if isinstance(chat_template, list):  # [{"name": "default", "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in chat_template if isinstance(t, Mapping)}
        chat_template = named.get("default")
    if not isinstance(chat_template, str):
        chat_template = None

    spec = TokenizerSpec(
        kind=kind,
        vocab=tuple(tokens),
        token_types=tuple(types),
        merges=tuple(model["merges"]),
        scores=None,
        pre_split=tuple(pre["patterns"]),
        pre_split_behaviors=tuple(pre["behaviors"]),
        normalizers=tuple(normalize_steps),
        bos_id=bos_id,
        eos_id=eos_id,
        unk_id=unk_id,
        pad_id=pad_id,
        eot_ids=tuple(sorted(set(eot))),
        add_bos=add_bos,
        add_eos=add_eos,
        byte_fallback=model["byte_fallback"],
        ignore_merges=model["ignore_merges"],
        fuse_unk=model["fuse_unk"],
        added_token_flags=tuple(flags),
        decode_strip_prefix=strip,
        parse_user_defined_always=True,  # non-special added tokens are matched with parse_special=False
        unparsed_specials="pass_over",  # tokenizers' encode_special_tokens reads special ones as text
        decode_added_byte_level=kind == BYTE_LEVEL,  # the ByteLevel decoder sees added tokens too
        name=default_name,
        **kw,
    )
    return spec, chat_template
