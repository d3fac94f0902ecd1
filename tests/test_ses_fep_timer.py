"""SesFep.handle_timer skips both engines when nothing is in progress (they would do nothing: the
FEP core calls it at every PDS timer), and calls them as soon as anything is."""

from __future__ import annotations

from typing import Any

from uet.ses.fep import SesFep
from uet.ses.initiator import SesAddress

PEER = "10.0.0.2"


def _spy(f: SesFep) -> list[str]:
    calls: list[str] = []
    ini, tgt = f.initiator.handle_timer, f.target.handle_timer

    def on_ini(now: int) -> Any:
        calls.append("initiator")
        return ini(now)

    def on_tgt(now: int) -> Any:
        calls.append("target")
        return tgt(now)

    f.initiator.handle_timer = on_ini  # type: ignore[method-assign]
    f.target.handle_timer = on_tgt  # type: ignore[method-assign]
    return calls


def test_idle_engines_are_not_called() -> None:
    f = SesFep("10.0.0.9")
    calls = _spy(f)
    f.handle_timer(10**12)
    assert calls == []


def test_a_sync_group_still_expires() -> None:
    f = SesFep("10.0.0.9")
    calls = _spy(f)
    f.target.sync.member_done((PEER, 7), 3, 0)
    assert f.target.sync.counters["sync_expired"] == 0
    f.handle_timer(f.target.config.reassembly_timeout_ns)
    assert calls == ["initiator", "target"]
    assert f.target.sync.counters["sync_expired"] == 1
    f.handle_timer(2 * f.target.config.reassembly_timeout_ns)
    assert calls == ["initiator", "target"]  # idle again


def test_an_operation_in_progress_calls_both() -> None:
    f = SesFep("10.0.0.9")
    calls = _spy(f)
    assert f.get_timer() is None  # idle: no engine asked
    f.initiator.send(SesAddress(PEER, job_id=1, pid_on_fep=2, resource_index=0), b"x" * 10)
    assert f.get_timer() == f.initiator.get_timer()  # the engine's own deadline (or None)
    f.handle_timer(1)
    assert calls == ["initiator", "target"]


def test_has_events_sees_each_engines_completions() -> None:
    """SesFep.has_events reads the engines' queues through its own references to them."""
    f = SesFep("10.0.0.9")
    assert not f.has_events()
    f.initiator._events.append(object())  # type: ignore[arg-type]
    assert f.has_events()
    f.initiator._events.clear()
    f.target._events.append(object())  # type: ignore[arg-type]
    assert f.has_events()
    f.target._events.clear()
    assert not f.has_events()


def test_has_packets_sees_each_engines_packets() -> None:
    """SesFep.has_packets reads the engines' ready queues through its own references to them."""
    f = SesFep("10.0.0.9")
    assert not f.has_packets()
    f.initiator._ready.append(object())  # type: ignore[arg-type]
    assert f.has_packets()
    f.initiator._ready.clear()
    f.target._out.append(object())  # type: ignore[arg-type]
    assert f.has_packets()
    f.target._out.clear()
    assert not f.has_packets()
