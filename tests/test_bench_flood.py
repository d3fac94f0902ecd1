"""``uet-bench flood`` (tools/bench/flood.py; issue 29 item 10): the honest goodput before,
during and after a SYN flood, as ratios measured in one run. The figures themselves depend on
the machine's load, so the test checks that the measurement is made: the flood reached the
honest receiver and was screened there, the honest sender kept completing messages, and every
figure is reported."""

from __future__ import annotations

import json

import pytest
from uet.tools.bench import main as bench_main
from uet.tools.bench.flood import flood_packet

from uet.wire.pds import REQUEST_SYN, ReqFlag


def test_a_flood_packet_is_a_syn_for_a_new_pdc() -> None:
    a, b = (REQUEST_SYN.decode(flood_packet(i)) for i in (0, 1))
    assert a.flags & ReqFlag.SYN and a.spdcid != b.spdcid and a.psn_offset == 0


def test_flood_reports_honest_goodput_around_a_screened_flood(capsys: pytest.CaptureFixture[str]) -> None:
    rc = bench_main(["flood", "--rate", "2000", "--seconds", "1", "--rounds", "1", "--warmup", "0.2", "--json"])
    rec = json.loads(capsys.readouterr().out)
    assert rc == 0 and rec["sender_failures"] == 0
    (r,) = rec["rounds"]
    assert r["clean_mbps"] > 0 and r["flood_rate"] > 0
    assert all(isinstance(rec[k], float) for k in ("during", "after_1s"))
    assert rec["receiver"]["drop_unverified_syn"] > 0  # the flood arrived and was screened
    assert set(r["cpu_s"]["flood"]) >= {"honest_sender", "honest_receiver", "flooder"}


def test_flood_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["flood", "--seconds", "0.5"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
