// TCP failback: non-blocking connect + rejoin hello (sender), rejoin hub mailbox (receiver).
#include "plugin/tcp_reconnect.h"

#include <sys/random.h>

#include <cerrno>
#include <utility>

#include "health/link_monitor.h"
#include "tcp/interfaces.h"
#include "tcp/stream_path.h"
#include "tcp/tcp_stream.h"

namespace ff {

TcpReconnector::TcpReconnector(uint64_t conn_id, const ConnectionKey& key, int path_count, uint64_t chunk_bytes,
                               uint32_t sla_us, std::vector<PathEndpoint> endpoints,
                               tcp::PathSocketOptions socket_options, bool link_events)
    : conn_id_(conn_id),
      key_(key),
      path_count_(path_count),
      chunk_bytes_(chunk_bytes),
      sla_us_(sla_us),
      endpoints_(std::move(endpoints)),
      socket_options_(socket_options),
      link_events_(link_events) {}

sockaddr_storage TcpReconnector::RejoinAddress(int index) const {
  sockaddr_storage remote = endpoints_[static_cast<size_t>(index)].remote;
  if (remote.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&remote)->sin_port = htons(port_);
  else
    reinterpret_cast<sockaddr_in6*>(&remote)->sin6_port = htons(port_);
  return remote;
}

bool TcpReconnector::Ready(int index, uint64_t now_ns, uint64_t stable_ns) {
  if (index < 0 || static_cast<size_t>(index) >= endpoints_.size() || index >= static_cast<int>(attempts_.size()))
    return false;
  Attempt& a = attempts_[static_cast<size_t>(index)];
  if (a.connecting) return true;
  if (a.ifindex < 0) a.ifindex = tcp::InterfaceIndexOfAddress(endpoints_[static_cast<size_t>(index)].local);
  // After carrier loss: wait until the interface has been up for the whole failback time.
  if (!link_events_ || a.ifindex <= 0) return true;
  LinkMonitor::Get().Poll(now_ns);
  return LinkMonitor::Get().StableUp(a.ifindex, now_ns, stable_ns);
}

void TcpReconnector::Abandon(int index) {
  if (index < 0 || index >= static_cast<int>(attempts_.size())) return;
  Attempt& a = attempts_[static_cast<size_t>(index)];
  const int ifindex = a.ifindex;
  a = Attempt{};
  a.ifindex = ifindex;
}

Reconnector::Step TcpReconnector::Advance(int index, uint64_t now_ns, std::unique_ptr<Path>* out,
                                          std::string* detail) {
  if (index < 0 || static_cast<size_t>(index) >= endpoints_.size() || index >= static_cast<int>(attempts_.size())) {
    *detail = "no endpoint recorded for path " + std::to_string(index);
    return Step::kFailed;
  }
  Attempt& a = attempts_[static_cast<size_t>(index)];
  const PathEndpoint& ep = endpoints_[static_cast<size_t>(index)];
  if (!a.connecting) {
    const sockaddr_storage remote = RejoinAddress(index);
    Status s = tcp::StartConnect(remote, &ep.local, ep.sport_lo, ep.sport_hi, &a.socket);
    if (!s.ok()) {
      *detail = s.message();
      Abandon(index);
      return Step::kFailed;
    }
    a.connecting = true;
    a.deadline_ns = now_ns + 1'000'000'000;  // a path that cannot complete a handshake in 1 s is not back
    a.sent = 0;
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce)) nonce = now_ns;  // the counter alone suffices
    a.hello = MakeSignedRejoin(key_, conn_id_, path_count_, index, chunk_bytes_, sla_us_, ++rejoin_counter_, nonce);
  }
  int err = 0;
  const tcp::ConnectProgress cp = tcp::PollConnect(a.socket.fd(), &err);
  if (cp == tcp::ConnectProgress::kFailed) {
    *detail = ErrnoMessage("connect", err);
    Abandon(index);
    return Step::kFailed;
  }
  if (cp == tcp::ConnectProgress::kPending) {
    if (now_ns <= a.deadline_ns) return Step::kPending;
    *detail = "no handshake within 1 s";
    Abandon(index);
    return Step::kFailed;
  }
  if (a.sent == 0) (void)tcp::ApplyPathOptions(a.socket.fd(), ep.remote.ss_family, socket_options_);
  iovec iov{reinterpret_cast<char*>(&a.hello) + a.sent, sizeof(HelloWire) - a.sent};
  const ssize_t w = tcp::SendSome(a.socket.fd(), &iov, 1);
  if (w < 0) {
    *detail = ErrnoMessage("hello", errno);
    Abandon(index);
    return Step::kFailed;
  }
  a.sent += static_cast<uint32_t>(w);
  if (a.sent < sizeof(HelloWire)) return Step::kPending;
  *detail = tcp::AddressToString(ep.local) + ":" + std::to_string(tcp::LocalPort(a.socket.fd())) + "->" +
            tcp::PeerToString(RejoinAddress(index));
  *out = std::make_unique<StreamPath>(index, std::make_unique<tcp::TcpStream>(std::move(a.socket), *detail));
  Abandon(index);
  return Step::kDone;
}

TcpReconnectInbox::TcpReconnectInbox(uint64_t conn_id, const ConnectionKey& key, int path_count,
                                     std::vector<sockaddr_storage> peers, tcp::PathSocketOptions socket_options)
    : conn_id_(conn_id), socket_options_(socket_options) {
  Status s = RejoinHub::Get().Ensure(&port_);
  if (!s.ok() || port_ == 0) return;
  RejoinHub::Get().Register(conn_id, key, path_count, std::move(peers), &box_);
  registered_ = true;
}

TcpReconnectInbox::~TcpReconnectInbox() {
  if (registered_) RejoinHub::Get().Unregister(conn_id_);
}

ReconnectInfo TcpReconnectInbox::Info() const {
  ReconnectInfo info;
  info.port = registered_ ? port_ : 0;
  return info;
}

void TcpReconnectInbox::Poll(uint64_t now_ns) {
  if (registered_) RejoinHub::Get().Poll(now_ns);
}

bool TcpReconnectInbox::Take(std::vector<Arrival>* out) {
  if (!registered_ || !box_.pending.load(std::memory_order_acquire)) return false;
  std::vector<RejoinMailbox::Arrival> arrivals;
  {
    std::lock_guard<std::mutex> lock(box_.mu);
    arrivals.swap(box_.arrivals);
    box_.pending.store(false, std::memory_order_relaxed);
  }
  for (auto& a : arrivals) {
    (void)tcp::ApplyPathOptions(a.socket.fd(), AF_INET, socket_options_);
    Arrival arr;
    arr.index = a.path;
    arr.peer = a.peer;
    arr.path = std::make_unique<StreamPath>(a.path, std::make_unique<tcp::TcpStream>(std::move(a.socket), a.peer));
    out->push_back(std::move(arr));
  }
  return !out->empty();
}

}  // namespace ff
