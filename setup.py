"""Build script for the optional compiled hot path (``rmlprep._fastbpe``).

Metadata lives in pyproject.toml; this file declares the C extension and finds the packages.
The extension is optional: when it cannot be compiled (no C compiler, missing Python headers) the
install goes on with a warning and rmlprep runs on its pure-Python path (see rmlprep/native.py).

Build in place for development: ``pip install -e .`` (or ``python setup.py build_ext --inplace``).
"""

from __future__ import annotations

import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

NATIVE_DIR = "rmlprep/_native"


class OptionalBuildExt(build_ext):
    """build_ext that reports a failed compile instead of failing the install."""

    def run(self):
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - any build failure falls back to pure Python
            self._warn(e)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            self._warn(e)

    @staticmethod
    def _warn(e: Exception) -> None:
        print(
            f"WARNING: rmlprep's compiled hot path was not built ({e}); rmlprep will use its "
            "pure-Python encoder. Install a C compiler and the Python headers, then rerun "
            "`pip install -e .` to build it.",
            file=sys.stderr,
        )


fastbpe = Extension(
    "rmlprep._fastbpe",
    sources=[f"{NATIVE_DIR}/fastbpe.c"],
    depends=[f"{NATIVE_DIR}/split_utf8.h", f"{NATIVE_DIR}/unicode_classes.h",
             f"{NATIVE_DIR}/normalize_qc.h", f"{NATIVE_DIR}/map_pool.h"],
    include_dirs=[NATIVE_DIR],
    extra_compile_args=["-O3", "-g", "-std=c11", "-Wall", "-Wno-unused-function"],
    optional=True,
)

# Every package under rmlprep/ is found, so a new subpackage can never be left out of the wheel
# (a hand-kept list once lost rmlprep.chat: `pip install .` then failed with ImportError);
# fixtures/ ships as rmlprep._fixtures (package-dir and package-data in pyproject.toml).
PACKAGES = find_packages(include=["rmlprep", "rmlprep.*"]) + ["rmlprep._fixtures"]

setup(packages=PACKAGES, ext_modules=[fastbpe], cmdclass={"build_ext": OptionalBuildExt})
