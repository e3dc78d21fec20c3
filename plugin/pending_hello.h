// A just-accepted path socket whose hello (64-byte header + HelloAuth) is still arriving: shared by the listeners of new and rejoining paths.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "plugin/hello_auth.h"
#include "tcp/socket.h"

namespace ff {

struct PendingHello {
  tcp::Socket socket;
  sockaddr_storage peer{};
  HelloWire hello{};
  uint32_t got = 0;
  uint64_t deadline_ns = 0;
  uint64_t accepted_ns = 0;

  enum class Progress { kWaiting, kComplete, kFailed };
  // Reads exactly what is missing of the hello (what follows belongs to the communicator that takes
  // the socket). A header that is not a well-formed hello is kComplete at 64 bytes, so the caller
  // refuses it at once instead of waiting for a payload that will not come. kFailed sets *why: the
  // peer closed, an error, or no hello by the deadline.
  Progress Read(uint64_t now_ns, std::string* why);
};

}  // namespace ff

namespace ff {

// The strangers of one listener: connections accepted whose valid hello has not arrived. Bounded:
// when full, the oldest is evicted to make room. Refusing new ones instead would let anyone who
// opens kMaxPending silent connections lock the real peer out for a whole hello deadline, again and
// again; evicting the oldest costs a real peer its place only if kMaxPending connections arrive
// between its connect and its hello, which follows at once. When accept runs out of descriptors or
// buffers, the oldest stranger is closed and accept tried again; other transient accept errors
// skip the connection. Either way the listener keeps working, and it logs once per interval.
class PendingHellos {
 public:
  static constexpr size_t kMaxPending = 64;
  static constexpr int kMaxAcceptsPerCall = 256;  // a connect flood cannot pin one progress call
  static constexpr uint64_t kLogIntervalNs = 10'000'000'000;
  // Out of descriptors with fewer than kFloodPending connections waiting for their hello, only one
  // silent this long after its accept is closed to make room: a peer sends its hello right after
  // connecting, so the one just accepted is likely the peer's own (closing it lost the connection:
  // its other path, accepted in its place, waited for a path that would never come, and accept
  // never finished). With kFloodPending or more waiting (a flood of strangers), the oldest goes at
  // once, so a real peer behind them is reached quickly.
  static constexpr uint64_t kEvictAfterNs = 200'000'000;
  static constexpr size_t kFloodPending = 8;

  // `who` names the listener in log lines ("listener", "rejoin listener").
  explicit PendingHellos(const char* who) : who_(who) {}

  // Accepts what waits on `listen_fd`; each new stranger gets until deadline_ns for its hello.
  // An error is returned only when the listening socket itself is unusable.
  Status AcceptFrom(int listen_fd, uint64_t now_ns, uint64_t deadline_ns);
  std::vector<PendingHello>& items() { return items_; }
  // Drops the entries whose socket was taken or closed.
  void Sweep();
  uint64_t shed() const { return shed_total_; }
  // How long every accept has failed for want of a resource (descriptors, buffers) while a
  // connection waited and no stranger was left to close; 0 when not starved. `err` gets the errno.
  uint64_t starved_for_ns(uint64_t now_ns, int* err) const {
    *err = starved_errno_;
    return starved_since_ns_ == 0 ? 0 : now_ns - starved_since_ns_;
  }

 private:
  // Closes the oldest connection still waiting for its hello that was accepted at or before
  // `accepted_by_ns` (all of them: UINT64_MAX); false when there is none.
  bool EvictOldest(uint64_t accepted_by_ns = UINT64_MAX);
  void NoteShed(int err, uint64_t now_ns);

  const char* who_;
  std::vector<PendingHello> items_;  // in arrival order: front is the oldest
  uint64_t shed_total_ = 0;
  uint64_t shed_since_log_ = 0;
  uint64_t last_log_ns_ = 0;
  bool logged_once_ = false;
  uint64_t starved_since_ns_ = 0;
  int starved_errno_ = 0;
};

}  // namespace ff
