"""Run the example suite end to end without a key or network: `make demo` (no key), `make demo-offline`.

Starts the fake OpenAI-compatible provider the tests use at a fixed address (127.0.0.1:8765, or
$GATE_DEMO_PORT), scripted to answer each case the way its human reviewers did (a careful judge),
then runs the real `gate run` (real ragas, real HTTP, metering, reports) against it and exits with
gate's exit code. The address is fixed so that runs share one judge configuration: shards merge,
`gate decide` and `gate compare` read their records, and the judgment cache serves a re-run.
Pass `--flip CASE_ID` to make the fake judge disagree on a case and watch the gate block (such a
run reads and writes no cache: its answers are not the careful judge's), `--shard I/N` to judge
one shard, `--latency S` to see the progress bar move.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import textwrap
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
    ap.add_argument("--latency", type=float, default=0.0, metavar="S", help="seconds the provider takes per reply")
    ap.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("GATE_DEMO_PORT", DEFAULT_PORT)),
        help=f"the offline provider's port (default $GATE_DEMO_PORT or {DEFAULT_PORT})",
    )
    args = ap.parse_args(argv)

    judge, key_env = careful_judge(Path(args.policy), args.flip)
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
        said = (
            f"No key needed: judging {args.policy} (lane {args.lane}{shard}) with the offline provider at "
            f"{fake.base_url}, a local fake that answers as the reviewers did. With OPENAI_API_KEY set, "
            "`make demo` calls the real provider."
        )
        print(textwrap.fill(said, 100, break_long_words=False, break_on_hyphens=False) + "\n", flush=True)
        gate_args = ["run", "--policy", args.policy, "--lane", args.lane, "--out", args.out]
        if args.shard:
            gate_args += ["--shard", args.shard]
        if args.flip:
            gate_args.append("--no-cache")  # scripted disagreements never reach, or come from, the cache
        code = gate_main(gate_args)
        print(f"\n{fake.count()} HTTP requests reached the offline provider; gate exited {code}")
    finally:
        fake.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
