#include "sla/task_identity.h"

#include <unistd.h>

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace ff::sla {
namespace {

// Launcher job ids, most specific first. OMPI_COMM_WORLD_* hold rank and size, not a job id,
// so Open MPI contributes through its ess jobid (v4) or the PMIx namespace (v5).
const std::vector<const char*> kLauncherIdVariables = {
    "TORCHELASTIC_RUN_ID",
    "SLURM_JOB_ID",
    "OMPI_MCA_orte_ess_jobid",
    "PMIX_NAMESPACE",
};

// Why `value` cannot be a task id, or empty when it can.
std::string InvalidReason(const char* value) {
  const std::string v(value);
  if (v.empty()) return "it is empty";
  if (v.size() > kMaxTaskIdLength) return "it is longer than " + std::to_string(kMaxTaskIdLength) + " characters";
  for (unsigned char c : v) {
    if (!std::isgraph(c)) return "it contains a space or control character";
  }
  return {};
}

uint64_t Fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

const std::vector<const char*>& LauncherIdVariables() { return kLauncherIdVariables; }

uint64_t ParseStatStartTicks(const std::string& stat_line) {
  const size_t close = stat_line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(stat_line.substr(close + 1));
  // After "(comm)" come fields 3..; starttime is field 22, i.e. the 20th token here.
  std::string token;
  for (int field = 3; field <= 22; ++field) {
    if (!(in >> token)) return 0;
  }
  uint64_t ticks = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return 0;
    ticks = ticks * 10 + static_cast<uint64_t>(c - '0');
  }
  return ticks;
}

ProcessIdentity CurrentProcessIdentity() {
  ProcessIdentity self;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) self.hostname = host;
  self.pid = getpid();
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (std::getline(stat, line)) self.start_ticks = ParseStatStartTicks(line);
  return self;
}

std::string DeriveTaskId(const ProcessIdentity& self) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = Fnv1a(h, self.hostname.data(), self.hostname.size());
  const char sep = '/';
  h = Fnv1a(h, &sep, 1);
  h = Fnv1a(h, &self.pid, sizeof(self.pid));
  h = Fnv1a(h, &self.start_ticks, sizeof(self.start_ticks));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "auto-%016" PRIx64, h);
  return buf;
}

TaskId ResolveTaskId(const EnvLookup& env, Warnings& warnings, const ProcessIdentity& self) {
  if (const char* v = env(kEnvTaskId)) {
    const std::string why = InvalidReason(v);
    if (why.empty()) return {v, kEnvTaskId};
    warnings.Report(kEnvTaskId, std::string(kEnvTaskId) + "='" + v + "' is ignored because " + why +
                                    "; accepted: 1 to " + std::to_string(kMaxTaskIdLength) +
                                    " printable characters without spaces (e.g. AI_TASK_ID=llama-7b-run3)");
  }
  for (const char* name : kLauncherIdVariables) {
    const char* v = env(name);
    if (!v || !InvalidReason(v).empty()) continue;
    // torchrun sets TORCHELASTIC_RUN_ID=none when no --rdzv-id was given: not an id.
    if (std::string(name) == "TORCHELASTIC_RUN_ID" && std::string(v) == "none") continue;
    return {v, name};
  }
  return {DeriveTaskId(self), "derived"};
}

}  // namespace ff::sla
