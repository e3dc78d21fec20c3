// RDMA devices as sysfs shows them, and the GID a RoCEv2/IPv4 connection would use on each port.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ff::probe {

struct RdmaGid {
  int index = -1;
  std::string gid;   // "0000:0000:0000:0000:0000:ffff:0a00:0001"
  std::string type;  // "RoCE v2", "IB/RoCE v1"
  std::string ndev;  // the netdev the GID belongs to (RoCE), may be empty
};

struct RdmaPort {
  int port = 0;
  std::string state;       // "ACTIVE", "DOWN" (the text after "N: ")
  std::string link_layer;  // "Ethernet" or "InfiniBand"
  std::optional<RdmaGid> selected;  // what a RoCEv2/IPv4 (or IB) selection would pick
};

struct RdmaDevice {
  std::string name;
  std::vector<RdmaPort> ports;
};

// Devices under <sysfs_root>/class/infiniband, sorted by name; empty when there are none.
// `gid_index` >= 0 (NCCL_IB_GID_INDEX) forces that index, as NCCL does.
std::vector<RdmaDevice> ListRdmaDevices(const std::string& sysfs_root, int gid_index = -1);

// True for an IPv4-mapped GID (::ffff:a.b.c.d), the form RoCEv2 over IPv4 uses.
bool IsIpv4MappedGid(const std::string& gid);

// NCCL_IB_HCA's syntax: "mlx5_0:1,mlx5_1" prefixes (with optional port), "^" excludes, "=" exact.
bool HcaFilterMatches(const std::string& spec, const std::string& device, int port);

}  // namespace ff::probe
