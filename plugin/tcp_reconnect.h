// TCP's failback transport: the sender reconnects a failed path to the receiver's rejoin listener
// with a rejoin hello; the receiver's hub admits it and hands the new stream to its communicator.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/reconnect.h"
#include "core/wire_format.h"
#include "plugin/hello_auth.h"
#include "plugin/rejoin_hub.h"
#include "tcp/socket.h"

namespace ff {

// How the sender reaches one path's far end, kept so the path can be reconnected after a failure.
struct PathEndpoint {
  sockaddr_storage local{};
  sockaddr_storage remote{};  // the remote device's address; the port is replaced by the rejoin port
  uint16_t sport_lo = 0;
  uint16_t sport_hi = 0;
};

// One rejoin dial of a failed path, shared by the transports: a non-blocking connect from the path's
// local address (and source-port range, so the same spine) to the receiver's rejoin listener, then the
// signed rejoin hello. TCP's new path is that stream; verbs sets a new queue pair up over it.
class RejoinDial {
 public:
  bool active() const { return active_; }
  // Starts the connect (an error names the address); the attempt fails at `deadline_ns`.
  Status Start(const PathEndpoint& ep, const sockaddr_storage& rejoin, const HelloWire& hello, uint64_t deadline_ns);
  // kDone: connected and the hello sent (*detail: "local:port->remote:port"); TakeSocket() hands the
  // stream over. kFailed: *detail says why, and the dial is reset.
  Reconnector::Step Advance(uint64_t now_ns, const tcp::PathSocketOptions& options, std::string* detail);
  tcp::Socket TakeSocket();
  void Reset();

 private:
  bool active_ = false;
  tcp::Socket socket_;
  sa_family_t family_ = AF_INET;
  std::string remote_;
  uint64_t deadline_ns_ = 0;
  HelloWire hello_{};
  uint32_t sent_ = 0;
};

// The rejoin listener's address for path endpoint `ep`: its remote address with the announced port.
sockaddr_storage RejoinAddress(const PathEndpoint& ep, uint16_t port);
// A fresh signed rejoin hello (nonce from getrandom, the counter alone where that fails).
HelloWire NewRejoinHello(const ConnectionKey& key, uint64_t conn_id, int path_count, int index, uint64_t chunk_bytes,
                         uint32_t sla_us, uint64_t counter, uint64_t now_ns);

class TcpReconnector final : public Reconnector {
 public:
  // `key`: the connection key (DeriveConnectionKey) its first hellos were signed with.
  TcpReconnector(uint64_t conn_id, const ConnectionKey& key, int path_count, uint64_t chunk_bytes, uint32_t sla_us,
                 std::vector<PathEndpoint> endpoints, tcp::PathSocketOptions socket_options, bool link_events);
  void OnPeerInfo(const ReconnectInfo& info) override { port_ = info.port; }
  bool Available() const override { return port_ != 0; }
  bool Ready(int index, uint64_t now_ns, uint64_t stable_ns) override;
  Step Advance(int index, uint64_t now_ns, std::unique_ptr<Path>* out, std::string* detail) override;
  void Abandon(int index) override;

 private:
  struct Attempt {
    int ifindex = -1;  // local interface of the path; -1 until resolved
    RejoinDial dial;
  };

  uint64_t conn_id_;
  ConnectionKey key_;
  uint64_t rejoin_counter_ = 0;  // last counter used; the receiver refuses any counter twice
  int path_count_;
  uint64_t chunk_bytes_;
  uint32_t sla_us_;
  std::vector<PathEndpoint> endpoints_;
  tcp::PathSocketOptions socket_options_;
  bool link_events_;
  uint16_t port_ = 0;
  std::array<Attempt, 16> attempts_{};
};

class TcpReconnectInbox final : public ReconnectInbox {
 public:
  // Registers connection `conn_id` with the process's rejoin hub (opened on first use).
  // `peers`: where the connection's first paths came from; a rejoin must come from one of them.
  TcpReconnectInbox(uint64_t conn_id, const ConnectionKey& key, int path_count, std::vector<sockaddr_storage> peers,
                    tcp::PathSocketOptions socket_options);
  ~TcpReconnectInbox() override;
  ReconnectInfo Info() const override;
  void Poll(uint64_t now_ns) override;
  bool Take(std::vector<Arrival>* out) override;
  // The admitted rejoin streams as they came (for a transport that sets its path up over them).
  bool TakeSockets(std::vector<RejoinMailbox::Arrival>* out);

 private:
  uint64_t conn_id_;
  tcp::PathSocketOptions socket_options_;
  RejoinMailbox box_;
  bool registered_ = false;
  uint16_t port_ = 0;
};

}  // namespace ff
