"""The main job in ten lines with gigatoken: the peer of ``rmlprep run`` in ``python -m bench job``.

    RAYON_NUM_THREADS=2 python bench/gigatoken_job.py TOKENIZER_DIR EOS_ID SEQ_LEN OUT.parquet FILE.jsonl...

gigatoken reads the JSONL files itself (``encode_files``), then: an EOS after every document,
naive packing (concatenate, cut into rows of SEQ_LEN, drop the tail), one zstd Parquet file.
No parity check, no rejects, no resume, no shard metadata: a floor for the main job's time.
"""
import sys

import awkward as ak, gigatoken as gt, numpy as np, pyarrow as pa, pyarrow.parquet as pq  # noqa: E401

tok_dir, eos, seq_len, out, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
docs = gt.Tokenizer(tok_dir).encode_files(gt.JsonlFileSource(files, field="text"))
ids = np.insert(ak.flatten(docs).to_numpy(), np.cumsum(ak.num(docs).to_numpy()), eos)
n = len(ids) // seq_len * seq_len
rows = pa.FixedSizeListArray.from_arrays(pa.array(ids[:n], pa.uint32()), seq_len)
pq.write_table(pa.table({"input_ids": rows}), out, compression="zstd")
