"""What a peer exposes to a tester: memory regions and posted receives, shared by ``uet-peer``
(which registers and posts them) and ``uet-conformance`` (which aims its cases at them).

A peer profile is a small TOML file (or ``uet-peer``'s built-in default)::

    [[region]]
    key = 0x1000            # 64-bit memory key (fixed, for tests)
    size = 65536
    access = "rwa"          # r = remote read, w = remote write, a = remote atomic,
                            # i = idempotent-safe (RUDI target, behaviour.md §2.14)
    job = "own"             # "own" (the peer's job, default), "any", or a JobID

    [[receive]]             # a receive the peer keeps posted (re-posted after each use)
    tag = 0x7E570001        # omit for an untagged receive
    size = 16
    truncate = false

The peer prints the same facts in its identity line (``regions`` / ``receives``, jobs resolved
to numbers), which ``uet-conformance --identity`` reads back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uet.config_file import ConfigFileError, read_toml
from uet.conformance.session import Receive, Region

__all__ = ["Profile", "default_profile", "load_profile", "parse_region", "register_regions"]

_ACCESS = set("rwai")

#: ``uet-peer``'s JobID unless told otherwise; the tester assumes it too when given no identity
PEER_DEFAULT_JOB = 1


class ProfileError(ValueError):
    """A peer profile or a ``--region`` / ``--receive`` option that does not parse."""


@dataclass
class Profile:
    regions: list[Region] = field(default_factory=list)
    receives: list[Receive] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "regions": [{"key": r.key, "size": r.size, "access": r.access, "job": r.job} for r in self.regions],
            "receives": [{"tag": r.tag, "size": r.size, "truncate": r.truncate} for r in self.receives],
        }


def default_profile(job: int) -> Profile:
    """``uet-peer``'s built-in profile: one region per combination of rights the SES cases need,
    one region of another job, and two small tagged receives (one truncating)."""
    other = (job + 1) & 0xFFFFFF
    return Profile(
        regions=[
            Region(0x1000, 65536, "rwa", job),
            Region(0x2000, 4096, "r", job),
            Region(0x3000, 4096, "w", job),
            Region(0x4000, 4096, "rwai", job),
            Region(0x5000, 4096, "rwa", other),
            Region(0x6000, 4096, "a", job),
            Region(0x7000, 4096, "rw", job),  # read and write, no atomic right (RC-024)
        ],
        receives=[Receive(16, 0x7E570001, False), Receive(16, 0x7E570002, True)],
    )


_RIGHTS = {"r": "REMOTE_READ", "w": "REMOTE_WRITE", "a": "REMOTE_ATOMIC", "i": "IDEMPOTENT_SAFE"}


def register_regions(ep: Any, profile: Profile) -> list[bytearray]:
    """Register ``profile``'s regions on ``ep`` (a :class:`uet.Endpoint`), each filled with a
    recognisable pattern (every 8-byte word holds its own offset, big-endian); returns the buffers
    (the caller keeps them alive). ``uet-peer`` and the reference agent expose their regions so."""
    from uet.ses.memory import Access

    buffers = []
    for r in profile.regions:
        buf = bytearray(r.size)
        for i in range(0, r.size, 8):
            buf[i : i + 8] = i.to_bytes(8, "big")[: r.size - i]
        access = Access(0)
        for c in r.access:
            access |= Access[_RIGHTS[c]]
        ep.register(buf, access, key=r.key, job=r.job)
        buffers.append(buf)
    return buffers


def _access(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v or set(v) - _ACCESS:
        raise ProfileError(f"{where}: access must be letters of 'rwai', got {v!r}")
    return "".join(c for c in "rwai" if c in v)


def _job(v: Any, own: int, where: str) -> int | None:
    if v == "own":
        return own
    if v == "any" or v is None:
        return None
    if isinstance(v, int) and 0 <= v < 1 << 24:
        return v
    raise ProfileError(f"{where}: job must be 'own', 'any' or a 24-bit JobID, got {v!r}")


#: Largest region or receive a profile may ask for (**decision**: the peer allocates each region;
#: 1 GiB bounds a mistake, the conformance cases use a few KiB)
MAX_PROFILE_SIZE = 1 << 30


def _int(v: Any, what: str, hi: int, where: str) -> int:
    """An integer field in ``[0, hi]`` (TOML booleans are not numbers here)."""
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= hi:
        raise ProfileError(f"{where}: {what} must be an integer from 0 to {hi:#x}, got {v!r}")
    return v


def _tables(data: dict[str, Any], name: str, path: str | Path) -> list[dict[str, Any]]:
    v = data.pop(name, [])
    if not isinstance(v, list) or not all(isinstance(r, dict) for r in v):
        raise ProfileError(f"{path}: {name} must be an array of tables ([[{name}]])")
    return v


def load_profile(path: str | Path, job: int) -> Profile:
    """Read a peer profile (module docstring) through the bounded reader every tool uses
    (:func:`uet.config_file.read_toml`); raises :class:`ProfileError` with a one-line message."""
    try:
        data = read_toml(str(path))
    except ConfigFileError as e:
        raise ProfileError(str(e)) from None
    prof = Profile()
    for i, r in enumerate(_tables(data, "region", path)):
        where = f"{path}: region {i + 1}"
        if set(r) - {"key", "size", "access", "job"} or "key" not in r or "size" not in r:
            raise ProfileError(f"{where}: needs key and size; allowed: key, size, access, job")
        prof.regions.append(Region(_int(r["key"], "key", (1 << 64) - 1, where),
                                   _int(r["size"], "size", MAX_PROFILE_SIZE, where),
                                   _access(r.get("access", "rwa"), where),
                                   _job(r.get("job", "own"), job, where)))  # fmt: skip
    for i, r in enumerate(_tables(data, "receive", path)):
        where = f"{path}: receive {i + 1}"
        if set(r) - {"tag", "size", "truncate"} or "size" not in r:
            raise ProfileError(f"{where}: needs size; allowed: tag, size, truncate")
        tag = r.get("tag")
        prof.receives.append(Receive(_int(r["size"], "size", MAX_PROFILE_SIZE, where),
                                     None if tag is None else _int(tag, "tag", (1 << 64) - 1, where),
                                     _bool(r.get("truncate", False), "truncate", where)))  # fmt: skip
    if data:
        raise ProfileError(f"{path}: unknown keys {sorted(data)}")
    return prof


def _bool(v: Any, what: str, where: str) -> bool:
    if not isinstance(v, bool):
        raise ProfileError(f"{where}: {what} must be true or false, got {v!r}")
    return v


def parse_region(text: str, own_job: int) -> Region:
    """``KEY:SIZE:ACCESS[:JOB]`` (numbers in decimal or 0x hex; JOB a number, ``own`` or ``any``)."""
    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise ProfileError(f"region {text!r}: expected KEY:SIZE:ACCESS[:JOB]")
    try:
        key, size = int(parts[0], 0), int(parts[1], 0)
        job: Any = parts[3] if len(parts) == 4 else "own"
        if job not in ("own", "any"):
            job = int(job, 0)
    except ValueError as e:
        raise ProfileError(f"region {text!r}: {e}") from e
    return Region(key, size, _access(parts[2], f"region {text!r}"), _job(job, own_job, f"region {text!r}"))


def parse_receive(text: str) -> Receive:
    """``SIZE[:TAG[:trunc]]`` — a receive the target keeps posted."""
    parts = text.split(":")
    try:
        size = int(parts[0], 0)
        tag = int(parts[1], 0) if len(parts) > 1 and parts[1] else None
    except ValueError as e:
        raise ProfileError(f"receive {text!r}: {e}") from e
    return Receive(size, tag, len(parts) > 2 and parts[2] == "trunc")


def profile_from_identity(ident: dict[str, Any]) -> Profile:
    """The profile a ``uet-peer`` identity line announces."""
    prof = Profile()
    for r in ident.get("regions", []):
        prof.regions.append(Region(int(r["key"]), int(r["size"]), _access(r["access"], "identity"), r.get("job")))
    for r in ident.get("receives", []):
        prof.receives.append(Receive(int(r["size"]), r.get("tag"), bool(r.get("truncate", False))))
    return prof
