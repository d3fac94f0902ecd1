"""The tester as the target (and the network) of the implementation's sending side.

An initiator-side case drives the implementation under test through its agent
(:mod:`uet.conformance.driver`): :class:`Iut` opens a destination naming the tester's own address,
starts operations toward it, reads the requests and control packets the implementation sends,
and answers them as a target would — or as a network that loses, trims or delays them would:
it ACKs (plain or ACK_CC with a SACK bitmap and MPR), NACKs with any code, withholds ACKs,
sends CLEAR_REQ / CLOSE_REQ / REQ_CLOSE. The case then judges the packets and the completions.

Before and after the case :meth:`Iut.finish` asks the agent to close its PDCs toward the tester and answers
whatever the implementation still sends (each request and CLOSE acknowledged) until that close
completes, so each case starts from no PDC.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from uet.conformance.driver import DriverError
from uet.conformance.session import CheckFailed, Session, Skipped
from uet.conformance.wirekit import M32, Reply, decode_reply
from uet.wire import pds as P
from uet.wire import ses as S

__all__ = ["NO_AGENT", "Iut", "REQUEST_TYPES"]

REQUEST_TYPES = (P.PdsType.RUD_REQ, P.PdsType.ROD_REQ, P.PdsType.RUD_CC_REQ, P.PdsType.ROD_CC_REQ)
NO_AGENT = "no agent: the initiator-side cases drive the implementation through its agent (--agent ADDR)"
#: how long a case waits for an implementation to give up a packet it retransmits (retry budget)
RETRY_BUDGET_S = 30.0


def _at_psn(psn: int) -> Callable[[Reply], bool]:
    """A predicate: a request carrying a SES header at PSN ``psn``."""
    return lambda r: r.ses is not None and r.pds.psn == psn


def _s16(v: int) -> int:
    v &= 0xFFFF
    return v - 0x10000 if v & 0x8000 else v


class Iut:
    """The implementation under test's sending side, seen from the tester playing its target."""

    def __init__(self, s: Session, *, mode: str = "rud") -> None:
        d = s.driver
        if d is None:
            raise Skipped(NO_AGENT)
        self.s = s
        self.d = d
        self.d.log.clear()
        t = s.target
        try:
            ans = self.d.call("open", timeout=max(s.timeout, 5.0), address=s.local, job=t.job, pid=t.pid, ri=t.ri,
                              mode=mode)  # fmt: skip
        except DriverError as e:
            raise CheckFailed("the agent answers 'open'", str(e)) from None
        if ans.get("rc") != "OK" or not isinstance(ans.get("handle"), int):
            raise CheckFailed("the agent opens a destination ('open' answered rc OK with a handle)", json.dumps(ans))
        self.h = ans["handle"]
        #: the implementation's PDCIDs seen in this case → the tester's PDCID for each
        self.ours: dict[int, int] = {}
        #: RUDI / UUD requests (no PDC) count as the implementation's: only a case that opened one
        self.datagram_modes = mode in ("rudi", "uud")
        #: TSS on: the implementation's PDCs are secure (:meth:`message`)
        self.secure = s.target.keys is not None
        #: :meth:`message` acknowledged the first packet of a secure SYN flight
        self.held_first = False
        # start from no PDC toward the tester: the implementation may hold one from an earlier
        # case (a target initiates one for DEFERRABLE_RTR or return data)
        self.finish()
        self.ours.clear()
        s.drain()
        s.cleanups.append(self.finish)

    # -- commands ----------------------------------------------------------------------------------

    def start(self, op: str, **args: Any) -> int:
        """Start an operation toward the tester; returns the command id."""
        try:
            return self.d.command(op, handle=self.h, **args)
        except DriverError as e:
            raise CheckFailed(f"the agent takes the command {op!r}", str(e)) from None

    def send(self, data: bytes, **args: Any) -> int:
        return self.start("send", data=data.hex(), **args)

    def sent(self, data: bytes) -> tuple[int, Reply]:
        """Start a SEND of ``data`` and read its (first) request: (command id, request)."""
        cid = self.send(data)
        return cid, self.request("the SEND's request")

    def completion(self, cid: int, what: str, timeout: float | None = None) -> dict[str, Any]:
        """The agent's answer to command ``cid`` (fails the case when none comes in time)."""
        t = self.s.timeout if timeout is None else timeout
        try:
            ans = self.d.result(cid, t)
        except DriverError as e:
            raise CheckFailed(f"the completion of {what}", str(e)) from None
        if ans is None:
            raise CheckFailed(f"the completion of {what} within {t:g} s", "no answer from the agent")
        return ans

    def expect_ok(self, cid: int, what: str) -> dict[str, Any]:
        ans = self.completion(cid, what)
        if ans.get("rc") != "OK":
            raise CheckFailed(f"{what} completes with rc OK", json.dumps(ans))
        return ans

    def not_completed(self, cid: int, what: str) -> None:
        """Command ``cid`` has not completed yet (its answer has not arrived)."""
        try:
            ans = self.d.poll(cid)
        except DriverError as e:
            raise CheckFailed(what, str(e)) from None
        if ans is not None:
            raise CheckFailed(what, f"the agent already answered: {json.dumps(ans)}")

    # -- packets from the implementation ----------------------------------------------------------

    def from_iut(self, r: Reply) -> bool:
        """A request or control packet of one of the implementation's initiator PDCs toward us:
        one already seen in this case, or a SYN opening a new one (not return data of a READ or
        a DEFERRABLE_RTR, which a target-role PDC of an earlier case may still send)."""
        if r.pds is None:
            return False
        if r.ptype in (P.PdsType.RUDI_REQ, P.PdsType.UUD_REQ):
            return self.datagram_modes
        if r.ptype == P.PdsType.CONTROL:
            return r.pds.spdcid in self.ours or bool(r.flags & P.ReqFlag.SYN)
        if r.ptype not in REQUEST_TYPES:
            return False
        if r.pds.spdcid in self.ours:
            return True
        if not r.flags & P.ReqFlag.SYN or r.ses is None:
            return False
        return (
            getattr(r.pds, "next_hdr", 0) != P.NextHeader.RESPONSE_DATA and r.ses.opcode != S.SesOpcode.DEFERRABLE_RTR
        )

    def packet(self, what: str, pred: Callable[[Reply], object] | None = None, timeout: float | None = None) -> Reply:
        """The next packet from the implementation matching ``pred``."""
        r = self.s.expect(lambda r: self.from_iut(r) and (pred is None or pred(r)), what, timeout)
        if hasattr(r.pds, "spdcid"):  # a PDC's packet (RUDI and UUD have none)
            self.me(r)
        return r

    def request(self, what: str = "a request from the implementation", pred: Callable[[Reply], object] | None = None,
                timeout: float | None = None) -> Reply:  # fmt: skip
        return self.packet(what, lambda r: r.ptype in REQUEST_TYPES and (pred is None or pred(r)), timeout)

    def message(self, what: str) -> list[Reply]:
        """Every packet of the next message, its first (SOM) to its last (EOM), new PSNs only.
        A secure initiator may send one packet of a new PDC's first flight and wait for the
        target's answer (a RANDOM_1RTT_START target refuses the flight, §2.3.2 is silent on its
        size): with keys the first packet of a SYN flight is acknowledged at once (no SES
        response), so the rest follows; :attr:`held_first` then says so."""
        first = self.request(f"the first packet of {what}", lambda r: r.ses is not None and r.ses.flags & S.SesFlag.SOM)
        self.held_first = self.secure and bool(first.flags & P.ReqFlag.SYN) and not first.ses.flags & S.SesFlag.EOM
        if self.held_first:
            self.ack(first, ses=False)
        pkts = [first]
        while not pkts[-1].ses.flags & S.SesFlag.EOM:
            last = pkts[-1].pds.psn
            pkts.append(self.request(f"packet {len(pkts) + 1} of {what}", _at_psn((last + 1) & M32)))
        return pkts

    def same_pdc(self, first: Reply, r: Reply) -> None:
        """Skip the case when request ``r`` opened a new PDC because the implementation closed
        ``first``'s PDC as idle in between (its CLOSE came first): its idle timer ran out while the
        tester paused between two commands (a loaded machine), so nothing about reusing the PDC
        can be judged. A new PDC with no CLOSE before it is the case's to judge."""
        if r.pds.spdcid == first.pds.spdcid:
            return
        for d, b in self.s.log:
            x = decode_reply(b) if d == "received" else None
            if x is not None and x.ptype == P.PdsType.CONTROL and x.pds is not None and x.error is None:
                if x.pds.ctl_type == P.ControlType.CLOSE and x.pds.spdcid == first.pds.spdcid:
                    raise Skipped("the implementation closed the idle PDC before the next message (its idle timer "
                                  "ran out while the tester paused): rerun on a less loaded machine")  # fmt: skip

    def control(
        self, ctype: int, what: str, timeout: float | None = None, pred: Callable[[Reply], object] | None = None
    ) -> Reply:
        """The next control packet of type ``ctype`` (and matching ``pred``) from the implementation."""

        def match(r: Reply) -> bool:
            return r.ptype == P.PdsType.CONTROL and r.pds.ctl_type == ctype and (pred is None or bool(pred(r)))

        return self.packet(what, match, timeout)

    # -- answers ---------------------------------------------------------------------------------

    def me(self, r: Reply) -> int:
        """The tester's PDCID on ``r``'s PDC: the one a non-SYN packet names as DPDCID, else a new one."""
        v = self.ours.get(r.pds.spdcid)
        if v is None:
            named = 0 if r.flags & P.ReqFlag.SYN else getattr(r.pds, "dpdcid", 0)
            v = self.ours[r.pds.spdcid] = named or self.s.new_pdcid()
        return v

    def response(self, r: Reply, *, rc: int = S.ReturnCode.OK, data: bytes | None = None,
                 modified: int | None = None) -> tuple[int, bytes]:  # fmt: skip
        """(next_hdr, SES response) answering request ``r``: DEFAULT_RESPONSE for success, RESPONSE
        for an error, RESPONSE_WITH_DATA carrying ``data`` (behaviour.md §6.9 target rules)."""
        h = r.ses
        mid, job = getattr(h, "message_id", 0), getattr(h, "job_id", self.s.target.job)
        length = getattr(h, "request_length", 0) or 0
        if data is not None:
            n = len(data) if modified is None else modified
            hdr = S.RESPONSE_DATA.make(message_id=mid, job_id=job, read_request_message_id=mid,
                                       payload_length=len(data), modified_length=n, message_offset=0)  # fmt: skip
            return P.NextHeader.RESPONSE_DATA, S.RESPONSE_DATA.encode(hdr) + data
        op = (
            S.ResponseOpcode.DEFAULT_RESPONSE
            if rc in (S.ReturnCode.OK, S.ReturnCode.NULL)
            else S.ResponseOpcode.RESPONSE
        )
        n = (length if rc == S.ReturnCode.OK else 0) if modified is None else modified
        hdr = S.RESPONSE.make(opcode=op, return_code=rc, message_id=mid, job_id=job, modified_length=n)
        return P.NextHeader.RESPONSE, S.RESPONSE.encode(hdr)

    def ack(self, r: Reply, *, cack: int | None = None, psn: int | None = None, flags: int = 0, ses: bool = True,
            rc: int = S.ReturnCode.OK, data: bytes | None = None, modified: int | None = None,
            cc: dict[str, int] | None = None, spdcid: int | None = None) -> None:  # fmt: skip
        """ACK naming ``psn`` (default: ``r``'s) with CACK ``cack`` (default: that PSN), carrying a SES
        response to ``r`` unless ``ses`` is False (or ``r`` is a control packet). ``cc`` makes it an
        ACK_CC (NSCC state) with those fields (``mpr``, ``sack_psn_offset``, ``sack_bitmap``...)."""
        psn = r.pds.psn if psn is None else psn & M32
        cack = psn if cack is None else cack & M32
        nh, body = (0, b"")
        if ses and r.ptype != P.PdsType.CONTROL and r.ses is not None:
            nh, body = self.response(r, rc=rc, data=data, modified=modified)
        me = self.me(r) if spdcid is None else spdcid
        f = dict(next_hdr=nh, flags=flags, ack_psn_offset=_s16(psn - cack), cack_psn=cack, spdcid=me,
                 dpdcid=r.pds.spdcid)  # fmt: skip
        if cc is None:
            self.s.send(P.ACK.encode(P.ACK.make(**f)) + body)
        else:
            lay = P.ACK_CC[(False, "nscc")]
            self.s.send(lay.encode(lay.make(**f, **cc)) + body)

    def rudi_response(self, r: Reply, *, pkt_id: int | None = None) -> None:
        """A RUDI response to RUDI request ``r`` echoing its packet id (or ``pkt_id``), success (§2.14)."""
        nh, body = self.response(r)
        pid = r.pds.pkt_id if pkt_id is None else pkt_id & M32
        hdr = P.RUDI.make(type=P.PdsType.RUDI_RESP, next_hdr=nh, flags=0, pkt_id=pid)
        self.s.send(P.RUDI.encode(hdr) + body)

    def nack(self, r: Reply, code: int, *, psn: int | None = None, payload: int = 0, flags: int = 0) -> None:
        """NACK ``code`` naming ``psn`` (default: ``r``'s) on ``r``'s PDC."""
        n = P.NACK.make(nack_code=code, nack_psn=r.pds.psn if psn is None else psn & M32, spdcid=self.me(r),
                        dpdcid=r.pds.spdcid, payload=payload & M32, flags=flags)  # fmt: skip
        self.s.send(P.NACK.encode(n))

    def send_control(self, r: Reply, ctype: int, *, psn: int = 0, payload: int = 0, flags: int = 0) -> None:
        """A control packet of the tester's side of ``r``'s PDC."""
        c = P.CONTROL.make(ctl_type=ctype, flags=flags, psn=psn & M32, spdcid=self.me(r), dpdcid=r.pds.spdcid,
                           payload=payload & M32)  # fmt: skip
        self.s.send(P.CONTROL.encode(c))

    # -- waiting on both ---------------------------------------------------------------------------

    def serve(
        self, cid: int, budget: float, on_packet: Callable[[Reply], None], pred: Callable[[Reply], object] | None = None
    ) -> dict[str, Any] | None:
        """Hand every packet from the implementation (matching ``pred``, default :meth:`from_iut`) to
        ``on_packet`` until command ``cid`` completes (its answer is returned) or ``budget`` seconds
        pass (None)."""
        deadline = time.monotonic() + budget
        match = self.from_iut if pred is None else pred
        while time.monotonic() < deadline:
            ans = self.d.poll(cid)
            if ans is not None:
                return ans
            try:
                r = self.s.expect(match, "anything", timeout=0.01)
            except CheckFailed:
                continue
            on_packet(r)
        return self.d.poll(cid)

    def answer_all(self, r: Reply) -> None:
        """What a healthy target says: every request and every CLOSE / ACK_REQ acknowledged."""
        if r.ptype in REQUEST_TYPES:
            self.ack(r)
        elif r.ptype == P.PdsType.CONTROL and r.pds.ctl_type in (P.ControlType.CLOSE, P.ControlType.ACK_REQ):
            self.ack(r, ses=False)

    def finish(self) -> None:
        """After the case: close the implementation's PDCs toward the tester (module docstring)."""

        def closing(r: Reply) -> bool:  # also a CLOSE of a PDC an earlier case left
            return self.from_iut(r) or r.ptype == P.PdsType.CONTROL and r.pds.ctl_type == P.ControlType.CLOSE

        try:
            cid = self.d.command("close", handle=self.h)
            self.serve(cid, max(self.s.timeout, 3.0), self.answer_all, closing)
        except (DriverError, CheckFailed):
            pass
