"""The target's ACK builder (spec/behaviour.md §2.8, wire-format.md §5.3–§5.5): the header of an
ACK / ACK_CC / ACK_CCX from a target PDC's receive state.

aioquic builds its ACK frames apart from the loss recovery that reads them; here the sender's
side is :mod:`uet.pds.scoreboard` and this is the target's. An :class:`AckBuilder` (one per PDS
core, ``PdsCore._acks``) holds what the configuration fixes once — the format (``ack_format``,
``ack_on_ecn``: ACK_CCX carries the ECN-marked bytes), the advertised MPR, the layouts — and
encodes one header per call; *when* an ACK is due and what response it carries stays with the
target's ACK rule (uet.pds.target ``_send_ack``).

:func:`sack_window` places the SACK bitmap: bit 0 at CACK + 1, or, when the ACK names a PSN more
than 64 beyond CACK, the 64 PSNs ending at it (§2.8). It is a fast copy of
``uet.wire.pds.psns_to_sack`` (one subtraction per PSN instead of a signed difference);
``tests/test_pds_scoreboard.py`` proves the two equal.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final, Protocol

from uet.pds.config import PdsConfig
from uet.wire.pds import ACK, ACK_CC, ACK_CCX, ACK_PROBE, PdsType, psn_diff
from uet.wire.pdsfast import ack_cc_nscc, ack_ccx_nscc

_M32: Final = 0xFFFFFFFF
_M24: Final = 0xFFFFFF


def sack_window(rcvd: Collection[int], cack: int, hi: int) -> tuple[int, int]:
    """``(sack_psn_offset, bitmap)`` for the PSNs ``rcvd`` beyond ``cack``: the bitmap's bit 0 is
    CACK + 1 (offset 1), or ``hi − 63`` when ``hi`` (the PSN the ACK describes up to) lies more
    than 64 beyond CACK; PSNs outside the 64 are left out."""
    if not rcvd:
        return 1, 0
    base = (hi - 63) & _M32 if psn_diff(hi, cack) > 64 else (cack + 1) & _M32
    bm = 0
    for p in rcvd:
        i = (p - base) & _M32
        if i < 64:
            bm |= 1 << i
    return psn_diff(base, cack), bm


class AckedPdc(Protocol):
    """What an ACK header reads of the target PDC it comes from (``uet.pds.pdc.TargetPdc``)."""

    @property
    def lpdcid(self) -> int: ...

    @property
    def rpdcid(self) -> int: ...

    @property
    def rcvd(self) -> Collection[int]: ...

    @property
    def rcvd_bytes(self) -> int: ...

    @property
    def ecn_bytes(self) -> int: ...


class AckPending:
    """A target PDC's coalesced ACK (``TargetPdc.ack``, §2.8): what the next ACK names and
    carries, when it falls due, and the ECN-marked byte count the last ACK covered. The target's
    ACK rule (uet.pds.target ``_coalesce``) writes it; every ACK sent clears it (:meth:`sent`)."""

    __slots__ = ("deadline", "gen_count", "trigger", "flags", "rnh", "resp", "due", "ecn_acked")

    def __init__(self) -> None:
        #: when the ``ack_timer_ns`` flush falls due; None: no timer armed
        self.deadline: int | None = None
        #: packets counted towards ``ack_gen_trigger`` since the last ACK
        self.gen_count = 0
        #: the PSN the coalesced ACK names and its ACK flags
        self.trigger = 0
        self.flags = 0
        #: the SES response of ``trigger`` (next_hdr, bytes; 0 and empty for none), carried by the
        #: coalesced ACK that names it
        self.rnh = 0
        self.resp = b""
        #: queued in ``PdsCore._ack_dirty`` (built by datagrams_to_send)
        self.due = False
        #: the PDC's ECN-CE marked bytes (``TargetPdc.ecn_bytes``) when the last ACK left: an ACK
        #: carries ``m`` when it covers any marked bytes (uet.pds.target ``_send_ack``)
        self.ecn_acked = 0

    def sent(self) -> None:
        """An ACK left: it says everything the pending one would have said."""
        self.deadline = None
        self.due = False
        self.gen_count = 0
        self.rnh = 0
        self.resp = b""


class AckBuilder:
    """Encodes a target PDC's ACKs in the configured format (module docstring)."""

    __slots__ = ("plain", "ccx", "mpr", "_cc_probe", "_type", "per_pkt", "on_ecn", "trigger", "min_add")

    def __init__(self, cfg: PdsConfig) -> None:
        #: plain ACKs (``ack_format = "ack"``): no SACK, no CC state
        self.plain = cfg.ack_format == "ack"
        #: ACK_CCX with the ECN-marked bytes instead of ACK_CC (``ack_on_ecn`` off: the sender
        #: learns the marked bytes from the count, not from an ACK per mark)
        self.ccx = not cfg.ack_on_ecn
        #: the MPR advertised (§2.4, in units of 128 PSNs)
        self.mpr = min(255, max(1, cfg.mp_range // 128))
        #: the probe-answer layout (the other ACKs go through uet.wire.pdsfast)
        self._cc_probe = (ACK_CCX if self.ccx else ACK_CC)[(True, "nscc")]
        self._type = int(PdsType.ACK_CCX if self.ccx else PdsType.ACK_CC)
        # the ACK rule's fields (§2.8: ``ack_per_pkt``, ``ack_on_ecn``, ``ack_gen_trigger``,
        # ``ack_gen_min_pkt_add``), read for every accepted request (uet.pds.target ``_accept``):
        # kept here, where the compiled build reads them natively (a field of the interpreted
        # PdsConfig is a generic look-up there)
        self.per_pkt = cfg.ack_per_pkt
        self.on_ecn = cfg.ack_on_ecn
        self.trigger = cfg.ack_gen_trigger
        self.min_add = cfg.ack_gen_min_pkt_add

    def build(
        self,
        tp: AckedPdc,
        flags: int,
        rnh: int,
        off: int,
        cack: int,
        probe: bool,
        hi: int,
        service_us: int,
    ) -> bytes:
        """The header of an ACK from ``tp``: :meth:`build_from` of its IDs and receive state."""
        return self.build_from(
            tp.lpdcid, tp.rpdcid, tp.rcvd, tp.rcvd_bytes, tp.ecn_bytes, flags, rnh, off, cack, probe, hi, service_us
        )

    def build_from(
        self,
        lpdcid: int,
        rpdcid: int,
        rcvd: Collection[int],
        rcvd_bytes: int,
        ecn_bytes: int,
        flags: int,
        rnh: int,
        off: int,
        cack: int,
        probe: bool,
        hi: int,
        service_us: int,
    ) -> bytes:
        """The header of an ACK from the target PDC ``lpdcid`` (its peer's ``rpdcid``), which holds
        ``rcvd`` (the PSNs received beyond CACK), ``rcvd_bytes`` and ``ecn_bytes``: ``off`` the
        ACK_PSN offset (or a PROBE's opaque value with ``probe``), the SACK bitmap up to ``hi``,
        the named request's service time in µs (§4.2), the NSCC receive state (received bytes and
        packets; ECN-marked bytes in ACK_CCX), in 256-byte units with a 24-bit wrap. The PDC's
        fields come as arguments, read natively by its caller (uet.pds.target ``_send_ack``): a
        protocol's (:class:`AckedPdc`) are generic look-ups in the compiled build (issue 28)."""
        if self.plain:
            return (ACK_PROBE if probe else ACK).encode((int(PdsType.ACK), rnh, flags, off, cack, lpdcid, rpdcid))
        soff, bm = sack_window(rcvd, cack, hi) if rcvd else (1, 0)  # (nothing above CACK: no SACK)
        st = min(service_us, 0xFFFF)
        rb = ((rcvd_bytes + 255) >> 8) & _M24
        ooo = min(len(rcvd), 0xFFFF)
        xs = (((ecn_bytes + 255) >> 8) & _M24) << 40 if self.ccx else 0
        if not probe:  # the common case: uet.wire.pdsfast's copy of the codec, compiled
            if self.ccx:
                return ack_ccx_nscc(
                    self._type, rnh, flags, off, cack, lpdcid, rpdcid, 0, 0, self.mpr, soff, bm, st, 0, 0, rb,
                    ooo, xs,
                )  # fmt: skip
            return ack_cc_nscc(
                self._type, rnh, flags, off, cack, lpdcid, rpdcid, 0, 0, self.mpr, soff, bm, st, 0, 0, rb, ooo
            )
        if 0 <= off <= 0xFFFF:
            # a PROBE's answer: the same header but for bytes 2-3, the probe's opaque value
            # unsigned where the ACK_PSN offset is signed (the layouts' formats differ there
            # only), so the compiled copy packs the same 16 bits as the offset they read as; the
            # probe layout's generic codec, compiled on first use, cost about 1.3 M instructions
            # in a run that answers one base-RTT probe (issue 28)
            so = off - 0x10000 if off & 0x8000 else off
            if self.ccx:
                return ack_ccx_nscc(
                    self._type, rnh, flags, so, cack, lpdcid, rpdcid, 0, 0, self.mpr, soff, bm, st, 0, 0, rb,
                    ooo, xs,
                )  # fmt: skip
            return ack_cc_nscc(
                self._type, rnh, flags, so, cack, lpdcid, rpdcid, 0, 0, self.mpr, soff, bm, st, 0, 0, rb, ooo
            )
        v: tuple[int, ...] = (self._type, rnh, flags, off, cack, lpdcid, rpdcid, 0, 0, self.mpr, soff, bm, st, 0,
                              0, rb, ooo)  # fmt: skip
        return self._cc_probe.encode((*v, xs) if self.ccx else v)  # (a value out of range: its error)
