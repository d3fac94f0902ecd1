"""The sender's SACK scoreboard (uet.pds.scoreboard, issue 30 item 3): its SACK walk equals
``uet.wire.pds.sack_to_psns``, ACK parsing by the layouts' own sizes, and no bare PDS type numbers
left in uet/pds."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from uet.pds.ackbuilder import sack_window
from uet.pds.scoreboard import ack_cc_info, parse_ack, sack_walk
from uet.wire import pds as w
from uet.wire.layout import Layout
from uet.wire.pds import ACK, ACK_CC, ACK_CCX, ACK_EPSN, AckFlag, PdsType, psns_to_sack, sack_to_psns
from uet.wire.pdsfast import unpack_ack_cc_raw

PDS = Path(__file__).resolve().parent.parent / "uet" / "pds"
PSN = st.integers(0, 0xFFFFFFFF)


@given(PSN, st.integers(0, (1 << 64) - 1))
def test_the_scoreboard_sack_walk_is_sack_to_psns(base: int, bitmap: int) -> None:
    assert sack_walk(base, bitmap) == sack_to_psns(base, bitmap)


@given(PSN, st.sampled_from([0, 1, 1 << 63, (1 << 64) - 1, 0x8000_0000_0000_0001]))
def test_the_walk_at_the_bitmap_edges_and_psn_wrap(base: int, bitmap: int) -> None:
    assert sack_walk(base, bitmap) == sack_to_psns(base, bitmap)


@given(PSN, st.sets(st.integers(1, 200), max_size=40), st.integers(0, 200))
def test_the_ack_builders_sack_window_is_psns_to_sack(cack: int, ahead: set[int], hi_ahead: int) -> None:
    """The target's bitmap (uet.pds.ackbuilder) against the wire module's, across the 2^32 wrap
    and with the window slid to end at a PSN more than 64 beyond CACK."""
    rcvd = {(cack + d) & 0xFFFFFFFF for d in ahead}
    hi = (cack + hi_ahead) & 0xFFFFFFFF
    soff, bm = sack_window(rcvd, cack, hi)
    base = (cack + soff) & 0xFFFFFFFF
    assert bm == psns_to_sack(base, rcvd)
    assert soff == (hi_ahead - 63 if hi_ahead > 64 else 1) or not rcvd


def test_parse_ack_reads_each_kind_and_refuses_short_ones() -> None:
    ack = ACK.encode((PdsType.ACK, 0, 0, 3, 1000, 7, 9))
    a = parse_ack(ack, PdsType.ACK, 0)
    assert a is not None and (a.off, a.cack, a.spdcid, a.dpdcid, a.hl, a.ccw) == (3, 1000, 7, 9, ACK.size, -1)
    assert parse_ack(ack[:-1], PdsType.ACK, 0) is None
    ep = ACK_EPSN.encode((PdsType.ACK, 0, AckFlag.EPSN, 0, 1000, 7, 9, 55))
    assert parse_ack(ep[: ACK.size], PdsType.ACK, int(AckFlag.EPSN)) is None  # EPSN needs its 4 bytes
    cc = ACK_CC[(False, "raw")]
    v = cc.encode((PdsType.ACK_CC, 0, 0, 0, 1000, 7, 9, 1, 0, 2, 1, 0b101, 0xAB))
    a = parse_ack(v, PdsType.ACK_CC, 0)
    assert a is not None and (a.mpr, a.sack_off, a.bitmap, a.ccw) == (2, 1, 0b101, 0xAB | 1 << 64)
    assert parse_ack(v[:-1], PdsType.ACK_CC, 0) is None
    ccx = ACK_CCX[(False, "raw")]
    x = ccx.encode((PdsType.ACK_CCX, 0, 0, 0, 1000, 7, 9, 0, 0, 1, 1, 0, 5, 77))
    a = parse_ack(x, PdsType.ACK_CCX, 0)
    assert a is not None and (a.ccw, a.ccx, a.hl) == (5, 77, ccx.size)
    opaque = ccx.encode((PdsType.ACK_CCX, 0, 0, 0, 1000, 7, 9, 1, 0, 1, 1, 0, 5, 77))  # CCX type 1: undefined
    a = parse_ack(opaque, PdsType.ACK_CCX, 0)
    assert a is not None and a.ccw == -1 and a.ccx == -1


_FIELDS = ("t", "flags", "hl", "off", "cack", "spdcid", "dpdcid", "mpr", "sack_off", "bitmap", "ccw", "ccx")


@given(
    st.integers(0, 0x7F),
    st.integers(-0x8000, 0x7FFF),
    PSN,
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFFFF),
    st.integers(0, 0xF),
    st.integers(0, 0xFF),
    st.integers(-0x8000, 0x7FFF),
    st.integers(0, (1 << 64) - 1),
    st.integers(0, (1 << 64) - 1),
)
def test_the_ack_cc_record_from_the_fast_paths_read_is_the_layouts(
    flags: int, off: int, cack: int, sp: int, dp: int, cc_type: int, mpr: int, soff: int, bm: int, state: int
) -> None:
    """The ACK path reads an ACK_CC once for its fast path and builds the general path's record
    from those values (uet.pds.feedback): the same record as the layout's own decoding."""
    flags &= ~int(AckFlag.P)
    cc = ACK_CC[(False, "raw")]
    data = cc.encode((PdsType.ACK_CC, 0, flags, off, cack, sp, dp, cc_type, 0, mpr, soff, bm, state))
    t, _nh, f, o, c, s_, d, ct, _cf, m, so, b, st_ = cc.decode(data)
    want = (int(t), f, cc.size, o, c, s_, d, m, so, b, st_ | ct << 64, -1)
    got = ack_cc_info(unpack_ack_cc_raw(data), flags)
    assert tuple(getattr(got, n) for n in _FIELDS) == want
    a = parse_ack(data, PdsType.ACK_CC, flags)
    assert a is not None and tuple(getattr(a, n) for n in _FIELDS) == want


def _layouts() -> set[str]:
    names = {n for n, v in vars(w).items() if isinstance(v, Layout)}
    return names | {
        n for n, v in vars(w).items() if isinstance(v, dict) and any(isinstance(x, Layout) for x in v.values())
    }


def _is_type_expr(node: ast.expr) -> bool:
    """``t`` or ``data[0] >> 3``: an expression holding a PDS type."""
    if isinstance(node, ast.Name):
        return node.id == "t"
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.RShift) and ast.unparse(node.right) == "3"


def _int_const(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and type(n.value) is int for n in ast.walk(node))


def test_no_bare_pds_type_numbers_in_uet_pds() -> None:
    """Types are compared and encoded by name (PdsType, or its ``_P_*`` aliases): a comparison of
    a type against a number, a PDS header encoded with a literal type, a set of literal types, a
    PDC's request type (``ptype``) set from a number."""
    layouts = _layouts()
    hits = []
    for path in sorted(PDS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_is_type_expr(s) for s in sides) and any(
                    isinstance(s, ast.Constant) and type(s.value) is int for s in sides
                ):
                    hits.append(where + " " + ast.unparse(node))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "encode":
                base = node.func.value
                while isinstance(base, ast.Subscript | ast.IfExp | ast.Attribute):
                    base = base.body if isinstance(base, ast.IfExp) else base.value
                named = isinstance(base, ast.Name) and (base.id in layouts or base.id.startswith("_NSCC"))
                if named and node.args and isinstance(node.args[0], ast.Tuple) and node.args[0].elts:
                    if _int_const(node.args[0].elts[0]):
                        hits.append(where + " " + ast.unparse(node.args[0].elts[0]))
            elif isinstance(node, ast.Assign) and any(
                (isinstance(tg, ast.Name) and tg.id.endswith("_TYPES"))
                or (isinstance(tg, ast.Attribute) and tg.attr == "ptype")
                for tg in node.targets
            ):
                if _int_const(node.value):
                    hits.append(where + " " + ast.unparse(node))
    assert hits == [], hits
