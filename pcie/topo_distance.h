// GPU-NIC distance classes as NCCL and `nvidia-smi topo -m` name them (PIX, PXB, PHB, NODE,
// SYS), derived from two devices' PCI chains and NUMA nodes, and NIC ordering by distance.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "pcie/pci_chain.h"

namespace ff::pcie {

// Ordered nearest first, so a smaller value is a better pairing.
enum class PciDistance {
  kPix,   // at most one PCIe switch between the two
  kPxb,   // several PCIe switches, no host bridge
  kPhb,   // through the host bridge (root complex) both hang from
  kNode,  // different host bridges on the same NUMA node
  kSys,   // across NUMA nodes (the socket interconnect), or placement unknown
};

std::string_view DistanceName(PciDistance d);
// One-line meaning for the legend.
std::string_view DistanceMeaning(PciDistance d);
constexpr PciDistance kAllDistances[] = {PciDistance::kPix, PciDistance::kPxb, PciDistance::kPhb,
                                         PciDistance::kNode, PciDistance::kSys};

// Where a device is: its PCI chain (absent for a device off PCI) and numa_node (-1 unknown).
struct PciPlacement {
  std::optional<PciChain> chain;
  int numa_node = -1;
};

// Number of PCIe switches on the path between two devices below the same host bridge.
int SwitchesBetween(const PciChain& a, const PciChain& b);

PciDistance ClassifyDistance(const PciPlacement& a, const PciPlacement& b);

// ClassifyDistance when at least one of the two devices is on PCI; nullopt when neither is (two
// virtual interfaces: PCIe says nothing about them, so nothing should be ranked by it).
std::optional<PciDistance> KnownDistance(const PciPlacement& a, const PciPlacement& b);

// Indices of `nics` ordered nearest to `gpu` first; equal distances keep the given order, so
// callers that list NICs by PCI address get a stable, reproducible choice.
std::vector<size_t> OrderByDistance(const PciPlacement& gpu, const std::vector<PciPlacement>& nics);

}  // namespace ff::pcie
