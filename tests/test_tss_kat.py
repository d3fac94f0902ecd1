"""Known-answer tests of the TSS cryptography (behaviour.md §5.3–§5.5).

The primitives are checked against published vectors (RFC 4493 / SP 800-38B for AES-CMAC,
McGrew & Viega's GCM specification for AES-256-GCM). Our compositions — the SP 800-108 KDF input,
the IV and the AAD — are recomputed here step by step from the spec notes with the bare
primitives, so the tests check how we assemble them, not the library against itself.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.ciphers import algorithms
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.cmac import CMAC

from uet.tss import SdMode, SecureDomain, SecureDomainTable, TssContext
from uet.tss.kdf import kdf, kdf_context, large_context, small_context
from uet.tss.nonce import aad, entropy_header, iv, iv_source_id


def H(*parts: str) -> bytes:
    """Bytes from hex, written field by field."""
    return bytes.fromhex("".join(parts))


def cmac(key: bytes, msg: bytes) -> bytes:
    c = CMAC(algorithms.AES(key))
    c.update(msg)
    return c.finalize()


# -- AES-CMAC: RFC 4493 §4 (AES-128) and NIST SP 800-38B D.3 (AES-256) ------------------------------

_M64 = H(
    "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
    "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710"
)


def test_cmac_rfc4493_vectors() -> None:
    key = H("2b7e151628aed2a6abf7158809cf4f3c")
    assert cmac(key, b"") == H("bb1d6929e95937287fa37d129b756746")
    assert cmac(key, _M64[:16]) == H("070a16b46b4d4144f79bdd9dd04a287c")
    assert cmac(key, _M64[:40]) == H("dfa66747de9ae63030ca32611497c827")
    assert cmac(key, _M64) == H("51f0bebf7e3b9d92fc49741779363cfe")


def test_cmac_aes256_sp800_38b_vectors() -> None:
    key = H("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
    assert cmac(key, b"") == H("028962f61b7bf89efc6b551f4667d983")
    assert cmac(key, _M64[:16]) == H("28a7023f452e8f82bd4bf28d8c37c35c")
    assert cmac(key, _M64[:40]) == H("aaf3d8f1de5640c232f5b169b9c911e6")
    assert cmac(key, _M64) == H("e1992190549f6ed5696a2c056c315410")


# -- AES-256-GCM: McGrew & Viega, "The Galois/Counter Mode of Operation", test cases 13–16 ---------

_K15 = H("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
_IV15 = H("cafebabefacedbaddecaf888")
_P15 = H(
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
    "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255"
)
_C15 = H(
    "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
    "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad"
)


def test_gcm_test_case_13_14() -> None:
    g = AESGCM(bytes(32))
    assert g.encrypt(bytes(12), b"", None) == H("530f8afbc74536b9a963b4f1c4cb738b")
    c14 = H("cea7403d4d606b6e074ec5d3baf39d18") + H("d0d1c8a799996bf0265b98b5d48ab919")
    assert g.encrypt(bytes(12), bytes(16), None) == c14


def test_gcm_test_case_15_16() -> None:
    g = AESGCM(_K15)
    assert g.encrypt(_IV15, _P15, None) == _C15 + H("b094dac5d93471bdec1a502270e3cc6c")
    a16 = H("feedfacedeadbeeffeedfacedeadbeefabaddad2")
    assert g.encrypt(_IV15, _P15[:60], a16) == _C15[:60] + H("76fc6ece0f4e1768cddf8853bb2d551b")
    assert g.decrypt(_IV15, _C15[:60] + H("76fc6ece0f4e1768cddf8853bb2d551b"), a16) == _P15[:60]


# -- our KDF (behaviour.md §5.4), recomputed from CMAC in counter mode -----------------------------

_KIN = bytes(range(0x20, 0x40))


def kdf_by_hand(key: bytes, fixed: bytes) -> bytes:
    """K(i) = AES256-CMAC(K_in, i (1 byte) ‖ fixed), i = 1..3; first 44 bytes."""
    return (cmac(key, b"\x01" + fixed) + cmac(key, b"\x02" + fixed) + cmac(key, b"\x03" + fixed))[:44]


def test_kdf_small_context_bytes_and_output() -> None:
    ctx = small_context(0x0102, 0x03040506, 0x0A000001)
    assert ctx == H("010203040506", "0a000001")
    # fixed = "U1" ‖ 0x00 ‖ context ‖ L = 352 = 0x160 as 32-bit big-endian
    fixed = H("553100", "0102", "03040506", "0a000001", "00000160")
    want = kdf_by_hand(_KIN, fixed)
    assert kdf(_KIN, b"U1", ctx) == want
    assert len(want) == 44


def test_kdf_large_context_bytes_and_output() -> None:
    src6 = H("fd000000000000000000000000000042")
    ctx = large_context(7, 0, src6)
    assert ctx == H("000000000007", "00000000") + src6
    fixed = H("553200") + ctx + H("00000160")
    assert kdf(_KIN, b"U2", ctx) == kdf_by_hand(_KIN, fixed)


def test_kdf_context_choice() -> None:
    """SSI → small context whatever the family; IPv4 → small; IPv6 → large (§5.4)."""
    src6 = bytes(15) + b"\x01"
    assert kdf_context(1, 2, 0xABCD, src6) == small_context(1, 2, 0xABCD)
    assert kdf_context(1, 2, None, H("0a000002")) == small_context(1, 2, 0x0A000002)
    assert kdf_context(1, 2, None, src6) == large_context(1, 2, src6)


def test_kdf_frozen_vector() -> None:
    """A recorded vector (computed with kdf_by_hand) so a change of composition is noticed."""
    out = kdf(bytes(32), b"U1", small_context(0, 0, 0x0A000001))
    assert out == kdf_by_hand(bytes(32), H("5531000000", "00000000", "0a000001", "00000160"))


# -- IV and AAD (behaviour.md §5.5) ----------------------------------------------------------------


def test_iv_layout() -> None:
    assert iv(0x0A000001, 0x0002, 0x0000_0000_0007) == H("0a0000010002", "000000000007")
    assert iv(0xDEADBEEF, 0xFFFF, 0xFFFF_FFFF_FFFE) == H("deadbeefffff", "fffffffffffe")
    mask = H("00112233445566778899aabb")
    assert iv(0, 0, 0, mask) == mask
    assert iv(0x0A000001, 2, 7, mask) == bytes(a ^ b for a, b in zip(H("0a0000010002000000000007"), mask, strict=True))


def test_iv_source_id() -> None:
    assert iv_source_id(0x1234, H("0a000001"), 5) == 0x1234
    assert iv_source_id(None, H("0a000001"), 5) == 0x0A000001
    assert iv_source_id(None, bytes(16), 0xABCDEF) == 0xABCDEF


def test_aad_layout() -> None:
    hdr = H("080000010000000000000007")
    assert entropy_header(0xBEEF) == H("beef0000")
    assert aad(H("0a000001"), H("0a000002"), 0xBEEF, hdr) == H("0a0000010a000002", "beef0000") + hdr


# -- a whole sealed packet, assembled by hand -------------------------------------------------------


def _pair(sd: SecureDomain) -> tuple[TssContext, TssContext]:
    a = TssContext(SecureDomainTable([sd.provision()]), "10.0.0.1")
    b = TssContext(SecureDomainTable([sd.provision()]), "10.0.0.2")
    return a, b


def test_direct_mode_packet_by_hand() -> None:
    key = bytes(range(32))
    a, b = _pair(SecureDomain.with_key(1, SdMode.DIRECT, key))
    body = H("1000") + b"payload"
    for tsc in range(3):
        pkt = a.seal(body, sdi=1, entropy=0x1234, dst="10.0.0.2")
        # wire-format.md §3 example form: type 1, SP 0, AN 0, SDI 1, epoch 0, TSC
        hdr = H("08000001") + H("0000") + tsc.to_bytes(6, "big")
        nonce = H("0a000001") + H("0000") + tsc.to_bytes(6, "big")
        want = hdr + AESGCM(key).encrypt(nonce, body, H("0a0000010a000002", "12340000") + hdr)
        assert pkt == want
        assert b.open(pkt, src="10.0.0.1", entropy=0x1234) == body


def test_cluster_mode_ssi_packet_by_hand() -> None:
    k_sd = bytes(range(100, 132))
    sd = SecureDomain.with_key(0xABCDEF, SdMode.CLUSTER, k_sd, use_ssi=True, ssi=0x11223344, epoch=3)
    a, b = _pair(sd)
    b.table[0xABCDEF].ssi = 0x55667788
    body = b"\x20\x00" + bytes(30)
    pkt = a.seal(body, sdi=0xABCDEF, entropy=7, dst="10.0.0.2")
    hdr = H("0cabcdef11223344", "0003", "000000000000")  # SP = 1 → first byte 0x0C
    fixed = H("5531000003", "00000000", "11223344", "00000160")
    out = kdf_by_hand(k_sd, fixed)
    nonce = bytes(x ^ y for x, y in zip(H("112233440003", "000000000000"), out[32:], strict=True))
    want = hdr + AESGCM(out[:32]).encrypt(nonce, body, H("0a0000010a000002", "00070000") + hdr)
    assert pkt == want
    assert b.open(pkt, src="10.0.0.1", entropy=7) == body


def test_server_mode_client_key_by_hand() -> None:
    master = bytes(range(200, 232))
    srv = SecureDomain.with_key(9, SdMode.SERVER, master)
    client = SecureDomain.client_of(srv, address=H("0a000002"))
    fixed = H("5532000000", "00000000", "0a000002", "00000160")
    slot = client.slots[0]
    assert slot is not None and slot.key is not None
    assert slot.key.reveal() == kdf_by_hand(master, fixed)
    c = TssContext(SecureDomainTable([client]), "10.0.0.2")
    s = TssContext(SecureDomainTable([srv]), "10.0.0.1")
    pkt = c.seal(b"\x02\x00abc", sdi=9, entropy=1, dst="10.0.0.1")
    out = kdf_by_hand(master, fixed)
    hdr = H("080000090000", "000000000000")
    nonce = bytes(x ^ y for x, y in zip(H("0a0000020000", "000000000000"), out[32:], strict=True))
    assert pkt == hdr + AESGCM(out[:32]).encrypt(nonce, b"\x02\x00abc", H("0a0000020a000001", "00010000") + hdr)
    assert s.open(pkt, src="10.0.0.2", entropy=1) == b"\x02\x00abc"
    # The server's reply uses the server half of the TSC space (domain.py docstring).
    reply = s.seal(b"\x07\x00", sdi=9, entropy=1, dst="10.0.0.2")
    assert reply[4:12] == H("0000") + (1 << 47).to_bytes(6, "big")
    assert c.open(reply, src="10.0.0.1", entropy=1) == b"\x07\x00"
