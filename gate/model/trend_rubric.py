"""The trend's graded rubric as the policy states it: its bands checked, its prompt loaded.

`gate validate` reads it without anything of the run; the trend lane (gate/measure/trend.py,
gate/measure/trend_lane.py) judges with the policy `load_trend` builds.
"""

from __future__ import annotations

import dataclasses
import re

from gate.model.errors import PolicyError
from gate.model.loading import sha256_hex
from gate.model.policy import TREND_BANDS, LoadedPolicy, Trend, prompt_placeholders, read_policy_file
from gate.model.states import Finding, State

BAND_VALUES: tuple[str, ...] = tuple(str(b) for b in TREND_BANDS)

# Intensifiers and hedges: bands that differ only by these describe one quality at different
# volumes, and a judge's idea of "somewhat" against "very" does not reproduce.
ADVERBS = frozenset(
    {
        "somewhat",
        "very",
        "quite",
        "fairly",
        "slightly",
        "extremely",
        "mostly",
        "rather",
        "highly",
        "really",
        "partially",
        "partly",
        "largely",
        "mildly",
        "moderately",
        "reasonably",
        "pretty",
        "barely",
        "completely",
        "fully",
        "totally",
        "exceptionally",
        "truly",
        "entirely",
        "generally",
        "mainly",
        "marginally",
        "adequately",
        "sufficiently",
        "decently",
        "incredibly",
        "remarkably",
        "especially",
        "particularly",
        "notably",
        "substantially",
        "significantly",
        "bit",
        "little",
    }
)


def _without_adverbs(text: str) -> tuple[str, ...]:
    return tuple(w for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in ADVERBS)


def adverb_only_pairs(bands: dict[int, str]) -> list[tuple[int, int]]:
    """Pairs of bands whose descriptions are the same once intensifiers are taken out."""
    keyed = {b: _without_adverbs(t) for b, t in sorted(bands.items())}
    return [
        (a, b)
        for a in keyed
        for b in keyed
        if a < b and keyed[a] == keyed[b] and " ".join(bands[a].lower().split()) != " ".join(bands[b].lower().split())
    ]


def band_findings(loaded: LoadedPolicy) -> list[Finding]:
    """`gate validate`: band descriptions must be qualitatively distinct."""
    trend = loaded.policy.trend
    if trend is None:
        return []
    pairs = adverb_only_pairs(trend.bands)
    if not pairs:
        return []
    shown = "; ".join(f"{a} “{trend.bands[a]}” vs {b} “{trend.bands[b]}”" for a, b in pairs)
    return [
        Finding(
            State.REVIEW_REQUIRED,
            "trend_bands",
            f"{loaded.path}: `trend.bands` differ only by adverbs ({shown}): a judge cannot reproduce "
            "“somewhat” against “very”, so the trend would drift with the judge, not the product; fix: describe "
            "what a response in each band does or lacks (contradicts the source, omits a required fact, ...)",
            location=str(loaded.path),
        )
    ]


def _bands_block(trend: Trend) -> str:
    lines = ["", "", "Place the response in exactly one band:"]
    lines += [f"{b}: {trend.bands[b]}" for b in TREND_BANDS]
    lines.append("The value must be exactly one of 1, 2, 3, 4, 5.")
    # The block is appended to a str.format template: literal braces must be doubled.
    return "\n".join(lines).replace("{", "{{").replace("}", "}}")


def load_trend(loaded: LoadedPolicy) -> LoadedPolicy | None:
    """The trend as a policy the evaluator can judge with: its prompt (bands appended), values 1-5."""
    trend = loaded.policy.trend
    if trend is None:
        return None
    if trend.prompt_file is not None:
        what = "trend prompt file (`trend.prompt_file`)"
        template = read_policy_file(str(loaded.path), loaded.base_dir, trend.prompt_file, "trend.prompt_file", what)
    else:
        template = trend.prompt or ""
    where = f"`trend.prompt_file` ({trend.prompt_file})" if trend.prompt_file else "`trend.prompt`"
    names, problems = prompt_placeholders(template)
    if problems:
        raise PolicyError(str(loaded.path), [f"{where}: {p}" for p in problems])
    prompt = template + _bands_block(trend)
    policy = loaded.policy
    metric = policy.metric.model_copy(
        update={"name": trend.name, "allowed_values": list(BAND_VALUES), "label_aliases": {}, "prompt": prompt}
    )
    return dataclasses.replace(
        loaded,
        policy=policy.model_copy(update={"metric": metric}),
        prompt_text=prompt,
        placeholders=tuple(names),
        prompt_sha256=sha256_hex(prompt),
    )
