"""A product lane's answers (`--responses FILE`): read, checked and put into the lane's cases.

The team's own step writes one JSON line per case: `{"case_id", "response", "generation": {...}}`
(`generation` optional: model, app version, commit). The file is untrusted and a usage error names
its line: a malformed line or a duplicated case id is exit 2, never a verdict. The answer judged is
the line's: each lane case gets the line's response (its sha256 and `generation` go into its
records, the file's sha256 into lineage), so the rendered prompt, the cache key and `--resume`'s
input check all follow the answer. A lane case with no line is unrun (`missing_response`); lines
for cases outside the lane are listed in a note.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.model.cases import Case, Dataset
from gate.model.errors import UsageError
from gate.model.escape import NAME_RULE, is_name, visible
from gate.model.loading import FileProblem, read_bytes, sha256_hex, surrogate_at
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy
from gate.model.records import Record
from gate.model.states import MISSING_RESPONSE, Finding, State
from gate.model.supersede import superseded_ids
from gate.model.wording import agree, plural

MAX_RESPONSES_BYTES = 512 * 1024 * 1024
_KEYS = ("case_id", "response", "generation")
_SHAPE = 'one JSON object per line: {"case_id": "...", "response": "...", "generation": {...}}'


class ResponsesError(UsageError):
    """A --responses file the gate cannot use (exit 2): names the file, the line and the fix."""


@dataclass(frozen=True)
class Answer:
    response: str
    generation: dict[str, Any] | None
    line: int


@dataclass(frozen=True)
class Responses:
    path: Path
    sha256: str  # of the file's bytes (lineage.responses_sha256)
    answers: Mapping[str, Answer]


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    made = dict(pairs)
    if len(made) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return made


def _parse_line(raw: bytes, where: str) -> tuple[str, Answer] | str:
    """The line's case id and answer, or what is wrong with it (one sentence with its fix)."""
    try:
        obj = json.loads(raw.decode("utf-8").removeprefix("\ufeff"), object_pairs_hook=_no_duplicate_keys)
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start}); fix: write the file as UTF-8"
    except _Duplicate as exc:
        return f"key `{visible(exc.key, 40)}` is written twice; fix: keep one"
    except (ValueError, RecursionError) as exc:
        detail = f" ({exc.msg} at column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        return f"not valid JSON{detail}; fix: {_SHAPE}"
    if not isinstance(obj, dict):
        return f"a {type(obj).__name__}, not an object; fix: {_SHAPE}"
    unknown = [k for k in obj if k not in _KEYS]
    if unknown:
        return f"unknown key `{visible(unknown[0], 40)}`; fix: {_SHAPE}"
    bad_text = surrogate_at(obj)
    if bad_text is not None:
        return f"`{visible(bad_text, 40)}` holds a lone surrogate escape, which is not text; fix: write the character"
    case_id, response, generation = obj.get("case_id"), obj.get("response"), obj.get("generation")
    if not isinstance(case_id, str) or not is_name(case_id):
        return f"`case_id` must be a case id ({NAME_RULE}); fix: write the id of the case this answer is for"
    if not isinstance(response, str) or not response.strip():
        return f"`response` of case {case_id} must be the application's answer, a non-empty string; fix: write it"
    if generation is not None and not isinstance(generation, dict):
        return f"`generation` of case {case_id} must be an object (model, app version, commit) or absent; fix: {_SHAPE}"
    return case_id, Answer(response, generation, 0)


MAX_BAD_LINES_SHOWN = 10  # a file of bad lines shows this many, then "and N more"


def read_responses(path: Path) -> Responses:
    """The --responses file, every line checked; its problems are one ResponsesError naming each
    bad line (the first MAX_BAD_LINES_SHOWN, then how many more), so one edit fixes them all."""
    shown = shown_path(path)
    try:
        data = read_bytes(path, "responses file (--responses)", MAX_RESPONSES_BYTES)
    except FileProblem as exc:
        raise ResponsesError(f"{exc.message}; fix: pass the JSON Lines file your application's step wrote") from None
    answers: dict[str, Answer] = {}
    problems: list[str] = []
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{shown}:{lineno}"
        parsed = _parse_line(raw, where)
        if isinstance(parsed, str):
            problems.append(f"{where} (--responses): {parsed}")
            continue
        case_id, answer = parsed
        if case_id in answers:
            first = answers[case_id].line
            problems.append(
                f"{where} (--responses): case {case_id} is answered twice (first on line {first}); the gate will "
                "not guess which answer to judge; fix: keep one line per case"
            )
            continue
        answers[case_id] = dataclasses.replace(answer, line=lineno)
    if problems:
        raise ResponsesError(_bad_lines(shown, problems))
    if not answers:
        raise ResponsesError(f"{shown} (--responses): the file holds no answer; fix: {_SHAPE}")
    return Responses(path=path, sha256=sha256_hex(data), answers=answers)


def _bad_lines(shown: str, problems: Sequence[str]) -> str:
    if len(problems) == 1:
        return problems[0]
    listed = [f"  - {p}" for p in problems[:MAX_BAD_LINES_SHOWN]]
    more = len(problems) - MAX_BAD_LINES_SHOWN
    if more > 0:
        listed.append(f"  - and {more} more bad {'line' if more == 1 else 'lines'}")
    return f"{shown} (--responses): {len(problems)} lines are not answers the gate can read:\n" + "\n".join(listed)


@dataclass(frozen=True)
class Answered:
    """The dataset with the lane's answers in place, and what the responses left out or added."""

    dataset: Dataset
    missing: tuple[str, ...]  # lane cases with no line: unrun, `missing_response`
    outside: tuple[str, ...]  # lines for cases the lane does not hold


def lane_product_ids(loaded: LoadedPolicy, dataset: Dataset, lane: str) -> set[str]:
    """The cases a product lane judges the application's answers of: its partitions' non-control cases."""
    partitions = set(loaded.policy.lanes[lane].partitions)
    superseded = superseded_ids(dataset.cases)
    return {c.case_id for c in dataset.cases if not c.is_control and c.partition in partitions} - superseded


def answer_cases(loaded: LoadedPolicy, dataset: Dataset, lane: str, responses: Responses) -> Answered:
    """Each lane case holds the answer its line gives (response, its sha256, generation) and no human
    label (no person labelled the new answer); a lane case with no line keeps no response."""
    in_lane = lane_product_ids(loaded, dataset, lane)
    answers = responses.answers
    cases: list[Case] = []
    for c in dataset.cases:
        if c.case_id not in in_lane:
            cases.append(c)
            continue
        a = answers.get(c.case_id)
        update: dict[str, Any] = {"human_adjudication": None, "generation": {}}
        if a is None:
            update.update(response=None, response_sha256=None)
        else:
            update.update(response=a.response, response_sha256=sha256_hex(a.response), generation=a.generation or {})
        cases.append(c.model_copy(update=update))
    missing = tuple(sorted(i for i in in_lane if i not in answers))
    outside = tuple(i for i in answers if i not in in_lane)
    answered = dataclasses.replace(
        dataset, cases=cases, responses_sha256=responses.sha256, responses_path=responses.path
    )
    return Answered(answered, missing, outside)


def missing_response_finding(missing: Sequence[str], responses: Responses, lane: str) -> Finding:
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    return Finding(
        State.EVALUATION_INCOMPLETE,
        MISSING_RESPONSE,
        f"{plural(len(missing), 'case')} of lane {lane} {agree(len(missing), 'has', 'have')} no answer in {shown_path(responses.path)} ({shown}), so they "
        "were not judged; fix: have the application's step write one line per case of the lane, then run again",
        case_ids=tuple(missing),
        location=shown_path(responses.path),
    )


def outside_note(outside: Sequence[str], responses: Responses, lane: str) -> str:
    shown = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5 else "")
    return (
        f"{plural(len(outside), 'line')} of {shown_path(responses.path)} {agree(len(outside), 'answers', 'answer')} cases lane {lane} does not hold ({shown}); "
        "they were not judged"
    )


def unanswered_limits(loaded: LoadedPolicy, cases: Sequence[Case], lane: str) -> list[str]:
    """Policy problems: a slice the product lane judges must say its `max_failure_rate`."""
    slices = sorted({c.slice for c in cases if not c.is_control and c.slice in loaded.policy.slices})
    missing = [s for s in slices if loaded.policy.slices[s].max_failure_rate is None]
    return [
        f"`slices.{s}.max_failure_rate` is missing: product lane {lane} judges answers of slice {s}, and a product "
        f"lane gates each slice's failure rate against its limit; fix: add e.g. `max_failure_rate: 0.05` (5%) to "
        f"`slices.{s}`"
        for s in missing
    ]


def resumed_answers_problem(records: Sequence[Record], cases: Sequence[Case], responses: Path | None) -> str | None:
    """Why the records an earlier attempt left (--resume, --batch collect) judged other answers than
    the cases hold now (a responses file missing or edited), or None when they match."""
    now = {c.case_id: sha256_hex(c.response or "") for c in cases if not c.labelled and c.response is not None}
    for r in records:
        if r.response_sha256 is None or r.case_id not in now or r.response_sha256 == now[r.case_id]:
            continue
        given = f"--responses {shown_path(responses)}" if responses is not None else "no --responses"
        return (
            f"the run being continued judged other answers than {given} holds (case {r.case_id}: response "
            f"{r.response_sha256[:12]} recorded vs {now[r.case_id][:12]} now); fix: pass the same --responses file "
            "the run started with, or run without --resume to judge these answers afresh"
        )
    return None
