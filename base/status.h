// Internal error type: a code for the ABI mapping plus a message for the log.
#pragma once

#include <cstring>
#include <string>
#include <utility>

namespace ff {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // caller passed something malformed (bad handle, bad size)
  kInvalidUsage,     // caller broke the protocol (too many requests, wrong comm)
  kSystem,           // a local system call failed
  kRemote,           // the peer misbehaved, died, or the network failed
  kInternal,         // a bug of ours
};

class Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status InvalidUsage(std::string m) { return {ErrorCode::kInvalidUsage, std::move(m)}; }
inline Status SystemError(std::string m) { return {ErrorCode::kSystem, std::move(m)}; }
inline Status RemoteError(std::string m) { return {ErrorCode::kRemote, std::move(m)}; }
inline Status InternalError(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

// Formats errno into "<what>: <strerror> (errno N)".
inline std::string ErrnoMessage(const std::string& what, int err) {
  char buf[128];
  const char* s = strerror_r(err, buf, sizeof(buf));
  return what + ": " + s + " (errno " + std::to_string(err) + ")";
}

}  // namespace ff
