"""The cached path: a run whose judgments are all in the cache (or reused from `--out`) pays nothing.

No ragas import, no client, no request: each judgment's key is computed from the policy, the
installed versions (package metadata) and the rendered input's hashes, the cache is read in
batches, and `CacheOnlyEvaluator` serves the verdicts. One judgment missing and the run takes the
ordinary path (`make_evaluator`), whose own cache look-ups still serve every hit.

Only each judgment's verdict is held until it is served (a case is rendered again then, for the
hashes its record carries): a hundred thousand rendered prompts are never in memory at once.
"""

from __future__ import annotations

import logging
import sys
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

    def __init__(self, loaded: LoadedPolicy, hits: Mapping[JudgmentId, CachedVerdict]) -> None:
        self.loaded = loaded
        self._hits = dict(hits)
        self.ragas_version = ragas_version()

    async def judge(self, case: Case, repeat_index: int, budget: Budget) -> Judgment:
        hit = self._hits.pop((case.case_id, repeat_index))  # served once: it leaves memory
        return hit_judgment(hit, render_case(self.loaded.prompt_text, self.loaded.placeholders, case))

    async def aclose(self) -> None:
        return None


_CHUNK = 500  # judgments rendered and looked up at once


def serve_from_cache(
    loaded: LoadedPolicy, cache_dir: Path | None, wanted: Iterable[tuple[Case, int]]
) -> CacheOnlyEvaluator | None:
    """An evaluator for `wanted` when every one of them is a cache hit, else None."""
    wanted = list(wanted)
    if not wanted:
        return CacheOnlyEvaluator(loaded, {})
    if cache_dir is None or not (cache_dir / CACHE_FILE).is_file():
        return None
    try:
        cache = JudgmentCache(cache_dir)
        try:
            return _all_hits(loaded, cache, wanted)
        finally:
            cache.close()
    except Exception as exc:  # a broken cache is a miss: the ordinary path judges (and logs it)
        log.warning("judgment cache read failed (%s); judging instead", type(exc).__name__)
        return None


def _all_hits(loaded: LoadedPolicy, cache: JudgmentCache, wanted: list[tuple[Case, int]]) -> CacheOnlyEvaluator | None:
    """The evaluator serving `wanted` when the cache holds a sound verdict of each, else None; read
    a chunk at a time, keeping only the verdicts."""
    base_url = resolve_base_url(loaded.policy.evaluator.base_url)
    versions = (ragas_version(), instructor_version())
    hits: dict[JudgmentId, CachedVerdict] = {}
    for start in range(0, len(wanted), _CHUNK):
        keyed: list[tuple[JudgmentId, str]] = []
        rendered_by_case: dict[str, RenderedInput] = {}
        for case, repeat in wanted[start : start + _CHUNK]:
            rendered = rendered_by_case.get(case.case_id)
            if rendered is None:
                try:
                    rendered = rendered_by_case[case.case_id] = render_case(
                        loaded.prompt_text, loaded.placeholders, case
                    )
                except RenderError:
                    return None  # the ordinary path records the input-contract error
            keyed.append(((case.case_id, repeat), key_parts(loaded, base_url, *versions, rendered, repeat).key()))
        found = cache.get_many([k for _, k in keyed])
        for jid, key in keyed:
            hit = found.get(key)
            if hit is None or not sound_hit(hit, loaded):
                return None
            hits[jid] = CachedVerdict(sys.intern(hit.label), hit.reason)
    return CacheOnlyEvaluator(loaded, hits)
