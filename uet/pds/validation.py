"""Address validation and anti-amplification for one FEP's PDS (sans-I/O).

The spec notes are silent on reflection: a PDS target answers a SYN from any source address at
once (an ACK, maybe with read data, then CLEAR_REQs, CLOSE_REQs and NACKs), so one forged 56-byte
READ request drew ~87 KB toward the address it claimed (1,550×, issue 29 item 8) and every forged
control packet 8–13 replies (item 9). The rule here follows QUIC (RFC 9000 §8.1):

- **Verified addresses.** An address is *verified* once it proved that it receives what this
  FEP sends: a non-SYN PDS packet from it names one of our PDCs held with it by the PDCID we
  chose at random and sent only to it (in an ACK or a CLEAR_REQ); an ACK naming one of our
  initiator PDCs proves it too. An honest initiator proves itself with the first packet it sends
  after our first ACK; as it may have nothing more to send, the ACKs of a PDC not yet proven
  carry ``REQ_CLEAR`` (uet.pds.target ``_send_ack``), and when a reply must wait for the proof
  (below) a 16-byte CLEAR_REQ asks for it in its place; a conforming initiator answers either with
  a CLEAR naming the PDCID (§2.7, §2.11; ours does so even before the ACK that establishes its
  PDC arrived).
  An address the owner sends to (``submit`` of a message, RUDI or UUD, but not read data
  answering a request, ``reply=True``) is verified by that choice. A verification is as strong as
  the 16-bit PDCID: a source whose proofs name a wrong PDC ``proof_strikes`` times can no longer
  prove anything while its entry lives (TSS makes the proof cryptographic: a forged packet never
  opens).
- **Budget of an unverified source.** Everything sent to an unverified address counts against
  what arrived from it: at most one datagram per datagram received and at most ``amp_factor``
  (3) × its bytes; on top, a token bucket per source (``unverified_reply_rate`` per second,
  ``unverified_reply_burst``) and one for all unverified sources together
  (``unverified_total_rate``). RUDI responses, which have no handshake to verify with, count
  only against the one-per-datagram rule (a RUDI READ response is at most one payload); RCCC
  CREDIT grants, which the credit scheduler paces and which only ask the source to send, count
  against the bytes and the rate limits but not the one-per-datagram rule.
- **Held, not lost.** A datagram over the budget that belongs to a PDC with that source (an
  ACK, which may carry read data, or read data sent as requests) waits, at most
  ``unverified_held`` per source and ``4 × unverified_pdcs`` in all, and leaves at once when the
  source proves itself; other replies (NACKs, control packets: a CREDIT is cumulative, a
  CLEAR_REQ or CLOSE_REQ is asked again) are dropped. The proof request is the one reply that
  may go beyond the one-per-datagram count, ``max_clear_req`` (5) times per source at most and
  within the 3× bytes: a lost ask or a lost CLEAR must not strand an honest initiator that has
  nothing left to send (its request was acknowledged, its read data waits here).
- **Bounded state.** Budgets live in an LRU of ``unverified_sources`` entries (an evicted
  source's held datagrams are dropped, its budget starts again at zero); verified addresses in
  an LRU of ``verified_sources``. Target PDCs of unverified sources are capped per source
  (``unverified_pdcs_per_source``, later SYNs are dropped without reply) and in all
  (``unverified_pdcs``: the oldest unverified PDC makes way), so a SYN flood cannot fill the PDC
  table an honest peer needs (item 10); an idle unverified PDC is freed silently instead of
  asking its unreachable initiator to close.
- **Cheap rejection, established traffic first** (item 10). A source holding its cap is *muted*:
  :meth:`SourceGuard.screen` takes its SYNs for new PDCs out of a received batch before any
  decoding or state (one set lookup per datagram while some source is muted, nothing otherwise),
  so a flood costs a list pass and one counter per batch, and the batch's other datagrams — an
  established PDC's traffic — go on as if it were not there. New PDCs of all unverified sources
  together are also rate-limited (``unverified_pdc_rate`` / ``unverified_pdc_burst``): a flood from
  many spoofed sources, each under its cap, buys at most that many PDCs and SES messages a
  second; verified peers are never limited. The spec notes are silent on rates: the bursts
  (``unverified_pdc_burst`` = ``unverified_pdcs``, ``unverified_total_burst`` = 64 replies for
  each) are sized so an honest incast of as many first contacts as the unproven-PDC cap is
  admitted at once — an incast is every sender's first contact together — and a flood gets the
  burst once, then the rates (``PdsConfig``).

Counters: ``amp_held``, ``amp_dropped``, ``amp_released``, ``amp_proof_req``, ``verified``,
``proof_strikes``, ``drop_unverified_syn``, ``drop_unverified_pdc_rate``, ``unverified_pdc_evicted``,
``unverified_pdc_idle``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from uet.pds._aliases import _A_CLR, _CT_CREDIT, _CT_REQ_CLEAR, _M32, _SYN
from uet.pds.config import PdsConfig
from uet.wire.pds import CONTROL, AckFlag, PdsType

__all__ = ["SourceBudget", "SourceGuard"]

#: PDS types whose datagram names a PDC in bytes 8–11 (SPDCID, DPDCID): RUD/ROD requests (with
#: and without CC), ACK / ACK_CC / ACK_CCX, NACK / NACK_CCX, control
_REQ_TYPES: Final = (PdsType.RUD_REQ, PdsType.ROD_REQ, PdsType.RUD_CC_REQ, PdsType.ROD_CC_REQ)
_ACK_TYPES: Final = frozenset((PdsType.ACK, PdsType.ACK_CC, PdsType.ACK_CCX))
_PDC_TYPES: Final = frozenset((*_REQ_TYPES, *_ACK_TYPES, PdsType.NACK, PdsType.NACK_CCX, PdsType.CONTROL))
#: what waits for the proof when over the budget: ACKs and requests (return data)
_HELD_TYPES: Final = frozenset((*_ACK_TYPES, *_REQ_TYPES))
#: the PDS types whose flags may carry SYN (requests and control packets)
_SYN_TYPES: Final = frozenset((*_REQ_TYPES, PdsType.CONTROL))
_RUDI_RESPONSE: Final = int(PdsType.RUDI_RESP)
#: the ``req`` bits of an ACK's flags (REQ_CLEAR, REQ_CLOSE)
_ACK_REQ_BITS: Final = int(AckFlag.REQ_CLEAR | AckFlag.REQ_CLOSE)
_CONTROL: Final = int(PdsType.CONTROL)
#: the PDS types whose SYN opens a target PDC (RUD/ROD requests, with and without CC)
_NEW_PDC_TYPES: Final = frozenset(_REQ_TYPES)


class SourceBudget:
    """What one unverified source sent and was sent, and what waits for its proof."""

    __slots__ = ("rx_pkts", "rx_bytes", "tx_pkts", "tx_bytes", "tokens", "t_last", "strikes", "held", "pdcs", "asks")

    def __init__(self, burst: int, now: int) -> None:
        self.rx_pkts = 0
        self.rx_bytes = 0
        self.tx_pkts = 0
        self.tx_bytes = 0
        self.tokens = float(burst)
        self.t_last = now
        self.strikes = 0
        self.held: list[tuple[Any, ...]] = []
        #: this source's unverified target PDCs (local PDCIDs)
        self.pdcs: set[int] = set()
        #: proof requests sent beyond the one-per-datagram count (at most ``max_clear_req``)
        self.asks = 0


class SourceGuard:
    """The verified-address table and the budgets of unverified sources (module docstring).

    Owned by :class:`uet.pds.core.PdsCore`; ``count`` is its counter function."""

    def __init__(self, config: PdsConfig, count: Callable[..., None]) -> None:
        self.cfg = config
        self._count = count
        # the limits read per reply and per datagram of an unverified source, kept here: the
        # compiled build reads its own fields natively, a field of the configuration generically
        self._amp = config.amp_factor
        self._reply_burst = config.unverified_reply_burst
        self._reply_rate = config.unverified_reply_rate
        self._total_burst = config.unverified_total_burst
        self._total_rate = config.unverified_total_rate
        self._per_source = config.unverified_pdcs_per_source
        #: verified addresses (LRU: insertion order, refreshed on proof)
        self.verified: dict[str, None] = {}
        #: unverified sources heard from (LRU)
        self.budgets: dict[str, SourceBudget] = {}
        #: unverified target PDCs, oldest first: local PDCID -> peer address
        self.unproven: dict[int, str] = {}
        self._held = 0
        self._tokens = float(config.unverified_total_burst)
        self._t_last = 0
        #: unverified sources holding ``unverified_pdcs_per_source`` PDCs (:meth:`screen`)
        self.muted: set[str] = set()
        self._pdc_tokens = float(config.unverified_pdc_burst)
        self._pdc_t = 0

    # -- verification ------------------------------------------------------------------------------

    def trust(self, addr: str) -> None:
        """``addr`` is verified: proved it receives, or the owner chose to send to it."""
        v = self.verified
        if addr in v:
            return
        v[addr] = None
        if len(v) > self.cfg.verified_sources:
            del v[next(iter(v))]

    def check_proof(self, data: bytes, src: str, pdc: Any) -> list[tuple[Any, ...]] | None:
        """A datagram from unverified ``src``: does it prove receipt? ``pdc`` is the PDC its
        DPDCID names (or None). Returns the held datagrams to send when ``src`` became verified,
        else None. Counts a strike for a non-SYN PDC packet that names a wrong PDC."""
        t = data[0] >> 3
        if len(data) < 12 or t not in _PDC_TYPES or (t in _SYN_TYPES and data[1] & _SYN):
            return None
        b = self.budgets.get(src)
        if pdc is not None and pdc.peer == src and pdc.rpdcid in (0, data[8] << 8 | data[9]):
            if b is not None and b.strikes >= self.cfg.proof_strikes:
                return None
            return self.verify(src)
        if b is not None:
            b.strikes += 1
            self._count("proof_strikes")
        return None

    def verify(self, src: str) -> list[tuple[Any, ...]]:
        """``src`` proved it receives: trust it; returns the datagrams held for it."""
        self.trust(src)
        self._count("verified")
        self.muted.discard(src)
        b = self.budgets.pop(src, None)
        if b is None:
            return []
        for p in b.pdcs:
            self.unproven.pop(p, None)
        held = b.held
        self._held -= len(held)
        if held:
            self._count("amp_released", len(held))
        return held

    # -- budgets -----------------------------------------------------------------------------------

    def credit(self, src: str, n: int, now: int) -> None:
        """A datagram of ``n`` bytes arrived from unverified ``src``."""
        bs = self.budgets
        b = bs.get(src)
        if b is None:
            b = bs[src] = SourceBudget(self.cfg.unverified_reply_burst, now)
            if len(bs) > self.cfg.unverified_sources:
                self._forget(next(iter(bs)))
        b.rx_pkts += 1
        b.rx_bytes += n

    def _forget(self, src: str) -> None:
        self.muted.discard(src)
        b = self.budgets.pop(src)
        self._held -= len(b.held)
        if b.held:
            self._count("amp_dropped", len(b.held))

    def _take(self, b: SourceBudget, n: int, rudi: bool, now: int, paced: bool = False) -> bool:
        """Charge one reply of ``n`` bytes to ``b`` if its budget and the rate limits allow
        (``paced``: an RCCC grant, outside the one-per-datagram count)."""
        if b.tx_pkts >= b.rx_pkts and not paced:
            return False
        if rudi:
            b.tx_pkts += 1
            return True
        if b.tx_bytes + n > self._amp * b.rx_bytes:
            return False
        dt = now - b.t_last
        if dt > 0:
            b.tokens = min(float(self._reply_burst), b.tokens + dt * self._reply_rate / 1e9)
            b.t_last = now
        dt = now - self._t_last
        if dt > 0:
            self._tokens = min(float(self._total_burst), self._tokens + dt * self._total_rate / 1e9)
            self._t_last = now
        if b.tokens < 1 or self._tokens < 1:
            return False
        b.tokens -= 1
        self._tokens -= 1
        if not paced:
            b.tx_pkts += 1
        b.tx_bytes += n
        return True

    def filter(self, out: list[tuple[Any, ...]], pdcs: dict[int, Any], now: int) -> list[tuple[Any, ...]]:
        """The datagrams of ``out`` that may leave now; the rest are held or dropped (module
        docstring). Datagrams to verified addresses pass. When something is held for a source,
        the proof is asked for: ``REQ_CLEAR`` on an ACK of this flush to it, else a CLEAR_REQ."""
        verified = self.verified
        budgets = self.budgets
        keep: list[tuple[Any, ...]] = []
        held_for: dict[str, SourceBudget] = {}
        last_ack: dict[str, int] = {}  # destination -> index in ``keep`` of its last target ACK
        for item in out:
            d, dst = item[0], item[1]
            if dst in verified:
                keep.append(item)
                continue
            t = d[0] >> 3
            pdc = pdcs.get(d[8] << 8 | d[9]) if t in _PDC_TYPES and len(d) >= 12 else None
            b = budgets.get(dst)
            paced = t == _CONTROL and ((d[0] & 7) << 1 | d[1] >> 7) == _CT_CREDIT
            if b is not None and self._take(b, len(d), t == _RUDI_RESPONSE, now, paced):
                if t in _ACK_TYPES and pdc is not None and pdc.role == "target":
                    last_ack[dst] = len(keep)
                keep.append(item)
                continue
            # ACKs and requests (read data) wait; control packets and NACKs are dropped: a CREDIT
            # is cumulative, a CLEAR_REQ or CLOSE_REQ is asked again, a NACK answers a packet
            own = pdc is not None and pdc.peer == dst and t in _HELD_TYPES
            if own and b is not None and len(b.held) < self.cfg.unverified_held and self._held < self._held_cap():
                b.held.append(item)
                self._held += 1
                self._count("amp_held")
                held_for[dst] = b
            else:
                self._count("amp_dropped")
        for dst, b in held_for.items():
            i = last_ack.get(dst)
            if i is not None and not keep[i][0][1] & _ACK_REQ_BITS:
                d = keep[i][0]
                keep[i] = (d[:1] + bytes((d[1] | _A_CLR,)) + d[2:], *keep[i][1:])
                self._count("amp_proof_req")
            else:
                self._proof_request(dst, b, pdcs, keep, now)
        return keep

    def _held_cap(self) -> int:
        return 4 * self.cfg.unverified_pdcs

    def _proof_request(
        self, dst: str, b: SourceBudget, pdcs: dict[int, Any], keep: list[tuple[Any, ...]], now: int
    ) -> None:
        """Something waits for ``dst`` and no ACK of this flush can ask for the proof: a 16-byte
        CLEAR_REQ from one of its target PDCs does, within the byte budget and the rate limits.
        When the one-per-datagram count is spent (the first ask or the initiator's CLEAR was
        lost, and the initiator waits for nothing PDS would resend), it may still ask
        ``max_clear_req`` times per source, paced by the retransmissions of what waits."""
        tp = next((p for i in b.pdcs if (p := pdcs.get(i)) is not None and p.role == "target"), None)
        if tp is None:
            return
        extra = b.tx_pkts >= b.rx_pkts  # the count is spent: one of the few asks beyond it
        if extra and b.asks >= self.cfg.max_clear_req:
            return
        hdr = CONTROL.encode((_CONTROL, _CT_REQ_CLEAR, 0, 0, 0, tp.lpdcid, tp.rpdcid, (tp.rx_base - 1) & _M32))
        if self._take(b, len(hdr), False, now, extra):
            b.asks += extra
            keep.append((hdr, dst, self.cfg.control_entropy))
            self._count("amp_proof_req")

    # -- target PDCs of unverified sources -----------------------------------------------------------

    def admit_pdc(self, src: str, now: int) -> tuple[bool, int | None]:
        """May a SYN from unverified ``src`` create a target PDC? ``(ok, evict)``: ``evict`` is
        the local PDCID of the oldest unverified PDC to free first (the total cap), or None."""
        b = self.budgets.get(src)
        if b is None:  # (credit() runs first; an entry evicted meanwhile has no budget)
            return False, None
        if len(b.pdcs) >= self._per_source:
            return False, None
        cfg = self.cfg
        dt = now - self._pdc_t
        if dt > 0:
            refill = self._pdc_tokens + dt * cfg.unverified_pdc_rate / 1e9
            self._pdc_tokens = min(float(cfg.unverified_pdc_burst), refill)
            self._pdc_t = now
        if self._pdc_tokens < 1:
            self._count("drop_unverified_pdc_rate")
            return False, None
        self._pdc_tokens -= 1
        if len(self.unproven) >= self.cfg.unverified_pdcs:
            return True, next(iter(self.unproven))
        return True, None

    def at_cap(self, src: str) -> bool:
        """``src`` (unverified) holds all the target PDCs it may (:meth:`admit_pdc` would refuse)."""
        b = self.budgets.get(src)
        return b is not None and len(b.pdcs) >= self._per_source

    def add_pdc(self, src: str, lpdcid: int) -> None:
        b = self.budgets.get(src)
        if b is not None:
            b.pdcs.add(lpdcid)
            self.unproven[lpdcid] = src
            if len(b.pdcs) >= self._per_source:
                self.muted.add(src)

    def drop_pdc(self, lpdcid: int) -> None:
        """A target PDC was freed."""
        src = self.unproven.pop(lpdcid, None)
        if src is not None:
            b = self.budgets.get(src)
            if b is not None:
                b.pdcs.discard(lpdcid)
                self.muted.discard(src)

    def screen(self, items: list[tuple[Any, ...]], tbp: dict[tuple[str, int], Any]) -> list[tuple[Any, ...]]:
        """``items`` without the SYNs of muted sources for PDCs they do not hold (``tbp``: the
        target PDCs by ``(peer, SPDCID)``): dropped before any decoding or state, counted once
        per batch as ``drop_unverified_syn``. Call only while :attr:`muted` is not empty. The
        same rule as the per-datagram check in ``PdsCore.receive_datagram`` (which a datagram
        given alone takes), written here for a whole batch: a flood costs a list pass."""
        muted = self.muted
        keep = [
            it
            for it in items
            if it[1] not in muted
            or not (d := it[0])[1] & _SYN
            or (d[0] >> 3) not in _NEW_PDC_TYPES
            or len(d) < 12
            or (it[1], d[8] << 8 | d[9]) in tbp
        ]
        n = len(items) - len(keep)
        if n:
            self._count("drop_unverified_syn", n)
        return keep
