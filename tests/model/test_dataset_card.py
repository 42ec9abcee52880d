"""The dataset card (`dataset_card:`): every section present and filled, its hash in the lineage."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml
from fake_openai import FakeOpenAI
from suite import CARD_YAML, write_suite

from gate.cli import main
from gate.model.cases import load_dataset
from gate.model.dataset_card import CARD_SECTIONS
from gate.model.errors import PolicyError
from gate.model.policy import load_policy
from gate.model.states import Finding
from gate.validate import run_validators

ROOT = Path(__file__).resolve().parents[2]

FULL_MARKDOWN = "# Suite\n\n" + "".join(f"## {heading}\n\nSomething about {key}.\n\n" for key, heading in CARD_SECTIONS)


def findings(policy: Path) -> list[Finding]:
    loaded = load_policy(policy)
    return run_validators(loaded, load_dataset(loaded))


def card_findings(policy: Path) -> list[Finding]:
    return [f for f in findings(policy) if "dataset card" in f.message or "dataset_card" in f.message]


def with_card(tmp_path: Path, name: str, text: str) -> Path:
    policy = write_suite(tmp_path, dataset_card=name)
    (tmp_path / name).write_text(text, encoding="utf-8")
    return policy


def test_a_complete_markdown_card_validates_clean(tmp_path: Path) -> None:
    assert card_findings(with_card(tmp_path, "README.md", FULL_MARKDOWN)) == []


def test_a_missing_and_an_empty_section_are_input_contract_findings_naming_section_and_file(tmp_path: Path) -> None:
    text = FULL_MARKDOWN.replace("## Redaction\n\nSomething about redaction.\n\n", "")
    text = text.replace("Something about known_gaps.", "<!-- TODO -->")
    policy = with_card(tmp_path, "README.md", text)
    found = card_findings(policy)
    assert [(f.kind, f.state.value, f.extra["card_section"]) for f in found] == [
        ("input_contract", "quality_failed", "redaction"),
        ("input_contract", "quality_failed", "known_gaps"),
    ]
    card = str((tmp_path / "README.md").resolve())
    assert found[0].message.startswith(f"{card}: the dataset card's section 'Redaction' is missing; fix: add a")
    assert "'Known gaps' is empty" in found[1].message


def test_sub_headings_stay_in_their_section_and_fenced_headings_do_not_count(tmp_path: Path) -> None:
    text = FULL_MARKDOWN.replace(
        "Something about sampling_design.", "### By slice\n\nTen per slice.\n\n```\n## Known gaps\n```"
    ).replace("## Known gaps\n\nSomething about known_gaps.\n\n", "")
    found = card_findings(with_card(tmp_path, "README.md", text))
    assert [f.extra["card_section"] for f in found] == ["known_gaps"]  # the fenced heading is code


def test_yaml_card_keys_and_empty_values(tmp_path: Path) -> None:
    card = yaml.safe_load(CARD_YAML)
    card["collection_window"] = "  "
    del card["source_authority"]
    card["known_gaps"] = []
    found = card_findings(with_card(tmp_path, "card.yml", yaml.safe_dump(card)))
    assert [f.extra["card_section"] for f in found] == ["collection_window", "source_authority", "known_gaps"]


def test_a_policy_without_a_card_is_blocked_before_any_model_call(tmp_path: Path) -> None:
    policy = write_suite(tmp_path)
    raw = yaml.safe_load(policy.read_text())
    del raw["dataset_card"]
    policy.write_text(yaml.safe_dump(raw))
    found = card_findings(policy)
    assert len(found) == 1 and found[0].kind == "input_contract"
    assert "`dataset_card` is not set" in found[0].message and "Intended use" in found[0].message
    assert main(["validate", "--policy", str(policy)]) == 1


@pytest.mark.parametrize(
    ("written", "expected"), [("../outside.md", "outside the policy's directory"), ("nope.md", "nope.md")]
)
def test_a_card_outside_the_suite_or_absent_is_a_policy_error(tmp_path: Path, written: str, expected: str) -> None:
    (tmp_path / "outside.md").write_text(FULL_MARKDOWN)
    policy = write_suite(tmp_path / "s", dataset_card=written)
    with pytest.raises(PolicyError) as err:
        load_policy(policy)
    assert expected in str(err.value)


def test_a_card_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    policy = write_suite(tmp_path, dataset_card="cards")
    (tmp_path / "cards").mkdir()
    with pytest.raises(PolicyError):
        load_policy(policy)


def test_the_example_suite_has_a_complete_card() -> None:
    loaded = load_policy(ROOT / "policies/example/policy.yaml")
    assert loaded.card is not None and loaded.card.missing() == []


def test_the_card_hash_joins_result_and_record_lineage(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    policy = write_suite(tmp_path / "s", evaluator={"base_url": fake_openai.base_url})
    expected = hashlib.sha256(CARD_YAML.encode()).hexdigest()
    out = tmp_path / "out"
    assert main(["run", "--policy", str(policy), "--out", str(out), "--no-cache"]) == 0
    assert json.loads((out / "result.json").read_text())["lineage"]["dataset_card_sha256"] == expected
    recs = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert recs and all(r["dataset_card_sha256"] == expected for r in recs)
    # Editing the card moves the hash: `gate compare` sees the dataset description changed.
    (tmp_path / "s" / "card.yaml").write_text(CARD_YAML + "# revised\n")
    out2 = tmp_path / "out2"
    assert main(["run", "--policy", str(policy), "--out", str(out2), "--no-cache"]) == 0
    assert json.loads((out2 / "result.json").read_text())["lineage"]["dataset_card_sha256"] != expected
