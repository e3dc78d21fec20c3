// Error and traffic counters of one net interface (sysfs statistics) and of the RDMA port
// behind it (infiniband port counters), sampled from kernel files under a root prefix.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pcie/sysfs_attribute.h"

namespace ff::health {

using pcie::WarnFn;

// <root>/sys/class/net/<if>/statistics/<name>, except carrier_changes and speed, which sit in
// <if>/ itself (speed in Mb/s; the kernel refuses the read where it is unknown, e.g. lo).
enum class NetCounter : uint8_t {
  kRxPackets,
  kRxBytes,
  kRxCrcErrors,
  kRxFrameErrors,
  kRxErrors,
  kRxDropped,
  kTxErrors,
  kCarrierChanges,
  kSpeedMbps,
  kCount,
};
inline constexpr size_t kNetCounterCount = static_cast<size_t>(NetCounter::kCount);
std::string_view NetCounterName(NetCounter c);  // the file name, e.g. "rx_crc_errors"

// <root>/sys/class/infiniband/<dev>/ports/<port>/counters/<name>
enum class RdmaCounter : uint8_t {
  kSymbolError,
  kLinkErrorRecovery,
  kLinkDowned,
  kPortRcvErrors,
  kLocalLinkIntegrityErrors,
  kExcessiveBufferOverrunErrors,
  kCount,
};
inline constexpr size_t kRdmaCounterCount = static_cast<size_t>(RdmaCounter::kCount);
std::string_view RdmaCounterName(RdmaCounter c);  // the file name, e.g. "symbol_error"

// One sample; an empty slot means the file is absent, unreadable or malformed.
struct NetCounters {
  std::array<std::optional<uint64_t>, kNetCounterCount> values;
  std::optional<uint64_t>& operator[](NetCounter c) { return values[static_cast<size_t>(c)]; }
  const std::optional<uint64_t>& operator[](NetCounter c) const { return values[static_cast<size_t>(c)]; }
};
struct RdmaCounters {
  std::array<std::optional<uint64_t>, kRdmaCounterCount> values;
  std::optional<uint64_t>& operator[](RdmaCounter c) { return values[static_cast<size_t>(c)]; }
  const std::optional<uint64_t>& operator[](RdmaCounter c) const { return values[static_cast<size_t>(c)]; }
};

// Opens an interface's counter files once; Read* then costs one pread per counter.
class NicCounterReader {
 public:
  // root "" reads the real /sys. The RDMA device is the one listed under
  // <if>/device/infiniband/ (RoCE NICs); its port is <if>/dev_port + 1 when that port exists,
  // else the lowest-numbered port.
  NicCounterReader(const std::string& root, const std::string& ifname);

  const std::string& ifname() const { return ifname_; }
  bool interface_exists() const { return exists_; }
  bool has_net_counters() const;
  bool has_rdma() const { return !rdma_device_.empty(); }
  const std::string& rdma_device() const { return rdma_device_; }
  uint32_t rdma_port() const { return rdma_port_; }

  void ReadNet(NetCounters* out, const WarnFn& warn);
  void ReadRdma(RdmaCounters* out, const WarnFn& warn);

 private:
  std::string ifname_;
  bool exists_ = false;
  std::array<pcie::SysfsAttribute, kNetCounterCount> net_;
  std::string rdma_device_;
  uint32_t rdma_port_ = 0;
  std::array<pcie::SysfsAttribute, kRdmaCounterCount> rdma_;
};

}  // namespace ff::health
