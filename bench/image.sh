#!/usr/bin/env bash
# The Action's image: its size (as stored, and gzip-compressed as a registry transfers it), and
# the cold start of a container, side by side in one run: a bare `python -c pass`, the entry
# point's imports (`import gate.action`), and the judge's (`import ragas.metrics`), each in a
# fresh container, best and median of N. Plus the wrapper's own overhead: scripts/action-run
# choosing, "pulling" (a local image: the pull fails fast offline) and running the image with the
# entry point's usage error (no policy), end to end.
#
#   bench/image.sh [IMAGE] [N]      # IMAGE default ragas-gate:smoke (scripts/container-smoke builds it)
set -euo pipefail
IMAGE=${1:-ragas-gate:smoke}
N=${2:-5}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
docker image inspect "$IMAGE" >/dev/null 2>&1 || { echo "bench/image.sh: no image $IMAGE (run scripts/container-smoke)" >&2; exit 77; }

now() { date +%s.%N; }
# Wall time of N runs of a command: "best median" in seconds.
times() {
  local samples=() t0
  for _ in $(seq "$N"); do
    t0=$(now)
    "$@" >/dev/null 2>&1 || true
    samples+=("$(echo "$(now) - $t0" | bc)")
  done
  printf '%s\n' "${samples[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.2f %.2f\n", a[1], a[int((NR+1)/2)]}'
}
py() { docker run --rm --entrypoint /opt/ragas-gate/bin/python "$IMAGE" -c "$1"; }

size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
gz=$(docker save "$IMAGE" | gzip -1 | wc -c)
venv=$(docker run --rm --entrypoint du "$IMAGE" -sb /opt/ragas-gate | cut -f1)
printf 'image %s: %.0f MB stored, %.0f MB gzip-compressed (docker save | gzip -1), venv %.0f MB\n' \
  "$IMAGE" "$(echo "$size/1000000" | bc -l)" "$(echo "$gz/1000000" | bc -l)" "$(echo "$venv/1000000" | bc -l)"

read -r bare_best bare_med < <(times py pass)
read -r gate_best gate_med < <(times py 'import gate.action')
read -r ragas_best ragas_med < <(times py 'import ragas.metrics')

ws=$(mktemp -d)
tmp=$(mktemp -d)
trap 'rm -rf "$ws" "$tmp"' EXIT
wrapper() {
  env GITHUB_ACTION_PATH="$ROOT" GITHUB_WORKSPACE="$ws" RUNNER_TEMP="$tmp" GATE_IMAGE="$IMAGE" \
    GATE_INPUTS='{"policy": ""}' bash "$ROOT/scripts/action-run"
}
read -r wrap_best wrap_med < <(times wrapper)

printf '\ncold start, fresh container each time, best / median of %s (seconds):\n' "$N"
printf '  %-52s %6s %6s %8s\n' "" best median "x bare"
row() { printf '  %-52s %6s %6s %7.1fx\n' "$1" "$2" "$3" "$(echo "$3/$bare_med" | bc -l)"; }
row "docker run ... python -c pass" "$bare_best" "$bare_med"
row "docker run ... python -c 'import gate.action'" "$gate_best" "$gate_med"
row "docker run ... python -c 'import ragas.metrics'" "$ragas_best" "$ragas_med"
row "scripts/action-run to a usage error (pull, run)" "$wrap_best" "$wrap_med"
