// Reads /sys/class/infiniband: ports, their state, and the GID table with its types and netdevs.
#include "bpf/rdma_devices.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ff::probe {

namespace fs = std::filesystem;

namespace {

std::string ReadLine(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

bool ZeroGid(const std::string& gid) {
  return gid.find_first_not_of("0:") == std::string::npos;
}

std::optional<RdmaGid> ReadGid(const fs::path& port_dir, int index) {
  RdmaGid g;
  g.index = index;
  g.gid = ReadLine(port_dir / "gids" / std::to_string(index));
  // An unpopulated entry reads as zeros, and its type file cannot be read (EINVAL).
  if (g.gid.empty() || ZeroGid(g.gid)) return std::nullopt;
  g.type = ReadLine(port_dir / "gid_attrs" / "types" / std::to_string(index));
  g.ndev = ReadLine(port_dir / "gid_attrs" / "ndevs" / std::to_string(index));
  return g;
}

std::optional<RdmaGid> SelectGid(const fs::path& port_dir, const std::string& link_layer, int forced) {
  if (forced >= 0) return ReadGid(port_dir, forced);
  if (link_layer != "Ethernet") return ReadGid(port_dir, 0);  // InfiniBand: the port GID
  std::error_code ec;
  std::vector<int> indexes;
  for (const auto& e : fs::directory_iterator(port_dir / "gids", ec)) {
    const std::string n = e.path().filename().string();
    if (!n.empty() && std::all_of(n.begin(), n.end(), ::isdigit)) indexes.push_back(std::stoi(n));
  }
  std::sort(indexes.begin(), indexes.end());
  // The lowest index that is RoCE v2 and carries an IPv4 address: what NCCL picks for AF_INET.
  for (int i : indexes) {
    auto g = ReadGid(port_dir, i);
    if (g && g->type == "RoCE v2" && IsIpv4MappedGid(g->gid)) return g;
  }
  return std::nullopt;
}

}  // namespace

bool IsIpv4MappedGid(const std::string& gid) {
  return gid.rfind("0000:0000:0000:0000:0000:ffff:", 0) == 0;
}

std::vector<RdmaDevice> ListRdmaDevices(const std::string& sysfs_root, int gid_index) {
  std::vector<RdmaDevice> out;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(fs::path(sysfs_root) / "class" / "infiniband", ec)) {
    RdmaDevice dev;
    dev.name = d.path().filename().string();
    std::error_code pec;
    for (const auto& p : fs::directory_iterator(d.path() / "ports", pec)) {
      RdmaPort port;
      try {
        port.port = std::stoi(p.path().filename().string());
      } catch (...) {
        continue;
      }
      const std::string state = ReadLine(p.path() / "state");  // "4: ACTIVE"
      const auto colon = state.find(": ");
      port.state = colon == std::string::npos ? state : state.substr(colon + 2);
      port.link_layer = ReadLine(p.path() / "link_layer");
      port.selected = SelectGid(p.path(), port.link_layer, gid_index);
      dev.ports.push_back(port);
    }
    std::sort(dev.ports.begin(), dev.ports.end(), [](const RdmaPort& a, const RdmaPort& b) { return a.port < b.port; });
    out.push_back(std::move(dev));
  }
  std::sort(out.begin(), out.end(), [](const RdmaDevice& a, const RdmaDevice& b) { return a.name < b.name; });
  return out;
}

bool HcaFilterMatches(const std::string& spec_in, const std::string& device, int port) {
  if (spec_in.empty()) return true;
  std::string spec = spec_in;
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') {
    exclude = true;
    spec.erase(0, 1);
  }
  if (!spec.empty() && spec[0] == '=') {
    exact = true;
    spec.erase(0, 1);
  }
  bool hit = false;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    int want_port = -1;
    const auto colon = item.find(':');
    if (colon != std::string::npos) {
      try {
        want_port = std::stoi(item.substr(colon + 1));
      } catch (...) {
        want_port = -2;  // malformed: matches no port
      }
      item.resize(colon);
    }
    const bool name_ok = exact ? device == item : device.rfind(item, 0) == 0;
    if (name_ok && (want_port == -1 || want_port == port)) hit = true;
  }
  return exclude ? !hit : hit;
}

}  // namespace ff::probe
