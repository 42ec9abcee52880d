"""Executing a plan: the runner that schedules judgments, worker processes, records and resume.

What it holds: the Runner and its workers, the sweep for judgments beside the verdict, records
written as judgments complete, resume from `--out`, progress, per-record lineage, the output
directory checks.
What it may import: `gate.model`, `gate.validate`, `gate.plan`, `gate.judge`.
"""
