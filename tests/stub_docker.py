#!/usr/bin/env python3
"""A stand-in for the `docker` CLI in the Action wrapper's tests: records every call, answers a few.

Each call appends one JSON line to `$STUB_DOCKER_LOG`: the arguments, and for `run` the values its
`-e NAME` options would carry (docker takes a bare NAME's value from its own environment).
- `pull`: exits `$STUB_PULL_STATUS` (default 0); a failure prints a daemon-style error.
- `image inspect`: exits `$STUB_INSPECT_STATUS` (default 1: no local copy).
- `build`: prints an image id (`$STUB_BUILD_STATUS` non-zero fails it).
- `kill`: ends a `run` that is waiting (`$STUB_RUN_SECONDS`: how long a run lasts unless killed).
- `buildx imagetools inspect --raw REF`: prints the manifest `$STUB_REGISTRY` (a JSON file of
  reference -> manifest text) holds for REF, else fails as a registry does for an unknown one.
- `run`: exits `$STUB_RUN_STATUS` (default 0), after doing what the container would when
  `$STUB_RUN_EXEC` names a Python interpreter: it runs the entry point (`python -P -m gate.action`)
  with the run's environment, its bind mounts (`-v HOST:CONTAINER`) mapped back to host paths.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

BUILT_IMAGE = "sha256:" + "b" * 64


def record(entry: dict[str, object]) -> None:
    with open(os.environ["STUB_DOCKER_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def parse_run(argv: list[str]) -> tuple[dict[str, str], dict[str, str], str, str]:
    """(env, mounts container->host, workdir, image) of `docker run [options] IMAGE`."""
    env: dict[str, str] = {}
    mounts: dict[str, str] = {}
    workdir = "/"
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            return env, mounts, workdir, arg
        value = argv[i + 1] if arg in ("-e", "-v", "--workdir", "--user", "--pull", "--network", "--name") else ""
        if arg == "-e":
            name, sep, val = value.partition("=")
            if sep:
                env[name] = val
            elif name in os.environ:
                env[name] = os.environ[name]
        elif arg == "-v":
            host, container = value.split(":")[:2]
            mounts[container] = host
        elif arg == "--workdir":
            workdir = value
        i += 2 if value else 1
    raise SystemExit("stub docker: run without an image")


def to_host(path: str, mounts: dict[str, str]) -> str:
    for container, host in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
        if path == container or path.startswith(container + "/"):
            return host + path[len(container) :]
    return path


def main(argv: list[str]) -> int:
    if argv[:1] == ["run"]:
        env, mounts, workdir, image = parse_run(argv[1:])
        record({"argv": argv, "image": image, "env": env})
        python = os.environ.get("STUB_RUN_EXEC")
        if python:
            # The container's view mapped back to the host: paths under a mount point become host
            # paths; the package comes from this checkout (the image's PYTHONPATH).
            host_env = {k: to_host(v, mounts) for k, v in env.items()}
            host_env["PATH"] = os.environ["PATH"]
            host_env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
            host_env["RAGAS_DO_NOT_TRACK"] = "true"
            done = subprocess.run(
                [python, "-P", "-m", "gate.action"], env=host_env, cwd=to_host(workdir, mounts), check=False
            )
            return done.returncode
        killed = Path(os.environ["STUB_DOCKER_LOG"] + ".killed")
        deadline = time.monotonic() + float(os.environ.get("STUB_RUN_SECONDS", "0"))
        while time.monotonic() < deadline:  # a long run, until `docker kill` or the deadline
            if killed.exists():
                return 143
            time.sleep(0.02)
        return int(os.environ.get("STUB_RUN_STATUS", "0"))
    record({"argv": argv})
    if argv[:1] == ["kill"]:
        Path(os.environ["STUB_DOCKER_LOG"] + ".killed").touch()
        return 0
    if argv[:4] == ["buildx", "imagetools", "inspect", "--raw"]:
        registry = json.loads(Path(os.environ["STUB_REGISTRY"]).read_text(encoding="utf-8"))
        if argv[4] not in registry:
            print(f"ERROR: {argv[4]}: not found", file=sys.stderr)
            return 1
        sys.stdout.write(registry[argv[4]])
        return 0
    if argv[:1] == ["pull"]:
        status = int(os.environ.get("STUB_PULL_STATUS", "0"))
        if status:
            print(f"Error response from daemon: manifest unknown: {argv[-1]}", file=sys.stderr)
        return status
    if argv[:2] == ["image", "inspect"]:
        return int(os.environ.get("STUB_INSPECT_STATUS", "1"))
    if argv[:1] == ["build"]:
        status = int(os.environ.get("STUB_BUILD_STATUS", "0"))
        if status:
            print("ERROR: failed to solve: process did not complete successfully", file=sys.stderr)
            return status
        print(BUILT_IMAGE)
        return 0
    print(f"stub docker: unexpected command {argv}", file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
