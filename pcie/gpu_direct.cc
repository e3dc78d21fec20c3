// Peer-memory module detection (see gpu_direct.h).
#include "pcie/gpu_direct.h"

#include <sys/stat.h>

namespace ff::pcie {
namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

std::string PeerMemModule(const std::string& sys_dir) {
  std::string sys = sys_dir.empty() ? "/sys" : sys_dir;
  if (sys.back() != '/') sys += '/';
  if (Exists(sys + "module/nvidia_peermem/version")) return "nvidia_peermem";
  if (Exists(sys + "module/nv_peer_mem/version")) return "nv_peer_mem";
  if (Exists(sys + "kernel/mm/memory_peers/nv_mem/version")) return "nv_peer_mem";
  return "";
}

}  // namespace ff::pcie
