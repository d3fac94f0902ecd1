"""Tamper, replay, wrong-domain and garbage tests of TssContext.open (behaviour.md §5.5–§5.8).

Every packet that fails must be dropped silently (None), produce no plaintext and increment exactly
one drop counter; the sum of the counters equals the number of bad packets.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tss_support import A_IP, B_IP, pair, plaintexts

from uet.tss import DropReason, SdMode, SecureDomain, SecureDomainTable, TssConfig, TssContext
from uet.wire.net import ip_bytes

ENTROPY = 0xC0DE
NO_LATCH = TssConfig(auth_fail_threshold=None)


def _make(kind: str, config: TssConfig = NO_LATCH) -> tuple[TssContext, TssContext, int]:
    """(sender A, receiver B, sdi) for a secure-domain configuration."""
    key = os.urandom(32)
    if kind == "direct":
        a, b = pair(SecureDomain.with_key(1, SdMode.DIRECT, key), config)
        return a, b, 1
    if kind == "cluster_ssi":
        sd = SecureDomain.with_key(
            0x123456, SdMode.CLUSTER, key, use_ssi=True, ssi=0xA, rekey_mask=0xFF00, rekey_shift=8
        )
        a, b = pair(sd, config, a_ssi=0xA, b_ssi=0xB)
        return a, b, 0x123456
    if kind == "client_to_server":
        srv = SecureDomain.with_key(77, SdMode.SERVER, key, use_ssi=True)
        client = SecureDomain.client_of(srv, address=ip_bytes(A_IP), ssi=0x51)
        a = TssContext(SecureDomainTable([client]), A_IP, config)
        b = TssContext(SecureDomainTable([srv.provision()]), B_IP, config)
        return a, b, 77
    raise AssertionError(kind)


KINDS = ["direct", "cluster_ssi", "client_to_server"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_single_bit_flip_is_dropped(kind: str) -> None:
    a, b, sdi = _make(kind)
    flips = 0
    for name, pt in plaintexts().items():
        pkt = a.seal(pt, sdi=sdi, entropy=ENTROPY, dst=B_IP)
        for i in range(len(pkt)):
            for bit in range(8):
                bad = bytearray(pkt)
                bad[i] ^= 1 << bit
                assert b.open(bytes(bad), src=A_IP, entropy=ENTROPY) is None, (name, i, bit)
                flips += 1
        assert b.dropped == flips
        assert b.stats["in_auth_pkts"] == 0
    # Nothing forged moved a replay window or poisoned a cache: the genuine packets still open.
    for pt in plaintexts().values():
        assert b.open(a.seal(pt, sdi=sdi, entropy=ENTROPY, dst=B_IP), src=A_IP, entropy=ENTROPY) == pt
    assert b.dropped == flips
    assert set(b.drops) <= set(DropReason)
    assert b.drops[DropReason.BAD_TAG] > 0 and b.drops[DropReason.UNKNOWN_SDI] > 0


@pytest.mark.parametrize("kind", KINDS)
def test_aad_covers_addresses_and_entropy(kind: str) -> None:
    a, b, sdi = _make(kind)
    pt = plaintexts()["rud_req"]
    pkt = a.seal(pt, sdi=sdi, entropy=ENTROPY, dst=B_IP)
    src, dst = ip_bytes(A_IP), ip_bytes(B_IP)
    bad = 0
    for i in range(32):
        s = bytearray(src)
        s[i // 8] ^= 1 << (i % 8)
        d = bytearray(dst)
        d[i // 8] ^= 1 << (i % 8)
        assert b.open(pkt, src=bytes(s), dst=dst, entropy=ENTROPY) is None
        assert b.open(pkt, src=src, dst=bytes(d), entropy=ENTROPY) is None
        bad += 2
    for i in range(16):
        assert b.open(pkt, src=src, dst=dst, entropy=ENTROPY ^ (1 << i)) is None
        bad += 1
    assert b.dropped == bad == b.drops[DropReason.BAD_TAG]
    assert b.open(pkt, src=src, dst=dst, entropy=ENTROPY) == pt


def test_truncated_or_extended_packets_are_dropped() -> None:
    a, b, sdi = _make("cluster_ssi")
    pkt = a.seal(plaintexts()["ack"], sdi=sdi, entropy=ENTROPY, dst=B_IP)
    for n in range(len(pkt)):
        assert b.open(pkt[:n], src=A_IP, entropy=ENTROPY) is None
    assert b.open(pkt + b"\x00", src=A_IP, entropy=ENTROPY) is None
    assert b.drops[DropReason.TRUNCATED] == 16 + 16  # shorter than header (16 with SSI) + ICV
    assert b.dropped == len(pkt) + 1
    assert b.open(pkt, src=A_IP, entropy=ENTROPY) is not None


@pytest.mark.parametrize("kind", KINDS)
def test_replayed_packets_are_dropped(kind: str) -> None:
    a, b, sdi = _make(kind)
    sealed = [a.seal(pt, sdi=sdi, entropy=ENTROPY, dst=B_IP) for pt in plaintexts().values() for _ in range(3)]
    for pkt in sealed:
        assert b.open(pkt, src=A_IP, entropy=ENTROPY) is not None
    for pkt in sealed + sealed[::-1]:
        assert b.open(pkt, src=A_IP, entropy=ENTROPY) is None
    assert b.drops == {DropReason.REPLAY: 2 * len(sealed)}
    assert b.stats["in_auth_pkts"] == len(sealed)


def test_retransmission_gets_a_new_tsc_and_both_copies_are_accepted() -> None:
    a, b, sdi = _make("direct")
    pt = plaintexts()["rud_req"]
    first = a.seal(pt, sdi=sdi, entropy=ENTROPY, dst=B_IP)
    retx = a.seal(pt, sdi=sdi, entropy=ENTROPY, dst=B_IP)
    assert first[:4] == retx[:4] and first[4:12] != retx[4:12] and first[12:] != retx[12:]
    got = [g for g in (b.unseal(p, src=A_IP, entropy=ENTROPY) for p in (retx, first)) if g is not None]
    assert [g.tsc for g in got] == [1, 0] and all(g.plaintext == pt for g in got)


def test_reordering_inside_the_window_is_accepted_and_behind_it_is_stale() -> None:
    a, b, sdi = _make("direct", TssConfig(replay_window=64, auth_fail_threshold=None))
    pkts = [a.seal(b"\x10\x00" + bytes([i]), sdi=sdi, entropy=1, dst=B_IP) for i in range(200)]
    order = list(range(100, 131)) + list(range(99, 66, -1)) + list(range(190, 199, 2))  # top 130, back to 67
    for i in order:
        assert b.open(pkts[i], src=A_IP, entropy=1) is not None, i
    assert b.open(pkts[191], src=A_IP, entropy=1) is not None  # a hole inside the window fills
    assert b.open(pkts[134], src=A_IP, entropy=1) is None  # 198 - 134 = 64: just behind the window
    assert b.open(pkts[190], src=A_IP, entropy=1) is None  # seen, inside the window
    assert b.drops == {DropReason.STALE: 1, DropReason.REPLAY: 1}


def test_replay_window_off_accepts_replays() -> None:
    """replay_window=0 is the reference's behaviour (no TSC window, §5.6)."""
    a, b, sdi = _make("direct", TssConfig(replay_window=0))
    pkt = a.seal(b"\x10\x00", sdi=sdi, entropy=1, dst=B_IP)
    assert b.open(pkt, src=A_IP, entropy=1) == b.open(pkt, src=A_IP, entropy=1) == b"\x10\x00"


def test_packet_for_another_secure_domain_is_dropped() -> None:
    k1, k2 = os.urandom(32), os.urandom(32)
    sd1 = SecureDomain.with_key(1, SdMode.DIRECT, k1)
    sd2 = SecureDomain.with_key(2, SdMode.DIRECT, k2)
    imposter = SecureDomain.with_key(1, SdMode.DIRECT, os.urandom(32))  # same SDI, another job's key
    a = TssContext(SecureDomainTable([sd1.provision(), sd2.provision()]), A_IP, NO_LATCH)
    only1 = TssContext(SecureDomainTable([sd1.provision()]), B_IP, NO_LATCH)
    both = TssContext(SecureDomainTable([sd1.provision(), sd2.provision()]), B_IP, NO_LATCH)
    other = TssContext(SecureDomainTable([imposter]), B_IP, NO_LATCH)
    pt = plaintexts()["rud_req"]
    for2 = a.seal(pt, sdi=2, entropy=1, dst=B_IP)
    for1 = a.seal(pt, sdi=1, entropy=1, dst=B_IP)
    assert only1.open(for2, src=A_IP, entropy=1) is None
    assert only1.drops == {DropReason.UNKNOWN_SDI: 1}
    assert both.open(for2, src=A_IP, entropy=1, expected_sdi=1) is None
    assert both.drops == {DropReason.WRONG_DOMAIN: 1}
    assert other.open(for1, src=A_IP, entropy=1) is None
    assert other.drops == {DropReason.BAD_TAG: 1}
    assert both.open(for2, src=A_IP, entropy=1, expected_sdi=2) == pt


def test_client_rejects_a_packet_sealed_for_another_client() -> None:
    srv = SecureDomain.with_key(5, SdMode.SERVER, os.urandom(32), use_ssi=True)
    c1 = SecureDomain.client_of(srv, address=ip_bytes(A_IP), ssi=1)
    c2 = SecureDomain.client_of(srv, address=ip_bytes(A_IP), ssi=2)
    server = TssContext(SecureDomainTable([srv]), B_IP)
    client2 = TssContext(SecureDomainTable([c2]), A_IP)
    to_c1 = server.seal(b"\x07\x00", sdi=5, entropy=1, dst=A_IP, client_ssi=1)
    assert client2.open(to_c1, src=B_IP, entropy=1) is None
    assert client2.drops == {DropReason.WRONG_DOMAIN: 1}
    client1 = TssContext(SecureDomainTable([c1]), A_IP)
    assert client1.open(to_c1, src=B_IP, entropy=1) == b"\x07\x00"


def test_auth_failure_latch_and_reset() -> None:
    a, b, sdi = _make("direct", TssConfig(auth_fail_threshold=3))
    good = a.seal(b"\x10\x00", sdi=sdi, entropy=1, dst=B_IP)
    forged = good[:-1] + bytes([good[-1] ^ 1])
    for _ in range(4):
        assert b.open(forged, src=A_IP, entropy=1) is None
    assert b.open(good, src=A_IP, entropy=1) is None  # latched: even genuine packets are dropped
    assert b.drops == {DropReason.BAD_TAG: 4, DropReason.SD_DROPPING: 1}
    b.table[sdi].reset_dropping()
    assert b.open(good, src=A_IP, entropy=1) == b"\x10\x00"


def test_trimmed_packets_are_dropped_without_feeding_the_latch() -> None:
    a, b, sdi = _make("direct", TssConfig(auth_fail_threshold=3))
    full = a.seal(plaintexts()["rud_req"], sdi=sdi, entropy=1, dst=B_IP)
    for n in (40, 64, len(full) - 16):
        assert b.open(full[:n], src=A_IP, entropy=1, trimmed=True) is None
    for _ in range(5):
        assert b.open(full, src=A_IP, entropy=1, trimmed=True) is None
    assert b.drops == {DropReason.TRIMMED: 8} and not b.table[sdi].dropping
    assert b.open(full, src=A_IP, entropy=1) == plaintexts()["rud_req"]


def test_disabled_domain_and_unsecured_packets() -> None:
    a, b, sdi = _make("direct")
    pkt = a.seal(b"\x10\x00", sdi=sdi, entropy=1, dst=B_IP)
    plain = plaintexts()["nack"]
    assert b.open(plain, src=A_IP, entropy=1) is None
    b.table[sdi].enabled = False
    assert b.open(pkt, src=A_IP, entropy=1) is None
    assert b.drops == {DropReason.NOT_SECURE: 1, DropReason.SD_DISABLED: 1}
    bypass = TssContext(SecureDomainTable(), B_IP, TssConfig(require_security=False))
    assert bypass.open(plain, src=A_IP, entropy=1) == plain
    assert bypass.stats["bypass"] == 1


# -- garbage never raises ---------------------------------------------------------------------------

_RX_A, _RX_B, _SDI = _make("cluster_ssi", TssConfig(auth_fail_threshold=None))
_DIRECT_A, _DIRECT_B, _ = _make("direct", TssConfig(auth_fail_threshold=None))
_addr = st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16))


@settings(max_examples=300)
@given(data=st.binary(max_size=200), src=_addr, entropy=st.integers(0, 0xFFFF))
def test_random_bytes_never_raise(data: bytes, src: bytes, entropy: int) -> None:
    dst = bytes(len(src))
    for rx in (_RX_B, _DIRECT_B):
        before = rx.dropped
        assert rx.open(data, src=src, dst=dst, entropy=entropy) is None
        assert rx.dropped == before + 1


@settings(max_examples=300)
@given(
    sp=st.booleans(),
    an=st.integers(0, 1),
    sdi=st.sampled_from([_SDI, 1, 0xFFFFFF]),
    rest=st.binary(max_size=120),
    src=_addr,
)
def test_random_bodies_behind_a_plausible_header_never_raise(
    sp: bool, an: int, sdi: int, rest: bytes, src: bytes
) -> None:
    first = 0x08 | (0x04 if sp else 0) | an
    data = bytes([first]) + sdi.to_bytes(3, "big") + rest
    dst = bytes(len(src))
    for rx in (_RX_B, _DIRECT_B):
        before = rx.dropped
        assert rx.open(data, src=src, dst=dst, entropy=0) is None
        assert rx.dropped == before + 1


def test_forged_packets_do_not_shut_the_domain_by_default() -> None:
    """Issue 15 item 12: with the default configuration 1,001 forged packets carrying the
    cleartext SDI latched the SD shut for every honest peer; the latch is now opt-in."""
    a, b, sdi = _make("direct", TssConfig())
    good = a.seal(b"\x10\x00", sdi=sdi, entropy=1, dst=B_IP)
    forged = good[:-1] + bytes([good[-1] ^ 1])
    for _ in range(1001):
        assert b.open(forged, src=A_IP, entropy=1) is None
    assert b.open(good, src=A_IP, entropy=1) == b"\x10\x00"
    assert b.drops == {DropReason.BAD_TAG: 1001} and not b.table[sdi].dropping
