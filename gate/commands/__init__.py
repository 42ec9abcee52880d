"""What each command does, wiring the stages: run, decide, merge, the outputs, the crash path.

What it holds: `gate run` (`run`), `gate decide` (`decide`), `gate merge` (`merge`), dry runs,
the output files (`outputs`), the crash and signal fallback (`crash`), and the steps shared by
the CLI and the Action (`steps`).
What it may import: every stage. Only the edges (`gate.cli`, `gate.action`) import it.
"""
