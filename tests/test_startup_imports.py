"""Start-up cost: a plain UET run of ``uet-sim`` imports only what it uses. TSS (and cryptography),
the RoCEv2 queue pair, the live engine, the socket links, the asyncio endpoint, the real-time
fabric process, the collective workloads, the capture writers, hashlib, ``--compare-lb``'s runs
and the progress line load on first use (imports inside the functions that need them, PEP 562
package names: :mod:`uet.lazy`), and still load when a run needs them; asyncio only for a run
that needs its loop (uet.sim.tasks), and ``ssl`` not at all."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.processes  # one interpreter that only computes (virtual time)

#: what a plain UET simulation never needs
LAZY = (
    "cryptography",
    "uet.tss.context",
    "uet.tss.stage",
    "uet.roce.core",
    "uet.roce.qp",
    "uet.wire.roce",  # the RoCEv2 header codecs: uet.roce.config takes its numbers from uet.wire.roceconst
    "uet.live.launcher",
    "uet.live.process",
    "uet.link",
    "uet.endpoint",
    "uet.fabric.switch",
    "uet.tools.fabric",
    "rich",
    "uet.workloads.collective",
    "uet.workloads.allreduce",
    "uet.workloads.training",
    "uet.workloads.algorithms",
    "uet.workloads.schedule",
    "uet.workloads.executor",
    "uet.pcap",
    "uet.fabric.telemetry_io",
    "uet.eventlog",
    "ssl",
    "hashlib",
    "uet.roce.cm",
    "uet.experiments",  # --compare-lb's runs
    "uet.tools.sim_progress",  # the progress line, drawn on a terminal or with --progress
    "uet.sim.progress",
    "asyncio",  # the plain traffic patterns run on the simulator's own loop (uet.sim.tasks)
    "uet.fabric.model.records",  # the switch model's telemetry records, built only when kept
    "uet.fabric.model.failover",  # a fabric's fault schedule, only when it has faults
    "uet.transport",  # the transport contract's Protocols (annotations and failure names only)
    "uet.ses.atomics",  # the AMO codecs, where an atomic is posted or executed
    "uet.live",  # the live engine: a run's transports and settings record come from uet.scenario.model
    "uet.tools.sim_compare",  # --compare-lb's table: --seeds is parsed by uet.tools.cli
    "uet.clock",  # the live adapters' clocks (uet.adapter.CoreDriver): the simulator drives no clock
    "uet.roce.dcqcn",  # DCQCN's reaction and notification points; its constants are in uet.roce.config
)

_PROBE = r"""
import contextlib, io, json, sys

def loaded():
    top = ("cryptography", "rich", "uet", "ssl", "hashlib", "asyncio")
    return sorted(m for m in sys.modules if m.split(".")[0] in top)

import uet.tools.sim
out = {"import": loaded()}
with contextlib.redirect_stdout(io.StringIO()) as text:
    out["version_rc"] = uet.tools.sim.main(["--version"])
out["version"], out["version_text"] = loaded(), text.getvalue()
tiny = ["-n", "2", "--messages", "1", "--size", "4096", "--json"]
for name, extra in (("uet", []), ("tss", ["--tss"]), ("roce", ["--transport", "roce"])):
    with contextlib.redirect_stdout(io.StringIO()) as text:
        rc = uet.tools.sim.main(tiny + extra)
    out[name] = loaded()
    out[name + "_ok"] = rc == 0 and json.loads(text.getvalue())["ok"]
with contextlib.redirect_stdout(io.StringIO()) as text:  # a collective: asyncio's loop
    rc = uet.tools.sim.main(["-w", "allreduce", "-n", "4", "--messages", "1", "--size", "4096", "--json"])
out["collective"] = loaded()
out["collective_ok"] = rc == 0 and json.loads(text.getvalue())["ok"]
import asyncio.base_events, ssl
out["tls"] = [asyncio.base_events.ssl is None, ssl.PROTOCOL_TLS_CLIENT is not None]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    """Modules loaded after ``import uet.tools.sim``, then after a UET run, a ``--tss`` run and a
    RoCEv2 run, one after the other in one fresh interpreter."""
    r = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _found(mods: list[str]) -> list[str]:
    return [m for m in mods if any(m == lazy or m.startswith(lazy + ".") for lazy in LAZY)]


def test_import_and_a_plain_uet_run_load_none_of_the_lazy_modules(probe: dict[str, Any]) -> None:
    assert _found(probe["import"]) == []
    assert probe["uet_ok"]
    assert _found(probe["uet"]) == []


#: standard modules a plain UET run does not load (issue 28: start-up of the one-flow rows)
STDLIB_LAZY = (
    "socket",  # uet.wire.net takes its four names from _socket
    "shutil",  # argparse's formatters get the terminal's width from uet.tools.cli, not shutil
    "ast",  # inspect, and with it ast, dis and tokenize, loads at its first use (uet.dataclass_cache)
    "dis",
    "tokenize",
    "threading",  # uet.tools asks whether it runs in the main thread without it (in_main_thread)
    "locale",  # argparse's gettext finds no catalogue folder to look in (uet.tools.cli)
    "signal",  # uet.tools and uet.tools.cli read and set SIGINT's handler through _signal
)

_PLAIN_RUN = r"""
import contextlib, io, json, sys
import uet.tools.sim
with contextlib.redirect_stdout(io.StringIO()) as text:
    rc = uet.tools.sim.main(["-n", "2", "--messages", "1", "--size", "4096", "--json"])
ok = rc == 0 and json.loads(text.getvalue())["ok"]
import dataclasses
print(json.dumps({"ok": ok, "loaded": sorted(set(sys.modules) & set(sys.argv[1:])),
                  "signature": dataclasses.inspect.signature(print) is not None}))
"""


def test_a_plain_uet_run_loads_none_of_the_standard_modules_it_does_not_use() -> None:
    """Nor does the run need them: ``inspect`` is there (what dataclasses imports), loaded when
    first used. ``locale`` only where gettext's default catalogue folder does not exist (an
    interpreter with one, a distribution's, searches it for argparse's texts as before)."""
    import gettext
    import os

    lazy = [m for m in STDLIB_LAZY if m != "locale" or not os.path.isdir(gettext._default_localedir)]  # type: ignore[attr-defined]
    r = subprocess.run(
        [sys.executable, "-c", _PLAIN_RUN, *lazy], capture_output=True, text=True, timeout=120, check=True
    )
    out = json.loads(r.stdout)
    assert out == {"ok": True, "loaded": [], "signature": True}


def test_asyncio_is_loaded_without_tls_and_ssl_still_imports(probe: dict[str, Any]) -> None:
    """A run that needs asyncio's loop (a collective) imports asyncio with ``ssl`` marked missing
    (uet.sim.tasks.asyncio_without_tls): asyncio then offers no TLS in that process, and an
    ``import ssl`` after it still works."""
    assert probe["collective_ok"] and "asyncio" in probe["collective"] and "ssl" not in probe["collective"]
    assert probe["tls"] == [True, True]


def test_a_lone_version_is_answered_before_the_parser_loads_the_package(probe: dict[str, Any]) -> None:
    from uet.tools.cli import version

    assert probe["version_rc"] == 0 and probe["version_text"] == f"uet-sim {version()}\n"
    assert [m for m in probe["version"] if m.startswith(("uet.workloads", "uet.scenario", "uet.fabric"))] == []


def test_the_lazy_modules_load_when_a_run_needs_them(probe: dict[str, Any]) -> None:
    assert probe["tss_ok"] and {"cryptography", "uet.tss.context", "uet.tss.stage"} <= set(probe["tss"])
    roce = {"uet.roce.core", "uet.roce.qp", "uet.roce.cm", "uet.roce.dcqcn", "uet.wire.roce", "hashlib"}
    assert probe["roce_ok"] and roce <= set(probe["roce"])


@pytest.mark.parametrize("package", ["uet", "uet.tss", "uet.roce", "uet.sim", "uet.workloads"])
def test_every_package_name_is_importable_as_before(package: str) -> None:
    pkg = importlib.import_module(package)
    for name in pkg.__all__:
        assert getattr(pkg, name) is not None, name
        assert name in dir(pkg)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = pkg.nope


def test_the_workload_registry_names_each_class_by_its_name() -> None:
    from uet.workloads import WORKLOADS, Collective, RingAllReduce, Training

    assert list(WORKLOADS) == [
        "incast",
        "pairs",
        "permutation",
        "all_to_all",
        "incast_victim",
        "allreduce",
        "collective",
        "training",
    ]
    assert all(cls.name == name for name, cls in WORKLOADS.items())
    assert (WORKLOADS["collective"], WORKLOADS["allreduce"], WORKLOADS["training"]) == (
        Collective,
        RingAllReduce,
        Training,
    )
    assert WORKLOADS.get("nope") is None and len(WORKLOADS) == 8


def test_a_workload_a_user_registers_is_made_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from uet.workloads import WORKLOADS, Pairs, make

    class Mine(Pairs):
        name = "mine"

    monkeypatch.setitem(WORKLOADS, "mine", Mine)
    assert type(make("mine", 4)) is Mine and "mine" in WORKLOADS


def test_in_main_thread_says_whether_this_is_the_main_thread() -> None:
    """What the tools' Ctrl-C rule asks, without importing threading (threading is imported here,
    by pytest; a fresh tool process answers without it, test above)."""
    import threading

    from uet.tools import in_main_thread

    seen: list[bool] = []
    t = threading.Thread(target=lambda: seen.append(in_main_thread()))
    t.start()
    t.join()
    assert in_main_thread() and seen == [False]


_TABLE_RUN = r"""
import contextlib, io, json, sys
import uet.tools.sim
with contextlib.redirect_stdout(io.StringIO()) as text:
    rc = uet.tools.sim.main(["-n", "2", "--messages", "1", "--size", "4096"])
print(json.dumps({"rc": rc, "tables": "packet-hops" in text.getvalue(), "asyncio": "asyncio" in sys.modules}))
"""


def test_a_run_printed_as_tables_does_not_load_asyncio() -> None:
    """uet-sim prints its tables with uet-run's (uet.tools.run), whose asyncio loads only for a
    live run."""
    r = subprocess.run([sys.executable, "-c", _TABLE_RUN], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(r.stdout.splitlines()[-1]) == {"rc": 0, "tables": True, "asyncio": False}


def test_the_telemetry_records_are_still_offered_by_the_telemetry_module() -> None:
    from uet.fabric.model import records, telemetry

    assert telemetry.Dropped is records.Dropped and telemetry.Record is records.Record
    assert {"Dropped", "NicBytes", "QueueDepth", "Telemetry"} <= set(dir(telemetry))
    tel = telemetry.Telemetry()
    tel.add(records.Trimmed(5, "sw", 1, 4218, 64, 10))
    assert [r.as_dict() for r in tel.of(telemetry.Trimmed)] == [
        {"event": "trim", "t": 5, "node": "sw", "port": 1, "size": 4218, "trimmed": 64, "dscp": 10}
    ]


def test_argparse_texts_are_what_gettext_gives(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """uet.tools.cli answers argparse's own texts without a catalogue search where gettext's folder
    does not exist, and hands them to gettext where it does (a folder bound to the domain)."""
    import argparse
    import gettext

    import uet.tools.cli as cli

    assert argparse._ is cli._argparse_gettext  # type: ignore[attr-defined]
    for text in ("options", "show this help message and exit", "usage: "):
        assert cli._argparse_gettext(text) == gettext.gettext(text)
    asked: list[tuple[str, str]] = []

    def dgettext(domain: str, text: str) -> str:
        asked.append((domain, text))
        return "x"

    monkeypatch.setattr(gettext, "dgettext", dgettext)
    monkeypatch.setitem(gettext._localedirs, gettext._current_domain, str(tmp_path))  # type: ignore[attr-defined]
    assert cli._argparse_gettext("options") == "x" and asked == [(gettext._current_domain, "options")]  # type: ignore[attr-defined]


def test_the_scenario_checks_see_the_hints_get_type_hints_gives() -> None:
    """uet.scenario.check reads the fields' hints without compiling their texts where each is a
    name or names joined by ``|``; every configuration dataclass gets what get_type_hints gives
    (others, and a hint that names nothing, go to get_type_hints itself)."""
    import dataclasses
    import typing

    import uet.tools.run_settings  # noqa: F401 - the configuration dataclasses a run checks

    import uet.scenario.derive
    from uet.scenario.check import type_hints

    classes = {
        v
        for m in list(sys.modules.values())
        if m is not None and m.__name__.startswith("uet.")
        for v in list(vars(m).values())
        if isinstance(v, type) and dataclasses.is_dataclass(v) and v.__module__.startswith("uet.")
    }
    assert len(classes) > 50

    def outcome(hints: Any, cls: type) -> Any:
        try:
            return hints(cls)
        except NameError as e:  # a hint naming a type only imported for type checking
            return str(e)

    for cls in classes:
        assert outcome(type_hints, cls) == outcome(typing.get_type_hints, cls), cls

    @dataclasses.dataclass
    class Odd:
        a: int | None
        b: "dict[str, int]"  # noqa: UP037 - a text that is not a name: get_type_hints
        c: "None | bool"  # noqa: UP037

    assert type_hints(Odd) == typing.get_type_hints(Odd) == {"a": int | None, "b": dict[str, int], "c": None | bool}

    @dataclasses.dataclass
    class Missing:
        a: "NoSuchName"  # type: ignore[name-defined]  # noqa: F821, UP037

    with pytest.raises(NameError):
        type_hints(Missing)
    assert uet.scenario.derive is not None


_NO_FORWARD_REFS = r"""
import builtins, contextlib, io, json, sys
real = builtins.compile
texts = []

def spy(source, *args, **kw):
    if sys._getframe(1).f_globals.get("__name__") == "typing":  # typing.ForwardRef compiles its text
        frame = sys._getframe(2)
        while frame is not None and frame.f_globals.get("__name__", "").startswith("typing"):
            frame = frame.f_back
        if frame is None or not frame.f_globals.get("__name__", "").startswith("tomllib"):
            texts.append(str(source))  # tomllib's own NamedTuple: a scenario the table store lacks
    return real(source, *args, **kw)

builtins.compile = spy
import uet.tools.sim
with contextlib.redirect_stdout(io.StringIO()) as text:
    rc = uet.tools.sim.main([sys.argv[1], "--json"])
print(json.dumps({"ok": rc == 0 and json.loads(text.getvalue())["ok"], "texts": texts}))
"""


def test_a_one_flow_run_compiles_no_annotation_text() -> None:
    """typing compiles an annotation given as text (a NamedTuple's fields, a TypeVar's bound,
    get_type_hints), and a process's first compile() also sets up the syntax tree's types (about
    9 M instructions); a one-flow run from its scenario file makes none of those compiles. The
    standard library's ``tomllib`` makes two (its ``Output`` NamedTuple) when it is imported, which
    a run does only for a scenario text the TOML table store does not hold yet (a fresh clone, or
    bytecode writing off): not counted."""
    from pathlib import Path

    row = Path(__file__).resolve().parents[1] / "tools" / "scenarios" / "cc" / "one_flow_nscc.toml"
    r = subprocess.run(
        [sys.executable, "-c", _NO_FORWARD_REFS, str(row)], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(r.stdout) == {"ok": True, "texts": []}
