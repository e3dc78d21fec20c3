// NIC soft-health sampling for the plugin: verdict changes go to NCCL's logger.
#include "health/nic_watch.h"

#include "base/logging.h"

namespace ff {

NicWatch::NicWatch(const std::string& sysfs_root, const std::vector<std::string>& ifnames) {
  health::NicHealthConfig cfg;
  cfg.root = sysfs_root;
  cfg.warn = [](const std::string& m) { FF_WARN("NIC health: %s", m.c_str()); };
  interval_ns_ = static_cast<uint64_t>(cfg.interval.count());
  monitor_ = std::make_unique<health::NicHealthMonitor>(cfg, clock_);
  for (const auto& n : ifnames) {
    monitor_->Watch(n);
    FF_INFO(NCCL_INIT | NCCL_NET, "NIC health: %s", monitor_->Describe(n).c_str());
  }
}

uint64_t NicWatch::Poll(uint64_t now_ns) {
  if (now_ns < next_poll_ns_.load(std::memory_order_relaxed)) return generation_.load(std::memory_order_relaxed);
  next_poll_ns_.store(now_ns + interval_ns_, std::memory_order_relaxed);
  const std::vector<health::NicVerdictChange> changes = monitor_->Poll();
  for (const auto& c : changes) {
    FF_WARN("NIC %s %s: %s", c.ifname.c_str(), c.degraded ? "degraded" : "recovered", c.reason.c_str());
  }
  if (!changes.empty()) generation_.fetch_add(1, std::memory_order_relaxed);
  return generation_.load(std::memory_order_relaxed);
}

std::string NicWatch::Reason(const std::string& ifname) const {
  auto snap = monitor_->Snapshot(ifname);
  return snap ? snap->reason : std::string();
}

}  // namespace ff
