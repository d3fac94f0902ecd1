"""The optional compiled build of the switch model: opt-in, the pure-Python modules the reference.

``.ci/build-compiled`` compiles the data-path modules of this package (:data:`MODULES`) with mypyc
into extension modules in :data:`COMPILED_DIR` (``fabric/model/compiled/``, not kept in git), with
:data:`DIGEST_FILE`, the SHA-256 of the sources they were built from. With ``UET_COMPILED=1`` in
the environment, the package's ``__init__`` calls :func:`enable` before it imports anything, which
puts that folder in front of the package's ``__path__``: every compiled ``uet.fabric.model.X`` is
then the extension module (same names, same classes, same behaviour: a run gives the same figures,
which ``tests/test_fabric_compiled.py`` checks). Without the variable, or when no build is there,
or when the build is stale (a source changed since: the digest differs, and the compiled code
would no longer be what the source says), the pure-Python modules are used and a stale or
missing build is reported with a warning.

What a compiled class does not allow, which no code of the project does: an attribute its
``__init__`` does not set, a method replaced on an instance, ``vars()`` of an instance (a few tests
do these to look inside, so the suite as a whole runs on the pure-Python modules).

Why only this package: it is about half of a simulator run's CPU and compiles to ≈ 1.5× (issue
28); compiled attributes read from interpreted code cost more than they save, so the endpoint
cores, which other code reads attribute by attribute, stay interpreted.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

__all__ = ["COMPILED_DIR", "DIGEST_FILE", "ENV", "MODULES", "enable", "sources", "sources_digest"]

HERE = Path(__file__).resolve().parent
#: where ``.ci/build-compiled`` puts the extension modules
COMPILED_DIR = HERE / "compiled"
#: the digest of the sources a build was made from, in :data:`COMPILED_DIR`
DIGEST_FILE = "SOURCES.sha256"
#: the environment variable that opts in
ENV = "UET_COMPILED"
#: the modules compiled: the data path a frame takes hop by hop (a compiled class cannot be
#: subclassed by an interpreted one, so a subclass goes too: scaleup's GpuNic of nic's HostNic).
#: The configuration, telemetry records, faults and routing stay interpreted: run once per run or
#: per rare event, and mypyc builds their dataclasses wrongly (a ``ClassVar`` with a default taken
#: for a field); so does ``emptyqueue`` (a subclass of ``deque``, which mypyc cannot compile).
MODULES = ("buffer", "events", "fabric", "frames", "lb", "linkload", "nic", "port", "scaleup", "switch")


def sources() -> list[Path]:
    """The source files of :data:`MODULES`."""
    return [HERE / f"{m}.py" for m in MODULES]


def sources_digest() -> str:
    """SHA-256 over the names and contents of :func:`sources`."""
    h = hashlib.sha256()
    for p in sources():
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def enable(path: list[str]) -> bool:
    """With ``UET_COMPILED`` set (and not ``0``), put a current build in front of the package
    ``path`` (its ``__path__``); True when the compiled modules will be imported."""
    if os.environ.get(ENV, "0") in ("", "0"):
        return False
    digest = COMPILED_DIR / DIGEST_FILE
    if not digest.is_file():
        warnings.warn(f"{ENV}: no compiled build of uet.fabric.model (.ci/build-compiled): pure Python", stacklevel=2)
        return False
    if digest.read_text().strip() != sources_digest():
        warnings.warn(f"{ENV}: the compiled build of uet.fabric.model is stale (rebuild it): pure Python", stacklevel=2)
        return False
    suffix = EXTENSION_SUFFIXES[0]  # this interpreter's (a build is for the Python that made it)
    if not all((COMPILED_DIR / f"{m}{suffix}").is_file() for m in MODULES):
        warnings.warn(f"{ENV}: the compiled build of uet.fabric.model is for another Python: pure Python", stacklevel=2)
        return False
    path.insert(0, str(COMPILED_DIR))
    return True
