"""How many labelled answers and product answers give what precision on a slice's failure rate.

For a judge with true sensitivity Se and specificity Sp and a product whose true failure rate is p,
it prints the interval gate/estimate/failure_rate.py reports (confidence 95%) at the expected counts:
m_f labelled failing answers of which round(Se m_f) caught, m_p labelled passing answers of which
round(Sp m_p) passed, N answers of which round(N q) judged fail (q = Se p + (1 - Sp)(1 - p)). The
interval's high is the smallest limit that slice could pass; with stop_when_decided its k/n bound
is the confidence sequence (wider, the price of looking after every judgment).

    .venv/bin/python bench/product_precision.py                       # Se 0.9, Sp 0.99, p 2%
    .venv/bin/python bench/product_precision.py --se 0.8 --sp 0.995 --rate 0.05
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gate.estimate.failure_rate import failure_rate, judge_accuracy  # noqa: E402

CONFIDENCE = 0.95


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--se", type=float, default=0.9)
    ap.add_argument("--sp", type=float, default=0.99)
    ap.add_argument("--rate", type=float, default=0.02, help="the product's true failure rate")
    ap.add_argument("--fails", default="30,100,300", help="labelled failing answers")
    ap.add_argument("--passes", default="100,1000,3000", help="labelled passing answers")
    ap.add_argument("--answers", default="200,1000,5000", help="product answers judged")
    ap.add_argument("--sequential", action="store_true", help="the k/n bound of stop_when_decided")
    args = ap.parse_args()
    q = args.se * args.rate + (1 - args.sp) * (1 - args.rate)
    answers = [int(v) for v in args.answers.split(",")]
    design = "stop_when_decided (confidence sequence)" if args.sequential else "all answers judged"
    print(f"Se {args.se:g}, Sp {args.sp:g}, true failure rate {pct(args.rate)}, confidence {CONFIDENCE:g}, {design}")
    print()
    print("| labelled failing | labelled passing | " + " | ".join(f"{n:,} answers" for n in answers) + " |")
    print("|---:|---:|" + "---|" * len(answers))
    for mf in (int(v) for v in args.fails.split(",")):
        for mp in (int(v) for v in args.passes.split(",")):
            tf, tp = round(args.se * mf), round(args.sp * mp)
            judge = judge_accuracy(
                true_fail=tf, false_pass=mf - tf, true_pass=tp, false_fail=mp - tp, confidence=CONFIDENCE
            )
            cells = []
            for n in answers:
                r = failure_rate(
                    judged_fail=round(n * q), n=n, judge=judge, confidence=CONFIDENCE, sequential=args.sequential
                )
                cells.append(f"{pct(r.low)}-{pct(r.high)}")
            print(f"| {mf:,} | {mp:,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
