#!/usr/bin/env bash
# Downloads into .whl/ (ignored) the wheels the GPU machine lacks, for its Python 3.12 on x86-64.
#
# That machine's image has torch 2.11 (CUDA 13), numpy, psutil, onnx, onnxruntime, tensorboard, and also
# cloudpickle, rich, markdown-it-py, mdurl, pygments, typing-extensions, pandas, matplotlib, nvidia-ml-py,
# opencv-python-headless, pytest, pytest-timeout, pytest-xdist, execnet and hypothesis (its package list),
# so none of those travel. What is missing is listed below with the version this project's venv runs; each
# one's own needs were checked against that list (`unzip -p WHEEL '*/METADATA' | grep ^Requires-Dist`).
# MinAtar's seaborn is left out: MinAtar imports it only to draw, and logs one warning without it; gymnax imports
# it when imported, so it travels.
# The working tree and the carried wheels travel together within 64 MiB: the total is printed at the end.
#
#     bash bench/device/fetch_wheels.sh [DIRECTORY]      (default: .whl in the repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${1:-.whl}"

WHEELS=(
    gymnasium==1.4.0 farama-notifications==0.0.6   # the env API and its one missing need
    ale-py==0.12.1                                  # Atari (Pong), ROMs inside the wheel
    minatar==1.0.15                                 # the learning run's game
    gymnax==1.0.1 seaborn==0.13.2                   # the fused part's MinAtar, and seaborn, which gymnax imports (its jax, flax are there)
    stable-baselines3==2.9.2                        # the DQN bench's reference
    textual==8.2.8 textual-plotext==1.0.1 plotext==5.3.2 mdit-py-plugins==0.7.0 platformdirs==4.14.8
    watchdog==7.1.0 tomli-w==1.2.0                  # rlsup's own remaining needs (the daemon's and the TUI's)
    pytest-asyncio==1.5.0                           # the suite's conftest sets its options
)

mkdir -p "$target"
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$target" "${WHEELS[@]}" 2> >(grep -v "is ignored: it is neither" >&2)

# One version of each: two stop the whole --no-deps install on the GPU machine.
duplicates=$(ls "$target"/*.whl | xargs -n1 basename | cut -d- -f1 | tr 'A-Z_' 'a-z-' | sort | uniq -d)
if [ -n "$duplicates" ]; then
    echo "fetch_wheels: more than one version of: $duplicates (empty $target and run again)" >&2
    exit 1
fi
ls -s --block-size=K "$target"/*.whl
echo "wheels in $target: $(du -ch "$target"/*.whl | tail -1 | cut -f1) in all"
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
echo "working tree that travels: $((tree_bytes / 1024 / 1024)) MiB (with the wheels, keep it under 64 MiB)"
