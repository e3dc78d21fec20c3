// A just-accepted path socket whose 64-byte hello is still arriving: shared by the listeners of new and rejoining paths.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "core/wire_format.h"
#include "tcp/socket.h"

namespace ff {

struct PendingHello {
  tcp::Socket socket;
  sockaddr_storage peer{};
  FrameHeader hello{};
  uint32_t got = 0;
  uint64_t deadline_ns = 0;

  enum class Progress { kWaiting, kComplete, kFailed };
  // Reads exactly what is missing of the hello (what follows belongs to the communicator that takes
  // the socket). kFailed sets *why: the peer closed, an error, or no hello by the deadline.
  Progress Read(uint64_t now_ns, std::string* why);
};

}  // namespace ff
