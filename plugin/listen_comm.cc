// Listen and accept: hello validation, secret check, grouping paths by connection id.
#include "plugin/listen_comm.h"

#include "plugin/tcp_reconnect.h"
#include "tcp/stream_path.h"

#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "tcp/absent_stream.h"
#include "plugin/connector.h"
#include "plugin/listen_handle.h"
#include "plugin/path_planner.h"
#include "pathctl/path_name.h"
#include "base/logging.h"
#include "core/probes.h"
#include "plugin/plugin_state.h"
#include "core/task_profile.h"
#include "tcp/interfaces.h"
#include "tcp/tcp_stream.h"

namespace ff {
namespace {

// "eth0 <- 10.0.0.1": the receiving interface and the sender's address, for the statistics (the
// sender's spine is its choice; this end cannot see it). Empty when the socket cannot say.
std::string ReceivedName(int fd) {
  sockaddr_storage local{}, remote{};
  socklen_t local_len = sizeof(local), remote_len = sizeof(remote);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) != 0)
    return {};
  const std::string ip = tcp::AddressToString(local);
  return pathctl::ReceivedPathName(LocalInterfaceName(ip), ip, tcp::AddressToString(remote));
}

}  // namespace

Status ListenComm::Create(NetContext* ctx, int dev, void* handle, std::unique_ptr<ListenComm>* out) {
  PluginState& st = PluginState::Get();
  if (dev < 0 || dev >= static_cast<int>(st.devices().size()))
    return InvalidArgument("listen on device " + std::to_string(dev) + "; accepted 0 to " +
                           std::to_string(st.devices().size() - 1));
  if (handle == nullptr) return InvalidArgument("listen handle buffer is NULL");
  auto lc = std::make_unique<ListenComm>();
  lc->ctx_ = ctx;
  if (getrandom(&lc->secret_, sizeof(lc->secret_), 0) != sizeof(lc->secret_))
    return SystemError(ErrnoMessage("getrandom", errno));
  ListenHandle h;
  h.secret = lc->secret_;
  for (int d : st.PathOrder(dev)) {
    if (h.addrs.size() == kMaxHandleAddrs) break;
    tcp::Socket s;
    uint16_t port = 0;
    Status ls = tcp::Listen(st.devices()[d].addr, &s, &port);
    if (!ls.ok()) {
      if (d == dev) return ls;
      FF_WARN("cannot listen on %s: %s", st.devices()[d].name.c_str(), ls.message().c_str());
      continue;
    }
    sockaddr_storage a = st.devices()[d].addr;
    if (a.ss_family == AF_INET)
      reinterpret_cast<sockaddr_in*>(&a)->sin_port = htons(port);
    else
      reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = htons(port);
    h.addrs.push_back(a);
    lc->listeners_.push_back(std::move(s));
  }
  Status es = EncodeHandle(h, handle);
  if (!es.ok()) return es;
  *out = std::move(lc);
  return Status::Ok();
}

void ListenComm::Reject(PendingHello& p, const std::string& why) {
  ++rejected_;
  FF_WARN("rejected connection from %s: %s", tcp::PeerToString(p.peer).c_str(), why.c_str());
  p.socket.reset();
}

Status ListenComm::Accept(std::unique_ptr<RecvComm>* out) {
  out->reset();
  const uint64_t now = NowNs();
  const uint64_t timeout_ns = uint64_t(PluginState::Get().config().peer_timeout_ms) * 1'000'000;
  for (auto& l : listeners_) {
    for (;;) {
      PendingHello p;
      Status s = tcp::AcceptOne(l.fd(), &p.socket, &p.peer);
      if (!s.ok()) return s;
      if (!p.socket.valid()) break;
      p.deadline_ns = now + timeout_ns;
      pending_.push_back(std::move(p));
    }
  }
  for (auto& p : pending_) {
    if (!p.socket.valid()) continue;
    std::string why;
    const PendingHello::Progress hp = p.Read(now, &why);
    if (hp == PendingHello::Progress::kFailed) Reject(p, why);
    if (hp != PendingHello::Progress::kComplete) continue;
    std::string bad = ValidateHeader(p.hello);
    if (bad.empty() && p.hello.type != static_cast<uint8_t>(FrameType::kHello)) bad = "first frame is not a hello";
    if (!bad.empty()) {
      Reject(p, "malformed hello (" + bad + ")");
      continue;
    }
    if (p.hello.offset != secret_) {
      Reject(p, "wrong secret: not a peer this listen handle was given to");
      continue;
    }
    const int npaths = static_cast<int>(p.hello.total);
    const int index = p.hello.tag;
    if (npaths < 1 || npaths > 16 || index < 0 || index >= npaths) {
      Reject(p, "hello with path " + std::to_string(index) + " of " + std::to_string(npaths));
      continue;
    }
    const auto partial_end = started_partial_.begin() + std::min(started_partial_count_, started_partial_.size());
    if (std::find(started_partial_.begin(), partial_end, p.hello.seq) != partial_end) {
      Reject(p, "path " + std::to_string(index) + " of connection " + std::to_string(p.hello.seq) +
                    " arrived after the connection started without it; it joins through failback");
      continue;
    }
    Group& g = groups_[p.hello.seq];
    if (g.npaths == 0) {
      g.first_ns = now;
      g.npaths = npaths;
      g.streams.resize(npaths);
      g.chunk_bytes = p.hello.task_hash;
      g.sla_us = p.hello.sla_us;
    }
    if (g.npaths != npaths || g.streams[index] != nullptr || g.chunk_bytes < 4096 || g.chunk_bytes > (64u << 20)) {
      Reject(p, "inconsistent hello for connection " + std::to_string(p.hello.seq));
      continue;
    }
    std::string desc = tcp::PeerToString(p.peer);
    g.streams[index] = std::make_unique<tcp::TcpStream>(std::move(p.socket), desc);
    ++g.arrived;
  }
  std::erase_if(pending_, [](const PendingHello& p) { return !p.socket.valid(); });

  const uint64_t grace_ns = static_cast<uint64_t>(
      std::chrono::nanoseconds(PathSetupGrace(PluginState::Get().config().connect_timeout_ms)).count());
  for (auto it = groups_.begin(); it != groups_.end(); ++it) {
    Group& g = it->second;
    const bool partial = g.arrived < g.npaths;
    if (partial && now - g.first_ns < grace_ns) continue;
    std::vector<std::unique_ptr<Path>> paths;
    int first_present = -1;
    std::string received_name;
    for (int i = 0; i < g.npaths; ++i) {
      if (g.streams[i] == nullptr) {
        // Never arrived (a link lost during setup): the path starts dead; the sender reconnects it.
        paths.push_back(std::make_unique<StreamPath>(i, std::make_unique<AbsentStream>("path not connected")));
        paths.back()->MarkDead();
        continue;
      }
      if (first_present < 0) {
        first_present = i;
        received_name = ReceivedName(g.streams[i]->fd());
      }
      const Config& cfg = PluginState::Get().config();
      tcp::PathSocketOptions o;
      o.buffer_bytes = static_cast<int>(cfg.socket_buffer_bytes);
      o.user_timeout_ms = cfg.peer_timeout_ms;
      tcp::ApplyPathOptions(g.streams[i]->fd(), AF_INET, o);
      paths.push_back(std::make_unique<StreamPath>(i, std::move(g.streams[i])));
    }
    CommOptions opts;
    opts.chunk_bytes = g.chunk_bytes;
    // No stall watchdog on receivers: their only traffic is small acknowledgements, which the peer
    // may hold for a delayed ACK (40-200 ms). They follow the sender's failover instead.
    opts.link_events = PluginState::Get().config().link_events;
    TaskProfile& task = PluginState::Get().task();
    opts.stats_task = task.stats_task;
    opts.task_hash = task.task_hash;
    opts.sla_us = task.sla_us;
    opts.stats = task.stats.get();
    opts.profile = &task;
    opts.task = task.decl.task.id;
    opts.path_name = std::move(received_name);
    opts.net_attr = &ctx_->attr;
    opts.failback_ms = static_cast<uint32_t>(PluginState::Get().config().failback_ms);
    opts.nic_watch = PluginState::Get().nic_watch();
    opts.ack_batch = static_cast<uint32_t>(PluginState::Get().config().ack_batch);
    opts.ack_delay_us = static_cast<uint32_t>(PluginState::Get().config().ack_delay_us);
    if (opts.failback_ms > 0 && it->first != 0) {
      tcp::PathSocketOptions so;
      so.buffer_bytes = static_cast<int>(PluginState::Get().config().socket_buffer_bytes);
      so.user_timeout_ms = PluginState::Get().config().peer_timeout_ms;
      opts.reconnect_inbox = std::make_shared<TcpReconnectInbox>(it->first, secret_, g.npaths, so);
    }
    std::string peer = paths[static_cast<size_t>(first_present)]->Describe();
    *out = std::make_unique<RecvComm>(std::move(paths), opts, peer);
    FF_PROBE(accept, opts.task_hash, peer.c_str(), g.arrived, opts.sla_us, -1);
    if (partial) {
      started_partial_[started_partial_count_++ % started_partial_.size()] = it->first;
      FF_WARN("accepted connection from %s with %d of %d path(s): the others did not arrive within %llu ms of the "
              "first; they join through failback",
              peer.c_str(), g.arrived, g.npaths, static_cast<unsigned long long>(grace_ns / 1'000'000));
    } else {
      FF_INFO(NCCL_NET, "accepted connection from %s with %d path(s)", peer.c_str(), g.npaths);
    }
    groups_.erase(it);
    break;
  }
  return Status::Ok();
}

}  // namespace ff
