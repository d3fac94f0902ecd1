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
    # every datagram injected was sealed, every one that arrived was opened
    assert c["tss_out_pkts"] == n and c["tss_in_auth_pkts"] == len(types) and "tss_dropped" not in c
    assert set(types) == {int(PdsType.TSS)}
    # The CLEARs (16 of them at this seed). A rank posts a flow's second receive when the first
    # message completes, while the sender has both in flight. Under TSS each flow's burst leaves
    # back to back once its NEW_START_PSN NACK is back (replay-safe establishment, §2.3.2), and
    # paths of unequal queues reorder it: a second message's first packet may come while the
    # first message still misses one. It then finds no posted receive and goes to the overflow
    # list (§6.4), a guaranteed response; its initiator, with nothing left to send, clears it with
    # a CLEAR CP (§2.7), and the target answers each CLEAR that releases its CACK with an ACK
    # naming a PSN already acknowledged (acks_dup). The exact sequence is in
    # tests/test_fep_overflow_clear.py. Plain runs spread each flow's packets among the rank's
    # other flows, so they do not overtake, and 3 kB (one-packet) messages cannot be overtaken.
    assert c["ctl_tx_CLEAR"] > 0 and "ctl_tx_REQ_CLEAR" not in c
    assert c["acks_tx"] == c["delivered"] + c["ctl_rx_CLEAR"]  # one ACK per request, one per CLEAR
    assert c["acks_dup"] <= c["ctl_rx_CLEAR"]
    # the run ends when the workload does: what is still on the wire is the last CLEARs and the
    # ACKs answering them
    assert n - len(types) == c["ctl_tx_CLEAR"] - c["ctl_rx_CLEAR"] + c["acks_tx"] - c["acks_rx"]


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
