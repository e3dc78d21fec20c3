// Non-blocking connect: opens every path, sends each one's hello, then yields a SendComm.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/send_comm.h"

namespace ff {

struct NetContext;

// Once one path of a connection is up, how long the others may take before the connection starts
// without them (they join later through failback): 2 s, or the connect timeout if shorter. Both
// connect and accept apply it, so a link lost during setup delays the connection, never hangs it.
inline std::chrono::milliseconds PathSetupGrace(int connect_timeout_ms) {
  return std::chrono::milliseconds(std::min(connect_timeout_ms, 2000));
}

// Call repeatedly with the same handle until *out is set or an error returns. Progress is kept in
// the handle's reserved bytes, as NCCL expects of connect().
Status ConnectStep(NetContext* ctx, int config_tc, int dev, void* handle, std::unique_ptr<SendComm>* out);

// A connect NCCL stopped calling (its communicator aborted or was destroyed mid-handshake) holds
// sockets until it is freed here. Frees every connect not called for FLEXIFORCE_CONNECT_TIMEOUT_MS;
// connect, listen, closeListen and finalize call it. Returns how many were freed.
size_t ExpireAbandonedConnects();
// Frees the connects in progress of `ctx` (finalize: NCCL will not call connect with it again).
size_t DropPendingConnects(const NetContext* ctx);
// Connects in progress (for tests and diagnostics).
size_t PendingConnectCount();

}  // namespace ff
