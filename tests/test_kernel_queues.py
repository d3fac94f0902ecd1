"""The switch process's kernel socket queues (fabric/kernel_queues.py): the one buffer of the live
fabric the model does not see, read from /proc/net/udp and reported in the switch summary and by
uet-run's CPU-starvation note."""

from __future__ import annotations

import os
import socket

import pytest
from uet.fabric.kernel_queues import KernelQueue, parse_proc_net_udp, read_udp_queues
from uet.fabric.profiles import load_topology
from uet.fabric.switch import FabricProcess, ProcessConfig

HEADER = (
    "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref "
    "pointer drops\n"
)


def line(sl: int, local: str, rx: int, drops: int) -> str:
    return (
        f"  {sl}: {local} 00000000:0000 07 00000000:{rx:08X} 00:00000000 00000000     0        0 1234 2 "
        f"0000000000000000 {drops}\n"
    )


def test_parse_reads_queue_and_drops_of_the_wanted_sockets_only() -> None:
    text = (
        HEADER
        + line(0, "0100007F:1F90", 0x1200, 7)  # 127.0.0.1:8080
        + line(1, "0100007F:1F91", 5, 0)  # 127.0.0.1:8081, not wanted
        + line(2, "00000000:12B9", 0, 3)  # 0.0.0.0:4793 answers for any address of its port
        + "  3: garbage\n"
        + line(4, "ZZ00007F:1F92", 1, 1)  # malformed address
    )
    got = parse_proc_net_udp(text, [("127.0.0.1", 8080), ("127.0.0.1", 4793), ("127.0.0.1", 9999)])
    assert got == {("127.0.0.1", 8080): KernelQueue(0x1200, 7), ("127.0.0.1", 4793): KernelQueue(0, 3)}
    assert parse_proc_net_udp("", [("127.0.0.1", 1)]) == {}


def test_read_without_proc_is_empty(tmp_path) -> None:
    assert read_udp_queues([("127.0.0.1", 1)], path=str(tmp_path / "absent")) == {}


needs_proc = pytest.mark.skipif(not os.path.exists("/proc/net/udp"), reason="the kernel has no /proc/net/udp")


def flood(port: tuple[str, int], n: int, size: int = 1000) -> None:
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _ in range(n):
            tx.sendto(bytes(size), port)
    finally:
        tx.close()


@needs_proc
def test_a_real_socket_reports_its_queue_then_its_drops() -> None:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)  # the kernel's minimum
        rx.bind(("127.0.0.1", 0))
        addr = rx.getsockname()
        assert read_udp_queues([addr]) == {addr: KernelQueue(0, 0)}
        flood(addr, 1)
        q = read_udp_queues([addr])[addr]
        assert q.rx_bytes > 0 and q.drops == 0
        n = 200
        flood(addr, n)
        q = read_udp_queues([addr])[addr]
        rx.setblocking(False)
        got = 0
        while True:
            try:
                rx.recv(2000)
            except BlockingIOError:
                break
            got += 1
        assert q.drops == n + 1 - got > 0  # every datagram was either queued or counted as dropped
    finally:
        rx.close()


@needs_proc
async def test_switch_summary_reports_frames_the_kernel_dropped_before_the_model_saw_them() -> None:
    fp = FabricProcess(load_topology("default"), ProcessConfig(rcvbuf=1))
    await fp.start()
    try:
        assert fp.summary()["kernel"] == {}  # nothing read yet
        n = 300
        flood(fp.ports[2], n)  # the loop never runs: nothing is read, the small queue overflows
        fp.close()  # reads the counters before the sockets go
        k = fp.summary()["kernel"]
        host = fp.fabric.hosts[2].name
        assert 0 < k["rx_drops"] < n and k["hosts"][host]["rx_drops"] == k["rx_drops"]
        assert list(k["hosts"]) == [host] and fp.summary()["io"].get("rx_frames", 0) == 0
    finally:
        fp.close()


def test_kernel_drops_are_loss_and_a_deep_socket_queue_is_starvation() -> None:
    """uet-run's note: frames the kernel dropped count as loss (retransmissions were not spurious),
    and both they and a deep socket queue are reported as queueing outside the model."""
    from uet.live.result import KERNEL_QUEUE_NOTE, cpu_starvation

    flows = [{"retransmits": 4}]
    clean = {"drops": 0, "trims": 0}
    dropped = {"flows": flows, "fabric": clean, "pacing": {}, "switch_kernel": {"rx_drops": 9, "rx_queue_max_bytes": 0}}
    note = cpu_starvation(dropped)
    assert note and "9 were dropped there, outside the model" in note and "spurious" not in note
    deep = {"rx_drops": 0, "rx_queue_max_bytes": KERNEL_QUEUE_NOTE}
    note = cpu_starvation({"flows": [{"retransmits": 0}], "fabric": clean, "pacing": {}, "switch_kernel": deep})
    assert note and f"up to {KERNEL_QUEUE_NOTE // 1024} KiB deep" in note
    shallow = {"rx_drops": 0, "rx_queue_max_bytes": KERNEL_QUEUE_NOTE - 1}
    calm = {"flows": [{"retransmits": 0}], "fabric": clean, "pacing": {}, "switch_kernel": shallow}
    assert cpu_starvation(calm) is None
