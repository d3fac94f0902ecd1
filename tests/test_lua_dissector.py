"""The shipped Wireshark Lua dissector (interop/wireshark/uet.lua): the committed file is what the
generator makes from the header declarations (uet.wire.lua), and tshark running it shows exactly
the fields ``uet-decode --json`` shows, frame by frame, on the sample capture (every delivery
mode, IPv6, IP protocol 253, TSS) and on ``uet-sim --pcap`` captures: trims (trimmed requests,
NACK TRIMMED and TRIMMED_LASTHOP), NSCC's ACK_CC, RCCC's CC requests and credit grants, and a
message in each delivery mode (RUD, ROD, RUDI, UUD), with no malformed frame. The tshark part is
skipped when tshark is absent."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from uet.fabric.telemetry_io import PcapTaps
from uet.interop.samples import load_sample
from uet.tools.decode import main as decode_main
from uet.tools.sim import main as sim_main

from uet.pcap import PcapngWriter, PcapWriter, read_capture
from uet.pds import Mode
from uet.sim.scenario import simulate
from uet.wire.build import build_frame
from uet.wire.layout import Raw
from uet.wire.lua import LAYOUTS, generate
from uet.workloads.base import RankReport, Workload

pytestmark = pytest.mark.processes  # tshark reads capture files; the simulator is in virtual time (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
LUA = ROOT / "interop" / "wireshark" / "uet.lua"
TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed")
RAW = {f"uet.{lay.name}.{n}" for lay in LAYOUTS for n, f in lay.fields.items() if isinstance(f, Raw)}
BYTES = RAW | {"uet.payload", "uet.ciphertext", "uet.icv"}
#: a SYN request whose reserved bits above the SES opcode and in pdc_info are set (test_decode_reserved)
DIRTY = bytes.fromhex(
    "118cffff0000100000015000"
    "85030001000000420003000000000000000000000000000000000000000000000000000000000000 00000005"
    "68656c6c6f"
)


def test_committed_dissector_is_the_generated_one() -> None:
    assert LUA.read_text() == generate(), "regenerate: python -m uet.wire.lua > interop/wireshark/uet.lua"


def _ours(capsys: pytest.CaptureFixture[str], pcap: Path) -> list[dict[str, Any]]:
    decode_main(["--json", str(pcap)])
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _expected(rec: dict[str, Any]) -> dict[str, Any]:
    """``uet-decode --json``'s UET fields under the dissector's names."""
    u = rec["uet"]
    out: dict[str, Any] = {}
    for d in [*(u[r] for r in ("entropy", "tss", "pds", "ses") if r in u), *u["extensions"]]:
        lay = next(lay for lay in LAYOUTS if lay.name == d["header"])
        for k in (*lay.field_names, *(n for n, _a, _w in lay.reserved)):
            if k in d:
                out[f"uet.{lay.name}.{k}"] = d[k]
    if "ciphertext" in u:
        out["uet.ciphertext"], out["uet.icv"] = u["ciphertext"], u["icv"]
    else:
        out["uet.payload_length"] = u["payload_length"]
        if u["payload_length"]:
            out["uet.payload"] = u["payload"]
    return out


def _flatten(node: Any, out: dict[str, Any]) -> None:
    if isinstance(node, list):
        for n in node:
            _flatten(n, out)
    elif isinstance(node, dict):
        for k, v in node.items():
            if k in ("uet.malformed", "uet.reserved"):  # expert infos, not fields
                continue
            if k.startswith("uet.") and isinstance(v, str):
                assert k not in out, f"{k} twice"
                out[k] = v.replace(":", "") if k in BYTES else int(v, 0)
            elif k.startswith("uet") or k == "_ws.expert":
                _flatten(v, out)


def _theirs(pcap: Path) -> list[dict[str, Any]]:
    r = subprocess.run(
        [TSHARK, "-X", f"lua_script:{LUA}", "-r", str(pcap), "-T", "json", "--no-duplicate-keys"],  # type: ignore[list-item]
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "Lua: Error" not in r.stderr, r.stderr
    out = []
    for pkt in json.loads(r.stdout):
        layers = pkt["_source"]["layers"]
        fields: dict[str, Any] = {}
        _flatten(layers.get("uet", {}), fields)
        fields["_malformed"] = "_ws.malformed" in layers or "uet.malformed" in json.dumps(layers)
        out.append(fields)
    return out


def _compare(capsys: pytest.CaptureFixture[str], pcap: Path) -> tuple[int, int]:
    """(UET frames compared, malformed frames by either decoder); asserts 0 differences."""
    ours, theirs = _ours(capsys, pcap), _theirs(pcap)
    assert len(ours) == len(theirs)
    n = bad = 0
    for rec, got in zip(ours, theirs, strict=True):
        if got.pop("_malformed") or "malformed" in rec:
            assert "malformed" in rec and "uet.payload_length" not in got, f"frame {rec['frame']}: malformed for one"
            bad += 1
            continue
        if rec.get("kind") != "uet":
            continue
        assert got == _expected(rec), f"frame {rec['frame']}"
        n += 1
    return n, bad


@needs_tshark
def test_tshark_with_the_dissector_equals_uet_decode_on_the_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pcap = tmp_path / "sample.pcap"
    with PcapWriter(str(pcap)) as w:
        for r in read_capture(load_sample()):
            w.write(r.frame, r.timestamp_ns)
        w.write(build_frame(DIRTY, "10.0.0.1", "10.0.0.2", entropy=0x4242), 0)  # reserved bits set
    n, bad = _compare(capsys, pcap)
    assert n == 27 and bad == 1  # every UET frame; the one malformed on purpose is malformed for both


@needs_tshark
def test_tshark_with_the_dissector_equals_uet_decode_on_sim_captures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The incast receiver's capture of three ``uet-sim --pcap`` runs in one file: a 16:1 incast
    that trims (NACK TRIMMED, trimmed requests), and NSCC's and RCCC's ACK_CC."""
    merged = tmp_path / "h0-all.pcapng"
    runs = [("none", "17", "64KiB"), ("nscc", "3", "8KiB"), ("rccc", "3", "8KiB")]
    with PcapngWriter(str(merged), name="h0") as w:
        for cc, ranks, size in runs:
            where = tmp_path / cc
            argv = ["-n", ranks, "--messages", "1", "--size", size, "--json", "--pcap", str(where)]
            assert sim_main([*argv, "--endpoint-set", f"pds.cc={cc}"]) == 0
            for r in read_capture(str(where / "h0.pcapng")):
                w.write(r.frame, r.timestamp_ns)
    capsys.readouterr()
    n, bad = _compare(capsys, merged)
    assert n == w.count and bad == 0
    decode_main(["--stats", "--json", "-q", str(merged)])
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert stats["pds:NACK"] > 0 and stats["pds:ACK_CC"] > 0
    assert stats["pds:RUD_CC_REQ"] > 0 and stats["control:CREDIT"] > 0  # RCCC's requests and credit grants
    ours = _ours(capsys, merged)
    headers = {line["uet"]["pds"]["header"] for line in ours}
    assert {"ack_cc_nscc", "nack", "rud_rod_cc_request_syn"} <= headers, headers
    trims = {(line["dscp"], line["uet"]["pds"].get("nack_code_name")) for line in ours}
    assert {(5, None), (7, None), (46, "TRIMMED"), (46, "TRIMMED_LASTHOP")} <= trims  # trimmed requests, both NACKs


class _EveryMode(Workload):
    """Rank 0 sends rank 1 one two-packet message in each delivery mode, one after the other."""

    name = "every_mode"

    def pairs(self) -> list[tuple[int, int]]:
        return [(0, 1)]

    async def run(self, rank: int, ep: Any, addresses: list[str], report: Any = None, *, now: Any = None) -> Any:
        report = report if report is not None else RankReport()
        for mode in Mode:
            if rank == 0:
                await ep.send(addresses[1], bytes([mode]) * 6000, mode=mode)
            else:
                await ep.recv()
        return report


@needs_tshark
def test_tshark_with_the_dissector_equals_uet_decode_in_every_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The simulator's capture (the taps ``uet-sim --pcap`` writes: pcapng per host, virtual
    time) of a message in each delivery mode, RUD, ROD, RUDI and UUD, with NSCC's ACK_CC: every
    frame the same in both decoders, none malformed."""
    taps = PcapTaps(tmp_path, 0, per="host", fmt="pcapng")
    try:
        simulate({"endpoints": 2}, None, {"payload_size": 4096}, workload=_EveryMode(2), taps=taps)
    finally:
        taps.close()
    pcap = tmp_path / "h0.pcapng"
    n, bad = _compare(capsys, pcap)
    assert n == sum(1 for _ in read_capture(str(pcap))) and bad == 0
    types = {line["uet"]["pds"]["type_name"] for line in _ours(capsys, pcap)}
    assert {"RUD_REQ", "ROD_REQ", "RUDI_REQ", "RUDI_RESP", "UUD_REQ", "ACK_CC"} <= types, types
