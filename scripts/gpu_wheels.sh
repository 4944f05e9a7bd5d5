#!/usr/bin/env bash
# Fetches what the lent GPU machines lack (docs/guide/gpu.md) into .gpu_wheels/
# (ignored by git; the device call carries it): cp312 manylinux wheels of the
# project's missing dependencies and of kvikio (storage='gds'), plus the
# torch_scatter / torch_sparse sources that PyG's NeighborLoader samples with
# (built there, for CPU, by scripts/gpu_check.py). Needs this repository's
# .venv (its torch prepares the sources' metadata).
# Usage: bash scripts/gpu_wheels.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.gpu_wheels}
py=${PYTHON:-.venv/bin/python}
mkdir -p "$dir"
rm -f "$dir"/*.whl "$dir"/*.tar.gz
# One version of each; the machines have torch, PyG, Lightning, cupy,
# typing-extensions, PyYAML, packaging, cuda-toolkit and cuda-pathfinder.
wheels=(
    pymetis==2025.2.2 jsonargparse==4.53.0 docstring-parser==0.18.0
    typeshed-client==2.15.0 importlib-resources==7.1.0 setuptools==84.2.1
    kvikio-cu13==26.10.0 libkvikio-cu13==26.10.0 rapids-logger==0.3.0
)
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 \
           manylinux2014; do
    platforms+=(--platform "${tag}_x86_64")
done
timeout 600 "$py" -m pip download -q --no-deps \
    --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d "$dir" "${wheels[@]}"
timeout 600 "$py" -m pip download -q --no-deps \
    --no-binary=:all: --no-build-isolation -d "$dir" \
    torch_scatter==2.1.2 torch_sparse==0.6.18
size=$(du -sb "$dir" | cut -f1)
echo "$dir: $(ls "$dir" | wc -l) files, $((size / 1024)) KiB"
if ((size > 32 * 2**20)); then
    echo "error: $dir is over 32 MiB; the device call carries at most 64 MiB" >&2
    exit 1
fi
