"""Per-record lineage: the hashes and settings `gate compare` walks to find what moved.

A run's judge settings are computed once (`JudgeSettings.of`), a case's gold and field hashes per
case (`JudgeSettings.for_case`); both are plain record fields, so `gate compare` can name the
first diverging artifact from two records.jsonl files alone. The run's own lineage (the hashes
result.json names) is `make_lineage`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gate import __version__
from gate.judge import installed_version, ragas_version
from gate.model.cases import Case, Dataset
from gate.model.fingerprint import base_url_host, config_fingerprint, metric_definition_sha256, recorded_fingerprint
from gate.model.lineage import Lineage
from gate.model.loading import canonical_json, sha256_hex
from gate.model.policy import LoadedPolicy
from gate.model.records import Record, Sampling
from gate.model.retirement import DATE_FIELD, NOT_ASKED, SOURCE_FIELD, Retirement, recorded, resolve


def gold_sha256(case: Case) -> str:
    """What people decided about the case: its human label, slice, partition and evidence ids."""
    gold = {
        "human_label": case.human_label,
        "slice": case.slice,
        "partition": case.partition,
        "evidence": sorted(case.evidence_ids),
    }
    return sha256_hex(canonical_json(gold))


def field_sha256(case: Case, placeholders: tuple[str, ...]) -> dict[str, str]:
    """sha256 of each case field the prompt renders, by placeholder name (absent fields left out)."""
    out: dict[str, str] = {}
    for name in placeholders:
        text = case.field_text(name)
        if text is not None:
            out[name] = sha256_hex(text)
    return out


@dataclass(frozen=True)
class JudgeSettings:
    """What makes the judge, constant over one run, as written into every record."""

    sampling: Sampling
    base_url_host: str
    allowed_values: tuple[str, ...]
    label_aliases_sha256: str
    prompt_template_sha256: str
    config_fingerprint: str = ""  # gate.model.fingerprint, with the installed ragas version

    @classmethod
    def of(cls, loaded: LoadedPolicy, base_url: str) -> JudgeSettings:
        ev = loaded.policy.evaluator
        metric = loaded.policy.metric
        return cls(
            sampling=Sampling(
                temperature=ev.temperature,
                seed=ev.seed,
                max_output_tokens=ev.max_output_tokens,
                repeats=ev.repeats,
                top_p=ev.top_p,
                response_format=ev.response_format,
            ),
            base_url_host=base_url_host(base_url),
            allowed_values=tuple(metric.allowed_values),
            label_aliases_sha256=sha256_hex(canonical_json(metric.label_aliases)),
            prompt_template_sha256=loaded.prompt_sha256,
            config_fingerprint=config_fingerprint(loaded, base_url, ragas_version()),
        )

    def for_case(self, case: Case, placeholders: tuple[str, ...]) -> dict[str, Any]:
        """The lineage fields of one record of `case` (keyword arguments of `Record`)."""
        return {
            "gold_sha256": gold_sha256(case),
            "field_sha256": field_sha256(case, placeholders),
            "rubric_version": case.rubric_version,
            "sampling": self.sampling,
            "base_url_host": self.base_url_host,
            "allowed_values": list(self.allowed_values),
            "label_aliases_sha256": self.label_aliases_sha256,
            "prompt_template_sha256": self.prompt_template_sha256,
            "config_fingerprint": self.config_fingerprint,
        }


@dataclass(frozen=True)
class RecordedJudge:
    """Which judge made a set of records: the one answer the decision's fingerprint (which records
    are evidence), the calibration check and the certification all read (`recorded_judge`)."""

    settings: JudgeSettings  # the policy's, with the provider host the records were made with
    ragas_version: str
    fingerprint: str


def recorded_judge(loaded: LoadedPolicy, records: Sequence[Record]) -> RecordedJudge:
    """The judge of recorded judgments (`decide`, `merge`, `calibrate`, a crash note), read from the
    records and the policy, never from this shell's environment: the configuration most records
    carry (a resumed run on another host is mostly that host's), its host and ragas version. A
    policy that names its base URL names the host; records of older runs without a fingerprint: the
    first record that names a host and a ragas version."""
    most = recorded_fingerprint(records)
    made_by = next((r for r in reversed(records) if most and r.config_fingerprint == most), None)
    host = (
        made_by.base_url_host
        if made_by is not None
        else next((r.base_url_host for r in records if r.base_url_host), None)
    )
    ragas = (
        made_by.ragas_version
        if made_by is not None
        else next((r.ragas_version for r in records if r.ragas_version), "")
    )
    ragas = ragas or installed_version("ragas") or ""
    base_url = loaded.policy.evaluator.base_url
    settings = JudgeSettings.of(loaded, base_url or "")
    if base_url:
        fingerprint = config_fingerprint(loaded, base_url, ragas)
        return RecordedJudge(replace(settings, config_fingerprint=fingerprint), ragas, fingerprint)
    if host is not None:
        settings = replace(settings, base_url_host=host)
    return RecordedJudge(replace(settings, config_fingerprint=most), ragas, most)


def recorded_retirement(loaded: LoadedPolicy, records: Iterable[Record]) -> Retirement:
    """The judge model's shutdown date for recorded judgments, without asking anyone: the provider's
    answer the latest record of this model carries, else the policy's pin (which the team may have
    corrected since the run), else none. Shards asked at different moments: each shard's latest
    answer counts, and of those the earliest date (a date one shard read is not undone by another
    that read none announced), as each shard's own decision would block. (Read in one pass: the
    records may be a file.)"""
    model = loaded.policy.evaluator.model
    latest: dict[tuple[int, int] | None, Retirement] = {}
    for r in records:
        if r.evaluator_model in ("", model) and r.judge_shutdown_source == "provider":
            said = recorded(model, r.judge_shutdown_date, r.judge_shutdown_source)
            if said is not None:
                latest[(r.shard.index, r.shard.count) if r.shard is not None else None] = said
    if latest:
        dated = [x for x in latest.values() if x.date is not None]
        return _with_pin(
            min(dated, key=lambda x: x.date or dt.date.max) if dated else next(iter(latest.values())), loaded
        )
    return resolve(model, NOT_ASKED, loaded.policy.evaluator.shutdown_date)


def run_retirement(asked: Retirement, loaded: LoadedPolicy, records: Iterable[Record]) -> Retirement:
    """The shutdown date a run that continues earlier judgments uses (`--resume`, a batch's later
    steps): the provider's answer to this run's lookup when it gave one (a date, or none announced);
    else the provider's date the earlier records carry, as `gate decide` on them reads it (a lookup
    that fails now does not forget it); else the policy's pin."""
    return asked if asked.source == "provider" else recorded_retirement(loaded, records)


def _with_pin(provider: Retirement, loaded: LoadedPolicy) -> Retirement:
    """The provider's answer as a run read it, the policy's pin standing in where it announced none."""
    pinned = loaded.policy.evaluator.shutdown_date
    return provider if provider.date is not None or pinned is None else Retirement(provider.model, pinned, "policy")


def make_lineage(
    loaded: LoadedPolicy,
    dataset: Dataset,
    records: Iterable[Record] = (),
    base_url: str | None = None,
    retirement: Retirement | None = None,
) -> Lineage:
    """The run's lineage. `base_url`: the live provider's (a run), whose judge makes the fingerprint.
    None for recorded judgments, which read no provider environment: `recorded_judge`. `retirement`:
    the shutdown date a run read from the provider; without it, the one the records carry."""
    if base_url is not None:
        ragas = next((r.ragas_version for r in records if r.ragas_version), "") or installed_version("ragas") or ""
        fingerprint = config_fingerprint(loaded, base_url, installed_version("ragas") or "")
    else:
        judge = recorded_judge(loaded, records if isinstance(records, Sequence) else list(records))
        ragas, fingerprint = judge.ragas_version, judge.fingerprint
    return Lineage(
        policy_sha256=loaded.sha256,
        dataset_sha256=dataset.sha256,
        prompt_sha256=loaded.prompt_sha256,
        metric_version=loaded.policy.metric.version,
        evaluator_model=loaded.policy.evaluator.model,
        ragas_version=ragas,
        gate_version=__version__,
        metric_definition_sha256=metric_definition_sha256(loaded),
        config_fingerprint=fingerprint,
        dataset_card_sha256=loaded.card.sha256 if loaded.card is not None else "",
        responses_sha256=dataset.responses_sha256,
        **_shutdown_fields(retirement if retirement is not None else recorded_retirement(loaded, records)),
    )


def _shutdown_fields(retirement: Retirement) -> dict[str, str]:
    fields = retirement.lineage()
    return {"judge_shutdown_date": fields.get(DATE_FIELD, ""), "judge_shutdown_source": fields.get(SOURCE_FIELD, "")}
