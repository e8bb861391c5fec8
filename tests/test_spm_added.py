"""A SentencePiece folder whose tokenizer_config.json adds tokens past its tokenizer.model
(rmlprep/spm_added.py), against what transformers 4.57.1 and 5.24.0 give the same folder
(fixtures/spm_added_tokens.json, from tools/make_spm_added_fixtures.py)."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from rmlprep import LoaderError, TokenizeError, UnsupportedTokenizer, encode_chat, load_tokenizer
from tools.make_parity_fixtures import real_dir

ROOT = Path(__file__).resolve().parent.parent
FX = json.loads((ROOT / "fixtures" / "spm_added_tokens.json").read_text(encoding="utf-8"))
REF4, REF5 = FX["references"]
#: a text piece that starts with a space: at the start, or after an added token or Llama's <s>, </s>
_SPACE_LED = re.compile(r"(^|<\|im_(start|end)\|>|</?s>) ")


def _folder(tmp_path: Path, case: str, config: dict | None = None) -> Path:
    src = real_dir() / FX["sources"][FX["cases"][case]["source"]]["path"]
    if not src.is_file():
        pytest.skip(f"{src} is absent (bash ../shared/real-tokenizers/get.sh fetches it)")
    d = tmp_path / case
    d.mkdir(parents=True)
    shutil.copy(src, d / "tokenizer.model")
    (d / "tokenizer_config.json").write_text(json.dumps(config or FX["cases"][case]["config"]))
    return d


@pytest.mark.parametrize("case", [c for c in FX["cases"] if c.startswith("legacy")])
def test_added_tokens_past_the_model_encode_and_decode_as_transformers(tmp_path, case):
    """The folders transformers loads with "legacy": true (ChatML markers at 32000/32001 on Llama 2's
    and Mistral's 32,000 pieces; not special; with lstrip/rstrip; the config's ids out of order)
    were refused at load (f0bc1c6). Expected: transformers 4.57.1's ids for every text with
    special-token text parsed (parse_special=True) and read as text (split_special_tokens=True),
    its decoded text, and the added tokens' ids. 5.24.0 agrees except where a text between tokens
    starts with a space (its Metaspace prepends "▁" only when missing), which this checks too."""
    tok = load_tokenizer(_folder(tmp_path, case))
    ref, ref5 = FX["cases"][case][REF4], FX["cases"][case][REF5]
    assert {t: tok.token_to_id(t) for t in ref["ids"]} == ref["ids"] == ref5["ids"]
    for i, text in enumerate(FX["texts"]):
        assert tok.encode(text, parse_special=True) == ref["parsed"][i], text
        assert tok.encode(text, parse_special=False) == ref["unparsed"][i], text
        assert tok.decode(ref["parsed"][i]) == ref["decoded"][i], text
        same = all(ref[k][i] == ref5[k][i] for k in ("parsed", "unparsed", "decoded"))
        assert same or _SPACE_LED.search(text), text  # 5.24.0 differs only on a text piece led by a space


def test_a_chatml_render_on_such_a_folder_is_transformers_ids(tmp_path):
    """The case this is for: a ChatML fine-tune of Llama 2 (OpenHermes-style folder, eos
    <|im_end|>). encode_chat gives the ids both transformers versions give the render (text 0 of
    the fixture), <|im_end|> is its stop token, and the answer with its terminator is trained."""
    tok = load_tokenizer(_folder(tmp_path, "legacy"))
    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    assert FX["texts"][0] == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
    enc = encode_chat(tok, conv, "chatml")
    assert enc.input_ids == FX["cases"]["legacy"][REF4]["parsed"][0] == FX["cases"]["legacy"][REF5]["parsed"][0]
    assert (tok.eos_id, tok.spec.eot_ids) == (32000, (32000,))
    trained = [i for i, m in zip(enc.input_ids, enc.assistant_masks) if m]
    assert tok.decode(trained) == "Hello.<|im_end|>"


def test_what_transformers_would_read_otherwise_is_refused(tmp_path):
    """Folders whose added tokens rmlprep cannot give transformers' ids or text: no "legacy" key
    (4.57.1 and 5.24.0 disagree on text 0 of the fixture: '▁user' / 'user'), "legacy": false
    (both prefix no text that starts with a space: ' hello' is one id, sentencepiece's two), an
    id past a gap (both give <|im_end|> 32000 where the config says 32005), an added token that
    is already a piece, a normalized one, another tokenizer_class."""
    fx = FX["cases"]
    assert fx["no-legacy-key"][REF4]["parsed"][0] != fx["no-legacy-key"][REF5]["parsed"][0]
    with pytest.raises(LoaderError, match=r"adds id 32000 '<\|im_end\|>' past the 32000 pieces of tokenizer.model, "
                                          r"and the config has no \"legacy\" key: transformers 4.x .* set \"legacy\": "
                                          "true in tokenizer_config.json if"):
        load_tokenizer(_folder(tmp_path, "no-legacy-key"))
    i = FX["texts"].index(" hello")
    assert fx["not-legacy"][REF4]["parsed"][i] == fx["not-legacy"][REF5]["parsed"][i] == [22172]
    with pytest.raises(UnsupportedTokenizer, match=r"tokenizer_config.json sets \"legacy\": false for tokenizer.model: "
                                                   r"transformers then writes no '▁' before a text that starts with a "
                                                   r"space.*save_pretrained\(folder\)\) and load that \(rmlprep reads "):
        load_tokenizer(_folder(tmp_path, "not-legacy"))
    assert fx["gap"][REF4]["ids"] == fx["gap"][REF5]["ids"] == {"<|im_end|>": 32000}
    with pytest.raises(LoaderError, match=r"adds ids \[32005\] past the 32000 pieces of tokenizer.model, with no "
                                          r"token at id 32000: transformers gives added tokens the next free ids"):
        load_tokenizer(_folder(tmp_path, "gap"))
    base = fx["legacy"]["config"]
    for n, (change, err, match) in enumerate((
            ({"32001": "<s>"}, LoaderError, r"adds id 32001 '<s>', which is already id 1"),
            ({"32001": "<|im_end|>"}, LoaderError, r"adds id 32001 '<\|im_end\|>', which is already id 32000"),
            ({"normalized": True}, UnsupportedTokenizer, r"id 32000 '<\|im_end\|>' has normalized true"),
            ({"tokenizer_class": "GemmaTokenizer"}, UnsupportedTokenizer, r"and tokenizer_class is 'GemmaTokenizer'"))):
        cfg = copy.deepcopy(base)
        for k, v in change.items():
            if k.isdigit():
                cfg["added_tokens_decoder"][k]["content"] = v
            elif k == "normalized":
                cfg["added_tokens_decoder"]["32000"]["normalized"] = v
            else:
                cfg[k] = v
        with pytest.raises(err, match=match):
            load_tokenizer(_folder(tmp_path / str(n), "legacy", cfg))


def test_the_fixture_is_its_generators():
    """The fixture's banner and inputs are the generator's (no transformers needed): sources and
    their sha256 (when the real files are here), texts, cases with their configs, one answer per
    reference. An edit of the generator's inputs without a regeneration fails here; its
    ``--check`` (by hand, with the two installs) compares a regeneration by ``drift``."""
    sys.path.insert(0, str(ROOT))
    try:
        from tools import make_spm_added_fixtures as gen
    finally:
        sys.path.pop(0)
    assert FX["generator"] == "tools/make_spm_added_fixtures.py"
    assert {k: v["path"] for k, v in FX["sources"].items()} == gen.SOURCES
    assert FX["texts"] == gen.TEXTS
    assert {k: [v["source"], v["config"]] for k, v in FX["cases"].items()} == \
        {k: [s, c] for k, (s, c) in json.loads(json.dumps(gen.CASES)).items()}
    assert [r.split(" ")[:2] for r in FX["references"]] == [["transformers", "4.57.1"], ["transformers", "5.24.0"]]
    for k, v in FX["sources"].items():
        p = real_dir() / v["path"]
        if p.is_file():
            assert hashlib.sha256(p.read_bytes()).hexdigest() == v["sha256"]
    assert gen.drift(FX, copy.deepcopy(FX)) == []
    moved = copy.deepcopy(FX)
    moved["cases"]["gap"][REF5]["ids"] = {"<|im_end|>": 32005}
    assert gen.drift(FX, moved) == ["cases['gap'] differs"]


@pytest.mark.parametrize("legacy", [False, True, None])
def test_a_sentencepiece_folder_with_legacy_false_is_refused_added_tokens_or_not(tmp_path, legacy):
    """A Llama-class folder of a .model and a config with "legacy": false and no added tokens
    loaded, and encoded as sentencepiece does: ' hello' -> [29871, 22172] ('▁', '▁hello'), where
    transformers 4.57.1 and 5.24.0 both give [22172] for "legacy": false (the fixture's
    not-legacy case, text ' hello'; the converter's Metaspace prefixes only a text that lacks
    '▁', and only the first), and '<s>hi' -> [29871, 1, 2918] where both give [1, 2918]: other ids
    than the model's tokenizer, no word said. Refused now, naming the tokenizer.json to write
    (transformers' save of such a folder is a Metaspace(prepend_scheme='first') tokenizer.json,
    which rmlprep reads exactly); "legacy": true and no key load as before, sentencepiece's ids."""
    i = FX["texts"].index(" hello")
    assert FX["cases"]["not-legacy"][REF4]["parsed"][i] == FX["cases"]["not-legacy"][REF5]["parsed"][i] == [22172]
    cfg = {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False}
    if legacy is not None:
        cfg["legacy"] = legacy
    d = _folder(tmp_path, "legacy", cfg)
    if legacy is False:
        with pytest.raises(UnsupportedTokenizer, match=r"sets \"legacy\": false for tokenizer.model: transformers "
                                                       r"then writes no '▁' before a text that starts with a space"):
            load_tokenizer(d)
    else:
        assert load_tokenizer(d).encode(" hello", parse_special=False) == [29871, 22172]


@pytest.mark.parametrize("case", [c for c in FX["cases"] if c.startswith("plain-")])
def test_special_token_text_in_a_model_only_folder_is_refused_when_parsed(tmp_path, case):
    """A .model folder whose config adds no token (Llama 2's, Mistral's; "legacy": true or no
    key), parse_special=True (Tokenizer.encode's and `rmlprep encode`'s default): '<s>hi</s> there'
    gave [29871, 1, 2918, 2, 727] ('▁' before '<s>', sentencepiece's whole-text prefix), where
    transformers 4.57.1 gives [1, 7251, 2, 29871, 727] and 5.24.0 [1, 7251, 2, 727] or [1, 2918, 2,
    727] (sentencepiece never parses it): ids no reference gives, no word said. Now refused in one
    line naming the file, the token and both ways out, also in encode_batch / encode_batch_flat.
    Every other text parsed, and every text with parse_special=False, is 4.57.1's ids (text
    without special-token text: sentencepiece's); 5.24.0 differs from 4.57.1 on the refused text."""
    tok = load_tokenizer(_folder(tmp_path, case))
    ref, ref5 = FX["cases"][case][REF4], FX["cases"][case][REF5]
    controls = ("<s>", "</s>", "<unk>")
    refused = 0
    for i, text in enumerate(FX["texts"]):
        assert tok.encode(text, parse_special=False) == ref["unparsed"][i], text
        if not any(c in text for c in controls):
            assert tok.encode(text, parse_special=True) == ref["parsed"][i], text
            continue
        assert ref["parsed"][i] != ref5["parsed"][i], text  # the versions disagree: no one answer
        refused += 1
        msg = (r"^tokenizer.model: parse_special=True found the special token '<s>' \(id 1\) in the text, .* "
               r"encode with parse_special=False \(CLI --no-parse-special, run config tokenizer.parse_special = "
               r"false\) for sentencepiece's ids, or load the model's tokenizer.json$")
        with pytest.raises(TokenizeError, match=msg):
            tok.encode(text)
        with pytest.raises(TokenizeError, match=msg):
            tok.encode_batch(["Hello world", text], num_threads=2)
        with pytest.raises(TokenizeError, match=msg):
            tok.encode_batch_flat(["Hello world", text])
    assert refused == 1


def test_rmlprep_encode_refuses_it_in_one_line_and_no_parse_special_is_sentencepiece(tmp_path, capsys):
    """The CLI encodes with parse_special=True unless --no-parse-special: the refusal is one line,
    exit 2; --no-parse-special gives transformers 4.57.1's split_special_tokens ids (sentencepiece's)."""
    from rmlprep.cli import main

    d = _folder(tmp_path, "plain-legacy")
    i = FX["texts"].index("<s>hi</s> there")
    assert main(["encode", str(d), "<s>hi</s> there"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rmlprep: error: tokenizer.model: parse_special=True found the special token '<s>'")
    assert "\n" not in err
    assert main(["encode", str(d), "--no-parse-special", "--json", "<s>hi</s> there"]) == 0
    assert json.loads(capsys.readouterr().out) == FX["cases"]["plain-legacy"][REF4]["unparsed"][i]
