"""Compressed corpus files as checked byte streams: gzip, zstd, bzip2 and xz.

A compressed file that was cut short (an interrupted download or copy) must never read as a
shorter, complete file. The standard decoders differ here:

- ``gzip``, ``bz2`` and ``lzma`` raise ``EOFError`` when the data ends inside a member and
  ``OSError``/``zlib.error``/``LZMAError`` on corrupt data; :func:`open_decompressed` turns both
  into :class:`~rmlprep.errors.InputError` naming the file and the compressed byte offset.
  After a stream they differ again: ``BZ2File`` and ``LZMAFile`` take bytes that start no
  further stream for trailing data and stop there, and ``GzipFile`` skips zeros, so a file of
  several streams (``pbzip2``, ``cat a.gz b.gz``, bgzip) whose later one was damaged at its
  start or never written read as a shorter, complete file. bzip2 and xz are read stream by
  stream here (:class:`_Streams`), such bytes being an error, and a gzip file ending in 16 or
  more zeros is refused (:class:`_Checked`).
- ``zstandard``'s ``stream_reader`` returns a clean end of stream at a truncated frame (a
  ``.jsonl.zst`` cut to 10% of its bytes reads as an empty file). So before a zstd frame is
  decoded, its extent is walked from its header and block headers (:func:`zstd_frames`, RFC 8878
  section 3.1.1): every block must lie inside the file, the last block must be marked last, and the
  optional checksum must follow. Only then is the frame handed to ``zstandard`` (which checks the
  content checksum and the declared content size). Walking costs one 3-byte read per block
  (~128 KB of text), no decoding.

The frame walk also finds the independent frames of a multi-frame ``.zst`` (``pzstd``, the
seekable format, concatenated files), which :mod:`rmlprep.readers` turns into several units.

Every stream reads in bounded pieces (``readinto`` of the caller's buffer), so memory does not
grow with the file or with the compression ratio.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from . import fs
from .errors import ConfigError, InputError

__all__ = [
    "COMPRESSED_SUFFIXES",
    "ZstdFrame",
    "compression_of",
    "open_decompressed",
    "zstd_frames",
    "zstd_chunks",
    "ZstdReader",
]

COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd", ".bz2", ".xz")

_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50
_BLOCK_MAX = 128 * 1024  # RFC 8878 3.1.1.2.3: Block_Maximum_Size <= 128 KB
_WINDOW_MAX = 1 << 27  # zstd's default decoding limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT = 27)
_BUFFER = 1 << 20


def compression_of(path: str) -> str | None:
    """``"gzip"``, ``"zstd"``, ``"bzip2"``, ``"xz"`` or None, from the file name's last suffix."""
    low = str(path).lower()
    if low.endswith(".gz"):
        return "gzip"
    if low.endswith((".zst", ".zstd")):
        return "zstd"
    if low.endswith(".bz2"):
        return "bzip2"
    if low.endswith(".xz"):
        return "xz"
    return None


def _zstandard():
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a declared dependency
        raise ConfigError("zstd input needs the zstandard package: pip install zstandard") from None
    return zstandard


@dataclass(frozen=True, slots=True)
class ZstdFrame:
    """One frame of a zstd file, located by walking its headers.

    Attributes:
        start: byte offset of the frame's magic number.
        end: byte offset just after the frame (after its checksum, if any).
        content_size: decompressed bytes the header declares, or None when it does not say.
        skippable: a skippable frame (user data, e.g. a seek table): no content.
    """

    start: int
    end: int
    content_size: int | None
    skippable: bool = False


def _truncated(path: str, what: str, frame: int, need: int, size: int) -> InputError:
    return InputError(
        f"{path}: truncated zstd data: {what} of the frame at byte {frame} needs bytes up to "
        f"{need}, but the file ends at byte {size} (an interrupted download or copy?); "
        "fetch the file again",
        path=path, offset=size,
    )


def zstd_frames(f: BinaryIO, path: str, start: int = 0, stop: int | None = None) -> Iterator[ZstdFrame]:
    """Walk the frames of a zstd file from byte ``start`` (a frame start) to ``stop`` or the end.

    Reads only headers: the frame header (via ``zstandard.get_frame_parameters``), then each
    3-byte block header (last-block bit, type, size), skipping the block bodies.

    Args:
        f: the file, opened in binary mode (it is seeked).
        path: for messages.
        start: byte offset of the first frame.
        stop: stop before this offset (a frame boundary); None = the end of the file.
    Yields:
        :class:`ZstdFrame` in file order.
    Raises:
        InputError: not a zstd frame at an offset, a reserved block type, a block over 128 KB,
            a frame that needs a dictionary, or a frame that runs past the end of the file.
    Source: RFC 8878 sections 3.1.1 (frames), 3.1.1.1 (frame header), 3.1.1.2 (blocks), 3.1.2
    (skippable frames).
    """
    zstandard = _zstandard()
    size = os.fstat(f.fileno()).st_size
    end_at = size if stop is None else min(stop, size)
    pos = start
    while pos < end_at:
        f.seek(pos)
        head = f.read(18)  # the longest frame header: 4 magic + 1 + 1 + 4 + 8
        if len(head) < 4:
            raise _truncated(path, "the magic number", pos, pos + 4, size)
        magic = int.from_bytes(head[:4], "little")
        if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
            if len(head) < 8:
                raise _truncated(path, "the size field", pos, pos + 8, size)
            end = pos + 8 + int.from_bytes(head[4:8], "little")
            if end > size:
                raise _truncated(path, "the skippable content", pos, end, size)
            yield ZstdFrame(pos, end, None, skippable=True)
            pos = end
            continue
        if magic != _ZSTD_MAGIC:
            what = "the file is not zstd-compressed" if pos == 0 else "data after the last frame is not a zstd frame"
            raise InputError(
                f"{path}: byte {pos}: {what} (magic bytes {head[:4].hex()}, expected 28b52ffd)",
                path=path, offset=pos,
            )
        try:
            hsize = zstandard.frame_header_size(head)
            params = zstandard.get_frame_parameters(head)
        except zstandard.ZstdError as e:
            if len(head) < 18 and pos + len(head) >= size:
                raise _truncated(path, "the frame header", pos, pos + 18, size) from None
            raise InputError(f"{path}: byte {pos}: bad zstd frame header ({e})", path=path, offset=pos) from None
        if params.dict_id:
            raise InputError(
                f"{path}: byte {pos}: the frame needs zstd dictionary {params.dict_id}; "
                "rmlprep reads frames without a dictionary (decompress the file first)",
                path=path, offset=pos,
            )
        p = pos + hsize
        while True:
            f.seek(p)
            bh = f.read(3)
            if len(bh) < 3:
                raise _truncated(path, f"the block header at byte {p}", pos, p + 3, size)
            v = int.from_bytes(bh, "little")
            last, btype, bsize = v & 1, (v >> 1) & 3, v >> 3
            if btype == 3:
                raise InputError(f"{path}: byte {p}: corrupt zstd data (reserved block type) in the frame "
                                 f"at byte {pos}", path=path, offset=p)
            if bsize > _BLOCK_MAX:
                raise InputError(f"{path}: byte {p}: corrupt zstd data (a block of {bsize} bytes; the "
                                 f"limit is {_BLOCK_MAX}) in the frame at byte {pos}", path=path, offset=p)
            p += 3 + (1 if btype == 1 else bsize)  # RLE blocks hold one byte
            if p > size:
                raise _truncated(path, f"the block at byte {p - 3 - (1 if btype == 1 else bsize)}", pos, p, size)
            if last:
                break
        if params.has_checksum:
            p += 4
            if p > size:
                raise _truncated(path, "the checksum", pos, p, size)
        cs = params.content_size
        yield ZstdFrame(pos, p, None if cs == zstandard.CONTENTSIZE_UNKNOWN else cs)
        pos = p


class _Slice:
    """``read(n)`` over bytes ``[start, end)`` of a shared file (seeks before each read)."""

    def __init__(self, f: BinaryIO, path: str, start: int, end: int):
        self.f, self.path, self.pos, self.end = f, path, start, end

    def read(self, n: int = -1) -> bytes:
        left = self.end - self.pos
        if left <= 0:
            return b""
        n = left if n is None or n < 0 else min(n, left)
        self.f.seek(self.pos)
        data = self.f.read(n)
        if len(data) < n:
            raise InputError(f"{self.path}: the file shrank while it was read (byte {self.pos + len(data)})",
                             path=self.path, offset=self.pos + len(data))
        self.pos += len(data)
        return data


def _frame_chunks(zstandard, dctx, f: BinaryIO, path: str, frame: ZstdFrame, size: int) -> Iterator[bytes]:
    """Decode one walked frame in pieces of at most ``size`` bytes, checking its declared size."""
    reader = dctx.stream_reader(_Slice(f, path, frame.start, frame.end), read_size=_BLOCK_MAX + 3,
                                read_across_frames=False, closefd=False)
    produced = 0
    while True:
        try:
            chunk = reader.read(size)
        except zstandard.ZstdError as e:
            raise InputError(f"{path}: corrupt zstd data in the frame at byte {frame.start} "
                             f"(after {produced} decoded bytes): {e}", path=path, offset=frame.start) from None
        if not chunk:
            break
        produced += len(chunk)
        yield chunk
    if frame.content_size is not None and produced != frame.content_size:
        raise InputError(f"{path}: corrupt zstd data: the frame at byte {frame.start} declares "
                         f"{frame.content_size} bytes but decodes to {produced}", path=path, offset=frame.start)


def zstd_chunks(path: str, start: int = 0, stop: int | None = None, *, size: int = 1 << 17,
                frames: list[ZstdFrame] | None = None) -> Iterator[tuple[ZstdFrame, bytes]]:
    """Decoded pieces of a zstd file's frames, each frame walked (or given) before it is decoded.

    Args:
        path: the ``.zst`` file.
        start, stop: the frames in ``[start, stop)`` (frame boundaries; stop None = to the end).
        size: at most this many decoded bytes per piece.
        frames: already walked frames to decode instead (the plan's list).
    Yields:
        (frame, piece) in order; skippable frames yield nothing.
    Raises:
        InputError: see :func:`zstd_frames`; corrupt data (``zstandard.ZstdError``, e.g. a
            checksum mismatch); a frame whose decoded size differs from its declared size.
    """
    zstandard = _zstandard()
    dctx = zstandard.ZstdDecompressor(max_window_size=_WINDOW_MAX)
    with fs.open(path, "rb") as f:
        for frame in (frames if frames is not None else zstd_frames(f, path, start, stop)):
            if not frame.skippable:
                for chunk in _frame_chunks(zstandard, dctx, f, path, frame, size):
                    yield frame, chunk


class ZstdReader(io.RawIOBase):
    """:func:`zstd_chunks` as a raw binary stream (wrap it in ``io.BufferedReader``)."""

    def __init__(self, path: str, start: int = 0, stop: int | None = None):
        super().__init__()
        self.path = path
        self._chunks = zstd_chunks(path, start, stop)
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._pending:
            nxt = next(self._chunks, None)
            if nxt is None:
                return 0
            self._pending = memoryview(nxt[1])
        n = min(len(b), len(self._pending))
        b[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        if not self.closed:
            self._chunks.close()
        super().close()


#: zero bytes at the end of a gzip file that make it a hole, not padding (see :class:`_Checked`)
_ZERO_TAIL = 16


class _Streams(io.RawIOBase):
    """Concatenated bzip2 or xz streams (``pbzip2``, ``cat a.bz2 b.bz2``), decoded one after the
    other as ``bz2.BZ2File`` and ``lzma.LZMAFile`` do, except for what follows a stream: those
    take bytes that do not start another stream for trailing data and stop there without an
    error (``_compression.DecompressReader``'s ``trailing_error``), so a file whose second stream
    was damaged at its start, or never written (zeros: a download into a preallocated file that
    stopped), read as its first stream alone, a shorter complete file. Here such bytes are
    corrupt data (the decompressor's error, raised), as ``xz -t`` has them."""

    def __init__(self, fp: BinaryIO, factory, path: str, kind: str, errors: tuple):
        super().__init__()
        self._fp, self._factory, self._path, self._kind, self._errors = fp, factory, path, kind, errors
        self._dec = factory()
        self._in = 0  # bytes read from the file
        self._done = False

    def readable(self) -> bool:
        return True

    def _read(self) -> bytes:
        raw = self._fp.read(_BUFFER)
        self._in += len(raw)
        return raw

    def _stream_padding(self, rest: bytes) -> bytes:
        """``rest`` without the xz Stream Padding it starts with: fewer than :data:`_ZERO_TAIL`
        zero bytes, a multiple of 4, after a stream (the .xz format's rule; ``xz -t`` accepts
        it). More zeros stay: a hole where streams were never written (as for gzip)."""
        zeros = len(rest) - len(rest.lstrip(b"\x00"))
        while zeros == len(rest) and zeros < _ZERO_TAIL:
            more = self._read()
            if not more:
                break
            rest += more
            zeros = len(rest) - len(rest.lstrip(b"\x00"))
        return rest[zeros:] if 0 < zeros < _ZERO_TAIL and zeros % 4 == 0 else rest

    def readinto(self, b) -> int:
        size = len(b)
        while not self._done and size:
            if self._dec.eof:
                end = self._in - len(self._dec.unused_data)  # where the stream ended
                rest = self._dec.unused_data or self._read()
                if self._kind == "xz":
                    rest = self._stream_padding(rest)
                if not rest:
                    self._done = True  # the last stream ended with the file
                    break
                self._dec = self._factory()
                try:
                    data = self._dec.decompress(rest, size)
                except self._errors as e:
                    raise InputError(
                        f"{self._path}: byte {end}: after the {self._kind} stream that ends there, the bytes "
                        f"{rest[:8]!r}... start no {self._kind} stream ({' '.join(str(e).split())}): a stream "
                        "damaged at its start, data appended, or zeros "
                        "where a stream was never written (a download into a preallocated file that stopped); "
                        "the rest of the file cannot be read, so the file is refused, not cut short there; "
                        "fetch it again", path=self._path, offset=end) from None
            elif self._dec.needs_input:
                raw = self._read()
                if not raw:
                    raise EOFError("the data ends inside a stream")
                data = self._dec.decompress(raw, size)
            else:
                data = self._dec.decompress(b"", size)
            if data:
                b[:len(data)] = data
                return len(data)
        return 0


class _Checked(io.RawIOBase):
    """A stdlib decompressor (gzip, bz2, lzma) whose failures become :class:`InputError`.

    A gzip file ending in :data:`_ZERO_TAIL` or more zero bytes is refused too: ``gzip`` skips
    zeros after a member (tape padding, GNU gzip's rule), so a multi-member file (``cat a.gz
    b.gz``, bgzip) whose later members were never written, only preallocated, read as complete.
    No gzip member ends in 16 zeros (its trailer is a CRC-32 and the length, after a final
    deflate block that is not zeros)."""

    def __init__(self, path: str, kind: str):
        super().__init__()
        self.path, self.kind = path, kind
        self._raw = fs.open(path, "rb")
        self._size = os.fstat(self._raw.fileno()).st_size
        if kind == "gzip":
            self._inner = gzip.GzipFile(fileobj=self._raw, mode="rb")
        elif kind == "bzip2":
            self._inner = _Streams(self._raw, bz2.BZ2Decompressor, path, kind, (OSError, ValueError))
        else:
            # FORMAT_XZ, not the default FORMAT_AUTO, which also takes legacy .lzma streams: 18 zero
            # bytes are an empty one (props 0, size 0), so zeros after an xz stream read as nothing
            self._inner = _Streams(self._raw, lambda: lzma.LZMADecompressor(format=lzma.FORMAT_XZ), path, kind,
                                   (lzma.LZMAError,))

    def readable(self) -> bool:
        return True

    def _zero_tail(self) -> None:
        """Refuse a gzip file ending in zeros (class docstring); read at the end of the stream."""
        if self.kind != "gzip" or self._size < _ZERO_TAIL:
            return
        with fs.open(self.path, "rb") as f:
            f.seek(self._size - _ZERO_TAIL)
            if f.read(_ZERO_TAIL).strip(b"\x00"):
                return
            # where the zero run starts (the last member's trailer may end in zeros of its own)
            end = self._size
            while end > 0:
                f.seek(max(0, end - _BUFFER))
                chunk = f.read(end - max(0, end - _BUFFER))
                kept = chunk.rstrip(b"\x00")
                if kept:
                    end = end - len(chunk) + len(kept)
                    break
                end -= len(chunk)
        raise InputError(
            f"{self.path}: byte {end}: the file ends in a run of {self._size - end} zero bytes; gzip skips zeros "
            f"after a member (tape padding), but {_ZERO_TAIL} or more at the end are a hole where more members were "
            "(a download into a preallocated file that stopped, or a crash before the data reached the disk), so the "
            "file would read as complete without them; fetch it again", path=self.path, offset=end)

    def readinto(self, b) -> int:
        try:
            n = self._inner.readinto(b)
        except InputError:
            raise
        except EOFError:
            raise InputError(
                f"{self.path}: truncated {self.kind} data: the file ends at byte {self._size} inside a "
                f"compressed stream (an interrupted download or copy?); fetch the file again",
                path=self.path, offset=self._size) from None
        except (OSError, zlib.error, lzma.LZMAError, ValueError) as e:
            at = self._raw.tell()
            msg = " ".join(str(e).split()) or type(e).__name__
            raise InputError(f"{self.path}: corrupt {self.kind} data near byte {at}: {msg}",
                             path=self.path, offset=at) from None
        if not n and len(b):
            self._zero_tail()
        return n

    def close(self) -> None:
        if not self.closed:
            try:
                self._inner.close()
            finally:
                self._raw.close()
        super().close()


def open_decompressed(path: str, *, start: int = 0, stop: int | None = None) -> io.BufferedReader:
    """Open a corpus file for reading its (decompressed) bytes, with checked failures.

    Args:
        path: a plain or compressed file (kind from the suffix, :func:`compression_of`).
        start, stop: zstd only: read the frames in ``[start, stop)`` (frame boundaries).
    Returns:
        A buffered binary stream (1 MB buffer); reading it raises :class:`InputError` on a
        truncated or corrupt file.
    """
    kind = compression_of(path)
    if kind is None:
        return fs.open(path, "rb", buffering=_BUFFER)
    if kind == "zstd":
        return io.BufferedReader(ZstdReader(path, start, stop), _BUFFER)
    if start or stop is not None:  # pragma: no cover - the planner only cuts zstd
        raise ValueError(f"{path}: only zstd files can be read from a frame offset")
    return io.BufferedReader(_Checked(path, kind), _BUFFER)
