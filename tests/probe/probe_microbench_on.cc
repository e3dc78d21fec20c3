// The loop with the plugin's USDT probes compiled in (FF_HAVE_SDT set for this file by CMake).
#include "core/probe_batch.h"
#include "core/probes.h"
#include "tests/probe/probe_microbench.h"

#if !defined(FF_HAVE_SDT)
#error "built with FF_HAVE_SDT"
#endif

namespace ff::probe_bench {
#define LOOP_NAME LoopWithProbes
#include "tests/probe/probe_microbench_loop.inc"
#undef LOOP_NAME
unsigned AttachedSemaphore() { return FF_PROBE_SEMAPHORE(msgs_done); }

// `flexiforce probe` attaches to all 12 probes of a file or to none: every other site, never run.
void OtherProbeSites(const char* task, const char* peer) {
  FF_PROBE(send_post, uint64_t{1}, 4, uint64_t{1}, peer, -1, uint64_t{50}, uint64_t{0}, task);
  FF_PROBE(recv_post, uint64_t{1}, 0xffff, uint64_t{1}, peer, -1, uint64_t{50}, uint64_t{0}, task);
  FF_PROBE(recv_done, uint64_t{1}, 4, uint64_t{1}, peer, 0, uint64_t{50}, uint64_t{1}, task);
  FF_PROBE(connect, uint64_t{1}, peer, 2, uint64_t{50}, -1);
  FF_PROBE(accept, uint64_t{1}, peer, 2, uint64_t{50}, -1);
  FF_PROBE(path_choice, uint64_t{1}, peer, 0, 0, 1);
  FF_PROBE(failover, uint64_t{1}, peer, 1, uint64_t{0}, uint64_t{0});
  FF_PROBE(drain, uint64_t{1}, peer, 0);
  FF_PROBE(failback, uint64_t{1}, peer, 0);
  FF_PROBE(pause, uint64_t{1}, peer);
  FF_PROBE(resume, uint64_t{1}, peer);
  FF_PROBE(path_up, uint64_t{1}, peer, 0, peer);
}
}  // namespace ff::probe_bench
