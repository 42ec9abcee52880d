"""A small on-disk suite for the validator and loader tests: policy, prompt, evidence, cases.

`Suite` starts from inputs that validate clean; a test changes one thing (a case field, a policy
key, the prompt) and calls `findings()` or `load()`, so each test shows which input trips what.
Case texts are distinct random words, so no two cases are near-duplicates unless a test says so.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suite import CARD_YAML, dump_yaml

from gate.model.cases import Dataset, load_dataset
from gate.model.policy import LoadedPolicy, load_policy
from gate.model.states import Finding
from gate.validate import run_validators

EVIDENCE_TEXT = "Refunds within 30 days."
# The label each control role needs (gate/validate/controls.py): a negative control is a wrong answer.
ROLE_LABELS = {"negative": "fail", "persuasion": "fail", "injection": "fail"}
PROMPT = "Judge the answer.\nQuestion: {user_input}\nReference: {reference}\nAnswer: {response}\n"
ROLES = ("positive", "negative", "boundary", "persuasion", "injection", "missing_evidence")
_VOCAB = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ro", "si", "tu", "va", "ze") for b in range(40)]


def words(seed: str, n: int = 24) -> str:
    rng = random.Random(hashlib.sha256(seed.encode()).digest())
    return " ".join(rng.choice(_VOCAB) for _ in range(n))


def make_case(case_id: str, **fields: Any) -> dict[str, Any]:
    """A valid case; keyword arguments override top-level fields (None removes one)."""
    response = f"Answer {words(case_id + '/r')}."
    out: dict[str, Any] = {
        "case_id": case_id,
        "partition": "sentinel",
        "slice": "general",
        "rubric_version": "rubric-1",
        "user_input": f"Question {words(case_id + '/q', 12)}?",
        "reference": EVIDENCE_TEXT,  # a reference is the text of the evidence it cites
        "response": response,
        "human_adjudication": {"label": "pass", "reason": "reviewed", "evidence": ["refund-window"]},
    }
    for key, value in fields.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def with_hash(case: dict[str, Any]) -> dict[str, Any]:
    """A gated case carries the hash of the response people labelled: computed as the suite is
    written (a test that edits a response still has a labelled one), unless the test set it."""
    if isinstance(case.get("response"), str) and "response_sha256" not in case:
        return {**case, "response_sha256": hashlib.sha256(case["response"].encode()).hexdigest()}
    return case


def base_policy() -> dict[str, Any]:
    return {
        "version": 1,
        "policy_id": "test-policy",
        "policy_version": "1",
        "metric": {
            "name": "contract",
            "version": "1",
            "allowed_values": ["pass", "fail"],
            "prompt_file": "prompts/judge.txt",
        },
        "evaluator": {"model": "gpt-4o-mini", "price": {"input_per_mtok": 0.15, "output_per_mtok": 0.6}},
        "cases": ["cases/cases.jsonl"],
        "evidence": "evidence/evidence.yaml",
        "rubrics": ["rubric-1"],
        "dataset_card": "card.yaml",
        "slices": {"critical": {"max_false_passes": 0}, "general": {"max_false_passes": 1}},
        "limits": {"max_total_cost": 1.0},
        "missing_evidence": "block",
        "lanes": {
            "pr": {"partitions": ["sentinel"], "controls": True},
            "release": {"partitions": ["held_out"], "controls": True},
        },
    }


def base_cases() -> list[dict[str, Any]]:
    controls = [
        make_case(
            f"ctl-{role}",
            expected_control_role=role,
            partition="dev",
            slice="critical",
            human_adjudication={
                "label": ROLE_LABELS.get(role, "pass"),
                "reason": "reviewed",
                "evidence": ["refund-window"],
            },
        )
        for role in ROLES
        if role != "missing_evidence"
    ]
    controls.append(
        make_case("ctl-missing_evidence", expected_control_role="missing_evidence", partition="dev", reference="")
    )
    return [
        *controls,
        make_case("s-1"),
        make_case(
            "s-2",
            slice="critical",
            human_adjudication={"label": "fail", "reason": "reviewed", "evidence": ["refund-window@1"]},
        ),
        make_case("h-1", partition="held_out"),
        make_case("h-2", partition="held_out", slice="critical"),
    ]


@dataclass
class Suite:
    root: Path
    policy: dict[str, Any] = field(default_factory=base_policy)
    prompt: str = PROMPT
    evidence: dict[str, Any] | None = field(
        default_factory=lambda: {"refund-window": {"version": "1", "text": EVIDENCE_TEXT}}
    )
    cases: list[dict[str, Any]] = field(default_factory=base_cases)
    # Raw text to write instead of serialising (for loader error tests), by relative path.
    raw: dict[str, str] = field(default_factory=dict)

    @property
    def policy_path(self) -> Path:
        return self.root / "policy.yaml"

    def case(self, case_id: str) -> dict[str, Any]:
        return next(c for c in self.cases if c["case_id"] == case_id)

    def write(self) -> Path:
        files: dict[str, str] = {
            "policy.yaml": dump_yaml(self.policy, sort_keys=False),
            "prompts/judge.txt": self.prompt,
            "cases/cases.jsonl": "".join(json.dumps(with_hash(c)) + "\n" for c in self.cases),
            "card.yaml": CARD_YAML,
        }
        if self.evidence is not None:
            files["evidence/evidence.yaml"] = dump_yaml(self.evidence)
        files.update(self.raw)
        for rel, text in files.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return self.policy_path

    def load(self) -> tuple[LoadedPolicy, Dataset]:
        loaded = load_policy(self.write())
        return loaded, load_dataset(loaded)

    def findings(self, lane: str | None = None) -> list[Finding]:
        loaded, dataset = self.load()
        return run_validators(loaded, dataset, lane)

    def copy(self, root: Path) -> Suite:
        return Suite(
            root,
            copy.deepcopy(self.policy),
            self.prompt,
            copy.deepcopy(self.evidence),
            copy.deepcopy(self.cases),
            dict(self.raw),
        )


def kinds(findings: list[Finding]) -> list[str]:
    return [f.kind for f in findings]
