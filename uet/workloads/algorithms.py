"""The collective algorithms, each a builder of a :class:`~uet.workloads.schedule.Schedule`.

Every builder takes the rank count (or the ranks' grouping into servers), the buffer size and a
:class:`Pipeline` (channels, slice size, depth), and returns the messages of every rank:

* :func:`ring` — the ring of NCCL, pipelined as NCCL pipelines it. The buffer is cut into one block
  per ring position; each block into ``channels`` × ``rounds`` slices of at most ``slice_bytes``
  (channel c of round L is a slice of every block). Each channel of each round runs the ring's
  2(m − 1) steps (reduce-scatter then all-gather; or one of them) with each step of a slice sent as
  soon as the previous step of *that slice* arrived (never a step-wide barrier); rounds overlap, a
  round's first send waiting only for the round ``depth`` earlier to have finished on that rank
  (NCCL's FIFO of slots: ``depth`` rounds in flight per channel).
* :func:`double_tree` — NCCL's double binary tree: half the buffer reduced up one binary tree and
  broadcast down it, the other half on a second tree in which (for an even rank count, the mirror
  image, rank r ↔ n − 1 − r; for an odd one, shifted by one) the leaves of the first are
  interior nodes; slice by slice, each node forwarding a slice up once its children's copies of
  that slice arrived, and down once its parent's arrived; the slices shrink as NCCL shrinks a
  tree's chunks (:func:`tree_pipe`).
* :func:`hierarchical` — per server a ring reduce-scatter (each local GPU i left with block i of
  its server's sum), then for each i a ring all-reduce of block i among the servers' GPU i (the
  rail of GPU i under rail-optimised placement), then per server a ring all-gather. A phase's
  first sends on a rank wait for that rank's share of the phase before (no cross-phase pipelining;
  **decision**, documented in docs/collectives.md).
* :func:`chain` — pipelined broadcast (from the root along the ring) and reduce (along the ring
  ending at the root), NCCL's ring broadcast and reduce.
* :func:`all_to_all` — every rank sends a block to every other (uniform, or skewed as
  mixture-of-experts routing skews it: :func:`moe_bytes`), sliced, each rank starting with its
  right neighbour (the shifted order NCCL's and MPI's pairwise exchanges use against incast).
* :func:`send_recv` — pipeline-parallel stages: every rank of stage s sends its buffer to the rank
  at the same position in stage s + 1 (the last stage wraps to the first, as nccl-tests' sendrecv).

Ranks are the workload's ranks; which host each one runs on is the engine's placement (rank i on
the i-th host it was given), so a ring or a rail follows whatever placement the topology makes.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from uet.workloads.schedule import Apply, Builder, Schedule, split

__all__ = [
    "Pipeline",
    "all_to_all",
    "btree",
    "chain",
    "double_tree",
    "dtree",
    "height",
    "hierarchical",
    "moe_bytes",
    "ring",
    "send_recv",
    "tree_pipe",
]


@dataclass(frozen=True)
class Pipeline:
    """How a buffer is cut and pipelined: ``channels`` parallel rings (or trees) each taking a
    share of every block, slices of at most ``slice_bytes``, ``depth`` rounds in flight."""

    channels: int = 2
    slice_bytes: int = 256 * 1024
    depth: int = 4

    def cut(self, block: int, blocks: int = 1) -> tuple[int, int]:
        """(channels, rounds) for ``blocks`` blocks of at least ``block`` bytes each: as many
        channels as asked (fewer when the block has fewer bytes), rounds so that a slice is at
        most ``slice_bytes`` (fewer when a block cannot give every slice a byte)."""
        c = max(1, min(self.channels, block))
        r = max(1, math.ceil(block / (c * self.slice_bytes)))
        return c, max(1, min(r, block // c))


Final = dict[int, list[int]]  # rank -> the receives after which its part of the region is final


def _blocks(offset: int, length: int, m: int, pipe: Pipeline) -> tuple[list[list[tuple[int, int]]], int, int]:
    """The region cut into m blocks, each into channels × rounds slices: slices[i][c * R + L]."""
    blocks = split(length, m, offset)
    if min(b[1] for b in blocks) < 1:
        raise ValueError(f"{length} bytes cannot be cut into {m} blocks")
    c, r = pipe.cut(min(b[1] for b in blocks))
    return [split(ln, c * r, off) for off, ln in blocks], c, r


def ring(
    b: Builder,
    members: Sequence[int],
    offset: int,
    length: int,
    pipe: Pipeline,
    *,
    reduce_scatter: bool = True,
    all_gather: bool = True,
    after: Final | None = None,
    label: str = "",
) -> Final:
    """Ring over ``members`` (ring order) on the region (module docstring). Reduce-scatter leaves
    ring position i with block i reduced; all-gather starts from position i holding block i.
    ``after``: receives each rank's first sends wait for (a previous phase). Returns, per rank,
    the receives after which its blocks are final."""
    m = len(members)
    final: Final = {r: [] for r in members}
    if m == 1:
        return {r: list((after or {}).get(r, [])) for r in members}
    slices, channels, rounds = _blocks(offset, length, m, pipe)
    steps: list[tuple[int, Apply]] = []  # (piece shift, apply) per step
    if reduce_scatter:
        steps += [(-t - 1, Apply.REDUCE) for t in range(m - 1)]
    if all_gather:
        steps += [(-s, Apply.COPY) for s in range(m - 1)]
    ag_from = m - 1 if reduce_scatter else 0  # the first all-gather step
    last: dict[tuple[int, int, int], int] = {}  # (round, channel, position) -> its last receive

    def gate(rd: int, ch: int, i: int) -> list[int]:
        """What a slice's first step waits for on position i: the phase before, and the credit
        (the same channel's round ``depth`` back finished there)."""
        deps = list((after or {}).get(members[i], []))
        if rd >= pipe.depth:
            deps.append(last[(rd - pipe.depth, ch, i)])
        return deps

    for rd in range(rounds):
        for ch in range(channels):
            k = ch * rounds + rd
            prev: list[int | None] = [None] * m  # per position: the receive of the previous step
            for t, (shift, apply) in enumerate(steps):
                got: list[int | None] = [None] * m
                for i in range(m):
                    j = (i + 1) % m
                    off, ln = slices[(i + shift) % m][k]
                    p, q = prev[i], prev[j]
                    deps = [p] if p is not None else gate(rd, ch, i)
                    rdeps = [q] if q is not None else gate(rd, ch, j)
                    _, rcv = b.message(
                        members[i], members[j], off, ln, apply=apply, deps=deps, recv_deps=rdeps, label=label
                    )
                    got[(i + 1) % m] = rcv
                    if (reduce_scatter and t == m - 2) or (all_gather and t >= ag_from):
                        final[members[(i + 1) % m]].append(rcv)
                prev = got
            for i in range(m):
                p = prev[i]
                assert p is not None
                last[(rd, ch, i)] = p
    return final


def chain(b: Builder, order: Sequence[int], length: int, pipe: Pipeline, *, apply: Apply) -> None:
    """Pipelined chain along ``order`` over the whole buffer: COPY is a broadcast from
    ``order[0]``, REDUCE a reduce onto ``order[-1]`` (module docstring)."""
    c, r = pipe.cut(length)
    for off, ln in split(length, c * r):
        prev: int | None = None
        for j in range(len(order) - 1):
            _, prev = b.message(order[j], order[j + 1], off, ln, apply=apply, deps=() if prev is None else (prev,))


def btree(n: int, r: int) -> tuple[int, list[int]]:
    """(parent, children) of rank ``r`` in NCCL's binary tree over ranks 0 … n − 1 (parent −1 at
    the root, rank 0, which has one child): r's parent clears r's lowest set bit and sets the next
    one up (or only clears it, past n); its children are r ± half its lowest bit, within n."""
    if r == 0:
        bit = 1
        while bit < n:
            bit <<= 1
        return -1, [bit >> 1] if n > 1 else []
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    if up >= n:
        up = r ^ bit
    kids = []
    low = bit >> 1
    if low:
        kids.append(r - low)
        while low and r + low >= n:
            low >>= 1
        if low:
            kids.append(r + low)
    return up, kids


def dtree(n: int) -> list[list[tuple[int, list[int]]]]:
    """The two trees of the double binary tree: for each, (parent, children) of every rank."""
    first = [btree(n, r) for r in range(n)]
    to: Callable[[int], int]
    back: Callable[[int], int]
    if n % 2:  # shifted by one
        to, back = (lambda x: (x - 1) % n), (lambda x: (x + 1) % n)
    else:  # mirrored
        to, back = (lambda x: n - 1 - x), (lambda x: n - 1 - x)
    second: list[tuple[int, list[int]]] = []
    for r in range(n):
        p, kids = first[to(r)]
        second.append((-1 if p < 0 else back(p), [back(k) for k in kids]))
    return [first, second]


def height(tree: Sequence[tuple[int, Sequence[int]]]) -> int:
    """Edges from the deepest rank of ``tree`` ((parent, children) per rank) to its root."""
    best = 0
    for x in range(len(tree)):
        h = 0
        while tree[x][0] >= 0:
            x, h = tree[x][0], h + 1
        best = max(best, h)
    return best


def tree_pipe(pipe: Pipeline, length: int, depth: int) -> Pipeline:
    """``pipe`` with its slices shrunk as NCCL shrinks a tree's chunks (``enqueue.cc``, the tree
    up/down pattern): halved while a channel gets fewer than 8 × ``depth`` of them and they are
    over 128 KiB, fewer than 4 × ``depth`` and over 64 KiB, fewer than ``depth`` and over 32 KiB —
    so that a deep tree's pipeline has enough slices to fill, and a slice that two children send
    their parent at once (sharing its downlink) holds up the next level for less. ``length``: the
    bytes of one tree."""
    c = max(1, min(pipe.channels, length))
    s = pipe.slice_bytes
    for floor, per in ((128 << 10, 8), (64 << 10, 4), (32 << 10, 1)):
        while length / (c * s) < per * depth and s > floor:
            s //= 2
    return replace(pipe, slice_bytes=s)


def double_tree(b: Builder, n: int, length: int, pipe: Pipeline) -> None:
    """All-reduce on the double binary tree (module docstring)."""
    halves = split(length, 2) if length >= 2 else [(0, length)]
    trees = dtree(n)
    pipe = tree_pipe(pipe, halves[0][1], max(height(t) for t in trees))
    for t, (tree, (hoff, hlen)) in enumerate(zip(trees, halves, strict=False)):
        root = next(r for r in range(n) if tree[r][0] < 0)
        post: list[int] = []  # post-order: children before parents

        def visit(r: int, tree: list[tuple[int, list[int]]] = tree, post: list[int] = post) -> None:
            for k in tree[r][1]:
                visit(k)
            post.append(r)

        visit(root)
        c, rounds = pipe.cut(hlen)
        down: dict[tuple[int, int], int] = {}  # (slice, rank) -> the receive from its parent
        for k, (off, ln) in enumerate(split(hlen, c * rounds, hoff)):
            up: dict[int, list[int]] = {r: [] for r in range(n)}
            for r in post:
                parent = tree[r][0]
                if parent < 0:
                    continue
                deps = list(up[r])
                if not tree[r][1] and k >= c * pipe.depth:  # a leaf: credit from depth rounds back
                    deps.append(down[(k - c * pipe.depth, r)])
                _, rcv = b.message(r, parent, off, ln, apply=Apply.REDUCE, deps=deps, stream=2 * t)
                up[parent].append(rcv)
            for r in reversed(post):  # pre-order: parents before children
                deps = up[r] if r == root else [down[(k, r)]]
                for kid in tree[r][1]:
                    _, down[(k, kid)] = b.message(r, kid, off, ln, deps=deps, stream=2 * t + 1)


def hierarchical(b: Builder, servers: Sequence[Sequence[int]], length: int, pipe: Pipeline) -> None:
    """All-reduce: intra-server reduce-scatter, inter-server all-reduce per local index (the
    rails), intra-server all-gather (module docstring). Servers hold equally many ranks."""
    g = len(servers[0])
    if any(len(s) != g for s in servers):
        raise ValueError("hierarchical needs servers of equal size")
    first: Final = {}
    for s in servers:
        first.update(ring(b, s, 0, length, pipe, all_gather=False))
    second: Final = {}
    for i, (off, ln) in enumerate(split(length, g)):
        rail = [s[i] for s in servers]
        second.update(ring(b, rail, off, ln, pipe, after={r: first[r] for r in rail}))
    for s in servers:
        ring(b, s, 0, length, pipe, reduce_scatter=False, after={r: second[r] for r in s})


def moe_bytes(n: int, total: int, skew: float, seed: int) -> list[int]:
    """Bytes a rank sends to each of ``n`` experts (one per rank) out of ``total``: proportional
    to 1 / k^skew where k = 1 … n is the expert's popularity rank (a seeded permutation, the same
    for every sender: every rank's tokens favour the same hot experts, as a mixture-of-experts
    router's do). ``skew`` 0 is uniform; 1 is Zipf's law (the hottest expert gets n / H(n) times
    the mean: 2.7× on 8 ranks). Whole bytes, summing to ``total``."""
    order = list(range(n))
    random.Random(f"moe/{seed}").shuffle(order)
    w = [0.0] * n
    for k, expert in enumerate(order):
        w[expert] = 1.0 / (k + 1) ** skew
    acc, out, prev = 0.0, [], 0
    scale = total / sum(w)
    for x in w:
        acc += x * scale
        cut = round(acc)
        out.append(cut - prev)
        prev = cut
    out[-1] += total - prev
    return out


def all_to_all(b: Builder, sizes: Sequence[Sequence[int]], pipe: Pipeline) -> None:
    """``sizes[r][j]`` bytes from rank r to rank j, r's blocks laid out in j order in its input,
    j's received blocks in r order in its output (buffer 1); sliced at ``slice_bytes``."""
    n = len(sizes)
    src_at = [[sum(row[:j]) for j in range(n)] for row in sizes]
    dst_at = [[sum(sizes[s][j] for s in range(r)) for r in range(n)] for j in range(n)]  # dst_at[j][r]
    for d in range(1, n):
        for r in range(n):
            j = (r + d) % n
            ln = sizes[r][j]
            if ln <= 0:
                continue
            pieces = max(1, math.ceil(ln / pipe.slice_bytes))
            for off, pl in split(ln, pieces):
                b.message(r, j, src_at[r][j] + off, pl, dst_buf=1, dst_offset=dst_at[j][r] + off)


def send_recv(b: Builder, n: int, stages: int, length: int, pipe: Pipeline) -> None:
    """Stage s's rank at position i sends the whole buffer to stage s + 1's rank at position i
    (module docstring); ``stages`` divides n."""
    if stages < 2 or n % stages:
        raise ValueError(f"stages = {stages}: 2 to {n}, dividing the {n} ranks")
    per = n // stages
    pieces = max(1, math.ceil(length / pipe.slice_bytes))
    for r in range(n):
        dst = ((r // per + 1) % stages) * per + r % per
        for off, ln in split(length, pieces):
            b.message(r, dst, off, ln, dst_buf=1)


def build(kind: str, n: int, length: int, pipe: Pipeline) -> Schedule:
    """A schedule of one of the plain ring collectives over ranks 0 … n − 1 (used by tests)."""
    b = Builder(n, length)
    ring(b, range(n), 0, length, pipe, reduce_scatter=kind != "all_gather", all_gather=kind != "reduce_scatter")
    return b.schedule
