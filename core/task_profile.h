// What this process knows about its training task: identity, SLA, level, steer/observe, statistics sink.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <atomic>

#include "sla/collective_id.h"
#include "sla/heat_index.h"
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
  std::unique_ptr<sla::HeatIndex> heat;       // the task's bytes over a 1 s sliding window
  std::atomic<uint64_t> heat_published_ns{0};  // last time heat was written to the stats table

  // Counts bytes toward the heat index and publishes it to the statistics at most every 100 ms.
  void AddBytes(uint64_t bytes, uint64_t now_ns);
  // Writes the current heat to the statistics now (a communicator closing, a short job ending).
  void PublishHeat();

  // Reads the environment once; bad values are logged through NCCL's logger.
  static std::unique_ptr<TaskProfile> Load(bool stats_enabled, bool stats_keep, const std::string& stats_dir,
                                           uint32_t stats_slots = 1024);
};

// Monotonic nanoseconds (vDSO, no syscall).
uint64_t NowNs();

}  // namespace ff
