"""TSS (needs ``--keys``): tampered, replayed, wrong-SDI, wrong-epoch and unsecured packets are
dropped silently; good ones are accepted and answered sealed (behaviour.md §5.5, §5.6, §5.8;
wire-format.md §3)."""

from __future__ import annotations

from collections.abc import Callable

from uet.conformance.case import SHOULD, case
from uet.conformance.cases._util import NC, OP, RC, check, need_region, opened, read_back
from uet.conformance.session import CheckFailed, Pdc, Session, Skipped
from uet.conformance.wirekit import ses_standard
from uet.wire import pds as P

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


def _tamper(where: str) -> Callable[[Session], None]:
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


# -- secure establishment (behaviour.md §2.3.2) -------------------------------------------------------


def _method(s: Session) -> str:
    """``"1rtt"`` (RANDOM_1RTT_START: the target mints every Start PSN) or ``"0rtt"``
    (EXPECTED_0RTT_START: Start PSNs at or after the SDI's Expected_PSN are accepted at once),
    learnt from the session's first secure PDC (:meth:`Session.new_start_psn`)."""
    _need(s)
    if s.start_floor is None:
        s.new_start_psn()
    return "1rtt" if s.one_rtt else "0rtt"


def _closed(s: Session) -> tuple[int, int | None]:
    """Open and close a PDC: its Start PSN and the closing ACK's Expected_PSN (None without EPSN)."""
    p = Pdc(s)
    p.open()
    r = p.close()
    if r is None or not r.is_ack:
        raise CheckFailed("the ACK of our CLOSE", r.describe() if r is not None else "nothing")
    return p.start, (r.pds.expected_psn if r.flags & P.AckFlag.EPSN else None)


def _zero_rtt_close(s: Session) -> tuple[int, int]:
    """EXPECTED_0RTT_START only (else skipped): close a PDC, return its Start PSN and the
    Expected_PSN its closing ACK must carry (flag EPSN)."""
    if _method(s) != "0rtt":
        raise Skipped("the target mints Start PSNs (RANDOM_1RTT_START): no Expected_PSN")
    start, e = _closed(s)
    if e is None:
        raise CheckFailed("the EPSN flag and an Expected_PSN in the ACK of CLOSE")
    return start, e


class _Refused:
    """A sealed SYN WRITE whose Start PSN the target must refuse: under 0-RTT the Start PSN of a
    PDC that just closed (before Expected_PSN: a replay's), under 1-RTT any the tester picks."""

    OFF = 3072

    def __init__(self, s: Session) -> None:
        self.method = _method(s)
        self.reg = need_region(s, "rwa")
        self.expected: int | None = None
        if self.method == "0rtt":
            start, self.expected = _closed(s)
        else:
            start = s.rng.randrange(1 << 16, 1 << 31)
        self.before = read_back(s, opened(s), self.reg.key, self.OFF, 8)
        self.data = bytes(b ^ 0xA5 for b in self.before)
        self.s = s
        self.p = Pdc(s, start=start)
        self.p.send(self.write())
        self.nack = self.p.nack(start)

    def write(self) -> bytes:
        return ses_standard(self.s.ses(opcode=OP.WRITE, match_bits=self.reg.key, buffer_offset=self.OFF), self.data)


@case("TSS-011", A, "a secure SYN with a Start PSN the target does not accept draws NACK NEW_START_PSN naming the "
      "Start PSN to use, and delivers nothing", "behaviour.md §2.3.2")  # fmt: skip
def _new_start(s: Session) -> None:
    rf = _Refused(s)
    n = rf.nack
    check(n.pds.nack_code == NC.NEW_START_PSN, "NACK NEW_START_PSN", n)
    if rf.expected is not None:
        check(n.pds.payload == rf.expected, f"payload = the SDI's Expected_PSN {rf.expected:#x} (from the closing ACK)",
              n)  # fmt: skip
    else:
        check(n.pds.payload != rf.p.start, "payload = a Start PSN the target minted, not the one offered", n)
    check(read_back(s, opened(s), rf.reg.key, rf.OFF, 8) == rf.before, "the refused SYN's WRITE did not land")


@case("TSS-012", A, "re-driven from the Start PSN the NACK named, the SYN is accepted and its WRITE lands once",
      "behaviour.md §2.3.2")  # fmt: skip
def _redriven(s: Session) -> None:
    rf = _Refused(s)
    p, n = rf.p, rf.nack
    check(n.pds.nack_code == NC.NEW_START_PSN, "NACK NEW_START_PSN", n)
    p.start = p.next_psn = n.pds.payload
    p.clear_psn = (p.start - 1) & 0xFFFFFFFF
    r = p.exchange(rf.write())
    check(r.is_ack and r.rc in (RC.OK, RC.NULL), "the re-driven SYN WRITE acknowledged with success", r)
    check(read_back(s, p, rf.reg.key, rf.OFF, 8) == rf.data, "the WRITE landed")


@case("TSS-013", A, "EXPECTED_0RTT_START: the closing ACK carries EPSN, an Expected_PSN after the closed PDC's "
      "Start PSN", "behaviour.md §2.3.2")  # fmt: skip
def _epsn(s: Session) -> None:
    start, e = _zero_rtt_close(s)
    check(P.psn_after(e, start), f"Expected_PSN after the closed PDC's Start PSN {start:#x}", f"{e:#x}")


@case("TSS-014", A, "EXPECTED_0RTT_START: a SYN at or after Expected_PSN is accepted at once (0-RTT)",
      "behaviour.md §2.3.2")  # fmt: skip
def _zero_rtt(s: Session) -> None:
    _start, e = _zero_rtt_close(s)
    p = Pdc(s, start=(e + 7) & 0xFFFFFFFF)
    psn = p.send(ses_standard(s.ses(opcode=OP.NO_OP)))
    r = s.expect(lambda r: p.mine(r) and (r.is_nack or r.is_ack), f"an ACK for the SYN PSN {psn:#x}")
    check(r.is_ack and r.ack_psn == psn, f"an ACK (not NEW_START_PSN) for a Start PSN {e + 7:#x} ≥ Expected_PSN", r)
    p.learn(r)


@case("TSS-015", A, "RANDOM_1RTT_START: a SYN re-driven from another Start PSN than the one minted is refused again",
      "behaviour.md §2.3.2")  # fmt: skip
def _not_minted(s: Session) -> None:
    rf = _Refused(s)
    if rf.method != "1rtt":
        raise Skipped("the target accepts Start PSNs after Expected_PSN (EXPECTED_0RTT_START)")
    p = rf.p
    other = (rf.nack.pds.payload + 0x1234) & 0xFFFFFFFF
    p.start = p.next_psn = other
    p.send(rf.write())
    n = p.nack(other)
    check(n.pds.nack_code == NC.NEW_START_PSN, "NACK NEW_START_PSN again (only the minted Start PSN is accepted)", n)
    check(read_back(s, opened(s), rf.reg.key, rf.OFF, 8) == rf.before, "nothing landed")
