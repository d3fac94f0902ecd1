"""The nominal size of behaviour.md §4.2 counts what the integrity layer adds to each datagram.

``nominal = UDP length + 40``: with TSS the UDP payload is security header ‖ ciphertext ‖ ICV,
with the CRC trailer it ends in 4 more bytes. Directly over IP the transport size runs from the
4-byte entropy header to the trailer, 4 bytes less than a UDP header's 8. The target's ACK_CC
``rcvd_bytes`` counts that on every data packet, and the sender's CCC sizes its packets the same
way, so what it learns from ``rcvd_bytes`` drains exactly what it put in flight (NSCC's
``inflight`` ends at 0).
"""

from __future__ import annotations

import pytest
from fep_harness import B_ADDR, FepPair

from uet.cc.ccc import Ccc
from uet.cc.nscc import Nscc
from uet.fep import FepConfig
from uet.fep.marking import DSCP_DATA
from uet.pds import PdsConfig
from uet.pds.pdc import TargetPdc
from uet.tss import SdMode, SecureDomain, SecureDomainTable
from uet.tss.establish import StartPsnMethod
from uet.tss.stage import SecurityConfig


def _pair(protect: str, over_ip: bool = False) -> FepPair:
    cfg = FepConfig(pds=PdsConfig(cc="nscc"), data_protect=protect)
    if protect != "tss":
        p = FepPair(cfg, seed=5)
    else:
        p = _secure_pair(cfg)
    if over_ip:
        for side in (p.a, p.b):
            side.core.set_link_ports(over_ip=True)
    return p


def _secure_pair(cfg: FepConfig) -> FepPair:
    sd = SecureDomain.generate(0x52, SdMode.CLUSTER)
    sa = SecurityConfig(SecureDomainTable([sd.provision()]))
    # a 0-RTT target takes the first flight as offered: every data packet is delivered once
    sb = SecurityConfig(SecureDomainTable([sd.provision()]), method=StartPsnMethod.EXPECTED_0RTT_START)
    return FepPair(cfg, seed=5, security_a=sa, security_b=sb)


@pytest.mark.parametrize(("protect", "over_ip"), [("tss", False), ("crc", False), ("none", True), ("tss", True)])
def test_rcvd_bytes_counts_the_wire_bytes_and_the_sender_agrees(protect: str, over_ip: bool) -> None:
    p = _pair(protect, over_ip)
    # the target's count is read before the initiator's idle close frees the PDC
    counts: list[int] = []
    r = p.b.core.post_recv(None)
    h = p.a.core.send(B_ADDR, bytes(200_000))

    def done() -> bool:
        tps = [x for x in p.b.core.pds.pdcs.values() if isinstance(x, TargetPdc)]
        counts[:] = [tp.rcvd_bytes for tp in tps]
        return r in p.b.done and h in p.a.done

    assert p.run_until(done)
    data = [t for t in p.sent_by(p.a) if t.dscp == DSCP_DATA]
    assert len(data) >= 40
    transport = 4 if over_ip else 8  # the entropy header, or the UDP header
    assert counts == [sum(len(t.data) + 40 + transport for t in data)]  # transport size + 40, each packet once
    g = p.a.core.pds.gates[(B_ADDR, 0)][0]
    assert isinstance(g, Ccc)
    nscc = g.get(Nscc)
    # every end rounds to 256-byte units once: a 28-byte disagreement per packet would show
    assert nscc is not None and abs(nscc.inflight) < 256
