"""Every deterministic validator: an input that trips it and one that does not."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from validate_factory import ROLES, Suite, kinds, make_case, with_hash, words

from gate.model.errors import UsageError
from gate.model.states import Finding, State, blocking_findings
from gate.validate import run_validators, withheld_case_ids
from gate.validate.context import MAX_FINDINGS_PER_KIND, Context
from gate.validate.leakage import text_leaks

CASES = "cases/cases.jsonl"


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return Suite(tmp_path)


def only(findings: list[Finding], kind: str) -> list[Finding]:
    return [f for f in findings if f.kind == kind]


def test_base_suite_is_clean(suite: Suite) -> None:
    assert suite.findings() == []
    assert blocking_findings([]) == []


# --- duplicate case ids ---------------------------------------------------------------------


def test_duplicate_case_id_names_both_locations(suite: Suite) -> None:
    suite.cases.append(make_case("s-1", partition="sentinel", user_input="Another question entirely?"))
    (f,) = suite.findings()
    assert (f.state, f.kind, f.case_ids) == (State.QUALITY_FAILED, "input_contract", ("s-1",))
    line_first = 1 + [c["case_id"] for c in suite.cases].index("s-1")
    assert f"{CASES}:{line_first}" in f.message
    assert f"{CASES}:{len(suite.cases)}" in f.message
    assert "fix:" in f.message


def test_unique_ids_pass(suite: Suite) -> None:
    suite.cases.append(make_case("s-3"))
    assert suite.findings() == []


def test_duplicate_ids_are_capped(suite: Suite) -> None:
    for i in range(MAX_FINDINGS_PER_KIND + 5):
        suite.cases += [make_case(f"d-{i}"), make_case(f"d-{i}", user_input=words(f"x{i}"))]
    found = suite.findings()
    assert len(found) == MAX_FINDINGS_PER_KIND + 1
    assert set(found[-1].case_ids) == {f"d-{i}" for i in range(MAX_FINDINGS_PER_KIND, MAX_FINDINGS_PER_KIND + 5)}


# --- required and placeholder fields --------------------------------------------------------


@pytest.mark.parametrize("name", ["user_input", "response", "slice", "partition", "rubric_version"])
def test_empty_required_field(suite: Suite, name: str) -> None:
    suite.case("s-1")[name] = "  "
    found = suite.findings()
    (f,) = only(found, "input_contract")
    assert f.case_ids == ("s-1",)
    assert f"`{name}`" in f.message and f"{CASES}:7" in f.message and "fix:" in f.message
    assert kinds(found) == ["input_contract"]  # not also unknown slice/partition/rubric


def test_empty_placeholder_field_names_the_placeholder(suite: Suite) -> None:
    suite.case("h-1")["response"] = ""
    (f,) = suite.findings()
    assert "{response}" in f.message and f.case_ids == ("h-1",)


def test_empty_user_input_still_required_when_not_a_placeholder(suite: Suite) -> None:
    suite.prompt = "Answer: {response}\n"
    suite.case("s-1")["user_input"] = ""
    (f,) = suite.findings()
    assert "required field `user_input`" in f.message


def test_empty_human_label(suite: Suite) -> None:
    suite.case("s-2")["human_adjudication"]["label"] = ""
    (f,) = suite.findings()
    assert "human_adjudication.label" in f.message and f.case_ids == ("s-2",)


def test_many_empty_fields_are_one_finding_with_every_case(suite: Suite) -> None:
    for c in suite.cases:
        if c["case_id"].startswith(("s-", "h-")):
            c["response"] = ""
    (f,) = suite.findings()
    assert set(f.case_ids) == {"s-1", "s-2", "h-1", "h-2"}
    assert "4 cases have" in f.message


# --- rubric versions ------------------------------------------------------------------------


def test_unknown_rubric_version(suite: Suite) -> None:
    suite.case("h-2")["rubric_version"] = "rubric-0"
    (f,) = suite.findings()
    assert f.kind == "input_contract" and f.case_ids == ("h-2",)
    assert "'rubric-0'" in f.message and "rubrics" in f.message and "fix:" in f.message


def test_accepted_second_rubric(suite: Suite) -> None:
    suite.policy["rubrics"].append("rubric-2")
    suite.case("h-2")["rubric_version"] = "rubric-2"
    assert suite.findings() == []


# --- evidence ids ---------------------------------------------------------------------------


def test_unresolved_evidence_id(suite: Suite) -> None:
    suite.case("s-1")["human_adjudication"]["evidence"] = ["refund-windw"]
    (f,) = suite.findings()
    assert f.kind == "input_contract" and "'refund-windw'" in f.message and "evidence/evidence.yaml" in f.message


def test_evidence_at_other_version(suite: Suite) -> None:
    suite.case("s-1")["human_adjudication"]["evidence"] = ["refund-window@2"]
    (f,) = suite.findings()
    assert "version '1'" in f.message and "refund-window@1" in f.message


def test_evidence_at_current_version_and_plain_id_resolve(suite: Suite) -> None:
    suite.case("s-1")["human_adjudication"]["evidence"] = ["refund-window@1", "refund-window"]
    assert suite.findings() == []


def test_evidence_without_evidence_file(suite: Suite) -> None:
    del suite.policy["evidence"]
    suite.evidence = None
    found = suite.findings()
    assert found and all("names no `evidence` file" in f.message for f in found)


# --- response hash --------------------------------------------------------------------------


def test_response_sha256_mismatch(suite: Suite) -> None:
    c = suite.case("h-1")
    c["response_sha256"] = hashlib.sha256(b"the labelled answer").hexdigest()
    (f,) = suite.findings()
    assert f.kind == "input_contract" and f.case_ids == ("h-1",) and "response_sha256" in f.message


def test_response_sha256_match(suite: Suite) -> None:
    c = suite.case("h-1")
    c["response_sha256"] = hashlib.sha256(c["response"].encode("utf-8")).hexdigest()
    assert suite.findings() == []


# --- human labels ---------------------------------------------------------------------------


def test_label_outside_allowed_values(suite: Suite) -> None:
    suite.case("s-1")["human_adjudication"]["label"] = "maybe"
    (f,) = suite.findings()
    assert f.kind == "input_contract" and "'maybe'" in f.message and "allowed_values" in f.message


def test_review_required_label_needs_allowed_value(suite: Suite) -> None:
    suite.case("s-1")["human_adjudication"]["label"] = "review_required"
    (f,) = suite.findings()
    assert "review_required" in f.message
    suite.policy["metric"]["allowed_values"].append("review_required")
    assert suite.findings() == []


def test_alias_label_points_to_canonical(suite: Suite) -> None:
    suite.policy["metric"]["label_aliases"] = {"PASS": "pass"}
    suite.case("s-1")["human_adjudication"]["label"] = "PASS"
    (f,) = suite.findings()
    assert "'pass'" in f.message


# --- slices and partitions ------------------------------------------------------------------


def test_unknown_slice(suite: Suite) -> None:
    suite.case("h-1")["slice"] = "billing"
    (f,) = suite.findings()
    assert (f.state, f.kind, f.slice, f.case_ids) == (State.QUALITY_FAILED, "unknown_slice", "billing", ("h-1",))
    assert "slices.billing" in f.message


def test_unknown_partition(suite: Suite) -> None:
    suite.case("h-1")["partition"] = "holdout"
    (f,) = suite.findings()
    assert f.kind == "input_contract" and "'holdout'" in f.message and "partitions:" in f.message


def test_declared_extra_partition(suite: Suite) -> None:
    suite.policy["partitions"] = ["holdout"]
    suite.case("h-1")["partition"] = "holdout"
    assert suite.findings() == []


# --- missing evidence (reference) -----------------------------------------------------------


def test_missing_reference_blocks(suite: Suite) -> None:
    suite.case("s-1")["reference"] = ""
    suite.case("h-2").pop("reference")
    found = suite.findings()
    assert kinds(found) == ["missing_evidence", "missing_evidence"]  # one per slice
    assert {f.slice for f in found} == {"general", "critical"}
    assert all(f.state is State.QUALITY_FAILED for f in found)
    assert blocking_findings(found) == found
    assert withheld_case_ids(found) == {"s-1", "h-2"}


def test_missing_reference_routed_to_review(suite: Suite) -> None:
    suite.policy["missing_evidence"] = "review"
    suite.case("s-1")["reference"] = None
    suite.case("s-1").pop("reference")
    (f,) = suite.findings()
    assert (f.state, f.kind, f.case_ids) == (State.REVIEW_REQUIRED, "missing_evidence", ("s-1",))
    assert blocking_findings([f]) == []


@pytest.mark.parametrize("mode", ["review", "block"])
def test_a_case_with_no_reference_and_no_evidence_ids_is_the_missing_evidence_rule_s_alone(
    suite: Suite, mode: str
) -> None:
    """The case `missing_evidence` routes is not also an input_contract defect for citing no evidence
    (nor for lacking a reason): the rule the team chose decides it."""
    suite.policy["missing_evidence"] = mode
    suite.case("s-1")["reference"] = ""
    suite.case("s-1")["human_adjudication"] = {"label": "pass", "reason": "", "evidence": []}
    (f,) = suite.findings()
    state = State.REVIEW_REQUIRED if mode == "review" else State.QUALITY_FAILED
    assert (f.state, f.kind, f.case_ids) == (state, "missing_evidence", ("s-1",))
    assert blocking_findings([f]) == ([] if mode == "review" else [f])


def test_missing_evidence_control_with_empty_reference_is_expected(suite: Suite) -> None:
    assert suite.case("ctl-missing_evidence")["reference"] == ""
    assert suite.findings() == []


def test_other_control_without_reference(suite: Suite) -> None:
    suite.case("ctl-positive")["reference"] = ""
    (f,) = suite.findings()
    assert f.kind == "input_contract" and "control role positive" in f.message


def test_missing_evidence_control_with_reference(suite: Suite) -> None:
    suite.case("ctl-missing_evidence")["reference"] = "Some text."
    (f,) = suite.findings()
    assert f.kind == "input_contract" and "under control role missing_evidence" in f.message


# --- pairs ----------------------------------------------------------------------------------


def test_pair_with_one_case(suite: Suite) -> None:
    suite.case("s-1")["pair"] = {"id": "p-1", "kind": "flip"}
    (f,) = suite.findings()
    assert (
        f.kind == "input_contract"
        and "'p-1'" in f.message
        and "s-1" in f.message
        and "which has 1 case (s-1)" in f.message
    )


def test_pair_with_three_cases(suite: Suite) -> None:
    for cid in ("s-1", "h-1", "h-2"):
        suite.case(cid)["pair"] = {"id": "p-1", "kind": "invariant"}
    (f,) = suite.findings()
    assert set(f.case_ids) == {"s-1", "h-1", "h-2"}


def test_a_pair_id_on_many_cases_names_a_few_and_counts_the_rest(suite: Suite) -> None:
    """Like every other message: a few ids and "and N more"; case_ids still lists every case."""
    ids = [f"p-{i:02d}" for i in range(12)]
    suite.cases += [make_case(cid, pair={"id": "big", "kind": "invariant"}, user_input=words(cid)) for cid in ids]
    (f,) = suite.findings()
    assert "which has 12 cases (p-00, p-01, p-02, p-03, p-04 and 7 more)" in f.message
    assert "p-05" not in f.message and f.case_ids == tuple(ids)


def test_many_cases_superseding_one_name_a_few_and_count_the_rest(suite: Suite) -> None:
    ids = [f"fix-{i:02d}" for i in range(8)]
    suite.cases += [make_case(cid, supersedes="s-1", user_input=words(cid)) for cid in ids]
    (f,) = suite.findings()
    assert "all name 's-1' in `supersedes` (fix-00, fix-01, fix-02, fix-03, fix-04 and 3 more)" in f.message
    assert f.case_ids == tuple(ids)


def test_valid_flip_and_invariant_pairs(suite: Suite) -> None:
    suite.case("s-1")["pair"] = {"id": "p-1", "kind": "flip"}
    suite.case("s-2")["pair"] = {"id": "p-1", "kind": "flip"}  # pass / fail
    suite.case("h-1")["pair"] = {"id": "p-2", "kind": "invariant"}
    suite.case("h-2")["pair"] = {"id": "p-2", "kind": "invariant"}  # pass / pass
    assert suite.findings() == []


def test_pair_labels_contradict_kind(suite: Suite) -> None:
    suite.case("h-1")["pair"] = {"id": "p-2", "kind": "flip"}
    suite.case("h-2")["pair"] = {"id": "p-2", "kind": "flip"}
    (f,) = suite.findings()
    assert "flip pair 'p-2'" in f.message
    suite.case("h-2")["pair"] = {"id": "p-2", "kind": "invariant"}
    (f,) = suite.findings()
    assert "disagree on its kind" in f.message


# --- controls -------------------------------------------------------------------------------


def test_lane_lacking_a_control_role(suite: Suite) -> None:
    suite.cases = [c for c in suite.cases if c.get("expected_control_role") != "injection"]
    found = suite.findings()
    assert kinds(found) == ["control_missing", "control_missing"]  # pr and release
    assert all("no control case for role injection;" in f.message and "lanes." in f.message for f in found)
    (f,) = suite.findings(lane="release")
    assert f.state is State.QUALITY_FAILED and "`lanes.release.controls`" in f.message


def test_lane_without_controls_needs_none(suite: Suite) -> None:
    suite.cases = [c for c in suite.cases if "expected_control_role" not in c]
    suite.policy["lanes"]["nightly"] = {"partitions": ["held_out"], "controls": False}
    assert suite.findings(lane="nightly") == []
    assert len(suite.findings(lane="pr")) == 1


def test_unknown_lane_is_a_usage_error(suite: Suite) -> None:
    loaded, dataset = suite.load()
    with pytest.raises(UsageError, match="no lane 'nope'"):
        run_validators(loaded, dataset, "nope")


def test_every_role_is_checked(suite: Suite) -> None:
    suite.cases = [c for c in suite.cases if "expected_control_role" not in c]
    (f,) = suite.findings(lane="pr")
    assert all(role in f.message for role in ROLES)


# --- partition leakage ----------------------------------------------------------------------


def test_group_id_in_two_partitions(suite: Suite) -> None:
    suite.case("s-1")["group_id"] = "g-1"
    suite.case("h-1")["group_id"] = "g-1"
    (f,) = suite.findings()
    assert (f.state, f.kind) == (State.QUALITY_FAILED, "partition_leak")
    assert set(f.case_ids) == {"s-1", "h-1"} and "sentinel: s-1" in f.message and "held_out: h-1" in f.message


def test_a_group_on_many_cases_names_a_few_per_partition(suite: Suite) -> None:
    suite.case("h-1")["group_id"] = "g-1"
    suite.cases += [make_case(f"g-{i:02d}", group_id="g-1", user_input=words(f"g{i}")) for i in range(9)]
    (f,) = only(suite.findings(), "partition_leak")
    assert "(held_out: h-1; sentinel: g-00, g-01, g-02, g-03, g-04 and 4 more)" in f.message
    assert len(f.case_ids) == 10


def test_group_id_in_one_partition(suite: Suite) -> None:
    suite.case("s-1")["group_id"] = "g-1"
    suite.case("s-2")["group_id"] = "g-1"
    assert suite.findings() == []


def _near_copy(text: str) -> str:
    """The same answer, re-cased and re-punctuated, with one word changed at the end."""
    return text.upper().replace(" ", ",  ")[:-6] + " zzz."


def test_near_duplicate_across_partitions(suite: Suite) -> None:
    src = suite.case("s-1")
    suite.case("h-1").update(user_input=src["user_input"], response=_near_copy(src["response"]))
    (f,) = suite.findings()
    assert f.kind == "partition_leak" and f.case_ids == ("s-1", "h-1")
    assert "(sentinel)" in f.message and "(held_out)" in f.message and f"{CASES}:7" in f.message
    assert f.extra["jaccard"] >= 0.8


def test_near_duplicate_within_one_partition_is_not_leakage(suite: Suite) -> None:
    src = suite.case("s-1")
    suite.case("s-2").update(user_input=src["user_input"], response=src["response"])
    suite.case("s-1")["pair"] = {"id": "p-1", "kind": "flip"}
    suite.case("s-2")["pair"] = {"id": "p-1", "kind": "flip"}
    assert suite.findings() == []


def test_dissimilar_text_across_partitions_is_not_leakage(suite: Suite) -> None:
    src = suite.case("s-1")
    # Half the answer replaced: Jaccard well below 0.8.
    half = src["response"].split()
    suite.case("h-1").update(
        user_input=src["user_input"], response=" ".join(half[: len(half) // 2]) + " " + words("other")
    )
    assert suite.findings() == []


def test_threshold_comes_from_the_policy(suite: Suite) -> None:
    src = suite.case("s-1")
    half = src["response"].split()
    suite.case("h-1").update(
        user_input=src["user_input"], response=" ".join(half[: len(half) // 2]) + " " + words("other", 8)
    )
    assert suite.findings() == []
    suite.policy["leakage"] = {"jaccard_threshold": 0.3, "shingle_words": 2}
    (f,) = suite.findings()
    assert f.kind == "partition_leak" and ">= 0.3" in f.message


def test_shared_group_is_reported_once(suite: Suite) -> None:
    src = suite.case("s-1")
    suite.case("h-1").update(user_input=src["user_input"], response=src["response"], group_id="g")
    src["group_id"] = "g"
    (f,) = suite.findings()
    assert "group_id 'g'" in f.message


def test_a_product_lanes_answers_like_labelled_ones_are_not_leakage(suite: Suite) -> None:
    """A product lane's questions and answers are gated, not used to certify the judge, and are meant
    to be like the labelled answers it was measured on: a copy of one, or a shared group_id, is no
    leak. The same copy in held_out still is."""
    suite.policy["partitions"] = ["product"]
    suite.policy["calibration"] = {"file": "calibration.json", "min_kappa": 0.6, "max_false_pass_high": 0.25}
    suite.policy["lanes"]["app"] = {"partitions": ["product"], "controls": True, "product": True}
    for limit in suite.policy["slices"].values():
        limit["max_failure_rate"] = 0.1
    src = suite.case("s-1")
    src["group_id"] = "g"
    copy = make_case("app-1", partition="product", user_input=src["user_input"], response=src["response"], group_id="g")
    suite.cases.append(copy)
    assert "partition_leak" not in kinds(suite.findings())
    suite.case("h-1").update(user_input=src["user_input"], response=src["response"])
    leaks = only(suite.findings(), "partition_leak")
    assert leaks and all("app-1" not in f.case_ids and "h-1" in f.case_ids for f in leaks)


def test_many_leaks_are_capped_but_every_case_listed(suite: Suite) -> None:
    n = MAX_FINDINGS_PER_KIND + 3
    for i in range(n):
        text = words(f"leak-{i}", 30)
        suite.cases += [
            make_case(f"a-{i}", partition="dev", response=text),
            make_case(f"b-{i}", partition="held_out", response=text, user_input=suite.case("s-1")["user_input"]),
        ]
        suite.cases[-2]["user_input"] = suite.case("s-1")["user_input"]
    found = only(suite.findings(), "partition_leak")
    assert len(found) == MAX_FINDINGS_PER_KIND + 1
    listed = {cid for f in found for cid in f.case_ids}
    assert {f"a-{i}" for i in range(n)} <= listed and {f"b-{i}" for i in range(n)} <= listed


def test_copies_of_one_case_in_two_partitions_are_counted_not_compared_pairwise(suite: Suite) -> None:
    """25 copies in dev and 25 in held_out are 625 leaking pairs: 20 shown, the rest counted, every
    case listed. The search compares the one text once (its copies' every pair cost the square of
    their number: 4,000 copies took 200 s and 5 GB), so 1,000 a side stay small."""
    src = suite.case("s-1")
    for side, partition in (("d", "dev"), ("h", "held_out")):
        suite.cases += [
            make_case(f"{side}-{i:04d}", partition=partition, user_input=src["user_input"], response=src["response"])
            for i in range(25)
        ]
    found = only(suite.findings(), "partition_leak")
    assert len(found) == MAX_FINDINGS_PER_KIND + 1
    # s-1 (sentinel) is the same text: 25 * 25 + 25 + 25 = 675 pairs across partitions
    assert found[-1].message.startswith(f"{675 - MAX_FINDINGS_PER_KIND} more near-duplicate pairs")
    listed = {cid for f in found for cid in f.case_ids}
    assert {f"d-{i:04d}" for i in range(25)} | {f"h-{i:04d}" for i in range(25)} | {"s-1"} <= listed
    big = suite.copy(suite.root.parent / "big")
    big.cases += [
        make_case(f"{side}-{i:04d}", partition=partition, user_input=src["user_input"], response=src["response"])
        for side, partition in (("D", "dev"), ("H", "held_out"))
        for i in range(1000)
    ]
    loaded, dataset = big.load()
    tracemalloc.start()
    try:
        leaks = text_leaks(Context(loaded=loaded, dataset=dataset))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16_000_000 and len(leaks) == MAX_FINDINGS_PER_KIND + 1
    assert leaks[-1].message.startswith(f"{1025 * 1025 + 1025 + 1025 - MAX_FINDINGS_PER_KIND:} more")


# --- entry point ----------------------------------------------------------------------------


def test_loader_findings_come_first_and_order_is_deterministic(suite: Suite) -> None:
    suite.case("h-1")["slice"] = "billing"
    suite.case("s-1")["rubric_version"] = "old"
    suite.raw["cases/cases.jsonl"] = "".join(json.dumps(with_hash(c)) + "\n" for c in suite.cases) + "{not json}\n"
    first = suite.findings()
    assert kinds(first) == ["input_contract", "input_contract", "unknown_slice"]
    assert "not valid JSON" in first[0].message
    assert first == suite.findings()


def test_every_message_has_a_location_and_a_fix(suite: Suite) -> None:
    suite.cases.append(make_case("s-1"))
    suite.case("h-1")["slice"] = "billing"
    suite.case("h-2")["partition"] = "x"
    suite.case("s-2")["human_adjudication"]["label"] = "meh"
    suite.case("ctl-boundary")["reference"] = ""
    suite.cases = [c for c in suite.cases if c.get("expected_control_role") != "persuasion"]
    found = suite.findings()
    assert len(found) >= 6
    for f in found:
        assert "fix:" in f.message
        assert CASES in f.message or "policy.yaml" in f.message


def test_no_network_and_no_ragas(suite: Suite) -> None:
    path = suite.write()
    code = (
        "import sys, socket\n"
        "def refuse(*a, **k): raise AssertionError('network')\n"
        "socket.socket.connect = refuse\n"
        "from gate.model.policy import load_policy\nfrom gate.model.cases import load_dataset\n"
        "from gate.validate import run_validators\n"
        f"lp = load_policy({str(path)!r}); run_validators(lp, load_dataset(lp))\n"
        "assert 'ragas' not in sys.modules and 'openai' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
