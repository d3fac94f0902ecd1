"""The optional compiled build of the simulator's per-packet path: opt-in, the pure-Python modules
the reference.

``.ci/build-compiled`` compiles :data:`MODULES` with mypyc as one group (one shared library,
``uet.native__mypyc``, so that calls and attribute reads between the compiled modules are native:
a compiled class used from interpreted code costs more than it saves, issue 28) into
:data:`COMPILED_DIR` (``uet/_native/``, not kept in git), laid out by package, with
:data:`DIGEST_FILE`, the SHA-256 of the sources they were built from. The modules are the switch
model's data path (uet.fabric.model) and the endpoint side a packet crosses in the simulator: the
engine's event loop (uet.sim.engine), the FEP core, the SES per packet, the PDS, the congestion
control and the wire codecs they use.

With ``UET_COMPILED=1`` in the environment, ``uet/__init__`` calls :func:`enable` before anything
else is imported: when a build from the current sources for this interpreter is there, a finder in
front of ``sys.meta_path`` imports every module of :data:`MODULES` from its extension module (same
names, same classes, same behaviour: a run gives the same figures, which
``tests/test_fabric_compiled.py`` checks). Without the variable, or when no build is there, or when
the build is stale (a source changed since: the digest differs, and the compiled code would no
longer be what the source says), or made for another Python, every module is the pure-Python one
and a stale or missing build is reported with a warning.

The digest covers more than :data:`MODULES`: every module of the project they import, whose types
the compiled code was built with (:func:`covered`).

Hashing the sources at every start cost about 20 M instructions (a tenth of a small run), so once
they matched the build's digest, the size, times, inode and device of each source, and of each of
the build's files, are kept beside it (:data:`STAT_FILE`), and a later start whose files still
show exactly those hashes nothing (nor looks for the build's files again); any other start hashes
as before. **Decision** (as git's index does): a content change gives a
file a new ``st_ctime_ns``, which no program can set back (unlike ``st_mtime_ns``); a file
rewritten within one tick of the filesystem's clock after it was recorded could keep its times,
so sources changed less than :data:`SETTLE_NS` before a check are not recorded (hashed again next
time). The record is written atomically, only when it would change, and not at all where
:data:`COMPILED_DIR` is read-only.

What a compiled class does not allow, which no code of the project does: an attribute its
``__init__`` does not set, a method replaced on an instance or a class, ``vars()`` of an instance,
an interpreted subclass (a few tests do these to look inside, so the suite as a whole runs on the
pure-Python modules).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import sys
import time
import warnings
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

__all__ = [
    "COMPILED_DIR",
    "DIGEST_FILE",
    "ENV",
    "GROUP",
    "MODULES",
    "SETTLE_NS",
    "STAT_FILE",
    "active",
    "covered",
    "current",
    "enable",
    "extension",
    "source",
    "sources",
    "sources_digest",
]

HERE = Path(__file__).resolve().parent
#: where ``.ci/build-compiled`` puts the extension modules (``uet/pds/core.<suffix>`` and so on)
COMPILED_DIR = HERE / "_native"
#: the digest of the sources a build was made from, in :data:`COMPILED_DIR`
DIGEST_FILE = "SOURCES.sha256"
#: the size, times, inode and device of each source seen to match the digest and of each of the
#: build's files (module docstring)
STAT_FILE = "SOURCES.stat"
#: sources changed less than this long before a check are not recorded in :data:`STAT_FILE`
SETTLE_NS = 2_000_000_000
#: the environment variable that opts in
ENV = "UET_COMPILED"
#: the mypyc group: its shared library is the module ``GROUP + "__mypyc"``
GROUP = "uet.native"
#: the modules compiled. The switch model: the data path a frame takes hop by hop (a compiled class
#: cannot be subclassed by an interpreted one, so a subclass goes too: scaleup's GpuNic of nic's
#: HostNic); its configuration, telemetry records, faults and routing stay interpreted: run once
#: per run or per rare event, and mypyc builds their dataclasses wrongly (a ``ClassVar`` with a
#: default taken for a field); so does ``emptyqueue`` (a subclass of ``deque``). The endpoint
#: side: what a packet crosses between the fabric and the cores, and the cores' per-packet parts
#: (the PDS's parts are one class, PdsCore, so all of them go; FepCore likewise; and ``_aliases``,
#: the PDS's constants: a module constant annotated ``Final`` is a C static (an integer literal
#: inlined) in every module of the group, where a plain one is a dict lookup in the module's
#: globals at every use).
MODULES = (
    *(
        f"uet.fabric.model.{m}"
        for m in ("buffer", "events", "fabric", "frames", "lb", "linkload", "nic", "port", "scaleup", "switch")
    ),
    "uet.sim.engine",
    *(
        f"uet.pds.{m}"
        for m in (
            "_aliases",
            "ackbuilder",
            "backoff",
            "closing",
            "control",
            "core",
            "feedback",
            "initiator",
            "pdc",
            "ret",
            "rudi",
            "scoreboard",
            "seams",
            "state",
            "target",
            "trimwait",
            "txpkt",
            "validation",
        )
    ),
    *(f"uet.fep.{m}" for m in ("completions", "core", "lanes", "operations", "state")),
    *(f"uet.ses.{m}" for m in ("fep", "reassembly", "segmenter", "sink")),  # not unexpected: a deque subclass
    *(f"uet.cc.{m}" for m in ("base", "ccc", "dctcp", "entropy", "nscc", "pullrate", "rccc", "rccc_paths")),
    "uet.wire.frame",
    "uet.wire.pds",
    "uet.wire.pdsfast",
)

#: the folder of ``uet.fabric``: ``uet/fabric`` where installed, the repository's ``fabric/``
#: (beside ``uet/``) in a checkout
_FABRIC = HERE / "fabric" if (HERE / "fabric").is_dir() else HERE.parent / "fabric"
_HERE_DIR = str(HERE)
_FABRIC_DIR = str(_FABRIC)
_ACTIVE = False


def source(name: str) -> Path:
    """The source file of module ``name`` (one of :data:`MODULES`)."""
    return Path(_source_file(name))


def _source_file(name: str) -> str:
    """:func:`source` as a string: the check at every start builds no :class:`Path` (several
    µs each)."""
    parts = name.split(".")[1:]
    if parts[0] == "fabric":
        return os.path.join(_FABRIC_DIR, *parts[1:]) + ".py"
    return os.path.join(_HERE_DIR, *parts) + ".py"


def sources() -> list[Path]:
    """The source files of :data:`MODULES`."""
    return [source(m) for m in MODULES]


def _module_key(name: str) -> str | None:
    """``name`` as :func:`_source_file` finds its source: the name itself for a module, the name
    and ``.__init__`` for a package; None when the project has no source by that name."""
    for key in (name, name + ".__init__"):
        if os.path.isfile(_source_file(key)):
            return key
    return None


def covered() -> list[str]:
    """The sources a build depends on, as :func:`_source_file` keys, in order: :data:`MODULES`
    and every module and package of the project they import, directly or not (``import`` and
    ``from … import`` statements anywhere in a source, ``TYPE_CHECKING`` blocks included).

    mypyc compiles a module with the types of everything it imports: a compiled module that reads
    an attribute of a pure-Python class checks the value against that class's annotation, so an
    annotation changed in a module that is not compiled changes what the compiled code does
    (``Message.data`` annotated ``bytes`` while it could be a ``memoryview`` made the compiled
    SES raise ``TypeError`` on messages reassembled in place). The digest therefore covers all of
    them: a build older than any of them is stale."""
    seen: set[str] = set()
    todo = list(MODULES)
    while todo:
        key = _module_key(todo.pop())
        if key is None or key in seen:
            continue
        seen.add(key)
        todo.extend(_project_imports(_source_file(key)))
    return sorted(seen)


#: :func:`_project_imports`' answers, by the source text they came from
_IMPORTS: dict[bytes, list[str]] = {}


def _project_imports(path: str) -> list[str]:
    """The project's modules and packages the source at ``path`` imports (``uet.a.b`` gives
    ``uet.a`` and ``uet.a.b``; ``from uet.a import b`` gives ``uet.a`` and ``uet.a.b``, which
    :func:`_module_key` then drops if it is no module); none if it does not parse (covered, its
    imports unknown: the digest differs anyway).

    The answer is kept by the text it came from, and given again for the same text (not judged
    by the file's times, which a rewrite within a clock tick leaves alone; a copy of a source
    elsewhere shares it): a test process asks for :func:`covered` many times, and parsing every
    covered source each time cost about 0.3 s a call (minutes under coverage)."""
    with open(path, "rb") as f:
        text = f.read()
    kept = _IMPORTS.get(text)
    if kept is not None:
        return kept
    import ast  # here: only a hash (after a build, or after a source changed) needs it

    found: list[str] = []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        for n in names:
            parts = n.split(".")
            if parts[0] == "uet":
                found.extend(".".join(parts[:i]) for i in range(2, len(parts) + 1))
    _IMPORTS[text] = found
    return found


def sources_digest() -> str:
    """SHA-256 over the names and contents of the sources a build depends on (:func:`covered`)."""
    import hashlib  # here: only a run that opts in needs it

    h = hashlib.sha256()
    for m in covered():
        with open(_source_file(m), "rb") as f:
            h.update(m.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def _recorded(built: str) -> dict[str, str] | None:
    """The build's files (as :func:`current` gives them) when the stat record (:data:`STAT_FILE`)
    says the sources are those of the build whose digest is ``built``: it was written for that
    digest, for this build folder and this interpreter's extension suffix, and every file it names
    (the sources, then the build's files) still shows the size, times, inode and device recorded;
    None otherwise.

    **Decision**: the record is ``marshal`` data (each file's path with its five figures, and the
    build's files by module name), so that the check at every start is one ``os.stat`` and one
    tuple compared per file, nothing else: about 2 M instructions for the some 180 files of a
    build, against 5.5 M when each file's line of text was rebuilt from its module name and the
    build's files were then looked for one by one."""
    try:
        with open(os.path.join(COMPILED_DIR, STAT_FILE), "rb") as f:
            kept, where, files, entries = marshal.loads(f.read())  # noqa: S302 - the build's own record
        if kept != built or where != [os.fspath(COMPILED_DIR), EXTENSION_SUFFIXES[0]]:
            return None
        stat = os.stat
        for path, figures in entries:
            st = stat(path)
            if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev) != figures:
                return None
    except (OSError, ValueError, EOFError, TypeError):  # no record, a file it names gone, or not a record
        return None
    return files  # type: ignore[no-any-return]


def _record(built: str, files: dict[str, str], newest_ns: int) -> None:
    """Write the stat record (:data:`STAT_FILE`, :func:`_recorded`) of the build whose digest is
    ``built``, its sources having just been found to match it and its files (``files``) to be
    there, unless a source changed after ``newest_ns`` (module docstring); atomically, and not at
    all where :data:`COMPILED_DIR` is read-only."""
    entries = []
    for path in (*(_source_file(m) for m in covered()), *files.values()):
        st = os.stat(path)
        if max(st.st_mtime_ns, st.st_ctime_ns) >= newest_ns:
            return
        entries.append((path, (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)))
    path = os.path.join(COMPILED_DIR, STAT_FILE)
    tmp = f"{path}.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(marshal.dumps((built, [os.fspath(COMPILED_DIR), EXTENSION_SUFFIXES[0]], files, entries)))
        os.replace(tmp, path)
    except OSError:  # a read-only build: hash at every start
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def extension(name: str, suffix: str = EXTENSION_SUFFIXES[0]) -> Path:
    """Where a build keeps the extension module of ``name`` (``suffix``: this interpreter's)."""
    return Path(_extension_file(name, suffix))


def _extension_file(name: str, suffix: str = EXTENSION_SUFFIXES[0]) -> str:
    """:func:`extension` as a string (see :func:`_source_file`)."""
    return os.path.join(COMPILED_DIR, name.replace(".", os.sep) + suffix)


class _Finder:
    """Imports the modules of a build from their extension modules (``files``: name → path): a
    meta path finder (``importlib.abc.MetaPathFinder``'s one method, without importing that
    module at every start).

    **Decision**: its spec is made directly, as ``importlib.util.spec_from_file_location`` makes
    it for an extension module that is not a package (the loader for the file's suffix, the file
    as origin and location): that function looks the loader up among every kind of file and asks
    it whether the module is a package, about 40 k instructions for each of the some 50 modules a
    compiled run imports."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        f = self.files.get(fullname)
        if f is None:
            return None
        spec = ModuleSpec(fullname, ExtensionFileLoader(fullname, f), origin=f)
        spec.has_location = True
        return spec


def current() -> dict[str, str] | None:
    """The extension modules' files of a build from the current sources for this interpreter, by
    module name (the group's shared library too); None, with a warning saying why, when there is
    none."""
    try:
        with open(os.path.join(COMPILED_DIR, DIGEST_FILE)) as f:
            built = f.read().strip()
    except OSError:
        warnings.warn(f"{ENV}: no compiled build (.ci/build-compiled): pure Python", stacklevel=3)
        return None
    files = _recorded(built)
    if files is not None:
        return files
    files = {m: _extension_file(m) for m in (*MODULES, GROUP + "__mypyc")}
    newest_ns = time.time_ns() - SETTLE_NS  # before the stat calls: a change after them is newer
    if sources_digest() != built:
        warnings.warn(f"{ENV}: the compiled build is stale (rebuild it: .ci/build-compiled): pure Python", stacklevel=3)
        return None
    if not all(os.path.isfile(f) for f in files.values()):
        warnings.warn(f"{ENV}: the compiled build is for another Python: pure Python", stacklevel=3)
        return None
    _record(built, files, newest_ns)
    return files


def enable() -> bool:
    """With ``UET_COMPILED`` set (and not ``0``), import :data:`MODULES` from a current build
    (:func:`current`) from now on; True when they will be (see the module docstring)."""
    global _ACTIVE
    if _ACTIVE:
        return True
    if os.environ.get(ENV, "0") in ("", "0"):
        return False
    files = current()
    if files is None:
        return False
    sys.meta_path.insert(0, _Finder(files))
    _ACTIVE = True
    return True


def active() -> bool:
    """True when :data:`MODULES` are imported from the compiled build (:func:`enable`)."""
    return _ACTIVE
