"""The catalogue of deliberate breakages ``uet-conformance-mutants`` applies to the protocol cores.

Each :class:`Breakage` is one small textual change to one core file (``old`` must occur exactly
once; ``--check`` proves it still does), written by hand to break one rule a black-box tester can
observe on the wire: the way a vendor's stack could be wrong. Areas follow the spec notes: PDS
establishment, windows, ACK/SACK/CACK, clearing, NACK codes, control packets, ROD, RUDI, closing,
SES addressing, matching, RMA bounds and rights, atomics, responses, TSS; and the sending side
(areas ``initiator-*``: retransmission and back-off, NACK reactions, PDC reuse and SYN, CLEAR, CLOSE,
MPR and ACK_CC, trims, SES completions), which the initiator-side cases catch through the peer's
agent (``uet-peer --agent``).

``equivalent`` names a breakage no black-box test can see, with the reason (it is left out of
the detection rate, as ``tests/mutation_equivalents.toml`` does for unit-test mutants).
"""

# ruff: noqa: E501 - a catalogue of code snippets, each kept on the lines it quotes

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BREAKAGES", "Breakage"]


@dataclass(frozen=True)
class Breakage:
    id: str
    area: str
    path: str  # relative to the repository (uet/...)
    old: str
    new: str
    what: str
    equivalent: str = ""  # why nothing on the wire can show it, when so
    peer: tuple[str, ...] = ()  # extra uet-peer options the breakage needs (--data-protect crc...)
    suite: tuple[str, ...] = ()  # -k selections of the suite run against it (default: all, or TSS with keys)
    #: how often ``old`` occurs in ``path``: once, unless the rule is also written in a fast path
    #: (the PDS's in-order ACK path repeats a few of the general path's lines); every copy is broken
    copies: int = 1


_T = "uet/pds/target.py"
_C = "uet/pds/control.py"
_ST = "uet/ses/target.py"
_M = "uet/ses/memory.py"
_A = "uet/ses/atomics.py"
_MT = "uet/ses/matching.py"
_AD = "uet/ses/addressing.py"
_I = "uet/pds/initiator.py"
_FB = "uet/pds/feedback.py"
_CL = "uet/pds/closing.py"
_BO = "uet/pds/backoff.py"
_AB = "uet/pds/ackbuilder.py"
_SB = "uet/pds/scoreboard.py"

BREAKAGES: list[Breakage] = [
    # -- establishment (behaviour.md §2.2, §2.3) -------------------------------------------------
    Breakage("est-psn-offset", "establish", _T, "start = (psn - poff) & _M32", "start = psn & _M32",
             "Start PSN taken as the SYN's PSN, psn_offset ignored"),
    Breakage("est-no-hdr-check", "establish", _T, "if nh not in _REQ_NH or spdcid == 0:", "if False:",
             "a SYN with no SES header or SPDCID 0 opens a PDC"),
    Breakage("est-new-syn-start", "establish", _T,
             "            elif start != tp.start_psn:\n                self._send_nack(src, _NC_INVALID_SYN",
             "            elif False:\n                self._send_nack(src, _NC_INVALID_SYN",
             "a SYN naming another Start PSN on a live PDC is accepted",
             equivalent="not a MUST: the notes state the rule for initiator-role PDCs and out-of-window SYNs only "
                        "(behaviour.md §2.3.3); EST-021 (SHOULD) notices it"),
    Breakage("est-inv-dpdcid", "establish", _T,
             "                self._send_nack(src, _NC_INV_DPDCID, psn, 0, spdcid, nfl, now, entropy=entropy)\n"
             "                return",
             "                return",
             "a request for an unknown PDC is dropped instead of NACKed INV_DPDCID"),
    Breakage("est-hdr-mismatch", "establish", _T,
             "            elif tp.peer != src or spdcid != tp.rpdcid or nh not in _REQ_NH:",
             "            elif tp.peer != src or nh not in _REQ_NH:",
             "a request naming the right DPDCID but another SPDCID is accepted"),
    # -- windows (§2.4, §2.6) --------------------------------------------------------------------
    Breakage("win-oor-dup", "window", _T, "            if d < 0x100000000 - mp:  # neither current nor previous window",
             "            if d < 0x100000000 - 2 * mp:  # neither current nor previous window",
             "PSNs two windows behind are taken as duplicates, not NACKed PSN_OOR_WINDOW"),
    Breakage("win-oor-code", "window", _T, "code = _NC_INVALID_SYN if syn else _NC_PSN_OOR_WINDOW",
             "code = _NC_PSN_OOR_WINDOW", "an out-of-window SYN is NACKed PSN_OOR_WINDOW instead of INVALID_SYN"),
    Breakage("win-mode", "window", _T, "        if tp.mode != mode:\n", "        if False:\n",
             "a request in the other delivery mode is accepted on the PDC"),
    Breakage("win-closing", "window", _T,
             "        if tp.close_psn is not None and psn_diff(psn, tp.close_psn) > 0:",
             "        if False:", "a request after the CLOSE's PSN is accepted, not NACKed CLOSING",
             equivalent="the CLOSING-state check further on answers the same NACK CLOSING"),
    # -- ACK, CACK, SACK (§2.7, §2.8) ------------------------------------------------------------
    Breakage("ack-cack-hole", "ack", _T, "        while base in rcvd:\n            if buf and base in buf:",
             "        while base in rcvd or (base + 1) & _M32 in rcvd:\n            if buf and base in buf:",
             "CACK steps over a single-PSN hole"),
    Breakage("ack-mpr", "ack", _AB, "min(255, max(1, cfg.mp_range // 128))", "0",
             "ACK_CC advertises MPR 0"),
    Breakage("ack-sack-base", "ack", _AB, "i = (p - base) & _M32\n        if i < 64:",
             "i = (p - base + 1) & _M32\n        if i < 64:", "SACK bits shifted by one PSN"),
    Breakage("ack-rcvd-bytes", "ack", _T, "nominal = n + 48 + self.wire_overhead", "nominal = n",
             "rcvd_bytes counts payload bytes, not the nominal size"),
    Breakage("ack-ooo-count", "ack", _AB, "ooo = min(len(rcvd), 0xFFFF)", "ooo = 0", "ooo_count always 0",
             equivalent="not a MUST: the notes name the ACK_CC field only (wire-format.md §5.4), not what it "
                        "counts; ACK-024 (SHOULD) notices it"),
    Breakage("ack-dup-resp", "ack", _T,
             "            r = tp.gtd.get(psn)\n            if r is not None:\n                self._send_ack(tp, psn, retx, r[0], r[1], now, ent)",
             "            r = tp.gtd.get(psn)\n            if False:\n                self._send_ack(tp, psn, retx, r[0], r[1], now, ent)",
             "a duplicate of an uncleared PSN gets no stored guaranteed response"),
    Breakage("ack-ecn-echo", "ack", _T, "        if tp.ecn_bytes != ack.ecn_acked:", "        if False:",
             "a CE-marked request is acknowledged with M = 0",
             equivalent="with ACK_On_ECN (the default) a CE-marked request is acknowledged at once with its own M; "
                        "this carry-over path only runs when a CE-marked request and a later one reach the target in "
                        "one batch, which no tester can arrange on purpose"),
    Breakage("ack-probe-opaque", "ack", _T, "            flags |= _A_P\n            off = opaque",
             "            flags |= _A_P\n            off = 0", "a PROBE's ACK does not echo the opaque value"),
    # -- clearing (§2.7) --------------------------------------------------------------------------
    Breakage("clr-no-req-clear", "clear", _T, "        if tp.gtd or not (tp.proven or self._is_proven(tp)):\n            flags |= _A_CLR",
             "        if False:\n            flags |= _A_CLR", "ACKs never carry REQ_CLEAR"),
    Breakage("clr-ignore-offset", "clear", _T, "        if cpo < 0:\n            self._note_clear(",
             "        if False:\n            self._note_clear(", "a request's clear_psn_offset is ignored"),
    Breakage("clr-ignore-cp", "clear", _C,
             "            if psn_diff(payload, tp.max_clear) > 0 and psn_diff(payload, tp.high_rcvd) <= 0:",
             "            if False:", "a CLEAR control packet is ignored"),
    Breakage("clr-beyond", "clear", _C,
             "            if psn_diff(payload, tp.max_clear) > 0 and psn_diff(payload, tp.high_rcvd) <= 0:",
             "            if psn_diff(payload, tp.max_clear) > 0:", "a CLEAR beyond the highest received PSN is taken"),
    Breakage("clr-gtd-ignored", "clear", _T, "            if gtd and base in gtd:\n                if psn_diff(base, mc) > 0:",
             "            if gtd and base in gtd:\n                if False:",
             "CACK passes an uncleared guaranteed response"),
    # -- control packets (§2.11) ------------------------------------------------------------------
    Breakage("ctl-ackreq-notrcvd", "control", _C,
             "            else:\n                self._send_nack(tp.peer, _NC_PKT_NOT_RCVD, psn, tp.lpdcid, tp.rpdcid, 0, now)\n"
             "        elif ctl == _CT_CLEAR:",
             "            else:\n                pass\n        elif ctl == _CT_CLEAR:",
             "ACK_REQ for a PSN never received draws nothing (no NACK PKT_NOT_RCVD)"),
    Breakage("ctl-ackreq-old", "control", _C,
             "            elif d < 0:\n                self._send_ack(tp, psn, retx, 0, b\"\", now, ent)",
             "            elif d < 0:\n                pass", "ACK_REQ for an acknowledged PSN draws no ACK"),
    Breakage("ctl-probe", "control", _C,
             "        elif ctl == _CT_PROBE:\n            self._send_ack(tp, tp.rx_base, retx, 0, b\"\", now, ent, opaque=opq)",
             "        elif ctl == _CT_PROBE:\n            pass", "a PROBE is not answered"),
    Breakage("ctl-unexp", "control", _C,
             "        else:\n            self._send_nack(tp.peer, _NC_UNEXP_EVENT, psn, tp.lpdcid, tp.rpdcid, 0, now)\n\n"
             "    def _rx_close",
             "        else:\n            pass\n\n    def _rx_close",
             "an unexpected control type is ignored instead of NACKed UNEXP_EVENT"),
    Breakage("ctl-unknown-pdc", "control", _C,
             "                    self._send_nack(src, _NC_INV_DPDCID, psn, 0, spdcid, 0, now, entropy=entropy)\n                return",
             "                    self._send_nack(src, _NC_PKT_NOT_RCVD, psn, 0, spdcid, 0, now, entropy=entropy)\n                return",
             "a control packet for an unknown PDC draws PKT_NOT_RCVD instead of INV_DPDCID"),
    Breakage("ctl-hdr-mismatch", "control", _C, "            if pdc.peer != src or spdcid != pdc.rpdcid:",
             "            if pdc.peer != src:", "a control packet with the wrong SPDCID is accepted"),
    # -- closing (§2.12) ----------------------------------------------------------------------------
    Breakage("close-no-ack", "close", _C,
             "        self._send_ack(tp, psn, retx, 0, b\"\", now, ent, epsn=tp.epsn)\n        self._count(\"pdc_close_target\")",
             "        self._count(\"pdc_close_target\")", "a CLOSE is not acknowledged"),
    Breakage("close-dup", "close", _C,
             "            if psn == tp.close_psn:\n                self._count(\"duplicates\")",
             "            if False:\n                self._count(\"duplicates\")", "a retransmitted CLOSE is not acknowledged again"),
    Breakage("close-oor", "close", _C, "        if d < 0 or d >= self._mp_range:\n            self._send_nack(tp.peer, _NC_PSN_OOR_WINDOW",
             "        if False:\n            self._send_nack(tp.peer, _NC_PSN_OOR_WINDOW",
             "a CLOSE outside the window is accepted"),
    Breakage("close-before-data", "close", _C,
             "            if (tp.rx_base + i) & _M32 not in rcvd:\n                self._drop(\"close_before_data\", now, tp.peer)\n"
             "                return",
             "            if False:\n                self._drop(\"close_before_data\", now, tp.peer)\n                return",
             "a CLOSE with requests still missing closes the PDC",
             equivalent="not a MUST: the notes (behaviour.md §2.12) have a target on CLOSE clear everything up to "
                        "the highest PSN received, which is what this breakage does; waiting is the reference's choice"),
    # -- ROD (§2.13) --------------------------------------------------------------------------------
    Breakage("rod-ooo-to-ses", "rod", _T, "        if mode is _ROD and psn != tp.rod_next:",
             "        if False:", "a ROD request behind a hole is handed to SES at once"),
    Breakage("rod-next", "rod", _T, "            tp.rod_next = nxt", "            tp.rod_next = psn",
             "ROD's next expected PSN never advances"),
    # -- SES addressing (§6.3) ----------------------------------------------------------------------
    Breakage("ses-bad-job", "ses-rc", _AD, "            if job_id not in self._jobs:\n                raise BadJobId",
             "            if False:\n                raise BadJobId", "an unknown JobID is not refused at once"),
    Breakage("ses-bad-pid", "ses-rc", _AD, "                raise BadPid(f\"pid {pid} unknown\")",
             "                raise BadIndex(f\"pid {pid} unknown\")", "an unknown PIDonFEP answers BAD_INDEX"),
    Breakage("ses-bad-index", "ses-rc", _AD, "                raise BadIndex(f\"resource index {index} not configured",
             "                raise BadPid(f\"resource index {index} not configured", "an unknown RI answers BAD_PID"),
    Breakage("ses-generation", "ses-rc", _AD, "        if generation != res.generation:",
             "        if False:", "a wrong RI generation is accepted"),
    Breakage("ses-err-gtd", "ses-rc", _ST, "            build_response(int(rc), message_id=mid, job_id=job, ri_generation=gen),\n            True,",
             "            build_response(int(rc), message_id=mid, job_id=job, ri_generation=gen),\n            False,",
             "error responses are not guaranteed (no REQ_CLEAR, CACK passes them)"),
    Breakage("ses-err-mid", "ses-rc", _ST, "build_response(int(rc), message_id=mid, job_id=job",
             "build_response(int(rc), message_id=mid ^ 1, job_id=job", "error responses echo another message ID"),
    Breakage("ses-op-change", "ses-rc", _ST, "                if req.opcode != rec.opcode or req.request_length != rec.length:",
             "                if req.request_length != rec.length:", "a later packet changing the opcode is accepted"),
    Breakage("ses-ie", "ses-rc", _ST, "            if req.ie:\n                rec.error = ReturnCode.INITIATOR_ERR\n            else:",
             "            if False:\n                rec.error = ReturnCode.INITIATOR_ERR\n            else:",
             "a request with the ie flag is processed"),
    # -- matching (§6.4) -------------------------------------------------------------------------------
    Breakage("mat-ignore-bits", "ses-match", _MT, "    return not (tag ^ match_bits) & ~ignore & _MASK64",
             "    return not (tag ^ match_bits) & ~ignore & 0xFFFFFFFF", "only the low 32 tag bits are compared"),
    Breakage("mat-tagged", "ses-match", _MT, "        if tagged != self.tagged:\n            return False",
             "        if tagged and not self.tagged:\n            return False", "an untagged send takes a tagged receive",
             equivalent="tagged and untagged receives are kept in separate queues: the tag-kind check is never reached"),
    Breakage("mat-job", "ses-match", _MT, "                if r.job is not None and r.job != job:",
             "                if False:", "a receive restricted to a job takes another job's send",
             equivalent="unreachable through uet-peer: its profile announces no receive restricted to a job"),
    # -- RMA (§6.5) ----------------------------------------------------------------------------------
    Breakage("rma-perm", "ses-rma", _M, "        if need & ~self.access:", "        if need & ~self.access & ~4:",
             "a region's third right is not checked"),
    Breakage("rma-bounds", "ses-rma", _M, "offset + length > len(self.view):\n            raise BadAddr",
             "offset + length > len(self.view) + 8:\n            raise BadAddr", "accesses up to 8 bytes past the end"),
    Breakage("rma-msg-bounds", "ses-rma", _M, "        if offset + length > len(self.view):\n            raise UnsupportedSize",
             "        if False:\n            raise UnsupportedSize", "a WRITE message overrunning its region is not refused at SOM"),
    Breakage("rma-key-job", "ses-rma", _M, "        if r is None or (r.job is not None and r.job != job):",
             "        if r is None:", "a region restricted to another job is reachable"),
    Breakage("rma-write-right", "ses-rma", _ST, "            region.check(Access.REMOTE_WRITE, req.buffer_offset, 0)",
             "            region.check(Access(0), req.buffer_offset, 0)", "WRITE without the write right",
             equivalent="the per-packet placement check refuses the same WRITE with the same PERM_VIOLATION"),
    Breakage("rma-rudi-unsafe", "rudi", _ST,
             "            if mode in _UNSAFE_MODES and not region.access & Access.IDEMPOTENT_SAFE:",
             "            if False:", "RUDI writes to a region that is not idempotent-safe"),
    Breakage("rma-key-change", "ses-rma", _ST,
             "                elif rec.kind == \"write\" and req.match_bits != rec.region.key:",
             "                elif False:", "a later packet of a WRITE may name another key"),
    # -- atomics (§6.5, wire-format.md §10) ----------------------------------------------------------
    Breakage("amo-mswap", "atomic", _A, "                r = ((t & mask) & m) ^ v", "                r = ((t & mask) | m) ^ v",
             "MSWAP computed with OR"),
    Breakage("amo-unaligned", "atomic", _A, "    if offset % size:\n        raise AmoUnaligned",
             "    if False:\n        raise AmoUnaligned", "misaligned atomics are applied"),
    Breakage("amo-size", "atomic", _A, "        if operand_len == 0 or operand_len % per:",
             "        if operand_len == 0:", "an operand length not a multiple of the type size is accepted"),
    Breakage("amo-dt", "atomic", _A, "    k = TYPE_INFO.get(dtype)\n    if k is None:\n        raise AmoUnsupportedDt(f\"data type {dtype:#x} not supported\")\n    if op not in",
             "    k = TYPE_INFO.get(dtype)\n    if k is None:\n        raise AmoUnsupportedOp(f\"data type {dtype:#x} not supported\")\n    if op not in",
             "an unknown data type answers AMO_UNSUPPORTED_OP"),
    Breakage("amo-cswap-cmp", "atomic", _A, "        if _CMP[op](c, t):", "        if _CMP[op](t, c):",
             "conditional swaps compare the operands the other way round"),
    Breakage("amo-sum", "atomic", _A, "                out[i : i + size] = enc(t + v)", "                out[i : i + size] = enc(t + v + 1)",
             "floating-point SUM off by one"),
    Breakage("amo-diff", "atomic", _A, "                out[i : i + size] = enc(t - v)", "                out[i : i + size] = enc(v - t)",
             "floating-point DIFF reversed"),
    Breakage("amo-write-fetch", "atomic", _A, "    if op == AmoOp.WRITE:\n        memory[offset:end] = operand\n        return old",
             "    if op == AmoOp.WRITE:\n        memory[offset:end] = operand\n        return bytes(memory[offset:end])",
             "an atomic WRITE fetches the new value instead of the old"),
    # -- SES responses (§6.9) -------------------------------------------------------------------------
    Breakage("resp-ok-opcode", "ses-opcode", _ST,
             "        opcode = ResponseOpcode.RESPONSE if guaranteed else ResponseOpcode.DEFAULT_RESPONSE",
             "        opcode = ResponseOpcode.RESPONSE", "every success response is a guaranteed RESPONSE"),
    # -- multi-packet READs (§1.4, §6.5) ------------------------------------------------------------
    Breakage("read-new-pdc", "ses-read", "uet/fep/core.py", "            if p.return_pdc is not None:  # read data",
             "            if False:  # read data",
             "read data longer than a payload goes out on a new PDC under one PDS message per packet (stalls)"),
    Breakage("read-modified-length", "ses-read", _ST,
             "                modified_length=req.request_length,\n                message_offset=off + c,",
             "                modified_length=len(part),\n                message_offset=off + c,",
             "return data says modified_length = its own length, not the READ's request_length"),
    Breakage("read-bounds-first", "ses-read", _ST, "        region.check(Access.REMOTE_READ, addr, ask)",
             "        region.check(Access.REMOTE_READ, addr, min(ask, self.config.max_payload))",
             "a READ is bounds-checked over its first packet only"),
    # -- NACK codes (§2.10, §2.11) ---------------------------------------------------------------------
    Breakage("nack-procg-acked", "nack", _C,
             "                self._send_nack(tp.peer, _NC_RCVD_SES_PROCG, psn, tp.lpdcid, tp.rpdcid, 0, now)",
             "                self._send_ack(tp, psn, retx, 0, b\"\", now, ent)",
             "ACK_REQ for a ROD request held behind a hole is answered by an ACK"),
    Breakage("nack-ackreq-no-data", "nack", _C,
             "                self._send_ack(tp, psn, retx, r[0] if r else 0, r[1] if r else b\"\", now, ent)",
             "                self._send_ack(tp, psn, retx, 0, b\"\", now, ent)",
             "ACK_REQ for a request with a stored response (read data) is answered without it"),
    # -- CRC-32C trailer (wire-format.md §1.4): uet-peer --data-protect crc ----------------------------
    Breakage("crc-accept-bad", "crc", "uet/fep/integrity.py",
             "        if body is None:\n            c[\"crc_drop_bad\"] += 1\n            return None",
             "        if body is None:\n            c[\"crc_drop_bad\"] += 1\n            return bytes(data[:-4])",
             "a packet whose CRC trailer is wrong is accepted",
             peer=("--data-protect", "crc"), suite=("CRC-", "EST-00", "READ-00")),
    # -- secure establishment (§2.3.2): run with a key file -------------------------------------------
    Breakage("tss-1rtt-any-start", "tss", _T,
             "                if start != tp.start_psn:\n                    tp.pending_until",
             "                if False:\n                    tp.pending_until",
             "RANDOM_1RTT_START: a re-driven SYN is accepted whatever Start PSN it names"),
    Breakage("tss-0rtt-expected", "tss", "uet/tss/establish.py",
             "            self._expected[sdi] = psn_add(start_psn, 1)", "            self._expected[sdi] = start_psn",
             "EXPECTED_0RTT_START: a close leaves Expected_PSN at the closed PDC's Start PSN (a replay is accepted)",
             peer=("--secure-start", "0rtt")),
    # -- TSS (§5.6, §5.8): run with a key file ------------------------------------------------------
    Breakage("tss-replay", "tss", "uet/tss/replay.py", "        if seq > top:\n            return None\n        back = top - seq",
             "        if True:\n            return None\n        back = top - seq", "replayed packets are accepted",
             equivalent="not a MUST: the reference runs with no replay window (behaviour.md §5.6); TSS-005 "
                        "(SHOULD) notices it"),
    Breakage("tss-epoch", "tss", "uet/tss/context.py", "        if 0 < back <= 0x8000 and back > cfg.max_epoch_lifetime:",
             "        if False:", "packets of an epoch older than the lifetime are accepted"),
    Breakage("tss-stale", "tss", "uet/tss/replay.py", "        if back >= self.size:\n            return \"stale\"",
             "        if False:\n            return \"stale\"", "packets behind the replay window are accepted",
             equivalent="a stale TSC needs 4096 sealed packets from one sender before it; the TSS cases send far fewer"),
    Breakage("tss-ses-job", "ses-rc", _AD, "            if pjob != job_id:\n                raise BadJobId",
             "            if False:\n                raise BadJobId", "a PID of another job is reachable with this job's ID",
             equivalent="unreachable through uet-peer: it serves one PIDonFEP, so no PID belongs to another job"),
    # -- the sending side (initiator cases through the agent) -------------------------------------
    Breakage("ini-no-retx", "initiator-retx", _I, "            flags |= _RETX | _AR\n        if flags:",
             "            flags |= _AR\n        if flags:", "retransmissions without the RETX flag"),
    Breakage("ini-syn-forever", "initiator-pdc", _I, "        syn = pdc.state is _S_SYN_SENT\n        if pkt.ctl is None:",
             "        syn = True\n        if pkt.ctl is None:", "SYN never cleared on a retransmission once established"),
    Breakage("ini-psn-offset", "initiator-pdc", _I,
             "hdr = request(t, pkt.next_hdr, flags | _SYN, cpo, psn, pdc.lpdcid, (psn - pdc.start_psn) & 0xFFF)",
             "hdr = request(t, pkt.next_hdr, flags | _SYN, cpo, psn, pdc.lpdcid, 0)",
             "psn_offset 0 on every SYN packet"),
    Breakage("ini-clear-offset", "initiator-pdc", _I, "cpo = (pdc.tx_base - 1 - psn) & _M32", "cpo = (pdc.tx_base - psn) & _M32",
             "clear_psn_offset names tx_base, one PSN too far"),
    Breakage("ini-no-reuse", "initiator-pdc", _I, "            pdc = self.usable.get(key)\n            if pdc is None or (pdc.sdi",
             "            pdc = None\n            if pdc is None or (pdc.sdi", "every message opens a new PDC"),
    Breakage("ini-no-ack-req", "initiator-retx", _I,
             "        if pkt.dst_received and pkt.ctl is None:\n            self._send_ctl(pdc, _CT_ACK_REQ",
             "        if False:\n            self._send_ctl(pdc, _CT_ACK_REQ",
             "a packet the target SACKed is retransmitted on RTO instead of probed with ACK_REQ"),
    Breakage("ini-retry-forever", "initiator-retx", _BO,
             "    return retries >= cfg.max_rto_retx and now - first_tx >= cfg.retry_time_ns", "    return False",
             "retries are never spent: an unacknowledged request is resent for ever"),
    Breakage("ini-no-backoff", "initiator-retx", _BO, "    r = b << shift", "    r = b", "no RTO back-off",
             equivalent="not a MUST: the notes give no back-off (behaviour.md §2.9); INI-037 (SHOULD) notices it"),
    Breakage("ini-mpr-units", "initiator-ack", _SB, "            pdc.peer_mp = a.mpr * 128", "            pdc.peer_mp = a.mpr * 256",
             "MPR taken in units of 256 PSNs"),
    Breakage("ini-bogus-cack", "initiator-ack", _FB,
             "        if not a.flags & _A_P and pdc.board.claims_unsent(pdc, a, self._mp_range):", "        if False:",
             "an ACK whose CACK is beyond every PSN sent is taken"),
    Breakage("ini-wrong-spdcid", "initiator-ack", _FB,
             "        if (a.spdcid == 0) if st is _S_SYN_SENT else (a.spdcid != pdc.rpdcid):",
             "        if (a.spdcid == 0) if st is _S_SYN_SENT else False:",
             "an ACK from another SPDCID is taken on an established PDC"),
    Breakage("ini-sack-ignored", "initiator-ack", _SB, "                pkt.dst_received = True\n                if _diff(p, hi) > 0:",
             "                pass\n                if _diff(p, hi) > 0:",
             "ACK_CC SACK bits are not taken as received (RTO retransmits instead of ACK_REQ)"),
    Breakage("ini-req-clear", "initiator-clear", _FB, "        if flags & _A_CLR:\n            pdc.clear_needed = True",
             "        if False:\n            pdc.clear_needed = True", "an ACK's REQ_CLEAR draws no CLEAR", copies=2),
    Breakage("ini-clear-req", "initiator-clear", _I, "        if ctl == _CT_REQ_CLEAR:\n            self._send_clear(pdc, now)",
             "        if ctl == _CT_REQ_CLEAR:\n            pass", "a CLEAR_REQ from the target is not answered"),
    Breakage("ini-req-close", "initiator-close", _FB, "            self._start_close(pdc, \"target REQ_CLOSE\", now)",
             "            pass", "an ACK's REQ_CLOSE is ignored", copies=2),
    Breakage("ini-close-req", "initiator-close", _I, "            self._start_close(pdc, \"target CLOSE_REQ\", now)",
             "            pass", "a CLOSE_REQ is acknowledged but the initiator never closes"),
    Breakage("ini-close-early", "initiator-close", _CL, "        if st is _S_ACK_WAIT and not pdc.outstanding:",
             "        if st is _S_ACK_WAIT:", "CLOSE sent while requests are unacknowledged"),
    Breakage("ini-close-untracked", "initiator-close", _CL,
             "            pdc.outstanding[pkt.psn] = pkt\n            pdc.close_pkt = pkt",
             "            pdc.close_pkt = pkt", "a CLOSE is never retransmitted"),
    Breakage("ini-fatal-retransmit", "initiator-nack", "uet/wire/pds.py", "    NackCode.INVALID_SYN: NackAction.CLOSE,",
             "    NackCode.INVALID_SYN: NackAction.RETRANSMIT,", "NACK INVALID_SYN resends on the PDC instead of closing it"),
    Breakage("ini-fatal-ignored", "initiator-nack", _FB,
             "        if action == _NA_CLOSE:\n            self._close_error(pdc, f\"nack {name}\", code, now, npsn, payload)",
             "        if action == _NA_CLOSE:\n            return", "every PDC-fatal NACK is ignored"),
    Breakage("ini-trim-fatal", "initiator-trim", "uet/wire/pds.py", "    NackCode.INV_DPDCID: NackAction.CLOSE,",
             "    NackCode.TRIMMED: NackAction.CLOSE,\n    NackCode.INV_DPDCID: NackAction.CLOSE,",
             "NACK TRIMMED closes the PDC in error instead of resending"),
    Breakage("ini-procg-retransmit", "initiator-nack", "uet/wire/pds.py", "    NackCode.RCVD_SES_PROCG: NackAction.IGNORE,",
             "    NackCode.RCVD_SES_PROCG: NackAction.RETRANSMIT,", "RCVD_SES_PROCG resends and spends the NACK retries"),
    Breakage("ini-nack-no-limit", "initiator-nack", _FB, "        pkt.nack_retries += 1\n", "        pkt.nack_retries = 0\n",
             "NACK-driven resends never run out"),
    Breakage("ini-new-start-ignored", "initiator-pdc", _FB,
             "        if code == _NC_NEW_START_PSN:\n            self._new_start_psn(pdc, payload, now)\n            return",
             "        if code == _NC_NEW_START_PSN:\n            return", "NACK NEW_START_PSN is ignored"),
    Breakage("ini-nack-no-resend", "initiator-nack", _FB, "        self._cc_retransmit(pdc, pkt, now)\n\n    def _gbn_stale",
             "        pass\n\n    def _gbn_stale", "a retransmit-class NACK does not resend at once (only the RTO does)",
             equivalent="the cases accept a resend at the RTO (NACK_Retx_Time may equal the RTO, behaviour.md §2.9): "
                        "judging the delay would need a bound on both"),
    Breakage("ini-rod-no-go-back", "initiator-rod", _FB, "            return\n        self._go_back(pdc, e, now)\n",
             "            return\n", "ROD_OOO does not make the sender go back (only the RTO does)",
             equivalent="as ini-nack-no-resend: the RTO resends from the oldest unacknowledged PSN too, and the case "
                        "does not judge the delay"),
    Breakage("ini-error-rc", "initiator-ses", "uet/ses/initiator.py",
             "        if rc not in (ReturnCode.NULL, ReturnCode.OK):\n            self._msg_error(",
             "        if False:\n            self._msg_error(", "an error response completes the operation OK"),
    Breakage("ini-read-short", "initiator-ses", "uet/ses/initiator.py",
             "        if r.modified_length and r.modified_length != msg.length:\n            return False",
             "        if False:\n            return False", "read data whose modified length is not the READ's is taken"),
    Breakage("ini-rudi-no-retx", "initiator-rudi", "uet/pds/rudi.py", "        flags = int(RudiFlag.RETX) if retx else 0",
             "        flags = 0", "RUDI retransmissions without RETX"),
    # -- trims on a plain link (behaviour.md §3.3) --------------------------------------------------
    Breakage("trim-mark-ignored", "trim", "uet/fep/marking.py",
             "    trim = 0x100 if dscp in (DSCP_TRIM_FABRIC, DSCP_TRIM_LASTHOP) else 0", "    trim = 0",
             "a packet a switch trimmed (DSCP 7 / 5) is taken for a whole one"),
    Breakage("tss-dup-clear", "clear", _T, "                del gtd[base]", "                pass",
             "a cleared guaranteed response is kept (the next duplicate replays it)",
             equivalent="a duplicate below CACK is answered by the window check before the stored response is read"),
]  # fmt: skip
