"""Secure endpoints in the simulator (``uet-sim --tss``): the FEP cores' TSS stage seals and
opens every datagram on the simulated wire, as it does live (uet.sim.scenario, "Secure
endpoints")."""

from __future__ import annotations

import json

from uet.tools.sim import main

from uet.sim.engine import Engine
from uet.sim.scenario import simulate
from uet.wire.pds import PdsType

RUN = {"workload": "all_to_all", "endpoints": 6, "message_bytes": 30000, "messages": 2, "seed": 3, "tss": True}


def test_every_datagram_is_sealed_and_opened(monkeypatch) -> None:
    types: list[int] = []
    deliver = Engine._deliver

    def spy(self: Engine, arrivals: list, now: int) -> None:
        types.extend(frame[42] >> 3 for _t, _h, frame in arrivals)  # first byte after Eth/IPv4/UDP
        deliver(self, arrivals, now)

    monkeypatch.setattr(Engine, "_deliver", spy)
    r = simulate(RUN)
    assert r["ok"] and len(r["flows"]) == 30 and all(f["intact"] for f in r["flows"])
    c = r["endpoint_counters"]
    n = r["sim"]["frames_injected"]
    # every datagram injected was sealed, every one that arrived was opened; the run ends when the
    # workload does, so the last few control packets (ACKs, CLEARs) may still be on the wire
    assert c["tss_out_pkts"] == n and c["tss_in_auth_pkts"] == len(types) and "tss_dropped" not in c
    assert n - len(types) < 16
    assert set(types) == {int(PdsType.TSS)}


def test_a_plain_run_seals_nothing() -> None:
    r = simulate({**RUN, "tss": False})
    assert r["ok"] and not any(k.startswith("tss_") for k in r["endpoint_counters"])


def test_uet_sim_tss_is_deterministic(capsys) -> None:
    argv = ["-w", "pairs", "-n", "4", "--size", "20000", "--messages", "2", "--tss", "--json"]
    assert main(argv) == 0
    a = capsys.readouterr().out
    assert main(argv) == 0
    assert capsys.readouterr().out == a
    assert json.loads(a)["endpoint_counters"]["tss_out_pkts"] > 0


def test_tss_needs_the_uet_transport(capsys) -> None:
    assert main(["-w", "pairs", "-n", "2", "--transport", "roce", "--tss"]) == 2
    assert "tss" in capsys.readouterr().err
