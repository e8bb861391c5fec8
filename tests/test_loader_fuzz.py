"""Hostile tokenizer files: every loader reads them, or refuses them with LoaderError /
UnsupportedTokenizer, within bounded time and memory; the CLI exits 2 with one line.

The regular tests here are the seeds of the trust issue (each once raised a traceback or
exhausted memory); the hypothesis suite below mutates small valid files of every format.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from rmlprep import load_tokenizer
from rmlprep.errors import LoaderError, UnsupportedTokenizer
from tests.test_gguf import _w_str, write_gguf

ROOT = Path(__file__).resolve().parent.parent


def _json_tokenizer(**override) -> dict:
    """A tiny byte-level BPE tokenizer.json: the 256 byte characters, two merges, a post-processor."""
    from rmlprep.unicode import bytes_to_unicode

    chars = [bytes_to_unicode()[b] for b in range(256)]
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({"ab": 256, "abc": 257, "<s>": 258})
    data = {
        "version": "1.0",
        "added_tokens": [{"id": 258, "content": "<s>", "special": True, "normalized": False,
                          "lstrip": False, "rstrip": False, "single_word": False}],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True},
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [258], "tokens": ["<s>"]}}},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "ab c"], "unk_token": None},
    }
    data.update(override)
    return data


def _deep(levels: int) -> dict:
    node: dict = {"type": "NFC"}
    for _ in range(levels):
        node = {"type": "Sequence", "normalizers": [node]}
    return node


def _nested_gguf_arrays(depth: int) -> bytes:
    body = _w_str("x") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * depth + struct.pack("<IQ", 4, 0)
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + body


def _seed_files(tmp: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, the refusal's expected text)."""
    out: dict[str, tuple[Path, str]] = {}

    def put(name: str, data: bytes | str, match: str) -> None:
        p = tmp / name
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        out[name] = (p, match)

    put("nested-arrays.gguf", _nested_gguf_arrays(200_000), r"nests arrays more than 8 deep")
    write_gguf(tmp / "u32-tokens.gguf", [("tokenizer.ggml.model", "str", "gpt2"),
                                         ("tokenizer.ggml.tokens", "arr:u32", [1, 2, 3]),
                                         ("tokenizer.ggml.merges", "arr:str", ["a b"])])
    out["u32-tokens.gguf"] = (tmp / "u32-tokens.gguf",
                              r"tokenizer\.ggml\.tokens is an array of uint32, expected an array of strings")
    write_gguf(tmp / "f32-types.gguf", [("tokenizer.ggml.model", "str", "llama"),
                                        ("tokenizer.ggml.tokens", "arr:str", ["<unk>", "a"]),
                                        ("tokenizer.ggml.token_type", "arr:f32", [2.0, 1.0])])
    out["f32-types.gguf"] = (tmp / "f32-types.gguf", r"token_type is an array of float32, expected an array of integers")
    write_gguf(tmp / "nan-score.gguf", [("tokenizer.ggml.model", "str", "llama"),
                                        ("tokenizer.ggml.tokens", "arr:str", ["<unk>", "a"]),
                                        ("tokenizer.ggml.scores", "arr:f32", [0.0, float("nan")])])
    out["nan-score.gguf"] = (tmp / "nan-score.gguf", r"tokenizer\.ggml\.scores\[1\] = nan \('a'\) is not a finite number")
    put("truncated.gguf", (tmp / "u32-tokens.gguf").read_bytes()[:60], r"corrupt or truncated GGUF at byte \d+")
    deep = '{"type": "Sequence", "normalizers": [' * 3000 + '{"type": "NFC"}' + "]}" * 3000
    put("deep-normalizer.json", json.dumps(_json_tokenizer(normalizer="@")).replace('"@"', deep),
        r"not valid JSON \(arrays or objects nested too deeply")
    put("nested-normalizer.json", json.dumps(_json_tokenizer(normalizer=_deep(40))),
        r"normalizer(\.normalizers\[0\])+ nests Sequence components more than 32 deep")
    for name, single in [("sequence-str", [{"Sequence": "A"}]), ("special-str", [{"SpecialToken": "bos"}]),
                         ("special-ids", [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}])]:
        pp = {"type": "TemplateProcessing", "single": single, "pair": [],
              "special_tokens": {"<s>": {"id": "<s>", "ids": ["258"]}}}
        match = {"sequence-str": r"single\[0\]\.Sequence is str, expected a JSON object",
                 "special-str": r"single\[0\]\.SpecialToken is str, expected a JSON object",
                 "special-ids": r"special_tokens\['<s>'\]\.ids\[0\] = '258' is not a token id"}[name]
        put(f"post-processor-{name}.json", json.dumps(_json_tokenizer(post_processor=pp)), match)
    put("huge-int.json", '{"model": {"type": "BPE", "vocab": {"a": ' + "9" * 5000 + '}}}', r"not valid JSON")
    put("rank-5000-digits.tiktoken", b"YQ== " + b"9" * 5000 + b"\n", r"line 1: rank 9+\.\.\. \(5000 digits\) is above")
    put("rank-2-40.tiktoken", b"".join(b"%s %d\n" % (__import__("base64").b64encode(bytes([b])), b) for b in range(20))
        + b"YQ== %d\n" % 2**40, r"line 21: rank 1099511627776 \(13 digits\) is above 2147483647")
    put("missing-bytes.tiktoken", b"4oCc 0\nYQ== 1\n", r"255 of the 256 single bytes have no rank \(0x00, 0x01")
    put("garbage.model", bytes(range(7, 256)) * 3, r"corrupt or truncated SentencePiece model at byte \d+")
    return out


_SEEDS = ["nested-arrays.gguf", "u32-tokens.gguf", "f32-types.gguf", "nan-score.gguf", "truncated.gguf",
          "deep-normalizer.json", "nested-normalizer.json", "post-processor-sequence-str.json",
          "post-processor-special-str.json", "post-processor-special-ids.json", "huge-int.json",
          "rank-5000-digits.tiktoken", "rank-2-40.tiktoken", "missing-bytes.tiktoken", "garbage.model"]


@pytest.mark.parametrize("name", _SEEDS)
def test_hostile_seed_is_refused(tmp_path, name):
    """Each seed raises LoaderError (or UnsupportedTokenizer) naming the file and the fault."""
    path, match = _seed_files(tmp_path)[name]
    with pytest.raises(LoaderError, match=match) as info:
        load_tokenizer(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, (LoaderError, UnsupportedTokenizer))


@pytest.mark.parametrize("command", ["inspect", "encode"])
def test_cli_exits_2_with_one_line(tmp_path, command):
    """`rmlprep inspect|encode FILE` on every seed: exit 2, one line on stderr naming the file,
    nothing on stdout, no traceback."""
    seeds = _seed_files(tmp_path)
    for name in _SEEDS:
        path, _ = seeds[name]
        args = [sys.executable, "-m", "rmlprep.cli", command, str(path)] + (["hello"] if command == "encode" else [])
        r = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=ROOT)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and str(path) in lines[0], (name, r.returncode, r.stderr[-2000:])
        assert r.stdout == "" and "Traceback" not in r.stderr
