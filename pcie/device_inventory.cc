// sysfs scan for GPUs and NICs (see device_inventory.h).
#include "pcie/device_inventory.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>

#include "pcie/sysfs_attribute.h"

namespace ff::pcie {

namespace {

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::string> ReadLine(const std::string& path) {
  SysfsAttribute file(path);
  char buf[4096];  // local_cpulist of a large machine is still a few ranges
  auto text = file.ReadText(buf, sizeof buf);
  if (!text) return std::nullopt;
  return std::string(*text);
}

std::optional<uint32_t> ReadHex(const std::string& path) {
  auto text = ReadLine(path);
  if (!text) return std::nullopt;
  try {
    size_t used = 0;
    unsigned long v = std::stoul(*text, &used, 16);
    if (used != text->size() || v > 0xffffffffUL) return std::nullopt;
    return static_cast<uint32_t>(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

int ReadNumaNode(const std::string& function_dir) {
  auto text = ReadLine(function_dir + "/numa_node");
  if (!text) return -1;
  try {
    return std::stoi(*text);
  } catch (const std::exception&) {
    return -1;
  }
}

// The directory of the chain's last PCI function inside a resolved device path, since a
// virtio NIC's device link ends below it and numa_node/local_cpulist live on the function.
std::string FunctionDir(const std::string& resolved, const PciChain& chain) {
  const std::string needle = "/" + chain.device();
  auto at = resolved.rfind(needle + "/");
  if (at == std::string::npos) at = resolved.rfind(needle);
  return at == std::string::npos ? resolved : resolved.substr(0, at + needle.size());
}

void Place(const std::string& resolved, PciPlacement* placement, std::string* cpulist, std::string* address) {
  placement->chain = ParsePciChain(resolved);
  if (!placement->chain) return;
  const std::string dir = FunctionDir(resolved, *placement->chain);
  placement->numa_node = ReadNumaNode(dir);
  *cpulist = ReadLine(dir + "/local_cpulist").value_or("");
  *address = placement->chain->device();
}

}  // namespace

PciPlacement PlaceDevicePath(const std::string& resolved_path) {
  PciPlacement p;
  std::string cpulist, address;
  if (!resolved_path.empty()) Place(resolved_path, &p, &cpulist, &address);
  return p;
}

Inventory ScanInventory(const std::string& root) {
  Inventory inv;
  const std::string sys = root + "/sys";

  const std::string pci_dir = sys + "/bus/pci/devices/";
  for (const auto& bdf : ListDir(pci_dir)) {
    auto cls = ReadHex(pci_dir + bdf + "/class");
    if (!cls || (*cls >> 16) != 0x03) continue;
    GpuDevice g;
    auto resolved = ResolvePath(pci_dir + bdf);
    if (!resolved) continue;
    g.sysfs_path = *resolved;
    g.class_code = *cls;
    g.vendor = ReadHex(pci_dir + bdf + "/vendor").value_or(0);
    g.device_id = ReadHex(pci_dir + bdf + "/device").value_or(0);
    Place(g.sysfs_path, &g.placement, &g.cpulist, &g.address);
    if (g.address.empty()) g.address = bdf;
    inv.gpus.push_back(std::move(g));
  }
  std::stable_sort(inv.gpus.begin(), inv.gpus.end(), [](const GpuDevice& a, const GpuDevice& b) {
    return std::make_tuple(a.vendor != kVendorNvidia, a.address) <
           std::make_tuple(b.vendor != kVendorNvidia, b.address);
  });

  // One NIC per device: a ConnectX function carries both its netdev and its RDMA device.
  std::map<std::string, NicDevice> by_device;
  for (const char* cls : {"net", "infiniband"}) {
    const std::string class_dir = sys + "/class/" + cls + "/";
    const bool is_net = cls[0] == 'n';
    for (const auto& name : ListDir(class_dir)) {
      auto device = ResolvePath(class_dir + name + "/device");
      if (!device) continue;  // virtual: lo, veth, bridges, ifb
      NicDevice& nic = by_device[*device];
      if (nic.sysfs_path.empty()) {
        nic.sysfs_path = *device;
        Place(*device, &nic.placement, &nic.cpulist, &nic.address);
      }
      (is_net ? nic.netdevs : nic.rdma_devices).push_back(name);
    }
  }
  for (auto& [path, nic] : by_device) inv.nics.push_back(std::move(nic));
  std::sort(inv.nics.begin(), inv.nics.end(), [](const NicDevice& a, const NicDevice& b) {
    return std::make_tuple(a.address.empty(), a.address, a.name()) <
           std::make_tuple(b.address.empty(), b.address, b.name());
  });
  return inv;
}

}  // namespace ff::pcie
