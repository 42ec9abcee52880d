"""scripts/verify-base-digest, which the release workflow runs before it builds the image: the
Dockerfile's pinned base digest must name real content (its manifest hashes to it) and be a
multi-platform index with linux/amd64 and linux/arm64. No registry is reachable in tests: a stub
`docker buildx imagetools inspect --raw` serves manifests from a file."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parents[1]))

from composite_runner import ROOT, stub_docker_dir

SCRIPT = ROOT / "scripts" / "verify-base-digest"
NAME, TAG = "python", "3.12-slim"


def index(*platforms: str) -> str:
    manifests = [
        {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": "sha256:" + hashlib.sha256(p.encode()).hexdigest(),
            "size": 1000,
            "platform": {"os": p.split("/")[0], "architecture": p.split("/")[1]},
        }
        for p in platforms
    ]
    return json.dumps(
        {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests}
    )


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def verify(tmp_path: Path, pinned: str, registry: dict[str, str]) -> subprocess.CompletedProcess[str]:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"# base\nFROM {NAME}:{TAG}@{pinned} AS base\nFROM base\n", encoding="utf-8")
    (tmp_path / "registry.json").write_text(json.dumps(registry), encoding="utf-8")
    env = {
        "PATH": f"{stub_docker_dir(tmp_path)}:{os.environ['PATH']}",
        "STUB_REGISTRY": str(tmp_path / "registry.json"),
        "STUB_DOCKER_LOG": str(tmp_path / "docker.jsonl"),
    }
    return subprocess.run([sys.executable, str(SCRIPT), str(dockerfile)], env=env, capture_output=True, text=True)


def test_a_pin_of_a_multi_platform_index_checks_out(tmp_path: Path) -> None:
    good = index("linux/amd64", "linux/arm64", "linux/arm/v7")
    done = verify(tmp_path, digest(good), {f"{NAME}@{digest(good)}": good, f"{NAME}:{TAG}": good})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checks out" in done.stdout and "::" not in done.stdout


def test_a_tag_that_moved_since_the_pin_is_a_notice(tmp_path: Path) -> None:
    old, new = index("linux/amd64", "linux/arm64"), index("linux/arm64", "linux/amd64")
    done = verify(tmp_path, digest(old), {f"{NAME}@{digest(old)}": old, f"{NAME}:{TAG}": new})
    assert done.returncode == 0
    assert f"::notice title=base image digest::{NAME}:{TAG} now points to {digest(new)}" in done.stdout


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("unknown digest", "not found"),
        ("content does not hash to the pin", "hashes to"),
        ("no arm64 image", "has no linux/arm64 image"),
        ("single-platform manifest", "not a multi-platform index"),
    ],
)
def test_a_pin_that_does_not_check_out_fails_the_release(tmp_path: Path, case: str, why: str) -> None:
    good = index("linux/amd64", "linux/arm64")
    pinned, served = digest(good), good
    if case == "unknown digest":
        registry = {f"{NAME}:{TAG}": good}
    else:
        if case == "content does not hash to the pin":
            served = index("linux/amd64", "linux/arm64", "linux/s390x")
        elif case == "no arm64 image":
            served = index("linux/amd64")
            pinned = digest(served)
        else:
            served = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json"})
            pinned = digest(served)
        registry = {f"{NAME}@{pinned}": served, f"{NAME}:{TAG}": served}
    done = verify(tmp_path, pinned, registry)
    assert done.returncode == 1
    (error,) = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert why in error and "Dockerfile" in error


def test_the_release_workflow_checks_the_repositorys_pin_before_it_builds(tmp_path: Path) -> None:
    workflow = yaml.safe_load((ROOT / ".github/workflows/release-image.yml").read_text(encoding="utf-8"))
    steps = workflow["jobs"]["build-and-push"]["steps"]
    names = [s.get("run", "") + str(s.get("uses", "")) for s in steps]
    check = next(i for i, s in enumerate(names) if "scripts/verify-base-digest" in s)
    build = next(i for i, s in enumerate(names) if "docker/build-push-action" in s)
    setup = next(i for i, s in enumerate(names) if "docker/setup-buildx-action" in s)
    assert setup < check < build
    # The script reads the repository's own pin (an empty registry: it names what it looked up).
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    (pin,) = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM python:")]
    (tmp_path / "registry.json").write_text("{}", encoding="utf-8")
    env = {
        "PATH": f"{stub_docker_dir(tmp_path)}:{os.environ['PATH']}",
        "STUB_REGISTRY": str(tmp_path / "registry.json"),
        "STUB_DOCKER_LOG": str(tmp_path / "docker.jsonl"),
    }
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(ROOT / "Dockerfile")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1 and f"inspect --raw {pin.replace(':' + TAG, '')}` failed" in done.stdout
