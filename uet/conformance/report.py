"""Reports of a conformance run: a results table, JSON, JUnit XML, TAP and the case list.

A failed SHOULD case is a *warning* everywhere: ``WARN`` in the table, ``"warning": true`` in
JSON, no ``<failure>`` in JUnit (a ``<system-err>`` line says it), ``not ok ... # TODO`` in TAP
(a TAP consumer does not count it as a failure). A case that overran its time is ``timeout``: a
failure of its level (an ``<error>`` in JUnit)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET  # noqa: S405 - used to *write* XML, never to parse input
from collections import Counter
from collections.abc import Iterable
from typing import Any, TextIO

from uet.conformance.case import Case, Result

__all__ = ["list_cases", "summary", "table", "to_json", "write_junit", "write_tap"]


def summary(results: list[Result]) -> dict[str, int]:
    c = Counter(r.outcome for r in results)
    must_failed = sum(1 for r in results if r.bad and r.case.level == "MUST")
    return {
        "total": len(results), "passed": c["pass"], "failed": c["fail"], "errors": c["error"],
        "timeouts": c["timeout"], "skipped": c["skip"], "must_failed": must_failed,
        "warnings": sum(r.warning for r in results),
    }  # fmt: skip


def table(results: list[Result], out: TextIO, *, verbose: bool = False) -> None:
    """A plain-text table, one line per case, then the details of each failure and a summary."""
    w = max((len(r.case.id) for r in results), default=8)
    for r in results:
        mark = "WARN" if r.warning else {"pass": "PASS", "fail": "FAIL", "skip": "SKIP", "error": "ERROR",
                                         "timeout": "TIME"}[r.outcome]  # fmt: skip
        extra = f"  ({r.reason})" if r.outcome == "skip" else ""
        print(f"{mark:5} {r.case.id:<{w}} {r.case.level:6} {r.case.section:24} {r.case.title}{extra}", file=out)
    for r in (r for r in results if r.bad):
        what = " (warning)" if r.warning else " (overran its time)" if r.outcome == "timeout" else ""
        print(f"\n--- {r.case.id} [{r.case.level}]{what} {r.case.title} ({r.case.section})", file=out)
        print(f"expected: {r.expected}", file=out)
        if r.got:
            print(f"got:      {r.got}", file=out)
        for d, h in r.exchange:
            print(f"  {d:>8}: {h}", file=out)
    s = summary(results)
    should = s["warnings"]
    warn = f"; the {should} SHOULD failures are warnings (exit status 0 unless a MUST case failed)" if should else ""
    late = f"{s['timeouts']} overran their time, " if s["timeouts"] else ""
    print(
        f"\n{s['passed']} passed, {s['failed']} failed ({s['must_failed']} MUST), {s['errors']} errors, {late}"
        f"{s['skipped']} skipped, {s['total']} cases{warn}",
        file=out,
    )


def to_json(results: list[Result], target: dict[str, Any]) -> str:
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
            root, "testsuite", name=area, tests=str(s["total"]), failures=str(s["failed"] - s["warnings"]),
            errors=str(s["errors"] + s["timeouts"]),
            skipped=str(s["skipped"]), time=f"{sum(r.seconds for r in rs):.3f}",
        )  # fmt: skip
        ET.SubElement(ET.SubElement(suite, "properties"), "property", name="target", value=target)
        for r in rs:
            tc = ET.SubElement(
                suite, "testcase", classname=f"uet.conformance.{area}", name=f"{r.case.id} {r.case.title}",
                time=f"{r.seconds:.3f}",
            )  # fmt: skip
            body = [f"expected: {r.expected}", f"got: {r.got}"] + [f"{d}: {h}" for d, h in r.exchange]
            if r.warning:
                head = f"warning: SHOULD case failed ({r.case.section})"
                ET.SubElement(tc, "system-err").text = "\n".join([head, *body])
            elif r.bad:
                el = ET.SubElement(
                    tc, "failure" if r.outcome == "fail" else "error",
                    message=f"[{r.case.level}] {r.case.section}: {r.expected}", type=r.case.level,
                )  # fmt: skip
                el.text = "\n".join(body)
            elif r.outcome == "skip":
                ET.SubElement(tc, "skipped", message=r.reason)
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def write_tap(results: list[Result], out: TextIO) -> None:
    """TAP version 13 (testanything.org): one test point per case, in run order. A skip is
    ``ok ... # SKIP reason``; a SHOULD failure ``not ok ... # TODO`` (a warning: TAP consumers do
    not count it); each failure carries a YAML block with the level, section and expectation."""
    print("TAP version 13", file=out)
    print(f"1..{len(results)}", file=out)
    for i, r in enumerate(results, 1):
        c = r.case
        line = f"{'not ok' if r.bad else 'ok'} {i} - {c.id} {c.title}"
        if r.outcome == "skip":
            line += f" # SKIP {r.reason}"
        elif r.warning:
            line += " # TODO SHOULD case failed: a warning"
        print(line.replace("\n", " "), file=out)
        if r.bad:
            print("  ---", file=out)
            print(f"  level: {c.level}", file=out)
            print(f"  section: {json.dumps(c.section)}", file=out)
            print(f"  outcome: {r.outcome}", file=out)
            print(f"  expected: {json.dumps(r.expected)}", file=out)
            if r.got:
                print(f"  got: {json.dumps(r.got)}", file=out)
            print("  ...", file=out)


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
