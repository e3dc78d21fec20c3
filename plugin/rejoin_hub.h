// Process-wide listener through which a sender reconnects a failed path of an existing connection (failback).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/hello_auth.h"
#include "plugin/pending_hello.h"
#include "base/status.h"
#include "core/wire_format.h"
#include "tcp/socket.h"

namespace ff {

// Where the hub hands an admitted path socket to the receive communicator that owns the connection.
struct RejoinMailbox {
  struct Arrival {
    int path = -1;
    tcp::Socket socket;
    std::string peer;
  };
  std::mutex mu;
  std::vector<Arrival> arrivals;
  std::atomic<bool> pending{false};  // lets the owner skip the mutex on every progress call
};

// NCCL closes the listen communicator once a connection is accepted, so failback cannot reuse it.
// The hub keeps one listening socket per local device, all on the same port, opened on first use.
// A rejoining path presents a hello with kHelloFlagRejoin and the connection id, signed with the
// connection's key (plugin/hello_auth.h) and carrying a rejoin counter. Admitted only: for a
// registered connection, with a valid MAC, a counter not seen before (replay window), from an
// address one of the connection's first paths came from. Whether the path is failed is the
// receive communicator's call (RecvComm parks the arrival until it is, or refuses it).
class RejoinHub {
 public:
  static RejoinHub& Get();
  RejoinHub(const RejoinHub&) = delete;
  RejoinHub& operator=(const RejoinHub&) = delete;

  // Opens the listeners if needed; *port is 0 when failback is unavailable in this process.
  Status Ensure(uint16_t* port);
  // `peers`: the source addresses of the connection's first paths (ports are ignored).
  void Register(uint64_t conn_id, const ConnectionKey& key, int npaths, std::vector<sockaddr_storage> peers,
                RejoinMailbox* box);
  void Unregister(uint64_t conn_id);
  // Accepts and validates rejoining paths. Called from receive progress: it touches the sockets
  // at most once per kPollIntervalNs per process and never blocks (a busy hub is skipped).
  void Poll(uint64_t now_ns);
  uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }

  static constexpr uint64_t kPollIntervalNs = 5'000'000;

 private:
  RejoinHub() = default;
  struct Target {
    ConnectionKey key{};
    int npaths = 0;
    RejoinMailbox* box = nullptr;
    std::vector<sockaddr_storage> peers;
    ReplayWindow window;
  };
  void Reject(PendingHello& p, const std::string& why);
  void Admit(PendingHello& p);

  std::mutex mu_;
  std::atomic<uint64_t> last_poll_ns_{0};
  std::atomic<int> registered_{0};
  bool opened_ = false;
  uint16_t port_ = 0;
  std::vector<tcp::Socket> listeners_;
  PendingHellos pending_{"rejoin listener"};
  std::map<uint64_t, Target> targets_;
  std::atomic<uint64_t> rejected_{0};
};

}  // namespace ff
