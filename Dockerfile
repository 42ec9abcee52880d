# ragas-gate: the container the GitHub Action runs (entry point gate/action.py).
# The base is pinned by digest (the multi-arch index, so amd64 and arm64 both resolve);
# Dependabot moves it (.github/dependabot.yml), which is why it is written literally here and not
# through an ARG. Offline machines build a copy with this line replaced (scripts/container-smoke).
# The digest is verified where a registry is reachable: the release workflow runs
# scripts/verify-base-digest before it builds (`docker buildx imagetools inspect --raw`: the
# manifest under this digest hashes to it and holds linux/amd64 and linux/arm64; a notice when the
# tag has moved on). The development machine has no registry, so it was never pulled there.
FROM python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea AS base

FROM base AS build
# Offline builds: --build-arg PIP_NO_INDEX=1 --build-arg PIP_FIND_LINKS=/tmp/build
ARG PIP_NO_INDEX=
ARG PIP_FIND_LINKS=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
# requirements.lock, plus the contents of an optional wheels/ directory (the [s] glob lets it be
# absent; requirements.lock always matches, so the COPY never has zero sources).
COPY requirements.lock wheel[s] /tmp/build/
RUN python3 -m venv /opt/ragas-gate \
    && /opt/ragas-gate/bin/pip install --no-cache-dir --require-hashes --only-binary=:all: \
        -r /tmp/build/requirements.lock \
    && /opt/ragas-gate/bin/pip uninstall --yes pip setuptools wheel
COPY gate /opt/ragas-gate/app/gate
# Beside the package: each run's rollback.json records its sha256 (gate/measure/rollback.py).
COPY requirements.lock /opt/ragas-gate/app/requirements.lock
RUN /opt/ragas-gate/bin/python -m compileall -q /opt/ragas-gate/app

FROM base
LABEL org.opencontainers.image.title="ragas-gate" \
      org.opencontainers.image.description="CI release gate on a Ragas DiscreteMetric judge"
# No installer in the final image: the base's pip (and setuptools/wheel where present) go, and
# the build fails if either is still importable.
RUN set -eu; \
    if python3 -m pip --version >/dev/null 2>&1; then \
      PIP_ROOT_USER_ACTION=ignore python3 -m pip uninstall --yes --disable-pip-version-check pip setuptools wheel; \
    fi; \
    rm -rf /usr/local/bin/pip /usr/local/bin/pip3* /usr/share/python-wheels; \
    for mod in pip setuptools; do \
      if python3 -c "import $mod" 2>/dev/null; then echo "$mod is still installed" >&2; exit 1; fi; \
    done
COPY --from=build /opt/ragas-gate /opt/ragas-gate
ENV PATH=/opt/ragas-gate/bin:$PATH \
    PYTHONPATH=/opt/ragas-gate/app \
    PYTHONSAFEPATH=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    RAGAS_DO_NOT_TRACK=true
RUN for mod in pip setuptools; do \
      if /opt/ragas-gate/bin/python -c "import $mod" 2>/dev/null; then echo "$mod is in the venv" >&2; exit 1; fi; \
    done
# The wrapper (scripts/action-run) mounts the workspace at /github/workspace, makes it the working
# directory and runs as the workspace's owner. -P: never import from the workspace (a user's own
# gate/ directory must not shadow the package).
ENTRYPOINT ["/opt/ragas-gate/bin/python", "-P", "-m", "gate.action"]
