// Process-wide NIC soft-health watch: samples the local devices' error counters from progress calls, no thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "health/nic_health_monitor.h"

namespace ff {

// Wraps health::NicHealthMonitor for the communicators: one sampler per process, verdict changes
// logged once, and a generation that tells a communicator when to look at its paths again.
class NicWatch {
 public:
  NicWatch(const std::string& sysfs_root, const std::vector<std::string>& ifnames);

  // Samples when the monitor's interval has passed (a relaxed atomic check otherwise); returns a
  // generation that changes whenever some interface's verdict changes.
  uint64_t Poll(uint64_t now_ns);
  bool Degraded(const std::string& ifname) const { return monitor_->IsDegraded(ifname); }
  std::string Describe(const std::string& ifname) const { return monitor_->Describe(ifname); }
  // The reason of the last verdict change of `ifname` (empty if none).
  std::string Reason(const std::string& ifname) const;

 private:
  SteadyClock clock_;
  std::unique_ptr<health::NicHealthMonitor> monitor_;
  std::atomic<uint64_t> next_poll_ns_{0};
  std::atomic<uint64_t> generation_{0};
  uint64_t interval_ns_;
};

}  // namespace ff
