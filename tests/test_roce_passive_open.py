"""RoCEv2 connections opened by a peer's first datagram (issue 29 item 11).

One datagram from each spoofed source made a queue pair, even with a bad ICRC, with no limit (an
honest operation took 7.3 s with 500 such sources and timed out with 2,000), and QPNs and start
PSNs were the CRC-32 of the addresses and the run's seed (0 by default), so anyone could forge a
fatal NAK into a live connection. Now the first datagram must carry the right ICRC and a PSN in
the first PSNs of the peer's secret-keyed start PSN, the QP count is bounded, and the
connection manager's parameters are keyed by a secret the run draws at random.
"""

from __future__ import annotations

import zlib

from uet.roce.cm import StaticCm
from uet.roce.config import QpConfig
from uet.roce.core import PASSIVE_PSN_WINDOW, RoceCore

B = "10.0.0.2"
CFG = QpConfig(pmtu=1024, dcqcn=None)


class _Shifted(StaticCm):
    """``cm`` with the sender's start PSN moved ``shift`` PSNs on (its first packets lost)."""

    def __init__(self, cm: StaticCm, shift: int) -> None:
        super().__init__(cm.secret)
        self.shift = shift

    def start_psn(self, local: str, peer: str) -> int:
        return (super().start_psn(local, peer) + (self.shift if peer == B else 0)) & 0xFFFFFF


def _first_datagram(cm: StaticCm, src: str, psn_shift: int = 0) -> bytes:
    """What ``src`` sends first towards ``B`` (a SEND), as a peer sharing ``cm`` would."""
    s = RoceCore(src, config=CFG, seed=1, cm=_Shifted(cm, psn_shift) if psn_shift else cm)
    s.send(B, b"hello")
    (t,) = s.datagrams_to_send(0)
    return t.data


def _sources(n: int) -> list[str]:
    return [f"10.1.{i >> 8}.{i & 0xFF}" for i in range(n)]


def test_bad_icrc_or_psn_makes_no_queue_pair() -> None:
    cm = StaticCm(b"run secret")
    b = RoceCore(B, config=CFG, seed=2, cm=cm)
    for src in _sources(500):
        good = _first_datagram(cm, src)
        b.receive_datagram(good[:-1] + bytes([good[-1] ^ 1]), 0, source=src)  # bad ICRC
    assert not b.qps and b.counters()["dropped_passive_icrc"] == 500
    for src in _sources(50):
        b.receive_datagram(_first_datagram(cm, src, psn_shift=PASSIVE_PSN_WINDOW), 0, source=src)
    assert not b.qps and b.counters()["dropped_passive_psn"] == 50
    src = "10.9.9.9"
    b.receive_datagram(_first_datagram(cm, src, psn_shift=PASSIVE_PSN_WINDOW - 1), 0, source=src)
    b.receive_datagram(_first_datagram(cm, "10.9.9.8"), 0, source="10.9.9.8")
    assert set(b.qps) == {src, "10.9.9.8"}  # a first packet lost or reordered is still accepted


def test_queue_pairs_opened_by_peers_are_bounded() -> None:
    cm = StaticCm(b"run secret")
    b = RoceCore(B, config=CFG, seed=2, cm=cm, max_qps=100)
    for src in _sources(300):
        b.receive_datagram(_first_datagram(cm, src), 0, source=src)
    assert len(b.qps) == 100 and b.counters()["dropped_qp_limit"] == 200


def test_parameters_are_not_computable_from_the_addresses() -> None:
    """The former derivation (CRC-32 of kind, seed and addresses) no longer names the QPN or the
    start PSN, and another secret gives other parameters."""
    a = "10.0.0.1"
    for secret in (0, 1, b"k"):
        cm = StaticCm(secret)
        old_qpn = 0x100 + zlib.crc32(f"qpn|{secret!r}|{a}|{B}".encode()) % ((1 << 24) - 0x100)
        old_psn = zlib.crc32(f"psn|{secret!r}|{a}|{B}".encode()) & 0xFFFFFF
        assert (cm.qpn(a, B), cm.start_psn(a, B)) != (old_qpn, old_psn)
    assert StaticCm(b"x").params(a, B) != StaticCm(b"y").params(a, B)


def test_a_datagram_forged_with_another_secret_reaches_no_queue_pair() -> None:
    """An honest connection keyed by the run's secret; a forger who knows the addresses and
    guesses the secret (the run's seed, 0) names no QP of it, so its NAK kills nothing."""
    run = StaticCm(b"\x8f" * 16)
    a = RoceCore("10.0.0.1", config=CFG, seed=1, cm=run)
    b = RoceCore(B, config=CFG, seed=2, cm=run)
    h = a.send(B, b"x" * 3000)
    forged = _first_datagram(StaticCm(0), "10.0.0.1")
    now = 0
    for _ in range(50):
        for t in a.datagrams_to_send(now):
            b.receive_datagram(t.data, now, source=a.address)
        b.receive_datagram(forged, now, source=a.address)
        for t in b.datagrams_to_send(now):
            a.receive_datagram(t.data, now, source=B)
        now += 10_000
    done = []
    while (e := a.next_event()) is not None:
        done.append(e)
    assert [type(e).__name__ for e in done if getattr(e, "handle", None) == h] == ["SendCompleted"]
    assert b.counters()["dropped_unknown_qp"] >= 50 and len(b.qps) == 1
