"""One reader for every TOML file a user hands a tool (scenario, topology, profile files).

A file named on a command line may be anything: a device (``/dev/zero`` was read without limit,
5.4 GB in 90 s), a binary, text in another encoding, or TOML nested thousands of levels deep
(``tomllib`` then overflows Python's stack). :func:`read_toml` reads at most
:data:`MAX_CONFIG_BYTES` and turns each of these into a :class:`ConfigFileError` whose message is
one line naming the file, so every tool reports it as a usage error (exit 2), never a traceback.
Sizes and rates in these files (and on command lines) may be written as text: :func:`parse_size`
(``"64KiB"``) and :func:`parse_rate` (``"100G"``).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MAX_CONFIG_BYTES", "ConfigFileError", "parse_rate", "parse_size", "read_toml"]

#: Largest configuration file read (**decision**: the largest scenario or topology file of the
#: project is a few KiB; 1 MiB leaves room for generated ones and bounds a device or a mistake).
MAX_CONFIG_BYTES = 1 << 20


class ConfigFileError(ValueError):
    """A configuration file that cannot be read as TOML; the message is one line."""


def read_toml(path: str, max_bytes: int = MAX_CONFIG_BYTES) -> dict[str, Any]:
    """The TOML document at ``path`` (at most ``max_bytes``, UTF-8), or :class:`ConfigFileError`."""
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise ConfigFileError(f"{path}: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise ConfigFileError(f"{path}: larger than {max_bytes:,} bytes; not a configuration file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigFileError(f"{path}: not UTF-8 text (byte {e.start}); TOML files are UTF-8") from None
    if "\0" in text:
        raise ConfigFileError(f"{path}: a binary file (NUL bytes), not TOML")
    from uet.dataclass_cache import stored_table

    tables: dict[str, Any] = stored_table(text, lambda: _parse(path, text))
    return tables


def _parse(path: str, text: str) -> dict[str, Any]:
    """``tomllib.loads(text)``, its errors as :class:`ConfigFileError` naming ``path``;
    :func:`read_toml` keeps the tables by the text (:func:`uet.dataclass_cache.stored_table`), so a
    file read before needs neither this nor importing :mod:`tomllib`."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigFileError(f"{path}: {str(e).splitlines()[0]}") from None
    except RecursionError:
        raise ConfigFileError(f"{path}: nested too deeply") from None


_SIZE_UNITS = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "ki": 1 << 10,
    "mi": 1 << 20,
    "gi": 1 << 30,
    "ti": 1 << 40,
}
_RATE_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_NUMBER = r"(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)"


def parse_size(text: str) -> int:
    """``"64MiB"`` → 67108864, ``"1G"`` → 10**9, ``"512k"`` → 512000, ``"1000"`` → 1000.

    Raises :class:`ValueError` with a one-line reason (a fraction of a byte, a negative number or
    an unknown suffix)."""
    m = re.fullmatch(_NUMBER + r"\s*([kKmMgGtT]i?)?[bB]?", text.strip())
    if not m:
        raise ValueError(f"not a size: {text!r} (bytes, e.g. 4096, 64KiB, 1MiB, 1G)")
    unit = (m.group(2) or "").lower()
    value = float(m.group(1)) * _SIZE_UNITS[unit]
    if value != int(value):
        raise ValueError(f"not a whole number of bytes: {text!r}")
    return int(value)


def parse_rate(text: str) -> int:
    """``"100M"`` → 100_000_000 bit/s; also ``1G``, ``100G``, ``25Gbit``, ``25Gbit/s``,
    ``10Gbps``, ``10e6``. Raises :class:`ValueError` with a one-line reason."""
    m = re.fullmatch(_NUMBER + r"\s*([kKmMgGtT])?(?:bit/s|bit|bps|b/s)?", text.strip())
    if not m:
        raise ValueError(f"not a rate: {text!r} (bit/s, e.g. 100M, 1G, 25Gbit, 10e6)")
    value = float(m.group(1)) * _RATE_UNITS[(m.group(2) or "").lower()]
    return int(round(value))
