// Assembles the topology view (see topo_report.h).
#include "pcie/topo_report.h"

namespace ff::pcie {

LinkHealth JudgeLink(bool present, const PcieLinkState& link, LinkSpeedPolicy policy) {
  LinkHealth h;
  h.present = present;
  h.link = link;
  auto width = link.capable_width();
  auto speed = link.capable_speed_gts();
  // A width of 0 is a link that is down, which is the worst kind of narrow.
  if (link.current_width && width && *link.current_width < *width) h.degraded = true;
  if (link.current_speed_gts && speed && *link.current_speed_gts + 1e-6 < *speed) {
    (policy == LinkSpeedPolicy::kFixed ? h.degraded : h.slow_at_idle) = true;
  }
  h.aer_errors =
      link.aer_correctable.value_or(0) + link.aer_nonfatal.value_or(0) + link.aer_fatal.value_or(0) > 0;
  return h;
}

namespace {

LinkHealth ReadHealth(const std::string& root, const std::string& address, LinkSpeedPolicy policy,
                      std::vector<std::string>* warnings) {
  if (address.empty()) return {};
  PcieLinkReader reader(root, address);
  PcieLinkState state;
  reader.Read(&state, [warnings](const std::string& m) { warnings->push_back(m); });
  return JudgeLink(reader.present(), state, policy);
}

}  // namespace

TopoReport BuildTopoReport(const std::string& root_in) {
  // "/" and "" both mean the live /sys; avoid "//sys" in messages.
  const std::string root = root_in == "/" ? std::string() : root_in;
  TopoReport r;
  r.inventory = ScanInventory(root);
  std::vector<PciPlacement> nic_places;
  for (const auto& n : r.inventory.nics) {
    nic_places.push_back(n.placement);
    r.nic_health.push_back(ReadHealth(root, n.address, LinkSpeedPolicy::kFixed, &r.warnings));
  }
  for (const auto& g : r.inventory.gpus) {
    r.gpu_health.push_back(ReadHealth(root, g.address, LinkSpeedPolicy::kIdleScaled, &r.warnings));
    std::vector<PciDistance> row;
    for (const auto& n : nic_places) row.push_back(ClassifyDistance(g.placement, n));
    r.matrix.push_back(std::move(row));
    r.nics_by_distance.push_back(OrderByDistance(g.placement, nic_places));
  }
  return r;
}

}  // namespace ff::pcie
