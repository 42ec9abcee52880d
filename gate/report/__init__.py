"""Renderers of a decision: the PR comment and job summary (Markdown), the check-run payload,
JUnit XML, the terminal, and a product lane's picture (product.svg).

What it holds: pure functions from a `gate.model.result.Result` to text; nothing here writes.
What it may import: `gate.model` (and the stages before it for types; `gate.estimate.failure_rate`
for how a failure rate is written).
"""
