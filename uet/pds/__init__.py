"""Packet Delivery Sublayer: the sans-I/O PDS core (RUD, ROD, RUDI, UUD).

See :mod:`uet.pds.core` and spec/behaviour.md §2.
"""

from uet.pds.config import Mode, PathWindow, PdcStateError, PdsClosedError, PdsConfig, PdsError, PdsLimitError, SesNack
from uet.pds.core import PdsCore
from uet.pds.events import Acked, AckedRun, Delivery, Event, Failed, NackReceived, PdcClosed, PdcOpened, ProbeAnswered
from uet.pds.seams import CongestionGate, EntropyStrategy, FixedWindowGate, RotatingEntropy, SingleEntropy
from uet.pds.states import (
    INITIATOR_TRANSITIONS,
    TARGET_TRANSITIONS,
    InitiatorState,
    TargetState,
    transition,
)

__all__ = [
    "INITIATOR_TRANSITIONS",
    "TARGET_TRANSITIONS",
    "Acked",
    "AckedRun",
    "CongestionGate",
    "Delivery",
    "EntropyStrategy",
    "Event",
    "Failed",
    "FixedWindowGate",
    "InitiatorState",
    "Mode",
    "NackReceived",
    "PathWindow",
    "PdcClosed",
    "PdcOpened",
    "PdcStateError",
    "PdsClosedError",
    "PdsConfig",
    "PdsCore",
    "PdsError",
    "PdsLimitError",
    "ProbeAnswered",
    "RotatingEntropy",
    "SesNack",
    "SingleEntropy",
    "TargetState",
    "transition",
]
