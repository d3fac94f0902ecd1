"""The sans-I/O switch model (rocev2-and-fabric.md §8): ports, buffers, ECN, trimming, PFC,
load balancing, whole fabrics in virtual time.

Frames (bytes) and integer-nanosecond times go in; frames with departure/arrival times, the next
deadline and telemetry records come out. Nothing here reads a clock or touches a socket.

``UET_COMPILED=1`` imports the modules from their optional compiled build instead, when one made
from the current sources exists (:mod:`uet.compiled`; the pure-Python modules are the reference).
"""

# ruff: noqa: E402 -- the modules below are imported after the choice between the two builds
from uet.compiled import active as _compiled

#: True when this package's modules are the compiled build (uet.compiled, chosen when uet is imported)
COMPILED: bool = _compiled()

from uet.fabric.model.config import (
    BufferConfig,
    EcnConfig,
    LbConfig,
    PfcConfig,
    SwitchConfig,
    TcConfig,
    TrimConfig,
    WatchdogConfig,
    default_dscp_map,
)
from uet.fabric.model.events import EventQueue
from uet.fabric.model.fabric import Fabric
from uet.fabric.model.port import Port
from uet.fabric.model.switch import PortSpec, Switch, Transmission
from uet.fabric.model.telemetry import Counters, Telemetry

__all__ = [
    "BufferConfig",
    "Counters",
    "EcnConfig",
    "EventQueue",
    "Fabric",
    "LbConfig",
    "PfcConfig",
    "Port",
    "PortSpec",
    "Switch",
    "SwitchConfig",
    "TcConfig",
    "Telemetry",
    "Transmission",
    "TrimConfig",
    "WatchdogConfig",
    "default_dscp_map",
]
