"""junit.xml: one testcase per eligible case (SPEC section 8, JUnit)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from gate.escape import xml_text

QUALITY_OUTCOMES = {"false_pass", "false_fail"}


def render_junit(result: Mapping[str, Any]) -> str:
    policy_id = str(result.get("policy_id", ""))
    cases: list[Mapping[str, Any]] = list(result.get("cases", []))
    control_failed = {f["case_id"]: f for f in (result.get("controls") or {}).get("failures", [])}
    pair_violations: dict[str, str] = {}
    for b in result.get("blockers", []):
        if b.get("kind") == "pair_violated":
            for cid in b.get("case_ids", []):
                pair_violations[cid] = str(b.get("message", ""))
    suite = ET.Element("testsuite", name=f"ragas-gate.{policy_id}")
    failures = errors = skipped = 0
    for c in cases:
        cid = str(c["case_id"])
        tc = ET.SubElement(suite, "testcase", name=cid, classname=f"{policy_id}.{c.get('slice')}")
        role = c.get("control_role")
        if cid in control_failed:
            f = control_failed[cid]
            ET.SubElement(
                tc,
                "failure",
                type="control_failed",
                message=f"{role} control: expected {f['expected']}, got {f['got']}",
            )
            failures += 1
        elif c.get("outcome") in QUALITY_OUTCOMES and not role:
            ET.SubElement(
                tc,
                "failure",
                type=str(c["outcome"]),
                message=f"human {c.get('human_label')}, judge {c.get('verdict')}",
            ).text = str(c.get("reason") or "")
            failures += 1
        elif cid in pair_violations:
            ET.SubElement(tc, "failure", type="pair_violated", message=pair_violations[cid])
            failures += 1
        elif c.get("bucket") == "errored":
            ET.SubElement(
                tc, "error", type=str(c.get("error_kind") or "error"), message=str(c.get("error_message") or "")
            )
            errors += 1
        elif c.get("bucket") in ("unrun", "withheld"):
            why = "withheld: no reference evidence" if c.get("bucket") == "withheld" else "not judged"
            if c.get("error_kind"):
                why += f" ({c['error_kind']})"
            ET.SubElement(tc, "skipped", message=why)
            skipped += 1
        elif c.get("review"):
            ET.SubElement(tc, "skipped", message=f"review required: judge votes {c.get('labels')}")
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
