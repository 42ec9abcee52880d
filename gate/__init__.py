"""ragas-gate: a CI release gate for one reviewed pass/fail criterion."""

__version__ = "0.1.0"
