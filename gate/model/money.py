"""Money, the one way each audience reads it. Display only: result.json keeps the unrounded figure."""

from __future__ import annotations

import math
from decimal import Decimal


def money(value: float, currency: str) -> str:
    """A cost for people (reports, check run, comment, terminal): 4 decimals under 1, else 2."""
    return f"{value:.4f} {currency}" if value < 1 else f"{value:.2f} {currency}"


def plain_decimal(value: float) -> str:
    """A cost for scripts (the Action's `cost` output): 12 significant digits drop the float noise
    of summing prices (0.0012055500000000001 -> 0.00120555); never an exponent; "" when not finite."""
    if not math.isfinite(value):
        return ""
    text = format(Decimal(format(value, ".12g")).normalize(), "f")
    return "0" if text in ("-0", "0.0") else text
