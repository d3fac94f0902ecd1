"""The initiator half of the SES message layer (sans-I/O): a ``SEND`` or ``TAGGED_SEND`` message
(the tag in ``match_bits``) cut into packets with the **standard request header**
(wire-format.md §8.2, behaviour.md §6.1), identical to those
:class:`uet.ses.initiator.SesInitiator` sends for a plain eager send:

* the first packet (SOM) carries ``header_data`` (0 unless the caller passes immediate data, then
  ``HD`` is set) and ``request_length`` (the whole message length); it implies message offset 0;
* every later packet carries ``payload_length`` (14 bits) and ``message_offset`` (32 bits);
* the last packet carries ``EOM`` (a one-packet message has SOM and EOM);
* every packet of a message carries the same 16-bit ``message_id`` and the endpoint's addressing
  (``job_id``, ``pid_on_fep``, ``resource_index``; relative addressing, ``REL`` set, §1.2).

Message ids come from the caller (one 16-bit space per endpoint, ``SesFep.alloc_message_id``).

Choices where the spec notes are silent (behaviour.md §6.1):

* Payloads larger than the 14-bit ``payload_length`` field (16383 bytes, wire-format.md §12.3)
  are a documented, non-conforming extension for loopback benchmarking: such packets carry
  ``payload_length = 0`` and the target takes the length from the datagram. Conforming peers never
  see them unless the endpoint is configured with ``payload_size > 16383``.
* UUD is single-packet in the reference (§2.15); this layer also segments UUD messages (best
  effort: a message with a lost packet is never delivered and its partial buffer expires).
"""

from __future__ import annotations

from collections.abc import Iterator

from uet.ses.memory import byte_view
from uet.ses.message import (
    _F_EOM,
    _F_HD,
    _F_REL,
    _F_SOM,
    _MASK64,
    _MID_PACK,
    _MID_PREFIX,
    _MID_TAIL,
    _SEND,
    _SOM_PACK,
    _TSEND,
    MAX_WIRE_PAYLOAD,
    MessageConfig,
    MessageError,
)

__all__ = ["Segmenter"]


class Segmenter:
    """Turns a message into SES standard request packets (the initiator half of this layer)."""

    def __init__(
        self,
        *,
        job_id: int = 0,
        initiator: int = 0,
        payload_size: int = 4096,
        max_message: int = 64 << 20,
    ) -> None:
        MessageConfig(payload_size=payload_size, max_message=max_message)  # validates
        self.job_id = job_id
        self.initiator = initiator
        self.payload_size = payload_size
        self.max_message = max_message

    def count(self, length: int) -> int:
        """Number of packets a message of ``length`` bytes takes (at least one)."""
        return max(1, -(-length // self.payload_size))

    def packets(
        self,
        data: bytes | bytearray | memoryview,
        message_id: int,
        *,
        pid_on_fep: int = 0,
        resource_index: int = 0,
        header_data: int | None = None,
        start: int = 0,
        tag: int | None = None,
        job_id: int | None = None,
        generation: int = 0,
        relative: bool = True,
    ) -> Iterator[tuple[bytes, memoryview, bool, bool]]:
        """Yield ``(ses_header, payload, som, eom)`` for each packet, from packet index ``start``.

        ``payload`` is a zero-copy slice of ``data``. ``pid_on_fep``, ``resource_index`` and
        ``generation`` address the target process and resource (§1.1); ``job_id`` overrides the
        segmenter's JobID and ``relative`` clears ``REL`` for absolute addressing (§1.2). With a
        ``tag`` the opcode is ``TAGGED_SEND`` and the tag travels in ``match_bits`` (§6.4). Raises
        :class:`MessageError` for a message larger than ``max_message``.
        """
        view = data if isinstance(data, memoryview) else memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        length = len(view)
        if length > self.max_message:
            raise MessageError(f"message of {length} bytes exceeds max_message {self.max_message}")
        ps = self.payload_size
        n = self.count(length)
        rel = _F_REL if relative else 0
        job = self.job_id if job_id is None else job_id
        init = self.initiator
        opcode = _SEND if tag is None else _TSEND
        mb = 0 if tag is None else tag & _MASK64
        gen = generation
        pack_mid = _MID_TAIL.pack
        prefix = (  # the middle packets' header prefix (none in a message of one or two packets)
            _MID_PACK((opcode, 0, rel, message_id, gen, job, pid_on_fep, resource_index, 0, init, mb, 0, 0, 0))[
                :_MID_PREFIX
            ]
            if n > 2
            else b""
        )
        mid_len = ps if ps <= MAX_WIRE_PAYLOAD else 0  # a middle packet's payload_length
        last = n - 1
        for i in range(start, n):
            off = i * ps
            if 0 < i < last:  # a middle packet: full payload, no SOM/EOM
                yield (
                    pack_mid(prefix, mid_len, off, length),
                    view[off : off + ps],
                    False,
                    False,
                )
                continue
            end = min(off + ps, length)
            eom = i == last
            if i == 0:
                ses = _som_header(opcode, rel, eom, message_id, gen, job, pid_on_fep, resource_index, init, mb,
                                  header_data, length)  # fmt: skip
            else:
                plen = end - off
                ses = _MID_PACK(
                    (
                        opcode,
                        0,
                        rel | (_F_EOM if eom else 0),
                        message_id,
                        gen,
                        job,
                        pid_on_fep,
                        resource_index,
                        0,
                        init,
                        mb,
                        plen if plen <= MAX_WIRE_PAYLOAD else 0,
                        off,
                        length,
                    )
                )
            yield ses, view[off:end], i == 0, eom

    def single(
        self,
        data: bytes | bytearray | memoryview,
        message_id: int,
        *,
        pid_on_fep: int = 0,
        resource_index: int = 0,
        header_data: int | None = None,
        tag: int | None = None,
        job_id: int | None = None,
        generation: int = 0,
        relative: bool = True,
    ) -> tuple[bytes, memoryview]:
        """``(ses_header, payload)`` of a message that fits in one packet (``count(len(data)) ==
        1``): the one item :meth:`packets` yields for it (SOM and EOM), without a generator — the
        eager lanes' one-packet messages. Raises :class:`MessageError` for a longer message."""
        view = byte_view(data)
        length = len(view)
        if length > self.payload_size:
            raise MessageError(f"message of {length} bytes does not fit one packet of {self.payload_size}")
        return (
            _som_header(
                _SEND if tag is None else _TSEND, _F_REL if relative else 0, True, message_id, generation,
                self.job_id if job_id is None else job_id, pid_on_fep, resource_index, self.initiator,
                0 if tag is None else tag & _MASK64, header_data, length,
            ),
            view,
        )  # fmt: skip


def _som_header(
    opcode: int,
    rel: int,
    eom: bool,
    message_id: int,
    gen: int,
    job: int,
    pid_on_fep: int,
    resource_index: int,
    init: int,
    mb: int,
    header_data: int | None,
    length: int,
) -> bytes:
    """The standard header of a message's first packet (SOM; EOM too when it is the only one)."""
    flags = _F_SOM | rel | (_F_EOM if eom else 0) | (_F_HD if header_data is not None else 0)
    return _SOM_PACK(
        (opcode, 0, flags, message_id, gen, job, pid_on_fep, resource_index, 0, init, mb, header_data or 0, length)
    )
