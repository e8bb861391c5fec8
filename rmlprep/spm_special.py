"""Special tokens in the text of a ``.model``-only tokenizer: parsed text, chat fragments.

A SentencePiece ``.model`` read without a tokenizer.json (:mod:`rmlprep.spm`) puts its dummy
prefix before the whole text (``prefix_scheme="whole_text"``), as sentencepiece does. Cutting a
control token (``<s>``, ``</s>``, ``<unk>``, Mistral v3's ``[INST]``) out of such text has no one
reference: they disagree with each other (``"<s>hi</s> there"`` on Llama 2's ``tokenizer.model``,
ids without BOS; ``fixtures/spm_added_tokens.json``, cases ``plain-*``):

- sentencepiece never cuts control pieces out of text (``parse_special=False`` is its encoding);
- transformers 4.57.1 (``LlamaTokenizer`` and ``LlamaTokenizerFast``, ``"legacy": true`` or no
  key) gives each text between special tokens its own ``"▁"``: ``[1, 7251, 2, 29871, 727]``
  (``<s>``, ``▁hi``, ``</s>``, ``▁``, ``▁there``), as Llama 2's own converted tokenizer.json;
- transformers 5.24.0 writes ``"▁"`` only where a text lacks one: ``[1, 7251, 2, 727]`` with
  ``"legacy": true``, and with no ``legacy`` key (or ``"legacy": false``) only at the start of
  the text: ``[1, 2918, 2, 727]`` (``hi``, ``▁there``);
- rmlprep's whole-text prefix would give ``[29871, 1, 2918, 2, 727]``: none of them.

So :meth:`~rmlprep.tokenizer.Tokenizer.encode` (and ``encode_batch``, ``encode_batch_flat``, the
CLI's ``rmlprep encode``, a run with ``tokenizer.parse_special = true``, whose rows holding such
text are rejected with this reason) refuses the text, naming the token and the two ways out:
``parse_special=False`` (sentencepiece's ids, equal to transformers 4.x with
``split_special_tokens=True``) or the model's tokenizer.json (whose own rules rmlprep follows).
Who wants transformers 4.57.1's ids for such a text can have them from the chat paths' rule:
``tok.encode_fragments(tok.cut_added(text, parse_special=True))[0]`` gives
``[1, 7251, 2, 29871, 727]`` (``fixtures/spm_chat.json``, texts).
Text without control-token text encodes as before (sentencepiece's ids, which are also
transformers 4.x's). Not affected: a ``.model`` folder whose tokenizer_config.json adds tokens
(:mod:`rmlprep.spm_added`, read as transformers 4.x). The chat paths give ids as lists of
fragments (:meth:`~rmlprep.tokenizer.Tokenizer.encode_fragments`), which give each text between
special tokens its own ``"▁"`` (transformers 4.57.1's ``legacy=True`` reading of a ``.model``
alone, Meta's and mistral-common's chat code, llama.cpp); format text that starts with a space
right after a special token is handled by :func:`per_text_fragments`. Source:
``fixtures/spm_added_tokens.json`` (cases ``plain-*``, ``tools/make_spm_added_fixtures.py``),
``fixtures/spm_chat.json`` (``tools/make_spm_chat_fixtures.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import TokenizeError

__all__ = ["PREFIX_SPACE_FORMATS", "UnprefixedText", "per_text_fragments", "refuse_parsed_control"]


def refuse_parsed_control(tokenizer, fragments: Sequence[str | int]) -> None:
    """Raise when ``fragments`` (a whole-text-prefixed ``.model`` text cut with
    ``parse_special=True``) hold a control or unknown token: see the module docstring.

    Raises:
        TokenizeError: naming the tokenizer file, the token's text and id, and the ways out.
    """
    user = tokenizer._user_ids
    for f in fragments:
        if isinstance(f, int) and f not in user:
            s = tokenizer.spec
            raise TokenizeError(
                f"{s.name or 'tokenizer.model'}: parse_special=True found the special token {s.vocab[f]!r} (id {f}) "
                "in the text, and a SentencePiece .model without a tokenizer.json has no single reference for it "
                "(sentencepiece reads it as text; on Llama 2 '<s>hi</s> there' is [1, 7251, 2, 29871, 727] in "
                "transformers 4.x, [1, 7251, 2, 727] or [1, 2918, 2, 727] in 5.x); encode with parse_special=False "
                "(CLI --no-parse-special, run config tokenizer.parse_special = false) for sentencepiece's ids, or "
                "load the model's tokenizer.json")


class UnprefixedText(TokenizeError):
    """:func:`per_text_fragments`' refusal: told apart from a row's own faults before the run."""


#: Native formats written for mistral-common, which encodes each message with its own
#: ``sp.encode``: the space their render writes right after a special token (mistral-v1's
#: ``"<s> [INST]"``, mistral-v3/v7's ``"[INST] Hi"`` on Mistral v3's ``.model``) stands for
#: that call's dummy prefix.
PREFIX_SPACE_FORMATS = frozenset({"mistral-v1", "mistral-v3", "mistral-v7"})


def per_text_fragments(tokenizer, fragments: Sequence[str | int], markup: Sequence[bool],
                       fmt: str | None) -> list[str | int]:
    """A chat render's fragments (as many, in order; a dropped space can leave ``""``), on a
    ``.model``-only tokenizer, as :meth:`~rmlprep.tokenizer.Tokenizer.encode_fragments` is to
    encode them: each text after a special token gets its own ``'▁'`` (one ``sp.encode`` per text).
    ``markup[k]`` says fragment ``k`` is format text (not message data).

    Text right after a special token that does not start with a space needs nothing: every
    reference gives it its own ``'▁'`` (Meta's llama ``chat_completion`` and mistral-common, one
    ``sp.encode`` per turn or message; transformers 4.57.1's ``apply_chat_template`` on the
    ``.model`` alone, read with ``legacy=True``; llama.cpp): ``[1, 518 '▁[', ...]`` for the llama2
    format on Llama 2. So does message data that starts with a space (``sp.encode(" Bye")``
    everywhere). Format text that starts with a space is where they part: transformers and
    llama.cpp put ``'▁'`` before that space's own ``'▁'`` (``[1, 28705, 733, ...]`` for mistral-v1's
    ``"<s> [INST]"``), mistral-common writes no such space (``[1, 733, ...]``). For the formats of
    :data:`PREFIX_SPACE_FORMATS` (mistral-common's) the one space is dropped, so the ids are
    mistral-common's, unless nothing but that space stands before the next special token (no
    mistral-common message there); other renders (other formats, ``"template"``) are refused.

    Raises:
        UnprefixedText: naming the special token, the text after it and the way out (the
            model's tokenizer.json, whose own rule rmlprep follows).
    """
    s = tokenizer.spec
    if not (s.add_prefix_space and s.prefix_scheme == "whole_text"):
        return fragments
    out = list(fragments)
    for k in range(1, len(out)):
        prev, f = out[k - 1], out[k]
        if not (isinstance(prev, int) and prev not in tokenizer._user_ids and isinstance(f, str)
                and f.startswith(" ") and markup[k]):
            continue
        rest = f[1:] + "".join(_texts_after(out, k + 1))
        if fmt in PREFIX_SPACE_FORMATS and rest:
            out[k] = f[1:]
            continue
        raise UnprefixedText(
            f"{s.name or 'tokenizer.model'}: this chat render has the text {f[:20]!r} right after the special "
            f"token {s.vocab[prev]!r} (id {prev}); on a SentencePiece .model read without a tokenizer.json the "
            "references part there (transformers' apply_chat_template and llama.cpp encode that space as a '▁' "
            "after the text's own '▁'; mistral-common's formats write no such space): load the model's "
            "tokenizer.json for this chat format")
    return out


def _texts_after(fragments, k):
    """The str fragments from ``k`` up to the next special id (joined, they are one text)."""
    for f in fragments[k:]:
        if not isinstance(f, str):
            return
        yield f
