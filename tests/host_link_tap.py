"""A tap on a host's link in the fabric model, for tests that watch, alter or delay the frames a
host sends (uet.fabric.model).

It goes through the model's own hook, the NIC's ``on_transmit`` (a pcap tap uses it too:
uet.fabric.telemetry_io.install_taps), not by replacing a NIC method: the compiled model
(``UET_COMPILED=1``, uet.compiled) has native classes whose methods cannot be
replaced, so a test patching ``HostNic.send`` ran only on the pure-Python build.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Forward", "record_host_link", "tap_host_link"]

#: hands a frame to the link at the time of the frame being tapped
Forward = Callable[[bytearray], None]


def tap_host_link(fabric: Any, host: int, tap: Callable[[bytearray, Forward], None]) -> None:
    """Call ``tap(frame, forward)`` for each frame host ``host``'s NIC starts on its link (data
    and control alike, in the order they leave). ``forward(f)`` puts ``f`` on the link as if it
    were this frame: it arrives at the far end when this one would (after everything forwarded
    before it). A frame never forwarded is lost; one kept and forwarded from a later frame's tap
    arrives behind the frames that left before that one."""
    nic = fabric.nics[host]
    link = nic.on_transmit
    assert link is not None, "a NIC inside a Fabric hands its frames to the link"

    def tapped(n: Any, p: int, frame: bytearray, start: int, end: int) -> None:
        tap(frame, lambda f: link(n, p, f, start, end))

    nic.on_transmit = tapped


def record_host_link(fabric: Any, host: int) -> list[bytes]:
    """The frames host ``host`` puts on its link, as they leave (a list filled as the run goes)."""
    frames: list[bytes] = []

    def tap(frame: bytearray, forward: Forward) -> None:
        frames.append(bytes(frame))  # a copy: switches on the way rewrite the frame in place
        forward(frame)

    tap_host_link(fabric, host, tap)
    return frames
