"""The driver interface: how ``uet-conformance`` tells the implementation under test what to send.

The initiator-side cases need the implementation's *sending* side to act on command: the tester
plays the target (and the network between), so something on the implementation's side must start
a SEND, a WRITE, a READ... toward the tester. That something is an **agent**, a thin program the
vendor writes on top of their stack's API (the QUIC interop runner and the Autobahn TestSuite
work the same way). :mod:`uet.interop.agent` is the reference agent, on the public
:class:`uet.Endpoint` API; ``uet-peer --agent ADDR`` serves the same channel on its endpoint.

**The control channel.** A stream socket the agent listens on: TCP (``HOST:PORT``) or a Unix
socket (``unix:PATH``), one tester connection at a time. Both directions carry JSON objects, one
per line (UTF-8, ``\\n``-terminated). Each command carries an integer ``id`` chosen by the tester;
the agent answers every command exactly once, **when the operation completes**, with an object
carrying the same ``id`` and ``rc``. Commands run concurrently: answers come in completion order,
not command order (a SEND whose ACK the tester withholds completes after a later READ).

``rc`` is the operation's outcome: ``"OK"``, or the name of the SES return code it failed with
(wire-format.md §11.4, e.g. ``"PERM_VIOLATION"`` from the target's response, ``"UNDELIVERABLE"``
when the transport gave up: retries exhausted, a PDC-fatal NACK). An agent that cannot parse or
perform a command answers ``"BAD_COMMAND"``; ``"error"`` may add words. Integers are JSON numbers,
byte strings lowercase hex.

============ ================================================================= ======================
``op``       arguments                                                          answer (besides rc)
============ ================================================================= ======================
``open``     ``address`` (the tester's Fabric Address), ``job``, ``pid``,      ``handle`` (int),
             ``ri``, ``mode`` (``"rud"``, ``"rod"``,                            ``address`` (its own)
             ``"rudi"`` or ``"uud"``)
``send``     ``handle``, ``data``, optional ``tag`` (a tagged send)             —
``write``    ``handle``, ``key``, ``offset``, ``data``                          —
``read``     ``handle``, ``key``, ``offset``, ``length``                        ``data``
``atomic``   ``handle``, ``key``, ``offset``, ``amo`` (AmoOp name, e.g.        ``value`` (fetched
             ``"SUM"``), ``type`` (AmoType name), ``operand`` (int),            value or null)
             ``fetch`` (bool)
``close``    ``handle``: close the implementation's PDCs toward that            ``pdcs`` (how many)
             destination gracefully (§2.12); answered once they are closed
============ ================================================================= ======================

``open`` creates no packet: it names a destination (the tester, addressed relatively with that
JobID / PIDonFEP / resource index) and the delivery mode later commands use. The implementation
sends to the tester's address on its UET port (UDP 4793 or the port both sides were given).

This module is the tester's side: :class:`Driver` connects, sends commands and collects answers.
"""

from __future__ import annotations

import json
import select
import socket
import time
from typing import Any

__all__ = ["Driver", "DriverError", "parse_address"]


class DriverError(Exception):
    """The agent cannot be reached, closed the channel, or did not answer in time."""


def parse_address(text: str) -> tuple[int, Any]:
    """``HOST:PORT`` → (AF_INET/AF_INET6, (host, port)); ``unix:PATH`` → (AF_UNIX, path).
    Raises ValueError for anything else."""
    if text.startswith("unix:"):
        if len(text) == 5:
            raise ValueError("unix: needs a path")
        return socket.AF_UNIX, text[5:]
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"expected HOST:PORT or unix:PATH, got {text!r}")
    host = host.strip("[]")
    return (socket.AF_INET6 if ":" in host else socket.AF_INET), (host, int(port))


class Driver:
    """The tester's end of the control channel (module docstring)."""

    def __init__(self, where: str, timeout: float = 5.0) -> None:
        fam, addr = parse_address(where)
        self.where = where
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(addr)
        except OSError as e:
            self.sock.close()
            raise DriverError(f"cannot reach the agent at {where}: {e}") from None
        self.sock.setblocking(False)
        self._buf = b""
        self._answers: dict[int, dict[str, Any]] = {}
        self._next = 1
        #: every command and answer of the current case, for failure reports
        self.log: list[tuple[str, str]] = []

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def command(self, op: str, **args: Any) -> int:
        """Send one command; returns its id (the answer comes with :meth:`result`)."""
        cid = self._next
        self._next += 1
        line = json.dumps({"id": cid, "op": op, **args})
        self.log.append(("command", line))
        try:
            self.sock.sendall(line.encode() + b"\n")
        except BlockingIOError:  # a full socket buffer: wait for it once, blocking
            self.sock.setblocking(True)
            try:
                self.sock.sendall(line.encode() + b"\n")
            finally:
                self.sock.setblocking(False)
        except OSError as e:
            raise DriverError(f"the agent at {self.where} closed the channel: {e}") from None
        return cid

    def _read(self, deadline: float | None) -> bool:
        """Read what the agent sent, waiting until ``deadline`` (None: only what is there now)."""
        left = 0.0 if deadline is None else deadline - time.monotonic()
        if left < 0 or (left == 0 and deadline is not None):
            return False
        r, _, _ = select.select([self.sock], [], [], left)
        if not r:
            return False
        try:
            chunk = self.sock.recv(65536)
        except BlockingIOError:
            return True
        except OSError as e:
            raise DriverError(f"the agent at {self.where} closed the channel: {e}") from None
        if not chunk:
            raise DriverError(f"the agent at {self.where} closed the channel")
        self._buf += chunk
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            self.log.append(("answer", line.decode(errors="replace")))
            try:
                msg = json.loads(line)
                self._answers[int(msg["id"])] = msg
            except (ValueError, KeyError, TypeError):
                raise DriverError(f"the agent sent a line that is not an answer: {line[:200]!r}") from None
        return True

    def poll(self, cid: int) -> dict[str, Any] | None:
        """The answer to command ``cid`` if it has arrived (consumed), else None; never waits."""
        while self._read(None):
            pass
        return self._answers.pop(cid, None)

    def result(self, cid: int, timeout: float) -> dict[str, Any] | None:
        """The answer to command ``cid`` (consumed), or None when none came within ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while cid not in self._answers:
            if not self._read(deadline):
                return None
        return self._answers.pop(cid)

    def call(self, op: str, timeout: float = 5.0, **args: Any) -> dict[str, Any]:
        """One command and its answer; :class:`DriverError` if none comes within ``timeout``."""
        cid = self.command(op, **args)
        ans = self.result(cid, timeout)
        if ans is None:
            raise DriverError(f"the agent did not answer {op!r} within {timeout:g} s")
        return ans
