"""The review page in a real browser: `make ui-test` (Debian's chromium and chromium-driver, Selenium).

What it asserts, on the shipped product example, in a scratch directory (nothing of the checkout
is written but the screenshot):
1. a product run of policies/example-product (app v2.4, the offline rule judge, six questions a
   slice), then `gate review queue --from` that run: its audit plan, every answer it judged;
2. two reviewers, each in a browser of their own and at the same time, label the whole queue by
   keyboard alone (their name and Enter; a number key, the reason, Enter; U to undo once), each by
   the example's truth rule, but for one answer the second gets wrong; at every item the page's DOM holds neither the judge's verdict nor its
   reason from the run, nor the stratum the item was drawn from, nor the other reviewer's label;
   U once every item has its labels is refused ("your last label ... stands");
3. an adjudicator settles the disagreement on /adjudicate, by keyboard; the reviewer who labelled
   it is listed nothing there (no item, no count, no label);
4. `gate review status` reports the agreement; `gate review export` writes the labels as cases of
   the calibration partition; appended to the suite, `gate validate` passes, and the calibration
   lane run on them is read by `gate calibrate`;
5. an answer holding `<script>`, an `onerror=` attribute and `</textarea>` is shown as text: no
   element made of it, nothing run, no alert;
6. a screenshot of the page mid-label is saved (docs/review-page.png by default).
Exits 0 when every check holds, 1 naming the first that fails, 2 when the browser is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PRODUCT = "policies/example-product"
XSS = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2"></textarea><b>bold</b> & done'
WAIT = 20.0


class Failed(Exception):
    pass


def check(ok: object, what: str) -> None:
    if not ok:
        raise Failed(what)


@contextmanager
def scratch(prefix: str, keep: bool) -> Iterator[Path]:
    """A scratch directory for one run of a check, removed after it unless `keep` (then its path is printed)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield work
    finally:
        if keep:
            print(f"scratch directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def gate(*args: str, cwd: Path, expect: Sequence[int] = (0,)) -> str:
    """`gate ARGS` in the scratch directory; its stdout (its exit code must be one of `expect`)."""
    proc = subprocess.run(
        [sys.executable, "-m", "gate.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**os.environ, "RAGAS_DO_NOT_TRACK": "true"},
    )  # fmt: skip
    if proc.returncode not in expect:
        raise Failed(f"gate {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def offline_run(*args: str, cwd: Path, expect: Sequence[int] = (0, 1, 4)) -> None:
    """A run against the offline provider; any verdict (passed, quality_failed, review_required) will do."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo_offline.py"), *args], cwd=cwd, capture_output=True,
        text=True, timeout=600, env={**os.environ, "RAGAS_DO_NOT_TRACK": "true"},
    )  # fmt: skip
    if proc.returncode not in expect:
        raise Failed(f"demo_offline.py {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")


@contextmanager
def served(queue: str, ledger: str, cwd: Path, *extra: str) -> Iterator[str]:
    """`gate review serve` on a free port of 127.0.0.1; yields its address."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gate.cli", "review", "serve", queue, "--ledger", ledger, "--port", "0", *extra],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        address = None
        for _ in range(6):
            found = re.search(r"label:\s+(http://127\.0\.0\.1:\d+)/", proc.stdout.readline())
            if found:
                address = found.group(1)
                break
        if address is None:
            raise Failed(f"gate review serve printed no address: {proc.stderr.read() if proc.stderr else ''}")
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def browser(width: int = 1280, height: int = 1000) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager downloads nothing: Debian's driver is given
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 f"--window-size={width},{height}", "--force-device-scale-factor=1"):  # fmt: skip
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)


def wait(driver: Any, condition: Callable[[Any], Any], what: str) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, WAIT, poll_frequency=0.05).until(condition)
    except TimeoutException:
        raise Failed(f"timed out waiting for {what}; the page says: {text_of(driver, 'message')!r}") from None


def keys(driver: Any, *sequence: str) -> None:
    """Keys sent to whatever has the focus, as a person types them: no clicks anywhere."""
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(*sequence).perform()


def text_of(driver: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.ID, element_id)
    return str(found[0].text) if found else ""


def shown(driver: Any, element_id: str) -> bool:
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.ID, element_id)
    return bool(found) and bool(found[0].is_displayed())


def give_name(driver: Any, address: str, path: str, name: str) -> None:
    from selenium.webdriver.common.keys import Keys

    driver.get(address + path)
    wait(driver, lambda d: shown(d, "name-input"), "the name box")
    keys(driver, name, Keys.ENTER)


class Reviewer:
    """One person in a browser of their own, labelling by keyboard."""

    def __init__(self, name: str, address: str, forbidden: Sequence[str]) -> None:
        self.name = name
        self.driver = browser()
        self.forbidden = forbidden
        self.labelled = 0
        give_name(self.driver, address, "/", name)
        wait(self.driver, lambda d: shown(d, "item") or shown(d, "done"), f"{name}'s first item")

    def blind(self) -> None:
        dom = self.driver.page_source
        leaked = [word for word in self.forbidden if word in dom]
        check(not leaked, f"{self.name}'s page shows what it must not: {leaked[:3]}")

    def done(self) -> bool:
        return shown(self.driver, "done")

    def choose_and_explain(self, key: str, reason: str) -> None:
        keys(self.driver, key)
        wait(self.driver, lambda d: d.switch_to.active_element.get_attribute("id") == "reason", "the reason box")
        keys(self.driver, reason)

    def submit(self) -> None:
        from selenium.webdriver.common.keys import Keys

        before = (text_of(self.driver, "progress"), text_of(self.driver, "response"))
        keys(self.driver, Keys.ENTER)
        wait(
            self.driver,
            lambda d: (
                text_of(d, "message").startswith("Saved")
                and (shown(d, "done") or (text_of(d, "progress"), text_of(d, "response")) != before)
            ),
            f"{self.name}'s next item",
        )
        self.labelled += 1

    def label(self, key: str, reason: str) -> None:
        self.blind()
        self.choose_and_explain(key, reason)
        self.submit()

    def undo_last(self) -> None:
        keys(self.driver, "u")
        wait(self.driver, lambda d: text_of(d, "message").startswith("Undone"), f"{self.name}'s undo")
        self.labelled -= 1


def judge_words(run: Path, queue: Path) -> list[str]:
    """What the page must never show: the judge's reason and verdict words for the queue's cases,
    its model, and the strata an audit draws from."""
    cases = {json.loads(line).get("case_id") for line in queue.read_text().splitlines()[1:]}
    words = {"judged_fail", "judged_pass", "judge_label", "judge_reason"}
    for line in (run / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("case_id") in cases:
            words.add(str(record.get("evaluator_model")))
            if record.get("judge_reason"):
                words.add(str(record["judge_reason"])[:60])
    return sorted(w for w in words if w and w != "None")


KEY = {"pass": "1", "fail": "2"}  # the policy's allowed values in order: pass, fail (then abstain)
REASONS = {  # each reviewer's own words, so the page can be searched for the other's
    "rev-ann": {
        "pass": "The answer gives the figure the evidence states.",
        "fail": "The answer gives a figure the evidence does not.",
    },
    "rev-bob": {"pass": "Matches the reference.", "fail": "Contradicts the reference."},
}
BOB_SLIP = "Looks off to me."  # the one label the second reviewer gets wrong


class Truth:
    """What a careful reader decides of each answer of app v2.4: the example's truth rule (every
    answer's one required figure), looked up by the answer's text as the page shows it."""

    def __init__(self, work: Path) -> None:
        import make_product_example

        wrong = make_product_example.wrong_answers()["v2.4"]
        slices = {}
        for line in (work / PRODUCT / "cases" / "product.jsonl").read_text().splitlines():
            case = json.loads(line)
            slices[case["case_id"]] = case["slice"]
        self.of: dict[str, tuple[str, str]] = {}
        for line in (work / PRODUCT / "responses" / "app-v2.4.jsonl").read_text().splitlines():
            answer = json.loads(line)
            label = "fail" if answer["case_id"] in wrong else "pass"
            self.of[" ".join(answer["response"].split())] = (label, slices[answer["case_id"]])

    def __call__(self, shown_text: str) -> tuple[str, str]:
        return self.of[" ".join(shown_text.split())]


def label_together(ann: Reviewer, bob: Reviewer, truth: Truth, shot: Path | None) -> None:
    """Both label at once, turn about, each by the truth rule; the first undoes her first label
    once and gives it again; the second gets one answer of billing-policy-critical wrong (the
    disagreement to adjudicate). A screenshot of the first's page before her first Enter."""
    first, slipped = True, False
    while not (ann.done() and bob.done()):
        if not ann.done():
            ann.blind()
            label, _ = truth(text_of(ann.driver, "response"))
            ann.choose_and_explain(KEY[label], REASONS["rev-ann"][label])
            if shot is not None and first:
                ann.driver.save_screenshot(str(shot))
            ann.submit()
            if first:
                ann.undo_last()  # U: a retraction, and the same item again
                ann.label(KEY[label], REASONS["rev-ann"][label])
        if not bob.done():
            label, slice_name = truth(text_of(bob.driver, "response"))
            if not slipped and slice_name == "billing-policy-critical":
                slipped = True
                bob.label(KEY["fail" if label == "pass" else "pass"], BOB_SLIP)
            else:
                bob.label(KEY[label], REASONS["rev-bob"][label])
        first = False
    check(slipped, "the second reviewer met an answer of billing-policy-critical")
    keys(ann.driver, "u")  # her last label's item has its 2 labels: it stands, and the page says so
    wait(ann.driver, lambda d: "stands" in text_of(d, "message"), "undo refused once the item has its labels")
    check(ann.done(), "nothing came back to label after the refused undo")


def adjudicate(address: str, who: str, may: bool, truth: Truth) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver = browser()
    try:
        give_name(driver, address, "/adjudicate", who)
        wait(driver, lambda d: shown(d, "list") and text_of(d, "progress"), "the adjudication list")
        page = driver.page_source
        if not may:  # a reviewer who labelled the disputed item: it is not listed, nor counted, nor its labels
            check(
                "Nothing awaits adjudication" in text_of(driver, "progress"),
                f"{who} is listed no item they labelled: {text_of(driver, 'progress')!r}",
            )
            check(BOB_SLIP not in page and not any(r in page for r in REASONS["rev-ann"].values()), "no label shown")
            check("Items you labelled are never listed here" in page, f"{who} told why")
            return
        check(
            "1 awaiting adjudication" in text_of(driver, "progress"),
            f"one disagreement listed: {text_of(driver, 'progress')!r}",
        )
        check(BOB_SLIP in page and any(r in page for r in REASONS["rev-ann"].values()), "every original reason shown")
        label, _ = truth(driver.find_element(By.CSS_SELECTOR, "article .response").text)
        keys(driver, KEY[label])  # the first item has the focus
        keys(driver, "The reference settles it: the figure decides.", Keys.ENTER)
        wait(driver, lambda d: "Nothing awaits adjudication" in text_of(d, "progress"), "the adjudication recorded")
    finally:
        driver.quit()


def xss_shown_as_text(work: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    answers = work / "answers.jsonl"
    answers.write_text(
        json.dumps({"case_id": "xss-1", "slice": "billing", "user_input": "What is the refund window? </textarea>",
                    "reference": "Refunds within 14 days. <script>window.pwned=3</script>", "response": XSS}) + "\n"
    )  # fmt: skip
    gate(
        "review",
        "queue",
        "--policy",
        f"{PRODUCT}/policy.yaml",
        "--from",
        "answers.jsonl",
        "--out",
        "xss-queue.jsonl",
        cwd=work,
    )
    with served("xss-queue.jsonl", "xss-labels.jsonl", work) as address:
        driver = browser()
        try:
            give_name(driver, address, "/", "eve")
            wait(driver, lambda d: shown(d, "item"), "the hostile item")
            response = driver.find_element(By.ID, "response")
            check(response.text == XSS, f"the answer shown as its text: {response.text!r}")
            check(response.find_elements(By.XPATH, ".//*") == [], "no element made of the answer")
            check(
                driver.find_element(By.ID, "reference").find_elements(By.XPATH, ".//*") == [],
                "no element made of the evidence",
            )
            check(driver.execute_script("return window.pwned === undefined"), "no script of the answer ran")
            try:
                opened = driver.switch_to.alert
                raise Failed(f"an alert opened: {opened.text!r}")
            except NoAlertPresentException:
                pass
        finally:
            driver.quit()


PER_SLICE = 12  # the example's questions kept per slice: an audit plan two people label in a few minutes


def small_product(work: Path) -> None:
    """The example, PER_SLICE questions of each slice kept (half of them answered wrong in v2.4 where the
    slice has that many), each slice's limit one its audit can decide: a run whose audit plan (the run fixes
    it: `gate review queue` takes no --sample for a product run) holds answers of each slice."""
    import make_product_example
    import yaml

    wrong = make_product_example.wrong_answers()["v2.4"]
    shutil.copytree(ROOT / PRODUCT, work / PRODUCT)
    cases = work / PRODUCT / "cases" / "product.jsonl"
    kept: dict[tuple[str, bool], list[str]] = {}  # half of them wrong answers where the slice has them
    for line in cases.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        key = (row["slice"], row["case_id"] in wrong)
        if len(kept.setdefault(key, [])) < PER_SLICE // 2:
            kept[key].append(line)
    for (slice_name, is_wrong), lines in list(kept.items()):
        if not is_wrong:  # right answers fill what the slice's wrong ones leave
            lines += _more_right(cases, slice_name, wrong, PER_SLICE - len(kept.get((slice_name, True), [])), lines)
    cases.write_text("".join(f"{x}\n" for lines in kept.values() for x in lines), encoding="utf-8")
    ids = {json.loads(x)["case_id"] for lines in kept.values() for x in lines}
    for responses in (work / PRODUCT / "responses").glob("*.jsonl"):
        answers = [x for x in responses.read_text(encoding="utf-8").splitlines() if json.loads(x)["case_id"] in ids]
        responses.write_text("".join(f"{x}\n" for x in answers), encoding="utf-8")
    policy_path = work / PRODUCT / "policy.yaml"
    policy = yaml.safe_load(policy_path.read_text(encoding="utf-8"))
    for name, limits in policy["slices"].items():
        # Limits an audit of twelve answers can decide (the plan is sized before the run, for a product at a
        # quarter of the limit to pass, at twice to five times it to be shown exceeded): 10% for a slice half wrong
        # (a couple of the answers the judge failed show it exceeded); 50% for one nearly right, which five answers
        # all passing show under it. The plans then hold at least 7 items, as many as the Label Studio round trip
        # gives roles to.
        limits["max_failure_rate"] = 0.1 if len(kept.get((name, True), [])) > 1 else 0.5
    policy_path.write_text(yaml.safe_dump(policy, sort_keys=False), encoding="utf-8")


def _more_right(cases: Path, slice_name: str, wrong: set[str], want: int, have: list[str]) -> list[str]:
    more = []
    for line in cases.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if len(have) + len(more) >= want:
            break
        if row["slice"] == slice_name and row["case_id"] not in wrong and line not in have:
            more.append(line)
    return more


def build_run_and_queue(work: Path) -> None:
    small_product(work)
    print(
        f"1. a product run of the example, {PER_SLICE} questions a slice (app v2.4, the offline rule judge)", flush=True
    )
    offline_run("--policy", f"{PRODUCT}/policy.yaml", "--lane", "app", "--out", "gate-out", "--rule-judge",
                "--responses", f"{PRODUCT}/responses/app-v2.4.jsonl", cwd=work)  # fmt: skip
    print("2. gate review queue --from gate-out: the run's audit plan", flush=True)
    print(gate("review", "queue", "--policy", f"{PRODUCT}/policy.yaml", "--from", "gate-out",
               "--out", "queue.jsonl", cwd=work), flush=True)  # fmt: skip


def export_and_calibrate(work: Path) -> None:
    print("6. gate review status, gate review export into the calibration partition, validate, calibrate", flush=True)
    print(gate("review", "status", "queue.jsonl", "--ledger", "labels", cwd=work), flush=True)
    # The run's audit plan is lean: billing-policy-critical's is one answer, so the one disagreement people
    # settled puts its alpha at 0. Export refuses such a slice unless asked, and records the asking in its cases.
    gate("review", "export", "queue.jsonl", "--ledger", "labels", "--partition", "calibration",
         "--out", "reviewed-cases.jsonl", cwd=work, expect=(1,))  # fmt: skip
    check(not (work / "reviewed-cases.jsonl").exists(), "a refused export writes nothing")
    print(gate("review", "export", "queue.jsonl", "--ledger", "labels", "--partition", "calibration",
               "--out", "reviewed-cases.jsonl", "--accept-low-agreement", cwd=work), flush=True)  # fmt: skip
    exported = (work / "reviewed-cases.jsonl").read_text()
    check(exported.strip(), "the export wrote cases")
    rows = [json.loads(line) for line in exported.splitlines()]
    check(
        all(
            bool(r["provenance"].get("accept_low_agreement")) == (r["slice"] == "billing-policy-critical") for r in rows
        ),
        "--accept-low-agreement is recorded on the low slice's cases only",
    )
    cases = work / PRODUCT / "cases" / "calibration.jsonl"
    cases.write_text(cases.read_text() + exported)
    gate("validate", "--policy", f"{PRODUCT}/policy.yaml", cwd=work)
    offline_run("--policy", f"{PRODUCT}/policy.yaml", "--lane", "calibration", "--out", "gate-out-calibration",
                "--rule-judge", cwd=work)  # fmt: skip
    said = gate("calibrate", "--policy", f"{PRODUCT}/policy.yaml", "--records", "gate-out-calibration", "--out",
                "gate-calibration", cwd=work)  # fmt: skip
    ids = [json.loads(line)["case_id"] for line in exported.splitlines()]
    judged = (work / "gate-out-calibration" / "records.jsonl").read_text()
    check(all(f'"{i}"' in judged for i in ids), "the calibration lane judged every exported case")
    print(said, flush=True)


def run(work: Path, shot: Path | None) -> None:
    build_run_and_queue(work)
    forbidden = judge_words(work / "gate-out", work / "queue.jsonl")
    truth = Truth(work)
    (work / "labels").mkdir()  # a ledger directory: one file a reviewer
    with served("queue.jsonl", "labels", work) as address:
        print("3. two reviewers label the queue at once, by keyboard alone", flush=True)
        ann = Reviewer("rev-ann", address, [*forbidden, "rev-bob", BOB_SLIP, *REASONS["rev-bob"].values()])
        bob = Reviewer("rev-bob", address, [*forbidden, "rev-ann", *REASONS["rev-ann"].values()])
        try:
            label_together(ann, bob, truth, shot)
            items = len((work / "queue.jsonl").read_text().splitlines()) - 1
            check(
                ann.labelled == bob.labelled == items,
                f"each labelled all {items} items: {ann.labelled}, {bob.labelled}",
            )
        finally:
            ann.driver.quit()
            bob.driver.quit()
        print("4. the disagreement, settled on /adjudicate (not by someone who labelled it)", flush=True)
        adjudicate(address, "rev-bob", False, truth)
        adjudicate(address, "adj-cat", True, truth)
    print("5. an answer holding <script>, onerror= and </textarea> is shown as text", flush=True)
    xss_shown_as_text(work)
    export_and_calibrate(work)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--screenshot", type=Path, default=ROOT / "docs" / "review-page.png", help="where the screenshot goes"
    )
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (its path is printed)")
    args = ap.parse_args(argv)
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        print(
            f"review_ui: needs {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)",
            file=sys.stderr,
        )
        return 2
    started = time.monotonic()
    with scratch("gate-review-ui-", args.keep) as work:
        try:
            run(work, args.screenshot)
        except Failed as exc:
            print(f"review_ui: FAILED: {exc}", file=sys.stderr)
            return 1
    print(f"review_ui: every check holds ({time.monotonic() - started:.0f} s); screenshot {args.screenshot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
