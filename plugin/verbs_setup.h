// One RDMA path's bring-up over the TCP stream its hello travelled on (the bootstrap), without
// blocking: NCCL may drive connect() and accept() of both ends from one thread.
//
// Bytes on the bootstrap stream after the hello (both ends are the same architecture):
//   connector -> acceptor: its RdmaEndpoint (32 bytes, sent right behind the hello);
//   acceptor -> connector: its RdmaEndpoint, once its QP is at RTR/RTS toward the connector's;
//   connector -> acceptor: one byte 'R', once its QP is at RTS too.
// Only then does the acceptor start the receive communicator: its first control frame (a
// descriptor) cannot reach a queue pair that is not yet ready to receive it.
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "core/path.h"
#include "plugin/config_registry.h"
#include "verbs/rdma_path.h"

namespace ff {

// The registry's QP knobs (NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT, NCCL_IB_SL, NCCL_IB_TC, FLEXIFORCE_IB_MTU).
verbs::QpKnobs QpKnobsFromConfig(const Config& cfg);
// Sets one path's retry, MTU cap, SL and traffic class: the knobs under the traffic-class decision
// (`policy_tc` / `policy_sl`: sla::TrafficClassDecision's tos and sl, -1 when it leaves the default).
void ApplyQpConfig(const Config& cfg, int policy_tc, int policy_sl, verbs::RcQpParams* qp);

class VerbsPathSetup {
 public:
  enum class Role { kConnector, kAcceptor };

  // Creates the path's QP (INIT, receives posted) on `dev`.
  static Status Create(Role role, int index, verbs::RdmaDevice& dev, const verbs::RdmaPathOptions& options,
                       std::unique_ptr<VerbsPathSetup>* out);

  // Moves the exchange on `fd` (non-blocking) as far as it can go; *done once the path is connected
  // and the last byte of the exchange was sent or received. An error names the step.
  Status Step(int fd, bool* done);
  bool done() const { return stage_ == Stage::kDone; }
  // The connected path (call once, after done()); it keeps `watch_fd` (the bootstrap stream, or a
  // duplicate of it) to learn when the peer process goes away (RdmaPath::WatchPeer).
  std::unique_ptr<Path> TakePath(int watch_fd) {
    path_->WatchPeer(watch_fd);
    return std::move(path_);
  }

 private:
  enum class Stage { kSendLocal, kReadRemote, kSendReady, kReadReady, kDone };
  VerbsPathSetup(Role role) : role_(role) {}
  // Reads/writes what is left of the current buffer; true when it is complete.
  Status Pump(int fd, bool write, char* buf, uint32_t size, bool* complete);

  Role role_;
  Stage stage_ = Stage::kSendLocal;
  std::unique_ptr<verbs::RdmaPath> path_;
  verbs::RdmaEndpoint local_{};
  verbs::RdmaEndpoint remote_{};
  char ready_ = 'R';
  uint32_t moved_ = 0;  // bytes of the current step's buffer already sent or received
};

}  // namespace ff
