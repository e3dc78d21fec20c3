// Non-blocking hello reception with a deadline.
#include "plugin/pending_hello.h"

#include <cerrno>

#include "base/logging.h"
#include "base/status.h"

namespace ff {

PendingHello::Progress PendingHello::Read(uint64_t now_ns, std::string* why) {
  for (;;) {
    uint32_t want = sizeof(FrameHeader);
    if (got >= sizeof(FrameHeader)) {
      // The payload is read only behind a header that announces exactly a HelloAuth.
      if (!ValidateHeader(hello.header).empty() || hello.header.type != static_cast<uint8_t>(FrameType::kHello))
        return Progress::kComplete;
      want = sizeof(HelloWire);
    }
    if (got >= want) return Progress::kComplete;
    ssize_t r = tcp::RecvSome(socket.fd(), reinterpret_cast<char*>(&hello) + got, want - got);
    if (r > 0) {
      got += static_cast<uint32_t>(r);
      continue;
    }
    if (r == 0) {
      if (now_ns <= deadline_ns) return Progress::kWaiting;
      *why = "no hello within FLEXIFORCE_PEER_TIMEOUT_MS";
    } else {
      *why = r == -2 ? "closed before its hello" : ErrnoMessage("receive failed", errno);
    }
    return Progress::kFailed;
  }
}

}  // namespace ff

namespace ff {

bool PendingHellos::EvictOldest(uint64_t accepted_by_ns) {
  for (auto& p : items_) {
    if (!p.socket.valid() || p.accepted_ns > accepted_by_ns) continue;
    p.socket.reset();
    ++shed_total_;
    ++shed_since_log_;
    return true;
  }
  return false;
}

void PendingHellos::NoteShed(int err, uint64_t now_ns) {
  if (logged_once_ && now_ns - last_log_ns_ < kLogIntervalNs) return;
  logged_once_ = true;
  last_log_ns_ = now_ns;
  FF_WARN("%s: %s; shedding load (%llu stranger connection(s) closed since the last report, at most %zu are "
          "kept waiting for their hello); the listener keeps serving",
          who_, err != 0 ? ErrnoMessage("accept", err).c_str() : "too many connections without a hello",
          static_cast<unsigned long long>(shed_since_log_), kMaxPending);
  shed_since_log_ = 0;
}

Status PendingHellos::AcceptFrom(int listen_fd, uint64_t now_ns, uint64_t deadline_ns) {
  for (int n = 0; n < kMaxAcceptsPerCall; ++n) {
    PendingHello p;
    int err = 0;
    Status s = tcp::AcceptOne(listen_fd, &p.socket, &p.peer, &err);
    if (!s.ok()) return s;
    if (!p.socket.valid()) {
      if (err == 0) {  // nothing waiting
        starved_since_ns_ = 0;
        break;
      }
      // Out of descriptors: the connection stays queued in the kernel; free one and try again.
      size_t waiting = 0;
      for (const auto& q : items_) waiting += q.socket.valid() ? 1 : 0;
      const uint64_t accepted_by = waiting >= kFloodPending ? UINT64_MAX
                                   : now_ns >= kEvictAfterNs ? now_ns - kEvictAfterNs
                                                             : 0;
      const bool retry = tcp::IsResourceAcceptError(err) && EvictOldest(accepted_by);
      NoteShed(err, now_ns);
      if (retry) {
        Sweep();
        continue;
      }
      if (tcp::IsResourceAcceptError(err)) {  // nothing of ours to free: try on the next call
        if (starved_since_ns_ == 0) starved_since_ns_ = now_ns;
        starved_errno_ = err;
        break;
      }
      continue;                                     // that connection failed; others may wait
    }
    starved_since_ns_ = 0;
    size_t live = 0;
    for (const auto& q : items_) live += q.socket.valid() ? 1 : 0;
    if (live >= kMaxPending) {
      EvictOldest();
      Sweep();
      NoteShed(0, now_ns);
    }
    p.deadline_ns = deadline_ns;
    p.accepted_ns = now_ns;
    items_.push_back(std::move(p));
  }
  return Status::Ok();
}

void PendingHellos::Sweep() {
  std::erase_if(items_, [](const PendingHello& p) { return !p.socket.valid(); });
}

}  // namespace ff
