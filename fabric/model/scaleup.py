"""The NIC of a GPU in a server with a scale-up domain (NVLink/NVSwitch class), issue 26.

A GPU's NIC has its Ethernet port (port 0, to its rail leaf) and one port into the server's
scale-up switch (the last port). Which one a frame takes is decided here by address arithmetic,
never by a table that grows with the fabric:

* to a GPU of the same server: the scale-up port — GPU → GPU traffic inside a server never
  touches the Ethernet fabric;
* with cross-rail scale-up (PXN, ``rail_only``): to a GPU on another rail, the scale-up port too;
  the scale-up switch hands the frame to this server's GPU on the destination's rail, whose NIC
  puts it on its rail (:meth:`GpuNic.ingress`), as NCCL's PXN moves data over NVLink to the GPU
  on the peer's rail before it goes out;
* everything else: the Ethernet port, as for any host.

A rail is read from the destination address: hosts of the rail kinds are 10.p.l.(h+1) with leaf
l = group · rails + rail (:mod:`uet.fabric.topology`), so the rail is l mod rails.
"""

from __future__ import annotations

import copy
from typing import Final

from uet.fabric.model.config import BufferConfig, SwitchConfig
from uet.fabric.model.frames import l3_offset
from uet.fabric.model.nic import HostNic
from uet.fabric.model.port import Port

from uet.errors import DecodeError
from uet.wire.net import EtherType

ETH_IPV4: Final = int(EtherType.IPV4)

__all__ = ["GpuNic", "scale_up_config"]


def scale_up_config(cfg: SwitchConfig) -> SwitchConfig:
    """The scale-up switch's configuration, from the fabric's: the same traffic classes and DSCP
    map, but lossless without PFC, ECN or trimming — no class limit, a buffer that never fills
    (**decision**: NVLink-class links are credit-flow-controlled and never drop; the queue a
    fan-in builds waits in the switch here instead of in the senders, for the same delay)."""
    out = copy.deepcopy(cfg)
    for tc in out.tcs:
        tc.limit, tc.ecn, tc.lossless = None, None, False
    out.pfc.enabled = False
    out.trim.enabled = False
    out.watchdog.enabled = False
    out.buffer = BufferConfig(size=1 << 40, reserve=0)
    return out


class GpuNic(HostNic):
    """A host NIC with a scale-up port; see the module docstring.

    ``mates``: the IPv4 addresses (as integers) of the GPUs of this server, itself included;
    ``rail``/``rails``: this GPU's rail and the rail count; ``pxn``: cross-rail frames go over the
    scale-up domain. The scale-up port must be the NIC's last port."""

    def setup(self, address: int, mates: frozenset[int], rail: int, rails: int, pxn: bool) -> None:
        self.address = address
        self.mates = mates
        self.rail = rail
        self.rails = rails
        self.pxn = pxn
        self.scale_up_port = len(self.ports) - 1
        #: frames this NIC put on its rail for a GPU of its server (PXN proxy)
        self.proxied = 0

    def port_for(self, dst: int) -> int:
        """The port a frame to IPv4 address ``dst`` (an integer) leaves by (module docstring)."""
        if dst in self.mates or (self.pxn and ((dst >> 8) & 0xFF) % self.rails != self.rail):
            return self.scale_up_port
        return 0

    def _plane_port(self, buf: bytearray, ip: int) -> Port | None:
        k = self.port_for(int.from_bytes(buf[ip + 16 : ip + 20], "big"))
        if k:
            return self.ports[k]
        port = self.port
        if port.down:
            self._lost("link_down", len(buf))
            return None
        return port

    def ingress(self, _port: int, frame: bytearray, now: int) -> None:
        """A frame from the scale-up switch for another host is a PXN frame: out on the rail."""
        if _port == self.scale_up_port:
            try:
                et, ip, _ = l3_offset(frame)
            except DecodeError:
                et = ip = 0
            dst = int.from_bytes(frame[ip + 16 : ip + 20], "big") if et == ETH_IPV4 else self.address
            if dst != self.address:
                self.proxied += 1
                self.send(frame, now)
                return
        super().ingress(_port, frame, now)
