"""The product gate's statistics, pure: a slice's failure rate from the judge's verdicts and from people's audit.

What it holds: the calibration estimate (`failure_rate`: the judge-corrected failure rate, its box of
Clopper-Pearson bounds, the confidence sequence a stopping lane looks through, exact McNemar against a
base run), the audit estimate over the two strata of a run's own answers (`audit_rate`) and its two
exact tests (`audit_bounds`), the audit's size, fixed before anyone labels (`audit_sizing`) and the exact tests
that decide a planned audit (`audit_tests`). Numbers in, numbers out: no I/O, no clock, no findings.
What it may import: `gate.model`.
"""
