// The per-call cost of one FF_PROBE site (send_done, the plugin's arguments), in three builds of the
// same loop: probes compiled in (probe_microbench.cc), compiled out (probe_microbench_off.cc).
#pragma once

#include <cstdint>

namespace ff::probe_bench {

// Fires `n` send_done probes with the plugin's argument kinds; returns a checksum of the work
// around them (so the loop is not optimised away). `task`/`peer` are C strings the BPF side reads.
uint64_t LoopWithProbes(uint64_t n, const char* task, const char* peer);
uint64_t LoopWithoutProbes(uint64_t n, const char* task, const char* peer);
// The send_done semaphore (0 while nothing is attached; always 0 without probes).
unsigned SendDoneSemaphore();
// The other 11 probe sites, so the probe tool (which attaches all or none) accepts this binary; not run.
void OtherProbeSites(const char* task, const char* peer);

}  // namespace ff::probe_bench
