"""The order of one flush (``datagrams_to_send``): the first packet the pump sends leaves before
the coalesced ACKs queued ahead of it (uet.pds.core ``datagrams_to_send``), so the reply of a
request/response exchange is not sent behind the ACK of the request (issue 17 item 6: sent
first, the ACK woke the peer for itself alone and the reply needed a second wake-up)."""

from __future__ import annotations

from uet.fep import FepConfig, FepCore, MessageReceived
from uet.wire.chain import parse_uet
from uet.wire.pds import PdsType

A, B = "10.0.0.1", "10.0.0.2"


def _types(out: list[tuple[bytes, str, int]]) -> list[int]:
    return [d[0] >> 3 for d, _dst, _e in out]


def _ping(cfg: FepConfig, reply: bytes) -> tuple[FepCore, list[tuple[bytes, str, int]], int]:
    """A pings B (64 bytes), B answers with ``reply``; B's flush and the ping's PSN."""
    a = FepCore(A, job=1, pid=1, config=cfg, seed=1)
    b = FepCore(B, job=1, pid=1, config=cfg, seed=2)
    rb = b.post_recv(None)
    for i in range(2):  # the second round runs on the established PDCs (no SYN)
        a.tick(1000 + i * 100_000)
        a.send(B, bytes(64))
        a.post_recv(None)
        ping = a.datagrams_to_send_packed(a.now)
        now = a.now + 5_000
        b.receive_marked([(d, A, 0) for d, _dst, _e in ping], now)
        evs = []
        while (ev := b.next_event()) is not None:
            evs.append(ev)
        assert any(type(e) is MessageReceived and e.handle == rb for e in evs)
        rb = b.post_recv(None)
        b.send(A, reply)
        out = b.datagrams_to_send_packed(now)
        a.receive_marked([(d, B, 0) for d, _dst, _e in out], now + 5_000)
        while a.next_event() is not None:
            pass
    req = [d for d, _dst, _e in ping if d[0] >> 3 == PdsType.RUD_REQ]
    return b, out, parse_uet(req[0]).sections[0][1].psn


def test_the_reply_leaves_before_the_ack_of_the_ping() -> None:
    b, out, ping_psn = _ping(FepConfig(seed=1), bytes(64))
    assert _types(out) == [PdsType.RUD_REQ, PdsType.ACK_CC]
    ack = parse_uet(out[1][0]).sections[0][1]
    assert (ack.cack_psn + ack.ack_psn_offset) & 0xFFFFFFFF == ping_psn  # it names the ping
    assert parse_uet(out[1][0]).sections[1][1].return_code == 1  # with the ping's SES response (RC_OK)


def test_the_ack_waits_one_datagram_at_most() -> None:
    """A reply of three packets: the first, then the ACK, then the other two."""
    _b, out, _psn = _ping(FepConfig(seed=1, payload_size=1024), bytes(3000))
    assert _types(out) == [PdsType.RUD_REQ, PdsType.ACK_CC, PdsType.RUD_REQ, PdsType.RUD_REQ]
    psns = [parse_uet(out[i][0]).sections[0][1].psn for i in (0, 2, 3)]
    assert psns == [psns[0], (psns[0] + 1) & 0xFFFFFFFF, (psns[0] + 2) & 0xFFFFFFFF]
