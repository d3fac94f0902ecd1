"""A collective as a schedule: per rank, a list of sends and receives with their dependencies.

Every algorithm of the collective library (:mod:`uet.workloads.algorithms`) is written once as a
*builder* that produces, for all ranks at once, the messages of one collective call: each message
is one :class:`Op` of kind ``SEND`` on its source and one of kind ``RECV`` on its destination,
sharing a tag. The executor (:mod:`uet.workloads.executor`) runs one rank's list on any
:class:`~uet.transport.Transport`, so the algorithm knows nothing of UET or RoCEv2, of the live
engine or the simulator.

**Dependencies**: an op starts once every op in its ``deps`` (indices into the same rank's list)
has completed. A send depends on the receive(s) that produced the bytes it sends (a pipelined
algorithm forwards a slice as soon as that slice arrived: no step-wide synchronisation), and
possibly on a *credit* receive (the pipeline depth, :func:`Builder.message`'s callers). A receive
completes when its message has arrived and been applied to the buffer (copied, or reduced into
it); a send when the transport says the target has it.

A receive is *posted* once its own ``deps`` completed: by default the previous receive from the
same peer (messages between two ranks are received in the order the builder created them, so a
builder creates them in an order compatible with their dependencies: step by step, slice by
slice); a pipelined ring instead chains each slice's receives on their own, so that the rounds in
flight never wait for one another.

**Tags**: the n-th message from rank a to rank b carries tag n (:class:`Builder` numbers them in
the order the builder creates them).

**Buffers**: ``buf`` 0 is the rank's working buffer (input, and the result of in-place
collectives); 1 is the separate output of the all-to-all and send/recv.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from uet.enums import IntEnum

__all__ = ["Builder", "Op", "OpKind", "Schedule", "compute", "split"]


class OpKind(IntEnum):
    SEND = 0
    RECV = 1
    #: local work of ``seconds`` (a training step's forward or backward pass): no message
    COMPUTE = 2


class Apply(IntEnum):
    """What a receive does with its bytes."""

    COPY = 0
    REDUCE = 1


@dataclass(frozen=True, slots=True)
class Op:
    """One send or receive of one rank (module docstring)."""

    kind: OpKind
    peer: int
    tag: int
    buf: int
    offset: int
    length: int
    apply: Apply = Apply.COPY
    deps: tuple[int, ...] = ()
    #: a COMPUTE op's duration
    seconds: float = 0.0
    #: what the op belongs to (a training iteration's phase: :mod:`uet.workloads.training`)
    label: str = ""


@dataclass
class Schedule:
    """The ops of every rank for one collective call on ``nbytes`` bytes."""

    n: int
    nbytes: int
    ops: list[list[Op]] = field(default_factory=list)

    def pairs(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(src, dst) → (messages, bytes) over the whole schedule."""
        out: dict[tuple[int, int], tuple[int, int]] = {}
        for src, ops in enumerate(self.ops):
            for op in ops:
                if op.kind is OpKind.SEND:
                    m, b = out.get((src, op.peer), (0, 0))
                    out[(src, op.peer)] = (m + 1, b + op.length)
        return out

    def received(self, rank: int) -> int:
        """How many messages ``rank`` receives."""
        return sum(1 for op in self.ops[rank] if op.kind is OpKind.RECV)


class Builder:
    """Builds a :class:`Schedule`: :meth:`message` adds one message (a send on its source, a
    receive on its destination) and returns both ops' indices, for later ops to depend on."""

    def __init__(self, n: int, nbytes: int) -> None:
        self.schedule = Schedule(n, nbytes, [[] for _ in range(n)])
        self._seq: dict[tuple[int, int], int] = {}
        self._last_recv: dict[tuple[int, int, int], int] = {}

    def message(
        self,
        src: int,
        dst: int,
        offset: int,
        length: int,
        *,
        apply: Apply = Apply.COPY,
        deps: tuple[int, ...] | list[int] = (),
        src_buf: int = 0,
        dst_buf: int = 0,
        dst_offset: int | None = None,
        recv_deps: tuple[int, ...] | list[int] | None = None,
        stream: int = 0,
        label: str = "",
    ) -> tuple[int, int]:
        """``length`` bytes at ``offset`` of ``src``'s buffer ``src_buf`` to ``dst``, applied at
        ``dst_offset`` (default: the same offset) of its buffer ``dst_buf``; the send waits for
        ``deps`` (ops of ``src``), the receive is posted after ``recv_deps`` (ops of ``dst``;
        default: the previous receive from ``src`` in the same ``stream``: independent streams
        between two ranks, such as the two trees of a double tree, do not wait for each other).
        ``label``: what the message belongs to. Returns (send index on src, receive index on dst)."""
        if src == dst or length <= 0:
            raise ValueError(f"message {src} -> {dst} of {length} bytes")
        tag = self._seq.get((src, dst), 0)
        self._seq[(src, dst)] = tag + 1
        ops = self.schedule.ops
        ops[src].append(Op(OpKind.SEND, dst, tag, src_buf, offset, length, Apply.COPY, tuple(deps), label=label))
        at = offset if dst_offset is None else dst_offset
        if recv_deps is None:
            prev = self._last_recv.get((src, dst, stream))
            recv_deps = () if prev is None else (prev,)
        ops[dst].append(Op(OpKind.RECV, src, tag, dst_buf, at, length, apply, tuple(recv_deps), label=label))
        self._last_recv[(src, dst, stream)] = len(ops[dst]) - 1
        return len(ops[src]) - 1, len(ops[dst]) - 1


def compute(b: Builder, rank: int, seconds: float, deps: tuple[int, ...] | list[int] = (), label: str = "") -> int:
    """Add a COMPUTE op of ``seconds`` on ``rank`` after ``deps``; its index."""
    ops = b.schedule.ops[rank]
    ops.append(Op(OpKind.COMPUTE, -1, 0, 0, 0, 0, Apply.COPY, tuple(deps), seconds, label))
    return len(ops) - 1


def split(total: int, parts: int, start: int = 0) -> list[tuple[int, int]]:
    """``total`` bytes from ``start`` cut into ``parts`` contiguous (offset, length) pieces as even
    as whole bytes allow (the first ones one byte shorter when it does not divide)."""
    edges = [start + total * i // parts for i in range(parts + 1)]
    return [(edges[i], edges[i + 1] - edges[i]) for i in range(parts)]
