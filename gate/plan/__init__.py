"""Which cases a lane judges, in which order, in which shard: the plan, before anything is paid.

What it holds: the run's inputs gathered and validated (`inputs`), the lane's selection and order
(`selection`), shard membership (`shard`).
What it may import: `gate.model`, `gate.validate`.
"""
