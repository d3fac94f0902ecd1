"""``uet-bench pair --tss / --tamper / --rotate``: the secure transfer's domain, key rotation
and the exact accounting of tampered datagrams (behaviour.md §5)."""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

from uet.tools.bench.options import PairOptions

__all__ = ["PHASE_KEYS", "rotate_half_way", "security_config", "tss_fields", "tss_report"]

#: Figures of one UET transfer; with ``--tss`` the secure transfer's go under ``"secure"``.
PHASE_KEYS = (
    "intact",
    "delivered_bytes",
    "elapsed_s",
    "goodput_gbps",
    "pps",
    "ratio",
    "retransmits",
    "sender_cpu_us_per_pkt",
    "receiver_cpu_us_per_pkt",
    "error",
)


def security_config(opts: PairOptions, seed: int) -> Any:
    """The FEP's :class:`uet.tss.stage.SecurityConfig` for a secure transfer, else None.

    One cluster-mode secure domain (SDI 1) with the run's key; with ``--rotate`` the next key is
    pre-installed in slot 1 (accepted on receive from the start, make-before-break, behaviour.md
    §5.7) and each FEP switches its sender to it half-way (:func:`_tss_rotation`). With
    ``--tamper P`` an attacker flips one bit in a fraction P of the sealed datagrams this FEP sends,
    remembering them, and the FEP fingerprints every datagram it receives, so the run can count
    exactly how many tampered datagrams reached a receiver. The authentication-failure latch
    (§5.8 step 6) is off: the bench measures detection, not the latch.
    """
    if not opts.secure:
        return None
    from uet.tss import SdMode, SecureDomain, SecureDomainTable, TssConfig
    from uet.tss.stage import SecurityConfig, Tamper

    sd = SecureDomain.with_key(1, SdMode.CLUSTER, bytes.fromhex(opts.tss_keys[0]))
    if opts.rotate:
        sd.install(1, bytes.fromhex(opts.tss_keys[1]))
    tamper = Tamper(opts.tamper, seed=seed, record=True) if opts.tamper else None
    return SecurityConfig(
        SecureDomainTable([sd]),
        tamper=tamper,
        record_arrivals=tamper is not None,
        tss=TssConfig(auth_fail_threshold=None),
    )


def rotate_half_way(ep: Any, opts: PairOptions, counter: str) -> None:
    """``--rotate``: switch this FEP's sender to AN 1 once ``counter`` reaches half the data
    packets of the transfer (sender: sealed datagrams; receiver: datagrams received)."""
    if not (opts.secure and opts.rotate):
        return
    loop = asyncio.get_running_loop()
    half = max(1, -(-opts.size // opts.payload) // 2)

    def check() -> None:
        if ep.link.counters.get(counter, 0) >= half:
            ep.link.activate(1)
        else:
            loop.call_later(0.002, check)

    check()


def tss_report(ep: Any) -> dict[str, Any] | None:
    """One FEP's TSS accounting, taken after it closed (no more traffic): drops per reason, what
    its attacker tampered with, and the fingerprints of everything it received."""
    link = ep.link
    if not hasattr(link, "ctx"):
        return None
    tamper = link.tamper
    return {
        "drops": {r.value: n for r, n in link.ctx.drops.items()},
        "tampered": tamper.tampered if tamper is not None else 0,
        "tamper_fps": list(tamper.fingerprints) if tamper is not None else [],
        "arrivals": list(link.arrivals) if link.arrivals is not None else [],
        "rotations": link.counters["tss_rotations"],
        "sealed": link.ctx.stats["out_pkts"],
        "opened": link.ctx.stats["in_auth_pkts"],
    }


def tss_fields(
    secure_runs: list[tuple[dict[str, Any], dict[str, Any]]], plain_rounds: list[dict[str, Any]], opts: PairOptions
) -> dict[str, Any]:
    """The ``--tss`` figures: ``ratio_vs_plaintext``, ``auth_failures`` and their accounting.

    ``secure_runs``: per round, the secure transfer's sender record and figures; ``plain_rounds``:
    the same rounds' plaintext figures (the secure transfer of a round runs right after its
    plaintext one, so the two see the same load). The record's top-level figures (goodput,
    retransmits, CPU...) stay those of the plaintext transfers with or without ``--tss``; the
    secure transfers' own are under ``secure``: medians over the rounds (retransmits summed), and
    ``secure["rounds"]`` lists each round's goodput and ratio. ``ratio_vs_plaintext`` is the
    median of the per-round ratios.

    ``auth_failures`` counts every datagram the two receivers' TSS layers rejected, over all
    rounds (all drop reasons, ``tss_drops``: a flipped bit in the security header is rejected as
    unknown SDI, replay... before the tag is checked; ``auth_failures_bad_tag`` is the tag-failure
    share). ``tampered_reached_receiver`` counts the tampered datagrams (fingerprinted by the
    attacker after the flip) that a receiver actually read (fingerprinted on arrival), in both
    directions; datagrams lost before the receiver read them are ``tampered_lost``. With the
    secure transfer's own traffic never rejected (fresh TSC on every transmission, no
    reordering beyond the replay window), ``auth_failures`` must equal
    ``tampered_reached_receiver`` exactly (``auth_failures_match``).
    """
    drops: dict[str, int] = {}
    reached = tampered = rotations = sealed = 0
    ratios: list[float] = []
    per_round: list[dict[str, Any]] = []
    for (snd, sec), plain in zip(secure_runs, plain_rounds, strict=True):
        a, b = snd["tss"], snd["rx_tss"]
        for side in (a, b):
            for reason, n in side["drops"].items():
                drops[reason] = drops.get(reason, 0) + n
        b_arrivals, a_arrivals = set(b["arrivals"]), set(a["arrivals"])
        reached += sum(fp in b_arrivals for fp in a["tamper_fps"]) + sum(fp in a_arrivals for fp in b["tamper_fps"])
        tampered += a["tampered"] + b["tampered"]
        rotations += a["rotations"] + b["rotations"]
        sealed += a["sealed"] + b["sealed"]
        plain_gp = plain.get("goodput_gbps") or 0.0
        ratio = round(sec["goodput_gbps"] / plain_gp, 3) if plain_gp else None
        if ratio is not None:
            ratios.append(ratio)
        per_round.append({"goodput_gbps": sec["goodput_gbps"], "ratio_vs_plaintext": ratio})
    figures = [sec for _, sec in secure_runs]
    secure: dict[str, Any] = {}
    for k in PHASE_KEYS:
        vals = [f[k] for f in figures if f.get(k) is not None]
        if k == "intact":
            secure[k] = all(vals)
        elif k == "retransmits":
            secure[k] = sum(vals)
        elif k in ("delivered_bytes",):
            secure[k] = min(vals) if vals else 0
        elif k == "error":
            secure[k] = next(iter(vals), None)
        else:
            secure[k] = round(statistics.median(vals), 4) if vals else None
    if len(figures) > 1:
        secure["rounds"] = per_round
    auth_failures = sum(drops.values())
    return {
        # the verdict (and the exit status) is the secure transfer's, the one --tss asks about;
        # the plaintext companion only gives the ratio (issue 29 item 15)
        "intact": bool(secure["intact"]),
        "secure_intact": secure["intact"],
        "plaintext_intact": all(bool(r.get("intact")) for r in plain_rounds),
        "ratio_vs_plaintext": round(statistics.median(ratios), 3) if ratios else None,
        "auth_failures": auth_failures,
        "auth_failures_bad_tag": drops.get("bad_tag", 0),
        "tss_drops": drops,
        "tampered": tampered,
        "tampered_reached_receiver": reached,
        "tampered_lost": tampered - reached,
        "auth_failures_match": auth_failures == reached,
        "rotations": rotations,
        "sealed_datagrams": sealed,
        "secure": secure,
    }
