// Finds the processes that have the FlexiForce plugin mapped, and the plugin files they map.
#pragma once

#include <string>
#include <vector>

namespace ff::probe {

struct PluginMapping {
  int pid = 0;
  std::string path;  // the mapped file, as /proc/<pid>/maps names it
};

inline constexpr const char* kPluginFileName = "libnccl-net-flexiforce.so";

// Scans <proc_root>/<pid>/maps (all pids, or only `pid` when > 0) for files named like the plugin.
// Unreadable processes (gone, or not ours) are skipped.
std::vector<PluginMapping> FindPluginMappings(int pid = 0, const std::string& proc_root = "/proc");

}  // namespace ff::probe
