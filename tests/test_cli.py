"""The rmlprep command line: help, exit codes, no tracebacks for user mistakes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmlprep.cli import main

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "tokenizers" / "bl_gpt2_digits.json"
needs_tiny = pytest.mark.skipif(not TINY.exists(), reason=f"{TINY} is absent")


def cli(*args: str, cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "rmlprep.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, input=stdin, timeout=120)


def test_help():
    r = cli("--help")
    assert r.returncode == 0
    for cmd in ("run", "encode", "decode", "inspect", "chat", "parity"):
        assert cmd in r.stdout
    r = cli("run", "--help")
    assert r.returncode == 0 and "--workers" in r.stdout and "--resume" in r.stdout


def test_usage_error_exit_2():
    assert cli().returncode == 2
    assert cli("frobnicate").returncode == 2


def test_missing_config_no_traceback(tmp_path):
    r = cli("run", str(tmp_path / "nope.toml"))
    assert r.returncode == 2
    assert "no such config file" in r.stderr and "Traceback" not in r.stderr


def test_unknown_key_named(tmp_path):
    c = tmp_path / "c.toml"
    c.write_text('[input]\npaths=["x.jsonl"]\nbatch=3\n')
    r = cli("run", str(c))
    assert r.returncode == 2 and "input.'batch'" in r.stderr and "Traceback" not in r.stderr


@needs_tiny
def test_parity_failure_exit_3(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "hello"}\n')
    fx = json.loads(TINY.read_text())
    next(c for c in fx["cases"] if c["ids"])["ids"][0] += 1
    (tmp_path / "fx.json").write_text(json.dumps(fx))
    c = tmp_path / "c.toml"
    c.write_text(f'[input]\npaths=["d.jsonl"]\n[tokenizer]\npath="{TINY}"\n[parity]\nfixture="fx.json"\n'
                 '[pack]\nseq_len=8\n[output]\ndir="out"\n')
    r = cli("run", "c.toml", cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert "parity failure" in r.stderr and "position" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "shard-00000.parquet").exists()


@needs_tiny
def test_run_relative_output_under_cwd(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"text": "hello world"}\n{"text": "again"}\n')
    (tmp_path / "c.toml").write_text(f'[input]\npaths=["d.jsonl"]\n[tokenizer]\npath="{TINY}"\n'
                                     '[pack]\nseq_len=8\n[output]\ndir="out/x"\n[run]\nworkers=1\n')
    r = cli("run", "c.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "x" / "shard-00000.parquet").exists()
    assert "summary" in r.stderr and str(tmp_path / "out" / "x") in r.stdout


@needs_tiny
def test_encode_decode_inspect(capsys):
    assert main(["encode", str(TINY), "Hello 123", "--json"]) == 0
    ids = json.loads(capsys.readouterr().out)
    assert ids and all(isinstance(i, int) for i in ids)
    assert main(["decode", str(TINY), *map(str, ids)]) == 0
    assert capsys.readouterr().out == "Hello 123"
    assert main(["inspect", str(TINY)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["vocab_size"] == 600 and len(info["fingerprint"]) == 64
    # options between the positionals (the README's form) give the same ids
    assert main(["encode", str(TINY), "--json", "Hello 123"]) == 0
    assert json.loads(capsys.readouterr().out) == ids
    assert main(["decode", str(TINY), "--skip-special-tokens", *map(str, ids)]) == 0
    assert capsys.readouterr().out == "Hello 123"
    with pytest.raises(SystemExit):
        main(["encode", str(TINY), "Hello", "--no-such-option"])


@needs_tiny
def test_chat_and_parity_commands(tmp_path, capsys):
    m = tmp_path / "m.json"
    m.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]))
    assert main(["chat", str(m), "--format", "chatml"]) == 0
    assert capsys.readouterr().out == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
    assert main(["chat", str(m), "--format", "chatml", "--tokenizer", str(TINY)]) == 0
    enc = json.loads(capsys.readouterr().out)
    assert len(enc["input_ids"]) == len(enc["assistant_mask"])
    assert main(["chat", str(m), "--format", "no-such-format"]) == 2
    assert main(["parity", str(TINY)]) == 0
    assert "cases match" in capsys.readouterr().out
    assert main(["encode", str(tmp_path / "missing.json"), "x"]) == 2


CHAT_RENDERS = ROOT / "fixtures" / "chat" / "renders.jsonl"
needs_renders = pytest.mark.skipif(not CHAT_RENDERS.exists(), reason=f"{CHAT_RENDERS} is absent")


def _doctored_renders(tmp_path: Path) -> Path:
    recs = [json.loads(x) for x in CHAT_RENDERS.read_text(encoding="utf-8").splitlines()]
    row = next(r for r in recs if r.get("template") == "qwen2" and "output" in r and "Hello" in r["output"])
    row["output"] = row["output"].replace("Hello", "Hallo", 1)
    p = tmp_path / "renders.jsonl"
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    return p


@needs_renders
def test_parity_chat_alone(tmp_path, capsys):
    assert main(["parity", "--chat", "chatml"]) == 0
    assert "renders of chatml-openhermes, qwen2, qwen2.5, smollm2 match format 'chatml'" in capsys.readouterr().out
    assert main(["parity", "--chat", "mistral-v3"]) == 0
    assert main(["parity", "--chat", "nope"]) == 2
    assert main(["parity"]) == 2
    assert main(["parity", "--chat-renders", str(CHAT_RENDERS), str(TINY)]) == 2
    r = cli("parity", "--chat", "chatml", "--chat-renders", str(_doctored_renders(tmp_path)))
    assert r.returncode == 3, r.stderr
    assert "chat text differs" in r.stderr and "reference continues: 'allo, how" in r.stderr and "Traceback" not in r.stderr


@needs_renders
@needs_tiny
def test_sft_run_doctored_chat_render_exit_3(tmp_path):
    (tmp_path / "d.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                                               {"role": "assistant", "content": "yo"}]}) + "\n")
    renders = _doctored_renders(tmp_path)
    c = tmp_path / "c.toml"
    c.write_text(f'pipeline="sft"\n[input]\npaths=["d.jsonl"]\n[tokenizer]\npath="{TINY}"\n'
                 f'[parity]\nchat_renders="{renders.name}"\n[chat]\nformat="chatml"\n'
                 '[pack]\nseq_len=64\n[output]\ndir="out"\n')
    r = cli("run", "c.toml", cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert "parity failure" in r.stderr and "qwen2 conversation" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "shard-00000.parquet").exists()
    c.write_text(c.read_text().replace(f'chat_renders="{renders.name}"', "chat = false"))
    r = cli("run", "c.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "shard-00000.parquet").exists()
