"""`gate review queue`: the answers people should label, from a run or a file, with nothing of the judge.

`--from` takes a product run's output directory (the audit: per slice the answers the judge failed
and those it passed, each stratum in the seeded draw order of `gate.review.draw`), a drift run's
directory (its proposed cases), a metric run's directory (its review_required cases and every case
where the judge and the gold label disagree: the gold label is reviewed again, blind), or a CSV or
JSON Lines file with `gate init --from`'s columns. The queue holds the question, the evidence text
and the answer; never the judge's verdict, reason or model, nor any label.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.model.cases import Case
from gate.model.errors import UsageError
from gate.model.escape import visible
from gate.model.loading import FileProblem, read_bytes, read_run_json, sha256_hex
from gate.model.paths import from_working_directory, shown_path
from gate.model.policy import LoadedPolicy, load_policy
from gate.model.records import RECORDS_FILE
from gate.model.states import State
from gate.model.wording import agree, listed, plural
from gate.review.draw import JUDGED_FAIL, JUDGED_PASS, draw_order
from gate.review.export import Exported, ExportRequest, export_cases
from gate.review.ledger import FinalLabel, LedgerLine, append_line, final_labels, read_ledger
from gate.review.queue import Queue, QueueHeader, QueueItem, make_item, read_queue, write_queue
from gate.review.status import NO_SLICE, SliceStatus, slice_status

if TYPE_CHECKING:
    from gate.review.label_studio_ledger import Plan

ALL = "all"  # the one stratum of a sample that is not an audit's
RESPONSES_FILE = "responses.jsonl"
PROPOSED_CASES = "proposed-cases.jsonl"
REVIEW_REQUIRED = "review_required"  # the judge's abstention label: never a person's


@dataclass(frozen=True)
class QueueRequest:
    policy: Path
    source: Path
    out: Path
    sample: int | None = None
    seed: str | None = None
    responses: Path | None = None  # a product run kept no answers (records.clear_text: false)
    # A product run: the ledger whose earlier labels carry over (default: the lane's `audit` ledger).
    ledger: Path | None = None


@dataclass
class Built:
    kind: str
    items: list[QueueItem]
    sources: list[dict[str, Any]]
    design: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the queue leaves out, and why


@dataclass(frozen=True)
class Written:
    path: Path
    sha256: str
    built: Built


def build_queue(req: QueueRequest) -> Written:
    """Read the source, build its items, and write the queue (never over an existing file)."""
    if from_working_directory(req.out).exists():
        raise UsageError(
            f"--out {shown_path(req.out)}: the file exists, and ledgers name a queue by its sha256, so it is never "
            "overwritten; fix: pass a new path"
        )
    if req.sample is not None and req.sample < 1:
        raise UsageError(f"--sample {req.sample}: draw at least one answer per stratum; fix: pass --sample 1 or more")
    loaded = load_policy(req.policy)
    built = _built(loaded, req)
    if not built.items:
        why = "; ".join(built.notes) if built.notes else "it holds no answer to review"
        raise UsageError(f"--from {shown_path(req.source)}: {why}; nothing was written")
    header = QueueHeader(
        policy_id=loaded.policy.policy_id,
        policy_path=os.path.relpath(
            os.path.abspath(from_working_directory(req.policy)), os.path.abspath(from_working_directory(req.out).parent)
        ),
        policy_sha256=loaded.sha256,
        rubric_version=loaded.policy.rubrics[-1],
        allowed_values=tuple(v for v in loaded.policy.metric.allowed_values if v != REVIEW_REQUIRED),
        sources=tuple(built.sources),
        design=built.design,
    )
    sha = write_queue(req.out, header, built.items)
    return Written(req.out, sha, built)


def _built(loaded: LoadedPolicy, req: QueueRequest) -> Built:
    built = _built_from(loaded, req)
    if req.ledger is not None and built.kind != "product-audit":
        raise UsageError(
            f"--ledger: {shown_path(req.source)} is no product run, and only a product run's audit plan carries "
            "labels over from a ledger; fix: drop --ledger"
        )
    return built


def _built_from(loaded: LoadedPolicy, req: QueueRequest) -> Built:
    source = req.source
    where = from_working_directory(source)
    if where.is_dir():
        if (where / PROPOSED_CASES).exists():
            return _drift(req)
        try:
            result = read_run_json(where, "result.json", "run's result")
        except FileProblem as exc:
            raise UsageError(f"--from {shown_path(source)}: {exc.message}") from None
        responses_sha = (result.get("lineage") or {}).get("responses_sha256")
        if isinstance(responses_sha, str) and responses_sha:
            return _product(loaded, req, result, responses_sha)
        return _metric(loaded, req, result)
    if not where.is_file():
        raise UsageError(
            f"--from {shown_path(source)}: no such file or directory; fix: pass a run's --out directory, or a CSV or "
            "JSON Lines file of answers"
        )
    return _file(req)


def _records_sha(run: Path) -> str:
    try:
        return sha256_hex(read_bytes(run / RECORDS_FILE, "run's records"))
    except FileProblem as exc:
        raise UsageError(f"--from {shown_path(run)}: {exc.message}") from None


# ---- a product run: the audit ------------------------------------------------------------------
def _answers_file(req: QueueRequest, expected: str) -> Path:
    """The answers the run judged: its kept copy, or --responses, checked against the run's lineage."""
    path = req.responses if req.responses is not None else req.source / RESPONSES_FILE
    if not from_working_directory(path).exists():
        raise UsageError(
            f"--from {shown_path(req.source)}: the product run kept no copy of the answers it judged "
            f"({RESPONSES_FILE}: its policy says `records: {{clear_text: false}}`, or the gate that ran it kept none); "
            "fix: pass the answers file the run judged with --responses FILE"
        )
    try:
        got = sha256_hex(read_bytes(path, "responses file", 512 * 1024 * 1024))
    except FileProblem as exc:
        raise UsageError(exc.message) from None
    if got != expected:
        raise UsageError(
            f"{shown_path(path)}: its sha256 {got[:12]} is not the {expected[:12]} the run judged (lineage "
            f"responses_sha256 in {shown_path(req.source / 'result.json')}); fix: pass the answers file the run judged"
        )
    return path


def _run_outcomes(req: QueueRequest, lane: str | None, responses: Path | None) -> Any:
    from gate.commands.decide import decide_from_records

    return decide_from_records(req.policy, [req.source / RECORDS_FILE], lane, responses=responses)


def _lane_of(result: dict[str, Any]) -> str | None:
    lane = result.get("lane")
    return lane if isinstance(lane, str) and lane else None


def _product(loaded: LoadedPolicy, req: QueueRequest, result: dict[str, Any], responses_sha: str) -> Built:
    """The run's audit plan, exactly: per slice the planned answers of each stratum, in their seeded
    draw order (gate/decide/product/audit_plan.py), as `gate decide` on the run's records computes it."""
    from gate.decide.product.answers import answers_of

    for flag, given in (("--seed", req.seed), ("--sample", req.sample)):
        if given is not None:
            raise UsageError(
                f"{flag}: {shown_path(req.source)} is a product run, whose audit plan (the seed, and how many answers "
                "of each stratum people label) the run fixed before anyone saw a verdict; another draw or size would "
                "let a team pick its own sample, and the gate uses the plan's labels only; fix: drop " + flag
            )
    responses = _answers_file(req, responses_sha)
    decision = _run_outcomes(req, _lane_of(result), responses)
    product = decision.result.product if decision.result is not None else None
    if product is None or product.order_seed is None:
        raise UsageError(
            f"--from {shown_path(req.source)}: the run's records carry no order seed, so it fixed no audit plan (a run "
            "made before the gate fixed one); fix: run the lane again and make the queue from that run"
        )
    items: list[QueueItem] = []
    strata: dict[str, dict[str, dict[str, int]]] = {}
    notes: list[str] = []
    answers = answers_of(decision.outcomes)
    for slice_name, row in product.slices.items():
        plan = row.audit_plan
        judged = answers.get(slice_name)
        if plan is None or judged is None:
            continue
        if judged.unjudged:
            notes.append(
                f"slice {slice_name}: {plural(len(judged.unjudged), 'answer')} not judged yet, so its audit plan is not "
                "final; nothing of it is queued: judge the rest (`gate run --resume`) and make the queue again"
            )
            continue
        if plan.undecidable is not None:
            queued = (
                "only the answers the judge failed are queued (zero tolerance reads each one)"
                if plan.items
                else "nothing is queued"
            )
            notes.append(f"slice {slice_name}: {queued}: {plan.undecidable}")
        cases = {o.case.case_id: o.case for o in judged.judged}
        strata[slice_name] = {}
        for stratum, planned in ((JUDGED_FAIL, plan.judged_fail), (JUDGED_PASS, plan.judged_pass)):
            strata[slice_name][stratum] = {"population": planned.population, "sample": planned.sample}
            items += [_case_item(cases[c], "product-audit", stratum, i) for i, c in enumerate(planned.case_ids)]
    sources = [
        {
            "kind": "product-run",
            "path": shown_path(req.source),
            "sha256": _records_sha(req.source),
            "lane": _lane_of(result),
            "responses_sha256": responses_sha,
        }
    ]
    design: dict[str, Any] = {"seed": product.order_seed, "strata": strata}
    carried = _carried_over(loaded, req, _lane_of(result), items)
    if carried is not None:
        design["carried_over"] = carried
    return Built("product-audit", items, sources, design, notes)


def _carried_over(
    loaded: LoadedPolicy, req: QueueRequest, lane: str | None, items: Sequence[QueueItem]
) -> dict[str, Any] | None:
    """The labels a ledger already holds on the plan's items (the same item, under the rubric the queue
    is for), labelled on earlier queues: the queue names those queues, so the page, status and the audit
    read their labels as this queue's and people label only what still needs a label. The ledger is
    --ledger, else the lane's `audit` (the one a policy names for every release)."""
    ledger = req.ledger
    spec = loaded.policy.lanes.get(lane) if lane is not None else None
    if ledger is None and spec is not None and spec.audit is not None:
        ledger = loaded.resolve(spec.audit)
    if ledger is None or not from_working_directory(ledger).exists():
        if req.ledger is not None:
            raise UsageError(
                f"--ledger {shown_path(req.ledger)}: no such review ledger; fix: pass the ledger people label into"
            )
        return None
    lines = read_ledger(ledger, rubrics=loaded.policy.rubrics)
    queues = sorted({line.queue_sha256 for line in lines})
    if not queues:
        return None
    planned = {item.item_id for item in items}
    rubric = loaded.policy.rubrics[-1]
    mine = [line for line in lines if line.item_id in planned and line.rubric_version == rubric]
    settled = sum(1 for f in final_labels(mine, None, loaded.policy.review.reviewers_per_item).values() if f.final)
    return {"ledger": shown_path(ledger), "queues": queues, "items": settled}


def _case_item(case: Case, source: str, stratum: str | None = None, draw: int | None = None) -> QueueItem:
    return make_item(
        case_id=case.case_id,
        slice=case.slice,
        user_input=case.user_input,
        reference=case.reference or "",
        evidence=case.evidence_ids,
        response=case.response or "",
        source=source,
        stratum=stratum,
        draw=draw,
    )


# ---- a metric run: what people must look at, and where the judge and the gold label disagree ---
def _metric(loaded: LoadedPolicy, req: QueueRequest, result: dict[str, Any]) -> Built:
    if not from_working_directory(req.source / RECORDS_FILE).exists():
        raise UsageError(
            f"--from {shown_path(req.source)}: no {RECORDS_FILE} beside result.json; fix: pass a run's --out directory"
        )
    decision = _run_outcomes(req, _lane_of(result), None)
    review_ids = {c for b in decision.blockers if b.state == State.REVIEW_REQUIRED for c in b.case_ids}
    chosen: dict[str, tuple[Case, str]] = {}
    for o in decision.outcomes:
        case = o.case
        if case.response is None:
            continue
        judged = o.bucket == "completed" and o.verdict in ("pass", "fail")
        if judged and case.human_label is not None and o.verdict != case.human_label and not case.is_control:
            chosen[case.case_id] = (case, "disagreement")
        elif case.case_id in review_ids or o.needs_review:
            chosen.setdefault(case.case_id, (case, "review"))
    picked = _sampled([(c.slice, c.case_id) for c, _ in chosen.values()], req, seed=_records_sha(req.source))
    items = [
        _case_item(case, source, *picked[case.case_id]) for case, source in chosen.values() if case.case_id in picked
    ]
    sources = [
        {
            "kind": "metric-run",
            "path": shown_path(req.source),
            "sha256": _records_sha(req.source),
            "lane": _lane_of(result),
        }
    ]
    return Built("metric-run", items, sources, _design(req, _records_sha(req.source)))


def _sampled(
    keys: Sequence[tuple[str | None, str]], req: QueueRequest, seed: str
) -> dict[str, tuple[str | None, int | None]]:
    """key -> (stratum, draw): every key without --sample; with it, the first N of each slice's draw."""
    if req.sample is None:
        return {key: (None, None) for _, key in keys}
    seed = req.seed if req.seed is not None else seed
    by_slice: dict[str, list[str]] = {}
    for slice_name, key in keys:
        by_slice.setdefault(slice_name or "", []).append(key)
    out: dict[str, tuple[str | None, int | None]] = {}
    for slice_name, ids in by_slice.items():
        for i, key in enumerate(draw_order(seed, slice_name, ALL, ids)[: req.sample]):
            out[key] = (ALL, i)
    return out


def _design(req: QueueRequest, seed: str) -> dict[str, Any]:
    if req.sample is None:
        return {}
    return {"seed": req.seed if req.seed is not None else seed, "sample": req.sample}


# ---- a drift run's proposed cases --------------------------------------------------------------
def _drift(req: QueueRequest) -> Built:
    path = req.source / PROPOSED_CASES
    try:
        data = read_bytes(path, "drift run's proposed cases")
    except FileProblem as exc:
        raise UsageError(exc.message) from None
    proposals: list[tuple[str, dict[str, Any]]] = []
    for n, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{shown_path(path)}:{n}"
        try:
            obj = json.loads(raw)
        except ValueError:
            raise UsageError(f"{where}: not a JSON object; fix: pass the directory a drift run wrote") from None
        if (
            not isinstance(obj, dict)
            or not isinstance(obj.get("response"), str)
            or not isinstance(obj.get("user_input"), str)
        ):
            raise UsageError(
                f"{where}: the proposal holds no question and answer text (the drift run's policy says `records: "
                "{clear_text: false}`, so people read them in the traces file); fix: build the queue from a CSV or "
                "JSON Lines file of those traces"
            )
        proposals.append((where, obj))
    seed = sha256_hex(data)
    items = [_drift_item(where, obj) for where, obj in proposals]
    picked = _sampled([(i.slice, i.item_id) for i in items], req, seed)
    kept = [_with_draw(i, *picked[i.item_id]) for i in items if i.item_id in picked]
    sources = [{"kind": "drift-run", "path": shown_path(req.source), "sha256": seed}]
    return Built("drift", kept, sources, _design(req, seed))


def _drift_item(where: str, obj: dict[str, Any]) -> QueueItem:
    contexts = obj.get("retrieved_contexts") or []
    if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
        raise UsageError(
            f"{where}: `retrieved_contexts` must be a list of text; fix: pass the directory a drift run wrote"
        )
    slice_name = obj.get("slice")
    return make_item(
        case_id=None,
        slice=slice_name if isinstance(slice_name, str) else None,
        user_input=obj["user_input"],
        reference="\n\n".join(contexts),
        evidence=(),
        response=obj["response"],
        source="drift",
    )


def _with_draw(item: QueueItem, stratum: str | None, draw: int | None) -> QueueItem:
    from dataclasses import replace

    return replace(item, stratum=stratum, draw=draw)


# ---- a file of answers (gate init --from's columns) --------------------------------------------
def _file(req: QueueRequest) -> Built:
    from gate.commands.init import read_answers

    answers = read_answers(from_working_directory(req.source), labelled=False)
    seed = sha256_hex(read_bytes(req.source, "answers file", 512 * 1024 * 1024))
    picked = _sampled([(a.slice, a.case_id) for a in answers], req, seed)
    items = [
        make_item(
            case_id=a.case_id,
            slice=a.slice,
            user_input=a.user_input,
            reference=a.reference,
            evidence=a.evidence,
            response=a.response,
            source="file",
            stratum=picked[a.case_id][0],
            draw=picked[a.case_id][1],
        )
        for a in answers
        if a.case_id in picked
    ]
    sources = [{"kind": "file", "path": shown_path(req.source), "sha256": seed}]
    return Built("file", items, sources, _design(req, seed))


def summary_lines(written: Written) -> list[str]:
    """What `gate review queue` prints: the file, its items per slice (and stratum), and what next."""
    built = written.built
    counts: dict[str, int] = {}
    for item in built.items:
        key = item.slice or "(no slice)"
        if item.stratum in (JUDGED_FAIL, JUDGED_PASS):
            key += f" {item.stratum}"
        counts[key] = counts.get(key, 0) + 1
    lines = [
        f"wrote {shown_path(written.path)}: {len(built.items)} items from {built.kind} (sha256 {written.sha256[:12]})"
    ]
    lines += [f"  {visible(key, 120)}: {n}" for key, n in sorted(counts.items())]
    for slice_name, strata in sorted((built.design.get("strata") or {}).items()):
        shown = ", ".join(f"{s} {v['sample']} of {v['population']}" for s, v in strata.items())
        lines.append(
            f"  audit plan {visible(slice_name, 80)}: {shown} (the run's seed {visible(str(built.design['seed']), 80)})"
        )
    lines += [f"  {visible(note, 600)}" for note in built.notes]
    carried = built.design.get("carried_over")
    if isinstance(carried, dict) and carried.get("items"):
        n, total = int(carried["items"]), len(built.items)
        lines.append(
            f"  {n} of its {plural(total, 'item')} already {agree(n, 'has', 'have')} people's final label in "
            f"{visible(str(carried['ledger']), 200)} (the same answer, question, evidence and rubric, labelled on an "
            f"earlier queue): they count, and `gate review serve` with that ledger asks only for the other {total - n}"
        )
    lines.append(
        f"next: gate review serve {shown_path(written.path)} --ledger labels/   (each reviewer labels, blind), then "
        f"gate review status {shown_path(written.path)} --ledger labels/"
    )
    return lines


# ---- reading a queue with its labels (status, export, import) ----------------------------------
@dataclass(frozen=True)
class Labelled:
    queue: Queue
    loaded: LoadedPolicy
    lines: tuple[LedgerLine, ...]
    k: int  # independent labels an item needs
    finals: dict[str, FinalLabel]


def queue_policy(queue: Queue, policy: Path | None) -> LoadedPolicy:
    """The policy a queue labels for: --policy, else the one its header names (relative to the queue)."""
    path = policy if policy is not None else queue.policy_file
    if policy is None and not from_working_directory(path).exists():
        raise UsageError(
            f"{shown_path(queue.path)}: the queue's policy {shown_path(path)} does not exist (the header names it "
            "relative to the queue file); fix: pass --policy with the policy the queue was built for"
        )
    loaded = load_policy(path)
    missing = [v for v in queue.header.allowed_values if v not in loaded.policy.metric.allowed_values]
    if loaded.policy.policy_id != queue.header.policy_id or missing:
        raise UsageError(
            f"{shown_path(queue.path)}: the queue labels for policy {visible(queue.header.policy_id, 80)!r} with labels "
            f"{', '.join(queue.header.allowed_values)}, not for {shown_path(path)} (policy "
            f"{loaded.policy.policy_id!r}); fix: pass --policy with the policy the queue was built for"
        )
    return loaded


def check_current_rubric(queue: Queue, loaded: LoadedPolicy) -> None:
    """A queue people are about to label must be under the rubric the policy gates with now: people label
    by today's rules, and their lines name the queue's rubric (an older one is never used by the product
    audit; one the policy dropped is refused by every reader)."""
    current = loaded.policy.rubrics[-1]
    if queue.header.rubric_version != current:
        kept = "keeps it as history" if queue.header.rubric_version in loaded.policy.rubrics else "no longer lists it"
        raise UsageError(
            f"{shown_path(queue.path)}: the queue was built under rubric {visible(queue.header.rubric_version, 80)}, "
            f"and the policy gates under {visible(current, 80)} now ({shown_path(loaded.path)} {kept}): people label "
            "by today's rules, and their labels would carry the old rubric's name; fix: build a new queue from the "
            "same source (`gate review queue`) and label that"
        )


def read_labelled(queue_path: Path, ledger: Path, policy: Path | None, k: int | None) -> Labelled:
    queue = read_queue(queue_path)
    loaded = queue_policy(queue, policy)
    lines = read_ledger(ledger, queue, rubrics=loaded.policy.rubrics)
    per_item = k if k is not None else loaded.policy.review.reviewers_per_item
    return Labelled(queue, loaded, lines, per_item, final_labels(lines, queue, per_item))


def review_status(labelled: Labelled) -> list[SliceStatus]:
    return slice_status(
        labelled.queue, labelled.lines, labelled.k, labelled.loaded.policy.review.min_alpha, labelled.finals
    )


def status_json(labelled: Labelled, rows: Sequence[SliceStatus]) -> dict[str, Any]:
    return {
        "queue": shown_path(labelled.queue.path),
        "queue_sha256": labelled.queue.sha256,
        "reviewers_per_item": labelled.k,
        "ledger_lines": len(labelled.lines),
        "slices": [row.to_dict() for row in rows],
    }


# ---- export: the cases of a new dataset version ------------------------------------------------
HELD_OUT = "held_out"


@dataclass(frozen=True)
class ExportOutcome:
    written: Path | None
    exported: Exported | None
    refused: tuple[SliceStatus, ...] = ()  # slices whose alpha is below review.min_alpha
    card_lines: tuple[str, ...] = ()
    rows: tuple[SliceStatus, ...] = ()  # every slice's agreement, as `gate review status` shows it
    k: int = 2
    # Items whose labels disagree and that no adjudicator settled yet: they stop the export (unless
    # --partial, which leaves them out and says so). Shown by case id, else item id.
    awaiting: tuple[str, ...] = ()


def _check_partition(loaded: LoadedPolicy, partition: str) -> None:
    if partition not in loaded.policy.all_partitions:
        raise UsageError(
            f"--partition {visible(partition, 60)}: {shown_path(loaded.path)} has no such partition (it has "
            f"{', '.join(loaded.policy.all_partitions)}); fix: pass one of them, or add it to `partitions`"
        )
    if partition == HELD_OUT and loaded.policy.certification is not None:
        raise UsageError(
            f"--partition {HELD_OUT}: {shown_path(loaded.path)} certifies the judge on its held-out cases "
            f"(`certification.ledger` {loaded.policy.certification.ledger}); cases added there would change a set "
            "already spent or about to be; fix: export into calibration (or a partition of your own) instead"
        )


def run_export(
    queue_path: Path,
    ledger: Path,
    partition: str,
    out: Path,
    *,
    policy: Path | None = None,
    k: int | None = None,
    accept_low_agreement: bool = False,
    partial: bool = False,
) -> ExportOutcome:
    """Write the cases of the queue's final labels into a new file; refuse slices people disagree on,
    and items awaiting adjudication unless `partial` (the export then says what it left out)."""
    from gate.model.cases import load_dataset

    if from_working_directory(out).exists():
        raise UsageError(
            f"--out {shown_path(out)}: the file exists; export never writes into one; fix: pass a new path"
        )
    labelled = read_labelled(queue_path, ledger, policy, k)
    _check_partition(labelled.loaded, partition)
    rows = review_status(labelled)
    low = tuple(r for r in rows if r.low_agreement)
    awaiting = tuple(
        i.case_id or i.item_id[:12] for i in labelled.queue.items if labelled.finals[i.item_id].status == "disagreement"
    )
    if (low and not accept_low_agreement) or (awaiting and not partial):
        return ExportOutcome(
            None, None, low if not accept_low_agreement else (), awaiting=awaiting if not partial else ()
        )
    missing = [i for i in labelled.queue.items if i.slice is None and labelled.finals[i.item_id].final]
    if missing:
        raise UsageError(
            f"{shown_path(queue_path)}: item {missing[0].item_id[:12]} has no slice, and every case needs one; fix: "
            "build the queue from a source that names each answer's slice"
        )
    alphas: dict[str | None, float | None] = {_slice_key(r.slice): r.alpha for r in rows}
    accepted = frozenset(_slice_key(r.slice) for r in low)  # --accept-low-agreement is true of these only
    request = ExportRequest(partition, alphas, accepted)
    existing = load_dataset(labelled.loaded).cases
    exported = export_cases(labelled.queue, labelled.finals, labelled.lines, existing, request)
    _write_new(out, "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in exported.cases))
    card = card_lines(labelled, exported, awaiting)
    return ExportOutcome(out, exported, low, tuple(card), tuple(rows), labelled.k, awaiting)


def _write_new(path: Path, text: str) -> None:
    try:
        with open(from_working_directory(path), "x", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    except FileExistsError:
        raise UsageError(f"--out {shown_path(path)}: the file exists; fix: pass a new path") from None
    except OSError as exc:
        raise UsageError(
            f"--out {shown_path(path)}: cannot write it ({exc.strerror}); fix: pass a writable path"
        ) from None


def card_lines(labelled: Labelled, exported: Exported, left_out: Sequence[str] = ()) -> list[str]:
    """The dataset card's sections these cases change, with what to write in them."""
    card = labelled.loaded.card
    where = shown_path(card.path) if card is not None else "the dataset card"
    design = labelled.queue.header.design
    lines = [f"dataset card ({where}): update these sections for the new cases"]
    if exported.window is not None:
        lines.append(f"  Collection window: labelled {exported.window[0]} to {exported.window[1]}")
    who = ", ".join(exported.reviewers) or "none"
    adjudicators = ", ".join(exported.adjudicators) or "none"
    lines.append(f"  Reviewer qualifications: reviewers {who}; adjudicators {adjudicators}")
    sources = ", ".join(str(s.get("kind")) for s in labelled.queue.header.sources)
    drawn = f", seeded draw {str(design['seed'])[:12]}" if design.get("seed") else ""
    lines.append(f"  Sampling design: from {sources} (queue {labelled.queue.sha256[:12]}{drawn})")
    counts = ", ".join(f"{s} {label} {n}" for (s, label), n in sorted(exported.counts.items()))
    lines.append(f"  counts: {len(exported.cases)} cases ({counts or 'none'})")
    if left_out:
        n = len(left_out)
        lines.append(
            f"  Known gaps: this export leaves out {plural(n, 'item')} awaiting adjudication ({listed(left_out)}): "
            "the answers people disputed, likely the hard ones"
        )
    return lines


def _slice_key(name: str) -> str | None:
    return None if name == NO_SLICE else name


# ---- Label Studio ------------------------------------------------------------------------------
def export_label_studio(queue_path: Path, out: Path) -> list[Path]:
    """tasks.json and config.xml in `out` (created if missing; neither file overwritten)."""
    from gate.review import label_studio

    queue = read_queue(queue_path)
    where = from_working_directory(out)
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"--out {shown_path(out)}: cannot create the directory ({exc.strerror}); fix: pass another"
        ) from None
    written = [out / "tasks.json", out / "config.xml"]
    for path in written:
        if from_working_directory(path).exists():
            raise UsageError(f"--out {shown_path(out)}: {path.name} exists there; fix: pass a new directory")
    _write_new(written[0], json.dumps(label_studio.tasks(queue), ensure_ascii=False, indent=1) + "\n")
    _write_new(written[1], label_studio.config_xml(queue.header.labels))
    return written


def import_label_studio(queue_path: Path, ledger: Path, export: Path, *, server: str, blind: bool) -> Plan:
    """Append what a Label Studio export says that the ledger does not yet hold; returns the plan carried
    out, every task checked before the first line is written."""
    from gate.review.label_studio import read_export
    from gate.review.label_studio_ledger import check_server, plan_import

    check_server(server)
    queue = read_queue(queue_path)
    try:
        data = read_bytes(export, "Label Studio export", 1024 * 1024 * 1024)
    except FileProblem as exc:
        raise UsageError(exc.message) from None
    where = shown_path(export)
    lines = read_ledger(ledger, queue, missing_ok=True)
    plan = plan_import(read_export(data, where), queue, lines, server, blind=blind, where=where)
    for fields in plan.appends:
        append_line(ledger, fields)
    return plan
