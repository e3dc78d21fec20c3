// /proc/<pid>/maps scanning for the plugin library: which files to attach the USDT probes to.
#include "bpf/plugin_procs.h"

#include <dirent.h>

#include <fstream>
#include <memory>
#include <set>

namespace ff::probe {

namespace {

void ScanOne(int pid, const std::string& proc_root, std::vector<PluginMapping>* out) {
  std::ifstream maps(proc_root + "/" + std::to_string(pid) + "/maps");
  std::set<std::string> seen;
  for (std::string line; std::getline(maps, line);) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    // A file replaced on disk after mapping shows " (deleted)": its probes cannot be attached by path.
    if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0) continue;
    const auto base = path.rfind('/');
    if (path.compare(base + 1, std::string::npos, kPluginFileName) != 0) continue;
    if (seen.insert(path).second) out->push_back({pid, path});
  }
}

struct DirCloser {
  void operator()(DIR* d) const { closedir(d); }
};

}  // namespace

std::vector<PluginMapping> FindPluginMappings(int pid, const std::string& proc_root) {
  std::vector<PluginMapping> out;
  if (pid > 0) {
    ScanOne(pid, proc_root, &out);
    return out;
  }
  std::unique_ptr<DIR, DirCloser> dir(opendir(proc_root.c_str()));
  if (!dir) return out;
  while (dirent* e = readdir(dir.get())) {
    char* end = nullptr;
    const long p = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || p <= 0) continue;
    ScanOne(static_cast<int>(p), proc_root, &out);
  }
  return out;
}

}  // namespace ff::probe
