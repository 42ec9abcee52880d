"""The scheduled drift lane: judge a fixed-seed sample of unlabelled production traces.

- the trace file, the sample and the reference-free prompt are inputs: gate/model/traces.py.
- `findings`: pass rates per slice with Wilson intervals, the change against the previous drift
  result, and the proposed cases (disagreements with the last run, new failure shapes). Pure.
- `lane`: the run itself (judge, write drift.json, proposed-cases.jsonl, result.json); the
  command that wires it is gate/commands/drift.py.

Nothing here ever writes into the gold cases: proposals go to people for independent labels and
a future dataset version.
What it may import: every stage before `gate.measure`.
"""
