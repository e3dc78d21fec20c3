// Chooses each path's local interface, remote address and source-port range: the oracle's answer
// when steering, NCCL-like round robin over interfaces when only observing.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <vector>

#include "plugin/listen_handle.h"
#include "core/task_profile.h"

namespace ff {

struct PlannedPath {
  sockaddr_storage local{};
  sockaddr_storage remote{};
  uint16_t sport_lo = 0;  // 0: any source port
  uint16_t sport_hi = 0;
};

struct PathPlan {
  std::vector<PlannedPath> paths;
  uint32_t path_id = 0;  // the oracle's id of the primary path (0 when not steered)
  bool steered = false;
  bool sla_attainable = true;
  std::string summary;  // one line for the log
};

PathPlan PlanPaths(int dev, const ListenHandle& remote, int npaths, const TaskProfile& task);

}  // namespace ff
