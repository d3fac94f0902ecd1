"""Receive memory that consumes a message as it is placed, instead of keeping it.

A receive posted with a buffer (the expected list, behaviour.md §6.4) has each packet of its
message placed at its ``message_offset`` as it arrives, in whatever order PDS delivers them (RUD
delivers out of order). Ordinarily that memory is a ``bytearray`` the application reads when the
receive completes. An application that only needs a figure of the bytes — a synthetic workload
checking that every message arrived intact — need not keep them: :class:`ReceiveSink` is receive
memory written like a buffer (``sink[a:b] = data``, ``len(sink)``, ``sink[:n]`` its first ``n``
bytes) that hands each write to :meth:`ReceiveSink.place` instead of storing it.
:func:`receive_view` is the one rule by which the cores take a receive buffer: a sink as it is,
anything else as a flat writable ``memoryview``.

:class:`DigestSink` keeps the :func:`digest` of the message's bytes in message order: a write at
the in-order front is folded in at once (with any pieces it makes contiguous), a write ahead of it
is kept until the front reaches it. Its memory is the pieces that arrived ahead of a missing one —
bounded by the packets outstanding in the sender's window, not by the message (a 1,024-host
permutation of 2 MiB flows held 2 GiB of receive buffers). The digest is of the bytes the fabric
delivered, not of what the application expected, so a byte corrupted in flight (and not caught
below) shows as a digest that differs from the sender's.

**Decision — the digest is CRC-32C** (the Castagnoli CRC-32 of iSCSI and SCTP, an unsigned
32-bit int, computed by the CRC trailer's :func:`uet.wire.crc.crc32c`, with ``google_crc32c``),
not a cryptographic hash. It checks a simulation or a test run against the project's own bugs, not
against an adversary: what it must show is a byte lost, duplicated, misplaced or changed between
the sender's memory and the receiver's. Of these, the sink itself tells every lost, duplicated or
overlapping byte for certain (:meth:`DigestSink.digest` is None unless each byte was written
exactly once), and the length is reported beside the digest; the CRC tells for certain every
change confined to 32 consecutive bits and every change of one to three bits in a message of up
to 255 MiB (its Hamming distance is at least 4 below 2^31 bits), and any other change — a
packet placed at another packet's offset, two packets swapped, a stale buffer — with probability 1 − 2^-32 per
message, independently per message where the payloads are random bytes (the workloads' are): a
bug that touches two messages or more goes unseen with odds below 2^-64. SHA-256, used first,
cost 0.9 ns a byte with the CPU's SHA instructions and about 28 instructions a byte without them
(as valgrind counts), twice per message (sender and receiver): about a tenth of a compiled
incast run's CPU and a third of its instructions, none of it a figure of the protocol. CRC-32
(``zlib.crc32``), used next, cost 4.2 instructions a byte (0.37 ns): a tenth of the
instructions of a compiled permutation run with 128 paths (issue 28). CRC-32C costs 0.8 (0.1 ns:
the CPU's CRC32 instruction); a ``memoryview`` is copied to ``bytes`` first (``google_crc32c``
takes nothing else). The reports' field keeps its name, ``crc32``.
"""

from __future__ import annotations

from typing import Any, Final

from uet.ses.memory import byte_view
from uet.wire.crc import crc32c, extend

#: (a Final name: a C static in the compiled build, where a name imported from interpreted
#: uet.wire.crc is a look-up in this module's globals at every call)
_extend: Final = extend

__all__ = ["DigestSink", "ReceiveSink", "digest", "receive_view"]


class ReceiveSink:
    """Write-only receive memory of ``size`` bytes (module docstring). Subclasses implement
    :meth:`place` (and :meth:`prefix`, the first ``n`` bytes as a sink over the same memory)."""

    __slots__ = ("_size",)

    #: never read-only (posted receives must be writable)
    readonly = False

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"a receive sink of {size} bytes")
        self._size = size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, key: slice) -> ReceiveSink:
        start, stop, step = key.indices(self._size)
        if start or step != 1:
            raise ValueError("a receive sink is sliced from its start only")
        return self if stop == self._size else self.prefix(stop)

    def __setitem__(self, key: slice, data: Any) -> None:
        start, stop, step = key.indices(self._size)
        n = len(data)
        if step != 1 or stop - start != n:
            raise ValueError(f"{n} bytes written to [{start}:{stop}] of a receive sink")
        if n:
            self.place(start, data)

    def place(self, offset: int, data: bytes | memoryview) -> None:
        """Take ``data`` written at ``offset`` (it fits the sink; ``data`` may be a view of a
        buffer its writer reuses: copy what is kept)."""
        raise NotImplementedError

    def prefix(self, n: int) -> ReceiveSink:
        """The first ``n`` bytes of this memory (``n`` < ``len(self)``), as a sink."""
        raise NotImplementedError


def receive_view(buffer: Any) -> memoryview | ReceiveSink:
    """A receive buffer as the cores take it: a :class:`ReceiveSink` as it is, anything else as a
    flat ``memoryview`` of unsigned bytes (:func:`uet.ses.memory.byte_view`; ``ValueError`` for a
    read-only one)."""
    if isinstance(buffer, ReceiveSink):
        return buffer
    view = byte_view(buffer)
    if view.readonly:
        raise ValueError("receive buffer must be writable")
    return view


def digest(data: bytes | bytearray | memoryview) -> int:
    """The digest of a whole message's bytes (CRC-32C, module docstring): what a sender reports of a
    message and what :meth:`DigestSink.digest` gives of the same bytes received."""
    return crc32c(data)


class _Digest:
    """A :class:`DigestSink`'s state, shared by the sink and its prefixes."""

    __slots__ = ("crc", "front", "ahead", "ahead_bytes", "rewritten")

    def __init__(self) -> None:
        #: the CRC-32C of bytes [0, front)
        self.crc = 0
        #: bytes [0, front) are folded into ``crc``
        self.front = 0
        #: pieces written beyond the front, by offset
        self.ahead: dict[int, bytes] = {}
        self.ahead_bytes = 0
        #: bytes written at or over bytes already hashed or already held (the memory no longer
        #: holds one well-defined message: the digest is withheld)
        self.rewritten = 0


class DigestSink(ReceiveSink):
    """Receive memory that keeps the :func:`digest` of the message's bytes in order and only the
    pieces that arrived ahead of a gap (module docstring). :meth:`digest` is the digest once every
    byte of the sink was written exactly once."""

    __slots__ = ("_d",)

    def __init__(self, size: int, _state: _Digest | None = None) -> None:
        super().__init__(size)
        self._d = _state if _state is not None else _Digest()

    def place(self, offset: int, data: bytes | memoryview) -> None:
        d = self._d
        front = d.front
        if offset == front:
            crc = _extend(d.crc, data if type(data) is bytes else bytes(data))
            front += len(data)
            ahead = d.ahead
            while front in ahead:
                piece = ahead.pop(front)
                d.ahead_bytes -= len(piece)
                crc = _extend(crc, piece)
                front += len(piece)
            d.crc = crc
            d.front = front
        elif offset > front and offset not in d.ahead:
            d.ahead[offset] = bytes(data)
            d.ahead_bytes += len(data)
        else:
            d.rewritten += len(data)

    def prefix(self, n: int) -> DigestSink:
        return DigestSink(n, self._d)

    @property
    def received(self) -> int:
        """Bytes folded into the digest so far (the in-order front)."""
        return self._d.front

    @property
    def held(self) -> int:
        """Bytes kept because they arrived ahead of a missing one."""
        return self._d.ahead_bytes

    def digest(self) -> int | None:
        """The :func:`digest` of the sink's bytes when each was written exactly once and nothing is
        left out of order; None otherwise (a gap, a piece overlapping another, a byte written
        twice): the receiver cannot vouch for the message."""
        d = self._d
        if d.front != self._size or d.ahead or d.rewritten:
            return None
        return d.crc
