"""The UET side of ``uet-bench pair``: the sending and the receiving :class:`uet.endpoint.Endpoint`
of one transfer, and the figures of a transfer (goodput, CPU per packet, retransmissions...).

RUDI carries only idempotent operations on idempotent-safe regions (behaviour.md §2.14: a
retransmitted send could be delivered twice, and a target refuses the rest with OP_VIOLATION).
So a RUDI transfer (``uet-bench pair --mode rudi``, ``uet-demo --modes rudi``) is RMA writes:
the receiver registers its buffer with ``IDEMPOTENT_SAFE | REMOTE_WRITE`` and hands the key to
the sender, which writes message ``i`` at offset ``i × message size`` with header data ``i``;
the receiver counts a message when its remote-write completion arrives. Other modes send
(tagged into posted receives, or untagged)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from uet.tools.bench.options import PairOptions, data_protect
from uet.tools.bench.procs import gather_within, pipe_recv
from uet.tools.bench.tss import rotate_half_way, security_config, tss_report

if TYPE_CHECKING:
    from uet.ses.message import Message

__all__ = ["impairment", "message_size", "pds_mode", "transfer_config", "uet_figures", "uet_receiver", "uet_sender"]


def transfer_config(opts: PairOptions) -> Any:
    from uet.endpoint import EndpointConfig

    cfg = EndpointConfig(
        payload_size=opts.payload,
        max_message=max(64 << 20, opts.message_size or 0),
        seed=opts.seed,
        data_protect=data_protect(opts),
    )
    if opts.rto_ms is not None:
        cfg = replace(cfg, pds=replace(cfg.pds, rto_ns=int(opts.rto_ms * 1e6)))
    return cfg


def impairment(opts: PairOptions, seed: int) -> Any:
    from uet.link.impair import ImpairmentConfig

    cfg = ImpairmentConfig(
        loss=opts.loss, dup=opts.dup, corrupt=opts.corrupt, reorder=opts.reorder, reorder_delay_s=0.001, seed=seed
    )
    return cfg if cfg.active else None


def message_size(opts: PairOptions) -> int:
    if opts.message_size:
        return opts.message_size
    if opts.mode == "uud":
        return opts.payload  # UUD messages are single datagrams (behaviour.md §2.15)
    return min(opts.size, 64 << 20) or 1


def pds_mode(name: str) -> Any:
    from uet.pds import Mode

    return Mode[name.upper()]


def profiler(opts: PairOptions) -> Any:
    """A running cProfile.Profile when ``--cprofile DIR`` was given (the UET phase only)."""
    if not opts.profile:
        return None
    import cProfile

    prof = cProfile.Profile(time.process_time)  # CPU time: preemption by other processes excluded
    prof.enable()
    return prof


def dump_profile(prof: Any, opts: PairOptions, role: str) -> None:
    if prof is None:
        return
    prof.disable()
    os.makedirs(opts.profile, exist_ok=True)  # type: ignore[arg-type]
    prof.dump_stats(os.path.join(opts.profile, f"{role}.prof"))  # type: ignore[arg-type]


def _retransmits(counters: dict[str, int]) -> int:
    """Retransmitted requests: PDC retransmissions (RTO, NACK, SACK-fast, go-back-N) + RUDI."""
    return counters.get("retransmits", 0) + counters.get("rudi_retransmits", 0)


def _nacks(counters: dict[str, int], direction: str) -> int:
    return sum(v for k, v in counters.items() if k.startswith(f"nack_{direction}"))


async def _open(endpoint: Any, address: str, opts: PairOptions, seed: int) -> Any:
    """One side's endpoint; with ``opts.pcap`` / ``opts.eventlog`` (``uet-demo --pcap`` /
    ``--eventlog``) its link is tapped and its events logged (tools/capture_options.py)."""
    from uet.tools.capture_options import live_captures

    cfg = transfer_config(opts)
    imp = impairment(opts, seed)
    taps, log = live_captures(opts.pcap, opts.eventlog, opts.capture_max, address)
    link = None
    if taps is not None:
        from uet.link.impair import Impairment, ImpairmentConfig
        from uet.link.select import open_link
        from uet.link.tap import TapLink

        link_imp = Impairment(imp) if isinstance(imp, ImpairmentConfig) else imp
        link = TapLink(open_link("direct", address, config=cfg, port=opts.port, impairment=link_imp), taps)
    ep = await endpoint.open(
        address, port=opts.port, config=cfg, impairment=imp, security=security_config(opts, seed), link=link,
        event_log=log,
    )  # fmt: skip
    ep._captures = (taps, log)
    return ep


async def _close(ep: Any) -> None:
    await ep.close()
    for c in ep._captures:
        if c is not None:
            c.close()


async def uet_receiver(conn: Connection, opts: PairOptions) -> None:
    from uet.endpoint import Endpoint

    b = opts.addresses[1]
    ep = await _open(Endpoint, b, opts, opts.seed + 1)
    rotate_half_way(ep, opts, "rx_packets")
    msize = message_size(opts)
    expected = max(1, -(-opts.size // msize))
    got: dict[int, bytes | memoryview] = {}
    failed: list[str] = []
    dups = 0
    last_ns = 0
    cpu_last = 0.0
    done = asyncio.Event()
    rudi = opts.mode == "rudi"
    posted = opts.receive == "posted" and not rudi
    key = None
    if rudi:  # idempotent writes into an idempotent-safe region (module docstring)
        from uet.ses.memory import Access

        region = registered_buffer(opts.size)
        key = ep.register(region, Access.REMOTE_WRITE | Access.IDEMPOTENT_SAFE).key
    if posted:
        region = registered_buffer(opts.size)
        handles = [ep.post_recv(region[i * msize : (i + 1) * msize], tag=i) for i in range(expected)]

        def completed(fut: asyncio.Future[Message]) -> None:
            nonlocal last_ns, cpu_last
            if fut.cancelled():
                return
            if fut.exception() is not None:
                failed.append(str(fut.exception()))
            else:
                m = fut.result()
                got[m.tag if m.tag is not None else -1] = m.data  # every receive here is tagged
            last_ns = time.monotonic_ns()
            cpu_last = time.process_time()
            if len(got) + len(failed) >= expected:
                done.set()

    cpu0 = time.process_time()
    cpu_last = cpu0
    if posted:
        for h in handles:
            h.future.add_done_callback(completed)

    async def written() -> None:
        nonlocal dups, last_ns, cpu_last
        while True:
            wc = await ep.next_write()
            idx = wc.header_data if wc.header_data is not None else -1
            if idx in got:
                dups += 1
            else:
                got[idx] = region[wc.offset : wc.offset + wc.length]
            last_ns = time.monotonic_ns()
            cpu_last = time.process_time()
            if len(got) >= expected:
                done.set()

    async def reader() -> None:
        nonlocal dups, last_ns, cpu_last
        while True:
            m = await ep.recv()
            idx = m.header_data if m.header_data is not None else -1
            if idx in got:
                dups += 1
            else:
                got[idx] = m.data
            last_ns = time.monotonic_ns()
            cpu_last = time.process_time()
            if len(got) >= expected:
                done.set()

    prof = profiler(opts)
    task = asyncio.create_task(written() if rudi else reader()) if not posted else None
    conn.send(("uet_ready", ep.link.port, key))  # a direct link (or its TSS facade)
    stop = asyncio.create_task(pipe_recv(conn))
    await asyncio.wait({stop, asyncio.create_task(done.wait())}, return_when=asyncio.FIRST_COMPLETED)
    if not done.is_set():
        # The sender finished (or gave up) first: unreliable modes may still have datagrams in
        # flight, so wait until nothing new arrives for 300 ms (at most 3 s).
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and not done.is_set():
            n = len(got)
            try:
                await asyncio.wait_for(done.wait(), 0.3)
            except TimeoutError:
                if len(got) == n:
                    break
    if posted:
        dups = ep.pending_messages  # deliveries of a tag whose receive was already taken
    digest = hashlib.sha256()
    delivered = 0
    for i in range(expected):
        d = got.get(i)
        if d is not None:
            digest.update(d)
            delivered += len(d)
    result = {
        "sha256": digest.hexdigest(),
        "complete": all(i in got for i in range(expected)),
        "delivered": delivered,
        "messages": len(got),
        "duplicates": dups,
        "failed": failed[:3],
        "last_ns": last_ns,
        "cpu_s": cpu_last - cpu0,
        "counters": ep.counters,
    }
    dump_profile(prof, opts, "receiver")
    if not stop.done():
        await stop  # the sender's "sent" message
    conn.send(("uet_result", result))
    await pipe_recv(conn)  # "close": the sender closed its PDCs first
    if task is not None:
        task.cancel()
    await _close(ep)
    os.set_blocking(conn.fileno(), True)  # the TSS report can exceed the pipe's buffer
    conn.send(("closed", tss_report(ep)))


def registered_buffer(size: int) -> memoryview:
    """A writable buffer of ``size`` bytes with every page faulted in before the transfer (what
    memory registration does for an RDMA application): one ``MADV_POPULATE_WRITE`` call where
    the kernel has it, else one write per page."""
    import mmap

    if size == 0:
        return memoryview(bytearray())
    buf = mmap.mmap(-1, size)
    populate = getattr(mmap, "MADV_POPULATE_WRITE", 23 if sys.platform == "linux" else None)
    try:
        if populate is None:
            raise OSError
        buf.madvise(populate)
    except (OSError, ValueError):
        page = mmap.PAGESIZE
        for off in range(0, size, page):
            buf[off] = 0
    return memoryview(buf)


async def uet_sender(conn: Connection, opts: PairOptions, data: bytes, progress: Any) -> dict[str, Any]:
    from uet.endpoint import Endpoint

    a, b = opts.addresses
    ep = await _open(Endpoint, a, opts, opts.seed)
    ready = await pipe_recv(conn, 60.0)  # ("uet_ready", port, RUDI region key)
    mode = pds_mode(opts.mode)
    msize = message_size(opts)
    view = memoryview(data)
    nmsg = max(1, -(-len(data) // msize))
    total_pkts = sum(ep.segmenter.count(len(view[i * msize : (i + 1) * msize])) for i in range(nmsg))
    rotate_half_way(ep, opts, "tss_out_pkts")
    prof = profiler(opts)
    cpu0 = time.process_time()
    t0 = time.monotonic_ns()
    tagged = opts.receive == "posted"
    futs: list[asyncio.Future[Any]]
    if opts.mode == "rudi":  # idempotent writes (module docstring)
        key = ready[2]
        futs = [
            asyncio.ensure_future(
                ep.write(b, key, i * msize, view[i * msize : (i + 1) * msize], header_data=i, mode=mode)
            )  # fmt: skip
            for i in range(nmsg)
        ]
    else:
        futs = [
            ep.send_nowait(b, view[i * msize : (i + 1) * msize], mode=mode, header_data=i, tag=i if tagged else None)
            for i in range(nmsg)
        ]
    ticker = None
    if progress is not None:
        task_id = progress.add_task(f"UET {opts.mode.upper()}", total=total_pkts)

        async def tick() -> None:
            while True:
                progress.update(task_id, completed=ep.counters.get("packets_acked", 0))
                await asyncio.sleep(0.1)

        ticker = asyncio.create_task(tick())
    error = None
    try:
        results = await gather_within(futs, opts.timeout)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            error = f"{len(errors)} of {nmsg} messages failed: {errors[0]}"
    except TimeoutError:
        error = f"timeout after {opts.timeout} s"
    t_sent = time.monotonic_ns()
    cpu_s = time.process_time() - cpu0
    dump_profile(prof, opts, "sender")
    if ticker is not None:
        ticker.cancel()
    conn.send(("sent", None))
    res = await pipe_recv(conn, 60.0)
    rx = res[1]
    counters = ep.counters
    await _close(ep)
    conn.send(("close", None))
    closed = await pipe_recv(conn, 60.0)
    return {
        "tss": tss_report(ep),
        "rx_tss": closed[1],
        "t0_ns": t0,
        "t_sent_ns": t_sent,
        "cpu_s": cpu_s,
        "packets": total_pkts,
        "messages": nmsg,
        "error": error,
        "counters": counters,
        "rx": rx,
    }


def uet_figures(snd: dict[str, Any], sha_sent: str, raw_gbps: float | None) -> dict[str, Any]:
    """The figures of one UET transfer (``snd``: :func:`_uet_sender`'s record)."""
    rx = snd["rx"]
    t_end = rx["last_ns"] if rx["last_ns"] else snd["t_sent_ns"]
    elapsed = max(1, t_end - snd["t0_ns"]) / 1e9
    goodput = rx["delivered"] * 8 / elapsed
    sc, rc = snd["counters"], rx["counters"]
    error = snd["error"] or (f"receive failed: {rx['failed'][0]}" if rx.get("failed") else None)
    return {
        "intact": bool(rx["complete"] and rx["sha256"] == sha_sent and error is None),
        "delivered_bytes": rx["delivered"],
        "duplicates": rx["duplicates"],
        "messages": snd["messages"],
        "messages_delivered": rx["messages"],
        "packets": snd["packets"],
        "elapsed_s": round(elapsed, 4),
        "goodput_gbps": round(goodput / 1e9, 4),
        "pps": round(snd["packets"] / elapsed),
        "ratio": round(goodput / 1e9 / raw_gbps, 3) if raw_gbps else None,
        "retransmits": _retransmits(sc),
        "nacks_sent": _nacks(sc, "tx") + _nacks(rc, "tx"),
        "nacks_received": _nacks(sc, "rx"),
        "sender_cpu_us_per_pkt": round(snd["cpu_s"] * 1e6 / max(1, snd["packets"]), 2),
        "receiver_cpu_us_per_pkt": round(rx["cpu_s"] * 1e6 / max(1, snd["packets"]), 2),
        "sender_datagrams": sc.get("link_tx_packets", 0),
        "receiver_datagrams": rc.get("link_tx_packets", 0),
        "impaired": sc.get("impair_dropped", 0) + rc.get("impair_dropped", 0),
        "error": error,
    }
