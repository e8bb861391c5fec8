"""Columnar packing of token-id documents into fixed-length rows.

Two strategies, both pure numpy over flat values + offsets (no Python loop per token):

- :func:`pack_concat` (pretraining): concatenate documents, each framed by an optional bos and
  eos, and cut the stream into rows of ``seq_len``. A document may continue into the next row.
- :func:`pack_bfd` (SFT): best-fit-decreasing bin packing; an example is never split across
  rows unless ``overflow="split"``. The only Python loop is one cheap step per example (the bin
  choice: a bisect over the sorted distinct remaining capacities plus a heap per capacity).

Every output row keeps its document boundaries, so padding-free attention (flash-attention
varlen, TRL ``padding_free``) never lets one document attend to another:

===============  ==================  ==============================================================
column           type                meaning
===============  ==================  ==============================================================
input_ids        list<uint32>        token ids; every full row has exactly ``seq_len`` values
labels           list<int32>         (BFD, if given) aligned with input_ids; -100 = ignored
assistant_masks  list<uint8>         (BFD, if given) aligned with input_ids; 1 = assistant token
position_ids     list<int32>         0, 1, 2, ... restarting at the start of every fragment
seq_lengths      list<int32>         lengths of the fragments in the row; they sum to its length
example_index    list<int64>         per fragment: which input row it came from (-1 = pad run)
===============  ==================  ==============================================================

A run's Parquet shards add ``unit`` (int32, the shard's number on every row): ``example_index``
restarts at 0 in each shard, and :func:`unpack` keys documents by (unit, example_index) when the
rows have that column.

``labels`` are not shifted (``labels[i]`` is the target at position ``i``, Hugging Face's
convention; its models shift inside the loss, over the whole row), so the first label of a
fragment would be predicted from the previous fragment's last token, another example.
:func:`pack_bfd` therefore writes **-100 as the first label of every fragment**
(``labels[position_ids == 0] == -100`` on every row): TRL's padding-free collator masks
``labels[position_ids == 0]`` and transformers' ``DataCollatorWithFlattening`` puts -100 as each
sequence's first label for the same reason. Nothing is lost: an example alone in a row never
trains its first label either (nothing precedes it). A whole conversation starts with template
text (-100 already); a chunk of ``overflow="split"`` can start inside an answer, and that token
is then not trained (``assistant_masks`` keep its 1: it is an assistant token).
``labels`` are int32, as :func:`rmlprep.tokenize_chat` gives them: signed for -100, and every
token id of a real vocabulary fits (an id past 2**31 - 1 is a :class:`PackingError`); half the
bytes of int64, and ``datasets``' torch format hands out int64 tensors from it anyway (as it
does from ``input_ids``' uint32), the type cross-entropy takes.

A *fragment* is the part of one document that lies in one row. **position_ids restart at 0 at
every fragment**, including a document continued from the previous row (the TRL "wrapped"
choice): a row is then self-contained, positions never exceed ``seq_len - 1``, and the
flash-attention rule "a new sequence starts where position_ids == 0" holds for every row. Which
fragments belong together is recorded in ``example_index`` instead, and :func:`unpack` uses it
to rebuild the documents.

Modules: :mod:`.concat` (:func:`pack_concat`), :mod:`.bfd` (:func:`pack_bfd`),
:mod:`.unpacking` (:func:`unpack`, :func:`naive_padding_ratio`), :mod:`.common` (the result types,
input normalisation and checks), :mod:`.arrays` (the numpy/Arrow helpers they share).

The lists use 32-bit offsets; a batch with more than 2**31 - 1 values in one column gets
``large_list`` columns instead (one Arrow limit, nothing else changes).
"""

from .arrays import from_numpy, to_numpy
from .bfd import pack_bfd
from .common import IGNORE_INDEX, PackResult, PackStats, Unpacked, flat_offsets
from .concat import pack_concat
from .unpacking import naive_padding_ratio, unpack

__all__ = [
    "IGNORE_INDEX",
    "PackStats",
    "PackResult",
    "Unpacked",
    "flat_offsets",
    "naive_padding_ratio",
    "pack_concat",
    "pack_bfd",
    "unpack",
    "from_numpy",
    "to_numpy",
]
