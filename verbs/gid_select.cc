// GID table reading and selection (see gid_select.h).
#include "verbs/gid_select.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <tuple>

#include "verbs/rdma_sysfs.h"

namespace ff::verbs {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool FamilyMatches(const GidEntry& e, int family) {
  if (family == AF_INET) return IsIpv4MappedGid(e.raw);
  if (family == AF_INET6) return !IsIpv4MappedGid(e.raw);
  return true;
}

const char* FamilyName(int family) {
  return family == AF_INET ? "AF_INET" : family == AF_INET6 ? "AF_INET6" : "any family";
}

}  // namespace

bool IsZeroGid(const std::array<uint8_t, 16>& g) {
  return std::all_of(g.begin(), g.end(), [](uint8_t b) { return b == 0; });
}

bool IsLinkLocalGid(const std::array<uint8_t, 16>& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

bool IsIpv4MappedGid(const std::array<uint8_t, 16>& g) {
  for (int i = 0; i < 10; ++i) {
    if (g[i] != 0) return false;
  }
  return g[10] == 0xff && g[11] == 0xff;
}

const char* GidTypeName(GidType t) {
  switch (t) {
    case GidType::kIbRoceV1:
      return "IB/RoCE v1";
    case GidType::kRoceV2:
      return "RoCE v2";
    case GidType::kUnknown:
      break;
  }
  return "unknown type";
}

Status ParseAddrFamily(std::string_view text, int* family) {
  const std::string_view t = Trim(text);
  if (t.empty()) {
    *family = 0;
  } else if (t == "AF_INET") {
    *family = AF_INET;
  } else if (t == "AF_INET6") {
    *family = AF_INET6;
  } else {
    return InvalidArgument("NCCL_IB_ADDR_FAMILY='" + std::string(text) +
                           "': accepted values are AF_INET or AF_INET6");
  }
  return Status::Ok();
}

Status ParseGidIndex(std::string_view text, int* index) {
  const std::string_view t = Trim(text);
  if (t.empty()) {
    *index = -1;
    return Status::Ok();
  }
  int v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || v < -1 || v > 65535) {
    return InvalidArgument("NCCL_IB_GID_INDEX='" + std::string(text) +
                           "': accepted values are a GID table index from 0 to 65535, or -1 for automatic");
  }
  *index = v;
  return Status::Ok();
}

std::vector<GidEntry> ReadGidTable(const std::string& root, const std::string& device, int port,
                                   std::vector<std::string>* warnings) {
  const std::string dir = IbPortDir(root, device, port);
  std::vector<GidEntry> table;
  for (int i : NumericEntries(dir + "/gids")) {
    const std::string path = dir + "/gids/" + std::to_string(i);
    auto text = ReadSysfsLine(path);
    if (!text) continue;
    GidEntry e;
    e.index = i;
    e.text = *text;
    if (inet_pton(AF_INET6, text->c_str(), e.raw.data()) != 1) {
      if (warnings) {
        warnings->push_back(path + ": '" + *text +
                            "' is not a GID (expected 8 groups of 4 hex digits, e.g. "
                            "fe80:0000:0000:0000:0202:c9ff:fe00:0001); entry skipped");
      }
      continue;
    }
    if (auto type = ReadSysfsLine(dir + "/gid_attrs/types/" + std::to_string(i))) {
      if (*type == "RoCE v2") {
        e.type = GidType::kRoceV2;
      } else if (*type == "IB/RoCE v1") {
        e.type = GidType::kIbRoceV1;
      }
    }
    e.ndev = ReadSysfsLine(dir + "/gid_attrs/ndevs/" + std::to_string(i)).value_or("");
    table.push_back(std::move(e));
  }
  return table;
}

Status SelectGid(const std::vector<GidEntry>& table, bool infiniband, const GidPolicy& policy,
                 const std::string& where, GidEntry* out) {
  if (policy.gid_index >= 0) {
    auto it = std::find_if(table.begin(), table.end(),
                           [&](const GidEntry& e) { return e.index == policy.gid_index; });
    if (it == table.end()) {
      return InvalidArgument(where + ": NCCL_IB_GID_INDEX=" + std::to_string(policy.gid_index) +
                             " does not exist (the table has " + std::to_string(table.size()) +
                             " entries); accepted: an index whose GID is set, or -1 for automatic");
    }
    if (IsZeroGid(it->raw)) {
      return InvalidArgument(where + ": NCCL_IB_GID_INDEX=" + std::to_string(policy.gid_index) +
                             " is an unpopulated (all-zero) GID; accepted: an index whose GID is set, or -1");
    }
    *out = *it;
    return Status::Ok();
  }
  if (infiniband) {
    // The port GID: subnet prefix (fe80:: by default) and port GUID. Link-local is normal here.
    auto it = std::find_if(table.begin(), table.end(), [](const GidEntry& e) { return e.index == 0; });
    if (it == table.end() || IsZeroGid(it->raw))
      return InvalidArgument(where + ": InfiniBand port has no GID 0");
    *out = *it;
    return Status::Ok();
  }
  // RoCE: routable addresses only; v2 (UDP/IP, routable across the L3 fabric and steerable by the
  // flow label) over v1 (L2 only), then IPv4 over IPv6 as NCCL does, then the lowest index.
  const GidEntry* best = nullptr;
  auto rank = [](const GidEntry& e) {
    return std::make_tuple(e.type == GidType::kRoceV2 ? 0 : 1, IsIpv4MappedGid(e.raw) ? 0 : 1, e.index);
  };
  for (const GidEntry& e : table) {
    if (IsZeroGid(e.raw) || IsLinkLocalGid(e.raw) || e.type == GidType::kUnknown) continue;
    if (!FamilyMatches(e, policy.addr_family)) continue;
    if (best == nullptr || rank(e) < rank(*best)) best = &e;
  }
  if (best == nullptr) {
    return InvalidArgument(where + ": no usable RoCE GID for " + FamilyName(policy.addr_family) + " among " +
                           std::to_string(table.size()) +
                           " entries (all-zero and link-local ones are never used); give the netdev an IP "
                           "address, or set NCCL_IB_GID_INDEX / NCCL_IB_ADDR_FAMILY");
  }
  *out = *best;
  return Status::Ok();
}

}  // namespace ff::verbs
