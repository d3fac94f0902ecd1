"""How datagrams leave a FEP: the :class:`Link` seam, the direct UDP link and the impairment shim."""

from uet.link.base import DSCP_CONTROL, DSCP_DATA, Link, ReceiveCallback, tos
from uet.link.direct import DirectLink, LinkError, loopback_addresses
from uet.link.impair import Impairment, ImpairmentConfig

__all__ = [
    "DSCP_CONTROL",
    "DSCP_DATA",
    "DirectLink",
    "Impairment",
    "ImpairmentConfig",
    "Link",
    "LinkError",
    "ReceiveCallback",
    "loopback_addresses",
    "tos",
]
