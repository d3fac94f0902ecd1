"""The sans-I/O PDS core of one FEP: RUD, ROD, RUDI and UUD (spec/behaviour.md §2).

Bytes and time in; datagrams, a timer deadline and events out (aioquic ``QuicConnection``
shape). The initiator half lives in :mod:`uet.pds.initiator` (submission, transmission, RTO),
:mod:`uet.pds.feedback` (ACK/NACK processing) and :mod:`uet.pds.closing`; the target half in
:mod:`uet.pds.target` (requests, ACKs) and :mod:`uet.pds.control` (control packets, target close
and timers); RUDI/UUD in :mod:`uet.pds.rudi`; the return direction of a PDC (read data as
requests from target to initiator, ``submit_return``) in :mod:`uet.pds.ret`. This module holds
the public surface, the receive dispatch (with the in-order data fast path) and the timer loop.
Timers: one deadline per PDC (its oldest outstanding packet's ``tx_time + rto_ns``, a
coalesced-ACK flush, close/idle timers) and per RUDI request; ``get_timer`` returns the minimum
from a heap of per-PDC deadlines: only PDCs touched since the last call are recomputed
(``_tdirty``: the DPDCID of each datagram, PDCs that sent, PDCs whose timer ran), superseded
entries are dropped lazily.

Data-path rules: headers are built with the layouts' fast ``encode`` (or, for data packets, the
layout's own ``struct``) and parsed with ``unpack`` (plain tuples) or by reading the prologue
bytes directly; per-PDC state is keyed by PSN in dicts and sets, never scanned per packet (a
coalesced ACK costs O(newly acknowledged), its SACK bitmap O(bits set)); enum members used on the
data path are module constants (an ``Enum`` class attribute lookup costs ~0.2 µs on 3.11); the
per-packet events ``Delivery`` and ``Acked`` are tuple records built in C. Plain ACKs that become
due while a batch of datagrams is fed in leave as one ACK per PDC from the next
``datagrams_to_send`` (uet.pds.target "Coalescing"). Bad input never raises: it is counted in
``counters["drop_<reason>"]`` or answered with the NACK spec/behaviour.md §2.6 prescribes.

Additions to the PDS core contract (all optional, defaults keep the contract's behaviour):
``submit(..., msg_id=, sdi=, lock=) -> PDCID``, ``unlock_pdc``, ``submit_return`` (uet.pds.ret),
``receive_datagram(..., trimmed=, last_hop=, source_port=, sdi=)``, ``datagrams_to_send(now,
with_sdi=True)`` and ``sdi_of`` (the SDI to seal a datagram with), ``start_psn_policy`` and
``initiator_start_psn`` (secure establishment, §2.3.2), ``send_probe``, ``request_close``,
``submit_run`` (the rest of an open message in one call), ``take_events`` (all pending events at
once), the ``payload_views`` attribute (PDC request payloads delivered as ``memoryview``
slices of the datagram, for an owner that copies them anyway), ``receive_batch`` with the
``on_data`` hook (header prediction for runs of in-order data, exactly equivalent to one
``receive_datagram`` per datagram; every request without CC state a PDC accepts is offered to it
first) and the ``acked_runs`` attribute (``AckedRun`` events for
runs of implicitly acknowledged packets of one token). An initiator whose window only a lost
ACK could open probes the target once per RTO (persist timer, uet.pds.initiator).

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
- ``receive_datagram`` takes ``trimmed``/``last_hop`` (the DSCP is invisible to the core; the
  link reads it, spec/rocev2-and-fabric.md §8.4) and ``source_port`` (the request's UDP source
  port, its entropy, echoed in ACK/NACKs, §4.6; ``entropy=`` is its deprecated old name).
- ``path_window`` (addition; the notes give one ``config_base_rtt`` and link speed per FEP,
  §4.3.1): a ``peer → PathWindow | None`` function; a CCC towards a peer whose path it names (a
  GPU of the same server, over the scale-up links) gets that path's CC parameters, so NSCC's
  ``MaxWnd`` is that path's BDP and not the NIC path's (uet.pds.config.PathWindow), and the RCCC
  receiver paces a sender on that path's credit at its rate (uet.cc.rccc_paths).
"""

from __future__ import annotations

import random
import struct
import warnings
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from heapq import heapify
from heapq import heappop as _heappop
from heapq import heappush as _heappush
from heapq import heapreplace as _heapreplace
from typing import Any, Final

from uet.cc.registry import build as build_cc
from uet.errors import DecodeError
from uet.pds import initiator
from uet.pds._aliases import (
    _AR,
    _M32,
    _MODE_ROD,
    _NC_NAMES,
    _P_ACK,
    _P_ACK_CC,
    _P_ACK_CCX,
    _P_CONTROL,
    _P_NACK,
    _P_NACK_CCX,
    _P_ROD_CC_REQ,
    _P_ROD_REQ,
    _P_RUD_CC_REQ,
    _P_RUD_REQ,
    _P_RUDI_REQ,
    _P_RUDI_RESP,
    _P_TSS,
    _P_UUD_REQ,
    _REQUEST_LEN,
    _RETX,
    _S_CLOSED,
    _S_ESTABLISHED,
    _SYN,
    _T_CLOSE_WAIT,
    _T_CLOSED,
    _T_ESTABLISHED,
    _T_PENDING,
)
from uet.pds.ackbuilder import AckBuilder
from uet.pds.config import PathWindow, PdsConfig, SesNack
from uet.pds.events import Delivery, Event
from uet.pds.pdc import InitiatorPdc, TargetPdc
from uet.pds.seams import FixedWindowGate, RotatingEntropy, default_entropy, per_path_credit, per_path_gates
from uet.pds.startpsn import AcceptEveryStartPsn
from uet.pds.target import _REQ_TAIL, _SES_END
from uet.pds.validation import SourceGuard
from uet.wire.frame import MARK_LASTHOP, MARK_TRIMMED
from uet.wire.pds import NACK, REQUEST, NackCode, psn_diff

_tnew: Final = tuple.__new__  # (Final: a C static in the compiled build, not a globals look-up)
#: the timer heap's operations, as C statics likewise (each get_timer call makes one or two)
heappop: Final = _heappop
heappush: Final = _heappush
heapreplace: Final = _heapreplace
#: the whole RUD/ROD request header (SYN = 0): prologue word, clear_psn_offset, psn, SPDCID, DPDCID
_REQ_WORDS: Final = REQUEST._struct.unpack_from
#: ``receive_batch`` ecn marks of the fabric link (uet.link.fabric ECN_TRIMMED / ECN_LASTHOP)
_ECN_TRIMMED: Final = MARK_TRIMMED
_ECN_LASTHOP: Final = MARK_LASTHOP


class PdsCore(initiator.InitiatorMixin):
    """One FEP's PDS: PDC manager, both PDC roles, RUDI and UUD (see the module docstring)."""

    def __init__(
        self,
        local: str,
        config: PdsConfig | None = None,
        *,
        rng: random.Random | None = None,
        log: Callable[[dict[str, Any]], None] | None = None,
        path_window: Callable[[str], PathWindow | None] | None = None,
    ) -> None:
        self.local = local
        self.config = config or PdsConfig()
        cfg = self.config
        self._nack_retx_ns = cfg.nack_retx_ns or cfg.rto_ns
        # the per-packet path's fields of the (frozen) configuration, typed (uet.pds.state)
        self._rto_ns = cfg.rto_ns
        self._rto_max_ns = cfg.rto_max_ns
        self._mp_range = cfg.mp_range
        self._fast_retx_thr = cfg.fast_retx_threshold
        self._rto_adaptive = cfg.rto_adaptive
        self._max_outstanding = cfg.max_outstanding
        self._control_entropy = cfg.control_entropy
        self._ack_timer_ns = cfg.ack_timer_ns
        self._target_idle_ns = cfg.target_idle_ns
        self.rng = rng or random.Random()  # noqa: S311 - PSNs/PDCIDs are not secrets here
        self._log = log
        self.counters = {}
        self._max_queued = self.config.max_queued
        #: SDI of the datagram being processed (receive_datagram's ``sdi``)
        self._rx_sdi = None
        #: every live PDC by local PDCID (both roles): the PDC table of this FEP
        self.pdcs = {}
        #: target PDCs by (peer FA, peer's PDCID), for SYN lookup (§1.4)
        self.target_by_peer = {}
        self._tombs = OrderedDict()
        #: initiator PDC accepting new messages, by (mode, job_id, peer, tc) (§1.4)
        self.usable = {}
        #: PDC of the message currently open (SOM submitted, EOM not yet) per key
        self.open_msg = {}
        #: per-CCC gates by (peer, tc): [gate, number of PDCs using it]
        self.gates = {}
        self._dirty = {}
        #: PDCs left with packets pending after a pump, by id of their congestion gate: pumped
        #: again when a sibling's pump touches that gate (_pump_gate_siblings)
        self._gate_waiting = {}
        #: target (and return-receive) halves with a plain ACK due, built by datagrams_to_send
        self._ack_dirty = []
        #: bytes held in every PDC's ROD reorder buffer (``PdsConfig.rod_buffer_bytes``)
        self._rod_buffered = 0
        #: timer heap (deadline, key, PDC) and the PDCIDs whose deadline may have changed
        self._theap = []
        self._tdirty = set()
        self._tseq = 0
        self._out = []
        self._events = deque()
        self._closing = False
        #: ``on_deliver(Delivery) -> None | (next_hdr, bytes) | (next_hdr, bytes, guaranteed)``
        self.on_deliver = _no_ses
        #: Secure establishment seam (§2.3.2, uet.pds.startpsn), asked on every SYN that would
        #: create a target PDC (``offer(peer, sdi, start)``) and told when one closes
        #: (``on_close(sdi, start) -> Expected_PSN | None`` for the EPSN closing ACK). An offer
        #: answered None is accepted; an int puts the PDC in PENDING with that Start_PSN and
        #: NACKs NEW_START_PSN; the initiator's SYN carrying it establishes the PDC; a PENDING PDC
        #: not re-driven within ``new_pdc_ns`` (New_PDC_Time) is freed silently. The default
        #: accepts every offer; ``uet.tss.establish`` has the §2.3.2 policies and
        #: ``uet.pds.startpsn.PeerStartPsn`` wraps a plain ``(peer, offered_start_psn)`` function.
        self.start_psn_policy = AcceptEveryStartPsn()
        #: Secure initiator seam (§2.3.2, uet.pds.startpsn.InitiatorStartPsnHook:
        #: ``uet.tss.establish.InitiatorStartPsn``); used for PDCs with an SDI. None: random
        #: Start_PSNs, EPSN in closing ACKs is ignored.
        self.initiator_start_psn = None
        #: CCC seams (architecture.md "Congestion control seam"): replace to plug NSCC/RCCC and REPS in.
        self.gate_factory = lambda peer, tc: FixedWindowGate(self.config.cc_window)
        self.entropy_factory = default_entropy
        #: Owner opt-in (addition): deliver PDC request payloads as read-only ``memoryview``
        #: slices of the received datagram instead of ``bytes`` copies, for an ``on_deliver``
        #: that copies the payload into its own buffer anyway (the endpoint's reassembly): one
        #: copy of every payload byte less on the receive path. A callee that keeps such a view
        #: keeps the whole datagram alive.
        self.payload_views = False
        #: Owner opt-in (addition): the lean delivery hook of :meth:`receive_batch`'s predicted
        #: runs, ``on_data(peer, next_hdr, datagram, ses_end, now)``: the SES request header is
        #: ``datagram[12:ses_end]`` and the payload the rest. It returns None when it placed the
        #: packet and the default response applies; any other value means it did nothing (the
        #: packet then goes to ``on_deliver`` as usual). It may raise ``SesNack``, having done
        #: nothing. None: every packet goes to ``on_deliver``. Every other RUD/ROD request
        #: without CC state a PDC accepts (uet.pds.target ``_accept``) is offered to it first
        #: too, so a run that arrives one datagram per batch (the simulator's usual instant)
        #: also goes without a ``Delivery``; a hook that declines (or raises ``SesNack``) sends
        #: the packet to ``on_deliver``, which then decides.
        self.on_data = None
        #: Owner opt-in (addition): ``on_data`` for RUD/ROD CC requests (RCCC's data), whose SES
        #: header is ``datagram[16:ses_end]``; offered every one a PDC accepts, as ``on_data`` is.
        self.on_cc_data = None
        #: Owner opt-in (addition): report packets a CACK acknowledges implicitly as one
        #: ``AckedRun(token, count)`` per run of consecutive packets with the same token instead
        #: of one ``Acked(token, 0, b"")`` each (uet.pds.events.AckedRun).
        self.acked_runs = False
        #: Owner setting: bytes every datagram has on the wire beyond a clear one over UDP: what
        #: the owner's integrity layer adds (TSS security header + ICV, or the CRC-32C trailer),
        #: less 4 directly over IP (a 4-byte entropy header instead of the 8-byte UDP header). The
        #: nominal size of §4.2 is the transport size + 40 (PDS bytes + 48 + this), so the target
        #: counts it in ``rcvd_bytes`` and each CCC in its ``overhead`` alike (uet.fep.core).
        self.wire_overhead = 0
        self._rudi_init()
        self._misc_entropy = RotatingEntropy(self.rng, self.config.entropy_paths)
        #: address validation and anti-amplification (uet.pds.validation); None: off
        self.guard = SourceGuard(self.config, self._count) if self.config.amp_factor else None
        #: the target's ACK encoder, in the configured format (uet.pds.ackbuilder)
        self._acks = AckBuilder(self.config)
        #: opaque value of the last window probe (uet.pds.initiator._window_probe)
        self._probe_seq = 0
        #: RCCC receiver pacer and the CC parameters, from ``uet.cc.registry.build`` when
        #: ``config.cc``/``config.lb`` name algorithms (spec/behaviour.md §4)
        self.credit_scheduler = None
        self.cc_params = None
        cfg = self.config
        if cfg.cc != "none" or cfg.lb != "default":
            cc = build_cc(cfg.cc, cfg.lb, cfg.cc_params, cfg.cc_window, self.rng, self._log)
            self.gate_factory = cc.gate_factory
            self.cc_params = cc.params
            self.credit_scheduler = cc.receiver
            if path_window is not None:  # a CCC towards a peer on another path: that path's CC
                self.gate_factory = per_path_gates(
                    cc.gate_factory,
                    path_window,
                    lambda p: build_cc(cfg.cc, cfg.lb, p, cfg.cc_window, self.rng, self._log).gate_factory,
                )
                if cc.receiver is not None:  # and credit for a sender on it paced at its rate
                    self.credit_scheduler = per_path_credit(
                        cc.receiver,
                        path_window,
                        lambda p: build_cc(cfg.cc, cfg.lb, p, cfg.cc_window, self.rng, self._log).receiver,
                    )

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

    def _emit(self, rec: dict[str, Any]) -> None:
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
        hdr = NACK.encode((_P_NACK, 0, flags, int(code), 0, psn & _M32, spdcid, dpdcid, payload & _M32))
        self._out.append((hdr, dst, self._control_entropy if entropy is None else entropy))
        name = _NC_NAMES[code]
        self._count("nack_tx_" + name)
        if self._log is not None:
            self._log({"t": now, "ev": "nack_tx", "peer": dst, "pdc": spdcid, "psn": psn, "code": name})

    # -- public surface ------------------------------------------------------------------------

    def receive_datagram(
        self,
        data: bytes | memoryview,
        now: int,
        *,
        source: str,
        ecn: int = 0,
        trimmed: bool = False,
        last_hop: bool = False,
        source_port: int | None = None,
        sdi: int | None = None,
        entropy: int | None = None,
    ) -> None:
        """Process one UET datagram starting at the PDS header, from Fabric Address ``source``
        (the FEP and RoCE cores' convention: ``(data, now, *, source, ecn, trimmed, last_hop,
        source_port)``, the fields of :class:`uet.fep.events.Datagram`).

        ``ecn`` is the IP ECN field (3 = CE); ``trimmed`` marks a packet a switch cut (its DSCP
        said TRIMMED; ``last_hop`` for TRIMMED_LASTHOP); ``source_port`` is the packet's UDP
        source port (its entropy), echoed by ACKs/NACKs (None: unknown, the configured control
        entropy is used); ``entropy`` is its deprecated old name. ``sdi`` is the secure domain
        the TSS layer opened the packet with (None without TSS): a SYN records it in the new PDC,
        and a packet for a PDC of another SDI is dropped (``drop_sdi_mismatch``, §1.4 "all
        packets on a PDC share one SDI"). Never raises on bad input (spec/behaviour.md §2.6)."""
        src, lasthop = source, last_hop
        if entropy is not None:
            warnings.warn(
                "PdsCore.receive_datagram(entropy=) is deprecated: use source_port=", DeprecationWarning, stacklevel=2
            )
            source_port = entropy
        entropy = source_port
        if type(data) is not bytes:
            data = bytes(data)
        self._rx_sdi = sdi
        n = len(data)
        if n < 4:
            self._drop("short", now, src)
            return
        if n >= 12:  # DPDCID of every non-SYN PDC packet: its deadline may change (timer heap)
            self._tdirty.add((data[10] << 8) | data[11])
        b0 = data[0]
        b1 = data[1]
        t = b0 >> 3
        nh = ((b0 & 7) << 1) | (b1 >> 7)
        flags = b1 & 0x7F
        c = self.counters
        c["rx"] = c.get("rx", 0) + 1
        # Fast path for requests: the next in-order PSN of an ESTABLISHED target PDC with nothing
        # out of order or uncleared (``rcvd`` empty), a known SES header kind, not SYN, not
        # trimmed. Every check of §2.6 such a packet could fail is still made (PDC, peer, SPDCID,
        # mode, next_hdr known); the rest follows from the conditions (no CLOSE seen while
        # ESTABLISHED; in order ⇒ current window, not a duplicate, ROD in sequence), so it goes
        # straight to ``TargetMixin._accept`` (delivery and the ACK rule, written once there).
        # Anything else takes the general path below.
        if (t == _P_RUD_REQ or t == _P_ROD_REQ) and not flags & _SYN and not trimmed and n >= _REQUEST_LEN + 2:
            hv: tuple[int, int, int, int] = _REQ_TAIL(data, 2)  # (typed: native ints when compiled)
            cpo, psn, spdcid, dpdcid = hv
            tp = self.pdcs.get(dpdcid)
            if (
                type(tp) is TargetPdc
                and tp.state is _T_ESTABLISHED
                and psn == tp.rx_base
                and not tp.rcvd
                and tp.rpdcid == spdcid
                and tp.peer == src
                and tp.ptype == t
                and tp.sdi == sdi
            ):
                size = _SES_END.get((nh, data[12], data[13]))
                if size is not None and size + _REQUEST_LEN <= n:
                    if not tp.proven:
                        self._proved(tp)
                    tp.last_rx = now
                    if cpo < 0:
                        self._note_clear(tp, (psn + cpo) & _M32)
                    ent = self._control_entropy if entropy is None else entropy
                    self._accept(
                        tp, src, tp.mode, psn, spdcid, nh, flags, data, _REQUEST_LEN, ecn, now, ent, size + _REQUEST_LEN
                    )
                    return
        g = self.guard
        if g is not None and src not in g.verified:
            if (
                flags & _SYN
                and (t == _P_RUD_REQ or t == _P_ROD_REQ or t == _P_RUD_CC_REQ or t == _P_ROD_CC_REQ)
                and n >= 12
                and g.at_cap(src)
                and (src, (data[8] << 8) | data[9]) not in self.target_by_peer
            ):  # a new PDC the source may not have: dropped before any parsing (SYN flood)
                self._drop("unverified_syn", now, src)
                return
            g.credit(src, n, now)
            if n >= 12:
                held = g.check_proof(data, src, self.pdcs.get((data[10] << 8) | data[11]))
                if held is not None:
                    self._out.extend(held)
        try:
            if t == _P_RUD_REQ or t == _P_ROD_REQ or t == _P_RUD_CC_REQ or t == _P_ROD_CC_REQ:
                self._rx_request(data, src, now, t, nh, flags, ecn, trimmed, lasthop, entropy)
            elif t == _P_ACK or t == _P_ACK_CC or t == _P_ACK_CCX:
                self._rx_ack(data, src, now, t, nh, flags)
            elif t == _P_NACK or t == _P_NACK_CCX:
                self._rx_nack(data, src, now, flags)
            elif t == _P_CONTROL:
                self._rx_control(data, src, now, nh, flags, entropy)
            elif t == _P_RUDI_REQ:
                self._rx_rudi_request(data, src, now, nh, flags, ecn, trimmed, lasthop, entropy)
            elif t == _P_RUDI_RESP:
                self._rx_rudi_response(data, src, now, nh)
            elif t == _P_UUD_REQ:
                self._rx_uud(data, src, now, nh, ecn, trimmed)
            elif t == _P_TSS:
                self._drop("tss_not_unwrapped", now, src)
            else:
                self._drop("type", now, src)
        except (DecodeError, struct.error):
            self._drop("malformed", now, src)

    def receive_batch(self, batch: Iterable[tuple[bytes, str, int]], now: int, *, sdi: int | None = None) -> None:
        """Process ``(datagram, source FA, ecn)`` items in order, exactly as one
        :meth:`receive_datagram` per item would (an ``ecn`` above 3 carries the fabric link's
        trim marks or-ed in: 0x100 trimmed, 0x200 trimmed at the last hop), faster for runs of
        in-order data. ``sdi`` as in :meth:`receive_datagram`, for every item.

        Header prediction (addition; the idea of Van Jacobson's TCP receive fast path): once a
        request has been accepted as the newest PSN of an established target PDC (in order with
        nothing held, or the highest of the PSNs held above CACK behind a hole or an uncleared
        guaranteed response), the next datagram is predicted to be the next PSN on that PDC, from
        the same peer, with the same PDS type and next header, the same SES header kind, no flag
        but AR and no CE mark (and, when PSNs are held, inside the receive window). A datagram
        that matches goes to :attr:`on_data` (the whole datagram, no ``Delivery``, no slices),
        and its PDS bookkeeping is added up and written to the PDC once per run: CACK base (or
        the held PSNs), clear-PSN high mark, received bytes, counters and the ACK trigger (plain
        ACKs are coalesced per batch anyway, uet.pds.target), with the same end state as one
        ``receive_datagram`` per packet. A misprediction, an ``on_data`` answer
        other than None, or ``SesNack`` ends the run (its state written first) and the datagram
        takes :meth:`receive_datagram`. Without ``on_data``, with an event log or with
        ``ack_per_pkt`` every datagram takes :meth:`receive_datagram`."""
        hook = self.on_data
        g = self.guard
        if g is not None and g.muted and self._log is None:  # a flood's SYNs, before any decoding
            batch = batch if type(batch) is list else list(batch)
            n = len(batch)
            batch = g.screen(batch, self.target_by_peer)
            if len(batch) != n:
                c = self.counters
                c["rx"] = c.get("rx", 0) + n - len(batch)
        # (one datagram, the usual batch: nothing follows it to predict; tested before the
        # configuration, whose fields are generic look-ups in the compiled build)
        if hook is None or (type(batch) is list and len(batch) == 1) or self._log is not None or self._acks.per_pkt:
            for data, src, ecn in batch:
                if ecn > 3:
                    self.receive_datagram(data, now, source=src, ecn=ecn & 3, trimmed=bool(ecn & _ECN_TRIMMED),
                                          last_hop=bool(ecn & _ECN_LASTHOP), sdi=sdi)  # fmt: skip
                else:
                    self.receive_datagram(data, now, source=src, ecn=ecn, sdi=sdi)
            return
        pdcs = self.pdcs
        trig = self._acks.trigger
        min_add = self._acks.min_add
        mp = self._mp_range
        nominal = 48 + self.wire_overhead  # a packet's nominal size beyond its PDS bytes (§4.2)
        tp: Any = None
        # the run: its PDC, the predicted PSN / IDs / header bytes, and what it has added up;
        # ``held``: the PDC holds received PSNs above CACK (a hole or an uncleared guaranteed
        # response), so the run's PSNs join ``rcvd`` (``hp``) within the window above ``base``
        nxt = lp = rp = word = s01 = end = k = nbytes = gen = mc = base = 0
        peer = ""
        due = nondue = held = False
        arp = -1  # the run's newest PSN carrying AR (-1: none)
        hp: list[int] = []
        items = batch if type(batch) is list else list(batch)
        last = len(items) - 1
        for i, (data, src, ecn) in enumerate(items):
            if tp is not None:
                if ecn < 3 and type(data) is bytes and len(data) >= end:
                    w, cpo, psn, sp, dp = _REQ_WORDS(data, 0)
                    if (
                        psn == nxt
                        and dp == lp
                        and sp == rp
                        and (w == word or w == word | _AR)
                        and src == peer
                        and (data[12] << 8 | data[13]) == s01
                        and (not held or ((psn - base) & _M32) < mp)
                    ):
                        try:
                            r = hook(src, (w >> 7) & 0xF, data, end, now)
                        except SesNack:
                            r = False
                        if r is None:
                            if cpo < 0:
                                cl = (psn + cpo) & _M32
                                d = (cl - mc) & _M32
                                if d and d < 0x80000000:
                                    mc = cl
                            k += 1
                            n = len(data)
                            nbytes += n + nominal
                            n -= end
                            gen += n if n > min_add else min_add
                            if w & _AR:
                                due = True
                                arp = psn
                            elif gen >= trig:
                                due = True
                            else:
                                nondue = True
                            nxt = (psn + 1) & _M32
                            if held:
                                hp.append(psn)
                            continue
                if k:
                    self._end_run(tp, nxt, k, nbytes, gen, mc, due, nondue, now, hp if held else None, arp)
                tp = None
            if ecn > 3:
                self.receive_datagram(data, now, source=src, ecn=ecn & 3, trimmed=bool(ecn & _ECN_TRIMMED),
                                      last_hop=bool(ecn & _ECN_LASTHOP), sdi=sdi)  # fmt: skip
                continue
            self.receive_datagram(data, now, source=src, ecn=ecn, sdi=sdi)
            if i == last:
                continue  # nothing follows to predict
            # start a run after a request accepted as the newest PSN of its PDC: either in order
            # with nothing held (the PDC's CACK base is right after it), or as the highest of the
            # PSNs held above CACK (not the ROD buffering option) — when the next datagram is a
            # RUD/ROD request, the only kind a run continues with (an ACK after the reply of a
            # request/response exchange ends it at once: no prediction is set up for it)
            nd = items[i + 1][0]
            if (
                ecn < 3
                and type(data) is bytes
                and len(data) >= _REQUEST_LEN + 2
                and (data[0] >> 3 == _P_RUD_REQ or data[0] >> 3 == _P_ROD_REQ)
                and len(nd) >= _REQUEST_LEN + 2
                and (nd[0] >> 3 == _P_RUD_REQ or nd[0] >> 3 == _P_ROD_REQ)
            ):
                w, cpo, psn, sp, dp = _REQ_WORDS(data, 0)
                t = pdcs.get(dp)
                if (
                    type(t) is TargetPdc
                    and not w & (_SYN | _RETX)
                    and t.state is _T_ESTABLISHED
                    and t.rpdcid == sp
                    and t.peer == src
                    and t.ptype == w >> 11
                    and t.sdi == sdi
                ):
                    nb = (psn + 1) & _M32
                    held = bool(t.rcvd)
                    if held:
                        ok = (
                            t.high_rcvd == psn
                            and psn in t.rcvd
                            and not t.rod_buf
                            and (t.mode is not _MODE_ROD or t.rod_next == nb)
                        )
                    else:
                        ok = t.rx_base == nb
                    size = _SES_END.get(((w >> 7) & 0xF, data[12], data[13])) if ok else None
                    if size is not None:
                        tp = t
                        nxt = nb
                        base = t.rx_base
                        hp = []
                        lp, rp, peer = dp, sp, src
                        word = w & ~0x7F
                        s01 = data[12] << 8 | data[13]
                        end = size + _REQUEST_LEN
                        k = nbytes = 0
                        gen = t.ack.gen_count
                        mc = t.max_clear
                        due = nondue = False
                        arp = -1
        if tp is not None and k:
            self._end_run(tp, nxt, k, nbytes, gen, mc, due, nondue, now, hp if held else None, arp)

    def _end_run(
        self,
        tp: TargetPdc,
        nxt: int,
        k: int,
        nbytes: int,
        gen: int,
        mc: int,
        due: bool,
        nondue: bool,
        now: int,
        held: list[int] | None = None,
        ar_psn: int = -1,
    ) -> None:
        """Write a predicted run's accumulated state to its PDC (:meth:`receive_batch`): what
        ``k`` packets through ``receive_datagram`` would have left — its fast path (CACK base
        advanced) or, with ``held`` (the run's PSNs), the general path's bookkeeping of PSNs
        received above CACK: they join ``rcvd`` and CACK is recomputed once with the newest
        clear-PSN mark (the per-packet recomputations end in the same state). ``ar_psn``: the
        run's newest PSN that carried AR (-1: none); held behind a hole it becomes ``ar_held``,
        as ``TargetMixin._accept`` does per packet (a run made due by its byte count alone holds
        nothing)."""
        last = (nxt - 1) & _M32
        tp.max_clear = mc
        if tp.mode is _MODE_ROD:
            tp.rod_next = nxt  # (unused by RUD: ``_accept`` leaves it alone there too)
        if held is None:
            tp.rx_base = nxt
        else:
            tp.rcvd.update(held)
            self._advance_cack(tp)
            if ar_psn >= 0 and psn_diff(tp.rx_base, ar_psn) <= 0:
                tp.ar_held = ar_psn  # an AR behind a hole: ACK when CACK passes it
            if tp.gtd:
                tp.clear_req_at = now + self.config.clear_ns
        tp.high_rcvd = last
        tp.rcvd_bytes += nbytes
        tp.last_rx = now
        if not tp.proven:  # the run's packets name the PDC without SYN (uet.pds.validation)
            self._proved(tp)
        # the run's packets carried no SES response: its newest PSN is the trigger (§2.8)
        self._coalesce(tp, last, 0, 0, b"", self._control_entropy, gen, due, nondue, now)
        self._tdirty.add(tp.lpdcid)
        c = self.counters
        c["rx"] = c.get("rx", 0) + k
        c["delivered"] = c.get("delivered", 0) + k

    def _proved(self, tp: TargetPdc) -> None:
        """A non-SYN packet from ``tp``'s peer named it: the peer receives what we send
        (uet.pds.validation); what waited for that proof leaves with the next flush."""
        tp.proven = True
        g = self.guard
        if g is not None and tp.peer not in g.verified:
            self._out.extend(g.verify(tp.peer))

    def _is_proven(self, tp: TargetPdc) -> bool:
        """``tp``'s peer is verified (uet.pds.validation), remembered on the PDC."""
        if not tp.proven:
            g = self.guard
            if g is None or tp.peer in g.verified:
                tp.proven = True
        return tp.proven

    def sdi_of(self, datagram: bytes) -> int | None:
        """The SDI to seal an outgoing ``datagram`` (from :meth:`datagrams_to_send`) with: the
        SDI of the local PDC named by its SPDCID (bytes 8–9 in every PDC-bearing PDS header:
        requests, ACKs, NACKs, control packets), None for RUDI/UUD, for NACKs sent without a PDC
        (SPDCID 0) and for PDCs without an SDI (the TSS layer then uses its per-peer default)."""
        if len(datagram) < 10:
            return None
        t = datagram[0] >> 3
        if t == _P_RUDI_REQ or t == _P_RUDI_RESP or t == _P_UUD_REQ or t == _P_TSS:
            return None
        pdc = self.pdcs.get((datagram[8] << 8) | datagram[9])
        return None if pdc is None else pdc.sdi

    def datagrams_to_send(self, now: int, *, with_sdi: bool = False) -> list[tuple[Any, ...]]:
        """(UET bytes from the PDS header, destination FA, entropy); drains all that is sendable.

        Also builds the ACKs that became due while datagrams were fed in (one per PDC, see
        uet.pds.target "Coalescing"): call it after every batch of ``receive_datagram``. Order
        (a choice; the notes do not order one flush): what receiving queued, then those ACKs,
        then what the pump sends — except that the pump's first packet goes ahead when only
        ACKs are queued before it (the reply of a request/response exchange is not sent behind
        the ACK of the request; an ACK waits one datagram at most).
        ``with_sdi=True`` returns 4-tuples ``(bytes, destination, entropy, sdi)`` with the SDI of
        :meth:`sdi_of` (the TSS layer seals each datagram with its PDC's SDI); the default keeps
        the contract's 3-tuples."""
        if self._ack_dirty:
            due = self._ack_dirty
            self._ack_dirty = []
            td = self._tdirty
            for tp in due:
                a = tp.ack
                if a.due:
                    a.due = False
                    td.add(tp.lpdcid)  # a return-receive half shares its initiator's PDCID
                    if tp.state is not _T_CLOSED:  # (TargetMixin._flush_ack, without the call)
                        # (called on self: the compiled build calls a method natively, where a
                        # bound method kept in a local is a generic call)
                        self._send_ack(tp, a.trigger, a.flags, a.rnh, a.resp, now, tp.entropy)
        if self._dirty:
            dirty = self._dirty
            self._dirty = {}
            td = self._tdirty
            queued = len(self._out)
            for pdc in dirty:
                td.add(pdc.lpdcid)  # a return half shares its target PDC's PDCID
                self._pump(pdc, now)
            if self._gate_waiting or len(self.gates) < len(self.pdcs):
                self._pump_gate_siblings(dirty, now)
            out = self._out
            if queued and len(out) > queued and all(_P_ACK <= d[0][0] >> 3 <= _P_ACK_CCX for d in out[:queued]):
                # the first packet the pump sent leaves before the ACKs queued ahead of it (and
                # only ACKs: a retransmission or a NACK keeps its place): in a request/response
                # exchange it is the answer the peer waits for, while an ACK only completes a
                # send (and sent first, it wakes the peer for itself alone); the other packets
                # follow the ACKs, so an ACK waits one datagram at most
                out.insert(0, out.pop(queued))
        if self._uud_q or self._rudi_wait:
            self._rudi_flush(now)
        out = self._out
        if not out:
            return []
        self._out = []
        g = self.guard
        if g is not None and g.budgets:  # unverified sources heard from (uet.pds.validation)
            out = g.filter(out, self.pdcs, now)
        if with_sdi:
            sdi_of = self.sdi_of
            return [(d, dst, e, sdi_of(d)) for d, dst, e in out]
        return out

    def _pump_gate_siblings(self, pumped: dict[InitiatorPdc, None], now: int) -> None:
        """Re-pump the PDCs waiting on a congestion gate that another PDC's event may have freed
        (issue 10 item 7). One CCC, hence one gate, serves every PDC to a (peer, traffic class)
        (behaviour.md §2.5); an ACK, NACK or timeout on one PDC makes only that PDC dirty, so a
        sibling the gate refused earlier would wait for good. A PDC pumped with packets still
        pending (new data, or retransmissions queued behind the gate) is remembered under its
        gate; whenever a pump touches that gate, its waiting siblings are pumped too, in the
        order they started waiting. (Only when some gate may be shared: fewer gates than PDCs,
        or siblings already waiting.)"""
        waiting = self._gate_waiting
        touched: dict[int, None] = {}
        for pdc in pumped:
            gid = id(pdc.gate)
            touched[gid] = None
            w = waiting.get(gid)
            if (pdc.pending or pdc.cc_rtx) and pdc.state is not _S_CLOSED:
                if w is None:
                    w = waiting[gid] = {}
                w[pdc] = None
            elif w is not None:
                w.pop(pdc, None)
        td = self._tdirty
        for gid in touched:
            w = waiting.get(gid)
            if w is None:
                continue
            for pdc in list(w):
                if pdc not in pumped and pdc.state is not _S_CLOSED:
                    td.add(pdc.lpdcid)
                    self._pump(pdc, now)
                if not (pdc.pending or pdc.cc_rtx) or pdc.state is _S_CLOSED:
                    del w[pdc]
            if not w:
                del waiting[gid]

    def _refresh_timers(self) -> None:
        """Recompute the deadline of every PDC touched since the last call. A deadline earlier
        than the PDC's live heap entry (or a PDC without one) is pushed; a later one is only
        recorded (``tdl``): the entry, reached at the top of the heap, is then re-pushed at the
        recorded deadline (:meth:`_top_live`), so a deadline that keeps moving later (an RTO
        restarted by every send, an idle timer by every arrival) costs no heap operation.
        The re-pushed entry carries the sequence number of the refresh that found the deadline,
        so entries come off the heap in the order one push per refresh would give."""
        heap = self._theap
        pdcs = self.pdcs
        seq = self._tseq
        td = self._tdirty
        if len(td) == 1:  # (the usual call, one PDC touched: taken without an iterator over the set)
            pdc = pdcs.get(td.pop())
            if pdc is not None:
                seq += 1
                self._refresh_one(pdc, seq)
        else:
            for pid in td:
                pdc = pdcs.get(pid)
                if pdc is None:
                    continue
                seq += 1
                self._refresh_one(pdc, seq)
            td.clear()
        self._tseq = seq
        if len(heap) > 4 * len(pdcs) + 64:  # compact: drop superseded entries (amortised O(1))
            heap[:] = [e for e in heap if e[2].tent == e[1]]
            heapify(heap)

    def _refresh_one(self, pdc: InitiatorPdc | TargetPdc, seq: int) -> None:
        """:meth:`_refresh_timers` of one PDC, with the sequence number ``seq``."""
        # one branch per PDC class, each with a name of that class: the compiled build writes an
        # attribute of a union (InitiatorPdc | TargetPdc) through Python's generic setattr
        # (about 300 instructions a write, four or more writes per refresh), of a class natively
        ip: InitiatorPdc
        tp: TargetPdc
        if isinstance(pdc, InitiatorPdc):
            ip = pdc
            d = self._ipdc_deadline(ip)
            ip.tkey = seq
            ip.tdl = d
            if d is not None and (not ip.tent or d < ip.tentd):
                ip.tent = seq
                ip.tentd = d
                heappush(self._theap, (d, seq, ip))
        else:
            tp = pdc
            d = self._tpdc_deadline(tp)
            tp.tkey = seq
            tp.tdl = d
            if d is not None and (not tp.tent or d < tp.tentd):
                tp.tent = seq
                tp.tentd = d
                heappush(self._theap, (d, seq, tp))

    def _top_live(self) -> int:
        """The deadline of the heap's earliest entry that is live and current, which is then
        ``_theap[0]``; -1 when there is none: superseded entries (and a freed PDC's, whose
        ``tent`` was cleared when it left ``pdcs``) are dropped, a deferred entry (its PDC's
        deadline moved later or went, :meth:`_refresh_timers`) is replaced by one at the recorded
        deadline. (An int, not the entry: the compiled build holds a typed tuple unboxed, and
        boxes it again, a new tuple, wherever it is returned or compared.)"""
        heap = self._theap
        while heap:
            d, k, pdc = heap[0]
            if pdc.tent != k:
                heappop(heap)  # superseded
                continue
            if pdc.tkey != k:  # deferred
                t = pdc.tdl
                if t is None:
                    _clear_tent(pdc)
                    heappop(heap)
                else:
                    _set_tent(pdc, pdc.tkey, t)
                    heapreplace(heap, (t, pdc.tkey, pdc))
                continue
            return d
        return -1

    def get_timer(self) -> int | None:
        """The earliest deadline (ns) at which :meth:`handle_timer` has work, or None.

        A heap of per-PDC deadlines with lazy deletion: only PDCs touched since the last call
        (a datagram named them, they sent, a timer ran on them; ``_tdirty``) are recomputed, so
        the cost is O(touched · log n) instead of a scan of every PDC."""
        if self._tdirty:
            self._refresh_timers()
        best = self._rudi_deadline() if self._rudi_out else None
        cs = self.credit_scheduler
        if cs is not None:
            d = cs.deadline()
            if d is not None and (best is None or d < best):
                best = d
        if self._theap:
            top = self._top_live()
            if top >= 0 and (best is None or top < best):
                best = top
        return best

    def handle_timer(self, now: int) -> None:
        """Run every timer due at ``now``: RTO/ACK_REQ, ACK flush, idle/CLOSE_REQ, linger, RUDI."""
        if self._tdirty:
            self._refresh_timers()
        heap = self._theap
        due: list[InitiatorPdc | TargetPdc] = []
        while heap:
            top = self._top_live()
            if top < 0 or top > now:
                break
            pdc = heappop(heap)[2]
            _clear_tent(pdc)
            due.append(pdc)
        td = self._tdirty
        for pdc in due:
            td.add(pdc.lpdcid)
            if pdc.role == "initiator":
                if pdc.state is not _S_CLOSED:
                    self._ipdc_timer(pdc, now)
            elif pdc.state is not _T_CLOSED:
                self._tpdc_timer(pdc, now)
        self._rudi_timer(now)
        cs = self.credit_scheduler
        if cs is not None:
            d = cs.deadline()
            if d is not None and d <= now:
                self._send_grants(now)

    def next_event(self) -> Event | None:
        """The oldest pending event, or None."""
        return self._events.popleft() if self._events else None

    def take_events(self) -> Sequence[Event]:
        """Addition: every pending event at once, oldest first (empty when none) — the same
        sequence as :meth:`next_event` until None, without a call per event."""
        evs = self._events
        if not evs:
            return ()
        self._events = deque()
        return evs

    def close(self, now: int) -> None:
        """Graceful close of every PDC: initiator PDCs quiesce and send CLOSE; target PDCs ask
        their initiator with CLOSE_REQ (§2.12). Later ``submit`` calls raise
        :class:`~uet.pds.config.PdsClosedError`. Poll (datagrams, timers) until :meth:`idle`."""
        self._closing = True
        self._tdirty.update(self.pdcs)
        for pdc in list(self.pdcs.values()):
            if pdc.role == "initiator":
                self._start_close(pdc, "owner close", now)
            elif pdc.state is _T_ESTABLISHED:
                self._target_close_req(pdc, now)

    def request_close(self, pdcid: int, now: int) -> None:
        """Close one PDC: CLOSE (initiator role) or CLOSE_REQ (target role, e.g. resource
        pressure, §2.12). Unknown PDCIDs are ignored."""
        pdc = self.pdcs.get(pdcid)
        if pdc is None:
            return
        self._tdirty.add(pdcid)
        if pdc.role == "initiator":
            self._start_close(pdc, "owner request", now)
        elif pdc.state is _T_ESTABLISHED:
            self._target_close_req(pdc, now)

    def idle(self) -> bool:
        """True when nothing is queued, unacknowledged or closing (lingering closed target PDCs
        and idle ESTABLISHED PDCs do not count)."""
        if self._out or self._ack_dirty or self._rudi_out or self._rudi_wait or self._uud_q:
            return False
        for pdc in self.pdcs.values():
            if pdc.role == "initiator":
                if pdc.outstanding or pdc.pending or pdc.state is not _S_ESTABLISHED:
                    return False
                if self._closing:
                    return False
            else:
                st = pdc.state
                if st is _T_CLOSE_WAIT or st is _T_PENDING or self._ret_busy(pdc):
                    return False
                if self._closing and st is _T_ESTABLISHED:
                    return False
        return True


def _set_tent(pdc: InitiatorPdc | TargetPdc, tent: int, tentd: int) -> None:
    """``pdc.tent, pdc.tentd = tent, tentd`` through a name of the PDC's own class (the compiled
    build writes an attribute of the union through Python's generic setattr)."""
    if isinstance(pdc, InitiatorPdc):
        ip: InitiatorPdc = pdc
        ip.tent = tent
        ip.tentd = tentd
    else:
        tp: TargetPdc = pdc
        tp.tent = tent
        tp.tentd = tentd


def _clear_tent(pdc: InitiatorPdc | TargetPdc) -> None:
    """``pdc.tent = 0`` (no live heap entry), as :func:`_set_tent` writes."""
    if isinstance(pdc, InitiatorPdc):
        ip: InitiatorPdc = pdc
        ip.tent = 0
    else:
        tp: TargetPdc = pdc
        tp.tent = 0


def _no_ses(d: Delivery) -> None:
    """Default ``on_deliver``: accept and answer with a plain ACK."""
    return None
