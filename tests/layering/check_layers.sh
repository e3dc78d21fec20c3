#!/usr/bin/env bash
# The layering rules, checked on the real include graph (the compiler's own dependency lists):
#   base/ and nccl/ depend on nothing of ours but each other;
#   core/ (the communicator) never reaches a transport (tcp/, verbs/), the wiring (plugin/) or CLI code;
#   tcp/, sla/, pathctl/, pcie/, health/ never reach plugin/, cli/ or tests/;
#   verbs/ (the RDMA backend) reaches only base/, core/, health/, pcie/, pathctl/ and nccl/: never the
#   wiring, the CLI, tests, the other transport (tcp/) or the probe tool (bpf/);
#   no product file (anything outside tests/) includes tests/.
# Usage: check_layers.sh SOURCE_DIR [CXX]
set -euo pipefail
src="${1:?usage: check_layers.sh SOURCE_DIR [CXX]}"
cxx="${2:-c++}"
cd "$src"
fail=0
deps_of() {  # every project header a folder's sources reach, transitively
  local dir="$1" f
  for f in "$dir"/*.cc; do
    [ -e "$f" ] || continue
    "$cxx" -std=c++20 -I. -MM -MG "$f" 2>/dev/null | tr ' \\' '\n\n' | sed -n 's#^\./##; /^[a-z]\+/p'
  done | grep -v '^/' | sort -u
}
check() {  # check DIR FORBIDDEN_REGEX WHY
  local dir="$1" bad="$2" why="$3" hits
  hits=$(deps_of "$dir" | grep -E "$bad" || true)
  if [ -n "$hits" ]; then
    echo "FAIL: $dir/ reaches $(echo "$hits" | tr '\n' ' ')- $why"
    fail=1
  else
    echo "ok:   $dir/ reaches nothing under ${bad}"
  fi
}
check base '^(core|tcp|plugin|health|sla|pathctl|pcie|cli|bpf|tests|verbs)/' "the base layer depends on nothing above it"
check core '^(tcp|verbs|plugin|cli|bpf|tests)/' "the communicator core must stay transport-independent"
for d in tcp sla pathctl pcie health; do
  check "$d" '^(plugin|cli|tests)/' "components below the wiring never include it, CLI code or tests"
done
check verbs '^(plugin|cli|tests|tcp|bpf|sla)/' "the verbs backend sits below the wiring, beside tcp/, and reaches core only through the Path seam"
product=$(grep -rlE '#include "tests/' --include=*.cc --include=*.h --include=*.c . | grep -v '^\./tests/' | grep -v '^\./build' || true)
if [ -n "$product" ]; then
  echo "FAIL: product files include tests/: $product"
  fail=1
else
  echo "ok:   no product file includes tests/"
fi
exit $fail
