"""The cached path: a run whose judgments are all in the cache (or reused from `--out`) pays nothing.

No ragas import, no client, no request: each judgment's key is computed from the policy, the
installed versions (package metadata) and the rendered input's hashes, the cache is read in
batches, and `CacheOnlyEvaluator` serves the verdicts. One judgment missing and the run takes the
ordinary path (`make_evaluator`), whose own cache look-ups still serve every hit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from gate.judge import Judgment, instructor_version, ragas_version, resolve_base_url
from gate.judge.budget import Budget
from gate.judge.cache import CACHE_FILE, CachedVerdict, JudgmentCache, key_parts
from gate.judge.outcome import read_label
from gate.judge.render import RenderedInput, RenderError, render_case
from gate.model.cases import Case
from gate.model.policy import LoadedPolicy

log = logging.getLogger("gate.judge")

JudgmentId = tuple[str, int]  # (case id, repeat index)


def sound_hit(hit: CachedVerdict | None, loaded: LoadedPolicy) -> bool:
    """A cache entry is read back from storage CI restores (untrusted): it serves a verdict only
    when it meets the live path's rule; anything else is a miss, judged (and overwritten) again."""
    if hit is None:
        return False
    metric = loaded.policy.metric
    reading = read_label(hit.label, hit.reason, metric.allowed_values, metric.label_aliases, source="the cache")
    return reading.error_kind is None


def hit_judgment(hit: CachedVerdict, rendered: RenderedInput) -> Judgment:
    """A verdict served from the cache: free, with no attempts, but the same input hashes."""
    return Judgment(
        status="ok",
        label=hit.label,
        reason=hit.reason,
        cache="hit",
        prompt_sha256=rendered.prompt_sha256,
        input_sha256=rendered.input_sha256,
    )


class CacheOnlyEvaluator:
    """Implements `gate.judge.Evaluator` for judgments all found in the cache beforehand."""

    def __init__(self, hits: Mapping[JudgmentId, Judgment]) -> None:
        self._hits = dict(hits)
        self.ragas_version = ragas_version()

    async def judge(self, case: Case, repeat_index: int, budget: Budget) -> Judgment:
        return self._hits[(case.case_id, repeat_index)]

    async def aclose(self) -> None:
        return None


def serve_from_cache(
    loaded: LoadedPolicy, cache_dir: Path | None, wanted: Iterable[tuple[Case, int]]
) -> CacheOnlyEvaluator | None:
    """An evaluator for `wanted` when every one of them is a cache hit, else None."""
    wanted = list(wanted)
    if not wanted:
        return CacheOnlyEvaluator({})
    if cache_dir is None or not (cache_dir / CACHE_FILE).is_file():
        return None
    base_url = resolve_base_url(loaded.policy.evaluator.base_url)
    versions = (ragas_version(), instructor_version())
    keyed: list[tuple[JudgmentId, str, RenderedInput]] = []
    rendered_by_case: dict[str, RenderedInput] = {}
    for case, repeat in wanted:
        rendered = rendered_by_case.get(case.case_id)
        if rendered is None:
            try:
                rendered = rendered_by_case[case.case_id] = render_case(loaded.prompt_text, loaded.placeholders, case)
            except RenderError:
                return None  # the ordinary path records the input-contract error
        key = key_parts(loaded, base_url, *versions, rendered, repeat).key()
        keyed.append(((case.case_id, repeat), key, rendered))
    try:
        cache = JudgmentCache(cache_dir)
        try:
            found = cache.get_many([k for _, k, _ in keyed])
        finally:
            cache.close()
    except Exception as exc:  # a broken cache is a miss: the ordinary path judges (and logs it)
        log.warning("judgment cache read failed (%s); judging instead", type(exc).__name__)
        return None
    hits: dict[JudgmentId, Judgment] = {}
    for jid, key, rendered in keyed:
        hit = found.get(key)
        if hit is None or not sound_hit(hit, loaded):
            return None
        hits[jid] = hit_judgment(hit, rendered)
    return CacheOnlyEvaluator(hits)
