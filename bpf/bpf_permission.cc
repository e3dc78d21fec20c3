// Effective-capability check for BPF: reads /proc/self/status rather than trusting the uid.
#include "bpf/bpf_permission.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace ff::probe {

namespace {
constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;
}  // namespace

void DecodeCapabilities(unsigned long long cap_eff, BpfPermission* out) {
  out->cap_sys_admin = (cap_eff >> kCapSysAdmin) & 1;
  out->cap_perfmon = (cap_eff >> kCapPerfmon) & 1;
  out->cap_bpf = (cap_eff >> kCapBpf) & 1;
  // CAP_SYS_ADMIN covers both on kernels before 5.8 and still does after.
  out->permitted = out->cap_sys_admin || (out->cap_bpf && out->cap_perfmon);
  out->missing.clear();
  if (out->permitted) return;
  std::string need;
  if (!out->cap_bpf) need += "CAP_BPF";
  if (!out->cap_perfmon) need += std::string(need.empty() ? "" : " and ") + "CAP_PERFMON";
  out->missing = "run as root, or grant CAP_BPF + CAP_PERFMON (missing: " + need + ")";
}

BpfPermission ReadBpfPermission(const std::string& proc_root) {
  BpfPermission p;
  p.root = geteuid() == 0;
  unsigned long long cap_eff = 0;
  std::ifstream status(proc_root + "/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("CapEff:", 0) == 0) cap_eff = std::stoull(line.substr(7), nullptr, 16);
  }
  DecodeCapabilities(cap_eff, &p);
  std::ifstream unpriv(proc_root + "/sys/kernel/unprivileged_bpf_disabled");
  if (!(unpriv >> p.unprivileged_bpf_disabled)) p.unprivileged_bpf_disabled = -1;
  return p;
}

}  // namespace ff::probe
