"""Compressed streams: the zstd frame walk (RFC 8878 section 3.1.1), checked decoding, bounded reads."""

from __future__ import annotations

import gzip
import io

import pytest
import zstandard

from rmlprep.compressed import ZstdFrame, compression_of, open_decompressed, zstd_chunks, zstd_frames
from rmlprep.errors import InputError

SKIP = (0x184D2A5E).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"


def frames_file(tmp_path, parts, *, skippable=False, **kw):
    blob, want, pos = b"", [], 0
    if skippable:
        blob += SKIP
        want.append(ZstdFrame(0, len(SKIP), None, skippable=True))
    for part in parts:
        c = zstandard.ZstdCompressor(**kw).compress(part)
        want.append(ZstdFrame(len(blob), len(blob) + len(c), len(part) if kw.get("write_content_size", True) else None))
        blob += c
    p = tmp_path / "f.zst"
    p.write_bytes(blob)
    return p, want


@pytest.mark.parametrize("kw", [{}, {"write_checksum": True}, {"write_content_size": False}, {"level": 19}])
def test_frame_walk_finds_every_frame(tmp_path, kw):
    parts = [b"", b"a", b"hello\n" * 1000, bytes(range(256)) * 2000]  # empty, tiny, text, 512 KB (4+ blocks)
    p, want = frames_file(tmp_path, parts, skippable=True, **kw)
    with open(p, "rb") as f:
        assert list(zstd_frames(f, str(p))) == want
    assert b"".join(c for _, c in zstd_chunks(str(p))) == b"".join(parts)


def test_streaming_compressor_frame_without_content_size(tmp_path):
    buf = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(buf, closefd=False) as w:
        for i in range(300):
            w.write(b"line %d\n" % i)
    p = tmp_path / "s.zst"
    p.write_bytes(buf.getvalue())
    with open(p, "rb") as f:
        (fr,) = list(zstd_frames(f, str(p)))
    assert fr.content_size is None and fr.end == p.stat().st_size
    assert open_decompressed(str(p)).read() == b"".join(b"line %d\n" % i for i in range(300))


def _raw_frame(block_header: int, body: bytes) -> bytes:
    """A frame header (single segment, 1-byte content size 5, no checksum) and one block."""
    return (0xFD2FB528).to_bytes(4, "little") + bytes([0x20, 5]) + block_header.to_bytes(3, "little") + body


def test_hand_built_raw_block_frame(tmp_path):
    """Block header = last(1) | type raw(0) << 1 | size 5 << 3 = 41; content 'hello'."""
    p = tmp_path / "h.zst"
    p.write_bytes(_raw_frame(41, b"hello"))
    assert open_decompressed(str(p)).read() == b"hello"


@pytest.mark.parametrize("header,body,match", [
    pytest.param(1 | 3 << 1 | 5 << 3, b"hello", "reserved block type", id="reserved-type"),
    pytest.param(1 | 0 << 1 | (200_000 << 3), b"x" * 10, "a block of 200000 bytes", id="block-over-128KB"),
    pytest.param(41, b"hel", "truncated zstd data", id="short-raw-block"),
    pytest.param(40, b"hello", "truncated zstd data", id="no-last-block"),
    pytest.param(1 | 0 << 1 | 4 << 3, b"hell", "corrupt zstd data in the frame at byte 0", id="content-size-mismatch"),
])
def test_hand_built_bad_frames(tmp_path, header, body, match):
    p = tmp_path / "h.zst"
    p.write_bytes(_raw_frame(header, body))
    with pytest.raises(InputError, match=match) as ei:
        open_decompressed(str(p)).read()
    assert str(p) in str(ei.value) and "\n" not in str(ei.value)


def test_garbage_after_the_last_frame(tmp_path):
    p = tmp_path / "g.zst"
    p.write_bytes(zstandard.ZstdCompressor().compress(b"ok\n") + b"\x00\x00junk")
    with pytest.raises(InputError, match=r"byte \d+: data after the last frame is not a zstd frame"):
        open_decompressed(str(p)).read()


def test_zstd_bomb_reads_in_bounded_pieces(tmp_path):
    """256 MB of zeros compress to a few KB; the stream hands them out 1 MB at a time."""
    cctx = zstandard.ZstdCompressor()
    p = tmp_path / "bomb.zst"
    with open(p, "wb") as f, cctx.stream_writer(f) as w:
        zeros = bytes(1 << 20)
        for _ in range(256):
            w.write(zeros)
    assert p.stat().st_size < 100_000
    with open_decompressed(str(p)) as f:
        sizes = []
        while True:
            piece = f.read(1 << 20)
            if not piece:
                break
            sizes.append(len(piece))
    assert sum(sizes) == 256 << 20 and max(sizes) == 1 << 20


def test_gzip_members_and_suffixes(tmp_path):
    p = tmp_path / "x.gz"
    p.write_bytes(gzip.compress(b"one\n") + gzip.compress(b"two\n"))
    assert open_decompressed(str(p)).read() == b"one\ntwo\n"
    assert [compression_of(n) for n in ("a.jsonl.GZ", "a.zstd", "a.csv.bz2", "b.xz", "c.jsonl")] == [
        "gzip", "zstd", "bzip2", "xz", None]
