"""Reports of a conformance run: a results table, JSON, JUnit XML and the case list."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET  # noqa: S405 - used to *write* XML, never to parse input
from collections import Counter
from collections.abc import Iterable
from typing import TextIO

from uet.conformance.case import Case, Result

__all__ = ["list_cases", "summary", "table", "to_json", "write_junit"]


def summary(results: list[Result]) -> dict[str, int]:
    c = Counter(r.outcome for r in results)
    must_failed = sum(1 for r in results if r.outcome in ("fail", "error") and r.case.level == "MUST")
    return {
        "total": len(results), "passed": c["pass"], "failed": c["fail"], "errors": c["error"],
        "skipped": c["skip"], "must_failed": must_failed,
    }  # fmt: skip


def table(results: list[Result], out: TextIO, *, verbose: bool = False) -> None:
    """A plain-text table, one line per case, then the details of each failure and a summary."""
    w = max((len(r.case.id) for r in results), default=8)
    for r in results:
        mark = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP", "error": "ERROR"}[r.outcome]
        extra = f"  ({r.reason})" if r.outcome == "skip" else ""
        print(f"{mark:5} {r.case.id:<{w}} {r.case.level:6} {r.case.section:24} {r.case.title}{extra}", file=out)
    bad = [r for r in results if r.outcome in ("fail", "error")]
    for r in bad:
        print(f"\n--- {r.case.id} [{r.case.level}] {r.case.title} ({r.case.section})", file=out)
        print(f"expected: {r.expected}", file=out)
        if r.got:
            print(f"got:      {r.got}", file=out)
        for d, h in r.exchange:
            print(f"  {d:>8}: {h}", file=out)
    s = summary(results)
    should = sum(r.outcome == "fail" and r.case.level != "MUST" for r in results)
    warn = f"; the {should} SHOULD failures are warnings (exit status 0 unless a MUST case failed)" if should else ""
    print(
        f"\n{s['passed']} passed, {s['failed']} failed ({s['must_failed']} MUST), {s['errors']} errors, "
        f"{s['skipped']} skipped, {s['total']} cases{warn}",
        file=out,
    )


def to_json(results: list[Result], target: dict) -> str:
    return json.dumps({"target": target, "summary": summary(results), "cases": [r.as_dict() for r in results]})


def write_junit(results: list[Result], path: str, target: str) -> None:
    """JUnit XML: one ``testsuite`` per area, one ``testcase`` per case (classname = area)."""
    root = ET.Element("testsuites", name="uet-conformance")
    areas: dict[str, list[Result]] = {}
    for r in results:
        areas.setdefault(r.case.area, []).append(r)
    for area, rs in areas.items():
        s = summary(rs)
        suite = ET.SubElement(
            root, "testsuite", name=area, tests=str(s["total"]), failures=str(s["failed"]), errors=str(s["errors"]),
            skipped=str(s["skipped"]), time=f"{sum(r.seconds for r in rs):.3f}",
        )  # fmt: skip
        ET.SubElement(ET.SubElement(suite, "properties"), "property", name="target", value=target)
        for r in rs:
            tc = ET.SubElement(
                suite, "testcase", classname=f"uet.conformance.{area}", name=f"{r.case.id} {r.case.title}",
                time=f"{r.seconds:.3f}",
            )  # fmt: skip
            if r.outcome in ("fail", "error"):
                body = [f"expected: {r.expected}", f"got: {r.got}"] + [f"{d}: {h}" for d, h in r.exchange]
                el = ET.SubElement(
                    tc, "failure" if r.outcome == "fail" else "error",
                    message=f"[{r.case.level}] {r.case.section}: {r.expected}", type=r.case.level,
                )  # fmt: skip
                el.text = "\n".join(body)
            elif r.outcome == "skip":
                ET.SubElement(tc, "skipped", message=r.reason)
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def list_cases(cases: Iterable[Case], out: TextIO, *, as_json: bool = False) -> None:
    cases = list(cases)
    if as_json:
        rows = [{"id": c.id, "area": c.area, "title": c.title, "section": c.section, "level": c.level} for c in cases]
        print(json.dumps(rows), file=out)
        return
    w = max((len(c.id) for c in cases), default=8)
    for c in cases:
        print(f"{c.id:<{w}} {c.level:6} {c.section:24} {c.title}", file=out)
    print(f"{len(cases)} cases", file=out)
