"""What changed between the config of the shards in an output folder and the run's config, in
one line for the refusal that asks for ``--overwrite`` (:func:`.owner.check_shards`)."""

from __future__ import annotations

import json
from typing import Any

from ..config import RunConfig, config_from_dict
from ..errors import ConfigError

__all__ = ["config_change"]

_UNSET: Any = object()
_SAME = " (the same files)"

#: Keys a run adds to [chat] as it resolves it (rmlprep.chat_parity.resolve_chat_config: the
#: template's sha256 and tokens under chat.format = "template"), not keys of a config file.
_RESOLVED = ("template_sha256", "template_tokens")


def _diffs(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """``"pack.seq_len 8 -> 4"`` for each leaf that differs, keys sorted; a table on one side and
    a value or nothing on the other (``chat.options`` unset, then ``{enable_thinking = false}``)
    is one change of the whole table, not a null that went and a key that came."""
    out: list[str] = []
    for k in sorted(set(old) | set(new)):
        o, n = old.get(k, _UNSET), new.get(k, _UNSET)
        if isinstance(o, dict) and isinstance(n, dict) and o and n:
            out += _diffs(o, n, f"{prefix}{k}.")
        elif o != n:
            out.append(f"{prefix}{k} {_short(o)} -> {_short(n)}" + (_SAME if _same_files(o, n) else ""))
    return out


def _same_files(o: Any, n: Any) -> bool:
    """Whether ``o`` and ``n`` (a path or a list of paths) differ only in ``.``/``..`` segments."""
    import os

    o, n = ([o], [n]) if isinstance(o, str) and isinstance(n, str) else (o, n)
    return (isinstance(o, list) and isinstance(n, list) and len(o) == len(n) and all(
        isinstance(a, str) and isinstance(b, str) and os.path.isabs(a) and os.path.isabs(b)
        and os.path.normpath(a) == os.path.normpath(b) for a, b in zip(o, n)))


def _short(v: Any) -> str:
    s = "(unset)" if v is _UNSET else json.dumps(v, ensure_ascii=False, sort_keys=True)
    return s if len(s) <= 80 else s[:77] + "..."


def config_change(manifest: Any, config: RunConfig, old_hash: str) -> str:
    """What differs between ``config`` and the config of the shards in the folder, as
    ``"pack.seq_len 2048 -> 1024; ..."`` (keys of the hashed part only: not workers or the
    output folder), from the folder's ``manifest`` (parsed ``manifest.json``) when it describes
    shards of ``old_hash``; "" when it is absent, of another config or of another shape."""
    m = manifest
    if not isinstance(m, dict) or m.get("config_hash") != old_hash or not isinstance(m.get("config"), dict):
        return ""
    try:
        try:
            raw = json.loads(json.dumps(m["config"]))  # the keys the run adds for "template" mode, set aside:
            chat = raw.get("chat") if isinstance(raw.get("chat"), dict) else {}  # config_from_dict refuses them
            added = {k: chat.pop(k) for k in _RESOLVED if k in chat}
            old_cfg = config_from_dict(raw)  # the defaults of keys it leaves out come back
            old_cfg["chat"].update(added)
        except ConfigError:  # an earlier version's manifest (nulls, sft keys in a pretrain config)
            old_cfg = RunConfig(m["config"])
        if old_cfg.config_hash != old_hash:  # hashed by another version's rules: no honest diff
            return ""
        diffs = _diffs(old_cfg.hashed_part(), config.hashed_part())
    except Exception:  # noqa: BLE001 - a manifest of another shape: the refusal goes on without the detail
        return ""
    why = ("; a relative path resolves against the current folder and is hashed as resolved: run from the folder "
           "the shards were made from" if any(d.endswith(_SAME) for d in diffs) else "")
    return "; ".join(diffs[:5]) + (f"; and {len(diffs) - 5} more" if len(diffs) > 5 else "") + why
