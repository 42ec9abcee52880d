"""Run the example suite end to end without a key or network: `make demo-offline`.

Starts the fake OpenAI-compatible provider the tests use on 127.0.0.1, scripted to answer each
case the way its human reviewers did (a careful judge), then runs the real `gate run` (real
ragas, real HTTP, metering, reports) against it. Pass `--flip CASE_ID` to make the fake judge
disagree on a case and watch the gate block.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai import FakeOpenAI, RecordedRequest, reply  # noqa: E402

from gate.cli import main as gate_main  # noqa: E402


def careful_judge(policy_path: Path, flips: Sequence[str] = ()) -> tuple[Callable[[RecordedRequest], object], str]:
    """The fake judge that answers each case as its human reviewers did (except `flips`), and the
    name of the variable the policy reads its key from."""
    import yaml

    policy = yaml.safe_load(policy_path.read_text())
    answers: list[tuple[str, str, str]] = []
    for rel in policy["cases"]:
        for line in (policy_path.parent / rel).read_text().splitlines():
            if line.strip():
                c = json.loads(line)
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
        return reply("fail", "Could not verify the response against the reference.")

    return judge, str(policy["evaluator"].get("api_key_env", "OPENAI_API_KEY"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--policy", default=str(ROOT / "policies/example/policy.yaml"))
    ap.add_argument("--lane", default="pr")
    ap.add_argument("--out", default="gate-out")
    ap.add_argument("--flip", action="append", default=[], help="case id the fake judge gets wrong")
    args = ap.parse_args()

    judge, key_env = careful_judge(Path(args.policy), args.flip)
    with FakeOpenAI(default=judge) as fake:  # type: ignore[arg-type]
        os.environ["OPENAI_BASE_URL"] = fake.base_url
        os.environ[key_env] = "sk-offline-demo"
        print(f"fake provider on {fake.base_url}; judging {args.policy} lane {args.lane}\n", flush=True)
        code = gate_main(["run", "--policy", args.policy, "--lane", args.lane, "--out", args.out, "--no-cache"])
        print(f"\n{fake.count()} HTTP requests reached the fake provider; gate exited {code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
