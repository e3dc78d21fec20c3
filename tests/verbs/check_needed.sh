#!/usr/bin/env bash
# The plugin needs only glibc, libstdc++ (and libgcc_s/libm, which they pull in) at load time, and
# nothing that links ff_verbs needs libibverbs or librdmacm: both are opened with dlopen.
# Usage: check_needed.sh PLUGIN_SO [OTHER_BINARY...]
set -euo pipefail
plugin="${1:?usage: check_needed.sh PLUGIN_SO [OTHER_BINARY...]}"
fail=0
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
for lib in $(needed "$plugin"); do
  case "$lib" in
    libc.so.6 | libstdc++.so.6 | libm.so.6 | libgcc_s.so.1 | ld-linux-*.so.*) ;;
    # Sanitizer lanes (FF_SANITIZE, FF_TSAN) link their runtimes; a release build never does.
    libasan.so.* | libubsan.so.* | libtsan.so.*) ;;
    *) echo "FAIL: $plugin needs $lib (only glibc and libstdc++ are allowed)"; fail=1 ;;
  esac
done
for bin in "$@"; do
  if needed "$bin" | grep -E '^lib(ibverbs|rdmacm)\.so' >/dev/null; then
    echo "FAIL: $bin links $(needed "$bin" | grep -E '^lib(ibverbs|rdmacm)' | tr '\n' ' ')(dlopen them instead)"
    fail=1
  fi
done
[ "$fail" = 0 ] && echo "ok: $(needed "$plugin" | tr '\n' ' ')"
exit $fail
