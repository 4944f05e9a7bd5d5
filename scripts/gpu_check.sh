#!/usr/bin/env bash
# The whole GPU check in one command (docs/guide/gpu.md): writes
# OUT_DIR/summary.json, log.txt, junit.xml and build.log in at most 8 minutes.
# Without CUDA, or with --dry-run, it runs on the CPU (CI does).
# Usage: bash scripts/gpu_check.sh OUT_DIR [--dry-run] [scripts/gpu_check.py options]
set -uo pipefail
out=${1:?usage: bash scripts/gpu_check.sh OUT_DIR [--dry-run] [options]}
shift
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
cd "$(dirname "$0")/.."  # paths in the options are the repository's
# Every step's process group is listed here as it starts; all are killed
# when this script ends, however the driver ended.
GPU_CHECK_GROUPS=$(mktemp)
export GPU_CHECK_GROUPS
# the driver keeps to its own budget (480 s by default); this bound is the
# last resort
PYTHONUNBUFFERED=1 timeout -k 10 540 "${PYTHON:-python3}" \
    scripts/gpu_check.py "$out" "$@" &
driver=$!
cleanup() {
    trap - EXIT INT TERM
    # a stopped check still writes its summary, then nothing it started runs
    kill -TERM "$driver" 2>/dev/null && wait "$driver"
    while read -r group; do
        kill -KILL -- "-$group" 2>/dev/null
    done <"$GPU_CHECK_GROUPS"
    rm -f "$GPU_CHECK_GROUPS"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
wait "$driver"
