"""Network namespaces for many-host tests: N namespaces joined by veth pairs and a bridge.

:class:`NetnsLab` builds, for one test, what N hosts on one Ethernet segment look like:

* a namespace ``<tag>br`` holding a Linux bridge ``br0`` (the "switch"; it lives in its own
  namespace so nothing is attached to the machine's own network),
* N namespaces ``<tag>h0`` … each with ``lo`` up and an ``eth0`` that is one end of a veth pair
  whose other end is a port of ``br0``, addressed ``198.18.0.(i+1)/24`` (RFC 2544's benchmark
  range, routed nowhere) with a 9000-byte MTU (a fabric's jumbo frames: a 4 KiB UET payload
  travels unfragmented, over UDP and over IP protocol 253 alike).

It needs root and ``ip`` (iproute2). :func:`unavailable` gives the reason it cannot run here (the
tests skip with it); CI runs as root. Everything is torn down on exit (deleting a namespace
deletes its veth ends).

Two ways to put a program in a namespace:

* :meth:`NetnsLab.inside` switches *this thread* into namespace ``i`` (``setns(2)``) for the
  duration of a ``with`` block: sockets created there stay in that namespace after the block, so
  one asyncio test can open an endpoint in each namespace and drive them from one event loop;
* :meth:`NetnsLab.popen` / :meth:`NetnsLab.run` start a process in it (``ip netns exec``).

A process the lab starts never outlives it: :meth:`NetnsLab.close` stops every one still running
(SIGTERM, then SIGKILL after a grace period), and each is started with ``PR_SET_PDEATHSIG`` so
that it also gets SIGTERM when the test process dies without cleaning up (killed by a timeout,
``os._exit``): a ``uet-peer`` left serving in a deleted namespace once outlived its test.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["NetnsLab", "unavailable"]

_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_serial = itertools.count()
#: how long a process the lab started gets to exit after SIGTERM before SIGKILL
STOP_GRACE_S = 10.0


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def unavailable() -> str | None:
    """None when namespaces can be made here, else why not (a skip reason)."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    if shutil.which("ip") is None:
        return "network namespaces need iproute2's `ip`"
    name = f"uetprobe{os.getpid()}"
    try:
        _ip("netns", "add", name)
    except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired) as e:
        err = getattr(e, "stderr", b"") or b""
        return f"cannot create a network namespace: {err.decode(errors='replace').strip() or e}"
    with contextlib.suppress(Exception):
        _ip("netns", "del", name)
    return None


def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it dies (``ip netns
    exec`` execs the program in place, so the setting reaches it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def stop(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM ``proc`` if it still runs, SIGKILL it after ``grace_s``, and reap it."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class NetnsLab:
    """``n`` namespaced hosts on one bridge (module docstring); a context manager."""

    def __init__(self, n: int, *, mtu: int = 9000, stop_grace_s: float = STOP_GRACE_S) -> None:
        self.n = n
        self.mtu = mtu
        self.stop_grace_s = stop_grace_s
        self.tag = f"u{os.getpid() % 100000}{next(_serial)}"
        self.bridge_ns = f"{self.tag}br"
        self.names = [f"{self.tag}h{i}" for i in range(n)]
        self.addresses = [f"198.18.0.{i + 1}" for i in range(n)]
        self._made: list[str] = []
        self._procs: list[subprocess.Popen] = []

    def __enter__(self) -> NetnsLab:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _build(self) -> None:
        br = self.bridge_ns
        _ip("netns", "add", br)
        self._made.append(br)
        _ip("-n", br, "link", "add", "br0", "type", "bridge")
        _ip("-n", br, "link", "set", "br0", "mtu", str(self.mtu), "up")
        for i, (ns, addr) in enumerate(zip(self.names, self.addresses, strict=True)):
            _ip("netns", "add", ns)
            self._made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "add", "eth0", "mtu", str(self.mtu), "type", "veth",
                "peer", "name", f"p{i}", "netns", br)  # fmt: skip
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", br, "link", "set", f"p{i}", "mtu", str(self.mtu), "master", "br0", "up")

    def close(self) -> None:
        """Stop every process started here that still runs (:func:`stop`), then delete every
        namespace made (their veth ends go with them)."""
        while self._procs:
            stop(self._procs.pop(), self.stop_grace_s)
        while self._made:
            name = self._made.pop()
            with contextlib.suppress(Exception):
                _ip("netns", "del", name)

    @contextlib.contextmanager
    def inside(self, i: int) -> Iterator[None]:
        """Run the block with this thread in host ``i``'s namespace (sockets made there stay)."""
        back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            _setns(f"/run/netns/{self.names[i]}")
            try:
                yield
            finally:
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.setns(back, _CLONE_NEWNET) != 0:  # pragma: no cover - would leave us stranded
                    raise OSError(ctypes.get_errno(), "setns back to the test's namespace failed")
        finally:
            os.close(back)

    def command(self, i: int, argv: Sequence[str]) -> list[str]:
        """``argv`` prefixed to run in host ``i``'s namespace."""
        return ["ip", "netns", "exec", self.names[i], *argv]

    def popen(self, i: int, argv: Sequence[str], **kw: Any) -> subprocess.Popen:
        """Start ``argv`` in host ``i``'s namespace; it is stopped when the lab closes or this
        process dies (module docstring)."""
        p = subprocess.Popen(self.command(i, argv), preexec_fn=_die_with_parent, **kw)
        self._procs.append(p)
        return p

    def run(self, i: int, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess:
        """Run ``argv`` to completion in host ``i``'s namespace (SIGTERM if this process dies)."""
        return subprocess.run(self.command(i, argv), preexec_fn=_die_with_parent, **kw)
