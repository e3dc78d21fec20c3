// FEC counters (corrected / uncorrectable blocks, corrected bits) of a net interface, from the
// kernel's ethtool generic-netlink family (ETHTOOL_MSG_FEC_GET with ETHTOOL_FLAG_STATS).
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ff::health {

// Totals over all lanes (element 0 of the kernel's per-lane arrays).
struct FecStats {
  std::optional<uint64_t> corrected_blocks;
  std::optional<uint64_t> uncorrectable_blocks;
  std::optional<uint64_t> corrected_bits;
};

enum class FecStatus : uint8_t {
  kOk,           // at least one counter read
  kUnsupported,  // no FEC statistics here (EOPNOTSUPP on veth/lo, no ethtool family, ...): absent
  kError,        // a real failure; *error says what
};
std::string_view FecStatusName(FecStatus s);  // "ok", "unsupported", "error"

// TEST STAND-IN ONLY: the text form that replaces the netlink reply when a root prefix is set.
// File <root>/ethtool/<ifname>/fec, one "key value" per line, keys corrected_blocks,
// uncorrectable_blocks, corrected_bits (each optional). The kernel has no such file.
bool ParseFecFixture(std::string_view content, FecStats* out, std::string* error);

// Not thread-safe: one owner (NicHealthMonitor serialises its calls).
class FecStatsSource {
 public:
  // root "" queries the kernel over netlink; any other root reads the fixture files above.
  explicit FecStatsSource(std::string root);
  ~FecStatsSource();
  FecStatsSource(const FecStatsSource&) = delete;
  FecStatsSource& operator=(const FecStatsSource&) = delete;

  // Fills *out (fields the driver does not report stay empty). *error is set only on kError.
  FecStatus Read(const std::string& ifname, FecStats* out, std::string* error);

 private:
  FecStatus ReadFixture(const std::string& ifname, FecStats* out, std::string* error);
  FecStatus ReadNetlink(const std::string& ifname, FecStats* out, std::string* error);
  // Resolves the "ethtool" family id once; false with *unsupported when the kernel lacks it.
  bool EnsureFamily(bool* unsupported, std::string* error);
  // Sends the request in req_ and waits for the reply with its sequence number.
  // Returns the kernel's errno for an error reply (0 on success), or -1 with *error set.
  int Transact(size_t len, const struct nlmsghdr** reply, std::string* error);

  std::string root_;
  int sock_ = -1;
  uint16_t family_ = 0;
  bool family_missing_ = false;
  uint32_t seq_ = 0;
  alignas(NLMSG_ALIGNTO) unsigned char req_[256];
  alignas(NLMSG_ALIGNTO) unsigned char resp_[8192];
};

}  // namespace ff::health
