"""RoCE queue pairs on the fabric model in virtual time (a test driver, not the simulator).

Each host's QPs hand their datagrams to the host NIC as whole Ethernet/IPv4/UDP 4791 frames
(DSCP and ECN from the transmit record, UDP checksum 0, rocev2-and-fabric.md §1); frames the
fabric delivers are demultiplexed by destination QP with the IP ECN bits. The clock jumps to the
earliest deadline of the fabric and of every QP. Enough to check DCQCN and PFC behaviour against
a real switch model until the shared virtual-time engine takes RoCE endpoints.
"""

from __future__ import annotations

from collections.abc import Callable

from uet.fabric.model.fabric import Fabric
from uet.fabric.topology import Topology

from uet.roce import QpConfig, QueuePair
from uet.wire.build import build_frame
from uet.wire.net import ip_str


class RoceFabric:
    def __init__(self, topology: Topology, *, seed: int = 0) -> None:
        self.fabric = Fabric(topology, seed=seed)
        self.now = 0
        self.qps: dict[tuple[int, int], QueuePair] = {}  # (host, qpn) -> QP
        self._host_of: dict[int, int] = {}  # id(qp) -> host
        self._next_qpn = 0x100
        self.on_event: Callable[[int, QueuePair, object], None] | None = None
        #: time of every CNP each QP sent, by QPN (to check the notification point's hold-off)
        self.cnp_times: dict[int, list[int]] = {}

    def connect(self, h1: int, h2: int, config: QpConfig, *, seed: int = 0) -> tuple[QueuePair, QueuePair]:
        q1, q2 = self._next_qpn, self._next_qpn + 1
        self._next_qpn += 2
        a = QueuePair(self.fabric.host_ip(h1), q1, config=config, seed=seed)
        b = QueuePair(self.fabric.host_ip(h2), q2, config=config, seed=seed + 1)
        a.connect(b.address, q2, b.start_psn)
        b.connect(a.address, q1, a.start_psn)
        for h, qp in ((h1, a), (h2, b)):
            self.qps[(h, qp.qpn)] = qp
            self._host_of[id(qp)] = h
        return a, b

    def _flush(self, qp: QueuePair) -> None:
        h = self._host_of[id(qp)]
        for tx in qp.datagrams_to_send(self.now):
            if tx.data[0] == 0x81:
                self.cnp_times.setdefault(qp.qpn, []).append(self.now)
            frame = build_frame(
                tx.data,
                qp.address,
                tx.destination,
                entropy=tx.entropy,
                dport=4791,
                dscp=tx.dscp,
                ecn=tx.ecn,
                udp_checksum=False,
                src_mac=self.fabric.host_mac(h),
                dst_mac=self.fabric.gateway_mac(h),
            )
            self.fabric.inject(h, frame, self.now)
        if self.on_event is not None:
            while (e := qp.next_event()) is not None:
                self.on_event(self.now, qp, e)

    def run(self, until: int, tick: Callable[[int], None] | None = None) -> None:
        """Advance to ``until``; ``tick(now)`` runs after every step (workload hooks)."""
        if tick is not None:
            tick(self.now)
        for qp in self.qps.values():
            self._flush(qp)
        while True:
            ds = [t for t in (qp.get_timer() for qp in self.qps.values()) if t is not None]
            fd = self.fabric.next_deadline()
            if fd is not None:
                ds.append(fd)
            if not ds:
                return
            nxt = max(self.now, min(ds))
            if nxt > until:
                self.now = until
                return
            self.now = nxt
            for host, frame in self.fabric.poll(self.now):
                self._deliver(host, frame)
            for qp in self.qps.values():
                t = qp.get_timer()
                if t is not None and t <= self.now:
                    qp.handle_timer(self.now)
            if tick is not None:
                tick(self.now)
            for qp in self.qps.values():
                self._flush(qp)

    def _deliver(self, host: int, frame: bytes) -> None:
        if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17 or frame[36:38] != b"\x12\xb7":
            return
        total = int.from_bytes(frame[16:18], "big")
        data = frame[42 : 14 + total]
        qpn = int.from_bytes(data[5:8], "big")
        qp = self.qps.get((host, qpn))
        if qp is not None:
            qp.receive_datagram(bytes(data), self.now, source=ip_str(frame[26:30]), ecn=frame[15] & 3)
