// What this process knows about its training task: identity, SLA, level, steer/observe, statistics sink.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sla/collective_id.h"
#include "sla/sla_declaration.h"
#include "sla/sla_level.h"
#include "sla/task_stats.h"

namespace ff {

struct TaskProfile {
  sla::SlaDeclaration decl;
  uint64_t task_hash = 0;  // carried in every frame header
  uint32_t sla_us = 0;     // 0 = none
  sla::SlaLevel level = sla::SlaLevel::kLevel3;
  bool steer = false;
  std::unique_ptr<sla::StatsTable> stats;  // null when statistics are off or could not be opened
  uint32_t stats_task = sla::StatsTable::kInvalid;

  // Reads the environment once; bad values are logged through NCCL's logger.
  static std::unique_ptr<TaskProfile> Load(bool stats_enabled, bool stats_keep, const std::string& stats_dir);
};

// Monotonic nanoseconds (vDSO, no syscall).
uint64_t NowNs();

}  // namespace ff
