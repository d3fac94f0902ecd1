"""Secure PDC establishment between real endpoints (behaviour.md §2.3.2; uet/link/secure.py).

The method is the *target's* choice, per FEP: EXPECTED_0RTT_START accepts a Start_PSN at or after
the SDI's Expected_PSN at once, RANDOM_1RTT_START mints one and returns it in a NACK
``NEW_START_PSN``. The two interoperate because every initiator follows that NACK. The tests look
at the target's ``pdc_pending`` counter (a PDC parked in PENDING by the policy) and at the
datagrams on the wire (decrypted with a copy of the domain) to see which path was taken.
"""

from __future__ import annotations

import pytest
from tss_e2e_support import SDI, Tap, domain, inner, pair, payload, security, slink, transfer

from uet.tss import SecureDomainTable, TssConfig, TssContext
from uet.tss.establish import Expected0RttStart, StartPsnMethod
from uet.wire import pds
from uet.wire.pds import NackCode, PdsType, ReqFlag

ZERO = StartPsnMethod.EXPECTED_0RTT_START
ONE = StartPsnMethod.RANDOM_1RTT_START


def _opened(tap: Tap, sd, src: str, port: int) -> list[bytes]:
    """The plaintexts of what a FEP at ``src`` put on the wire (read-only context)."""
    out = []
    for dst, d in tap.sent:
        ctx = TssContext(SecureDomainTable([sd.provision()]), dst, TssConfig(replay_window=0))
        pt = ctx.open(d, entropy=port, src=src)
        assert pt is not None
        out.append(pt)
    return out


def _new_start_nacks(pts: list[bytes]) -> list[int]:
    """Payloads (minted Start_PSNs) of the NACK NEW_START_PSN among plaintexts."""
    out = []
    for pt in pts:
        if pt[0] >> 3 == PdsType.NACK:
            n = pds.NACK.decode(pt)
            if n.nack_code == NackCode.NEW_START_PSN:
                out.append(n.payload)
    return out


def _syn_starts(pts: list[bytes]) -> set[int]:
    """Start_PSNs (psn − psn_offset) of the SYN requests among plaintexts."""
    out = set()
    for pt in pts:
        if pt[0] >> 3 in (PdsType.RUD_REQ, PdsType.ROD_REQ) and pt[1] & ReqFlag.SYN:
            r = pds.REQUEST_SYN.decode(pt)
            out.add((r.psn - r.psn_offset) & 0xFFFFFFFF)
    return out


@pytest.mark.parametrize(("method_a", "method_b"), [(ZERO, ONE), (ONE, ZERO), (ONE, ONE), (ZERO, ZERO)])
async def test_establishment_methods_interoperate_both_directions(method_a, method_b) -> None:
    sd = domain()
    ea, eb = await pair(security(sd, method_a), security(sd, method_b))
    tap_a, tap_b = Tap(inner(ea)), Tap(inner(eb))
    data = payload(120_000, seed=7)
    try:
        assert await transfer(ea, eb, data) == data  # A initiates, B is the target
        assert await transfer(eb, ea, data[::-1]) == data[::-1]  # B initiates, A is the target
    finally:
        await ea.close()
        await eb.close()
    port = slink(ea).port
    from_a = _opened(tap_a, sd, ea.address, port)
    from_b = _opened(tap_b, sd, eb.address, port)
    for target, target_pts, initiator_pts, method in (
        (eb, from_b, from_a, method_b),
        (ea, from_a, from_b, method_a),
    ):
        minted = _new_start_nacks(target_pts)
        if method is ONE:
            # 1-RTT: the target parked the PDC, minted a Start_PSN, and the initiator re-drove its
            # SYNs from exactly that value.
            assert target.counters.get("pdc_pending", 0) == 1
            assert minted and len(set(minted)) == 1
            assert minted[0] in _syn_starts(initiator_pts)
        else:
            # 0-RTT: Expected_PSN is still 0 for a fresh SDI, so the offered Start_PSN is accepted;
            # closing the PDC raised the SDI's Expected_PSN past it (and sent it in the EPSN ACK).
            assert target.counters.get("pdc_pending", 0) == 0 and not minted
            (start,) = _syn_starts(initiator_pts)
            policy = slink(target).policy
            assert isinstance(policy, Expected0RttStart)
            assert policy.expected_psn(SDI) == (start + 1) & 0xFFFFFFFF
    assert ea.counters["messages_received"] == eb.counters["messages_received"] == 1


async def test_zero_rtt_target_redirects_a_start_psn_behind_expected_psn() -> None:
    """A 0-RTT target whose SDI's Expected_PSN is ahead of the offered Start_PSN NACKs with
    Expected_PSN; a 1-RTT FEP as initiator follows it (§2.3.2)."""
    sd = domain()
    ea, eb = await pair(security(sd, ZERO), security(sd, ONE))
    policy = slink(ea).policy
    assert isinstance(policy, Expected0RttStart)
    # As if PDCs with Start_PSNs 2^30 and then 2^31 + 4 had closed on A: Expected_PSN = 2^31 + 5,
    # which is after every random Start_PSN in [2^16, 2^31).
    policy.on_close(SDI, 1 << 30)
    expected = policy.on_close(SDI, (1 << 31) + 4)
    assert expected == (1 << 31) + 5
    tap_a, tap_b = Tap(inner(ea)), Tap(inner(eb))
    data = payload(50_000, seed=8)
    try:
        assert await transfer(eb, ea, data) == data
    finally:
        await ea.close()
        await eb.close()
    port = slink(ea).port
    assert _new_start_nacks(_opened(tap_a, sd, ea.address, port))[0] == expected
    assert expected in _syn_starts(_opened(tap_b, sd, eb.address, port))
    assert ea.counters["pdc_pending"] == 1
