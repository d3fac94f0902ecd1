"""Opening a FEP's link by name: the ``--link direct|ip`` option of the tools (architecture.md
"Link modes").

* ``direct``: UET over UDP port 4793 through the host stack (:class:`~uet.link.direct.DirectLink`);
  its UDP checksum follows ``EndpointConfig.udp_checksum`` (zero with the CRC trailer, §2.16).
* ``ip``: UET directly over IP protocol 253 with the entropy header
  (:class:`~uet.link.ip.IpLink`; root or CAP_NET_RAW).

The fabric link needs a switch port and is opened by the tools that start one.
"""

from __future__ import annotations

from typing import Any

from uet.fep.config import FepConfig
from uet.link.base import Link
from uet.link.direct import DirectLink, LinkError
from uet.link.impair import Impairment
from uet.wire.net import UET_IP_PROTO, UET_UDP_PORT

__all__ = ["LINK_MODES", "open_link", "udp_checksum_on"]

#: the link modes a tool can open by name
LINK_MODES = ("direct", "ip")


def udp_checksum_on(config: FepConfig) -> bool:
    """Whether the direct link computes the UDP checksum (``FepConfig.udp_checksum``; ``auto``:
    zero with the CRC trailer, behaviour.md §2.16)."""
    if config.udp_checksum == "auto":
        return config.data_protect != "crc"
    return config.udp_checksum == "on"


def open_link(
    mode: str,
    address: str,
    *,
    config: FepConfig | None = None,
    port: int = UET_UDP_PORT,
    peer_port: int | None = None,
    proto: int = UET_IP_PROTO,
    impairment: Impairment | None = None,
    **extra: Any,
) -> Link:
    """Open the ``mode`` link of the FEP at ``address`` on the running loop (``port`` /
    ``peer_port`` for ``direct``, ``proto`` for ``ip``). Raises :class:`LinkError`."""
    cfg = config or FepConfig()
    if mode == "direct":
        return DirectLink(
            address,
            port,
            peer_port=peer_port,
            impairment=impairment,
            rcvbuf=cfg.rcvbuf,
            sndbuf=cfg.sndbuf,
            max_batch=cfg.max_batch,
            read_ecn=cfg.ecn_capable if cfg.ecn_feedback is None else cfg.ecn_feedback,
            udp_checksum=udp_checksum_on(cfg),
            **extra,
        )
    if mode == "ip":
        from uet.link.ip import IpLink

        return IpLink(
            address,
            proto=proto,
            impairment=impairment,
            rcvbuf=cfg.rcvbuf,
            sndbuf=cfg.sndbuf,
            max_batch=cfg.max_batch,
            **extra,
        )
    raise LinkError(f"unknown link {mode!r} (choose from {', '.join(LINK_MODES)})")
