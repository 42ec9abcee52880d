"""`gate calibrate`: agreement of the judge with adjudicated human labels, from recorded judgments.

`core` (pure measurement), `stats` (Wilson, kappa), `alignment` (the ragas `@discrete_metric`
comparison, imported lazily), `causes` (reading classified disagreements back), `markdown` and
`svg` (renderers), `command` (the I/O edge). Importing this package never imports ragas.
What it may import: every stage before `gate.measure` (see gate/measure/__init__.py).
"""
