"""How datagrams leave a FEP: the :class:`Link` seam, the direct UDP link, the IP-protocol-253
link, the fabric link, opening a link by name, and the impairment shim."""

from uet.link.base import DSCP_CONTROL, DSCP_DATA, Link, ReceiveCallback, tos
from uet.link.direct import DirectLink, LinkError, loopback_addresses
from uet.link.fabric import ECN_LASTHOP, ECN_TRIMMED, FabricLink, fa_mac
from uet.link.impair import Impairment, ImpairmentConfig
from uet.link.select import LINK_MODES, open_link

__all__ = [
    "DSCP_CONTROL",
    "DSCP_DATA",
    "DirectLink",
    "ECN_LASTHOP",
    "ECN_TRIMMED",
    "FabricLink",
    "Impairment",
    "ImpairmentConfig",
    "LINK_MODES",
    "Link",
    "LinkError",
    "ReceiveCallback",
    "loopback_addresses",
    "open_link",
    "fa_mac",
    "tos",
]
