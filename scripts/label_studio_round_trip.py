"""A real Label Studio 1.23.2 round trip: `make label-studio-test` (Label Studio in a venv of its own,
.venv-ls, pinned by requirements-ls.lock).

Label Studio runs as two servers (two processes, each with its own data directory and SQLite
database), started offline on 127.0.0.1 with its version check, analytics and error reporting off.
Everything is done through their HTTP API with the request bodies Label Studio's own pages send:
people sign up through the signup form and act in a session of their own (cookie and CSRF token),
annotations are created, edited and deleted as the editor does. What it asserts, in a scratch
directory (nothing of the checkout is written):
1. the audit queue of a product run of policies/example-product (app v2.4, the offline rule judge,
   six questions a slice: its audit plan, 7 items), and `gate review export --format label-studio`:
   Label Studio lists the tasks in tasks.json's order, which is not the queue's, and no task field
   names a stratum or a draw;
2. server `default`: two people label every task (one abstain, one skip, one disagreement, one task
   left for later); the JSON export imported: every label on the item its task shows, once, by
   label-studio:default:<user id>; the same export again, and its JSON_MIN, append nothing;
3. one person edits an annotation in the editor, the other labels the task left; the JSON_MIN
   export imported: the edited annotation's line retracted and the new label appended;
4. annotations deleted there (one of a task, and both of another), a task made by hand there and
   labelled; the JSON export imported: the one deleted beside another retracted and named, the two of
   the task the default export now leaves out kept and counted, the hand-made task skipped with a
   note; the export with all tasks then retracts those two;
5. a second server, whose task, annotation and user ids start from 1 again: two other people label
   the same tasks; its JSON export imported without `--server` is refused (exit 2, naming
   --server); its export snapshot with annotators expanded, with `--server eu`, imports them by email;
6. after each import, the ledger's labels in force are exactly each person's latest label of each
   item in Label Studio (what this script did there), each once; `gate review status` reads them.
Exits 0 when every check holds, 1 naming the first that fails, 2 when Label Studio cannot start.
It prints how long each stage took.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from review_ui import Failed, build_run_and_queue, check, scratch

from gate.review.ledger import active_lines, read_ledger
from gate.review.queue import read_queue

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "Reviewer-pass-1"  # a throwaway account on a server that lives for this run
START_TIMEOUT = 900.0  # seconds: a first start migrates a new SQLite database (~40 s quiet, minutes under load)
OFFLINE = {  # no call out: no version check, no analytics, no error reports (Sentry is on by default)
    "LATEST_VERSION_CHECK": "false",
    "COLLECT_ANALYTICS": "false",
    "SENTRY_DSN": "",
    "FRONTEND_SENTRY_DSN": "",
    "FEATURE_FLAGS_OFFLINE": "true",
}


class CannotStart(Exception):
    pass


# ---- a Label Studio server and the people on it -------------------------------------------------
class Server:
    """One Label Studio process on 127.0.0.1 with a data directory of its own."""

    def __init__(self, binary: Path, name: str, work: Path) -> None:
        self.name, self.data = name, work / f"label-studio-{name}"
        self.data.mkdir()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = self.data / "server.log"
        env = {**os.environ, **OFFLINE, "LABEL_STUDIO_BASE_DATA_DIR": str(self.data), "HOME": str(self.data)}
        cmd = [str(binary), "start", "--no-browser", "--internal-host", "127.0.0.1", "--port", str(self.port),
               "--data-dir", str(self.data), "--log-level", "WARNING"]  # fmt: skip
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(cmd, cwd=self.data, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        self.started = time.monotonic()

    def wait_up(self) -> float:
        while time.monotonic() - self.started < START_TIMEOUT:
            if self.proc.poll() is not None:
                raise CannotStart(f"server {self.name} exited {self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(f"{self.base}/health", timeout=5).status_code == 200:
                    return time.monotonic() - self.started
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise CannotStart(f"server {self.name} did not answer /health in {START_TIMEOUT:.0f} s:\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # our own process group (start_new_session)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(20)


class Person:
    """Someone who signed up on a server, acting in their own browser session."""

    def __init__(self, server: Server, email: str) -> None:
        self.server, self.email = server, email
        self.http = httpx.Client(base_url=server.base, timeout=120)
        self.http.get("/user/signup/")
        form = {"email": email, "password": PASSWORD, "csrfmiddlewaretoken": self.http.cookies["csrftoken"]}
        signed = self.http.post("/user/signup/", data=form, headers={"Referer": f"{server.base}/user/signup/"})
        check(signed.status_code == 302, f"{email} signs up on server {server.name} (got {signed.status_code})")
        self.http.headers.update({"X-CSRFToken": self.http.cookies["csrftoken"], "Referer": f"{server.base}/"})
        self.id = int(self.api("GET", "/api/current-user/whoami")["id"])

    def api(self, method: str, path: str, ok: tuple[int, ...] = (200, 201, 204), **kw: Any) -> Any:
        reply = self.http.request(method, path, **kw)
        check(reply.status_code in ok, f"{method} {path} answered {reply.status_code}: {reply.text[:300]}")
        return (
            reply.json()
            if reply.content and reply.headers.get("content-type", "").startswith("application/json")
            else reply.content
        )

    def editor_body(self, project: int, label: str | None, reason: str) -> dict[str, Any]:
        """What the editor sends when a person submits (or skips, `label` None)."""
        result = [] if label is None else [
            {"value": {"choices": [label]}, "id": "ch" + os.urandom(4).hex(), "from_name": "label",
             "to_name": "answer", "type": "choices", "origin": "manual"},
            {"value": {"text": [reason]}, "id": "tx" + os.urandom(4).hex(), "from_name": "reason",
             "to_name": "answer", "type": "textarea", "origin": "manual"},
        ]  # fmt: skip
        body: dict[str, Any] = {"lead_time": 9.5, "result": result, "draft_id": 0, "parent_prediction": None,
                                "parent_annotation": None, "started_at": "2026-12-07T14:00:00.000Z",
                                "project": str(project)}  # fmt: skip
        if label is None:
            body["was_cancelled"] = True
        return body


# ---- what happened in Label Studio, as the ledger must end up -----------------------------------
class Truth:
    """Each reviewer's latest label of each item, as this script left it in Label Studio."""

    def __init__(self) -> None:
        self.labels: dict[tuple[str, str], str] = {}

    def check(self, ledger: Path, queue_path: Path, stage: str) -> None:
        lines = active_lines(read_ledger(ledger, read_queue(queue_path)))
        twice = [key for key, n in Counter((x.reviewer, x.item_id) for x in lines).items() if n > 1]
        check(not twice, f"{stage}: a person's label of an item is in force once (twice: {twice[:3]})")
        got = {(x.reviewer, x.item_id): x.label for x in lines}
        missing = {k: v for k, v in self.labels.items() if got.get(k) != v}
        extra = {k: v for k, v in got.items() if k not in self.labels}
        check(not missing and not extra, f"{stage}: the ledger holds what people did in Label Studio "
              f"(wrong or missing: {list(missing.items())[:3]}; not done there: {list(extra.items())[:3]})")  # fmt: skip


class Project:
    """A project made from gate's config.xml and tasks.json, and the person-to-reviewer names."""

    def __init__(self, owner: Person, out: Path, reviewer_of: dict[int, str]) -> None:
        self.owner = owner
        made = owner.api(
            "POST", "/api/projects", json={"title": "audit", "label_config": (out / "config.xml").read_text()}
        )
        self.id = int(made["id"])
        owner.api("POST", f"/api/projects/{self.id}/import", json=json.loads((out / "tasks.json").read_text()))
        listed = owner.api("GET", "/api/tasks", params={"project": self.id, "page_size": 1000})["tasks"]
        self.tasks = [(int(t["id"]), t["data"]) for t in sorted(listed, key=lambda t: t["id"])]
        self.reviewer_of = reviewer_of
        self.annotations: dict[tuple[int, int], int] = {}  # (task, user) -> annotation id

    def label(self, who: Person, truth: Truth, task: int, data: dict[str, Any], label: str | None) -> None:
        body = who.editor_body(self.id, label, f"{label} by {who.email} on task {task}")
        made = who.api("POST", f"/api/tasks/{task}/annotations/", params={"project": self.id}, json=body)
        self.annotations[(task, who.id)] = int(made["id"])
        if label is not None and "item_id" in data:  # a task made by hand is no item of the queue
            truth.labels[(self.reviewer_of[who.id], data["item_id"])] = label

    def edit(self, who: Person, truth: Truth, task: int, data: dict[str, Any], label: str) -> None:
        body = {k: v for k, v in who.editor_body(self.id, label, f"changed to {label}").items() if k != "project"}
        who.api("PATCH", f"/api/annotations/{self.annotations[(task, who.id)]}/",
                params={"taskID": task, "project": self.id}, json=body)  # fmt: skip
        truth.labels[(self.reviewer_of[who.id], data["item_id"])] = label

    def delete(self, who: Person, truth: Truth, task: int, data: dict[str, Any]) -> None:
        who.api("DELETE", f"/api/annotations/{self.annotations.pop((task, who.id))}/")
        truth.labels.pop((self.reviewer_of[who.id], data["item_id"]))

    def export(self, work: Path, name: str, kind: str, *, all_tasks: bool = False) -> Path:
        """The project's export as the Export button downloads it (`all_tasks`: with the tasks nobody annotated)."""
        params = {"exportType": kind, "download_all_tasks": "true" if all_tasks else "false"}
        data = self.owner.api("GET", f"/api/projects/{self.id}/export", params=params)
        path = work / f"{name}.{kind.lower()}.json"
        path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
        return path

    def snapshot_with_emails(self, work: Path, name: str) -> Path:
        options = {"annotations__completed_by": {"only_id": False}}
        made = self.owner.api("POST", f"/api/projects/{self.id}/exports/",
                              json={"title": name, "serialization_options": options})  # fmt: skip
        for _ in range(120):
            if self.owner.api("GET", f"/api/projects/{self.id}/exports/{made['id']}")["status"] == "completed":
                break
            time.sleep(1)
        data = self.owner.api("GET", f"/api/projects/{self.id}/exports/{made['id']}/download",
                              params={"exportType": "JSON"})  # fmt: skip
        path = work / f"{name}.snapshot.json"
        path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
        return path


def gate_import(work: Path, export: Path, *extra: str, expect: int = 0) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "gate.cli", "review", "import", "queue.jsonl", "--ledger", "labels", "--format",
         "label-studio", str(export), *extra], cwd=work, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    said = proc.stdout + proc.stderr
    print(f"   $ gate review import queue.jsonl --ledger labels --format label-studio {export.name} {' '.join(extra)}")
    print("   " + said.strip().replace("\n", "\n   "), flush=True)
    check(proc.returncode == expect, f"gate review import {export.name} exited {proc.returncode}, not {expect}")
    return said


# ---- the stages ---------------------------------------------------------------------------------
def queue_and_tasks(work: Path) -> None:
    build_run_and_queue(work)
    subprocess.run([sys.executable, "-m", "gate.cli", "review", "export", "queue.jsonl", "--format", "label-studio",
                    "--out", "ls"], cwd=work, check=True, capture_output=True)  # fmt: skip
    (work / "labels").mkdir()


def first_labels(work: Path, project: Project, a: Person, b: Person, truth: Truth) -> None:
    queue = read_queue(work / "queue.jsonl")
    stratum = {i.item_id: i.stratum for i in queue.items}
    order = [d["item_id"] for _, d in project.tasks]
    written = [t["data"]["item_id"] for t in json.loads((work / "ls" / "tasks.json").read_text())]
    check(order == written, "Label Studio lists the tasks in tasks.json's order")
    check(
        order != [i.item_id for i in queue.items], "tasks.json is not in the queue's order (judged-fail answers first)"
    )
    check(all(not ({"stratum", "draw"} & set(d)) for _, d in project.tasks), "no task field names a stratum or a draw")
    for n, (task, data) in enumerate(project.tasks):
        truth_label = "fail" if stratum[data["item_id"]] == "judged_fail" else "pass"  # the example's truth, roughly
        project.label(a, truth, task, data, "abstain" if n == 3 else truth_label)
        if n == 1:
            project.label(b, truth, task, data, None)  # a skip
        elif n == 5:
            project.label(b, truth, task, data, "pass" if truth_label == "fail" else "fail")  # a disagreement
        elif n != 2:  # task 3 is left for later
            project.label(b, truth, task, data, truth_label)


def run(work: Path, binary: Path) -> None:
    t0 = time.monotonic()
    servers = [Server(binary, "default", work), Server(binary, "eu", work)]  # both start while gate works
    try:
        print("round trip 1. a product run of the example and its audit queue; tasks.json and config.xml", flush=True)
        queue_and_tasks(work)
        for server in servers:
            print(f"   Label Studio server {server.name} answered after {server.wait_up():.0f} s", flush=True)
        stages(work, *servers)
    finally:
        for server in servers:
            server.stop()
    print(f"label_studio_round_trip: every check holds ({time.monotonic() - t0:.0f} s)")


def stages(work: Path, default: Server, eu: Server) -> None:
    truth = Truth()
    a, b = Person(default, "reviewer-a@example.com"), Person(default, "reviewer-b@example.com")
    project = Project(a, work / "ls", {a.id: f"label-studio:default:{a.id}", b.id: f"label-studio:default:{b.id}"})
    print("round trip 2. server default: two people label; JSON, then the same again and JSON_MIN", flush=True)
    first_labels(work, project, a, b, truth)
    said = gate_import(work, project.export(work, "e1", "JSON"))
    check("(1 skipped in Label Studio, not a label)" in said, "the skip is counted, not imported")
    truth.check(work / "labels", work / "queue.jsonl", "after the first JSON export")
    check("appended 0 ledger lines" in gate_import(work, project.export(work, "e1-again", "JSON")), "again: nothing")
    check("appended 0 ledger lines" in gate_import(work, project.export(work, "e1", "JSON_MIN")), "JSON_MIN: nothing")

    print("round trip 3. an annotation edited in the editor, the task left labelled; JSON_MIN", flush=True)
    (t5, d5), (t3, d3) = project.tasks[5], project.tasks[2]
    was = truth.labels[(project.reviewer_of[a.id], d5["item_id"])]
    project.edit(a, truth, t5, d5, "fail" if was == "pass" else "pass")
    project.label(b, truth, t3, d3, "pass")
    said = gate_import(work, project.export(work, "e2", "JSON_MIN"))
    check("1 annotation edited in Label Studio" in said and "appended 3 ledger lines" in said, "the edit supersedes")
    truth.check(work / "labels", work / "queue.jsonl", "after the edit")

    print("round trip 4. annotations deleted there, a task made by hand there; JSON, then JSON with all tasks")
    # Two tasks both people labelled plainly (the plan may hold as few as 7 items)
    (t7, d7), (t8, d8) = project.tasks[6], project.tasks[4]
    project.delete(b, truth, t8, d8)
    project.delete(a, truth, t7, d7)
    project.delete(b, truth, t7, d7)  # task t7 has no annotation left: the default export leaves it out
    hand = a.api("POST", "/api/tasks/", json={"project": project.id, "data": {
        "question": "Can I get a refund after 20 days?", "evidence": "Refunds within 14 days.", "answer": "Yes."}})  # fmt: skip
    project.label(a, truth, int(hand["id"]), hand["data"], "fail")
    said = gate_import(work, project.export(work, "e3", "JSON"))
    check("1 annotation deleted in Label Studio" in said and f"task {t8}," in said, "the deletion is retracted, named")
    check("2 labels imported before are on tasks this export leaves out: kept" in said, "a task left out is not read")
    check("1 task made in Label Studio, not by gate" in said, "the hand-made task is skipped with a note")
    said = gate_import(work, project.export(work, "e3-all", "JSON", all_tasks=True))
    check("2 annotations deleted in Label Studio since they were imported" in said and f"task {t7}," in said,
          "all tasks: those are retracted")  # fmt: skip
    truth.check(work / "labels", work / "queue.jsonl", "after the deletions")

    print("round trip 5. a second server: its ids start from 1 again", flush=True)
    c, d = Person(eu, "reviewer-c@example.com"), Person(eu, "reviewer-d@example.com")
    check((c.id, d.id) == (a.id, b.id), f"the second server numbers its people from 1 again ({c.id}, {d.id})")
    other = Project(c, work / "ls", {c.id: c.email, d.id: d.email})
    for n, (task, data) in enumerate(other.tasks):
        other.label(c, truth, task, data, "pass" if n % 3 else "fail")
        other.label(d, truth, task, data, "pass")
    said = gate_import(work, other.export(work, "i2", "JSON"), expect=2)
    check("another Label Studio server" in said and "--server" in said, "its export under the first's name is refused")
    said = gate_import(work, other.snapshot_with_emails(work, "i2"), "--server", "eu")
    truth.check(work / "labels", work / "queue.jsonl", "after the second server")
    check(
        "appended 0 ledger lines" in gate_import(work, work / "e3.json.json"),
        "the first server's export again: nothing",
    )
    status = subprocess.run([sys.executable, "-m", "gate.cli", "review", "status", "queue.jsonl", "--ledger", "labels"],
                            cwd=work, capture_output=True, text=True)  # fmt: skip
    print("   " + (status.stdout + status.stderr).strip().replace("\n", "\n   "))
    check(status.returncode == 0, "gate review status reads the ledger")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label-studio", type=Path, default=ROOT / ".venv-ls" / "bin" / "label-studio",
                    help="the label-studio command (make label-studio-test installs it into .venv-ls)")  # fmt: skip
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (its path is printed)")
    args = ap.parse_args(argv)
    if not args.label_studio.exists():
        print(f"label_studio_round_trip: no {args.label_studio}; fix: make label-studio-test", file=sys.stderr)
        return 2
    with scratch("gate-label-studio-", args.keep) as work:
        try:
            run(work, args.label_studio.absolute())
        except CannotStart as exc:
            print(f"label_studio_round_trip: Label Studio did not start: {exc}", file=sys.stderr)
            return 2
        except Failed as exc:
            print(f"label_studio_round_trip: FAILED: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
