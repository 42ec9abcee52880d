"""The data every stage shares: policy, cases, records, result, states, errors, and the readers.

What it holds: the typed inputs (policy, cases, overrides, dataset card, traces), the typed
outputs (records, result, states and findings), the configuration fingerprint, and the plain
helpers every format needs (YAML 1.2 loading, paths, escaping, money, text fitting).
What it may import: nothing of gate but itself. Every other package imports it.
"""
