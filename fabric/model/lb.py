"""Choosing one of several equal-cost egress ports (§8.7).

Modes:

* ``ecmp``: CRC-32 (zlib) over the 13-byte 5-tuple followed by the 4-byte big-endian seed (the
  switch id unless configured), passed through MurmurHash3's 32-bit finaliser (:func:`mix32`),
  modulo the number of next hops. The UDP source port is the UET entropy, so a sender that
  changes its entropy per packet sprays through a hashing switch. **Decision**: the finaliser is
  there because a CRC is affine over GF(2): for two switches the CRCs of one tuple differ by a
  constant that does not depend on the tuple, so with a power-of-two fan-out a pod spine would
  re-pick the very bits its leaf picked with, and every packet a leaf sent to spine s would leave
  spine s by one uplink (hash polarisation: a k-ary fat tree then used k/2 of its (k/2)² core
  switches for one sprayed flow, and a permutation of 2 MB flows took ≈ 2.5 × its ideal time,
  issue 11). Hardware avoids this with per-tier hash functions; htsim salts a non-linear hash.
* ``flowlet``: per flow, keep the egress and the time of the flow's last packet; a gap longer than
  δ starts a new flowlet, whose egress is the hash of the tuple and the flowlet number.
* ``spray_rr``: round robin over the next hops of the group, one counter per group (htsim's
  periodic re-permutation is left out: with equal-cost paths it changes nothing on average).
* ``spray_random``: uniform choice per packet from the switch's seeded generator.
* ``adaptive``: the next hop with the fewest queued frames (egress bytes of all classes divided by
  one maximum frame), ties broken at random.

Only UET is sprayed (§8.7, §1.2): RoCE (UDP 4791) and other traffic fall back to ``ecmp`` in every
per-packet mode and in ``flowlet`` mode, so a RoCE QP keeps one path and never sees reordering —
unless ``LbConfig.spray_all`` forces every packet through the mode (§9.2's negative control).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from typing import Final

from uet.fabric.model.config import LbConfig
from uet.fabric.model.frames import flow_key, flow_tuple, is_uet, seed_key
from uet.fabric.model.port import Packet, Port

#: a C function as a Final name: the compiled build keeps it in a C static (an imported name is a
#: look-up in the module's globals at every call)
crc32: Final = zlib.crc32


def mix32(h: int) -> int:
    """MurmurHash3's 32-bit finaliser ``fmix32``: a bijection whose output bits each depend
    non-linearly on every input bit, so hashes of one tuple under two seeds are unrelated.

    Each product ``h × C mod 2³²`` is taken in 16-bit halves of ``h`` and ``C`` (``h_lo × C_lo +
    (h_hi × C_lo + h_lo × C_hi) · 2¹⁶``): every factor is below 2¹⁶ and no intermediate exceeds
    2⁵⁰, so the compiled build multiplies machine integers (it takes a product of a factor of
    2³⁰ or more, and any 64-bit one, as Python longs, allocated)."""
    h ^= h >> 16
    lo = h & 0xFFFF
    h = (lo * 0xCA6B + (((h >> 16) * 0xCA6B + lo * 0x85EB) << 16)) & 0xFFFFFFFF
    h ^= h >> 13
    lo = h & 0xFFFF
    h = (lo * 0xAE35 + (((h >> 16) * 0xAE35 + lo * 0xC2B2) << 16)) & 0xFFFFFFFF
    return h ^ (h >> 16)


class LoadBalancer:
    """Per-switch load-balancing state."""

    def __init__(self, cfg: LbConfig, switch_id: int, rng: random.Random) -> None:
        self.cfg = cfg
        self.seed = (switch_id if cfg.seed is None else cfg.seed).to_bytes(4, "big")
        #: the seed's share of the ECMP hash: ``crc32(tuple + seed) == pkt.fcrc ^ key``
        #: (frames.flow_key)
        self.key = seed_key(self.seed)
        self.rng = rng
        self.modes = [cfg.per_tc.get(tc, cfg.mode) for tc in range(8)]
        self.spray_all = cfg.spray_all
        self._rr: dict[tuple[int, ...], int] = {}
        self._flowlets: dict[bytes, tuple[int, int, int]] = {}

    def ecmp_index(self, tup: bytes, n: int) -> int:
        """Index of the next hop ECMP picks for the 13-byte tuple among ``n``."""
        return mix32(crc32(tup + self.seed)) % n

    def choose_for(
        self, group: Sequence[int], ports: Sequence[Port], frame: bytes | bytearray, ip: int, tc: int, now: int
    ) -> int:
        """:meth:`choose` for the IPv4 packet at ``ip`` of ``frame``: the flow tuple is read only
        when the mode hashes it (a sprayed UET packet needs none)."""
        mode = self.modes[tc]
        sprayable = self.spray_all or is_uet(frame, ip)
        if mode == "spray_rr" or mode == "spray_random" or mode == "adaptive":
            if sprayable:
                return self.choose(group, ports, b"", tc, True, now)
        return self.choose(group, ports, flow_tuple(frame, ip), tc, sprayable, now)

    def choose_pkt(self, group: Sequence[int], ports: Sequence[Port], pkt: Packet, tc: int, now: int) -> int:
        """:meth:`choose_for` for a packet a switch holds. ECMP (the default mode) hashes the
        flow tuple once per packet: the tuple never changes from hop to hop, and CRC-32 is
        affine for messages of one length, so ``crc32(tuple + seed) == flow_key(tuple) ^
        seed_key(seed)`` (:func:`~uet.fabric.model.frames.flow_key`) — the packet keeps its
        tuple's key and each switch hashes it with one XOR of its own (the same port as
        :meth:`choose`).

        ``spray_rr`` for a packet it sprays (the mode of ``uet-bench sim``) is :meth:`choose`'s
        round robin written out: what ``choose_for`` → ``choose`` do for it (no flow tuple read,
        the group's turn taken and advanced), without their two calls per hop.
        ``tests/test_fabric_lb.py`` checks the two from random states."""
        mode = self.modes[tc]
        if mode != "ecmp":
            if mode == "spray_rr" and len(group) > 1 and (self.spray_all or is_uet(pkt.frame, pkt.ip)):
                key = tuple(group)
                i = self._rr.get(key, 0)
                self._rr[key] = (i + 1) % len(group)
                return group[i]
            return self.choose_for(group, ports, pkt.frame, pkt.ip, tc, now)
        c = pkt.fcrc
        if c < 0:
            c = pkt.fcrc = flow_key(pkt.frame, pkt.ip)
        h = c ^ self.key
        h ^= h >> 16  # mix32, inlined (one call per hop)
        lo = h & 0xFFFF
        h = (lo * 0xCA6B + (((h >> 16) * 0xCA6B + lo * 0x85EB) << 16)) & 0xFFFFFFFF
        h ^= h >> 13
        lo = h & 0xFFFF
        h = (lo * 0xAE35 + (((h >> 16) * 0xAE35 + lo * 0xC2B2) << 16)) & 0xFFFFFFFF
        return group[(h ^ (h >> 16)) % len(group)]

    def choose(
        self, group: Sequence[int], ports: Sequence[Port], tup: bytes, tc: int, sprayable: bool, now: int
    ) -> int:
        """The egress port for a packet of class ``tc`` with flow tuple ``tup``."""
        n = len(group)
        if n == 1:
            return group[0]
        mode = self.modes[tc]
        if mode == "ecmp" or not sprayable:
            return group[mix32(crc32(tup + self.seed)) % n]
        if mode == "spray_rr":
            key = tuple(group)
            i = self._rr.get(key, 0)
            self._rr[key] = (i + 1) % n
            return group[i]
        if mode == "spray_random":
            return group[self.rng.randrange(n)]
        if mode == "adaptive":
            return self._least_loaded(group, ports)
        # flowlet
        ent = self._flowlets.get(tup)
        if ent is not None and now - ent[1] <= self.cfg.flowlet_ns and ent[0] in group:
            self._flowlets[tup] = (ent[0], now, ent[2])
            return ent[0]
        fid = 0 if ent is None else ent[2] + 1
        port = group[mix32(crc32(tup + self.seed + fid.to_bytes(4, "big"))) % n]
        self._flowlets[tup] = (port, now, fid)
        return port

    def _least_loaded(self, group: Sequence[int], ports: Sequence[Port]) -> int:
        best: list[int] = []
        best_q = -1
        for p in group:
            port = ports[p]
            q = sum(port.qbytes) // port.max_frame
            if best_q < 0 or q < best_q:
                best, best_q = [p], q
            elif q == best_q:
                best.append(p)
        return best[0] if len(best) == 1 else best[self.rng.randrange(len(best))]
