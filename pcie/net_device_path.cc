// Net interface device path (see net_device_path.h).
#include "pcie/net_device_path.h"

#include "pcie/pci_chain.h"

namespace ff::pcie {

namespace {

// A kernel device name is one path component: nothing that could climb out of the class directory.
bool IsDeviceName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

}  // namespace

std::string NetDevicePath(const std::string& sysfs_dir, const std::string& ifname) {
  if (!IsDeviceName(ifname)) return {};
  return ResolvePath(sysfs_dir + "/class/net/" + ifname + "/device").value_or("");
}

std::string RdmaDevicePath(const std::string& sysfs_dir, const std::string& device, const std::string& netdev) {
  if (IsDeviceName(device)) {
    if (auto p = ResolvePath(sysfs_dir + "/class/infiniband/" + device + "/device")) return *p;
  }
  return netdev.empty() ? std::string() : NetDevicePath(sysfs_dir, netdev);
}

}  // namespace ff::pcie
