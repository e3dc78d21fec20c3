// Preflight of the job's environment, the statistics file's room and BPF permission; the whole check.
#include "bpf/preflight.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include "bpf/bpf_permission.h"
#include "sla/sla_declaration.h"
#include "sla/sla_level.h"
#include "sla/traffic_class.h"

namespace ff::probe {

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kOk:
      return "ok";
    case Severity::kWarn:
      return "warn";
    case Severity::kError:
      return "error";
  }
  return "?";
}

void CheckEnvironment(const PreflightInputs& in, Findings* out) {
  // Parsed by the plugin's own functions, so this says exactly what a job would get.
  sla::Warnings warnings;
  const sla::SlaDeclaration d = sla::ReadSlaDeclaration(in.env, warnings);
  const auto bad = warnings.All();
  for (const auto& w : bad) out->push_back({Severity::kError, "env", w});
  const sla::SlaLevel level = sla::ClassifySla(d.latency_ns);
  sla::TrafficClassInputs tci;
  tci.steer = d.steer;
  tci.level = level;
  const sla::TrafficClassDecision tc = sla::DecideTrafficClass(tci);
  const char* raw_sla = in.env(sla::kEnvSlaLatency);
  Finding f;
  f.topic = "env";
  f.message = std::string("AI_SLA_LATENCY=") + (raw_sla ? raw_sla : "(unset)") + " -> " +
              (d.latency_ns ? std::to_string(*d.latency_ns / 1000) + " us" : std::string("no SLA")) + ", " +
              sla::SlaLevelName(level) + ", traffic class " +
              (tc.tos < 0 ? std::string("left to the OS") : "TOS " + std::to_string(tc.tos) + " (DSCP " +
                                                                std::to_string(tc.dscp) + ")") +
              " [" + sla::TrafficClassSourceName(tc.source) + "]";
  f.detail = {{"AI_SLA_LATENCY", raw_sla ? raw_sla : ""},
              {"sla_ns", d.latency_ns ? nlohmann::json(*d.latency_ns) : nlohmann::json(nullptr)},
              {"level", sla::SlaLevelName(level)},
              {"tos", tc.tos},
              {"dscp", tc.dscp},
              {"traffic_class_source", sla::TrafficClassSourceName(tc.source)}};
  out->push_back(std::move(f));
  out->push_back({Severity::kOk, "env", "task " + d.task.id + " (from " + d.task.source + ")",
                  {{"task", d.task.id}, {"source", d.task.source}}});
  out->push_back({Severity::kOk, "env",
                  std::string("AI_FLEXIFORCE_ENABLE -> ") + (d.steer ? "steer (paths, traffic class, failover)" : "observe only"),
                  {{"steer", d.steer}}});
  for (const char* name : {"NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"}) {
    const char* v = in.env(name);
    out->push_back({Severity::kOk, "env", std::string(name) + "=" + (v ? v : "(unset)"), {{name, v ? v : ""}}});
  }
}

void CheckStatsRoom(const PreflightInputs& in, Findings* out) {
  struct statvfs vfs {};
  Finding f;
  f.topic = "shm";
  if (statvfs(in.shm_dir.c_str(), &vfs) != 0) {
    f.severity = Severity::kWarn;
    f.message = in.shm_dir + " unavailable: the plugin keeps no statistics file (`flexiforce stats` sees nothing)";
    out->push_back(std::move(f));
    return;
  }
  const unsigned long long free_bytes = static_cast<unsigned long long>(vfs.f_bavail) * vfs.f_frsize;
  const bool writable = access(in.shm_dir.c_str(), W_OK) == 0;
  // One process's table is about 1 MiB (1024 slots x 40 buckets); 16 MiB leaves room for a node's ranks.
  constexpr unsigned long long kWant = 16ull << 20;
  f.severity = writable && free_bytes >= kWant ? Severity::kOk : Severity::kWarn;
  f.message = in.shm_dir + " " + std::to_string(free_bytes >> 20) + " MiB free" +
              (writable ? "" : ", not writable") + (free_bytes < kWant ? ", below 16 MiB for statistics" : "");
  f.detail = {{"dir", in.shm_dir}, {"free_bytes", free_bytes}, {"writable", writable}};
  out->push_back(std::move(f));
}

void CheckBpf(const PreflightInputs& in, Findings* out) {
  const BpfPermission p = ReadBpfPermission(in.proc_root);
  Finding f;
  f.topic = "bpf";
  // Not an error: a job runs without the probe tool, only `flexiforce probe watch` needs it.
  f.severity = p.permitted ? Severity::kOk : Severity::kWarn;
  f.message = p.permitted ? std::string("BPF attach permitted (") +
                                (p.cap_sys_admin ? "CAP_SYS_ADMIN" : "CAP_BPF + CAP_PERFMON") + ")"
                          : "BPF attach not permitted: " + p.missing;
  f.message += "; unprivileged_bpf_disabled=" + std::to_string(p.unprivileged_bpf_disabled);
  f.detail = {{"permitted", p.permitted},     {"root", p.root},
              {"cap_sys_admin", p.cap_sys_admin}, {"cap_bpf", p.cap_bpf},
              {"cap_perfmon", p.cap_perfmon}, {"unprivileged_bpf_disabled", p.unprivileged_bpf_disabled}};
  out->push_back(std::move(f));
}

Findings RunPreflight(const PreflightInputs& in) {
  Findings f;
  CheckInterfaces(in, &f);
  CheckRdma(in, &f);
  CheckEnvironment(in, &f);
  CheckStatsRoom(in, &f);
  CheckBpf(in, &f);
  return f;
}

bool AnyError(const Findings& f) {
  for (const auto& x : f)
    if (x.severity == Severity::kError) return true;
  return false;
}

}  // namespace ff::probe
