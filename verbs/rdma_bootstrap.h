// Connection bootstrap for RdmaPath outside the plugin (tests, tools): swaps endpoints over a byte stream.
#pragma once

#include "base/status.h"
#include "verbs/rdma_path.h"

namespace ff::verbs {

// Writes the endpoint in full to `fd` (a connected socket or a pipe's write end).
Status SendEndpoint(int fd, const RdmaEndpoint& local, int timeout_ms);
// Reads one endpoint from `fd`; an error when the stream closes or timeout_ms passes first.
Status RecvEndpoint(int fd, RdmaEndpoint* remote, int timeout_ms);

// Both steps and the QP transitions for one end: send ours on write_fd, read the peer's from read_fd,
// then RTR and RTS. Two processes each call it; one thread driving both ends calls the parts instead
// (sending both before reading either), since this blocks on the read.
Status BootstrapPath(RdmaPath& path, int write_fd, int read_fd, int timeout_ms);

}  // namespace ff::verbs
