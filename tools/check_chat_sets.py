"""Every conversation of every real chat set against every real template a format reproduces.

The committed fixtures (``tools/make_chat_fixtures.py``) hold a sample of each set and the slow
test ``test_real_chat_sets_live`` the first 120 conversations of each; this tool goes through
all of them, for the record (minutes of CPU, so not a test). For each template in
../shared/chat-templates (and ``more/``) that a format reproduces on the probes, and each
conversation of each ``*.messages.jsonl`` set in ../shared/corpora/chat (the tool-call set
also with its JSON tool calls converted, ``rmlprep.chat.convert.json_tools``):

* the format writes it: the template's render (jinja2, as transformers renders, the format's
  bos/eos, the clock at 2024-07-26) must equal the text byte for byte — a template that
  raises on a conversation the format writes is a difference too;
* the format refuses it: counted, with whether the template refuses it as well (a row the
  format refuses is a reject in a run, never written).

Prints one line per template and the first differences; exits 1 on any difference.

Usage: python tools/check_chat_sets.py [--shared DIR] [--template NAME ...] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a clone without installing

from rmlprep.chat.convert import json_tools  # noqa: E402
from rmlprep.chat.detect import template_sha256  # noqa: E402
from rmlprep.chat.registry import check_conversation, get_format, template_view, write  # noqa: E402
from rmlprep.chat.render import render  # noqa: E402
from rmlprep.errors import ChatFormatError  # noqa: E402

DEFAULT_SHARED = REPO.parent / "shared"
TODAY = "2024-07-26"


def conversations(shared: Path, limit: int | None):
    """(set name, line, messages, tools) for every conversation of every set."""
    for path in sorted((shared / "corpora" / "chat").glob("*.messages.jsonl")):
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh):
                if limit is not None and lineno >= limit:
                    break
                msgs = json.loads(line)["messages"]
                yield path.name, lineno, msgs, None
                if "toolcall" in path.name:
                    m2, tools, n = json_tools(msgs)
                    if n:
                        yield path.name + ":json_tools", lineno, m2, tools


def check_template(name: str, src: str, fmt: str, convs) -> dict:
    f = get_format(fmt)
    res = {"template": name, "format": fmt, "written": 0, "equal": 0, "refused": 0, "refused_by_both": 0,
           "differ": 0, "first": []}
    for set_name, lineno, msgs, tools in convs:
        try:
            conv = check_conversation(msgs, f, tools=tools)
            ours = write(conv, f).text()
        except ChatFormatError:
            res["refused"] += 1
            try:
                ref = render(src, msgs, tools=tools, bos_token=f.bos, eos_token=f.eos, now=TODAY)
            except Exception as e:  # noqa: BLE001 - a schema the template cannot even read
                ref = {"error": str(e)}
            res["refused_by_both"] += "error" in ref
            continue
        res["written"] += 1
        vm, vt = template_view(conv, f)
        ref = render(src, vm, tools=vt, bos_token=f.bos, eos_token=f.eos, now=TODAY)
        if ref.get("output") == ours:
            res["equal"] += 1
        else:
            res["differ"] += 1
            if len(res["first"]) < 3:
                res["first"].append((set_name, lineno, ref.get("error") or ref.get("output", "")[:300], ours[:300]))
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--template", action="append", help="a template name (e.g. more/Qwen-Qwen3-0.6B); default all")
    ap.add_argument("--limit", type=int, default=None, help="the first N conversations of each set")
    args = ap.parse_args(argv)
    from rmlprep.chat._template_table import TEMPLATES

    tdir = args.shared / "chat-templates"
    convs = list(conversations(args.shared, args.limit))
    print(f"{len(convs)} conversations from {len({c[0].split(':')[0] for c in convs})} sets", flush=True)
    seen: set[str] = set()
    bad = 0
    for p in sorted(tdir.glob("*.jinja")) + sorted(tdir.glob("more/*.jinja")):
        name = p.relative_to(tdir).as_posix()[: -len(".jinja")]
        if args.template and name not in args.template:
            continue
        src = p.read_text(encoding="utf-8")
        sha = template_sha256(src)
        fmt = TEMPLATES.get(sha, (None, ""))[0]
        if fmt is None or sha in seen:
            continue
        seen.add(sha)
        t0 = time.perf_counter()
        r = check_template(name, src, fmt, convs)
        print(f"{name:50s} {fmt:22s} written {r['written']:6d}  equal {r['equal']:6d}  differ {r['differ']:3d}  "
              f"refused {r['refused']:6d} (template too: {r['refused_by_both']:6d})  {time.perf_counter() - t0:.0f}s",
              flush=True)
        for s, ln, e, a in r["first"]:
            print(f"    {s} line {ln}:\n      template: {e!r}\n      rmlprep:  {a!r}")
        bad += r["differ"]
    print("all equal" if not bad else f"{bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
