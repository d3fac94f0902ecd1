"""One reader for every TOML file a user hands a tool (scenario, topology, profile files).

A file named on a command line may be anything: a device (``/dev/zero`` was read without limit,
5.4 GB in 90 s), a binary, text in another encoding, or TOML nested thousands of levels deep
(``tomllib`` then overflows Python's stack). :func:`read_toml` reads at most
:data:`MAX_CONFIG_BYTES` and turns each of these into a :class:`ConfigFileError` whose message is
one line naming the file, so every tool reports it as a usage error (exit 2), never a traceback.
"""

from __future__ import annotations

import tomllib
from typing import Any

__all__ = ["MAX_CONFIG_BYTES", "ConfigFileError", "read_toml"]

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
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigFileError(f"{path}: {str(e).splitlines()[0]}") from None
    except RecursionError:
        raise ConfigFileError(f"{path}: nested too deeply") from None
