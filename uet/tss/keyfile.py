"""Secure-domain key files: a FEP's secure-domain table in TOML (behaviour.md §5.1).

Format (version 1). Integers may be written in hex (``0xFF00``). Unknown keys are errors, so a
typo in security configuration never passes silently::

    format = 1

    [[domain]]
    sdi = 1                 # 24-bit secure domain index
    mode = "cluster"        # direct | cluster | server | client (uet.tss.domain.SdMode)
    an = 0                  # the AN (key slot) this FEP sends with; default 0
    use_ssi = true          # default false: senders identified by IPv4 address
    ssi = 7                 # this FEP's SSI (required with use_ssi, except in server mode)
    enabled = true          # default true
    rekey_mask = 0xFF00     # cluster mode implicit rekey; default 0 = off
    rekey_shift = 8
    label_cluster = "U1"    # KDF labels, defaults "U1" / "U2"
    label_server = "U2"

      [[domain.key]]        # one or two; the one with an = domain.an is the sender's
      an = 0
      epoch = 0             # default 0
      key = "<64 hex digits; client mode: 88 = derived key ‖ IV mask>"

      [[domain.client]]     # server mode with SSIs: where each client is, to seal toward it
      address = "10.0.0.2"
      ssi = 34

Parsing (:func:`parse_key_file`) and writing the text (:func:`dump_key_file`) are here, sans-I/O;
reading and writing the files themselves, with their permission rules, is :mod:`uet.keyfile`
(:func:`~uet.keyfile.load_key_file`, :func:`~uet.keyfile.write_key_file`).

**Nonce safety.** A sender's TSC restarts at 0 each time a key file is loaded. Loading the same key
and epoch again after sending under them would repeat GCM IVs. Whoever provisions key files must
give a restarted FEP a new key or a new epoch (behaviour.md §5.6: the epoch advances when a FEP
leaves and rejoins the SD), or create per-job domains with :meth:`SecureDomain.generate`.

No error message, ``repr`` or log line contains key bytes.
"""

from __future__ import annotations

import tomllib
from typing import Any

from uet.tss.domain import KeySlot, SdMode, SecureDomain, SecureDomainTable, SlotState
from uet.tss.errors import KeyFileError
from uet.tss.kdf import LABEL_CLUSTER, LABEL_SERVER
from uet.tss.secret import SecretBytes
from uet.wire.net import ip_bytes, ip_str

__all__ = ["FORMAT_VERSION", "dump_key_file", "parse_key_file"]

FORMAT_VERSION = 1

_DOMAIN_KEYS = {
    "sdi",
    "mode",
    "an",
    "use_ssi",
    "ssi",
    "enabled",
    "rekey_mask",
    "rekey_shift",
    "label_cluster",
    "label_server",
    "key",
    "client",
}
_SLOT_KEYS = {"an", "epoch", "key"}
_CLIENT_KEYS = {"address", "ssi"}


def parse_key_file(data: bytes | str, *, source: str = "<key file>", wall_ns: int | None = None) -> SecureDomainTable:
    """Parse key-file text (no permission check; :func:`uet.keyfile.load_key_file` reads a file).
    With ``wall_ns`` (Unix ns) the transmit counters are seeded from it (§5.6); without, they
    start at 0 — only for a table that will never send under keys used before."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    try:
        doc = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"{source}: not valid TOML: {exc}") from None
    _only(doc, {"format", "domain"}, source)
    if doc.get("format", FORMAT_VERSION) != FORMAT_VERSION:
        raise KeyFileError(f"{source}: unsupported key file format {doc.get('format')!r}")
    table = SecureDomainTable()
    domains = doc.get("domain", [])
    if not isinstance(domains, list):
        raise KeyFileError(f"{source}: 'domain' must be an array of tables ([[domain]])")
    for i, d in enumerate(domains):
        where = f"{source}: domain #{i + 1}"
        sd = _domain(d, where)
        if sd.sdi in table:
            raise KeyFileError(f"{where}: SDI {sd.sdi} appears twice")
        table.add(sd)
    if wall_ns is not None:
        table.seed_tsc(wall_ns)
    return table


def _only(d: Any, allowed: set[str], where: str) -> None:
    if not isinstance(d, dict):
        raise KeyFileError(f"{where}: expected a table")
    extra = set(d) - allowed
    if extra:
        raise KeyFileError(f"{where}: unknown key(s) {sorted(extra)}")


def _int(d: dict[str, Any], name: str, where: str, bits: int, default: int | None = None) -> int:
    v = d.get(name, default)
    if v is None:
        raise KeyFileError(f"{where}: '{name}' is required")
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < (1 << bits):
        raise KeyFileError(f"{where}: '{name}' must be an integer of {bits} bits")
    return v


def _domain(d: Any, where: str) -> SecureDomain:
    _only(d, _DOMAIN_KEYS, where)
    sdi = _int(d, "sdi", where, 24)
    where = f"{where} (sdi {sdi})"
    try:
        mode = SdMode(d.get("mode"))
    except ValueError:
        raise KeyFileError(f"{where}: 'mode' must be one of {[m.value for m in SdMode]}") from None
    tx_an = _int(d, "an", where, 1, 0)
    use_ssi = d.get("use_ssi", False)
    enabled = d.get("enabled", True)
    if not isinstance(use_ssi, bool) or not isinstance(enabled, bool):
        raise KeyFileError(f"{where}: 'use_ssi' and 'enabled' are booleans")
    ssi = _int(d, "ssi", where, 32) if "ssi" in d else None
    labels = []
    for name, default in (("label_cluster", LABEL_CLUSTER), ("label_server", LABEL_SERVER)):
        v = d.get(name, default.decode())
        if not isinstance(v, str) or not v.isascii() or not v:
            raise KeyFileError(f"{where}: '{name}' must be a non-empty ASCII string")
        labels.append(v.encode())
    slots: list[KeySlot | None] = [None, None]
    keys = d.get("key", [])
    if not isinstance(keys, list) or not keys:
        raise KeyFileError(f"{where}: at least one [[domain.key]] is required")
    want = 88 if mode is SdMode.CLIENT else 64
    for k in keys:
        _only(k, _SLOT_KEYS, f"{where} key")
        an = _int(k, "an", f"{where} key", 1)
        epoch = _int(k, "epoch", f"{where} key an {an}", 16, 0)
        hexkey = k.get("key")
        if slots[an] is not None:
            raise KeyFileError(f"{where}: two keys for AN {an}")
        # Never echo the value: say only what is wrong with it.
        if not isinstance(hexkey, str) or len(hexkey) != want:
            raise KeyFileError(f"{where} key an {an}: 'key' must be {want} hex digits for {mode.value} mode")
        try:
            material = bytes.fromhex(hexkey)
        except ValueError:
            raise KeyFileError(f"{where} key an {an}: 'key' is not valid hex") from None
        slots[an] = KeySlot(SecretBytes(material), epoch=epoch, state=SlotState.STANDBY)
    if slots[tx_an] is None:
        raise KeyFileError(f"{where}: no key for the sending AN {tx_an}")
    clients: dict[bytes, int] = {}
    for c in d.get("client", []):
        _only(c, _CLIENT_KEYS, f"{where} client")
        try:
            addr = ip_bytes(str(c.get("address")))
        except OSError:
            raise KeyFileError(f"{where} client: 'address' is not an IP address") from None
        clients[addr] = _int(c, "ssi", f"{where} client", 32)
    if clients and mode is not SdMode.SERVER:
        raise KeyFileError(f"{where}: [[domain.client]] entries belong to server mode")
    try:
        return SecureDomain(
            sdi=sdi,
            mode=mode,
            slots=slots,
            tx_an=tx_an,
            use_ssi=use_ssi,
            ssi=ssi,
            rekey_mask=_int(d, "rekey_mask", where, 48, 0),
            rekey_shift=_int(d, "rekey_shift", where, 6, 0),
            label_cluster=labels[0],
            label_server=labels[1],
            enabled=enabled,
            clients=clients,
        )
    except ValueError as exc:
        raise KeyFileError(f"{where}: {exc}") from None


def dump_key_file(domains: SecureDomainTable | list[SecureDomain]) -> str:
    """Key-file text for ``domains`` (current keys of non-retired slots; runtime state is not kept)."""
    lines = ["# UET secure-domain key file: keep it mode 0600.", f"format = {FORMAT_VERSION}", ""]
    for sd in domains:
        lines += ["[[domain]]", f"sdi = {sd.sdi}", f'mode = "{sd.mode.value}"', f"an = {sd.tx_an}"]
        lines.append(f"use_ssi = {'true' if sd.use_ssi else 'false'}")
        if sd.ssi is not None:
            lines.append(f"ssi = {sd.ssi}")
        lines.append(f"enabled = {'true' if sd.enabled else 'false'}")
        if sd.rekey_mask:
            lines += [f"rekey_mask = 0x{sd.rekey_mask:X}", f"rekey_shift = {sd.rekey_shift}"]
        lines += [f'label_cluster = "{sd.label_cluster.decode()}"', f'label_server = "{sd.label_server.decode()}"']
        for an, slot in enumerate(sd.slots):
            if slot is not None and slot.key is not None:
                lines += ["", "  [[domain.key]]", f"  an = {an}", f"  epoch = {slot.epoch}"]
                lines.append(f'  key = "{slot.key.reveal().hex()}"')
        for addr, ssi in sd.clients.items():
            lines += ["", "  [[domain.client]]", f'  address = "{ip_str(addr)}"', f"  ssi = {ssi}"]
        lines.append("")
    return "\n".join(lines)
