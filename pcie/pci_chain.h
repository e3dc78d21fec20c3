// Where a device sits in the PCI hierarchy: its host bridge and the chain of PCI functions from
// the root port down to it, parsed from the resolved /sys/devices/pciDDDD:BB/... path.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ff::pcie {

struct PciChain {
  // "pci0000:17": the root complex (host bridge) the device hangs from.
  std::string host_bridge;
  // PCI functions from the root port (or a root-complex integrated endpoint) down to the
  // device itself, which is the last element. Below the root port a PCIe switch shows as an
  // (upstream port, downstream port) pair, the kernel's directory nesting of the topology.
  std::vector<std::string> functions;

  bool empty() const { return functions.empty(); }
  const std::string& device() const { return functions.back(); }
};

// "0000:3b:00.0", also VMD's wider domains ("10000:e0:1d.0").
bool IsPciFunctionName(std::string_view name);

// Parses a resolved sysfs device path. Components below the PCI function that is the device
// (virtio2, net/eth0, infiniband/mlx5_0) are ignored, so a virtio device yields the chain of
// its PCI function. nullopt when the path has no host bridge or no PCI function (virtual and
// platform devices).
std::optional<PciChain> ParsePciChain(std::string_view resolved_path);

// realpath(3); nullopt when a component is missing or the link dangles.
std::optional<std::string> ResolvePath(const std::string& path);

}  // namespace ff::pcie
