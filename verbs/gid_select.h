// Which GID a port's connections use: RoCE auto-selection from the sysfs GID table (prefer RoCE v2,
// then IPv4-mapped over IPv6, never link-local or all-zero), NCCL_IB_ADDR_FAMILY and
// NCCL_IB_GID_INDEX honoured; InfiniBand ports use their port GID (index 0).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ff::verbs {

enum class GidType { kUnknown, kIbRoceV1, kRoceV2 };

struct GidEntry {
  int index = -1;
  std::array<uint8_t, 16> raw{};
  GidType type = GidType::kUnknown;
  std::string ndev;  // the netdev the address belongs to (RoCE); empty on InfiniBand
  std::string text;  // as sysfs shows it, for log lines
};

struct GidPolicy {
  int addr_family = 0;  // AF_INET, AF_INET6, or 0 (AF_UNSPEC): either
  int gid_index = -1;   // NCCL_IB_GID_INDEX; -1 selects automatically
};

bool IsZeroGid(const std::array<uint8_t, 16>& g);
bool IsLinkLocalGid(const std::array<uint8_t, 16>& g);   // fe80::/10
bool IsIpv4MappedGid(const std::array<uint8_t, 16>& g);  // ::ffff:a.b.c.d
const char* GidTypeName(GidType t);

// "AF_INET", "AF_INET6" (NCCL_IB_ADDR_FAMILY); blank means either (0).
Status ParseAddrFamily(std::string_view text, int* family);
// A non-negative integer, or -1 for automatic (NCCL_IB_GID_INDEX); blank means -1.
Status ParseGidIndex(std::string_view text, int* index);

// The GID table of <root>/sys/class/infiniband/<device>/ports/<port>, sorted by index. Unpopulated
// entries read as all-zero and stay in the table (so an override can be told why it is unusable);
// a malformed entry is skipped and described in *warnings.
std::vector<GidEntry> ReadGidTable(const std::string& root, const std::string& device, int port,
                                   std::vector<std::string>* warnings);

// Picks from a table. `where` ("mlx5_0 port 1") prefixes error messages. `infiniband`: the port's
// link layer is InfiniBand, whose GID 0 (subnet prefix + port GUID) is the address, link-local or not.
Status SelectGid(const std::vector<GidEntry>& table, bool infiniband, const GidPolicy& policy,
                 const std::string& where, GidEntry* out);

}  // namespace ff::verbs
