"""The tester's side of the wire: one UDP socket, the target's identity, and PDC helpers.

A :class:`Session` sends hand-built datagrams to the target (UDP destination port 4793 or
``--port``, wire-format.md §1.1) from its own Fabric Address bound on the same port — a FEP
answers peers at that port, whatever source port a datagram came from — and reads what comes
back. With a TSS key file every datagram is sealed under the target's secure domain and every
reply opened (behaviour.md §5.5); without one they travel in clear.

Everything sent and received during a case is recorded (:attr:`Session.log`), so a failed check
reports the exact bytes. Replies are matched by what they echo (the tester's PDCID, a PSN, a
packet id), never by arrival order alone, and stray traffic from earlier cases (a CLEAR_REQ, a
CLOSE_REQ from an idle timer) is ignored by the predicates.

With ``link="ip"`` the session talks UET directly over IP protocol ``proto`` (253) instead of UDP
(wire-format.md §1.2, :mod:`uet.link.ip`): a raw socket bound to its address, every datagram sent
behind the 4-byte entropy header (entropy = the target's UDP port number, the value the UDP
session seals with) and every reply read past the IP and entropy headers.

A target that protects unencrypted packets with the CRC-32C trailer (``Target.crc``,
wire-format.md §1.4) gets it on every datagram the tester sends, malformed ones included (so they
still reach its parser); every reply must carry a valid one, or it is logged as ``received (bad
CRC trailer)`` and otherwise ignored (the case then misses the reply it waits for).

**Silence** (a packet that must draw no reply) is checked without waiting for a timeout: the
hostile packet is followed by a *liveness probe* that always draws an answer (a control packet
for a PDC that does not exist: NACK ``INV_DPDCID``, §2.11); the target handles datagrams in
arrival order on loopback, so anything it said about the hostile packet arrives before the
probe's answer.
"""

from __future__ import annotations

import functools
import ipaddress
import random
import select
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from uet.conformance.driver import Driver
from uet.conformance.wirekit import M32, Reply, SesFields, control, decode_reply, request, ses_standard
from uet.wire import crc
from uet.wire import pds as P

__all__ = ["CheckFailed", "Overran", "Pdc", "Session", "Skipped", "Target", "default_local"]

#: control packets a target sends on its own timers about a PDC (behaviour.md §2.7, §2.12), never
#: as the answer to a request (:meth:`Session.earlier_traffic`)
_TIMER_CONTROLS = (P.ControlType.REQ_CLEAR, P.ControlType.REQ_CLOSE, P.ControlType.CLOSE)
_REQUEST_TYPES = (P.PdsType.RUD_REQ, P.PdsType.ROD_REQ, P.PdsType.RUD_CC_REQ, P.PdsType.ROD_CC_REQ)
#: Linux: the kernel stamps each datagram with its arrival time (a struct timespec, CLOCK_REALTIME)
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@ll")


def start_tsc_from_clock(table: Any) -> None:
    """Seed every SD's TSC from the wall clock (:meth:`uet.tss.domain.SecureDomainTable.seed_tsc`,
    behaviour.md §5.6). A key file gives the same key and epoch to every process that loads it; a
    sender whose TSC restarted at 0 would repeat GCM IVs of its previous run and a receiver's
    replay window would drop its packets as replays."""
    table.seed_tsc(time.time_ns())


def default_local(target: str) -> str:
    """An address next to the target: another loopback address, or the host's route to it."""
    ip = ipaddress.ip_address(target)
    if ip.is_loopback and ip.version == 4:
        n = int(ip)
        return str(ipaddress.ip_address(n + 1 if (n & 0xFF) < 250 else n - 1))
    s = socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((target, 9))
        local: str = s.getsockname()[0]
        return local
    finally:
        s.close()


class CheckFailed(AssertionError):  # noqa: N818 - a check's verdict, read as "check failed"
    """A case's expectation was not met: ``expected`` in words (the runner adds the bytes)."""

    def __init__(self, expected: str, got: str = "") -> None:
        super().__init__(expected)
        self.expected = expected
        self.got = got


class Overran(Exception):  # noqa: N818 - a verdict: the case overran its time
    """The case was still waiting when its time ran out (``--case-time`` or the end of
    ``--max-time``, :attr:`Session.case_deadline`): reported as ``timeout``, the run goes on."""


class Skipped(Exception):  # noqa: N818
    """A case's precondition is missing (no keys, no region...): reported as skipped."""


@dataclass
class Region:
    """A memory region of the target, as the tester knows it (from ``--region`` or the peer's identity)."""

    key: int
    size: int
    access: str  # subset of "rwai": read, write, atomic, idempotent-safe
    job: int | None = None  # None: any job


@dataclass
class Receive:
    """A receive the target keeps posted (tagged when ``tag`` is not None)."""

    size: int
    tag: int | None = None
    truncate: bool = False


@dataclass
class Target:
    """What the tester knows of the endpoint under test."""

    address: str
    port: int = 4793
    job: int = 0
    pid: int = 0
    ri: int = 0
    regions: list[Region] = field(default_factory=list)
    receives: list[Receive] = field(default_factory=list)
    keys: Any = None  # a SecureDomainTable, or None
    keys_text: str = ""  # the key file's text (to derive deliberately wrong variants)
    sdi: int | None = None
    agent: str = ""  # its agent's control address (uet.conformance.driver), from the identity line
    crc: bool = False  # every packet carries the CRC-32C trailer (wire-format.md §1.4, ``--data-protect crc``)

    def region(self, need: str, *, job: str = "own") -> Region | None:
        """A region whose rights are exactly ``need`` (letters of "rwai"; "i" optional unless
        asked) restricted to this target's job (``job="own"``), another job (``"other"``) or
        any (``"any"``)."""
        for r in self.regions:
            rights = set(r.access)
            want = set(need)
            if "i" not in want:
                rights.discard("i")
            if rights != want:
                continue
            if job == "own" and r.job not in (None, self.job):
                continue
            if job == "other" and (r.job is None or r.job == self.job):
                continue
            return r
        return None

    def receive(self, *, tagged: bool, truncate: bool = False, max_size: int | None = None) -> Receive | None:
        for r in self.receives:
            if (r.tag is not None) == tagged and r.truncate == truncate:
                if max_size is None or r.size <= max_size:
                    return r
        return None


@dataclass
class _RawPdc:
    """A PDC a case opened with requests sent as bytes, as the case's log tells it
    (:meth:`Session._raw_pdcs`): its Start PSN (the first SYN's PSN − ``psn_offset``), the PSN
    after the newest request sent, its first SYN's PDS type and the PSNs sent (as offsets from
    the Start PSN); from the target's datagrams naming our PDCID (``named``): the target's PDCID
    (an ACK's, else a NACK's) and the newest CACK of its ACKs."""

    start: int
    nxt: int
    ptype: int
    sent: set[int] = field(default_factory=set)
    named: bool = False
    theirs: int = 0
    acked: bool = False
    cack: int | None = None

    @property
    def rod(self) -> bool:
        return self.ptype in (P.PdsType.ROD_REQ, P.PdsType.ROD_CC_REQ)

    def close_psn(self) -> int:
        """The PSN of a CLOSE the target takes (§2.12: a CLOSE follows every PSN): after the newest
        request sent, unless a PSN below it was never sent (a hostile ``psn_offset``): then the
        PSN the target expects next, one after the newest CACK it reported; the Start PSN when
        only a NACK named the PDC (the target refused the SYN, yet holds a PDC for it)."""
        if not self.acked:
            return self.start
        n = (self.nxt - self.start) & M32
        if n <= 4096 and len(self.sent) >= n or self.cack is None:
            return self.nxt
        return (self.cack + 1) & M32


class Session:
    """One socket toward the target (module docstring)."""

    def __init__(
        self,
        target: Target,
        local: str,
        *,
        timeout: float = 1.0,
        seed: int | None = None,
        link: str = "direct",
        proto: int = 253,
    ) -> None:
        self.target = target
        self.local = local
        self.timeout = timeout
        self.rng = random.Random(seed)
        fam = socket.AF_INET6 if ":" in local else socket.AF_INET
        #: the 4-byte entropy header in front of each datagram over IP (module docstring), or None
        self.over_ip: bytes | None = None
        if link == "ip":
            self.sock = socket.socket(fam, socket.SOCK_RAW, proto)
            self.over_ip = (target.port & 0xFFFF).to_bytes(2, "big") + b"\0\0"
        else:
            self.sock = socket.socket(fam, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self.sock.bind((local, 0 if self.over_ip is not None else target.port))
        self.sock.setblocking(False)
        #: the kernel stamps arrivals (:meth:`_recv`)
        self._stamped = False
        if sys.platform.startswith("linux"):
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
                self._stamped = True
            except OSError:  # pragma: no cover - every Linux has it
                pass
        self.log: list[tuple[str, bytes]] = []  # ("sent"|"received", plaintext)
        self._queue: list[Reply] = []
        self._used: set[int] = set()
        #: the packet ids of every RUDI request sent (:meth:`rudi_unsent`), kept across cases
        self._rudi_ids: set[int] = set()
        #: PDCIDs the target named that this session never chose (:meth:`_stray`): never chosen either
        self._foreign: set[int] = set()
        #: the target's own PDCIDs, each it ever named as SPDCID (:meth:`unused_dpdcid` avoids them)
        self._theirs: set[int] = set()
        self.pdcs: list[Pdc] = []
        self.start_floor: int | None = None
        #: monotonic time at which the running case is cut short (:class:`Overran`), or None
        self.case_deadline: float | None = None
        #: the secure target mints Start PSNs itself (RANDOM_1RTT_START, §2.3.2)
        self.one_rtt = False
        #: the implementation's agent (uet.conformance.driver.Driver) for the initiator-side cases
        self.driver: Driver | None = None
        #: what a case asks to run after it (uet.conformance.driver_target), before the PDCs close
        self.cleanups: list[Callable[[], None]] = []
        #: PDCs the target initiated and the tester serves (:meth:`serve`): our PDCID -> (the
        #: target's PDCID, the PSN of a CLOSE_REQ); those the running case served
        self.served: dict[int, tuple[int, int]] = {}
        self._case_served: set[int] = set()
        self._mid = self.rng.randrange(1, 0xFFFF)
        self._ips = (socket.inet_pton(fam, local), socket.inet_pton(fam, target.address))  # (ours, the target's)
        self._tss = None
        if target.keys is not None:
            from uet.tss.context import TssContext

            start_tsc_from_clock(target.keys)
            self._tss = TssContext(target.keys, local)
            if target.sdi is None:
                target.sdi = next(iter(target.keys)).sdi

    def close(self) -> None:
        self.sock.close()

    def cleanup(self) -> None:
        """Close every PDC the case opened (CLOSE CP each, §2.12), so the target frees them now
        rather than after its idle timer (whose CLOSE_REQs would otherwise run into later cases,
        and into later runs against a long-lived target); failures here are not the case's
        verdict. All the case's PDCs close together, then their answers are awaited together:

        * each :class:`Pdc`, and each PDC a raw SYN of the case opened (its ACK named the
          target's PDCID);
        * each raw SYN the target answered with nothing at all (a hostile case's SYN with a
          garbled or missing SES header: the target may hold a PDC for it all the same and cannot
          say so): its request is sent again whole (the same PDS header, a NO_OP), and the PDC
          that ACK names is closed;
        * each PDC the target initiated toward the tester and the tester served (:meth:`serve`):
          a CLOSE_REQ asks the target to close it, and its CLOSE is acknowledged (:meth:`_stray`).

        What stays open is what the target cannot close: a PDC whose CLOSE it refuses because a
        hostile case left a gap in its PSNs (a CLOSE follows every PSN, §2.12). It later asks to
        close it, and :meth:`_stray` answers."""
        cleanups, self.cleanups = self.cleanups, []
        for fn in cleanups:
            fn()
        pdcs, self.pdcs = self.pdcs, []
        closing: dict[int, tuple[int, Pdc | None]] = {}  # our PDCID -> (CLOSE PSN, its Pdc)
        for p in pdcs:
            if p.dpdcid is None:  # a case that read its ACKs itself: learn the target's PDCID from them
                p.dpdcid = self._opened_by_log({p.spdcid: p.next_psn}).get(p.spdcid, (None, 0))[0]
            if p.dpdcid is not None and not p.closed:
                closing[p.spdcid] = (p.send_close(self._first_refused(p.spdcid, p.next_psn)), p)
        learning: dict[int, int] = {}  # our PDCID of an unanswered raw SYN -> its CLOSE PSN
        for mine, raw in self._raw_pdcs({p.spdcid for p in pdcs}).items():
            if raw.theirs:
                psn = self._first_refused(mine, raw.close_psn())
                self.send(control(P.ControlType.CLOSE, psn=psn, spdcid=mine, dpdcid=raw.theirs, flags=P.ReqFlag.AR))
                closing[mine] = (psn, None)
            elif not raw.named:  # the request again, whole, at the Start PSN
                self.send(request(psn=raw.start, spdcid=mine, syn=True, rod=raw.rod) + ses_standard(self.ses(opcode=0)))
                learning[mine] = (raw.start + 1) & M32
        serving, self._case_served = self._case_served, set()
        for mine in serving:
            theirs, psn = self.served[mine]
            self.send(control(P.ControlType.REQ_CLOSE, psn=psn, spdcid=mine, dpdcid=theirs, flags=P.ReqFlag.AR))
        deadline = time.monotonic() + 0.3

        def answer(r: Reply) -> bool:
            dp = getattr(r.pds, "dpdcid", -1)
            if dp in closing:
                return r.is_nack or r.is_ack and r.ack_psn == closing[dp][0]
            if dp in learning:
                return r.is_nack or r.is_ack and bool(r.pds.spdcid)
            if dp in serving:  # its CLOSE (acknowledged as it was read), or a NACK: it was gone
                return r.is_nack or r.is_control and r.pds.ctl_type == P.ControlType.CLOSE
            return False

        while closing or learning or serving:
            try:
                r = self.expect(answer, "the ACKs of the CLOSEs", max(0.0, deadline - time.monotonic()))
            except CheckFailed:
                return
            dp = r.pds.dpdcid
            if dp in closing:
                held_by = closing.pop(dp)[1]
                if held_by is not None:
                    held_by.closing_ack(r)
            elif dp in learning:
                psn = learning.pop(dp)
                if r.is_ack:
                    self.send(control(P.ControlType.CLOSE, psn=psn, spdcid=dp, dpdcid=r.pds.spdcid, flags=P.ReqFlag.AR))
                    closing[dp] = (psn, None)
            else:
                serving.discard(dp)

    def _first_refused(self, ours: int, nxt: int) -> int:
        """The PSN a CLOSE on our PDC ``ours`` takes (§2.12: a CLOSE follows every PSN the target
        received): ``nxt``, the PSN after the newest request sent, unless the target NACKed a
        request after the newest CACK it reported in this case (NAK-003: a ROD request on a RUD
        PDC; EST-021: a SYN with another Start PSN). Nothing from that PSN on was received, and
        a CLOSE after it would be dropped for the gap (the case then waited out the CLOSEs'
        0.3 s and left the PDC to the target's idle timer): the CLOSE takes the lowest such PSN."""
        cack: int | None = None
        refused: list[int] = []
        for d, b in self.log:
            r = decode_reply(b) if d == "received" else None
            if r is None or r.error is not None or r.pds is None or getattr(r.pds, "dpdcid", None) != ours:
                continue
            if r.is_ack and not r.flags & P.AckFlag.P and (cack is None or P.psn_after(r.pds.cack_psn, cack)):
                cack = r.pds.cack_psn
            elif r.is_nack:
                refused.append(r.pds.nack_psn)
        below = [q for q in refused if P.psn_after(nxt, q) and (cack is None or P.psn_after(q, cack))]
        return min(below, key=lambda q: P.psn_diff(q, nxt)) if below else nxt

    def serve(self, mine: int, r: Reply) -> None:
        """The tester answers ``r``, a request on a PDC the target initiated toward it (a
        DEFERRABLE_RTR, a rendezvous READ), as that PDC's target under our PDCID ``mine``. The
        target closes such a PDC itself once it is idle: its CLOSE is acknowledged whenever it
        comes (:meth:`_stray`), and the case's :meth:`cleanup` asks for it at once (CLOSE_REQ,
        §2.12), so that no case, and no run, leaves it open."""
        if mine not in self.served:
            self.served[mine] = (r.pds.spdcid, r.pds.psn)
        self._case_served.add(mine)

    def _raw_pdcs(self, held: set[int]) -> dict[int, _RawPdc]:
        """Our PDCIDs that sent a SYN request as bytes in this case (none of the :class:`Pdc`
        objects in ``held``), each with what the case's log says of its PDC (:class:`_RawPdc`)."""
        out: dict[int, _RawPdc] = {}
        for d, b in self.log:
            r = decode_reply(b)
            if r.pds is None:
                continue
            if d == "sent":
                if r.ptype not in _REQUEST_TYPES or not r.pds.spdcid or r.pds.spdcid in held:  # a bad SES header too
                    continue
                sp, psn = r.pds.spdcid, r.pds.psn
                raw = out.get(sp)
                if raw is None:
                    if not r.flags & P.ReqFlag.SYN:
                        continue
                    raw = out[sp] = _RawPdc((psn - r.pds.psn_offset) & M32, psn, r.ptype)
                raw.sent.add((psn - raw.start) & M32)
                if P.psn_after((psn + 1) & M32, raw.nxt):
                    raw.nxt = (psn + 1) & M32
            elif r.error is None and (raw := out.get(getattr(r.pds, "dpdcid", 0))) is not None:
                raw.named = True
                if r.is_ack and r.pds.spdcid:
                    raw.theirs, raw.acked = r.pds.spdcid, True
                    if raw.cack is None or P.psn_after(r.pds.cack_psn, raw.cack):
                        raw.cack = r.pds.cack_psn
                elif r.is_nack and r.pds.spdcid and not raw.acked:
                    raw.theirs = r.pds.spdcid
        return out

    def _opened_by_log(self, ours: dict[int, int]) -> dict[int, tuple[int, int]]:
        """Of our PDCIDs ``ours`` (→ a CLOSE PSN), those an ACK of the target named in this case's
        log: our PDCID → (the target's PDCID, the CLOSE PSN)."""
        out: dict[int, tuple[int, int]] = {}
        for d, b in self.log:
            r = decode_reply(b) if d == "received" else None
            if r is None or r.error is not None or not r.is_ack or not r.pds.spdcid:
                continue
            mine = getattr(r.pds, "dpdcid", None)
            if mine in ours and mine not in out:
                out[mine] = (r.pds.spdcid, ours[mine])
        return out

    # -- identities ------------------------------------------------------------------------------

    def new_pdcid(self) -> int:
        """A fresh PDCID for a tester PDC (never 0, never reused in this session)."""
        while True:
            v = self.rng.randrange(0x100, 0xFFFF)
            if v not in self._used and v not in self._foreign:
                self._used.add(v)
                return v

    def new_start_psn(self) -> int:
        """A random Start_PSN in [2^16, 2^31) as the reference picks them (§2.3.1).

        Secure PDCs (§2.3.2): an EXPECTED_0RTT_START target demands Start PSNs at or above its
        Expected_PSN for the SDI, which every close raises; a RANDOM_1RTT_START target mints every
        Start PSN itself (NACK ``NEW_START_PSN``). With keys the tester learns which from a first
        PDC: for the first it hands out ascending Start PSNs above the floor it learned (as an
        initiator following ``ini_start_psn`` does), for the second each :class:`Pdc` asks for its
        Start PSN before the case starts (:attr:`one_rtt`)."""
        if self._tss is None:
            return self.rng.randrange(1 << 16, 1 << 31)
        if self.start_floor is None:
            self.start_floor = 1 << 16
            warm = Pdc(self, start=self.start_floor)  # learns the floor from NEW_START_PSN if needed
            warm.open()
            self.one_rtt = warm.restarted
            warm.close()
        v = (self.start_floor + self.rng.randrange(1, 0x1000)) & M32
        self.start_floor = (v + 0x1000) & M32
        return v

    def ses(self, **kw: Any) -> SesFields:
        """SES fields addressed to the target's job / PIDonFEP / resource index, relatively, with a
        message ID never used before in this session (ids are unique among an initiator's
        outstanding messages across all its PDCs, behaviour.md §6.1)."""
        t = self.target
        self._mid = (self._mid + 1) & 0xFFFF or 1
        base: dict[str, Any] = dict(job=t.job, pid=t.pid, ri=t.ri, message_id=self._mid)
        base.update(kw)
        return SesFields(**base)

    # -- raw I/O -----------------------------------------------------------------------------------

    def seal(self, plaintext: bytes, **kw: Any) -> bytes:
        """``plaintext`` sealed under the target's SD (or unchanged without keys)."""
        if self._tss is None:
            return plaintext
        sdi = kw.get("sdi", self.target.sdi)
        assert sdi is not None  # chosen with the keys (Session.__init__)
        return self._tss.seal(plaintext, sdi=sdi, entropy=self.target.port, dst=self.target.address)

    def trailer_prefix(self, *, outgoing: bool, uet_len: int, sport: int = 0, ehdr: bytes = b"") -> bytes:
        """The bytes the CRC-32C trailer covers in front of the UET bytes (:mod:`uet.wire.crc`):
        both addresses, then the UDP header (ours: from and to the target's port; the target's:
        from ``sport``) or, over IP, the entropy header (ours, or the target's ``ehdr``)."""
        src, dst = self._ips if outgoing else self._ips[::-1]
        port = self.target.port
        if self.over_ip is not None:
            return crc.entropy_prefix(src, dst, self.over_ip if outgoing else ehdr)
        return crc.udp_prefix(src, dst, port if outgoing else sport, port, uet_len)

    def send_raw(self, wire: bytes, note: bytes | None = None, *, trailer: bool = True) -> None:
        """Send ``wire`` as is (already sealed, or deliberately malformed); to a CRC-trailer
        target with its trailer (a malformed packet still reaches the parser) unless ``trailer``
        is False (the case built the datagram's last 4 bytes itself)."""
        plain = note if note is not None else wire
        self.log.append(("sent", plain))
        if len(plain) >= 8 and plain[0] >> 3 == P.PdsType.RUDI_REQ:
            self._rudi_ids.add(int.from_bytes(plain[4:8], "big"))
        if self.target.crc and trailer:
            wire = crc.append_trailer(wire, self.trailer_prefix(outgoing=True, uet_len=len(wire)))
        if self.over_ip is not None:
            self.sock.sendto(self.over_ip + wire, (self.target.address, 0))
            return
        self.sock.sendto(wire, (self.target.address, self.target.port))

    def send(self, plaintext: bytes, *, ecn: int = 0, dscp: int = 0, trailer: bool = True) -> bytes:
        """Seal (with keys) and send; returns the bytes that went on the wire. ``ecn`` sets the
        IP ECN field of this datagram (3 = CE, as a congested switch would have marked it),
        ``dscp`` its DSCP (a trimming switch's mark, behaviour.md §3.2); ``trailer`` False sends
        it without the CRC-32C trailer (a trimmed packet lost it)."""
        wire = self.seal(plaintext)
        tos = (dscp & 0x3F) << 2 | ecn & 3
        if tos:
            level, opt = (socket.IPPROTO_IPV6, socket.IPV6_TCLASS) if ":" in self.local else (
                socket.IPPROTO_IP, socket.IP_TOS)  # fmt: skip
            self.sock.setsockopt(level, opt, tos)
            try:
                self.send_raw(wire, plaintext, trailer=trailer)
            finally:
                self.sock.setsockopt(level, opt, 0)
        else:
            self.send_raw(wire, plaintext, trailer=trailer)
        return wire

    def send_burst(self, plaintexts: list[bytes]) -> None:
        """Send datagrams back to back, all sealed first: they leave as close together as the
        socket allows, as one burst of a sender would (a target coalesces ACKs over what arrives
        together, behaviour.md §2.8; a tester sealing between sends spreads them on a loaded host)."""
        for wire, pt in [(self.seal(pt), pt) for pt in plaintexts]:
            self.send_raw(wire, pt)

    def _read(self, deadline: float) -> bool:
        """Read one datagram from the target into the queue; False on timeout. Raises
        :class:`Overran` once the case's own deadline (:attr:`case_deadline`) has passed."""
        cut = self.case_deadline
        while True:
            now = time.monotonic()
            if cut is not None and now >= cut:
                raise Overran("the case was still waiting for the target when its time ran out")
            left = (deadline if cut is None else min(deadline, cut)) - now
            if left <= 0:
                return False
            r, _, _ = select.select([self.sock], [], [], left)
            if not r:
                continue  # the wait or the case's time is up: decided at the top
            try:
                data, src, arrived = self._recv()
            except BlockingIOError:
                continue
            if self._take(data, src, arrived):
                return True

    def _recv(self) -> tuple[bytes, Any, float]:
        """One datagram from the socket (BlockingIOError when none waits) and when it arrived, on
        the monotonic clock: the kernel's arrival stamp where it gives one, else now. A time taken
        as the tester reads moves by however long the tester waited for a CPU first: INI-037 judges
        an implementation's back-off on the intervals between its retransmissions, and a tester
        stalled 0.35 s once read three of them in a burst (intervals 52, 393, 0, 0, 36, 104 ms:
        the case failed); stamped by the kernel they are the intervals on the wire."""
        if not self._stamped:
            data, src = self.sock.recvfrom(65536)
            return data, src, time.monotonic()
        data, ancillary, _flags, src = self.sock.recvmsg(65536, socket.CMSG_SPACE(_TIMESPEC.size))
        now = time.monotonic()
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(raw) >= _TIMESPEC.size:
                sec, nsec = _TIMESPEC.unpack_from(raw)
                return data, src, now - max(0.0, time.time() - (sec + nsec / 1e9))
        return data, src, now

    def _take(self, data: bytes, src: Any, arrived: float | None = None) -> bool:
        """One datagram read from the socket: past the IP / entropy header and the CRC trailer,
        opened with keys, logged, decoded and queued (True); False when it is not the target's
        or does not open."""
        if src[0] != self.target.address:
            return False
        entropy, ehdr = self.target.port, b""
        if self.over_ip is not None:  # past the IPv4 header (IPv6 raw sockets strip theirs)
            if ":" not in self.local:
                data = data[(data[0] & 0x0F) * 4 :]
            if len(data) < 4:
                return False
            ehdr, data = data[:4], data[4:]
            entropy = int.from_bytes(ehdr[:2], "big")
        if self.target.crc:
            n = len(data) - crc.TRAILER_LEN
            pre = self.trailer_prefix(outgoing=False, uet_len=n, sport=src[1], ehdr=ehdr)
            body = crc.check_trailer(data, pre)
            if body is None:
                self.log.append(("received (bad CRC trailer)", data))
                return False
            data = body
        if self._tss is not None:
            pt = self._tss.open(data, entropy=entropy, src=self.target.address)
            if pt is None:
                self.log.append(("received (failed to open)", data))
                return False
            data = pt
        self.log.append(("received", data))
        reply = decode_reply(data)
        reply.at = time.monotonic() if arrived is None else arrived
        self._stray(reply)
        self._queue.append(reply)
        return True

    def _read_waiting(self, limit: int = 4096) -> None:
        """Read, without waiting, what already waits in the socket (at most ``limit`` datagrams,
        so a target that never stops sending cannot hold the tester here) into the queue."""
        for _ in range(limit):
            try:
                data, src, arrived = self._recv()
            except BlockingIOError:
                return
            self._take(data, src, arrived)

    def drain(self) -> None:
        """Forget every datagram already received or waiting in the socket (each still goes
        through :meth:`_stray`: a CLOSE_REQ of a PDC no case holds is answered, not lost)."""
        while True:
            try:
                data, src, arrived = self._recv()
            except BlockingIOError:
                break
            self._take(data, src, arrived)
        self._queue.clear()

    def _stray(self, r: Reply) -> None:
        """Deal with what the target says about PDCs the tester no longer holds, whatever case runs.

        * A PDCID it names that this session never chose (a PDC of an earlier run of the tester
          against the same long-lived target, or one whose SYN a hostile case garbled) is never
          chosen for a new PDC: its SYN would land on the target's stale PDC (behaviour.md §1.4,
          a SYN is looked up by the sender's PDCID).
        * A CLOSE_REQ (§2.12) for a PDC that no :class:`Pdc` of the running case holds is answered
          as any endpoint answers a control packet for a PDC it does not know: NACK ``INV_DPDCID``
          (§2.11, SPDCID 0, §1.4), a PDC-fatal code (§2.10), so the target frees its half at once
          instead of retransmitting the CLOSE_REQ into later cases (and later runs) until its
          retry budget is spent. A case that judges the target's own close (NAK-015) holds its
          PDC, so its CLOSE_REQ reaches it unanswered.
        * A CLOSE of a PDC the target initiated and the tester serves (:meth:`serve`) is
          acknowledged, as its target would (§2.12), whenever it comes."""
        if r.error is not None or r.pds is None:
            return
        if sp := getattr(r.pds, "spdcid", 0):
            self._theirs.add(sp)
        dp = getattr(r.pds, "dpdcid", None)
        if not dp:
            return
        if dp not in self._used:
            self._foreign.add(dp)
        if r.is_control and r.pds.ctl_type == P.ControlType.CLOSE and dp in self.served:
            self.send(P.ACK.encode(P.ACK.make(cack_psn=r.pds.psn, spdcid=dp, dpdcid=r.pds.spdcid)))
            return
        if not (r.is_control and r.pds.ctl_type == P.ControlType.REQ_CLOSE) or any(p.spdcid == dp for p in self.pdcs):
            return
        nack = P.NACK.make(nack_code=P.NackCode.INV_DPDCID, nack_psn=r.pds.psn, spdcid=0, dpdcid=r.pds.spdcid)
        self.send(P.NACK.encode(nack))

    def expect(
        self,
        pred: Callable[[Reply], object],
        what: str,
        timeout: float | None = None,
        refute: Callable[[Reply], str | None] | None = None,
    ) -> Reply:
        """The first reply matching ``pred`` (consumed), or :class:`CheckFailed` saying ``what``.

        ``refute``: a reply for which it returns a reason is the target's answer, and a wrong one
        (an ACK naming a PSN the PDC never sent, :meth:`Pdc.names_unsent`; a RUDI response to a
        packet id never sent, :meth:`rudi_unsent`): the case fails at once with it rather than
        waiting out ``timeout`` for an answer that cannot come any more. A reply matching
        ``pred`` still wins, whenever it arrived."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        over = False
        while True:
            for i, r in enumerate(self._queue):
                if r.error is None and pred(r):
                    return self._queue.pop(i)
            wrong = [(r, why) for r in self._queue if refute is not None and r.error is None and (why := refute(r))]
            if wrong:
                raise CheckFailed(what, f"{wrong[0][0].describe()} ({wrong[0][1]})")
            if over:
                raise CheckFailed(f"expected {what}; nothing matching arrived within {wait:.1f} s")
            if not self._read(deadline):
                # the wait is over, but what already waits in the socket was received in time: a
                # tester descheduled past its deadline (a loaded machine) finds its answer there
                self._read_waiting()
                over = True

    def rudi_unsent(self, r: Reply) -> str | None:
        """Why ``r`` is a RUDI response to a packet id this session never sent in a RUDI request
        (None when it is not): no later reply can be the answer such a response stood for."""
        if r.ptype == P.PdsType.RUDI_RESP and r.pds.pkt_id not in self._rudi_ids:
            return f"a response to packet id {r.pds.pkt_id:#x}, which was never sent"
        return None

    def collect(
        self, pred: Callable[[Reply], object], until: Callable[[Reply], object], what: str, timeout: float | None = None
    ) -> list[Reply]:
        """Every reply matching ``pred`` received before one matching ``until`` (the latter consumed too)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        got: list[Reply] = []
        over = False
        while True:
            for i, r in enumerate(list(self._queue)):
                if r.error is None and until(r):
                    self._queue.pop(i)
                    return got + [r for r in self._queue[:i] if r.error is None and pred(r)]
            for r in list(self._queue):
                if r.error is None and pred(r):
                    got.append(r)
            self._queue = [r for r in self._queue if not (r.error is None and pred(r))]
            if over:
                raise CheckFailed(f"expected {what}; the liveness probe went unanswered")
            if not self._read(deadline):
                self._read_waiting()  # as in expect: what waits in the socket was received in time
                over = True

    def probe_liveness(self) -> int:
        """Send a liveness probe (a PROBE for a PDC that does not exist) and return its nonce
        (the SPDCID the NACK must echo as its DPDCID)."""
        nonce = self.new_pdcid()
        self.send(control(P.ControlType.NOOP, psn=0x4C495645, spdcid=nonce, dpdcid=self.unused_dpdcid()))
        return nonce

    def unused_dpdcid(self) -> int:
        """A DPDCID the target has almost surely not assigned: in the top of the 16-bit space, and
        none it ever named (:attr:`_theirs`). A target that picks its PDCIDs at random (§1.3) may
        hold a live PDC up there; a control packet for it with our fresh SPDCID would draw
        ``PDC_HDR_MISMATCH``, not the ``INV_DPDCID`` a case about an unknown PDC expects (CTL-023
        failed so, once in a whole run against uet-peer)."""
        v = 0xFFFF - self.rng.randrange(0, 64)
        if v in self._theirs:
            free = sorted(set(range(0xFFFF - 1023, 0x10000)) - self._theirs)
            v = free[-1 - self.rng.randrange(min(64, len(free)))] if free else v
        return v

    def replies_before_probe(self, pred: Callable[[Reply], object], timeout: float | None = None) -> list[Reply]:
        """Send a liveness probe; return the replies matching ``pred`` that arrived before its answer."""
        nonce = self.probe_liveness()
        return self.collect(
            pred,
            lambda r: r.is_nack and r.pds.dpdcid == nonce,
            "the liveness probe's answer (NACK INV_DPDCID for an unknown PDC, §2.11)",
            timeout,
        )

    def serve_read_return(self, pdc: Pdc, message_id: int, length: int) -> list[Reply]:
        """Receive the data of a READ that returns it in the return direction (behaviour.md §6.5:
        more than ``Max_ACK_Data_Size``): the target sends it as requests with a RESPONSE_DATA
        header naming ``message_id``, in the return direction of the PDC the READ went on (§1.4:
        SPDCID = the target's PDCID of ``pdc``, DPDCID = ours, no SYN — the PDC exists). Each is
        acknowledged like any request (an ACK with a DEFAULT_RESPONSE OK, SPDCID = ours); the
        bytes are assembled by message offset until ``length`` arrived. Returns the packets in
        arrival order (their data in ``Reply.data``); a packet on another PDC, one beyond
        ``length`` or one repeating bytes already received fails the case."""
        from uet.wire import ses as S

        got: list[Reply] = []
        have: set[int] = set()

        def returned(r: Reply) -> bool:
            return (
                r.ptype in (P.PdsType.RUD_REQ, P.PdsType.ROD_REQ) and r.ses is not None
                and getattr(r.ses, "read_request_message_id", None) == message_id
            )  # fmt: skip

        while len(have) < length:
            what = f"return data of READ message {message_id:#x} ({len(have)} of {length} bytes so far)"
            r = self.expect(returned, what)
            h = r.ses
            on_pdc = getattr(r.pds, "dpdcid", None) == pdc.spdcid and r.pds.spdcid == pdc.dpdcid
            if not on_pdc or r.flags & P.ReqFlag.SYN:
                raise CheckFailed(
                    f"return data on the READ's own PDC (SPDCID {pdc.dpdcid}, DPDCID {pdc.spdcid}, no SYN, §1.4)",
                    r.describe(),
                )
            span = range(h.message_offset, h.message_offset + len(r.data))
            if span.stop > length or have.intersection(span) and not r.flags & P.ReqFlag.RETX:
                raise CheckFailed(f"return data within the {length} bytes read, each byte once", r.describe())
            have.update(span)
            got.append(r)
            resp = S.RESPONSE.encode(S.RESPONSE.make(opcode=S.ResponseOpcode.DEFAULT_RESPONSE, message_id=h.message_id,
                                                     job_id=h.job_id, modified_length=len(r.data)))  # fmt: skip
            ack = P.ACK.make(next_hdr=P.NextHeader.RESPONSE, cack_psn=r.pds.psn, spdcid=pdc.spdcid,
                             dpdcid=r.pds.spdcid)  # fmt: skip
            self.send(P.ACK.encode(ack) + resp)
        return got

    def earlier_traffic(self, r: Reply) -> bool:
        """``r`` belongs to another exchange, not to what the current case just sent: it is
        addressed to a PDC (or liveness probe) of the tester's (a late ACK, a retransmitted NACK),
        it is a request of a PDC the target itself initiated, or it is what a target sends on its
        own timers about a PDC it holds, whoever's: a CLEAR_REQ, a CLOSE_REQ, a CLOSE, or the NACK
        ``CLOSING_IN_ERR`` that ends an unanswered CLOSE_REQ (§2.7, §2.12; never the answer to a
        request, so also not when its PDC was left by an earlier run of the tester against a
        long-lived target). A case that judges "no reply at all" (UUD, behaviour.md §2.15)
        ignores these."""
        if r.pds is None:
            return False
        if r.ptype in (P.PdsType.RUD_REQ, P.PdsType.ROD_REQ, P.PdsType.RUD_CC_REQ, P.PdsType.ROD_CC_REQ):
            return True
        if r.is_control and r.pds.ctl_type in _TIMER_CONTROLS:
            return True
        if r.is_nack and r.pds.nack_code == P.NackCode.CLOSING_IN_ERR:
            return True
        return getattr(r.pds, "dpdcid", None) in self._used

    def assert_alive(self, timeout: float | None = None) -> None:
        """The target still answers (raises :class:`CheckFailed` otherwise) within ``timeout``
        (default ``--timeout``; a case that just sent a burst gives the target longer to work
        through its backlog: slowness is not what it judges)."""
        self.replies_before_probe(lambda r: False, timeout)

    def assert_silent(self, pred: Callable[[Reply], object], what: str) -> None:
        """Nothing matching ``pred`` came back before the liveness probe's answer."""
        got = self.replies_before_probe(pred)
        if got:
            raise CheckFailed(what, got[0].describe())


class Pdc:
    """A tester-side initiator PDC (RUD or ROD): PSNs, SYN until the first ACK, the DPDCID learned.

    Follows the initiator rules of behaviour.md §2.2/§2.5: Start_PSN random, ``syn`` and
    ``psn_offset`` on every packet until an ACK names the target's PDCID, ``clear_psn_offset``
    naming the newest PSN below which everything was acknowledged (``clear_psn``)."""

    def __init__(self, s: Session, *, rod: bool = False, start: int | None = None) -> None:
        self.s = s
        self.rod = rod
        self.spdcid = s.new_pdcid()
        self.start = s.new_start_psn() if start is None else start & M32
        self.next_psn = self.start
        self.dpdcid: int | None = None
        self.clear_psn = (self.start - 1) & M32
        self.closed = False
        self.restarted = False  # a NACK NEW_START_PSN moved the Start PSN (§2.3.2)
        self.newest = self.clear_psn  # the newest PSN a request header was built for (:meth:`names_unsent`)
        s.pdcs.append(self)
        if start is None and s._tss is not None and s.one_rtt:
            self._ask_start()

    def _ask_start(self) -> None:
        """RANDOM_1RTT_START (§2.3.2): offer a Start PSN with a SYN the target will refuse with
        NACK ``NEW_START_PSN`` (nothing is delivered, the target PDC waits PENDING), and adopt the
        Start PSN it names, so the case's first packet is its real first SYN."""
        self.s.send(self.header(self.start) + ses_standard(self.s.ses(opcode=0)))
        r = self.s.expect(
            lambda r: self.mine(r) and r.is_nack and r.pds.nack_code == P.NackCode.NEW_START_PSN,
            "NACK NEW_START_PSN for the offered Start PSN (a RANDOM_1RTT_START target)",
        )
        self.start = self.next_psn = r.pds.payload
        self.clear_psn = (self.start - 1) & M32

    def mine(self, r: Reply) -> bool:
        """A reply addressed to this PDC (its DPDCID is our SPDCID)."""
        return r.pds is not None and getattr(r.pds, "dpdcid", None) == self.spdcid

    def names_unsent(self, r: Reply) -> str | None:
        """Why ``r`` is an ACK on this PDC naming a PSN after every PSN it sent (None when it is
        not): the target acknowledged a request that does not exist, and the ACK it owed for
        the real one (ACK PSN = CACK + ack_psn_offset, §2.8) went out as this one."""
        named = r.ack_psn if self.mine(r) and r.is_ack and not r.flags & P.AckFlag.P else None
        if named is None:
            return None
        sent = self.newest if P.psn_after(self.newest, self.next_psn - 1) else (self.next_psn - 1) & M32
        if P.psn_after(named, sent):
            return f"it names PSN {named:#x}; the newest PSN sent on PDC {self.spdcid} is {sent:#x}"
        return None

    def header(self, psn: int | None = None, **kw: Any) -> bytes:
        psn = self.next_psn if psn is None else psn & M32
        if P.psn_after(psn, self.newest):
            self.newest = psn
        syn = kw.pop("syn", self.dpdcid is None)
        clear = kw.pop("clear_psn_offset", None)
        if clear is None:  # hostile PSNs far from the window: the nearest representable clear PSN
            d = P.psn_diff(self.clear_psn, psn)
            clear = max(-0x8000, min(0x7FFF, d))
        return request(
            psn=psn, spdcid=self.spdcid, dpdcid=self.dpdcid or 0, syn=syn,
            psn_offset=kw.pop("psn_offset", (psn - self.start) & 0xFFF), rod=self.rod, clear_psn_offset=clear, **kw,
        )  # fmt: skip

    def send(self, ses: bytes, psn: int | None = None, *, ecn: int = 0, **kw: Any) -> int:
        """Send one request (PDS header built here, ``ses`` = SES header ‖ ext ‖ payload);
        returns its PSN. A new PSN advances ``next_psn``."""
        p, data = self.build(ses, psn, **kw)
        self.s.send(data, ecn=ecn)
        return p

    def build(self, ses: bytes, psn: int | None = None, **kw: Any) -> tuple[int, bytes]:
        """What :meth:`send` sends, not sent yet (for :meth:`Session.send_burst`): (PSN, request)."""
        p = self.next_psn if psn is None else psn & M32
        data = self.header(p, **kw) + ses
        if p == self.next_psn:
            self.next_psn = (p + 1) & M32
        return p, data

    def ack_for(self, psn: int, timeout: float | None = None) -> Reply:
        """Wait for the ACK naming ``psn`` (ACK PSN = psn, or a CACK covering it)."""
        r = self.s.expect(
            lambda r: self.mine(r) and r.is_ack and not r.flags & P.AckFlag.P and (
                r.ack_psn == psn or not P.psn_after(psn, r.pds.cack_psn)
            ),
            f"an ACK for PSN {psn:#x} on PDC {self.spdcid}",
            timeout,
            self.names_unsent,
        )  # fmt: skip
        self.learn(r)
        return r

    def nack(self, psn: int | None = None, code: int | None = None) -> Reply:
        """Wait for a NACK to this PDC (for ``psn`` when given)."""
        what = "a NACK" + (f" {P.NackCode(code).name}" if code is not None else "") + f" on PDC {self.spdcid}"
        if psn is not None:
            what += f" for PSN {psn:#x}"
        return self.s.expect(lambda r: self.mine(r) and r.is_nack and (psn is None or r.pds.nack_psn == psn), what)

    def learn(self, r: Reply) -> None:
        if r.is_ack and self.dpdcid is None:
            self.dpdcid = r.pds.spdcid

    def open(self, **kw: Any) -> Reply:
        """Establish the PDC with a NO_OP request (SES §8.5: no data, no buffer, a
        non-guaranteed success response) and wait for its ACK."""
        ses = ses_standard(self.s.ses(**{"opcode": 0, **kw}))
        psn = self.send(ses)

        # a secure PDC (§2.3.2) answers NEW_START_PSN: restart from the Start PSN it demands. A
        # target frees a PENDING PDC after New_PDC_Time (5 ms in the mirror): a tester slower than that
        # (a loaded machine) is told a new one again, so follow up to three of them.
        # NACK INVALID_SYN for this first SYN means the target still holds a PDC of an earlier
        # session under our PDCID (a long-lived target, a tester run before this one): its other
        # Start PSN is refused (§2.2). As any initiator does after that PDC-fatal NACK (§2.10),
        # retry on a new PDC: another PDCID and Start PSN (up to three times); the stale PDC's
        # later CLOSE_REQ names a PDCID no PDC of ours has, and is answered as a stray's.
        def answer(r: Reply, psn: int) -> bool:
            if not self.mine(r):
                return False
            if r.is_nack:
                code = r.pds.nack_code
                stale = code == P.NackCode.INVALID_SYN and r.pds.nack_psn == psn
                return bool(code == P.NackCode.NEW_START_PSN or stale)
            covers = r.is_ack and (r.ack_psn == psn or not P.psn_after(psn, r.pds.cack_psn))
            return covers and not r.flags & P.AckFlag.P

        restarts = stale = 0
        while True:
            r = self.s.expect(
                functools.partial(answer, psn=psn),
                f"an ACK (or NACK NEW_START_PSN) for the SYN PSN {psn:#x} on PDC {self.spdcid}",
            )
            if not r.is_nack:
                break
            if r.pds.nack_code == P.NackCode.INVALID_SYN:
                stale += 1
                if stale > 3:
                    raise CheckFailed(f"an ACK for the first SYN of a new PDC (PDC {self.spdcid})", r.describe()
                                      + " (NACK INVALID_SYN for the first SYN of four PDCs in turn)")  # fmt: skip
                self.spdcid = self.s.new_pdcid()
                self.start = self.next_psn = self.s.new_start_psn()
                self.clear_psn = self.newest = (self.start - 1) & M32
                psn = self.send(ses)
                continue
            restarts += 1
            if restarts > 3:
                break
            self.restarted = True
            self.start = self.next_psn = r.pds.payload
            self.clear_psn = (self.start - 1) & M32
            if self.s.start_floor is not None:
                self.s.start_floor = (self.start + 0x1000) & M32
            psn = self.send(ses)
        self.learn(r)
        self.clear_psn = psn  # everything so far acknowledged
        if r.flags & P.AckFlag.REQ_CLEAR:
            self.send_clear(psn)
        return r

    def exchange(self, ses: bytes, *, clear: bool = True, **kw: Any) -> Reply:
        """Send one request and return the ACK (or NACK) naming it (its SES response inside).
        Requests go one at a time, so once it is acknowledged everything up to it is: when the
        ACK asks for a clear (a guaranteed response, §2.7) a CLEAR CP follows at once unless
        ``clear`` is False."""
        psn = self.send(ses, **kw)
        r = self.s.expect(
            lambda r: self.mine(r) and (r.is_ack and r.ack_psn == psn or r.is_nack and r.pds.nack_psn == psn),
            f"an ACK (or NACK) naming PSN {psn:#x} on PDC {self.spdcid}",
            refute=self.names_unsent,
        )
        self.learn(r)
        if r.is_ack:
            self.clear_psn = psn
            if clear and r.flags & P.AckFlag.REQ_CLEAR:
                self.send_clear(psn)
        return r

    def send_clear(self, psn: int) -> None:
        """A CLEAR CP (§2.7, §5.8): payload = the clear PSN; not tracked, PSN field 0."""
        assert self.dpdcid is not None
        self.s.send(control(P.ControlType.CLEAR, psn=0, spdcid=self.spdcid, dpdcid=self.dpdcid, payload=psn))

    def send_close(self, psn: int | None = None) -> int:
        """Send CLOSE (a new PSN, AR, §2.12; or ``psn``, where the target refused a request and
        expects that PSN next); returns its PSN."""
        assert self.dpdcid is not None
        psn = self.next_psn if psn is None else psn
        self.next_psn = (psn + 1) & M32
        self.closed = True
        self.s.send(control(P.ControlType.CLOSE, psn=psn, spdcid=self.spdcid, dpdcid=self.dpdcid, flags=P.ReqFlag.AR))
        return psn

    def closing_ack(self, r: Reply) -> None:
        """Take the answer to our CLOSE: a secure 0-RTT target's closing ACK names the next
        Expected_PSN (``EPSN``, §2.3.2), the floor of later Start PSNs."""
        if r.is_ack and r.flags & P.AckFlag.EPSN and self.s.start_floor is not None:
            if P.psn_after(r.pds.expected_psn, self.s.start_floor):
                self.s.start_floor = r.pds.expected_psn

    def close(self, timeout: float = 0.5) -> Reply | None:
        """Close politely (CLOSE CP with a new PSN, AR, §2.12); returns its ACK or None."""
        if self.dpdcid is None:
            return None
        psn = self.send_close()
        try:
            r = self.s.expect(
                lambda r: self.mine(r) and (r.is_ack and r.ack_psn == psn or r.is_nack), "the ACK of CLOSE", timeout
            )
        except CheckFailed:
            return None
        self.closing_ack(r)
        return r
