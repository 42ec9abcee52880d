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
            f"{partition}: {', '.join(ctx.cases[i].case_id for i in members)}"
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
    partition_code: dict[str, int] = {}
    groups = [partition_code.setdefault(c.partition, len(partition_code)) for c in cases]
    if len(partition_code) < 2:
        return []
    texts = [f"{c.user_input}\n{c.response}" for c in cases]

    def same_family(i: int, j: int) -> bool:
        gi = cases[i].group_id
        return gi is not None and gi == cases[j].group_id

    if len(texts) <= EXACT_MAX_TEXTS:
        near_duplicates = near_duplicates_exact
    else:
        from gate.validate.minhash import near_duplicates
    hits = near_duplicates(texts, groups, settings.jaccard_threshold, settings.shingle_words, skip=same_family)
    threshold = settings.jaccard_threshold
    findings: list[Finding] = []
    for hit in hits:
        a, b = cases[hit.first], cases[hit.second]
        where = f"{ctx.where(kept[hit.first])} and {ctx.where(kept[hit.second])}"
        findings.append(
            Finding(
                State.QUALITY_FAILED,
                KIND,
                f"{where}: cases {a.case_id} ({a.partition}) and {b.case_id} ({b.partition}) are near-duplicates "
                f"(user_input+response Jaccard {hit.jaccard:.2f} >= {threshold}); fix: drop one, or move both into "
                "one partition and give them a shared group_id",
                case_ids=(a.case_id, b.case_id),
                location=ctx.where(kept[hit.first]),
                extra={"partitions": [a.partition, b.partition], "jaccard": round(hit.jaccard, 4)},
            )
        )
    rest = hits[MAX_FINDINGS_PER_KIND:]
    summary = Finding(
        State.QUALITY_FAILED,
        KIND,
        f"{len(rest)} more near-duplicate pairs across partitions (Jaccard >= {threshold}; their cases are listed "
        "in case_ids); fix: drop the copies or keep each item in one partition",
        case_ids=tuple(dict.fromkeys(cid for h in rest for cid in (cases[h.first].case_id, cases[h.second].case_id))),
    )
    return capped(findings, summary)
