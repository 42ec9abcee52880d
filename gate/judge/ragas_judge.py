"""The Ragas-backed evaluator: `ragas.metrics.DiscreteMetric` + `ragas.llms.llm_factory`.

Importing this module does not import ragas, openai or instructor: `RagasEvaluator.__init__` does,
after `prepare_ragas_environment` has turned telemetry off (`RAGAS_DO_NOT_TRACK=true`) and pointed
`XDG_DATA_HOME` at a private directory (ragas writes a `ragas/uuid.json` there).

One judgment = up to `evaluator.retries.max_attempts` HTTP requests, each one `ascore` call:
- openai gets `max_retries=0`; instructor gets `max_retries=0`, which in instructor 1.17.0 means
  "retries after the first attempt" (tenacity `stop_after_attempt(max_retries + 1)`), so no re-ask;
  API errors are not retried by instructor at all (it wraps them in InstructorRetryException).
- our loop retries only the kinds in both `retry_on` and RETRYABLE, with `backoff_delay` between
  attempts; each attempt is bounded by `asyncio.timeout(timeout_s)` and the client's own timeout.
- under a run's pacer (gate/judge/pacing.py), each attempt first waits until it fits the provider's
  windows (outside its timeout), and a 429's backoff pauses the whole run instead of this judgment.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
import logging
import math
import os
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.judge import (
    FROM_ENV,
    FromEnv,
    Judgment,
    attach_partial_judgment,
    instructor_version,
    ragas_version,
    resolve_base_url,
)
from gate.judge.budget import SEND_GATE, Budget, Prices, SendGate
from gate.judge.cache import CacheKeyParts, JudgmentCache, key_parts
from gate.judge.cached import hit_judgment, sound_hit
from gate.judge.metering import SINK, JudgmentSink, WireAttempt, WireExpectations, event_hooks
from gate.judge.outcome import RETRYABLE, RetryTiming, backoff_delay, interpret_reply, kind_for_status, reply_evidence
from gate.judge.pacing import PACER
from gate.judge.render import RenderedInput, RenderError, render_case
from gate.model.cases import Case
from gate.model.errors import UsageError
from gate.model.policy import LoadedPolicy
from gate.model.records import CacheState, RecordErrorKind

log = logging.getLogger("gate.judge")

MAX_MESSAGE = 500


class JudgeConfigError(UsageError):
    """The evaluator cannot honour the policy as written (a usage error: fix the policy)."""


_PROCESS_DATA_DIR: list[Path] = []


def prepare_ragas_environment(data_dir: Path | None) -> Path:
    """Telemetry off and a private XDG_DATA_HOME, before ragas is imported. Returns the data dir.

    Without a `data_dir`, one temporary directory per process is used.
    """
    os.environ["RAGAS_DO_NOT_TRACK"] = "true"
    if data_dir is None:
        if not _PROCESS_DATA_DIR:
            _PROCESS_DATA_DIR.append(Path(tempfile.mkdtemp(prefix="ragas-gate-data-")))
            atexit.register(_remove_data_dir, _PROCESS_DATA_DIR[0], os.getpid())
        data_dir = _PROCESS_DATA_DIR[0]
    data_dir.mkdir(parents=True, exist_ok=True)
    os.environ["XDG_DATA_HOME"] = str(data_dir)
    try:  # an earlier import may have cached the answer before the variable was set
        import sys

        analytics = sys.modules.get("ragas._analytics")
        if analytics is not None:
            analytics.do_not_track.cache_clear()
    except AttributeError:
        pass
    return data_dir


def _remove_data_dir(path: Path, owner_pid: int) -> None:
    """At exit, the temporary data dir goes with the process that made it (not with a forked worker)."""
    if os.getpid() == owner_pid:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class _Outcome:
    label: str | None = None
    reason: str | None = None
    kind: RecordErrorKind | None = None
    message: str | None = None
    retry_after: float | None = None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(seen) < 12 and all(cur is not s for s in seen):
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _prices(loaded: LoadedPolicy, api_key: str) -> Prices:
    """The policy's prices, once a key is there and prices are given (else a JudgeConfigError)."""
    ev = loaded.policy.evaluator
    if not api_key:
        raise JudgeConfigError(f"no API key: the environment variable `{ev.api_key_env}` is empty or unset")
    if ev.price is None:
        raise JudgeConfigError(
            f"`evaluator.price` is missing for model {ev.model!r}; fix: add reviewed prices to the policy"
        )
    return Prices(ev.price.input_per_mtok, ev.price.output_per_mtok, ev.price.currency)


@functools.lru_cache(maxsize=4)
def tls_context(cert_file: str | None, cert_dir: str | None) -> Any:
    """The verifying TLS context httpx would build (it reads SSL_CERT_FILE and SSL_CERT_DIR, the
    cache's key), built once a process: building one reads the whole CA bundle (~50 ms), which was
    most of what making an evaluator cost. One context serves every client."""
    import httpx2

    return httpx2.create_ssl_context()


def structured_client(client: Any, response_format: str) -> Any:
    """The instructor client that asks `client` for the verdict, in the policy's response format:
    the one place the gate, not ragas, picks instructor's mode. ragas hard-codes JSON mode (the
    schema in a system message, `response_format: json_object`), which a small model answers by
    copying the schema back; `json_schema` sends the verdict's schema as
    `response_format: {type: json_schema}`, so the provider constrains decoding to it."""
    import instructor

    mode = instructor.Mode.JSON_SCHEMA if response_format == "json_schema" else instructor.Mode.JSON
    return instructor.from_openai(client, mode=mode)


def closed_schema(model: Any) -> Any:
    """`model` (ragas' verdict model) whose JSON schema admits no other key (`additionalProperties:
    false`). A provider that constrains decoding to the schema (llama.cpp, vLLM, OpenAI) then cannot
    let a small model add keys until `max_output_tokens` cuts the reply; a reply that still carries
    one is read as before (an extra key is ignored)."""
    from pydantic import ConfigDict

    config = ConfigDict(json_schema_extra={"additionalProperties": False})
    return type(model.__name__, (model,), {"model_config": config, "__module__": model.__module__})


class RagasEvaluator:
    """Implements `gate.judge.Evaluator`. Build it with `make_evaluator`."""

    def __init__(
        self,
        loaded: LoadedPolicy,
        *,
        api_key: str,
        base_url: str,
        cache_dir: Path | None,
        timing: RetryTiming | None = None,
        rng: random.Random | None = None,
        data_dir: Path | None = None,
        transport: Any = None,
    ) -> None:
        ev = loaded.policy.evaluator
        self.loaded = loaded
        self.base_url = base_url
        self.prices = _prices(loaded, api_key)
        self.timing = timing or RetryTiming()
        self._rng = rng or random.Random()
        self._api_key = api_key
        self.ragas_version = ragas_version()
        self.instructor_version = instructor_version()
        self._sem: asyncio.Semaphore | None = None
        self.cache = JudgmentCache(cache_dir) if cache_dir is not None else None

        if data_dir is None and cache_dir is not None:
            data_dir = cache_dir / "ragas-data"
        prev_xdg = os.environ.get("XDG_DATA_HOME")
        prepare_ragas_environment(data_dir)
        try:
            import httpx2 as httpx
            import openai
            from ragas.llms import llm_factory
            from ragas.metrics import DiscreteMetric

            for name in ("instructor", "ragas"):
                # our records carry every failure; their loggers would print each one again
                logging.getLogger(name).setLevel(logging.CRITICAL)
            self._openai = openai
            connect = min(ev.timeout_s, 10.0)
            self._http = httpx.AsyncClient(
                verify=tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")),
                event_hooks=event_hooks(),
                transport=transport,  # None: the network; the batch lane captures and replays here
                timeout=httpx.Timeout(ev.timeout_s, connect=connect),
                limits=httpx.Limits(
                    max_connections=ev.max_concurrency + 4, max_keepalive_connections=ev.max_concurrency
                ),
            )
            self._client = openai.AsyncOpenAI(
                api_key=api_key,
                base_url=base_url,
                max_retries=0,
                timeout=httpx.Timeout(ev.timeout_s, connect=connect),
                http_client=self._http,
            )
            model_kwargs: dict[str, Any] = {
                "temperature": ev.temperature,
                "top_p": ev.top_p,
                "max_tokens": ev.max_output_tokens,
                "max_retries": 0,
            }
            if ev.seed is not None:
                model_kwargs["seed"] = ev.seed
            llm: Any = llm_factory(ev.model, client=self._client, **model_kwargs)
            llm.client = structured_client(self._client, ev.response_format)
            self._llm: Any = llm
            self._metric = DiscreteMetric(
                name=loaded.policy.metric.name,
                allowed_values=list(loaded.policy.metric.allowed_values),
                prompt=loaded.prompt_text,
            )
            if ev.response_format == "json_schema":
                self._metric._response_model = closed_schema(self._metric._response_model)
        finally:
            # ragas resolved its data dir when llm_factory built its first event; put ours back
            if prev_xdg is None:
                os.environ.pop("XDG_DATA_HOME", None)
            else:
                os.environ["XDG_DATA_HOME"] = prev_xdg
        self._check_sampling()

    # -- configuration ---------------------------------------------------------------------------
    def _check_sampling(self) -> None:
        """Refuse a model for which ragas would rewrite the policy's sampling settings."""
        ev = self.loaded.policy.evaluator
        mapped: dict[str, Any] = self._llm._map_provider_params()  # what ragas will put on the wire
        temp = mapped.get("temperature")
        max_tokens = mapped.get("max_tokens", mapped.get("max_completion_tokens"))
        if not isinstance(temp, int | float) or not math.isclose(float(temp), ev.temperature):
            raise JudgeConfigError(
                f"ragas {self.ragas_version} sends temperature {temp!r} for model {ev.model!r} (a reasoning "
                f"model), not the policy's {ev.temperature!r}; fix: set `evaluator.temperature: {temp}`"
            )
        if max_tokens != ev.max_output_tokens or mapped.get("seed") != ev.seed:
            raise JudgeConfigError(
                f"ragas {self.ragas_version} would not send the policy's max_output_tokens/seed for {ev.model!r}"
            )
        top_p = mapped.get("top_p", ev.top_p)  # absent: ragas sends none for this model (a reasoning model)
        if not isinstance(top_p, int | float) or not math.isclose(float(top_p), ev.top_p):
            raise JudgeConfigError(
                f"ragas {self.ragas_version} sends top_p {top_p!r} for model {ev.model!r}, not the policy's "
                f"{ev.top_p!r}; fix: set `evaluator.top_p: {top_p}`"
            )

    def _semaphore(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.loaded.policy.evaluator.max_concurrency)
        return self._sem

    def render(self, case: Case) -> RenderedInput:
        return render_case(self.loaded.prompt_text, self.loaded.placeholders, case)

    def key_parts(self, rendered: RenderedInput, repeat_index: int) -> CacheKeyParts:
        return key_parts(
            self.loaded, self.base_url, self.ragas_version, self.instructor_version, rendered, repeat_index
        )

    def cache_key(self, case: Case, repeat_index: int) -> str:
        """The cache key of one judgment (raises RenderError when the case cannot be rendered)."""
        return self.key_parts(self.render(case), repeat_index).key()

    def cached(self, case: Case, repeat_index: int) -> Judgment | None:
        """The cached judgment, without any call, or None (no cache, a miss, or unrenderable)."""
        if self.cache is None:
            return None
        try:
            rendered = self.render(case)
        except RenderError:
            return None
        hit = self.cache.get(self.key_parts(rendered, repeat_index).key())
        return hit_judgment(hit, rendered) if hit is not None and sound_hit(hit, self.loaded) else None

    # -- judging ---------------------------------------------------------------------------------
    async def judge(self, case: Case, repeat_index: int, budget: Budget) -> Judgment:
        try:
            rendered = self.render(case)
        except RenderError as exc:
            return Judgment(status="error", error_kind="bad_request", error_message=f"input contract: {exc.message}")
        # The key costs a canonical dump and a hash: only worth it when there is a cache.
        parts = self.key_parts(rendered, repeat_index) if self.cache is not None else None
        key = parts.key() if parts is not None else ""
        poisoned = False  # an entry that fails vetting: never a verdict; judged again, then replaced
        if self.cache is not None:
            try:
                hit = self.cache.get(key)
            except Exception as exc:  # a broken cache is a miss, never a failed judgment
                log.warning("judgment cache read failed (%s); judging instead", type(exc).__name__)
                hit = None
            if hit is not None and sound_hit(hit, self.loaded):
                return hit_judgment(hit, rendered)
            poisoned = hit is not None
        ev = self.loaded.policy.evaluator
        sink = JudgmentSink(
            budget=budget,
            prices=self.prices,
            expect=WireExpectations(
                prompt=rendered.prompt,
                temperature=float(ev.temperature),
                seed=ev.seed,
                max_output_tokens=ev.max_output_tokens,
            ),
        )
        cache_state: CacheState = ("rejudged" if poisoned else "miss") if self.cache is not None else "off"
        token = SINK.set(sink)
        try:
            outcome = await self._attempts(rendered, sink)
        except asyncio.CancelledError as exc:
            sink.settle_pending("cancelled")
            interrupted = _Outcome(kind="cancelled", message="interrupted while in flight")
            attach_partial_judgment(exc, self._assemble(sink, rendered, cache_state, interrupted))
            raise
        finally:
            sink.settle_pending("cancelled")
            SINK.reset(token)

        judgment = self._assemble(sink, rendered, cache_state, outcome)
        if judgment.status == "ok" and judgment.label is not None and self.cache is not None and parts is not None:
            try:
                self.cache.put(key, parts, judgment.label, judgment.reason or "", replace=poisoned)
            except Exception as exc:
                log.warning("judgment cache write failed (%s)", type(exc).__name__)
        return judgment

    def _assemble(self, sink: JudgmentSink, rendered: RenderedInput, cache: CacheState, outcome: _Outcome) -> Judgment:
        judgment = Judgment(
            status="ok",
            attempts=[a.to_attempt() for a in sink.attempts],
            input_tokens=sum(a.input_tokens for a in sink.attempts),
            output_tokens=sum(a.output_tokens for a in sink.attempts),
            cost=math.fsum(a.cost for a in sink.attempts),
            cache=cache,
            prompt_sha256=rendered.prompt_sha256,
            input_sha256=rendered.input_sha256,
        )
        if outcome.kind is None and outcome.label is not None:
            judgment.label = outcome.label
            # A provider can echo anything back, the key included: reasons reach PR comments.
            judgment.reason = self._scrub_key(outcome.reason) if outcome.reason is not None else None
            return judgment
        # nothing sent: skipped (budget, cancelled); something sent and no verdict: an error
        judgment.status = "skipped" if outcome.kind in ("budget", "cancelled") and not sink.attempts else "error"
        judgment.error_kind = outcome.kind or "parse_error"
        judgment.error_message = self._scrub(outcome.message or "no usable reply")
        return judgment

    async def _attempts(self, rendered: RenderedInput, sink: JudgmentSink) -> _Outcome:
        ev = self.loaded.policy.evaluator
        retry_on = set(ev.retries.retry_on) & RETRYABLE
        # Counted here, not from the request hook: an attempt that times out before its request is
        # built never reaches the hook, and must still use up one of `max_attempts`.
        tries = 0
        while True:
            tries += 1
            outcome = await self._one_attempt(rendered, sink)
            if outcome.kind is None or outcome.kind not in retry_on:
                return outcome
            if tries >= ev.retries.max_attempts:
                outcome.message = f"{outcome.message} (gave up after {tries} attempt{'s' if tries != 1 else ''})"
                return outcome
            delay = backoff_delay(self.timing, tries, outcome.retry_after, self._rng)
            pacer = PACER.get()
            if pacer is not None and outcome.kind == "rate_limit":
                pacer.pause(delay)  # every judgment of the run waits, not only this one
            else:
                await asyncio.sleep(delay)

    async def _one_attempt(self, rendered: RenderedInput, sink: JudgmentSink) -> _Outcome:
        ev = self.loaded.policy.evaluator
        timeout_s = ev.timeout_s
        sent_before = len(sink.attempts)
        pacer = PACER.get()
        async with self._semaphore():
            while True:
                if pacer is not None:  # waiting for the provider's window is not part of the attempt's timeout
                    gate = SEND_GATE.get()
                    ticket = await pacer.admit(
                        len(rendered.prompt), ev.max_output_tokens, gate.may_send if gate is not None else None
                    )
                    if ticket is None and gate is not None:  # the lane stopped while this one waited
                        return self._stopped(sink, gate, "for the provider's rate limit")
                    sink.ticket = ticket
                try:
                    # A timeout scope, not `asyncio.wait_for`: no second task per attempt (the
                    # metering hooks read this task's sink as they are).
                    async with asyncio.timeout(timeout_s):
                        result = await self._metric.ascore(llm=self._llm, **rendered.kwargs)
                except TimeoutError:
                    sink.settle_pending("timeout")
                    return _Outcome(kind="timeout", message=f"no reply within timeout_s={timeout_s:g}")
                except Exception as exc:
                    if sink.refused == "busy" and await self._room_freed(sink, timeout_s):
                        continue  # nothing was sent: the same attempt, once an attempt in flight settled
                    outcome = self._classify(exc, sink, sent_before)
                    sink.settle_pending("timeout" if outcome.kind == "timeout" else "connection")
                    self._mark_last(sink, sent_before, outcome.kind)
                    return outcome
                break
        sink.settle_pending("connection")
        value = getattr(result, "value", None)
        reason = getattr(result, "reason", None)
        allowed = self.loaded.policy.metric.allowed_values
        if not isinstance(value, str) or value not in allowed:
            outcome = _Outcome(kind="invalid_label", message=f"ragas returned {value!r}, not one of {allowed}")
        elif not isinstance(reason, str) or not reason.strip():
            outcome = _Outcome(kind="parse_error", message=f"the reply for {value!r} has a missing or empty `reason`")
        else:
            outcome = _Outcome(label=value, reason=reason)
        self._mark_last(sink, sent_before, outcome.kind)
        return outcome

    @staticmethod
    async def _room_freed(sink: JudgmentSink, timeout_s: float) -> bool:
        """The reservation did not fit while others were in flight: wait until one settles (True,
        ask again). An attempt in flight lives at most `timeout_s`; none settling long after that
        is the boundary reached (False)."""
        sink.refused = None
        if await sink.budget.settled_since(sink.busy_settles, 2 * timeout_s + 10.0):
            gate = SEND_GATE.get()
            if gate is not None and not gate.may_send():  # the lane stopped while this one waited
                RagasEvaluator._stopped(sink, gate, "for budget room")
                return False
            sink.refusal_message = None
            return True
        sink.refused = "budget"
        sink.budget.exhausted = True
        return False

    @staticmethod
    def _stopped(sink: JudgmentSink, gate: SendGate, waited_for: str) -> _Outcome:
        """The lane stopped (a decided verdict, a failed control, the boundary) while this judgment
        waited: its request is not sent, and it is not needed."""
        gate.refused = True
        sink.refused = "stopped"
        sink.refusal_message = f"not sent: the lane stopped while this judgment waited {waited_for}"
        return _Outcome(kind="cancelled", message=sink.refusal_message)

    @staticmethod
    def _mark_last(sink: JudgmentSink, sent_before: int, kind: RecordErrorKind | None) -> None:
        """Give this attempt's answered 2xx request the judgment's reading of its reply."""
        if len(sink.attempts) > sent_before:
            last = sink.attempts[-1]
            if last.status_code is not None and kind_for_status(last.status_code) is None:
                last.error_kind = kind

    def _classify(self, exc: Exception, sink: JudgmentSink, sent_before: int) -> _Outcome:
        openai = self._openai
        if sink.refused == "budget":
            return _Outcome(kind="budget", message=sink.refusal_message)
        if sink.refused == "contract":
            return _Outcome(kind="bad_request", message=f"wire contract: {sink.refusal_message}")
        if sink.refused in ("output", "stopped"):
            return _Outcome(kind="cancelled", message=sink.refusal_message)
        last = sink.attempts[-1] if len(sink.attempts) > sent_before else None
        for e in _chain(exc):
            name = type(e).__name__
            if name == "IncompleteOutputException":
                return _Outcome(kind="parse_error", message=self._cut_message(last))
            if isinstance(e, openai.APIStatusError):
                code = e.status_code
                kind = kind_for_status(code) or "bad_request"
                if code == 404 and getattr(e, "code", None) == "model_not_found":
                    kind = "model_not_found"  # the provider does not serve the model: retired, misspelt, no access
                retry_after = last.retry_after_s if last is not None else None
                return _Outcome(kind=kind, message=f"HTTP {code}: {self._api_message(e)}", retry_after=retry_after)
            if isinstance(e, openai.APITimeoutError):
                return _Outcome(kind="timeout", message="the provider did not answer within the client timeout")
            if isinstance(e, openai.APIConnectionError):
                cause = e.__cause__
                detail = f" ({type(cause).__name__})" if cause is not None else ""
                return _Outcome(kind="connection", message=f"connection error{detail}")
        if last is not None and last.status_code is not None and kind_for_status(last.status_code) is None:
            if last.finish_reason == "length":
                return _Outcome(kind="parse_error", message=self._cut_message(last))
            reading = interpret_reply(
                last.content, self.loaded.policy.metric.allowed_values, self.loaded.policy.metric.label_aliases
            )
            seen = reply_evidence(last.content, last.finish_reason)
            if reading.error_kind is not None:
                return _Outcome(kind=reading.error_kind, message=f"{reading.message}{seen}")
            if reading.aliased_from is not None:
                return _Outcome(label=reading.label, reason=reading.reason)
            return _Outcome(kind="parse_error", message=f"ragas rejected the reply: {type(exc).__name__}{seen}")
        return _Outcome(kind="bad_request", message=f"unexpected evaluator error: {type(exc).__name__}: {exc}")

    def _cut_message(self, last: WireAttempt | None) -> str:
        """A reply cut at the length limit, with what the model had sent by then: a verdict cut
        short wants more tokens; anything else (a small model copying the schema back) never ends."""
        ev = self.loaded.policy.evaluator
        seen = reply_evidence(last.content, last.finish_reason) if last is not None else ""
        # Under json_schema the reply already has the verdict's shape: what never ends is its reason.
        other = (
            "a reason that never ends: ask for a short reason in the prompt, or use a larger model"
            if ev.response_format == "json_schema"
            else "try evaluator.response_format: json_schema"
        )
        return (
            f"finish_reason length: the reply was cut at max_output_tokens={ev.max_output_tokens}; fix: raise "
            "evaluator.max_output_tokens if the reply is a verdict cut short; if it is not one, more "
            f"tokens will not end it ({other}){seen}"
        )

    @staticmethod
    def _api_message(e: Any) -> str:
        body = getattr(e, "body", None)
        if isinstance(body, dict):
            msg = body.get("message")
            if isinstance(msg, str):
                return msg
            err = body.get("error")
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                return str(err["message"])
        return json.dumps(body)[:200] if body is not None else type(e).__name__

    def _scrub_key(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def _scrub(self, message: str) -> str:
        message = self._scrub_key(message)
        return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"

    async def aclose(self) -> None:
        await self._client.close()
        await self._http.aclose()
        if self.cache is not None:
            self.cache.close()


def make_evaluator(
    loaded: LoadedPolicy,
    *,
    api_key: str,
    cache_dir: Path | None,
    base_url_env: str | FromEnv | None = FROM_ENV,
    timing: RetryTiming | None = None,
    rng: random.Random | None = None,
    data_dir: Path | None = None,
    transport: Any = None,
) -> RagasEvaluator:
    """Build the Ragas-backed evaluator (imports ragas now; ~2 s once per process).

    `api_key` is the value of the env var the policy names (the caller reads it; an empty key is
    refused with JudgeConfigError, a UsageError). `cache_dir=None` turns the cache off.
    `base_url_env` defaults to OPENAI_BASE_URL at call time. `timing` and `rng` set the retry
    backoff (tests shrink it). `data_dir` is ragas' private XDG_DATA_HOME (default: under
    `cache_dir`, else a temporary directory). `transport` (an httpx2 async transport) replaces the
    network under the same client, hooks and parser: the batch lane (gate.judge.batch_wire). Raises JudgeConfigError when the policy cannot be
    honoured (no key, no prices, a model whose sampling settings ragas rewrites).
    """
    return RagasEvaluator(
        loaded,
        api_key=api_key,
        base_url=resolve_base_url(loaded.policy.evaluator.base_url, base_url_env),
        cache_dir=cache_dir,
        timing=timing,
        rng=rng,
        data_dir=data_dir,
        transport=transport,
    )
