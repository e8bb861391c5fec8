"""The load-time cache (rmlprep.cache): a cached load gives the tokenizer an uncached one gives;
a changed file, config or argument is a new entry; a corrupt entry is ignored."""

from __future__ import annotations

import json
import os
import pickle
import time
from pathlib import Path

import numpy as np
import pytest

from rmlprep import cache, load
from rmlprep.load import load_tokenizer
from rmlprep.tokenizer import Tokenizer
from tools.make_parity_fixtures import HARD_STRINGS, real_dir

REAL = real_dir()
TEXTS = [*HARD_STRINGS, "Hello world, ça va? 你好 <s> <|endoftext|>", "  x\n\n\ty  "]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """An empty cache directory, the cache on, and every file cached whatever its size."""
    d = tmp_path / "cache"
    monkeypatch.setenv("RMLPREP_CACHE", str(d))
    monkeypatch.setenv("RMLPREP_TOKENIZER_CACHE", "1")
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    return d / "tokenizers"


def _tokenizer_json(merges=("a b", "ab c"), template="{{ messages }}") -> dict:
    vocab = {c: i for i, c in enumerate("abcdefgh ")}
    vocab.update({"ab": 9, "abc": 10, "Ġ": 11})
    return {
        "model": {"type": "BPE", "vocab": vocab, "merges": list(merges)},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "normalizer": None,
        "added_tokens": [{"id": 12, "content": "<s>", "special": True}],
        "post_processor": None,
        "decoder": {"type": "ByteLevel"},
    }


def _write(d: Path, template: str = "T1", **kw) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "tokenizer.json").write_text(json.dumps(_tokenizer_json(**kw)))
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    return d / "tokenizer.json"


def _no_parse(monkeypatch):
    """Make any parse of a tokenizer file fail: a load that succeeds came from the cache."""
    def boom(*a, **k):
        raise AssertionError("the file was parsed; expected a cache hit")
    monkeypatch.setattr(load, "load_spec", boom)


def _same(a: Tokenizer, b: Tokenizer, texts=TEXTS) -> None:
    assert a.spec == b.spec and a.spec.name == b.spec.name and a.chat_template == b.chat_template
    assert a.spec.fingerprint == b.spec.fingerprint
    for t in texts:
        ids = a.encode(t, add_special_tokens=True)
        assert b.encode(t, add_special_tokens=True) == ids, t
        assert b.decode(ids) == a.decode(ids)


def test_a_linked_tokenizer_json_is_keyed_by_the_config_beside_the_link(cache_dir, tmp_path):
    """A Hugging Face hub snapshot links each file into blobs/: two snapshots (or two folders)
    may link one tokenizer.json beside different tokenizer_config.json files. Each load reads the
    config beside the link, so the cache key must hash that one; it hashed the config beside the
    link's target, and the second folder got the first one's chat template."""
    blob = _write(tmp_path / "blobs", template="BLOB")
    for name, template in (("a", "TA"), ("b", "TB")):
        d = tmp_path / name
        d.mkdir()
        (d / "tokenizer.json").symlink_to(blob)
        (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    assert [load_tokenizer(tmp_path / n).chat_template for n in ("a", "b", "a", "b")] == ["TA", "TB", "TA", "TB"]


def test_hit_gives_the_same_tokenizer(cache_dir, tmp_path, monkeypatch):
    """"abc" merges a+b (rank 0) then ab+c (rank 1): id 10, from the file and from the entry."""
    p = _write(tmp_path / "t")
    first = load_tokenizer(p)
    assert first.encode("abc") == [10] and first.chat_template == "T1"
    assert len(list(cache_dir.glob("*.bin"))) == 1
    _no_parse(monkeypatch)
    second = load_tokenizer(p)
    _same(first, second)
    assert second.encode("abc") == [10]
    np.testing.assert_array_equal(second._merge_table, first._merge_table)
    assert second._merges == first._merges


def test_changed_file_or_config_is_a_new_entry(cache_dir, tmp_path):
    """Without the merge "ab c", "abc" is [ab, c] = [9, 2]; a new chat template in
    tokenizer_config.json is seen too."""
    p = _write(tmp_path / "t")
    assert load_tokenizer(p).encode("abc") == [10]
    _write(tmp_path / "t", merges=("a b",))
    assert load_tokenizer(p).encode("abc") == [9, 2]
    _write(tmp_path / "t", merges=("a b",), template="T2")
    assert load_tokenizer(p).chat_template == "T2"
    assert len(list(cache_dir.glob("*.bin"))) == 3
    (tmp_path / "t" / "chat_template.jinja").write_text("T3")  # read over the config's, as transformers does
    assert load_tokenizer(p).chat_template == "T3"
    (tmp_path / "t" / "chat_template.jinja").write_text("T4")
    assert load_tokenizer(p).chat_template == "T4"
    assert len(list(cache_dir.glob("*.bin"))) == 5


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "garbage", "bad-pickle"])
def test_corrupt_entry_is_ignored_and_rewritten(cache_dir, tmp_path, monkeypatch, damage):
    p = _write(tmp_path / "t")
    want = load_tokenizer(p)
    (entry,) = cache_dir.glob("*.bin")
    data = entry.read_bytes()
    if damage == "flip":
        data = data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:]
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = b""
    elif damage == "garbage":
        data = os.urandom(200)
    else:  # a valid checksum over a payload that is not an entry
        import hashlib

        payload = pickle.dumps({"spec": "not a spec"})
        data = cache.MAGIC + hashlib.sha256(payload).digest() + payload
    entry.write_bytes(data)
    assert cache.lookup(entry) is None
    got = load_tokenizer(p)
    _same(want, got)
    assert cache.lookup(entry) is not None  # rewritten by the load


def test_arguments_and_overrides(cache_dir, tmp_path):
    """Spec-field overrides are applied to a cached spec and never stored; tiktoken arguments
    are part of the key."""
    p = _write(tmp_path / "t")
    load_tokenizer(p)
    tok = load_tokenizer(p, bos_id=12, add_bos=True)
    assert tok.encode("abc", add_special_tokens=True) == [12, 10]
    assert load_tokenizer(p).encode("abc", add_special_tokens=True) == [10]
    assert len(list(cache_dir.glob("*.bin"))) == 1
    import base64

    ranks = tmp_path / "r.tiktoken"
    ranks.write_bytes(b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256)))
    a = load_tokenizer(ranks, pattern=r"\S+|\s+", special_tokens={"<|a|>": 256})
    b = load_tokenizer(ranks, pattern=r"\S+|\s+", special_tokens={"<|b|>": 256})
    assert a.encode("<|a|>") == [256] and b.encode("<|b|>") == [256] and b.encode("<|a|>") != [256]


def test_off_small_or_unwritable(tmp_path, monkeypatch):
    """RMLPREP_TOKENIZER_CACHE=0, a file under MIN_BYTES, or a cache path that is a file: the
    load works and writes nothing."""
    p = _write(tmp_path / "t")
    d = tmp_path / "cache"
    monkeypatch.setenv("RMLPREP_CACHE", str(d))
    monkeypatch.setenv("RMLPREP_TOKENIZER_CACHE", "0")
    assert load_tokenizer(p).encode("abc") == [10] and not d.exists()
    monkeypatch.setenv("RMLPREP_TOKENIZER_CACHE", "1")
    assert load_tokenizer(p).encode("abc") == [10] and not d.exists()  # the file is under MIN_BYTES
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    d.write_text("a file where the directory should be")
    assert load_tokenizer(p).encode("abc") == [10]


def test_prune_keeps_the_most_recent(cache_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "MAX_ENTRIES", 2)
    paths = [_write(tmp_path / f"t{i}", template=f"T{i}") for i in range(4)]
    for i, p in enumerate(paths):
        load_tokenizer(p)
        for e in cache_dir.glob("*.bin"):  # mtimes a second apart, oldest first
            os.utime(e, (e.stat().st_mtime - 10, e.stat().st_mtime - 10))
    assert len(list(cache_dir.glob("*.bin"))) == 2
    _no_parse(monkeypatch)
    assert load_tokenizer(paths[3]).chat_template == "T3"  # the newest is still there


@pytest.mark.slow
@pytest.mark.parametrize("rel", ["hf/llama3/tokenizer.json", "hf/gemma3/tokenizer.json", "hf/gpt-4o/tokenizer.json",
                                 "gguf/ggml-vocab-qwen2.gguf", "llama3/llama3.tiktoken"])
def test_real_files_cached_equal_uncached(cache_dir, monkeypatch, rel):
    """A real file: the tokenizer from the entry equals the one parsed, on hard strings."""
    p = REAL / rel
    if not p.is_file():
        pytest.skip(f"{p} is absent: run ../shared/real-tokenizers/get.sh")
    first = load_tokenizer(p)
    assert len(list(cache_dir.glob("*.bin"))) == 1
    _no_parse(monkeypatch)
    second = load_tokenizer(p)
    _same(first, second)
    if first._merge_table is not None:
        np.testing.assert_array_equal(second._merge_table, first._merge_table)


def test_gguf_key_is_its_metadata(cache_dir, tmp_path, monkeypatch):
    """A GGUF entry is keyed by the header and key-values (the tokenizer's bytes): bytes appended
    after them (tensor data) find the same entry; a changed token is a new entry."""
    from tests.test_gguf import _tiny_llama_kvs, write_gguf

    (tmp_path / "a").mkdir()
    a = write_gguf(tmp_path / "a" / "m.gguf", _tiny_llama_kvs())
    first = load_tokenizer(a)
    a.write_bytes(a.read_bytes() + b"\0" * 4096)
    with monkeypatch.context() as m:
        _no_parse(m)
        _same(first, load_tokenizer(a), texts=["ab abc", "x"])
    data = bytearray(a.read_bytes())
    data[data.index("\u2581ab".encode()) + 3] = ord("x")  # the token "▁ab" becomes "▁xb"
    a.write_bytes(bytes(data))
    assert load_tokenizer(a).spec != first.spec
    assert len(list(cache_dir.glob("*.bin"))) == 2


# -- the digest memo (rmlprep.cache_memo) ---------------------------------------------------------
def _memo(cache_dir: Path) -> dict:
    return json.loads((cache_dir / "index.json").read_text())["files"]


def test_hit_seeds_the_fingerprint_written_with_the_entry(cache_dir, tmp_path):
    """A cache hit takes the fingerprint stored in the entry (0.3 s of canonical JSON for Llama 3);
    it equals the fingerprint computed afresh from the same spec's fields."""
    from rmlprep.spec import TokenizerSpec, _known_fingerprint

    p = _write(tmp_path / "t")
    want = load_tokenizer(p).fingerprint
    hit = load_tokenizer(p)
    assert _known_fingerprint(hit.spec) == want == TokenizerSpec.from_dict(hit.spec.to_dict()).fingerprint


def test_memo_spares_the_hash(cache_dir, tmp_path, monkeypatch):
    """A settled file (here: settled at once) is hashed once; the next load finds its entry by the
    remembered digest without reading it (hashing now fails, the load still hits)."""
    monkeypatch.setattr(cache.cache_memo, "SETTLED_NS", 0)
    p = _write(tmp_path / "t")
    first = load_tokenizer(p)
    assert str(p.resolve()) in _memo(cache_dir)

    def no_hash(*a, **k):
        raise AssertionError("the file was hashed; expected the memo to answer")
    monkeypatch.setattr(cache.hashlib, "file_digest", no_hash)
    _no_parse(monkeypatch)
    _same(first, load_tokenizer(p))


def test_edit_in_place_with_size_and_mtime_restored_is_seen(cache_dir, tmp_path, monkeypatch):
    """The stale-tokenizer case the memo must not miss: the ids of "ab" and "abc" are swapped in
    place (same size), and the mtime is set back (``os.utime``). The ctime moved (the kernel sets
    it on the write and on the utime; nothing sets it back), so the memo's stat key no longer
    matches, the file is hashed again and its new entry gives "abc" -> 9."""
    monkeypatch.setattr(cache.cache_memo, "SETTLED_NS", 0)
    p = _write(tmp_path / "t")
    assert load_tokenizer(p).encode("abc") == [10]
    assert load_tokenizer(p).encode("abc") == [10]  # a hit through the memo
    before = p.stat()
    time.sleep(0.05)  # past the file clock's tick (1-10 ms)
    text = p.read_text()
    edited = text.replace('"ab": 9, "abc": 10', '"ab": 10, "abc": 9')
    assert edited != text and len(edited) == len(text)
    with open(p, "r+") as f:  # in place: same inode
        f.write(edited)
    os.utime(p, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = p.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns
    assert load_tokenizer(p).encode("abc") == [9]


def test_racy_file_is_not_remembered(cache_dir, tmp_path):
    """A file changed less than SETTLED_NS (2 s) before it is read is hashed on every load: a
    write within the same clock tick could leave its whole stat key unchanged."""
    p = _write(tmp_path / "t")
    assert load_tokenizer(p).encode("abc") == [10]
    index = cache_dir / "index.json"
    assert not index.exists() or str(p.resolve()) not in _memo(cache_dir)


def test_memo_of_another_code_or_corrupt_is_ignored(cache_dir, tmp_path, monkeypatch):
    """A memo written by other rmlprep code, an unreadable one, or a record whose stat key differs
    (another inode) gives no digest: the file is hashed and the load is right."""
    monkeypatch.setattr(cache.cache_memo, "SETTLED_NS", 0)
    p = _write(tmp_path / "t")
    load_tokenizer(p)
    index = cache_dir / "index.json"
    d = json.loads(index.read_text())
    rec = d["files"][str(p.resolve())]
    wrong = "0" * 64
    for doc in ({"code": "other", "files": {str(p.resolve()): [*rec[:5], wrong]}},
                {"code": d["code"], "files": {str(p.resolve()): [rec[0], rec[1] + 1, *rec[2:5], wrong]}}):
        index.write_text(json.dumps(doc))
        assert cache.file_sha256(p) == rec[5]
    index.write_text("{not json")
    assert cache.file_sha256(p) == rec[5]
    assert load_tokenizer(p).encode("abc") == [10]


def test_gguf_memo_spares_the_metadata_walk(cache_dir, tmp_path, monkeypatch):
    """A GGUF's key-value walk (60 ms for Qwen2's 152k tokens) is remembered like a file hash."""
    from tests.test_gguf import _tiny_llama_kvs, write_gguf

    monkeypatch.setattr(cache.cache_memo, "SETTLED_NS", 0)
    (tmp_path / "a").mkdir()
    a = write_gguf(tmp_path / "a" / "m.gguf", _tiny_llama_kvs())
    first = load_tokenizer(a)
    import rmlprep.gguf

    def no_walk(*a, **k):
        raise AssertionError("the key-values were walked; expected the memo to answer")
    monkeypatch.setattr(rmlprep.gguf, "metadata_sha256", no_walk)
    _no_parse(monkeypatch)
    _same(first, load_tokenizer(a), texts=["ab abc", "x"])


def test_parity_key_is_every_byte_and_remembered(cache_dir, tmp_path, monkeypatch):
    """The parity stage finds a fixture by the sha256 of every byte of the tokenizer file (for a
    GGUF: tensors too, unlike the load cache's key): computed once for a settled file, then
    remembered apart from the load cache's key; a changed file (here a byte appended) is hashed
    again."""
    import hashlib

    from rmlprep import parity
    from tests.test_gguf import _tiny_llama_kvs, write_gguf

    monkeypatch.setattr(cache.cache_memo, "SETTLED_NS", 0)
    a = write_gguf(tmp_path / "m.gguf", _tiny_llama_kvs())
    whole = hashlib.sha256(a.read_bytes()).hexdigest()
    assert parity.file_sha256(a) == whole
    assert cache.file_sha256(a).startswith("gguf-metadata:")
    with monkeypatch.context() as m:
        m.setattr(cache.hashlib, "file_digest", lambda *a, **k: 1 / 0)
        assert parity.file_sha256(a) == whole  # the memo answered
    time.sleep(0.05)
    with open(a, "ab") as f:
        f.write(b"\0")
    assert parity.file_sha256(a) == hashlib.sha256(a.read_bytes()).hexdigest() != whole


def test_tiktoken_name_is_an_argument_not_an_override(cache_dir, monkeypatch):
    """``name=`` is a tiktoken loader argument that is also a TokenizerSpec field: taken as an
    override it kept every ``load_tokenizer(rank_file, name="gpt2")`` (the main job's tokenizer,
    0.14 s to parse) out of the cache. Now it is part of the key, and the hit gives the same
    tokenizer, named by the encoding."""
    p = REAL / "gpt2" / "gpt2.tiktoken"
    if not p.is_file():
        pytest.skip(f"{p} is absent: run ../shared/real-tokenizers/get.sh")
    first = load_tokenizer(p, name="gpt2")
    assert first.spec.name == "gpt2" and len(list(cache_dir.glob("*.bin"))) == 1
    _no_parse(monkeypatch)
    _same(first, load_tokenizer(p, name="gpt2"))
