"""Return-code exceptions, memory regions and keys, addressing resolution (behaviour.md §1, §6.3, §6.5)."""

from __future__ import annotations

import array
import mmap
import random

import pytest

from uet.errors import UetError
from uet.ses import errors as E
from uet.ses.addressing import ResourceTable
from uet.ses.memory import KEY_IDEMPOTENT_SAFE, KEY_OPTIMIZED, Access, MemoryTable
from uet.wire.ses import ReturnCode

# -- errors -------------------------------------------------------------------------------------


def test_every_error_code_has_a_named_exception() -> None:
    for rc in ReturnCode:
        if rc in (ReturnCode.NULL, ReturnCode.OK):
            with pytest.raises(ValueError):
                E.error_for(rc)
            continue
        err = E.error_for(rc, "why")
        assert isinstance(err, E.SesError) and isinstance(err, UetError)
        assert err.return_code == rc
        assert type(err) is not E.SesError, rc
        assert rc.name in str(err) and "why" in str(err)


def test_error_families_and_names() -> None:
    assert isinstance(E.error_for(ReturnCode.AT_OUT_OF_RANGE), E.OutOfRange)
    assert isinstance(E.error_for(ReturnCode.AT_PERM), E.PermissionDenied)
    assert isinstance(E.error_for(ReturnCode.AT_PERM), E.AddressTranslationError)
    for rc in range(ReturnCode.AMO_UNSUPPORTED_OP, ReturnCode.AMO_FP_INEXACT + 1):
        assert isinstance(E.error_for(rc), E.AmoError)
    assert isinstance(E.error_for(ReturnCode.BAD_JOB_ID), E.BadJobId)
    assert isinstance(E.error_for(ReturnCode.TOO_LONG), E.TooLong)
    assert isinstance(E.error_for(ReturnCode.CANCELLED), E.Cancelled)
    assert isinstance(E.error_for(ReturnCode.NO_MATCH), E.NoMatch)
    g = E.error_for(ReturnCode.BAD_GENERATION, generation=7)
    assert isinstance(g, E.BadGeneration) and g.generation == 7


def test_reserved_code_maps_to_base_class() -> None:
    err = E.error_for(0x30)
    assert type(err) is E.SesError and err.return_code == ReturnCode.UNCOR


# -- memory -------------------------------------------------------------------------------------


def test_register_any_writable_buffer() -> None:
    t = MemoryTable(rng=random.Random(1))
    m = mmap.mmap(-1, 4096)
    regions = []
    for buf in (bytearray(64), memoryview(bytearray(64)), m, array.array("I", [0] * 16)):
        r = t.register(buf, Access.ALL)
        assert len(r) == (4096 if isinstance(buf, mmap.mmap) else 64)
        r.view[0:4] = b"abcd"
        assert bytes(memoryview(buf).cast("B")[0:4]) == b"abcd"
        assert t.get(r.key) is r
        regions.append(r)
    assert len(t) == 4
    assert [r.index for r in regions] == [0, 1, 2, 3]


def test_read_only_buffers_only_for_read_access() -> None:
    t = MemoryTable()
    r = t.register(b"const", Access.REMOTE_READ)
    assert bytes(r.view) == b"const"
    for acc in (Access.REMOTE_WRITE, Access.REMOTE_ATOMIC, Access.ALL):
        with pytest.raises(E.RegistrationError):
            t.register(b"const", acc)
    with pytest.raises(E.RegistrationError):
        t.register(memoryview(bytearray(4)).toreadonly(), Access.REMOTE_WRITE)


def test_keys_random_non_zero_unique_and_flagged() -> None:
    t = MemoryTable(rng=random.Random(5))
    keys = {t.register(bytearray(1), Access.REMOTE_READ).key for _ in range(500)}
    assert len(keys) == 500 and 0 not in keys
    assert all(not k & (KEY_IDEMPOTENT_SAFE | KEY_OPTIMIZED) for k in keys)
    idem = t.register(bytearray(1), Access.REMOTE_WRITE | Access.IDEMPOTENT_SAFE)
    assert idem.key & KEY_IDEMPOTENT_SAFE


def test_key_never_reused_while_registered() -> None:
    class Stuck(random.Random):
        def __init__(self) -> None:
            super().__init__(0)
            self.seq = [42, 42, 42, 43]

        def getrandbits(self, k: int) -> int:
            return self.seq.pop(0) if self.seq else super().getrandbits(k)

    t = MemoryTable(rng=Stuck())
    a = t.register(bytearray(1), Access.REMOTE_READ)
    b = t.register(bytearray(1), Access.REMOTE_READ)
    assert (a.key, b.key) == (42, 43)


def test_chosen_keys() -> None:
    t = MemoryTable()
    t.register(bytearray(1), Access.REMOTE_READ, key=0x1234)
    with pytest.raises(E.RegistrationError):
        t.register(bytearray(1), Access.REMOTE_READ, key=0x1234)
    with pytest.raises(E.RegistrationError):
        t.register(bytearray(1), Access.REMOTE_READ, key=0)


def test_lookup_checks_and_codes() -> None:
    t = MemoryTable()
    r = t.register(bytearray(100), Access.REMOTE_READ, job=9)
    assert t.lookup(r.key, 9) is r
    with pytest.raises(E.BadMkey):
        t.lookup(r.key + 1, 9)
    with pytest.raises(E.BadMkey):  # restricted to another job: treated as unknown (§6.5)
        t.lookup(r.key, 8)
    r.check(Access.REMOTE_READ, 90, 10)
    with pytest.raises(E.PermViolation):
        r.check(Access.REMOTE_WRITE, 0, 1)
    with pytest.raises(E.BadAddr):
        r.check(Access.REMOTE_READ, 91, 10)
    with pytest.raises(E.UnsupportedSize):
        r.check_message(50, 51)
    free = t.register(bytearray(4), Access.REMOTE_READ)
    assert t.lookup(free.key, 12345) is free


def test_deregistration() -> None:
    t = MemoryTable()
    r = t.register(bytearray(8), Access.ALL)
    t.deregister(r)
    assert not r.registered
    with pytest.raises(E.BadMkey):
        t.lookup(r.key, 0)
    with pytest.raises(E.RegistrationError):
        t.deregister(r.key)
    again = t.register(bytearray(8), Access.ALL)
    assert again.index == 0


# -- addressing ---------------------------------------------------------------------------------


@pytest.fixture
def table() -> ResourceTable:
    t = ResourceTable()
    t.add(pid=3, index=0, job_id=0x42, generation=5)
    t.add(pid=3, index=1, job_id=0x42)
    t.add(pid=4, index=0, job_id=0x77)
    return t


@pytest.mark.parametrize(
    ("rel", "job", "pid", "index", "exc"),
    [
        (True, 0x99, 3, 0, E.BadJobId),  # job unknown at this FEP
        (True, 0x42, 9, 0, E.BadPid),  # pid unknown
        (True, 0x77, 3, 0, E.BadJobId),  # pid belongs to another job
        (True, 0x42, 3, 7, E.BadIndex),  # index not configured
        (False, 0x99, 3, 7, E.Undeliverable),  # absolute: unknown (pid, ri)
        (False, 0x99, 8, 0, E.Undeliverable),
    ],
)
def test_resolution_errors(table: ResourceTable, rel: bool, job: int, pid: int, index: int, exc: type) -> None:
    with pytest.raises(exc):
        table.resolve(rel=rel, job_id=job, pid=pid, index=index)


def test_resolution_success_and_absolute_any_job(table: ResourceTable) -> None:
    r = table.resolve(rel=True, job_id=0x42, pid=3, index=1)
    assert (r.pid, r.index, r.job_id) == (3, 1, 0x42)
    assert table.resolve(rel=False, job_id=0xABCDE, pid=3, index=1) is r


def test_generation_checks(table: ResourceTable) -> None:
    r = table.get(3, 0)
    assert r is not None
    ResourceTable.check_generation(r, 5)
    with pytest.raises(E.BadGeneration) as ei:
        ResourceTable.check_generation(r, 4)
    assert ei.value.generation == 5
    r.gen_enabled = False
    with pytest.raises(E.DisabledGen):
        ResourceTable.check_generation(r, 5)
    r.gen_enabled, r.enabled = True, False
    with pytest.raises(E.Disabled):
        ResourceTable.check_generation(r, 5)
    new = table.reconfigure(3, 0)
    assert new.generation == 6 and table.get(3, 0) is new
    with pytest.raises(E.BadGeneration):
        ResourceTable.check_generation(new, 5)


def test_table_configuration_errors(table: ResourceTable) -> None:
    with pytest.raises(E.RegistrationError):
        table.add(pid=3, index=2, job_id=0x77)  # pid already in job 0x42
    with pytest.raises(E.RegistrationError):
        table.add(pid=3, index=0, job_id=0x42)
    with pytest.raises(E.RegistrationError):
        table.add(pid=4096, index=0, job_id=1)
    table.remove(4, 0)
    with pytest.raises(E.BadJobId):
        table.resolve(rel=True, job_id=0x77, pid=4, index=0)
