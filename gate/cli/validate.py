"""`gate validate`: its flags and the deterministic checks it prints."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Sequence

from gate.cli.output import format_findings_text
from gate.cli.parsing import Subcommand, examples, exit_table, format_flag, policy_flag
from gate.model.escape import log_text
from gate.model.process import gc_paused
from gate.model.states import Finding, State
from gate.model.textfit import say
from gate.model.wording import plural

VALIDATE_EXIT = exit_table(
    (
        (0, "passed", "no finding"),
        (1, "findings", "a finding a run would block on or route to review (a broken case is input_contract)"),
        (
            2,
            "usage",
            "bad flags, or a policy that cannot be read or is invalid (the message names the key and the fix)",
        ),
        (3, "error", "an unexpected error (nothing was checked)"),
    )
)


def validate_flags(parser: argparse.ArgumentParser) -> None:
    policy_flag(parser, "the policy YAML file (cases and evidence are relative to it)")
    parser.add_argument(
        "--lane",
        default=None,
        help="check this lane only, as a run of it would (default: every lane, no network)",
    )
    format_flag(parser, "the findings")


def validate_summary(policy: str, cases: int, findings: Sequence[Finding]) -> str:
    """`gate validate`'s first line: "valid" or how many findings, and what they would do to a run."""
    if not findings:
        return f"valid: {policy}, {plural(cases, 'case')}, no findings"
    counts = Counter(f.state.value for f in findings)
    states = ", ".join(f"{n} {state}" for state, n in counts.most_common())
    return f"{plural(len(findings), 'finding')} in {policy} ({plural(cases, 'case')}): {states}"


@gc_paused()  # a short command whose objects all live to its end: a collection would find nothing
def cmd_validate(args: argparse.Namespace) -> int:
    from gate.model.cases import load_dataset
    from gate.model.policy import load_policy
    from gate.plan.selection import LaneError
    from gate.validate import Context, run_validators
    from gate.validate.lint import lint

    loaded = load_policy(args.policy)
    if args.lane == "scheduled" and loaded.policy.drift is not None:
        args.lane = None  # the drift lane judges traces: its prompt is checked with the policy
    if args.lane is not None and args.lane not in loaded.policy.lanes:
        raise LaneError(
            f"{args.policy}: lane {args.lane!r} is not defined under `lanes:`; fix: pass one of "
            f"{', '.join(sorted(loaded.policy.lanes))}"
        )
    dataset = load_dataset(loaded)
    findings = run_validators(loaded, dataset, args.lane)
    found = lint(Context(loaded, dataset, args.lane))  # what a run would meet later, known now
    findings += found.findings
    notes = list(found.notes)
    if args.lane is not None:  # a product lane: what `gate run` would find of its limits and calibration
        from gate.measure.product_evidence import product_lane_check
        from gate.model.policy import today

        product = product_lane_check(loaded, dataset, args.lane, os.environ, today())
        findings += product.findings
        notes += product.notes
        # When the judge's model shuts down: the one question validate asks the provider.
        from gate.measure.retirement import lane_retirement_check

        retiring = lane_retirement_check(loaded, dataset, args.lane, os.environ, today())
        findings += retiring.findings
        notes += retiring.notes
    # Any finding fails `validate` (a review route too): each would be a blocker of the run. Which of
    # them stop the run before a model call is `blocking_findings`; the dry run exits with the state
    # of every blocker the run has before any call (gate.commands.dry_run).
    blocking = [f for f in findings if f.state is not State.PASSED]
    if args.format == "json":
        json.dump(
            {
                "policy_id": loaded.policy.policy_id,
                "cases": len(dataset.cases),
                "policy_sha256": loaded.sha256,
                "dataset_sha256": dataset.sha256,
                "blocking": bool(blocking),
                "counts": dict(Counter(f.state.value for f in findings)),
                "findings": [f.to_dict() for f in findings],
                "notes": notes,
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
    else:
        from gate.model.paths import shown_path

        header = (
            f"  policy {loaded.policy.policy_id} ({loaded.policy.policy_version}), policy sha256 "
            f"{loaded.sha256[:12]}, dataset sha256 {dataset.sha256[:12]}"
        )
        summary = validate_summary(shown_path(args.policy), len(dataset.cases), findings)
        format_findings_text(findings, sys.stdout, header, summary)
        for note in notes:
            say(sys.stdout, f"note: {log_text(note)}")
    return 1 if blocking else 0


COMMAND = Subcommand(
    "validate",
    "deterministic checks; with --lane, the judge model's shutdown date too",
    "Check the policy and its cases without calling any model: schema, ids, slices, evidence, "
    "controls, duplicates and leaks between partitions. With --lane, also what a run of the lane would "
    "find before any call, the judge model's shutdown date among it (the provider's models endpoint, asked "
    "with the judge's key: no tokens). Exit 1 when a finding would block.",
    validate_flags,
    examples=examples(
        "gate validate --policy policies/example/policy.yaml",
        "gate validate --policy policies/example/policy.yaml --lane pr --format json",
    ),
    exits=VALIDATE_EXIT,
    handler=cmd_validate,
)
