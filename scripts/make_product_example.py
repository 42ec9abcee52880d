"""Write the product-gate example's data: `python scripts/make_product_example.py` (or `--check`).

policies/example-product/ gates a fictional support assistant's own answers. Its cases and its two
response files are generated here from templates, with a fixed seed, so anyone can regenerate them
byte for byte (`--check` says whether the committed files are what this script writes;
tests/lanes/test_product_example.py runs it).

The truth rule (how every answer's label is decided): each question has one required figure (the
refund window, the reset link's lifetime, the shipping time...). An answer passes when it states
that figure as the reference does, in digits or in equivalent words ("14 calendar days" or "two
weeks"); it fails when it states another figure, in digits ("30 calendar days") or in words ("a
month"). Nothing else in an answer varies in a way that matters.

What is written:
- cases/controls.jsonl: the eight control cases of policies/example (copied), judged first.
- cases/calibration.jsonl: 180 labelled answers per slice (60 fail, 120 pass), labelled by the truth
  rule, for `gate calibrate`. Of each slice's 60 failing answers, 10 write the wrong figure in words.
- cases/product.jsonl: 120 product questions per slice (user_input, reference, slice; no answer,
  no label).
- responses/app-v2.3.jsonl: the app version that passes. Four answers are wrong: one in
  billing-policy-critical, one in account-security (its wrong figure in words), two in
  shipping-general.
- responses/app-v2.4.jsonl: the same answers, except that v2.4 quotes a 30-day refund window for
  annual plans (the monthly plan's old terms): 30 of the 120 billing-policy-critical answers are
  wrong, 5 of them writing it in words ("a month").
- evidence/support.yaml and prompts/refund-answer.txt: copied from policies/example.

The offline judge (scripts/demo_offline.py --rule-judge) reads only the digits: it fails an answer
that writes in digits a number the reference does not contain, and passes the rest. So it misses
every wrong figure written in words, on the calibration answers as on the product answers: its
sensitivity measured in calibration (50 of 60 per slice) is the one it has on the product answers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "policies" / "example"
TARGET = ROOT / "policies" / "example-product"
SEED = 20261201
RUBRIC = "support-answer-reviewed-v2"
PROVENANCE = {
    "source": "synthetic: generated from templates by scripts/make_product_example.py; no customer data",
    "collected": "2026-12",
}
SLICES = ("billing-policy-critical", "account-security", "shipping-general")
CAL_FAIL, CAL_PASS, CAL_FAIL_IN_WORDS = 60, 120, 10  # per slice
PRODUCT_PER_SLICE = 120


@dataclass(frozen=True)
class Topic:
    """One kind of question, the figure its answer needs, and ways to state it right and wrong."""

    name: str
    slice: str
    evidence: str
    questions: tuple[str, ...]
    answers: tuple[str, ...]  # each has one {fig}
    right_digits: tuple[str, ...]
    right_words: tuple[str, ...]
    wrong_digits: tuple[str, ...]
    wrong_words: tuple[str, ...]
    truth: str  # the figure as the reference states it, for the labels' reasons


PLANS = ("monthly", "annual")

TOPICS: tuple[Topic, ...] = (
    Topic(
        "refund-window",
        "billing-policy-critical",
        "refund-policy-window",
        (
            "I was charged for my {plan} plan {days} days ago. Can I still get my money back?",
            "How long do I have to ask for a refund on my {plan} subscription?",
            "Is there a deadline for refunding {a_plan} plan charge, and where do I ask?",
            "My {plan} plan renewed {days} days ago and I don't want it. Is a refund still possible?",
            "What is the refund window for {a_plan} subscription charge?",
        ),
        (
            "Charges for {plan} subscriptions are refundable in full if you request the refund within {fig} "
            "of the charge date. You can ask under Settings > Billing > Request refund.",
            "You can get a full refund as long as the request is made within {fig} of the charge; after that "
            "it is no longer eligible. Use Settings > Billing > Request refund in the app.",
            "{a_plan} plan charge can be refunded in full when you submit the request within {fig} of being "
            "charged. Go to Settings > Billing > Request refund to send it.",
        ),
        ("14 calendar days", "14 days"),
        ("two weeks", "fourteen calendar days"),
        ("30 calendar days", "7 days", "21 days"),
        ("a month", "thirty days", "one week"),
        "14 calendar days",
    ),
    Topic(
        "trial-refund",
        "billing-policy-critical",
        "trial-conversion-refund",
        (
            "My free trial turned into a paid plan and I was charged. Can I get that first charge back?",
            "I forgot to cancel my trial and got billed. How long do I have to ask for a refund?",
            "The trial converted this morning and charged my card. Is that charge refundable?",
            "Can I still get a refund for the first charge after my trial ended, and until when?",
        ),
        (
            "The first charge after a trial converts is refundable only if you request the refund within {fig} "
            "of that charge; the usual refund window does not apply to it.",
            "Yes, if you are quick: a refund for the first charge after the trial is possible only when you ask "
            "within {fig} of being charged.",
            "That first post-trial charge can be refunded, but only if the request is made within {fig} of the "
            "charge. After that it is not refundable.",
        ),
        ("48 hours",),
        ("two days", "forty-eight hours"),
        ("72 hours", "24 hours", "7 days"),
        ("a week", "three days", "one day"),
        "48 hours",
    ),
    Topic(
        "reset-link",
        "account-security",
        "password-reset",
        (
            "How long does a password reset link stay valid?",
            "I requested a reset link yesterday evening and only now opened it. Will it still work?",
            "My reset email came a while ago. How long do I have to use the link?",
            "Does the password reset link expire, and can I use it twice?",
        ),
        (
            "A password reset link expires {fig} after it is sent and works only once, so request a new one "
            "if yours is older.",
            "Reset links are valid for {fig} from the moment they are sent, and each link can be used only once.",
            "The link works once and only for {fig} after we send it; after that, ask for a fresh link.",
        ),
        ("30 minutes",),
        ("half an hour", "thirty minutes"),
        ("24 hours", "2 hours", "60 minutes"),
        ("a day", "an hour", "twenty-four hours"),
        "30 minutes",
    ),
    Topic(
        "two-factor-wait",
        "account-security",
        "two-factor-recovery",
        (
            "I lost my phone with the authenticator app and I have no backup codes. How do I get back in?",
            "How long does it take to remove two-factor if I don't have my device or any backup code?",
            "Can support switch off my two-factor today? I lost the device and the codes.",
            "What happens after I send the recovery form for my two-factor account?",
        ),
        (
            "Without a backup code, two-factor can only be removed through identity verification: send the "
            "account recovery form with a photo of a government-issued ID. Removal happens after a "
            "mandatory waiting period of {fig}, which support cannot shorten.",
            "Submit the account recovery form with a photo of your government-issued ID. Two-factor is removed "
            "after a mandatory waiting period of {fig}; nobody can bypass or shorten it.",
        ),
        ("72 hours",),
        ("three days", "seventy-two hours"),
        ("24 hours", "48 hours", "7 days"),
        ("one day", "two days", "a week"),
        "72 hours",
    ),
    Topic(
        "lockout",
        "account-security",
        "account-lockout",
        (
            "My account says it is locked after I typed the wrong password a few times. How long will it stay locked?",
            "I'm locked out after too many sign-in attempts. When can I try again?",
            "Can you unlock my account? It locked after several failed logins.",
        ),
        (
            "After repeated failed sign-ins the account is locked for {fig}. The lock ends on its own after "
            "that, or right away if you complete a password reset; support cannot unlock it manually.",
            "The lock lasts {fig} and then lifts by itself. A password reset ends it immediately. Support "
            "agents cannot unlock accounts by hand.",
        ),
        ("1 hour",),
        ("one hour", "an hour"),
        ("24 hours", "30 minutes", "3 hours"),
        ("a day", "half an hour", "three hours"),
        "1 hour",
    ),
    Topic(
        "standard-shipping",
        "shipping-general",
        "shipping-times",
        (
            "How long does standard shipping take?",
            "I chose standard shipping for my order. When should it arrive?",
            "What's the delivery time for standard shipping inside the US?",
        ),
        (
            "Standard shipping within the contiguous United States takes {fig} after dispatch.",
            "Once your order is dispatched, standard shipping takes {fig} within the contiguous US.",
        ),
        ("3 to 5 business days",),
        ("three to five business days",),
        ("7 to 10 business days", "8 to 12 business days", "10 business days"),
        ("about two weeks", "seven to ten business days", "a month"),
        "3 to 5 business days",
    ),
    Topic(
        "free-shipping",
        "shipping-general",
        "shipping-times",
        (
            "Is standard shipping free?",
            "How much do I need to spend to get free shipping?",
            "What does standard shipping cost on a small order?",
        ),
        (
            "Standard shipping is free on orders of {fig} or more; below that it costs $6.95.",
            "Orders of {fig} or more ship free with standard shipping. Smaller orders pay $6.95 for it.",
        ),
        ("$50",),
        ("fifty dollars",),
        ("$25", "$35", "$75"),
        ("twenty-five dollars", "a hundred dollars", "thirty-five dollars"),
        "$50",
    ),
    Topic(
        "damaged-item",
        "shipping-general",
        "damaged-item-returns",
        (
            "My order arrived broken. What should I do?",
            "The item I received is damaged. Until when can I report it?",
            "A parcel came with a cracked product inside. Can I still get it replaced?",
        ),
        (
            "Report the damage within {fig} of delivery with a photo of it, and we replace or refund the item "
            "at no cost. You don't need to send it back unless we email you a prepaid return label.",
            "Send us a photo of the damage within {fig} of delivery; the item is then replaced or refunded for "
            "free, and you keep it unless support emails a prepaid label.",
        ),
        ("30 days",),
        ("thirty days",),
        ("14 days", "60 days", "7 days"),
        ("two weeks", "sixty days", "a week"),
        "30 days",
    ),
)


@dataclass(frozen=True)
class Answer:
    case_id: str
    topic: Topic
    user_input: str
    template: str
    plan: str


def _question(rng: random.Random, topic: Topic, case_id: str, plan: str | None = None) -> Answer:
    drawn = rng.choice(PLANS)
    plan = plan or drawn
    days = rng.randint(2, 40)
    return Answer(
        case_id,
        topic,
        rng.choice(topic.questions).format(plan=plan, a_plan=_a(plan), days=days),
        rng.choice(topic.answers),
        plan,
    )


def _a(plan: str) -> str:
    return f"an {plan}" if plan[0] in "aeiou" else f"a {plan}"


def _say(answer: Answer, fig: str) -> str:
    text = answer.template.format(plan=answer.plan, a_plan=_a(answer.plan), fig=fig)
    return text[0].upper() + text[1:]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _line(obj: dict[str, object]) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _slice_topics(slice_name: str) -> list[Topic]:
    return [t for t in TOPICS if t.slice == slice_name]


def _references() -> dict[str, str]:
    import yaml

    evidence = yaml.safe_load((SOURCE / "evidence" / "support.yaml").read_text(encoding="utf-8"))
    return {key: str(doc["text"]) for key, doc in evidence.items()}


def _calibration(rng: random.Random, refs: dict[str, str]) -> list[str]:
    """180 labelled answers per slice: 60 with a wrong figure (10 of them in words), 120 right."""
    lines: list[str] = []
    for slice_name in SLICES:
        topics = _slice_topics(slice_name)
        kinds = ["wrong_words"] * CAL_FAIL_IN_WORDS + ["wrong_digits"] * (CAL_FAIL - CAL_FAIL_IN_WORDS)
        kinds += ["right_words"] * (CAL_PASS // 4) + ["right_digits"] * (CAL_PASS - CAL_PASS // 4)
        rng.shuffle(kinds)
        for i, kind in enumerate(kinds):
            topic = topics[i % len(topics)]
            a = _question(rng, topic, f"{topic.name}-cal-{i + 1:03d}")
            fig = rng.choice(getattr(topic, kind))
            response = _say(a, fig)
            label = "fail" if kind.startswith("wrong") else "pass"
            reason = (
                f"States {fig!r} where the reference says {topic.truth}."
                if label == "fail"
                else f"States the required figure ({fig}, the reference's {topic.truth}) and nothing that contradicts it."
            )
            lines.append(
                _line(
                    {
                        "case_id": a.case_id,
                        "partition": "calibration",
                        "slice": slice_name,
                        "rubric_version": RUBRIC,
                        "user_input": a.user_input,
                        "reference": refs[topic.evidence],
                        "response": response,
                        "response_sha256": _sha(response),
                        "human_adjudication": {"label": label, "reason": reason, "evidence": [topic.evidence]},
                        "provenance": PROVENANCE,
                    }
                )
            )
    return lines


# The wrong answers of v2.3 (passing): (slice, index in the slice, how it is wrong).
V23_WRONG = {
    ("billing-policy-critical", 7): "wrong_digits",
    ("account-security", 11): "wrong_words",
    ("shipping-general", 5): "wrong_digits",
    ("shipping-general", 63): "wrong_digits",
}
V24_REGRESSION_IN_WORDS = 5  # of v2.4's 30 wrong annual-plan refund windows, written "a month"


def _product(rng: random.Random, refs: dict[str, str]) -> tuple[list[str], list[str], list[str], dict[str, set[str]]]:
    """The product questions, the two versions' answers to them, and which answers are wrong."""
    cases: list[str] = []
    v23: list[str] = []
    v24: list[str] = []
    wrong: dict[str, set[str]] = {"v2.3": set(), "v2.4": set()}
    for slice_name in SLICES:
        topics = _slice_topics(slice_name)
        questions: list[Answer] = []
        for i in range(PRODUCT_PER_SLICE):
            topic = topics[i % len(topics)]
            # refund-window questions alternate annual and monthly plans
            plan = PLANS[(i // len(topics)) % 2] if topic.name == "refund-window" else None
            questions.append(_question(rng, topic, f"{topic.name}-app-{i + 1:03d}", plan))
        annual = [i for i, a in enumerate(questions) if a.topic.name == "refund-window" and a.plan == "annual"]
        in_words = set(rng.sample(annual, V24_REGRESSION_IN_WORDS)) if annual else set()
        for i, a in enumerate(questions):
            topic = a.topic
            cases.append(
                _line(
                    {
                        "case_id": a.case_id,
                        "partition": "product",
                        "slice": slice_name,
                        "rubric_version": RUBRIC,
                        "user_input": a.user_input,
                        "reference": refs[topic.evidence],
                        "provenance": PROVENANCE,
                    }
                )
            )
            kind = V23_WRONG.get((slice_name, i), "right_words" if rng.random() < 0.25 else "right_digits")
            first = _say(a, rng.choice(getattr(topic, kind)))
            v23.append(_line({"case_id": a.case_id, "response": first, "generation": _generation("2.3.0")}))
            second = first
            if i in annual:
                second = _say(a, "a month" if i in in_words else "30 calendar days")
            for version, wrong_now in (
                ("v2.3", kind.startswith("wrong")),
                ("v2.4", kind.startswith("wrong") or i in annual),
            ):
                if wrong_now:
                    wrong[version].add(a.case_id)
            v24.append(_line({"case_id": a.case_id, "response": second, "generation": _generation("2.4.0")}))
    return cases, v23, v24, wrong


def _generation(version: str) -> dict[str, str]:
    return {
        "app_version": f"example-support-assistant {version} (fictional)",
        "model": "none: generated from templates by scripts/make_product_example.py",
    }


def _controls() -> list[str]:
    lines = (SOURCE / "cases" / "support.jsonl").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and json.loads(line).get("expected_control_role")]


def build() -> dict[str, str]:
    """Every generated file of policies/example-product/ (path relative to it -> text)."""
    return generate()[0]


def wrong_answers() -> dict[str, set[str]]:
    """The case ids whose answer is wrong by the truth rule, per app version ("v2.3", "v2.4")."""
    return generate()[1]


def generate() -> tuple[dict[str, str], dict[str, set[str]]]:
    rng = random.Random(SEED)
    refs = _references()
    calibration = _calibration(rng, refs)
    cases, v23, v24, wrong = _product(rng, refs)
    joined = {
        "cases/controls.jsonl": _controls(),
        "cases/calibration.jsonl": calibration,
        "cases/product.jsonl": cases,
        "responses/app-v2.3.jsonl": v23,
        "responses/app-v2.4.jsonl": v24,
    }
    files = {path: "\n".join(lines) + "\n" for path, lines in joined.items()}
    for copied in ("evidence/support.yaml", "prompts/refund-answer.txt"):
        files[copied] = (SOURCE / copied).read_text(encoding="utf-8")
    return files, wrong


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if a committed file differs from what this writes")
    ap.add_argument("--out", type=Path, default=TARGET, help=f"directory to write (default {TARGET.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    files = build()
    if args.check:
        stale = [
            p
            for p, text in files.items()
            if not (args.out / p).is_file() or (args.out / p).read_text(encoding="utf-8") != text
        ]
        for path in stale:
            print(f"{args.out / path} differs from what scripts/make_product_example.py writes", file=sys.stderr)
        if stale:
            print("fix: run `python scripts/make_product_example.py` and commit the files", file=sys.stderr)
        return 1 if stale else 0
    for path, text in files.items():
        target = args.out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} files under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
