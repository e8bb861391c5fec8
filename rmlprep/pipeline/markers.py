"""Done markers: what a unit's ``shard-NNNNN.done.json`` vouches for (:data:`MARKER_VERSION`,
with what each version changed), which markers of an earlier version are still accepted
(:data:`ACCEPTED_MARKERS`), and the check a rerun makes before it skips a unit
(:func:`verify_marker`, which :meth:`.output.OutputFolder.verify_done` is). Keys added within a
version are :mod:`.late_keys`'.

Source: datatrove's completion marker per finished task (``executor/local.py``), here with the
shard's sha256 and the config, input and tokenizer it was made from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..shards import rejects_name, shard_name
from .late_keys import unmet

__all__ = ["MARKER_VERSION", "ACCEPTED_MARKERS", "verify_marker"]

#: The done markers' schema, bumped whenever what a marker vouches for changes; a marker of
#: another version (none: 0) is redone on resume (:func:`verify_marker`). 1: rejected
#: values are JSON; documents ``overflow = "drop"`` leaves out are in rejects/; sft with
#: add_generation_prompt rejects conversations ending on an answer; sft truncation that leaves
#: no assistant token is a reject; sft labels are int32 (earlier markers may vouch for any of
#: these written otherwise). 2: sft cuts user-defined added tokens (Qwen's ``<tool_call>``,
#: Gemma 3's ``<html>``) out of message text as the tokenizer does (version 1 wrote them as text).
#: 3: the marker holds its rejects file's sha256 and size (``rejects_sha256``, ``rejects_bytes``),
#: checked on resume; reject records name their ``stage``, and the pack stage's carry the row's
#: ``value``; sft keeps JSON's nulls in tool definitions (``"default": null``; 2 deleted them) and
#: reads Arrow struct ``arguments`` without the other rows' keys as null (2 wrote them); sft cuts
#: added tokens from the whole render (``Tokenizer.cut_added_parts``: Gemma 3's newline-run tokens
#: across a template/message border, normalized user-defined tokens, Phi-3's rstrip). A
#: version-2 marker of a pretraining unit with no rejects vouches for all a version-3 one would
#: (the same shard, no rejects file) and is accepted (:data:`ACCEPTED_MARKERS`); an sft one (its
#: chat counts, e.g. ``no_assistant``) is not. Pretraining markers of version 3 written before
#: the room of a unit's short last row was counted hold ``unfilled_tokens`` 0: the count is no
#: part of what a marker vouches for (the shard is the same), so the version stays and the reports
#: work the room out from ``rows`` and ``written_tokens``, which every marker holds. Markers
#: written before a key of :mod:`.late_keys` existed (``reasoning_untrained``...) lack it: what
#: that means per config is there (a null total, or a redo).
MARKER_VERSION = 3
#: Markers of an earlier version that this one still accepts, and when (marker → bool): a
#: version-2 marker of a pretraining unit without rejects (one with rejects cannot vouch for
#: their content; sft shards of version 2 may hold tool definitions without their nulls).
ACCEPTED_MARKERS: dict[int, Callable[[dict[str, Any]], bool]] = {
    2: lambda m: not m.get("rejects") and "no_assistant" not in m}


def verify_marker(folder, index: int, config_hash: str, input_identity: dict[str, Any] | None = None,
                  tokenizer: str | None = None, needs: dict[str, Any] | None = None,
                  ) -> tuple[dict[str, Any] | None, str]:
    """Whether unit ``index`` of ``folder`` (an :class:`.output.OutputFolder`, local or on a store)
    is done for this config: :meth:`.output.OutputFolder.verify_done`, whose docstring says the
    arguments and the answer. Reads the marker, then the sha256 of each file it vouches for."""
    m = folder.read_done(index)
    if m is None:
        return None, "no done marker"
    if m.get("config_hash") != config_hash:
        return None, "done marker is for another config"
    if tokenizer is not None and m.get("tokenizer") != tokenizer:
        return None, "done marker is for another tokenizer"
    if input_identity is not None and m.get("input") != input_identity:
        return None, "input changed since the unit was done"
    version = m.get("marker_version", 0)
    if version != MARKER_VERSION and not ACCEPTED_MARKERS.get(version, lambda m: False)(m):
        return None, (f"done marker of marker version {version} "  # before hashing a shard redone anyway
                      f"(this rmlprep writes {MARKER_VERSION})")
    if why := unmet(m, needs):
        return None, why
    files = m.get("files") or {m.get("shard") or shard_name(index): m.get("sha256")}
    for shard, digest in files.items():  # a writer's files (Parquet: one; Megatron: .bin, .idx)
        if not folder.exists(shard):
            return None, "shard file missing"
        if folder.sha256(shard) != digest:
            return None, "shard sha256 differs from its done marker"
    rejects = rejects_name(index)
    if m.get("rejects"):
        if not folder.exists(rejects):
            return None, "rejects file missing"
        if folder.sha256(rejects) != m.get("rejects_sha256"):
            return None, "rejects file sha256 differs from its done marker"
    elif folder.exists(rejects):  # not this unit's: its run wrote none
        return None, "a rejects file the done marker does not vouch for"
    return m, ""
