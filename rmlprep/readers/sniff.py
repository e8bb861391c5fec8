"""The plan's first-bytes check of an input file (:func:`sniff`): what its first bytes say it
is, against what its name and ``input.format`` say, so a file that is not what it is named
stops the run before any work, with one line naming what it holds."""

from __future__ import annotations

from pathlib import Path

from .. import fs
from ..compressed import compression_of
from ..encoding_hints import (LFS_POINTER, binary_format, extract_advice, other_compression, tar_member, web_page,
                              wide_encoding)
from ..errors import InputError
from .holes import tar_archive

__all__ = ["LFS_POINTER", "sniff"]

_MAGIC = ((b"\x1f\x8b", "gzip", ".gz"), (b"\x28\xb5\x2f\xfd", "zstd", ".zst"), (b"\xfd7zXZ\x00", "xz", ".xz"))


_NAMES = {"jsonl": "JSONL", "csv": "CSV"}
_A = {"jsonl": "a JSONL", "csv": "a CSV", "parquet": "a Parquet", "hf": "an Arrow"}


def _own_magic(kind: str, head: bytes) -> bool:
    """Whether ``head`` starts as a ``kind`` file does: its magic number; zstd also a skippable
    frame (pzstd writes one first), bzip2 its ``BZh`` (an empty stream has no block after it)."""
    if kind == "zstd" and len(head) >= 4 and head[0] & 0xF0 == 0x50 and head[1:4] == b"\x2a\x4d\x18":
        return True
    if kind == "bzip2":
        return head.startswith(b"BZh")
    return any(head.startswith(m) for m, name, _ in _MAGIC if name == kind)


def _looks_like(head: bytes) -> str:
    """What the first bytes of a file that is not compressed are, for a message."""
    found = binary_format(head)
    if found is not None:
        return found[0]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        text = head[: e.start].decode("utf-8") if e.start >= 8 else ""
    if text and text.isprintable() or text.strip() and all(c.isprintable() or c in "\t\r\n" for c in text):
        return f"plain text ({text[:24]!r}...)"
    return f"bytes {head[:8].hex(' ')}"


def sniff(path: str, fmt: str) -> None:
    """File faults visible in a file's first bytes, found at plan time.

    Raises:
        InputError: the file cannot be opened; it is a Git LFS pointer (a clone without
            ``git lfs pull``); a compressed name on a 0-byte file (no compressor writes one: an
            interrupted download), on another compression's data, or on data that is not
            compressed (plain JSONL named ``.jsonl.gz``); plain-text JSONL/CSV that is in fact
            compressed (a download saved without its suffix), a web page or an object store's
            XML error saved in its place (:func:`rmlprep.encoding_hints.web_page`), another format (Parquet
            ``PAR1``, Arrow, zip: :func:`rmlprep.encoding_hints.binary_format`), a tar archive
            (a compressed one is named by the reader: :func:`rmlprep.readers.holes.hole_fault`) or UTF-16/32
            (a byte-order mark, or NUL bytes between ASCII characters:
            :func:`rmlprep.encoding_hints.wide_encoding`); a compressed Parquet file
            (``.parquet.gz``), which read as a Parquet file with a "damaged or truncated footer"; a
            compression rmlprep does not read (lz4, Snappy, lzip, lzop, compress:
            :func:`rmlprep.encoding_hints.other_compression`).
    """
    try:
        with fs.open(path, "rb") as f:
            head = f.read(512)  # a tar header's magic is at byte 257
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror or e})", path=path) from None
    if head.startswith(LFS_POINTER):
        raise InputError(f"{path}: is a Git LFS pointer, not the data (the repository was cloned without "
                         "its LFS files); fetch them with: git lfs pull", path=path, offset=0)
    if (page := web_page(head)) is not None:
        raise InputError(f"{path}: is {page}, not {_A.get(fmt, fmt)} file; fetch the file itself", path=path, offset=0)
    if (other := other_compression(path, head)) is not None:
        raise InputError(other, path=path, offset=0)
    magic = next(((name, suffix) for m, name, suffix in _MAGIC if head.startswith(m)), None)
    if magic is None and head.startswith(b"BZh") and head[4:10] == b"1AY&SY":
        magic = ("bzip2", ".bz2")
    kind = compression_of(path)
    if kind is not None and fmt == "parquet":
        tool = {"gzip": "gunzip", "zstd": "unzstd", "bzip2": "bunzip2", "xz": "unxz"}[kind]
        raise InputError(f"{path}: a {kind}-compressed Parquet file: rmlprep reads Parquet as it is (its pages carry "
                         f"their own compression); decompress it ({tool} -k FILE) and give the .parquet",
                         path=path, offset=0)
    if kind is not None:
        if not head:
            raise InputError(f"{path}: is empty, but a {kind} file is never 0 bytes (an interrupted download "
                             "or copy?); fetch the file again", path=path, offset=0)
        if magic is not None and magic[0] != kind:
            raise InputError(f"{path}: holds {magic[0]} data, not {kind}; rename it to end in {magic[1]}",
                             path=path, offset=0)
        if magic is None and not _own_magic(kind, head):
            suffix = Path(path).suffix
            raise InputError(f"{path}: is named {suffix} but holds no {kind} data: it is {_looks_like(head)}; "
                             f"rename it without the {suffix}" + (" (a download saved decompressed?)"
                                                                  if fmt in _NAMES else ""), path=path, offset=0)
    elif magic is not None and fmt in _NAMES:
        raise InputError(f"{path}: is {magic[0]}-compressed but its name does not say so; rename it to "
                         f"{Path(path).name}{magic[1]}", path=path, offset=0)
    elif fmt in _NAMES and (member := tar_member(head)) is not None:
        raise tar_archive(path, member, False)
    elif fmt in _NAMES and (found := binary_format(head)) is not None and found[1] == ".zip":
        raise InputError(f"{path}: is {found[0]}, not {_NAMES[fmt]}; " + extract_advice(path, "zip"), path=path,
                         offset=0)
    elif fmt in _NAMES and (found := binary_format(head)) is not None:
        raise InputError(f"{path}: is {found[0]}, not {_NAMES[fmt]}; rename it to end in {found[1]}"
                         + (" or set input.format = \"parquet\"" if found[1] == ".parquet" else ""),
                         path=path, offset=0)
    elif fmt in _NAMES and (wide := wide_encoding(head)) is not None:
        raise InputError(f"{path}: the file is {wide[0]} ({wide[2]}); rmlprep reads UTF-8: convert it with "
                         f"iconv -f {wide[1]} -t UTF-8", path=path, offset=0)
