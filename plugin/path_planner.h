// Chooses each path's local interface, remote address and source-port range: the oracle's answer
// when steering, NCCL-like round robin over interfaces when only observing.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <vector>

#include "plugin/listen_handle.h"
#include "core/path.h"
#include "core/task_profile.h"

namespace ff {

struct PlannedPath {
  sockaddr_storage local{};
  sockaddr_storage remote{};
  uint16_t sport_lo = 0;  // 0: any source port
  uint16_t sport_hi = 0;
  RouteLinks route;  // the oracle's path's fabric links (empty: not steered, route unknown)
};

struct PathPlan {
  std::vector<PlannedPath> paths;
  uint32_t path_id = 0;  // the oracle's id of the primary path (0 when not steered)
  std::string path_name;  // what the primary path is ("eth0 10.0.0.1 -> 10.0.0.2 via spine1"), for statistics
  bool steered = false;
  bool sla_attainable = true;
  std::string summary;  // one line for the log
};

// The name of the local interface holding `ip` among the plugin's devices; empty when none does.
std::string LocalInterfaceName(const std::string& ip);

PathPlan PlanPaths(int dev, const ListenHandle& remote, int npaths, const TaskProfile& task);

// The fabric links of an accepted path socket: with a topology file (FLEXIFORCE_TOPOLOGY), those of
// the oracle's path from the connecting address to ours whose source-port range holds the connecting
// port - the route the fabric steers it on, in both directions. Empty without a topology file or a
// matching path.
RouteLinks AcceptedPathRoute(const sockaddr_storage& connecting, const sockaddr_storage& accepting);

}  // namespace ff
