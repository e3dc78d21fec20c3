// `flexiforce probe check`: one host's readiness for a FlexiForce job, one finding per fact.
#pragma once

#include <string>

#include "bpf/finding.h"
#include "sla/env_lookup.h"

namespace ff::probe {

struct PreflightInputs {
  sla::EnvLookup env;                // the job-facing environment
  std::string sysfs_root = "/sys";   // a fixture tree in tests
  std::string proc_root = "/proc";
  std::string shm_dir = "/dev/shm";  // where the statistics file goes
};

// Network interfaces (speed, carrier, PCI path) and the ones NCCL_SOCKET_IFNAME selects.
void CheckInterfaces(const PreflightInputs& in, Findings* out);
// RDMA devices and the GID a RoCEv2/IPv4 connection would use; "none" when there are none.
void CheckRdma(const PreflightInputs& in, Findings* out);
// Where RDMA devices exist: whether their NICs can reach GPU memory (nvidia-peermem), with the
// number of NVIDIA GPUs; a warning on a GPU host without it. CheckRdma calls it.
void CheckGpuDirect(const PreflightInputs& in, Findings* out);
// AI_SLA_LATENCY, AI_TASK_ID, AI_FLEXIFORCE_ENABLE as the plugin parses them, with level and class.
void CheckEnvironment(const PreflightInputs& in, Findings* out);
// Free room for the statistics file, and whether BPF may be attached here.
void CheckStatsRoom(const PreflightInputs& in, Findings* out);
void CheckBpf(const PreflightInputs& in, Findings* out);

// All of the above, in that order.
Findings RunPreflight(const PreflightInputs& in);

// True when some finding would stop a job (the command's exit status).
bool AnyError(const Findings& f);

}  // namespace ff::probe
