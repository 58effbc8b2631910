#!/usr/bin/env bash
# Builds fxagent in build/ and takes a 10 s snapshot of this machine into
# fxagent-once.json.gz (open it at https://profiler.firefox.com). Needs root.
set -euo pipefail

cd "$(dirname "$0")/.."
bash scripts/install-build-deps.sh
# The tests need more than the build deps (cmocka, python3): not configured here.
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF
cmake --build build -j "$(nproc)" --target fxagent
# fxagent names the file it wrote, and says why if it holds almost no samples.
./build/fxagent --once --duration 10s --output "$(pwd)/fxagent-once.json.gz"
