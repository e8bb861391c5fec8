"""The main job end to end: determinism over workers, tail rule, rejects, parity gate, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from rmlprep.config import config_from_dict
from rmlprep.errors import ConfigError, ParityError
from rmlprep.packing import unpack
from rmlprep.pipeline import open_tokenizer, run
from rmlprep.shards import read_shard_metadata

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "tokenizers" / "bl_gpt2_digits.json"
SHARED = ROOT.parent / "shared"
TEXT = SHARED / "corpora" / "text-multilingual.jsonl"
FORMATS = SHARED / "corpora" / "formats"

pytestmark = pytest.mark.skipif(not TINY.exists(), reason=f"{TINY} is absent")


def quiet(_msg: str) -> None:
    pass


def write_corpus(path: Path, n_docs: int = 300) -> list[str]:
    """Real text when ../shared is there (first documents of text-multilingual), else synthetic."""
    texts: list[str] = []
    if TEXT.exists():
        with open(TEXT, "rb") as f:
            for line in f:
                texts.append(json.loads(line)["text"][:3000])
                if len(texts) == n_docs:
                    break
    else:
        texts = [f"Document {i}: " + "word " * (i % 97) + "\u2028end" for i in range(n_docs)]
    path.write_bytes(b"".join(json.dumps({"text": t}, ensure_ascii=False).encode() + b"\n" for t in texts))
    return texts


def make_cfg(inp: Path, out: Path, *, workers=1, seq_len=128, **extra):
    d = {
        "input": {"paths": [str(inp)], "unit_bytes": 40_000, "batch_rows": 64},
        "tokenizer": {"path": str(TINY)},
        "pack": {"seq_len": seq_len},
        "output": {"dir": str(out)},
        "run": {"workers": workers, "progress": "none", "histogram": False},
    }
    for k, v in extra.items():
        d.setdefault(k, {}).update(v) if isinstance(v, dict) else d.__setitem__(k, v)
    return config_from_dict(d)


def shard_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("shard-*.parquet"))}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "c.jsonl"
    return p, write_corpus(p)


def test_workers_do_not_change_bytes(corpus, tmp_path):
    inp, _ = corpus
    m1 = run(make_cfg(inp, tmp_path / "w1", workers=1), log=quiet)
    m2 = run(make_cfg(inp, tmp_path / "w2", workers=2), log=quiet)
    a, b = shard_bytes(tmp_path / "w1"), shard_bytes(tmp_path / "w2")
    assert len(a) > 3 and a == b
    assert m1["totals"] == m2["totals"] and m2["workers"] == 2


def test_every_token_kept_and_tail_rule(corpus, tmp_path):
    inp, texts = corpus
    out = tmp_path / "o"
    m = run(make_cfg(inp, out), log=quiet)
    tok = open_tokenizer(str(TINY))[0]
    eos = tok.eos_id
    got: list[list[int]] = []
    for p in sorted(out.glob("shard-*.parquet")):
        t = pq.read_table(p)
        lens = [len(r) for r in t.column("input_ids").to_pylist()]
        assert all(n == 128 for n in lens[:-1]) and 0 < lens[-1] <= 128  # only the last row may be short
        docs = unpack(t)
        got.extend(docs[i].tolist() for i in range(len(docs)))
        md = read_shard_metadata(p)
        assert md["rmlprep.tokenizer_fingerprint"] == tok.fingerprint
        assert md["rmlprep.config_hash"] == m["config_hash"]
        assert md["rmlprep.version"]
    expected = [tok.encode(t, parse_special=False) + [eos] for t in texts]
    assert got == expected
    assert m["totals"]["documents"] == len(texts) and m["totals"]["rejects"] == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["tokens"] == sum(len(e) - 1 for e in expected)
    assert (out / "stats.json").exists()


def test_rejects(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"text": "good one"}\n{"text": null}\n{"text": 42}\n{broken\n{"text": "good two"}\n{"id": 1}\n')
    out = tmp_path / "o"
    m = run(make_cfg(p, out), log=quiet)
    assert m["totals"]["documents"] == 2 and m["totals"]["rejects"] == 4
    assert m["totals"]["rows_read"] == 6
    recs = [json.loads(x) for x in (out / "rejects" / "rejects-00000.jsonl").read_text().splitlines()]
    assert [r["row"] for r in recs] == [1, 2, 3, 5]
    assert "null" in recs[0]["reason"] and "int" in recs[1]["reason"] and "JSON" in recs[2]["reason"]
    assert all(r["source"] == str(p) for r in recs)
    assert m["rejects"]["files"] == ["rejects/rejects-00000.jsonl"]


def test_sft_rejects_and_bfd(tmp_path):
    p = tmp_path / "chat.jsonl"
    good = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]
    rows = [good, None, "text", [{"role": "user"}], [{"role": "wizard", "content": "x"}], good]
    p.write_text("".join(json.dumps({"messages": r}) + "\n" for r in rows))
    out = tmp_path / "o"
    m = run(make_cfg(p, out, pipeline="sft", chat={"format": "chatml"}, pack={"overflow": "truncate"}), log=quiet)
    assert m["totals"]["documents"] == 2 and m["totals"]["rejects"] == 4
    recs = [json.loads(x) for x in (out / "rejects" / "rejects-00000.jsonl").read_text().splitlines()]
    assert [r["row"] for r in recs] == [1, 2, 3, 4]
    t = pq.read_table(out / "shard-00000.parquet")
    assert set(t.column_names) >= {"input_ids", "labels", "assistant_masks", "seq_lengths"}
    labels = t.column("labels").to_pylist()[0]
    assert -100 in labels and any(x != -100 for x in labels)


@pytest.mark.skipif(not FORMATS.is_dir(), reason=f"{FORMATS} is absent")
def test_sft_real_chat_parquet(tmp_path):
    m = run(make_cfg(FORMATS / "chat_hh.parquet", tmp_path / "o", pipeline="sft", chat={"format": "chatml"},
                     seq_len=512, input={"unit_rows": 600}), log=quiet)
    assert m["totals"]["rows_read"] == 2312
    assert m["totals"]["documents"] + m["totals"]["rejects"] == 2312


def test_parity_failure_stops_the_run(corpus, tmp_path):
    inp, _ = corpus
    fx = json.loads(TINY.read_text())
    case = next(c for c in fx["cases"] if len(c["ids"]) > 1)
    case["ids"][1] += 1
    bad = tmp_path / "doctored.json"
    bad.write_text(json.dumps(fx))
    out = tmp_path / "o"
    with pytest.raises(ParityError) as e:
        run(make_cfg(inp, out, parity={"fixture": str(bad)}), log=quiet)
    assert e.value.position == 1
    assert not list(out.glob("shard-*")) if out.exists() else True


def test_parity_required_without_fixture(corpus, tmp_path):
    inp, _ = corpus
    spec = tmp_path / "t.spec.json"
    spec.write_text(json.dumps(open_tokenizer(str(TINY))[0].spec.to_dict()))
    cfg = make_cfg(inp, tmp_path / "o", tokenizer={"path": str(spec)}, parity={"require": True})
    with pytest.raises(ConfigError, match="parity.require"):
        run(cfg, log=quiet)


def test_resume_skips_and_redoes(corpus, tmp_path):
    inp, _ = corpus
    out = tmp_path / "o"
    run(make_cfg(inp, out), log=quiet)
    ref = shard_bytes(out)
    (out / "shard-00001.parquet").write_bytes(b"garbage")
    (out / "shard-00002.done.json").unlink()
    logs: list[str] = []
    m = run(make_cfg(inp, out, workers=2), resume=True, log=logs.append)
    assert m["units_processed"] == 2 and m["units_skipped"] == len(ref) - 2
    assert shard_bytes(out) == ref
    assert any("shard sha256 differs" in x for x in logs)


def test_other_config_refused(corpus, tmp_path):
    inp, _ = corpus
    out = tmp_path / "o"
    run(make_cfg(inp, out), log=quiet)
    with pytest.raises(ConfigError, match="--overwrite"):
        run(make_cfg(inp, out, seq_len=64), log=quiet)
    m = run(make_cfg(inp, out, seq_len=64), overwrite=True, log=quiet)
    assert m["units_processed"] == len(m["shards"])


def test_kill_and_resume_gives_same_bytes(tmp_path):
    inp = tmp_path / "c.jsonl"
    write_corpus(inp, 600)
    toml = tmp_path / "c.toml"
    toml.write_text(
        f'[input]\npaths = ["{inp}"]\nunit_bytes = 25000\nbatch_rows = 32\n'
        f'[tokenizer]\npath = "{TINY}"\n[pack]\nseq_len = 256\n'
        f'[output]\ndir = "{tmp_path / "killed"}"\n[run]\nworkers = 1\nprogress = "log"\nhistogram = false\n'
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "rmlprep.cli", "run", str(toml)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    out = tmp_path / "killed"
    deadline = time.time() + 60
    while time.time() < deadline and len(list(out.glob("*.done.json"))) < 2 and proc.poll() is None:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(out.glob("*.done.json")))
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "manifest.json").exists()  # it really died mid-way
    r = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["units_skipped"] >= done_before >= 2
    assert not list(out.glob("*.tmp-*"))
    r = subprocess.run(cmd + ["--output", str(tmp_path / "clean")], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert shard_bytes(out) == shard_bytes(tmp_path / "clean")
    assert len(shard_bytes(out)) == len(m["shards"]) > done_before


def test_histogram_png(corpus, tmp_path):
    pytest.importorskip("matplotlib")
    inp, _ = corpus
    out = tmp_path / "o"
    cfg = make_cfg(inp, out, run={"histogram": True})
    run(cfg, log=quiet)
    assert (out / "lengths.png").read_bytes()[:4] == b"\x89PNG"
    stats = json.loads((out / "stats.json").read_text())
    assert sum(stats["document_tokens"]["hist"].values()) == 300
    assert np.isfinite(stats["document_tokens"]["mean"])


# -- chat parity (sft) --------------------------------------------------------------------------
CHAT_RENDERS = ROOT / "fixtures" / "chat" / "renders.jsonl"
SHARED_TEMPLATES = SHARED / "chat-templates"
REAL_HF = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", Path.home() / ".cache" / "rmlprep-real-tokenizers")) / "hf"
#: ChatML as OpenHermes writes it; the test gives it the name of a committed template through
#: its own renders banner (the committed fixtures hold no template text).
CHATML_TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] "
                   "+ '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
                   "{% endif %}")
needs_renders = pytest.mark.skipif(not CHAT_RENDERS.exists(), reason=f"{CHAT_RENDERS} is absent")


def _render_records() -> list[dict]:
    return [json.loads(x) for x in CHAT_RENDERS.read_text(encoding="utf-8").splitlines()]


def _chatml_rows() -> int:
    names = {"chatml-openhermes", "qwen2", "qwen2.5", "smollm2"}
    return sum(r.get("template") in names for r in _render_records())


def write_chats(path: Path, n: int = 40) -> None:
    convs = []
    for i in range(n):
        c = [{"role": "user", "content": f"question {i}: what is {i} + {i}?"},
             {"role": "assistant", "content": f"{i} + {i} = {2 * i}."}]
        if i % 3 == 0:
            c.insert(0, {"role": "system", "content": "Answer briefly."})
        convs.append(c)
    path.write_text("".join(json.dumps({"messages": c}) + "\n" for c in convs))


def sft_cfg(inp: Path, out: Path, **extra):
    return make_cfg(inp, out, pipeline="sft", chat={"format": extra.pop("fmt", "chatml")},
                    pack={"overflow": "truncate"}, **extra)


def tiny_with_template(template: str):
    from rmlprep.tokenizer import Tokenizer

    return Tokenizer.create(open_tokenizer(str(TINY))[0].spec, chat_template=template)


@needs_renders
def test_sft_manifest_records_chat_renders(tmp_path):
    inp = tmp_path / "chat.jsonl"
    write_chats(inp)
    logs: list[str] = []
    m = run(sft_cfg(inp, tmp_path / "o"), log=logs.append)
    chat = m["parity"]["chat"]
    assert chat["rows"] == _chatml_rows() > 300
    assert chat["templates"] == ["chatml-openhermes", "qwen2", "qwen2.5", "smollm2"]
    assert chat["matched_template"] is None and chat["renders"] == str(CHAT_RENDERS)
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["parity"]["chat"] == chat
    assert any(f"{chat['rows']} chat renders" in x for x in logs)


@needs_renders
def test_doctored_chat_render_stops_the_run(tmp_path):
    inp = tmp_path / "chat.jsonl"
    write_chats(inp)
    recs = _render_records()
    row = next(r for r in recs if r.get("template") == "smollm2" and r.get("conversation_id") == "h_system_user_assistant"
               and not r["add_generation_prompt"])
    at = row["output"].index("ahoy")
    row["output"] = row["output"][:at] + "A" + row["output"][at + 1:]
    bad = tmp_path / "renders.jsonl"
    bad.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    out = tmp_path / "o"
    with pytest.raises(ParityError) as e:
        run(sft_cfg(inp, out, parity={"chat_renders": str(bad)}), log=quiet)
    err = e.value
    assert err.expected[err.position] == "A" and err.actual[err.position] == "a"
    assert "smollm2 conversation h_system_user_assistant" in str(err) and "chat text differs" in str(err)
    assert not list(out.glob("shard-*")) if out.exists() else True


@needs_renders
def test_chat_check_off_and_required(tmp_path):
    inp = tmp_path / "chat.jsonl"
    write_chats(inp)
    m = run(sft_cfg(inp, tmp_path / "off", parity={"chat": False}), log=quiet)
    assert m["parity"]["chat"] is None
    empty = tmp_path / "renders.jsonl"
    empty.write_text(json.dumps({"banner": True, "templates_sha256": {}}) + "\n")
    with pytest.raises(ConfigError, match=r"parity.chat = true: .*no chat renders for format 'chatml'"):
        run(sft_cfg(inp, tmp_path / "req", parity={"chat": True, "chat_renders": str(empty)}), log=quiet)
    m = run(sft_cfg(inp, tmp_path / "auto", parity={"chat_renders": str(empty)}), log=quiet)
    assert m["parity"]["chat"]["rows"] == 0
    with pytest.raises(ConfigError, match="parity.chat_renders"):
        run(sft_cfg(inp, tmp_path / "x", parity={"chat_renders": str(tmp_path / "missing.jsonl")}), log=quiet)


def _renders_naming(tmp_path: Path, template: str, name: str) -> Path:
    """The committed renders with the banner's sha256 of ``name`` replaced by ``template``'s."""
    from rmlprep.chat_parity import template_sha256

    recs = _render_records()
    recs[0]["templates_sha256"][name] = template_sha256(template)
    p = tmp_path / "renders.jsonl"
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    return p


@needs_renders
def test_template_matched_by_sha256(tmp_path):
    inp = tmp_path / "chat.jsonl"
    write_chats(inp)
    renders = _renders_naming(tmp_path, CHATML_TEMPLATE, "chatml-openhermes")
    logs: list[str] = []
    m = run(sft_cfg(inp, tmp_path / "o", parity={"chat_renders": str(renders)}),
            tokenizer=tiny_with_template(CHATML_TEMPLATE), log=logs.append)
    chat = m["parity"]["chat"]
    assert chat["matched_template"] == "chatml-openhermes" and chat["templates"] == ["chatml-openhermes"]
    assert chat["rows"] == sum(r.get("template") == "chatml-openhermes" for r in _render_records())
    assert any("chat template is 'chatml-openhermes' (sha256 match" in x for x in logs)
    # the same template named as a Llama 3 one: chat.format "chatml" is refused, naming the key
    renders = _renders_naming(tmp_path, CHATML_TEMPLATE, "llama3")
    with pytest.raises(ConfigError, match=r"chat.format: .*'llama3'.*set chat.format = \"llama3\""):
        run(sft_cfg(inp, tmp_path / "o2", parity={"chat_renders": str(renders)}),
            tokenizer=tiny_with_template(CHATML_TEMPLATE), log=quiet)


@needs_renders
def test_live_chat_sample(tmp_path):
    pytest.importorskip("jinja2")
    inp = tmp_path / "chat.jsonl"
    write_chats(inp)
    m = run(sft_cfg(inp, tmp_path / "o", parity={"chat_live_sample": 7}),
            tokenizer=tiny_with_template(CHATML_TEMPLATE), log=quiet)
    assert m["parity"]["chat"]["live"]["compared"] == 7
    m = run(sft_cfg(inp, tmp_path / "n", parity={"chat_live_sample": 7}), log=quiet)
    assert m["parity"]["chat"]["live"] is None and "no chat template" in m["parity"]["chat"]["live_skipped"]
    # a template one character away from ChatML: the live render stops the run
    doctored = CHATML_TEMPLATE.replace("'\n' + message['content']", "'\n ' + message['content']")
    assert doctored != CHATML_TEMPLATE
    out = tmp_path / "bad"
    with pytest.raises(ParityError, match="live render with the tokenizer's chat template") as e:
        run(sft_cfg(inp, out, parity={"chat_live_sample": 7}), tokenizer=tiny_with_template(doctored), log=quiet)
    assert e.value.expected[e.value.position] == " "
    assert not list(out.glob("shard-*")) if out.exists() else True


@needs_renders
@pytest.mark.skipif(not (SHARED_TEMPLATES / "qwen2.5.jinja").exists(), reason=f"{SHARED_TEMPLATES} is absent")
def test_real_qwen25_template_matched_and_live(tmp_path):
    pytest.importorskip("jinja2")
    inp = tmp_path / "chat.jsonl"
    write_chats(inp)
    tok = tiny_with_template((SHARED_TEMPLATES / "qwen2.5.jinja").read_text(encoding="utf-8"))
    m = run(sft_cfg(inp, tmp_path / "o", parity={"chat_live_sample": 12}), tokenizer=tok, log=quiet)
    chat = m["parity"]["chat"]
    assert chat["matched_template"] == "qwen2.5" and chat["rows"] == 82
    assert chat["live"]["compared"] == 12  # the default system block is removed where none is given


@pytest.mark.parity
@needs_renders
@pytest.mark.skipif(not (REAL_HF / "qwen2.5" / "tokenizer_config.json").exists(), reason=f"{REAL_HF}/qwen2.5 is absent")
def test_real_qwen25_tokenizer_dir(tmp_path):
    inp = tmp_path / "chat.jsonl"
    write_chats(inp)
    cfg = sft_cfg(inp, tmp_path / "o", tokenizer={"path": str(REAL_HF / "qwen2.5")},
                  parity={"chat": True, "chat_live_sample": 10 if _has_jinja2() else 0})
    m = run(cfg, log=quiet)
    chat = m["parity"]["chat"]
    assert chat["matched_template"] == "qwen2.5" and chat["rows"] == 82
    if _has_jinja2():
        assert chat["live"]["compared"] == 10


@pytest.mark.parity
@needs_renders
@pytest.mark.skipif(not (REAL_HF / "llama3" / "tokenizer_config.json").exists(), reason=f"{REAL_HF}/llama3 is absent")
def test_real_llama3_old_template_caught_live(tmp_path):
    """The real llama3 tokenizer dir carries the older Llama-3 template revision (not in the
    fixtures), which appends the assistant header even without add_generation_prompt: the
    fixture check runs every llama3 template; the live render catches the difference."""
    pytest.importorskip("jinja2")
    inp = tmp_path / "chat.jsonl"
    write_chats(inp)
    cfg = sft_cfg(inp, tmp_path / "o", fmt="llama3", tokenizer={"path": str(REAL_HF / "llama3")})
    m = run(cfg, log=quiet)
    assert m["parity"]["chat"]["matched_template"] is None
    assert m["parity"]["chat"]["templates"] == ["llama3", "llama3.1", "llama3.2"]
    cfg = sft_cfg(inp, tmp_path / "live", fmt="llama3", tokenizer={"path": str(REAL_HF / "llama3")},
                  parity={"chat_live_sample": 3})
    with pytest.raises(ParityError, match=r"reference continues: '<\|start_header_id\|>assistant"):
        run(cfg, log=quiet)


def _has_jinja2() -> bool:
    import importlib.util

    return importlib.util.find_spec("jinja2") is not None
