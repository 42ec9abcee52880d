"""Renderers of a gate result: check-run payload, Markdown report."""
