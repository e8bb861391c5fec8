"""Load-time cache: a tokenizer file's parsed spec, kept under ``~/.cache/rmlprep/tokenizers/``.

Reading a tokenizer.json or a GGUF vocabulary and indexing its merges costs most of a load
(Llama 3: about 1 s of Python work; the file itself is read in milliseconds). The cache keeps,
per file, what that work produced: the :class:`~rmlprep.spec.TokenizerSpec` (its merges as
token ids), the chat template, and the merge table ``Tokenizer`` builds from the spec. A
second load of the same file reads it back and builds the tokenizer without parsing or
validating again.

Key: the sha256 of the tokenizer file (of a GGUF file: of its key-values,
:func:`rmlprep.gguf.metadata_sha256`) and of the ``tokenizer_config.json`` beside it, the
file's resolved path (the spec's name comes from it), the loader's arguments (tiktoken
``name=``/``pattern=``/``special_tokens=``), rmlprep's version and
the sha256 of rmlprep's own modules (so an edited loader never reads an older entry). An entry
is ``MAGIC``, the sha256 of its payload, then the payload (a pickle written by this module: the
spec with its merges, the chat template, the merge table and the spec's fingerprint); an
entry whose checksum or contents do not match is ignored (and rewritten), so a torn write or a
corrupt file costs a slow load, never a wrong tokenizer. Writes go to a temporary file renamed
into place (concurrent processes never see half an entry). Nothing is cached when the cache
directory cannot be written, for files under :data:`MIN_BYTES` (tens of milliseconds) or
with spec-field overrides (``load_tokenizer(path, add_bos=False)``); at most
:data:`MAX_ENTRIES` entries are kept (least recently used removed).

The file's sha256 is itself remembered (:mod:`rmlprep.cache_memo`) by the file's identity and
change time, so a cache hit reads neither the tokenizer file nor a GGUF's key-values; that
module's docstring says when a remembered digest is trusted (an edit in place that restores
the size and mtime is still seen: it moves the change time, which no program can set back).

``RMLPREP_CACHE`` moves the directory (as for the demo's rank file,
:func:`rmlprep.demo.cache_dir`); ``RMLPREP_TOKENIZER_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import os
import pickle
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import cache_memo
from ._version import __version__
from .errors import LoaderError
from .spec import TokenizerSpec, _remember_fingerprint

__all__ = ["CachedSpec", "enabled", "entry_path", "file_sha256", "lookup", "store"]

MAGIC = b"rmlprep-tokenizer-cache-2\n"
_DIGEST = 32
#: Files smaller than this are not cached: they parse in tens of milliseconds, and the test
#: suites' many tiny tokenizers would push real entries out. GPT-2's 835 KB rank file takes
#: 0.14 s to parse, 0.02 s from its entry.
MIN_BYTES = 256 << 10
#: Entries kept; the least recently used beyond this are removed when one is written.
MAX_ENTRIES = 16


@dataclasses.dataclass(frozen=True, slots=True)
class CachedSpec:
    """What a cache entry gives back.

    Attributes:
        spec: the loaded spec (merges as ``(left, right)`` strings, as the loader made them); its
            :attr:`~rmlprep.spec.TokenizerSpec.fingerprint` is the one computed when the entry
            was written (not recomputed: 0.3 s for Llama 3).
        chat_template: the template the loader found, or None.
        merge_table: uint32 ``[n, 4]`` (left id, right id, rank, merged id), as
            :func:`rmlprep.tokenizer._merge_ids` builds it; None without merges.
    """

    spec: TokenizerSpec
    chat_template: str | None
    merge_table: np.ndarray | None


def enabled() -> bool:
    return os.environ.get("RMLPREP_TOKENIZER_CACHE", "1") not in ("0", "", "false", "no")


def _dir() -> Path:
    from .demo import cache_dir

    return cache_dir() / "tokenizers"


_CODE_DIGEST: str | None = None


def _code_digest() -> str:
    """sha256 of rmlprep's top-level modules (the loaders, the spec, the tokenizer)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        h = hashlib.sha256(__version__.encode())
        for p in sorted(Path(__file__).resolve().parent.glob("*.py")):
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
        _CODE_DIGEST = h.hexdigest()
    return _CODE_DIGEST


def file_sha256(path: str | os.PathLike, *, whole: bool = False) -> str:
    """sha256 hex of the file; of a GGUF file, of its header and key-values only
    (:func:`rmlprep.gguf.metadata_sha256`: the tokenizer is read from them, and a model's
    tensors are gigabytes) unless ``whole`` (every byte: what finds a parity fixture,
    :func:`rmlprep.parity.find_fixture`). Remembered by the file's identity and change time
    (:mod:`rmlprep.cache_memo`) while the cache is on.

    Raises:
        OSError: the file cannot be read. LoaderError: a GGUF file whose key-values cannot be walked.
    """
    memo = cache_memo.Memo(_dir(), _code_digest()) if enabled() else None
    with open(path, "rb") as f:
        started = time.time_ns()
        # fstat on the open file: on NFS the open revalidates the attributes (close-to-open)
        before = os.fstat(f.fileno())
        key = ("whole:" if whole else "") + os.path.abspath(path)
        if memo is not None:
            known = memo.get(key, before)
            if known is not None:
                return known
        if not whole and f.read(4) == b"GGUF":
            from .gguf import metadata_sha256

            digest = "gguf-metadata:" + metadata_sha256(path)
        else:
            f.seek(0)
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    if memo is not None:
        after = os.stat(path)  # by path: also unequal when the path was replaced meanwhile
        memo.put(key, started, before, after, digest)
    return digest


def entry_path(files: Sequence[str | os.PathLike], args: Mapping[str, Any]) -> Path | None:
    """The cache entry for a load of ``files`` (the tokenizer file first; a missing one counts as
    absent) with the loader arguments ``args``; None when the cache is off or a file cannot be
    read."""
    if not enabled():
        return None
    h = hashlib.sha256(_code_digest().encode())
    try:
        if os.path.getsize(files[0]) < MIN_BYTES:
            return None
        for f in files:
            h.update(file_sha256(f).encode() if os.path.isfile(f) else b"absent")
    except (OSError, LoaderError):  # the load itself says what is wrong
        return None
    h.update(json.dumps({k: args[k] for k in sorted(args)}, sort_keys=True, default=repr).encode())
    return _dir() / f"{h.hexdigest()}.bin"


def lookup(entry: Path | None) -> CachedSpec | None:
    """The entry's contents, or None (absent, unreadable, corrupt, or not what :func:`store` writes)."""
    if entry is None:
        return None
    try:
        data = entry.read_bytes()
        os.utime(entry)  # recently used: kept by _prune
    except OSError:
        return None
    head = len(MAGIC) + _DIGEST
    if len(data) < head or not data.startswith(MAGIC):
        return None
    payload = memoryview(data)[head:]
    if hashlib.sha256(payload).digest() != data[len(MAGIC):head]:
        return None
    gc_was_on = gc.isenabled()
    gc.disable()  # ~10^6 new tuples and strs, none of them garbage: the collector's passes would cost 10x the work
    try:
        d = pickle.loads(payload)
        spec, fingerprint = d["spec"], d["fingerprint"]
        table = None if d["merge_table"] is None else np.frombuffer(d["merge_table"], dtype=np.uint32).reshape(-1, 4)
        if not isinstance(spec, TokenizerSpec) or (table is None) != (not spec.merges) \
                or (table is not None and len(table) > len(spec.merges)) \
                or not (isinstance(fingerprint, str) and len(fingerprint) == 64):
            return None
        _remember_fingerprint(spec, fingerprint)
        return CachedSpec(spec, d["chat_template"], table)
    except Exception:  # a corrupt entry with a valid checksum cannot happen short of tampering: rebuild
        return None
    finally:
        if gc_was_on:
            gc.enable()


def store(entry: Path | None, spec: TokenizerSpec, chat_template: str | None, merge_table: np.ndarray | None) -> None:
    """Write the entry (quietly nothing when the directory cannot be written)."""
    if entry is None:
        return
    fingerprint = spec.fingerprint
    if spec.merges:
        # the spec pickles with its merges spelled by the vocab's own str objects: pickle's memo
        # then writes each merge as two references, which load back faster than ids turned into
        # strings again (and share the vocab's memory)
        same = dict(zip(spec.vocab, spec.vocab)).get
        spec = spec.replace(merges=tuple((same(a, a), same(b, b)) for a, b in spec.merges))
    payload = pickle.dumps({
        "spec": spec,
        "chat_template": chat_template,
        "merge_table": None if merge_table is None else np.ascontiguousarray(merge_table, dtype=np.uint32).tobytes(),
        "fingerprint": fingerprint,
    }, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + hashlib.sha256(payload).digest())
                f.write(payload)
            os.replace(tmp, entry)
        except BaseException:
            os.unlink(tmp)
            raise
        _prune(entry.parent)
    except OSError:
        return


def _prune(folder: Path) -> None:
    """Remove the least recently used entries beyond :data:`MAX_ENTRIES` (and stale temporaries)."""
    entries = []
    for p in folder.iterdir():
        try:
            st = p.stat()
        except OSError:
            continue
        if p.name.startswith(".tmp-"):
            if st.st_mtime < time.time() - 3600:
                p.unlink(missing_ok=True)
        elif p.suffix == ".bin":
            entries.append((st.st_mtime, p))
    for _, p in sorted(entries, reverse=True)[MAX_ENTRIES:]:
        p.unlink(missing_ok=True)
