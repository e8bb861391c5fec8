"""Reject kinds: every reject record carries a stable ``kind`` beside its ``reason`` (a
sentence with the row's details), and the manifest counts them (``rejects.by_kind``)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from rmlprep.config import config_from_dict
from rmlprep.pipeline import run
from rmlprep.reject_kinds import KINDS, Reason

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "tokenizers" / "bl_gpt2_digits.json"

pytestmark = pytest.mark.skipif(not TINY.exists(), reason=f"{TINY} is absent")


def quiet(_msg: str) -> None:
    pass


def _run(tmp_path: Path, lines: list[bytes], **extra) -> tuple[dict, list[dict]]:
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(b"".join(x + b"\n" for x in lines))
    d = {"input": {"paths": [str(inp)]}, "tokenizer": {"path": str(TINY)}, "pack": {"seq_len": 64},
         "output": {"dir": str(tmp_path / "o")}, "run": {"workers": 1, "progress": "none", "histogram": False}}
    for k, v in extra.items():
        d.setdefault(k, {}).update(v) if isinstance(v, dict) else d.__setitem__(k, v)
    m = run(config_from_dict(d), log=quiet)
    recs = [json.loads(x) for x in (tmp_path / "o" / "rejects" / "rejects-00000.jsonl").read_text().splitlines()]
    return m, recs


def test_every_pretrain_reject_names_its_kind(tmp_path):
    """One row of each kind the JSONL reader and the pretrain stages reject, in file order (the
    kinds worked out by hand from the rows); each record's kind, the marker's rejects_by_kind and
    the manifest's rejects.by_kind agree, and the fields that were there are unchanged.
    bl_gpt2_digits writes one token per digit: 64 digits and eos are 65 tokens, over seq_len 64."""
    rows = [
        (b'{"text": "fine"}', None),
        (b"{broken", "not_json"),
        (b'{"txt": "x"}', "missing_field"),
        (b"[1, 2]", "not_an_object"),
        (b'{"text": "a", "text": "b"}', "duplicate_key"),
        (b'{"text": "caf\xe9"}', "not_utf8"),
        (b'{"text": ' + b"[" * 150 + b"]" * 150 + b"}", "too_deep"),
        (b'{"text": 1' + b"0" * 5000 + b"}", "unconvertible_value"),
        (b'{"text": "a"}{"text": "b"}', "two_json_objects"),
        (b"\x0c", "bad_whitespace"),
        (b'{"text": null}', "null"),
        (b'{"text": 5}', "wrong_type"),
        (json.dumps({"text": ("0123456789" * 7)[:64]}).encode(), "over_long_dropped"),
        (b'{"text": "also fine"}', None),
    ]
    m, recs = _run(tmp_path, [r for r, _ in rows], pack={"overflow": "drop"})
    want = [(i, k) for i, (_, k) in enumerate(rows) if k]
    assert [(r["row"], r["kind"]) for r in recs] == want
    assert all(list(r)[:6] == ["unit", "source", "row", "stage", "reason", "kind"] for r in recs)
    assert [r["stage"] for r in recs] == ["read"] * 9 + ["validate"] * 2 + ["pack"]
    counts = {k: 1 for _, k in want}
    assert m["rejects"]["by_kind"] == counts and list(m["rejects"]["by_kind"]) == [k for k in KINDS if k in counts]
    marker = json.loads((tmp_path / "o" / "shard-00000.done.json").read_text())
    assert marker["rejects_by_kind"] == counts and m["rejects"]["by_stage"] == {"read": 9, "validate": 2, "pack": 1}


def test_every_sft_reject_names_its_kind(tmp_path):
    """The sft stages' kinds: llama2 refuses a conversation that starts with the assistant
    (format), a role it does not know is outside the messages schema (validate), null messages,
    and a 200-digit prompt that truncation to 64 tokens cuts before its answer (pack)."""
    good = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]
    rows = [
        (good, None),
        (good[::-1], "format_refused"),
        ([{"role": "bot", "content": "x"}], "messages_schema"),
        (None, "null"),
        ([{"role": "user", "content": "0123456789" * 20}, {"role": "assistant", "content": "ok"}], "trains_nothing"),
    ]
    m, recs = _run(tmp_path, [json.dumps({"messages": r}).encode() for r, _ in rows], pipeline="sft",
                   input={"column": "messages"}, chat={"format": "llama2", "text_markers": True},
                   pack={"overflow": "truncate"}, parity={"chat": False})
    assert [(r["row"], r["kind"]) for r in recs] == [(i, k) for i, (_, k) in enumerate(rows) if k]
    assert m["rejects"]["by_kind"] == {"messages_schema": 1, "null": 1, "format_refused": 1, "trains_nothing": 1}


def test_a_kept_marker_without_kinds_makes_the_total_unknown(tmp_path):
    """A unit kept on resume whose marker predates rejects_by_kind: the manifest's by_kind is
    null (not known), as by_stage is for markers before it; a run without rejects gives {}."""
    m, _ = _run(tmp_path, [b'{"text": "fine"}', b"{broken"])
    assert m["rejects"]["by_kind"] == {"not_json": 1}
    marker = tmp_path / "o" / "shard-00000.done.json"
    marker.write_text(json.dumps({k: v for k, v in json.loads(marker.read_text()).items() if k != "rejects_by_kind"}))
    d = {"input": {"paths": [str(tmp_path / "in.jsonl")]}, "tokenizer": {"path": str(TINY)}, "pack": {"seq_len": 64},
         "output": {"dir": str(tmp_path / "o")}, "run": {"workers": 1, "progress": "none", "histogram": False}}
    m = run(config_from_dict(d), log=quiet)
    assert m["units_processed"] == 0 and m["rejects"]["by_kind"] is None


def test_reason_is_its_text_with_a_kind():
    r = Reason("line is not valid JSON (Expecting value at column 1)", "not_json")
    assert r == "line is not valid JSON (Expecting value at column 1)" and r.kind == "not_json"
    back = pickle.loads(pickle.dumps(r))
    assert back == r and back.kind == "not_json"
    assert json.dumps(r) == json.dumps(str(r))
    with pytest.raises(ValueError, match="unknown reject kind"):
        Reason("x", "no_such_kind")
