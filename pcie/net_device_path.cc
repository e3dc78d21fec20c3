// Net interface device path (see net_device_path.h).
#include "pcie/net_device_path.h"

#include "pcie/pci_chain.h"

namespace ff::pcie {

std::string NetDevicePath(const std::string& sysfs_dir, const std::string& ifname) {
  return ResolvePath(sysfs_dir + "/class/net/" + ifname + "/device").value_or("");
}

}  // namespace ff::pcie
