"""Chat on a SentencePiece ``.model`` read without a tokenizer.json: text around special tokens
(rmlprep.tokenizer.Tokenizer.encode_fragments, rmlprep.spm_special.per_text_fragments).

Worked example (Llama 2's tokenizer.model, the reference being sentencepiece itself as Meta's
llama ``chat_completion`` calls it, one ``encode`` per turn with BOS added before it): the
conversation user "Hi" is ``[1] + sp.encode("[INST] Hi [/INST]")`` = ``[1, 518 '▁[', 25580 'INST',
...]``. rmlprep's whole-text prefix with the ``llama2`` format's ``"<s>[INST] Hi [/INST]"`` gave
``[1, 29961 '[', 25580, ...]`` (5cd97be refused it); each text after a special token now gets its
own ``'▁'``. Expected ids: ``fixtures/spm_chat.json`` (tools/make_spm_chat_fixtures.py:
transformers 4.57.1's LlamaTokenizer and LlamaTokenizerFast on each ``.model`` alone, and
mistral-common 1.13.1's v1 instruct tokenizer).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rmlprep
from _chat_common import TEMPLATES, needs_shared
from rmlprep.spm_special import UnprefixedText
from test_spm import TINY_TEXTS, tiny  # noqa: F401 - the fixture
from tools.make_spm_fixtures import MODELS, real_tokenizers_dir

REAL = real_tokenizers_dir()
CONV = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye!"}]


def _path(name):
    path = REAL / MODELS[name]
    if not path.exists():
        pytest.skip(f"{MODELS[name]} not in {REAL}; run `bash ../shared/real-tokenizers/get.sh {REAL}`")
    return path


def test_llama2_format_on_a_model_prefixes_the_text_after_bos():
    spm = pytest.importorskip("sentencepiece")
    path = _path("llama2")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    reference = [1] + sp.encode("[INST] Hi [/INST]")  # Meta's chat_completion for the first turn
    assert reference[:3] == [1, 518, 25580]
    tok = rmlprep.load_tokenizer(str(path))
    assert rmlprep.encode_chat(tok, CONV[:1], "llama2").input_ids == reference


FIX = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "spm_chat.json").read_text(encoding="utf-8"))
TF4 = "transformers 4.57.1 (tokenizers 0.22.1)"
MC = "mistral-common 1.13.1"


@pytest.mark.parametrize("src", sorted(FIX["cases"]))
def test_encode_fragments_gives_transformers_legacy_ids(src):
    """A ``.model`` alone is ``legacy=True`` in transformers 4.57.1 (slow and fast); the text between
    special tokens gets one ``'▁'`` each: ``encode_fragments`` of rmlprep's cut gives the fast
    tokenizer's ids (which, as rmlprep, cuts every control piece; the slow one cuts only
    ``<s>``/``</s>``/``<unk>`` and agrees wherever no other control text is in the text)."""
    case = FIX["cases"][src]
    assert case["legacy"][TF4] == {"slow": True, "fast": True}
    tok = rmlprep.load_tokenizer(str(_path(src)))
    got = [tok.encode_fragments(tok.cut_added(t, parse_special=True))[0] for t in FIX["texts"]]
    assert got == case["texts"][TF4]["fast"]


def _renders():
    for src, case in sorted(FIX["cases"].items()):
        for key in case["renders"]:
            yield src, key


@pytest.mark.parametrize("src,key", list(_renders()))
def test_native_formats_on_a_model_match_the_references_or_refuse(src, key):
    """Each native format writes its template's text; its ids are mistral-common's for mistral-v1
    (whose space after ``<s>``/``</s>`` stands for mistral-common's per-message ``'▁'``: transformers
    writes ``'▁'`` before it, ``[1, 29871, 518, ...]``), transformers 4.57.1's where its slow and fast
    tokenizers agree, and a refusal where no reference stands alone (mistral-v1 or llama2 on Mistral
    v3's ``.model``, where ``[INST]`` is a control piece only the fast tokenizer cuts)."""
    case = FIX["cases"][src]
    r = case["renders"][key]
    fmt, i = key.rsplit(" ", 1)
    conv = FIX["convs"][int(i)]
    assert rmlprep.format_chat(conv, fmt) == r["text"]
    tok = rmlprep.load_tokenizer(str(_path(src)))
    tf = r[TF4]
    if MC in r and src != "mistral-v3":
        assert rmlprep.encode_chat(tok, conv, fmt).input_ids == r[MC] != tf["fast"]
    elif tf["slow"] == tf["fast"]:
        assert rmlprep.encode_chat(tok, conv, fmt).input_ids == tf["fast"]
    else:
        with pytest.raises(UnprefixedText, match="right after the special token"):
            rmlprep.encode_chat(tok, conv, fmt)


@needs_shared
def test_a_template_with_a_space_after_a_special_token_is_refused():
    """mistral-v1's template on Mistral's v1 ``.model``: transformers 4.57.1 gives ``[1, 28705, 733, ...]``,
    mistral-common ``[1, 733, ...]`` (fixtures/spm_chat.json); the template's own render is refused."""
    r = FIX["cases"]["mistral-v1"]["renders"]["mistral-v1 0"]
    assert r[TF4]["fast"][:3] == [1, 28705, 733] and r[MC][:2] == [1, 733]
    tok = rmlprep.load_tokenizer(str(_path("mistral-v1")))
    tok.chat_template = (TEMPLATES / "mistral-v1.jinja").read_text(encoding="utf-8")
    with pytest.raises(UnprefixedText, match=r"' \[INST\] .*right after the special token '<s>'"):
        rmlprep.encode_chat(tok, FIX["convs"][0], "template")


@needs_shared
def test_live_check_compares_the_mistral_common_tool_result_with_the_template():
    """mistral-v3 on Mistral v3's ``.model`` writes a plain-text tool result as mistral-common
    (``{"content": "cats are mammals", ...}``); its template writes ``{"content": cats are mammals,
    ...}``. A ``.model`` folder with that template: the run's live check compares the text the run
    encodes, so it stops there naming the option, and with ``tool_results = "template"`` matches."""
    from rmlprep.chat_parity import live_chat_check
    from rmlprep.errors import ParityError

    tok = rmlprep.load_tokenizer(str(_path("mistral-v3")))
    template = (TEMPLATES / "mistral-v3.jinja").read_text(encoding="utf-8")
    call = {"id": "call00001", "type": "function", "function": {"name": "search", "arguments": {"q": "cats"}}}
    conv = [{"role": "user", "content": "Cats?"}, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call00001", "content": "cats are mammals"},
            {"role": "assistant", "content": "Mammals."}]
    kw = dict(bos_token="<s>", eos_token="</s>", tokenizer=tok)
    with pytest.raises(ParityError, match=r'(?s)"cats are mammals".*tool_results = "template"') as err:
        live_chat_check("mistral-v3", template, [(conv, None)], **kw)
    # the tool results are the whole difference: the message says so and offers the option as the way on, not
    # chat.format = "template" (closing note 21: the generic ways on did not name tool_results)
    assert "the only difference is the tool results" in str(err.value), str(err.value)
    assert "chat.format = \"template\" renders" not in str(err.value)
    with pytest.raises(ParityError, match="the only difference is the tool results"):  # chosen, on any tokenizer
        live_chat_check("mistral-v3", template, [(conv, None)], options={"tool_results": "mistral-common"},
                        bos_token="<s>", eos_token="</s>")
    got = live_chat_check("mistral-v3", template, [(conv, None)], options={"tool_results": "template"}, **kw)
    assert got["compared"] == 1


@needs_shared
def test_the_head_chat_check_compares_the_text_the_run_writes_on_a_model(tmp_path):
    """A ``.model`` folder with the mistral-v3 template beside it (``chat_template.jinja``): the
    run writes a plain-text tool result as mistral-common (the template's text differs). The
    head chat check (before any corpus work) compared the template's own tool results, as
    format_chat writes them, and said "2 corpus conversations ... match"; the unit's check then
    stopped the run. Now the head check writes what the run writes: it stops before any unit,
    naming the option; with ``tool_results = "template"`` the run goes through."""
    import shutil

    from rmlprep.config import config_from_dict
    from rmlprep.errors import ParityError
    from rmlprep.pipeline import run

    d = tmp_path / "tok"
    d.mkdir()
    shutil.copy(_path("mistral-v3"), d / "tokenizer.model")
    (d / "chat_template.jinja").write_text((TEMPLATES / "mistral-v3.jinja").read_text(encoding="utf-8"))
    call = {"id": "call00001", "type": "function", "function": {"name": "search", "arguments": {"q": "cats"}}}
    conv = [{"role": "user", "content": "Cats?"}, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call00001", "content": "cats are mammals"},
            {"role": "assistant", "content": "Mammals."}]
    inp = tmp_path / "c.jsonl"
    inp.write_text(json.dumps({"messages": conv}) + "\n")

    def cfg(out, **chat):
        return config_from_dict({"pipeline": "sft", "input": {"paths": [str(inp)]},
                                 "tokenizer": {"path": str(d / "tokenizer.model")},
                                 "chat": {"format": "mistral-v3", "tools_column": False, **chat},
                                 "pack": {"seq_len": 256}, "output": {"dir": str(tmp_path / out)},
                                 "run": {"workers": 1, "progress": "none", "histogram": False}})

    logs: list[str] = []
    with pytest.raises(ParityError, match="the only difference is the tool results") as err:
        run(cfg("o"), log=logs.append)
    assert "checked by the worker of unit" not in str(err.value)  # the head check's, before any unit
    assert not any("match format 'mistral-v3'" in x and "corpus conversations" in x for x in logs), logs
    m = run(cfg("t", options={"tool_results": "template"}), log=lambda _: None)
    assert m["totals"]["documents"] == 1 and m["parity"]["chat"]["live"]["compared"] == 1


def test_mistral_v1_on_its_model_still_encodes_as_mistral_common():
    """mistral-common's v1 encodes each turn as ``[BOS] + sp.encode("[INST] Hi [/INST]")``: 733 '▁['."""
    spm = pytest.importorskip("sentencepiece")
    path = _path("mistral-v1")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    tok = rmlprep.load_tokenizer(str(path))
    ids = rmlprep.encode_chat(tok, CONV[:1], "mistral-v1").input_ids
    assert ids == [1] + sp.encode("[INST] Hi [/INST]")


def test_sft_run_refuses_such_a_format_before_any_row(tmp_path, capsys):
    """A refused render stops an sft run in one line (exit 2) before the corpus is read, where each
    row was rejected one by one: the llama2 format on Mistral v3's ``.model`` (format text ``" "``
    after its control ``[INST]``, where the references part)."""
    from rmlprep.cli import main

    path = _path("mistral-v3")
    rows = tmp_path / "chat.jsonl"
    rows.write_text("".join(json.dumps({"messages": CONV}) + "\n" for _ in range(3)))
    out = tmp_path / "out"
    toml = tmp_path / "run.toml"
    toml.write_text(f'pipeline = "sft"\n[input]\npaths = ["{rows}"]\ncolumn = "messages"\n'
                    f'[tokenizer]\npath = "{path}"\n[chat]\nformat = "llama2"\n[pack]\nseq_len = 128\n'
                    f'[output]\ndir = "{out}"\n[run]\nworkers = 1\nprogress = "none"\nhistogram = false\n')
    rc = main(["run", str(toml)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "chat.format = 'llama2': " in err and "right after the special token '[INST]'" in err
    assert not list(out.glob("train-*.parquet")) and not (out / "rejects").exists()


@pytest.mark.parametrize("kind", ["fallback", "unk"])
def test_encode_fragments_of_user_defined_pieces_are_sentencepiece_s(tiny, kind):
    """sentencepiece matches user-defined pieces inside its one text: no '▁' after one, its '▁'
    before one that starts the text (``"<tool>x"`` -> ``▁``, ``<tool>``, ``x``). The chat path cuts
    them out of message data as ids, so ``encode_fragments`` of the cut must give ``sp.encode``'s
    ids (the per-text '▁' is for control tokens only)."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(tiny[kind]))
    tok = rmlprep.load_tokenizer(str(tiny[kind]))
    texts = [t for t in TINY_TEXTS if "<ctrl>" not in t and "<tool>" in t]
    assert len(texts) >= 4
    for t in texts:
        assert tok.encode_fragments(tok.cut_added(t))[0] == sp.encode(t), t


def test_a_marker_older_than_the_per_text_prefix_is_redone_on_a_model(tmp_path):
    """Before the per-text ``'▁'``, an sft run with the ``llama2`` format on Llama 2's ``.model``
    wrote ``[1, 29961 '[', ...]`` (no reference gives it; 5cd97be then refused such runs). A
    done marker without ``chat_text_prefix`` cannot vouch for such a unit: a resume redoes it
    (and says why) and its shard then holds ``[1, 518 '▁[', ...]``, the references' ids
    (``test_llama2_format_on_a_model_prefixes_the_text_after_bos``). A tokenizer.json run's
    marker without the key is kept: its chat ids did not change."""
    import pyarrow.parquet as pq

    from rmlprep.config import config_from_dict
    from rmlprep.pipeline import run

    rows = tmp_path / "chat.jsonl"
    rows.write_text("".join(json.dumps({"messages": CONV}) + "\n" for _ in range(3)))

    def conf(tokenizer, out, fmt, **chat):
        return config_from_dict({
            "pipeline": "sft", "input": {"paths": [str(rows)], "column": "messages"},
            "tokenizer": {"path": tokenizer}, "chat": {"format": fmt, **chat}, "pack": {"seq_len": 128},
            "output": {"dir": str(out)}, "run": {"workers": 1, "progress": "none", "histogram": False}})

    def strip(out):  # as markers written before chat_text_prefix existed
        for p in out.glob("shard-*.done.json"):
            mk = json.loads(p.read_text())
            del mk["chat_text_prefix"]
            p.write_text(json.dumps(mk))

    model = tmp_path / "model"
    spm_cfg = conf(str(_path("llama2")), model, "llama2")
    run(spm_cfg, log=lambda s: None)
    strip(model)
    logs: list[str] = []
    m = run(spm_cfg, resume=True, log=logs.append)
    assert m["units_processed"] == 1
    assert any("predates a .model's own '▁' before each text" in x for x in logs), logs
    ids = pq.read_table(next(model.glob("train-*.parquet"))).column("input_ids")[0].as_py()
    assert ids[:3] == [1, 518, 25580]

    tiny_json = Path(__file__).resolve().parents[1] / "fixtures" / "tokenizers" / "bl_gpt2_digits.json"
    other = tmp_path / "json"
    json_cfg = conf(str(tiny_json), other, "chatml", text_markers=True)  # the tiny vocabulary has no <|im_end|>
    run(json_cfg, log=lambda s: None)
    strip(other)
    m = run(json_cfg, resume=True, log=lambda s: None)
    assert m["units_processed"] == 0
