// The sysfs device path of a network interface as NCCL's getProperties().pciPath expects it.
#pragma once

#include <string>

namespace ff::pcie {

// realpath of <sysfs_dir>/class/net/<ifname>/device (sysfs_dir is the sysfs mount, "/sys" or
// a fixture's <root>/sys). A virtio NIC's path ends in its virtio node below the PCI function,
// as NCCL reads it. Empty for virtual interfaces (lo, veth, bridges), which have no device.
std::string NetDevicePath(const std::string& sysfs_dir, const std::string& ifname);

// The same for an RDMA device (what the verbs transport reports as pciPath): realpath of
// <sysfs_dir>/class/infiniband/<device>/device. A virtual device (rxe, siw) has none: then the
// device path of `netdev` (the interface it runs over), as NCCL's topology places it there. Empty
// when neither resolves, and for a name that is no single path component ("", ".", "..", "a/b").
std::string RdmaDevicePath(const std::string& sysfs_dir, const std::string& device, const std::string& netdev = "");

}  // namespace ff::pcie
