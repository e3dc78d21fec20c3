// Bootstrap for the driver's ranks: a star of TCP connections to rank 0 offering all-gather and barrier.
#pragma once

#include <string>
#include <vector>

#include "tests/collective/abort_context.h"
#include "tests/collective/unique_fd.h"

namespace ff::collective {

struct RendezvousConfig {
  int rank = 0;
  int nranks = 0;
  std::string host;      // rank 0 listens here (unless listen_fd is given); the others connect here
  uint16_t port = 0;
  std::string bind_ip;   // when set: rank 0 listens on it; others connect from it
  int listen_fd = -1;    // an already listening socket handed over by --launch-local (rank 0 only)
};

// Rank 0 gathers every message and sends the concatenation back, so each collective
// call is one round trip per rank. Messages carry a tag; a rank calling a different
// step than rank 0 is reported as a desynchronisation instead of misreading data.
class Rendezvous {
 public:
  Rendezvous(const RendezvousConfig& config, AbortContext& ctx);

  // Every rank contributes `blob`; returns all ranks' blobs indexed by rank.
  std::vector<std::string> AllGather(const std::string& tag, const std::string& blob);
  void Barrier(const std::string& tag) { AllGather(tag, {}); }

  // Throws DriverError when a peer's rendezvous connection closed (the peer died).
  void CheckPeersAlive();

  // This rank's address as seen on the rendezvous connection; what it should advertise.
  const std::string& LocalAddress() const { return local_ip_; }

 private:
  void SendMessage(int fd, const std::string& tag, const std::string& payload, const std::string& peer);
  std::string RecvMessage(int fd, const std::string& tag, const std::string& peer);

  RendezvousConfig config_;
  AbortContext& ctx_;
  std::vector<UniqueFd> peers_;  // rank 0: index r is rank r (0 unused); others: index 0 is rank 0
  std::string local_ip_;
};

}  // namespace ff::collective
