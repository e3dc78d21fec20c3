// Listen and accept: hello validation, secret check, grouping paths by connection id.
#include "plugin/listen_comm.h"

#include "plugin/tcp_reconnect.h"
#include "tcp/stream_path.h"

#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

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
#include "sla/traffic_class.h"
#include "tcp/interfaces.h"
#include "tcp/tcp_stream.h"
#if FF_WITH_VERBS
#include "plugin/verbs_reconnect.h"
#include "plugin/verbs_setup.h"
#endif

namespace ff {
namespace {

#if FF_WITH_VERBS
VerbsPathRecipe AcceptorRecipe(int dev, int npaths, int index) {
  // The acceptor's QP answers on whatever label the connector's packets carry. It sits on the slot's
  // port and tells the sender, in its endpoint, which descriptor key slot holds that port's rkeys.
  const std::vector<int> slots = PluginState::Get().VerbsSlots(dev, npaths);
  VerbsPathRecipe r;
  r.options.key_slot = static_cast<int>(static_cast<size_t>(index) % slots.size());
  // The acceptor's QP carries the receiver's control frames: the same knobs and SLA policy as the
  // connector's (an accept has no ncclConfig).
  const TaskProfile& task = PluginState::Get().task();
  sla::TrafficClassInputs tci;
  tci.steer = task.steer;
  tci.knob = PluginState::Get().config().traffic_class;
  tci.level = task.level;
  const sla::TrafficClassDecision tcd = sla::DecideTrafficClass(tci);
  ApplyQpConfig(PluginState::Get().config(), tcd.tos, tcd.sl, &r.options.qp);
  r.dev = PluginState::Get().verbs_devices()[static_cast<size_t>(slots[static_cast<size_t>(r.options.key_slot)])].rdma;
  return r;
}
#endif

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
  if (dev < 0 || dev >= st.device_count())
    return InvalidArgument("listen on device " + std::to_string(dev) + "; accepted 0 to " +
                           std::to_string(st.device_count() - 1));
  if (handle == nullptr) return InvalidArgument("listen handle buffer is NULL");
  if (Status s = st.PrepareVerbsForThisProcess(); !s.ok()) return s;
  auto lc = std::make_unique<ListenComm>();
  lc->ctx_ = ctx;
  lc->dev_ = dev;
  lc->verbs_ = st.verbs();
  if (getrandom(lc->secret_.data(), lc->secret_.size(), 0) != static_cast<ssize_t>(lc->secret_.size()))
    return SystemError(ErrnoMessage("getrandom", errno));
  ListenHandle h;
  h.secret = lc->secret_;
  // Verbs: one listener, on the RDMA device's bootstrap interface; the QPs are set up over it.
  const std::vector<int> order =
      st.verbs() ? std::vector<int>{st.verbs_devices()[static_cast<size_t>(dev)].bootstrap} : st.PathOrder(dev);
  for (int d : order) {
    if (h.addrs.size() == kMaxHandleAddrs) break;
    tcp::Socket s;
    uint16_t port = 0;
    Status ls = tcp::Listen(st.devices()[d].addr, &s, &port);
    if (!ls.ok()) {
      if (d == order[0]) return ls;
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

ListenComm::~ListenComm() = default;

void ListenComm::Reject(PendingHello& p, const std::string& why) {
  ++rejected_;
  FF_WARN("rejected connection from %s: %s", tcp::PeerToString(p.peer).c_str(), why.c_str());
  p.socket.reset();
}

void ListenComm::RememberStarted(uint64_t conn_id) {
  started_[started_count_++ % started_.size()] = conn_id;
}

void ListenComm::Admit(PendingHello& p, uint64_t now) {
  const FrameHeader& hh = p.hello.header;
  std::string bad = ValidateHeader(hh);
  if (bad.empty() && hh.type != static_cast<uint8_t>(FrameType::kHello)) bad = "first frame is not a hello";
  if (bad.empty() && (hh.flags & kHelloFlagRejoin)) bad = "a rejoin hello belongs on the rejoin listener";
  if (!bad.empty()) {
    Reject(p, "malformed hello (" + bad + ")");
    return;
  }
  const HelloFrame hf = AsHello(hh);
  // The key depends on the connection's nonce; the MAC proves the sender holds the handle's secret.
  const ConnectionKey key = DeriveConnectionKey(secret_, hf.conn_id, p.hello.auth.nonce);
  if (!VerifyHelloMac(key, p.hello) || p.hello.auth.counter != 0) {
    Reject(p, "hello not signed with this listen handle's secret: not a peer this handle was given to");
    return;
  }
  // Only an authentic peer learns that its transport differs (the flag is under the MAC).
  const bool peer_verbs = (hh.flags & kHelloFlagVerbs) != 0;
  if (peer_verbs != verbs_) {
    Reject(p, std::string("the peer carries this connection over ") + (peer_verbs ? "RDMA verbs" : "TCP") +
                  ", this process over " + (verbs_ ? "RDMA verbs" : "TCP") +
                  ": set the same FLEXIFORCE_TRANSPORT on every rank (accepted: auto, verbs or tcp)");
    return;
  }
  const int npaths = static_cast<int>(std::min<uint64_t>(hf.path_count, 1024));
  const int index = hf.path_index;
  if (npaths < 1 || npaths > 16 || index < 0 || index >= npaths) {
    Reject(p, "hello with path " + std::to_string(index) + " of " + std::to_string(hf.path_count) +
                  " (accepted: 1 to 16 paths)");
    return;
  }
  const auto started_end = started_.begin() + std::min(started_count_, started_.size());
  if (std::find(started_.begin(), started_end, hf.conn_id) != started_end) {
    Reject(p, "path " + std::to_string(index) + " of connection " + std::to_string(hf.conn_id) +
                  " arrived after the connection started (or was dropped) without it; it joins through failback");
    return;
  }
  auto [it, fresh] = groups_.try_emplace(hf.conn_id);
  Group& g = it->second;
  if (fresh) {
    g.first_ns = now;
    g.npaths = npaths;
    g.streams.resize(static_cast<size_t>(npaths));
    g.chunk_bytes = hf.chunk_bytes;
    g.eager_bytes = hf.eager_bytes;
    g.sla_us = hf.sla_us;
    g.conn_nonce = p.hello.auth.nonce;
    g.key = key;
  }
  if (g.npaths != npaths || g.conn_nonce != p.hello.auth.nonce || g.streams[static_cast<size_t>(index)] != nullptr ||
      g.chunk_bytes != hf.chunk_bytes || g.eager_bytes != hf.eager_bytes || g.chunk_bytes < 4096 ||
      g.chunk_bytes > (64u << 20)) {
    Reject(p, "inconsistent hello for connection " + std::to_string(hf.conn_id));
    if (fresh) groups_.erase(it);
    return;
  }
#if FF_WITH_VERBS
  if (verbs_) {
    if (g.verbs.empty()) g.verbs.resize(static_cast<size_t>(npaths));
    const VerbsPathRecipe recipe = AcceptorRecipe(dev_, npaths, index);
    Status vs = VerbsPathSetup::Create(VerbsPathSetup::Role::kAcceptor, index, *recipe.dev, recipe.options,
                                       &g.verbs[static_cast<size_t>(index)]);
    if (!vs.ok()) {
      Reject(p, "cannot create its RDMA queue pair: " + vs.message());
      if (fresh) groups_.erase(it);
      return;
    }
  }
#endif
  g.peers.push_back(p.peer);
  std::string desc = tcp::PeerToString(p.peer);
  g.streams[static_cast<size_t>(index)] = std::make_unique<tcp::TcpStream>(std::move(p.socket), desc);
  ++g.arrived;
}

bool ListenComm::ExpireIfDead(std::map<uint64_t, Group>::iterator it, uint64_t now) {
  Group& g = it->second;
  for (const auto& s : g.streams)
    if (s != nullptr && !tcp::PeerHasClosed(s->fd())) return false;
  const uint64_t timeout_ns = uint64_t(PluginState::Get().config().connect_timeout_ms) * 1'000'000;
  if (now - g.first_ns < timeout_ns) return true;  // held (never started) until the sender gives up too
  FF_WARN("dropped connection %llu: %d of its %d path(s) arrived and closed, the others never came within "
          "FLEXIFORCE_CONNECT_TIMEOUT_MS (%llu ms)",
          static_cast<unsigned long long>(it->first), g.arrived, g.npaths,
          static_cast<unsigned long long>(timeout_ns / 1'000'000));
  RememberStarted(it->first);
  groups_.erase(it);
  return true;
}

Status ListenComm::StepVerbs(Group& g, bool* ready) {
  *ready = true;
#if FF_WITH_VERBS
  for (size_t i = 0; i < g.verbs.size(); ++i) {
    if (g.verbs[i] == nullptr || g.streams[i] == nullptr) continue;
    bool done = false;
    Status s = g.verbs[i]->Step(g.streams[i]->fd(), &done);
    if (!s.ok())
      return RemoteError("RDMA setup of path " + std::to_string(i) + " from " + g.streams[i]->Describe() + ": " +
                         s.message());
    *ready &= done;
  }
#else
  (void)g;
#endif
  return Status::Ok();
}

Status ListenComm::Accept(std::unique_ptr<RecvComm>* out) {
  out->reset();
  const uint64_t now = NowNs();
  const uint64_t timeout_ns = uint64_t(PluginState::Get().config().peer_timeout_ms) * 1'000'000;
  for (auto& l : listeners_) {
    Status s = pending_.AcceptFrom(l.fd(), now, now + timeout_ns);
    if (!s.ok()) return s;
  }
  // A peer's connection waits in the kernel but this process has no descriptor to take it with,
  // and no stranger of ours to close: waiting on would leave NCCL's accept spinning forever.
  int starved_err = 0;
  if (const uint64_t starved = pending_.starved_for_ns(now, &starved_err); starved >= kAcceptStarvedErrorNs)
    return SystemError(ErrnoMessage("accept", starved_err) + " for " +
                       std::to_string(starved / 1'000'000) + " ms with a connection waiting" +
                       tcp::DescriptorLimitHint(starved_err));
  for (auto& p : pending_.items()) {
    if (!p.socket.valid()) continue;
    std::string why;
    const PendingHello::Progress hp = p.Read(now, &why);
    if (hp == PendingHello::Progress::kFailed) Reject(p, why);
    if (hp == PendingHello::Progress::kComplete) Admit(p, now);
  }
  pending_.Sweep();

  const uint64_t grace_ns = static_cast<uint64_t>(
      std::chrono::nanoseconds(PathSetupGrace(PluginState::Get().config().connect_timeout_ms)).count());
  for (auto it = groups_.begin(); it != groups_.end();) {
    auto cur = it++;
    Group& g = cur->second;
    const bool partial = g.arrived < g.npaths;
    if (verbs_) {
      bool ready = false;
      if (Status s = StepVerbs(g, &ready); !s.ok()) {
        RememberStarted(cur->first);
        groups_.erase(cur);
        return s;
      }
      if (!ready) continue;
    }
    if (partial && now - g.first_ns < grace_ns) continue;
    if (partial && ExpireIfDead(cur, now)) continue;
    it = cur;
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
#if FF_WITH_VERBS
      if (verbs_) {
        // The bootstrap stream stays open: the path watches it to learn of the peer process's exit.
        paths.push_back(g.verbs[static_cast<size_t>(i)]->TakePath(::dup(g.streams[i]->fd())));
        g.streams[i].reset();
        continue;
      }
#endif
      const Config& cfg = PluginState::Get().config();
      tcp::PathSocketOptions o;
      o.buffer_bytes = static_cast<int>(cfg.socket_buffer_bytes);
      o.congestion = cfg.tcp_congestion;
      o.user_timeout_ms = cfg.peer_timeout_ms;
      tcp::ApplyPathOptions(g.streams[i]->fd(), AF_INET, o);
      sockaddr_storage ours{}, theirs{};
      socklen_t ol = sizeof(ours), tl = sizeof(theirs);
      const RouteLinks route =
          ::getsockname(g.streams[i]->fd(), reinterpret_cast<sockaddr*>(&ours), &ol) == 0 &&
                  ::getpeername(g.streams[i]->fd(), reinterpret_cast<sockaddr*>(&theirs), &tl) == 0
              ? AcceptedPathRoute(theirs, ours)
              : RouteLinks{};
      paths.push_back(std::make_unique<StreamPath>(i, std::move(g.streams[i])));
      paths.back()->set_route(route);
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
    // The sender's eager threshold, from its hello (ranks may run with different settings): a buffer
    // no larger takes only messages that may come unsolicited, so its descriptor can wait; a sender
    // with no ring (its FLEXIFORCE_EAGER_BYTES or FLEXIFORCE_EAGER_RING 0) says 0 and then waits for
    // every descriptor. A receiver only asks whether the ring exists, not how large it is.
    opts.eager_bytes = g.eager_bytes;
    opts.eager_ring_bytes = g.eager_bytes;
    if (opts.failback_ms > 0 && it->first != 0) {
      tcp::PathSocketOptions so;
      so.buffer_bytes = static_cast<int>(PluginState::Get().config().socket_buffer_bytes);
      so.congestion = PluginState::Get().config().tcp_congestion;
      so.user_timeout_ms = PluginState::Get().config().peer_timeout_ms;
#if FF_WITH_VERBS
      if (verbs_) {
        // A failed QP comes back as a new one on the same port (plugin/verbs_reconnect.h).
        std::vector<VerbsPathRecipe> recipes;
        for (int i = 0; i < g.npaths; ++i) recipes.push_back(AcceptorRecipe(dev_, g.npaths, i));
        opts.reconnect_inbox = std::make_shared<VerbsReconnectInbox>(
            it->first, g.key, g.npaths, g.peers, so, std::move(recipes),
            std::min<uint64_t>(uint64_t(PluginState::Get().config().connect_timeout_ms), 5000) * 1'000'000);
      }
#endif
      if (!verbs_) opts.reconnect_inbox = std::make_shared<TcpReconnectInbox>(it->first, g.key, g.npaths, g.peers, so);
    }
    std::string peer = paths[static_cast<size_t>(first_present)]->Describe();
    std::vector<std::string> path_ends;  // for the path_up probe: each present path's remote end
    if (FF_PROBE_ENABLED(path_up))
      for (const auto& p : paths) path_ends.push_back(p->alive() ? p->Describe() : std::string());
    *out = std::make_unique<RecvComm>(std::move(paths), opts, peer);
    FF_PROBE(accept, opts.task_hash, peer.c_str(), g.arrived, opts.sla_us, -1);
    for (size_t i = 0; i < path_ends.size(); ++i)
      if (!path_ends[i].empty()) FF_PROBE(path_up, opts.task_hash, peer.c_str(), static_cast<int>(i), path_ends[i].c_str());
    RememberStarted(it->first);
    if (partial) {
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
