#!/usr/bin/env bash
# The main job: set up, build, then run the demo (real traffic through the plugin on an emulated
# leaf-spine fabric when root, else on loopback; SLA tagging, path choice, a link cut, statistics).
set -euo pipefail
cd "$(dirname "$0")/.."
bash examples/setup.sh
exec /usr/bin/python3 examples/demo.py --build "${FF_BUILD_DIR:-build}" "$@"
