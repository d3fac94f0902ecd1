"""Key files: format, permission check and redaction (uet.tss.keyfile and uet.keyfile, behaviour.md §5.1)."""

from __future__ import annotations

import logging
import os
import traceback
from pathlib import Path

import pytest
from tss_support import A_IP, B_IP, slot

from uet.keyfile import load_key_file, write_key_file
from uet.tss import (
    KeyFileError,
    SdMode,
    SecretBytes,
    SecureDomain,
    SecureDomainTable,
    TssContext,
)
from uet.tss.keyfile import dump_key_file, parse_key_file
from uet.wire.net import ip_bytes

KEY0 = bytes(range(32))
KEY1 = bytes(range(32, 64))

SAMPLE = f"""
format = 1

[[domain]]
sdi = 0x000102
mode = "cluster"
an = 1
use_ssi = true
ssi = 7
rekey_mask = 0xFF00
rekey_shift = 8

  [[domain.key]]
  an = 0
  key = "{KEY0.hex()}"

  [[domain.key]]
  an = 1
  epoch = 4
  key = "{KEY1.hex()}"

[[domain]]
sdi = 9
mode = "server"
use_ssi = true

  [[domain.key]]
  an = 0
  key = "{KEY0.hex()}"

  [[domain.client]]
  address = "10.0.0.2"
  ssi = 34
"""


def _write(path: Path, text: str, mode: int) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_load_sample(tmp_path: Path) -> None:
    table = load_key_file(_write(tmp_path / "keys.toml", SAMPLE, 0o600), wall_ns=0)
    assert len(table) == 2
    sd = table[0x102]
    assert sd.mode is SdMode.CLUSTER and sd.tx_an == 1 and sd.ssi == 7 and sd.use_ssi
    assert (sd.rekey_mask, sd.rekey_shift) == (0xFF00, 8)
    assert slot(sd, 1).key == SecretBytes(KEY1) and slot(sd, 1).epoch == 4
    assert slot(sd, 1).state.value == "active" and slot(sd, 0).state.value == "standby"
    assert table[9].clients == {ip_bytes("10.0.0.2"): 34}


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o620, 0o602, 0o601, 0o610])
def test_refuses_group_or_other_access(tmp_path: Path, mode: int) -> None:
    path = _write(tmp_path / "keys.toml", SAMPLE, mode)
    with pytest.raises(KeyFileError, match="chmod 600") as exc:
        load_key_file(path, wall_ns=0)
    assert f"{mode:04o}" in str(exc.value)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_accepts_owner_only(tmp_path: Path, mode: int) -> None:
    assert len(load_key_file(_write(tmp_path / "keys.toml", SAMPLE, mode), wall_ns=0)) == 2


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="cannot open"):
        load_key_file(tmp_path / "absent.toml", wall_ns=0)
    d = tmp_path / "dir"
    d.mkdir(mode=0o700)
    with pytest.raises(KeyFileError):
        load_key_file(d, wall_ns=0)


def test_write_then_load_round_trip_and_interoperate(tmp_path: Path) -> None:
    srv = SecureDomain.generate(9, SdMode.SERVER, use_ssi=True)
    srv.clients[ip_bytes(A_IP)] = 77
    cl = SecureDomain.generate(3, SdMode.CLUSTER, use_ssi=True, ssi=1, rekey_mask=0xFF00, rekey_shift=8)
    cl.install(1, os.urandom(32), epoch=2)
    client = SecureDomain.client_of(srv, address=ip_bytes(A_IP), ssi=77)
    path = tmp_path / "keys.toml"
    write_key_file(path, [srv, cl])
    assert (path.stat().st_mode & 0o777) == 0o600
    with pytest.raises(KeyFileError):
        write_key_file(path, [srv])  # refuses to replace without overwrite
    table = load_key_file(path, wall_ns=0)
    assert slot(table[3], 1).key == slot(cl, 1).key and slot(table[3], 1).epoch == 2
    assert table[9].clients == {ip_bytes(A_IP): 77}
    write_key_file(tmp_path / "client.toml", [client])
    ctable = load_key_file(tmp_path / "client.toml", wall_ns=0)
    key = slot(ctable[9], 0).key
    assert ctable[9].mode is SdMode.CLIENT and key is not None and len(key) == 44
    # the reloaded server and client still talk
    s = TssContext(table, B_IP)
    c = TssContext(ctable, A_IP)
    assert c.open(s.seal(b"\x07\x00", sdi=9, entropy=1, dst=A_IP), src=B_IP, entropy=1) == b"\x07\x00"
    assert s.open(c.seal(b"\x02\x00", sdi=9, entropy=1, dst=B_IP), src=A_IP, entropy=1) == b"\x02\x00"


@pytest.mark.parametrize(
    ("fragment", "message"),
    [
        ("format = 2\n", "unsupported"),
        ("[[domain]]\nsdi = 1\nmode = 'cluster'\nkey = []\n", "at least one"),
        ("[[domain]]\nsdi = 1\nmode = 'weird'\n", "mode"),
        ("[[domain]]\nsdi = 16777216\nmode = 'direct'\n", "24 bits"),
        ("[[domain]]\nsdi = 1\nmode = 'direct'\nkye = 1\n", "unknown key"),
        ("[[domain]]\nsdi = 1\nmode = 'direct'\nan = 1\n[[domain.key]]\nan = 0\nkey = '{k}'\n", "sending AN"),
        ("[[domain]]\nsdi = 1\nmode = 'cluster'\nuse_ssi = true\n[[domain.key]]\nan = 0\nkey = '{k}'\n", "ssi"),
        (
            "[[domain]]\nsdi = 1\nmode = 'direct'\n[[domain.key]]\nan = 0\nkey = '{k}'\n[[domain.key]]\nan = 0\n"
            "key = '{k}'\n",
            "two keys",
        ),
        (
            "[[domain]]\nsdi = 1\nmode = 'direct'\n[[domain.key]]\nan = 0\nkey = '{k}'\n[[domain.client]]\n"
            "address = '10.0.0.1'\nssi = 1\n",
            "server mode",
        ),
        ("[[domain]]\nsdi = 1\nmode = 'direct'\n[[domain.key]]\nan = 0\nkey = '{k}'\n" * 2, "twice"),
        ("not toml at all = = =", "TOML"),
    ],
)
def test_rejects_bad_files(fragment: str, message: str) -> None:
    with pytest.raises(KeyFileError, match=message):
        parse_key_file(fragment.replace("{k}", KEY0.hex()))


@pytest.mark.parametrize("bad", ["zz" * 32, KEY0.hex()[:-2], KEY0.hex() + "00"])
def test_bad_key_material_is_never_echoed(bad: str) -> None:
    text = f"[[domain]]\nsdi = 1\nmode = 'direct'\n[[domain.key]]\nan = 0\nkey = '{bad}'\n"
    with pytest.raises(KeyFileError) as exc:
        parse_key_file(text)
    rendered = "".join(traceback.format_exception(exc.value))
    assert bad not in rendered and bad[:16] not in rendered


def test_nothing_prints_key_bytes(caplog: pytest.LogCaptureFixture) -> None:
    table = parse_key_file(SAMPLE)
    views = [repr(table), str(table), repr(table[0x102]), repr(table[0x102].slots[1]), f"{slot(table[9], 0).key}"]
    views.append(repr(SecretBytes(KEY0)))
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("test").debug("table %s %r", table, table[9])
    views.append(caplog.text)
    for text in views:
        for key in (KEY0, KEY1):
            assert key.hex() not in text.lower()
            assert repr(key) not in text
            assert key.hex()[:12] not in text.lower()
    assert "redacted 32 bytes" in repr(table)
    with pytest.raises(TypeError):
        hash(SecretBytes(KEY0))


def test_dump_is_reloadable() -> None:
    table = parse_key_file(SAMPLE)
    again = parse_key_file(dump_key_file(table))
    assert [d.sdi for d in again] == [d.sdi for d in table]
    assert slot(again[0x102], 0).key == slot(table[0x102], 0).key
    assert isinstance(again, SecureDomainTable)


# -- issue 15 follow-up: TSC never repeats across restarts (behaviour.md §5.6) --------------------


def _sealed_tscs(table: SecureDomainTable, n: int) -> list[int]:
    ctx = TssContext(table, A_IP)
    slot = table[0x102].tx_slot()
    out = []
    for _ in range(n):
        out.append(slot.next_tsc)
        ctx.seal(b"p" * 40, sdi=0x102, entropy=1, dst=B_IP)
    return out


def test_reloaded_key_file_never_repeats_a_tsc(tmp_path: Path) -> None:
    """Before the fix every load of a key file restarted the transmit counter at 0, so a restarted
    process re-used AES-GCM IVs under the same key. Now each load seeds it from the caller's
    wall clock (µs since 2026-01-01), above anything the earlier run sent."""
    from uet.tss.domain import SERVER_TSC_BASE, TSC_EPOCH_NS

    path = _write(tmp_path / "keys.toml", SAMPLE, 0o600)
    t0 = TSC_EPOCH_NS + 3_600 * 10**9
    first = _sealed_tscs(load_key_file(path, wall_ns=t0), 5)
    assert first[0] == 3_600 * 10**6 and first == sorted(set(first))
    second = load_key_file(path, wall_ns=t0 + 1_000_000)  # restarted 1 ms later
    again = _sealed_tscs(second, 5)
    assert min(again) > max(first)
    # server mode keeps its half of the space; the standby slot starts above the floor too
    assert second[9].tx_slot().next_tsc == SERVER_TSC_BASE + 3_600_001_000
    sd = load_key_file(path, wall_ns=t0)[0x102]
    sd.activate(0, 0, 0)
    assert sd.tx_slot().next_tsc == 3_600 * 10**6


def test_load_needs_the_wall_clock_and_never_lowers_a_counter(tmp_path: Path) -> None:
    import time

    from uet.tss.domain import tsc_floor_from_wall_clock

    path = _write(tmp_path / "keys.toml", SAMPLE, 0o600)
    with pytest.raises(TypeError):
        load_key_file(path)  # type: ignore[call-arg]  # the caller must pass its wall clock
    now = time.time_ns()
    table = load_key_file(path, wall_ns=now)
    assert table[0x102].tx_slot().next_tsc == tsc_floor_from_wall_clock(now) > 0
    sd = table[0x102]
    sd.tx_slot().next_tsc += 10
    high = sd.tx_slot().next_tsc
    sd.seed_tsc(0)  # an older clock never moves a counter back
    assert sd.tx_slot().next_tsc == high
    assert parse_key_file(SAMPLE)[0x102].tx_slot().next_tsc == 0  # unseeded: caller's choice


def test_seed_past_the_tsc_space_refuses_to_send(tmp_path: Path) -> None:
    from uet.tss import CounterExhaustedError
    from uet.tss.domain import SERVER_TSC_BASE, TSC_EPOCH_NS

    table = parse_key_file(SAMPLE, wall_ns=TSC_EPOCH_NS + SERVER_TSC_BASE * 2 * 1000)
    with pytest.raises(CounterExhaustedError):
        _sealed_tscs(table, 1)
