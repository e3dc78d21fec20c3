// Rejoin listener: accept, read the 64-byte hello, check connection id and secret, hand over the socket.
#include "plugin/rejoin_hub.h"

#include <algorithm>
#include <cstring>

#include "base/logging.h"
#include "plugin/plugin_state.h"
#include "tcp/interfaces.h"

namespace ff {

RejoinHub& RejoinHub::Get() {
  static RejoinHub* hub = new RejoinHub();  // never destroyed: comms may poll during exit
  return *hub;
}

Status RejoinHub::Ensure(uint16_t* port) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!opened_) {
    opened_ = true;
    PluginState& st = PluginState::Get();
    // Every device listens on one port, so the sender needs only that port: it reconnects to the
    // address its path used at first, keeping the same local interface and source-port range.
    for (const auto& dev : st.devices()) {
      tcp::Socket s;
      uint16_t got = 0;
      Status ls = tcp::Listen(dev.addr, &s, &got, port_);
      if (!ls.ok()) {
        FF_INFO(NCCL_NET, "failback listener on %s: %s; paths through it cannot reconnect", dev.name.c_str(),
                ls.message().c_str());
        continue;
      }
      port_ = got;
      listeners_.push_back(std::move(s));
    }
    if (port_ != 0)
      FF_INFO(NCCL_NET, "failback listener on port %u (%zu device(s))", port_, listeners_.size());
  }
  *port = port_;
  return Status::Ok();
}

void RejoinHub::Register(uint64_t conn_id, const ConnectionKey& key, int npaths, std::vector<sockaddr_storage> peers,
                         RejoinMailbox* box) {
  std::lock_guard<std::mutex> lock(mu_);
  Target t;
  t.key = key;
  t.npaths = npaths;
  t.box = box;
  t.peers = std::move(peers);
  targets_[conn_id] = std::move(t);
  registered_.fetch_add(1, std::memory_order_relaxed);
}

void RejoinHub::Unregister(uint64_t conn_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (targets_.erase(conn_id) != 0) registered_.fetch_sub(1, std::memory_order_relaxed);
}

void RejoinHub::Reject(PendingHello& p, const std::string& why) {
  rejected_.fetch_add(1, std::memory_order_relaxed);
  FF_WARN("rejected a path reconnecting from %s: %s", tcp::PeerToString(p.peer).c_str(), why.c_str());
  p.socket.reset();
}

void RejoinHub::Poll(uint64_t now_ns) {
  if (registered_.load(std::memory_order_relaxed) == 0) return;
  const uint64_t last = last_poll_ns_.load(std::memory_order_relaxed);
  if (now_ns - last < kPollIntervalNs) return;
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is polling; its result serves everyone
  last_poll_ns_.store(now_ns, std::memory_order_relaxed);
  const uint64_t timeout_ns = uint64_t(PluginState::Get().config().peer_timeout_ms) * 1'000'000;
  for (auto& l : listeners_) {
    // An unusable listening socket only costs failback through it; receive progress goes on.
    if (!pending_.AcceptFrom(l.fd(), now_ns, now_ns + timeout_ns).ok()) continue;
  }
  for (auto& p : pending_.items()) {
    if (!p.socket.valid()) continue;
    std::string why;
    const PendingHello::Progress hp = p.Read(now_ns, &why);
    if (hp == PendingHello::Progress::kFailed) Reject(p, why);
    if (hp == PendingHello::Progress::kComplete) Admit(p);
  }
  pending_.Sweep();
}

void RejoinHub::Admit(PendingHello& p) {
  const FrameHeader& hh = p.hello.header;
  std::string bad = ValidateHeader(hh);
  if (bad.empty() && (hh.type != static_cast<uint8_t>(FrameType::kHello) || !(hh.flags & kHelloFlagRejoin)))
    bad = "first frame is not a rejoin hello";
  if (!bad.empty()) {
    Reject(p, "malformed hello (" + bad + ")");
    return;
  }
  const HelloFrame hf = AsHello(hh);
  auto it = targets_.find(hf.conn_id);
  if (it == targets_.end()) {
    Reject(p, "connection " + std::to_string(hf.conn_id) + " is unknown here (closed, or never accepted)");
    return;
  }
  Target& t = it->second;
  if (!VerifyHelloMac(t.key, p.hello)) {
    Reject(p, "rejoin for connection " + std::to_string(hf.conn_id) + " is not signed with its key (forged)");
    return;
  }
  // Marked once authentic, even if refused below: an authentic rejoin captured now must not be
  // replayable later, when the path has failed.
  if (!t.window.Accept(p.hello.auth.counter)) {
    Reject(p, "rejoin counter " + std::to_string(p.hello.auth.counter) + " for connection " +
                  std::to_string(hf.conn_id) + " was seen before or is too old (replayed)");
    return;
  }
  if (hf.path_index < 0 || hf.path_index >= t.npaths || static_cast<int>(hf.path_count) != t.npaths) {
    Reject(p, "path " + std::to_string(hf.path_index) + " of a " + std::to_string(t.npaths) + "-path connection");
    return;
  }
  const bool known_source = std::any_of(t.peers.begin(), t.peers.end(), [&](const sockaddr_storage& a) {
    return tcp::SameAddressIgnoringPort(a, p.peer);
  });
  if (!known_source) {
    Reject(p, "rejoin for connection " + std::to_string(hf.conn_id) +
                  " comes from an address none of its first paths came from");
    return;
  }
  RejoinMailbox& box = *t.box;
  {
    std::lock_guard<std::mutex> bl(box.mu);
    box.arrivals.push_back(RejoinMailbox::Arrival{hf.path_index, std::move(p.socket), tcp::PeerToString(p.peer)});
  }
  box.pending.store(true, std::memory_order_release);
}

}  // namespace ff
