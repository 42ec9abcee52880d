"""Run the example suite end to end without a key or network: `make demo` (no key), `make demo-offline`.

Starts the fake OpenAI-compatible provider the tests use at a fixed address (127.0.0.1:8765, or
$GATE_DEMO_PORT), scripted to answer each case the way its human reviewers did (a careful judge),
then runs the real `gate run` (real ragas, real HTTP, metering, reports) against it and exits with
gate's exit code. The address is fixed so that runs share one judge configuration: shards merge,
`gate decide` and `gate compare` read their records, and the judgment cache serves a re-run.
Pass `--flip CASE_ID` to make the fake judge disagree on a case and watch the gate block (such a
run reads and writes no cache: its answers are not the careful judge's), `--shard I/N` to judge
one shard, `--latency S` to see the progress bar move.

`--rule-judge` (the product example, `make demo-product`) swaps the careful judge for one that
judges by a rule instead of by the reviewers' labels: it passes an answer unless the answer writes
in digits a number its reference does not contain (`digits_rule`). It reads no number written in
words, so it misses a wrong figure written out ("a month" for 14 days): a judge that misses some
failures, the same way on the labelled calibration answers as on the application's new answers.
Controls are still answered as their reviewers did. `--responses FILE` passes a product lane's
answers to `gate run`, `--base-result DIR` a base run to compare with.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai import FakeOpenAI, RecordedRequest, reply  # noqa: E402

from gate.cli import main as gate_main  # noqa: E402

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_BLOCK = r"{name}[^\n]*:\n<<<\n(.*?)\n>>>"


def digits_rule(reference: str, response: str) -> tuple[str, str]:
    """The rule judge's verdict and reason: `fail` when the response writes in digits a number the
    reference does not contain, else `pass`. Numbers written in words are not read."""
    known = set(_NUMBER.findall(reference))
    unknown = [n for n in _NUMBER.findall(response) if n not in known]
    if unknown:
        return "fail", f"The response states {unknown[0]}, a figure the reference does not contain."
    return "pass", "Every figure the response states in digits is in the reference."


def rule_judge(req: RecordedRequest) -> object:
    """Judge one rendered prompt by `digits_rule` on its REFERENCE and RESPONSE blocks."""
    reference = re.search(_BLOCK.format(name="REFERENCE"), req.prompt, re.S)
    response = re.search(_BLOCK.format(name="RESPONSE"), req.prompt, re.S)
    if reference is None or response is None:
        return reply("fail", "Could not find the reference and the response in the prompt.")
    return reply(*digits_rule(reference.group(1), response.group(1)))


def careful_judge(
    policy_path: Path, flips: Sequence[str] = (), *, by_rule: bool = False
) -> tuple[Callable[[RecordedRequest], object], str]:
    """The fake judge that answers each case as its human reviewers did (except `flips`), and the
    name of the variable the policy reads its key from. `by_rule`: only controls are answered as
    reviewed; every other answer is judged by `digits_rule`."""
    import yaml

    policy = yaml.safe_load(policy_path.read_text())
    answers: list[tuple[str, str, str]] = []
    for rel in policy["cases"]:
        for line in (policy_path.parent / rel).read_text().splitlines():
            if line.strip():
                c = json.loads(line)
                if by_rule and not c.get("expected_control_role"):
                    continue
                label = c["human_adjudication"]["label"]
                reason = c["human_adjudication"].get("reason", "")
                if c["case_id"] in flips:
                    label = "pass" if label == "fail" else "fail"
                    reason = f"Scripted disagreement (--flip): the fake judge answers {label} on this case."
                answers.append((c["response"], label, reason))

    def judge(req: RecordedRequest) -> object:
        for response, label, reason in answers:
            if response and response in req.prompt:
                return reply(label, reason or "Matches the reviewed reading of the reference.")
        if by_rule:
            return rule_judge(req)
        return reply("fail", "Could not verify the response against the reference.")

    return judge, str(policy["evaluator"].get("api_key_env", "OPENAI_API_KEY"))


DEFAULT_PORT = 8765


def _port_problem(port: int) -> str | None:
    """Why the offline provider could not listen on `port` (another demo holds it), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    example = Path("policies/example/policy.yaml")  # as the README writes it, from a checkout's root
    ap.add_argument("--policy", default=str(example if example.is_file() else ROOT / example))
    ap.add_argument("--lane", default="pr")
    ap.add_argument("--out", default="gate-out")
    ap.add_argument("--shard", metavar="I/N", help="judge shard I of N (then `gate merge` the outputs)")
    ap.add_argument("--flip", action="append", default=[], help="case id the fake judge gets wrong")
    ap.add_argument("--rule-judge", action="store_true", help="judge answers by the digits rule, not the labels")
    ap.add_argument("--responses", metavar="FILE", help="a product lane's answers (JSON Lines), passed to gate run")
    ap.add_argument("--base-result", metavar="DIR", help="a base run's output directory, passed to gate run")
    ap.add_argument("--latency", type=float, default=0.0, metavar="S", help="seconds the provider takes per reply")
    ap.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("GATE_DEMO_PORT", DEFAULT_PORT)),
        help=f"the offline provider's port (default $GATE_DEMO_PORT or {DEFAULT_PORT})",
    )
    args = ap.parse_args(argv)

    judge, key_env = careful_judge(Path(args.policy), args.flip, by_rule=args.rule_judge)
    problem = _port_problem(args.port)
    if problem is not None:
        print(
            f"demo_offline: cannot listen on 127.0.0.1:{args.port} ({problem}); fix: stop the other demo, "
            "or pass --port (or set GATE_DEMO_PORT) to another port",
            file=sys.stderr,
        )
        return 2
    fake = FakeOpenAI(default=judge, port=args.port, latency=args.latency).start()  # type: ignore[arg-type]
    try:
        os.environ["OPENAI_BASE_URL"] = fake.base_url
        os.environ[key_env] = "sk-offline-demo"
        shard = f", shard {args.shard}" if args.shard else ""
        how = (
            "a local fake that judges by a rule (it fails a figure in digits the reference lacks, and misses "
            "one written in words)"
            if args.rule_judge
            else "a local fake that answers as the reviewers did"
        )
        if args.rule_judge:
            real = "The rule judge is offline only."
        elif Path(args.policy).resolve() in {example.resolve(), (ROOT / example).resolve()}:
            # the shipped example, from this checkout's root or from the scripts' own checkout
            real = "With OPENAI_API_KEY set, `make demo` calls the real provider."
        else:  # another team's suite: say what this run can show, and where the prompt is tried
            real = (
                "This checks the wiring (policy, cases, rendering, reports, exit codes), not the prompt: the "
                f"offline judge answers with your labels. To try the prompt, set ${key_env} and run `gate run "
                f"--policy {args.policy}`, or point evaluator.base_url at a local model (docs/LOCAL_MODEL.md)."
            )
        said = (
            f"No key needed: judging {args.policy} (lane {args.lane}{shard}) with the offline provider at "
            f"{fake.base_url}, {how}. {real}"
        )
        print(textwrap.fill(said, 100, break_long_words=False, break_on_hyphens=False) + "\n", flush=True)
        gate_args = ["run", "--policy", args.policy, "--lane", args.lane, "--out", args.out]
        if args.shard:
            gate_args += ["--shard", args.shard]
        if args.responses:
            gate_args += ["--responses", args.responses]
        if args.base_result:
            gate_args += ["--base-result", args.base_result]
        if args.flip or args.rule_judge:
            gate_args.append("--no-cache")  # scripted answers never reach, or come from, the cache
        code = gate_main(gate_args)
        print(f"\n{fake.count()} HTTP requests reached the offline provider; gate exited {code}")
    finally:
        fake.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
