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


def _two_streams(kind: str) -> tuple[bytes, bytes, bytes]:
    """(first stream, second stream, their text) of 2 x 1,000 lines, each its own stream, as
    ``cat a.x b.x``, ``pbzip2`` or bgzip write them."""
    import bz2
    import lzma

    comp = {"gzip": lambda b: gzip.compress(b, mtime=0), "bzip2": bz2.compress, "xz": lzma.compress}[kind]
    a = b"".join(b'{"text": "line %d"}\n' % i for i in range(1000))
    b = b"".join(b'{"text": "line %d"}\n' % i for i in range(1000, 2000))
    return comp(a), comp(b), a + b


@pytest.mark.parametrize("kind,suffix", [("gzip", ".gz"), ("bzip2", ".bz2"), ("xz", ".xz")])
@pytest.mark.parametrize("damage", ["zeros", "first-byte", "garbage"])
def test_a_second_stream_that_cannot_be_read_refuses_the_file(tmp_path, kind, suffix, damage):
    """A file of two streams whose second was never written (zeros of its length: a download
    into a preallocated file that stopped), is damaged at its first byte, or is replaced by
    text read as its first stream alone, a shorter complete file, for bzip2 and xz (the
    stdlib's BZ2File and LZMAFile ignore bytes after a stream that start no other) and, for
    zeros, gzip (GzipFile skips zeros after a member); for xz, LZMADecompressor's default
    FORMAT_AUTO even decodes the 648 zeros as 36 empty legacy .lzma streams of 18 bytes. Each is
    refused; the two streams whole read as their 2,000 lines. gzip refused the other two already
    ("Not a gzipped file")."""
    first, second, text = _two_streams(kind)
    p = tmp_path / ("x.jsonl" + suffix)
    p.write_bytes(first + second)
    assert open_decompressed(str(p)).read() == text
    bad = {"zeros": bytes(len(second)), "first-byte": bytes([second[0] ^ 0xFF]) + second[1:],
           "garbage": b"not a stream\n" * 10}[damage]
    p.write_bytes(first + bad)
    with pytest.raises(InputError) as ei:
        open_decompressed(str(p)).read()
    msg = str(ei.value)
    assert "\n" not in msg and str(p) in msg
    if kind != "gzip":
        assert f"byte {len(first)}: after the {kind} stream that ends there" in msg
    elif damage == "zeros":
        assert f"the file ends in a run of {len(bad) + 2} zero bytes" in msg  # + the trailer's 2: ISIZE 18,890 < 2**16


def test_gzip_zeros_between_members_and_a_few_at_the_end_read_as_gzip_does(tmp_path):
    """GNU gzip and Python's gzip skip zeros after a member (tape padding): 64 zeros between
    two members lose nothing (both members are read), and 15 at the end (fewer than a hole's
    16, counting none of the trailer's: an ISIZE of 18,890 ends in two zero bytes, so 13 are
    added) are taken as padding."""
    first, second, text = _two_streams("gzip")
    p = tmp_path / "x.jsonl.gz"
    p.write_bytes(first + bytes(64) + second + bytes(13))
    assert open_decompressed(str(p)).read() == text


def test_xz_stream_padding_reads_as_xz_does(tmp_path):
    """The .xz format allows Stream Padding after a stream: zero bytes, a multiple of 4
    (``xz -t`` accepts the files below). 8 between two streams and 12 at the end were refused
    as "truncated xz data"; they read whole. 16 or more at the end stay a hole (as for gzip),
    and 2 are no padding."""
    first, second, text = _two_streams("xz")
    p = tmp_path / "x.jsonl.xz"
    p.write_bytes(first + bytes(8) + second + bytes(12))
    assert open_decompressed(str(p)).read() == text
    for tail in (16, 2):
        p.write_bytes(first + second + bytes(tail))
        with pytest.raises(InputError):
            open_decompressed(str(p)).read()
