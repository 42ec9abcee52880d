"""One configuration fingerprint: what makes the judge, hashed once.

The judgment cache key, `gate run --resume` (which judgments of an interrupted run may be kept)
and `gate decide`'s staleness check (which records are evidence for the policy at hand) all ask
"was this verdict made by the same judge?". They ask it here, so they can never disagree.

The fingerprint covers: the metric's name and version, the prompt template, the allowed values,
the label aliases, the evaluator model, the full base URL (scheme, host, port and path: a proxy
path or another deployment on the same host is another judge), the sampling settings sent on the
wire (temperature, seed, max_output_tokens) and the ragas version. It leaves out what does not
shape one verdict: timeouts, concurrency, retries, prices, repeats (each repeat is its own
judgment), slices, limits and lanes.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit, urlunsplit

from gate.model.loading import canonical_json, sha256_hex
from gate.model.policy import LoadedPolicy

FINGERPRINT_SCHEMA = 1


def normalize_base_url(base_url: str) -> str:
    """The base URL as one string per endpoint: scheme and host lower-cased, no trailing slash."""
    text = base_url.strip()
    try:
        parts = urlsplit(text)
    except ValueError:
        return text.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, ""))


@dataclass(frozen=True)
class JudgeConfig:
    metric_name: str
    metric_version: str
    prompt_template: str
    allowed_values: tuple[str, ...]
    label_aliases: tuple[tuple[str, str], ...]  # sorted (alias, target) pairs
    model: str
    base_url: str  # normalized
    temperature: float
    seed: int | None
    max_output_tokens: int
    ragas_version: str

    @classmethod
    def of(cls, loaded: LoadedPolicy, base_url: str, ragas_version: str) -> JudgeConfig:
        p = loaded.policy
        ev = p.evaluator
        return cls(
            metric_name=p.metric.name,
            metric_version=p.metric.version,
            prompt_template=loaded.prompt_text,
            allowed_values=tuple(p.metric.allowed_values),
            label_aliases=tuple(sorted(p.metric.label_aliases.items())),
            model=ev.model,
            base_url=normalize_base_url(base_url),
            temperature=float(ev.temperature),
            seed=ev.seed,
            max_output_tokens=ev.max_output_tokens,
            ragas_version=ragas_version,
        )

    @property
    def fingerprint(self) -> str:
        return _fingerprint(self)


@functools.lru_cache(maxsize=64)
def _fingerprint(config: JudgeConfig) -> str:
    # Cached by value: the cache key asks for it once per judgment.
    return sha256_hex(canonical_json({"fingerprint_schema": FINGERPRINT_SCHEMA, **asdict(config)}))


def config_fingerprint(loaded: LoadedPolicy, base_url: str, ragas_version: str) -> str:
    """The 64-hex fingerprint of the judge this policy makes at this base URL and ragas version."""
    return JudgeConfig.of(loaded, base_url, ragas_version).fingerprint


def metric_definition_sha256(loaded: LoadedPolicy) -> str:
    """sha256 of what defines the metric: name, version, allowed values, label aliases, prompt."""
    metric = loaded.policy.metric
    definition = {
        "name": metric.name,
        "version": metric.version,
        "allowed_values": list(metric.allowed_values),
        "label_aliases": dict(metric.label_aliases),
        "prompt_sha256": loaded.prompt_sha256,
    }
    return sha256_hex(canonical_json(definition))
