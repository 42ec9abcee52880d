"""The lanes that measure the judge beside the gate: calibrate, certify, compare, trend, drift, rollback.

What it holds: agreement with people (`calibrate`), the certification ledger (`certify`),
verdict transitions between runs (`compare`), the graded rubric trend, the drift lane over
production traces, and the rollback bundle.
What it may import: every stage before it (model, validate, plan, judge, run, decide, report).
"""
