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
    return [
        contract(
            ctx,
            idx,
            "have a `response_sha256` that does not match the sha256 of their UTF-8 `response` "
            "(the response changed after it was labelled)",
            "re-review the human label for the current response and update `response_sha256`, "
            "or restore the labelled response",
        )
    ]
