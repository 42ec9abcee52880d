"""The judgment cache: SQLite in a cache directory, keyed by everything that shapes a verdict.

Only successful judgments (`status: ok`) are stored. The key is the sha256 of the canonical JSON of
`CacheKeyParts`: the configuration fingerprint (`gate.model.fingerprint`: the metric, its prompt, labels
and aliases, the model, the full base URL, the sampling settings, the ragas version), the
instructor version, the rendered inputs' hashes and the repeat index. Change any and the cache
misses; `--resume` and `gate decide` use the same fingerprint.

Concurrency: WAL journal, a busy timeout, one short autocommit statement per read or write and
`INSERT OR IGNORE` (the first writer of a key wins; two writers of one key hold equivalent
verdicts), so several processes (shards, parallel jobs) can share one cache directory.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from gate.judge.render import RenderedInput
from gate.model.fingerprint import config_fingerprint
from gate.model.loading import canonical_json, sha256_hex
from gate.model.policy import LoadedPolicy

CACHE_FILE = "judgments.sqlite3"
KEY_SCHEMA = 2  # 2: the configuration fields became one fingerprint (full base URL, not its host)
_BUSY_TIMEOUT_S = 30.0
_BATCH = 500  # keys per `IN (...)` look-up: under SQLite's limit on bound parameters


@dataclass(frozen=True)
class CacheKeyParts:
    config_fingerprint: str  # gate.model.fingerprint: everything of the configuration that makes the judge
    instructor_version: str
    input_sha256: tuple[tuple[str, str], ...]  # sorted (placeholder, sha256 of its rendered text)
    repeat_index: int

    def key(self) -> str:
        # A shallow dict: its fields are flat values and tuples, which JSON writes exactly as
        # `asdict` would (at a tenth of the cost: keys are built for every judgment of a run).
        flat = {f.name: getattr(self, f.name) for f in fields(self)}
        return sha256_hex(canonical_json({"key_schema": KEY_SCHEMA, **flat}))


def key_parts(
    loaded: LoadedPolicy,
    base_url: str,
    ragas_version: str,
    instructor_version: str,
    rendered: RenderedInput,
    repeat_index: int,
) -> CacheKeyParts:
    """Everything that shapes one judgment's verdict (pure: no ragas, no client)."""
    return CacheKeyParts(
        config_fingerprint=config_fingerprint(loaded, base_url, ragas_version),
        instructor_version=instructor_version,
        input_sha256=tuple(sorted(rendered.field_sha256.items())),
        repeat_index=repeat_index,
    )


@dataclass(frozen=True, slots=True)
class CachedVerdict:
    label: str
    reason: str


class JudgmentCache:
    """A process-safe store of ok verdicts. Open one per evaluator; close it with `close()`."""

    def __init__(self, cache_dir: Path) -> None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.path = cache_dir / CACHE_FILE
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        self._conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
        self._setup()

    def _setup(self) -> None:
        deadline = time.monotonic() + _BUSY_TIMEOUT_S
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = NORMAL")
                self._conn.execute(
                    "CREATE TABLE IF NOT EXISTS judgments ("
                    " key TEXT PRIMARY KEY, label TEXT NOT NULL, reason TEXT NOT NULL,"
                    " created_at REAL NOT NULL, parts TEXT NOT NULL)"
                )
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def get(self, key: str) -> CachedVerdict | None:
        with self._lock:
            row = self._conn.execute("SELECT label, reason FROM judgments WHERE key = ?", (key,)).fetchone()
        return None if row is None else CachedVerdict(label=str(row[0]), reason=str(row[1]))

    def get_many(self, keys: list[str]) -> dict[str, CachedVerdict]:
        """The verdicts stored under any of `keys` (absent keys are simply missing), in batches."""
        out: dict[str, CachedVerdict] = {}
        with self._lock:
            for start in range(0, len(keys), _BATCH):
                chunk = keys[start : start + _BATCH]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT key, label, reason FROM judgments WHERE key IN ({marks})", chunk
                ).fetchall()
                for key, label, reason in rows:
                    out[str(key)] = CachedVerdict(label=str(label), reason=str(reason))
        return out

    def put(self, key: str, parts: CacheKeyParts, label: str, reason: str, *, replace: bool = False) -> None:
        """Store a verdict; `replace` overwrites an entry that failed vetting (else the first one stays)."""
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        with self._lock:
            self._conn.execute(
                f"{verb} INTO judgments (key, label, reason, created_at, parts) VALUES (?, ?, ?, ?, ?)",
                (key, label, reason, time.time(), canonical_json(asdict(parts))),
            )

    def __len__(self) -> int:
        with self._lock:
            row = self._conn.execute("SELECT COUNT(*) FROM judgments").fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
