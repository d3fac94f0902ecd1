"""The link and data-protection options of the tools that run endpoints (``uet-peer``,
``uet-bench pair|rtt --peer``, ``uet-conformance``, ``uet-demo``): one definition, so every tool
spells them alike.

* ``--link direct|ip``: UET over UDP port 4793 (default) or directly over IP protocol 253 with
  the entropy header (wire-format.md §1.2; a raw socket: root or CAP_NET_RAW, else a one-line
  error, exit 2); ``--ip-proto N`` changes the protocol number.
* ``--data-protect none|crc|tss``: per-packet integrity (behaviour.md §2.16, spec
  ``UET_Data_Protect``): none, the CRC-32C trailer, or TSS (needs ``--keys``; the default when
  keys are given).
* ``--udp-checksum auto|on|off``: the UDP checksum of the direct link (``auto``: zero with the CRC
  trailer, §2.16; computed otherwise).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from uet.tools.cli import UsageError, int_arg

from uet.wire.net import UET_IP_PROTO

__all__ = ["add_link_options", "check_link_options", "link_config", "local_link_options"]


def add_link_options(p: argparse.ArgumentParser, *, data_protect: bool = True) -> None:
    """Add ``--link --ip-proto`` (and ``--data-protect --udp-checksum``) to ``p``."""
    from uet.link.select import LINK_MODES  # the socket links load only for a tool that offers them

    p.add_argument(
        "--link", choices=LINK_MODES, default="direct",
        help="direct: UET over UDP 4793 (default); ip: UET over IP protocol 253 (root or CAP_NET_RAW)",
    )  # fmt: skip
    p.add_argument(
        "--ip-proto", type=int_arg(1, 254), default=UET_IP_PROTO, metavar="N",
        help=f"with --link ip: the IP protocol number (default {UET_IP_PROTO})",
    )  # fmt: skip
    if data_protect:
        p.add_argument(
            "--data-protect", choices=("none", "crc", "tss"), default=None,
            help="per-packet integrity: none, crc (CRC-32C trailer) or tss (needs --keys; the default with keys)",
        )  # fmt: skip
        p.add_argument(
            "--udp-checksum", choices=("auto", "on", "off"), default="auto",
            help="UDP checksum of the direct link (auto: zero with --data-protect crc, computed otherwise)",
        )  # fmt: skip


def check_link_options(args: argparse.Namespace, *, keys: Any = None) -> None:
    """Raise :class:`UsageError` (one line, exit 2) for a combination that cannot run: the ip
    link without a raw socket, ``tss`` without keys, ``none``/``crc`` with keys."""
    if args.link == "ip":
        from uet.link.ip import raw_socket_error

        reason = raw_socket_error(args.ip_proto)
        if reason is not None:
            raise UsageError(reason)
    dp = getattr(args, "data_protect", None)
    if dp == "tss" and not keys:
        raise UsageError("--data-protect tss needs --keys (the secure domain's key file)")
    if dp in ("none", "crc") and keys:
        raise UsageError(f"--data-protect {dp} and --keys exclude each other (TSS protects every packet)")


def link_config(args: argparse.Namespace, cfg: Any) -> Any:
    """``cfg`` (an :class:`uet.EndpointConfig`) with the data protection and UDP checksum chosen;
    TSS itself comes from the security configuration the keys make."""
    dp = getattr(args, "data_protect", None)
    return replace(
        cfg,
        data_protect=dp if dp in ("crc", "tss") else cfg.data_protect,
        udp_checksum=getattr(args, "udp_checksum", "auto"),
    )


def local_link_options(ns: argparse.Namespace) -> None:
    """``uet-bench pair|rtt`` without ``--peer`` runs both ends on the direct link (their raw-UDP
    reference shares it); ``--link ip`` measures against a ``uet-peer --link ip`` (``--peer``)."""
    if ns.link != "direct":
        raise UsageError(f"--link {ns.link} runs against a uet-peer: add --peer ADDR")
