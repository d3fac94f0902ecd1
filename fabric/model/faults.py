"""A fault schedule for the modelled fabric (issue 27): what fails, when, and for how long.

One schedule serves both engines: the simulator's fabric and the live switch process build the same
:class:`~uet.fabric.model.fabric.Fabric`, which applies it (:mod:`uet.fabric.model.failover`).

Events (``kind``):

* ``down``: the link fails at ``at`` and comes back at ``until`` (never, when absent);
* ``degrade``: the link runs at ``rate`` × its rate (0 < rate ≤ 1) from ``at`` to ``until``;
* ``loss``: each frame crossing the link is lost with probability ``loss`` (seeded per link and
  direction), from ``at`` to ``until`` — a bit-error rate b on a frame of n bytes is a loss of
  1 − (1 − b)^(8n), which the caller converts;
* ``flap``: from ``at`` to ``until`` the link goes down for the first half of every ``period`` and
  up for the second (``until`` is required: a flap ends);
* ``switch_down``: every link of ``switch`` fails at ``at`` and comes back at ``until``;
  ``plane:K`` names every switch of plane K of a multi-plane topology (``planes``).

Links are named from the topology (:func:`uet.fabric.topology.plan_links`: ``leaf3-spine1``,
``h0-leaf0``, ``pod0-leaf1-pod0-spine0``); ``uplinks:N`` is N distinct leaf uplinks drawn with the
schedule's ``seed``. Routing reacts to a failure after ``detect_ns`` and takes a link back
``holddown_ns`` after it came up (**decisions**, the spec notes are silent: 100 µs, the order of a
switch's hardware ECMP repair after loss of signal, and 1 ms; both are settings).

Two ways in: a ``[faults]`` table (``detect``, ``holddown``, ``seed`` and ``[[faults.event]]``
tables with the fields above; times as integers in ns or strings with a unit, ``"150us"``) and the
command-line forms :func:`parse_option` reads (``--fail LINK@T[..T2]``, ``--degrade LINK=F[@T[..T2]]``,
``--lossy LINK=P[@T[..T2]]``, ``--flap LINK@T..T2/PERIOD``, ``--fail-switch SWITCH@T[..T2]``).
Every mistake is a :class:`~uet.fabric.model.config.FabricError` with a one-line message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from uet.fabric.model.config import FabricError

KINDS = ("down", "degrade", "loss", "flap", "switch_down")
#: command-line option → event kind
OPTIONS = {"fail": "down", "degrade": "degrade", "lossy": "loss", "flap": "flap", "fail_switch": "switch_down"}

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(ns|us|µs|ms|s)?\s*$")
#: a schedule spans at most this long (an hour of virtual time): bounds flap expansion too
MAX_NS = 3_600 * 1_000_000_000
#: at most this many flap cycles in one schedule
MAX_FLAPS = 100_000


def parse_ns(value: Any, what: str = "time") -> int:
    """Integer nanoseconds from an integer (ns) or a string with a unit (``"150us"``, ``"2ms"``)."""
    if isinstance(value, bool):
        raise FabricError(f"{what}: {value!r} is not a time")
    if isinstance(value, int):
        ns = value
    elif isinstance(value, float) and value == value:
        ns = round(value)
    elif isinstance(value, str):
        m = _TIME.match(value)
        if not m or (m.group(2) is None and float(m.group(1)) != 0):
            raise FabricError(f"{what}: {value!r} is not a time (a number with ns, us, ms or s)")
        ns = round(float(m.group(1)) * _UNITS[m.group(2) or "ns"])
    else:
        raise FabricError(f"{what}: {value!r} is not a time")
    if not 0 <= ns <= MAX_NS:
        raise FabricError(f"{what}: {value!r} is outside 0 .. 1 hour")
    return ns


@dataclass(frozen=True)
class FaultEvent:
    """One entry of a schedule; see the module docstring for the kinds and fields."""

    kind: str
    target: str
    at_ns: int = 0
    until_ns: int | None = None
    rate: float = 1.0
    loss: float = 0.0
    period_ns: int = 0

    def __post_init__(self) -> None:
        k = self.kind
        if k not in KINDS:
            raise FabricError(f"fault kind {k!r}: one of {', '.join(KINDS)}")
        if not self.target:
            raise FabricError(f"{k}: name a {'switch' if k == 'switch_down' else 'link'}")
        if self.until_ns is not None and self.until_ns <= self.at_ns:
            raise FabricError(f"{k} {self.target}: the end ({self.until_ns} ns) must come after the start")
        if k == "degrade" and not 0 < self.rate <= 1:
            raise FabricError(f"degrade {self.target}: the rate kept must be in (0, 1], not {self.rate}")
        if k == "loss" and not 0 <= self.loss < 1:
            raise FabricError(f"loss {self.target}: the loss probability must be in [0, 1), not {self.loss}")
        if k == "flap":
            if self.until_ns is None or self.period_ns < 2:
                raise FabricError(f"flap {self.target}: give an end and a period (LINK@T..T2/PERIOD)")
            if (self.until_ns - self.at_ns) // self.period_ns > MAX_FLAPS:
                raise FabricError(f"flap {self.target}: more than {MAX_FLAPS} cycles")


@dataclass
class FaultConfig:
    """A fault schedule and how routing reacts (module docstring)."""

    #: routing excludes a failed link from its ECMP groups this long after it failed
    detect_ns: int = 100_000
    #: and takes it back this long after it came up
    holddown_ns: int = 1_000_000
    #: draws of ``uplinks:N`` and of lossy links
    seed: int = 0
    events: list[FaultEvent] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.events)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, *, seed: int = 0) -> FaultConfig:
        """From a ``[faults]`` table (module docstring); ``seed`` when the table gives none."""
        d = dict(d or {})
        cfg = cls(seed=seed)
        for key in ("detect", "holddown"):
            for name in (key, f"{key}_ns"):
                if name in d:
                    setattr(cfg, f"{key}_ns", parse_ns(d.pop(name), f"[faults] {name}"))
        if "seed" in d:
            s = d.pop("seed")
            if isinstance(s, bool) or not isinstance(s, int) or s < 0:
                raise FabricError(f"[faults] seed = {s!r}: a non-negative integer")
            cfg.seed = s
        events = d.pop("event", [])
        if d:
            raise FabricError(f"[faults]: unknown key {sorted(d)[0]!r}; valid: detect, holddown, seed, event")
        if not isinstance(events, list):
            raise FabricError("[faults] event: a list of [[faults.event]] tables")
        for i, e in enumerate(events):
            if not isinstance(e, dict):
                raise FabricError(f"[[faults.event]] #{i + 1}: a table")
            cfg.events.append(_event_from_dict(e, f"[[faults.event]] #{i + 1}"))
        return cfg

    def with_option(self, option: str, text: str) -> FaultConfig:
        """This schedule plus the event of one command-line option (:func:`parse_option`)."""
        return replace(self, events=[*self.events, parse_option(option, text)])


def _event_from_dict(e: dict[str, Any], where: str) -> FaultEvent:
    e = dict(e)
    kind = e.pop("kind", None)
    if kind not in KINDS:
        raise FabricError(f"{where}: kind = {kind!r}: one of {', '.join(KINDS)}")
    target = e.pop("switch" if kind == "switch_down" else "link", None)
    if not isinstance(target, str):
        raise FabricError(f"{where}: name the {'switch' if kind == 'switch_down' else 'link'} (a string)")
    kw: dict[str, Any] = {}
    for name, key in (("at", "at_ns"), ("until", "until_ns"), ("period", "period_ns")):
        for n in (name, key):
            if n in e:
                kw[key] = parse_ns(e.pop(n), f"{where} {n}")
    for name in ("rate", "loss"):
        if name in e:
            v = e.pop(name)
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise FabricError(f"{where}: {name} = {v!r}: a number")
            kw[name] = float(v)
    if e:
        raise FabricError(f"{where}: unknown key {sorted(e)[0]!r}")
    return FaultEvent(kind, target, **kw)


def _window(text: str, what: str) -> tuple[int, int | None]:
    start, sep, end = text.partition("..")
    at = parse_ns(start, what)
    return at, (parse_ns(end, what) if sep else None)


def parse_option(option: str, text: str) -> FaultEvent:
    """The event of one command-line option (``fail``, ``degrade``, ``lossy``, ``flap``,
    ``fail_switch``) and its argument; see the module docstring for the forms."""
    kind = OPTIONS.get(option.replace("-", "_").lstrip("_"))
    flag = f"--{option.replace('_', '-')}"
    if kind is None:
        raise FabricError(f"unknown fault option {flag}")
    try:
        if kind in ("down", "switch_down"):
            target, sep, when = text.partition("@")
            if not sep:
                raise FabricError(f"{flag} {text!r}: NAME@T[..T2], e.g. leaf0-spine1@100us..300us")
            at, until = _window(when, flag)
            return FaultEvent(kind, target, at, until)
        if kind == "flap":
            target, sep, when = text.partition("@")
            span, sep2, period = when.partition("/")
            if not (sep and sep2):
                raise FabricError(f"{flag} {text!r}: LINK@T..T2/PERIOD, e.g. leaf0-spine1@100us..1ms/100us")
            at, until = _window(span, flag)
            return FaultEvent(kind, target, at, until, period_ns=parse_ns(period, flag))
        target, sep, rest = text.partition("=")
        value, sep2, when = rest.partition("@")
        if not sep:
            raise FabricError(f"{flag} {text!r}: LINK=VALUE[@T[..T2]], e.g. leaf0-spine1=0.25")
        try:
            v = float(value)
        except ValueError:
            raise FabricError(f"{flag} {text!r}: {value!r} is not a number") from None
        at, until = _window(when, flag) if sep2 else (0, None)
        if kind == "degrade":
            return FaultEvent(kind, target, at, until, rate=v)
        return FaultEvent(kind, target, at, until, loss=v)
    except FabricError as e:
        msg = str(e)
        raise FabricError(msg if msg.startswith(flag) else f"{flag} {text!r}: {msg}") from None
