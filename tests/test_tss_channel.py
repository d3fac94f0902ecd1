"""The TSS data-path channels (uet/tss/channel.py) and the stage's receive loops over them.

Each case a channel must decline is asked on its own, with exact packets: the receive channel
(:class:`RxChannel`) must leave to the full path of behaviour.md §5.8 every packet that path would
reject or treat differently — a replay, a bad tag, a short packet, another AN or epoch, a key
installed over the slot, a retired slot, an SD removed and re-added, disabled or latched — and the
transmit channel (:class:`TxChannel`) must follow the sender's slot through activation, epoch
advance, removal and the latch. Then the stage's loops (``open_marked``, ``open_batch``) against
the full path on one mixed stream: same plaintexts, same counters, same drops.
"""

from __future__ import annotations

import os
import random

import pytest
from tss_support import plaintexts

from uet.fep.events import Datagram
from uet.tss import DropReason, SdMode, SecureDomain, SecureDomainTable, TssConfig, TssContext
from uet.tss.channel import RxChannel
from uet.tss.errors import DomainStateError, UnknownDomainError
from uet.tss.stage import SecurityConfig, Tamper, TssStage

SDI = 5
A, B = "10.0.0.1", "10.0.0.2"
A_B = bytes([10, 0, 0, 1])
PORT = 4793
PT = plaintexts()["rud_req"] + bytes(4000)


def _ends(mode: SdMode = SdMode.CLUSTER, cfg: TssConfig | None = None) -> tuple[TssContext, TssContext]:
    sd = SecureDomain.generate(SDI, mode)
    return (
        TssContext(SecureDomainTable([sd.provision()]), A),
        TssContext(SecureDomainTable([sd.provision()]), B, cfg),
    )


def _seal(tx: TssContext, pt: bytes = PT) -> bytes:
    return tx.seal(pt, sdi=SDI, entropy=PORT, dst=B)


def _channel(tx: TssContext, rx: TssContext) -> RxChannel:
    """The receive channel ``rx`` made for ``tx``'s packets (one full-path open)."""
    assert rx.open_fast(_seal(tx), PORT, A_B, SDI) == PT
    ch = rx.last_channel
    assert ch is not None
    return ch


def _rotate(ctx: TssContext, key: bytes, an: int = 1, now: int = 0) -> None:
    ctx.install_key(SDI, an, key)
    ctx.activate(SDI, an, now)


# -- the receive channel -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", [SdMode.DIRECT, SdMode.CLUSTER])
def test_channel_opens_the_next_packets_and_counts_nothing_itself(mode: SdMode) -> None:
    tx, rx = _ends(mode)
    ch = _channel(tx, rx)
    before = dict(rx.stats)
    for _ in range(3):
        assert ch.open(_seal(tx)) == PT
    assert dict(rx.stats) == before  # the caller counts (open_fast, the stage's loops)


def test_channel_declines_a_replay_and_the_full_path_drops_it() -> None:
    tx, rx = _ends()
    ch = _channel(tx, rx)
    pkt = _seal(tx)
    assert ch.open(pkt) == PT
    assert ch.open(pkt) is None  # the replay window says replay: the channel leaves it
    assert rx.open_fast(pkt, PORT, A_B, SDI) is None
    assert rx.drops == {DropReason.REPLAY: 1}


def test_channel_declines_a_late_packet_only_once() -> None:
    """Out of order inside the window: opened once, then refused as a replay."""
    tx, rx = _ends()
    ch = _channel(tx, rx)
    late, *rest = [_seal(tx) for _ in range(4)]
    for pkt in rest:
        assert ch.open(pkt) == PT
    assert ch.open(late) == PT
    assert ch.open(late) is None


def test_channel_declines_a_bad_tag_and_leaves_the_window_alone() -> None:
    tx, rx = _ends()
    ch = _channel(tx, rx)
    pkt = _seal(tx)
    bad = bytearray(pkt)
    bad[-1] ^= 1
    assert ch.open(bytes(bad)) is None
    assert ch.open(pkt) == PT  # the forged copy did not mark its TSC as seen
    assert rx.open_fast(bytes(bad), PORT, A_B, SDI) is None
    assert rx.drops == {DropReason.REPLAY: 1}  # the genuine one is now recorded: replay first


@pytest.mark.parametrize("cut", [0, 1, 11, 12, 27])
def test_channel_declines_a_short_packet(cut: int) -> None:
    tx, rx = _ends()
    ch = _channel(tx, rx)
    assert ch.open(_seal(tx)[:cut]) is None


def test_channel_declines_another_an_and_another_epoch() -> None:
    tx, rx = _ends()
    ch = _channel(tx, rx)
    key = os.urandom(32)
    rx.install_key(SDI, 1, key)
    _rotate(tx, key)
    other_an = _seal(tx)
    assert ch.open(other_an) is None
    assert rx.open_fast(other_an, PORT, A_B, SDI) == PT  # the full path accepts it (new channel)
    tx2, rx2 = _ends()
    ch2 = _channel(tx2, rx2)
    tx2.table[SDI].advance_epoch()
    newer = _seal(tx2)
    assert ch2.open(newer) is None
    assert rx2.open_fast(newer, PORT, A_B, SDI) == PT  # a newer epoch is fine (§5.6), on the full path


def test_channel_declines_after_a_key_is_installed_over_its_slot() -> None:
    """The slot the channel holds is forgotten (key emptied) when another key takes its place."""
    tx, rx = _ends()
    key = os.urandom(32)
    rx.install_key(SDI, 1, key)
    _rotate(tx, key)
    ch = _channel(tx, rx)  # a channel for AN 1
    pkt = _seal(tx)
    rx.install_key(SDI, 1, os.urandom(32))  # the SDME replaces AN 1 on the receiver
    assert ch.open(pkt) is None
    assert rx.open_fast(pkt, PORT, A_B, SDI) is None
    assert rx.drops == {DropReason.BAD_TAG: 1}


def test_channel_declines_after_its_slot_retired() -> None:
    tx, rx = _ends(cfg=TssConfig(key_grace_ns=100))
    ch = _channel(tx, rx)  # AN 0
    late = _seal(tx)
    key = os.urandom(32)
    rx.install_key(SDI, 1, key)
    rx.activate(SDI, 1, 0)  # AN 0 retires at 100 ns
    assert ch.open(_seal(tx)) == PT  # inside the grace period
    rx.handle_timer(100)
    assert ch.open(late) is None
    assert rx.open_fast(late, PORT, A_B, SDI) is None
    assert rx.drops == {DropReason.RETIRED_KEY: 1}


def test_channel_declines_after_its_domain_was_removed_and_added_again() -> None:
    tx, rx = _ends()
    ch = _channel(tx, rx)
    pkt = _seal(tx)
    sd = rx.table[SDI]
    rx.table.remove(SDI)
    assert ch.open(pkt) is None
    assert rx.open_fast(pkt, PORT, A_B, SDI) is None
    assert rx.drops == {DropReason.UNKNOWN_SDI: 1}
    rx.table.add(SecureDomain.with_key(SDI, sd.mode, os.urandom(32)))  # same SDI, another key
    assert ch.open(pkt) is None
    assert rx.open_fast(pkt, PORT, A_B, SDI) is None
    assert rx.drops[DropReason.BAD_TAG] == 1


@pytest.mark.parametrize("state", ["disabled", "dropping"])
def test_channel_declines_while_its_domain_is_disabled_or_latched(state: str) -> None:
    tx, rx = _ends()
    ch = _channel(tx, rx)
    sd = rx.table[SDI]
    setattr(sd, "enabled" if state == "disabled" else "dropping", state == "dropping")
    pkt = _seal(tx)
    assert ch.open(pkt) is None
    assert rx.open_fast(pkt, PORT, A_B, SDI) is None
    want = DropReason.SD_DISABLED if state == "disabled" else DropReason.SD_DROPPING
    assert rx.drops == {want: 1}
    if state == "disabled":
        sd.enabled = True
    else:
        sd.reset_dropping()
    assert ch.open(pkt) == PT  # back in service: the same channel opens again


# -- the transmit channel ----------------------------------------------------------------------


def test_tx_channel_follows_activation_epoch_and_matches_seal() -> None:
    tx, rx = _ends()
    ch = tx.tx_channel(sdi=SDI, dst=B, entropy=PORT)
    twin_tx, _ = _ends()
    twin = TssContext(SecureDomainTable([tx.table[SDI].provision()]), A)
    assert ch.seal(PT) == twin.seal(PT, sdi=SDI, entropy=PORT, dst=B)  # byte for byte, TSC 0
    key = os.urandom(32)
    rx.install_key(SDI, 1, key)
    _rotate(tx, key)
    pkt = ch.seal(PT)
    assert pkt[0] & 1 == 1  # AN 1 from the next packet on
    tx.table[SDI].advance_epoch()
    newer = ch.seal(PT)
    assert int.from_bytes(newer[4:6], "big") == 1  # epoch 1 in the header
    for p in (pkt, newer):
        assert rx.open(p, entropy=PORT, src=A) == PT
    assert tx.stats["out_pkts"] == 3


def test_tx_channel_stops_when_its_domain_goes() -> None:
    tx, _ = _ends()
    ch = tx.tx_channel(sdi=SDI, dst=B, entropy=PORT)
    ch.seal(PT)
    sd = tx.table[SDI]
    sd.dropping = True
    with pytest.raises(DomainStateError):
        ch.seal(PT)
    sd.reset_dropping()
    sd.enabled = False
    with pytest.raises(DomainStateError):
        ch.seal(PT)
    sd.enabled = True
    tx.table.remove(SDI)
    with pytest.raises(UnknownDomainError):
        ch.seal(PT)
    assert tx.stats["out_pkts"] == 1


# -- the stage's receive loops against the full path --------------------------------------------


def _stage(sd: SecureDomain, address: str, cfg: TssConfig) -> TssStage:
    return TssStage(address, SecurityConfig(SecureDomainTable([sd.provision()]), tss=cfg), tx_port=PORT, rx_port=PORT)


@pytest.mark.parametrize("loop", ["marked", "batch"])
def test_stage_loops_decide_and_count_like_the_full_path(loop: str) -> None:
    """Genuine packets from two senders, replays, bit flips, trimmed marks, a rotation whose
    grace period ends, an epoch advance and the latch: the stage's loop and a context opening
    each packet on the full path give the same plaintexts, counters and drops."""
    rng = random.Random(5)
    sd = SecureDomain.generate(SDI, SdMode.CLUSTER)
    cfg = TssConfig(auth_fail_threshold=20, key_grace_ns=200)
    senders = {addr: TssContext(SecureDomainTable([sd.provision()]), addr) for addr in (A, "10.0.0.3")}
    stage = _stage(sd, B, cfg)
    full = TssContext(SecureDomainTable([sd.provision()]), B, cfg)
    pts = list(plaintexts().values())
    sent: list[tuple[bytes, str]] = []
    now = 0
    for step in range(120):
        now = step * 10
        if step == 40:
            key = os.urandom(32)
            for ctx in (*senders.values(), full, stage.ctx):
                ctx.install_key(SDI, 1, key)
            for ctx in senders.values():
                ctx.activate(SDI, 1, now)
            for ctx in (full, stage.ctx):
                ctx.activate(SDI, 1, now)
        if step == 80:
            for ctx in (*senders.values(), full, stage.ctx):
                ctx.table[SDI].advance_epoch()
        batch = []
        for _ in range(rng.randrange(1, 9)):
            r = rng.random()
            if r < 0.6 or not sent:
                src = rng.choice(list(senders))
                pkt = senders[src].seal(rng.choice(pts), sdi=SDI, entropy=PORT, dst=B)
                sent.append((pkt, src))
            elif r < 0.75:
                pkt, src = rng.choice(sent)
            else:
                old, src = rng.choice(sent[-10:])
                bad = bytearray(old)
                bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
                pkt = bytes(bad)
            trimmed = rng.random() < 0.05
            batch.append((pkt, src, trimmed))
        want = []
        full.handle_timer(now)
        for pkt, src, trimmed in batch:
            pt = full.open(pkt, entropy=PORT, src=src, expected_sdi=SDI, trimmed=trimmed)
            if pt is not None:
                want.append((pt, src))
        if loop == "marked":
            got = stage.open_marked([(p, s, 0x100 if t else 0) for p, s, t in batch], now)
            assert [(pt, src) for pt, src, _ in got] == want, step
        else:
            recs = [Datagram(p, s, 0, t, False, PORT) for p, s, t in batch]
            opened = stage.open_batch(recs, now)
            assert [(d.data, d.source) for d in opened] == want, step
        assert stage.ctx.drops == full.drops and stage.ctx.stats == full.stats, step
    assert full.drops[DropReason.REPLAY] and full.drops[DropReason.BAD_TAG] and full.drops[DropReason.TRIMMED]
    assert full.drops[DropReason.RETIRED_KEY]
    assert full.table[SDI].dropping and stage.ctx.table[SDI].dropping  # the latch engaged on both


def test_stage_fingerprints_every_arrival_even_on_the_data_path() -> None:
    sd = SecureDomain.generate(SDI, SdMode.CLUSTER)
    tx = TssContext(SecureDomainTable([sd.provision()]), A)
    stage = TssStage(
        B, SecurityConfig(SecureDomainTable([sd.provision()]), record_arrivals=True), tx_port=PORT, rx_port=PORT
    )
    pkts = [tx.seal(PT, sdi=SDI, entropy=PORT, dst=B) for _ in range(5)]
    assert len(stage.open_marked([(p, A, 0) for p in pkts], 0)) == 5
    assert stage.arrivals == {p[:32] for p in pkts}


# -- the transmit runs -------------------------------------------------------------------------


def _tx_stage(sd: SecureDomain, **kw) -> TssStage:
    return TssStage(A, SecurityConfig(SecureDomainTable([sd.provision()]), **kw), tx_port=PORT, rx_port=PORT)


def test_seal_packed_matches_seal_byte_for_byte_across_destinations() -> None:
    sd = SecureDomain.generate(SDI, SdMode.CLUSTER)
    stage = _tx_stage(sd)
    twin = TssContext(SecureDomainTable([sd.provision()]), A)
    items = [(PT, B, 1), (PT + b"x", B, 2), (PT, "10.0.0.3", 3), (PT, B, 4)]
    got = stage.seal_packed(items, 0)
    want = [(twin.seal(d, sdi=SDI, entropy=PORT, dst=dst), dst, e) for d, dst, e in items]
    assert got == want
    assert stage.counters["tss_out_pkts"] == 4


def test_seal_run_stops_at_another_destination_or_entropy() -> None:
    tx, _ = _ends()
    ch = tx.tx_channel(sdi=SDI, dst=B, entropy=PORT)
    items = [(PT, B, 1), (PT, B, 1), (PT, B, 2), (PT, "10.0.0.3", 2)]
    out: list = []
    assert ch.seal_run(items, 0, out, by_entropy=True) == 2
    assert ch.seal_run(items, 2, out) == 3  # entropy not part of the channel: only the destination
    assert len(out) == 3 and tx.stats["out_pkts"] == 3
    assert tx.table[SDI].slots[0].next_tsc == 3  # type: ignore[union-attr]


def test_seal_packed_stops_at_the_tsc_limit_and_counts_the_rest() -> None:
    sd = SecureDomain.generate(SDI, SdMode.CLUSTER)
    stage = _tx_stage(sd)
    mine = stage.ctx.table[SDI]
    slot = mine.slots[mine.tx_an]
    assert slot is not None
    slot.next_tsc = mine.tsc_limit - 2
    got = stage.seal_packed([(PT, B, 0)] * 5, 0)
    assert [g is not None for g in got] == [True, True, False, False, False]
    assert slot.next_tsc == mine.tsc_limit  # no TSC used twice, none past the limit
    c = stage.counters
    assert c["tss_out_pkts"] == 2 and c["tss_tx_errors"] == 3 and c["tss_out_invoke_fail"] == 3


@pytest.mark.parametrize("state", ["disabled", "dropping", "removed"])
def test_seal_packed_counts_every_datagram_the_domain_cannot_send(state: str) -> None:
    sd = SecureDomain.generate(SDI, SdMode.CLUSTER)
    stage = _tx_stage(sd)
    assert all(stage.seal_packed([(PT, B, 0)] * 2, 0))
    mine = stage.ctx.table[SDI]
    if state == "disabled":
        mine.enabled = False
    elif state == "dropping":
        mine.dropping = True
    else:
        stage.ctx.table.remove(SDI)
    assert stage.seal_packed([(PT, B, 0)] * 3, 0) == [None, None, None]
    assert stage.counters["tss_tx_errors"] == 3 and stage.counters["tss_out_pkts"] == 2


def test_seal_packed_with_per_packet_keys_takes_the_full_seal() -> None:
    """Cluster implicit rekey (the key changes with the TSC): no run, every datagram sealed by
    TssContext.seal, and the receiver opens them."""
    sd = SecureDomain.generate(SDI, SdMode.CLUSTER, rekey_mask=0xF0, rekey_shift=4)
    stage = _tx_stage(sd)
    rx = TssContext(SecureDomainTable([sd.provision()]), B)
    got = stage.seal_packed([(PT, B, 0)] * 40, 0)
    assert all(g is not None and rx.open(g[0], entropy=PORT, src=A) == PT for g in got)
    assert stage.counters["tss_out_pkts"] == 40


def test_seal_packed_with_a_tamper_flips_bits_in_what_it_seals() -> None:
    sd = SecureDomain.generate(SDI, SdMode.CLUSTER)
    stage = _tx_stage(sd, tamper=Tamper(1.0, seed=2))
    rx = TssContext(SecureDomainTable([sd.provision()]), B)
    got = stage.seal_packed([(PT, B, 0)] * 4, 0)
    assert stage.tamper is not None and stage.tamper.tampered == 4
    assert all(g is not None and rx.open(g[0], entropy=PORT, src=A) is None for g in got)
