"""Secure-domain key files on disk: reading one with its permission rule, writing one (mode 0600).

The format, its parser and its writer are :mod:`uet.tss.keyfile` (sans-I/O, behaviour.md §5.1);
this module is the file I/O around them, for the tools and applications that load a FEP's keys.

**Permissions.** The file must not be accessible to group or others (mode ``0600`` or stricter),
like an SSH private key: :func:`load_key_file` refuses it otherwise with a
:class:`~uet.tss.errors.KeyFileError` naming the path and the mode. It checks the opened file
descriptor (no check-then-open race). :func:`write_key_file` creates files with mode ``0600``.

**Nonce safety.** A sender's TSC restarts at 0 each time a key file is loaded: see
:mod:`uet.tss.keyfile` (a restarted FEP needs a new key or a new epoch, or ``wall_ns`` seeding).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from uet.tss.domain import SecureDomain, SecureDomainTable
from uet.tss.errors import KeyFileError
from uet.tss.keyfile import dump_key_file, parse_key_file

__all__ = ["load_key_file", "write_key_file"]


def load_key_file(path: str | os.PathLike[str], *, wall_ns: int) -> SecureDomainTable:
    """Read a key file into a :class:`SecureDomainTable`, refusing unsafe permissions.

    ``wall_ns`` (required: the caller's wall clock, Unix ns; this library never reads a clock)
    seeds every SD's transmit counter so that a restarted process never repeats a TSC, hence an
    AES-GCM IV, under the file's keys (behaviour.md §5.6;
    :meth:`uet.tss.domain.SecureDomain.seed_tsc`). A table that only opens packets may pass 0."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError as exc:
        raise KeyFileError(f"{p}: cannot open key file: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyFileError(f"{p}: a key file must be a regular file")
        if os.name == "posix" and st.st_mode & 0o077:
            raise KeyFileError(
                f"{p}: key file is accessible by group/others (mode {stat.S_IMODE(st.st_mode):04o}); "
                f"run 'chmod 600 {p}'"
            )
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    return parse_key_file(raw, source=str(p), wall_ns=wall_ns)


def write_key_file(
    path: str | os.PathLike[str], domains: SecureDomainTable | list[SecureDomain], *, overwrite: bool = False
) -> None:
    """Write ``domains`` as a key file with mode 0600 (refuses to replace a file unless ``overwrite``)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot create key file: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        if os.name == "posix":
            os.fchmod(f.fileno(), 0o600)
        f.write(dump_key_file(domains))
