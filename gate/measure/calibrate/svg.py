"""calibration.svg: per-slice confusion as small 2x2 squares beside the two rates' intervals. Pure.

Hand-written SVG (no plotting dependency). Rows are slices worst first, then the overall row.
In each square, rows are the human label and columns the judge's verdict; the disagreement cells
are coloured (red: false pass, amber: false fail) with strength by share of the slice's cases.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from gate.measure.calibrate.markdown import WIDE_INTERVAL

WIDTH = 960
ROW_H = 122
TOP = 104
CELL_W, CELL_H = 62, 38
GRID_X = 360
BAR_X, BAR_W = 580, 200

GREEN = "#2e7d32"
RED = "#c62828"
AMBER = "#ef8f00"
INK = "#1f2328"
MUTED = "#656d76"
TRACK = "#eaeef2"
AMBER_INK = "#9a6700"


def _x(text: object) -> str:
    return html.escape(str(text), quote=True)


def _clip(text: str, n: int = 30) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:.0f}%"


def _text(
    x: float, y: float, s: str, *, size: int = 13, fill: str = INK, weight: str = "normal", anchor: str = "start"
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{fill}" font-weight="{weight}" '
        f'text-anchor="{anchor}">{_x(s)}</text>'
    )


def _luminance(rgb: tuple[float, float, float]) -> float:
    """WCAG 2 relative luminance of an sRGB colour (channels 0-1)."""
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _rgb(hex_colour: str) -> tuple[float, float, float]:
    h = hex_colour.lstrip("#")
    return (int(h[0:2], 16) / 255, int(h[2:4], 16) / 255, int(h[4:6], 16) / 255)


def contrast(fg: str, bg: str, bg_opacity: float = 1.0) -> float:
    """WCAG contrast ratio of `fg` on `bg` laid at `bg_opacity` over white (what a cell shows)."""
    over_white = tuple(c * bg_opacity + (1 - bg_opacity) for c in _rgb(bg))
    a, b = _luminance(_rgb(fg)), _luminance((over_white[0], over_white[1], over_white[2]))
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def _cell(x: float, y: float, count: int, total: int, colour: str, agree: bool) -> list[str]:
    share = count / total if total else 0.0
    opacity = (0.10 + 0.55 * share) if agree else (0.0 if count == 0 else 0.35 + 0.65 * share)
    fill = colour if count or agree else "#ffffff"
    # The digit takes whichever ink reads better on the cell as drawn: white on light amber did not.
    text_fill = max((INK, "#ffffff"), key=lambda ink: contrast(ink, fill, opacity))
    return [
        f'<rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" fill="{fill}" fill-opacity="{opacity:.2f}" '
        f'stroke="#d0d7de"/>',
        _text(x + CELL_W / 2, y + CELL_H / 2 + 6, str(count), size=17, weight="bold", anchor="middle", fill=text_fill),
    ]


def _interval(y: float, label: str, rate: Mapping[str, Any], k: int, colour: str) -> list[str]:
    parts = [_text(BAR_X - 10, y + 5, label, size=12, fill=MUTED, anchor="end")]
    parts.append(f'<rect x="{BAR_X}" y="{y - 5}" width="{BAR_W}" height="10" rx="5" fill="{TRACK}"/>')
    if not rate.get("n"):
        parts.append(_text(BAR_X + BAR_W + 10, y + 5, "no case", size=12, fill=MUTED))
        return parts
    lo, hi, v = rate["low"], rate["high"], rate["value"]
    x0, x1, xv = BAR_X + lo * BAR_W, BAR_X + hi * BAR_W, BAR_X + v * BAR_W
    parts.append(
        f'<rect x="{x0:.1f}" y="{y - 5}" width="{max(x1 - x0, 2):.1f}" height="10" rx="5" fill="{colour}" '
        'fill-opacity="0.35"/>'
    )
    parts.append(f'<circle cx="{xv:.1f}" cy="{y}" r="5.5" fill="{colour}" stroke="#ffffff" stroke-width="1.5"/>')
    parts.append(_text(BAR_X + BAR_W + 10, y + 5, f"{k}/{rate['n']} = {_pct(v)}  ({_pct(lo)}–{_pct(hi)})", size=12))
    return parts


def _row(y: float, name: str, t: Mapping[str, Any], *, bold: bool) -> list[str]:
    parts = [_text(24, y + 26, _clip(name), size=15, weight="bold" if bold else "600")]
    parts.append(_text(24, y + 47, f"{t['completed']} completed · agreement {_pct(t['agreement'])}", size=12))
    kappa = "–" if t["cohen_kappa"] is None else f"{t['cohen_kappa']:.2f}"
    parts.append(_text(24, y + 65, f"kappa {kappa}", size=12, fill=MUTED))
    beside = f"outside the rates: {t['errors']} error · {t['review']} review · {t['unrun']} unrun"
    parts.append(_text(24, y + 83, beside, size=11, fill=MUTED if not (t["errors"] or t["unrun"]) else RED))
    widths = [r["high"] - r["low"] for r in (t["false_pass_rate"], t["false_fail_rate"]) if r.get("n")]
    if not widths or max(widths) > WIDE_INTERVAL:
        wide = f"intervals up to {max(widths) * 100:.0f} points wide" if widths else "no case to measure"
        parts.append(_text(24, y + 101, f"too few cases: {wide}", size=11, fill=AMBER_INK, weight="bold"))
    total = t["completed"]
    gy = y + 12
    parts.append(_text(GRID_X - 8, gy + CELL_H / 2 + 5, "pass", size=11, fill=MUTED, anchor="end"))
    parts.append(_text(GRID_X - 8, gy + CELL_H * 1.5 + 5, "fail", size=11, fill=MUTED, anchor="end"))
    parts += _cell(GRID_X, gy, t["true_pass"], total, GREEN, True)
    parts += _cell(GRID_X + CELL_W, gy, t["false_fail"], total, AMBER, False)
    parts += _cell(GRID_X, gy + CELL_H, t["false_pass"], total, RED, False)
    parts += _cell(GRID_X + CELL_W, gy + CELL_H, t["true_fail"], total, GREEN, True)
    parts += _interval(y + 30, "false pass", t["false_pass_rate"], t["false_pass"], RED)
    parts += _interval(y + 62, "false fail", t["false_fail_rate"], t["false_fail"], AMBER)
    return parts


def render_svg(cal: Mapping[str, Any]) -> str:
    rows: list[tuple[str, Mapping[str, Any], bool]] = [(n, t, False) for n, t in cal["slices"].items()]
    rows.append(("all slices", cal["overall"], True))
    height = TOP + ROW_H * len(rows) + 56
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        _text(24, 32, f"Judge vs people, per slice: {_clip(str(cal['policy_id']), 40)}", size=19, weight="bold"),
        _text(24, 54, "Worst slice first. Squares: rows = human label, columns = judge verdict.", size=12, fill=MUTED),
        _text(GRID_X + CELL_W / 2, TOP - 6, "judge pass", size=11, fill=MUTED, anchor="middle"),
        _text(GRID_X + CELL_W * 1.5, TOP - 6, "judge fail", size=11, fill=MUTED, anchor="middle"),
        _text(GRID_X - 8, TOP - 6, "human", size=11, fill=MUTED, anchor="end"),
        _text(BAR_X, TOP - 6, "0%", size=10, fill=MUTED),
        _text(BAR_X + BAR_W, TOP - 6, "100%", size=10, fill=MUTED, anchor="end"),
        _text(BAR_X, TOP - 22, "rate: dot = observed, bar = 95% interval", size=10, fill=MUTED),
    ]
    for i, (name, t, bold) in enumerate(rows):
        y = TOP + i * ROW_H
        if bold:
            parts.append(f'<line x1="16" x2="{WIDTH - 16}" y1="{y + 2}" y2="{y + 2}" stroke="#d0d7de"/>')
        parts += _row(y, name, t, bold=bold)
    parts.append(
        _text(
            24,
            height - 22,
            "Red: false pass (people failed it, the judge passed it). Amber: false fail. "
            "Errors, review and unrun cases are in no rate.",
            size=11,
            fill=MUTED,
        )
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
