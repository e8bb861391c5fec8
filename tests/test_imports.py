"""The package's import graph has no cycle, counting every import (function-level ones too).

A cycle held together by an import inside a function works only by the order things happen to
be imported in; the fix is a lower module that both sides use (see issue "architecture").
"""

from __future__ import annotations

import ast
import os
import pkgutil
from pathlib import Path

import pytest

import rmlprep

PKG = Path(rmlprep.__file__).resolve().parent


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name → (source file, is a package), for every ``.py`` file under rmlprep/."""
    mods = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return mods


def _submodules(pkg: str) -> set[str]:
    """Every submodule name of a package, compiled extensions included (``_fastbpe``)."""
    path = PKG.parent.joinpath(*pkg.split("."))
    return {m.name for m in pkgutil.iter_modules([str(path)])}


def import_graph() -> dict[str, set[str]]:
    """Module → the rmlprep modules it imports anywhere in its source.

    ``from . import name`` counts as importing the submodule ``name`` when there is one, else as
    importing the package itself (a name defined in its ``__init__``).
    """
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        here = name if is_pkg else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in mods)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target not in mods:
                    continue
                subs = _submodules(target) if mods[target][1] else set()
                for a in node.names:
                    if a.name in subs:
                        if f"{target}.{a.name}" in mods:
                            deps.add(f"{target}.{a.name}")
                    else:
                        deps.add(target)
        deps.discard(name)
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 finished
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def test_the_graph_sees_every_kind_of_import():
    """Worked example on the real package: cli imports the pipeline at top level, the package
    ``rmlprep`` imports load, and native_load's ``from . import _fastbpe`` (an extension) is an edge to
    no .py module, not to the package."""
    g = import_graph()
    assert "rmlprep.pipeline" in g["rmlprep.cli"]
    assert "rmlprep.load" in g["rmlprep"]
    assert "rmlprep" not in g["rmlprep.native_load"] and "rmlprep.native_load" in g["rmlprep.native"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_loaders_demo_and_parity_never_import_the_pipeline():
    graph = import_graph()
    lows = ("rmlprep.load", "rmlprep.demo", "rmlprep.parity", "rmlprep.chat_parity", "rmlprep.readers",
            "rmlprep.packing", "rmlprep.config", "rmlprep.shards")
    for mod in graph:
        if mod in lows or mod.startswith(tuple(f"{low}." for low in lows)):  # packages: every module
            assert not {d for d in graph[mod] if d.startswith("rmlprep.pipeline")}, mod
    assert {"rmlprep.readers.csvfile", "rmlprep.packing.bfd"} <= set(graph)
    engines = {"rmlprep.pipeline.engines", "rmlprep.pipeline.ray_engine"}
    for e in engines:  # engines receive the unit function
        assert not graph[e] & {"rmlprep.pipeline", "rmlprep.pipeline.unit", "rmlprep.pipeline.driver"}, e


#: Modules over the limit, each with the reason (none today: every module is under 500 lines).
KNOWN_LARGE: set[str] = set()
MAX_LINES = 500


def test_no_module_over_500_lines_but_generated_tables():
    """Issue 16: a module a reader can hold in their head. Generated tables (a "Generated by" /
    "generated; do not edit" banner at the top) are exempt."""
    over = []
    for name, (path, _) in sorted(_modules().items()):
        text = path.read_text(encoding="utf-8")
        head = text[:400].lower()
        if "generated by" in head or "generated; do not edit" in head or name in KNOWN_LARGE:
            continue
        n = text.count("\n")
        if n > MAX_LINES:
            over.append(f"{path.relative_to(PKG.parent)} has {n} lines")
    assert not over, (f"over {MAX_LINES} lines (issue 16): {over}; split the module (a package of one module "
                      "per concern, as rmlprep/readers/), or list it in KNOWN_LARGE with the reason")


@pytest.mark.slow
def test_the_wheel_holds_every_package_and_the_fixtures(tmp_path):
    """``pip install .`` must give a working rmlprep on a fresh machine (README command 1): the
    wheel holds every folder of rmlprep/ with an ``__init__.py`` and the fixtures the parity stage
    and the offline demo read (as rmlprep/_fixtures/). A hand-kept package list once left
    rmlprep.chat out of the wheel. Builds the wheel from a copy of the tree, as pip does."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "build", "*.egg-info")
    shutil.copytree(PKG, src / "rmlprep", ignore=ignore)
    shutil.copytree(PKG.parent / "fixtures", src / "fixtures", ignore=ignore)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(PKG.parent / name, src / name)
    env = {**os.environ, "CC": "false"}  # the C extension is optional: skip compiling it here
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("rmlprep-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {name for name, (_, is_pkg) in _modules().items() if is_pkg}
    missing = {p for p in packages if p.replace(".", "/") + "/__init__.py" not in names}
    assert not missing, f"packages missing from the wheel: {sorted(missing)}"
    modules = {str(p.relative_to(PKG.parent)) for p in PKG.rglob("*.py")}
    assert modules <= names, sorted(modules - names)[:5]
    fixtures = {"rmlprep/_fixtures/" + str(p.relative_to(PKG.parent / "fixtures"))
                for p in (PKG.parent / "fixtures").rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".gz")}
    assert fixtures and fixtures <= names, sorted(fixtures - names)[:5]


def test_every_public_name_is_its_modules_object():
    """``rmlprep/__init__`` imports its public names on first use (PEP 562): each name of
    ``__all__`` still imports as ``from rmlprep import NAME`` and is the object its module
    defines; an unknown name raises AttributeError as for any module."""
    import importlib

    for name in rmlprep.__all__:
        value = getattr(rmlprep, name)
        module = rmlprep._LAZY.get(name)
        if module is not None:
            assert value is getattr(importlib.import_module(f"rmlprep.{module}"), name), name
    assert set(rmlprep._LAZY) <= set(rmlprep.__all__) <= set(dir(rmlprep))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        rmlprep.nope  # noqa: B018
    with pytest.raises(ImportError):
        exec("from rmlprep import nope", {})


@pytest.mark.parametrize("code, absent", [
    ("import rmlprep", ("numpy", "pyarrow", "rmlprep.chat", "rmlprep.tokenizer", "rmlprep.packing")),
    # a process that only tokenizes loads neither pyarrow nor the chat formats nor packing, nor a
    # format reader it does not read (the path does not exist: the load fails after the imports)
    ("from rmlprep import load_tokenizer, LoaderError\ntry:\n    load_tokenizer('missing.json')\n"
     "except LoaderError:\n    pass", ("pyarrow", "rmlprep.chat", "rmlprep.packing", "rmlprep.arrow",
                                         "rmlprep.gguf", "rmlprep.spm", "rmlprep.demo")),
    # the command's start-up: tqdm (~17 ms of CPU, its version lookup) only when a bar is drawn
    ("import rmlprep.cli", ("tqdm",)),
])
def test_import_rmlprep_stays_light(code, absent):
    """What ``import rmlprep`` pulls in, checked in a fresh interpreter (sys.modules)."""
    import json
    import subprocess
    import sys

    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(PKG.parent)})
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    assert not loaded & set(absent), sorted(loaded & set(absent))
