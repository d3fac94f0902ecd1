"""The alpha-beta model with shared links (uet.workloads.sharing), on schedules small enough to
work out by hand: exact times from the path's α, w and ack."""

from __future__ import annotations

import pytest

from uet.workloads import algorithms as alg
from uet.workloads.alphabeta import Path, model_time, rail_paths
from uet.workloads.schedule import Builder
from uet.workloads.sharing import shared_time

PATH = Path(100e9, 1000, 4)
MIB = 1 << 20


def test_one_message_is_alpha_plus_wire_plus_ack() -> None:
    b = Builder(2, MIB)
    b.message(0, 1, 0, MIB)
    assert shared_time(b.schedule, PATH) == pytest.approx(PATH.wire_s(MIB) + PATH.alpha_s(MIB) + PATH.ack_s())


def test_two_children_sending_their_parent_at_once_share_its_downlink() -> None:
    """Ranks 1 and 2 each send rank 0 1 MiB at time 0: both arrive after two wire times (the
    closed forms charged one), and a chain of two hops after it waits for them."""
    b = Builder(3, MIB)
    _, r1 = b.message(1, 0, 0, MIB)
    _, r2 = b.message(2, 0, 0, MIB, stream=1)
    w, a, ack = PATH.wire_s(MIB), PATH.alpha_s(MIB), PATH.ack_s()
    assert shared_time(b.schedule, PATH) == pytest.approx(2 * w + a + ack)
    b.message(0, 1, 0, MIB, deps=[r1, r2])
    assert shared_time(b.schedule, PATH) == pytest.approx(2 * w + a + (w + a) + ack)


def test_messages_between_one_pair_go_one_after_the_other() -> None:
    """Two messages 0 → 1 ready at once: the second's last byte leaves one wire time after the
    first's (one PDC or queue pair per peer), not both at half the rate."""
    b = Builder(2, MIB)
    b.message(0, 1, 0, MIB)
    b.message(0, 1, 0, MIB, stream=1)
    w = PATH.wire_s(MIB)
    assert shared_time(b.schedule, PATH) == pytest.approx(2 * w + PATH.alpha_s(MIB) + PATH.ack_s())


def test_max_min_fairness_gives_a_flow_what_a_crowded_link_leaves() -> None:
    """0 → 2 and 1 → 2 share 2's downlink (half each); 0 → 3 shares 0's uplink with 0 → 2 and
    takes the other half. All three end at two wire times."""
    b = Builder(4, MIB)
    b.message(0, 2, 0, MIB)
    b.message(1, 2, 0, MIB)
    b.message(0, 3, 0, MIB)
    assert shared_time(b.schedule, PATH) == pytest.approx(2 * PATH.wire_s(MIB) + PATH.alpha_s(MIB) + PATH.ack_s())


def test_the_ring_runs_as_its_closed_form() -> None:
    """A pipelined ring never makes two messages meet on a link: the shared model gives the
    closed form's time (within rounding of the slices' sizes)."""
    for n, size in ((4, 64 << 10), (4, MIB)):
        b = Builder(n, size)
        alg.ring(b, range(n), 0, size, alg.Pipeline())
        closed = model_time("allreduce", "ring", n, size, PATH)
        assert shared_time(b.schedule, PATH) == pytest.approx(closed, rel=0.01)


def test_the_tree_slices_shrink_as_nccls_do() -> None:
    """NCCL's tree chunk rule: 8 × depth chunks per channel above 128 KiB, 4 × depth above
    64 KiB, depth above 32 KiB."""
    pipe = alg.Pipeline()  # 2 channels, 256 KiB
    assert alg.tree_pipe(pipe, 2 * MIB, 2).slice_bytes == 128 << 10  # 8 per channel: 8 ≥ 4 × 2
    assert alg.tree_pipe(pipe, MIB // 2, 2).slice_bytes == 64 << 10
    assert alg.tree_pipe(pipe, 2 * MIB, 3).slice_bytes == 64 << 10  # 16 per channel: 16 ≥ 4 × 3
    assert alg.tree_pipe(pipe, 16 * MIB, 2).slice_bytes == 256 << 10  # enough chunks already
    assert alg.tree_pipe(pipe, 1024, 3).slice_bytes == 32 << 10


def test_paths_of_different_rates_are_different_links() -> None:
    """Ranks 1 and 2 send rank 0 1 MiB at once, 1 over a scale-up link nine times faster, 2 over
    the NIC: they share no link, so each takes its own path's time (one shared path: two wire
    times for both)."""
    fast = Path(900e9, 250, 2)
    b = Builder(3, MIB)
    b.message(1, 0, 0, MIB)
    b.message(2, 0, 0, MIB)
    nic_t = PATH.wire_s(MIB) + PATH.alpha_s(MIB) + PATH.ack_s()
    fast_t = fast.wire_s(MIB) + fast.alpha_s(MIB) + fast.ack_s()
    assert shared_time(b.schedule, lambda src, dst: fast if src == 1 else PATH) == pytest.approx(max(nic_t, fast_t))
    assert nic_t > fast_t
    b.message(1, 0, 0, MIB, stream=1)  # a second message over the fast link: still under the NIC's time
    assert shared_time(b.schedule, lambda src, dst: fast if src == 1 else PATH) == pytest.approx(nic_t)


def test_rail_paths_follow_servers_and_rails() -> None:
    """Hosts numbered server by server (4 GPUs each): GPUs of one server over the scale-up link,
    one rail (the same GPU index) over 2 links, rails apart over 4."""
    su = Path(3.6e12, 250, 2)
    hosts = [0, 1, 4, 6]  # server 0 GPUs 0 and 1, server 1 GPUs 0 and 2
    paths = rail_paths(hosts, 4, PATH, su)
    assert paths(0, 1) is su
    assert paths(0, 2).links == 2 and paths(0, 2).rate_bps == PATH.rate_bps
    assert paths(1, 3).links == 4
