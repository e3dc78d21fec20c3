// PCIe link state of one device (current vs. maximum speed and width, AER error totals), read
// from <root>/sys/bus/pci/devices/<bdf>/, and the net-interface -> PCI device resolution.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pcie/sysfs_attribute.h"

namespace ff::pcie {

struct PcieLinkState {
  std::optional<double> current_speed_gts;  // current_link_speed ("16.0 GT/s PCIe")
  std::optional<double> max_speed_gts;      // max_link_speed
  std::optional<uint32_t> current_width;    // current_link_width ("16")
  std::optional<uint32_t> max_width;        // max_link_width
  // Maxima of the port above the device (the other end of the link), when the sysfs path
  // shows one: a Gen5 NIC in a Gen4 slot legitimately trains at Gen4, so that is no fault.
  std::optional<double> upstream_max_speed_gts;
  std::optional<uint32_t> upstream_max_width;
  // TOTAL_ERR_* lines of aer_dev_correctable / aer_dev_nonfatal / aer_dev_fatal.
  std::optional<uint64_t> aer_correctable;
  std::optional<uint64_t> aer_nonfatal;
  std::optional<uint64_t> aer_fatal;

  // What the link can reach: the smaller of the device's and the upstream port's maxima.
  std::optional<double> capable_speed_gts() const;
  std::optional<uint32_t> capable_width() const;
};

// "16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s" -> GT/s; nullopt for anything else ("Unknown").
std::optional<double> ParseLinkSpeedGts(std::string_view text);
// "16" (or "x16") -> 16.
std::optional<uint32_t> ParseLinkWidth(std::string_view text);
// Value of the line "<key> N" (e.g. key "TOTAL_ERR_COR") in an aer_dev_* file's content.
std::optional<uint64_t> ParseAerTotal(std::string_view content, std::string_view key);
// "0000:3b:00.0" (domain:bus:device.function, hex).
bool IsPciAddress(std::string_view name);

// Follows <root>/sys/class/net/<ifname>/device (relative symlinks in fixture trees work too)
// and walks up to the nearest PCI function, since virtio and other bus devices sit below
// one. nullopt when the interface has no device link (veth, lo) or no PCI ancestor.
std::optional<std::string> ResolveNetInterfacePciAddress(const std::string& root, const std::string& ifname);

// Keeps the link-state and AER files of one PCI function open and samples them.
class PcieLinkReader {
 public:
  PcieLinkReader() = default;  // no device: every source absent
  PcieLinkReader(const std::string& root, std::string pci_address);

  const std::string& pci_address() const { return pci_address_; }
  bool has_link() const { return current_speed_.present() || current_width_.present(); }
  bool has_aer() const { return aer_cor_.present() || aer_nonfatal_.present() || aer_fatal_.present(); }
  bool present() const { return has_link() || has_aer(); }

  // Fills every field whose file is present and well-formed; a malformed file warns once
  // (naming the file and the expected form) and leaves its field empty.
  void Read(PcieLinkState* out, const WarnFn& warn);

 private:
  std::string pci_address_;
  SysfsAttribute current_speed_, max_speed_, current_width_, max_width_;
  SysfsAttribute upstream_max_speed_, upstream_max_width_;
  SysfsAttribute aer_cor_, aer_nonfatal_, aer_fatal_;
};

}  // namespace ff::pcie
