// `flexiforce topo`: the GPU x NIC distance matrix (nvidia-smi topo -m's classes) with NUMA and
// CPU affinity and PCIe link health, as text or JSON, from the live /sys or a fixture tree.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pcie/topo_report.h"

namespace ff {

namespace {

using pcie::LinkHealth;
using pcie::TopoReport;

constexpr char kUsage[] = "usage: flexiforce topo [--json] [--sysfs-root DIR] [--help]";

std::string Hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, v);
  return buf;
}

std::string VendorName(uint32_t vendor) {
  switch (vendor) {
    case 0x10de:
      return "NVIDIA";
    case 0x1002:
      return "AMD";
    case 0x8086:
      return "Intel";
    case 0x1a03:
      return "ASPEED";
    case 0x102b:
      return "Matrox";
    case 0x1af4:
      return "virtio";
    default:
      return Hex(vendor, 4);
  }
}

// "Gen4" for the speeds PCIe generations define, else the raw rate.
std::string SpeedName(double gts) {
  const double gens[] = {2.5, 5, 8, 16, 32, 64};
  for (size_t i = 0; i < std::size(gens); ++i)
    if (gts > gens[i] - 0.01 && gts < gens[i] + 0.01) return "Gen" + std::to_string(i + 1);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fGT/s", gts);
  return buf;
}

std::string LinkText(const LinkHealth& h) {
  if (!h.present) return "-";
  const auto& l = h.link;
  std::string s;
  s += l.current_speed_gts ? SpeedName(*l.current_speed_gts) : "?";
  s += l.current_width ? " x" + std::to_string(*l.current_width) : " x?";
  auto speed = l.capable_speed_gts();
  auto width = l.capable_width();
  const std::string capable =
      (speed ? SpeedName(*speed) : "?") + (width ? " x" + std::to_string(*width) : " x?");
  if (h.degraded) {
    s += " DEGRADED (capable " + capable + ")";
  } else if (h.slow_at_idle) {
    s += " (capable " + capable + ", idle)";
  }
  if (h.aer_errors) {
    s += " AER cor=" + std::to_string(l.aer_correctable.value_or(0)) +
         " nonfatal=" + std::to_string(l.aer_nonfatal.value_or(0)) +
         " fatal=" + std::to_string(l.aer_fatal.value_or(0));
  }
  return s;
}

std::string Numa(int node) { return node < 0 ? "N/A" : std::to_string(node); }
std::string Cpus(const std::string& list) { return list.empty() ? "N/A" : list; }

std::string NicNames(const pcie::NicDevice& n) {
  std::string s;
  for (const auto* names : {&n.rdma_devices, &n.netdevs}) {
    for (const auto& name : *names) s += (s.empty() ? "" : " ") + name;
  }
  return s;
}

// Left-aligned columns, two spaces apart, like nvidia-smi's table.
void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line.append(width[c] - r[c].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

void PrintText(const TopoReport& r) {
  const auto& gpus = r.inventory.gpus;
  const auto& nics = r.inventory.nics;
  if (gpus.empty()) {
    std::printf("no GPU found (PCI class 0x03 display/3D controller)\n");
  } else {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> head = {""};
    for (size_t n = 0; n < nics.size(); ++n) head.push_back("NIC" + std::to_string(n));
    for (const char* h : {"CPU Affinity", "NUMA Affinity", "PCI", "Vendor", "PCIe link"}) head.push_back(h);
    rows.push_back(head);
    for (size_t g = 0; g < gpus.size(); ++g) {
      std::vector<std::string> row = {"GPU" + std::to_string(g)};
      for (auto d : r.matrix[g]) row.emplace_back(pcie::DistanceName(d));
      row.push_back(Cpus(gpus[g].cpulist));
      row.push_back(Numa(gpus[g].placement.numa_node));
      row.push_back(gpus[g].address);
      row.push_back(VendorName(gpus[g].vendor));
      row.push_back(LinkText(r.gpu_health[g]));
      rows.push_back(std::move(row));
    }
    PrintTable(rows);
  }
  std::printf("\n");
  if (nics.empty()) {
    std::printf("no NIC found (net or infiniband class device with a device link)\n");
  } else {
    std::vector<std::vector<std::string>> rows = {
        {"NIC", "Names", "PCI", "CPU Affinity", "NUMA Affinity", "PCIe link"}};
    for (size_t n = 0; n < nics.size(); ++n) {
      rows.push_back({"NIC" + std::to_string(n), NicNames(nics[n]),
                      nics[n].address.empty() ? "-" : nics[n].address, Cpus(nics[n].cpulist),
                      Numa(nics[n].placement.numa_node), LinkText(r.nic_health[n])});
    }
    PrintTable(rows);
  }
  std::printf("\nLegend:\n\n");
  for (auto d : pcie::kAllDistances) {
    std::printf("  %-4s = %s\n", std::string(pcie::DistanceName(d)).c_str(),
                std::string(pcie::DistanceMeaning(d)).c_str());
  }
  std::printf(
      "  DEGRADED = link trained below what both ends support (a GPU's speed alone only means idle)\n");
  std::printf("  AER  = nonzero advanced error reporting totals (correctable, non-fatal, fatal)\n");
  for (const auto& w : r.warnings) std::fprintf(stderr, "flexiforce topo: warning: %s\n", w.c_str());
}

template <typename T>
nlohmann::json OrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json LinkJson(const LinkHealth& h) {
  if (!h.present) return nullptr;
  const auto& l = h.link;
  return {{"current_speed_gts", OrNull(l.current_speed_gts)},
          {"max_speed_gts", OrNull(l.max_speed_gts)},
          {"capable_speed_gts", OrNull(l.capable_speed_gts())},
          {"current_width", OrNull(l.current_width)},
          {"max_width", OrNull(l.max_width)},
          {"capable_width", OrNull(l.capable_width())},
          {"degraded", h.degraded},
          {"slow_at_idle", h.slow_at_idle},
          {"aer_correctable", OrNull(l.aer_correctable)},
          {"aer_nonfatal", OrNull(l.aer_nonfatal)},
          {"aer_fatal", OrNull(l.aer_fatal)},
          {"aer_errors", h.aer_errors}};
}

nlohmann::json PlacementJson(const pcie::PciPlacement& p, const std::string& cpulist) {
  return {{"numa_node", p.numa_node >= 0 ? nlohmann::json(p.numa_node) : nlohmann::json(nullptr)},
          {"cpulist", cpulist.empty() ? nlohmann::json(nullptr) : nlohmann::json(cpulist)},
          {"host_bridge", p.chain ? nlohmann::json(p.chain->host_bridge) : nlohmann::json(nullptr)},
          {"pci_chain", p.chain ? nlohmann::json(p.chain->functions) : nlohmann::json::array()}};
}

nlohmann::json ToJson(const TopoReport& r, const std::string& root) {
  const auto& gpus = r.inventory.gpus;
  const auto& nics = r.inventory.nics;
  nlohmann::json out = {
      {"sysfs_root", root}, {"gpus", nlohmann::json::array()}, {"nics", nlohmann::json::array()}};
  for (size_t n = 0; n < nics.size(); ++n) {
    nlohmann::json j = {
        {"name", "NIC" + std::to_string(n)},
        {"pci", nics[n].address.empty() ? nlohmann::json(nullptr) : nlohmann::json(nics[n].address)},
        {"device_path", nics[n].sysfs_path},
        {"netdevs", nics[n].netdevs},
        {"rdma_devices", nics[n].rdma_devices},
        {"link", LinkJson(r.nic_health[n])}};
    j.update(PlacementJson(nics[n].placement, nics[n].cpulist));
    out["nics"].push_back(std::move(j));
  }
  for (size_t g = 0; g < gpus.size(); ++g) {
    nlohmann::json dist = nlohmann::json::object();
    for (size_t n = 0; n < nics.size(); ++n)
      dist["NIC" + std::to_string(n)] = pcie::DistanceName(r.matrix[g][n]);
    nlohmann::json order = nlohmann::json::array();
    for (size_t n : r.nics_by_distance[g]) order.push_back("NIC" + std::to_string(n));
    nlohmann::json j = {{"name", "GPU" + std::to_string(g)},
                        {"pci", gpus[g].address},
                        {"vendor", Hex(gpus[g].vendor, 4)},
                        {"vendor_name", VendorName(gpus[g].vendor)},
                        {"device", Hex(gpus[g].device_id, 4)},
                        {"class", Hex(gpus[g].class_code, 6)},
                        {"device_path", gpus[g].sysfs_path},
                        {"link", LinkJson(r.gpu_health[g])},
                        {"distance", dist},
                        {"nics_by_distance", order}};
    j.update(PlacementJson(gpus[g].placement, gpus[g].cpulist));
    out["gpus"].push_back(std::move(j));
  }
  nlohmann::json legend = nlohmann::json::object();
  for (auto d : pcie::kAllDistances) legend[std::string(pcie::DistanceName(d))] = pcie::DistanceMeaning(d);
  out["legend"] = legend;
  // The same distances as rows of NIC columns, for scripts that want nvidia-smi's table shape.
  nlohmann::json matrix = nlohmann::json::array();
  for (const auto& row : r.matrix) {
    nlohmann::json names = nlohmann::json::array();
    for (auto d : row) names.push_back(pcie::DistanceName(d));
    matrix.push_back(std::move(names));
  }
  out["matrix"] = matrix;
  out["warnings"] = r.warnings;
  return out;
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

int RunTopoCommand(int argc, char** argv) {
  CLI::App app{
      "Show which NICs are near which GPUs: the GPU x NIC matrix with nvidia-smi topo -m's classes (PIX, "
      "PXB, "
      "PHB, NODE, SYS), each device's NUMA node and local CPUs, and PCIe link health (trained vs. capable "
      "speed "
      "and width, AER error totals). Reads sysfs only."};
  app.name("flexiforce topo");
  std::string root = "/";
  bool json = false;
  app.add_option("--sysfs-root", root, "read DIR/sys instead of /sys (a fixture tree); default /");
  app.add_flag("--json", json, "print JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "flexiforce topo: %s\n%s\n", e.what(), kUsage);
    return 2;
  }
  if (root.empty() || !IsDirectory(root) || !IsDirectory(root + "/sys")) {
    std::fprintf(stderr,
                 "flexiforce topo: --sysfs-root '%s': expected a directory that contains sys/ (e.g. / or a "
                 "fixture tree)\n%s\n",
                 root.c_str(), kUsage);
    return 2;
  }

  TopoReport report = pcie::BuildTopoReport(root);
  if (json) {
    std::printf("%s\n", ToJson(report, root).dump(1).c_str());
  } else {
    PrintText(report);
  }
  return 0;
}

}  // namespace ff
