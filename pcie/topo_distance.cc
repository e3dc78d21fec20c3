// Distance classification (see topo_distance.h).
#include "pcie/topo_distance.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string>

namespace ff::pcie {

std::string_view DistanceName(PciDistance d) {
  switch (d) {
    case PciDistance::kPix:
      return "PIX";
    case PciDistance::kPxb:
      return "PXB";
    case PciDistance::kPhb:
      return "PHB";
    case PciDistance::kNode:
      return "NODE";
    case PciDistance::kSys:
      return "SYS";
  }
  return "?";
}

std::string_view DistanceMeaning(PciDistance d) {
  switch (d) {
    case PciDistance::kPix:
      return "the path crosses at most one PCIe switch";
    case PciDistance::kPxb:
      return "the path crosses several PCIe switches but no host bridge";
    case PciDistance::kPhb:
      return "the path crosses the PCIe host bridge (root complex, the CPU)";
    case PciDistance::kNode:
      return "the path crosses host bridges within one NUMA node";
    case PciDistance::kSys:
      return "the path crosses the interconnect between NUMA nodes (UPI, xGMI), or placement is unknown";
  }
  return "";
}

int SwitchesBetween(const PciChain& a, const PciChain& b) {
  size_t common = 0;
  while (common < a.functions.size() && common < b.functions.size() &&
         a.functions[common] == b.functions[common])
    ++common;
  if (common == 0) return 0;  // they meet only at the host bridge
  // Below the root port (index 0) a switch is an (upstream, downstream) pair at indices
  // (2k+1, 2k+2); the upstream port names it. The path climbs from each device to the last
  // common function and descends again, so it crosses the switches of every bridge from that
  // function down to (not including) each device.
  std::set<std::string> switches;
  for (const PciChain* c : {&a, &b}) {
    for (size_t i = std::max<size_t>(common - 1, 1); i + 1 < c->functions.size(); ++i) {
      switches.insert(c->functions[2 * ((i - 1) / 2) + 1]);
    }
  }
  return static_cast<int>(switches.size());
}

PciDistance ClassifyDistance(const PciPlacement& a, const PciPlacement& b) {
  if (!a.chain || !b.chain) return PciDistance::kSys;  // nothing proves locality
  if (a.chain->host_bridge == b.chain->host_bridge) {
    if (a.chain->functions.front() != b.chain->functions.front()) return PciDistance::kPhb;
    return SwitchesBetween(*a.chain, *b.chain) <= 1 ? PciDistance::kPix : PciDistance::kPxb;
  }
  // A firmware that hides NUMA (-1) cannot show a socket crossing; do not invent one.
  if (a.numa_node >= 0 && b.numa_node >= 0 && a.numa_node != b.numa_node) return PciDistance::kSys;
  return PciDistance::kNode;
}

std::optional<PciDistance> KnownDistance(const PciPlacement& a, const PciPlacement& b) {
  if (!a.chain && !b.chain) return std::nullopt;
  return ClassifyDistance(a, b);
}

std::vector<size_t> OrderByDistance(const PciPlacement& gpu, const std::vector<PciPlacement>& nics) {
  std::vector<PciDistance> d;
  d.reserve(nics.size());
  for (const auto& n : nics) d.push_back(ClassifyDistance(gpu, n));
  std::vector<size_t> order(nics.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return d[x] < d[y]; });
  return order;
}

}  // namespace ff::pcie
