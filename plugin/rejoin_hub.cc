// Rejoin listener: accept, read the 64-byte hello, check connection id and secret, hand over the socket.
#include "plugin/rejoin_hub.h"

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

void RejoinHub::Register(uint64_t conn_id, uint64_t secret, int npaths, RejoinMailbox* box) {
  std::lock_guard<std::mutex> lock(mu_);
  targets_[conn_id] = Target{secret, npaths, box};
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
    for (;;) {
      PendingHello p;
      if (!tcp::AcceptOne(l.fd(), &p.socket, &p.peer).ok() || !p.socket.valid()) break;
      p.deadline_ns = now_ns + timeout_ns;
      pending_.push_back(std::move(p));
    }
  }
  for (auto& p : pending_) {
    std::string why;
    const PendingHello::Progress hp = p.Read(now_ns, &why);
    if (hp == PendingHello::Progress::kFailed) Reject(p, why);
    if (hp != PendingHello::Progress::kComplete) continue;
    std::string bad = ValidateHeader(p.hello);
    if (bad.empty() && (p.hello.type != static_cast<uint8_t>(FrameType::kHello) || !(p.hello.flags & kHelloFlagRejoin)))
      bad = "first frame is not a rejoin hello";
    if (!bad.empty()) {
      Reject(p, "malformed hello (" + bad + ")");
      continue;
    }
    auto it = targets_.find(p.hello.seq);
    if (it == targets_.end()) {
      Reject(p, "connection " + std::to_string(p.hello.seq) + " is unknown here (closed, or never accepted)");
      continue;
    }
    if (it->second.secret != p.hello.offset) {
      Reject(p, "wrong secret for connection " + std::to_string(p.hello.seq));
      continue;
    }
    if (p.hello.tag < 0 || p.hello.tag >= it->second.npaths) {
      Reject(p, "path " + std::to_string(p.hello.tag) + " of a " + std::to_string(it->second.npaths) +
                    "-path connection");
      continue;
    }
    RejoinMailbox& box = *it->second.box;
    {
      std::lock_guard<std::mutex> bl(box.mu);
      box.arrivals.push_back(RejoinMailbox::Arrival{p.hello.tag, std::move(p.socket), tcp::PeerToString(p.peer)});
    }
    box.pending.store(true, std::memory_order_release);
  }
  std::erase_if(pending_, [](const PendingHello& p) { return !p.socket.valid(); });
}

}  // namespace ff
