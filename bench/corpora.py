"""The benchmark corpora: two JSONL files with a ``text`` column, the same for every tool.

- ``debian``: 16.5 MB of UTF-8 text sampled from the Debian-built corpus
  (``~/.cache/rmlprep-corpus/pretrain.jsonl``, built by ``../shared/corpora/make_text_corpus.sh``:
  the Debian handbook in 26 languages, man pages in 7, Python and Perl documentation, C headers,
  fortunes): every 8th document in file order, so each part is represented, until 16.5 MB.
  Written once to ``~/.cache/rmlprep-bench/debian-16.5MB.jsonl``.
- ``multilingual``: ``../shared/corpora/text-multilingual.jsonl`` as it is (13.5 MB).

Together they are the main job's input (2 files, 30 MB).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RMLPREP_SHARED", ROOT.parent / "shared"))
CORPUS_DIR = Path(os.environ.get("RMLPREP_CORPUS", Path.home() / ".cache" / "rmlprep-corpus"))
CACHE = Path.home() / ".cache" / "rmlprep-bench"

DEBIAN_MB = 16.5
DEBIAN_STRIDE = 8

CORPORA = {
    "debian": {"label": f"Debian-built corpus, {DEBIAN_MB} MB sample"},
    "multilingual": {"label": "text-multilingual.jsonl, 13.5 MB"},
}


def corpus_file(name: str) -> Path:
    """The JSONL file of a corpus (the Debian sample is written on first use)."""
    if name == "multilingual":
        path = SHARED / "corpora" / "text-multilingual.jsonl"
        if not path.exists():
            raise SystemExit(f"{path} not found (the shared corpora sit beside the checkout)")
        return path
    if name != "debian":
        raise SystemExit(f"unknown corpus {name!r}; known: {', '.join(CORPORA)}")
    out = CACHE / f"debian-{DEBIAN_MB:g}MB.jsonl"
    if out.exists():
        return out
    src = CORPUS_DIR / "pretrain.jsonl"
    if not src.exists():
        raise SystemExit(f"{src} not found: build it with `bash ../shared/corpora/make_text_corpus.sh`")
    limit = int(DEBIAN_MB * 1e6)
    lines, size = [], 0
    with open(src, encoding="utf-8", newline="\n") as f:
        for i, line in enumerate(f):
            if i % DEBIAN_STRIDE or not line.strip():
                continue
            text = json.loads(line)["text"]
            lines.append(json.dumps({"text": text}, ensure_ascii=False))
            size += len(text.encode("utf-8", "surrogatepass"))
            if size >= limit:
                break
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(out)
    return out


def read_texts(path: Path) -> list[str]:
    """The ``text`` of every row, in file order."""
    with open(path, encoding="utf-8", newline="\n") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]
