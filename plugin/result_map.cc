// The one mapping from internal errors to ncclResult_t.
#include "base/logging.h"
#include "plugin/net_api.h"

namespace ff::net {

ncclResult_t ToNcclResult(const Status& s) {
  switch (s.code()) {
    case ErrorCode::kOk:
      return ncclSuccess;
    case ErrorCode::kInvalidArgument:
      FF_WARN("%s", s.message().c_str());
      return ncclInvalidArgument;
    case ErrorCode::kInvalidUsage:
      FF_WARN("%s", s.message().c_str());
      return ncclInvalidUsage;
    case ErrorCode::kSystem:
      FF_WARN("%s", s.message().c_str());
      return ncclSystemError;
    case ErrorCode::kRemote:
      return ncclRemoteError;  // already logged once by the communicator that failed
    case ErrorCode::kInternal:
      FF_WARN("internal error: %s", s.message().c_str());
      return ncclInternalError;
  }
  return ncclInternalError;
}

}  // namespace ff::net
