// The `flexiforce topo` view as data: GPUs and NICs, the GPU x NIC distance matrix, and each
// device's PCIe link health (trained vs. capable speed and width, AER totals).
#pragma once

#include <string>
#include <vector>

#include "pcie/device_inventory.h"
#include "pcie/pcie_link.h"
#include "pcie/topo_distance.h"

namespace ff::pcie {

struct LinkHealth {
  bool present = false;  // the device has link or AER files (virtio functions have none)
  PcieLinkState link;
  bool degraded = false;      // trained below what both link ends can do (see JudgeLink)
  bool slow_at_idle = false;  // a GPU link below its capable speed: normal power saving
  bool aer_errors = false;    // any AER total above zero
};

// Which devices retrain their link speed on their own.
enum class LinkSpeedPolicy {
  kFixed,       // NICs: a speed below capable is a fault
  kIdleScaled,  // GPUs drop to a lower generation when idle (NVIDIA to Gen1), so only width counts
};

// Judges a sample: a link trained narrower (or, for a fixed-speed device, slower) than the
// smaller of the two ends' maxima is degraded; a Gen5 card in a Gen4 slot is not.
LinkHealth JudgeLink(bool present, const PcieLinkState& link, LinkSpeedPolicy policy);

struct TopoReport {
  Inventory inventory;
  std::vector<LinkHealth> gpu_health;                 // parallel to inventory.gpus
  std::vector<LinkHealth> nic_health;                 // parallel to inventory.nics
  std::vector<std::vector<PciDistance>> matrix;       // [gpu][nic]
  std::vector<std::vector<size_t>> nics_by_distance;  // [gpu]: NIC indices, nearest first
  std::vector<std::string> warnings;                  // malformed sysfs files, once each
};

// Reads everything under <root>/sys (root "" or "/" is the running kernel).
TopoReport BuildTopoReport(const std::string& root);

}  // namespace ff::pcie
