"""junit.xml: one testcase per eligible case (JUnit), written a testcase at a time."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gate.model.escape import xml_text
from gate.report.sections import human_text, people_labels

if TYPE_CHECKING:
    from gate.model.result import CaseRow, ControlFailure, Result

QUALITY_OUTCOMES = {"false_pass", "false_fail"}
INDENT = "  "


def _people(label: str | None) -> str:
    return f"; people's label: {label}" if label is not None else "; not audited by people"


@dataclass(frozen=True)
class _Said:
    """What a testcase holds besides its name: a failure, an error or a skip, and which it counts as."""

    counts_as: str  # failures | errors | skipped
    tag: str
    attrib: dict[str, str]
    text: str | None = None


class _Verdicts:
    """What junit.xml says of each case, from the result's controls, pairs and people's labels."""

    def __init__(self, result: Result) -> None:
        self.control_failed: dict[str, ControlFailure] = {f.case_id: f for f in result.controls.failures}
        self.pair_violations: dict[str, str] = {}
        for b in result.blockers:
            if b.kind == "pair_violated":
                for cid in b.case_ids:
                    self.pair_violations[cid] = b.message
        self.people = people_labels(result)

    def of(self, c: CaseRow) -> _Said | None:
        cid, role = c.case_id, c.control_role
        if cid in self.control_failed:
            f = self.control_failed[cid]
            message = f"{role} control: expected {f.expected}, got {f.got}"
            return _Said("failures", "failure", {"type": "control_failed", "message": message})
        if c.outcome in QUALITY_OUTCOMES and not role:
            message = f"human {human_text(c.human_label)}, judge {c.verdict}"
            return _Said("failures", "failure", {"type": c.outcome, "message": message}, c.reason or "")
        if c.outcome == "judged_fail" and not role:
            # A product lane's answer the judge failed: a failing test whoever confirms it (people's label beside).
            message = f"slice {c.slice}: the judge failed this answer{_people(self.people.get(cid))}"
            return _Said("failures", "failure", {"type": "judged_fail", "message": message}, c.reason or "")
        if c.outcome == "judged_pass" and self.people.get(cid) == "fail" and not role:
            message = f"slice {c.slice}: the judge passed this answer; people's label: fail"
            return _Said("failures", "failure", {"type": "people_fail", "message": message}, c.reason or "")
        if cid in self.pair_violations:
            return _Said("failures", "failure", {"type": "pair_violated", "message": self.pair_violations[cid]})
        if c.bucket == "errored":
            return _Said("errors", "error", {"type": c.error_kind or "error", "message": c.error_message or ""})
        if c.bucket in ("unrun", "withheld", "not_needed"):
            why = {
                "withheld": "withheld: no reference evidence",
                "not_needed": "not needed: the verdict was decided before it was judged (stop_when_decided)",
            }.get(c.bucket, "not judged")
            if c.error_kind:
                why += f" ({c.error_kind})"
            return _Said("skipped", "skipped", {"message": why})
        if c.review:
            return _Said("skipped", "skipped", {"message": f"review required: judge votes {c.labels}"})
        return None


def _clean(element: ET.Element) -> ET.Element:
    """Case text reaches names, messages and bodies: keep only characters XML 1.0 can hold."""
    for part in element.iter():
        if part.text:
            part.text = xml_text(part.text)
        for key, value in part.attrib.items():
            part.set(key, xml_text(value))
    return element


def junit_pieces(result: Result) -> Iterator[str]:
    """junit.xml as pieces of text, a testcase at a time: the same document as one tree indented
    and serialized whole (`ET.indent`, `ET.tostring`), without a tree of every case in memory."""
    policy_id, cases = result.policy_id, result.cases
    verdicts = _Verdicts(result)
    counts = Counter(said.counts_as for c in cases if (said := verdicts.of(c)) is not None)
    suite = ET.Element("testsuite", name=f"ragas-gate.{policy_id}")
    for key in ("tests", "failures", "errors", "skipped"):
        suite.set(key, str(len(cases) if key == "tests" else counts[key]))
    _clean(suite)
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    if not cases:
        yield ET.tostring(suite, encoding="unicode") + "\n"
        return
    suite.text = "."  # the start tag, as the whole tree's serialization begins
    yield ET.tostring(suite, encoding="unicode").removesuffix(".</testsuite>") + "\n" + INDENT
    last = len(cases) - 1
    for i, c in enumerate(cases):
        tc = ET.Element("testcase", name=c.case_id, classname=f"{policy_id}.{c.slice}")
        said = verdicts.of(c)
        if said is not None:
            ET.SubElement(tc, said.tag, said.attrib).text = said.text
        ET.indent(_clean(tc), INDENT, level=1)
        tc.tail = "\n" if i == last else "\n" + INDENT
        yield ET.tostring(tc, encoding="unicode")
    yield "</testsuite>\n"


def render_junit(result: Result) -> str:
    return "".join(junit_pieces(result))
