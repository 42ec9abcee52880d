"""People's audit of app v2.4 in the product example: policies/example-product/audit/, made through the review API.

Runs app v2.4 through the product lane offline (scripts/demo_offline.py --rule-judge), replaying the
seed of the committed audit (so its draw is kept; `--order-seed new` draws another), makes its audit
queue with `gate review queue --from` (the run's audit plan: per slice, as many answers the judge failed
and passed as the planner sizes it to decide), then two reviewers label every item through `gate review serve`'s JSON API (GET /api/next, POST
/api/label with the page's CSRF token), driven in process: each reads the answer and labels it as the
example's truth has it (scripts/make_product_example.py knows which answers are wrong: a figure the
reference lacks, in digits or in words). Writes audit/queue.jsonl and the ledger directory
audit/ledger/ (one file per reviewer), which `make demo-product` decides v2.4 with.

    .venv/bin/python scripts/make_product_audit.py        # rewrites policies/example-product/audit/
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

import demo_offline  # noqa: E402
import make_product_example  # noqa: E402

from gate.cli import main as gate  # noqa: E402

PRODUCT = ROOT / "policies" / "example-product"
REVIEWERS = ("ana", "ben")


def label_through_the_api(queue: Path, ledger: Path, wrong: set[str]) -> int:
    """Each reviewer asks for their next item and labels it until the queue has none left for them."""
    from starlette.testclient import TestClient

    from gate.review.queue import read_queue
    from gate.web.app import CSRF_HEADER, Settings, build_app
    from gate.web.desk import Desk

    items = {item.item_id: item for item in read_queue(queue).items}
    settings = Settings()
    client = TestClient(build_app(Desk(read_queue(queue), ledger, 2), settings), base_url="http://127.0.0.1")
    labelled = 0
    for reviewer in REVIEWERS:
        while True:
            shown = client.get("/api/next", params={"reviewer": reviewer}).json()["item"]
            if shown is None:
                break
            case_id = items[shown["item_id"]].case_id or ""
            verdict = "fail" if case_id in wrong else "pass"
            reason = (
                "a figure in the answer contradicts the evidence"
                if verdict == "fail"
                else "every figure matches the evidence"
            )
            body = {"reviewer": reviewer, "item_id": shown["item_id"], "label": verdict, "reason": reason}
            done = client.post("/api/label", json=body, headers={CSRF_HEADER: settings.csrf_token})
            if done.status_code != 200:
                raise SystemExit(f"make_product_audit: /api/label refused: {done.status_code} {done.text}")
            labelled += 1
    return labelled


def main(argv: Sequence[str] | None = None) -> int:
    os.chdir(ROOT)  # the queue names the run it was made from relative to here
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=PRODUCT / "audit", help="where queue.jsonl and ledger/ go")
    ap.add_argument(
        "--order-seed",
        default=None,
        help="replay this run seed (default: the seed of the queue in --out, so the committed audit's draw is kept; "
        "`--order-seed new` lets the run draw a fresh one)",
    )
    args = ap.parse_args(argv)
    policy = PRODUCT / "policy.yaml"
    seed = args.order_seed if args.order_seed != "new" else None
    if args.order_seed is None and (args.out / "queue.jsonl").is_file():
        header = json.loads((args.out / "queue.jsonl").read_text(encoding="utf-8").splitlines()[0])
        seed = header["queue"]["design"]["seed"]
    replay = ["--order-seed", seed] if seed else []
    with tempfile.TemporaryDirectory(dir=ROOT, prefix="gate-out-audit-") as tmp:
        run = Path(tmp).relative_to(ROOT) / "v2.4"
        code = demo_offline.main(
            ["--policy", str(policy), "--lane", "app", "--out", str(run), "--rule-judge",
             "--responses", str(PRODUCT / "responses" / "app-v2.4.jsonl"), *replay]
        )  # fmt: skip
        if code not in (0, 1, 4):
            print(f"make_product_audit: the v2.4 run ended {code}", file=sys.stderr)
            return 1
        if args.out.exists():
            shutil.rmtree(args.out)
        args.out.mkdir(parents=True)
        queue = args.out / "queue.jsonl"
        made = gate(["review", "queue", "--policy", str(policy), "--from", str(run), "--out", str(queue)])
        if made != 0:
            return made
    ledger = args.out / "ledger"
    ledger.mkdir()
    labelled = label_through_the_api(queue, ledger, make_product_example.wrong_answers()["v2.4"])
    print(f"make_product_audit: {labelled} labels by {', '.join(REVIEWERS)} into {ledger}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
