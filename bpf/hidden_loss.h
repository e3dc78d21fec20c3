// Hidden loss for `probe report`: what the NICs corrected or lost below TCP, from the device-health
// component's readers (health/nic_counters.h: interface statistics and RDMA hw_counters;
// health/fec_stats.h: ethtool FEC statistics), sampled at the start and the end of the report window.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bpf/probe_snapshot.h"
#include "health/fec_stats.h"

namespace ff::probe {

// Above this FEC error rate (see HiddenLoss) a NIC is flagged: the usual pre-FEC budget of a
// 100G/400G Ethernet link is ~1e-8..1e-7 for a healthy cable/optic.
inline constexpr double kFecErrorRateThreshold = 1e-7;

// One interface at one moment. An absent optional, or an empty map, is a source this host lacks.
struct NicLossSample {
  std::string ifname;
  std::optional<uint64_t> rx_bytes;  // <if>/statistics/rx_bytes
  health::FecStatus fec_status = health::FecStatus::kUnsupported;
  health::FecStats fec;
  std::string fec_error;    // with FecStatus::kError
  std::string rdma_device;  // "" without an RDMA device behind the interface
  uint32_t rdma_port = 0;
  // The RDMA port's error counters (counters/symbol_error, port_rcv_errors, ...) and the loss
  // hw_counters its driver keeps (out_of_sequence, ...), by file name.
  std::map<std::string, uint64_t> rdma_loss;
};

class HiddenLossSampler {
 public:
  // root "" reads the real /sys and asks the kernel's ethtool netlink family; any other root reads
  // fixture trees (sysfs under <root>/sys, FEC under <root>/ethtool/<if>/fec, as health/ tests do).
  explicit HiddenLossSampler(std::string root);
  // Every interface under <root>/sys/class/net, sorted by name.
  std::vector<NicLossSample> Sample();

 private:
  std::string root_;
  health::FecStatsSource fec_;
};

// The interfaces whose addresses the plugin's connecting path sockets used (path_up "local->remote"),
// by `interface_of` (address without port -> interface name, "" when none holds it).
std::set<std::string> PathInterfaces(
    const std::vector<TimelineEvent>& timeline,
    const std::function<std::string(const std::string& address)>& interface_of);
// interface_of for this host: getifaddrs.
std::string InterfaceOfLocalAddress(const std::string& address);

// The "hidden_loss" finding. Per NIC in both samples - those in `path_nics` when that is not empty,
// else every interface but loopback that has statistics - the window's differences:
//   FEC error rate = (corrected blocks + uncorrectable blocks) / (8 x rx_bytes), i.e. FEC codewords
//   that held a bit error per bit received (a lower bound on the pre-FEC bit error rate: each such
//   codeword held at least one);
//   the RDMA port error counters and loss hw_counters that moved.
// A NIC is flagged when its rate exceeds `threshold`, when it saw errored codewords but received no
// bytes, or when an RDMA loss counter moved. A source absent at either end is "not available", not 0.
nlohmann::json HiddenLoss(const std::vector<NicLossSample>& start, const std::vector<NicLossSample>& end,
                          const std::set<std::string>& path_nics, double threshold = kFecErrorRateThreshold);

}  // namespace ff::probe
