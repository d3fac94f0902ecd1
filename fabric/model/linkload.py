"""Per-link flow accounting: which flows each directed link carried, and how much of their data.

Issue 11 (the single-path permutation rows): with one entropy per flow the tail FCT is set by the
most loaded link, so a run must say how loaded its links were before its congestion control can
be judged. A :class:`LinkLoad` shared by every switch of a :class:`~uet.fabric.model.Fabric`
records, for each directed link (a host NIC's uplink, or one switch egress port),

* the **flows** that crossed it: a flow is a (source IPv4, destination IPv4) pair;
* the **distinct data-frame bytes** it carried: wire bytes (frame, minimum-size padding,
  preamble, FCS and gap) of UET RUD/ROD requests (plain or CC, wire-format.md §5.1–5.2) that were
  *delivered* untrimmed, each PSN of a PDC counted once — a retransmission that reaches the target
  again, or a trimmed copy, adds nothing. Each delivered PSN is charged to every link of the path
  its delivered copy took, so for a flow on one path every link of that path carries the flow's
  whole data once, and for a sprayed flow the links share it.

How (**decision**, to keep the simulator's speed, a tracked figure): a packet carries the links
it crossed packed into one integer (``Packet.path`` — an int, so no object per packet for the
garbage collector to track): the first switch sets it to its ingress link's id (from 1,
:attr:`LinkLoad.link_bits` wide) under a marker bit (``1 << link_bits``), and every switch that
sends it on appends the index of its egress port (``path << port_bits | port index``,
:attr:`LinkLoad.port_bits` wide): a port index says the link, since the switch is the far end of
the link before it. So a path stays a machine-sized integer (under 63 bits, which the compiled
build keeps native) on every fabric of the model: 34 bits for a 6-link path at 1,024 hosts, 42
at 8,192, where one link id per hop took 78 and 96 (issue 28). The last switch, as it sends a
data frame to its host, hands the frame and its path to :meth:`LinkLoad.deliver`, which keeps one
bit per PSN per PDC (a bytearray rebased on the PDC's first PSN seen) and one counter per (flow,
path); paths are unpacked into link ids once, in :meth:`per_link`.
A trimmed stub carries no path. Frames other than UET data requests (ACKs, NACKs, control, RoCE,
TSS-sealed frames whose PDS header is ciphertext) are not counted. A PSN more than 4,096 packets
older than the first one seen for its PDC cannot be told apart from a new one and is counted.

:meth:`LinkLoad.summary` turns that into the figures a run reports: flows and bytes per link, the
histogram of flows per link, and the **route bound** — for each link, its distinct data bytes at
its line rate plus the least time the last of those bytes still needs to reach the target and be
acknowledged (:meth:`LinkLoad.route_bound_ns`), maximised over links: a lower bound on the tail
FCT that no congestion control can beat (for an incast the receiver's downlink; for a sprayed
permutation about one flow).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Final, final

from uet.fabric.model.port import MIN_FRAME

from uet.wire.net import UET_UDP_PORT
from uet.wire.pds import PdsType

if TYPE_CHECKING:
    from uet.fabric.model.port import Port

__all__ = ["LinkInfo", "LinkLoad"]

#: PDS types that carry a PSN at byte 4 and SES data (wire-format.md §5.1, §5.2)
_DATA_TYPES: Final = frozenset(
    int(t) for t in (PdsType.RUD_REQ, PdsType.ROD_REQ, PdsType.RUD_CC_REQ, PdsType.ROD_CC_REQ)
)
#: the same as a bit mask over the 5-bit type field (a test per frame without a set look-up)
_DATA_MASK: Final = sum(1 << t for t in _DATA_TYPES)
_PORT_HI: Final = UET_UDP_PORT >> 8
_PORT_LO: Final = UET_UDP_PORT & 0xFF
#: PSNs kept below the first one seen of a PDC (sprayed packets arrive out of order)
_BEFORE: Final = 1 << 12
#: an ACK on the way back: a minimum frame (60 bytes + 24 of preamble, FCS and gap)
_ACK_WIRE: Final = MIN_FRAME


@dataclass(frozen=True)
class LinkInfo:
    """One directed link: its name (``sender>receiver``: a host, or ``switch:port``), rate (bit/s),
    one-way propagation delay (ns) and the per-frame wire overhead of its sending port."""

    name: str
    rate_bps: int
    delay_ns: int
    wire_overhead: int


@final
class _Window:
    """The PSNs of one PDC delivered so far: bit ``i`` of ``bits`` is PSN ``base + i`` (mod 2³²)."""

    __slots__ = ("base", "bits", "dst")

    def __init__(self, base: int, bits: bytearray, dst: int) -> None:
        self.base = base
        self.bits = bits
        #: the PDC's destination IPv4 (its key in :attr:`LinkLoad._seen` holds the source and SPDCID)
        self.dst = dst


class LinkLoad:
    """The accounting of one fabric (module docstring). Links are numbered by the fabric
    (:meth:`add_link`); :meth:`deliver` is called by the last switch of every delivered packet."""

    __slots__ = ("links", "link_bits", "port_bits", "_next", "_seen", "_seen_more", "_paths")

    def __init__(self) -> None:
        #: the links by id − 1
        self.links: list[LinkInfo] = []
        #: width of the first link's id in a packed path (module docstring)
        self.link_bits = 1
        #: width of one egress port index in a packed path
        self.port_bits = 1
        #: by link id: the ids of the links leaving the node that link arrives at, by port index
        self._next: list[tuple[int, ...]] = [()]
        #: a PDC (source IPv4 and SPDCID as one int, ``source << 16 | spdcid``: a machine-sized
        #: int, where one with the destination too took 80 bits) → its delivered PSNs, for the
        #: first destination seen with that key; a PDC of another destination with the same
        #: source and SPDCID, if any, in :attr:`_seen_more` by (source, destination, SPDCID)
        self._seen: dict[int, _Window] = {}
        self._seen_more: dict[tuple[int, int, int], _Window] = {}
        #: (flow as an int, packed path) → [distinct data wire bytes, frames, smallest frame]
        self._paths: dict[tuple[int, int], list[int]] = {}

    def add_link(self, name: str, port: Port) -> int:
        """Number a directed link whose sending end is ``port``; returns its id (from 1)."""
        self.links.append(LinkInfo(name, port.rate_bps, port.delay_ns, port.wire_overhead))
        self.link_bits = len(self.links).bit_length()
        self._next.append(())
        return len(self.links)

    def set_next(self, link: int, out: Sequence[int]) -> None:
        """Link ``link`` arrives at a node whose ports send on the links ``out`` (by port index):
        what :meth:`unpack` follows. Called once every link is numbered (the widths are final)."""
        self._next[link] = tuple(out)
        self.port_bits = max(self.port_bits, (len(out) - 1).bit_length())

    @property
    def mark(self) -> int:
        """The marker bit above the first link's id in a packed path (module docstring)."""
        return 1 << self.link_bits

    def pack(self, links: Sequence[int]) -> int:
        """The packed path of the link ids ``links`` (each leaving the node the one before it
        arrives at), as the switches build it hop by hop: the inverse of :meth:`unpack`."""
        path = self.mark | links[0]
        for prev, li in pairwise(links):
            path = (path << self.port_bits) | self._next[prev].index(li)
        return path

    def unpack(self, path: int) -> list[int]:
        """The link ids of a packed path, first link first."""
        pbits, lbits = self.port_bits, self.link_bits
        hops = (path.bit_length() - lbits - 1) // pbits
        link = (path >> (hops * pbits)) & ((1 << lbits) - 1)
        out = [link]
        mask = (1 << pbits) - 1
        for k in range(hops - 1, -1, -1):
            link = self._next[link][(path >> (k * pbits)) & mask]
            out.append(link)
        return out

    # -- the data path ------------------------------------------------------------------------------

    def deliver(self, frame: bytearray, ip: int, path: int, wire_overhead: int, dst: int, src: int = -1) -> None:
        """The untrimmed frame whose IPv4 header is at ``ip`` goes to its host after crossing the
        links of the packed ``path``, the last one with ``wire_overhead`` bytes per frame: charge
        it to them if it is a UET data request seen for the first time. ``dst``: its IPv4
        destination as an int (``Packet.dst``: not read again, a bytearray read costs the
        compiled build a generic call); ``src``: its IPv4 source as an int when the first switch
        read a UDP packet to the UET port without IP options (``Packet.uet_src``; -1: read here)."""
        if src >= 0:  # the IP header, its protocol and ports known: the PDS header follows
            off = ip + 28
        else:
            l4 = ip + ((frame[ip] & 15) << 2)
            if frame[ip + 9] != 17 or frame[l4 + 2] != _PORT_HI or frame[l4 + 3] != _PORT_LO:
                return
            off = l4 + 8
            a = ip + 12  # the source address byte by byte: no slice, no call, a machine-sized int
            src = (frame[a] << 24) | (frame[a + 1] << 16) | (frame[a + 2] << 8) | frame[a + 3]
        if len(frame) < off + 12 or not (_DATA_MASK >> (frame[off] >> 3)) & 1:
            return
        spdcid = (frame[off + 8] << 8) | frame[off + 9]
        psn = (frame[off + 4] << 24) | (frame[off + 5] << 16) | (frame[off + 6] << 8) | frame[off + 7]
        key = (src << 16) | spdcid
        ent = self._seen.get(key)
        if ent is None:
            ent = self._seen[key] = _Window((psn - _BEFORE) & 0xFFFFFFFF, bytearray((_BEFORE >> 3) + 64), dst)
        elif ent.dst != dst:
            more = self._seen_more.get((src, dst, spdcid))
            if more is None:
                more = self._seen_more[(src, dst, spdcid)] = _Window(
                    (psn - _BEFORE) & 0xFFFFFFFF, bytearray((_BEFORE >> 3) + 64), dst
                )
            ent = more
        i = (psn - ent.base) & 0xFFFFFFFF
        if i < 0x80000000:  # else older than the PDC's window: counted, as the docstring says
            bits = ent.bits
            byte = i >> 3
            if byte >= len(bits):
                bits.extend(bytes(max(byte + 1 - len(bits), len(bits))))
            m = 1 << (i & 7)
            if bits[byte] & m:
                return
            bits[byte] |= m
        n = len(frame)
        wire = (n if n > MIN_FRAME else MIN_FRAME) + wire_overhead
        flow = (src << 32) | dst
        fkey = (flow, path)
        acc = self._paths.get(fkey)
        if acc is None:
            self._paths[fkey] = [wire, 1, wire]
        else:
            acc[0] = acc[0] + wire  # (not +=: the compiled build makes that a generic in-place add)
            acc[1] = acc[1] + 1
            if wire < acc[2]:
                acc[2] = wire

    # -- results ------------------------------------------------------------------------------------

    def _rest_ns(self, path: Sequence[int], frame: int) -> float:
        """The least time from the moment the last bit of a ``frame``-byte data frame left any
        link of ``path`` to its sender learning of it: every link's propagation out and back, a
        minimum ACK frame per link, and store-and-forward of the frame on every other link (the
        largest such term is left out, so the figure holds whichever link it left)."""
        t = 0.0
        worst = 0.0
        for li in path:
            lk = self.links[li - 1]
            ser = (frame + lk.wire_overhead) * 8e9 / lk.rate_bps
            t += 2 * lk.delay_ns + (_ACK_WIRE + lk.wire_overhead) * 8e9 / lk.rate_bps + ser
            worst = max(worst, ser)
        return t - worst

    def per_link(self) -> dict[int, dict[str, Any]]:
        """Link id → ``{"flows": set of flows (source and destination IPv4 as one int), "bytes":
        distinct data wire bytes, "frames": n, "rest_ns": least time after the link's last bit}``
        for every link that carried data."""
        out: dict[int, dict[str, Any]] = {}
        for (flow, packed), (nbytes, frames, small) in self._paths.items():
            path = self.unpack(packed)
            rest = self._rest_ns(path, small - self.links[path[-1] - 1].wire_overhead)
            for li in path:
                d = out.get(li)
                if d is None:
                    d = out[li] = {"flows": set(), "bytes": 0, "frames": 0, "rest_ns": rest}
                d["flows"].add(flow)
                d["bytes"] += nbytes
                d["frames"] += frames
                if rest < d["rest_ns"]:
                    d["rest_ns"] = rest
        return out

    def route_bound_ns(self, per_link: dict[int, dict[str, Any]] | None = None) -> tuple[float, int | None]:
        """(the route bound in ns, the link that sets it; None when no data was delivered): the
        largest over links of distinct data bytes at line rate + the least time after them."""
        pl = self.per_link() if per_link is None else per_link
        best, at = 0.0, None
        for li, d in pl.items():
            t = d["bytes"] * 8e9 / self.links[li - 1].rate_bps + d["rest_ns"]
            if t > best:
                best, at = t, li
        return best, at

    def summary(self, fct_s: dict[tuple[str, str], float] | None = None, *, top: int = 8) -> dict[str, Any]:
        """The JSON-ready report of a run: ``max_flows`` on one link, ``histogram`` (flows on a
        link → links; links that carried no data left out), ``route_bound_us`` and its
        ``bottleneck`` link, the ``top`` links by data bytes, and ``links``: every link that
        carried data as ``[name, flows, bytes]``. With ``fct_s`` ((source IP, destination IP) →
        completion time in s) the bottleneck's flows' FCTs are summarised (``bottleneck_fct``:
        min, max, max/min): whether the flows sharing the worst link finish together."""
        pl = self.per_link()
        hist: dict[int, int] = {}
        for d in pl.values():
            n = len(d["flows"])
            hist[n] = hist.get(n, 0) + 1
        bound, at = self.route_bound_ns(pl)
        ranked = sorted(pl.items(), key=lambda kv: (-kv[1]["bytes"], -len(kv[1]["flows"]), kv[0]))

        def row(li: int, d: dict[str, Any]) -> dict[str, Any]:
            return {
                "link": self.links[li - 1].name,
                "flows": len(d["flows"]),
                "bytes": d["bytes"],
                "busy_us": round(d["bytes"] * 8e6 / self.links[li - 1].rate_bps, 3),
            }

        out: dict[str, Any] = {
            "max_flows": max(hist, default=0),
            "histogram": {str(k): hist[k] for k in sorted(hist)},
            "route_bound_us": round(bound / 1e3, 3),
            "bottleneck": None if at is None else row(at, pl[at]),
            "top": [row(li, d) for li, d in ranked[:top]],
            "links": [[self.links[li - 1].name, len(d["flows"]), d["bytes"]] for li, d in sorted(pl.items())],
        }
        if at is not None and fct_s is not None:
            fcts = sorted(fct_s[k] for k in (_flow_ips(f) for f in pl[at]["flows"]) if k in fct_s)
            if fcts:
                out["bottleneck_fct"] = {
                    "flows": len(fcts),
                    "min_us": round(fcts[0] * 1e6, 1),
                    "max_us": round(fcts[-1] * 1e6, 1),
                    "max_over_min": round(fcts[-1] / fcts[0], 4) if fcts[0] > 0 else None,
                }
        return out


def _flow_ips(flow: int) -> tuple[str, str]:
    b = flow.to_bytes(8, "big")
    return ".".join(map(str, b[:4])), ".".join(map(str, b[4:8]))
