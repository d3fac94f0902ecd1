"""Naming a target: :class:`Peer` and its resolution to an SES address (behaviour.md §1.1–§1.2).

A string (or a ``Peer`` field left None) means: the same JobID, PIDonFEP and resource index as
this FEP's own process — the SPMD convention where every process of a job uses the same PIDonFEP
on its own FEP — with generation 0 and relative addressing (our choice; the spec leaves the API
open). ``relative=False`` selects absolute addressing (REL clear).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from uet.ses.initiator import SesAddress

__all__ = ["Peer", "PeerBook"]


@dataclass(frozen=True)
class Peer:
    """A target of operations: a FEP's Fabric Address plus the SES addressing (§1.1–§1.2).

    Fields left None take this endpoint's own value (same job, same PIDonFEP, same resource
    index: the SPMD convention). ``relative=False`` selects absolute addressing (REL clear).
    """

    address: str
    pid: int | None = None
    ri: int | None = None
    job: int | None = None
    generation: int = 0
    relative: bool = True


class PeerBook:
    """Resolves peers for one FEP's process ``(job, pid, ri)``; caches the common string form."""

    __slots__ = ("job", "pid", "ri", "_fas", "_dests")

    def __init__(self, job: int, pid: int, ri: int) -> None:
        self.job = job
        self.pid = pid
        self.ri = ri
        self._fas: dict[str, str] = {}
        self._dests: dict[str, SesAddress] = {}

    def fa(self, address: str) -> str:
        """The canonical text of a Fabric Address (raises ValueError for a malformed one)."""
        fa = self._fas.get(address)
        if fa is None:
            fa = self._fas[address] = str(ipaddress.ip_address(address))
        return fa

    def dest(self, peer: Peer | str, pid: int | None = None, ri: int | None = None) -> SesAddress:
        """The SES address of ``peer`` (None fields: this process's own job / pid / index)."""
        if isinstance(peer, str):
            if pid is None and ri is None:
                d = self._dests.get(peer)
                if d is None:
                    d = self._dests[peer] = self.dest(Peer(peer))
                return d
            peer = Peer(peer)
        pid = peer.pid if pid is None else pid
        ri = peer.ri if ri is None else ri
        return SesAddress(
            self.fa(peer.address),
            self.pid if pid is None else pid,
            self.ri if ri is None else ri,
            peer.generation,
            self.job if peer.job is None else peer.job,
            peer.relative,
        )
