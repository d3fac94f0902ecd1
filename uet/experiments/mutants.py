"""Mutant generation for ``uet-mutate``: small, single-point changes to a module's syntax tree.

Each mutant changes one thing a test should notice (the operators mutation-testing tools such as
mutmut and cosmic-ray use):

* arithmetic and bitwise operators (``+``↔``-``, ``*``→``/``, ``<<``↔``>>``, ``&``↔``|``, ``^``→``&``,
  ``//``→``*``, ``%``→``//``, ``**``→``*``), in expressions and augmented assignments;
* comparisons at their boundary (``<``↔``<=``, ``>``↔``>=``) and negated (``==``↔``!=``,
  ``is``↔``is not``, ``in``↔``not in``);
* ``and``↔``or``; ``not x``→``x``; ``-x``→``x``; ``~x``→``x``;
* integer constants ``n``→``n + 1``; ``True``↔``False``;
* a statement (assignment, expression, ``return``, ``raise``, ``del``) replaced by ``pass``;
  ``break``↔``continue``.

Left alone, because changing them tests nothing or only the type checker: docstrings and other
string constants, annotations, decorators, ``__all__`` and ``__slots__``, ``TypeVar`` (and
``ParamSpec``, ``NewType``) definitions, blocks under ``if TYPE_CHECKING:``, and lines marked
``# pragma: no mutate``.

A mutant is identified by its index in a deterministic walk of the tree; :func:`mutate` re-parses
the source and applies mutant ``i`` alone, so a child process can rebuild exactly the mutant its
parent listed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["Mutant", "list_mutants", "mutate"]

_BINOP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.BitXor: ast.BitAnd,
}
_CMPOP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_SYMBOL = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}
_DELETABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise, ast.Delete)
_SKIP_FIELDS = frozenset({"annotation", "returns", "decorator_list", "type_comment", "type_params"})


@dataclass(frozen=True)
class Mutant:
    """One mutant: its index, where it is (1-based line, 0-based column, enclosing ``Class.def``)
    and what it changes."""

    index: int
    line: int
    col: int
    description: str
    scope: str = ""


@dataclass
class _Site:
    line: int
    col: int
    description: str
    apply: Callable[[], None]
    scope: str = ""


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _is_type_checking(stmt: ast.stmt) -> bool:
    t = stmt.test if isinstance(stmt, ast.If) else None
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _is_dunder_all(stmt: ast.stmt) -> bool:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else []
    return any(isinstance(t, ast.Name) and t.id in ("__all__", "__slots__") for t in targets)


def _is_typing_only(stmt: ast.stmt) -> bool:
    """``T = TypeVar(...)`` and the like: read by the type checker only (annotations are strings
    under ``from __future__ import annotations``)."""
    value = stmt.value if isinstance(stmt, ast.Assign) else None
    func = value.func if isinstance(value, ast.Call) else None
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name in ("TypeVar", "ParamSpec", "TypeVarTuple", "NewType")


class _Walker:
    """Deterministic pre-order walk yielding every mutation site of a tree."""

    def __init__(self, source: str) -> None:
        self.quiet = {i + 1 for i, text in enumerate(source.splitlines()) if "pragma: no mutate" in text}
        self.scope: list[str] = []

    def sites(self, node: ast.AST) -> Iterator[_Site]:
        for name, value in ast.iter_fields(node):
            if name in _SKIP_FIELDS:
                continue
            if isinstance(value, list):
                for i, child in enumerate(value):
                    if isinstance(child, ast.AST):
                        yield from self._child(value, i, child)
            elif isinstance(value, ast.AST):
                yield from self._child(node, name, value)

    def _child(self, holder: object, key: int | str, node: ast.AST) -> Iterator[_Site]:
        if isinstance(node, ast.stmt) and (
            _is_docstring(node) or _is_type_checking(node) or _is_dunder_all(node) or _is_typing_only(node)
        ):
            return
        if isinstance(node, ast.JoinedStr):
            return
        line = getattr(node, "lineno", 0)
        if line not in self.quiet:
            for site in self._own(holder, key, node):
                site.scope = ".".join(self.scope)
                yield site
        named = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.scope.append(node.name)
        yield from self.sites(node)
        if named:
            self.scope.pop()

    def _own(self, holder: object, key: int | str, node: ast.AST) -> Iterator[_Site]:
        line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)

        def replace(new: ast.AST) -> Callable[[], None]:
            def do() -> None:
                ast.copy_location(new, node)
                if isinstance(key, int):
                    holder[key] = new  # type: ignore[index]
                else:
                    setattr(holder, key, new)

            return do

        def set_attr(target: object, attr: str, value: object) -> Callable[[], None]:
            return lambda: setattr(target, attr, value)

        if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _BINOP:
            new_op = _BINOP[type(node.op)]
            desc = f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[new_op]}"
            yield _Site(line, col, desc, set_attr(node, "op", new_op()))
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                new_cmp = _CMPOP[type(op)]

                def swap(i: int = i, new_cmp: type[ast.cmpop] = new_cmp, cmp: ast.Compare = node) -> None:
                    cmp.ops[i] = new_cmp()

                yield _Site(line, col, f"{_SYMBOL[type(op)]} -> {_SYMBOL[new_cmp]}", swap)
        if isinstance(node, ast.BoolOp):
            other = ast.Or if isinstance(node.op, ast.And) else ast.And
            desc = "and -> or" if isinstance(node.op, ast.And) else "or -> and"
            yield _Site(line, col, desc, set_attr(node, "op", other()))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.Invert)):
            sym = {ast.Not: "not ", ast.USub: "-", ast.Invert: "~"}[type(node.op)]
            yield _Site(line, col, f"{sym}x -> x", replace(node.operand))
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                yield _Site(line, col, f"{node.value} -> {not node.value}", set_attr(node, "value", not node.value))
            elif isinstance(node.value, int):
                yield _Site(line, col, f"{node.value} -> {node.value + 1}", set_attr(node, "value", node.value + 1))
        if isinstance(node, ast.Break):
            yield _Site(line, col, "break -> continue", replace(ast.Continue()))
        if isinstance(node, ast.Continue):
            yield _Site(line, col, "continue -> break", replace(ast.Break()))
        if isinstance(node, _DELETABLE) and isinstance(key, int):
            kind = type(node).__name__.lower()
            yield _Site(line, col, f"{kind} statement -> pass", replace(ast.Pass()))


def _sites(source: str, filename: str) -> tuple[ast.Module, list[_Site]]:
    tree = ast.parse(source, filename)
    return tree, list(_Walker(source).sites(tree))


def list_mutants(source: str, filename: str = "<module>") -> list[Mutant]:
    """Every mutant of ``source``, in walk order."""
    _tree, sites = _sites(source, filename)
    return [Mutant(i, s.line, s.col, s.description, s.scope) for i, s in enumerate(sites)]


def mutate(source: str, index: int, filename: str = "<module>") -> ast.Module:
    """The syntax tree of ``source`` with mutant ``index`` applied (ready for ``compile``)."""
    tree, sites = _sites(source, filename)
    sites[index].apply()
    return ast.fix_missing_locations(tree)
