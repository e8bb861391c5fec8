"""Chat on a SentencePiece ``.model`` read without a tokenizer.json: text right after a special
token (rmlprep.spm_special.unprefixed_after_special).

Worked example (Llama 2's tokenizer.model, the reference being sentencepiece itself as Meta's
llama ``chat_completion`` calls it, one ``encode`` per turn with BOS added before it): the
conversation user "Hi" is ``[1] + sp.encode("[INST] Hi [/INST]")`` = ``[1, 518 '▁[', 25580 'INST',
...]``; transformers 4.57.1 and 5.24.0's ``apply_chat_template`` on a ``"legacy": true`` folder give
the same 518. rmlprep's whole-text prefix with the ``llama2`` format's ``"<s>[INST] Hi [/INST]"``
gave ``[1, 29961 '[', 25580, ...]``, ids no reference gives: now refused. mistral-v1, whose render
writes a space after BOS (``"<s> [INST]"``), keeps mistral-common's ids (tests/test_chat_reference.py).
"""

from __future__ import annotations

import json

import pytest

import rmlprep
from rmlprep.errors import TokenizeError
from tools.make_spm_fixtures import MODELS, real_tokenizers_dir

REAL = real_tokenizers_dir()
CONV = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye!"}]


def _path(name):
    path = REAL / MODELS[name]
    if not path.exists():
        pytest.skip(f"{MODELS[name]} not in {REAL}; run `bash ../shared/real-tokenizers/get.sh {REAL}`")
    return path


def test_llama2_format_on_a_model_is_refused_where_references_prefix_the_text():
    spm = pytest.importorskip("sentencepiece")
    path = _path("llama2")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    reference = [1] + sp.encode("[INST] Hi [/INST]")  # Meta's chat_completion for the first turn
    assert reference[:3] == [1, 518, 25580]
    tok = rmlprep.load_tokenizer(str(path))
    with pytest.raises(TokenizeError, match=r"'\[INST\] ' right after the special token '<s>'.*tokenizer\.json"):
        rmlprep.encode_chat(tok, CONV, "llama2")


def test_mistral_v1_on_its_model_still_encodes_as_mistral_common():
    """mistral-common's v1 encodes each turn as ``[BOS] + sp.encode("[INST] Hi [/INST]")``: 733 '▁['."""
    spm = pytest.importorskip("sentencepiece")
    path = _path("mistral-v1")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    tok = rmlprep.load_tokenizer(str(path))
    ids = rmlprep.encode_chat(tok, CONV[:1], "mistral-v1").input_ids
    assert ids == [1] + sp.encode("[INST] Hi [/INST]")


def test_sft_run_refuses_such_a_format_before_any_row(tmp_path, capsys):
    """The same refusal stops an sft run in one line (exit 2) before the corpus is read, where each
    row was rejected one by one (or, before 5cd97be, written with 29961 and exit 0)."""
    from rmlprep.cli import main

    path = _path("llama2")
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
    assert "chat.format = 'llama2': " in err and "right after the special token '<s>'" in err
    assert not list(out.glob("train-*.parquet")) and not (out / "rejects").exists()
