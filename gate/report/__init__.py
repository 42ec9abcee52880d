"""Renderers of a decision: the PR comment and job summary (Markdown), the check-run payload,
JUnit XML and the terminal.

What it holds: pure functions from a `gate.model.result.Result` to text; nothing here writes.
What it may import: `gate.model` (and the stages before it for types).
"""
