"""Connection parameters agreed without a message: a static stand-in for the RDMA CM, so that RoCE
endpoints in separate processes (``uet-run --transport roce``) can open RC connections.

An RC queue pair needs its peer's QPN and start PSN before it may send (rocev2-and-fabric.md §6.1,
§6.2). Real deployments exchange them out of band (the RDMA connection manager, or a TCP socket in
perftest). **Decision**: every endpoint of a run computes them from the pair of addresses and a
shared ``secret``, so no exchange is needed and both ends agree:

* QPN of ``local``'s QP towards ``peer`` = 0x100 + (keyed BLAKE2b of ``"qpn|local|peer"`` mod
  (2^24 − 0x100)) (QPNs 0 and 1 are the special QPs of InfiniBand; the first 256 are left free);
* its start PSN = the low 24 bits of the keyed BLAKE2b of ``"psn|local|peer"``.

The QPN and the PSNs are what stops an off-path sender from injecting into a connection (IBA
checks both, and has nothing else without encryption), so they must not be computable from the
addresses: the key is the ``secret`` (``uet-run`` draws a random one per run and hands it to every
endpoint; a seeded test passes its own, so runs stay reproducible). It was the CRC-32 of the
addresses and the run's seed (0 by default) before issue 29: anyone could compute both and kill
a connection with one forged fatal NAK. The secret must be kept like a key.

Two peers of one endpoint may hash to the same QPN (about n²/2^25 for n peers: 3 × 10⁻⁵ for 32);
:class:`StaticCm` refuses such a pair with :class:`ConnectionCollision` rather than mixing two
connections up — another secret avoids it.
"""

from __future__ import annotations

import hashlib

from uet.roce.errors import RoceError

__all__ = ["ConnectionCollision", "StaticCm"]

_QPN_BASE = 0x100
_QPN_SPAN = (1 << 24) - _QPN_BASE


class ConnectionCollision(RoceError):
    """Two peers of one endpoint derived the same QPN (choose another secret)."""


class StaticCm:
    """Derived connection parameters (module docstring)."""

    def __init__(self, secret: int | bytes) -> None:
        self.secret = secret
        key = secret if isinstance(secret, bytes) else str(secret).encode()
        if len(key) > 64:
            key = hashlib.blake2b(key).digest()
        self._key = key

    def _mac(self, kind: str, local: str, peer: str) -> int:
        h = hashlib.blake2b(f"{kind}|{local}|{peer}".encode(), key=self._key, digest_size=8)
        return int.from_bytes(h.digest(), "big")

    def qpn(self, local: str, peer: str) -> int:
        """The QPN ``local`` uses for its connection to ``peer``."""
        return _QPN_BASE + self._mac("qpn", local, peer) % _QPN_SPAN

    def start_psn(self, local: str, peer: str) -> int:
        """The first PSN ``local`` sends to ``peer``."""
        return self._mac("psn", local, peer) & 0xFFFFFF

    def params(self, local: str, peer: str) -> tuple[int, int, int, int]:
        """``(local QPN, local start PSN, remote QPN, remote start PSN)`` of the pair."""
        return (
            self.qpn(local, peer),
            self.start_psn(local, peer),
            self.qpn(peer, local),
            self.start_psn(peer, local),
        )
