"""``uet-decode --keys`` on a capture of a live secure session (behaviour.md §5.5, issue 5 item 7).

Two secure endpoints exchange messages; a tap under each secure link records the sealed datagrams
as they leave, and the test writes them as Ethernet/IPv4/UDP frames (UDP source port = the
sending FEP's port, as the direct link's kernel socket sends them) with the project's pcap writer.
The decoder, given the domain's key file, must authenticate and decode every packet — PDS, SES
and the payload bytes — and, without the key file, must show them as encrypted only.
"""

from __future__ import annotations

import json

from tss_e2e_support import Tap, domain, inner, pair, payload, security, slink, transfer
from uet.tools.decode import main

from uet.keyfile import write_key_file
from uet.pcap import PcapWriter
from uet.wire.build import build_frame


async def _capture(tmp_path) -> tuple[str, str, int, bytes, bytes]:
    sd = domain()
    ea, eb = await pair(security(sd), security(sd))
    taps = {ea.address: Tap(inner(ea)), eb.address: Tap(inner(eb))}
    fwd, back = payload(20_000, seed=11), b"the reply is secret too"
    try:
        assert await transfer(ea, eb, fwd) == fwd
        assert await transfer(eb, ea, back) == back
    finally:
        await ea.close()
        await eb.close()
    port = slink(ea).port
    pcap = tmp_path / "secure.pcap"
    with PcapWriter(pcap) as w:
        for src, tap in taps.items():
            for dst, d in tap.sent:
                w.write(build_frame(d, src, dst, entropy=port, dport=port))
    keys = tmp_path / "keys.toml"
    write_key_file(keys, [sd])
    return str(pcap), str(keys), port, fwd, back


def _run(capsys, *argv: str) -> tuple[int, list[dict]]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, [json.loads(line) for line in out.splitlines()]


async def test_uet_decode_keys_decrypts_a_captured_secure_session(capsys, tmp_path) -> None:
    pcap, keys, port, fwd, back = await _capture(tmp_path)
    rc, objs = _run(capsys, pcap, "--keys", keys, "--port", str(port), "--json")
    assert rc == 0
    uets = [o["uet"] for o in objs if "uet" in o]
    assert len(uets) == len(objs) > 10
    assert all(u["decrypted"] is True for u in uets)
    pds_types = {u["pds"]["type_name"] if "type_name" in u["pds"] else u["pds"]["type"] for u in uets}
    assert len(pds_types) >= 3  # requests, ACKs and control packets at least
    sends = [u for u in uets if u.get("ses", {}).get("opcode_name") == "SEND"]
    assert sends
    carried = b"".join(bytes.fromhex(u.get("payload", "")) for u in sends)
    assert fwd[:4000] in carried and back in carried
    # Without the keys the same capture shows only the security headers.
    rc, objs = _run(capsys, pcap, "--port", str(port), "--json")
    assert rc == 0
    plain = [o["uet"] for o in objs if "uet" in o]
    assert plain and all(not u.get("decrypted") and "ses" not in u for u in plain)
    assert all(u["tss"]["sdi"] == 0x51 for u in plain)
