// The same loop with FF_PROBE compiled out (as -DFF_USDT=OFF builds it).
#include "core/probe_batch.h"
#include "core/probes.h"
#include "tests/probe/probe_microbench.h"

#if defined(FF_HAVE_SDT)
#error "built without FF_HAVE_SDT"
#endif

namespace ff::probe_bench {
#define LOOP_NAME LoopWithoutProbes
#include "tests/probe/probe_microbench_loop.inc"
#undef LOOP_NAME
}  // namespace ff::probe_bench
