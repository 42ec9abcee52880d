"""`gate run --lane scheduled` on a policy with `drift:`: its plan on a dry run, else the lane and its outputs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from gate.commands.outputs import write_outputs
from gate.decide.core import Decision
from gate.judge import Evaluator, Judgment, resolve_base_url
from gate.measure.drift.lane import DriftRun, run_drift
from gate.model.cases import Case
from gate.model.lineage import Lineage
from gate.model.policy import LoadedPolicy
from gate.model.records import Record
from gate.model.states import State
from gate.model.traces import DRIFT_LANE, draw_sample, drift_policy, load_traces
from gate.run.lineage import JudgeSettings
from gate.run.recording import make_record


def print_drift_plan(loaded: LoadedPolicy, limit: float) -> Decision:
    """What a dry run of the drift lane prints; nothing is judged or written."""
    drift = loaded.policy.drift
    assert drift is not None
    drift_policy(loaded)
    traces = load_traces(loaded)
    drawn = len(draw_sample(traces.traces, drift.sample, drift.seed))
    sys.stdout.write(
        f"Plan for the drift lane of policy {loaded.policy.policy_id}: {drawn} of {len(traces.traces)} traces "
        f"from {drift.traces} (seed {drift.seed}), one judgment each, model {loaded.policy.evaluator.model}; "
        f"boundary {limit:g}\n"
    )
    return Decision(state=State.PASSED, blockers=[], waived=[], outcomes=[], result=None)


def run_drift_lane(
    loaded: LoadedPolicy,
    drift_run: DriftRun,
    env: Mapping[str, str],
    factory: Callable[[LoadedPolicy, str, Path | None], Evaluator],
) -> Decision:
    """The scheduled lane of a policy with `drift:` judges production traces, then writes the outputs."""
    base_url = resolve_base_url(loaded.policy.evaluator.base_url, env.get("OPENAI_BASE_URL"))

    def record(case: Case, judgment: Judgment, judged_by: LoadedPolicy, lineage: Lineage) -> Record:
        settings = JudgeSettings.of(judged_by, base_url)
        return make_record(case, 0, judgment, judged_by, lineage, DRIFT_LANE, lineage.ragas_version, settings)

    decision = run_drift(loaded, drift_run, factory, record)
    return write_outputs(drift_run.out_dir, decision)  # the decision result.json holds
