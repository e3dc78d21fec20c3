// The sysfs device path of a network interface as NCCL's getProperties().pciPath expects it.
#pragma once

#include <string>

namespace ff::pcie {

// realpath of <sysfs_dir>/class/net/<ifname>/device (sysfs_dir is the sysfs mount, "/sys" or
// a fixture's <root>/sys). A virtio NIC's path ends in its virtio node below the PCI function,
// as NCCL reads it. Empty for virtual interfaces (lo, veth, bridges), which have no device.
std::string NetDevicePath(const std::string& sysfs_dir, const std::string& ifname);

}  // namespace ff::pcie
