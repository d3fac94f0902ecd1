"""DSCP and ECN of each datagram a FEP sends (wire-format.md §1.3).

Requests (the data class) go with DSCP 0 (CS0) and, when the FEP is ECN-capable, ECT(0); ACKs,
NACKs and control packets go with DSCP 46 (EF, TOS byte 0xB8) and Not-ECT, so they overtake
queued data and are never CE-marked. The class is read from the PDS type in the datagram's first
byte (before TSS sealing: a sealed datagram's first byte is the TSS type for every class).

On receive, a switch that trimmed a packet rewrote its DSCP (behaviour.md §3.2: 7 cut inside the
fabric, 5 at the last hop, :mod:`uet.wire.frame`); :data:`RX_ECN` turns a received TOS byte into
the ``ecn`` value the links hand up, trim marks or-ed in, so a FEP on a plain UDP or IP link
answers a trimmed packet as §3.3 says (NACK ``TRIMMED`` / ``TRIMMED_LASTHOP``, never delivered).
"""

from __future__ import annotations

from uet.wire.frame import DSCP_TRIM_FABRIC, DSCP_TRIM_LASTHOP
from uet.wire.pds import PdsType

__all__ = ["DATA_TYPES", "DSCP_CONTROL", "DSCP_DATA", "RX_ECN", "classes", "is_data"]

#: DSCP of UET requests / data packets (CS0, wire-format.md §1.3).
DSCP_DATA = 0
#: DSCP of ACK, NACK and control packets (EF, wire-format.md §1.3): TOS byte 0xB8.
DSCP_CONTROL = 46

#: PDS types that carry requests (the data class); every other type is ACK/NACK/control.
DATA_TYPES = frozenset(
    {
        PdsType.TSS,
        PdsType.RUD_REQ,
        PdsType.ROD_REQ,
        PdsType.RUDI_REQ,
        PdsType.UUD_REQ,
        PdsType.RUD_CC_REQ,
        PdsType.ROD_CC_REQ,
    }
)

#: ``is_data[first_byte >> 3]``: whether a datagram of that PDS type is in the data class.
is_data: tuple[bool, ...] = tuple(t in DATA_TYPES for t in range(32))


def classes(ecn_capable: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(dscp, ecn)`` tables indexed by PDS type (``first_byte >> 3``) for a FEP that marks its
    requests ECT(0) (``ecn_capable``) or nothing."""
    data_ecn = 2 if ecn_capable else 0
    dscp = tuple(DSCP_DATA if d else DSCP_CONTROL for d in is_data)
    ecn = tuple(data_ecn if d else 0 for d in is_data)
    return dscp, ecn


def _rx_ecn(tos: int) -> int:
    dscp = tos >> 2
    trim = 0x100 if dscp in (DSCP_TRIM_FABRIC, DSCP_TRIM_LASTHOP) else 0  # uet.fep.core.ECN_TRIMMED
    return (tos & 3) | trim | (0x200 if dscp == DSCP_TRIM_LASTHOP else 0)  # ECN_LASTHOP


#: ``RX_ECN[tos]``: the ECN bits of a received TOS byte with the trim marks of its DSCP or-ed in
#: (:data:`uet.fep.core.ECN_TRIMMED`, :data:`~uet.fep.core.ECN_LASTHOP`; module docstring)
RX_ECN: tuple[int, ...] = tuple(_rx_ecn(t) for t in range(256))
