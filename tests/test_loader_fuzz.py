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
    bad_unk = _json_tokenizer()
    bad_unk["model"]["unk_token"] = {"content": "<unk>"}  # found by test_fuzz_tokenizer_json
    put("unk-token-object.json", json.dumps(bad_unk), r"model\.unk_token is dict, expected a string or null")
    put("huge-int.json", '{"model": {"type": "BPE", "vocab": {"a": ' + "9" * 5000 + '}}}', r"not valid JSON")
    put("rank-5000-digits.tiktoken", b"YQ== " + b"9" * 5000 + b"\n", r"line 1: rank 9+\.\.\. \(5000 digits\) is above")
    put("rank-2-40.tiktoken", b"".join(b"%s %d\n" % (__import__("base64").b64encode(bytes([b])), b) for b in range(20))
        + b"YQ== %d\n" % 2**40, r"line 21: rank 1099511627776 \(13 digits\) is above 2147483647")
    put("missing-bytes.tiktoken", b"4oCc 0\nYQ== 1\n", r"255 of the 256 single bytes have no rank \(0x00, 0x01")
    put("garbage.model", bytes(range(7, 256)) * 3, r"not a tokenizer file rmlprep recognises")
    return out


_SEEDS = ["nested-arrays.gguf", "u32-tokens.gguf", "f32-types.gguf", "nan-score.gguf", "truncated.gguf",
          "deep-normalizer.json", "nested-normalizer.json", "post-processor-sequence-str.json",
          "post-processor-special-str.json", "post-processor-special-ids.json", "unk-token-object.json", "huge-int.json",
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


# ----------------------------------------------------------------------------------------------
# The fuzz suite: mutated small valid files of every format, each loaded in a worker process
# limited to 500 MB of address space beyond its start, answering within 2 s.
#
# Property: load_tokenizer(file) returns a tokenizer (which then encodes and decodes a short
# text) or raises LoaderError / UnsupportedTokenizer, within 2 CPU seconds (CPU time, so a busy
# machine does not fail the test; a worker silent for 60 s is hung) and 500 MB; never another
# exception, a hang, a crash or a memory blow-up. Examples are derandomized (the same in every CI run); set
# RMLPREP_FUZZ_EXAMPLES to run more locally.

import base64  # noqa: E402
import os  # noqa: E402
import select  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.test_gguf import _tiny_bpe_kvs, _tiny_llama_kvs, _w_value  # noqa: E402
from tests.test_spm import _model, _piece  # noqa: E402

MEMORY_LIMIT = 500 * 2**20
TIME_LIMIT = 2.0  # CPU seconds of the load, so a busy machine does not fail the test
HANG_LIMIT = 60.0  # wall seconds before a worker is taken for hung
N_EXAMPLES = int(os.environ.get("RMLPREP_FUZZ_EXAMPLES", "60"))

_WORKER = r"""
import resource, sys, time, traceback
from rmlprep import load_tokenizer
from rmlprep.errors import LoaderError, TokenizeError
from rmlprep.pretokenize import GPT2_PATTERN
vm = 0
for line in open("/proc/self/status"):
    if line.startswith("VmSize:"):
        vm = int(line.split()[1]) * 1024
limit = vm + int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
print("ready", flush=True)
for line in sys.stdin:
    if line == "@alloc\n":  # the harness's own check: 600 MB more must fail
        try:
            block = bytearray(600 * 2**20)
            print("0 allocated", flush=True)
        except MemoryError:
            print("0 MemoryError", flush=True)
        continue
    if line == "@sleep\n":  # the harness's own check: a slow answer is reported as a timeout
        time.sleep(300)
    cpu = time.process_time()
    try:
        path = line.rstrip("\n")
        # a rank file of our own with GPT-2's pattern and <|endoftext|> id (name="gpt2" takes
        # only the published 50256 ranks)
        kw = {"pattern": GPT2_PATTERN, "special_tokens": {"<|endoftext|>": 50256}} if path.endswith("ranks.tiktoken") else {}
        tok = load_tokenizer(path, **kw)
        text = "Hello, world! 123 \u00e9\u00e8 <s>"
        tok.decode(tok.encode(text, parse_special=False))
        try:
            tok.decode(tok.encode(text))
        except TokenizeError as e:  # a .model's parsed control text is refused (rmlprep.spm_special)
            if "parse_special=True found the special token" not in str(e):
                raise
        answer = "loaded"
    except LoaderError as e:  # UnsupportedTokenizer is one too
        answer = "refused " + repr(str(e))[:300]
    except BaseException:
        answer = "BUG " + repr(traceback.format_exc()[-3000:])
    print(f"{time.process_time() - cpu:.3f} {answer}", flush=True)
"""


class _Worker:
    """One long-lived loader process (imports once); restarted after a hang or a crash."""

    def __init__(self):
        self.proc = None

    def _start(self):
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER, str(MEMORY_LIMIT)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
        assert self._read(60) == "ready"

    def _read(self, timeout: float) -> str | None:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return line.rstrip("\n") if line else f"DIED with exit code {self.proc.wait()}"

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def load(self, path: Path, timeout: float = HANG_LIMIT) -> str:
        """The worker's answer ("loaded", "refused ...", "BUG ...", "TIMEOUT", "DIED"); an
        answer whose load took more than TIME_LIMIT CPU seconds becomes "SLOW ..."."""
        if self.proc is None:
            self._start()
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        answer = self._read(timeout)
        if answer is None or answer.startswith("DIED"):
            self.stop()
            return answer or f"TIMEOUT after {timeout} s"
        cpu, _, answer = answer.partition(" ")
        if float(cpu) > TIME_LIMIT:
            return f"SLOW: {cpu} CPU seconds ({answer[:200]})"
        return answer


@pytest.fixture(scope="module")
def worker():
    w = _Worker()
    yield w
    w.stop()


def _check(worker: _Worker, path: Path, data: bytes) -> None:
    path.write_bytes(data)
    answer = worker.load(path)
    if not (answer.startswith("loaded") or answer.startswith("refused")):
        keep = ROOT / ".fuzz-failures"
        keep.mkdir(exist_ok=True)
        (keep / path.name).write_bytes(data)
        pytest.fail(f"{path.name} ({len(data)} bytes, kept in {keep / path.name}): {answer}")


# -- byte-level mutations ---------------------------------------------------------------------

_INTERESTING = [0, 1, 2, 7, 8, 9, 12, 255, 256, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**62, 2**63,
                2**64 - 1]


@st.composite
def _mutated(draw, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        n = len(data)
        op = draw(st.sampled_from(["truncate", "flip", "int", "insert", "delete", "duplicate"]))
        at = draw(st.integers(0, max(0, n - 1)))
        if op == "truncate":
            del data[at:]
        elif op == "flip" and n:
            data[at] = draw(st.integers(0, 255))
        elif op == "int":
            width = draw(st.sampled_from([1, 4, 8]))
            v = draw(st.sampled_from(_INTERESTING)) % (1 << (8 * width))
            data[at : at + width] = v.to_bytes(width, "little")
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif op == "duplicate":
            k = draw(st.integers(1, 64))
            data[at:at] = data[at : at + k]
    return bytes(data)


def _gguf_bytes(kvs) -> bytes:
    body = b"".join(_w_str(k) + _w_value(t, v) for k, t, v in kvs)
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + body


_FUZZ_SEEDS = {
    "gguf-bpe": _gguf_bytes(_tiny_bpe_kvs("qwen2")),
    "gguf-llama": _gguf_bytes(_tiny_llama_kvs()),
    "model": _model(
        pieces=[("<unk>", 0, 2), ("<s>", 0, 3), ("</s>", 0, 3)] + [(f"<0x{b:02X}>", 0, 6) for b in range(256)]
        + [("\u2581", -1, 1), ("a", -2, 1), ("\u2581a", -3, 1)],
        trainer_extra=b"\x98\x02\x01",  # field 35 (byte_fallback) = 1
    ),
    "tiktoken": b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256)) + b"YWI= 256\n",
}
# file names: the worker loads ranks.tiktoken with GPT-2's pattern and <|endoftext|> = 50256
_FILE = {"gguf-bpe": "fuzz.gguf", "gguf-llama": "fuzz.gguf", "model": "fuzz.model", "tiktoken": "ranks.tiktoken"}


def test_seeds_load(worker, tmp_path):
    """Every seed is a valid file that loads (so the mutations start from real structure)."""
    for name, data in _FUZZ_SEEDS.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / _FILE[name]).write_bytes(data)
        assert worker.load(tmp_path / name / _FILE[name], timeout=30) == "loaded", name
    (tmp_path / "seed.json").write_text(json.dumps(_json_tokenizer()))
    assert worker.load(tmp_path / "seed.json", timeout=30) == "loaded"


_FUZZ = settings(max_examples=N_EXAMPLES, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                        HealthCheck.data_too_large, HealthCheck.large_base_example])


@pytest.mark.parametrize("seed", sorted(_FUZZ_SEEDS))
def test_fuzz_bytes(worker, tmp_path, seed):
    """Truncated, flipped, overwritten (lengths and counts set to 2**32, 2**64-1...), spliced
    copies of each binary/text seed."""

    @_FUZZ
    @given(data=_mutated(_FUZZ_SEEDS[seed]))
    def run(data):
        _check(worker, tmp_path / _FILE[seed], data)

    run()


# -- structure-aware mutations ----------------------------------------------------------------

_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                       st.text(max_size=12), st.sampled_from(["Sequence", "BPE", "ByteLevel", "Split", "A", "<s>"]))
_JSON = st.recursive(_JSON_LEAF, lambda c: st.one_of(st.lists(c, max_size=4),
                                                      st.dictionaries(st.sampled_from(
                                                          ["type", "id", "ids", "Sequence", "SpecialToken",
                                                           "pattern", "behavior", "content", "normalizers",
                                                           "pretokenizers", "decoders", "vocab", "merges"]), c,
                                                          max_size=4)),
                     max_leaves=12)


@st.composite
def _json_mutated(draw) -> bytes:
    doc = _json_tokenizer()
    for _ in range(draw(st.integers(1, 3))):
        node, key = doc, None
        while True:  # walk down to a random place
            keys = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
            if key is not None and (not keys or draw(st.booleans())):
                break
            if not keys:
                break
            key = draw(st.sampled_from(keys[:64]))
            if isinstance(node[key], (dict, list)) and node[key] and draw(st.booleans()):
                node = node[key]
                key = None
        if key is None:
            continue
        action = draw(st.sampled_from(["replace", "delete", "wrap"]))
        if action == "delete" and isinstance(node, dict):
            del node[key]
        elif action == "wrap":
            node[key] = {"type": "Sequence", "normalizers": [node[key]], "pretokenizers": [node[key]],
                         "decoders": [node[key]], "processors": [node[key]]}
        else:
            node[key] = draw(_JSON)
    return json.dumps(doc).encode()


def test_fuzz_tokenizer_json(worker, tmp_path):
    """tokenizer.json trees with components replaced by random JSON (wrong types, huge ints,
    strings for objects), deleted, or wrapped in Sequences."""

    @_FUZZ
    @given(data=_json_mutated())
    def run(data):
        _check(worker, tmp_path / "tokenizer.json", data)

    run()


_GGUF_VALUES = st.one_of(
    st.tuples(st.just("str"), st.text(max_size=8)),
    st.tuples(st.sampled_from(["u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64"]), st.integers(0, 127)),
    st.tuples(st.sampled_from(["f32", "f64"]), st.floats(allow_nan=True, width=32)),
    st.tuples(st.just("bool"), st.booleans()),
    st.tuples(st.just("arr:str"), st.lists(st.text(max_size=6), max_size=6)),
    st.tuples(st.sampled_from(["arr:u32", "arr:i32", "arr:u8"]), st.lists(st.integers(0, 127), max_size=6)),
    st.tuples(st.just("arr:f32"), st.lists(st.floats(width=32), max_size=6)),
)


@st.composite
def _gguf_mutated(draw) -> bytes:
    kvs = list(draw(st.sampled_from([_tiny_bpe_kvs("qwen2"), _tiny_llama_kvs()])))
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(kvs) - 1))
        key = kvs[i][0]
        action = draw(st.sampled_from(["retype", "delete", "duplicate", "pre"]))
        if action == "retype":
            t, v = draw(_GGUF_VALUES)
            kvs[i] = (key, t, v)
        elif action == "delete":
            del kvs[i]
        elif action == "duplicate":
            kvs.append(kvs[i])
        else:
            from rmlprep._gguf_pre_table import PRE_NAMES

            kvs.append(("tokenizer.ggml.pre", "str", draw(st.sampled_from(sorted(PRE_NAMES) + ["", "new"]))))
        if not kvs:
            break
    return _gguf_bytes(kvs)


def test_fuzz_gguf_keys(worker, tmp_path):
    """GGUF files whose tokenizer keys have the wrong types (tokens as u32, scores as strings,
    NaN floats), are missing, repeated, or name any pre-tokenizer of llama.cpp's table."""

    @_FUZZ
    @given(data=_gguf_mutated())
    def run(data):
        _check(worker, tmp_path / "keys.gguf", data)

    run()


@st.composite
def _tiktoken_mutated(draw) -> bytes:
    lines = _FUZZ_SEEDS["tiktoken"].splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["rank", "token", "delete", "duplicate", "garbage"]))
        tok = lines[i].split(b" ")[0]
        if action == "rank":
            rank = draw(st.one_of(st.integers(0, 300).map(str), st.sampled_from(_INTERESTING).map(str),
                                  st.just("9" * 5000), st.just("-1"), st.just("0x10")))
            lines[i] = tok + b" " + rank.encode()
        elif action == "token":
            lines[i] = base64.b64encode(draw(st.binary(max_size=6))) + b" " + lines[i].split(b" ")[-1]
        elif action == "delete":
            del lines[i]
        elif action == "duplicate":
            lines.insert(i, lines[i])
        else:
            lines[i] = draw(st.binary(max_size=20)).replace(b"\n", b"")
        if not lines:
            break
    return b"\n".join(lines) + b"\n"


def test_fuzz_tiktoken_lines(worker, tmp_path):
    """Rank files with ranks set to huge values (2**40, 5,000 digits), tokens replaced, lines
    deleted or repeated, garbage lines."""

    @_FUZZ
    @given(data=_tiktoken_mutated())
    def run(data):
        _check(worker, tmp_path / "ranks.tiktoken", data)

    run()


def test_worker_enforces_the_limits(worker, tmp_path):
    """The harness itself: the loader process cannot take 600 MB more than it had at start,
    and an answer that does not come in time is reported as a timeout."""
    assert worker.load(Path("@alloc"), timeout=30) == "MemoryError"
    slow = _Worker()
    try:
        assert slow.load(Path("@sleep"), timeout=1.0).startswith("TIMEOUT")
    finally:
        slow.stop()
