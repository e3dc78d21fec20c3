// The GPUs (PCI class 0x03: display/3D controllers, any vendor, NVIDIA listed first) and NICs
// (net and InfiniBand class devices, grouped by the device they belong to) found in sysfs
// under a root prefix, with where each sits: PCI chain, NUMA node, local CPUs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pcie/topo_distance.h"

namespace ff::pcie {

constexpr uint32_t kVendorNvidia = 0x10de;

struct GpuDevice {
  std::string address;     // "0000:18:00.0"
  std::string sysfs_path;  // resolved <root>/sys/devices/pci.../0000:18:00.0
  uint32_t vendor = 0;
  uint32_t device_id = 0;
  uint32_t class_code = 0;  // 0x030200 (3D controller), 0x030000 (VGA) ...
  PciPlacement placement;
  std::string cpulist;  // local_cpulist, empty when the kernel does not say
};

struct NicDevice {
  std::string address;                    // the PCI function ("0000:19:00.0"); empty for a device off PCI
  std::string sysfs_path;                 // resolved device link, e.g. .../0000:00:03.0/virtio2
  std::vector<std::string> netdevs;       // sorted, e.g. {"ens1f0np0"}
  std::vector<std::string> rdma_devices;  // sorted, e.g. {"mlx5_0"}
  PciPlacement placement;
  std::string cpulist;

  // The RDMA name when there is one (what NCCL_IB_HCA selects), else the netdev.
  const std::string& name() const { return rdma_devices.empty() ? netdevs.front() : rdma_devices.front(); }
};

struct Inventory {
  std::vector<GpuDevice> gpus;  // NVIDIA first, then other vendors; each by PCI address
  std::vector<NicDevice> nics;  // by PCI address, devices off PCI last (by name)
};

// Scans <root>/sys. Interfaces without a `device` link (lo, veth, bridges) are not NICs. A
// root without sysfs yields an empty inventory; the caller decides whether that is an error.
Inventory ScanInventory(const std::string& root);

// Where the device behind a resolved sysfs device path sits (NetDevicePath's form, a virtio NIC's
// path included): PCI chain and NUMA node. No chain for a virtual or platform device.
PciPlacement PlaceDevicePath(const std::string& resolved_path);

}  // namespace ff::pcie
