"""Partition leakage: one item, or a near copy of it, in two partitions.

Held-out results only certify a configuration if nothing tuned on dev or calibration has seen the
held-out items. Two signals: (a) the same `group_id` (a paraphrase family) in two partitions;
(b) near-duplicate `user_input`+`response` text across partitions, found with MinHash/LSH and
confirmed with the exact shingle Jaccard (see minhash.py). Pairs within one partition are not
leakage; a cross-partition pair that shares a group_id is already reported by (a).

A product lane's partitions are left out of both: their cases are the application's questions and
its new answers, gated rather than used to certify the judge, and they are meant to be like the
labelled calibration answers (the judge's measured miss rates carry over only to answers like the
ones it was measured on), so an answer seen in both is no leak.
"""

from __future__ import annotations

import heapq
from collections import Counter

from gate.model.cases import Case
from gate.model.states import Finding, State
from gate.validate.context import MAX_FINDINGS_PER_KIND, Context, capped, describe_locations
from gate.validate.shingles import near_duplicates_exact

# Up to this many texts, comparing all pairs exactly in plain Python is cheaper than importing
# numpy for MinHash/LSH (most of `gate validate`'s start-up on a small suite), and finds the same.
EXACT_MAX_TEXTS = 200

KIND = "partition_leak"


def _measured(ctx: Context) -> list[int]:
    """Indexes of the cases leakage is about: every case outside a product lane's partitions."""
    product = ctx.policy.product_partitions
    return [i for i, case in enumerate(ctx.cases) if case.partition not in product]


def group_leaks(ctx: Context) -> list[Finding]:
    families: dict[str, dict[str, list[int]]] = {}
    for i in _measured(ctx):
        case = ctx.cases[i]
        if case.group_id:
            families.setdefault(case.group_id, {}).setdefault(case.partition, []).append(i)
    findings: list[Finding] = []
    leaked_ids: list[str] = []
    for group_id, by_partition in families.items():
        if len(by_partition) < 2:
            continue
        idx = [i for members in by_partition.values() for i in members]
        ids = tuple(ctx.cases[i].case_id for i in idx)
        leaked_ids += ids
        spans = "; ".join(
            f"{partition}: {describe_locations(list(dict.fromkeys(ctx.cases[i].case_id for i in members)))}"
            for partition, members in by_partition.items()
        )
        locations = [ctx.where(i) for i in idx]
        findings.append(
            Finding(
                State.QUALITY_FAILED,
                KIND,
                f"{describe_locations(locations)}: group_id {group_id!r} spans partitions ({spans}), so one item "
                "is seen on both sides; fix: move every case of the group into one partition",
                case_ids=ids,
                location=locations[0],
            )
        )
    summary = Finding(
        State.QUALITY_FAILED,
        KIND,
        f"{len(findings) - MAX_FINDINGS_PER_KIND} more group_ids span several partitions (every case of the "
        "leaked groups is listed in case_ids); fix: keep each group in one partition",
        case_ids=tuple(leaked_ids),
    )
    return capped(findings, summary)


def text_leaks(ctx: Context) -> list[Finding]:
    kept = _measured(ctx)
    cases = [ctx.cases[i] for i in kept]
    if len(cases) < 2:
        return []
    settings = ctx.policy.leakage
    if len({c.partition for c in cases}) < 2:
        return []
    # The search sees each text once per partition and group_id: copies of one case are near-duplicates
    # of whatever the case is, and comparing every copy with every other would cost the square of the
    # copies (200,000 copies of one case across two partitions never finished).
    copies: dict[tuple[str, str, str | None], list[int]] = {}
    for pos, c in enumerate(cases):
        copies.setdefault((f"{c.user_input}\n{c.response}", c.partition, c.group_id), []).append(pos)
    members = list(copies.values())
    partition_code: dict[str, int] = {}
    groups = [partition_code.setdefault(cases[m[0]].partition, len(partition_code)) for m in members]
    texts = [text for text, _partition, _group in copies]

    def same_family(i: int, j: int) -> bool:
        gi = cases[members[i][0]].group_id
        return gi is not None and gi == cases[members[j][0]].group_id

    if len(texts) <= EXACT_MAX_TEXTS:
        near_duplicates = near_duplicates_exact
    else:
        from gate.validate.minhash import near_duplicates
    hits = near_duplicates(texts, groups, settings.jaccard_threshold, settings.shingle_words, skip=same_family)
    return _leak_findings(ctx, kept, cases, [(members[h.first], members[h.second], h.jaccard) for h in hits])


def _leak_findings(
    ctx: Context, kept: list[int], cases: list[Case], hits: list[tuple[list[int], list[int], float]]
) -> list[Finding]:
    """One finding per pair of cases (the first MAX_FINDINGS_PER_KIND, in input order), then one for
    the rest, counted and listed by case without enumerating every pair of copies."""
    threshold = ctx.policy.leakage.jaccard_threshold
    # The smallest pairs of two sides lie within the first MAX_FINDINGS_PER_KIND of each side.
    head = heapq.nsmallest(
        MAX_FINDINGS_PER_KIND + 1,
        (
            (min(a, b), max(a, b), jac)
            for left, right, jac in hits
            for a in left[: MAX_FINDINGS_PER_KIND + 1]
            for b in right[: MAX_FINDINGS_PER_KIND + 1]
        ),
    )
    findings: list[Finding] = []
    for first, second, jac in head[:MAX_FINDINGS_PER_KIND]:
        a, b = cases[first], cases[second]
        where = f"{ctx.where(kept[first])} and {ctx.where(kept[second])}"
        findings.append(
            Finding(
                State.QUALITY_FAILED,
                KIND,
                f"{where}: cases {a.case_id} ({a.partition}) and {b.case_id} ({b.partition}) are near-duplicates "
                f"(user_input+response Jaccard {jac:.2f} >= {threshold}); fix: drop one, or move both into "
                "one partition and give them a shared group_id",
                case_ids=(a.case_id, b.case_id),
                location=ctx.where(kept[first]),
                extra={"partitions": [a.partition, b.partition], "jaccard": round(jac, 4)},
            )
        )
    if len(head) <= MAX_FINDINGS_PER_KIND:
        return findings
    pairs_of: Counter[int] = Counter()
    for left, right, _jac in hits:
        for pos in left:
            pairs_of[pos] += len(right)
        for pos in right:
            pairs_of[pos] += len(left)
    shown: Counter[int] = Counter(
        pos for first, second, _jac in head[:MAX_FINDINGS_PER_KIND] for pos in (first, second)
    )
    rest = sum(len(left) * len(right) for left, right, _jac in hits) - MAX_FINDINGS_PER_KIND
    in_rest = sorted(pos for pos, n in pairs_of.items() if n > shown[pos])
    findings.append(
        Finding(
            State.QUALITY_FAILED,
            KIND,
            f"{rest} more near-duplicate pairs across partitions (Jaccard >= {threshold}; their cases are listed "
            "in case_ids); fix: drop the copies or keep each item in one partition",
            case_ids=tuple(dict.fromkeys(cases[pos].case_id for pos in in_rest)),
        )
    )
    return findings
