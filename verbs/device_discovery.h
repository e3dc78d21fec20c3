// Which RDMA ports the verbs backend can use: devices and ACTIVE ports, link layer, speed, the netdev
// behind a RoCE port, NCCL's pciPath, GUID and the selected GID, after NCCL_IB_HCA.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "verbs/gid_select.h"
#include "verbs/hca_filter.h"
#include "verbs/ibverbs_loader.h"

namespace ff::verbs {

struct VerbsPort {
  std::string device;  // "mlx5_0"
  int port = 0;
  bool infiniband = false;  // link layer InfiniBand; false: Ethernet (RoCE)
  int speed_mbps = 0;       // from sysfs `rate`; 0 when unknown
  std::string netdev;       // RoCE: the interface the selected GID belongs to
  std::string pci_path;     // NCCL's pciPath: realpath of the device node (or, for a virtual device
                            // such as rxe, of its netdev's device); empty when neither resolves
  uint64_t guid = 0;        // node GUID, host byte order
  GidEntry gid;             // the address connections on this port use
  // Known only from ibv_query_port (0 in sysfs-only discovery).
  int active_mtu = 0;  // enum ibv_mtu
  uint16_t lid = 0;
};

struct DiscoveryOptions {
  std::string root = "/";  // prefix for /sys (fixture trees in tests)
  HcaFilter filter;        // NCCL_IB_HCA
  GidPolicy gid;           // NCCL_IB_ADDR_FAMILY, NCCL_IB_GID_INDEX
};

struct Discovery {
  std::vector<VerbsPort> ports;       // usable ports, by device name then port
  std::vector<std::string> warnings;  // ports left out for a reason worth a WARN line
};

// Devices and port state from sysfs alone: fixture tests, and hosts where libibverbs is absent but
// one wants to see what would be used.
Discovery DiscoverFromSysfs(const DiscoveryOptions& options);

// Devices from libibverbs, port state, link layer, MTU and LID from ibv_query_port, the rest (rate,
// GID table, netdev, pciPath) from sysfs under options.root. Unavailable library: no ports, no
// warnings (the loader logged its INFO line).
Discovery DiscoverWithVerbs(const IbverbsLoader& ib, const DiscoveryOptions& options);

// "100 Gb/sec (4X EDR)" -> 100000, "2.5 Gb/sec (1X SDR)" -> 2500; -1 when malformed.
int ParseRateMbps(std::string_view rate);
// "b83f:d203:006a:e616" (sysfs node_guid) -> 0xb83fd203006ae616; false when malformed.
bool ParseNodeGuid(std::string_view text, uint64_t* guid);

}  // namespace ff::verbs
