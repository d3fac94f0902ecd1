"""One hostile host on the live switch process (fabric/switch.py; issue 15 item 14).

The report said a host sending far above its link rate, or an all-class PFC XOFF storm from
one host, cut an unrelated flow to 4–9 % of its baseline with the watchdog counting 0. Here the
attacker (host 0) does both at once on the live process, with a flow of its own stuck behind its
storm (host 2 → host 0), while the victim (host 1 → host 5) sends one frame at a time and waits
for it: every victim frame arrives, the attacker's excess is dropped at its own NIC, the
watchdog breaks the storm. No wall-clock pacing: the attack is driven by the victim's progress,
and the storm's length is bounded below by the modelled links (each victim frame crosses three
10 Mb/s hops), not by the machine's speed.
"""

from __future__ import annotations

import asyncio

from test_switch_process import Host, start, until
from uet.fabric.model.frames import pfc_frame
from uet.fabric.topology import _host_mac

from uet.wire.build import build_frame

#: the attacker's opening burst (1400 B frames toward host 6): 5.6 MB, far above what its
#: 10 Mb/s link drains while the switch reads it, and above its NIC queue (64 KiB here)
BURST = 4000
#: and per victim frame, with an all-class XOFF
FLOOD = 5
VICTIM = 100
WAIT = 60.0  # generous: a passing run never waits for it


async def test_flood_and_all_class_storm_do_not_starve_an_unrelated_flow() -> None:
    fp = await start(["host_link.rate_bps=10e6", "fabric_link.rate_bps=10e6", "switch.nic_queue_bytes=65536"])
    ip = [fp.fabric.host_ip(i) for i in range(8)]
    att, victim, sink, stuck = (Host(fp.ports[i], ip[i]) for i in (0, 1, 5, 2))
    try:
        for h in (att, victim, sink, stuck):
            h.announce()
        await until(lambda: all(fp.addrs[i] is not None for i in (0, 1, 2, 5)))
        xoff = pfc_frame(_host_mac(ip[0]), dict.fromkeys(range(8), 0xFFFF))
        flood = build_frame(b"\x10\x00" + bytes(1400), ip[0], ip[6], entropy=7, dscp=26, ecn=2)
        to_att = build_frame(b"\x10\x00" + bytes(1000), ip[2], ip[0], entropy=8, dscp=26, ecn=2)
        for k in range(BURST):
            att.send(flood)
            if k % 32 == 31:
                await asyncio.sleep(0)  # let the switch read (its socket buffer is finite)
        got = 0
        for i in range(VICTIM):
            att.send(xoff)
            for _ in range(FLOOD):
                att.send(flood)
            stuck.send(to_att)
            victim.send(build_frame(b"\x10\x00" + i.to_bytes(4, "big") + bytes(996), ip[1], ip[5], entropy=9,
                                    dscp=26, ecn=2))  # fmt: skip
            f = await sink.recv(timeout=WAIT)
            assert int.from_bytes(f[-1000:-996], "big") == i  # in order, none lost
            got += 1
        s = fp.summary()
        c = fp.fabric.counters
        assert got == VICTIM
        assert c[("drop", fp.fabric.plan.hosts[0].name, "nic_queue_full")] > 0  # excess dropped at its NIC
        assert s["fabric"]["watchdog"] >= 1  # the storm was broken
        assert "host_spoofed" not in s["io"]
    finally:
        fp.close()
        for h in (att, victim, sink, stuck):
            h.close()
