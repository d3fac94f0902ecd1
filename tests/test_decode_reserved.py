"""Reserved bits are shown and flagged when they are not zero (wire-format.md §0: sent as 0), as
Wireshark's expert info does: every run of reserved bits of every header, and the three the decoder
used to drop silently (above the SES opcode, above PIDonFEP / resource index, bits 14:12 of the
SYN ``pdc_info``) through ``uet-decode``'s summary, ``-V`` and ``--json``."""

from __future__ import annotations

import json

import pytest
from uet.tools.decode import main
from wire_strategies import reserved_mask

from uet.wire import net, pds, roce, ses, tss
from uet.wire.chain import parse_uet

LAYOUTS = [*pds.ALL_LAYOUTS, *ses.ALL_LAYOUTS, *tss.ALL_LAYOUTS, *net.ALL_LAYOUTS, *roce.ALL_LAYOUTS]


@pytest.mark.parametrize("lay", LAYOUTS, ids=lambda lay: lay.name)
def test_each_reserved_run_is_read_alone_and_fields_are_untouched(lay) -> None:  # noqa: ANN001
    assert int.from_bytes(reserved_mask(lay), "big") == sum(
        ((1 << w) - 1) << (lay.size * 8 - at - w) for _n, at, w in lay.reserved
    )
    zero = bytes(lay.size)
    assert lay.reserved_values(zero) == {}
    for name, at, w in lay.reserved:
        buf = (((1 << w) - 1) << (lay.size * 8 - at - w)).to_bytes(lay.size, "big")
        assert lay.reserved_values(b"xx" + buf, 2) == {name: (1 << w) - 1}
        assert lay.decode(buf) == lay.decode(zero)  # still ignored by the codec
    assert lay.reserved_values(reserved_mask(lay)[:-1]) == {}  # truncated: nothing to report


#: the worked example's UET bytes (wire-format.md §13.1): a SYN RUD request with a standard SES header
UET = bytearray.fromhex(
    "118cffff0000100000010000"
    "05030001000000420003000000000000000000000000000000000000000000000000000000000000 00000005"
    "68656c6c6f"
)


def _dirty() -> bytes:
    b = bytearray(UET)
    b[10] |= 0x50  # pdc_info bits 14:12 (SYN form of the PDS request)
    b[12] |= 0x80  # above the SES opcode
    b[20] |= 0x30  # above pid_on_fep
    b[22] |= 0x10  # above resource_index
    return bytes(b)


def test_names_and_values_of_the_three_silent_runs() -> None:
    p = parse_uet(_dirty())
    assert parse_uet(bytes(UET)).reserved == {}
    assert p.reserved == {
        0: {"reserved_81": 0b101},
        1: {"reserved_0": 0b10, "reserved_64": 0b11, "reserved_80": 0b1},
    }
    d = p.to_dict()
    assert d["pds"]["reserved_81"] == 5 and d["ses"]["reserved_0"] == 2 and "reserved_0" not in d["pds"]
    assert d["ses"]["opcode"] == 5 and d["ses"]["pid_on_fep"] == 3  # fields unchanged
    assert p.reserved_warnings() == [
        "rud_rod_request_syn: reserved bits not zero (reserved_81 = 0x5)",
        "ses_standard_som: reserved bits not zero (reserved_0 = 0x2, reserved_64 = 0x3, reserved_80 = 0x1)",
    ]


def test_decode_tool_shows_and_flags_them(capsys: pytest.CaptureFixture[str]) -> None:
    frame = bytes.fromhex("45000059000040004011269 20a0000010a000002424212b900452bb9".replace(" ", "")) + _dirty()
    assert main(["--json", "--hex", frame.hex()]) == 0  # a warning, not a malformed packet
    rec = json.loads(capsys.readouterr().out)
    assert rec["uet"]["ses"]["reserved_64"] == 3
    assert any("ses_standard_som: reserved bits not zero" in w for w in rec["warnings"])
    assert main(["--hex", frame.hex()]) == 0
    assert "reserved_81 = 0x5" in capsys.readouterr().out
    assert main(["--bare", "--hex", _dirty().hex()]) == 0
    assert "reserved_0 = 0x2" in capsys.readouterr().out
    assert main(["-V", "--bare", "--hex", _dirty().hex()]) == 0
    out = capsys.readouterr().out
    assert "@10    reserved_81              0x5  [not zero]" in out and "@20    reserved_64" in out
    assert main(["--bare", "--hex", bytes(UET).hex()]) == 0
    assert "warning" not in capsys.readouterr().out
