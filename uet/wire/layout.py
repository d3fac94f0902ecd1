"""One declaration per header, two codecs generated from it.

A header is declared once as a :class:`Layout`: an ordered list of bit fields (:class:`F`),
reserved bits (:class:`R`) and byte strings (:class:`Raw`), most significant bit first, exactly as
the tables in ``spec/wire-format.md`` list them. From that one declaration this module builds:

* a ``construct`` definition (:attr:`Layout.construct`), used by the decoder tool, for error
  messages and as the independent reference in property tests;
* a fast codec compiled to straight-line Python around one precompiled :class:`struct.Struct`
  (:meth:`Layout.decode`, :meth:`Layout.encode`, :meth:`Layout.pack_into`), used by the data path.

Values travel as a :func:`collections.namedtuple` per layout (``Layout.T``): immutable, named,
cheap to create, and equal when their fields are equal. Reserved bits are not fields: they are sent
as 0 and ignored by the data path (wire-format.md §0). A decoder that shows them, as Wireshark
does, reads them with :meth:`Layout.reserved_values`: each run of reserved bits is named
``reserved_<bit>`` after the position of its first bit counted from the header's first bit (most
significant first), so the two reserved bits above the SES opcode are ``reserved_0``.

Every layout has a fixed size. Variants of a header (the SYN form of a request, the SOM and non-SOM
forms of the standard SES header, ...) are separate layouts built from shared item lists, and the
header chain in :mod:`uet.wire.chain` picks one from fields already decoded, as Wireshark's
``Switch`` on the same fields would.

The fast encoder masks sub-word fields to their width and does not range-check them (it runs per
packet); :meth:`Layout.check` validates a value set and raises :class:`~uet.errors.EncodeError`,
and the construct builder range-checks too.
"""

from __future__ import annotations

import struct
from collections import namedtuple
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from functools import cached_property
from typing import TYPE_CHECKING, Any

from uet.dataclass_cache import stored_code
from uet.errors import DecodeError, EncodeError

if TYPE_CHECKING:
    import construct as cs

__all__ = ["F", "R", "Raw", "Layout"]


@dataclass(frozen=True)
class F:
    """A named bit field: ``bits`` wide, optionally signed (two's complement) or enum-typed."""

    name: str
    bits: int
    signed: bool = False
    enum: type[IntEnum] | type[IntFlag] | None = None
    doc: str = ""


@dataclass(frozen=True)
class R:
    """Reserved bits: sent as 0, ignored on receive."""

    bits: int


@dataclass(frozen=True)
class Raw:
    """An opaque byte string of fixed length (MAC and IP addresses, padding)."""

    name: str
    nbytes: int
    doc: str = ""


Item = F | R | Raw

# struct format characters for whole words, and the greedy split of other widths.
_NATIVE = {8: "B", 16: "H", 32: "I", 64: "Q"}
_SIGNED = {8: "b", 16: "h", 32: "i", 64: "q"}


def _chunks(width: int) -> list[int]:
    out = []
    while width:
        for c in (64, 32, 16, 8):
            if c <= width:
                out.append(c)
                width -= c
                break
    return out


@dataclass
class _Word:
    """A run of bit fields that together fill whole bytes."""

    items: list[F | R]
    width: int
    offset: int  # byte offset within the layout

    @property
    def fields(self) -> list[tuple[F, int]]:
        """(field, shift) pairs, shift counted from the word's least significant bit."""
        out = []
        pos = self.width
        for it in self.items:
            pos -= it.bits
            if isinstance(it, F):
                out.append((it, pos))
        return out


class Layout:
    """A fixed-size header declared field by field; see the module docstring."""

    def __init__(
        self,
        name: str,
        items: Iterable[Item],
        *,
        defaults: dict[str, int] | None = None,
        doc: str = "",
    ) -> None:
        # local names for what the loop below fills: an attribute of a Layout is read through its
        # __getattr__ hook (issue 28: a one-flow run declares 52 headers of 545 fields as it starts)
        self.name = name
        self.items: tuple[Item, ...] = tuple(items)
        self.doc = doc
        self._words: list[_Word | Raw] = []
        self.field_offset: dict[str, int] = {}
        self.fields: dict[str, F | Raw] = {}
        words, fields, field_offset = self._words, self.fields, self.field_offset
        reserved: list[tuple[str, int, int]] = []
        offset = 0
        for group in _merge(_groups(name, self.items)):
            if isinstance(group, Raw):
                words.append(group)
                if group.name in fields:
                    raise ValueError(f"{name}: duplicate field {group.name}")
                fields[group.name] = group
                field_offset[group.name] = offset
                offset += group.nbytes
                continue
            bits = 0
            for it in group:
                if isinstance(it, F):
                    fname = it.name
                    if fname in fields:
                        raise ValueError(f"{name}: duplicate field {fname}")
                    fields[fname] = it
                    field_offset[fname] = offset + bits // 8
                    bits += it.bits
                else:
                    at = offset * 8 + bits
                    width = it.bits
                    reserved.append((f"reserved_{at}", at, width))
                    bits += width
            words.append(_Word(group, bits, offset))
            offset += bits // 8
        self.size = offset
        #: ``(name, first bit, width)`` of each run of reserved bits (module docstring)
        self.reserved: tuple[tuple[str, int, int], ...] = tuple(reserved)
        #: the reserved bits of the header read as one big-endian integer, set (0: none)
        self.reserved_mask = sum(((1 << w) - 1) << (offset * 8 - at - w) for _n, at, w in reserved)
        self.field_names: tuple[str, ...] = tuple(fields)
        # plain ints: enum members would route every mask through Python-level operators
        self.defaults = {k: int(v) if isinstance(v, int) else v for k, v in (defaults or {}).items()}
        # The named tuple and the fast codec are made on first use (__getattr__): a program that
        # imports every header but handles a few (a tool) starts some 70 ms sooner.

    #: the values' named tuple (module docstring)
    T: Any
    _struct: struct.Struct

    def __getattr__(self, name: str) -> Any:
        """Make the named tuple and compile the codec on the first use of one of them."""
        if name in _LAZY and "_words" in self.__dict__:
            self._compile()
            return self.__dict__[name]
        if name in _LAZY_STEPS and "_words" in self.__dict__:
            self._compile_steps()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def compile(self) -> None:
        """Make the named tuple and the codec now instead of on first use (their code is then
        in the store of :mod:`uet.dataclass_cache` for the runs that follow)."""
        if "decode" not in self.__dict__:
            self._compile()

    @classmethod
    def concat(cls, name: str, *parts: Layout, doc: str = "") -> Layout:
        """One layout made of consecutive headers, for a data path that always handles them
        together (one struct call instead of several). A field whose name an earlier part already
        uses is prefixed with the first word of its part's name: the SES ``flags`` after a PDS
        header becomes ``ses_flags``."""
        items: list[Item] = []
        defaults: dict[str, Any] = {}
        seen: set[str] = set()
        for part in parts:
            prefix = part.name.split("_", 1)[0] + "_"
            for it in part.items:
                if isinstance(it, (F, Raw)):
                    new = prefix + it.name if it.name in seen else it.name
                    if it.name in part.defaults:
                        defaults[new] = part.defaults[it.name]
                    if new != it.name:
                        it = (
                            F(new, it.bits, it.signed, it.enum, it.doc)
                            if isinstance(it, F)
                            else Raw(new, it.nbytes, it.doc)
                        )
                    seen.add(new)
                items.append(it)
        return cls(name, items, defaults=defaults, doc=doc or " + ".join(p.name for p in parts))

    def __repr__(self) -> str:
        return f"Layout({self.name!r}, {self.size} bytes)"

    # -- fast codec ----------------------------------------------------------------------------

    def _compile(self) -> None:
        self.T = namedtuple(  # type: ignore[misc]
            _camel(self.name),
            self.field_names,
            defaults=[
                self.defaults.get(n, b"\0" * f.nbytes if isinstance(f, Raw) else 0) for n, f in self.fields.items()
            ],
        )
        self.T.__doc__ = self.doc or f"Values of the {self.name} header."
        if "_steps" not in self.__dict__:
            self._compile_steps()
        dec_args, dec_pre, dec_vals, enc_vals = self._steps
        self._compile_codec(dec_args, dec_pre, dec_vals, enc_vals)

    def _compile_steps(self) -> None:
        """The struct and the expressions of the codec (without compiling it): what
        :attr:`unpack_steps` tells, for a caller that generates its own decoder."""
        fmt = ">"
        dec_args: list[str] = []  # names bound by unpack
        dec_pre: list[str] = []  # combined words
        dec_vals: dict[str, str] = {}  # field -> expression
        enc_vals: list[str] = []  # expressions handed to pack
        n = 0
        for w in self._words:
            if isinstance(w, Raw):
                fmt += f"{w.nbytes}s"
                a = f"a{n}"
                n += 1
                dec_args.append(a)
                dec_vals[w.name] = a
                enc_vals.append(w.name)
                continue
            flds = w.fields
            f = w.items[0]
            if len(w.items) == 1 and isinstance(f, F) and w.width in _NATIVE:
                fmt += (_SIGNED if f.signed else _NATIVE)[w.width]
                a = f"a{n}"
                n += 1
                dec_args.append(a)
                dec_vals[f.name] = a
                enc_vals.append(f.name)
                continue
            # General word: unpack as unsigned chunks, combine, then shift/mask each field.
            chunks = _chunks(w.width)
            names = []
            for c in chunks:
                fmt += _NATIVE[c]
                names.append(f"a{n}")
                n += 1
            dec_args.extend(names)
            if len(chunks) == 1:
                word = names[0]
            else:
                parts, rest = [], w.width
                for c, nm in zip(chunks, names, strict=False):
                    rest -= c
                    parts.append(f"({nm} << {rest})" if rest else nm)
                word = f"w{n}"
                dec_pre.append(f"    {word} = " + " | ".join(parts))
            for f, shift in flds:
                mask = (1 << f.bits) - 1
                expr = f"(({word} >> {shift}) & {mask:#x})" if shift else f"({word} & {mask:#x})"
                if f.signed:
                    expr = f"_sx({expr}, {f.bits})"
                dec_vals[f.name] = expr
            # encode: build the word, then split into the chunks
            terms = []
            for f, shift in flds:
                mask = (1 << f.bits) - 1
                t = f"({f.name} & {mask:#x})"
                terms.append(f"({t} << {shift})" if shift else t)
            wexpr = " | ".join(terms) if terms else "0"
            if len(chunks) == 1:
                enc_vals.append(f"({wexpr})")
            else:
                tmp = f"w{n}"
                enc_vals.append(("__pre__", tmp, wexpr))  # type: ignore[arg-type]
                rest = w.width
                for c in chunks:
                    rest -= c
                    m = (1 << c) - 1
                    enc_vals.append(f"(({tmp} >> {rest}) & {m:#x})" if rest else f"({tmp} & {m:#x})")
        self._struct = struct.Struct(fmt)
        assert self._struct.size == self.size, (self.name, fmt)
        self.unpack_steps: tuple[list[str], list[str], list[str]] = (
            dec_args,
            [p.strip() for p in dec_pre],
            [dec_vals[f] for f in self.field_names],
        )
        """How :attr:`unpack` makes its tuple from ``self._struct.unpack_from``'s values, for
        callers that generate their own decoder (tools/decode_fast.py): the names the struct's
        values are bound to, the statements combining words, and each field's expression (which
        may call ``_sx``, :func:`_sign_extend`). Made without the codec (no named tuple)."""
        self._steps = (dec_args, dec_pre, dec_vals, enc_vals)

    def _compile_codec(
        self, dec_args: list[str], dec_pre: list[str], dec_vals: dict[str, str], enc_vals: list[Any]
    ) -> None:
        fields = ", ".join(self.field_names)
        pre = [f"    {e[1]} = {e[2]}" for e in enc_vals if isinstance(e, tuple)]
        packed = ", ".join(e for e in enc_vals if not isinstance(e, tuple))
        args = ", ".join(dec_args)
        vals = ", ".join(dec_vals[f] for f in self.field_names)
        direct = len(dec_args) == len(self.field_names) and all(
            dec_vals[f] == a for f, a in zip(self.field_names, dec_args, strict=False)
        )
        body_unpack = (
            ["        return _unpack(buf, offset)"]
            if direct
            else [
                f"        {args}, = _unpack(buf, offset)",
                *["    " + p for p in dec_pre],
                f"        return ({vals},)",
            ]
        )
        src = [
            "def decode(buf, offset=0):",
            "    try:",
            f"        {args}, = _unpack(buf, offset)",
            *["    " + p for p in dec_pre],
            f"        return _new(_T, ({vals},))",
            "    except _StructError:",
            "        raise _short(buf, offset) from None",
            "def unpack(buf, offset=0):",
            "    try:",
            *body_unpack,
            "    except _StructError:",
            "        raise _short(buf, offset) from None",
            "def encode(h):",
            "    try:",
            f"        {fields}, = h",
            *["    " + p for p in pre],
            f"        return _pack({packed})",
            "    except (_StructError, TypeError, ValueError) as e:",
            "        raise _enc_error(h, e) from None",
            "def pack_into(buf, offset, h):",
            "    try:",
            f"        {fields}, = h",
            *["    " + p for p in pre],
            f"        _pack_into(buf, offset, {packed})",
            "    except (_StructError, TypeError, ValueError) as e:",
            "        raise _enc_error(h, e) from None",
        ]
        ns: dict[str, Any] = {
            "_unpack": self._struct.unpack_from,
            "_pack": self._struct.pack,
            "_pack_into": self._struct.pack_into,
            "_new": tuple.__new__,
            "_T": self.T,
            "_sx": _sign_extend,
            "_StructError": struct.error,
            "_short": self._short,
            "_enc_error": self._enc_error,
        }
        exec(stored_code("\n".join(src), f"<layout {self.name}>"), ns)  # noqa: S102 - compiled once (the store)
        # Plain functions stored on the instance: calling them costs one frame, no method binding.
        self.decode: Callable[..., Any] = ns["decode"]
        """``decode(buf, offset=0)``: ``self.size`` bytes at ``offset`` as a ``self.T`` (fast)."""
        self.unpack: Callable[..., tuple[Any, ...]] = ns["unpack"]
        """``unpack(buf, offset=0)``: the same values as a plain tuple, the data path's decoder.

        Equal (``==``) to what :attr:`decode` returns without building a named tuple (which costs
        about 0.4 µs here); callers unpack it positionally."""
        self.encode: Callable[[Any], bytes] = ns["encode"]
        """``encode(values)``: a ``self.T`` or any sequence of the fields in order, to bytes."""
        self.pack_into: Callable[..., None] = ns["pack_into"]
        """``pack_into(buf, offset, values)``: encode into ``buf`` without allocating."""
        self.source = "\n".join(src)

    def _enc_error(self, values: Any, exc: Exception) -> EncodeError:
        try:
            self.check(values)
        except EncodeError as e:
            return e
        return EncodeError(self.name, "*", str(exc))

    def make(self, **fields: int | bytes) -> Any:
        """A ``self.T`` with the given fields and the layout's defaults for the rest."""
        return self.T(**fields)

    def check(self, values: Any) -> None:
        """Raise :class:`EncodeError` for the first field whose value does not fit."""
        try:
            n = len(values)
        except TypeError:
            raise EncodeError(self.name, "*", f"not a sequence of fields: {type(values).__name__}") from None
        if n != len(self.field_names):
            raise EncodeError(self.name, "*", f"expected {len(self.field_names)} fields")
        for name, v in zip(self.field_names, values, strict=False):
            f = self.fields[name]
            if isinstance(f, Raw):
                if not isinstance(v, (bytes, bytearray)) or len(v) != f.nbytes:
                    raise EncodeError(self.name, name, f"needs {f.nbytes} bytes")
                continue
            if not isinstance(v, int):
                raise EncodeError(self.name, name, f"not an integer: {v!r}")
            lo, hi = (-(1 << (f.bits - 1)), (1 << (f.bits - 1)) - 1) if f.signed else (0, (1 << f.bits) - 1)
            if not lo <= v <= hi:
                raise EncodeError(self.name, name, f"{v} does not fit {f.bits} bits")

    def _short(self, buf: Any, offset: int) -> DecodeError:
        have = max(0, len(buf) - offset)
        missing = next((n for n, o in self.field_offset.items() if o + _nbytes(self.fields[n]) > have), "?")
        return DecodeError(
            self.name,
            offset + have,
            f"truncated: {self.size} bytes needed, {have} present (field {missing})",
        )

    # -- construct definition ------------------------------------------------------------------

    @cached_property
    def construct(self) -> cs.Construct:
        """The construct definition, built (and the ``construct`` package imported) on first use:
        the data path and the decoder's fast path never need it, and building it for every header
        at import cost the tools about 0.2 s of start-up."""
        import construct as cs

        subs = []
        for i, w in enumerate(self._words):
            if isinstance(w, Raw):
                subs.append(w.name / cs.Bytes(w.nbytes))
                continue
            if len(w.items) == 1 and isinstance(w.items[0], F):
                f = w.items[0]
                subs.append(f.name / cs.BytesInteger(w.width // 8, signed=f.signed))
                continue
            bits = []
            for it in w.items:
                if isinstance(it, R):
                    bits.append(cs.Padding(it.bits))
                else:
                    bits.append(it.name / cs.BitsInteger(it.bits, signed=it.signed))
            subs.append(f"_w{i}" / cs.BitStruct(*bits))
        return cs.Struct(*subs)

    def parse(self, buf: bytes | bytearray | memoryview, offset: int = 0) -> Any:
        """Decode with the construct definition (slow path; errors name the field and offset)."""
        import construct as cs

        data = bytes(buf[offset:])
        try:
            c = self.construct.parse(data)
        except cs.ConstructError as e:
            path = getattr(e, "path", "") or ""
            fld = path.rsplit("-> ", 1)[-1].strip() if "->" in path else ""
            if fld.startswith("_w"):
                fld = ""
            where = self.field_offset.get(fld, min(len(data), self.size))
            if len(data) < self.size:
                raise self._short(buf, offset) from None
            raise DecodeError(self.name, offset + where, f"{fld or 'header'}: {e}") from None
        flat: dict[str, Any] = {}
        for k, v in c.items():
            if k.startswith("_w"):
                flat.update((kk, vv) for kk, vv in v.items() if not kk.startswith("_"))
            elif not k.startswith("_"):
                flat[k] = v
        return self.T(**flat)

    def build(self, values: Any) -> bytes:
        """Encode with the construct definition (slow path, range-checked)."""
        self.check(values)
        d: dict[str, Any] = {}
        named = dict(zip(self.field_names, values, strict=False))
        for i, w in enumerate(self._words):
            if isinstance(w, Raw):
                d[w.name] = named[w.name]
            elif len(w.items) == 1 and isinstance(first := w.items[0], F):
                d[first.name] = named[first.name]
            else:
                d[f"_w{i}"] = {it.name: named[it.name] for it in w.items if isinstance(it, F)}
        out: bytes = self.construct.build(d)
        return out

    # -- presentation --------------------------------------------------------------------------

    def reserved_values(self, buf: bytes | bytearray | memoryview, offset: int = 0) -> dict[str, int]:
        """The runs of reserved bits of the header at ``offset`` that are **not** zero, by name
        (:attr:`reserved`); empty when all are zero (the usual case, one masked integer), or when
        the header is truncated (decoding it reports that)."""
        mask = self.reserved_mask
        if not mask or len(buf) - offset < self.size:
            return {}
        word = int.from_bytes(buf[offset : offset + self.size], "big") & mask
        if not word:
            return {}
        top = self.size * 8
        out = {}
        for name, at, w in self.reserved:
            v = (word >> (top - at - w)) & ((1 << w) - 1)
            if v:
                out[name] = v
        return out

    def describe(self, values: Any) -> list[tuple[str, Any, str]]:
        """(field, value, display) triples; enum fields show their names."""
        out = []
        for name, v in zip(self.field_names, values, strict=False):
            f = self.fields[name]
            if isinstance(f, Raw):
                out.append((name, v, v.hex()))
            elif f.enum is not None:
                try:
                    out.append((name, v, f"{f.enum(v).name} ({v:#x})"))
                except ValueError:
                    out.append((name, v, f"unknown ({v:#x})"))
            else:
                out.append((name, v, str(v)))
        return out


def _groups(name: str, items: tuple[Item, ...]) -> list[list[F | R] | Raw]:
    """Split items into the smallest runs of bit fields that fill whole bytes."""
    out: list[list[F | R] | Raw] = []
    pending: list[F | R] = []
    bits = 0
    for it in items:
        if isinstance(it, Raw):
            if pending:
                raise ValueError(f"{name}: byte field {it.name} inside a bit word")
            out.append(it)
            continue
        width = it.bits
        if width <= 0:
            raise ValueError(f"{name}: non-positive width")
        pending.append(it)
        bits += width
        if bits % 8 == 0:
            out.append(pending)
            pending, bits = [], 0
    if pending:
        raise ValueError(f"{name}: fields do not end on a byte boundary")
    return out


def _merge(groups: list[list[F | R] | Raw]) -> list[list[F | R] | Raw]:
    """Join adjacent runs into native-width words (16/32/64 bits) where that saves work.

    A run of odd width (24, 48 bits) is joined with its successors until the width is native;
    two runs that each hold several fields are joined when the sum is native. Fewer, wider words
    mean fewer objects out of :func:`struct.unpack_from`, which is where the fast codec spends time.

    Each run's width is kept as runs are joined (it was summed again at every step, quadratic in a
    header's fields: 2.6 M instructions of a one-flow ``uet-sim`` run, whose imports declare 52
    headers of 545 fields).
    """
    out: list[list[F | R] | Raw] = []
    widths: list[int] = []  # of each run in ``out`` (0 for a byte field), kept as runs are joined
    for g in groups:
        if not isinstance(g, list):
            out.append(g)
            widths.append(0)
            continue
        gw = 0
        for it in g:
            gw += it.bits
        prev = out[-1] if out else None
        if isinstance(prev, list):
            pw = widths[-1]
            joined = pw + gw in _NATIVE
            if (
                (pw not in _NATIVE and pw + gw <= 64)  # finish an odd word
                or (gw not in _NATIVE and joined)  # an odd run completes the previous word
                or (joined and not _plain(prev, pw) and not _plain(g, gw))
            ):
                out[-1] = prev + g
                widths[-1] = pw + gw
                continue
        out.append(list(g))
        widths.append(gw)
    return out


def _plain(g: list[F | R], width: int) -> bool:
    """A run that is one field of native width."""
    return len(g) == 1 and isinstance(g[0], F) and width in _NATIVE


#: attributes :meth:`Layout._compile` makes
_LAZY = frozenset({"T", "decode", "unpack", "encode", "pack_into", "source"})
_LAZY_STEPS = frozenset({"_struct", "unpack_steps", "_steps"})  # without the codec: Layout._compile_steps


def _sign_extend(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) else v


def _nbytes(f: F | Raw) -> int:
    return f.nbytes if isinstance(f, Raw) else max(1, (f.bits + 7) // 8)


def _camel(name: str) -> str:
    parts = "".join(c if c.isalnum() else "_" for c in name).split("_")
    return "".join(p.capitalize() for p in parts) or "Header"
