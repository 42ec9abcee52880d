"""`make migrate-offline`: the example's judge model is about to shut down, and the example moves to
a successor with evidence, offline.

On a copy of the example (`--out`, default gate-out-migrate/; the shipped example never changes),
against the offline provider of scripts/demo_offline.py serving two models: the example's
`gpt-4o-mini`, whose shutdown its models endpoint announces `--retires-in` days from today (7), and
which answers as the reviewers did but for the two cases `make calibrate-offline` flips; and
`candidate-mini`, a stand-in for the model a team would move to (no date announced), which gets
another case wrong. In order:

1. the pr lane: it passes, and says how many days the judge has left;
2. the calibration lane, judged by gpt-4o-mini: the current judge's measurement;
3. the release lane: `judge_retiring` (review_required), inside the 14 days before the shutdown;
4. `gate calibrate --candidate-model candidate-mini`: both judges side by side on the calibration
   lane's labelled cases (Se, Sp, an exact McNemar test), the verdict, and the change to adopt;
5. that change, applied to the copy (evaluator.model and calibration.json), then the release lane
   again: the calibration requirement holds and nothing blocks.

Each step's exit code and blockers are checked; the script exits 0 when every check held, 1 with the
step that did not. The model names are labels of the offline provider: pick a real successor from
your provider's models and deprecations pages (docs/PROVIDERS.md).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

from demo_offline import ByModel, careful_judge  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402

from gate.cli import main as gate_main  # noqa: E402
from gate.model.paths import shown_path  # noqa: E402
from gate.model.textfit import say  # noqa: E402

EXAMPLE = ROOT / "policies" / "example"
CURRENT = "gpt-4o-mini"
CANDIDATE = "candidate-mini"
CURRENT_FLIPS = ("refund-arrival-vague-incorrect-035", "password-reset-no-email-correct-037")
CANDIDATE_FLIPS = ("damaged-item-no-return-correct-042",)


class StepFailed(Exception):
    pass


def provider(policy: Path, retires_in: int) -> FakeOpenAI:
    import datetime as dt

    current, _ = careful_judge(policy, CURRENT_FLIPS)
    candidate, _ = careful_judge(policy, CANDIDATE_FLIPS)
    day = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=retires_in)
    models: dict[str, dict[str, Any]] = {
        CURRENT: {"shutdown_date": day.isoformat()},
        CANDIDATE: {"shutdown_date": None},
    }
    return FakeOpenAI(default=ByModel(current, {CANDIDATE: candidate}), models=models)


def step(title: str, args: Sequence[str | Path], expect: int) -> None:
    say(sys.stdout, f"\n== {title}\n$ gate {' '.join(str(a) for a in args)}\n", hang=0)
    sys.stdout.flush()
    code = gate_main([str(a) for a in args])
    if code != expect:
        raise StepFailed(f"{title}: gate exited {code}, expected {expect}")


def blockers(out: Path) -> list[str]:
    return [b["kind"] for b in json.loads((out / "result.json").read_text())["blockers"]]


def check(title: str, ok: bool, detail: str) -> None:
    if not ok:
        raise StepFailed(f"{title}: {detail}")


def adopt(policy: Path, migration: Path) -> None:
    """The printed change, applied to the copy: the model line, and calibration.json where calibration.file points."""
    text = policy.read_text(encoding="utf-8")
    edited, n = re.subn(rf"^(\s*model:\s*){re.escape(CURRENT)}\b", rf"\g<1>{CANDIDATE}", text, count=1, flags=re.M)
    check("adopt", n == 1, f"no `model: {CURRENT}` line in {policy}")
    policy.write_text(edited, encoding="utf-8")
    for name in ("calibration.json", "calibration.md", "calibration.svg"):
        shutil.copyfile(migration / name, policy.parent / "calibration" / name)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("gate-out-migrate"))
    ap.add_argument("--retires-in", type=int, default=7, metavar="DAYS", help="days from today to the shutdown (7)")
    args = ap.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    shutil.copytree(EXAMPLE, args.out / "example")
    policy, out = args.out / "example" / "policy.yaml", args.out
    import os

    with provider(policy, args.retires_in) as fake:
        os.environ.update(OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY="sk-offline-demo", RAGAS_DO_NOT_TRACK="true")
        try:
            run = ["run", "--policy", policy, "--no-cache", "--lane"]
            step(
                "1. the pr lane passes, and says how many days the judge has left", [*run, "pr", "--out", out / "pr"], 0
            )
            step(
                "2. the calibration lane, judged by the current model",
                [*run, "calibration", "--out", out / "calibration"],
                1,
            )
            step(
                "3. the release lane, inside the 14 days before the shutdown",
                [*run, "release", "--out", out / "release"],
                4,
            )
            check("3", blockers(out / "release") == ["judge_retiring"], f"blockers {blockers(out / 'release')}")
            calibrate = ["calibrate", "--policy", policy, "--records", out / "calibration", "--no-cache"]
            step("4. the candidate judges the calibration lane's cases, beside the current judge's records",
                 [*calibrate, "--candidate-model", CANDIDATE, "--out", out / "migration"], 0)  # fmt: skip
            migration = json.loads((out / "migration" / "migration.json").read_text())
            check("4", migration["requirement"]["meets"] is True, f"requirement {migration['requirement']}")
            adopt(policy, out / "migration")
            step(
                "5. the change adopted: the release lane again", [*run, "release", "--out", out / "release-adopted"], 0
            )
        except StepFailed as exc:
            say(sys.stderr, f"migrate_offline: {exc}")
            return 1
    say(sys.stdout, f"\nmigrate_offline: every step held; the adopted copy is {shown_path(policy.parent)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
