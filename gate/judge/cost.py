"""What a judgment may cost, and the boundary a run's spend may not pass.

Estimates for `gate run --dry-run` and the upper bound each attempt reserves come from the rendered
prompt's bytes; the prices are the policy's.
"""

from __future__ import annotations

from gate.judge.budget import Prices
from gate.judge.render import RenderError, render_case
from gate.model.cases import Case
from gate.model.policy import LoadedPolicy

# An upper bound on the request bytes that are not the rendered prompt: the JSON envelope, the
# instructor system message with the response schema, model name and sampling fields.
REQUEST_OVERHEAD_BYTES = 2_048


def boundary(loaded: LoadedPolicy, max_cost: float | None) -> float:
    """The boundary a run is held to: the policy's `limits.max_total_cost`, or `--max-cost` when lower.

    The one definition: the run's budget, its dry-run plan and the decision (result.json `limits`) ask it.
    """
    limit = loaded.policy.limits.max_total_cost
    return limit if max_cost is None else min(limit, max_cost)


def max_cost_notes(loaded: LoadedPolicy, max_cost: float | None) -> list[str]:
    """`--max-cost` can only lower the boundary: a higher one is said, never silently ignored."""
    limits = loaded.policy.limits
    if max_cost is None or max_cost <= limits.max_total_cost:
        return []
    currency = prices(loaded).currency
    return [
        f"--max-cost {max_cost:g} is above the policy's limits.max_total_cost {limits.max_total_cost:g}: the lower "
        f"boundary, {limits.max_total_cost:g} {currency}, applies (raise the policy's limit to spend more)"
    ]


def prices(loaded: LoadedPolicy) -> Prices:
    p = loaded.policy.evaluator.price
    assert p is not None  # load_policy refuses a policy without prices
    return Prices(p.input_per_mtok, p.output_per_mtok, p.currency)


def prompt_bytes(loaded: LoadedPolicy, case: Case) -> int:
    try:
        return len(render_case(loaded.prompt_text, loaded.placeholders, case).prompt.encode("utf-8"))
    except RenderError:
        fields = sum(len((case.field_text(n) or "").encode("utf-8")) for n in loaded.placeholders)
        return len(loaded.prompt_text.encode("utf-8")) + fields


def judgment_upper_bound(loaded: LoadedPolicy, case: Case) -> float:
    """What one attempt may cost at most: request bytes bound prompt tokens from above."""
    ev = loaded.policy.evaluator
    return prices(loaded).cost(prompt_bytes(loaded, case) + REQUEST_OVERHEAD_BYTES, ev.max_output_tokens)


def judgment_typical(loaded: LoadedPolicy, case: Case) -> float:
    """A typical cost: ~4 bytes a token, the schema message, a short JSON verdict."""
    return prices(loaded).cost((prompt_bytes(loaded, case) + 1_200) // 4, 80)
