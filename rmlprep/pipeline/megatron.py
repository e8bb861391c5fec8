"""``output.format = "megatron"``: each unit as a Megatron-LM indexed dataset, ``.bin`` + ``.idx``.

Megatron-LM, NeMo, GPT-NeoX and OLMo read pretraining tokens as an indexed dataset: a ``.bin``
file of token ids, document after document, and a ``.idx`` file that says where each one
starts. rmlprep writes one pair per unit (``shard-NNNNN.bin``, ``shard-NNNNN.idx``), holding the
unit's **documents, not packed rows** (Megatron packs at training time, with its own sequence
length): each document's ids with the framing ``[pack]`` asks for (``bos``/``eos``), in input
order, rebuilt from the packed rows as they stream in (what :func:`rmlprep.packing.unpack` gives;
``overflow = "wrap"``, the default, keeps every document whole). The bytes depend only on (unit, config, tokenizer),
as for Parquet, so they are the same for any number of workers and either engine, and resume
works per unit (the done marker vouches for both files by sha256).

Layout (source: ``megatron/core/datasets/indexed_dataset.py`` of megatron-core 0.16,
``_IndexWriter`` / ``IndexedDatasetBuilder``; the same as Megatron-LM's ``preprocess_data.py``
output), all little-endian::

    .idx  b"MMIDIDX\\x00\\x00"   9-byte magic
          uint64 version = 1
          uint8  dtype code    (DType: uint8 1, int8 2, int16 3, int32 4, int64 5, float64 6,
                                float32 7, uint16 8)
          uint64 sequence_count  S (one sequence per document here)
          uint64 document_count  S + 1 (the document indices)
          int32  sequence_lengths[S]   tokens per sequence
          int64  sequence_pointers[S]  byte offset of each sequence in .bin
          int64  document_indices[S + 1] = 0, 1, ..., S
    .bin  the ids, dtype as coded: uint16 when the vocab has fewer than 65,500 ids
          (``DType.optimal_dtype``), else int32

Point Megatron at the run with ``--data-args-path OUTPUT/megatron-data-args.txt`` (written by the
run: ``weight prefix`` pairs, each unit weighted by its token count, so sampling follows the
corpus), or ``--data-path`` with the prefixes (``OUTPUT/shard-00000`` ...).
"""

from __future__ import annotations

import struct
from typing import IO

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, PackingError
from ..packing import to_numpy
from .output import OutputFolder, committing, from_stream

__all__ = ["MegatronWriter", "INDEX_HEADER", "DTYPE_CODES", "optimal_dtype", "bin_name", "idx_name",
           "data_args"]

INDEX_HEADER = b"MMIDIDX\x00\x00"
#: numpy dtype → Megatron's DType code
DTYPE_CODES = {np.dtype(np.uint8): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4,
               np.dtype(np.int64): 5, np.dtype(np.float64): 6, np.dtype(np.float32): 7, np.dtype(np.uint16): 8}


def optimal_dtype(vocab_size: int) -> np.dtype:
    """uint16 for a vocab of fewer than 65,500 ids, else int32 (megatron-core's
    ``DType.optimal_dtype``)."""
    return np.dtype(np.uint16) if vocab_size < 65500 else np.dtype(np.int32)


def bin_name(index: int) -> str:
    return f"shard-{index:05d}.bin"


def idx_name(index: int) -> str:
    return f"shard-{index:05d}.idx"


class MegatronWriter:
    """A unit's documents as ``shard-NNNNN.bin`` + ``shard-NNNNN.idx`` (see the module docstring).

    Args:
        vocab_size: the tokenizer's vocab size; picks the dtype.
    Raises:
        ConfigError: (from :meth:`write`) an id the dtype cannot hold.
    """

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size
        self.dtype = optimal_dtype(vocab_size)

    def files(self, index: int) -> list[str]:
        return [bin_name(index), idx_name(index)]

    def write(self, out: OutputFolder, index: int, rows, metadata: dict[str, str], *,
              schema: pa.Schema | None = None) -> dict[str, str]:
        """Commit the unit's ``.bin``, then its ``.idx`` (the index last: it vouches for the data).

        ``rows`` is a packed table or a stream of them (:class:`rmlprep.pipeline.writers.Writer`):
        concat packing cuts one stream of framed documents into rows, so the fragments come in
        document order and the ``.bin`` is written as they arrive (the ids :func:`unpack` would
        give, without holding the unit); the ``.idx`` needs only the document lengths.
        ``metadata`` has no place in the format; the done marker holds the config hash.
        """
        if isinstance(rows, pa.Table):
            rows = [rows]
        lengths: list[np.ndarray] = []  # finished documents' lengths, piece by piece
        cur = {"ex": -1, "len": 0}  # the document the stream is in

        def write_bin(f: IO[bytes]) -> None:
            for piece in from_stream(rows):
                ids, seq, ex = _fragments(piece)
                if len(ex) and (ex[0] < cur["ex"] or np.any(np.diff(ex) < 0)):  # pragma: no cover - BFD rows
                    raise PackingError("output.format = 'megatron': fragments out of document order")
                if len(ids) and int(ids.max()) > np.iinfo(self.dtype).max:
                    raise ConfigError(f"output.format = 'megatron': id {int(ids.max())} does not fit {self.dtype} "
                                      f"(vocab size {self.vocab_size})")
                f.write(ids.astype(self.dtype.newbyteorder("<"), copy=False).tobytes())
                if not len(ex):
                    continue
                starts = np.flatnonzero(np.diff(ex, prepend=ex[0] - 1))  # first fragment of each document
                doc_len = np.add.reduceat(seq, starts)
                if ex[0] == cur["ex"]:  # the piece goes on with the document of the piece before
                    doc_len[0] += cur["len"]
                elif cur["ex"] >= 0:
                    lengths.append(np.asarray([cur["len"]], np.int64))
                lengths.append(doc_len[:-1])
                cur["ex"], cur["len"] = int(ex[-1]), int(doc_len[-1])
            if cur["ex"] >= 0:
                lengths.append(np.asarray([cur["len"]], np.int64))

        def write_idx(f: IO[bytes]) -> None:
            lens = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
            pointers = np.zeros(len(lens), np.int64)
            if len(lens) > 1:
                np.cumsum(lens[:-1] * self.dtype.itemsize, out=pointers[1:])
            f.write(b"".join([
                INDEX_HEADER,
                struct.pack("<Q", 1),
                struct.pack("<B", DTYPE_CODES[self.dtype]),
                struct.pack("<Q", len(lens)),
                struct.pack("<Q", len(lens) + 1),
                lens.astype("<i4").tobytes(),
                pointers.astype("<i8").tobytes(),
                np.arange(len(lens) + 1, dtype="<i8").tobytes(),
            ]))

        with committing():
            files = {bin_name(index): out.commit(bin_name(index), write_bin, digest=True)}
        files[idx_name(index)] = out.commit(idx_name(index), write_idx, digest=True)
        return files  # type: ignore[return-value]


def _fragments(piece: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The token ids of a piece's document fragments in row order, each fragment's length and
    its document (pad runs, example_index -1, left out)."""
    ids = to_numpy(piece.column("input_ids").combine_chunks().flatten())
    seq = to_numpy(piece.column("seq_lengths").combine_chunks().flatten()).astype(np.int64)
    ex = to_numpy(piece.column("example_index").combine_chunks().flatten())
    if len(ex) and ex.min() < 0:
        keep = np.repeat(ex >= 0, seq)
        ids, seq, ex = ids[keep], seq[ex >= 0], ex[ex >= 0]
    return ids, seq, ex


def data_args(output_dir: str, shards: list[dict]) -> str:
    """The ``--data-args-path`` text: ``weight prefix`` per unit, weighted by its tokens (units
    without documents left out)."""
    parts = []
    for s in shards:
        if s.get("documents"):
            prefix = f"{str(output_dir).rstrip('/')}/{s['shard'].removesuffix('.bin')}"
            parts.append(f"{s['written_tokens'] if 'written_tokens' in s else s['tokens']} {prefix}")
    return "\n".join(parts) + "\n"
