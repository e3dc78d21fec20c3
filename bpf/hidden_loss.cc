// Hidden loss: FEC and RDMA loss counters per NIC over the report window (see hidden_loss.h).
#include "bpf/hidden_loss.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdio>

#include "health/nic_counters.h"

namespace ff::probe {

namespace {

constexpr const char* kRateFormula =
    "FEC error rate = (corrected blocks + uncorrectable blocks) / (8 x rx_bytes) over the window: "
    "codewords that held a bit error per bit received (a lower bound on the pre-FEC bit error rate)";

std::vector<std::string> NetInterfaceNames(const std::string& root) {
  std::vector<std::string> names;
  DIR* d = ::opendir((root + "/sys/class/net").c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// end - start; nothing when either is missing or the counter went backwards (reset, driver reload).
std::optional<uint64_t> Delta(const std::optional<uint64_t>& start, const std::optional<uint64_t>& end) {
  if (!start || !end || *end < *start) return std::nullopt;
  return *end - *start;
}

nlohmann::json OrNull(const std::optional<uint64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::string FecUnavailable(const NicLossSample& s) {
  if (s.fec_status == health::FecStatus::kError) return "not available: " + s.fec_error;
  return "not available: the interface reports no FEC statistics (no FEC, or a driver without them: veth, "
         "lo)";
}

nlohmann::json FecFinding(const NicLossSample& a, const NicLossSample& b,
                          const std::optional<uint64_t>& rx_bytes, double threshold,
                          nlohmann::json* reasons) {
  nlohmann::json j;
  if (a.fec_status != health::FecStatus::kOk || b.fec_status != health::FecStatus::kOk) {
    j["available"] = false;
    j["why"] = FecUnavailable(a.fec_status != health::FecStatus::kOk ? a : b);
    return j;
  }
  const auto corrected = Delta(a.fec.corrected_blocks, b.fec.corrected_blocks);
  const auto uncorrectable = Delta(a.fec.uncorrectable_blocks, b.fec.uncorrectable_blocks);
  j["available"] = true;
  j["corrected_blocks"] = OrNull(corrected);
  j["uncorrectable_blocks"] = OrNull(uncorrectable);
  j["corrected_bits"] = OrNull(Delta(a.fec.corrected_bits, b.fec.corrected_bits));
  j["threshold"] = threshold;
  j["error_rate"] = nullptr;
  if (!corrected && !uncorrectable) {
    j["why_no_rate"] = "the driver reports no block counters";
    return j;
  }
  const uint64_t errored = corrected.value_or(0) + uncorrectable.value_or(0);
  j["errored_blocks"] = errored;
  if (!rx_bytes) {
    j["why_no_rate"] = "rx_bytes not available";
  } else if (*rx_bytes == 0) {
    j["why_no_rate"] = "no bytes received in the window";
    if (errored > 0)
      reasons->push_back(std::to_string(errored) + " errored FEC block(s) with no bytes received");
  } else {
    const double rate = static_cast<double>(errored) / (8.0 * static_cast<double>(*rx_bytes));
    j["error_rate"] = rate;
    if (rate > threshold) {
      char text[96];
      std::snprintf(text, sizeof text, "FEC error rate %.3g > %.3g", rate, threshold);
      reasons->push_back(text);
    }
  }
  if (uncorrectable.value_or(0) > 0)
    j["note"] = std::to_string(*uncorrectable) + " uncorrectable block(s): frames dropped below TCP";
  return j;
}

nlohmann::json RdmaFinding(const NicLossSample& a, const NicLossSample& b, nlohmann::json* reasons) {
  nlohmann::json j;
  if (b.rdma_device.empty() || a.rdma_device != b.rdma_device) {
    j["available"] = false;
    j["why"] = "not available: no RDMA device behind this interface";
    return j;
  }
  j["device"] = b.rdma_device;
  j["port"] = b.rdma_port;
  nlohmann::json counters = nlohmann::json::object();
  nlohmann::json moved = nlohmann::json::array();
  for (const auto& [name, end] : b.rdma_loss) {
    auto it = a.rdma_loss.find(name);
    const auto d = Delta(it == a.rdma_loss.end() ? std::nullopt : std::optional<uint64_t>(it->second), end);
    counters[name] = OrNull(d);
    if (d.value_or(0) > 0) {
      moved.push_back(name);
      reasons->push_back("RDMA " + name + " +" + std::to_string(*d));
    }
  }
  if (counters.empty()) {
    j["available"] = false;
    j["why"] = "not available: the driver of " + b.rdma_device +
               " has none of the port error counters or loss hw_counters";
    return j;
  }
  j["available"] = true;
  j["counters"] = std::move(counters);
  j["moved"] = std::move(moved);
  return j;
}

}  // namespace

HiddenLossSampler::HiddenLossSampler(std::string root) : root_(std::move(root)), fec_(root_) {}

std::vector<NicLossSample> HiddenLossSampler::Sample() {
  std::vector<NicLossSample> out;
  for (const auto& name : NetInterfaceNames(root_)) {
    health::NicCounterReader r(root_, name);
    if (!r.interface_exists()) continue;
    NicLossSample s;
    s.ifname = name;
    health::NetCounters net;
    r.ReadNet(&net, nullptr);
    s.rx_bytes = net[health::NetCounter::kRxBytes];
    s.fec_status = fec_.Read(name, &s.fec, &s.fec_error);
    if (r.has_rdma()) {
      s.rdma_device = r.rdma_device();
      s.rdma_port = r.rdma_port();
      // The port's error counters (what the NIC health monitor judges) and the driver's loss hw_counters.
      health::RdmaCounters port;
      r.ReadRdma(&port, nullptr);
      for (size_t i = 0; i < health::kRdmaCounterCount; ++i)
        if (port.values[i])
          s.rdma_loss[std::string(health::RdmaCounterName(static_cast<health::RdmaCounter>(i)))] =
              *port.values[i];
      health::RdmaLossCounters loss;
      r.ReadRdmaLoss(&loss, nullptr);
      for (size_t i = 0; i < health::kRdmaLossCounterCount; ++i)
        if (loss.values[i])
          s.rdma_loss[std::string(health::RdmaLossCounterName(static_cast<health::RdmaLossCounter>(i)))] =
              *loss.values[i];
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::set<std::string> PathInterfaces(
    const std::vector<TimelineEvent>& timeline,
    const std::function<std::string(const std::string& address)>& interface_of) {
  std::set<std::string> out;
  std::set<std::string> seen;
  for (const auto& e : timeline) {
    if (e.event != "path_up") continue;
    const std::string ends = e.details.value("ends", std::string());
    const size_t arrow = ends.find("->");
    if (arrow == std::string::npos) continue;  // the accepting side names only the remote end
    std::string local = ends.substr(0, arrow);
    const size_t colon = local.rfind(':');
    if (colon == std::string::npos) continue;
    local.resize(colon);
    if (local.size() >= 2 && local.front() == '[' && local.back() == ']')
      local = local.substr(1, local.size() - 2);
    if (!seen.insert(local).second) continue;
    if (std::string name = interface_of(local); !name.empty()) out.insert(name);
  }
  return out;
}

std::string InterfaceOfLocalAddress(const std::string& address) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET)
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    else if (i->ifa_addr->sa_family == AF_INET6)
      ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, text,
                  sizeof text);
    else
      continue;
    if (address == text) found = i->ifa_name;
  }
  ::freeifaddrs(list);
  // 127.0.0.2 and the rest of 127/8 answer on lo without being listed.
  if (found.empty() && address.rfind("127.", 0) == 0) found = "lo";
  return found;
}

nlohmann::json HiddenLoss(const std::vector<NicLossSample>& start, const std::vector<NicLossSample>& end,
                          const std::set<std::string>& path_nics, double threshold) {
  nlohmann::json out;
  out["formula"] = kRateFormula;
  out["threshold"] = threshold;
  out["nics_from"] = path_nics.empty() ? "every interface but loopback (no path_up named a local address)"
                                       : "the interfaces of the plugin's path sockets";
  out["nics"] = nlohmann::json::array();
  for (const auto& b : end) {
    if (path_nics.empty() ? (b.ifname == "lo" || !b.rx_bytes) : path_nics.count(b.ifname) == 0) continue;
    auto it = std::find_if(start.begin(), start.end(),
                           [&](const NicLossSample& s) { return s.ifname == b.ifname; });
    if (it == start.end()) continue;  // appeared during the window: no baseline
    const NicLossSample& a = *it;
    nlohmann::json reasons = nlohmann::json::array();
    const auto rx = Delta(a.rx_bytes, b.rx_bytes);
    nlohmann::json nic = {{"nic", b.ifname}, {"rx_bytes", OrNull(rx)}};
    nic["fec"] = FecFinding(a, b, rx, threshold, &reasons);
    nic["rdma"] = RdmaFinding(a, b, &reasons);
    nic["flagged"] = !reasons.empty();
    nic["reasons"] = std::move(reasons);
    out["nics"].push_back(std::move(nic));
  }
  return out;
}

}  // namespace ff::probe
