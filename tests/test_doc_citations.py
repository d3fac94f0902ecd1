"""Ship what you cite: every document citation in the project points at a file and a section that exist.

Docstrings, comments, help texts, the README, the conformance cases' ``section`` fields and the
conformance rules' sections cite the project's protocol reference (``behaviour.md §2.8``,
``spec/wire-format.md §5.4``, ``rocev2-and-fabric.md §8.5``) and its house notes
(``architecture.md "Link modes: fabric"``, ``architecture.md principle 4``,
``conventions.md "Structured event logs"``). This test finds all of them and checks that the cited
file is in the repository (at the repository root, or under ``docs/`` by its path suffix) and that
each cited section exists there:

* ``§N.M`` names a numbered heading (``### 2.8 ...``) of that file; a range ``§8–§11`` names both
  ends; a list ``§6.3, §6.5`` names each;
* a quoted name names a heading whose text is the name or starts with it followed by ``:``;
* ``principle N`` / ``"Principles" N`` names item N of the file's ``Principles`` section.

A document of another project cited by its own path (nccl-tests' ``doc/PERFORMANCE.md``) is listed
in :data:`EXTERNAL` with what it is; every other ``*.md`` path must be here.

The checker itself is tested on made-up text (it must report a citation that points nowhere), so
the scan over the real tree cannot pass by finding nothing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: what is scanned for citations: the package, the switch, tools, tests, interop, scenarios, docs
SCAN_DIRS = ("uet", "fabric", "tools", "tests", "interop", "scenarios", "docs")
SCAN_FILES = ("README.md", "pyproject.toml")
SCAN_SUFFIXES = {".py", ".md", ".toml", ".txt", ".rst"}

#: documents of other projects cited by their own path, which is not a path in this repository
EXTERNAL = {
    "doc/PERFORMANCE.md": "nccl-tests' notes on algbw/busbw (uet/workloads/collective.py)",
}

_SEC = r"\d+(?:\.\d+)*"
#: a cited document and what follows it: optional closing quotes/backticks, then a section list
_CITE = re.compile(
    r"(?<![\w/.-])(?P<path>(?:[\w-]+/)*[\w-]+\.md)\b[`'’\"]*"
    r"(?P<tail>[ \t]*(?:\n[ \t]*(?:#:?[ \t]*)?)?[(,]?[ \t]*(?:\n[ \t]*(?:#:?[ \t]*)?)?"
    r"(?:§" + _SEC + r"(?:[ \t]*(?:–|-|—)[ \t]*§?" + _SEC + r"|(?:,[ \t]*|[ \t]+and[ \t]+|/)§" + _SEC + r")*"
    r"|\"[^\"]{1,80}\"(?:[ \t]*" + r"\d+(?:[ \t]+and[ \t]+\d+)*)?"
    r"|[Pp]rinciples?[ \t]+\d+(?:[ \t]*(?:,|and)[ \t]*\d+)*"
    r"))?"
)
#: the other order: a section, a few words, then the document in parentheses ("§9.2 experiment 3
#: (rocev2-and-fabric.md)")
_CITE_BEFORE = re.compile(r"§(?P<sec>" + _SEC + r")[^§\n()]{0,40}\((?P<path>(?:[\w-]+/)*[\w-]+\.md)\)")
_SECTION = re.compile(r"§?(" + _SEC + r")")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_NUMBERED = re.compile(r"^(?:§[ \t]*)?(" + _SEC + r")\.?(?:[ \t]|$)")


@dataclass(frozen=True)
class Citation:
    """One citation: where it is, the document it names and the section ids it names (maybe none)."""

    where: str
    path: str
    sections: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    principles: tuple[int, ...] = ()


@dataclass
class Document:
    """A cited document's section ids: numbers, heading texts and the numbered principles."""

    sections: set[str] = field(default_factory=set)
    headings: list[str] = field(default_factory=list)
    principles: set[int] = field(default_factory=set)


def parse_document(text: str) -> Document:
    """The section ids a Markdown document offers (module docstring)."""
    doc = Document()
    in_principles = in_code = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        if in_code:
            continue  # a "# comment" in a code block is no heading
        m = _HEADING.match(line)
        if m:
            title = " ".join(m.group(2).replace("`", "").split())
            doc.headings.append(title)
            num = _NUMBERED.match(title)
            if num:
                doc.sections.add(num.group(1))
            in_principles = title.lower().rstrip(".").endswith("principles")
            continue
        if in_principles:
            item = re.match(r"^(\d+)\.[ \t]", line)
            if item:
                doc.principles.add(int(item.group(1)))
    return doc


def _matches(text: str) -> Iterator[re.Match[str]]:
    """:data:`_CITE` matched where a ``.md`` occurs (scanning every position costs seconds)."""
    i = text.find(".md")
    while i >= 0:
        start = i
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_-/"):
            start -= 1
        m = _CITE.match(text, start)
        if m:
            yield m
        i = text.find(".md", i + 3)


def find_citations(text: str, where: str) -> list[Citation]:
    """Every document citation in ``text`` (``where`` names the file, for the failure message)."""
    out = []
    for m in _matches(text):
        tail = m.group("tail") or ""
        line = text.count("\n", 0, m.start()) + 1
        sections: tuple[str, ...] = ()
        names: tuple[str, ...] = ()
        principles: tuple[int, ...] = ()
        if "§" in tail:
            sections = tuple(_SECTION.findall(tail[tail.index("§") :]))
        elif '"' in tail and text[m.start() - 1 : m.start()] not in ("'", '"'):
            # (a path that is itself a string literal, ``"README.md", "exec"``, names no heading)
            names = (" ".join(tail.split('"')[1].split()),)
            after = tail.split('"')[2]
            if names[0].lower() == "principles":
                names, principles = (), tuple(int(n) for n in re.findall(r"\d+", after))
        elif re.search(r"[Pp]rinciple", tail):
            principles = tuple(int(n) for n in re.findall(r"\d+", tail))
        out.append(Citation(f"{where}:{line}", m.group("path"), sections, names, principles))
    for m in _CITE_BEFORE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out.append(Citation(f"{where}:{line}", m.group("path"), (m.group("sec"),)))
    return out


@functools.cache
def resolve(path: str, root: Path = ROOT) -> Path | None:
    """The file a cited path names: the path from the repository root, else the one file under
    ``docs/`` whose path ends with it (``behaviour.md`` or ``spec/behaviour.md``)."""
    direct = root / path
    if direct.is_file():
        return direct
    hits = [p for p in (root / "docs").rglob("*.md") if p.as_posix().endswith("/" + path)]
    return hits[0] if len(hits) == 1 else None


def check(citations: list[Citation], root: Path = ROOT) -> list[str]:
    """A list of problems, one line each; empty when every citation points somewhere."""
    problems = []
    cache: dict[Path, Document] = {}
    for c in citations:
        if c.path in EXTERNAL:
            continue
        target = resolve(c.path, root)
        if target is None:
            problems.append(f"{c.where}: {c.path} is not a file in the repository (nor under docs/)")
            continue
        doc = cache.get(target)
        if doc is None:
            doc = cache[target] = parse_document(target.read_text(encoding="utf-8"))
        rel = target.relative_to(root).as_posix()
        for s in c.sections:
            if s not in doc.sections:
                problems.append(f"{c.where}: {c.path} §{s}: {rel} has no section {s}")
        for name in c.names:
            if not any(h == name or h.startswith(name + ":") for h in doc.headings):
                problems.append(f'{c.where}: {c.path} "{name}": {rel} has no heading "{name}"')
        for n in c.principles:
            if n not in doc.principles:
                problems.append(f"{c.where}: {c.path} principle {n}: {rel} has no principle {n}")
    return problems


def scanned_files(root: Path = ROOT) -> list[Path]:
    files = [root / f for f in SCAN_FILES if (root / f).is_file()]
    for d in SCAN_DIRS:
        for p in sorted((root / d).rglob("*")):
            if p.is_file() and p.suffix in SCAN_SUFFIXES and "__pycache__" not in p.parts:
                files.append(p)
    return files


def tree_citations(root: Path = ROOT) -> list[Citation]:
    out = []
    for p in scanned_files(root):
        if p == Path(__file__).resolve():
            continue  # this file's docstring and tests cite made-up sections on purpose
        out += find_citations(p.read_text(encoding="utf-8", errors="replace"), p.relative_to(root).as_posix())
    return out


# -- the checker on made-up text ----------------------------------------------------------------

_DOC = """# Title
## 0. Conventions
## 2. Delivery
### 2.8 ACK generation
#### 2.3.1 Non-secure
## Principles
1. **One.** text
2. **Two.** text
## Link modes
### Link modes: fabric
## FEP core: one object, two drivers
```
# 9.9 a comment in a code block, not a section
```
"""


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    (tmp_path / "docs" / "spec").mkdir(parents=True)
    (tmp_path / "docs" / "spec" / "behaviour.md").write_text(_DOC, encoding="utf-8")
    (tmp_path / "docs" / "architecture.md").write_text(_DOC, encoding="utf-8")
    (tmp_path / "README.md").write_text("# r\n", encoding="utf-8")
    return tmp_path


def _problems(text: str, root: Path) -> list[str]:
    return check(find_citations(text, "x.py"), root)


@pytest.mark.parametrize(
    "text",
    [
        "(behaviour.md §2.8)",
        "spec/behaviour.md §2.3.1, §2.8 and §0",
        "``behaviour.md`` §2",
        "behaviour.md §0–§2",
        "see behaviour.md\n    # §2.8 for the rule",
        'architecture.md "Link modes: fabric"',
        'architecture.md ("FEP core", principle 2)',
        'architecture.md "Principles" 1',
        "architecture.md, Principles 1 and 2",
        "architecture.md",
        "README.md",
        "#: the rule (behaviour.md\n#: §2.8: quoted)",
        'the §2.3.1 "lab" rule (spec/behaviour.md)',
    ],
)
def test_checker_accepts_citations_that_point_somewhere(text: str, fake_root: Path) -> None:
    assert find_citations(text, "x.py"), text
    assert _problems(text, fake_root) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("behaviour.md §2.9", "has no section 2.9"),
        ("behaviour.md §9.9", "has no section 9.9"),
        ("behaviour.md §2.8, §4.1", "has no section 4.1"),
        ("behaviour.md §2–§3", "has no section 3"),
        ("behaviour.md\n    §7.7", "has no section 7.7"),
        ("§9.2 experiment 3 (behaviour.md)", "has no section 9.2"),
        ("spec/wire-format.md §1.4", "not a file"),
        ("ARCHITECTURE.md", "not a file"),
        ('architecture.md "Coming next"', 'no heading "Coming next"'),
        ('architecture.md "Link"', 'no heading "Link"'),
        ("architecture.md principle 3", "no principle 3"),
        ('open("README.md", "exec") and architecture.md "Nowhere"', 'no heading "Nowhere"'),
        ('architecture.md "Principles" 5', "no principle 5"),
    ],
)
def test_checker_reports_citations_that_point_nowhere(text: str, expected: str, fake_root: Path) -> None:
    problems = _problems(text, fake_root)
    assert len(problems) == 1 and expected in problems[0], problems


def test_a_ranged_or_listed_citation_names_every_section() -> None:
    (c,) = find_citations("wire-format.md §8.4–8.5, §9.1 and §11", "x.py")
    assert c.sections == ("8.4", "8.5", "9.1", "11")
    (c,) = find_citations("behaviour.md §2.6, 3 packets later", "x.py")
    assert c.sections == ("2.6",)


# -- the real tree ------------------------------------------------------------------------------


def test_every_citation_in_the_tree_points_at_a_section_that_exists() -> None:
    citations = tree_citations()
    # the scan finds the project's citations (hundreds, in the package, tools and tests)
    assert len(citations) > 300
    assert {c.where.split("/")[0] for c in citations} >= {"uet", "tools", "tests", "fabric"}
    problems = check(citations)
    assert not problems, "citations that point nowhere:\n" + "\n".join(problems)


def test_every_conformance_case_cites_a_section_that_exists() -> None:
    import uet.conformance.cases  # noqa: F401  (registers every case)
    from uet.conformance.case import CASES

    citations = []
    for c in CASES.values():
        found = find_citations(c.section, f"conformance case {c.id}")
        assert found and found[0].sections, f"{c.id}: section {c.section!r} is not a citation"
        citations += found
    assert len(citations) >= len(CASES) > 50
    problems = check(citations)
    assert not problems, "conformance cases citing nowhere:\n" + "\n".join(problems)


def test_every_conformance_rule_names_a_section_that_exists() -> None:
    """``uet-conformance --coverage`` counts rules per section (``b2.6-3`` is behaviour.md §2.6)."""
    from uet.conformance.rules import RULES

    citations = [c for r in RULES.values() for c in find_citations(r.section, f"conformance rule {r.id}")]
    assert len(citations) == len(RULES) > 100 and all(c.sections for c in citations)
    problems = check(citations)
    assert not problems, "conformance rules naming no section:\n" + "\n".join(problems)


def test_the_readme_points_to_the_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for link in ("docs/architecture.md", "docs/spec/"):
        assert f"]({link}" in readme, link


def test_relative_links_in_the_docs_resolve() -> None:
    missing = []
    for md in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", md.read_text(encoding="utf-8")):
            if not (md.parent / target).exists():
                missing.append(f"{md.relative_to(ROOT)} → {target}")
    assert not missing, missing
