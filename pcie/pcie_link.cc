// PCIe link state reader (see pcie_link.h).
#include "pcie/pcie_link.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <memory>

namespace ff::pcie {

namespace {

struct FreeDeleter {
  void operator()(char* p) const { ::free(p); }
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<std::string> RealPath(const std::string& path) {
  std::unique_ptr<char, FreeDeleter> resolved(::realpath(path.c_str(), nullptr));
  if (!resolved) return std::nullopt;
  return std::string(resolved.get());
}

std::string_view BaseName(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string_view DirName(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

constexpr std::string_view kSpeedForm = "a link speed such as '16.0 GT/s PCIe' or 'Unknown'";
constexpr std::string_view kWidthForm = "a lane count such as '16'";

std::optional<double> ReadSpeed(SysfsAttribute& a, const WarnFn& warn) {
  char buf[64];
  auto text = a.ReadText(buf, sizeof buf);
  if (!text) return std::nullopt;
  if (auto v = ParseLinkSpeedGts(*text)) return v;
  // The kernel prints "Unknown" (link down or a speed it has no name for): not malformed.
  if (text->starts_with("Unknown")) return std::nullopt;
  a.ReportMalformed(warn, *text, kSpeedForm);
  return std::nullopt;
}

std::optional<uint32_t> ReadWidth(SysfsAttribute& a, const WarnFn& warn) {
  char buf[32];
  auto text = a.ReadText(buf, sizeof buf);
  if (!text) return std::nullopt;
  if (auto v = ParseLinkWidth(*text)) return v;
  a.ReportMalformed(warn, *text, kWidthForm);
  return std::nullopt;
}

std::optional<uint64_t> ReadAer(SysfsAttribute& a, std::string_view key, const WarnFn& warn) {
  char buf[1024];  // a dozen "Name N" lines
  auto text = a.ReadText(buf, sizeof buf);
  if (!text) return std::nullopt;
  if (auto v = ParseAerTotal(*text, key)) return v;
  std::string form = "lines 'NAME COUNT' including '";
  form.append(key);
  form += " N'";
  a.ReportMalformed(warn, *text, form);
  return std::nullopt;
}

}  // namespace

std::optional<double> PcieLinkState::capable_speed_gts() const {
  if (!max_speed_gts) return upstream_max_speed_gts;
  if (!upstream_max_speed_gts) return max_speed_gts;
  return std::min(*max_speed_gts, *upstream_max_speed_gts);
}

std::optional<uint32_t> PcieLinkState::capable_width() const {
  if (!max_width) return upstream_max_width;
  if (!upstream_max_width) return max_width;
  return std::min(*max_width, *upstream_max_width);
}

std::optional<double> ParseLinkSpeedGts(std::string_view text) {
  text = Trim(text);
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || v <= 0) return std::nullopt;
  std::string_view rest = Trim(std::string_view(p, static_cast<size_t>(text.data() + text.size() - p)));
  if (!rest.starts_with("GT/s")) return std::nullopt;
  rest = Trim(rest.substr(4));
  if (!rest.empty() && rest != "PCIe") return std::nullopt;
  return v;
}

std::optional<uint32_t> ParseLinkWidth(std::string_view text) {
  text = Trim(text);
  if (!text.empty() && (text.front() == 'x' || text.front() == 'X')) text.remove_prefix(1);
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v > 64) return std::nullopt;
  return v;
}

std::optional<uint64_t> ParseAerTotal(std::string_view content, std::string_view key) {
  while (!content.empty()) {
    auto nl = content.find('\n');
    std::string_view line = Trim(content.substr(0, nl));
    content = nl == std::string_view::npos ? std::string_view() : content.substr(nl + 1);
    if (!line.starts_with(key)) continue;
    std::string_view rest = line.substr(key.size());
    if (rest.empty() || !std::isspace(static_cast<unsigned char>(rest.front()))) continue;
    return ParseU64(rest);
  }
  return std::nullopt;
}

bool IsPciAddress(std::string_view name) {
  // dddd:bb:dd.f
  if (name.size() != 12) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (i == 4 || i == 7) {
      if (c != ':') return false;
    } else if (i == 10) {
      if (c != '.') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

std::optional<std::string> ResolveNetInterfacePciAddress(const std::string& root, const std::string& ifname) {
  auto dev = RealPath(root + "/sys/class/net/" + ifname + "/device");
  if (!dev) return std::nullopt;
  for (std::string_view p = *dev; !p.empty() && p != "/"; p = DirName(p)) {
    std::string_view base = BaseName(p);
    if (IsPciAddress(base)) return std::string(base);
  }
  return std::nullopt;
}

PcieLinkReader::PcieLinkReader(const std::string& root, std::string pci_address)
    : pci_address_(std::move(pci_address)) {
  const std::string dir = root + "/sys/bus/pci/devices/" + pci_address_ + "/";
  current_speed_ = SysfsAttribute(dir + "current_link_speed");
  max_speed_ = SysfsAttribute(dir + "max_link_speed");
  current_width_ = SysfsAttribute(dir + "current_link_width");
  max_width_ = SysfsAttribute(dir + "max_link_width");
  aer_cor_ = SysfsAttribute(dir + "aer_dev_correctable");
  aer_nonfatal_ = SysfsAttribute(dir + "aer_dev_nonfatal");
  aer_fatal_ = SysfsAttribute(dir + "aer_dev_fatal");
  // The upstream port is the device's parent in the real /sys/devices hierarchy.
  if (auto real = RealPath(dir)) {
    std::string_view parent = DirName(*real);
    if (IsPciAddress(BaseName(parent))) {
      std::string up(parent);
      upstream_max_speed_ = SysfsAttribute(up + "/max_link_speed");
      upstream_max_width_ = SysfsAttribute(up + "/max_link_width");
    }
  }
}

void PcieLinkReader::Read(PcieLinkState* out, const WarnFn& warn) {
  out->current_speed_gts = ReadSpeed(current_speed_, warn);
  out->max_speed_gts = ReadSpeed(max_speed_, warn);
  out->current_width = ReadWidth(current_width_, warn);
  out->max_width = ReadWidth(max_width_, warn);
  out->upstream_max_speed_gts = ReadSpeed(upstream_max_speed_, warn);
  out->upstream_max_width = ReadWidth(upstream_max_width_, warn);
  out->aer_correctable = ReadAer(aer_cor_, "TOTAL_ERR_COR", warn);
  out->aer_nonfatal = ReadAer(aer_nonfatal_, "TOTAL_ERR_NONFATAL", warn);
  out->aer_fatal = ReadAer(aer_fatal_, "TOTAL_ERR_FATAL", warn);
}

}  // namespace ff::pcie
