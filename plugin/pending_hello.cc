// Non-blocking hello reception with a deadline.
#include "plugin/pending_hello.h"

#include <cerrno>

#include "base/status.h"

namespace ff {

PendingHello::Progress PendingHello::Read(uint64_t now_ns, std::string* why) {
  while (got < sizeof(FrameHeader)) {
    ssize_t r = tcp::RecvSome(socket.fd(), reinterpret_cast<char*>(&hello) + got, sizeof(FrameHeader) - got);
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
  return Progress::kComplete;
}

}  // namespace ff
