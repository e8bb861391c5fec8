"""Read a GGUF file's header and key-value metadata (never its tensor data).

GGUF layout (version 2 and 3, little-endian)::

    magic "GGUF" | version u32 | tensor_count u64 | kv_count u64
    kv_count x ( key: string | value_type u32 | value )
    tensor_count x ( name: string | n_dims u32 | n_dims x dim u64 | type u32 | offset u64 )
    padding to general.alignment (default 32) | tensor data        <- never read here

    string = length u64 + UTF-8 bytes
    array  = element_type u32 + count u64 + count elements

Only the header and the key-value section are read, through a read-only ``mmap`` so a multi-GB
model file costs no more than its metadata. Numeric arrays become numpy arrays with one
``np.frombuffer`` call; string arrays (lengths interleaved with the bytes) are walked in one
tight loop over the map. Every length is checked against the bytes left in the file before it
is used, so a corrupt length raises :class:`LoaderError` with its byte offset and never
allocates.

The tensor infos are walked too (never the data): a file whose last tensor's data would end past
the end of the file is a model cut short (a download that stopped) and is refused with both
sizes, as llama.cpp refuses it even for a vocab-only load (``llama_model_loader`` checks every
tensor: "data is not within the file bounds, model is corrupted or incomplete") and the ``gguf``
package's ``GGUFReader`` fails on it. Vocab-only files (``tensor_count`` 0, llama.cpp's
``ggml-vocab-*.gguf``) have nothing to check.

This module owns the binary format: the bounds-checked reader, :func:`read_gguf_metadata` and
:func:`metadata_sha256`. What the tokenizer keys mean (the pre-tokenizer table, the mapping to a
:class:`~rmlprep.spec.TokenizerSpec`) lives in :mod:`rmlprep.gguf`, which re-exports both
functions.

Source: ggml ``docs/gguf.md`` (file format).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import LoaderError, UnsupportedTokenizer

__all__ = ["GGML_TYPE_SIZES", "MAX_ARRAY_DEPTH", "llama_cpp_id", "metadata_sha256", "read_gguf_metadata"]

_MAGIC = b"GGUF"

# value type id -> (name, numpy dtype); STRING = 8 and ARRAY = 9 are handled apart.
_T_STRING = 8
_T_ARRAY = 9
_NUMERIC: dict[int, tuple[str, str]] = {
    0: ("uint8", "<u1"),
    1: ("int8", "<i1"),
    2: ("uint16", "<u2"),
    3: ("int16", "<i2"),
    4: ("uint32", "<u4"),
    5: ("int32", "<i4"),
    6: ("float32", "<f4"),
    7: ("bool", "<u1"),
    10: ("uint64", "<u8"),
    11: ("int64", "<i8"),
    12: ("float64", "<f8"),
}
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
#: Arrays of arrays deeper than this are refused (ggml's own reader refuses any nesting; the
#: ``gguf`` package writes it but no tokenizer key uses it).
MAX_ARRAY_DEPTH = 8
#: ggml tensor type id -> (elements per block, bytes per block): a tensor's data is
#: ``n_elements // block * bytes`` (ggml_nbytes). A type not listed (newer than this table) has
#: only its start checked. Source: ggml ``type_traits``; checked against the ``gguf`` package's
#: ``GGML_QUANT_SIZES`` in tests/test_gguf.py.
GGML_TYPE_SIZES: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 40), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
    15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18),
    21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4),
    27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66),
    39: (32, 17), 40: (64, 36), 41: (128, 18),
}
#: ggml's GGML_MAX_DIMS: gguf.cpp refuses a tensor info with more dimensions.
_MAX_DIMS = 4


def _n(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless one: ``_n(1, "tensor")`` is "1 tensor"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


class _Reader:
    """Bounds-checked little-endian reads from a buffer (an mmap of the file)."""

    __slots__ = ("buf", "path", "size", "pos")

    def __init__(self, buf, path: str):
        self.buf = buf
        self.path = path
        self.size = len(buf)
        self.pos = 0

    def fail(self, what: str, at: int | None = None) -> LoaderError:
        at = self.pos if at is None else at
        return LoaderError(f"{self.path}: corrupt or truncated GGUF at byte {at}: {what}")

    def need(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            raise self.fail(
                f"{what} needs {_n(n, 'byte')} but only {self.size - self.pos} remain "
                f"(file size {self.size}); the file is truncated or the length field is corrupt"
            )

    def u32(self, what: str) -> int:
        self.need(4, what)
        (v,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def u64(self, what: str) -> int:
        self.need(8, what)
        (v,) = _U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return v

    def string(self, what: str) -> str:
        at = self.pos
        n = self.u64(f"length of {what}")
        self.need(n, f"{what} ({_n(n, 'byte')})")
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{what} is not valid UTF-8 ({e.reason} at byte {e.start} of it)", at) from None

    def strings(self, count: int, what: str) -> list[str]:
        """``count`` strings; one tight loop (lengths are interleaved with the bytes)."""
        buf, size, unpack = self.buf, self.size, _U64.unpack_from
        pos = self.pos
        if count > (size - pos) // 8:  # every string takes at least its 8-byte length
            raise self.fail(
                f"{what} claims {_n(count, 'string')}, more than the {_n(size - pos, 'byte')} left can hold"
            )
        out: list[bytes] = [b""] * count
        for i in range(count):
            if pos + 8 > size:
                self.pos = pos
                raise self.fail(f"length of {what}[{i}] needs 8 bytes but only {size - pos} remain")
            (n,) = unpack(buf, pos)
            pos += 8
            if n > size - pos:
                raise self.fail(
                    f"{what}[{i}] claims {_n(n, 'byte')} but only {size - pos} remain (file size {size})",
                    pos - 8,
                )
            out[i] = buf[pos : pos + n]
            pos += n
        start = self.pos
        self.pos = pos
        try:
            return [b.decode("utf-8") for b in out]
        except UnicodeDecodeError:
            for i, b in enumerate(out):
                try:
                    b.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise self.fail(f"{what}[{i}] = {b!r} is not valid UTF-8 ({e.reason})", start) from None
            raise

    def array(self, key: str, depth: int = 0) -> Any:
        etype = self.u32(f"element type of {key}")
        at = self.pos
        count = self.u64(f"element count of {key}")
        if etype == _T_STRING:
            return self.strings(count, key)
        if etype in _NUMERIC:
            name, dtype = _NUMERIC[etype]
            itemsize = np.dtype(dtype).itemsize
            if count > (self.size - self.pos) // itemsize:
                raise self.fail(
                    f"{key} claims {_n(count, name + ' value')} ({_n(count * itemsize, 'byte')}) but only "
                    f"{_n(self.size - self.pos, 'byte')} remain (file size {self.size})",
                    at,
                )
            arr = np.frombuffer(self.buf, dtype=dtype, count=count, offset=self.pos).copy()
            self.pos += count * itemsize
            return arr.astype(bool) if etype == 7 else arr
        if etype == _T_ARRAY:
            # arrays of arrays: walk them (rare; not used by tokenizer keys), bounded in depth
            # and in count (each element is at least a 4-byte type and an 8-byte count)
            if depth + 1 >= MAX_ARRAY_DEPTH:
                raise self.fail(f"{key} nests arrays more than {MAX_ARRAY_DEPTH} deep", at - 4)
            if count > (self.size - self.pos) // 12:
                raise self.fail(f"{key} claims {_n(count, 'array')}, more than the {_n(self.size - self.pos, 'byte')} left can hold", at)
            return [self.array(f"{key}[{i}]", depth + 1) for i in range(count)]
        raise self.fail(f"{key} has unknown array element type {etype}", at - 4)

    def value(self, vtype: int, key: str) -> Any:
        if vtype == _T_STRING:
            return self.string(key)
        if vtype == _T_ARRAY:
            return self.array(key)
        if vtype in _NUMERIC:
            name, dtype = _NUMERIC[vtype]
            itemsize = np.dtype(dtype).itemsize
            self.need(itemsize, f"{name} value of {key}")
            v = np.frombuffer(self.buf, dtype=dtype, count=1, offset=self.pos)[0]
            self.pos += itemsize
            return bool(v) if vtype == 7 else v.item()
        raise self.fail(f"{key} has unknown value type {vtype}", self.pos - 4)


def metadata_sha256(path: str | os.PathLike) -> str:
    """sha256 hex of a GGUF file's header and key-values (bytes ``[0, GGUF.metadata_end)``).

    The tokenizer depends on these bytes only, so this is a sound cache key for a spec built
    from the file, and far cheaper than hashing a multi-GB model: the key-values are walked by
    their lengths without decoding anything (every length checked as in
    :func:`read_gguf_metadata`).

    Raises:
        LoaderError: as :func:`read_gguf_metadata` for a file it cannot walk.
    """
    import hashlib

    p = os.fspath(path)
    f = _open(p)
    with f:
        if os.fstat(f.fileno()).st_size == 0:
            raise LoaderError(f"{p}: corrupt or truncated GGUF at byte 0: the file is empty")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            end = _metadata_end(mm, p)
            return hashlib.sha256(mm[:end]).hexdigest()


def _metadata_end(buf, path: str) -> int:
    """Offset where the key-values end, found by skipping over every value."""
    r = _Reader(buf, path)
    r.need(24, "the header")
    if bytes(buf[0:4]) != _MAGIC:
        raise LoaderError(f"{path}: not a GGUF file (magic {bytes(buf[0:4])!r} at byte 0, expected b'GGUF')")
    r.pos = 8
    n_tensors = r.u64("the tensor count")
    n_kv = r.u64("the key-value count")
    alignment: Any = None
    for i in range(n_kv):
        n = r.u64(f"length of key {i}")
        r.need(n, f"key {i}")
        key = bytes(buf[r.pos : r.pos + n])
        r.pos += n
        vtype = r.u32(f"value type of key {i}")
        at = r.pos
        _skip_value(r, vtype, f"key {i}", 0)
        if key == b"general.alignment":
            alignment = _U32.unpack_from(buf, at)[0] if vtype == 4 else f"of value type {vtype}"
    end = r.pos
    _check_tensor_data(r, n_tensors, alignment)
    return end


def _check_tensor_data(r: "_Reader", n_tensors: int, alignment: Any) -> None:
    """Walk the tensor infos from ``r.pos`` and refuse a file too short for its tensors' data.

    Raises:
        LoaderError: a tensor info cut short or malformed (more than 4 dimensions), a
            ``general.alignment`` that is not a power-of-two uint32 (gguf.cpp refuses both), or
            tensor data ending past the end of the file (both sizes and the tensor named).
    Source: llama.cpp ``llama_tensor_weight`` (the bounds check), ``gguf.cpp`` (the layout:
        data starts at the end of the infos padded to the alignment; offsets are relative to it).
    """
    if alignment is None:
        alignment = 32
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise r.fail(f"general.alignment ({alignment}) is not a power-of-two uint32, which gguf.cpp refuses")
    if n_tensors > (r.size - r.pos) // 24:  # name length 8 + n_dims 4 + type 4 + offset 8
        raise r.fail(f"the header claims {_n(n_tensors, 'tensor')}, more than the {_n(r.size - r.pos, 'byte')} left can hold", 8)
    infos = []
    for i in range(n_tensors):
        at = r.pos
        n = r.u64(f"length of tensor {i}'s name")
        r.need(n, f"tensor {i}'s name")
        name = bytes(r.buf[r.pos : r.pos + n]).decode("utf-8", "replace")
        r.pos += n
        n_dims = r.u32(f"dimension count of tensor {name!r}")
        if n_dims > _MAX_DIMS:
            raise r.fail(f"tensor {name!r} has {n_dims} dimensions, more than ggml's {_MAX_DIMS}", at)
        r.need(8 * n_dims + 12, f"the shape, type and offset of tensor {name!r}")
        n_elements = 1
        for _ in range(n_dims):
            n_elements *= r.u64(f"a dimension of tensor {name!r}")
        ttype = r.u32(f"type of tensor {name!r}")
        infos.append((name, n_elements, ttype, r.u64(f"offset of tensor {name!r}")))
    data_start = -(-r.pos // alignment) * alignment
    need, last = 0, None
    for name, n_elements, ttype, offset in infos:
        block, nbytes = GGML_TYPE_SIZES.get(ttype, (1, 0))  # an unknown type: its start only
        end = data_start + offset + n_elements // block * nbytes
        if end > need:
            need, last = end, name
    if need > r.size:
        raise LoaderError(
            f"{r.path}: truncated GGUF: the data of its {_n(n_tensors, 'tensor')} ends at byte {need} "
            f"(tensor {last!r}) but the file has {_n(r.size, 'byte')} ({need - r.size} missing); "
            "the file was cut short (a download or copy that stopped): llama.cpp refuses it "
            "('data is not within the file bounds, model is corrupted or incomplete'); fetch it again"
        )


def _skip_value(r: "_Reader", vtype: int, what: str, depth: int) -> None:
    if vtype == _T_STRING:
        n = r.u64(f"length of {what}")
        r.need(n, what)
        r.pos += n
    elif vtype in _NUMERIC:
        size = np.dtype(_NUMERIC[vtype][1]).itemsize
        r.need(size, what)
        r.pos += size
    elif vtype == _T_ARRAY:
        etype = r.u32(f"element type of {what}")
        count = r.u64(f"element count of {what}")
        if etype in _NUMERIC:
            size = np.dtype(_NUMERIC[etype][1]).itemsize
            if count > (r.size - r.pos) // size:
                raise r.fail(f"{what} claims {_n(count, 'value')}, more than the file can hold")
            r.pos += count * size
        elif etype == _T_STRING:
            if count > (r.size - r.pos) // 8:
                raise r.fail(f"{what} claims {_n(count, 'string')}, more than the file can hold")
            buf, size, unpack, pos = r.buf, r.size, _U64.unpack_from, r.pos
            for _ in range(count):
                if pos + 8 > size:
                    r.pos = pos
                    raise r.fail(f"a string length of {what} runs past the end of the file")
                pos += 8 + unpack(buf, pos)[0]
            if pos > size:
                raise r.fail(f"a string of {what} runs past the end of the file")
            r.pos = pos
        elif etype == _T_ARRAY:
            if depth + 1 >= MAX_ARRAY_DEPTH:
                raise r.fail(f"{what} nests arrays more than {MAX_ARRAY_DEPTH} deep")
            if count > (r.size - r.pos) // 12:
                raise r.fail(f"{what} claims {_n(count, 'array')}, more than the file can hold")
            for _ in range(count):
                _skip_value(r, _T_ARRAY, what, depth + 1)
        else:
            raise r.fail(f"{what} has unknown array element type {etype}")
    else:
        raise r.fail(f"{what} has unknown value type {vtype}")


def read_gguf_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """Read the key-value metadata of a GGUF file (header and key-values only).

    Args:
        path: a ``.gguf`` file (version 2 or 3, little-endian).
    Returns:
        ``{key: value}`` in file order. Strings are ``str``; scalars Python numbers or bools;
        numeric arrays numpy arrays (their GGUF dtype, bool for bool arrays); string arrays
        ``list[str]``. ``"GGUF.version"``, ``"GGUF.tensor_count"`` and ``"GGUF.kv_count"`` are
        added from the header, ``"GGUF.metadata_end"`` (the byte offset where the key-values
        end and the tensor infos begin) from the walk.
    Raises:
        LoaderError: not a GGUF file, an unsupported version or byte order, a truncated or
            corrupt file (the message gives the byte offset), a duplicate key.
    """
    p = os.fspath(path)
    f = _open(p)
    with f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise LoaderError(f"{p}: corrupt or truncated GGUF at byte 0: the file is empty")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _read_metadata(mm, p)


def _read_metadata(buf, path: str) -> dict[str, Any]:
    r = _Reader(buf, path)
    r.need(4, "the magic 'GGUF'")
    magic = bytes(buf[0:4])
    if magic != _MAGIC:
        raise LoaderError(f"{path}: not a GGUF file (magic {magic!r} at byte 0, expected b'GGUF')")
    r.pos = 4
    version = r.u32("the version")
    if version not in (2, 3):
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        if swapped in (2, 3):
            raise UnsupportedTokenizer(
                f"{path}: big-endian GGUF (version {swapped} stored big-endian at byte 4) is not "
                "supported; convert the model with llama.cpp's little-endian default"
            )
        raise UnsupportedTokenizer(
            f"{path}: GGUF version {version} (byte 4) is not supported; rmlprep reads versions 2 "
            "and 3 (re-convert the model with a current llama.cpp)"
        )
    n_tensors = r.u64("the tensor count")
    kv_at = r.pos
    n_kv = r.u64("the key-value count")
    if n_kv > (r.size - r.pos) // 12:  # each pair is at least an 8-byte key length + 4-byte type
        raise r.fail(f"the header claims {_n(n_kv, 'key-value pair')}, more than the file can hold", kv_at)
    meta: dict[str, Any] = {
        "GGUF.version": version,
        "GGUF.tensor_count": n_tensors,
        "GGUF.kv_count": n_kv,
    }
    alignment: Any = None
    for i in range(n_kv):
        at = r.pos
        key = r.string(f"key of key-value pair {i}")
        vtype = r.u32(f"value type of {key!r}")
        if key in meta:
            raise r.fail(f"duplicate key {key!r}", at)
        meta[key] = r.value(vtype, key)
        if key == "general.alignment":
            alignment = meta[key] if vtype == 4 else f"of value type {vtype}"
    meta["GGUF.metadata_end"] = r.pos
    _check_tensor_data(r, n_tensors, alignment)
    return meta


def _open(p: str):
    """``open(p, "rb")``, an OSError worded as a LoaderError naming the file."""
    try:
        return open(p, "rb")
    except OSError as e:
        raise LoaderError(f"{p}: cannot open GGUF file: {e.strerror or e}") from None


def llama_cpp_id(meta: Mapping[str, Any], key: str, default: int | None, n: int) -> int | None:
    """An id key as llama.cpp reads it: an out-of-range default is dropped, an out-of-range
    value keeps the default."""
    if default is not None and default >= n:
        default = None
    v = meta.get(key)
    if v is None or isinstance(v, (bool, str, list, np.ndarray)):
        return default
    v = int(v)
    return v if 0 <= v < n else default
