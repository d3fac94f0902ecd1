"""The sans-I/O PDS core of one FEP: RUD, ROD, RUDI and UUD (spec/behaviour.md §2).

Bytes and time in; datagrams, a timer deadline and events out (aioquic ``QuicConnection``
shape). The initiator half lives in :mod:`uet.pds.initiator` (submission, transmission, RTO),
:mod:`uet.pds.feedback` (ACK/NACK processing) and :mod:`uet.pds.closing`; the target half in
:mod:`uet.pds.target` (requests, ACKs) and :mod:`uet.pds.control` (control packets, target close
and timers); RUDI/UUD in :mod:`uet.pds.rudi`. This module holds the public surface, the receive
dispatch and the timer loop. Timers: one deadline per PDC (its oldest outstanding packet's
``tx_time + rto_ns``, a coalesced-ACK flush, close/idle timers) and per RUDI request;
``get_timer`` returns the minimum (a scan over PDCs: fine for the hundreds of PDCs a FEP uses
here; a heap is the upgrade path for thousands).

Data-path rules: headers are built with the layouts' fast ``encode`` and parsed with ``unpack``
(plain tuples) or by reading the prologue bytes directly; per-PDC state is keyed by PSN in dicts
and sets, never scanned per packet. Bad input never raises: it is counted in
``counters["drop_<reason>"]`` or answered with the NACK spec/behaviour.md §2.6 prescribes.

Choices where the notes are silent (inference, documented here and in the modules):

- ``submit`` routes a non-SOM packet to the PDC of its open message (SOM .. EOM). An optional
  ``msg_id`` keyword (addition) names the message when the owner interleaves submissions of
  several multi-packet messages to one ``(mode, job_id, peer, tc)`` key; a message that starts
  while another is open on the PDC waits behind it, so messages never interleave on a PDC.
- ``on_deliver`` may raise :class:`~uet.pds.config.SesNack` (transient SES shortage → NACK
  ``NO_SES_MSG_AVAIL``); any other exception from it propagates to the caller (owner bug).
- A response is *guaranteed delivery* (kept until cleared, ACK sets ``REQ_CLEAR``) unless it is a
  plain SES RESPONSE header (next_hdr 4) with list 0 and return code RC_NULL/RC_OK (§6.9);
  ``on_deliver`` may return a 3-tuple ``(next_hdr, bytes, guaranteed)`` to say so explicitly.
- ``receive_datagram`` takes ``trimmed``/``lasthop`` (the DSCP is invisible to the core; the
  link reads it, spec/rocev2-and-fabric.md §8.4) and ``entropy`` (the request's UDP source port,
  echoed in ACK/NACKs, §4.6).
"""

from __future__ import annotations

import random
import struct
from collections import deque
from collections.abc import Callable
from typing import Any

from uet.errors import DecodeError
from uet.pds import closing, control, feedback, initiator, rudi, target
from uet.pds.config import Mode, PdsConfig
from uet.pds.events import Delivery, Event
from uet.pds.pdc import InitiatorPdc, TargetPdc
from uet.pds.seams import FixedWindowGate, RotatingEntropy, default_entropy
from uet.pds.states import InitiatorState, TargetState
from uet.wire.pds import NACK, NackCode

_M32 = 0xFFFFFFFF


class PdsCore(
    initiator.InitiatorMixin,
    feedback.FeedbackMixin,
    closing.CloseMixin,
    target.TargetMixin,
    control.ControlMixin,
    rudi.RudiMixin,
):
    """One FEP's PDS: PDC manager, both PDC roles, RUDI and UUD (see the module docstring)."""

    def __init__(
        self,
        local: str,
        config: PdsConfig | None = None,
        *,
        rng: random.Random | None = None,
        log: Callable[[dict], None] | None = None,
    ) -> None:
        self.local = local
        self.config = config or PdsConfig()
        self.rng = rng or random.Random()  # noqa: S311 - PSNs/PDCIDs are not secrets here
        self._log = log
        self.counters: dict[str, int] = {}
        #: every live PDC by local PDCID (both roles): the PDC table of this FEP
        self.pdcs: dict[int, InitiatorPdc | TargetPdc] = {}
        #: target PDCs by (peer FA, peer's PDCID), for SYN lookup (§1.4)
        self.target_by_peer: dict[tuple[str, int], TargetPdc] = {}
        #: initiator PDC accepting new messages, by (mode, job_id, peer, tc) (§1.4)
        self.usable: dict[tuple, InitiatorPdc] = {}
        #: PDC of the message currently open (SOM submitted, EOM not yet) per key
        self.open_msg: dict[tuple, InitiatorPdc] = {}
        #: per-CCC gates by (peer, tc): [gate, number of PDCs using it]
        self.gates: dict[tuple[str, int], list] = {}
        self._dirty: dict[InitiatorPdc, None] = {}
        self._out: list[tuple[bytes, str, int]] = []
        self._events: deque[Event] = deque()
        self._closing = False
        #: ``on_deliver(Delivery) -> None | (next_hdr, bytes) | (next_hdr, bytes, guaranteed)``
        self.on_deliver: Callable[[Delivery], Any] = _no_ses
        #: Secure 1-RTT seam (§2.3.2): ``policy(peer, offered_start_psn) -> None`` accepts, an int
        #: demands that Start_PSN (PDC → PENDING, NACK NEW_START_PSN). None accepts everything.
        self.start_psn_policy: Callable[[str, int], int | None] | None = None
        #: CCC seams (ARCHITECTURE.md "Coming next"): replace to plug NSCC/RCCC and REPS in.
        self.gate_factory: Callable[[str, int], Any] = lambda peer, tc: FixedWindowGate(self.config.cc_window)
        self.entropy_factory: Callable[[Mode, random.Random, int], Any] = default_entropy
        self._rudi_init()
        self._misc_entropy = RotatingEntropy(self.rng, self.config.entropy_paths)

    # -- helpers shared by the halves -----------------------------------------------------------

    def _count(self, name: str, n: int = 1) -> None:
        c = self.counters
        c[name] = c.get(name, 0) + n

    def _drop(self, reason: str, now: int, src: str = "") -> None:
        c = self.counters
        k = "drop_" + reason
        c[k] = c.get(k, 0) + 1
        if self._log is not None:
            self._log({"t": now, "ev": "drop", "peer": src, "reason": reason})

    def _emit(self, rec: dict) -> None:
        if self._log is not None:
            self._log(rec)

    def _alloc_pdcid(self) -> int:
        """A random unused non-zero PDCID (collision retry, spec/behaviour.md §1.3)."""
        rnd = self.rng.randrange
        pdcs = self.pdcs
        while True:
            i = rnd(1, 0x10000)
            if i not in pdcs:
                return i

    def _send_nack(
        self,
        dst: str,
        code: NackCode,
        psn: int,
        spdcid: int,
        dpdcid: int,
        flags: int,
        now: int,
        payload: int = 0,
        entropy: int | None = None,
    ) -> None:
        """Queue a NACK (wire-format.md §5.6) on the control class."""
        hdr = NACK.encode((10, 0, flags, int(code), 0, psn & _M32, spdcid, dpdcid, payload & _M32))
        self._out.append((hdr, dst, self.config.control_entropy if entropy is None else entropy))
        self._count("nack_tx_" + code.name)
        if self._log is not None:
            self._log({"t": now, "ev": "nack_tx", "peer": dst, "pdc": spdcid, "psn": psn, "code": code.name})

    # -- public surface ------------------------------------------------------------------------

    def receive_datagram(
        self,
        data: bytes | memoryview,
        src: str,
        now: int,
        *,
        ecn: int = 0,
        trimmed: bool = False,
        lasthop: bool = False,
        entropy: int | None = None,
    ) -> None:
        """Process one UET datagram starting at the PDS header, from Fabric Address ``src``.

        ``ecn`` is the IP ECN field (3 = CE); ``trimmed`` marks a packet a switch cut (its DSCP
        said TRIMMED; ``lasthop`` for TRIMMED_LASTHOP); ``entropy`` is the packet's UDP source
        port, echoed by ACKs/NACKs. Never raises on bad input (spec/behaviour.md §2.6)."""
        if type(data) is not bytes:
            data = bytes(data)
        if len(data) < 4:
            self._drop("short", now, src)
            return
        b0 = data[0]
        b1 = data[1]
        t = b0 >> 3
        nh = ((b0 & 7) << 1) | (b1 >> 7)
        flags = b1 & 0x7F
        c = self.counters
        c["rx"] = c.get("rx", 0) + 1
        try:
            if t == 2 or t == 3 or t == 13 or t == 14:
                self._rx_request(data, src, now, t, nh, flags, ecn, trimmed, lasthop, entropy)
            elif t == 7 or t == 8 or t == 9:
                self._rx_ack(data, src, now, t, nh, flags)
            elif t == 10 or t == 12:
                self._rx_nack(data, src, now, flags)
            elif t == 11:
                self._rx_control(data, src, now, nh, flags, entropy)
            elif t == 4:
                self._rx_rudi_request(data, src, now, nh, flags, ecn, trimmed, lasthop, entropy)
            elif t == 5:
                self._rx_rudi_response(data, src, now, nh)
            elif t == 6:
                self._rx_uud(data, src, now, nh, ecn, trimmed)
            elif t == 1:
                self._drop("tss_not_unwrapped", now, src)
            else:
                self._drop("type", now, src)
        except (DecodeError, struct.error):
            self._drop("malformed", now, src)

    def datagrams_to_send(self, now: int) -> list[tuple[bytes, str, int]]:
        """(UET bytes from the PDS header, destination FA, entropy); drains all that is sendable."""
        if self._dirty:
            dirty = self._dirty
            self._dirty = {}
            for pdc in dirty:
                self._pump(pdc, now)
        if self._uud_q or self._rudi_wait:
            self._rudi_flush(now)
        out = self._out
        if not out:
            return []
        self._out = []
        return out

    def get_timer(self) -> int | None:
        """The earliest deadline (ns) at which :meth:`handle_timer` has work, or None."""
        best = self._rudi_deadline()
        for pdc in self.pdcs.values():
            d = self._ipdc_deadline(pdc) if pdc.role == "initiator" else self._tpdc_deadline(pdc)
            if d is not None and (best is None or d < best):
                best = d
        return best

    def handle_timer(self, now: int) -> None:
        """Run every timer due at ``now``: RTO/ACK_REQ, ACK flush, idle/CLOSE_REQ, linger, RUDI."""
        for pdc in list(self.pdcs.values()):
            if pdc.role == "initiator":
                self._ipdc_timer(pdc, now)
            else:
                self._tpdc_timer(pdc, now)
        self._rudi_timer(now)

    def next_event(self) -> Event | None:
        """The oldest pending event, or None."""
        return self._events.popleft() if self._events else None

    def close(self, now: int) -> None:
        """Graceful close of every PDC: initiator PDCs quiesce and send CLOSE; target PDCs ask
        their initiator with CLOSE_REQ (§2.12). Later ``submit`` calls raise
        :class:`~uet.pds.config.PdsClosedError`. Poll (datagrams, timers) until :meth:`idle`."""
        self._closing = True
        for pdc in list(self.pdcs.values()):
            if pdc.role == "initiator":
                self._start_close(pdc, "owner close", now)
            elif pdc.state is TargetState.ESTABLISHED:
                self._target_close_req(pdc, now)

    def request_close(self, pdcid: int, now: int) -> None:
        """Close one PDC: CLOSE (initiator role) or CLOSE_REQ (target role, e.g. resource
        pressure, §2.12). Unknown PDCIDs are ignored."""
        pdc = self.pdcs.get(pdcid)
        if pdc is None:
            return
        if pdc.role == "initiator":
            self._start_close(pdc, "owner request", now)
        elif pdc.state is TargetState.ESTABLISHED:
            self._target_close_req(pdc, now)

    def idle(self) -> bool:
        """True when nothing is queued, unacknowledged or closing (lingering closed target PDCs
        and idle ESTABLISHED PDCs do not count)."""
        if self._out or self._rudi_out or self._rudi_wait or self._uud_q:
            return False
        for pdc in self.pdcs.values():
            if pdc.role == "initiator":
                if pdc.outstanding or pdc.pending or pdc.state is not InitiatorState.ESTABLISHED:
                    return False
                if self._closing:
                    return False
            else:
                st = pdc.state
                if st is TargetState.CLOSE_WAIT or st is TargetState.PENDING:
                    return False
                if self._closing and st is TargetState.ESTABLISHED:
                    return False
        return True


def _no_ses(d: Delivery) -> None:
    """Default ``on_deliver``: accept and answer with a plain ACK."""
    return None
