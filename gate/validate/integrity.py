"""A recorded response hash must match the response (it was not edited after labelling)."""

from __future__ import annotations

from gate.model.loading import sha256_hex
from gate.model.states import Finding
from gate.validate.context import Context, contract


def response_hash_mismatch(ctx: Context) -> list[Finding]:
    idx = [
        i
        for i, case in enumerate(ctx.cases)
        if case.response_sha256 is not None and case.response_sha256.strip().lower() != sha256_hex(case.response or "")
    ]
    if not idx:
        return []
    shown = [f"{ctx.cases[i].case_id} {sha256_hex(ctx.cases[i].response or '')}" for i in idx[:SHOWN]]
    more = f" and {len(idx) - SHOWN} more" if len(idx) > SHOWN else ""
    return [
        contract(
            ctx,
            idx,
            "have a `response_sha256` that does not match the sha256 of their UTF-8 `response` "
            f"(the response changed after it was labelled; its sha256 now: {', '.join(shown)}{more})",
            "label the current response again first, then write its hash in `response_sha256` (or add a corrected "
            "case that `supersedes` this one), or restore the labelled response",
        )
    ]


SHOWN = 5  # hashes printed in the message; `case_ids` lists every case
