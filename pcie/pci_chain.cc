// PCI chain parsing (see pci_chain.h).
#include "pcie/pci_chain.h"

#include <limits.h>
#include <stdlib.h>

#include <cctype>
#include <memory>

namespace ff::pcie {

namespace {

struct FreeDeleter {
  void operator()(char* p) const { ::free(p); }
};

bool AllHex(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// "pci0000:00" or "pci10000:e0" (a VMD domain nested below a real root port).
bool IsHostBridgeName(std::string_view name) {
  if (!name.starts_with("pci")) return false;
  name.remove_prefix(3);
  auto colon = name.find(':');
  if (colon == std::string_view::npos) return false;
  return colon >= 4 && AllHex(name.substr(0, colon)) && name.size() - colon - 1 == 2 &&
         AllHex(name.substr(colon + 1));
}

}  // namespace

bool IsPciFunctionName(std::string_view name) {
  // domain (>= 4 hex) ':' bus (2) ':' device (2) '.' function (1)
  if (name.size() < 12) return false;
  const size_t d = name.size() - 8;  // index of the first ':'
  return AllHex(name.substr(0, d)) && d >= 4 && name[d] == ':' && AllHex(name.substr(d + 1, 2)) &&
         name[d + 3] == ':' && AllHex(name.substr(d + 4, 2)) && name[d + 6] == '.' &&
         std::isxdigit(static_cast<unsigned char>(name[d + 7]));
}

std::optional<PciChain> ParsePciChain(std::string_view path) {
  PciChain chain;
  bool below_device = false;  // past the last PCI function: virtio2/net/eth0 and the like
  while (!path.empty()) {
    auto slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if (part.empty()) continue;
    if (chain.host_bridge.empty()) {
      // The first host bridge names the root complex; a VMD domain further down does not,
      // since its traffic still leaves through the outer root port.
      if (IsHostBridgeName(part)) chain.host_bridge = part;
      continue;
    }
    if (below_device) continue;
    if (IsPciFunctionName(part)) {
      chain.functions.emplace_back(part);
    } else if (!IsHostBridgeName(part) && !chain.functions.empty()) {
      below_device = true;
    }
  }
  if (chain.host_bridge.empty() || chain.functions.empty()) return std::nullopt;
  return chain;
}

std::optional<std::string> ResolvePath(const std::string& path) {
  std::unique_ptr<char, FreeDeleter> resolved(::realpath(path.c_str(), nullptr));
  if (!resolved) return std::nullopt;
  return std::string(resolved.get());
}

}  // namespace ff::pcie
