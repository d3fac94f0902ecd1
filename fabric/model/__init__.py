"""The sans-I/O switch model (rocev2-and-fabric.md §8): ports, buffers, ECN, trimming, PFC,
load balancing, whole fabrics in virtual time.

Frames (bytes) and integer-nanosecond times go in; frames with departure/arrival times, the next
deadline and telemetry records come out. Nothing here reads a clock or touches a socket.
"""

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
