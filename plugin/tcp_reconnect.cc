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

sockaddr_storage RejoinAddress(const PathEndpoint& ep, uint16_t port) {
  sockaddr_storage remote = ep.remote;
  if (remote.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&remote)->sin_port = htons(port);
  else
    reinterpret_cast<sockaddr_in6*>(&remote)->sin6_port = htons(port);
  return remote;
}

HelloWire NewRejoinHello(const ConnectionKey& key, uint64_t conn_id, int path_count, int index, uint64_t chunk_bytes,
                         uint32_t sla_us, uint64_t counter, uint64_t now_ns) {
  uint64_t nonce = 0;
  if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce)) nonce = now_ns;  // the counter alone suffices
  return MakeSignedRejoin(key, conn_id, path_count, index, chunk_bytes, sla_us, counter, nonce);
}

Status RejoinDial::Start(const PathEndpoint& ep, const sockaddr_storage& rejoin, const HelloWire& hello,
                         uint64_t deadline_ns) {
  Reset();
  Status s = tcp::StartConnect(rejoin, &ep.local, ep.sport_lo, ep.sport_hi, &socket_);
  if (!s.ok()) return s;
  active_ = true;
  family_ = rejoin.ss_family;
  remote_ = tcp::PeerToString(rejoin);
  deadline_ns_ = deadline_ns;
  hello_ = hello;
  return Status::Ok();
}

void RejoinDial::Reset() {
  active_ = false;
  socket_.reset();
  sent_ = 0;
}

tcp::Socket RejoinDial::TakeSocket() {
  tcp::Socket s = std::move(socket_);
  Reset();
  return s;
}

Reconnector::Step RejoinDial::Advance(uint64_t now_ns, const tcp::PathSocketOptions& options, std::string* detail) {
  using Step = Reconnector::Step;
  int err = 0;
  const tcp::ConnectProgress cp = tcp::PollConnect(socket_.fd(), &err);
  if (cp == tcp::ConnectProgress::kFailed) {
    *detail = ErrnoMessage("connect to " + remote_, err);
    Reset();
    return Step::kFailed;
  }
  if (cp == tcp::ConnectProgress::kPending) {
    if (now_ns <= deadline_ns_) return Step::kPending;
    *detail = "no handshake with " + remote_ + " in time";
    Reset();
    return Step::kFailed;
  }
  if (sent_ == 0) (void)tcp::ApplyPathOptions(socket_.fd(), family_, options);
  iovec iov{reinterpret_cast<char*>(&hello_) + sent_, sizeof(HelloWire) - sent_};
  const ssize_t w = tcp::SendSome(socket_.fd(), &iov, 1);
  if (w < 0) {
    *detail = ErrnoMessage("rejoin hello to " + remote_, errno);
    Reset();
    return Step::kFailed;
  }
  sent_ += static_cast<uint32_t>(w);
  if (sent_ < sizeof(HelloWire)) {
    if (now_ns <= deadline_ns_) return Step::kPending;
    *detail = "the rejoin hello to " + remote_ + " did not go out in time";
    Reset();
    return Step::kFailed;
  }
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  if (getsockname(socket_.fd(), reinterpret_cast<sockaddr*>(&local), &len) == 0)
    *detail = tcp::AddressToString(local) + ":" + std::to_string(tcp::LocalPort(socket_.fd())) + "->" + remote_;
  else
    *detail = "->" + remote_;
  return Step::kDone;
}

bool TcpReconnector::Ready(int index, uint64_t now_ns, uint64_t stable_ns) {
  if (index < 0 || static_cast<size_t>(index) >= endpoints_.size() || index >= static_cast<int>(attempts_.size()))
    return false;
  Attempt& a = attempts_[static_cast<size_t>(index)];
  if (a.dial.active()) return true;
  if (a.ifindex < 0) a.ifindex = tcp::InterfaceIndexOfAddress(endpoints_[static_cast<size_t>(index)].local);
  // After carrier loss: wait until the interface has been up for the whole failback time.
  if (!link_events_ || a.ifindex <= 0) return true;
  LinkMonitor::Get().Poll(now_ns);
  return LinkMonitor::Get().StableUp(a.ifindex, now_ns, stable_ns);
}

void TcpReconnector::Abandon(int index) {
  if (index < 0 || index >= static_cast<int>(attempts_.size())) return;
  attempts_[static_cast<size_t>(index)].dial.Reset();
}

Reconnector::Step TcpReconnector::Advance(int index, uint64_t now_ns, std::unique_ptr<Path>* out,
                                          std::string* detail) {
  if (index < 0 || static_cast<size_t>(index) >= endpoints_.size() || index >= static_cast<int>(attempts_.size())) {
    *detail = "no endpoint recorded for path " + std::to_string(index);
    return Step::kFailed;
  }
  Attempt& a = attempts_[static_cast<size_t>(index)];
  const PathEndpoint& ep = endpoints_[static_cast<size_t>(index)];
  if (!a.dial.active()) {
    const HelloWire hello = NewRejoinHello(key_, conn_id_, path_count_, index, chunk_bytes_, sla_us_,
                                           ++rejoin_counter_, now_ns);
    // A path that cannot complete a handshake in 1 s is not back.
    Status s = a.dial.Start(ep, RejoinAddress(ep, port_), hello, now_ns + 1'000'000'000);
    if (!s.ok()) {
      *detail = s.message();
      return Step::kFailed;
    }
  }
  const Step step = a.dial.Advance(now_ns, socket_options_, detail);
  if (step != Step::kDone) return step;
  *out = std::make_unique<StreamPath>(index, std::make_unique<tcp::TcpStream>(a.dial.TakeSocket(), *detail));
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

bool TcpReconnectInbox::TakeSockets(std::vector<RejoinMailbox::Arrival>* out) {
  if (!registered_ || !box_.pending.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(box_.mu);
  for (auto& a : box_.arrivals) out->push_back(std::move(a));
  box_.arrivals.clear();
  box_.pending.store(false, std::memory_order_relaxed);
  return !out->empty();
}

bool TcpReconnectInbox::Take(std::vector<Arrival>* out) {
  std::vector<RejoinMailbox::Arrival> arrivals;
  if (!TakeSockets(&arrivals)) return false;
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
