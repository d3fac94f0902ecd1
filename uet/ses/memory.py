"""Registered memory regions and their keys (spec/behaviour.md §6.5).

A region is any buffer exposing the buffer protocol (``bytearray``, ``memoryview``, ``mmap``,
``array``...) registered with access rights. The table hands out a 64-bit key an RMA or atomic
request carries in its ``match_bits`` position; the target resolves it here.

Key format (following the reference's use of key bits, §6.5): a random 64-bit non-zero value,
never equal to another registered key, with bit 55 (``IDEMPOTENT_SAFE``) set exactly when the
region may be the target of RUDI requests and bit 54 (``OPTIMIZED``) clear (the optimized "index
space" used by compact headers is not implemented: small-header RMA is answered
``UNSUPPORTED_OP``). A caller may choose its own key (``key=``); it must be non-zero and unused.

Return codes (the notes take precedence over other readings, §6.3 and §6.5):

* unknown key, or a region restricted to another JobID ("treated as unknown") → ``BAD_MKEY``;
* the region lacks the access the operation needs → ``PERM_VIOLATION``;
* bytes outside the region → ``BAD_ADDR`` for one packet (§6.3 step 6), and a WRITE whose whole
  message (``buffer_offset + request_length``) does not fit → ``UNSUPPORTED_SIZE`` (§6.5).

(The address-translation codes ``AT_PERM``/``AT_OUT_OF_RANGE`` exist in :mod:`uet.ses.errors` for
targets that model an IOMMU; this one has none.)
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from uet.enums import IntFlag
from uet.ses.errors import BadAddr, BadMkey, PermViolation, RegistrationError, UnsupportedSize

__all__ = ["Access", "KEY_IDEMPOTENT_SAFE", "KEY_OPTIMIZED", "MemoryRegion", "MemoryTable"]

#: Key bit 55: the region may be written by RUDI (idempotent) requests (§6.5).
KEY_IDEMPOTENT_SAFE = 1 << 55
#: Key bit 54: the key is a small index usable in compact headers (not issued here, §6.5).
KEY_OPTIMIZED = 1 << 54


class Access(IntFlag):
    """Access rights of a registered region (libfabric ``FI_REMOTE_*`` style)."""

    REMOTE_READ = 0x1
    REMOTE_WRITE = 0x2
    REMOTE_ATOMIC = 0x4
    #: the region may be the target of RUDI (idempotent, possibly duplicated) requests
    IDEMPOTENT_SAFE = 0x8
    ALL = REMOTE_READ | REMOTE_WRITE | REMOTE_ATOMIC


_WRITING = Access.REMOTE_WRITE | Access.REMOTE_ATOMIC


@dataclass(eq=False)
class MemoryRegion:
    """A registered buffer.

    Attributes:
        key: the 64-bit remote key.
        index: the region's slot in the table (small integer, lowest free first).
        view: a flat byte ``memoryview`` of the buffer.
        access: the :class:`Access` rights.
        job: JobID the region is restricted to, or None for any job (§1.2 absolute addressing).
        on_remote_read: called as ``(offset, length)`` after a remote READ was served from the
            region (the initiator uses it to learn when a rendezvous target has pulled its data).
    """

    key: int
    index: int
    view: memoryview
    access: Access
    job: int | None = None
    on_remote_read: Callable[[int, int], object] | None = None
    context: Any = None
    registered: bool = field(default=True)

    def __len__(self) -> int:
        return len(self.view)

    def check(self, need: Access, offset: int, length: int) -> None:
        """Raise :class:`PermViolation` without ``need``, :class:`BadAddr` outside the region."""
        if need & ~self.access:
            raise PermViolation(f"region {self.key:#x} lacks {Access(need & ~self.access)!r}")
        if offset < 0 or length < 0 or offset + length > len(self.view):
            raise BadAddr(f"[{offset}, {offset + length}) outside region of {len(self.view)} bytes")

    def check_message(self, offset: int, length: int) -> None:
        """A whole RMA message must fit: ``UNSUPPORTED_SIZE`` otherwise (§6.5 WRITE)."""
        if offset + length > len(self.view):
            raise UnsupportedSize(f"message [{offset}, {offset + length}) larger than region ({len(self.view)})")


def byte_view(buffer: Any) -> memoryview:
    """``buffer`` (any object with the buffer protocol) as a flat ``memoryview`` of unsigned bytes,
    without a copy: what registration, sends and RMA operations work on. Raises ``TypeError`` for
    an object without the buffer protocol and ``BufferError`` for a buffer that is not
    C-contiguous (it cannot be seen as one run of bytes)."""
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    if view.ndim != 1 or view.itemsize != 1 or view.format != "B":
        if not view.c_contiguous:
            raise BufferError("buffer must be C-contiguous")
        view = view.cast("B")
    return view


class MemoryTable:
    """The FEP's registered regions, by key (§6.5)."""

    def __init__(self, *, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._by_key: dict[int, MemoryRegion] = {}
        self._by_index: dict[int, MemoryRegion] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def register(
        self,
        buffer: Any,
        access: Access | int,
        *,
        key: int | None = None,
        job: int | None = None,
        on_remote_read: Callable[[int, int], object] | None = None,
        context: Any = None,
    ) -> MemoryRegion:
        """Register ``buffer`` with ``access`` rights; returns the region (its key and index).

        A read-only buffer (``bytes``, a read-only memoryview or mmap) is accepted only when
        ``access`` grants no remote write or atomic right. Raises :class:`RegistrationError`.
        """
        access = Access(access)
        try:
            view = byte_view(buffer)
        except BufferError as e:
            raise RegistrationError(str(e)) from None
        if view.readonly and access & _WRITING:
            raise RegistrationError("a read-only buffer cannot be registered for remote write or atomic access")
        if job is not None and not 0 <= job < 1 << 24:
            raise RegistrationError(f"job {job} is not a 24-bit JobID")
        if key is None:
            key = self._new_key(access)
        elif not 0 < key < 1 << 64:
            raise RegistrationError("key must be a non-zero 64-bit value")
        elif key in self._by_key:
            raise RegistrationError(f"key {key:#x} is already registered")
        index = 0
        while index in self._by_index:
            index += 1
        region = MemoryRegion(key, index, view, access, job, on_remote_read, context)
        self._by_key[key] = region
        self._by_index[index] = region
        return region

    def _new_key(self, access: Access) -> int:
        while True:
            k = self._rng.getrandbits(64) & ~(KEY_IDEMPOTENT_SAFE | KEY_OPTIMIZED)
            if access & Access.IDEMPOTENT_SAFE:
                k |= KEY_IDEMPOTENT_SAFE
            if k and k not in self._by_key:
                return k

    def deregister(self, region: MemoryRegion | int) -> None:
        """Remove a region (or the region with this key); later requests with its key fail with
        ``BAD_MKEY``. Raises :class:`RegistrationError` if it is not registered."""
        key = region.key if isinstance(region, MemoryRegion) else region
        r = self._by_key.pop(key, None)
        if r is None:
            raise RegistrationError(f"key {key:#x} is not registered")
        del self._by_index[r.index]
        r.registered = False

    def get(self, key: int) -> MemoryRegion | None:
        """The region with ``key`` or None (no job check)."""
        return self._by_key.get(key)

    def lookup(self, key: int, job: int) -> MemoryRegion:
        """Resolve a request's key for a request of JobID ``job``; :class:`BadMkey` when unknown or
        restricted to another job (§6.5: "treated as unknown")."""
        r = self._by_key.get(key)
        if r is None or (r.job is not None and r.job != job):
            raise BadMkey(f"no region for key {key:#x}")
        return r
