"""A READ longer than one packet's payload, sent as one request (SOM and EOM, ``request_length``
of three payloads): the FEP core returns the data in the return direction of the *same* PDC
(behaviour.md §1.4, §6.5), as consecutive RESPONSE_DATA requests with no SYN, and every packet
of it arrives.

Regression: the core submitted read data as requests of a new PDC toward the reader, under one
PDS message key per packet, so the second packet of a multi-packet return had no open message and
was refused: the return stalled after its first packet.
"""

from __future__ import annotations

from fep_harness import A_ADDR, B_ADDR

from uet.conformance.wirekit import SesFields, control, decode_reply, request, ses_standard
from uet.fep import Datagram, FepCore
from uet.ses.memory import Access
from uet.wire import pds as P
from uet.wire import ses as S

PAYLOAD = 4096  # the FEP core's default SES payload per packet
MY_PDC, START = 0x321, 0x10000


def _feed(core: FepCore, data: bytes, now: int) -> list:
    core.receive_batch([Datagram(data, A_ADDR, ecn=0, trimmed=False)], now)
    return [decode_reply(t.data) for t in core.datagrams_to_send(now)]


def test_a_three_packet_read_returns_on_the_read_pdc() -> None:
    core = FepCore(B_ADDR, job=1, pid=1, seed=3)
    mem = bytearray(bytes(range(251)) * 60)
    reg = core.register(mem, Access.REMOTE_READ | Access.REMOTE_WRITE)
    n = 3 * PAYLOAD - 100
    ses = SesFields(opcode=S.SesOpcode.READ, job=1, pid=1, match_bits=reg.key, buffer_offset=5, request_length=n)
    now = 1_000
    out = _feed(core, request(psn=START, spdcid=MY_PDC, syn=True) + ses_standard(ses), now)
    ack = next(r for r in out if r.is_ack)
    assert ack.ack_psn == START and ack.rc == S.ReturnCode.OK
    target_pdc = ack.pds.spdcid
    # the read's ACK carries its response guaranteed (REQ_CLEAR): the CLEAR also proves our address
    # to the target, which sends an unverified source nothing more than its replies (uet.pds.validation)
    assert ack.flags & P.AckFlag.REQ_CLEAR
    clear = control(P.ControlType.CLEAR, spdcid=MY_PDC, dpdcid=target_pdc, payload=START)
    returned: list = [r for r in out + _feed(core, clear, now) if r.ptype == P.PdsType.RUD_REQ]
    got = bytearray(n)
    seen: list = []
    while returned:
        now += 1_000
        r = returned.pop(0)
        seen.append(r)
        assert (r.pds.spdcid, getattr(r.pds, "dpdcid", None)) == (target_pdc, MY_PDC), "the read's own PDC"
        assert not r.flags & P.ReqFlag.SYN
        assert r.ses.read_request_message_id == ses.message_id and r.ses.modified_length == n
        got[r.ses.message_offset : r.ses.message_offset + len(r.data)] = r.data
        a = P.ACK.encode(P.ACK.make(next_hdr=P.NextHeader.NONE, cack_psn=r.pds.psn, spdcid=MY_PDC, dpdcid=target_pdc))
        returned += [x for x in _feed(core, a, now) if x.ptype == P.PdsType.RUD_REQ]
        if not returned and len(seen) < 3:  # a coalesced or paced sender: its timer brings the rest
            t = core.get_timer()
            if t is not None:
                now = max(now, t)
                core.handle_timer(now)
                returned += [decode_reply(d.data) for d in core.datagrams_to_send(now)]
                returned = [x for x in returned if x.ptype == P.PdsType.RUD_REQ]
    assert [r.pds.psn for r in seen] == [seen[0].pds.psn + i for i in range(3)]
    assert [r.ses.message_offset for r in seen] == [0, PAYLOAD, 2 * PAYLOAD]
    assert bytes(got) == bytes(mem[5 : 5 + n])
