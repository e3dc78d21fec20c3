// Process-wide plugin state: the selected devices, the config, and per-communicator contexts (net v11+).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plugin/config_registry.h"
#include "nccl/net_abi.h"
#include "health/nic_watch.h"
#include "base/status.h"
#include "core/task_profile.h"
#include "pcie/topo_distance.h"
#include "tcp/interfaces.h"

namespace ff {

// Per-NCCL-communicator settings from init (v11+) or the defaults (older tables).
struct NetContext {
  static constexpr uint32_t kMagic = 0x46464354;
  uint32_t magic = kMagic;
  uint64_t comm_id = 0;
  int traffic_class = FF_NCCL_NET_TRAFFIC_CLASS_UNDEF;
  ncclNetAttr_t attr{};  // last setNetAttr
};

class PluginState {
 public:
  static PluginState& Get();

  // Discovers devices once; later calls only refresh the logger.
  Status Init(ncclDebugLogger_t logger);
  bool initialized() const { return initialized_.load(std::memory_order_acquire); }
  const std::vector<tcp::NetInterface>& devices() const { return devices_; }
  const Config& config() const { return *config_; }
  NetContext& default_context() { return default_context_; }
  TaskProfile& task() { return *task_; }
  // NIC soft-health sampler over the selected devices; nullptr when FLEXIFORCE_NIC_HEALTH=0.
  NicWatch* nic_watch() { return nic_watch_.get(); }

  // Local interfaces a connection from `dev` uses, the device's own first.
  std::vector<int> PathOrder(int dev) const;
  // The oracle's topo_distance of local interface `other` for a connection NCCL opened on `dev`.
  // NCCL does not tell a net plugin its GPU; it picks `dev` as the NIC nearest that GPU (from the
  // pciPath we report), so `dev` itself is PIX and another NIC is as far as it is from `dev`.
  // nullopt when neither is on PCI (virtual interfaces).
  std::optional<pcie::PciDistance> TopoDistance(int dev, int other) const;

 private:
  std::atomic<bool> initialized_{false};  // read without the lock by every entry point
  const Config* config_ = nullptr;
  std::vector<tcp::NetInterface> devices_;
  std::vector<pcie::PciPlacement> placements_;  // of devices_, read once at init (PathOrder)
  NetContext default_context_;
  std::unique_ptr<TaskProfile> task_;
  std::unique_ptr<NicWatch> nic_watch_;
};

}  // namespace ff
