// Whether this process may load BPF programs and attach them to uprobes/USDT and tracepoints.
#pragma once

#include <string>

namespace ff::probe {

struct BpfPermission {
  bool root = false;
  bool cap_sys_admin = false;
  bool cap_bpf = false;
  bool cap_perfmon = false;
  int unprivileged_bpf_disabled = -1;  // /proc/sys/kernel/unprivileged_bpf_disabled; -1 unreadable
  bool permitted = false;              // CAP_SYS_ADMIN, or CAP_BPF together with CAP_PERFMON
  std::string missing;                 // when not permitted: what to add, in words
};

// Reads the effective capabilities from <proc_root>/self/status (root without them is not enough:
// a container may drop them).
BpfPermission ReadBpfPermission(const std::string& proc_root = "/proc");

// Parses a CapEff hex mask into the three capabilities that matter here.
void DecodeCapabilities(unsigned long long cap_eff, BpfPermission* out);

}  // namespace ff::probe
