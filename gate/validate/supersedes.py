"""`supersedes` chains: each names an existing case, no case is superseded twice, no cycle."""

from __future__ import annotations

from gate.model.states import Finding
from gate.validate.context import Context, contract, describe_locations


def supersede_defects(ctx: Context) -> list[Finding]:
    ids = {c.case_id for c in ctx.cases}
    replacers: dict[str, list[int]] = {}
    findings: list[Finding] = []
    for i, case in enumerate(ctx.cases):
        target = case.supersedes
        if target is None:
            continue
        if target == case.case_id:
            findings.append(
                contract(ctx, [i], "have `supersedes` equal to their own case id", "name the case id this one corrects")
            )
        elif target not in ids:
            findings.append(
                contract(
                    ctx,
                    [i],
                    f"name {target!r} in `supersedes`, but no case in the dataset has that id",
                    "keep the superseded case in the file (history points at it) or correct the id",
                )
            )
        else:
            replacers.setdefault(target, []).append(i)
    for target, idx in replacers.items():
        if len(idx) > 1:
            names = describe_locations(list(dict.fromkeys(ctx.cases[i].case_id for i in idx)))
            findings.append(
                contract(
                    ctx,
                    idx,
                    f"all name {target!r} in `supersedes` ({names}): a case is corrected by one case only",
                    "keep one replacement; let a later correction supersede that replacement instead",
                )
            )
    findings += _cycles(ctx)
    return findings


def _cycles(ctx: Context) -> list[Finding]:
    """Each cycle of `supersedes` once (a -> b -> a): every case in it would be superseded."""
    nxt = {c.case_id: c.supersedes for c in ctx.cases if c.supersedes is not None and c.supersedes != c.case_id}
    index = {c.case_id: i for i, c in reversed(list(enumerate(ctx.cases)))}
    reported: set[str] = set()
    findings: list[Finding] = []
    for start in nxt:
        path: list[str] = []
        on_path: set[str] = set()  # `path` as a set: a chain of 200,000 corrections is walked in linear time
        node: str | None = start
        while node is not None and node in nxt and node not in on_path and node not in reported:
            path.append(node)
            on_path.add(node)
            node = nxt[node]
        if node is not None and node in on_path:
            cycle = path[path.index(node) :]
            reported.update(cycle)
            findings.append(
                contract(
                    ctx,
                    [index[c] for c in cycle],
                    f"supersede each other in a cycle ({' -> '.join([*cycle, cycle[0]])}), so none would be judged",
                    "break the cycle: only the newer case names the older one",
                )
            )
        reported.update(path)
    return findings
