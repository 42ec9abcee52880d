"""A fake Files + Batches API on a `FakeOpenAI` server, answered by the same scripted judge.

    with FakeOpenAI() as fake:
        batches = FakeBatches(fake)                      # mounts /v1/files and /v1/batches
        fake.script("case-17", reply("fail"))            # rules and the oracle answer batch lines too
        ... gate run --batch submit / collect ...
        assert fake.count() == batches.lines_run          # every line ran through the judge once

Routes (under the server's prefix: `/v1`, or Azure OpenAI v1's `/openai/v1`): `POST /files`
(multipart, purpose=batch), `GET /files/{id}/content`, `POST /batches`, `GET /batches/{id}`,
`GET /batches` (a list). Each status request moves a batch one step along its script (default
validating -> in_progress -> finalizing -> completed); on reaching `completed`, `expired` or
`cancelled` the lines are run through `FakeOpenAI.judge_offline` (rules, oracle, usage): a 2xx
answer goes to the output file, any other to the error file with its status, a dropped connection
to the error file without a response; on `expired` / `cancelled` only the first `answer_first`
lines run and the rest get `batch_expired` / `batch_cancelled` error lines. The output file's
lines are shuffled (`seed`). `missing` custom ids appear in neither file.

Validation (as the provider does it, on the first status request): every line needs a unique
`custom_id`, `method: POST`, the `url` of this API's shape (`/v1/chat/completions`; Azure:
`/chat/completions`) equal to the batch's `endpoint`, and one `body.model` on every line; a batch
that breaks any is `failed` with `errors` and runs nothing. `fail_validation=True` fails it anyway.
`duplicate` custom ids are run (and answered in the output file) twice, as a provider that
retried a line may; `foreign` custom ids get an answer line of their own, copied from the first
answered line (ids the batch was never sent).
`status_errors=N`: the next N status requests answer HTTP 500 (the provider is down for a while);
`upload_errors=N`: the next N uploads answer HTTP 500 and store nothing.
`hold_create=Event()`: `POST /batches` creates the batch, sets `create_arrived`, and answers only
once the event is set (or after 60 s), so a test can kill the client after the provider created a
batch and before the client learned its id; the server answers nothing else meanwhile.
`create_errors=N`: the next N `POST /batches` create the batch, then answer HTTP 500 (the answer
lost on the way, as a gateway's 502 or a dropped connection loses it).
"""

from __future__ import annotations

import email.parser
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from fake_openai import FakeOpenAI, RecordedRequest

DEFAULT_SCRIPT = ("validating", "in_progress", "finalizing", "completed")


@dataclass
class FakeBatch:
    id: str
    input_file_id: str
    endpoint: str
    metadata: dict[str, str]
    script: tuple[str, ...]
    step: int = 0
    status: str = "validating"
    errors: list[dict[str, Any]] = field(default_factory=list)
    output_file_id: str | None = None
    error_file_id: str | None = None
    total: int = 0
    completed: int = 0
    failed: int = 0
    created_at: int = field(default_factory=lambda: int(time.time()))
    polls: int = 0


class FakeBatches:
    def __init__(
        self,
        fake: FakeOpenAI,
        *,
        script: tuple[str, ...] = DEFAULT_SCRIPT,
        seed: int = 7,
        answer_first: int = 0,
        missing: set[str] | None = None,
        fail_validation: bool = False,
        status_errors: int = 0,
        duplicate: set[str] | None = None,
        foreign: list[str] | None = None,
        hold_create: threading.Event | None = None,
        create_errors: int = 0,
        upload_errors: int = 0,
    ) -> None:
        self.create_errors = create_errors
        self.upload_errors = upload_errors  # the next N uploads answer HTTP 500 (nothing stored)
        self.hold_create = hold_create
        self.create_arrived = threading.Event()
        self.duplicate = duplicate or set()
        self.foreign = foreign or []
        self.fake = fake
        self.script = script
        self.seed = seed
        self.answer_first = answer_first
        self.missing = missing or set()
        self.fail_validation = fail_validation
        self.status_errors = status_errors  # the next N status requests answer HTTP 500
        self.files: dict[str, tuple[str, str, bytes]] = {}  # id -> (purpose, filename, content)
        self.batches: dict[str, FakeBatch] = {}
        self.lines_run = 0
        self._lock = threading.Lock()
        self._n = 0
        azure = fake.prefix.rstrip("/").endswith("/openai/v1")
        self.line_url = "/chat/completions" if azure else "/v1/chat/completions"
        fake.routes = self.route

    # -- observations ---------------------------------------------------------------------------
    def input_lines(self, batch_id: str | None = None) -> list[dict[str, Any]]:
        """The JSONL lines uploaded for a batch (the only one when not named)."""
        batch = self.batches[batch_id] if batch_id else next(iter(self.batches.values()))
        return [json.loads(x) for x in self.files[batch.input_file_id][2].splitlines() if x.strip()]

    # -- routing --------------------------------------------------------------------------------
    def _id(self, kind: str) -> str:
        self._n += 1
        return f"{kind}-fake{self._n:04d}"

    def route(self, rec: RecordedRequest, raw: bytes) -> tuple[int, bytes, str] | None:
        prefix = self.fake.prefix
        if not rec.path.startswith(prefix + "/"):
            return None
        tail = rec.path[len(prefix) :]
        if rec.method == "POST" and tail == "/batches":
            return self._create_held(rec.body)
        with self._lock:
            if rec.method == "POST" and tail == "/files":
                if self.upload_errors > 0:
                    self.upload_errors -= 1
                    return _json(500, {"error": {"message": "The server had an error (fake)"}})
                return self._upload(rec, raw)
            m = re.fullmatch(r"/files/([\w-]+)/content", tail)
            if rec.method == "GET" and m:
                entry = self.files.get(m.group(1))
                if entry is None:
                    return _json(404, {"error": {"message": "no such file"}})
                return 200, entry[2], "application/octet-stream"
            if rec.method == "GET" and tail == "/batches":
                data = [self._object(b) for b in reversed(list(self.batches.values()))]
                return _json(200, {"object": "list", "data": data, "has_more": False})
            m = re.fullmatch(r"/batches/([\w-]+)", tail)
            if rec.method == "GET" and m:
                if self.status_errors > 0:
                    self.status_errors -= 1
                    return _json(500, {"error": {"message": "The server had an error (fake)"}})
                batch = self.batches.get(m.group(1))
                if batch is None:
                    return _json(404, {"error": {"message": "no such batch"}})
                self._advance(batch)
                return _json(200, self._object(batch))
        return None

    def _upload(self, rec: RecordedRequest, raw: bytes) -> tuple[int, bytes, str]:
        ctype = rec.headers.get("content-type", "")
        msg = email.parser.BytesParser().parsebytes(b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + raw)
        purpose, filename, content = "", "", b""
        for part in msg.get_payload() if msg.is_multipart() else []:
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True) or b""
            if name == "purpose":
                purpose = payload.decode()
            elif name == "file":
                filename = part.get_filename() or ""
                content = payload
        if purpose != "batch":
            return _json(400, {"error": {"message": f"purpose must be batch, not {purpose!r}"}})
        fid = self._id("file")
        self.files[fid] = (purpose, filename, content)
        return _json(
            200,
            {
                "id": fid,
                "object": "file",
                "bytes": len(content),
                "created_at": int(time.time()),
                "filename": filename,
                "purpose": purpose,
                "status": "processed",
            },
        )

    def _create_held(self, body: Any) -> tuple[int, bytes, str]:
        with self._lock:
            created = self._create(body)
            if created[0] == 200 and self.create_errors > 0:
                self.create_errors -= 1
                return _json(500, {"error": {"message": "The server had an error (fake)"}})
        if self.hold_create is not None and created[0] == 200:
            self.create_arrived.set()
            self.hold_create.wait(60)  # on the server's loop: nothing else is answered meanwhile
        return created

    def _create(self, body: Any) -> tuple[int, bytes, str]:
        if not isinstance(body, dict) or body.get("input_file_id") not in self.files:
            return _json(400, {"error": {"message": "input_file_id names no uploaded file"}})
        if body.get("completion_window") != "24h":
            return _json(400, {"error": {"message": "completion_window must be 24h"}})
        batch = FakeBatch(
            id=self._id("batch"),
            input_file_id=body["input_file_id"],
            endpoint=str(body.get("endpoint")),
            metadata=dict(body.get("metadata") or {}),
            script=self.script,
        )
        batch.total = len(self._lines(batch))
        self.batches[batch.id] = batch
        return _json(200, self._object(batch))

    def _lines(self, batch: FakeBatch) -> list[Any]:
        out: list[Any] = []
        for raw in self.files[batch.input_file_id][2].splitlines():
            if raw.strip():
                try:
                    out.append(json.loads(raw))
                except ValueError:
                    out.append(None)
        return out

    def _validate(self, batch: FakeBatch) -> list[dict[str, Any]]:
        errors: list[dict[str, Any]] = []
        seen: set[str] = set()
        models: set[str] = set()
        if batch.endpoint != self.line_url:
            errors.append({"code": "invalid_endpoint", "message": f"endpoint must be {self.line_url}", "line": None})
        for n, line in enumerate(self._lines(batch), start=1):
            if not isinstance(line, dict) or not isinstance(line.get("body"), dict):
                errors.append({"code": "invalid_json_line", "message": "not a request line", "line": n})
                continue
            cid = line.get("custom_id")
            if not isinstance(cid, str) or cid in seen:
                errors.append({"code": "duplicate_custom_id", "message": f"custom_id {cid!r}", "line": n})
            seen.add(str(cid))
            if line.get("method") != "POST" or line.get("url") != self.line_url:
                errors.append({"code": "invalid_url", "message": f"url must be {self.line_url}", "line": n})
            models.add(str(line["body"].get("model")))
        if len(models) > 1:
            errors.append(
                {"code": "mixed_models", "message": f"one model per batch, got {sorted(models)}", "line": None}
            )
        if self.fail_validation and not errors:
            errors.append({"code": "invalid_request", "message": "the batch failed validation (fake)", "line": 1})
        return errors

    def _advance(self, batch: FakeBatch) -> None:
        batch.polls += 1
        if batch.status in ("completed", "expired", "cancelled", "failed"):
            return
        if batch.status == "validating":
            batch.errors = self._validate(batch)
            if batch.errors:
                batch.status = "failed"
                return
        batch.step = min(batch.step + 1, len(batch.script) - 1)
        batch.status = batch.script[batch.step]
        if batch.status in ("completed", "expired", "cancelled"):
            self._run(batch)

    def _run(self, batch: FakeBatch) -> None:
        lines = self._lines(batch)
        cut = len(lines) if batch.status == "completed" else self.answer_first
        out: list[dict[str, Any]] = []
        err: list[dict[str, Any]] = []
        for n, line in enumerate(lines):
            cid = line["custom_id"]
            if cid in self.missing:
                continue
            rid = f"batch_req_{batch.id}_{n}"
            if n >= cut:
                code = "batch_expired" if batch.status == "expired" else "batch_cancelled"
                err.append({"id": rid, "custom_id": cid, "response": None, "error": {"code": code, "message": code}})
                continue
            for _ in range(2 if cid in self.duplicate else 1):
                self._answer(rid, cid, line, out, err)
        if out:
            out.extend({**out[0], "id": f"{out[0]['id']}_{n}", "custom_id": cid} for n, cid in enumerate(self.foreign))
        random.Random(self.seed).shuffle(out)
        batch.completed, batch.failed = len(out), len(err)
        if out:
            batch.output_file_id = self._id("file")
            self.files[batch.output_file_id] = ("batch_output", "output.jsonl", _jsonl(out))
        if err:
            batch.error_file_id = self._id("file")
            self.files[batch.error_file_id] = ("batch_output", "errors.jsonl", _jsonl(err))

    def _answer(
        self, rid: str, cid: str, line: dict[str, Any], out: list[dict[str, Any]], err: list[dict[str, Any]]
    ) -> None:
        """One line run through the scripted judge, its answer into the output or the error file."""
        self.lines_run += 1
        status, payload = self.fake.judge_offline(line["body"], line["url"])
        if status is None:
            err.append(
                {
                    "id": rid,
                    "custom_id": cid,
                    "response": None,
                    "error": {"code": "server_error", "message": "dropped"},
                }
            )
        elif 200 <= status < 300:
            out.append(
                {"id": rid, "custom_id": cid, "response": {"status_code": status, "body": payload}, "error": None}
            )
        else:
            err.append(
                {"id": rid, "custom_id": cid, "response": {"status_code": status, "body": payload}, "error": None}
            )

    def _object(self, b: FakeBatch) -> dict[str, Any]:
        return {
            "id": b.id,
            "object": "batch",
            "endpoint": b.endpoint,
            "errors": {"object": "list", "data": b.errors} if b.errors else None,
            "input_file_id": b.input_file_id,
            "completion_window": "24h",
            "status": b.status,
            "output_file_id": b.output_file_id,
            "error_file_id": b.error_file_id,
            "created_at": b.created_at,
            "request_counts": {"total": b.total, "completed": b.completed, "failed": b.failed},
            "metadata": b.metadata,
        }


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def _json(code: int, payload: Any) -> tuple[int, bytes, str]:
    return code, json.dumps(payload).encode(), "application/json"
