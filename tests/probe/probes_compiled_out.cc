// Built without FF_HAVE_SDT (as with -DFF_USDT=OFF or without sys/sdt.h): FF_PROBE must compile with
// -Werror when its arguments are variables used nowhere else, evaluate none of its arguments, and
// leave no stapsdt note (tests/probe/CMakeLists.txt checks the binary with readelf).
#include <cstdio>

#include "core/probes.h"

#if defined(FF_HAVE_SDT)
#error "this test must be built without FF_HAVE_SDT"
#endif

namespace {
int evaluated = 0;
const char* Peer() {
  ++evaluated;
  return "peer";
}
}  // namespace

int main() {
  const unsigned long long latency = 42;  // used only by the probe: must not warn as unused
  FF_PROBE(send_done, 1ull, 2, 3ull, Peer(), -1, 0ull, latency, "task");
  FF_PROBE(pause, ++evaluated, Peer());
  if (FF_PROBE_ENABLED(send_done)) ++evaluated;
  if (evaluated != 0) {
    std::printf("FAIL: a compiled-out probe evaluated %d argument(s)\n", evaluated);
    return 1;
  }
  std::printf("ok: compiled-out probes evaluate nothing\n");
  return 0;
}
