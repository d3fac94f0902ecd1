"""Secure domains, their two key slots, and the per-FEP secure-domain table (behaviour.md §5.1, §5.7).

A **secure domain** (SD) is identified by a 24-bit SDI carried in every secured packet. Each FEP
holds the SDs it belongs to in its secure-domain key database: a :class:`SecureDomainTable` of
:class:`SecureDomain` entries. An entry holds what §5.1 lists — mode, key material, AN, epoch, the
transmit counter, flags (SSI in use, implicit rekey) — plus this FEP's receive state for the SD
(replay windows, derived-key cache, authentication-failure latch), because all of it is per FEP.

**Modes** (§5.1). The spec's client/server mode has two ends that hold different key material, so
it appears here as two values:

- ``DIRECT`` — every member uses the SD key (32 bytes) directly;
- ``CLUSTER`` — per-packet key ``KDF(K_SD[AN], "U1", ctx(epoch, rekey, sender id))``;
- ``SERVER`` — the server end: holds the master key (32 bytes) and derives each client's key per
  packet, ``KDF(K_master[AN], "U2", ctx(epoch, 0, client id))``;
- ``CLIENT`` — a client end: holds its 44-byte derived key (key ‖ IV mask) handed out of band by
  the SDME (:meth:`SecureDomain.client_of`), and uses it like a direct key plus the mask.

**Key slots and rotation** (§5.7). Two slots selected by the 1-bit AN. The SDME installs the next
key in the inactive slot (:meth:`SecureDomain.install`; state ``STANDBY``: accepted on receive at
once, make-before-break), then each member switches its sender to it (:meth:`SecureDomain.activate`)
— the new slot becomes ``ACTIVE`` with TSC and epoch at 0, and the old one ``RETIRING`` until a
grace deadline, after which (:meth:`SecureDomain.expire`) it is ``RETIRED``: its key is forgotten and
packets under it are dropped as ``retired_key``. Time is always passed in (integer ns).

**Transmit counter across restarts** (behaviour.md §5.6: TSC strictly increasing, never repeated
for a key — AES-GCM with a repeated (key, IV) pair leaks plaintext and the authentication key).
A process that reloads the same key file would restart TSC at 0 and repeat every IV it used
before. Each SD therefore has a ``tsc_floor``: a new association starts at ``tsc_base +
tsc_floor``, and :meth:`SecureDomain.seed_tsc` raises the floor (and the active counter) to
:func:`tsc_floor_from_wall_clock` of a wall-clock time the caller passes in — this module never
reads a clock. The floor counts microseconds since :data:`TSC_EPOCH_NS` (2026-01-01 UTC): a
restarted sender starts above every value it could have used, provided it sent on average fewer
than one frame per microsecond (10^6 frames/s) for that key since it was loaded — far above what
this stack sends. A counter that would start at or past the SD's limit cannot send
(:class:`~uet.tss.errors.CounterExhaustedError`: rotate the key): in the 47-bit halves of
client/server mode that happens in mid-2030, in the full 48-bit space in 2034; keys are rotated
long before. (Our choice; the notes give the rule, not the mechanism. A persisted high-water mark
would work too but needs a writable state file per key.)

**Server-mode IV direction separation** (our choice; behaviour.md §8 item 5 notes the gap). With
SSIs, client and server share the client key and the client's SSI in the IV, so a client TSC and a
server TSC of the same value would reuse a GCM (key, IV) pair — fatal for GCM. We split the 48-bit
TSC space: a CLIENT sends TSC values in ``[0, 2^47)``, a SERVER in ``[2^47, 2^48 − 1)``. The wire
format is unchanged and a receiver that does not look at TSC values interoperates.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from uet.enums import Enum
from uet.states import check_move
from uet.tss.errors import DomainStateError, KeyRotationError
from uet.tss.kdf import DERIVED_LEN, KEY_LEN, LABEL_CLUSTER, LABEL_SERVER, kdf, kdf_context
from uet.tss.replay import ReplayWindow
from uet.tss.secret import SecretBytes

__all__ = [
    "SDI_MAX",
    "TSC_EPOCH_NS",
    "TSC_INVOKE_FATAL",
    "KeySlot",
    "SdMode",
    "SecureDomain",
    "SecureDomainTable",
    "SLOT_TRANSITIONS",
    "SlotState",
    "slot_transition",
    "tsc_floor_from_wall_clock",
]

#: Largest 24-bit SDI.
SDI_MAX = (1 << 24) - 1
#: TSC invoke-fatal threshold: an SD whose next TSC would reach it must not send (§5.6).
TSC_INVOKE_FATAL = (1 << 48) - 1
#: First TSC of the server half of the TSC space in server mode (module docstring).
SERVER_TSC_BASE = 1 << 47
#: Origin of :func:`tsc_floor_from_wall_clock`: 2026-01-01T00:00:00Z in Unix nanoseconds.
TSC_EPOCH_NS = 1_767_225_600_000_000_000

#: A derived AEAD key and its IV mask.
DerivedKey = tuple[AESGCM, bytes | None]
#: Derived-key cache key: (epoch, rekey, SSI, address when no SSI) — the KDF context's inputs.
DerivedKeyInputs = tuple[int, int, int | None, bytes | None]


def tsc_floor_from_wall_clock(wall_ns: int) -> int:
    """The TSC floor for a sender started at Unix time ``wall_ns``: microseconds since
    :data:`TSC_EPOCH_NS` (0 before it). See the module docstring (§5.6)."""
    return max(0, (wall_ns - TSC_EPOCH_NS) // 1000)


class SdMode(Enum):
    """Secure-domain mode (behaviour.md §5.1); SERVER and CLIENT are the two ends of client/server."""

    DIRECT = "direct"
    CLUSTER = "cluster"
    SERVER = "server"
    CLIENT = "client"


class SlotState(Enum):
    """Life of one key slot (behaviour.md §5.7)."""

    STANDBY = "standby"  # installed, accepted on receive, not yet used to send
    ACTIVE = "active"  # the sender's current association
    RETIRING = "retiring"  # previous association: still accepted on receive until retire_at_ns
    RETIRED = "retired"  # grace over: key forgotten, packets under this AN dropped


#: A key slot's allowed moves, with the event that causes each (behaviour.md §5.7); a new key is a
#: new slot (STANDBY, :meth:`SecureDomain.install`), not a move. Checked by :func:`slot_transition`.
SLOT_TRANSITIONS: dict[SlotState, dict[SlotState, str]] = {
    SlotState.STANDBY: {SlotState.ACTIVE: "the sender switches to it (activate, or the SD's tx_an at set-up)"},
    SlotState.ACTIVE: {SlotState.RETIRING: "the sender switched to the other slot: grace for late packets"},
    SlotState.RETIRING: {SlotState.RETIRED: "the grace deadline passed (expire): key forgotten"},
    SlotState.RETIRED: {},
}


def slot_transition(old: SlotState, new: SlotState) -> SlotState:
    """``new`` when ``old → new`` is in :data:`SLOT_TRANSITIONS`, else raise :class:`KeyRotationError`."""
    return check_move(SLOT_TRANSITIONS, old, new, KeyRotationError, "key slot")


@dataclass(repr=False, eq=False)
class KeySlot:
    """One association (AN) of a secure domain: key, epoch, transmit counter and receive state."""

    key: SecretBytes | None
    epoch: int = 0
    state: SlotState = SlotState.STANDBY
    retire_at_ns: int | None = None
    next_tsc: int = 0
    #: Receive replay windows, one per sender (SSI or None, source address), made on first auth.
    windows: dict[tuple[int | None, bytes], ReplayWindow] = field(default_factory=dict)
    #: Derived (AESGCM, IV mask) per KDF-context inputs ``(epoch, rekey, SSI, address or None)``;
    #: on receive filled only after a tag verified.
    derived: dict[DerivedKeyInputs, DerivedKey] = field(default_factory=dict)
    _aead: AESGCM | None = None

    def __repr__(self) -> str:
        return f"KeySlot(state={self.state.value}, epoch={self.epoch}, next_tsc={self.next_tsc}, key={self.key!r})"

    def aead(self) -> AESGCM:
        """The cipher for the slot key used directly (DIRECT: K_SD; CLIENT: the first 32 bytes)."""
        if self._aead is None:
            if self.key is None:
                raise DomainStateError("key slot has no key")
            self._aead = AESGCM(self.key.reveal()[:KEY_LEN])
        return self._aead

    def client_mask(self) -> bytes:
        """CLIENT mode: the IV mask stored after the key (bytes 32..44)."""
        if self.key is None:
            raise DomainStateError("key slot has no key")
        return self.key.reveal()[KEY_LEN:DERIVED_LEN]

    def forget(self) -> None:
        """Drop the key and everything derived from it (retirement)."""
        self.key = None
        self._aead = None
        self.derived.clear()
        self.windows.clear()


def _key_len(mode: SdMode) -> int:
    return DERIVED_LEN if mode is SdMode.CLIENT else KEY_LEN


@dataclass(repr=False, eq=False)
class SecureDomain:
    """One secure domain as one FEP sees it (behaviour.md §5.1).

    Attributes:
        sdi: 24-bit secure domain index.
        mode: see :class:`SdMode`.
        use_ssi: the SD identifies senders by SSI (security header ``SP`` = 1 on every packet).
        ssi: this FEP's SSI in the SD (required with ``use_ssi``, except on a SERVER, whose packets
            carry the client's SSI).
        rekey_mask, rekey_shift: implicit rekey in CLUSTER mode, ``rekey = (TSC & mask) >> shift``;
            mask 0 disables it (the spec default is a gap, §5.4; the reference test uses 0xFF00, 8).
        label_cluster, label_server: KDF labels (§5.4, configuration).
        enabled: an SD that is provisioned but disabled drops everything (§5.8 ``in_invalid_sa``).
        clients: SERVER mode with SSIs: client address → client SSI, used when sealing toward a
            client without an explicit SSI; configured (key file), never learned from traffic.
        slots: the two key slots, indexed by AN.
        tx_an: the AN the sender uses.
    """

    sdi: int
    mode: SdMode
    slots: list[KeySlot | None]
    tx_an: int = 0
    use_ssi: bool = False
    ssi: int | None = None
    rekey_mask: int = 0
    rekey_shift: int = 0
    label_cluster: bytes = LABEL_CLUSTER
    label_server: bytes = LABEL_SERVER
    enabled: bool = True
    clients: dict[bytes, int] = field(default_factory=dict)
    #: Receive-side authentication failures and the "dropping" latch (§5.8 step 6): failures in
    #: the window that began at ``fail_window_start`` (ns), and when the latch lifts by itself
    #: (None: only :meth:`reset_dropping` lifts it; uet.tss.context "Authentication-failure latch")
    auth_failures: int = 0
    dropping: bool = False
    fail_window_start: int = 0
    latched_until: int | None = None
    #: added to :attr:`tsc_base` when an association starts (module docstring, §5.6)
    tsc_floor: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.sdi <= SDI_MAX:
            raise ValueError(f"SDI {self.sdi} does not fit 24 bits")
        if len(self.slots) != 2:
            raise ValueError("a secure domain has exactly two key slots")
        if self.tx_an not in (0, 1):
            raise ValueError("AN is 0 or 1")
        if self.use_ssi and self.ssi is None and self.mode is not SdMode.SERVER:
            raise ValueError(f"SD {self.sdi}: use_ssi needs this FEP's ssi")
        if self.ssi is not None and not 0 <= self.ssi <= 0xFFFFFFFF:
            raise ValueError(f"SD {self.sdi}: SSI does not fit 32 bits")
        if self.rekey_mask and self.mode is not SdMode.CLUSTER:
            raise ValueError(f"SD {self.sdi}: implicit rekey applies to cluster mode only")
        for an, slot in enumerate(self.slots):
            if slot is not None and slot.key is not None and len(slot.key) != _key_len(self.mode):
                raise ValueError(f"SD {self.sdi} AN {an}: {self.mode.value} mode needs {_key_len(self.mode)}-byte keys")
        active = self.slots[self.tx_an]
        if active is not None and active.state is SlotState.STANDBY:
            active.state = slot_transition(active.state, SlotState.ACTIVE)
            active.next_tsc = self.tsc_start

    def __repr__(self) -> str:
        return (
            f"SecureDomain(sdi={self.sdi}, mode={self.mode.value}, tx_an={self.tx_an}, use_ssi={self.use_ssi}, "
            f"ssi={self.ssi}, enabled={self.enabled}, dropping={self.dropping}, slots={self.slots!r})"
        )

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def with_key(
        cls, sdi: int, mode: SdMode, key: bytes | SecretBytes, *, an: int = 0, epoch: int = 0, **kw: object
    ) -> SecureDomain:
        """An SD whose slot ``an`` holds ``key`` and is active; the other slot is empty."""
        slots: list[KeySlot | None] = [None, None]
        secret = key if isinstance(key, SecretBytes) else SecretBytes(key)
        slots[an] = KeySlot(secret, epoch=epoch)
        return cls(sdi=sdi, mode=mode, slots=slots, tx_an=an, **kw)  # type: ignore[arg-type]

    @classmethod
    def generate(cls, sdi: int, mode: SdMode = SdMode.CLUSTER, **kw: Any) -> SecureDomain:
        """A new SD for a job with a fresh random key from :func:`os.urandom` (the SDME's role).

        ``mode`` may be DIRECT, CLUSTER or SERVER; give CLIENT ends their key with :meth:`client_of`.
        """
        if mode is SdMode.CLIENT:
            raise ValueError("a CLIENT key is derived from the server's master key: use SecureDomain.client_of")
        return cls.with_key(sdi, mode, os.urandom(KEY_LEN), **kw)

    @classmethod
    def client_of(
        cls, server: SecureDomain, *, address: bytes, ssi: int | None = None, an: int | None = None
    ) -> SecureDomain:
        """The CLIENT entry the SDME hands a client of the SERVER-mode SD ``server`` (§5.4).

        Its key is ``KDF(K_master[AN], label_server, ctx(epoch, 0, client id))``, all 44 bytes
        (key ‖ IV mask). Client id: ``ssi`` if the SD uses SSIs, else the client's ``address``.
        """
        if server.mode is not SdMode.SERVER:
            raise ValueError("client_of needs a SERVER-mode secure domain")
        if server.use_ssi and ssi is None:
            raise ValueError("this SD uses SSIs: give the client's ssi")
        an = server.tx_an if an is None else an
        slot = server.slots[an]
        if slot is None or slot.key is None:
            raise DomainStateError(f"SD {server.sdi} has no key in slot {an}")
        ctx = kdf_context(slot.epoch, 0, ssi if server.use_ssi else None, address)
        key = kdf(slot.key.reveal(), server.label_server, ctx)
        return cls.with_key(
            server.sdi,
            SdMode.CLIENT,
            key,
            an=an,
            epoch=slot.epoch,
            use_ssi=server.use_ssi,
            ssi=ssi if server.use_ssi else None,
            label_server=server.label_server,
        )

    def provision(self, **changes: object) -> SecureDomain:
        """A copy for another member FEP: same keys, epochs and settings, fresh runtime state.

        This is what the SDME hands each member (``changes`` sets per-member fields such as
        ``ssi``). The copy shares no mutable state with ``self``: its own TSC, replay windows,
        derived-key cache and latch. CLIENT entries come from :meth:`client_of` instead.
        """
        slots: list[KeySlot | None] = [
            None if s is None or s.key is None else KeySlot(s.key, epoch=s.epoch) for s in self.slots
        ]
        fields = {
            "sdi": self.sdi,
            "mode": self.mode,
            "slots": slots,
            "tx_an": self.tx_an,
            "use_ssi": self.use_ssi,
            "ssi": self.ssi,
            "rekey_mask": self.rekey_mask,
            "rekey_shift": self.rekey_shift,
            "label_cluster": self.label_cluster,
            "label_server": self.label_server,
            "enabled": self.enabled,
            "clients": dict(self.clients),
        }
        fields.update(changes)
        return SecureDomain(**fields)  # type: ignore[arg-type]

    # -- transmit ----------------------------------------------------------------------------------

    @property
    def tsc_base(self) -> int:
        """First TSC of a new association for this end (server half in SERVER mode)."""
        return SERVER_TSC_BASE if self.mode is SdMode.SERVER else 0

    @property
    def tsc_start(self) -> int:
        """First TSC of a new association: :attr:`tsc_base` + :attr:`tsc_floor` (§5.6)."""
        return self.tsc_base + self.tsc_floor

    def seed_tsc(self, wall_ns: int) -> None:
        """Make this SD's counter start above anything an earlier run with the same keys used:
        raise :attr:`tsc_floor` to :func:`tsc_floor_from_wall_clock` of ``wall_ns`` (the caller's
        wall clock, Unix ns) and the active counter with it. Never lowers a counter (§5.6)."""
        self.tsc_floor = max(self.tsc_floor, tsc_floor_from_wall_clock(wall_ns))
        slot = self.slots[self.tx_an]
        if slot is not None and slot.state is SlotState.ACTIVE:
            slot.next_tsc = max(slot.next_tsc, self.tsc_start)

    @property
    def tsc_limit(self) -> int:
        """The first TSC this end must never use (invoke-fatal threshold, §5.6)."""
        return SERVER_TSC_BASE if self.mode is SdMode.CLIENT else TSC_INVOKE_FATAL

    def tx_slot(self) -> KeySlot:
        """The active slot, or :class:`DomainStateError` when the SD cannot send."""
        if not self.enabled:
            raise DomainStateError(f"SD {self.sdi} is disabled")
        slot = self.slots[self.tx_an]
        if slot is None or slot.key is None or slot.state is not SlotState.ACTIVE:
            raise DomainStateError(f"SD {self.sdi} has no active key")
        return slot

    # -- key rotation (§5.7) -----------------------------------------------------------------------

    def install(self, an: int, key: bytes | SecretBytes, *, epoch: int = 0) -> KeySlot:
        """Install the next association's key in slot ``an`` (must not be the sender's slot).

        The slot is STANDBY: receivers accept it at once (make-before-break). Installing over a
        RETIRING slot ends that slot's grace early — late packets under it then fail the tag.
        """
        if an not in (0, 1):
            raise KeyRotationError("AN is 0 or 1")
        current = self.slots[an]
        if an == self.tx_an and current is not None and current.state is SlotState.ACTIVE:
            raise KeyRotationError(f"SD {self.sdi}: slot {an} is the active one; install into the other slot")
        secret = key if isinstance(key, SecretBytes) else SecretBytes(key)
        if len(secret) != _key_len(self.mode):
            raise KeyRotationError(f"SD {self.sdi}: {self.mode.value} mode needs {_key_len(self.mode)}-byte keys")
        if current is not None:
            current.forget()
        slot = KeySlot(secret, epoch=epoch)
        self.slots[an] = slot
        return slot

    def activate(self, an: int, now_ns: int, grace_ns: int) -> None:
        """Switch the sender to slot ``an``: TSC and epoch restart, the old slot retires after grace."""
        slot = self.slots[an]
        if slot is None or slot.key is None or slot.state not in (SlotState.STANDBY, SlotState.ACTIVE):
            raise KeyRotationError(f"SD {self.sdi}: slot {an} holds no installed key")
        if an == self.tx_an and slot.state is SlotState.ACTIVE:
            return
        old = self.slots[self.tx_an]
        if old is not None and old.state is SlotState.ACTIVE:
            old.state = slot_transition(old.state, SlotState.RETIRING)
            old.retire_at_ns = now_ns + grace_ns
        if slot.state is not SlotState.ACTIVE:  # an ACTIVE slot other than tx_an stays so
            slot.state = slot_transition(slot.state, SlotState.ACTIVE)
        slot.next_tsc = self.tsc_start
        self.tx_an = an

    def advance_epoch(self) -> int:
        """SDME action: advance the active association's 16-bit epoch (§5.6); returns it.

        A CLIENT's key is bound to the epoch it was derived for: the SDME hands it a new key instead.
        """
        if self.mode is SdMode.CLIENT:
            raise KeyRotationError(f"SD {self.sdi}: a client key is bound to its epoch; install a new key")
        slot = self.tx_slot()
        slot.epoch = (slot.epoch + 1) & 0xFFFF
        slot.derived.clear()
        return slot.epoch

    def expire(self, now_ns: int) -> None:
        """Retire every RETIRING slot whose grace deadline is at or before ``now_ns``."""
        for slot in self.slots:
            if slot is not None and slot.state is SlotState.RETIRING and slot.retire_at_ns is not None:
                if slot.retire_at_ns <= now_ns:
                    slot.state = slot_transition(slot.state, SlotState.RETIRED)
                    slot.retire_at_ns = None
                    slot.forget()
        if self.latched_until is not None and self.latched_until <= now_ns:
            self.reset_dropping()  # the latch's hold time is over (a rate limit, not a fuse)
            self.fail_window_start = now_ns

    def next_deadline(self) -> int | None:
        """Earliest grace deadline among the slots, or when the latch lifts, or None."""
        times = [s.retire_at_ns for s in self.slots if s is not None and s.retire_at_ns is not None]
        if self.latched_until is not None:
            times.append(self.latched_until)
        return min(times) if times else None

    def note_auth_failure(self, now_ns: int, threshold: int, window_ns: int | None) -> None:
        """One tag failure at ``now_ns``: more than ``threshold`` in one window of ``window_ns``
        latch the SD into dropping for ``window_ns`` (None: until :meth:`reset_dropping`)."""
        if window_ns is not None and now_ns - self.fail_window_start >= window_ns:
            self.fail_window_start = now_ns
            self.auth_failures = 0
        self.auth_failures += 1
        if self.auth_failures > threshold and not self.dropping:
            self.dropping = True
            self.latched_until = None if window_ns is None else now_ns + window_ns

    def reset_dropping(self) -> None:
        """SDME intervention: clear the authentication-failure latch (§5.8 step 6)."""
        self.dropping = False
        self.auth_failures = 0
        self.latched_until = None


class SecureDomainTable:
    """A FEP's secure-domain key database: SDI → :class:`SecureDomain` (behaviour.md §5.1).

    Load it from a key file with :func:`uet.keyfile.load_key_file` or build it in code.
    Its ``repr`` never shows key bytes.
    """

    def __init__(self, domains: list[SecureDomain] | None = None) -> None:
        self._by_sdi: dict[int, SecureDomain] = {}
        #: Bumped on every add/remove, so cached per-domain state can tell the table changed.
        self.version = 0
        for d in domains or ():
            self.add(d)

    def add(self, domain: SecureDomain) -> SecureDomain:
        """Add an SD; a second SD with the same SDI is an error."""
        if domain.sdi in self._by_sdi:
            raise ValueError(f"SDI {domain.sdi} is already in the table")
        self._by_sdi[domain.sdi] = domain
        self.version += 1
        return domain

    def remove(self, sdi: int) -> None:
        """Remove an SD and forget its keys."""
        d = self._by_sdi.pop(sdi)
        self.version += 1
        for slot in d.slots:
            if slot is not None:
                slot.forget()

    def get(self, sdi: int) -> SecureDomain | None:
        return self._by_sdi.get(sdi)

    def __getitem__(self, sdi: int) -> SecureDomain:
        return self._by_sdi[sdi]

    def __contains__(self, sdi: object) -> bool:
        return sdi in self._by_sdi

    def seed_tsc(self, wall_ns: int) -> None:
        """:meth:`SecureDomain.seed_tsc` for every SD (a process loading long-lived keys, §5.6)."""
        for sd in self:
            sd.seed_tsc(wall_ns)

    def __iter__(self) -> Iterator[SecureDomain]:
        return iter(list(self._by_sdi.values()))

    def __len__(self) -> int:
        return len(self._by_sdi)

    def __repr__(self) -> str:
        return f"SecureDomainTable({list(self._by_sdi.values())!r})"
