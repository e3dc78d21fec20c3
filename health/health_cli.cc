// `flexiforce health`: samples NIC error counters, FEC, RDMA port and PCIe link state and
// prints the sources found, their values and the debounced verdicts.
#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "health/nic_health_monitor.h"

namespace ff {

namespace {

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

using health::NicSnapshot;

struct Change {
  int sample;
  health::NicVerdictChange change;
};

std::optional<std::vector<std::string>> ListInterfaces(const std::string& root) {
  const std::string dir = root + "/sys/class/net";
  std::unique_ptr<DIR, DirCloser> d(::opendir(dir.c_str()));
  if (!d) return std::nullopt;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d.get())) {
    std::string n = e->d_name;
    if (n == "." || n == ".." || n == "lo" || n == "bonding_masters") continue;
    names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

template <typename T>
nlohmann::json OrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json ToJson(const NicSnapshot& s, const std::vector<Change>& changes) {
  nlohmann::json j = {{"name", s.ifname},
                      {"exists", s.exists},
                      {"degraded", s.degraded},
                      {"reason", s.reason},
                      {"last_detection", s.last_detection},
                      {"detections", s.detections},
                      {"samples", s.samples}};
  j["sources"] = {{"counters", s.has_counters},
                  {"fec", health::FecStatusName(s.fec_status)},
                  {"rdma", !s.rdma_device.empty()},
                  {"pcie_link", s.has_pcie_link},
                  {"pcie_aer", s.has_aer}};
  nlohmann::json counters = nlohmann::json::object();
  for (size_t i = 0; i < health::kNetCounterCount; ++i) {
    if (s.counters.values[i]) counters[std::string(NetCounterName(static_cast<health::NetCounter>(i)))] = *s.counters.values[i];
  }
  j["counters"] = counters;
  j["fec"] = s.fec_status == health::FecStatus::kUnsupported
                 ? nlohmann::json(nullptr)
                 : nlohmann::json{{"corrected_blocks", OrNull(s.fec.corrected_blocks)},
                                  {"uncorrectable_blocks", OrNull(s.fec.uncorrectable_blocks)},
                                  {"corrected_bits", OrNull(s.fec.corrected_bits)}};
  if (s.rdma_device.empty()) {
    j["rdma"] = nullptr;
  } else {
    nlohmann::json rc = nlohmann::json::object();
    for (size_t i = 0; i < health::kRdmaCounterCount; ++i) {
      if (s.rdma.values[i]) rc[std::string(RdmaCounterName(static_cast<health::RdmaCounter>(i)))] = *s.rdma.values[i];
    }
    j["rdma"] = {{"device", s.rdma_device}, {"port", s.rdma_port}, {"counters", rc}};
  }
  if (!s.has_pcie_link && !s.has_aer) {
    j["pcie"] = nullptr;
  } else {
    const auto& l = s.pcie;
    j["pcie"] = {{"address", s.pci_address},
                 {"current_width", OrNull(l.current_width)},
                 {"max_width", OrNull(l.max_width)},
                 {"capable_width", OrNull(l.capable_width())},
                 {"current_speed_gts", OrNull(l.current_speed_gts)},
                 {"max_speed_gts", OrNull(l.max_speed_gts)},
                 {"capable_speed_gts", OrNull(l.capable_speed_gts())},
                 {"aer_correctable", OrNull(l.aer_correctable)},
                 {"aer_nonfatal", OrNull(l.aer_nonfatal)},
                 {"aer_fatal", OrNull(l.aer_fatal)}};
  }
  nlohmann::json ch = nlohmann::json::array();
  for (const auto& c : changes) {
    if (c.change.ifname != s.ifname) continue;
    ch.push_back({{"sample", c.sample}, {"degraded", c.change.degraded}, {"reason", c.change.reason}});
  }
  j["changes"] = ch;
  return j;
}

void PrintText(const health::NicHealthMonitor& monitor, const std::string& ifname, const std::vector<Change>& changes) {
  std::printf("%s\n", monitor.Describe(ifname).c_str());
  for (const auto& c : changes) {
    if (c.change.ifname != ifname) continue;
    std::printf("  sample %d: %s: %s\n", c.sample, c.change.degraded ? "degraded" : "recovered", c.change.reason.c_str());
  }
}

}  // namespace

int RunHealthCommand(int argc, char** argv) {
  CLI::App app{
      "Sample the soft health signals of local NICs - net error counters, ethtool FEC statistics, RDMA port "
      "error counters, PCIe link width/speed and AER - and print the sources found, their values and the "
      "debounced verdicts (3 detections within 500 ms = degraded)."};
  app.name("flexiforce health");
  std::string root;
  int interval_ms = 100;
  int samples = 5;
  bool json = false;
  std::vector<std::string> ifnames;
  app.add_option("--root", root, "read a fixture tree (DIR/sys/..., DIR/ethtool/<if>/fec) instead of the kernel")
      ->check(CLI::ExistingDirectory);
  app.add_option("--interval-ms", interval_ms, "milliseconds between samples")->check(CLI::Range(1, 60000));
  app.add_option("--samples", samples, "number of samples (the first is the baseline)")->check(CLI::Range(1, 100000));
  app.add_flag("--json", json, "print JSON");
  app.add_option("IFNAME", ifnames, "interfaces to watch (default: every one in /sys/class/net but lo)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (ifnames.empty()) {
    auto found = ListInterfaces(root);
    if (!found) {
      std::fprintf(stderr, "flexiforce health: cannot list %s/sys/class/net\n", root.c_str());
      return 2;
    }
    ifnames = std::move(*found);
  }

  SteadyClock clock;
  health::NicHealthConfig config;
  config.root = root;
  config.interval = std::chrono::milliseconds(interval_ms);
  health::NicHealthMonitor monitor(config, clock);
  for (const auto& n : ifnames) monitor.Watch(n);

  std::vector<Change> changes;
  for (int i = 0; i < samples; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    for (auto& c : monitor.Poll()) changes.push_back({i, std::move(c)});
  }

  if (json) {
    nlohmann::json out = {{"root", root.empty() ? "/" : root},
                          {"interval_ms", interval_ms},
                          {"samples", samples},
                          {"interfaces", nlohmann::json::array()}};
    for (const auto& n : ifnames) {
      if (auto s = monitor.Snapshot(n)) out["interfaces"].push_back(ToJson(*s, changes));
    }
    std::printf("%s\n", out.dump(1).c_str());
  } else {
    if (ifnames.empty()) std::printf("no interfaces to watch\n");
    for (const auto& n : ifnames) PrintText(monitor, n, changes);
  }
  return 0;
}

}  // namespace ff
