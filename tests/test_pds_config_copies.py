"""The PDS core's typed copies of its configuration's per-packet fields (uet.pds.state; issue 28:
a ``PdsConfig`` field read is a generic attribute look-up in the compiled build) and
:func:`uet.pds.backoff.rto_ns_for`, the RTO rule over those copies."""

from __future__ import annotations

from dataclasses import replace

from uet.pds import PdsConfig
from uet.pds.backoff import rto_for, rto_ns_for
from uet.pds.core import PdsCore

MS = 1_000_000


def test_rto_ns_for_is_rto_for() -> None:
    for cfg in (PdsConfig(), PdsConfig(rto_ns=8 * MS, rto_max_ns=3 * MS), PdsConfig(rto_ns=100_000)):
        for shift in range(12):
            for base in (0, 1, 30 * MS, 150 * MS):
                assert rto_ns_for(cfg.rto_ns, cfg.rto_max_ns, shift, base) == rto_for(cfg, shift, base)
            assert rto_ns_for(cfg.rto_ns, cfg.rto_max_ns, shift) == rto_for(cfg, shift)


def test_core_copies_the_per_packet_fields_of_its_configuration() -> None:
    cfg = replace(
        PdsConfig(),
        rto_ns=3 * MS,
        rto_max_ns=70 * MS,
        mp_range=256,
        fast_retx_threshold=5,
        rto_adaptive=True,
        max_outstanding=64,
        control_entropy=0x1234,
        ack_timer_ns=7_000,
        target_idle_ns=9 * MS,
    )
    core = PdsCore("a", cfg)
    assert (
        core._rto_ns,
        core._rto_max_ns,
        core._mp_range,
        core._fast_retx_thr,
        core._rto_adaptive,
        core._max_outstanding,
        core._control_entropy,
        core._ack_timer_ns,
        core._target_idle_ns,
    ) == (
        cfg.rto_ns,
        cfg.rto_max_ns,
        cfg.mp_range,
        cfg.fast_retx_threshold,
        cfg.rto_adaptive,
        cfg.max_outstanding,
        cfg.control_entropy,
        cfg.ack_timer_ns,
        cfg.target_idle_ns,
    )
    default = PdsCore("b")
    assert (default._rto_ns, default._mp_range, default._control_entropy) == (
        PdsConfig().rto_ns,
        PdsConfig().mp_range,
        PdsConfig().control_entropy,
    )
