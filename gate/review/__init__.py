"""People's labels: the review queue, the append-only ledger, the final labels, agreement, export.

What it holds: pure functions and frozen types over the files people label with (the queue, the
ledger a reviewer appends to, the seeded draw order an audit shares with its queue), the final
label of an item, agreement figures, the cases and Label Studio files made from them, and people's
labels on a product run's answers as its decision reads them (`audit_labels`).
What it may import: `gate.model` and `gate.estimate` only, so every later stage (the decision's
audit, the commands, the review page) reads labels through it.
"""
