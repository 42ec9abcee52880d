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
  with the run's environment, its bind mounts (`-v HOST:CONTAINER`) mapped back to host paths, and
  pipes for its output (no terminal, as without `docker run -t`).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO

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


def pump(source: io.BufferedReader, sink: BinaryIO) -> None:
    """Copy what arrives as it arrives (the log streams, as docker's attach does)."""
    for chunk in iter(lambda: source.read1(65536), b""):
        sink.write(chunk)
        sink.flush()


def run_entry_point(python: str, env: dict[str, str], cwd: str) -> int:
    """`python -P -m gate.action` with pipes for its output, as `docker run` without `-t` gives the
    container (never this process's terminal: under act's host mode a step's output is one)."""
    proc = subprocess.Popen(
        [python, "-P", "-m", "gate.action"],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    pumps = [
        threading.Thread(target=pump, args=(source, sink))
        for source, sink in ((proc.stdout, sys.stdout.buffer), (proc.stderr, sys.stderr.buffer))
    ]
    for thread in pumps:
        thread.start()
    for thread in pumps:
        thread.join()
    return proc.wait()


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
            return run_entry_point(python, host_env, to_host(workdir, mounts))
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
