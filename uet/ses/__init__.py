"""uet/ses: the sans-I/O Semantic Sublayer (spec/behaviour.md §6, wire-format.md §8–§11).

Modules: :mod:`~uet.ses.errors` (return codes as exceptions), :mod:`~uet.ses.packets` (request and
response codecs), :mod:`~uet.ses.addressing` (JobID / PIDonFEP / resource index resolution),
:mod:`~uet.ses.memory` (registered regions and keys), :mod:`~uet.ses.matching` (posted and
unexpected lists), :mod:`~uet.ses.atomics`, :mod:`~uet.ses.initiator` and
:mod:`~uet.ses.target` (the two engines), :mod:`~uet.ses.fep` (both wired for one FEP) and the
endpoint's eager fast path: :mod:`~uet.ses.message` (the delivered message, its configuration),
:mod:`~uet.ses.segmenter` (the initiator half) and :mod:`~uet.ses.reassembly` (the target half).
"""

from uet.ses.addressing import Resource, ResourceTable
from uet.ses.errors import SesError, error_for
from uet.ses.events import OpCompleted, OpFailed, OutPacket, RecvCompleted, SesResponse, WriteCompleted
from uet.ses.fep import SesFep
from uet.ses.initiator import InitiatorConfig, SesAddress, SesInitiator
from uet.ses.matching import Matcher, MatchLimits, PostedReceive
from uet.ses.memory import Access, MemoryRegion, MemoryTable
from uet.ses.target import SesTarget, TargetConfig

__all__ = [
    "Access",
    "InitiatorConfig",
    "MatchLimits",
    "Matcher",
    "MemoryRegion",
    "MemoryTable",
    "OpCompleted",
    "OpFailed",
    "OutPacket",
    "PostedReceive",
    "RecvCompleted",
    "Resource",
    "ResourceTable",
    "SesAddress",
    "SesError",
    "SesFep",
    "SesInitiator",
    "SesResponse",
    "SesTarget",
    "TargetConfig",
    "WriteCompleted",
    "error_for",
]
