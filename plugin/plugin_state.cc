// Device discovery at init, logged one line per device as NCCL's own transports do.
#include "plugin/plugin_state.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/logging.h"
#include "pcie/device_inventory.h"

namespace ff {

PluginState& PluginState::Get() {
  // Never destroyed: NCCL's proxy thread may still poll communicators (which point into the task
  // profile and statistics) while main returns and static destructors run.
  static PluginState* state = new PluginState();
  return *state;
}

namespace {

// At exit the statistics file's name goes (unless FLEXIFORCE_STATS_KEEP=1), as it did when the
// state was destroyed; the mapping stays, so a thread still recording writes to valid memory.
void RemoveStatsFileAtExit() {
  TaskProfile& task = PluginState::Get().task();
  if (task.stats) task.stats->RemoveFile();
}

}  // namespace

Status PluginState::Init(ncclDebugLogger_t logger) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (logger != nullptr) SetNcclLogger(logger);
  if (initialized_) return Status::Ok();
  config_ = &ConfigRegistry::Get();
  if (!config_->socket_family.empty() && config_->socket_family != "AF_INET" &&
      config_->socket_family != "AF_INET6") {
    FF_WARN("NCCL_SOCKET_FAMILY='%s' is not valid; accepted: AF_INET or AF_INET6; using any family",
            config_->socket_family.c_str());
  }
  std::string fam = config_->socket_family == "AF_INET" || config_->socket_family == "AF_INET6"
                        ? config_->socket_family
                        : std::string();
  devices_ = tcp::SelectInterfaces(tcp::ListInterfaces(fam), config_->socket_ifname);
  if (devices_.empty()) {
    return SystemError("no usable network interface" +
                       (config_->socket_ifname.empty() ? std::string()
                                                       : " matches NCCL_SOCKET_IFNAME='" + config_->socket_ifname +
                                                             "' (syntax: prefixes, ^ to exclude, = for exact names)"));
  }
  for (const auto& d : devices_) placements_.push_back(pcie::PlaceDevicePath(d.pci_path));
  std::string list;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const auto& d = devices_[i];
    FF_INFO(NCCL_INIT | NCCL_NET, "dev %zu: %s %s speed %d Mbps%s", i, d.name.c_str(),
            tcp::AddressToString(d.addr).c_str(), d.speed_mbps, d.pci_path.empty() ? " (virtual)" : "");
    list += (i ? " " : "") + std::to_string(i) + ":" + d.name;
  }
  FF_INFO(NCCL_INIT | NCCL_NET, "Using [%s], %d path(s) per connection, chunk %lld bytes", list.c_str(),
          config_->paths_per_connection, static_cast<long long>(config_->chunk_bytes));
  if (config_->nic_health) {
    std::vector<std::string> names;
    for (const auto& d : devices_) names.push_back(d.name);
    nic_watch_ = std::make_unique<NicWatch>(config_->sysfs_root, names);
  }
  task_ = TaskProfile::Load(config_->stats_enabled, config_->stats_keep, config_->stats_dir);
  if (task_->stats) std::atexit(RemoveStatsFileAtExit);  // registered by this library: runs at its unload too
  std::memset(&default_context_.attr, 0xff, sizeof(default_context_.attr));
  initialized_.store(true, std::memory_order_release);
  return Status::Ok();
}

std::vector<int> PluginState::PathOrder(int dev) const {
  std::vector<int> order{dev};
  if (!config_->spread_nics) return order;
  // NCCL picked `dev` as the NIC nearest its GPU (from the pciPath we report); a connection's further
  // paths take the other NICs nearest that one first (PIX..SYS), so they stay off the socket
  // interconnect while a closer NIC exists. Virtual interfaces have no placement and keep their order.
  for (size_t i : pcie::OrderByDistance(placements_[static_cast<size_t>(dev)], placements_))
    if (static_cast<int>(i) != dev) order.push_back(static_cast<int>(i));
  return order;
}

std::optional<pcie::PciDistance> PluginState::TopoDistance(int dev, int other) const {
  const size_t n = placements_.size();
  if (dev < 0 || other < 0 || static_cast<size_t>(dev) >= n || static_cast<size_t>(other) >= n) return std::nullopt;
  if (dev == other) return pcie::PciDistance::kPix;
  return pcie::KnownDistance(placements_[static_cast<size_t>(dev)], placements_[static_cast<size_t>(other)]);
}

}  // namespace ff
