"""The product lane, the application's own answers judged by the calibrated judge.

Policies and cases are generated in temporary directories; every verdict is driven through the real
CLI, the real ragas judge and real HTTP to the fake provider, whose oracle reads the `[[judge:...]]`
marker a response carries (so an application answer steers the judge as a real one would).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from suite import case, controls, write_suite

from gate.cli import main

PRODUCT_SLICES = {
    "critical": {"max_false_passes": 0, "max_false_fails": 1, "priority": 0, "max_failure_rate": 0.1},
    "general": {"max_false_passes": 1, "priority": 1, "max_failure_rate": 0.2},
}
CALIBRATION = {"file": "calibration.json", "min_kappa": 0.0}


def product_case(case_id: str, *, slice: str = "critical", **extra: Any) -> dict[str, Any]:
    """An application case: the question and its evidence, no response and no human label."""
    out = case(case_id, slice=slice, partition="product", **extra)
    for key in ("response", "response_sha256", "human_adjudication"):
        out.pop(key)
    return out


def product_suite(root: Path, cases: list[dict[str, Any]], **policy: Any) -> Path:
    lanes = {
        "calibration": {"partitions": ["calibration"], "controls": True},
        "app": {"partitions": ["product"], "controls": True, "product": True},
    }
    options: dict[str, Any] = {
        "partitions": ["product"],
        "slices": PRODUCT_SLICES,
        "lanes": lanes,
        "calibration": CALIBRATION,
        **policy,
    }
    return write_suite(root, [*controls(), *cases], **options)


def validate(policy: Path) -> int:
    return main(["validate", "--policy", str(policy)])


def test_a_product_lane_needs_a_calibration_file_in_the_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = product_suite(tmp_path, [product_case("p-1")], calibration=None)
    assert validate(policy) == 2
    err = capsys.readouterr().err
    assert "policy.yaml" in err and "`lanes.app.product` is true but the policy has no `calibration`" in err
    assert "fix: add `calibration:" in err


def test_a_product_lane_cannot_share_its_partition_with_a_lane_that_measures_the_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lanes = {
        "pr": {"partitions": ["product"], "controls": True},
        "app": {"partitions": ["product"], "controls": True, "product": True},
    }
    policy = product_suite(tmp_path, [product_case("p-1")], lanes=lanes)
    assert validate(policy) == 2
    err = capsys.readouterr().err
    assert "`lanes.pr.partitions` runs ['product'], which a product lane runs too" in err and "fix:" in err


@pytest.mark.parametrize("key", ["confidence", "fail_on_regression"])
def test_product_settings_on_a_lane_that_is_not_a_product_lane_are_refused(
    tmp_path: Path, key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    value: Any = 0.9 if key == "confidence" else True
    lanes = {"pr": {"partitions": ["sentinel"], "controls": True, key: value}}
    policy = write_suite(tmp_path, lanes=lanes)
    assert validate(policy) == 2
    err = capsys.readouterr().err
    assert f"`lanes.pr.{key}` applies to a product lane only; fix: add `product: true`" in err


def test_product_cases_need_no_response_and_no_label_but_every_other_case_still_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sentinel = product_case("s-1")
    sentinel["partition"] = "sentinel"
    policy = product_suite(tmp_path, [product_case("p-1"), sentinel])
    assert validate(policy) == 1
    out = capsys.readouterr().out
    assert "s-1" in out and "`response`: required key is missing; fix: add `response`" in out
    assert "`human_adjudication`: required key is missing" in out
    assert "p-1" not in out

    policy = product_suite(tmp_path, [product_case("p-1")])
    assert validate(policy) == 0, capsys.readouterr()


def read_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data
