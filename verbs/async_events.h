// A verbs device's asynchronous events (ibv_get_async_event): the device telling us a port went down
// or came back, a QP or CQ broke, or the whole device died. Read from the progress path, not a thread.
//
// The context's async fd is made non-blocking, and it is read at most once per kPollIntervalNs per
// device (one read(2) that returns EAGAIN when nothing happened), whichever path's Poll comes first.
// Every event is acknowledged at once, so destroying a QP or CQ never waits for us. What an event
// means for a path:
//   IBV_EVENT_PORT_ERR                         every path on that port fails (ENETDOWN) until
//   IBV_EVENT_PORT_ACTIVE                      makes the port eligible again (new QPs only: a failed QP
//                                              stays failed; failback replaces it with a new one,
//                                              plugin/verbs_reconnect.h);
//   IBV_EVENT_QP_FATAL / QP_REQ_ERR / QP_ACCESS_ERR   that QP's path fails (EIO / EPROTO / EACCES);
//   IBV_EVENT_CQ_ERR / IBV_EVENT_DEVICE_FATAL  every path on the device fails (EIO / ENODEV);
//   IBV_EVENT_GID_CHANGE, the rest             logged only.
#pragma once

#include <infiniband/verbs.h>  // types only

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "base/status.h"
#include "verbs/ibverbs_loader.h"

namespace ff::verbs {

// "IBV_EVENT_PORT_ERR"; "IBV_EVENT_<n>" for a type this build does not know.
std::string AsyncEventName(int type);

class AsyncEvents {
 public:
  static constexpr uint64_t kPollIntervalNs = 1'000'000;

  // `context` must outlive this object; `device` names it in log lines.
  AsyncEvents(const IbverbsLoader& ib, ibv_context* context, std::string device);
  AsyncEvents(const AsyncEvents&) = delete;
  AsyncEvents& operator=(const AsyncEvents&) = delete;

  // Sets the async fd O_NONBLOCK; an error names the fd and the call (the device then has no events).
  Status Init();

  // Reads and acknowledges every pending event when kPollIntervalNs passed since the last read
  // (thread-safe; a caller that finds another one reading returns at once). Returns generation().
  uint64_t PollIfDue(uint64_t now_ns);
  // Reads now, whatever the interval.
  uint64_t PollNow();

  // Changes whenever an event changed what ForPath answers; a path asks again only then.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  struct Verdict {
    int err = 0;      // 0: the path may carry on
    std::string why;  // the event that failed it, for the path's error
  };
  Verdict ForPath(uint8_t port, uint32_t qpn) const;
  bool PortDown(uint8_t port) const;
  // A destroyed QP's number may come back for a new QP: forget what an event said about it.
  void ForgetQp(uint32_t qpn);

  uint64_t events_read() const { return events_read_.load(std::memory_order_relaxed); }

 private:
  void ReadLocked();
  void Handle(const ibv_async_event& e);

  const IbvApi& api_;
  ibv_context* context_;
  std::string device_;
  bool enabled_ = false;
  bool read_error_logged_ = false;
  std::atomic<uint64_t> last_poll_ns_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> events_read_{0};

  mutable std::mutex mu_;  // the state below, and reading the fd
  std::map<uint8_t, std::string> ports_down_;                // port -> the event that took it
  std::map<uint32_t, std::pair<int, std::string>> qps_failed_;  // qpn -> errno, why
  int device_err_ = 0;
  std::string device_why_;
};

}  // namespace ff::verbs
