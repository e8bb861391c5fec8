"""The component readers of a Hugging Face ``tokenizer.json``: normalizer, pre-tokenizer, model,
added tokens, post-processor and decoder, each walked by :class:`_Reader` into plain values.

This module owns what each component *means* and which forms rmlprep refuses (every error names
the file and the JSON path); :mod:`rmlprep.hf` owns putting the pieces together into a
:class:`~rmlprep.spec.TokenizerSpec`, the tokenizer_config.json reading and the file loading.
The supported forms and their sources are listed in :mod:`rmlprep.hf`'s docstring.

Source: tokenizers ``normalizers/*.rs``, ``pre_tokenizers/{byte_level,metaspace,split,digits}.rs``,
``models/bpe/{model,serialization}.rs``, ``tokenizer/added_vocabulary.rs``, ``processors/template.rs``,
``decoders/*.rs``.
"""

from __future__ import annotations

from collections.abc import Mapping
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

_SPACE = "\u2581"

# Sequence normalizers/pre-tokenizers/decoders nest a few levels in real files; a deeper tree is
# refused before it can exhaust the stack.
_MAX_SEQUENCE_DEPTH = 32

# escaping a literal for the pre-split pattern language (Oniguruma / regex syntax)
_REGEX_META = set("\\.^$|?*+()[]{}")


def _escape(s: str) -> str:
    return "".join("\\" + c if c in _REGEX_META else c for c in s)


#: At most this many ids below the top id may have no token in model.vocab.
_MAX_ID_GAPS = 65536


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
        dropout = m.get("dropout")
        if isinstance(dropout, bool) or dropout not in (None, 0, 1):
            raise self.unsupported("model.dropout", f"= {dropout!r} is not supported (BPE dropout is random; 0, 1 "
                                   "and null are not)")
        # dropout 1 drops every merge (word.rs merge_all: rand < 1.0 always) and skips the cache
        # path, ignore_merges' whole-word lookup with it (model.rs BPE::tokenize): each word is
        # its characters, as with "merges": []
        all_dropped = dropout == 1
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
        if len(set(merges)) != len(merges):
            # a merge listed twice ranks where it is listed last (tokenizers collects the ranks
            # into a HashMap, so the later insert wins); the spec keeps a merge's first rank
            last = {mg: r for r, mg in enumerate(merges)}
            merges = [mg for r, mg in enumerate(merges) if last[mg] == r]
        unk = m.get("unk_token")
        if unk is not None and not isinstance(unk, str):
            raise self.bad("model.unk_token", f"is {type(unk).__name__}, expected a string or null")
        return {
            "tokens": tokens,
            "entries": n,
            "merges": [] if all_dropped else merges,
            "unk_token": unk,
            "byte_fallback": bool(m.get("byte_fallback", False)),
            "fuse_unk": bool(m.get("fuse_unk", False)),
            "ignore_merges": bool(m.get("ignore_merges", False)) and not all_dropped,
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
        templates = 0
        for node, jp in self.flatten(self.data.get("post_processor"), "post_processor", "processors"):
            t = self.typ(node, jp)
            if t == "ByteLevel":
                continue
            if t != "TemplateProcessing":
                raise self.unsupported(f"{jp}.type", f"= {t!r} is not supported; rmlprep supports "
                                       "TemplateProcessing, ByteLevel and Sequence post-processors")
            templates += 1
            if templates > 1:  # tokenizers 0.23.3: BOS-$A then $A-EOS gave [BOS, EOS, text...], not [BOS, text..., EOS]
                raise self.unsupported(jp, "is a second TemplateProcessing; tokenizers runs it on the first one's "
                                       "output, which rmlprep does not reproduce: keep one")
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
    def decoder(self) -> tuple[tuple[Any, ...], ...]:
        """The decoder chain (a spec's ``decode_chain``).

        ``decode_chain`` holds one step per component, Sequences flattened (``Sequence`` runs
        its steps in order, so the flat list decodes alike); :mod:`rmlprep.hf_decode` runs it
        and lists the steps. A component rmlprep does not reproduce exactly (a ``Regex``
        Replace, an unknown type, a field tokenizers itself would refuse to read) becomes a
        ``("Refuse", message)`` step naming its JSON path: decoding raises, loading and encoding
        do not. (A spec with a ``decode_chain`` decodes by it alone: its ``decode_strip_prefix``
        stays ``"none"``.)

        Raises:
            LoaderError: a component that is not an object or has no ``type`` string.
        """
        return tuple(self._decode_step(node, jp, self.typ(node, jp))
                     for node, jp in self.flatten(self.data.get("decoder"), "decoder", "decoders"))

    def _decode_step(self, node: Mapping[str, Any], jp: str, t: str) -> tuple[Any, ...]:
        def refuse(what: str) -> tuple[str, str]:
            return ("Refuse", f"{self.where}: {jp} {what}; rmlprep does not decode with this decoder (loading and "
                              "encoding are not affected)")

        def field(key: str, kind: type, default: Any = None) -> Any:
            v = node.get(key, default)
            if kind is int:
                return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
            return v if isinstance(v, kind) else None

        if t in ("ByteLevel", "ByteFallback", "Fuse"):
            return (t,)
        if t == "Replace":
            kind, old = self.string_pattern(node, jp)
            content = node.get("content")
            if not isinstance(content, str):
                return refuse(f"Replace has content = {content!r}, not a string (tokenizers cannot read it)")
            if kind == "Regex":
                return refuse(f"Replace({{'Regex': {old!r}}}, {content!r}): a regex Replace decoder is not "
                              "reproduced (only String patterns are)")
            if not old:
                return refuse("Replace with an empty String pattern is not reproduced")
            return ("Replace", old, content)
        if t == "Strip":
            content, start, stop = field("content", str), field("start", int), field("stop", int)
            if content is None or len(content) != 1 or start is None or stop is None:
                return refuse(f"Strip(content={node.get('content')!r}, start={node.get('start')!r}, "
                              f"stop={node.get('stop')!r}) is not one character and two counts (tokenizers "
                              "cannot read it)")
            return ("Strip", content, start, stop)
        if t == "Metaspace":
            rep = field("replacement", str)
            scheme = node.get("prepend_scheme", "always")
            if rep is None or len(rep) != 1 or scheme not in ("first", "always", "never"):
                return refuse(f"Metaspace(replacement={node.get('replacement')!r}, prepend_scheme={scheme!r}) "
                              "is not one character and first/always/never (tokenizers cannot read it)")
            aps = node.get("add_prefix_space")
            if aps is False and scheme != "never":
                return refuse(f"Metaspace has add_prefix_space = false with prepend_scheme = {scheme!r} "
                              "(tokenizers refuses the pair)")
            return ("Metaspace", rep, scheme != "never")
        if t == "WordPiece":
            prefix, cleanup = field("prefix", str), field("cleanup", bool)
            if prefix is None or cleanup is None:
                return refuse(f"WordPiece(prefix={node.get('prefix')!r}, cleanup={node.get('cleanup')!r}) is "
                              "not a string and a bool (tokenizers cannot read it)")
            return ("WordPiece", prefix, cleanup)
        if t == "BPEDecoder":
            suffix = field("suffix", str)
            if suffix is None:
                return refuse(f"BPEDecoder(suffix={node.get('suffix')!r}) is not a string (tokenizers cannot "
                              "read it)")
            return ("BPEDecoder", suffix)
        if t == "CTC":
            pad, delim, cleanup = field("pad_token", str), field("word_delimiter_token", str), field("cleanup", bool)
            if pad is None or delim is None or cleanup is None:
                return refuse(f"CTC(pad_token={node.get('pad_token')!r}, word_delimiter_token="
                              f"{node.get('word_delimiter_token')!r}, cleanup={node.get('cleanup')!r}) is not two "
                              "strings and a bool (tokenizers cannot read it)")
            return ("CTC", pad, delim, cleanup)
        return refuse(f"type = {t!r} is not a decoder rmlprep reproduces (ByteLevel, ByteFallback, Fuse, Strip, "
                      "Replace, Metaspace, WordPiece, BPEDecoder, CTC and Sequence are)")
