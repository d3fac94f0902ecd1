"""TSS (needs ``--keys``): tampered, replayed, wrong-SDI, wrong-epoch and unsecured packets are
dropped silently; good ones are accepted and answered sealed (behaviour.md §5.5, §5.6, §5.8;
wire-format.md §3)."""

from __future__ import annotations

from uet.conformance.case import SHOULD, case
from uet.conformance.cases._util import OP, check
from uet.conformance.session import Pdc, Session, Skipped
from uet.conformance.wirekit import ses_standard

A = "tss"


def _need(s: Session) -> int:
    """Skip without keys; else the target's SDI (chosen with the keys, Session.__init__)."""
    if s._tss is None or s.target.sdi is None:
        raise Skipped("no TSS key file given (--keys FILE)")
    return s.target.sdi


def _syn_pt(s: Session, p: Pdc) -> bytes:
    return p.header(p.start) + ses_standard(s.ses(opcode=OP.NO_OP))


def _silent_after(s: Session, p: Pdc, wire: bytes, what: str) -> None:
    s.send_raw(wire)
    s.assert_silent(lambda r: p.mine(r), what)


@case("TSS-001", A, "a sealed SYN is accepted and answered by a sealed ACK", "behaviour.md §5.8")
def _good(s: Session) -> None:
    _need(s)
    p = Pdc(s)
    r = p.open()
    check(r.is_ack and r.pds.dpdcid == p.spdcid, "an ACK (opened with the SD key) to our PDC", r)


def _tamper(where: str):
    def t(s: Session) -> None:
        _need(s)
        p = Pdc(s)
        wire = bytearray(s.seal(_syn_pt(s, p)))
        i = {"header": 3, "ciphertext": 14, "tag": len(wire) - 1}[where]
        wire[i] ^= 0x01
        _silent_after(s, p, bytes(wire), f"no reply to a packet with a flipped bit in its {where}")

    return t


for _k, _w in enumerate(("ciphertext", "tag", "header")):
    case(f"TSS-{_k + 2:03d}", A, f"a packet with one bit flipped in its {_w} is dropped silently", "behaviour.md §5.8",
         hostile=True)(_tamper(_w))  # fmt: skip


@case(
    "TSS-005", A, "a replayed sealed packet (same TSC) is dropped silently", "behaviour.md §5.6", SHOULD, hostile=True
)
def _replay(s: Session) -> None:
    _need(s)
    p = Pdc(s)
    wire = s.seal(_syn_pt(s, p))
    s.send_raw(wire)
    p.ack_for(p.start)
    p.dpdcid = None
    _silent_after(s, p, wire, "no reply to a replay of an accepted packet")


@case("TSS-006", A, "a packet sealed for a secure domain the target does not have is dropped", "behaviour.md §5.8",
      hostile=True)  # fmt: skip
def _wrong_sdi(s: Session) -> None:
    tsdi = _need(s)
    from uet.tss.context import TssContext
    from uet.tss.domain import SecureDomain, SecureDomainTable

    sdi = (tsdi + 1) & 0xFFFFFF
    sd = SecureDomain.generate(sdi, s.target.keys.get(tsdi).mode)
    ctx = TssContext(SecureDomainTable([sd]), s.local)
    p = Pdc(s)
    wire = ctx.seal(_syn_pt(s, p), sdi=sd.sdi, entropy=s.target.port, dst=s.target.address)
    _silent_after(s, p, wire, "no reply to a packet of an unknown SDI")


@case("TSS-007", A, "a packet whose epoch is too old is dropped", "behaviour.md §5.6", hostile=True)
def _old_epoch(s: Session) -> None:
    tsdi = _need(s)
    import re

    from uet.tss.context import TssContext
    from uet.tss.keyfile import parse_key_file

    if not s.target.keys_text:
        raise Skipped("the key file's text is needed to derive an old-epoch key")

    def older(m: re.Match[str]) -> str:
        return f"epoch = {(int(m.group(1), 0) - 256) & 0xFFFF}"

    text = re.sub(r"epoch\s*=\s*(\w+)", older, s.target.keys_text)
    if "epoch" not in s.target.keys_text:  # epoch defaults to 0: add it to every key
        text = re.sub(r"(\[\[domain\.key\]\])", r"\1\nepoch = 65280", text)
    table = parse_key_file(text)
    sd = table.get(tsdi)
    assert sd is not None  # the target's own key file, epochs moved
    ctx = TssContext(table, s.local)
    p = Pdc(s)
    wire = ctx.seal(_syn_pt(s, p), sdi=sd.sdi, entropy=s.target.port, dst=s.target.address)
    _silent_after(s, p, wire, "no reply to a packet 256 epochs old")


@case("TSS-008", A, "an unsecured packet is dropped by a target that requires TSS", "behaviour.md §5.8", SHOULD,
      hostile=True)  # fmt: skip
def _plain(s: Session) -> None:
    _need(s)
    p = Pdc(s)
    _silent_after(s, p, _syn_pt(s, p), "no reply to a plaintext SYN")


@case("TSS-009", A, "a sealed packet cut short (tag missing) is dropped", "behaviour.md §5.8", hostile=True)
def _short(s: Session) -> None:
    _need(s)
    p = Pdc(s)
    _silent_after(s, p, s.seal(_syn_pt(s, p))[:-16], "no reply to a packet without its ICV")


@case("TSS-010", A, "after drops, a good sealed packet is still accepted", "behaviour.md §5.8")
def _after(s: Session) -> None:
    _need(s)
    p = Pdc(s)
    bad = bytearray(s.seal(_syn_pt(s, p)))
    bad[20] ^= 0x80
    s.send_raw(bytes(bad))
    r = p.open()
    check(r.is_ack, "an ACK", r)
