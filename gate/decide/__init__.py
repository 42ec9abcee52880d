"""From records to a decision: evidence, the rules that find blockers, the state.

What it holds: record vetting (untrusted records become evaluator errors, never verdicts), the
evidence built from records, one pure function per rule, and `decide` (`core`); the product gate's
statistics (`failure_rate`: a slice's failure rate corrected for the judge's misses, its interval
and verdict).
What it may import: `gate.model`, `gate.plan`, `gate.judge` (types only).
"""
