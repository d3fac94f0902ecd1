"""The PDS data-path restructuring: per-batch ACK coalescing, the in-order receive fast path,
the timer heap and the record-style per-packet events (uet.pds.core, uet.pds.events)."""

from __future__ import annotations

import dataclasses
import heapq
from typing import Any

import pytest
from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, hdr, scan_timer_check, ses_small

from uet.pds import Acked, Delivery, Failed, Mode, PdsConfig
from uet.pds import core as pds_core
from uet.pds.pdc import TargetPdc
from uet.wire import pds as pds_wire

# exact packet sequences without the anti-amplification proof exchange (uet.pds.validation,
# tested in tests/test_pds_validation.py)
CFG = PdsConfig(close_idle_ns=None, target_idle_ns=None, rto_ns=200_000, amp_factor=0)


def _establish(pair: Pair) -> None:
    pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"hello", token="syn", som=True, eom=True, now=0)
    assert pair.run_until(lambda: any(e.token == "syn" for e in pair.a.acked()))
    pair.a.events.clear()
    pair.b.deliveries.clear()


def _batch(pair: Pair, n: int, eom_each: bool = True) -> list[bytes]:
    """``n`` requests on an established PDC (no SYN: its ACK at once would hide coalescing)."""
    _establish(pair)
    for i in range(n):
        som = eom_each or i == 0
        eom = eom_each or i == n - 1
        pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), bytes([i]) * 8, token=i, som=som, eom=eom, now=0)
    return [d for d, _x, _y in pair.take(pair.a)]


def test_acks_due_in_one_batch_leave_as_one_ack() -> None:
    pair = Pair(CFG)
    reqs = _batch(pair, 32)  # every packet is its own message: AR on each
    assert all(hdr(d).flags & pds_wire.ReqFlag.AR and not hdr(d).flags & pds_wire.ReqFlag.SYN for d in reqs)
    for d in reqs:
        pair.inject(pair.b, d, A_ADDR)
    assert len(pair.b.deliveries) == 32
    acks = pair.take(pair.b)
    assert len(acks) == 1
    a = hdr(acks[0][0])
    assert a.cack_psn == hdr(reqs[-1]).psn and a.ack_psn_offset == 0
    pair.inject(pair.a, acks[0][0], B_ADDR)
    assert sorted(e.token for e in pair.a.acked()) == list(range(32))


def test_ack_per_pkt_and_retx_are_not_merged() -> None:
    pair = Pair(PdsConfig(close_idle_ns=None, target_idle_ns=None, ack_per_pkt=True))
    reqs = _batch(pair, 8)
    for d in reqs:
        pair.inject(pair.b, d, A_ADDR)
    assert len(pair.take(pair.b)) == 8
    # a retransmission (RETX) is ACKed on its own, with RETX echoed (RTT sample validity, §2.9)
    pair2 = Pair(CFG)
    reqs = _batch(pair2, 2)
    pair2.inject(pair2.b, reqs[0], A_ADDR)
    b = bytearray(reqs[1])
    b[1] |= pds_wire.ReqFlag.RETX
    pair2.inject(pair2.b, bytes(b), A_ADDR)
    acks = [hdr(d) for d, _x, _y in pair2.take(pair2.b)]
    # the ACK due for the first packet is superseded by the RETX one, which covers it by CACK
    assert len(acks) == 1 and acks[0].flags & pds_wire.AckFlag.RETX
    assert acks[0].cack_psn == hdr(reqs[1]).psn and acks[0].ack_psn_offset == 0


def test_fast_and_general_paths_agree_around_a_gap() -> None:
    """In-order packets take the fast path; a gap sends the rest through the general path until
    it fills; deliveries and the final CACK are the same either way."""
    pair = Pair(CFG)
    reqs = _batch(pair, 10, eom_each=False)
    order = [0, 1, 2, 5, 6, 3, 4, 7, 8, 9]
    for i in order:
        pair.inject(pair.b, reqs[i], A_ADDR)
    assert [d.payload[0] for d in pair.b.deliveries] == order
    [tp] = pair.b.core.pdcs.values()
    assert isinstance(tp, TargetPdc)
    assert not tp.rcvd and tp.rx_base == (hdr(reqs[-1]).psn + 1) & 0xFFFFFFFF
    for d, _x, _y in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    assert sorted(e.token for e in pair.a.acked()) == list(range(10))


def test_timer_heap_with_many_pdcs() -> None:
    """200 PDCs (one per JobID); the one packet of PDC 137 is lost once: only its RTO fires, the
    heap agrees with a full scan at every step and stays compact."""
    pair = Pair(CFG, seed=4)
    pair.check_timers = True
    lost: list[bytes] = []

    def filt(data: bytes, src: str, dst: str) -> list[bytes]:
        if src == A_ADDR and data[0] >> 3 == pds_wire.PdsType.RUD_REQ and data[-1] == 137 and not lost:
            lost.append(data)
            return []
        return [data]

    pair.filter = filt
    for j in range(200):
        pair.a.core.submit(
            B_ADDR, Mode.RUD, SES_NH, ses_small(), bytes([j & 0xFF]) * 4, token=j, som=True, eom=True, now=0, job_id=j
        )
    assert pair.run_until(lambda: len(pair.a.acked()) == 200)
    assert len(lost) == 1 and pair.a.core.counters["rto"] == 1 and pair.a.core.counters["retransmits"] == 1
    assert len(pair.a.core.pdcs) == 200
    for s in (pair.a, pair.b):
        scan_timer_check(s.core)
        assert len(s.core._theap) <= 4 * len(s.core.pdcs) + 64
    pair.a.core.close(pair.now)
    assert pair.run_until(lambda: not pair.a.core.pdcs and not pair.b.core.pdcs)
    assert pair.a.core.get_timer() is None and pair.b.core.get_timer() is None


def test_record_events_behave_like_frozen_dataclasses() -> None:
    d = Delivery("10.0.0.1", Mode.RUD, 5, 77, 3, b"ses", b"pay", 0, False)
    assert (d.peer, d.mode, d.pdc, d.psn, d.next_hdr, d.ses, d.payload, d.ecn, d.retx) == (
        "10.0.0.1", Mode.RUD, 5, 77, 3, b"ses", b"pay", 0, False,
    )  # fmt: skip
    a = Acked(token="t", response_next_hdr=4, response=b"r")
    assert a == Acked("t", 4, b"r") and a != ("t", 4, b"r") and hash(a) == hash(Acked("t", 4, b"r"))
    assert a != Failed(*a)  # type-aware equality, the same values (Failed is a dataclass)
    with pytest.raises(AttributeError):
        a.token = "x"  # type: ignore[misc]
    assert "token='t'" in repr(a)
    assert not dataclasses.is_dataclass(a) and dataclasses.is_dataclass(Failed("t", "x", None))


def test_a_deadline_moving_later_is_recorded_not_pushed_and_fires_on_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timer heap (uet.pds.core ``_refresh_timers``): a PDC's RTO deadline that moves later
    (the ACK of the oldest packet arrives, a younger one is now oldest) adds no heap entry; its
    earlier entry is re-pushed at the new deadline when it reaches the top, so ``get_timer``
    gives the exact deadline and nothing fires at the superseded one."""
    pair = Pair(CFG)
    _establish(pair)
    core = pair.a.core
    rto = CFG.rto_ns
    t1 = pair.now
    core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"one", token="one", som=True, eom=True, now=t1)
    (first,) = pair.take(pair.a)
    assert core.get_timer() == t1 + rto
    pushes: list[tuple[int, int, object]] = []

    def heappush(heap: list[tuple[int, int, object]], e: tuple[int, int, object]) -> None:
        pushes.append(e)
        heapq.heappush(heap, e)

    monkeypatch.setattr(pds_core, "heappush", heappush)
    pair.now = t2 = t1 + 50_000
    core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"two", token="two", som=True, eom=True, now=t2)
    (second,) = pair.take(pair.a)
    pair.inject(pair.b, first[0], A_ADDR)
    (ack,) = pair.take(pair.b)
    pair.now = t1 + 60_000
    pair.inject(pair.a, ack[0], B_ADDR)
    assert [e.token for e in pair.a.acked()] == ["one"]
    assert core.get_timer() == t2 + rto  # the new oldest packet's RTO, exactly
    assert pushes == []  # recorded on the PDC, not pushed
    scan_timer_check(core)
    core.handle_timer(t1 + rto)  # the superseded deadline: nothing is due
    assert core.counters.get("rto", 0) == 0 and core.datagrams_to_send(t1 + rto) == []
    assert core.get_timer() == t2 + rto
    core.handle_timer(t2 + rto)
    assert core.counters["rto"] == 1
    (again,) = core.datagrams_to_send(t2 + rto)
    assert hdr(again[0]).psn == hdr(second[0]).psn


def test_a_deadline_moving_earlier_is_pushed() -> None:
    """The other direction: a deadline earlier than the PDC's live entry (here: none, then the
    first packet's RTO after an idle PDC) is pushed at once."""
    pair = Pair(CFG)
    _establish(pair)
    core = pair.a.core
    assert core.get_timer() is None
    core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"one", token="one", som=True, eom=True, now=pair.now)
    pair.take(pair.a)
    assert core.get_timer() == pair.now + CFG.rto_ns
    scan_timer_check(core)


# -- the per-packet fast paths against the general code (PdsState.fast_paths) ----------------------


def _traffic(cfg: PdsConfig, fast: bool, link: dict[str, float], n: int = 160) -> tuple[Any, ...]:
    """Both directions' exact packets and times, what each core counted, delivered and had
    acknowledged, for ``n`` requests (a message every 8) over a link with ``link``'s faults."""
    pair = Pair(cfg, seed=7, loss=link.get("loss", 0.0), dup=link.get("dup", 0.0))
    pair.reorder = link.get("reorder", 0.0)
    pair.corrupt = link.get("corrupt", 0.0)
    pair.a.core.fast_paths = pair.b.core.fast_paths = fast
    for i in range(n):
        pair.a.core.submit(
            B_ADDR, Mode.RUD, SES_NH, ses_small(), bytes([i & 0xFF]) * 900, token=i,
            som=i % 8 == 0, eom=i % 8 == 7, now=0,
        )  # fmt: skip
    pair.run_until(lambda: len(pair.a.acked()) + len(pair.a.failed()) >= n, max_ns=2_000_000_000)
    pair.run_idle(max_ns=50_000_000)
    ipdcs = [p for p in pair.a.core.pdcs.values() if p.role == "initiator"]
    return (
        pair.wire,
        [g[0].snapshot() for g in pair.a.core.gates.values()],
        [(p.srtt, p.min_rtt, p.rto_shift, p.tx_base, p.max_cack, p.peer_mp, p.board.high_sack) for p in ipdcs],
        dict(pair.a.core.counters),
        dict(pair.b.core.counters),
        [(d.psn, d.payload) for d in pair.b.deliveries],
        [e.token for e in pair.a.acked()],
    )


FAULTS = [
    {},
    {"reorder": 0.2},
    {"loss": 0.05, "dup": 0.05},
    {"loss": 0.03, "reorder": 0.1, "dup": 0.03, "corrupt": 0.02},
]


@pytest.mark.parametrize("link", FAULTS, ids=["clean", "reorder", "loss_dup", "hostile"])
@pytest.mark.parametrize("cc", ["nscc", "dctcp"])
def test_fast_paths_send_and_count_exactly_as_the_general_code(cc: str, link: dict[str, float]) -> None:
    """The per-packet gate's send loop and the in-order ACK path give the same packets at the
    same times, the same counters (drops of corrupt input included), deliveries and
    acknowledgements as the general code, with loss, duplicates, reordering and corruption."""
    cfg = PdsConfig(cc=cc, close_idle_ns=None, target_idle_ns=None, amp_factor=0, fast_retx_threshold=3)
    fast = _traffic(cfg, True, link)
    assert fast == _traffic(cfg, False, link)
    assert len(fast[-1]) == 160  # (every request acknowledged: the run went to the end)
    assert fast[1] and fast[2]  # (a gate and a PDC were compared)


RAW_ACK_CC = pds_wire.ACK_CC[(False, "raw")]


def _ack_variant(fast: bool, change: dict[str, int], src: str = B_ADDR, cut: int = 0) -> tuple[Any, ...]:
    """Four requests out, then one ACK_CC from the target with ``change`` applied to its fields
    (or ``cut`` bytes short, or from ``src``): what the initiator counted, reported and kept."""
    pair = Pair(PdsConfig(cc="nscc", close_idle_ns=None, target_idle_ns=None, amp_factor=0))
    pair.a.core.fast_paths = fast
    reqs = _batch(pair, 4)
    for d in reqs:
        pair.inject(pair.b, d, A_ADDR)
    (ack,) = [d for d, _x, _y in pair.take(pair.b)]
    v = RAW_ACK_CC.unpack(ack)
    names = list(RAW_ACK_CC.fields)
    data = RAW_ACK_CC.encode(tuple(change.get(n, x) for n, x in zip(names, v, strict=True))) + ack[RAW_ACK_CC.size :]
    pair.inject(pair.a, data[: len(data) - cut], src)
    pair.inject(pair.a, data[: len(data) - cut], src)  # and again: a duplicate
    ipdc = next(p for p in pair.a.core.pdcs.values() if p.role == "initiator")
    return (
        dict(pair.a.core.counters),
        [type(e).__name__ for e in pair.a.events],
        (ipdc.tx_base, ipdc.max_cack, sorted(ipdc.outstanding), ipdc.peer_mp, ipdc.srtt),
        pair.take(pair.a),
    )


@pytest.mark.parametrize(
    ("change", "src", "cut"),
    [
        ({}, B_ADDR, 0),  # in order: the fast path, then a duplicate
        ({"cack_psn": -1}, B_ADDR, 0),  # (filled in below: a CACK never sent)
        ({"ack_psn_offset": 9}, B_ADDR, 0),  # names a PSN never sent
        ({"spdcid": 0x1234}, B_ADDR, 0),  # another PDC's ID
        ({}, "10.9.9.9", 0),  # another peer
        ({"dpdcid": 0x4321}, B_ADDR, 0),  # no such PDC
        ({}, B_ADDR, RAW_ACK_CC.size - 8),  # too short
        ({"sack_bitmap": 0b101, "sack_psn_offset": 1}, B_ADDR, 0),  # SACK bits: the general path
        ({"mpr": 7}, B_ADDR, 0),  # a new MPR
        ({"flags": int(pds_wire.AckFlag.M | pds_wire.AckFlag.REQ_CLEAR)}, B_ADDR, 0),
    ],
)
def test_the_in_order_ack_path_equals_the_general_one(change: dict[str, int], src: str, cut: int) -> None:
    """Exact ACKs, valid and hostile, to an established initiator: counted, dropped or applied
    the same with the in-order ACK path as with the general one."""
    if change.get("cack_psn") == -1:
        change = {"cack_psn": 0x7FFF_0000}
    fast = _ack_variant(True, change, src, cut)
    assert fast == _ack_variant(False, change, src, cut)
    assert fast[0].get("acks_rx", 0) + sum(v for k, v in fast[0].items() if k.startswith("drop_")) >= 2


def test_fast_paths_across_the_psn_wrap() -> None:
    """PSNs that wrap past 2^32 mid-run (the fast paths write serial-number differences out):
    the same packets, times and counters as the general code, with loss and reordering."""
    cfg = PdsConfig(cc="nscc", start_psn=0xFFFF_FFB0, close_idle_ns=None, target_idle_ns=None, amp_factor=0)
    link = {"loss": 0.03, "reorder": 0.1}
    fast = _traffic(cfg, True, link)
    assert fast == _traffic(cfg, False, link)
    assert len(fast[-1]) == 160 and fast[2][0][3] < 0x100  # (tx_base wrapped)


def test_heap_entry_fields_are_written_on_either_pdc_class() -> None:
    """``_set_tent`` / ``_clear_tent`` (the timer heap's writes, one branch per PDC class so the
    compiled build writes them natively) set exactly the live-entry fields of an initiator PDC
    and of a target PDC."""
    pair = Pair(CFG)
    _establish(pair)
    pdcs = [*pair.a.core.pdcs.values(), *pair.b.core.pdcs.values()]
    assert {type(p).__name__ for p in pdcs} == {"InitiatorPdc", "TargetPdc"}
    for p in pdcs:
        key, dl = p.tkey, p.tdl
        pds_core._set_tent(p, 7, 123)
        assert (p.tent, p.tentd) == (7, 123)
        pds_core._clear_tent(p)
        assert (p.tent, p.tentd) == (0, 123)  # only the entry's sequence number is cleared
        assert (p.tkey, p.tdl) == (key, dl)


def test_syn_requests_by_the_request_struct_are_the_layouts() -> None:
    """A SYN request's header, sent by ``pdsfast.request`` with the PSN offset's low 12 bits as the
    DPDCID word and read back through the request's struct (uet.pds.initiator ``_transmit``,
    uet.pds.target ``_rx_request``), is REQUEST_SYN's, across the PSN wrap."""
    from uet.pds.target import _REQ_TAIL
    from uet.wire.pds import REQUEST_SYN
    from uet.wire.pdsfast import request

    for start, psn, cpo in ((0, 5, -1), (0xFFFF_FFF0, 0x0000_0010, -32768), (100, 100 + 4095, 0), (7, 7 + 4096, 3)):
        for flags in (0x10, 0x11, 0x13):  # SYN, with AR and RETX
            want = REQUEST_SYN.encode((2, 2, flags, cpo, psn, 77, 0, psn - start))
            got = request(2, 2, flags, cpo, psn, 77, (psn - start) & 0xFFF)
            assert got == want
            v = REQUEST_SYN.unpack(want)
            c, p, s, w = _REQ_TAIL(want, 2)
            assert (c, p, s, w & 0xFFF) == (v[3], v[4], v[5], v[7])
