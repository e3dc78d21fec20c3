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

namespace ff::verbs {
struct RdmaDevice;
}

namespace ff {

// One plugin device when the transport is verbs: an ACTIVE RDMA port, opened at init.
struct VerbsDevice {
  std::string name;      // "mlx5_0" (NCCL shows it; the port is a property)
  int port = 1;
  std::string pci_path;
  uint64_t guid = 0;
  int speed_mbps = 0;
  std::string netdev;    // RoCE: the interface behind the port
  int bootstrap = 0;     // index into devices(): the TCP interface that carries this port's handshakes
  int gid_index = 0;
  // NCCL_PTR_HOST, plus NCCL_PTR_CUDA where nvidia-peermem is loaded and NCCL_PTR_DMABUF where the
  // device registers DMA-BUFs (verbs/gpu_memory.h); decided at init.
  int ptr_support = 1;
  verbs::RdmaDevice* rdma = nullptr;  // opened at init, never closed (NCCL's threads may still poll)
};

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
  // The TCP interfaces (the devices NCCL sees over TCP; with verbs, the bootstrap interfaces).
  const std::vector<tcp::NetInterface>& devices() const { return devices_; }
  // FLEXIFORCE_TRANSPORT's outcome: the devices NCCL sees are verbs_devices() instead of devices().
  bool verbs() const { return !verbs_devices_.empty(); }
  const std::vector<VerbsDevice>& verbs_devices() const { return verbs_devices_; }
  // What NCCL's devices() reports under the chosen transport.
  int device_count() const {
    return static_cast<int>(verbs() ? verbs_devices_.size() : devices_.size());
  }
  const Config& config() const { return *config_; }
  NetContext& default_context() { return default_context_; }
  TaskProfile& task() { return *task_; }
  // NIC soft-health sampler over the selected devices; nullptr when FLEXIFORCE_NIC_HEALTH=0.
  NicWatch* nic_watch() { return nic_watch_.get(); }

  // Verbs contexts, PDs and registrations belong to the process that opened them: a child forked
  // after init cannot use them (its registrations fail, and releasing them would release the
  // parent's). In such a child the devices are opened again, once, on its first listen/connect; the
  // inherited ones are left alone. Ok over TCP; an error when a device cannot be reopened.
  Status PrepareVerbsForThisProcess();

  // Verbs: the ports a connection of `npaths` QPs from `dev` uses, in key-slot order: NCCL's port,
  // then the next ones by index, cyclically (FLEXIFORCE_SPREAD_NICS=1; else only `dev`), at most 4
  // (the descriptor's key slots). Path i sits on slot i % size. Both ends compute it alike.
  std::vector<int> VerbsSlots(int dev, int npaths) const;

  // Local interfaces a connection from `dev` uses, the device's own first.
  std::vector<int> PathOrder(int dev) const;
  // The oracle's topo_distance of local interface `other` for a connection NCCL opened on `dev`.
  // NCCL does not tell a net plugin its GPU; it picks `dev` as the NIC nearest that GPU (from the
  // pciPath we report), so `dev` itself is PIX and another NIC is as far as it is from `dev`.
  // nullopt when neither is on PCI (virtual interfaces).
  std::optional<pcie::PciDistance> TopoDistance(int dev, int other) const;

 private:
  // FLEXIFORCE_TRANSPORT: fills verbs_devices_ when verbs is chosen; an error only for =verbs.
  Status ChooseTransport();

  std::atomic<bool> initialized_{false};  // read without the lock by every entry point
  const Config* config_ = nullptr;
  std::vector<tcp::NetInterface> devices_;
  std::vector<VerbsDevice> verbs_devices_;
  std::atomic<int> init_pid_{0};
  std::vector<pcie::PciPlacement> placements_;  // of devices_, read once at init (PathOrder)
  NetContext default_context_;
  std::unique_ptr<TaskProfile> task_;
  std::unique_ptr<NicWatch> nic_watch_;
};

}  // namespace ff
