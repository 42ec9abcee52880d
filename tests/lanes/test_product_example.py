"""The product example (policies/example-product) is what its script writes and what its README says.

scripts/make_product_example.py writes the cases and the two app versions' answers from templates
with a fixed seed; the offline rule judge (scripts/demo_offline.py --rule-judge) judges them by the
digits rule. These tests pin the committed files to the script and the README's figures to the
data: how many answers are wrong per version and slice, and how many of them the judge catches.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ROOT / "policies" / "example-product"
SLICES = ("account-security", "billing-policy-critical", "shipping-general")


@pytest.fixture(scope="module")
def scripts() -> tuple[ModuleType, ModuleType]:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import demo_offline
        import make_product_example
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return make_product_example, demo_offline


def jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_committed_files_are_what_the_script_writes(tmp_path: Path) -> None:
    """If this fails after editing the script or policies/example's evidence or prompt, run
    `python scripts/make_product_example.py` and commit policies/example-product/."""
    check = [sys.executable, str(ROOT / "scripts" / "make_product_example.py"), "--check"]
    done = subprocess.run(check, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    # --check notices a file that drifted, and says how to fix it.
    subprocess.run([*check[:2], "--out", str(tmp_path)], capture_output=True, timeout=300, check=True)
    answers = tmp_path / "responses" / "app-v2.3.jsonl"
    answers.write_text(answers.read_text(encoding="utf-8").replace("14 days", "15 days", 1), encoding="utf-8")
    drifted = subprocess.run([*check, "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert drifted.returncode == 1
    assert "app-v2.3.jsonl differs" in drifted.stderr and "make_product_example.py" in drifted.stderr


def test_the_labelled_answers_measure_a_judge_that_misses_one_failure_in_six(
    scripts: tuple[ModuleType, ModuleType],
) -> None:
    """Per slice: 60 wrong and 120 right labelled answers; the rule judge catches 50 of the wrong
    ones (the 10 that write the wrong figure in words slip through) and passes every right one."""
    _, demo_offline = scripts
    table: Counter[tuple[str, str, str]] = Counter()
    for case in jsonl(PRODUCT / "cases" / "calibration.jsonl"):
        judged, _ = demo_offline.digits_rule(case["reference"], case["response"])
        table[(str(case["slice"]), case["human_adjudication"]["label"], judged)] += 1  # type: ignore[index]
    for name in SLICES:
        assert table[(name, "fail", "fail")] == 50
        assert table[(name, "fail", "pass")] == 10
        assert table[(name, "pass", "pass")] == 120
        assert table[(name, "pass", "fail")] == 0


def test_the_two_app_versions_differ_by_the_refund_window_regression(
    scripts: tuple[ModuleType, ModuleType],
) -> None:
    """The README's table: wrong answers and answers the judge fails, per version and slice."""
    make_product_example, demo_offline = scripts
    cases = {c["case_id"]: c for c in jsonl(PRODUCT / "cases" / "product.jsonl")}
    assert Counter(str(c["slice"]) for c in cases.values()) == dict.fromkeys(SLICES, 120)
    assert all("response" not in c and "human_adjudication" not in c for c in cases.values())
    wrong = make_product_example.wrong_answers()
    expected = {
        "v2.3": {"billing-policy-critical": (1, 1), "account-security": (1, 0), "shipping-general": (2, 2)},
        "v2.4": {"billing-policy-critical": (31, 26), "account-security": (1, 0), "shipping-general": (2, 2)},
    }
    for version, by_slice in expected.items():
        lines = jsonl(PRODUCT / "responses" / f"app-{version}.jsonl")
        assert [line["case_id"] for line in lines] == list(cases)  # one answer per question, no more
        judged: Counter[str] = Counter()
        truly: Counter[str] = Counter()
        for line in lines:
            case = cases[str(line["case_id"])]
            label, _ = demo_offline.digits_rule(case["reference"], line["response"])
            judged[str(case["slice"])] += label == "fail"
            truly[str(case["slice"])] += line["case_id"] in wrong[version]
            assert line["generation"]["app_version"].startswith(f"example-support-assistant {version[1:]}")  # type: ignore[index]
        assert {s: (truly[s], judged[s]) for s in SLICES} == by_slice, version
    readme = (PRODUCT / "README.md").read_text(encoding="utf-8")
    assert "fails 26 of the 120 answers (21.7%), while 31 are\nwrong (25.8%)" in readme


def test_the_rule_judge_reads_digits_only(scripts: tuple[ModuleType, ModuleType]) -> None:
    _, demo_offline = scripts
    reference = "Refunds within 14 calendar days; arrival in 5 to 10 business days; $6.95 below $50."
    assert demo_offline.digits_rule(reference, "Within 14 days, $50 or more.")[0] == "pass"
    assert demo_offline.digits_rule(reference, "Within two weeks.")[0] == "pass"
    verdict, reason = demo_offline.digits_rule(reference, "Within 30 calendar days.")
    assert verdict == "fail" and "30" in reason
    assert demo_offline.digits_rule(reference, "Within a month.")[0] == "pass"  # the miss, on purpose
    assert demo_offline.digits_rule(reference, "It costs $6.9.")[0] == "fail"


@pytest.mark.timeout(600)
def test_make_calibrate_product_offline_measures_the_judge_the_example_ships(tmp_path: Path) -> None:
    """policies/example-product/calibration/ is what `gate calibrate` measures on the calibration
    lane's records judged by the offline rule judge: the lane ends quality_failed on the judge's
    misses (exit 1, expected), the measurement follows. If the figures changed with the example's
    judge or cases, run `make calibrate-product-offline` and commit the calibration directory."""
    from test_readme import make_in_checkout

    work, done = make_in_checkout(tmp_path, "calibrate-product-offline")
    assert "gate exited 1" in done.stdout and "Traceback" not in done.stderr
    measured = json.loads((work / "policies/example-product/calibration/calibration.json").read_text())
    shipped = json.loads((PRODUCT / "calibration" / "calibration.json").read_text())
    assert measured["config_sha256"] == shipped["config_sha256"]
    for key in ("policy_sha256", "dataset_sha256", "prompt_sha256"):  # measured on this policy and these cases
        assert measured["lineage"][key] == shipped["lineage"][key], key
    assert measured["slices"] == shipped["slices"] and measured["overall"] == shipped["overall"]
    for name in SLICES:
        figures = shipped["slices"][name]
        assert (figures["true_fail"], figures["false_pass"], figures["true_pass"], figures["false_fail"]) == (
            50,
            10,
            120,
            0,
        )


@pytest.mark.timeout(900)
def test_make_demo_product_runs_both_app_versions_offline_and_ends_with_their_verdicts(tmp_path: Path) -> None:
    """`make demo-product` on a fresh checkout, no key: v2.3 passed, v2.4 quality_failed with
    failure_rate_exceeded on billing-policy-critical, its raw judged share (26 of 120) below the
    corrected estimate, and against v2.3 the answers that turned; the figures the example's README
    states are the run's."""
    from test_readme import make_in_checkout

    work, done = make_in_checkout(tmp_path, "demo-product", timeout=1200)
    assert "Traceback" not in done.stderr
    assert "No key needed: judging policies/example-product/policy.yaml (lane app)" in done.stdout
    summary = done.stdout[done.stdout.rindex("Product gate summary") :]
    assert "app v2.3: passed (exit 0; no blockers)" in summary
    assert "app v2.4: review_required (exit 4; failure_rate_inconclusive)" in summary
    assert "app v2.4 with people's audit: quality_failed (exit 1; failure_rate_exceeded)" in summary
    assert summary.rstrip().splitlines()[-3].startswith("As expected: v2.3 may ship; v2.4 may not")

    passed = json.loads((work / "gate-out-product" / "v2.3" / "result.json").read_text())
    open_ = json.loads((work / "gate-out-product" / "v2.4" / "result.json").read_text())
    failed = json.loads((work / "gate-out-product" / "v2.4-audited" / "result.json").read_text())
    assert passed["state"] == "passed" and not passed["blockers"]
    assert {s["verdict"] for s in passed["product"]["slices"].values()} == {"passed"}
    # The calibration estimate alone leaves the critical slice open, naming the audit as the cheapest route.
    (inconclusive,) = open_["blockers"]
    assert (inconclusive["kind"], inconclusive["slice"]) == ("failure_rate_inconclusive", "billing-policy-critical")
    assert "people labelling" in inconclusive["message"] and "gate review queue" in inconclusive["message"]
    # The PR comment holds that route whole, its command included (it was cut at 600 characters).
    comment = (work / "gate-out-product" / "v2.4" / "report.md").read_text(encoding="utf-8")
    [blocker] = [line for line in comment.splitlines() if line.startswith("- **`failure_rate_inconclusive`**")]
    assert (
        "people labelling this run's audit plan, 6 items (6 of the 26 answers the judge failed and none of the 94 "
        "it passed), 12 labels at two reviewers an item (\\`gate review queue" in blocker
    )
    assert (
        "--from gate-out-product/v2.4 --out audit-queue.jsonl\\`), sized before the run to show it exceeded" in blocker
    )
    assert failed["state"] == "quality_failed"
    assert [(b["kind"], b["slice"]) for b in failed["blockers"]] == [
        ("failure_rate_exceeded", "billing-policy-critical")
    ]
    audited = failed["product"]["slices"]["billing-policy-critical"]
    assert audited["decided_by"] == "audit" and audited["audit"]["low"] > audited["max_failure_rate"] == 0.125
    assert audited["low"] <= 0.125  # the calibration estimate alone could not say
    # The plan, sized to show the slice exceeded, labels 6 of the answers the judge failed: people fail all 6.
    assert (audited["audit"]["judged_fail"]["people_fail"], audited["audit"]["judged_pass"]["audited"]) == (6, 0)
    # The zero-tolerance slice: the judge failed none of its answers, so its plan (sized before the run to pass a
    # product at 2.5%) is 34 of the 120 it passed, not a whole audit; people fail none of them, which passes its 10%
    # limit. Its one wrong answer (lockout-app-012, the figure in words the judge misses) is not among the 34: zero
    # tolerance confirms only what people read.
    security = failed["product"]["slices"]["account-security"]
    assert security["decided_by"] == "audit" and security["verdict"] == "passed"
    assert (security["audit"]["judged_pass"]["audited"], security["audit"]["judged_pass"]["people_fail"]) == (34, 0)
    assert (security["zero_tolerance"]["verdict"], security["zero_tolerance"]["missed"]) == ("passed", [])
    picture = (work / "gate-out-product" / "v2.4-audited" / "product.svg").read_text(encoding="utf-8")
    assert (
        ">audit (bar) 13.3%-100% (decides)</text>" in picture and ">calibration (dotted) 12.1%-43.8%</text>" in picture
    )
    assert ">audit (bar) 0%-8.5% (decides)</text>" in picture
    report = (work / "gate-out-product" / "v2.4-audited" / "report.md").read_text(encoding="utf-8")
    assert "| `account-security` | ✅ passed | 0% | 0%-8.5% | 10% |" in report
    screen = " ".join(done.stdout.split())
    assert "account-security: passed; failure rate 0% (interval 0%-8.5%) against a limit of 10%" in screen
    assert "[0%, 8.5%]: passed (the judge failed none; people failed 0/34 it passed); decided by audit" in summary
    # The audit decided billing-policy-critical: its line gives the audit's interval, which lies above
    # the limit as "exceeded" says, and the calibration estimate beside it says it alone was open
    # (it read "exceeded; failure rate 26% (interval 12.1%-43.8%) against a limit of 12.5%").
    assert "billing-policy-critical: exceeded; failure rate at least 13.3% (interval 13.3%-100%)" in screen, screen
    assert "the calibration estimate beside it: 26% (12.1%-43.8%), inconclusive" in screen
    assert "| `billing-policy-critical` | ❌ exceeded | at least 13.3% | 13.3%-100% |" in report
    assert "-> corrected 26% [12.1%, 43.8%] vs limit 12.5%: inconclusive" in summary.split("with people's audit")[1]
    failed = open_
    critical = failed["product"]["slices"]["billing-policy-critical"]
    assert (critical["judged_fail"], critical["n"], critical["verdict"]) == (26, 120, "inconclusive")
    assert critical["judged_fail"] / critical["n"] < critical["estimate"]  # the correction shows
    assert critical["judge"]["se"]["x"] == 50 and critical["judge"]["se"]["n"] == 60
    readme = (PRODUCT / "README.md").read_text(encoding="utf-8")
    shown = f"estimate of {100 * critical['estimate']:.1f}%, with\nan interval of {100 * critical['low']:.1f}% to "
    assert shown + f"{100 * critical['high']:.1f}% (95%)" in readme
    # v2.4 ran against v2.3's run: the 25 newly judged-fail refund windows turned pass -> fail, and
    # the lane does not set fail_on_regression, so that is shown, not a second blocker.
    base = critical["base"]
    assert (base["pass_to_fail"], base["fail_to_pass"], base["both_fail"], base["regressed"]) == (25, 0, 1, True)
    assert len(base["turned_fail"]) == 25 and all(c.startswith("refund-window-app-") for c in base["turned_fail"])
    assert "against the base: 25 turned pass -> fail, 0 fail -> pass" in summary
    for name in ("account-security", "shipping-general"):
        head, before = failed["product"]["slices"][name], passed["product"]["slices"][name]
        assert head["base"]["pass_to_fail"] == head["base"]["fail_to_pass"] == 0
        # The same answers, the same figures (each run drew its own seed, and so its own audit plan).
        assert {**head, "base": None, "audit_plan": None} == {**before, "audit_plan": None}


def test_the_precision_tables_of_the_product_gate_doc_are_the_gates_own_bounds() -> None:
    """docs/PRODUCT_GATE.md's 'How much data decides what': each cell is the upper bound
    gate/estimate/failure_rate.py gives a slice whose true failure rate is 1%, judged by a judge that
    catches 85% of wrong answers and passes 100% (first table) or 99% (second) of right ones."""
    from gate.estimate.failure_rate import failure_rate, judge_accuracy

    doc = (ROOT / "docs" / "PRODUCT_GATE.md").read_text(encoding="utf-8")
    part = doc[doc.index("## How much data decides what") :]
    tables = [t for t in part.split("\n\n") if t.startswith("| labelled answers per slice")]
    assert len(tables) == 2
    for sp, table in zip((1.0, 0.99), tables, strict=True):
        header, _, *rows = table.strip().splitlines()
        sizes = [int(c.split()[0].replace(",", "")) for c in header.strip("|").split("|")[1:]]
        assert sizes == [100, 300, 1000, 3000, 10000]
        assert len(rows) == 4
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            wrong, right = (int(x.replace(",", "")) for x in cells[0].split(" + "))
            caught, passed = round(wrong * 0.85), round(right * sp)
            judge = judge_accuracy(
                true_fail=caught,
                false_pass=wrong - caught,
                true_pass=passed,
                false_fail=right - passed,
                confidence=0.95,
            )
            for n, shown in zip(sizes, cells[1:], strict=True):
                k = round(n * (0.01 * 0.85 + 0.99 * (1 - sp)))
                rate = failure_rate(judged_fail=k, n=n, judge=judge, confidence=0.95)
                assert shown == f"{100 * rate.high:.1f}%", (sp, cells[0], n)


def test_the_audit_of_v24_is_a_ledger_of_the_review_api_on_its_queue() -> None:
    """policies/example-product/audit/ is what scripts/make_product_audit.py made through the review
    page's JSON API: every item of the queue labelled by two reviewers, each line valid for the queue."""
    from gate.review.ledger import final_labels, read_ledger
    from gate.review.queue import read_queue

    queue = read_queue(PRODUCT / "audit" / "queue.jsonl")
    lines = read_ledger(PRODUCT / "audit" / "ledger", queue)
    assert {line.reviewer for line in lines} == {"ana", "ben"} and all(line.blind for line in lines)
    finals = final_labels(lines, queue, 2)
    assert len(finals) == len(queue.items) == 64 and {f.status for f in finals.values()} == {"unanimous"}
    strata = queue.header.design["strata"]
    assert strata["billing-policy-critical"]["judged_fail"] == {"population": 26, "sample": 6}
    # The judge failed none of account-security's answers: a plan of 34 of them, not a whole audit of 120.
    assert strata["account-security"] == {
        "judged_fail": {"population": 0, "sample": 0},
        "judged_pass": {"population": 120, "sample": 34},
    }
    # Its one wrong answer (the example's README says so) is not among them.
    assert "lockout-app-012" not in {item.case_id for item in queue.items}


def test_the_demo_products_summary_fits_100_columns_and_breaks_no_word(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make demo-product`'s closing summary on a 100-column terminal: no line wider (the terminal
    would cut `vs li` / `mit 12.5%`), the same words as in a log, where each line stays one line."""
    import io

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    monkeypatch.setenv("COLUMNS", "100")
    import demo_product

    judged = {"estimate": 0.26, "low": 0.122, "high": 0.438, "max_failure_rate": 0.125, "verdict": "exceeded"}
    people = {"estimate": 0.258, "low": 0.134, "high": 0.396, "verdict": "exceeded"}
    critical = {
        **judged, "n": 120, "judged_fail": 26, "decided_by": "audit",
        "judge": {"se": {"x": 50, "n": 60}, "sp": {"x": 120, "n": 120}},
        "audit": {**people, "judged_fail": {"people_fail": 26, "audited": 26}, "judged_pass": {"people_fail": 5, "audited": 94}},
        "zero_tolerance": {"max_failures": 0, "verdict": "passed", "confirmed": [], "unaudited": []},
        "base": {"pass_to_fail": 25, "fail_to_pass": 0, "p_value": 5.96e-08},
    }  # fmt: skip
    summary = ["  app v2.4: quality_failed (exit 1; failure_rate_exceeded)"]
    summary += demo_product.slice_lines({"product": {"slices": {"billing-policy-critical": critical}}})

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen, log = Terminal(), io.StringIO()
    demo_product.print_summary(summary, screen)
    demo_product.print_summary(summary, log)
    lines = screen.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 100, lines
    assert screen.getvalue().split() == log.getvalue().split()
    assert len(log.getvalue().strip().splitlines()) == len(summary) + 1  # one line each in a log
    figures = next(i for i, line in enumerate(lines) if "judged fail" in line)
    assert lines[figures + 1].startswith(" " * 29) and not lines[figures + 1].startswith(" " * 30), lines
