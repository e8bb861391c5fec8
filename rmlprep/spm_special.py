"""Special-token text in the text of a ``.model``-only tokenizer encoded with ``parse_special=True``.

A SentencePiece ``.model`` read without a tokenizer.json (:mod:`rmlprep.spm`) puts its dummy
prefix before the whole text (``prefix_scheme="whole_text"``), as sentencepiece does. Cutting a
control token (``<s>``, ``</s>``, ``<unk>``, Mistral v3's ``[INST]``) out of such text has no
reference that agrees with that, or with each other (``"<s>hi</s> there"`` on Llama 2's
``tokenizer.model``, ids without BOS):

- sentencepiece never cuts control pieces out of text (``parse_special=False`` is its encoding);
- transformers 4.57.1 (the ``"legacy": true`` of its LlamaTokenizer) gives each text between
  special tokens its own ``"▁"``: ``[1, 7251, 2, 29871, 727]`` (``<s>``, ``▁hi``, ``</s>``,
  ``▁``, ``▁there``), as Llama 2's own converted tokenizer.json;
- transformers 5.24.0 (no ``legacy`` key, or ``"legacy": false``) prefixes only the start of the
  text: ``[1, 2918, 2, 727]`` (``hi``, ``▁there``);
- rmlprep's whole-text prefix would give ``[29871, 1, 2918, 2, 727]``: none of them.

So :meth:`~rmlprep.tokenizer.Tokenizer.encode` (and ``encode_batch``, ``encode_batch_flat``, the
CLI's ``rmlprep encode``, a run with ``tokenizer.parse_special = true``, whose rows holding such
text are rejected with this reason) refuses the text, naming the token and the two ways out:
``parse_special=False`` (sentencepiece's ids, equal to transformers 4.x with
``split_special_tokens=True``) or the model's tokenizer.json (whose own rules rmlprep follows).
Text without control-token text encodes as before (sentencepiece's ids, which are also
transformers 4.x's). Not affected: a ``.model`` folder whose tokenizer_config.json adds tokens
(:mod:`rmlprep.spm_added`, read as transformers 4.x). The chat paths give ids as lists of
fragments (:meth:`~rmlprep.tokenizer.Tokenizer.encode_fragments`); their text right after a
special token is refused unless it starts with a space (:func:`unprefixed_after_special`). Source: ``fixtures/spm_added_tokens.json`` (cases
``plain-*``, ``tools/make_spm_added_fixtures.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import TokenizeError

__all__ = ["UnprefixedText", "refuse_parsed_control", "unprefixed_after_special"]


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
                "in the text, and a SentencePiece .model without a tokenizer.json has no reference for it "
                "(sentencepiece reads it as text; transformers 4.x gives each text between special tokens a '▁', "
                "5.x does not: '<s>hi' -> [1, 7251] or [1, 2918]); encode with parse_special=False (CLI "
                "--no-parse-special, run config tokenizer.parse_special = false) for sentencepiece's ids, or "
                "load the model's tokenizer.json")


class UnprefixedText(TokenizeError):
    """:func:`unprefixed_after_special`'s refusal: told apart from a row's own faults before the run."""


def unprefixed_after_special(tokenizer, fragments: Sequence[str | int]) -> None:
    """Refuse a chat render, on a ``.model``-only tokenizer, with text right after a special token
    that does not start with a space.

    Every reference encodes the text after a special token with its own dummy prefix: Meta's
    llama ``chat_completion`` (one ``sp.encode`` per turn: ``<s>``, ``▁[INST]``), mistral-common (one
    ``encode`` per message), transformers 4.57.1 and 5.24.0's ``apply_chat_template`` on a
    ``"legacy": true`` folder (``[1, 518 '▁[', ...]`` for the llama2 template, ``29871 '▁'`` before the
    ``"\\n"`` after zephyr's ``</s>``). The whole-text prefix of a ``.model`` read alone puts no ``'▁'``
    there (``[1, 29961 '[', ...]``), ids no reference gives. The native formats built for
    mistral-common write a space there (mistral-v1's ``"<s> [INST]"``), which the whole-text
    scheme turns into that ``'▁'``; text without one is refused.

    Raises:
        TokenizeError: naming the special token, the text after it and the way out (the model's
            tokenizer.json, whose per-segment rule rmlprep follows).
    """
    s = tokenizer.spec
    if not (s.add_prefix_space and s.prefix_scheme == "whole_text"):
        return
    for prev, f in zip(fragments, fragments[1:]):
        if isinstance(prev, int) and isinstance(f, str) and f and not f.startswith(" "):
            raise UnprefixedText(
                f"{s.name or 'tokenizer.model'}: this chat render has the text {f[:20]!r} right after the special "
                f"token {s.vocab[prev]!r} (id {prev}); every reference (sentencepiece per message as Meta's and "
                "mistral-common's chat code, transformers' apply_chat_template) encodes it with its own '▁', which a "
                "SentencePiece .model read without a tokenizer.json does not (it would give ids no reference "
                "gives): load the model's tokenizer.json for this chat format")
