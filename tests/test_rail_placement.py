"""Rail-aligned against server-major rank placement for a ring all-reduce (issue 26's bar), in
virtual time on the built-in ``rail`` fabric (8 servers × 2 GPUs, 2:1 leaves).

The bar itself — 16 ranks, 4 MiB at 100 Gb/s, rail-aligned ≥ 1.5× faster with 0 trims — costs some
20 s of CPU, too much for every CI run: it runs with ``UET_HEAVY_TESTS=1`` (README, "Servers, GPUs
and rails"). Measured: 664 µs and 0 trims rail-aligned, 1,531 µs and 517 trims server-major
(2.31×; RCCC with idle credit, the derived CC of a trimming rail fabric). CI checks the same bar at
a quarter of the scale — 512 KiB on 25 Gb/s links, the message against the bandwidth-delay product
about as at full size: 341 µs and 0 trims against 794 µs and 75 trims (2.3×), some 3 s of CPU."""

from __future__ import annotations

import os
from typing import Any

import pytest

from uet.sim.scenario import simulate


def _ring(size: int, placement: str, rate: int = 100_000_000_000) -> dict[str, Any]:
    res = simulate(
        {
            "workload": "allreduce",
            "endpoints": 16,
            "message_bytes": size,
            "topology": "rail",
            "placement": placement,
            "rate_bps": rate,
        }
    )
    assert res["ok"]
    return res


def _bytes(res: dict[str, Any], to: str) -> int:
    """Data bytes the directed links towards the switches whose name contains ``to`` carried."""
    return sum(b for name, _, b in res["links"]["links"] if to in name.split(">")[1])


def test_rail_aligned_ring_uses_the_rails_and_server_major_the_spines() -> None:
    rail, server = _ring(512 << 10, "rail", 25_000_000_000), _ring(512 << 10, "server", 25_000_000_000)
    assert rail["fabric"]["trims"] == 0 < server["fabric"]["trims"]
    assert server["virtual_s"] >= 1.5 * rail["virtual_s"]
    # server-major: every other hop is inside a server (scale-up), the other 8 change rail through a
    # spine; rail-aligned: 4 of the 16 hops leave their leaf (two group changes, two rail changes)
    assert _bytes(server, "spine") == 2 * _bytes(rail, "spine") > 0
    assert _bytes(server, "-nvs") > 0 == _bytes(rail, "-nvs")  # the scale-up switches


@pytest.mark.skipif(not os.environ.get("UET_HEAVY_TESTS"), reason="about 20 s of CPU: set UET_HEAVY_TESTS=1")
def test_issue_26_bar_rail_aligned_beats_server_major_by_1_5() -> None:
    rail, server = _ring(4 << 20, "rail"), _ring(4 << 20, "server")
    assert rail["fabric"]["trims"] == 0
    assert server["virtual_s"] >= 1.5 * rail["virtual_s"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--placement", "0,0", "-n", "2"], "[run] placement: hosts must be distinct indices in 0..15"),
        (["--placement", "diagonal"], "[run] placement 'diagonal': one of rail, server or a list of host indices"),
        (["--placement", "0,x"], "--placement '0,x': rail, server or host indices such as 0,2,4,6"),
        (["--topology", "default", "--gpus-per-server", "4"], "servers of several GPUs are modelled on the rail"),
    ],
)
def test_placement_options_refuse_mistakes_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from uet.tools.sim import main as uet_sim

    assert uet_sim(["-w", "allreduce", "--topology", "rail", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("uet-sim: error: ") and message in err and err.count("\n") == 1
