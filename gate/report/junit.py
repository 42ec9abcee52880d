"""junit.xml: one testcase per eligible case (JUnit)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from gate.model.escape import xml_text
from gate.report.sections import human_text, people_labels

if TYPE_CHECKING:
    from gate.model.result import Result

QUALITY_OUTCOMES = {"false_pass", "false_fail"}


def _people(label: str | None) -> str:
    return f"; people's label: {label}" if label is not None else "; not audited by people"


def render_junit(result: Result) -> str:
    policy_id = result.policy_id
    cases = result.cases
    control_failed = {f.case_id: f for f in result.controls.failures}
    pair_violations: dict[str, str] = {}
    for b in result.blockers:
        if b.kind == "pair_violated":
            for cid in b.case_ids:
                pair_violations[cid] = b.message
    suite = ET.Element("testsuite", name=f"ragas-gate.{policy_id}")
    failures = errors = skipped = 0
    people = people_labels(result)
    for c in cases:
        cid = c.case_id
        tc = ET.SubElement(suite, "testcase", name=cid, classname=f"{policy_id}.{c.slice}")
        role = c.control_role
        if cid in control_failed:
            f = control_failed[cid]
            ET.SubElement(
                tc,
                "failure",
                type="control_failed",
                message=f"{role} control: expected {f.expected}, got {f.got}",
            )
            failures += 1
        elif c.outcome in QUALITY_OUTCOMES and not role:
            ET.SubElement(
                tc,
                "failure",
                type=c.outcome,
                message=f"human {human_text(c.human_label)}, judge {c.verdict}",
            ).text = c.reason or ""
            failures += 1
        elif c.outcome == "judged_fail" and not role:
            # A product lane's answer the judge failed: a failing test whoever confirms it (people's label beside).
            message = f"slice {c.slice}: the judge failed this answer{_people(people.get(cid))}"
            ET.SubElement(tc, "failure", type="judged_fail", message=message).text = c.reason or ""
            failures += 1
        elif c.outcome == "judged_pass" and people.get(cid) == "fail" and not role:
            message = f"slice {c.slice}: the judge passed this answer; people's label: fail"
            ET.SubElement(tc, "failure", type="people_fail", message=message).text = c.reason or ""
            failures += 1
        elif cid in pair_violations:
            ET.SubElement(tc, "failure", type="pair_violated", message=pair_violations[cid])
            failures += 1
        elif c.bucket == "errored":
            ET.SubElement(tc, "error", type=c.error_kind or "error", message=c.error_message or "")
            errors += 1
        elif c.bucket in ("unrun", "withheld", "not_needed"):
            why = {
                "withheld": "withheld: no reference evidence",
                "not_needed": "not needed: the verdict was decided before it was judged (stop_when_decided)",
            }.get(c.bucket, "not judged")
            if c.error_kind:
                why += f" ({c.error_kind})"
            ET.SubElement(tc, "skipped", message=why)
            skipped += 1
        elif c.review:
            ET.SubElement(tc, "skipped", message=f"review required: judge votes {c.labels}")
            skipped += 1
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    # Case text reaches names, messages and bodies: keep only characters XML 1.0 can hold.
    for element in suite.iter():
        if element.text:
            element.text = xml_text(element.text)
        for key, value in element.attrib.items():
            element.set(key, xml_text(value))
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
