"""`gate run --shard I/N` and `gate merge` (SPEC 12): the real CLI, the real ragas judge, real HTTP
to the fake provider. N shards merged must decide exactly as one run on the same cases."""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gate_process
import pytest
from fake_openai import FakeOpenAI, reply
from suite import case, controls, gate, result, write_suite

from gate.plan.shard import Shard, parse_shard, shard_of

KEY_ENV = "GATE_TEST_KEY"


@pytest.fixture()
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(autouse=True)
def with_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-shard")


def blockers(res: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return sorted((b["state"], b["kind"], sorted(b["case_ids"])) for b in res["blockers"])


def cases() -> list[dict[str, Any]]:
    """Controls, 16 critical and 8 general cases, one false pass (critical allows none), a flip pair."""
    out = controls()
    out += [case(f"c-{i:02d}", label="fail" if i % 4 == 0 else "pass") for i in range(16)]
    out += [case(f"g-{i:02d}", slice="general") for i in range(8)]
    out.append(case("fp-1", label="fail", response="Refunds any time. [[judge:pass]]"))
    out += [
        case("pair-a", pair={"id": "p-1", "kind": "flip"}),
        case("pair-b", label="fail", pair={"id": "p-1", "kind": "flip"}),
    ]
    return out


def suite(root: Path, fake: FakeOpenAI, **kw: Any) -> Path:
    return write_suite(root, kw.pop("cases", None) or cases(), evaluator={"base_url": fake.base_url}, **kw)


def run_shards(policy: Path, root: Path, count: int, *extra: str) -> list[Path]:
    outs = []
    for i in range(1, count + 1):
        out = root / f"shard-{i}"
        gate("run", "--policy", policy, "--out", out, "--shard", f"{i}/{count}", "--no-cache", *extra)
        outs.append(out)
    return outs


def test_share_is_the_spec_hash_and_partitions_the_ids() -> None:
    ids = [f"case-{i}" for i in range(500)]
    for cid in ids:
        assert shard_of(cid, 7) == int(hashlib.sha256(cid.encode()).hexdigest()[:16], 16) % 7 + 1
    shares = [{c for c in ids if Shard(i, 4).owns(c)} for i in range(1, 5)]
    assert set().union(*shares) == set(ids) and sum(map(len, shares)) == len(ids)
    assert all(60 < len(s) < 190 for s in shares)  # a hash share, not one shard with everything
    assert parse_shard(" 2/4 ") == Shard(2, 4)


@pytest.mark.parametrize("bad", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2", "1/2/3"])
def test_a_bad_shard_is_a_usage_error(tmp_path: Path, bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path / "s")
    assert gate("run", "--policy", policy, "--out", tmp_path / "o", f"--shard={bad}") == 2
    err = capsys.readouterr().err
    assert "--shard" in err and "fix:" in err and "Traceback" not in err


def test_merged_shards_decide_as_one_run(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = suite(tmp_path / "s", fake)
    single = tmp_path / "single"
    single_code = gate("run", "--policy", policy, "--out", single, "--no-cache")
    shard_outs = run_shards(policy, tmp_path, 3)
    merged = tmp_path / "merged"
    code = gate("merge", "--policy", policy, *shard_outs, "--out", merged)

    one, shards, m = result(single), [result(o) for o in shard_outs], result(merged)
    assert [(s["shard"]["index"], s["shard"]["count"]) for s in shards] == [(i, 3) for i in (1, 2, 3)]
    assert sum(s["shard"]["cases"] for s in shards) == shards[0]["shard"]["lane_cases"]
    # every non-control case judged in exactly one shard; controls in each
    judged = [{c["case_id"] for c in s["cases"] if not c["control_role"]} for s in shards]
    assert sum(map(len, judged)) == len(set().union(*judged)) == one["counts"]["eligible"] - 6
    assert all(
        {c["case_id"] for c in s["cases"] if c["control_role"]} == {c["case_id"] for c in controls()} for s in shards
    )
    # each shard's boundary is 1/N of the run's
    assert all(math.isclose(s["limits"]["max_total_cost"], one["limits"]["max_total_cost"] / 3) for s in shards)

    assert code == single_code == 1
    assert m["state"] == one["state"] == "quality_failed"
    assert m["counts"] == one["counts"]
    assert blockers(m) == blockers(one)
    assert {b["kind"] for b in m["blockers"]} == {"false_pass_limit"}
    assert m["slices"] == one["slices"] and m["controls"] == one["controls"]
    assert m["unrun_case_ids"] == one["unrun_case_ids"] == []
    assert m["limits"]["max_total_cost"] == one["limits"]["max_total_cost"]
    assert m["merged_shards"] == {"count": 3, "indices": [1, 2, 3], "missing": []}
    # the merged cost is every shard's spending (controls ran in each shard)
    assert math.isclose(m["cost"]["total"], sum(s["cost"]["total"] for s in shards), rel_tol=1e-12)
    assert m["cost"]["http_attempts"] == sum(s["cost"]["http_attempts"] for s in shards)
    assert m["cost"]["http_attempts"] == one["cost"]["http_attempts"] + 2 * 5  # 5 judged controls, twice more
    # the merged records are `gate decide`'s input: deciding them again gives the same result
    again = tmp_path / "again"
    assert gate("decide", "--policy", policy, "--records", merged / "records.jsonl", "--out", again) == 1
    assert blockers(result(again)) == blockers(m) and result(again)["counts"] == m["counts"]
    for name in ("report.md", "summary.md", "junit.xml"):
        assert (merged / name).read_text()


def test_a_missing_shard_is_named_with_its_cases_unrun(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = suite(tmp_path / "s", fake)
    outs = run_shards(policy, tmp_path, 3)
    merged = tmp_path / "merged"
    assert gate("merge", "--policy", policy, outs[0], outs[2], "--out", merged) == 3
    m = result(merged)
    owned = sorted(c["case_id"] for c in result(outs[1])["cases"] if not c["control_role"])
    assert owned
    missing = [b for b in m["blockers"] if b["kind"] == "missing_shard"]
    assert len(missing) == 1 and missing[0]["state"] == "evaluation_incomplete"
    assert sorted(missing[0]["case_ids"]) == owned and "shard 2/3" in missing[0]["message"]
    assert sorted(m["unrun_case_ids"]) == owned and m["counts"]["unrun"] == len(owned)
    # not listed a second time as plain unrun cases
    assert not [b for b in m["blockers"] if b["kind"] == "unrun_cases"]
    assert m["state"] == "quality_failed" or m["state"] == "evaluation_incomplete"
    assert m["merged_shards"]["missing"] == [2]
    assert "shard 2/3" in (merged / "report.md").read_text()


def handles_sigterm(pid: int) -> bool:
    """Whether the process has a handler of its own for SIGTERM now (Linux: /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)


def sigterm_while_merging(argv: list[str]) -> tuple[int, str]:
    """`gate merge` in its own process, sent SIGTERM (a cancelled CI job) while it merges: it is frozen
    (SIGSTOP) as soon as it handles SIGTERM, and signalled only if it still does, i.e. is still merging.
    A merge that never handles it (it dies of the signal wherever it stands) fails the test."""
    for _attempt in range(5):
        proc = gate_process.popen(argv, env=dict(os.environ), stderr=subprocess.PIPE, text=True)
        sent = False
        while proc.poll() is None and not sent:
            if handles_sigterm(proc.pid):
                proc.send_signal(signal.SIGSTOP)
                sent = handles_sigterm(proc.pid)
                if sent:
                    proc.send_signal(signal.SIGTERM)
                proc.send_signal(signal.SIGCONT)
            time.sleep(0.001)
        _, err = proc.communicate(timeout=120)
        if sent:
            return proc.returncode, err
    pytest.fail("gate merge never handled SIGTERM while it merged: the signal kills it where it stands")


def test_a_merge_stopped_or_crashed_mid_way_leaves_no_verdict_in_out(tmp_path: Path, fake: FakeOpenAI) -> None:
    """SIGTERM (a cancelled CI job) during `gate merge`: the process died of the signal, and --out kept the
    last merge's result.json, read as this merge's. It now stops as an interruption (exit 3, never a
    verdict's code) leaving no result in --out. A shard file that cannot be read mid-way (an I/O error on
    its journal) is a crash: the same. A shard whose records file is a directory is refused (exit 2),
    naming it, and changes nothing (it was an internal error that deleted the last merge's result)."""
    policy = suite(tmp_path / "s", fake, cases=[*controls(), *(case(f"c-{i}") for i in range(4))])
    outs = run_shards(policy, tmp_path, 2)
    merged = tmp_path / "merged"
    args = ["merge", "--policy", str(policy), *map(str, outs), "--out", str(merged)]
    assert gate(*args) == 0  # an earlier merge's decision, in the --out of the next
    code, err = sigterm_while_merging(args)
    assert code == 3 and "interrupted (SIGTERM)" in err, err
    assert not (merged / "result.json").exists() and not (merged / "report.md").exists()

    assert gate(*args) == 0
    records = outs[1] / "records.jsonl"
    kept = records.read_bytes()
    records.unlink()
    records.mkdir()
    before = {p.name: p.read_bytes() for p in merged.iterdir()}
    assert gate(*args) == 2
    assert {p.name: p.read_bytes() for p in merged.iterdir()} == before
    records.rmdir()
    records.write_bytes(kept)
    journal = outs[1] / "attempts.jsonl"
    journal.unlink()
    journal.symlink_to("/proc/self/mem")  # a regular file whose every read fails (EIO), as a bad disk's
    assert gate(*args) == 3
    assert not (merged / "result.json").exists()


def test_a_control_that_failed_in_one_shard_fails_the_merge(tmp_path: Path, fake: FakeOpenAI) -> None:
    # The negative control's first judgment says pass (wrong); every later one says fail.
    fake.script("ctl-negative", reply("pass"), reply("fail"))
    policy = suite(tmp_path / "s", fake, cases=[*controls(), *(case(f"c-{i}") for i in range(6))])
    outs = run_shards(policy, tmp_path, 2)
    assert [result(o)["controls"]["ok"] for o in outs] == [False, True]
    merged = tmp_path / "merged"
    # merged in either order, the failure counts
    assert gate("merge", "--policy", policy, outs[1], outs[0], "--out", merged) == 1
    m = result(merged)
    assert not m["controls"]["ok"] and [f["case_id"] for f in m["controls"]["failures"]] == ["ctl-negative"]
    assert any(b["kind"] == "control_failed" for b in m["blockers"])


def test_a_control_each_shard_passed_by_its_majority_passes_the_merge(tmp_path: Path, fake: FakeOpenAI) -> None:
    """A judge that contradicts itself: three repeats a shard, the negative control judged wrong once
    in each shard, on another repeat (shard 1's first, shard 2's second). Each shard passes it by its
    majority (and asks a person about the judge's wobble), so the merge does, as `gate decide` on the
    merged records; a merge that kept the failed repeat of every shard failed it (two wrong of three). Records carry their shard; records
    from before (without it) are still read: a shard's directory says whose they are."""
    fake.script(
        "ctl-negative", reply("pass"), reply("fail"), reply("fail"), reply("fail"), reply("pass"), reply("fail")
    )
    ev = {"base_url": fake.base_url, "repeats": 3, "max_concurrency": 1}
    policy = write_suite(tmp_path / "s", [*controls(), *(case(f"c-{i}") for i in range(4))], evaluator=ev)
    outs = run_shards(policy, tmp_path, 2)
    # Each shard: the control passes, and a person looks at a judge that disagreed with itself.
    assert [result(o)["controls"]["ok"] for o in outs] == [True, True]
    assert [blockers(result(o)) for o in outs] == [[("review_required", "unstable_verdict", ["ctl-negative"])]] * 2
    labels = [next(c["labels"] for c in result(o)["cases"] if c["case_id"] == "ctl-negative") for o in outs]
    assert labels == [["pass", "fail", "fail"], ["fail", "pass", "fail"]]
    merged = tmp_path / "merged"
    assert gate("merge", "--policy", policy, *outs, "--out", merged) == 4  # was 1: control_failed
    assert result(merged)["controls"]["ok"] is True
    assert blockers(result(merged)) == [("review_required", "unstable_verdict", ["ctl-negative"])]
    shards = {(r["shard"]["index"], r["shard"]["count"]) for r in records(merged) if r["case_id"] == "ctl-negative"}
    assert shards == {(1, 2), (2, 2)}
    decided = tmp_path / "decided"
    assert gate("decide", "--policy", policy, "--records", merged / "records.jsonl", "--out", decided) == 4
    assert blockers(result(decided)) == blockers(result(merged))
    # Shard outputs written before records carried their shard merge the same way.
    for out in outs:
        lines = [{k: v for k, v in r.items() if k != "shard"} for r in records(out)]
        (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    assert gate("merge", "--policy", policy, *outs, "--out", tmp_path / "merged-older") == 4
    assert blockers(result(tmp_path / "merged-older")) == blockers(result(merged))


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text(encoding="utf-8").splitlines() if line]


def test_merge_refuses_shards_that_do_not_belong_together(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    small = [*controls(), *(case(f"c-{i}") for i in range(6))]
    policy = suite(tmp_path / "s", fake, cases=small)
    outs = run_shards(policy, tmp_path / "a", 2)
    merged = tmp_path / "merged"

    assert gate("merge", "--policy", policy, outs[0], outs[0], "--out", merged) == 2
    assert "both shard 1/2" in capsys.readouterr().err

    # another dataset: one more case changes dataset_sha256
    other = suite(tmp_path / "t", fake, cases=[*small, case("c-extra")])
    other_outs = run_shards(other, tmp_path / "b", 2)
    assert gate("merge", "--policy", policy, outs[0], other_outs[1], "--out", merged) == 2
    err = capsys.readouterr().err
    assert "dataset_sha256" in err and "fix:" in err

    # the same shards against a policy they did not run
    assert gate("merge", "--policy", other, *outs, "--out", merged) == 2
    assert "of the policy given to merge" in capsys.readouterr().err

    # another shard count
    three = run_shards(policy, tmp_path / "c", 3)
    assert gate("merge", "--policy", policy, outs[0], three[1], "--out", merged) == 2
    assert "count" in capsys.readouterr().err

    # an unsharded run
    whole = tmp_path / "whole"
    gate("run", "--policy", policy, "--out", whole, "--no-cache")
    assert gate("merge", "--policy", policy, outs[0], whole, "--out", merged) == 2
    assert "--shard" in capsys.readouterr().err
    assert not (merged / "result.json").exists()


def test_action_matrix_of_shards_then_one_merge_publishes_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sharded workflow through the container entry point: N matrix jobs, each uploading its
    gate-out/, then one job that downloads them into gate-shards/<artifact>/ and merges."""
    from fake_github import FakeGitHub
    from runner_env import parse_github_output, runner_env

    from gate.action import main as action_main

    with FakeOpenAI() as provider, FakeGitHub(user_status=403) as github:
        monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
        monkeypatch.chdir(tmp_path)
        evals = tmp_path / "workspace" / "evals"
        artifacts = tmp_path / "artifacts"

        def job(**inputs: str) -> tuple[int, dict[str, str]]:
            env = runner_env(tmp_path, api_url=github.base_url, fail_on="", **inputs)
            env["RAGAS_DO_NOT_TRACK"] = "true"
            write_suite(evals, cases(), evaluator={"base_url": provider.base_url, "api_key_env": "JUDGE_KEY"})
            for name in ("INPUT_SHARD", "INPUT_MERGE"):  # left by the previous job
                monkeypatch.delenv(name, raising=False)
            for name, value in env.items():  # the container step's environment
                monkeypatch.setenv(name, value)
            code = action_main()
            return code, parse_github_output(Path(env["GITHUB_OUTPUT"]).read_text())

        for i in (1, 2, 3):
            code, out = job(shard=f"{i}/3")
            assert out["exit-code"] == str(result(evals / "gate-out")["exit_code"])
            shard = result(evals / "gate-out")["shard"]
            assert (shard["index"], shard["count"]) == (i, 3)
            artifacts.mkdir(exist_ok=True)
            (evals / "gate-out").rename(artifacts / f"ragas-gate-shard-{i}")  # upload-artifact
        assert github.check_runs == [] and github.comments("acme/support-bot", 17) == []

        artifacts.rename(evals / "gate-shards")  # download-artifact, pattern ragas-gate-shard-*
        code, out = job(merge="gate-shards/*")
        assert code == 1 and out["state"] == "quality_failed"
        merged = result(evals / "gate-out")
        assert merged["merged_shards"] == {"count": 3, "indices": [1, 2, 3], "missing": []}
        assert {b["kind"] for b in merged["blockers"]} == {"false_pass_limit"}
        (run,) = github.check_runs
        assert run["conclusion"] == "failure"
        (comment,) = github.comments("acme/support-bot", 17)
        assert "`fp-1`" in comment["body"]


def test_action_shard_and_merge_inputs_are_checked(tmp_path: Path) -> None:
    from runner_env import runner_env

    from gate.action import InputError, merge_dirs, read_context, run_options

    ctx = read_context(runner_env(tmp_path, api_url="http://x", shard=" 2/4"))
    shard = run_options(ctx).shard
    assert shard is not None and (shard.index, shard.count) == (2, 4)
    with pytest.raises(InputError, match="input 'shard'"):
        read_context(runner_env(tmp_path, api_url="http://x", shard="5/4"))
    with pytest.raises(InputError, match="exclude each other"):
        read_context(runner_env(tmp_path, api_url="http://x", shard="1/2", merge="gate-shards/*"))
    for d in ("gate-shards/b", "gate-shards/a"):
        (tmp_path / "workspace" / "evals" / d).mkdir(parents=True)
    ctx = read_context(runner_env(tmp_path, api_url="http://x", merge="gate-shards/* nowhere"))
    evals = tmp_path / "workspace" / "evals"
    assert ctx.policy == "policy.yaml"
    assert merge_dirs(ctx) == [str(evals / "gate-shards/a"), str(evals / "gate-shards/b"), str(evals / "nowhere")]


def test_example_workflows_use_only_declared_inputs_and_the_sharded_one_merges_its_matrix() -> None:
    import yaml

    root = Path(__file__).resolve().parents[2]
    declared = set(yaml.safe_load((root / "action.yml").read_text())["inputs"])
    assert {"shard", "merge"} <= declared
    for path in sorted((root / "examples" / "workflows").glob("*.yml")):
        for job in yaml.safe_load(path.read_text())["jobs"].values():
            for step in job["steps"]:
                if str(step.get("uses", "")).startswith("ragas-gate/ragas-gate@"):
                    assert set(step.get("with", {})) <= declared, path
    flow = yaml.safe_load((root / "examples" / "workflows" / "ragas-gate-sharded.yml").read_text())
    shard_job, merge_job = flow["jobs"]["shard"], flow["jobs"]["merge"]
    count = len(shard_job["strategy"]["matrix"]["shard"])
    (gate_step,) = [s for s in shard_job["steps"] if "ragas-gate/ragas-gate@" in str(s.get("uses"))]
    assert gate_step["with"]["shard"] == "${{ matrix.shard }}/" + str(count)
    assert merge_job["needs"] == "shard" and "always()" in merge_job["if"]
    download = next(s for s in merge_job["steps"] if "download-artifact" in str(s.get("uses")))
    upload = next(s for s in shard_job["steps"] if "upload-artifact" in str(s.get("uses")))
    assert upload["with"]["name"].startswith(download["with"]["pattern"].rstrip("*"))
    (merge_step,) = [s for s in merge_job["steps"] if "ragas-gate/ragas-gate@" in str(s.get("uses"))]
    assert merge_step["with"]["merge"] == download["with"]["path"].rstrip("/") + "/*"
