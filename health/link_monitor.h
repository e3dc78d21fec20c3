// Process-wide carrier watcher: a non-blocking rtnetlink socket read from progress calls, no thread.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace ff {

// Learns of carrier loss the moment the kernel does, instead of waiting for TCP to give up.
class LinkMonitor {
 public:
  static LinkMonitor& Get();
  LinkMonitor(const LinkMonitor&) = delete;
  LinkMonitor& operator=(const LinkMonitor&) = delete;

  // Drains pending link events (reading the socket at most once per `min_interval_ns`) and returns
  // a generation that changes whenever an interface loses or regains its carrier.
  uint64_t Poll(uint64_t now_ns, uint64_t min_interval_ns = 1'000'000);
  // Whether the last event seen for `ifindex` said the carrier is down.
  bool IsDown(int ifindex);
  // Whether `ifindex` has carrier and has not changed state for `stable_ns` (failback waits for this).
  // Interfaces never seen changing count as stable.
  bool StableUp(int ifindex, uint64_t now_ns, uint64_t stable_ns);
  // Whether the rtnetlink socket could be opened (it cannot in some sandboxes).
  bool available() const { return fd_ >= 0; }
  // Also reads <sysfs>/class/net/<if>/carrier on every poll. The kernel rate-limits carrier
  // notifications that are not urgent (a physical NIC losing carrier is not) to one batch per
  // second, so rtnetlink alone can report a dead link up to 1 s late; the sysfs file is current.
  void WatchCarrier(int ifindex);

 private:
  LinkMonitor();
  ~LinkMonitor();
  void Drain(uint64_t now_ns);
  void ReadCarriers(uint64_t now_ns);
  void SetDown(int ifindex, bool down, uint64_t now_ns);

  std::mutex mu_;
  int fd_ = -1;
  uint64_t last_poll_ns_ = 0;
  std::atomic<uint64_t> generation_{0};  // read without the lock by Poll's losers
  std::vector<int> down_;  // interfaces whose carrier is down; few, so a vector
  std::vector<std::pair<int, uint64_t>> changed_ns_;  // last carrier transition per interface
  struct CarrierFile {
    int ifindex;
    int fd;
  };
  std::vector<CarrierFile> carrier_files_;
};

}  // namespace ff
