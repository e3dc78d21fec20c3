// Failback over RDMA verbs: a failed queue pair is replaced by a new one (a new QPN) on the same port,
// set up the way a connection's first QPs are (plugin/verbs_setup.h), over a TCP stream to the
// receiving process's rejoin listener that starts with a signed rejoin hello (plugin/tcp_reconnect.h).
//
// Sender: VerbsReconnector dials the rejoin listener from the connection's bootstrap address, sends the
// rejoin hello, then runs the connector's side of the endpoint exchange; the new RdmaPath keeps the
// stream to watch for the peer's exit. It tries only once the port's interface has had carrier for the
// failback time and the device reports the port active again (no PORT_ERR without a PORT_ACTIVE since).
// Receiver: VerbsReconnectInbox takes the streams the rejoin hub admitted for its connection and runs
// the acceptor's side; only a completed exchange becomes an arrival (RecvComm adopts it).
//
// The new QP sits on the path's original port, so the registrations' keys the receiver publishes for
// that slot stay valid, and keeps its flow label (the same fabric path as before the failure).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/reconnect.h"
#include "plugin/tcp_reconnect.h"
#include "plugin/verbs_setup.h"
#include "verbs/rdma_path.h"

namespace ff {

// One path's queue pair recipe: its port and the options it was first created with.
struct VerbsPathRecipe {
  verbs::RdmaDevice* dev = nullptr;  // outlives every communicator (the plugin never closes devices)
  verbs::RdmaPathOptions options;
};

// Whether `dev`'s port may carry a new QP now: its interface has had carrier for `stable_ns` (when
// `link_events`), and the device's async events leave the port up (a PORT_ERR not yet followed by
// PORT_ACTIVE says no) and sysfs, where readable, shows it ACTIVE.
bool VerbsPortReady(verbs::RdmaDevice& dev, bool link_events, uint64_t now_ns, uint64_t stable_ns);

class VerbsReconnector final : public Reconnector {
 public:
  // `bootstrap`: the connection's bootstrap stream's local address and the listener's address (its
  // port is replaced by the announced rejoin port). `setup_ns`: how long one attempt may take, the
  // TCP handshake and the queue pair exchange together.
  VerbsReconnector(uint64_t conn_id, const ConnectionKey& key, int path_count, uint64_t chunk_bytes, uint32_t sla_us,
                   PathEndpoint bootstrap, std::vector<VerbsPathRecipe> paths, tcp::PathSocketOptions socket_options,
                   bool link_events, uint64_t setup_ns);
  void OnPeerInfo(const ReconnectInfo& info) override { port_ = info.port; }
  bool Available() const override { return port_ != 0; }
  bool Ready(int index, uint64_t now_ns, uint64_t stable_ns) override;
  Step Advance(int index, uint64_t now_ns, std::unique_ptr<Path>* out, std::string* detail) override;
  void Abandon(int index) override;

 private:
  struct Attempt {
    RejoinDial dial;
    tcp::Socket socket;  // after the dial: the stream the endpoint exchange runs on
    std::unique_ptr<VerbsPathSetup> setup;
    uint64_t deadline_ns = 0;
    std::string stream;  // the dial's description
  };
  bool Valid(int index) const {
    return index >= 0 && static_cast<size_t>(index) < paths_.size() && index < static_cast<int>(attempts_.size());
  }

  uint64_t conn_id_;
  ConnectionKey key_;
  uint64_t rejoin_counter_ = 0;
  int path_count_;
  uint64_t chunk_bytes_;
  uint32_t sla_us_;
  PathEndpoint bootstrap_;
  std::vector<VerbsPathRecipe> paths_;
  tcp::PathSocketOptions socket_options_;
  bool link_events_;
  uint64_t setup_ns_;
  uint16_t port_ = 0;
  std::array<Attempt, 16> attempts_{};
};

class VerbsReconnectInbox final : public ReconnectInbox {
 public:
  // Registers the connection with the process's rejoin hub, like TcpReconnectInbox; `paths[i]` is
  // the acceptor's recipe for path i (its port and QP options, as at accept).
  VerbsReconnectInbox(uint64_t conn_id, const ConnectionKey& key, int path_count, std::vector<sockaddr_storage> peers,
                      tcp::PathSocketOptions socket_options, std::vector<VerbsPathRecipe> paths, uint64_t setup_ns);
  ReconnectInfo Info() const override { return hub_.Info(); }
  // Polls the hub, starts an acceptor exchange for each admitted stream and moves them all on.
  void Poll(uint64_t now_ns) override;
  bool Take(std::vector<Arrival>* out) override;

  size_t in_setup() const { return setups_.size(); }
  static constexpr uint64_t kStepIntervalNs = 100'000;

 private:
  struct Setup {
    int index = -1;
    tcp::Socket socket;
    std::string peer;
    std::unique_ptr<VerbsPathSetup> setup;
    uint64_t deadline_ns = 0;
  };

  TcpReconnectInbox hub_;
  std::vector<VerbsPathRecipe> paths_;
  uint64_t setup_ns_;
  std::vector<Setup> setups_;
  std::vector<Arrival> ready_;
  uint64_t next_step_ns_ = 0;
};

}  // namespace ff
