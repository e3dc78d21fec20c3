// The per-message cost of the plugin's completion probes (the send_done site and the msgs_done batch,
// core/probe_batch.h), in builds of the same loop: probes compiled in (probe_microbench_on.cc),
// compiled out (probe_microbench_off.cc).
#pragma once

#include <cstdint>

namespace ff::probe_bench {

// Completes `n` messages as a communicator does (send_done site, msgs_done batch); returns a checksum of the work
// around them (so the loop is not optimised away). `task`/`peer` are C strings the BPF side reads.
uint64_t LoopWithProbes(uint64_t n, const char* task, const char* peer);
uint64_t LoopWithoutProbes(uint64_t n, const char* task, const char* peer);
// The msgs_done semaphore, what `flexiforce probe` attaches to (0 while nothing is attached).
unsigned AttachedSemaphore();
// The other 11 probe sites, so the probe tool (which attaches all or none) accepts this binary; not run.
void OtherProbeSites(const char* task, const char* peer);

}  // namespace ff::probe_bench
