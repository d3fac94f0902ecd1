"""JSON-lines event log (conventions.md "Structured event logs", aioquic's qlog in spirit).

The PDS core emits records as dicts (``t`` in ns, ``ev`` in {"tx", "rx", "ack", "retx",
"nack_tx", "nack_rx", "pdc_open", "pdc_close", "drop"} plus fields); the endpoint adds its own
("msg_tx", "msg_rx", "msg_done", "msg_fail", "open", "close"). Congestion control (uet.cc) adds
"cc" records (qlog ``metrics_updated`` in spirit) tagged with the CCC's ``peer`` and ``tc``:
``algo`` "nscc" with ``cwnd``, ``inflight``, ``base_rtt`` and ``avg_delay`` whenever one of them
changes, "rccc" with ``credit`` and ``pull`` on each grant, and "rccc_rx" (the receiver's pacer)
with the ``grants`` sent and the ``active`` senders. :class:`EventLog` writes each as
one JSON object per line to a file or a text stream. Logging is optional: an endpoint without a
log never builds a record (the core is given ``log=None``), so it costs nothing when disabled.

Writes are buffered by the underlying file object; :meth:`EventLog.close` (or the endpoint's
close) flushes. Non-JSON values are rendered by ``_jsonable`` (bytes as hex, sets as lists,
plain enums by name); ``IntEnum`` values are ints to the JSON encoder and stay numbers.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import IO, Any

__all__ = ["EventLog", "read_events"]


def _jsonable(v: Any) -> Any:
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    return repr(v)


class EventLog:
    """Writes event records as JSON lines.

    ``target`` is a path (opened for writing, or appending with ``append=True``) or an open text
    stream (not closed by :meth:`close`). ``fields`` are added to every record (e.g. the FEP's
    address, so the logs of several endpoints can be merged). ``max_bytes`` bounds what this log
    writes: a record that would take it past the bound is not written but counted in
    ``dropped``, and :meth:`close` ends the file with one ``{"ev": "truncated", "dropped": n}``
    record (which may pass the bound by its own length).
    """

    def __init__(
        self, target: str | Path | IO[str], *, append: bool = False, max_bytes: int | None = None, **fields: Any
    ) -> None:
        #: the file written (None for a stream)
        self.path: str | None = None
        if isinstance(target, (str, Path)):
            self._fh: IO[str] = open(target, "a" if append else "w", encoding="utf-8")
            self._own = True
            self.path = str(target)
        else:
            self._fh = target
            self._own = False
        self.fields = fields
        self.records = 0
        self.bytes = 0
        self.dropped = 0
        self.max_bytes = max_bytes
        self._noted = False
        self._dumps = json.JSONEncoder(default=_jsonable, separators=(",", ":")).encode

    def __call__(self, record: dict[str, Any]) -> None:
        """Write one record (the PDS core's ``log`` callback signature)."""
        if self.fields:
            record = {**record, **self.fields}
        line = self._dumps(record) + "\n"
        if self.max_bytes is not None and self.bytes + len(line) > self.max_bytes:
            self.dropped += 1
            return
        self._fh.write(line)
        self.bytes += len(line)
        self.records += 1

    def write(self, t: int, ev: str, **fields: Any) -> None:
        """Write an endpoint-level record ``{"t": t, "ev": ev, **fields}``."""
        self({"t": t, "ev": ev, **fields})

    def flush(self) -> None:
        self._fh.flush()

    def close(self) -> None:
        """Flush, and close the file if this log opened it."""
        if self._fh.closed:
            return
        if self.dropped and not self._noted:
            self._noted = True
            note = {"ev": "truncated", "dropped": self.dropped, "max_bytes": self.max_bytes}
            self._fh.write(self._dumps(note) + "\n")
        self._fh.flush()
        if self._own:
            self._fh.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """All records of a JSON-lines event log (for tools and tests)."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
