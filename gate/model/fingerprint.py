"""One configuration fingerprint: what makes the judge, hashed once.

The judgment cache key, `gate run --resume` (which judgments of an interrupted run may be kept)
and `gate decide`'s staleness check (which records are evidence for the policy at hand) all ask
"was this verdict made by the same judge?". They ask it here, so they can never disagree.

Who compares against what: the cache and `gate run --resume` against the live judge
(this policy at this base URL); `gate decide`, `gate merge`, `gate compare` and `gate calibrate`
make no call and read no provider environment, so a record is stale there only when a component
it recorded differs from the policy's (`policy_components`), or from the configuration most
records were judged under (`recorded_fingerprint`). `stale_component` names the first such
component in the comparison order with both values.

The fingerprint covers: the metric's name and version, the prompt template, the allowed values,
the label aliases, the evaluator model, the full base URL (scheme, host, port and path: a proxy
path or another deployment on the same host is another judge), the sampling settings sent on the
wire (temperature, seed, max_output_tokens, top_p), the response format asked for (JSON mode or a
schema the provider constrains decoding to) and the ragas version. It leaves out what does not
shape one verdict: timeouts, concurrency, retries, prices, repeats (each repeat is its own
judgment), slices, limits and lanes.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit, urlunsplit

from gate.model.loading import canonical_json, sha256_hex
from gate.model.policy import LoadedPolicy
from gate.model.records import Record

FINGERPRINT_SCHEMA = 1
# What every judge sent before top_p and the response format were policy keys (ragas' top_p, JSON
# mode): at these values they stay out of the hashed form, so a fingerprint, a cache entry or a
# calibration measured before keeps its hash; any other value changes it.
DEFAULT_TOP_P = 0.1
DEFAULT_RESPONSE_FORMAT = "json_object"


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
    top_p: float = DEFAULT_TOP_P
    response_format: str = DEFAULT_RESPONSE_FORMAT

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
            top_p=float(ev.top_p),
            response_format=ev.response_format,
        )

    @property
    def fingerprint(self) -> str:
        return _fingerprint(self)


@functools.lru_cache(maxsize=64)
def _fingerprint(config: JudgeConfig) -> str:
    # Cached by value: the cache key asks for it once per judgment.
    hashed = asdict(config)
    if config.top_p == DEFAULT_TOP_P:
        del hashed["top_p"]
    if config.response_format == DEFAULT_RESPONSE_FORMAT:
        del hashed["response_format"]
    return sha256_hex(canonical_json({"fingerprint_schema": FINGERPRINT_SCHEMA, **hashed}))


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


def base_url_host(base_url: str) -> str:
    """The provider's host name only: no scheme, port, path or credentials reach a record."""
    try:
        return (urlsplit(base_url).hostname or "").lower()
    except ValueError:
        return ""


def recorded_fingerprint(records: Iterable[Record]) -> str:
    """The fingerprint most records carry (a tie: the one seen last); "" when none carries one."""
    counts: Counter[str] = Counter()
    last: dict[str, int] = {}
    for i, r in enumerate(records):
        if r.config_fingerprint:
            counts[r.config_fingerprint] += 1
            last[r.config_fingerprint] = i
    return max(counts, key=lambda f: (counts[f], last[f]), default="")


class _Unknown:
    def __repr__(self) -> str:
        return "unknown"


UNKNOWN = _Unknown()  # a component an older record (or a policy without a base URL) does not say

# The configuration components a record carries, in the comparison order (`prompt` after the policy and
# metric that own it); `inputs` is the rendered prompt, compared only by `gate decide`.
COMPONENTS = (
    "policy_id",
    "metric_version",
    "prompt",
    "evaluator_model",
    "base_url_host",
    "temperature",
    "seed",
    "max_output_tokens",
    "top_p",
    "response_format",
    "ragas_version",
    "allowed_values",
    "label_aliases",
)


def record_components(r: Record) -> dict[str, object]:
    """What `r` says about the configuration that judged it (UNKNOWN where it says nothing)."""
    s = r.sampling
    return {
        "policy_id": r.policy_id or UNKNOWN,
        "metric_version": r.metric_version or UNKNOWN,
        "prompt": r.prompt_template_sha256 or UNKNOWN,
        "evaluator_model": r.evaluator_model or UNKNOWN,
        "base_url_host": UNKNOWN if r.base_url_host is None else r.base_url_host,
        "temperature": UNKNOWN if s is None else float(s.temperature),
        "seed": UNKNOWN if s is None else s.seed,
        "max_output_tokens": UNKNOWN if s is None else s.max_output_tokens,
        "top_p": UNKNOWN if s is None or s.top_p is None else s.top_p,
        "response_format": UNKNOWN if s is None or s.response_format is None else s.response_format,
        "ragas_version": r.ragas_version or UNKNOWN,
        "allowed_values": tuple(r.allowed_values) if r.allowed_values else UNKNOWN,
        "label_aliases": r.label_aliases_sha256 or UNKNOWN,
    }


def policy_components(loaded: LoadedPolicy) -> dict[str, object]:
    """What the policy itself fixes of the configuration; the provider host only when it names a
    base URL (never from the environment), the ragas version never (records agree among themselves)."""
    p, ev = loaded.policy, loaded.policy.evaluator
    return {
        "policy_id": p.policy_id,
        "metric_version": p.metric.version,
        "prompt": loaded.prompt_sha256,
        "evaluator_model": ev.model,
        "base_url_host": base_url_host(ev.base_url) if ev.base_url else UNKNOWN,
        "temperature": float(ev.temperature),
        "seed": ev.seed,
        "max_output_tokens": ev.max_output_tokens,
        "top_p": float(ev.top_p),
        "response_format": ev.response_format,
        "ragas_version": UNKNOWN,
        "allowed_values": tuple(p.metric.allowed_values),
        "label_aliases": sha256_hex(canonical_json(p.metric.label_aliases)),
    }


def shown_value(value: object) -> str:
    """A component's value in a message: a sha256 as its first 12 digits."""
    text = ",".join(value) if isinstance(value, tuple) else str(value)
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:12] + "..."
    return text[:80]


def stale_component(recorded: dict[str, object], reference: dict[str, object]) -> str | None:
    """`name: recorded vs reference` for the first component known on both sides that differs."""
    for name in COMPONENTS:
        a, b = recorded[name], reference[name]
        if a is not UNKNOWN and b is not UNKNOWN and a != b:
            return f"{name}: {shown_value(a)} vs {shown_value(b)}"
    return None
