"""A product lane's slices as people see them: the PR comment and job summary (report.md,
summary.md), the check run, the terminal and product.svg each show, per slice, the corrected
failure rate with its interval against the limit, k of n, the judge's Se and Sp with counts, the
verdict and what would decide it, with every untrusted string escaped for its format."""

from __future__ import annotations

import html
import io
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))

import pytest
from fake_github import sample
from fake_openai import FakeOpenAI
from suite import result
from test_product_lane import app_suite, fake, run_app, verdicts, write_responses

from gate.commands.outputs import _write_reports
from gate.estimate.failure_rate import failure_rate, judge_accuracy, percent, slice_verdict, span, what_would_decide
from gate.model.result import Product, Result
from gate.report.checkrun import build_check_run
from gate.report.markdown import render_report, render_summary
from gate.report.product import AXIS_END, LEFT, product_svg
from gate.report.terminal import make_console, print_outcome

HOSTILE = "<img src=x onerror=alert(1)>"
__all__ = ["fake"]  # the product lane's fixture: a fake provider and the key it takes


def _slice(k: int, n: int, judge: tuple[int, int, int, int], limit: float, base: Any = None) -> dict[str, Any]:
    """A slice as the product lane writes it, from the statistics module itself."""
    tf, fp, tp, ff = judge
    j = judge_accuracy(true_fail=tf, false_pass=fp, true_pass=tp, false_fail=ff, confidence=0.95)
    r = failure_rate(judged_fail=k, n=n, judge=j, confidence=0.95)
    verdict = slice_verdict(r, limit)
    hint = None
    if verdict == "inconclusive":
        hint = what_would_decide(judged_fail=k, n=n, judge=j, confidence=0.95, max_failure_rate=limit).text
    rates = {
        name: {"value": x.value, "low": x.low, "high": x.high, "x": x.x, "n": x.n}
        for name, x in (("se", j.se), ("sp", j.sp))
    }
    return {
        "n": n,
        "judged_fail": k,
        "estimate": r.estimate,
        "low": r.low,
        "high": r.high,
        "max_failure_rate": limit,
        "verdict": verdict,
        "failing_cases": [f"case-{i}" for i in range(k)],
        "decide_hint": hint,
        "judge": rates,
        "base": base,
    }


def product_section(sequential: bool = False) -> dict[str, Any]:
    base = {
        "both_pass": 260,
        "both_fail": 20,
        "pass_to_fail": 10,
        "fail_to_pass": 2,
        "p_value": 0.0386,
        "regressed": True,
        "turned_fail": [HOSTILE, "ship-2"],
    }
    return {
        "confidence": 0.95,
        "method": "rogan-gladen+box-clopper-pearson",
        "sequential": sequential,
        "slices": {
            "billing-policy-critical": _slice(2, 1200, (50, 10, 120, 0), 0.02),
            "shipping-general": _slice(30, 300, (50, 10, 119, 1), 0.10, base=base),
            "refunds": _slice(26, 200, (50, 10, 119, 1), 0.05),
            "returns": _slice(90, 300, (50, 10, 119, 1), 0.10),
            HOSTILE: {
                "n": 0,
                "judged_fail": 0,
                "estimate": None,
                "low": None,
                "high": None,
                "max_failure_rate": 0.05,
                "verdict": "incomplete",
                "failing_cases": [],
                "decide_hint": None,
                "judge": None,
                "base": None,
            },
        },
    }


def with_product(state: str = "review_required", **kw: Any) -> Result:
    return sample(state).with_(product=product_section(**kw))


TABLE = """\
| slice | verdict | failure rate | interval | limit | judged fail | judge Se | judge Sp |
|---|---|--:|---|--:|--:|--:|--:|
| `billing-policy-critical` | ✅ passed | 0.2% | 0%-0.92% | 2% | 2 of 1,200 | 83.3% (50/60) | 100% (120/120) |
| `shipping-general` | 👀 inconclusive | 11.1% | 1.9%-20.4% | 10% | 30 of 300 | 83.3% (50/60) | 99.2% (119/120) |
| `refunds` | 👀 inconclusive | 14.7% | 3.9%-26.9% | 5% | 26 of 200 | 83.3% (50/60) | 99.2% (119/120) |
| `returns` | ❌ exceeded | 35.4% | 22.3%-51.1% | 10% | 90 of 300 | 83.3% (50/60) | 99.2% (119/120) |
| &lt;img src=x onerror=alert(1)&gt; | ⚠️ incomplete | – | – | 5% | 0 of 0 | – (no labelled answers) | – (no labelled answers) |
"""


def test_the_pr_comment_shows_each_slice_against_its_limit() -> None:
    report = render_report(with_product())
    assert "### Product: failure rate per slice, corrected for the judge's misses (95% interval)" in report
    assert TABLE in report
    assert report.index("### Blockers") < report.index("### Product") < report.index("### Slices")
    hint = "- `refunds`: The 5% limit lies inside the interval 3.9%-26.9%: about 110 more answers"
    assert hint in report
    assert "- `shipping-general`: More answers alone cannot decide it: even an exact fail share" in report
    assert (
        "- `shipping-general` against the base: 10 pass → fail, 2 fail → pass, 260 both pass, 20 both fail; exact "
        "McNemar p = 0.0386 (a significant regression); turned fail: &lt;img src=x onerror=alert(1)&gt;, `ship-2`"
    ) in report
    assert HOSTILE not in report
    assert TABLE in render_summary(with_product())


def test_a_result_without_a_product_section_renders_as_before() -> None:
    plain = sample("review_required")
    assert "Product" not in render_report(plain)
    assert render_report(plain) == render_report(plain.with_(product=None))


def test_a_sequential_lane_says_its_bound_holds_at_every_look() -> None:
    report = render_report(with_product(sequential=True))
    assert "the answers' bound holds at every look, as the lane stops once every slice is decided" in report


def test_the_check_run_summary_carries_the_same_table() -> None:
    payload = build_check_run(with_product(), "report")
    assert TABLE in payload.summary
    assert (
        payload.summary.index("### Blockers")
        < payload.summary.index("### Product")
        < payload.summary.index("### Cases")
    )
    assert HOSTILE not in payload.summary


TERMINAL = """\
Product: failure rate per slice, corrected for the judge's misses (95% interval)
  billing-policy-critical: passed; failure rate 0.2% (interval 0%-0.92%) against a limit of 2%; 2 of 1,200 judged fail; judge Se 83.3% (50/60), Sp 100% (120/120)
  shipping-general: inconclusive; failure rate 11.1% (interval 1.9%-20.4%) against a limit of 10%; 30 of 300 judged fail; judge Se 83.3% (50/60), Sp 99.2% (119/120)
"""


def test_the_terminal_prints_one_plain_line_per_slice() -> None:
    buf = io.StringIO()
    print_outcome(with_product(), None, make_console(buf))
    text = buf.getvalue()
    assert TERMINAL in text
    assert "    against the base: 10 pass → fail, 2 fail → pass" in text
    assert "  returns: exceeded; failure rate 35.4% (interval 22.3%-51.1%) against a limit of 10%" in text
    assert f"  {HOSTILE}: incomplete; no failure rate against a limit of 5%" in text  # text, never markup
    assert "    The 5% limit lies inside the interval 3.9%-26.9%: about 110 more answers" in text
    assert text.index("Blockers") < text.index("Product:") < text.index("Slices (controls excluded)")


def _svg(product: dict[str, Any]) -> tuple[str, ET.Element]:
    text = product_svg(Product.model_validate(product))
    return text, ET.fromstring(text)


def test_the_picture_has_a_bar_a_dot_and_a_limit_per_slice() -> None:
    text, root = _svg(product_section())
    ns = "{http://www.w3.org/2000/svg}"
    bars = [e for e in root.iter(f"{ns}line") if e.get("stroke-width") == "6"]
    dots = list(root.iter(f"{ns}circle"))
    limits = [e for e in root.iter(f"{ns}line") if e.get("stroke-dasharray")]
    assert len(bars) == len(dots) == 4 and len(limits) == 5  # the incomplete slice has a limit, no interval
    words = [e.text or "" for e in root.iter(f"{ns}text")]
    assert "limit 2%" in words and "interval 0%-0.92%" in words and "no interval" in words
    assert "exceeded" in words and "90 of 300 judged fail" in words
    # each bar lies on its own row's scale: the exceeded slice's bar starts right of its limit
    returns_bar, returns_limit = bars[3], limits[3]
    assert float(returns_bar.get("x1") or 0) > float(returns_limit.get("x1") or 0)
    passed_bar, passed_limit = bars[0], limits[0]
    assert float(passed_bar.get("x2") or 0) < float(passed_limit.get("x1") or 0)
    assert HOSTILE in words  # shown as written, as text
    assert "<img" not in text  # escaped in the file itself


def test_a_wide_interval_is_drawn_whole_on_its_axis() -> None:
    """A slice of 12 answers has an interval reaching far past twice its limit: the row's axis
    stretches to hold it, so the bar ends where the interval does, not cut at the axis's end."""
    few = _slice(1, 12, (50, 10, 119, 1), 0.05)
    assert few["high"] > max(2 * 0.05, 1.2 * few["estimate"])
    _, root = _svg({**product_section(), "slices": {"few": few}})
    ns = "{http://www.w3.org/2000/svg}"
    [bar] = [e for e in root.iter(f"{ns}line") if e.get("stroke-width") == "6"]
    ticks = [e.text or "" for e in root.iter(f"{ns}text") if e.get("class") == "tick"]
    scale_max = float(ticks[1].rstrip("%")) / 100  # "0%", the axis's end, "limit 5%"
    assert scale_max >= few["high"]
    assert float(bar.get("x2") or 0) == pytest.approx(LEFT + (AXIS_END - LEFT) * few["high"] / scale_max, abs=0.1)


def test_a_judge_that_caught_none_of_its_labelled_failing_answers_says_0_of_n() -> None:
    """Se measured on 10 labelled failing answers of which the judge caught none reads "0% (0/10)",
    never "no labelled answers"."""
    product = product_section()
    product["slices"]["refunds"]["judge"]["se"] = {"value": 0.0, "low": 0.0, "high": 0.37, "x": 0, "n": 10}
    report = render_report(sample("review_required").with_(product=product))
    row = next(line for line in report.splitlines() if line.startswith("| `refunds`"))
    assert "| 0% (0/10) |" in row and "no labelled answers" not in row


def test_hostile_control_characters_never_break_the_svg() -> None:
    product = product_section()
    product["slices"] = {"bad\x00\x1b[31m\u202e": product["slices"]["refunds"]}
    text, root = _svg(product)
    assert "\x00" not in text and "\x1b" not in text and "\u202e" not in text
    assert root.tag.endswith("svg")


def test_a_product_run_writes_product_svg_next_to_report_md(tmp_path: Path) -> None:
    assert _write_reports(tmp_path, with_product()) == []
    assert (tmp_path / "report.md").exists()
    ET.parse(tmp_path / "product.svg")
    other = tmp_path / "other"
    other.mkdir()
    assert _write_reports(other, sample("passed")) == []
    assert not (other / "product.svg").exists()


def test_a_product_run_through_the_cli_shows_its_slice_everywhere(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real run: 40 answers, 15 judged failing, against the fake provider."""
    policy = app_suite(tmp_path / "suite", fake)
    out = tmp_path / "out"
    assert run_app(policy, out, write_responses(tmp_path / "r.jsonl", verdicts(40, 15))) == 1
    row = result(out)["product"]["slices"]["critical"]
    shown = f"{span(row['low'], row['high'])}"
    report = (out / "report.md").read_text(encoding="utf-8")
    assert f"| `critical` | ❌ exceeded | {percent(row['estimate'])} | {shown} | 15% | 15 of 40 |" in report
    assert "| 95% (95/100) | 99.5% (995/1,000) |" in report
    assert (out / "summary.md").read_text(encoding="utf-8").count("### Product: failure rate per slice") == 1
    words = [e.text for e in ET.parse(out / "product.svg").getroot().iter("{http://www.w3.org/2000/svg}text")]
    assert "critical" in words and "limit 15%" in words and f"interval {shown}" in words
    printed = capsys.readouterr().out
    assert (
        f"  critical: exceeded; failure rate {percent(row['estimate'])} (interval {shown}) against a limit of 15%"
        in printed
    )
    assert "product.svg" in printed  # among the files the run wrote
    # Its own next steps: the product's fix, never the metric gate's (labels, superseding cases).
    steps = " ".join(printed[printed.index("Next steps") :].split())
    assert "the fix is the product's" in steps and "supersedes" not in steps and "gate compare" not in steps


def test_an_inconclusive_product_run_says_how_people_decide_it_not_the_metric_gates_advice(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = app_suite(tmp_path / "suite", fake, n=10)
    out = tmp_path / "out"
    assert run_app(policy, out, write_responses(tmp_path / "r.jsonl", verdicts(10, 2))) == 4
    assert [b["kind"] for b in result(out)["blockers"]] == ["failure_rate_inconclusive"]
    printed = capsys.readouterr().out
    report = (out / "report.md").read_text(encoding="utf-8")
    for said in (" ".join(printed[printed.index("Next steps") :].split()), " ".join(report.split())):
        assert "supersedes" not in said and "where the judge and people disagree" not in said
        assert "gate review serve audit/queue.jsonl --ledger audit/ledger" in said
        assert "--audit audit/ledger --audit-queue audit/queue.jsonl" in said and "slice: NAME" in said
    assert f"gate review queue --policy {policy} --from {out} --out audit/queue.jsonl" in " ".join(printed.split())


def test_zero_tolerance_reads_open_on_a_slice_whose_answers_were_not_judged_and_blocks_in_red() -> None:
    """A zero-tolerance slice with nothing judged (the run stopped on a provider fault) has no failure
    confirmed yet, but nothing passed either; one people confirmed failing reads as failing, never
    a green "passed", even where its failure rate passed."""
    product = product_section()
    zero = {"max_failures": 0, "verdict": "passed", "confirmed": [], "cleared": [], "unaudited": [], "missed": []}
    product["slices"][HOSTILE]["zero_tolerance"] = zero
    product["slices"]["billing-policy-critical"]["zero_tolerance"] = {
        **zero,
        "verdict": "failure_confirmed",
        "missed": ["b-1"],
    }
    report = render_report(sample("quality_failed").with_(product=product))
    assert "zero tolerance (at most 0 confirmed): open until every answer is judged" in report
    row = next(line for line in report.splitlines() if line.startswith("| `billing-policy-critical`"))
    assert "❌ zero tolerance: failure confirmed" in row
    _, root = _svg(product)
    ns = "{http://www.w3.org/2000/svg}"
    red = [e.text for e in root.iter(f"{ns}text") if "#cf222e" in (e.get("style") or "")]
    assert "zero tolerance: failure confirmed" in red


def _audit(verdict: str, estimate: float, low: float, high: float) -> dict[str, Any]:
    stratum = {"audited": 20, "open": 0, "people_fail": 2, "people_pass": 18, "population": 30}
    return {
        "estimate": estimate, "low": low, "high": high, "verdict": verdict, "method": "audit+exact-tests",
        "judged_fail": stratum, "judged_pass": {**stratum, "people_fail": 0, "people_pass": 20, "population": 270},
        "confirmed_fail": [], "missed_fail": [], "cleared_fail": [], "transport": None, "decide_hint": None,
    }  # fmt: skip


def test_a_slice_the_audit_decided_shows_the_audits_interval_and_the_calibration_verdict_beside_it() -> None:
    """The slice's line gives the interval behind its verdict: the audit's when people's labels decided
    it, with the calibration estimate's own verdict beside it; an audit that did not decide is drawn,
    never labelled as deciding (it read "exceeded ... 1.9%-20.4%" against a 10% limit, and every
    audit's bar said "(decides)"; nothing said which line was which)."""
    product = product_section()
    shipping = product["slices"]["shipping-general"]
    shipping.update(
        decided_by="audit",
        verdict="exceeded",
        calibration_verdict="inconclusive",
        audit=_audit("exceeded", 0.13, 0.104, 0.2),
    )
    product["slices"]["refunds"]["audit"] = _audit("inconclusive", 0.1, 0.02, 0.2)
    report = render_report(sample("quality_failed").with_(product=product))
    row = next(line for line in report.splitlines() if line.startswith("| `shipping-general`"))
    assert "| ❌ exceeded | 13% | 10.4%-20% | 10% |" in row, row
    assert "the calibration estimate beside it: 11.1% (1.9%-20.4%), inconclusive" in report
    text, root = _svg(product)
    # The picture headlines what decided: the audit's estimate (the big figure, the dot) and its
    # interval as the bar; the calibration estimate's is the dotted line beside it. Where the audit
    # did not decide, the other way round. (It headlined the calibration's 11.1% where the audit decided.)
    assert ">audit (bar) 10.4%-20% (decides)</text>" in text and ">calibration (dotted) 1.9%-20.4%</text>" in text
    assert ">calibration (bar) 3.9%-26.9% (decides)</text>" in text and ">audit (dotted) 2%-20%</text>" in text
    ns = "{http://www.w3.org/2000/svg}"
    figures = [e.text for e in root.iter(f"{ns}text") if e.get("class") == "name" and (e.text or "").endswith("%")]
    assert figures == ["0.2%", "13%", "14.7%", "35.4%"]  # shipping-general: 13%, not 11.1%
    title = "Product: failure rate per slice (95% interval): people's audit where it decided, else judge-corrected"
    assert f">{html.escape(title)}</text>" in text and f"### {title}" in report.replace("\\'", "'")
    bars = [e for e in root.iter(f"{ns}line") if e.get("stroke-width") == "6"]
    dots = list(root.iter(f"{ns}circle"))
    scale = [e for e in root.iter(f"{ns}text") if e.get("class") == "tick" and e.get("text-anchor") == "end"]
    top = float((scale[1].text or "0%").rstrip("%")) / 100

    def rate_at(x: str | None) -> float:
        return (float(x or 0) - LEFT) / (AXIS_END - LEFT) * top

    assert rate_at(bars[1].get("x1")) == pytest.approx(0.104, abs=0.002)
    assert rate_at(dots[1].get("cx")) == pytest.approx(0.13, abs=0.002)
