"""Deterministic checks: the team's own functions, run as ragas `@discrete_metric`s before any model call.

A check is a plain Python function in the team's repository, named by the policy (`checks:` with
`file` and `function`). Loading it imports that file, so the team's code runs inside the gate, as
a test suite's would; a file outside the repository that holds the policy is refused.

The signature is read from the raw function (`inspect.signature`), so `gate validate` never imports
ragas for it. When `gate run`, `gate decide` or `gate merge` run the checks (gate/judge/checks.py),
the function is wrapped with `ragas.metrics.discrete_metric`. ragas turns an exception, a rejected
input or a value outside `allowed_values` into a result whose value is None: here each of those is
`check_error`, never a pass. `gate validate` runs the same functions on every case without ragas
(`run_checks_plain`: a direct call, the same inputs and the same value contract, `checked`), so a
check that fails a case is seen before a paid run; the run, through ragas, stays the verdict of record.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gate.model.cases import Case
from gate.model.errors import PolicyError
from gate.model.loading import sha256_hex
from gate.model.policy import LEAKING_FIELDS, Check, LoadedPolicy
from gate.model.states import Finding, State
from gate.model.wording import agree, plural

if TYPE_CHECKING:
    from gate.model.result import Result

# Case fields a check's parameters are filled from (by name). The answer key is never among them:
# a check that read the human label would grade itself.
CHECK_FIELDS: tuple[str, ...] = (
    "case_id",
    "slice",
    "partition",
    "rubric_version",
    "user_input",
    "reference",
    "response",
    "group_id",
)
MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class LoadedCheck:
    """A check whose file was imported and whose function was found."""

    spec: Check
    index: int
    path: Path
    func: Callable[..., Any]  # the raw function, never the ragas wrapper
    sha256: str  # of the file's bytes, for lineage

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def where(self) -> str:
        return f"`checks[{self.index}]` ({self.spec.file}:{self.spec.function})"

    @cached_property  # allowed on a frozen dataclass: it writes the instance __dict__ directly
    def parameters(self) -> tuple[inspect.Parameter, ...]:
        return tuple(inspect.signature(self.func).parameters.values())

    def signature_problems(self) -> list[str]:
        """What makes the function impossible to call from a case, whatever the case."""
        problems: list[str] = []
        for p in self.parameters:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
                problems.append(
                    f"parameter `{p.name}` is {p.kind.description}; ragas fills parameters by keyword; "
                    "fix: name each case field the check needs"
                )
            elif p.name in LEAKING_FIELDS:
                problems.append(f"parameter `{p.name}` would show the check the human answer key; fix: remove it")
            elif p.name not in CHECK_FIELDS and p.default is p.empty:
                problems.append(
                    f"parameter `{p.name}` is not a case field, so no case can fill it; "
                    f"fix: use only {', '.join(CHECK_FIELDS)}, or give it a default"
                )
        return problems

    def inputs(self, case: Case) -> tuple[dict[str, Any], str | None]:
        """The keyword arguments for one case, or the parameter the case cannot fill."""
        kwargs: dict[str, Any] = {}
        for p in self.parameters:
            if p.name not in CHECK_FIELDS:
                continue
            value = getattr(case, p.name)
            if value is None:
                if p.default is p.empty:
                    return {}, p.name
                continue
            kwargs[p.name] = value
        return kwargs, None


def repository_root(start: Path) -> Path:
    """The git work tree holding `start` (the nearest ancestor with `.git`), else `start` itself."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


# One import per file version and process: `gate validate` inside `gate run` must not run it twice.
_MODULES: dict[tuple[Path, str], ModuleType] = {}


def _import(path: Path, digest: str) -> ModuleType:
    key = (path, digest)
    if key in _MODULES:
        return _MODULES[key]
    name = f"gate_team_checks_{digest[:16]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    _MODULES[key] = module
    return module


def _raw_function(obj: object) -> Callable[..., Any] | None:
    """The plain function behind `obj`: itself, or the one a `@discrete_metric` wrapper holds."""
    inner = getattr(obj, "_func", None)
    if callable(inner) and hasattr(obj, "allowed_values"):
        obj = inner
    return obj if inspect.isfunction(obj) else None


def load_checks(loaded: LoadedPolicy) -> tuple[LoadedCheck, ...]:
    """Import every check the policy names; raise PolicyError listing every problem."""
    if not loaded.policy.checks:
        return ()
    root = repository_root(loaded.base_dir)
    out: list[LoadedCheck] = []
    problems: list[str] = []
    for i, spec in enumerate(loaded.policy.checks):
        key = f"`checks[{i}].file` ({spec.file})"
        path = loaded.resolve(spec.file)
        if not path.is_relative_to(root):
            problems.append(
                f"{key} resolves to {path}, outside the repository {root}: a check runs as code inside the gate, "
                "so only the repository's own files are loaded; fix: move the check into the repository"
            )
            continue
        if path.suffix != ".py" or not path.is_file():
            problems.append(f"{key}: {path} is not a Python file; fix: name a .py file, relative to the policy file")
            continue
        try:
            digest = sha256_hex(path.read_bytes())
            module = _import(path, digest)
        except (Exception, SystemExit) as exc:
            problems.append(
                f"{key}: importing it raised {type(exc).__name__}: {short_error(exc)}; fix: make the module importable"
            )
            continue
        func = _raw_function(getattr(module, spec.function, None))
        if func is None:
            problems.append(
                f"`checks[{i}].function`: {spec.file} has no function `{spec.function}`; "
                "fix: name a function defined at the top level of that file"
            )
            continue
        out.append(LoadedCheck(spec=spec, index=i, path=path, func=func, sha256=digest))
    if problems:
        raise PolicyError(str(loaded.path), problems)
    return tuple(out)


def short_error(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "(no message)"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def input_findings(checks: Sequence[LoadedCheck], cases: Sequence[Case]) -> list[Finding]:
    """`gate validate`: a parameter no case can fill, or one that some cases leave empty."""
    findings: list[Finding] = []
    for check in checks:
        problems = check.signature_problems()
        if problems:
            findings.append(
                Finding(
                    State.EVALUATION_INCOMPLETE,
                    "check_error",
                    f"check {check.name} {check.where} cannot run: " + "; ".join(problems),
                    location=check.spec.file,
                )
            )
            continue
        unfilled: dict[str, list[str]] = {}
        for case in cases:
            _, missing = check.inputs(case)
            if missing is not None:
                unfilled.setdefault(missing, []).append(case.case_id)
        for name, ids in unfilled.items():
            findings.append(
                Finding(
                    State.EVALUATION_INCOMPLETE,
                    "check_error",
                    f"check {check.name} {check.where} needs `{name}`, which {plural(len(ids), 'case')} {agree(len(ids), 'leaves', 'leave')} empty; "
                    f"fix: fill `{name}` in those cases, or give the parameter a default",
                    case_ids=tuple(ids),
                    location=check.spec.file,
                )
            )
    return findings


@dataclass(frozen=True)
class CheckValue:
    value: str | None  # None: the check gave no allowed value (see `error`)
    error: str | None = None
    unfillable: bool = False  # the case cannot fill a parameter (reported by `input_findings`)


@dataclass(frozen=True)
class CheckResults:
    """Every check's value on every case it ran on, and the blockers those values raise."""

    checks: tuple[LoadedCheck, ...]
    values: Mapping[str, Mapping[str, CheckValue]]  # case id -> check name -> value
    # `check_findings` of the values, built once where the checks ran (`checks_ran`). A result gets
    # them only through the one assembly (gate/commands/assemble.py), so no command lists them itself.
    findings: tuple[Finding, ...] = ()

    def for_record(self, case_id: str) -> dict[str, str | None] | None:
        got = self.values.get(case_id)
        return None if got is None else {name: v.value for name, v in got.items()}


NO_CHECKS = CheckResults(checks=(), values={})


def checks_ran(
    checks: Sequence[LoadedCheck], values: Mapping[str, Mapping[str, CheckValue]], cases: Sequence[Case]
) -> CheckResults:
    """The results of running `checks` on `cases`, with the blockers their values raise."""
    values_only = CheckResults(checks=tuple(checks), values=values)
    return dataclasses.replace(values_only, findings=tuple(check_findings(values_only, cases)))


def checked(check: LoadedCheck, value: object, reason: object = None) -> CheckValue:
    """A check's value against its contract: one of `allowed_values`, else an error (never a pass)."""
    if isinstance(value, str) and value in check.spec.allowed_values:
        return CheckValue(value)
    why = short_error(Exception(reason)) if isinstance(reason, str) and reason else f"returned {value!r}"
    return CheckValue(None, why)


def run_checks_plain(checks: Sequence[LoadedCheck], cases: Sequence[Case]) -> CheckResults:
    """`gate validate`: every check on every case by a direct call, without ragas (or an event loop,
    unless a check is a coroutine function): the same inputs and value contract as the run's
    `gate.judge.checks.run_checks`."""
    values: dict[str, dict[str, CheckValue]] = {}
    runnable = {c.name for c in checks if not c.signature_problems()}
    for case in cases:
        row: dict[str, CheckValue] = {}
        for check in checks:
            kwargs, missing = check.inputs(case)
            if check.name not in runnable or missing is not None:
                row[check.name] = CheckValue(None, "the case cannot fill the check's parameters", unfillable=True)
                continue
            try:
                value = check.func(**kwargs)
                if inspect.isawaitable(value):
                    import asyncio  # only for a coroutine check: `gate validate` otherwise never awaits

                    value = asyncio.run(_awaited(value))
            except (Exception, SystemExit) as exc:  # team code may raise or exit: an error, never a pass
                row[check.name] = CheckValue(None, f"{type(exc).__name__}: {short_error(exc)}")
                continue
            row[check.name] = checked(check, value)
        values[case.case_id] = row
    return checks_ran(checks, values, cases)


async def _awaited(value: Any) -> Any:
    return await value


def check_findings(results: CheckResults, cases: Sequence[Case]) -> list[Finding]:
    """Blockers from the values: errors are `check_error`; a gating check's fail is `check_failed`.

    A fail on a case people already labelled fail agrees with them (the case is in the dataset to
    test the judge): it is reported, and blocks nothing.
    """
    by_id = {c.case_id: c for c in cases}
    findings: list[Finding] = []
    for check in results.checks:
        errors: list[tuple[str, str]] = []
        failed: list[str] = []
        for case_id, row in results.values.items():
            got = row.get(check.name)
            if got is None or got.unfillable:
                continue
            if got.value is None:
                errors.append((case_id, got.error or "no value"))
            elif got.value == "fail" and check.spec.gate and by_id[case_id].human_label != "fail":
                failed.append(case_id)
        if errors:
            first_id, first_error = errors[0]
            findings.append(
                Finding(
                    State.EVALUATION_INCOMPLETE,
                    "check_error",
                    f"check {check.name} ({check.spec.file}:{check.spec.function}) gave no allowed value on "
                    f"{plural(len(errors), 'case')}, so they are not checked (first, {first_id}: {first_error}); "
                    "fix the check or the case",
                    case_ids=tuple(i for i, _ in errors),
                )
            )
        if failed:
            findings.append(
                Finding(
                    State.QUALITY_FAILED,
                    "check_failed",
                    f"gating check {check.name} ({check.spec.file}:{check.spec.function}) failed "
                    f"{plural(len(failed), 'case')} that people did not label fail",
                    case_ids=tuple(failed),
                )
            )
    return findings


def checks_summary(results: CheckResults, cases: Sequence[Case]) -> dict[str, Any]:
    """`result.json` `checks`: per check, its values counted and the cases behind each."""
    by_id = {c.case_id: c for c in cases}
    out: dict[str, Any] = {}
    for check in results.checks:
        counts: dict[str, int] = {v: 0 for v in check.spec.allowed_values}
        counts["error"] = 0
        failed: list[str] = []
        agreed: list[str] = []
        errored: list[str] = []
        for case_id, row in results.values.items():
            got = row.get(check.name)
            if got is None:
                continue
            if got.value is None:
                counts["error"] += 1
                errored.append(case_id)
                continue
            counts[got.value] += 1
            if got.value == "fail":
                (agreed if by_id[case_id].human_label == "fail" else failed).append(case_id)
        out[check.name] = {
            "gate": check.spec.gate,
            "file": check.spec.file,
            "function": check.spec.function,
            "file_sha256": check.sha256,
            "allowed_values": list(check.spec.allowed_values),
            "counts": counts,
            "failed_case_ids": failed,
            "failed_as_labelled_case_ids": agreed,
            "error_case_ids": errored,
        }
    return out


def attach_checks(result: Result, results: CheckResults, cases: Sequence[Case]) -> Result:
    """The result with `checks` (only when the policy has checks: older readers see no change)."""
    return result.with_(checks=checks_summary(results, cases)) if results.checks else result
