#!/usr/bin/env bash
# Fails when the committed docs/REFERENCE.md differs from what `flexiforce config --markdown` generates.
# Usage: check_reference.sh FLEXIFORCE SOURCE_DIR BUILD_DIR
set -euo pipefail
ff="${1:?usage: check_reference.sh FLEXIFORCE SOURCE_DIR BUILD_DIR}"
src="${2:?usage: check_reference.sh FLEXIFORCE SOURCE_DIR BUILD_DIR}"
build="${3:?usage: check_reference.sh FLEXIFORCE SOURCE_DIR BUILD_DIR}"
committed="$src/docs/REFERENCE.md"
generated="$(mktemp)"
trap 'rm -f "$generated"' EXIT
"$ff" config --markdown > "$generated"
if [ ! -f "$committed" ]; then
  echo "FAIL: $committed is missing"
  echo "regenerate it with: cmake --build $build --target reference"
  exit 1
fi
if ! diff -u --label "committed docs/REFERENCE.md" --label "generated (flexiforce config --markdown)" \
    "$committed" "$generated"; then
  echo
  echo "FAIL: docs/REFERENCE.md is out of date with the config registry / command table"
  echo "regenerate it with: cmake --build $build --target reference   (then commit docs/REFERENCE.md)"
  exit 1
fi
echo "ok: docs/REFERENCE.md matches flexiforce config --markdown ($(wc -l < "$generated") lines)"
