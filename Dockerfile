# ragas-gate: the container the GitHub Action runs (entry point gate/action.py).
# GitHub builds the default base; offline machines pass --build-arg BASE_IMAGE=... and a wheels/
# directory in the build context (see scripts/container-smoke).
ARG BASE_IMAGE=python:3.12-slim

FROM ${BASE_IMAGE} AS build
# Offline builds: --build-arg PIP_NO_INDEX=1 --build-arg PIP_FIND_LINKS=/tmp/build
ARG PIP_NO_INDEX=
ARG PIP_FIND_LINKS=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# requirements.lock, plus the contents of an optional wheels/ directory (the [s] glob lets it be
# absent; requirements.lock always matches, so the COPY never has zero sources).
COPY requirements.lock wheel[s] /tmp/build/
RUN python3 -m venv /opt/ragas-gate \
    && /opt/ragas-gate/bin/pip install --no-cache-dir --require-hashes --only-binary=:all: \
        -r /tmp/build/requirements.lock
COPY gate /opt/ragas-gate/app/gate
RUN /opt/ragas-gate/bin/python -m compileall -q /opt/ragas-gate/app

FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="ragas-gate" \
      org.opencontainers.image.description="CI release gate on a Ragas DiscreteMetric judge"
COPY --from=build /opt/ragas-gate /opt/ragas-gate
ENV PATH=/opt/ragas-gate/bin:$PATH \
    PYTHONPATH=/opt/ragas-gate/app \
    PYTHONSAFEPATH=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    RAGAS_DO_NOT_TRACK=true
# The runner mounts the workspace at /github/workspace and sets it as the working directory;
# no USER and no WORKDIR, as GitHub advises for container actions. -P: never import from the
# workspace (a user's own gate/ directory must not shadow the package).
ENTRYPOINT ["/opt/ragas-gate/bin/python", "-P", "-m", "gate.action"]
