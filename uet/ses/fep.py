"""One FEP's SES: memory table, resources, initiator and target engines wired together.

This is the object the endpoint drives (sans-I/O, like the PDS core): it gives the PDS core its
``on_deliver`` hook, takes the PDS ``Acked``/``Failed`` events, and hands out every request packet
either engine wants sent. The initiator and target share the memory table (a rendezvous send
registers its buffer there) and the target calls the initiator for rendezvous reads and RTRs, and
routes read-return data and RTRs that arrive as requests back to it (behaviour.md §6.5–§6.7).
"""

from __future__ import annotations

import random
from typing import Any

from uet.ses.addressing import ResourceTable
from uet.ses.events import OpCompleted, OpFailed, OutPacket, RecvCompleted, WriteCompleted
from uet.ses.initiator import InitiatorConfig, SesInitiator
from uet.ses.matching import MatchLimits
from uet.ses.memory import MemoryTable
from uet.ses.target import SesTarget, TargetConfig

__all__ = ["SesFep"]


class SesFep:
    """SES for one Fabric Endpoint: ``initiator``, ``target``, ``memory``, ``resources``."""

    def __init__(
        self,
        address: str,
        *,
        initiator: InitiatorConfig | None = None,
        target: TargetConfig | None = None,
        limits: MatchLimits | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.address = address
        rng = rng or random.Random()
        self.memory = MemoryTable(rng=rng)
        self.resources = ResourceTable(limits)
        self.initiator = SesInitiator(initiator, memory=self.memory, rng=rng)
        self.target = SesTarget(
            resources=self.resources, memory=self.memory, initiator=self.initiator, config=target, rng=rng
        )

    def on_deliver(self, delivery: Any) -> tuple[int, bytes, bool] | None:
        """The PDS core's ``on_deliver`` hook."""
        return self.target.on_deliver(delivery)

    def on_ack(self, token: Any, response_next_hdr: int, response: bytes, now: int = 0) -> None:
        """PDS ``Acked`` for a packet from :meth:`packets_to_send` (read-return packets included)."""
        self.initiator.on_ack(token, response_next_hdr, response, now)

    def on_failed(self, token: Any, reason: str, nack_code: int | None = None, now: int = 0) -> None:
        """PDS ``Failed`` for a packet."""
        self.initiator.on_failed(token, reason, nack_code, now)

    def packets_to_send(self) -> list[OutPacket]:
        """Every request packet ready: the initiator's, then the target's read-return data."""
        return self.initiator.packets_to_send() + self.target.packets_to_send()

    def next_event(self) -> OpCompleted | OpFailed | RecvCompleted | WriteCompleted | None:
        """Initiator completions first, then target completions."""
        return self.initiator.next_event() or self.target.next_event()

    def get_timer(self) -> int | None:
        """Earliest deadline of either engine (retry backoff, RTR wait, reassembly expiry)."""
        ts = [t for t in (self.initiator.get_timer(), self.target.get_timer()) if t is not None]
        return min(ts) if ts else None

    def handle_timer(self, now: int) -> None:
        self.initiator.handle_timer(now)
        self.target.handle_timer(now)
