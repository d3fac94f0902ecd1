"""The authentication-failure latch recovers (issue 29 item 15): with a threshold set, more than
that many tag failures in one window shut the secure domain for one window, not for good."""

from __future__ import annotations

from tss_support import plaintexts

from uet.tss import DropReason, SdMode, SecureDomain, SecureDomainTable, TssConfig, TssContext

SDI = 5
A, B = "10.0.0.1", "10.0.0.2"
PORT = 4793
PT = plaintexts()["rud_req"]
S = 1_000_000_000


def _ends(cfg: TssConfig) -> tuple[TssContext, TssContext]:
    sd = SecureDomain.generate(SDI, SdMode.CLUSTER)
    return TssContext(SecureDomainTable([sd.provision()]), A), TssContext(SecureDomainTable([sd.provision()]), B, cfg)


def _forged(tx: TssContext) -> bytes:
    good = bytearray(tx.seal(PT, sdi=SDI, entropy=PORT, dst=B))
    good[-1] ^= 1  # a bad tag: what anyone can send with the cleartext SDI
    return bytes(good)


def _open(rx: TssContext, data: bytes, now: int) -> bytes | None:
    return rx.open(data, entropy=PORT, src=A, now_ns=now)


def test_a_flood_latches_the_domain_for_one_window_then_it_recovers() -> None:
    tx, rx = _ends(TssConfig(auth_fail_threshold=10, auth_fail_window_ns=S))
    for i in range(11):
        assert _open(rx, _forged(tx), i) is None
    sd = rx.table[SDI]
    assert sd.dropping and rx.get_timer() == 10 + S
    assert _open(rx, tx.seal(PT, sdi=SDI, entropy=PORT, dst=B), S // 2) is None
    assert rx.last_drop is DropReason.SD_DROPPING
    rx.handle_timer(10 + S)
    assert not sd.dropping and rx.get_timer() is None
    assert _open(rx, tx.seal(PT, sdi=SDI, entropy=PORT, dst=B), 10 + S) == PT


def test_failures_spread_over_windows_never_latch() -> None:
    tx, rx = _ends(TssConfig(auth_fail_threshold=10, auth_fail_window_ns=S))
    for i in range(100):  # 10 a second, for 10 seconds: the rate stays under the threshold
        _open(rx, _forged(tx), i * S // 10 + 1)
    assert not rx.table[SDI].dropping
    assert _open(rx, tx.seal(PT, sdi=SDI, entropy=PORT, dst=B), 10 * S) == PT


def test_without_a_window_the_reference_latch_holds_until_reset() -> None:
    tx, rx = _ends(TssConfig(auth_fail_threshold=10, auth_fail_window_ns=None))
    for i in range(11):
        _open(rx, _forged(tx), i)
    rx.handle_timer(100 * S)
    assert rx.table[SDI].dropping and rx.get_timer() is None
    rx.table[SDI].reset_dropping()
    assert _open(rx, tx.seal(PT, sdi=SDI, entropy=PORT, dst=B), 100 * S) == PT
