"""The ``uet-decode`` command line (uet.tools.decode)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.l2 import Ether
from scapy.utils import PcapNgWriter
from uet.interop.samples import DESCRIPTIONS, SAMPLE_TSS_KEY, sample_capture, sample_frames
from uet.tools.decode import Item, decode_item, error_line, main, parse_hex, summary, tree

from uet.pcap import PcapWriter
from uet.wire import pds, ses
from uet.wire.capture import parse_frame

pytestmark = pytest.mark.processes  # uet-decode children, no network (tests/conftest.py)

# wire-format.md §13.1, verbatim (hexdump offsets included).
HEX_13 = """
0000  45 00 00 59 00 00 40 00 40 11 26 92 0a 00 00 01
0010  0a 00 00 02 42 42 12 b9 00 45 2b b9 11 8c ff ff
0020  00 00 10 00 00 01 00 00 05 03 00 01 00 00 00 42
0030  00 03 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0040  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0050  00 00 00 05 68 65 6c 6c 6f
"""
BARE_ACK = "38 00 00 00 00 00 10 00 00 02 00 01"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


def test_section13_summary(capsys):
    rc, out, _ = run(capsys, "--hex", HEX_13)
    assert rc == 0
    (line,) = out.splitlines()
    for part in ("RUD_REQ", "psn=4096", "SEND", "10.0.0.1:16962 → 10.0.0.2:4793", "[SYN,AR]", "msg=1", "job=0x42"):
        assert part in line, part
    assert line.rstrip().endswith("payload 5")


def test_section13_json_has_every_field(capsys):
    rc, out, _ = run(capsys, "--json", "--hex", HEX_13)
    assert rc == 0
    obj = json.loads(out)
    assert obj["frame"] == 1 and obj["src"] == "10.0.0.1" and obj["sport"] == 0x4242
    uet = obj["uet"]
    for lay, key in ((pds.REQUEST_SYN, "pds"), (ses.STANDARD[(1, "none")], "ses")):
        assert uet[key]["header"] == lay.name
        assert set(lay.field_names) <= set(uet[key])
    assert uet["pds"]["psn"] == 4096 and uet["pds"]["type_name"] == "RUD_REQ"
    assert uet["ses"]["opcode_name"] == "SEND" and uet["payload"] == b"hello".hex()
    assert [lay["header"] for lay in obj["layers"]] == ["ipv4", "udp"]


def test_verbose_shows_enum_names_and_offsets(capsys):
    rc, out, _ = run(capsys, "-V", "--hex", HEX_13)
    assert rc == 0
    for part in ("RUD_REQ", "STANDARD", "SEND", "[SYN,AR]", "[SOM,EOM]", "@28", "start_psn", "payload  @84, 5 bytes"):
        assert part in out, part
    assert "\x1b[" not in out  # not a TTY: plain text
    rc, out, _ = run(capsys, "-V", "--color", "always", "--hex", HEX_13)
    assert rc == 0 and "\x1b[" in out and "RUD_REQ" in out


def test_malformed_hex_one_error_line(capsys):
    cut = "".join(line[6:] for line in HEX_13.strip().splitlines()).replace(" ", "")[: 2 * 60]
    rc, out, err = run(capsys, "--hex", cut)
    assert rc == 1
    (line,) = out.splitlines()
    assert line.startswith("frame 1: malformed: ipv4 at offset 60: truncated")
    # consistent lengths, UET cut inside the SES header
    rc, out, _ = run(capsys, "--bare", "--hex", "118cffff0000100000010000050300")
    assert rc == 1
    assert out.strip() == (
        "frame 1: malformed: ses_standard_som at offset 15: truncated: 44 bytes needed, 3 present (field message_id)"
    )


@pytest.mark.parametrize(
    "argv,msg",
    [
        (["/nonexistent/capture.pcap"], "No such file"),
        (["--keys", "/nonexistent/keys.toml", "--sample"], "keys.toml"),
        (["--filter", "ack,bogus", "--sample"], "unknown name(s) bogus"),
        (["--count", "-1", "--sample"], "--count"),
        (["--sample", "--hex", "00"], "give one input"),
    ],
)
def test_usage_and_file_errors_exit_2(capsys, argv, msg):
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    if msg:
        assert msg in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "text,msg", [("45 00 zz", "bad hex on line 1: 'zz'"), ("450", "odd number of digits"), ("# nothing", "no hex")]
)
def test_malformed_hex_is_one_error_line_and_exit_1(capsys, text, msg):
    """Text that is not hex is malformed input, like a malformed packet: exit 1, one line."""
    rc, out, err = run(capsys, "--hex", text)
    assert rc == 1 and out == ""
    assert err.startswith("uet-decode: malformed hex: ") and msg in err and err.count("\n") == 1


def test_argparse_errors_and_help(capsys):
    assert run(capsys, "--no-such-option")[0] == 2
    assert run(capsys, "--bare", "--ether", "--hex", "00")[0] == 2
    rc, out, _ = run(capsys, "--help")
    assert rc == 0 and "examples:" in out and "--sample" in out


def test_sample_one_malformed(capsys):
    rc, out, _ = run(capsys, "--sample")
    assert rc == 1
    lines = out.splitlines()
    assert len(lines) == len(DESCRIPTIONS)
    bad = [line for line in lines if "malformed" in line]
    assert len(bad) == 1 and bad[0].startswith(f"frame {len(DESCRIPTIONS)}: malformed: ses_standard_som")
    assert "PFC prio3=65535" in out and "not UET (EtherType 0x0806)" in out
    assert "TSS sdi=1" in out and "ip/253" in out and "[fd00::1]:16962" in out


def test_filter_stats_count(capsys):
    rc, out, _ = run(capsys, "--sample", "--filter", "NACK,probe")
    lines = out.splitlines()
    assert [line.split()[4:7] for line in lines if "malformed" not in line] == [
        ["10.0.0.1:4793", "NACK", "TRIMMED"],
        ["10.0.0.2:4793", "CONTROL", "PROBE"],
    ]
    assert sum("malformed" in line for line in lines) == 1 and rc == 1  # errors are always reported
    rc, out, _ = run(capsys, "--sample", "--filter", "ack", "--stats")
    body, _, stats = out.partition("\n\n")
    assert all(" ACK " in line for line in body.splitlines() if "malformed" not in line)
    assert len([line for line in body.splitlines() if " ACK " in line]) == 7
    assert f"packets: {len(DESCRIPTIONS)}  malformed: 1" in stats
    assert "ACK_CC" in stats and "SEND" in stats and "PROBE" in stats and "pfc" in stats
    rc, out, _ = run(capsys, "--sample", "--count", "3")
    assert rc == 0 and len(out.splitlines()) == 3
    rc, out, _ = run(capsys, "--sample", "--json", "--stats", "--filter", "send")
    objs = [json.loads(line) for line in out.splitlines()]
    assert objs[-1]["stats"]["ses:SEND"] == 6
    assert {o["uet"]["ses"]["opcode_name"] for o in objs[:-1] if "uet" in o} == {"SEND"}
    assert sum("malformed" in o for o in objs) == 1


def test_inputs_pcap_pcapng_hexfile_raw_stdin(capsys, tmp_path):
    frames = [f for _, _, f in sample_frames()]
    p = tmp_path / "cap.pcap"
    p.write_bytes(sample_capture())
    rc, out, _ = run(capsys, str(p))
    assert rc == 1 and len(out.splitlines()) == len(frames)
    ng = tmp_path / "cap.pcapng"
    w = PcapNgWriter(str(ng))
    for f in frames[:3]:
        w.write(Ether(f))
    w.close()
    rc, out, _ = run(capsys, str(ng))
    assert rc == 0 and len(out.splitlines()) == 3 and "RESPONSE OK" in out
    # a hex file with two packets (an offset of 0 starts the next), ASCII column included
    hexfile = tmp_path / "pkts.txt"
    hexfile.write_text(HEX_13 + "0000  38 00 00 00 00 00 10 00 00 02 00 01   8...........\n")
    rc, out, _ = run(capsys, str(hexfile))
    lines = out.splitlines()
    assert rc == 0 and "RUD_REQ" in lines[0] and "ACK cack=4096" in lines[1]
    raw = tmp_path / "frame.bin"
    raw.write_bytes(frames[1])
    rc, out, _ = run(capsys, str(raw))  # Ethernet detected from the EtherType
    assert rc == 0 and "RESPONSE OK" in out
    rc, out, _ = run(capsys, "--format", "raw", "--ether", str(raw))
    assert rc == 0 and "RESPONSE OK" in out
    rc, out, _ = run(capsys, "--format", "hex", str(raw))
    assert rc == 2
    rc, out, err = run(capsys, "--format", "pcap", str(hexfile))
    assert rc == 2 and "not a pcap or pcapng file" in err
    rc, out, _ = run(capsys, "--bare", "--hex", BARE_ACK)
    assert rc == 0 and "ACK cack=4096 ack_psn=4096 spdcid=2 dpdcid=1" in out


def test_port_option(capsys, tmp_path):
    frame = sample_frames()[0][2]
    moved = bytearray(frame)
    moved[36:38] = (5000).to_bytes(2, "big")  # dst port; UDP checksum now stale (a warning)
    p = tmp_path / "m.pcap"
    with PcapWriter(p) as w:
        w.write(bytes(moved), 0)
    rc, out, _ = run(capsys, str(p))
    assert "not UET (UDP 16962 → 5000)" in out
    rc, out, _ = run(capsys, "--port", "5000", str(p))
    assert "RUD_REQ" in out and "UDP checksum" in out


def test_parse_hex_forms():
    assert parse_hex("45:00:00:59") == [b"\x45\x00\x00\x59"]
    assert parse_hex("0x45, 0x0, 0xff") == [b"\x45\x00\xff"]
    assert parse_hex("4500 0059\n\n3800") == [b"\x45\x00\x00\x59", b"\x38\x00"]
    assert parse_hex("0x0000:  4500 0059  E..Y\n0x0004:  3800") == [b"\x45\x00\x00\x59\x38\x00"]
    assert parse_hex("00000000: 4500 0059 0000 4000 4011 2692 0a00 0001  E..Y..@.@.&.....") == [
        bytes.fromhex("450000590000400040112692 0a000001".replace(" ", ""))
    ]


def test_decodes_same_as_library(capsys):
    """The JSON output is the library's Frame.to_dict, not a second decoder."""
    frame = sample_frames()[5][2]
    rc, out, _ = run(capsys, "--json", "--ether", "--hex", frame.hex())
    obj = json.loads(out)
    del obj["frame"]
    assert obj == parse_frame(frame).to_dict()


KEY_FILE = f"""format = 1
[[domain]]
sdi = 1
mode = "direct"
  [[domain.key]]
  an = 0
  key = "{SAMPLE_TSS_KEY.hex()}"
"""


def test_keys_decrypts_sample_tss_packet(capsys, tmp_path):
    """--keys goes through the TSS sublayer's read-only decoder path: the sample's TSS packet
    decrypts with the right key, stays encrypted (not malformed) with a wrong one, and a key file
    others may read is refused (exit 2)."""
    keys = tmp_path / "keys.toml"
    keys.write_text(KEY_FILE)
    keys.chmod(0o600)
    rc, out, _ = run(capsys, "--sample", "--keys", str(keys), "--filter", "tss", "--json")
    objs = [json.loads(line) for line in out.splitlines()]
    (tss_obj,) = [o for o in objs if "uet" in o]
    u = tss_obj["uet"]
    assert u["decrypted"] is True and u["ses"]["opcode_name"] == "SEND" and bytes.fromhex(u["payload"]) == b"secret"
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(KEY_FILE.replace(SAMPLE_TSS_KEY.hex(), "ff" * 32))
    wrong.chmod(0o600)
    rc, out, _ = run(capsys, "--sample", "--keys", str(wrong), "--filter", "tss")
    assert "no key authenticates it" in out and rc == 1  # rc 1: the sample's malformed packet
    keys.chmod(0o644)
    rc, _, err = run(capsys, "--sample", "--keys", str(keys))
    assert rc == 2 and "mode 0644" in err


def test_module_entry_point_and_stdin():
    proc = subprocess.run(
        [sys.executable, "-m", "uet.tools.decode", "--stats", "-"],
        input=sample_capture(),
        capture_output=True,
        timeout=60,
    )
    out = proc.stdout.decode()
    assert proc.returncode == 1, proc.stderr
    assert "RUD_REQ" in out and "malformed: 1" in out and b"Traceback" not in proc.stderr


@settings(max_examples=150)
@given(
    st.sampled_from([f for _, _, f in sample_frames()]),
    st.lists(st.tuples(st.integers(0, 120), st.integers(0, 255)), max_size=3),
    st.integers(0, 120),
    st.booleans(),
)
def test_presentation_never_crashes(frame, edits, cut, bare):
    """Whatever decodes also prints: summary line, -V tree and JSON, for mutated sample frames."""
    b = bytearray(frame)
    for i, v in edits:
        if i < len(b):
            b[i] = v
    data = bytes(b[: max(0, len(b) - cut // 3)])
    item = Item(1, 5, None if bare else 1, data[42:] if bare else data)
    d = decode_item(item, 4793)
    if d.error is not None:
        assert error_line(d).startswith("frame 1: malformed: ")
    else:
        assert summary(d, 0)
        decoded = d.frame or d.uet
        assert decoded is not None
        json.dumps(decoded.to_dict())
    assert tree(d)
