// NCCL_IB_HCA parsing and matching (see hca_filter.h).
#include "verbs/hca_filter.h"

#include <cctype>
#include <charconv>

namespace ff::verbs {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Kernel RDMA device names: letters, digits, '_', '-', '.'.
bool ValidDeviceName(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  }
  return true;
}

Status Bad(std::string_view spec, const std::string& problem) {
  return InvalidArgument("NCCL_IB_HCA='" + std::string(spec) + "': " + problem +
                         "; accepted form: " + HcaFilter::kAcceptedForm);
}

}  // namespace

Status HcaFilter::Parse(std::string_view spec, HcaFilter* out) {
  HcaFilter f;
  std::string_view rest = Trim(spec);
  if (!rest.empty() && rest.front() == '^') {
    f.exclude_ = true;
    rest = Trim(rest.substr(1));
  }
  if (!rest.empty() && rest.front() == '=') {
    f.exact_ = true;
    rest = Trim(rest.substr(1));
  }
  if ((f.exclude_ || f.exact_) && rest.empty()) return Bad(spec, "no device after the leading '^' or '='");
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = Trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;  // "a,,b" and a trailing comma are harmless, as in NCCL
    if (item.front() == '^' || item.front() == '=') {
      return Bad(spec,
                 "'" + std::string(item) + "': '^' and '=' apply to the whole list and go once at its start");
    }
    Entry e;
    const size_t colon = item.find(':');
    const std::string_view name = Trim(item.substr(0, colon));
    if (!ValidDeviceName(name)) {
      return Bad(spec, "'" + std::string(item) + "': device name must be letters, digits, '_', '-' or '.'");
    }
    e.device = std::string(name);
    if (colon != std::string_view::npos) {
      const std::string_view port = Trim(item.substr(colon + 1));
      int p = 0;
      const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
      if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 255) {
        return Bad(spec, "'" + std::string(item) + "': port must be a number from 1 to 255");
      }
      e.port = p;
    }
    f.entries_.push_back(std::move(e));
  }
  if ((f.exclude_ || f.exact_) && f.entries_.empty())
    return Bad(spec, "no device after the leading '^' or '='");
  *out = std::move(f);
  return Status::Ok();
}

bool HcaFilter::NameMatches(const Entry& e, std::string_view device) const {
  return exact_ ? device == e.device : device.substr(0, e.device.size()) == e.device;
}

bool HcaFilter::Matches(std::string_view device, int port) const {
  if (entries_.empty()) return true;
  bool listed = false;
  for (const Entry& e : entries_) {
    if (NameMatches(e, device) && (e.port == -1 || e.port == port)) {
      listed = true;
      break;
    }
  }
  return exclude_ ? !listed : listed;
}

bool HcaFilter::MayMatchDevice(std::string_view device) const {
  if (entries_.empty()) return true;
  for (const Entry& e : entries_) {
    if (!NameMatches(e, device)) continue;
    if (!exclude_) return true;
    // Excluding one port leaves the device's other ports; only a port-less exclusion removes it.
    if (e.port == -1) return false;
  }
  return exclude_;
}

}  // namespace ff::verbs
