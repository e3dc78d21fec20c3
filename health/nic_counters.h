// Error and traffic counters of one net interface (sysfs statistics) and of the RDMA port
// behind it (infiniband port counters and the driver's hw_counters), sampled from kernel files under
// a root prefix.
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
  kTxPackets,
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

// <root>/sys/class/infiniband/<dev>/ports/<port>/hw_counters/<name>: the driver's transport counters
// that tell of packets lost and retransmitted (hidden loss). Names differ by driver: the first seven
// are mlx5's, the last four Soft-RoCE's (rxe); a device has the ones its driver keeps.
enum class RdmaLossCounter : uint8_t {
  kOutOfSequence,       // packets that arrived out of order (something before them was lost)
  kPacketSeqErr,        // NAK-sequence errors received: the peer saw a gap
  kLocalAckTimeoutErr,  // our requests not acknowledged in time (retransmitted)
  kRnrNakRetryErr,      // receiver-not-ready retries exhausted
  kDuplicateRequest,    // requests received twice (the peer retransmitted)
  kImpliedNakSeqErr,    // reads/atomics answered out of sequence (an implied NAK)
  kOutOfBuffer,         // packets dropped for want of a receive buffer
  kRxeOutOfSeqRequest,
  kRxeRcvdSeqErr,
  kRxeRetryExceededErr,
  kRxeCompleterRetryErr,
  kCount,
};
inline constexpr size_t kRdmaLossCounterCount = static_cast<size_t>(RdmaLossCounter::kCount);
std::string_view RdmaLossCounterName(RdmaLossCounter c);  // the file name, e.g. "out_of_sequence"

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
struct RdmaLossCounters {
  std::array<std::optional<uint64_t>, kRdmaLossCounterCount> values;
  std::optional<uint64_t>& operator[](RdmaLossCounter c) { return values[static_cast<size_t>(c)]; }
  const std::optional<uint64_t>& operator[](RdmaLossCounter c) const { return values[static_cast<size_t>(c)]; }
};

// Opens an interface's counter files once; Read* then costs one pread per counter.
class NicCounterReader {
 public:
  // root "" reads the real /sys. The RDMA device is the one listed under
  // <if>/device/infiniband/ (RoCE NICs); its port is <if>/dev_port + 1 when that port exists,
  // else the lowest-numbered port. A software RDMA device on a virtual interface (Soft-RoCE on a
  // veth has no <if>/device) is found by the port whose GID table names the interface
  // (ports/<p>/gid_attrs/ndevs/0).
  NicCounterReader(const std::string& root, const std::string& ifname);

  const std::string& ifname() const { return ifname_; }
  bool interface_exists() const { return exists_; }
  bool has_net_counters() const;
  bool has_rdma() const { return !rdma_device_.empty(); }
  const std::string& rdma_device() const { return rdma_device_; }
  uint32_t rdma_port() const { return rdma_port_; }

  void ReadNet(NetCounters* out, const WarnFn& warn);
  void ReadRdma(RdmaCounters* out, const WarnFn& warn);
  // The hw_counters this port's driver keeps (any of RdmaLossCounter); false when it keeps none.
  bool has_rdma_loss_counters() const;
  void ReadRdmaLoss(RdmaLossCounters* out, const WarnFn& warn);

 private:
  std::string ifname_;
  bool exists_ = false;
  std::array<pcie::SysfsAttribute, kNetCounterCount> net_;
  std::string rdma_device_;
  uint32_t rdma_port_ = 0;
  std::array<pcie::SysfsAttribute, kRdmaCounterCount> rdma_;
  std::array<pcie::SysfsAttribute, kRdmaLossCounterCount> rdma_loss_;
};

}  // namespace ff::health
