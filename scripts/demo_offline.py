"""Run a suite end to end without a key or network: `make demo` (no key), `make demo-offline`.

Starts the fake OpenAI-compatible provider the tests use (tests/fake_openai.py) at a fixed address
(127.0.0.1:8765, or $GATE_DEMO_PORT, or --port), scripted to answer each case the way its human
reviewers did (a careful judge), then runs the real `gate run` (real ragas, real HTTP, metering,
reports) against it and exits with gate's exit code. The address is fixed so that runs share one
judge configuration: shards merge, and `gate decide` and `gate compare` read their records.

The judge knows a case exactly: it renders every case of the policy with the policy's prompt, as
gate does, and answers a request by the sha256 of its prompt, never by a piece of text two cases
can share (a reference quoted by one case's answer). A prompt it cannot tie to one answer (no case
renders it; two cases render it with different answers; an application's answer it has no answer
for; a prompt the rule judge cannot read) gets an HTTP 400 saying what it could not tell and how
to fix the suite, which gate records as an evaluator error, never a verdict; the demo ends saying
how many it refused and why. Its answers are never cached: gate runs with --no-cache (the demo
says where gate's cache is, and takes --no-cache too). A crash of the demo is exit 3 with one paragraph, never a verdict's code.

`--flip CASE_ID` makes the fake judge disagree on a case, to watch the gate block; `--shard I/N`
judges one shard; `--latency S` lets the progress bar move.

The judge's model retires (docs/PROVIDERS.md): `--retires-in DAYS` makes the offline provider's
models endpoint (`GET /v1/models/{model}`, as OpenAI's) announce a shutdown date for the policy's
model that many days after today (counted from the day the demo runs, so the demo says the same
thing any day); at 0 or less the model has shut down and every request for it is answered 404
`model_not_found`, as a provider does. `--candidate NAME` serves a second model, with no shutdown
date announced and its own error pattern (`--candidate-flip CASE_ID`: the cases it gets wrong), and
`--calibrate-candidate RUN` runs `gate calibrate --records RUN --candidate-model NAME --out OUT`
against the provider instead of `gate run`: the migration, side by side (make migrate-offline).

`--rule-judge` (the product example, `make demo-product`) swaps the careful judge for one that
judges by a rule instead of by the reviewers' labels: it passes an answer unless the answer writes
in digits a number its reference does not contain (`digits_rule`). It reads the prompt's REFERENCE
and RESPONSE blocks (a line naming each, its text between a line `<<<` and a line `>>>`, as the
prompt `gate init` writes delimits them). It reads no number written in words, so it misses a wrong
figure written out ("a month" for 14 days): a judge that misses some failures, the same way on the
labelled calibration answers as on the application's new answers. Controls are still answered as
their reviewers did. `--answers FILE` answers the cases it names instead (one JSON line each:
`case_id`, `label`, `reason`), a product lane's among them. `--responses FILE` passes a product
lane's answers to `gate run` (and to the judge, which renders them), `--base-result DIR` a base run
to compare with. A metric lane leaves a policy's product cases alone.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import socket
import sys
import threading
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai import Behaviour, FakeOpenAI, RecordedRequest, bad_request, model_of, reply  # noqa: E402

try:
    from gate.cli import main as gate_main
    from gate.judge.render import RenderError, render_case
    from gate.model.cases import Case, load_dataset
    from gate.model.errors import GateError, UsageError
    from gate.model.paths import shown_path
    from gate.model.policy import LoadedPolicy, load_policy
    from gate.model.textfit import say
    from gate.model.wording import plural
    from gate.plan.inputs import DEFAULT_CACHE_DIR, cache_dir_for
    from gate.plan.responses import answer_cases, read_responses
except ModuleNotFoundError as exc:  # another interpreter than the virtualenv's: one paragraph, no traceback
    sys.stderr.write(
        f"demo_offline: this Python ({sys.executable}) cannot import {exc.name or 'gate'}, so the demo cannot start; "
        f"fix: run it with the virtualenv `make demo` made ({ROOT / '.venv' / 'bin' / 'python'} "
        f"{Path(__file__).resolve()} ...), or `. {ROOT / '.venv' / 'bin' / 'activate'}` first\n"
    )
    raise SystemExit(2) from None

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# The blocks the rule judge reads: a line naming the field (`REFERENCE`, `RESPONSE (untrusted ...)`)
# ending in a colon, then the text between a line `<<<` and a line `>>>`. The prompt `gate init`
# writes (gate/commands/init.py PROMPT) and the shipped examples' prompts delimit them so.
_BLOCK = r"{name}[^\n]*:\n<<<\n(.*?)\n>>>"
NO_ANSWER = "offline judge: "  # how every answer the offline judge cannot give begins


def digits_rule(reference: str, response: str) -> tuple[str, str]:
    """The rule judge's verdict and reason: `fail` when the response writes in digits a number the
    reference does not contain, else `pass`. Numbers written in words are not read."""
    known = set(_NUMBER.findall(reference))
    unknown = [n for n in _NUMBER.findall(response) if n not in known]
    if unknown:
        return "fail", f"The response states {unknown[0]}, a figure the reference does not contain."
    return "pass", "Every figure the response states in digits is in the reference."


def cannot_answer(why: str) -> Behaviour:
    """What the offline judge sends when it cannot judge a prompt: a refusal (HTTP 400), never a
    verdict, so gate records an evaluator error (`bad_request`, not retried) whose message is `why`:
    what it could not tell, then `fix:` how to mend the suite. Keep it under 250 characters:
    report.md shows a case's error message cut at 280."""
    return bad_request(message=NO_ANSWER + why)


UNREADABLE_PROMPT = (
    "cannot find the REFERENCE and RESPONSE the rule judges by in this prompt; fix: in the prompt file, write "
    "each as a line naming it and ending in ':', then its placeholder between a line <<< and a line >>> (as "
    "gate init writes the prompt)"
)


def rule_judge(req: RecordedRequest) -> Behaviour:
    """Judge one rendered prompt by `digits_rule` on its REFERENCE and RESPONSE blocks."""
    reference = re.search(_BLOCK.format(name="REFERENCE"), req.prompt, re.S)
    response = re.search(_BLOCK.format(name="RESPONSE"), req.prompt, re.S)
    if reference is None or response is None:
        return cannot_answer(UNREADABLE_PROMPT)
    return reply(*digits_rule(reference.group(1), response.group(1)))


@dataclass(frozen=True)
class Verdict:
    """What the offline judge answers for one case: a label and its reason; `rule`: judged by
    `digits_rule` on the prompt; `label` None: no answer, `reason` says why."""

    label: str | None
    reason: str
    rule: bool = False


def verdict_for(case: Case, flips: Collection[str], by_rule: bool, answers: Mapping[str, tuple[str, str]]) -> Verdict:
    """The careful judge's answer on one case: the answer table's, else the rule's (`by_rule`, but
    for controls), else its reviewers' label; `flips` turn the label over."""
    if case.case_id in answers:
        label, reason = answers[case.case_id]
    elif by_rule and not case.is_control:
        return Verdict(None, "", rule=True)
    elif case.human_adjudication is None:
        return Verdict(None, "no label for this application's answer; fix: pass --rule-judge or --answers FILE")
    else:
        label = case.human_adjudication.label
        reason = case.human_adjudication.reason or "Matches the reviewed reading of the reference."
    if case.case_id in flips:
        label = "pass" if label == "fail" else "fail"
        reason = f"Scripted disagreement (--flip): the fake judge answers {label} on this case."
    return Verdict(label, reason)


class OfflineJudge:
    """The offline provider's judge. It knows each case by the sha256 of its rendered prompt (gate
    renders a case into exactly the user message the provider receives), never by a piece of text
    two cases can share; a prompt it cannot tie to one answer gets an answer that is not a verdict,
    saying why, which gate records as an evaluator error."""

    def __init__(self, verdicts: Mapping[str, Sequence[tuple[str, Verdict]]], problem: str | None = None) -> None:
        self.verdicts = verdicts  # prompt sha256 -> (case id, verdict) of each case rendering it
        self.problem = problem  # why no case could be read (the policy's error), or None
        self.refused: Counter[str] = Counter()  # the message of each refusal sent, for the demo's last word
        self._lock = threading.Lock()

    def __call__(self, req: RecordedRequest) -> Behaviour:
        try:
            answer = self._judge(req)
        except Exception as exc:  # the fake's thread must answer: a bug here is an error, not a verdict
            answer = cannot_answer(f"it failed on this prompt ({type(exc).__name__}: {exc})"[:100])
        if answer.kind != "reply":
            with self._lock:
                self.refused[answer.message or ""] += 1
        return answer

    def refusals(self) -> str:
        """What the demo says last when the judge refused requests: how many, and the commonest why."""
        with self._lock:
            if not self.refused:
                return ""
            (why, _), total = self.refused.most_common(1)[0], sum(self.refused.values())
        others = len(self.refused) - 1
        also = f" (and {plural(others, 'other reason')}: see each case's error)" if others else ""
        return f"; the offline judge refused {total} of them: {why.removeprefix(NO_ANSWER)}{also}"

    def _judge(self, req: RecordedRequest) -> Behaviour:
        if self.problem is not None:
            return cannot_answer(self.problem)
        digest = hashlib.sha256(req.prompt.encode("utf-8")).hexdigest()
        found = self.verdicts.get(digest)
        if not found:
            return cannot_answer(
                f"no case of the policy renders this prompt (sha256 {digest[:12]}), so it has no answer for it; fix: "
                "edit no case, evidence or prompt file while the demo runs, then run it again"
            )
        if len({(v.label, v.rule) for _, v in found}) > 1:
            ids = ", ".join(case_id for case_id, _ in found)
            return cannot_answer(
                f"cases {ids} render one prompt with different labels, so it cannot tell which to answer; fix: make "
                "them differ in what the prompt shows, or agree their labels"
            )
        verdict = found[0][1]
        if verdict.rule:
            return rule_judge(req)
        if verdict.label is None:
            return cannot_answer(verdict.reason)
        return reply(verdict.label, verdict.reason)


def _policy_cases(policy_path: Path, lane: str | None, responses: Path | None) -> tuple[LoadedPolicy, list[Case]]:
    """The policy and its cases as `gate run` reads them, a product lane's with the answers of
    `responses` in place."""
    loaded = load_policy(policy_path)
    dataset = load_dataset(loaded)
    spec = loaded.policy.lanes.get(lane) if lane is not None else None
    if responses is not None and spec is not None and spec.product:
        dataset = answer_cases(loaded, dataset, lane or "", read_responses(responses)).dataset
    return loaded, dataset.cases


def careful_judge(
    policy_path: Path,
    flips: Sequence[str] = (),
    *,
    by_rule: bool = False,
    lane: str | None = None,
    responses: Path | None = None,
    answers: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[Callable[[RecordedRequest], object], str]:
    """The fake judge that answers each case as its human reviewers did (except `flips`), and the
    name of the variable the policy reads its key from. `by_rule`: only controls are answered as
    reviewed; every other answer is judged by `digits_rule`. `answers` (case id -> label, reason)
    answers the cases it names, a product lane's among them (their answers come from `responses`)."""
    key_env = "OPENAI_API_KEY"
    try:
        loaded, cases = _policy_cases(Path(policy_path), lane, responses)
    except GateError as exc:  # gate run refuses the same policy, and says why
        return OfflineJudge({}, f"it could not read the policy ({exc.message})"), key_env
    verdicts: dict[str, list[tuple[str, Verdict]]] = {}
    for case in cases:
        try:
            rendered = render_case(loaded.prompt_text, loaded.placeholders, case)
        except RenderError:
            continue  # never sent: gate withholds or refuses the case
        verdict = verdict_for(case, flips, by_rule, answers or {})
        verdicts.setdefault(rendered.prompt_sha256, []).append((case.case_id, verdict))
    return OfflineJudge(verdicts), loaded.policy.evaluator.api_key_env or key_env


class ByModel:
    """The offline provider's judge per model a request names (the policy's by default)."""

    def __init__(
        self, default: Callable[[RecordedRequest], object], others: Mapping[str, Callable[[RecordedRequest], object]]
    ) -> None:
        self.default = default
        self.others = dict(others)

    def __call__(self, req: RecordedRequest) -> object:
        return self.others.get(model_of(req) or "", self.default)(req)

    def refusals(self) -> str:
        """What the policy's model's judge refused (`OfflineJudge.refusals`), for the demo's last line."""
        return self.default.refusals() if isinstance(self.default, OfflineJudge) else ""


def offline_provider(
    policy: Path,
    flips: Sequence[str] = (),
    *,
    port: int = 0,
    retires_in: int | None = None,
    candidate: str | None = None,
    candidate_flips: Sequence[str] = (),
    **judge: Any,
) -> tuple[FakeOpenAI, str]:
    """The offline provider (not started) and the variable the policy reads its key from: the careful
    judge for the policy's model (with `flips`); with `candidate`, a second model judging with its own
    flips; with `retires_in`, a models endpoint announcing the policy's model's shutdown that many days
    from today (past it, the provider answers that model 404 model_not_found)."""
    current, key_env = careful_judge(policy, flips, **judge)
    others = {candidate: careful_judge(policy, candidate_flips, **judge)[0]} if candidate else {}
    model = _policy_model(policy)
    models: dict[str, dict[str, Any]] | None = None
    retired: set[str] = set()
    if retires_in is not None or candidate:
        models = {m: {"shutdown_date": None} for m in (model, candidate) if m}
        if retires_in is not None and model:
            day = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=retires_in)
            models[model] = {"shutdown_date": day.isoformat()}
            retired = {model} if retires_in <= 0 else set()
    fake = FakeOpenAI(default=ByModel(current, others), port=port, models=models, retired=retired)
    return fake, key_env


def _policy_model(policy: Path) -> str | None:
    try:
        return load_policy(policy).policy.evaluator.model
    except GateError:
        return None


def read_answer_table(path: Path) -> dict[str, tuple[str, str]]:
    """--answers FILE: one JSON object per line, `case_id`, `label` and optionally `reason`."""
    table: dict[str, tuple[str, str]] = {}
    problems: list[str] = []
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--answers {path}: cannot read it ({exc}); fix: pass a UTF-8 JSON Lines file") from None
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not (isinstance(row, dict) and isinstance(row.get("case_id"), str) and isinstance(row.get("label"), str)):
            problems.append(f"{path}:{n}")
            continue
        table[row["case_id"]] = (row["label"], str(row.get("reason") or f"Answered from {path.name}."))
    if problems:
        shown = ", ".join(problems[:5]) + (f" and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise UsageError(
            f"--answers: {shown}: not a JSON object with a `case_id` and a `label`; fix: write one line per case, "
            'e.g. {"case_id": "app-001", "label": "pass", "reason": "why"}'
        )
    return table


DEFAULT_PORT = 8765
EXAMPLE = Path("policies/example/policy.yaml")  # as the README writes it, from a checkout's root


def _default_port() -> int:
    """$GATE_DEMO_PORT, else DEFAULT_PORT."""
    given = os.environ.get("GATE_DEMO_PORT", "").strip()
    if not given:
        return DEFAULT_PORT
    if not given.isdigit():
        raise UsageError(
            f"GATE_DEMO_PORT={given!r} is not a port; fix: set it to a number from 1 to 65535, or unset it"
        )
    return int(given)


def _port_problem(port: int) -> str | None:
    """Why the offline provider could not listen on `port` (another demo holds it), or None."""
    if not 0 < port < 65536:
        return "a port is a number from 1 to 65535"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", default=str(EXAMPLE if EXAMPLE.is_file() else ROOT / EXAMPLE))
    ap.add_argument("--lane", default="pr")
    ap.add_argument("--out", default="gate-out")
    ap.add_argument("--shard", metavar="I/N", help="judge shard I of N (then `gate merge` the outputs)")
    ap.add_argument("--flip", action="append", default=[], help="case id the fake judge gets wrong")
    ap.add_argument("--rule-judge", action="store_true", help="judge answers by the digits rule, not the labels")
    ap.add_argument(
        "--answers",
        metavar="FILE",
        help='the judge\'s answers by case id, one JSON line each: {"case_id": ..., "label": ..., "reason": ...}',
    )
    ap.add_argument("--responses", metavar="FILE", help="a product lane's answers (JSON Lines), passed to gate run")
    ap.add_argument("--base-result", metavar="DIR", help="a base run's output directory, passed to gate run")
    ap.add_argument("--order-seed", metavar="S", help="a recorded product run's seed to replay, passed to gate run")
    ap.add_argument("--latency", type=float, default=0.0, metavar="S", help="seconds the provider takes per reply")
    ap.add_argument(
        "--retires-in",
        type=int,
        default=None,
        metavar="DAYS",
        help="the provider announces the policy's model's shutdown DAYS after today (0 or less: it has shut down)",
    )
    ap.add_argument("--candidate", metavar="NAME", help="a second model the provider serves (no shutdown date)")
    ap.add_argument("--candidate-flip", action="append", default=[], help="case id the candidate model gets wrong")
    ap.add_argument(
        "--calibrate-candidate",
        metavar="RUN",
        help="run `gate calibrate --records RUN --candidate-model CANDIDATE --out OUT` instead of `gate run`",
    )
    ap.add_argument(
        "--no-cache",
        action="store_true",
        help="the judgment cache is neither read nor written (always so: the offline judge's answers are never cached)",
    )
    ap.add_argument(
        "--port",
        type=int,
        default=_default_port(),
        help=f"the offline provider's port (default $GATE_DEMO_PORT or {DEFAULT_PORT})",
    )
    return ap


def _banner(args: argparse.Namespace, base_url: str, key_env: str) -> str:
    """What the demo says before gate's own output: which judge answers, and what the run can show."""
    if args.calibrate_candidate:
        return (
            f"No key needed: the judge of {args.policy} judged again by {args.candidate} (the calibration lane of "
            f"{args.calibrate_candidate}), with the offline provider at {base_url}, a local fake that answers as the "
            "reviewers did but for the flipped cases. Both model names are the offline provider's labels: pick a real "
            "successor from your provider's models and deprecations pages (docs/PROVIDERS.md)."
        )
    shard = f", shard {args.shard}" if args.shard else ""
    lane = f" --lane {args.lane}" if args.lane != "pr" else ""  # gate run's lane is pr unless told
    how = (
        "a local fake that judges by a rule (it fails a figure in digits the reference lacks, and misses "
        "one written in words)"
        if args.rule_judge
        else "a local fake that answers as the reviewers did"
    )
    if args.rule_judge:
        real = "The rule judge is offline only."
    elif Path(args.policy).resolve() in {EXAMPLE.resolve(), (ROOT / EXAMPLE).resolve()}:
        # the shipped example, from this checkout's root or from the scripts' own checkout
        real = "With OPENAI_API_KEY set, `make demo` calls the real provider."
    else:  # another team's suite: say what this run can show, and where the prompt is tried
        real = (
            "This checks the wiring (policy, cases, rendering, reports, exit codes), not the prompt: the "
            f"offline judge answers with your labels. To try the prompt, set ${key_env} and run `gate run "
            f"--policy {args.policy}{lane}`, or point evaluator.base_url at a local model (docs/LOCAL_MODEL.md)."
        )
    said = (
        f"No key needed: judging {args.policy} (lane {args.lane}{shard}) with the offline provider at "
        f"{base_url}, {how}. {real} {_cache_said(Path(args.policy))}"
    )
    return said


def _cache_said(policy: Path) -> str:
    """Where gate run's judgment cache is for this policy, and that this run leaves it alone."""
    try:
        where = shown_path(cache_dir_for(load_policy(policy), True, None) or Path(DEFAULT_CACHE_DIR))
    except GateError:
        where = DEFAULT_CACHE_DIR
    return f"Its answers are never cached: this run neither reads nor writes the judgment cache ({where}/)."


def main(argv: Sequence[str] | None = None) -> int:
    """The demo; a crash is exit 3 with one paragraph, never a verdict's code."""
    try:
        return _main(argv)
    except UsageError as exc:
        say(sys.stderr, f"demo_offline: {exc.message}")
        return 2
    except Exception as exc:
        say(
            sys.stderr,
            f"demo_offline: the offline demo crashed ({type(exc).__name__}: {exc}). This is a bug of the offline "
            "provider, not a verdict on your cases (exit 3); fix: run `gate validate --policy` on the policy, and "
            "report the error with the command you ran",
        )
        return 3


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    answers = read_answer_table(Path(args.answers)) if args.answers else None
    responses = Path(args.responses) if args.responses else None
    if args.calibrate_candidate and not args.candidate:
        raise UsageError("--calibrate-candidate needs --candidate NAME: the model to move the judge to")
    problem = _port_problem(args.port)
    if problem is not None:
        say(
            sys.stderr,
            f"demo_offline: cannot listen on 127.0.0.1:{args.port} ({problem}); fix: stop the other demo, "
            "or pass --port (or set GATE_DEMO_PORT) to another port",
        )
        return 2
    fake, key_env = offline_provider(
        Path(args.policy),
        args.flip,
        port=args.port,
        retires_in=args.retires_in,
        candidate=args.candidate,
        candidate_flips=args.candidate_flip,
        by_rule=args.rule_judge,
        lane=args.lane,
        responses=responses,
        answers=answers,
    )
    fake.latency = args.latency
    fake.start()
    try:
        os.environ["OPENAI_BASE_URL"] = fake.base_url
        os.environ[key_env] = "sk-offline-demo"
        say(sys.stdout, _banner(args, fake.base_url, key_env) + "\n", hang=0)
        sys.stdout.flush()
        gate_args = ["run", "--policy", args.policy, "--lane", args.lane, "--out", args.out, "--no-cache"]
        if args.calibrate_candidate:
            gate_args = ["calibrate", "--policy", args.policy, "--records", args.calibrate_candidate]
            gate_args += ["--candidate-model", args.candidate, "--out", args.out, "--no-cache"]
        if args.shard:
            gate_args += ["--shard", args.shard]
        if args.responses:
            gate_args += ["--responses", args.responses]
        if args.base_result:
            gate_args += ["--base-result", args.base_result]
        if args.order_seed:
            gate_args += ["--order-seed", args.order_seed]
        code = gate_main(gate_args)
        said = fake.default.refusals() if isinstance(fake.default, ByModel) else ""
        say(sys.stdout, f"\n{fake.count()} HTTP requests reached the offline provider{said}; gate exited {code}")
    finally:
        fake.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
