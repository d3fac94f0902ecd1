"""Workload objects: the traffic of a run, written once against :mod:`uet.transport`.

A workload knows its flows (who sends how many messages of how many bytes to whom) and, for each
endpoint (*rank*), a coroutine :meth:`Workload.run` that drives that rank's
:class:`~uet.transport.Transport` and returns a :class:`RankReport`. It takes time only from the
running event loop (``loop.time()``), or from the ``now`` function its caller gives, so the same
object measures virtual time under the simulator (``uet-sim``: every rank in one process on the
virtual-time loop of :mod:`uet.sim`) and under the live engine (``uet-run``: one process per rank,
asyncio over the fabric link; ``now`` is the dilated clock of :mod:`uet.clock`, whose virtual time
is real time with a factor of 1).

Message identity (as ``uet-run`` did before): message ``index`` of flow ``flow`` carries
``flow << 32 | index`` as its SES header data, and its payload is :func:`message_data` of the run
seed, so a receiver can report what arrived and the launcher can check every message arrived once
and intact (the digest of the bytes sent against that of the bytes received: CRC-32C,
:func:`uet.ses.sink.digest`, which says why it suffices).

**Parameters**: besides the common four (ranks, message size and count, seed), a workload class
declares its own parameters as a frozen dataclass ``Params`` (its fields, types and defaults; an
empty one by default). A scenario gives them in its ``[workload.params]`` table (``uet-run`` and
``uet-sim`` also take ``--workload-set KEY=VALUE``); :func:`parse_params` checks them once, naming
the key, and :meth:`Workload.spec` carries the whole workload — parameters included — as one JSON
table to wherever it runs (``uet.workloads.from_spec``).
"""

from __future__ import annotations

import dataclasses
import random
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from uet.runner import gather, running_loop
from uet.ses.sink import DigestSink, digest

if TYPE_CHECKING:
    from uet.transport import Transport

__all__ = ["Flow", "FlowReport", "NoParams", "RankReport", "RxReport", "Workload", "message_data", "parse_params"]

#: Random bytes messages are cut from (see :func:`message_data`).
_POOL_BYTES = 1 << 20
#: Messages at least this long are views of a shared buffer (see :func:`message_data`).
VIEW_BYTES = 1 << 16
#: the block a pool is made of (see :class:`_Drawn`): drawn once from the generator, then each
#: :data:`_BLOCK`-byte piece of the pool is a rotation of it through a substitution of its own
_BLOCK = 1 << 16


class _Drawn:
    """A pool of ``size`` reproducible pseudo-random bytes of one key, made only as far as
    messages read it: a one-flow run reads 2 MB of its 3 MiB buffer.

    **Decision** (issue 28): payload bytes only have to be reproducible per seed, distinct per
    message and without repeats a misplaced packet could hide behind; they are not secrets. Drawing
    all of them from the Mersenne Twister (``random.randbytes``) cost about 36 instructions a byte,
    72 M of a one-flow run's 660 M (a keystream from ``cryptography`` costs less per byte but 36 M
    to import). So a pool is made of pieces of :data:`_BLOCK` bytes from one block of as many
    random bytes (``random.Random(key).randbytes``): piece ``j`` is the block rotated by ``o_j``
    bytes and passed through the byte substitution ``t_j`` (``bytes.translate``), where ``o_j``
    and ``t_j`` come from the next 32-bit word of the same generator — the block's offset (16
    bits) and two rotations (8 bits each) of one random permutation of the 256 byte values drawn
    after the block, composed. About 13 instructions a byte. Two pieces share both rotation and
    substitution only by a 1-in-2^32 chance, and within a piece every byte of the block appears
    once, so no two packets of a pool carry the same payload (but by that chance). Piece ``j``
    depends only on the key and ``j``: the bytes are the same however far, and in how many steps,
    the pool is made. Not a cryptographic generator, nor meant as one.
    """

    __slots__ = ("block", "data", "perm", "rng", "size")

    def __init__(self, key: str, size: int) -> None:
        self.rng = random.Random(key)
        self.size = size
        self.data = b""
        self.block = b""
        self.perm = b""

    def _pieces(self, count: int) -> bytes:
        """The next ``count`` pieces of the pool."""
        rng = self.rng
        if not self.block:
            block = rng.randbytes(_BLOCK)
            self.block = block + block  # a rotation is one slice of the block twice
            order = list(range(256))
            rng.shuffle(order)
            self.perm = bytes(order) * 2
        block, perm, getrandbits = self.block, self.perm, rng.getrandbits
        parts = []
        for _ in range(count):
            k = getrandbits(32)
            at, a, b = k & (_BLOCK - 1), (k >> 16) & 255, k >> 24
            parts.append(block[at : at + _BLOCK].translate(perm[a : a + 256].translate(perm[b : b + 256])))
        return b"".join(parts)

    def upto(self, end: int) -> bytes:
        """The bytes made so far, at least the first ``min(end, size)``: at the first read the
        pieces up to ``end``, at the first read beyond them all the rest (one copy of the prefix:
        at most two buffers per pool)."""
        data = self.data
        if len(data) >= end or len(data) == self.size:
            return data
        if not data and end < self.size:
            count = -(-end // _BLOCK)
        else:
            count = -(-(self.size - len(data)) // _BLOCK)
        self.data = (data + self._pieces(count))[: self.size]
        return self.data


_pools: dict[int, _Drawn] = {}
_views: dict[tuple[int, int], _Drawn] = {}


def message_data(seed: int, flow: int, index: int, nbytes: int) -> bytes | memoryview:
    """The payload of message ``index`` of ``flow`` in a run seeded ``seed``.

    **Decision**: 16 bytes naming (seed, flow, index) followed by bytes from a 1 MiB pool of the
    seed (:class:`_Drawn`), starting at an offset drawn from (flow, index) and wrapping around:
    every message is distinct and reproducible, and a 1,024-flow run does not spend seconds drawing
    2 GB of random numbers.

    Messages of :data:`VIEW_BYTES` or more are instead read-only views of one shared pool of the
    seed (1 MiB longer than the message, made once per size class), starting at
    ``((flow << 10) + index) × 0x9E3779B1 mod 2^20``: an odd multiplier is a bijection of the
    20-bit key, so up to 1,024 flows of up to 1,024 messages each start at distinct offsets, and
    the senders of a many-host simulation share one buffer instead of holding a copy each (the
    1,024-host permutation of 2 MB flows held 2 GB of message copies).
    """
    if nbytes >= VIEW_BYTES:
        size = 1 << max(nbytes - 1, 1).bit_length()  # the size class: the next power of two
        drawn = _views.get((seed, size))
        if drawn is None:
            drawn = _views[(seed, size)] = _Drawn(f"uet-workload/{seed}/{size}", _POOL_BYTES + size)
        start = (((flow << 10) + index) * 0x9E3779B1) & (_POOL_BYTES - 1)
        return memoryview(drawn.upto(start + nbytes))[start : start + nbytes]
    head = seed.to_bytes(8, "big", signed=True) + flow.to_bytes(4, "big") + index.to_bytes(4, "big")
    if nbytes <= len(head):
        return head[:nbytes]
    start = random.Random(f"{seed}/{flow}/{index}").randrange(_POOL_BYTES)
    need = nbytes - len(head)
    drawn = _pools.get(seed)
    if drawn is None:
        drawn = _pools[seed] = _Drawn(f"uet-workload/{seed}", _POOL_BYTES)
    pool = drawn.upto(start + need)  # the whole pool when the message wraps around
    parts = [head]
    while need > 0:
        chunk = pool[start : start + need]
        parts.append(chunk)
        need -= len(chunk)
        start = 0
    return b"".join(parts)


@dataclass(frozen=True)
class Flow:
    """``messages`` messages of ``nbytes`` bytes from rank ``src`` to rank ``dst``."""

    id: int
    src: int
    dst: int
    messages: int
    nbytes: int


@dataclass
class FlowReport:
    """What the sender of a flow measured: completion time from the rank's start to the last
    message's completion, its retransmissions (to its destination), the digest of every message
    sent (``crc32``: :func:`uet.ses.sink.digest`, by message index), and the first error (a name
    from :func:`uet.transport.error_name`)."""

    flow: int
    src: str
    dst: str
    bytes: int
    messages: int
    completion_s: float
    retransmits: int
    crc32: list[int]
    error: str | None = None


@dataclass
class RxReport:
    """One message a rank received: its flow and index, source, length, digest (``crc32``:
    :func:`uet.ses.sink.digest`; None when its receive memory could not vouch for its bytes:
    :meth:`uet.ses.sink.DigestSink.digest`), arrival time."""

    flow: int | None
    index: int | None
    src: str
    bytes: int
    crc32: int | None
    t: float


@dataclass
class RankReport:
    """Everything one rank reports; ``check`` is a workload-level verdict (ring all-reduce: the
    reduced vector is right), None when the workload has none."""

    flows: list[FlowReport] = field(default_factory=list)
    rx: list[RxReport] = field(default_factory=list)
    check: bool | None = None
    error: str | None = None
    #: called with each flow report and each received message as it is added (``uet-run``'s
    #: workers stream them to the launcher, so a run that stalls or is interrupted still shows
    #: what moved)
    listener: Callable[[FlowReport | RxReport], None] | None = field(default=None, repr=False, compare=False)

    def add_flow(self, f: FlowReport) -> None:
        self.flows.append(f)
        if self.listener is not None:
            self.listener(f)

    def add_rx(self, r: RxReport) -> None:
        self.rx.append(r)
        if self.listener is not None:
            self.listener(r)

    def as_dict(self) -> dict[str, Any]:
        return {
            "flows": [vars(f) for f in self.flows],
            "rx": [vars(r) for r in self.rx],
            "check": self.check,
            "error": self.error,
        }


@dataclass(frozen=True)
class NoParams:
    """The parameters of a workload that has none of its own."""


def parse_params(cls: type[Workload], table: Mapping[str, Any] | None) -> Any:
    """``cls.Params`` from the table ``table`` (None: the defaults): ValueError naming the key for an
    unknown parameter or a value of the wrong type (a whole number where an int is declared)."""
    table = dict(table or {})
    fields = {f.name: f for f in dataclasses.fields(cls.Params)}
    if table and not fields:
        raise ValueError(f"workload {cls.name} takes no parameters (got {', '.join(sorted(table))})")
    hints = typing.get_type_hints(cls.Params)
    for key, value in table.items():
        if key not in fields:
            raise ValueError(f"workload {cls.name}: unknown parameter {key!r}; valid: {', '.join(sorted(fields))}")
        want = {t for t in typing.get_args(hints[key]) or (hints[key],) if t is not type(None)}
        if value is None and type(None) in typing.get_args(hints[key]):
            continue
        if isinstance(value, bool) and bool not in want or not isinstance(value, tuple(want)):
            names = " or ".join(sorted(t.__name__ for t in want))
            raise ValueError(f"workload {cls.name}: {key} = {value!r}: expected {names}")
    return cls.Params(**table)


class Workload:
    """Base class: ``n`` ranks, ``messages`` messages of ``message_bytes`` per flow, ``seed``, and
    the class's own parameters ``params`` (a ``Params`` instance; module docstring).

    Subclasses define :meth:`pairs` (the (src, dst) rank pairs, one flow each); the default
    :meth:`run` sends every flow of the rank at once (one flow's messages pipelined) while
    receiving the messages addressed to it.
    """

    name = "workload"
    min_ranks = 2
    #: the class's own parameters (module docstring)
    Params: type[Any] = NoParams

    def __init__(
        self,
        n: int,
        *,
        message_bytes: int = 65536,
        messages: int = 1,
        seed: int = 0,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        self.params = parse_params(type(self), params)
        if n < self.min_ranks:
            raise ValueError(f"{self.name} needs at least {self.min_ranks} endpoints")
        if message_bytes < 1 or messages < 1:
            raise ValueError("message_bytes and messages must be at least 1")
        self.n = n
        self.message_bytes = message_bytes
        self.messages = messages
        self.seed = seed
        self._flows = [Flow(i, a, b, messages, message_bytes) for i, (a, b) in enumerate(self.pairs())]

    def pairs(self) -> list[tuple[int, int]]:
        raise NotImplementedError

    def spec(self) -> dict[str, Any]:
        """The workload as one JSON table (``uet.workloads.from_spec`` builds it again)."""
        return {
            "name": self.name,
            "n": self.n,
            "message_bytes": self.message_bytes,
            "messages": self.messages,
            "seed": self.seed,
            "params": dataclasses.asdict(self.params),
        }

    def place(self, servers: list[list[int]]) -> None:
        """The engine's placement: the ranks of each server (:meth:`uet.fabric.topology.Topology.rank_servers`),
        told before the run. Most workloads ignore it; the hierarchical collectives group by it."""

    def result_extra(self, flows: list[dict[str, Any]]) -> dict[str, Any]:
        """Keys the workload adds to the run result, from its per-flow results (none by default;
        the collectives add their nccl-tests table)."""
        return {}

    def flows(self) -> list[Flow]:
        """Every flow of the run."""
        return list(self._flows)

    def total_bytes(self) -> int:
        return sum(f.messages * f.nbytes for f in self._flows)

    def expected(self, rank: int) -> int:
        """How many messages ``rank`` receives."""
        return sum(f.messages for f in self._flows if f.dst == rank)

    async def run(
        self,
        rank: int,
        ep: Transport,
        addresses: list[str],
        report: RankReport | None = None,
        *,
        now: Callable[[], float] | None = None,
    ) -> RankReport:
        """Rank ``rank``'s part of the run on ``ep``; ``addresses[i]`` is rank i's address. The
        results go into ``report`` as they happen (pass one to keep what a cancelled or stalled
        run achieved). ``now``: the clock times are measured on, in seconds (default: the running
        loop's ``time``)."""
        clock = now or running_loop().time
        t0 = clock()
        report = report if report is not None else RankReport()
        mine = [f for f in self._flows if f.src == rank]
        since = _since(clock, t0)
        await gather(
            *(self._receive(ep, addresses[f.src], f, report, since) for f in self._flows if f.dst == rank),
            *(self._send_flow(ep, f, addresses, report, since) for f in mine),
        )
        return report

    def unfinished(self, rank: int, ep: Transport, addresses: list[str], report: RankReport, elapsed_s: float,
                   error: str = "timeout") -> list[FlowReport]:  # fmt: skip
        """Reports for rank ``rank``'s flows that have none in ``report`` (the run was stopped
        after ``elapsed_s``): completion time = ``elapsed_s``, the error, and the endpoint's
        retransmissions towards the flow's destination so far — a flow that never finished
        retransmitted too, and its column showed 0 while the endpoint counted thousands
        (issue 10)."""
        done = {r.flow for r in report.flows}
        out = []
        for f in self._flows:
            if f.src != rank or f.id in done:
                continue
            data = [message_data(self.seed, f.id, i, f.nbytes) for i in range(f.messages)]
            out.append(_flow_report(f, ep, addresses[f.dst], elapsed_s, data, error))
        return out

    async def _send_flow(
        self, ep: Transport, f: Flow, addresses: list[str], report: RankReport, since: Callable[[], float]
    ) -> None:
        data = [message_data(self.seed, f.id, i, f.nbytes) for i in range(f.messages)]
        dst = addresses[f.dst]
        results = await gather(
            *(ep.send(dst, d, header_data=(f.id << 32) | i) for i, d in enumerate(data)), return_exceptions=True
        )
        err = None
        if any(isinstance(r, BaseException) for r in results):
            from uet.transport import error_name  # the contract's Protocols only on a failure

            err = next(error_name(r) for r in results if isinstance(r, BaseException))
        report.add_flow(_flow_report(f, ep, dst, since(), data, err))

    async def _receive(
        self, ep: Transport, source: str, f: Flow, report: RankReport, since: Callable[[], float]
    ) -> None:
        """Flow ``f``'s messages, received from its source only: a transport whose connection to
        the source failed fails such a receive (RoCE, issue 12), which ends the flow's receiving
        with the rank's ``error`` instead of waiting forever for messages that cannot come.

        Each is received into a :class:`~uet.ses.sink.DigestSink` of the flow's message size: the
        rank keeps the digest of the bytes as they arrive, not the bytes (a rank of a 1,024-host
        permutation of 2 MiB flows held its whole message until it completed)."""
        for _ in range(f.messages):
            sink = DigestSink(f.nbytes)
            try:
                m = await ep.recv_into(sink, source=source)
            except Exception as e:
                from uet.transport import error_name  # the contract's Protocols only on a failure

                report.error = report.error or error_name(e)
                return
            report.add_rx(_rx(m, since(), sink))


def _since(clock: Callable[[], float], t0: float) -> Callable[[], float]:
    """Seconds on ``clock`` since ``t0``."""
    return lambda: clock() - t0


def _flow_report(
    f: Flow, ep: Transport, dst: str, t: float, data: list[bytes | memoryview], error: str | None
) -> FlowReport:
    """The sender's report of flow ``f`` (messages ``data``) to ``dst``, ``t`` s after the start."""
    crcs = [digest(d) for d in data]
    return FlowReport(f.id, ep.address, dst, f.messages * f.nbytes, f.messages, t, _retransmits(ep, dst), crcs, error)


def _retransmits(ep: Transport, dst: str) -> int:
    """This flow's own retransmissions: the endpoint's count towards ``dst`` (``retransmits_to:``
    counter of the PDS; one flow per destination in every workload here)."""
    c = ep.counters
    return c.get("retransmits_to:" + dst, 0)


def _rx(m: Any, t: float, sink: DigestSink | None = None) -> RxReport:
    """The report of message ``m`` received ``t`` s after the start: the digest of ``m.data``, or
    the one ``sink`` (the receive memory it was placed into) kept."""
    hd = m.header_data
    return RxReport(
        None if hd is None else hd >> 32,
        None if hd is None else hd & 0xFFFFFFFF,
        m.source,
        m.nbytes,
        digest(m.data) if sink is None else sink.digest(),
        t,
    )
