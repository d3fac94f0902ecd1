"""Options shared by the two-process tools (``uet-bench pair``/``rtt``, ``uet-demo``), each
checked before any process starts (tools/cli.py: one line, exit status 2).

* ``--payload`` is checked by building the :class:`uet.EndpointConfig` it goes into, so the
  limits are the dataclass's own (1..65451 bytes, :mod:`uet.ses.message`);
* ``--addresses`` must be two distinct IP addresses this host can bind;
* ``--port``: when left at the default (4793) and that port is taken on either address, a free
  port both addresses can bind is chosen and said on stderr; a port given explicitly and taken is
  a usage error naming the address.
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from uet.tools.cli import UsageError, float_arg, int_arg, probability, size_arg

__all__ = [
    "CRC_NOTE",
    "DEFAULT_PORT",
    "MAX_PAIR_SIZE",
    "PairOptions",
    "add_impairment",
    "add_transfer_options",
    "check_transfer",
    "data_protect",
    "endpoint_config",
    "pair_notes",
    "size_list",
    "transfer_options",
]

DEFAULT_PORT = 4793

#: largest ``pair --size``: the data is held in memory (sent copy, receive buffer) several times
MAX_PAIR_SIZE = 1 << 30


@dataclass
class PairOptions:
    """Options of ``uet-bench pair`` (and of the demo, which reuses the transfer)."""

    size: int = 64 << 20
    payload: int = 4096
    mode: str = "rud"
    loss: float = 0.0
    reorder: float = 0.0
    dup: float = 0.0
    corrupt: float = 0.0
    seed: int = 1
    addresses: tuple[str, str] = ("127.0.0.2", "127.0.0.3")
    port: int = 4793
    message_size: int | None = None
    timeout: float = 600.0
    rto_ms: float | None = None
    profile: str | None = None
    counters: bool = False
    raw: bool = True
    progress: bool = False
    uvloop: bool = True
    tss: bool = False
    tamper: float = 0.0
    rotate: bool = False
    receive: str = "posted"
    rounds: int = 1
    secure: bool = False  # internal: this transfer runs inside the secure domain
    tss_keys: tuple[str, ...] = ()  # internal: the run's keys (hex), handed to the receiver process
    data_protect: str | None = None  # --data-protect none|crc (tss is --tss); None: by --corrupt
    pcap: str | None = None  # uet-demo --pcap DIR: each endpoint's frames (tools/capture_options.py)
    eventlog: str | None = None  # uet-demo --eventlog FILE
    capture_max: int = 256 << 20


def pair_notes(opts: PairOptions, rec: dict[str, Any] | None = None) -> dict[str, str]:
    """What a reader of a pair result must know (issue 15 items 16 and 19): UUD has no flow
    control, so a receiver slower than the sender loses datagrams even on a perfect link
    (61-79 % delivered between two processes here) — with ``rec``, how many messages arrived;
    ``--corrupt`` without TSS runs with the CRC-32C trailer (:func:`data_protect`)."""
    notes = {}
    if opts.mode == "uud":
        arrived = ""
        if rec is not None and "messages" in rec:
            arrived = f": {rec.get('messages_delivered', 0)} of {rec['messages']} messages arrived"
        notes["uud_note"] = (
            f"UUD is best effort, no flow control or retransmission (behaviour.md §2.15){arrived}; "
            "datagrams a slower receiver cannot take are lost, even with no impairment"
        )
    if data_protect(opts) == "crc" and opts.data_protect is None and not opts.tss:
        notes["integrity_note"] = CRC_NOTE
    return notes


#: the one line said when ``--corrupt`` turns the CRC-32C trailer on (issue 15 item 16)
CRC_NOTE = (
    "--corrupt without --tss: CRC-32C data protection turned on (data_protect crc, behaviour.md §2.16) "
    "so corrupted packets are dropped and retransmitted, never delivered; --tss authenticates instead"
)


def data_protect(opts: PairOptions) -> str:
    """The endpoints' ``data_protect`` for a transfer: ``"crc"`` when corruption is asked for
    without TSS — with nothing checking the payload, 21 of 38 such runs delivered wrong bytes as
    success (issue 15 item 16), so the safe choice is made for the user and said in one line;
    else ``"none"`` (TSS, when on, is the integrity check; CRC and TSS exclude each other). The
    plaintext companion transfer of a ``--tss`` run is corrupted like the secure one, so it gets
    the trailer too (it delivered wrong bytes and made the run fail, issue 29 item 15)."""
    if opts.data_protect is not None and not opts.tss:
        return opts.data_protect  # chosen with --data-protect
    return "crc" if opts.corrupt > 0 and not opts.secure else "none"


def size_list(hi: int) -> Callable[[str], list[int]]:
    """An argparse type: comma-separated sizes (``4KiB,64KiB``), each 1 to ``hi`` bytes, at least one."""
    conv = size_arg(1, hi)

    def parse(text: str) -> list[int]:
        sizes = [conv(x) for x in text.split(",") if x.strip()]
        if not sizes:
            raise argparse.ArgumentTypeError(f"no sizes in {text!r}")
        return sizes

    return parse


def add_transfer_options(p: argparse.ArgumentParser, *, addresses: str = "127.0.0.2,127.0.0.3") -> None:
    """``--payload --mode --seed --addresses --port --no-uvloop --rto-ms --json``."""
    p.add_argument("--payload", type=size_arg(1), default=4096, help="payload bytes per packet (default 4096)")
    p.add_argument("--mode", choices=["rud", "rod", "rudi", "uud"], default="rud", help="PDS delivery mode")
    p.add_argument("--seed", type=int_arg(0), default=1, help="seed of the data and the impairment (default 1)")
    p.add_argument("--addresses", default=addresses, metavar="A,B", help=f"sender,receiver addresses ({addresses})")
    p.add_argument(
        "--port",
        type=int_arg(1, 65535),
        default=None,
        help=f"UET UDP port of both FEPs (default {DEFAULT_PORT}, or a free one when that is taken)",
    )
    p.add_argument("--no-uvloop", action="store_true", help="use the default asyncio loop")
    p.add_argument(
        "--rto-ms",
        type=float_arg(0.0, open_lo=True),
        default=None,
        help="PDS retransmission timeout in ms (default: the endpoint's)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_peer_options(p: argparse.ArgumentParser) -> None:
    """``--peer ADDR`` (the client side against a running ``uet-peer``, :mod:`uet.tools.bench.peer`)
    and the link options, which must match the peer's; shared by ``pair`` and ``rtt``."""
    from uet.tools.cli import ip_address_arg
    from uet.tools.link_options import add_link_options

    p.add_argument(
        "--peer", metavar="ADDR", type=ip_address_arg, help="client side only, against a running uet-peer (bench_peer)"
    )
    add_link_options(p)


def add_impairment(p: argparse.ArgumentParser, *, loss: float = 0.0, reorder: float = 0.0, dup: float = 0.0) -> None:
    """``--loss --reorder --dup --corrupt``: probabilities in [0, 1] applied on transmit."""
    p.add_argument("--loss", type=probability, default=loss, metavar="P", help=f"drop probability (default {loss})")
    p.add_argument("--reorder", type=probability, default=reorder, metavar="P", help=f"reorder (default {reorder})")
    p.add_argument("--dup", type=probability, default=dup, metavar="P", help=f"duplicate (default {dup})")
    p.add_argument(
        "--corrupt",
        type=probability,
        default=0.0,
        metavar="P",
        help="corrupt one byte (default 0); without --tss this turns the CRC-32C trailer on",
    )


def endpoint_config(payload: int, message_size: int | None, seed: int, rto_ms: float | None) -> Any:
    """The :class:`uet.EndpointConfig` of a transfer; its own validation errors become usage
    errors (one line)."""
    from uet.endpoint import EndpointConfig

    try:
        cfg = EndpointConfig(payload_size=payload, max_message=max(64 << 20, message_size or 0), seed=seed)
        if rto_ms is not None:
            cfg = replace(cfg, pds=replace(cfg.pds, rto_ns=max(1, int(rto_ms * 1e6))))
    except (ValueError, TypeError, OverflowError) as e:
        raise UsageError(_config_message(e, payload)) from None
    except Exception as e:  # the project's errors (uet.errors.UetError) carry the reason
        from uet.errors import UetError

        if isinstance(e, UetError):
            raise UsageError(_config_message(e, payload)) from None
        raise
    return cfg


def _config_message(e: Exception, payload: int) -> str:
    text = str(e)
    if "payload_size" in text:
        return f"--payload {payload}: {text.replace('payload_size ' + str(payload) + ' ', '')}"
    return text


def _parse_addresses(text: str) -> tuple[str, str]:
    parts = [x.strip() for x in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise UsageError(f"--addresses {text!r}: give two addresses, sender,receiver (e.g. 127.0.0.2,127.0.0.3)")
    for a in parts:
        try:
            ipaddress.ip_address(a)
        except ValueError:
            raise UsageError(f"--addresses: {a!r} is not an IP address") from None
    if parts[0] == parts[1]:
        raise UsageError(f"--addresses: sender and receiver are both {parts[0]}; give two different addresses")
    return parts[0], parts[1]


def _bind(address: str, port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((address, port))
    except OSError:
        s.close()
        raise
    return s


def _free_port(a: str, b: str) -> int:
    for _ in range(50):
        s = _bind(a, 0)
        port: int = s.getsockname()[1]
        s.close()
        try:
            _bind(b, port).close()
            _bind(a, port).close()
        except OSError:
            continue
        return port
    raise UsageError(f"no UDP port is free on both {a} and {b}")


def _check_ports(a: str, b: str, port: int | None, prog: str) -> int:
    """The port both FEPs use (see the module docstring)."""
    want = DEFAULT_PORT if port is None else port
    for addr in (a, b):
        try:
            _bind(addr, 0).close()
        except OSError as e:
            raise UsageError(f"cannot use address {addr}: {e.strerror or e}") from None
    for addr in (a, b):
        try:
            _bind(addr, want).close()
        except OSError as e:
            if port is not None:
                raise UsageError(f"cannot bind {addr}:{want} ({e.strerror or e}); choose another --port") from None
            free = _free_port(a, b)
            sys.stderr.write(f"{prog}: UDP port {want} is taken on {addr}; using port {free}\n")
            return free
    return want


def check_transfer(ns: argparse.Namespace, prog: str) -> tuple[tuple[str, str], int, Any]:
    """Validate the shared options of a two-process transfer: (addresses, port, EndpointConfig)."""
    addresses = _parse_addresses(ns.addresses)
    cfg = endpoint_config(ns.payload, getattr(ns, "message_size", None), ns.seed, getattr(ns, "rto_ms", None))
    port = _check_ports(*addresses, ns.port, prog)
    return addresses, port, cfg


def transfer_options(ns: argparse.Namespace, prog: str, **more: Any) -> PairOptions:
    """The :class:`PairOptions` of a two-process command line: the shared transfer options
    (:func:`add_transfer_options`, checked by :func:`check_transfer`) and ``more`` fields."""
    (a, b), port, _cfg = check_transfer(ns, prog)
    return PairOptions(
        payload=ns.payload,
        mode=ns.mode,
        seed=ns.seed,
        addresses=(a, b),
        port=port,
        uvloop=not ns.no_uvloop,
        rto_ms=ns.rto_ms,
        **more,
    )
