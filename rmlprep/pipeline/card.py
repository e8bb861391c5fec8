"""The output folder's ``README.md``: a Hugging Face dataset card for a Parquet run with
documents (:func:`dataset_card`), a README saying there is no data (:func:`_no_data_readme`), or,
while a run writes the folder and after one that did not complete, a card that no ``datasets``
load can take for the data (:func:`incomplete_card`)."""

from __future__ import annotations

import json
import os
from typing import Any

from .. import fs
from .pack import SCHEMAS
from .writers import UNIT_FIELD

__all__ = ["dataset_card", "incomplete_card", "INCOMPLETE_FILES"]

#: the ``data_files`` path of :func:`incomplete_card`: a pattern that matches no file, so
#: ``datasets.load_dataset(FOLDER)`` fails with ``FileNotFoundError: Unable to find '<this>' ...``,
#: which says why
INCOMPLETE_FILES = "rmlprep run not complete - its shards are part of the data; rerun its config to finish (see README.md)"


def dataset_card(manifest: dict[str, Any], pipeline: str) -> bytes:
    """The output folder's ``README.md``, a Hugging Face dataset card: YAML front matter with the
    data files (``train-*.parquet``, one ``train`` split) and the features, as the Hub writes them
    (so ``datasets.load_dataset(OUTPUT)`` reads exactly the shards) and the split's size
    (``num_examples``: the rows, which ``datasets`` checks on loading, so a folder that lost or
    gained a shard since is refused; ``num_bytes``: :meth:`.pack.Packed.arrow_bytes`, left out
    while a kept marker of version 2 lacks it), then the tokenizer, the config hash and the counts. Without the card, ``datasets``' split patterns pick the same files
    (:mod:`rmlprep.shards`).

    The card travels with the folder (copied, moved, uploaded to the Hub): its ``data_files``
    and its loading lines are relative to the card, as on the Hub's dataset cards; the one line
    that names where this run wrote the folder (an absolute path, or the object-store URI) says
    it is local to the machine that ran it. Two runs of one config into two folders give cards
    that differ in that line only. The folder form (``load_dataset(FOLDER)``, or the Hub
    repository) comes first: only it reads the card, so only it checks ``num_examples``; the
    ``"parquet"`` form comes last, said to load a folder short of a shard silently (README,
    "What you get").

    A run with no document (every row rejected, or no row read; the command exits 2) gets no
    card: a README that says so, with no loading lines (:func:`_no_data_readme`)."""

    t = manifest["totals"]
    if not t["documents"]:
        return _no_data_readme(manifest)
    feats = [f"  - name: {f.name}\n    list: {f.type.value_type}" for f in SCHEMAS[pipeline]]
    feats.append(f"  - name: {UNIT_FIELD.name}\n    dtype: {UNIT_FIELD.type}")  # the Parquet writer's
    tok = manifest["tokenizer"]
    seq_len = manifest["config"]["pack"]["seq_len"]
    where = str(manifest["config"]["output"]["dir"])
    if fs.is_remote(where):
        here = (f"`{where}`: `datasets.load_dataset(\"parquet\", "  # a store's folder: no card read, no check
                f"data_files={json.dumps(where.rstrip('/') + '/train-*.parquet', ensure_ascii=False)})` "
                "(a `\"parquet\"` form: no row-count check)")
    else:
        where = os.path.abspath(where)
        here = f"`{where}`: `datasets.load_dataset({json.dumps(where, ensure_ascii=False)})`"
    # the split's size as datasets records it (num_bytes: the rows' Arrow size; an entry without it
    # is ignored with a warning on every load); load_dataset checks num_examples against the shards
    splits = (f"  splits:\n  - name: train\n    num_bytes: {t['arrow_bytes']}\n    num_examples: {t['rows']}\n"
              if t.get("arrow_bytes") is not None else "")
    text = (
        "---\n"
        "configs:\n- config_name: default\n  data_files:\n  - split: train\n    path: train-*.parquet\n"
        "dataset_info:\n  features:\n" + "\n".join(feats) + "\n" + splits +
        "tags:\n- rmlprep\n- tokenized\n"
        "---\n\n"
        f"# Tokenized {pipeline} data (rmlprep {manifest['rmlprep_version']})\n\n"
        f"Packed rows of up to {seq_len} token ids, written by rmlprep from the config in `manifest.json`.\n\n"
        f"- tokenizer: `{tok['name']}`, vocab size {tok['vocab_size']}, fingerprint `{tok['fingerprint']}`\n"
        f"- config hash: `{manifest['config_hash']}`\n"
        f"- {len(manifest['shards'])} shard{'' if len(manifest['shards']) == 1 else 's'}, {t['rows']:,} rows, {t['documents']:,} documents, "
        f"{t['written_tokens']:,} tokens in rows ({t['tokens']:,} in documents), {t['rejects']:,} rejected rows"
        + (" (in `rejects/`)" if t["rejects"] else "") + "\n\n"
        "## Columns\n\n"
        "`input_ids`" + (", `labels` (-100 where not trained), `assistant_masks`" if pipeline == "sft" else "") +
        "; `position_ids` (from 0 in each document piece); `seq_lengths` (the pieces' lengths); `example_index` "
        "(which document of its shard each piece is: from 0 in every shard, -1 for padding); `unit` (the shard's "
        "number, `N` of `train-N.parquet`, on each of its rows). A document is (`unit`, `example_index`): "
        "`rmlprep.unpack(ds.with_format(\"arrow\")[:])` gives the documents back, keyed so.\n\n"
        "## Loading\n\n"
        "The `configs` above name the shards relative to this card (`train-*.parquet`), so the folder loads\n"
        "from wherever it sits: moved, copied, or uploaded to the Hub as a dataset repository. Load it by the\n"
        "folder (or the Hub repository): only that form reads this card, and `datasets` then checks the\n"
        "split's `num_examples` against the rows it reads, so a folder that lost or gained a shard since the\n"
        "card was written is refused (`NonMatchingSplitsSizesError`), not loaded short. A streamed load\n"
        "(`streaming=True`) checks no count: such a folder streams short.\n\n"
        "- by the folder's path, wherever it is now: `datasets.load_dataset(\"path/to/the/folder\")`\n"
        "- from the Hub, once uploaded: `datasets.load_dataset(\"<user>/<dataset>\")`\n"
        f"- where this run wrote it (on the machine that ran it, not a portable path): {here}\n"
        "- in the folder that holds this card, without that check: `datasets.load_dataset(\"parquet\", "
        "data_files=\"train-*.parquet\")` reads every `train-*.parquet` there and not this card, so a folder "
        "short of a shard loads short, silently (`manifest.json`'s `shards` lists every unit; the rows' `unit` "
        "column says which a table holds)\n"
    )
    return text.encode("utf-8")


def _no_data_readme(manifest: dict[str, Any]) -> bytes:
    """The README of an output folder without a document: what happened and what to do, no
    dataset card (nothing to load) and no loading lines."""
    t = manifest["totals"]
    if t["rejects"]:
        what = (f"every one of its {t['rows_read']:,} input rows was rejected; `rejects/` holds each row with "
                "its file, row number and reason (a wrong `input.column`, or chat data given to the pretrain "
                "pipeline, does this)")
    else:
        what = "its input holds no rows (empty files, or blank lines only)"
    return (
        f"# No data (rmlprep {manifest['rmlprep_version']})\n\n"
        f"This folder holds no document: {what}. The run exited with status 2; there is nothing to load.\n\n"
        "Fix the input or the config and rerun into this folder, without `--overwrite`: the units of a config "
        "that wrote no document are replaced.\n\n"
        f"- config hash: `{manifest['config_hash']}`; the config is in `manifest.json`\n"
        f"- tokenizer: `{manifest['tokenizer']['name']}`, fingerprint `{manifest['tokenizer']['fingerprint']}`\n"
    ).encode("utf-8")


def incomplete_card(output_dir: str) -> bytes:
    """The ``README.md`` of a Parquet folder whose run has units to do, written before the first
    of them (:func:`rmlprep.pipeline.driver.run`) and replaced by the dataset card when the run
    completes.

    A run that fails (a unit's input cut short: exit 2), is stopped or is killed leaves its done
    units' shards, ``train-NNNNN.parquet``, and no manifest; without a card ``datasets``' split
    patterns took those shards for the ``train`` split, so ``datasets.load_dataset(FOLDER)``, the
    form the README calls checked, loaded part of the data as the whole with no word (trial: a
    run of 5 units whose unit 4 failed loaded 831 rows of units 0..3). This card's ``configs``
    name a file that does not exist (:data:`INCOMPLETE_FILES`), so that load fails with
    ``FileNotFoundError`` naming it. The ``"parquet"`` forms read no card: they still load the
    shards there (README, "What you get").

    Args:
        output_dir: the folder (path or URI), named in the text.
    Returns:
        the card's bytes (UTF-8).
    """
    return (
        "---\n"
        "configs:\n- config_name: default\n  data_files:\n  - split: train\n"
        f"    path: {json.dumps(INCOMPLETE_FILES)}\n"
        "tags:\n- rmlprep\n---\n\n"
        "# Incomplete rmlprep run\n\n"
        f"An rmlprep run is writing `{output_dir}`, or its run failed, was stopped or was killed before every "
        "unit was done: the `train-*.parquet` here (each with its `shard-NNNNN.done.json`) are part of the data, "
        "and there is no `manifest.json` yet. So `datasets.load_dataset` of this folder is refused (this card's "
        "`data_files` name no file); `load_dataset(\"parquet\", ...)` reads no card and would load the part.\n\n"
        "Rerun the same config into this folder (`rmlprep run CONFIG --resume`): the done units are kept, the "
        "rest are done, and this card is replaced by the dataset card.\n"
    ).encode("utf-8")
