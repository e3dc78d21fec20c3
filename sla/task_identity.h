// Which training task (job) this process belongs to: AI_TASK_ID, the launcher's job ids, or a derived id.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sla/env_lookup.h"
#include "sla/warnings.h"

namespace ff::sla {

inline constexpr const char* kEnvTaskId = "AI_TASK_ID";
// Task ids travel in the wire header and key the statistics table, so they are bounded.
inline constexpr size_t kMaxTaskIdLength = 63;

struct TaskId {
  std::string id;
  std::string source;  // the variable it came from, or "derived" for the host/start-time hash
};

// The facts the derived id is built from; a seam so tests need not depend on the real process.
struct ProcessIdentity {
  std::string hostname;
  int64_t pid = 0;
  uint64_t start_ticks = 0;  // field 22 of /proc/<pid>/stat: start time in clock ticks since boot
};

// Reads hostname, pid and /proc/self/stat's start time (start_ticks 0 when unreadable).
ProcessIdentity CurrentProcessIdentity();

// Reads field 22 (starttime) of a /proc/<pid>/stat line; 0 when the line is malformed.
// The command name (field 2) may contain spaces and parentheses, so parsing starts after the last ')'.
uint64_t ParseStatStartTicks(const std::string& stat_line);

// Stable derived id "auto-<16 hex>": FNV-1a 64 of hostname, pid and start time. Stable means the
// same process always yields the same id (every thread, every communicator, every re-init) and
// distinct processes yield distinct ids, even if a pid is reused later. It is per process: ranks
// of one job get different derived ids, so a job-wide id needs AI_TASK_ID or a launcher id.
std::string DeriveTaskId(const ProcessIdentity& self);

// The launcher job-id variables ResolveTaskId falls back to after AI_TASK_ID, in the order tried.
const std::vector<const char*>& LauncherIdVariables();

// Resolves the task id, first valid wins: AI_TASK_ID, TORCHELASTIC_RUN_ID (except torchrun's
// placeholder "none"), SLURM_JOB_ID, OMPI_MCA_orte_ess_jobid (Open MPI <= 4), PMIX_NAMESPACE
// (Open MPI 5 / PRRTE, Slurm with PMIx), then DeriveTaskId. An invalid AI_TASK_ID is reported.
TaskId ResolveTaskId(const EnvLookup& env, Warnings& warnings, const ProcessIdentity& self);

}  // namespace ff::sla
