"""How datagrams leave a FEP: the :class:`Link` seam, the direct UDP link, the fabric link and the impairment shim."""

from uet.link.base import DSCP_CONTROL, DSCP_DATA, Link, ReceiveCallback, tos
from uet.link.direct import DirectLink, LinkError, loopback_addresses
from uet.link.fabric import ECN_LASTHOP, ECN_TRIMMED, FabricLink, fa_mac
from uet.link.impair import Impairment, ImpairmentConfig

__all__ = [
    "DSCP_CONTROL",
    "DSCP_DATA",
    "DirectLink",
    "ECN_LASTHOP",
    "ECN_TRIMMED",
    "FabricLink",
    "Impairment",
    "ImpairmentConfig",
    "Link",
    "LinkError",
    "ReceiveCallback",
    "loopback_addresses",
    "fa_mac",
    "tos",
]
