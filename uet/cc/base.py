"""The congestion-control seam between the PDS and UET-CC (spec/behaviour.md §4.1), declared.

Two levels, as aioquic's ``congestion/base.py``:

- :class:`SenderCc` is what the PDS talks to: one object per congestion control context (CCC,
  one per peer and traffic class), asked before every transmission and told every signal §4.1
  names — each send, ACK (packets and bytes acknowledged, the bytes the target newly received
  from the ACK_CC state, ECN-marked bytes, an RTT sample less the target's service time, the
  receiver window penalty), NACK (per NACKed packet: trimmed, at the last hop or not), inferred
  loss (RTO or SACK), packets the target discarded unseen (ROD go-back-N), packets that left
  flight without an answer (a failed PDC), RCCC grants — and asked for its pacing/credit
  deadline, its AR wish, and its credit target. :class:`uet.cc.ccc.Ccc` implements it by
  composing algorithms; :class:`uet.pds.seams.FixedWindowGate` (the ``none`` default) too.
- :class:`ReceiverCc` is the receiver side of a credit algorithm (RCCC's pacer), one per FEP;
- :class:`CcAlgorithm` is one algorithm inside a CCC (NSCC, the RCCC source, DCTCP, ...): a
  base class whose every reaction defaults to "nothing to do", so an algorithm overrides only
  what it uses. Sizes it sees are *nominal* bytes (§4.2: the PDS header + SES + payload + 48).
  :mod:`uet.cc.registry` maps a name to its class (``register(name, factory)``).

Retransmission discipline (:class:`ResendPolicy`) is the one behaviour the PDS takes from the
gate rather than a signal: a CCC retransmits only when every algorithm allows sending (§4.1
``mark_for_retransmit`` then ``update_state``), while the fixed window resends at once and
clocks trimmed packets out on ACKs (uet.pds.trimwait).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from uet.cc.config import CcConfig
from uet.enums import Enum

#: an event-log sink (``{"ev": "cc", ...}`` records, uet.eventlog)
Log = Callable[[dict[str, Any]], None]


class ResendPolicy(Enum):
    """How a PDC resends packets its gate has been told are lost or NACKed."""

    #: queued behind the gate: resent when ``can_send`` allows, spending window and credit like
    #: new data (§4.1); a NACKed packet is recovered by that resend (no SACK fast retransmit)
    GATED = "gated"
    #: resent at once; trimmed packets (uet.pds.trimwait) one per newly acknowledged packet
    ACK_CLOCKED = "ack_clocked"


class PathSelector:
    """A CCC's path selector (§4.6; uet.cc.entropy), shared by the CCC's RUD PDCs: a base class
    (not a ``Protocol``), so that the compiled build (uet.compiled) calls its methods natively."""

    __slots__ = ()

    def next_entropy(self) -> int:
        """The entropy value for the next transmission."""
        raise NotImplementedError

    def feedback(self, entropy: int, event: str, now: int = 0) -> None:
        """``event`` is ``"ack"``, ``"ecn"``, ``"trim"`` (not at the last hop), ``"loss"``
        (SACK-inferred) or ``"timeout"`` (uet.cc.entropy)."""
        raise NotImplementedError


class SenderCc:
    """One CCC as the PDS sees it (module docstring). ``nbytes`` is ``TxPkt.nbytes`` (SES header
    + payload); the gate adds its own per-packet overhead to get nominal sizes. A base class
    (not a ``Protocol``): the compiled build (uet.compiled) calls a native class's methods and
    reads its attributes natively, an object of a structural type only through Python's generic
    calls (once per packet and signal). Its implementations set every attribute in ``__init__``."""

    #: the retransmission discipline the PDS applies to this CCC's PDCs
    resend: ResendPolicy
    #: send data as CC requests carrying :meth:`credit_target` and ``ccc_id`` (RCCC, wire §5.2)
    cc_request: bool
    ccc_id: int
    #: the path selector the CCC's RUD PDCs share, or None (each PDC gets the PDS default)
    entropy: PathSelector | None
    #: nominal size − ``nbytes`` of one packet (§4.2); its owner adds what its integrity layer
    #: puts on every datagram (``PdsCore.wire_overhead``), as the target counts it
    overhead: int

    def quota(self, now: int) -> int:
        """First transmissions allowed now, asked once per burst and answered with
        :meth:`on_send_many`; -1: ask :meth:`can_send` per packet instead."""
        raise NotImplementedError

    def can_send(self, nbytes: int, now: int) -> bool:
        raise NotImplementedError

    def may_open(self, nbytes: int, now: int) -> bool:
        """May a new PDC's first packet go although :meth:`can_send` refused it?"""
        raise NotImplementedError

    def on_send(self, nbytes: int, retx: bool, now: int) -> None:
        raise NotImplementedError

    def on_send_many(self, npkts: int, nbytes: int, now: int) -> None:
        """``npkts`` first transmissions of ``nbytes`` in all (pairs with :meth:`quota`)."""
        raise NotImplementedError

    def ack_request(self, nbytes: int) -> bool:
        """Set AR on the packet of ``nbytes`` about to go (§4.3.3)?"""
        raise NotImplementedError

    def deadline(self, now: int) -> int | None:
        """When a sender refused now may try again without any packet arriving (pacing, a due
        CREDIT_REQ), or None."""
        raise NotImplementedError

    def take_probe(self) -> bool:
        """True once, when the CCC wants a PROBE CP for a clean base-RTT sample (§4.3.6)."""
        raise NotImplementedError

    def set_backlog(self, pdcid: int, npkts: int, nbytes: int) -> None:
        """PDC ``pdcid`` has ``npkts`` packets waiting, each about ``nbytes`` (an estimate)."""
        raise NotImplementedError

    def credit_target(self) -> int:
        """The cumulative 24-bit credit target for the next CC request (§4.5; 0 without RCCC)."""
        raise NotImplementedError

    def credit_request_due(self, now: int) -> bool:
        """Is a CREDIT_REQ CP restating :meth:`credit_target` due now (§4.5 "Timeout with no
        credit")? The PDS answers with :meth:`on_credit_request` (also when it could not send
        one: never a deadline in the past)."""
        raise NotImplementedError

    def on_credit_request(self, now: int) -> None:
        raise NotImplementedError

    def on_grant(self, grant: int, now: int) -> bool:
        """A cumulative grant (CREDIT CP or credit ACK); False: this CCC takes no credit."""
        raise NotImplementedError

    def on_ack(
        self,
        npkts: int,
        nbytes: int,
        newly_rcvd: int | None,
        ecn_bytes: int,
        rtt: int | None,
        pend: int,
        restore: bool,
        now: int,
    ) -> None:
        """An ACK: ``npkts`` packets (``nbytes``) acknowledged for the first time; ``newly_rcvd``
        nominal bytes the target newly received by its ACK_CC state (None: a plain ACK, count
        what it acknowledged); ``ecn_bytes`` reported ECN-CE marked; ``rtt`` a valid sample less
        the service time, or None; the receiver window penalty ``pend``/``restore`` (§4.4)."""
        raise NotImplementedError

    def on_nack(self, code: int, ecn: bool, now: int) -> None:
        """Any NACK reached the PDC (before it is attributed to a packet)."""
        raise NotImplementedError

    def on_nack_packet(self, nbytes: int, ecn: bool, rtt: int | None, trimmed: bool, lasthop: bool, now: int) -> None:
        """A NACK for an outstanding packet of ``nbytes`` that will be resent (§4.1 ``on_nack``)."""
        raise NotImplementedError

    def on_loss(self, nbytes: int, timeout: bool, now: int) -> None:
        """A packet inferred lost and resent: by its RTO (``timeout``) or the SACK."""
        raise NotImplementedError

    def on_discarded(self, nbytes: int) -> None:
        """A packet the target discarded unseen (ROD go-back-N) is about to be resent."""
        raise NotImplementedError

    def on_done(self, npkts: int, nbytes: int = 0) -> None:
        """``npkts`` packets (``nbytes`` in all) left flight without an ACK (their PDC failed)."""
        raise NotImplementedError

    def snapshot(self) -> dict[str, Any]:
        """Current figures (tools, tests, the event log)."""
        raise NotImplementedError


class ReceiverCc:
    """The receiver side of a credit algorithm (RCCC's credit pacer, §4.5), one per FEP: told
    each CC request's credit target and arrival, it paces cumulative grants to the senders'
    CCCs (``key`` = (peer, CCC ID)); ``route`` is where a sender's grants go (its PDC). A base
    class, as :class:`SenderCc`."""

    def note_target(
        self, key: Hashable, target: int, now: int, route: object = None, rx: int = 0, blocked: bool = False
    ) -> int | None:
        """A credit target arrived (``blocked``: in a CREDIT_REQ); an int: the whole target was
        granted already (a grant was lost), repeat this cumulative grant."""
        raise NotImplementedError

    def note_arrival(self, key: Hashable, core_trim: bool, now: int, ce: bool = False) -> None:
        raise NotImplementedError

    def add_demand(self, key: Hashable, nbytes: int, now: int) -> None:
        raise NotImplementedError

    def forget(self, key: Hashable) -> None:
        raise NotImplementedError

    def deadline(self) -> int | None:
        """When the next grant is due, or None."""
        raise NotImplementedError

    def poll(self, now: int) -> list[tuple[Hashable, object, int]]:
        """The grants due at ``now``: ``(key, route, cumulative grant)``."""
        raise NotImplementedError


class CcAlgorithm:
    """One algorithm of a CCC; subclass and override what it reacts to (module docstring).

    ``can_send`` answers for this algorithm alone: the CCC sends when every algorithm allows.
    Sizes are nominal bytes. Class attributes say what the CCC needs to know about it."""

    #: the event-log and snapshot name
    name = "base"
    #: a credit algorithm (RCCC): the CCC sends CC requests carrying :meth:`credit_target`, and
    #: the first packet of a new PDC may go without credit (:meth:`uet.cc.ccc.Ccc.may_open`)
    credit_based = False
    #: wants one PROBE CP after the CCC's first feedback (§4.3.6; honoured with ``base_rtt_probe``)
    base_rtt_probe = False

    def __init__(self, cfg: CcConfig, now: int = 0, log: Log | None = None) -> None:
        """One instance per CCC, created at ``now`` with the FEP's ``cfg``; ``log`` receives
        ``{"ev": "cc", "algo": name, ...}`` records (uet.eventlog)."""
        self.cfg = cfg
        self._log = log

    def can_send(self, size: int, now: int) -> bool:
        return True

    def on_send(self, size: int, now: int) -> None:
        """A packet of nominal ``size`` went (first transmission or resend)."""

    def ack_request(self, size: int = 0) -> bool:
        """Ask for an ACK on the packet of ``size`` about to go."""
        return False

    def deadline(self, now: int) -> int | None:
        """When this algorithm lets a blocked sender go without any packet arriving, or None."""
        return None

    def window(self) -> float | None:
        """The congestion window in nominal bytes, if it keeps one (caps the credit target)."""
        return None

    def on_ack(
        self, newly_rcvd: int, ecn: bool, rtt: int | None, now: int, pend: int = 0, restore: bool = False
    ) -> None:
        """An ACK: ``newly_rcvd`` nominal bytes reached the target, ``ecn`` when some were
        marked, an RTT sample (or None), the receiver window penalty (§4.4)."""

    def on_ack_bytes(self, newly_rcvd: int, ecn_bytes: int, now: int) -> None:
        """The same ACK in bytes: of ``newly_rcvd``, ``ecn_bytes`` were ECN-CE marked (an
        algorithm that needs the marked *fraction*, like DCTCP, uses this)."""

    def on_nack(self, size: int, rtt: int | None, trimmed: bool, lasthop: bool, credit: bool, now: int) -> None:
        """A NACKed packet of ``size`` leaves flight to be resent; ``credit``: the CCC also runs
        a credit algorithm (a last-hop trim is then the receiver's business, §4.5)."""

    def on_inferred_loss(self, size: int, now: int) -> None:
        """RTO or SACK-inferred loss of a packet of ``size``, to be resent."""

    def on_abandon(self, size: int) -> None:
        """A packet of ``size`` left flight without a congestion signal."""

    # -- credit (RCCC) ---------------------------------------------------------------------------

    def set_backlog(self, nbytes: int) -> None:
        """Nominal bytes the CCC's PDCs have waiting."""

    def credit_target(self, cwnd: float | None) -> int:
        """The cumulative credit target, capped by ``cwnd`` when a window algorithm runs too."""
        return 0

    def credit_request_due(self, now: int) -> bool:
        return False

    def on_request_sent(self, now: int) -> None:
        """A CREDIT_REQ went (or was due and could not go)."""

    def on_grant(self, grant: int, now: int) -> None:
        """A cumulative grant arrived."""

    def snapshot(self) -> dict[str, Any]:
        return {}


#: builds one algorithm instance for a new CCC: ``factory(cfg, now, log)`` (a subclass itself)
AlgorithmFactory = Callable[[CcConfig, int, Log | None], CcAlgorithm]
