"""Publishing a decision to GitHub: the check run and the one sticky PR comment.

What it holds: the PyGithub-backed client (`client`) and the publish step (`publish`).
What it may import: `gate.model`, `gate.report`.
"""
