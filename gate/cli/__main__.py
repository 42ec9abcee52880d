"""`python -m gate.cli ARGS`: the `gate` command."""

from gate.cli import main_entry

main_entry()
