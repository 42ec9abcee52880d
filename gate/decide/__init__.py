"""From records to a decision: evidence, the rules that find blockers, the state.

What it holds: record vetting (untrusted records become evaluator errors, never verdicts), the
evidence built from records, one pure function per rule, and `decide` (`core`); a product lane's
second decision, per slice against its failure-rate limit (`product`), whose statistics are
`gate.estimate`'s.
What it may import: `gate.model`, `gate.estimate`, `gate.review`, `gate.plan`, `gate.judge` (types only).
"""
