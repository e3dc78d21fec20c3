// Non-blocking connect: opens every path, sends each one's hello, then yields a SendComm.
#pragma once

#include <memory>

#include "plugin/send_comm.h"

namespace ff {

struct NetContext;

// Call repeatedly with the same handle until *out is set or an error returns. Progress is kept in
// the handle's reserved bytes, as NCCL expects of connect().
Status ConnectStep(NetContext* ctx, int config_tc, int dev, void* handle, std::unique_ptr<SendComm>* out);

}  // namespace ff
