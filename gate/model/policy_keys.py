"""Every policy key, for people: the rule behind it and an example, beside what the models say.

`policy_keys()` walks the pydantic models of gate/model/policy.py and gives one `KeyDoc` per key:
its path (`evaluator.retries.max_attempts`, `slices.<slice>.max_false_passes`, `checks[].name`),
whether it is required, its type and bounds, its default, an example and the rule. The type,
bounds and default come from the models, so they cannot drift; the rule and the example are
written here (`RULES`). docs/POLICY.md and `gate init`'s commented policy are made from it, and a
test fails when a key has no rule or a rule names no key.
"""

from __future__ import annotations

import datetime as dt
import json
import types
import typing
from dataclasses import dataclass

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from gate.model.cases import Case
from gate.model.policy import Policy

# What a mapping's keys are called in a path (`slices.<slice>.priority`).
MAPPING_KEYS = {"slices": "<slice>", "lanes": "<lane>", "strata": "<stratum>"}

# path -> (the rule behind the key, an example as it is written in policy.yaml)
RULES: dict[str, tuple[str, str]] = {
    "version": ("The policy format's version. Only 1 exists.", "version: 1"),
    "policy_id": (
        "Names the suite: each lane's check run is `ragas-gate / <policy_id> / <lane>`, every record carries it, and "
        "`gate decide` refuses another policy's records. Letters, digits and `. _ -`.",
        "policy_id: support-refunds",
    ),
    "policy_version": (
        "Bump it whenever anything the policy reads changes (prompt, cases, evidence, limits). Kept as "
        "written (`1.10` stays `1.10`); it is in every record's lineage.",
        'policy_version: "2026-12-01.1"',
    ),
    "metric": ("The one pass/fail criterion the judge answers for every case.", "metric: {...}"),
    "metric.name": ("The criterion's name, shown in reports and records.", "name: support_answer_contract"),
    "metric.version": (
        "The criterion's version: bump it when the meaning of pass changes. Part of the judge's configuration, "
        "so a bump needs a new calibration.",
        'version: "1"',
    ),
    "metric.allowed_values": (
        "The labels the judge may answer: `pass` and `fail`, optionally `review_required` (an abstention a "
        "person resolves). Any other reply is an evaluator error, never a verdict.",
        "allowed_values: [pass, fail]",
    ),
    "metric.prompt_file": (
        "The judge prompt, relative to the policy. Give exactly one of `prompt_file` or `prompt`. Placeholders: "
        "`{user_input}`, `{reference}`, `{response}` (required); the human label can never be one.",
        "prompt_file: prompts/criterion.txt",
    ),
    "metric.prompt": ("The judge prompt inline, instead of `prompt_file`.", "prompt: 'Does {response} ...'"),
    "metric.label_aliases": (
        "Replies mapped to an allowed value before checking (`PASS: pass`). Empty means only the exact labels "
        "count. Part of the judge's configuration.",
        "label_aliases: {}",
    ),
    "evaluator": ("The judge model and how it is called.", "evaluator: {...}"),
    "evaluator.model": (
        "The provider's model name, sent as written. Providers shut models down on dates they announce: each run "
        "asks the provider when (`evaluator.shutdown_date`), and `gate calibrate --candidate-model` moves the judge "
        "to a successor with evidence (docs/PROVIDERS.md).",
        "model: gpt-4o-mini",
    ),
    "evaluator.base_url": (
        "An OpenAI-compatible endpoint. Absent: `OPENAI_BASE_URL` if set, else the provider default. Its host is "
        "part of the judge's configuration.",
        "base_url: http://localhost:8000/v1",
    ),
    "evaluator.api_key_env": (
        "The NAME of the environment variable that holds the key, never the key itself.",
        "api_key_env: OPENAI_API_KEY",
    ),
    "evaluator.temperature": ("Sent on every request as written.", "temperature: 0"),
    "evaluator.seed": ("Sent on every request when set.", "seed: 7"),
    "evaluator.max_output_tokens": (
        "The reply's token cap, sent on every request; it is also what the budget reserves for each reply.",
        "max_output_tokens: 256",
    ),
    "evaluator.top_p": (
        "Nucleus sampling, sent on every request as written (ragas would send 0.1 unasked). Part of the judge's "
        "configuration: another value is another judge.",
        "top_p: 0.1",
    ),
    "evaluator.response_format": (
        "How the verdict is asked for. `json_object`: JSON mode, the verdict's schema in a system message "
        "(every OpenAI-compatible server). `json_schema`: the schema is sent as `response_format` and the "
        "provider constrains decoding to it (OpenAI, Azure, vLLM, llama.cpp); a small local model that copies "
        "the schema back in JSON mode cannot under `json_schema`. The schema names `value` and `reason` and no "
        "other key (`additionalProperties: false`), so the model cannot add keys until the token limit cuts it; "
        "a reply with an extra key from a server that does not enforce the schema still counts. Part of the "
        "judge's configuration.",
        "response_format: json_object",
    ),
    "evaluator.timeout_s": (
        "Seconds for one HTTP attempt, the wait in a server's queue included: against a local server keep "
        "`max_concurrency` at or under its slots, or raise this.",
        "timeout_s: 60",
    ),
    "evaluator.max_concurrency": ("Judgments in flight at once (the pacer may send fewer).", "max_concurrency: 8"),
    "evaluator.retries": ("Retries of one judgment after a transient error.", "retries: {...}"),
    "evaluator.retries.max_attempts": (
        "Attempts per judgment, the first included. Every attempt is billed.",
        "max_attempts: 3",
    ),
    "evaluator.retries.retry_on": (
        "The error kinds retried: `rate_limit`, `server_error`, `timeout`, `connection`.",
        "retry_on: [rate_limit, server_error, timeout, connection]",
    ),
    "evaluator.rate_limit": (
        "The provider's limits, for one that sends no `x-ratelimit-*` headers; the pacer keeps under them.",
        "rate_limit: {...}",
    ),
    "evaluator.rate_limit.requests_per_minute": ("Requests a minute.", "requests_per_minute: 500"),
    "evaluator.rate_limit.tokens_per_minute": ("Tokens a minute.", "tokens_per_minute: 200000"),
    "evaluator.repeats": (
        "Judgments per case; odd, so a majority exists. More than 1 shows an unstable judge (`unstable_verdict`).",
        "repeats: 1",
    ),
    "evaluator.context_tokens": (
        "The model's context window in tokens. `gate validate` names a case whose rendered prompt (about 4 bytes "
        "a token) would not fit.",
        "context_tokens: 128000",
    ),
    "evaluator.price": (
        "The model's reviewed prices. Without them the policy is refused: the gate never reports $0 for an "
        "unknown price.",
        "price: {...}",
    ),
    "evaluator.shutdown_date": (
        "The day the provider shuts the model down, for a provider that does not publish it: each run asks the "
        "provider (`GET {base_url}/models/{model}`, OpenAI's `shutdown_date`) and the provider's date wins when "
        "both exist (a disagreement is a note). On and after it the run sends nothing and is "
        "`evaluation_incomplete`. Dates change: check the provider's deprecations page (docs/PROVIDERS.md).",
        "shutdown_date: 2027-01-14",
    ),
    "evaluator.retirement_notice_days": (
        "From this many days before the shutdown date, the run's header, report.md and the job summary say how "
        "many days are left.",
        "retirement_notice_days: 60",
    ),
    "evaluator.retirement_blocks_within_days": (
        "From this many days before the shutdown date, a release lane (`lanes.<lane>.release`) is "
        "`judge_retiring` (review_required) until the judge moves to a successor: `gate calibrate "
        "--candidate-model` (docs/PROVIDERS.md). 0 never blocks.",
        "retirement_blocks_within_days: 14",
    ),
    "evaluator.price.input_per_mtok": ("Price of a million input tokens.", "input_per_mtok: 0.15"),
    "evaluator.price.output_per_mtok": ("Price of a million output tokens.", "output_per_mtok: 0.60"),
    "evaluator.price.currency": ("A three-letter currency code; the cost boundary is in it.", "currency: USD"),
    "evaluator.price.batch": ("The Batch API prices, needed by `gate run --batch` only.", "batch: {...}"),
    "evaluator.price.batch.input_per_mtok": ("Batch price of a million input tokens.", "input_per_mtok: 0.075"),
    "evaluator.price.batch.output_per_mtok": ("Batch price of a million output tokens.", "output_per_mtok: 0.30"),
    "cases": (
        "The case files (JSON Lines, see docs/CASES.md), relative to the policy.",
        "cases: [cases/support.jsonl]",
    ),
    "evidence": (
        "The evidence file (YAML, see docs/EVIDENCE.md): the texts cases cite by id.",
        "evidence: evidence/support.yaml",
    ),
    "rubrics": (
        "The rubric versions a case may carry (`rubric_version`); any other is an `input_contract` finding.",
        "rubrics: [support-answer-reviewed-v1]",
    ),
    "slices": (
        "The risk slices and their limits. A case in a slice not listed here blocks (`unknown_slice`).",
        "slices: {billing-critical: {...}}",
    ),
    "slices.<slice>.max_false_passes": (
        "False passes allowed in the slice (the judge passed what people failed): N allows N, N+1 blocks "
        "(`false_pass_limit`).",
        "max_false_passes: 0",
    ),
    "slices.<slice>.max_false_fails": (
        "False fails allowed (the judge failed what people passed). Absent: no limit.",
        "max_false_fails: 2",
    ),
    "slices.<slice>.max_failure_rate": (
        "A product lane only: the most the slice's failure rate may be, corrected for the judge's measured miss "
        "rates (0.02 is 2%); see docs/PRODUCT_GATE.md.",
        "max_failure_rate: 0.02",
    ),
    "slices.<slice>.max_failures": (
        "A product lane only, zero tolerance: every answer the judge fails in the slice must be labelled by people "
        "(`audit_required` until it is), and more than N they confirm failing (those it failed, and those it "
        "passed that people failed in the audit) is `failure_confirmed`; an answer the judge gave no verdict "
        "(an error the lane tolerates, a tie) keeps it open; see docs/PRODUCT_GATE.md.",
        "max_failures: 0",
    ),
    "slices.<slice>.require_audit": (
        "A product lane only: the slice cannot pass without people's labels on the run's audit plan "
        "(`audit_required` until a final label is on a planned answer of each stratum); the lane's "
        "`require_audit` does it for every slice; see docs/PRODUCT_GATE.md.",
        "require_audit: true",
    ),
    "slices.<slice>.audit_sized_at": (
        "A product lane only: the failure rate the audit plan is sized to pass with 80% power (0.01 is 1%), under "
        "`max_failure_rate`; absent, a quarter of it. Nearer the limit the plan grows fast: `gate validate --lane` "
        "prints its size before the run. Fixed when the run starts, like the limit; see docs/PRODUCT_GATE.md.",
        "audit_sized_at: 0.01",
    ),
    "slices.<slice>.priority": ("Lower runs first when the budget is tight.", "priority: 0"),
    "limits": ("Run-wide limits.", "limits: {...}"),
    "limits.max_evaluator_errors": (
        "Evaluator errors tolerated before the run is `evaluation_incomplete`.",
        "max_evaluator_errors: 0",
    ),
    "limits.max_total_cost": (
        "The hard cost boundary, in `evaluator.price.currency`: every attempt is reserved against it before it "
        "is sent; `--max-cost` may only lower it.",
        "max_total_cost: 0.50",
    ),
    "missing_evidence": (
        "A non-control case with an empty reference is never judged: `block` fails the gate, `review` sends it "
        "to a person (`review_required`). This rule alone decides such a case: it is not also an input-contract "
        "defect for citing no evidence or giving no reason (`gated_cases`).",
        "missing_evidence: block",
    ),
    "lanes": ("Which partitions each lane runs (`gate run --lane NAME`).", "lanes: {pr: {...}}"),
    "lanes.<lane>.partitions": (
        "The partitions the lane judges: `dev`, `calibration`, `held_out`, `sentinel`, or one declared under "
        "`partitions`.",
        "partitions: [sentinel]",
    ),
    "lanes.<lane>.controls": (
        "Run the six control roles first, whatever their partition; a missing role is `control_missing`.",
        "controls: true",
    ),
    "lanes.<lane>.require_calibration": (
        "The lane passes only with the judge `calibration.file` measured (`judge_uncalibrated` otherwise).",
        "require_calibration: true",
    ),
    "lanes.<lane>.stop_when_decided": (
        "Stop paying once `quality_failed` is certain (a product lane: once every slice is decided, a "
        "zero-tolerance slice with all its answers judged; people's audit there can hold a slice back, never "
        "pass it). Refused on "
        "a lane that runs `held_out` or `calibration`, which must be measured whole, and beside "
        "`fail_on_regression`, which needs every answer compared with the base.",
        "stop_when_decided: true",
    ),
    "lanes.<lane>.product": (
        "A product lane: judges the application's own answers (`--responses`) and gates each slice on its "
        "failure rate (docs/PRODUCT_GATE.md). Implies `require_calibration`; its partitions are its own.",
        "product: true",
    ),
    "lanes.<lane>.confidence": (
        "A product lane only: the confidence of the failure-rate interval a slice's verdict rests on.",
        "confidence: 0.95",
    ),
    "lanes.<lane>.audit": (
        "A product lane only: the ledger (a file, or a directory of one file per reviewer) of people's labels on "
        "this run's audit queue, relative to the policy; `--audit` overrides it. With usable labels the audit "
        "decides each slice; a ledger with no label on this run's answers (a new release), or none yet, is a note. "
        "See docs/PRODUCT_GATE.md.",
        "audit: audit/ledger",
    ),
    "lanes.<lane>.release": (
        "The lane gates a release: within `evaluator.retirement_blocks_within_days` of the judge's shutdown date it "
        "is `judge_retiring`. Absent: a lane that runs `held_out` cases (it certifies the judge) or a product lane "
        "is one; any other lane only says how many days are left.",
        "release: true",
    ),
    "lanes.<lane>.require_audit": (
        "A product lane only: no slice passes without people's labels on the run's audit plan: where no label "
        "of the plan decides a slice (no ledger, a ledger of another release, labels on one stratum only) it is "
        "`audit_required` (`review_required`), whatever the calibration estimate says. For a release lane, so "
        "that a judge that errs more on this run's answers than on calibration's cannot pass it alone; see "
        "docs/PRODUCT_GATE.md.",
        "require_audit: true",
    ),
    "lanes.<lane>.fail_on_regression": (
        "A product lane only: block when a slice fails more often than on the base run. Refused beside "
        "`stop_when_decided`.",
        "fail_on_regression: true",
    ),
    "overrides": ("Reviewed, time-limited waivers of quality blockers (docs/OVERRIDES.md).", "overrides: []"),
    "overrides[].id": ("A unique id for the override.", "id: ovr-2026-12-shipping"),
    "overrides[].case_ids": ("The cases it waives; each must exist. Either this or `slice`.", "case_ids: [ship-003]"),
    "overrides[].slice": (
        "A product lane's slice whose open verdict a person decides: waives `failure_rate_inconclusive`, "
        "`judge_unfit` or `audit_required` for the slice, never `failure_rate_exceeded`, `failure_confirmed` or "
        "`regressed`. Either this or `case_ids`.",
        "slice: billing-critical",
    ),
    "overrides[].blocker": (
        "The blocker kind it waives: `false_pass_limit`, `false_fail_limit`, `pair_violated`, `label_conflict`, "
        "`abstention`, `unstable_verdict`, or `missing_evidence` when routed to review.",
        "blocker: false_fail_limit",
    ),
    "overrides[].approver": ("Who approved it.", 'approver: "@release-eng"'),
    "overrides[].reason": ("Why the blocker is accepted.", "reason: the carrier changed its cutoff"),
    "overrides[].evidence": ("Where the decision is recorded.", "evidence: https://example.com/ticket/12"),
    "overrides[].expires": (
        "The last day it waives (YYYY-MM-DD); after it, the override is itself a blocker.",
        "expires: 2026-12-31",
    ),
    "overrides[].follow_up": ("What will remove the need for it.", "follow_up: relabel ship-003"),
    "partitions": (
        "Partitions beyond the standard four (`dev`, `calibration`, `held_out`, `sentinel`).",
        "partitions: [canary]",
    ),
    "leakage": ("How near-duplicates across partitions are found (`partition_leak`).", "leakage: {...}"),
    "leakage.jaccard_threshold": (
        "Jaccard similarity of `user_input` + `response` word shingles at which two cases are duplicates.",
        "jaccard_threshold: 0.8",
    ),
    "leakage.shingle_words": ("Words per shingle.", "shingle_words: 3"),
    "cache_dir": (
        "A local store of judgments by their full configuration; absent: no cache.",
        "cache_dir: .gate-cache",
    ),
    "checks": (
        "Deterministic checks: functions in the repository run on every eligible case before any model call. "
        "Loading them runs that code.",
        "checks: [{...}]",
    ),
    "checks[].name": ("The check's name in reports.", "name: cites_evidence"),
    "checks[].file": ("The Python file, relative to the policy, inside the repository.", "file: checks.py"),
    "checks[].function": ("The function's name in that file.", "function: cites_evidence"),
    "checks[].allowed_values": (
        "The values it may return; anything else (or an exception) is `check_error`, never a pass.",
        "allowed_values: [pass, fail]",
    ),
    "checks[].gate": (
        "`true`: a `fail` on a case people did not fail blocks (`check_failed`); `false`: reported only.",
        "gate: true",
    ),
    "trend": ("A graded 1-5 rubric judged beside the verdict; reported, never a gate.", "trend: {...}"),
    "trend.name": ("The rubric's name.", "name: helpfulness"),
    "trend.prompt_file": ("Its prompt, relative to the policy (or `prompt`).", "prompt_file: prompts/trend.txt"),
    "trend.prompt": ("Its prompt inline.", "prompt: 'Rate {response} ...'"),
    "trend.bands": ("What a response in each band 1-5 is; all five, none empty.", "bands: {1: useless, ...}"),
    "drift": ("The scheduled lane over unlabelled production traces.", "drift: {...}"),
    "drift.traces": ("The traces file (JSON Lines), relative to the policy.", "traces: traces/prod.jsonl"),
    "drift.sample": ("Traces drawn per run.", "sample: 200"),
    "drift.seed": ("The draw's seed: the same traces and seed draw the same sample.", "seed: 0"),
    "drift.prompt_file": (
        "A reference-free prompt; absent: the metric's (if it needs no reference).",
        "prompt_file: prompts/drift.txt",
    ),
    "drift.prompt": ("That prompt inline.", "prompt: '...'"),
    "drift.default_slice": ("The slice of a trace that names none.", "default_slice: production"),
    "certification": (
        "The held-out ledger: a held-out case certifies one configuration, once (docs/CERTIFICATION.md).",
        "certification: {...}",
    ),
    "certification.ledger": ("The ledger file (JSON Lines), relative to the policy.", "ledger: certification.jsonl"),
    "calibration": (
        "The calibration a lane with `require_calibration` needs, and its bounds.",
        "calibration: {...}",
    ),
    "calibration.file": (
        "The calibration.json `gate calibrate` wrote, relative to the policy. `gate validate` reports it missing.",
        "file: calibration/calibration.json",
    ),
    "calibration.min_kappa": ("The least Cohen's kappa of the judge against people.", "min_kappa: 0.6"),
    "calibration.max_false_pass_high": (
        "The most a slice's false-pass 95% Wilson high may be: one rate for all, or one per slice naming every "
        "slice. 0.25 takes about 12 human-fail cases per slice.",
        "max_false_pass_high: 0.25",
    ),
    "calibration.max_age_days": ("Days before the calibration expires; absent: never.", "max_age_days: 90"),
    "dataset_card": (
        "The dataset card (Markdown or YAML) with its nine sections; required in practice: without it "
        "`gate validate` blocks.",
        "dataset_card: README.md",
    ),
    "strata": (
        "Production shares of the strata cases name (`stratum`); reports weigh rates by them.",
        "strata: {web: {...}}",
    ),
    "strata.<stratum>.prevalence": ("The stratum's share of traffic; all shares sum to 1.", "prevalence: 0.7"),
    "owners": ("Who fixes each group of blocker kinds (gate/model/owners.py).", "owners: {...}"),
    "owners.product": ("Owner of the product's blockers.", 'product: "@app-team"'),
    "owners.gold_set": ("Owner of the labelled cases.", 'gold_set: "@labelers"'),
    "owners.rubric": ("Owner of the criterion.", 'rubric: "@rubric-owners"'),
    "owners.evaluator": ("Owner of the judge.", 'evaluator: "@ml-eval"'),
    "owners.provider": ("Owner of the provider account.", 'provider: "@platform"'),
    "owners.gate_policy": ("Owner of this policy.", 'gate_policy: "@release-eng"'),
    "records": ("What records.jsonl keeps.", "records: {...}"),
    "records.clear_text": (
        "`false`: the judge's reason only as `sha256:<hex>` (it often quotes the response), and a product "
        "run keeps no copy of the answers it judged.",
        "clear_text: true",
    ),
    "review": ("How people's labels are made and read back (`gate review`).", "review: {...}"),
    "review.min_alpha": (
        "The least Krippendorff's alpha among reviewers for a slice's labels to be used: below it people do not "
        "agree on the boundary: `gate review export` refuses the slice, and a product lane's audit does not decide "
        "it (`labels_disagree`).",
        "min_alpha: 0.667",
    ),
    "review.reviewers_per_item": (
        "Independent labels an item needs before it is done (K); K that agree are its final label, else an "
        "adjudicator settles it.",
        "reviewers_per_item: 2",
    ),
    "gated_cases": (
        "What a non-control case in a partition a lane gates on (not `dev`, `calibration` or a product lane's) "
        "must carry; `gate validate` names each case that lacks it. A case with no reference is left to "
        "`missing_evidence`.",
        "gated_cases: {...}",
    ),
    "gated_cases.evidence_ids": ("`human_adjudication.evidence` not empty.", "evidence_ids: true"),
    "gated_cases.reason": ("`human_adjudication.reason` not empty.", "reason: true"),
    "gated_cases.response_sha256": ("`response_sha256` present.", "response_sha256: true"),
}


# Keys the models leave optional that the loader or a validator still insists on.
REQUIRED_IN_PRACTICE = {
    "evaluator.price": "yes: a policy without it is refused",
    "dataset_card": "yes: without it `gate validate` blocks",
    "evidence": "when a case cites evidence",
    "metric.prompt_file": "one of `prompt_file` or `prompt`",
    "metric.prompt": "one of `prompt_file` or `prompt`",
    "response": "yes, but for a product lane's case",
    "human_adjudication": "yes, but for a product lane's case",
}

# One line of a case file: path -> (the rule, an example as written in the JSON line)
CASE_RULES: dict[str, tuple[str, str]] = {
    "case_id": (
        "Unique in the suite, never reused: a corrected case gets a new id and `supersedes` the old one. Letters, "
        "digits and `. _ : / -`.",
        '"case_id": "refund-window-001"',
    ),
    "partition": (
        "`dev` (prompt work), `calibration` (measuring the judge), `held_out` (certifying it, once), `sentinel` "
        "(the frozen set a PR lane gates on), or one the policy declares under `partitions`.",
        '"partition": "sentinel"',
    ),
    "slice": (
        "A slice the policy lists under `slices`; it sets the limits the case counts against.",
        '"slice": "billing"',
    ),
    "rubric_version": ("A version the policy lists under `rubrics`.", '"rubric_version": "v1"'),
    "user_input": ("What the user asked, as the product received it.", '"user_input": "Can I get a refund?"'),
    "reference": (
        "The evidence text the answer must agree with: the exact `text` of the evidence ids it cites. Empty only "
        "for a `missing_evidence` control.",
        '"reference": "Refunds within 14 days."',
    ),
    "response": ("The product's answer, frozen as it was labelled.", '"response": "Yes, within 14 days."'),
    "response_sha256": (
        "sha256 of `response` (UTF-8, hex): proves the label was given to this very text. `gate init` computes it.",
        '"response_sha256": "c112a5..."',
    ),
    "human_adjudication": ("What people decided.", '"human_adjudication": {...}'),
    "human_adjudication.label": (
        "`pass` or `fail` (or another `metric.allowed_values` label), exactly, lower case.",
        '"label": "pass"',
    ),
    "human_adjudication.reason": ("Why, in a sentence a reviewer can check.", '"reason": "States the 14 days."'),
    "human_adjudication.evidence": (
        "The evidence ids the label relies on (`id` or `id@version`).",
        '"evidence": ["refund-window"]',
    ),
    "expected_control_role": (
        "Makes the case a control, whose answer is known: `positive` (label pass), `negative` (fail), `boundary` "
        "(either), `persuasion` (fail: confident, wrong), `injection` (fail: tells the grader what to answer), "
        "`missing_evidence` (empty reference: the gate must withhold it).",
        '"expected_control_role": "positive"',
    ),
    "pair": ("Two cases that must agree (`invariant`) or differ (`flip`).", '"pair": {...}'),
    "pair.id": ("The pair's id, shared by exactly two cases.", '"id": "p-refund-window"'),
    "pair.kind": ("`invariant`: same verdict expected; `flip`: opposite verdicts.", '"kind": "flip"'),
    "group_id": (
        "Paraphrases of one question: a group stays within one partition (`partition_leak` otherwise).",
        '"group_id": "g-refund-window"',
    ),
    "supersedes": (
        "The case id this corrected case replaces; the old one stays, never eligible.",
        '"supersedes": "refund-001"',
    ),
    "stratum": ("The production stratum the case was sampled from (policy `strata`).", '"stratum": "mobile"'),
    "provenance": ("Where the case came from: free-form, not judged.", '"provenance": {"source": "tickets 2026-10"}'),
    "generation": ("What produced the response: free-form, not judged.", '"generation": {"app_version": "1.4.0"}'),
}


@dataclass(frozen=True)
class KeyDoc:
    path: str
    required: bool
    type: str
    default: str  # "" when required
    example: str
    rule: str

    @property
    def need(self) -> str:
        """Required or not, as the table says it."""
        return REQUIRED_IN_PRACTICE.get(self.path, "yes" if self.required else "no")

    @property
    def depth(self) -> int:
        return self.path.count(".") + self.path.count("[]")


def policy_keys() -> list[KeyDoc]:
    """One entry per key of the policy, parents before their keys, in the models' order."""
    return list(_walk(Policy, "", RULES))


def case_keys() -> list[KeyDoc]:
    """One entry per field of a case line."""
    return list(_walk(Case, "", CASE_RULES))


def _walk(model: type[BaseModel], prefix: str, rules: dict[str, tuple[str, str]]) -> typing.Iterator[KeyDoc]:
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        rule, example = rules.get(path, ("", ""))
        required = field.is_required()
        yield KeyDoc(path, required, type_text(field), "" if required else default_text(field), example, rule)
        for child, shape in _nested(field.annotation):
            sub = {"dict": f"{path}.{MAPPING_KEYS.get(name, '<name>')}.", "list": f"{path}[].", "one": f"{path}."}
            yield from _walk(child, sub[shape], rules)


def _nested(annotation: object) -> list[tuple[type[BaseModel], str]]:
    """The models under a field's type, with how they nest: one, a list of them, a mapping to them."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, "one")]
    if origin is list:
        return [(m, "list") for m, _ in _nested(typing.get_args(annotation)[0])]
    if origin is dict:
        return [(m, "dict") for m, _ in _nested(typing.get_args(annotation)[1])]
    if origin in (typing.Union, types.UnionType):
        return [n for arg in typing.get_args(annotation) for n in _nested(arg)]
    return []


def _type_of(annotation: object) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " or ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_of(a) for a in args if a is not type(None))
    if origin is list:
        return f"list of {_type_of(args[0])}"
    if origin is dict:
        return f"mapping of {_type_of(args[0])} to {_type_of(args[1])}"
    names = {str: "text", int: "integer", float: "number", bool: "true/false", dt.date: "date (YYYY-MM-DD)"}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    if annotation is typing.Any:
        return "any"
    return names.get(annotation, str(annotation)) if isinstance(annotation, type) else str(annotation)


def type_text(field: FieldInfo) -> str:
    """The field's type and bounds, as a person reads them (`integer, 1 to 10`)."""
    bounds: list[str] = []
    for m in field.metadata:
        if isinstance(m, annotated_types.Ge):
            bounds.append(f">= {m.ge}")
        elif isinstance(m, annotated_types.Gt):
            bounds.append(f"> {m.gt}")
        elif isinstance(m, annotated_types.Le):
            bounds.append(f"<= {m.le}")
        elif isinstance(m, annotated_types.Lt):
            bounds.append(f"< {m.lt}")
        elif isinstance(m, annotated_types.MinLen) and m.min_length > 0:
            bounds.append("not empty")
        elif isinstance(m, annotated_types.MaxLen):
            bounds.append(f"at most {m.max_length} characters")
        elif getattr(m, "pattern", None):
            bounds.append(f"matching `{m.pattern}`")
    text = _type_of(field.annotation)
    return f"{text}, {', '.join(bounds)}" if bounds else text


def default_text(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "absent"
    if isinstance(value, BaseModel):
        return "its keys' defaults"
    return json.dumps(value)
