"""Secure-domain modes end to end, address families, implicit rekey, generation and the decoder
seam (behaviour.md §5.1, §5.4, §5.5)."""

from __future__ import annotations

import os

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from tss_support import A_IP, B_IP, pair, plaintexts

from uet.tss import (
    DropReason,
    SdMode,
    SecureDomain,
    SecureDomainTable,
    TssContext,
    TssError,
    UnknownDomainError,
    UnknownPeerError,
    decrypt_for_decoder,
)
from uet.tss.decoder import open_for_decoder
from uet.tss.kdf import kdf, small_context
from uet.tss.nonce import aad, iv
from uet.wire.net import ip_bytes
from uet.wire.tss import TSS

A6 = "fd00::1"
B6 = "fd00::2"


@pytest.mark.parametrize(
    ("mode", "use_ssi", "a_ip", "b_ip"),
    [
        (SdMode.DIRECT, False, A_IP, B_IP),
        (SdMode.DIRECT, True, A_IP, B_IP),
        (SdMode.DIRECT, True, A6, B6),
        (SdMode.CLUSTER, False, A_IP, B_IP),
        (SdMode.CLUSTER, True, A_IP, B_IP),
        (SdMode.CLUSTER, False, A6, B6),
        (SdMode.CLUSTER, True, A6, B6),
    ],
)
def test_peer_modes_round_trip_both_ways(mode: SdMode, use_ssi: bool, a_ip: str, b_ip: str) -> None:
    sd = SecureDomain.generate(0x00BEEF, mode, use_ssi=use_ssi, ssi=1 if use_ssi else None)
    a_sd, b_sd = sd.provision(ssi=1 if use_ssi else None), sd.provision(ssi=2 if use_ssi else None)
    a = TssContext(SecureDomainTable([a_sd]), a_ip)
    b = TssContext(SecureDomainTable([b_sd]), b_ip)
    for name, pt in plaintexts().items():
        to_b = a.seal(pt, sdi=0xBEEF, entropy=len(name), dst=b_ip)
        assert len(to_b) == len(pt) + (16 if use_ssi else 12) + 16
        assert to_b[len(to_b) - 16 - len(pt) : -16] != pt  # PDS, SES and payload are ciphertext
        got = b.unseal(to_b, src=a_ip, entropy=len(name))
        assert got is not None and got.plaintext == pt and got.ssi == (1 if use_ssi else None)
        to_a = b.seal(pt, sdi=0xBEEF, entropy=3, dst=a_ip)
        assert a.open(to_a, src=b_ip, entropy=3) == pt
    assert a.dropped == b.dropped == 0


def test_ipv6_without_ssi_needs_cluster_mode() -> None:
    """IPv6 without SSI puts the SDI in the IV: unique only with per-sender keys (§5.1, §5.5)."""
    a, b = pair(SecureDomain.generate(7, SdMode.DIRECT))
    with pytest.raises(TssError):
        a.seal(b"\x10\x00", sdi=7, entropy=1, src=A6, dst=B6)
    c, d = pair(SecureDomain.generate(7, SdMode.CLUSTER))
    pkt = c.seal(b"\x10\x00", sdi=7, entropy=1, src=A6, dst=B6)
    assert d.open(pkt, src=A6, dst=B6, entropy=1) == b"\x10\x00"
    # a direct-mode receiver refuses the form even before trying the key
    forged = TssContext(SecureDomainTable([SecureDomain.generate(7, SdMode.DIRECT)]), B6)
    assert forged.open(pkt, src=A6, entropy=1) is None
    assert forged.drops == {DropReason.BAD_HEADER: 1}


@pytest.mark.parametrize("use_ssi", [False, True])
def test_server_mode_with_many_clients(use_ssi: bool) -> None:
    srv = SecureDomain.generate(20, SdMode.SERVER, use_ssi=use_ssi)
    server = TssContext(SecureDomainTable([srv]), "10.0.1.1")
    clients = {}
    for n in range(1, 4):
        ip = f"10.0.0.{n}"
        entry = SecureDomain.client_of(srv, address=ip_bytes(ip), ssi=100 + n if use_ssi else None)
        clients[ip] = TssContext(SecureDomainTable([entry]), ip)
    for ip, c in clients.items():
        req = c.seal(b"\x02\x00" + ip.encode(), sdi=20, entropy=1, dst="10.0.1.1")
        got = server.unseal(req, src=ip, entropy=1)
        assert got is not None and got.plaintext == b"\x02\x00" + ip.encode()
        # The PDS answers with the SSI the request authenticated with (Opened.ssi).
        assert got.ssi == (100 + int(ip[-1]) if use_ssi else None)
        resp = server.seal(b"\x07\x00" + ip.encode(), sdi=20, entropy=1, dst=ip, client_ssi=got.ssi)
        assert c.open(resp, src="10.0.1.1", entropy=1) == b"\x07\x00" + ip.encode()
        # another client cannot read it
        other = clients["10.0.0.3" if ip != "10.0.0.3" else "10.0.0.1"]
        assert other.open(resp, src="10.0.1.1", dst=ip, entropy=1) is None
    if use_ssi:
        # Nothing is learned from traffic: without an SSI or a key-file entry the server cannot seal.
        with pytest.raises(UnknownPeerError):
            server.seal(b"\x07\x00", sdi=20, entropy=1, dst="10.0.0.1")
        srv.clients[ip_bytes("10.0.0.1")] = 101
        resp = server.seal(b"\x07\x00", sdi=20, entropy=1, dst="10.0.0.1")
        assert clients["10.0.0.1"].open(resp, src="10.0.1.1", entropy=1) == b"\x07\x00"


def test_implicit_rekey_changes_the_derived_key_every_256_packets() -> None:
    k = os.urandom(32)
    sd = SecureDomain.with_key(8, SdMode.CLUSTER, k, rekey_mask=0xFF00, rekey_shift=8)
    a, b = pair(sd)
    pkts = [a.seal(b"\x10\x00", sdi=8, entropy=1, dst=B_IP) for _ in range(257)]
    src, dst = ip_bytes(A_IP), ip_bytes(B_IP)

    def opens_with_rekey(pkt: bytes, rekey: int) -> bool:
        tsc = TSS.decode(pkt).tsc
        out = kdf(k, b"U1", small_context(0, rekey, src))
        try:
            AESGCM(out[:32]).decrypt(
                iv(int.from_bytes(src, "big"), 0, tsc, out[32:]), pkt[12:], aad(src, dst, 1, pkt[:12])
            )
        except InvalidTag:  # only a failed authentication means "not this key"
            return False
        return True

    assert opens_with_rekey(pkts[255], 0) and not opens_with_rekey(pkts[255], 1)
    assert opens_with_rekey(pkts[256], 1) and not opens_with_rekey(pkts[256], 0)
    assert all(b.open(p, src=A_IP, entropy=1) == b"\x10\x00" for p in pkts)


def test_generate_and_provision() -> None:
    sd1, sd2 = SecureDomain.generate(1), SecureDomain.generate(1)
    (s1, s2), member = (sd1.slots[0], sd2.slots[0]), sd1.provision(ssi=None)
    assert s1 is not None and s1.key is not None and s2 is not None
    assert s1.key != s2.key and len(s1.key) == 32
    mine = member.slots[0]
    assert mine is not None and mine.key == s1.key and mine is not s1
    with pytest.raises(ValueError):
        SecureDomain.generate(1, SdMode.CLIENT)
    with pytest.raises(ValueError):
        SecureDomain.generate(1 << 24)
    with pytest.raises(ValueError):
        SecureDomain.generate(1, SdMode.CLUSTER, use_ssi=True)  # needs this FEP's SSI


def test_seal_errors() -> None:
    a, _ = pair(SecureDomain.generate(1, SdMode.DIRECT))
    with pytest.raises(UnknownDomainError):
        a.seal(b"\x10\x00", sdi=2, entropy=1, dst=B_IP)
    with pytest.raises(ValueError):
        a.seal(b"\x10\x00", sdi=1, entropy=1, dst=B6)  # address families differ
    a.table[1].enabled = False
    with pytest.raises(TssError):
        a.seal(b"\x10\x00", sdi=1, entropy=1, dst=B_IP)


def test_decoder_seam_reads_without_changing_state() -> None:
    sd = SecureDomain.generate(0x42, SdMode.CLUSTER, use_ssi=True, ssi=5)
    a, b = pair(sd, a_ssi=5, b_ssi=6)
    pkt = a.seal(plaintexts()["rud_req"], sdi=0x42, entropy=9, dst=B_IP)
    assert b.open(pkt, src=A_IP, entropy=9) is not None
    table = SecureDomainTable([sd.provision(ssi=99)])
    for _ in range(2):  # a replay is still decodable: the decoder keeps no window
        assert decrypt_for_decoder(table, pkt, A_IP, B_IP, 9) == plaintexts()["rud_req"]
    slot = table[0x42].slots[0]
    assert slot is not None and not slot.windows and not slot.derived
    assert decrypt_for_decoder(table, pkt, A_IP, B_IP, 8) is None  # wrong entropy
    assert decrypt_for_decoder(SecureDomainTable([SecureDomain.generate(0x42)]), pkt, A_IP, B_IP, 9) is None
    assert open_for_decoder(SecureDomainTable(), pkt, A_IP, B_IP, 9) is DropReason.UNKNOWN_SDI
