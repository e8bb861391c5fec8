"""The ids the docs quote for text around special tokens on a SentencePiece ``.model`` read alone
are the code's and the references'.

cf67745 changed how ``encode_fragments`` (the chat paths) encodes the text after a control id on
a ``.model`` read alone (``[1, "hi"]`` -> ``[1, 7251]``, was ``[29871, 1, 2918]``); the docs
that quote such ids (rmlprep/spm_special.py's module docstring and its refusal, ``per_text_fragments``,
``Tokenizer.encode_fragments``, ``TokenizerSpec.prefix_scheme``, the README paragraph on
``tokenizer.model`` without ``tokenizer.json``) were written by hand. Each quoted example is
rebuilt here from what the code gives and checked against the fixtures of the references
(``fixtures/spm_added_tokens.json``: transformers 4.57.1 and 5.24.0; ``fixtures/spm_chat.json``:
transformers 4.57.1 slow and fast, mistral-common 1.13.1), then looked up verbatim in the doc (its
whitespace collapsed): a change of the code's ids, or of a doc's quote, fails here.

Worked example (Llama 2, ``"<s>hi</s> there"``, no BOS added): transformers 4.57.1 gives
``[1, 7251, 2, 29871, 727]`` (``<s>``, ``▁hi``, ``</s>``, ``▁``, ``▁there``), which is
``encode_fragments`` of rmlprep's cut; 5.24.0 ``[1, 7251, 2, 727]`` (``"legacy": true``) or
``[1, 2918, 2, 727]`` (no key); the whole-text prefix ``[29871, 1, 2918, 2, 727]``, which
``encode(parse_special=True)`` therefore refuses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rmlprep
from rmlprep import spm_special
from rmlprep.spec import TokenizerSpec
from rmlprep.tokenizer import Tokenizer
from tools.make_spm_fixtures import MODELS, real_tokenizers_dir

ROOT = Path(__file__).resolve().parents[1]
ADDED = json.loads((ROOT / "fixtures" / "spm_added_tokens.json").read_text(encoding="utf-8"))
CHAT = json.loads((ROOT / "fixtures" / "spm_chat.json").read_text(encoding="utf-8"))
REF4, REF5 = ADDED["references"]
TF4, MC = CHAT["references"][0], f"mistral-common {CHAT['mistral_common']}"
TEXT = "<s>hi</s> there"


def _flat(text: str) -> str:
    return " ".join(text.split())


SPM_DOC = _flat(spm_special.__doc__)
README = _flat((ROOT / "README.md").read_text(encoding="utf-8"))


def _head(ids: list[int]) -> str:
    """``[1, 733, ...]``: the first ids of a longer list, as the docs quote them."""
    return "``[" + ", ".join(map(str, ids)) + ", ...]``"


def _tok(name: str):
    path = real_tokenizers_dir() / MODELS[name]
    if not path.exists():
        pytest.skip(f"{MODELS[name]} not in {real_tokenizers_dir()}; run `bash ../shared/real-tokenizers/get.sh`")
    return rmlprep.load_tokenizer(str(path))


def _added(case: str, ref: str, text: str) -> list[int]:
    return ADDED["cases"][case][ref]["parsed"][ADDED["texts"].index(text)]


def _chat_text(src: str, text: str) -> dict:
    r = CHAT["cases"][src]["texts"][TF4]
    i = CHAT["texts"].index(text)
    return {"slow": r["slow"][i], "fast": r["fast"][i]}


def test_parsed_control_text_ids_quoted_by_spm_special_and_readme():
    """The module docstring's four readings of ``"<s>hi</s> there"``, the refusal's, the README's."""
    tok = _tok("llama2")
    ref4, ref5 = _added("plain-legacy", REF4, TEXT), _added("plain-legacy", REF5, TEXT)
    ref5_nokey = _added("plain-no-legacy-key", REF5, TEXT)
    assert _added("plain-no-legacy-key", REF4, TEXT) == ref4  # 4.57.1: no key reads as "legacy": true
    chat_rule = tok.encode_fragments(tok.cut_added(TEXT, parse_special=True))[0]
    assert chat_rule == ref4 == _chat_text("llama2", TEXT)["slow"] == _chat_text("llama2", TEXT)["fast"]
    assert [tok.id_to_token(i) for i in ref4] == ["<s>", "▁hi", "</s>", "▁", "▁there"]
    whole = tok._encode_fragments(tok._cut_added(tok._whole_text_prefix(TEXT), True))
    assert whole not in (ref4, ref5, ref5_nokey) and len({str(ref4), str(ref5), str(ref5_nokey)}) == 3
    for quote in (f"gives each text between special tokens its own ``\"▁\"``: ``{ref4}``",
                  f"``{ref5}`` with ``\"legacy\": true``",
                  f"only at the start of the text: ``{ref5_nokey}``",
                  f"rmlprep's whole-text prefix would give ``{whole}``: none of them",
                  f"``tok.encode_fragments(tok.cut_added(text, parse_special=True))[0]`` gives ``{chat_rule}``"):
        assert quote in SPM_DOC, quote
    with pytest.raises(rmlprep.TokenizeError) as e:
        tok.encode(TEXT)
    assert f"'{TEXT}' is {ref4} in transformers 4.x, {ref5} or {ref5_nokey} in 5.x" in str(e.value)
    for quote in (f"transformers 4.57.1 gives `{ref4}`",
                  f"5.24.0 `{ref5}` (or `{ref5_nokey}` without a `\"legacy\"` key)",
                  f"whole-text `▁` gave `{whole}`, none of them",
                  f"`tok.encode_fragments(tok.cut_added(text, parse_special=True))[0]` (`{chat_rule}` here)"):
        assert quote in README, quote


def test_text_after_bos_quoted_by_encode_fragments_and_the_spec():
    """``[1, "hi"]`` -> ``[1, 7251 '▁hi']``: transformers 4.57.1's ``"<s>hi"`` (slow and fast)."""
    tok = _tok("llama2")
    ids = tok.encode_fragments([1, "hi"])[0]
    assert ids == _chat_text("llama2", "<s>hi")["slow"] == _chat_text("llama2", "<s>hi")["fast"]
    piece = tok.id_to_token(ids[1])
    assert f"``[1, \"hi\"]`` -> ``[1, {ids[1]} '{piece}']`` on Llama 2" in _flat(Tokenizer.encode_fragments.__doc__)
    assert f"``[1, \"hi\"]`` -> ``[1, \"{piece}\"]``" in _flat(TokenizerSpec.__doc__)


def test_chat_render_ids_quoted_by_per_text_fragments_and_readme():
    """llama2 on Llama 2 starts ``[1, 518 '▁[', ...]`` (transformers 4.57.1 slow = fast); zephyr
    writes ``29871`` after each ``</s>``; mistral-v1 on Mistral v1: transformers ``[1, 28705, 733,
    ...]``, mistral-common and rmlprep ``[1, 733, ...]``."""
    doc = _flat(spm_special.per_text_fragments.__doc__)
    tok = _tok("llama2")
    conv = CHAT["convs"][0]
    llama2 = rmlprep.encode_chat(tok, conv, "llama2").input_ids
    r = CHAT["cases"]["llama2"]["renders"]["llama2 0"][TF4]
    assert llama2 == r["slow"] == r["fast"]
    head = f"[1, {llama2[1]} '{tok.id_to_token(llama2[1])}', ...]"
    assert f"``{head}`` for the llama2 format on Llama 2" in doc
    assert f"the `llama2` format on Llama 2's `tokenizer.model` gives `{head}`" in README
    zephyr = rmlprep.encode_chat(tok, conv, "zephyr").input_ids
    r = CHAT["cases"]["llama2"]["renders"]["zephyr 0"][TF4]
    assert zephyr == r["slow"] == r["fast"]
    after = {zephyr[k + 1] for k, i in enumerate(zephyr) if i == tok.eos_id}
    assert after == {29871} and zephyr.count(tok.eos_id) == 4
    assert "zephyr a `29871` after each `</s>`" in README
    mtok = _tok("mistral-v1")
    r = CHAT["cases"]["mistral-v1"]["renders"]["mistral-v1 0"]
    mistral = rmlprep.encode_chat(mtok, conv, "mistral-v1").input_ids
    assert mistral == r[MC] != r[TF4]["fast"]
    assert _head(r[TF4]["fast"][:3]) + " for mistral-v1's" in doc
    assert f"mistral-common writes no such space ({_head(mistral[:2])})" in doc


def test_leading_space_ids_quoted_by_the_readme():
    """``" hello"`` and ``"x<|im_end|>  y"`` (text, no added token) on Llama 2's ``.model``: 4.x and
    rmlprep against 5.24.0 (fixture cases ``plain-*``)."""
    tok = _tok("llama2")
    ref4, ref5 = _added("plain-legacy", REF4, " hello"), _added("plain-legacy", REF5, " hello")
    assert tok.encode(" hello") == ref4
    assert f"(`\" hello\"`: 4.x and rmlprep `{ref4}`, 5.24.0 `{ref5}`)" in README
    text = "x<|im_end|>  y"
    ref4, ref5 = _added("plain-legacy", REF4, text), _added("plain-legacy", REF5, text)
    assert tok.encode(text) == ref4
    ends = ["`" + ", `".join(f"{tok.id_to_token(i)}`" for i in r[-2:]) for r in (ref4, ref5)]
    assert _flat(f"(`\"{text}\"` ends {ends[0]} in 4.x, {ends[1]} in 5.24.0;") in README


def test_pieces_quoted_by_spm_added():
    """rmlprep/spm_added.py quotes pieces of the fixture's answers (rmlprep's ids for the folders it
    reads equal them: tests/test_spm_added.py): ``"<|im_start|>user"`` -> ``<|im_start|>``, ``▁user``
    ("legacy": true); ``" hello"`` -> ``▁hello`` and ``"<s>hi"`` -> ``<s>``, ``hi`` ("legacy": false,
    both versions); ``"<|im_end|> world"`` -> ``▁world`` in 5.24.0, ``▁``, ``▁world`` in 4.57.1."""
    from rmlprep import spm_added

    doc = _flat(spm_added.__doc__)
    tok = _tok("llama2")
    pieces = {}
    for case, text in (("legacy", ADDED["texts"][0]), ("legacy", "Hello <|im_end|> world"),
                       ("not-legacy", " hello"), ("not-legacy", TEXT)):
        for ref in (REF4, REF5):
            pieces[case, text, ref] = ", ".join(f"``{tok.id_to_token(i) if i < 32000 else ''}``"
                                                for i in _added(case, ref, text))
    assert pieces["legacy", ADDED["texts"][0], REF4].startswith("````, ``▁user``")  # 32001, then ▁user
    assert "``\"<|im_start|>user\"`` -> ``<|im_start|>``, ``▁user``" in doc
    for ref in (REF4, REF5):
        assert pieces["not-legacy", " hello", ref] == "``▁hello``"
        assert pieces["not-legacy", TEXT, ref].startswith("``<s>``, ``hi``, ")
    assert "``\" hello\"`` -> ``▁hello`` where sentencepiece writes ``▁``, ``▁hello``" in doc
    assert [tok.id_to_token(i) for i in tok.encode(" hello")] == ["▁", "▁hello"]
    assert "``\"<s>hi\"`` -> ``<s>``, ``hi``" in doc
    assert pieces["legacy", "Hello <|im_end|> world", REF5].endswith("````, ``▁world``")
    assert pieces["legacy", "Hello <|im_end|> world", REF4].endswith("````, ``▁``, ``▁world``")
    assert "``\"<|im_end|> world\"`` -> ``▁world``, 4.x and sentencepiece ``▁``, ``▁world``" in doc
