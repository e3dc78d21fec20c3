// Connect state machine: per path connect -> options -> hello; retries refused connects until the timeout.
#include "plugin/connector.h"

#include <sys/random.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/tcp_reconnect.h"
#include "tcp/absent_stream.h"
#include "tcp/stream_path.h"
#include "plugin/listen_handle.h"
#include "base/logging.h"
#include "core/probes.h"
#include "plugin/path_planner.h"
#include "sla/pacing.h"
#include "sla/traffic_class.h"
#include "plugin/plugin_state.h"
#include "tcp/interfaces.h"
#include "tcp/tcp_stream.h"
#if FF_WITH_VERBS
#include "plugin/verbs_reconnect.h"
#include "plugin/verbs_setup.h"
#include "verbs/qp_attrs.h"
#endif

namespace ff {
namespace {

struct PathAttempt {
  tcp::Socket socket;
  sockaddr_storage local{};
  sockaddr_storage remote{};
  uint16_t sport_lo = 0;
  uint16_t sport_hi = 0;
  RouteLinks route;  // the planned path's fabric links (PlannedPath::route)
  enum class Stage { kConnecting, kHello, kVerbs, kDone, kAbsent } stage = Stage::kConnecting;
  HelloWire hello{};
  uint32_t sent = 0;
#if FF_WITH_VERBS
  std::unique_ptr<VerbsPathSetup> verbs;  // verbs: the QP brought up over this stream after the hello
  VerbsPathRecipe recipe;                 // verbs: how to make the QP again (failback)
#endif
};

struct PendingConnect {
  ListenHandle handle;
  uint64_t conn_id = 0;
  uint64_t conn_nonce = 0;
  ConnectionKey key{};  // signs this connection's hellos and, later, its rejoins
  int tos = -1;
  uint64_t pacing_bytes_per_s = 0;  // per path; 0 unpaced
  NetContext* ctx = nullptr;
  PathPlan plan;
  std::vector<PathAttempt> paths;
  std::chrono::steady_clock::time_point deadline;
  // When the first path completed: the others get kPathSetupGrace more, then the connection starts
  // without them (a link lost during setup must not hold the whole connection).
  std::chrono::steady_clock::time_point first_done{};
};

// Connects in progress, by an id kept in the handle's reserved bytes (never a pointer: the bytes of
// a handle are not trusted, and an id is never reused, so a stale handle cannot name another
// connect). NCCL calls connect() until it yields a comm, but a communicator that aborts or is
// destroyed mid-handshake never calls again: its entry (sockets, key) would stay forever. An entry
// not called for FLEXIFORCE_CONNECT_TIMEOUT_MS is expired (every connect, listen, closeListen and
// finalize sweeps), and finalize(ctx) drops that context's entries at once.
struct PendingEntry {
  std::unique_ptr<PendingConnect> pc;
  bool busy = false;  // a ConnectStep works on it now (outside the lock): nobody else may touch it
  std::chrono::steady_clock::time_point last_call;
};

struct PendingRegistry {
  std::mutex mu;
  std::map<uint64_t, PendingEntry> live;
  uint64_t next_id = 0;
  // Ids expired lately: a call that comes back with one gets an error, not a new connect.
  std::array<uint64_t, 64> expired{};
  size_t expired_count = 0;
};

PendingRegistry& Registry() {
  // Never destroyed: NCCL's proxy thread may still connect while static destructors run.
  static auto* r = [] {
    auto* reg = new PendingRegistry;
    // A random start: ids are not small numbers that stray bytes in a handle could equal.
    if (getrandom(&reg->next_id, sizeof(reg->next_id), 0) != sizeof(reg->next_id)) reg->next_id = 0x9e3779b97f4a7c15ull;
    return reg;
  }();
  return *r;
}

uint64_t LoadId(const void* handle) {
  uint64_t id = 0;
  std::memcpy(&id, static_cast<const char*>(handle) + kConnectStateOffset, sizeof(id));
  return id;
}

void StoreId(void* handle, uint64_t id) { std::memcpy(static_cast<char*>(handle) + kConnectStateOffset, &id, sizeof(id)); }

bool RecentlyExpired(const PendingRegistry& r, uint64_t id) {
  const auto end = r.expired.begin() + static_cast<std::ptrdiff_t>(std::min(r.expired_count, r.expired.size()));
  return std::find(r.expired.begin(), end, id) != end;
}

// Takes the entries `drop` selects out of the registry (under its lock); they are destroyed, their
// sockets closed, after the lock is released.
template <typename Pred>
std::vector<std::unique_ptr<PendingConnect>> TakeIdle(PendingRegistry& r, Pred drop) {
  std::vector<std::unique_ptr<PendingConnect>> out;
  for (auto it = r.live.begin(); it != r.live.end();) {
    if (!it->second.busy && drop(it->second)) {
      r.expired[r.expired_count++ % r.expired.size()] = it->first;
      out.push_back(std::move(it->second.pc));
      it = r.live.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

// The entry a ConnectStep works on: registered busy, released (or removed) when the step ends.
class ClaimedConnect {
 public:
  ClaimedConnect() = default;
  ClaimedConnect(const ClaimedConnect&) = delete;
  ClaimedConnect& operator=(const ClaimedConnect&) = delete;
  ~ClaimedConnect() {
    if (pc_ == nullptr) return;
    PendingRegistry& r = Registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.live.find(id_);
    if (it == r.live.end()) return;
    it->second.busy = false;
    it->second.last_call = std::chrono::steady_clock::now();
  }
  PendingConnect* get() const { return pc_; }
  // Looks up the handle's connect. Not found (never started, finished, or bytes we did not write):
  // Ok with get() == nullptr. Error when the id expired or another thread is connecting with it.
  Status Claim(void* handle) {
    const uint64_t id = LoadId(handle);
    if (id == 0) return Status::Ok();
    PendingRegistry& r = Registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.live.find(id);
    if (it == r.live.end()) {
      if (RecentlyExpired(r, id))
        return InvalidUsage("connect called again with a handle whose connect was abandoned and freed (no call for "
                            "FLEXIFORCE_CONNECT_TIMEOUT_MS, or its context finalized); start over with a fresh "
                            "handle");
      return Status::Ok();
    }
    if (it->second.busy) return InvalidUsage("connect called concurrently from two threads with one handle");
    it->second.busy = true;
    id_ = id;
    pc_ = it->second.pc.get();
    return Status::Ok();
  }
  // Registers a new connect for `handle`, busy.
  void Adopt(void* handle, std::unique_ptr<PendingConnect> pc) {
    PendingRegistry& r = Registry();
    std::lock_guard<std::mutex> lock(r.mu);
    do id_ = ++r.next_id;
    while (id_ == 0 || r.live.count(id_) != 0);
    pc_ = pc.get();
    r.live[id_] = PendingEntry{std::move(pc), true, std::chrono::steady_clock::now()};
    StoreId(handle, id_);
  }
  // The connect ended (a comm or an error): frees its state and clears the handle's bytes.
  void Finish(void* handle) {
    std::unique_ptr<PendingConnect> doomed;
    {
      PendingRegistry& r = Registry();
      std::lock_guard<std::mutex> lock(r.mu);
      auto it = r.live.find(id_);
      if (it != r.live.end()) {
        doomed = std::move(it->second.pc);
        r.live.erase(it);
      }
    }
    StoreId(handle, 0);
    pc_ = nullptr;
  }

 private:
  uint64_t id_ = 0;
  PendingConnect* pc_ = nullptr;
};

// One line per sweep: NCCL abandons a communicator's connects together.
void LogDropped(const std::vector<std::unique_ptr<PendingConnect>>& dropped, const char* why) {
  if (dropped.empty()) return;
  size_t sockets = 0;
  std::string peers;
  for (const auto& pc : dropped) {
    for (const auto& a : pc->paths) sockets += a.socket.valid() ? 1 : 0;
    const std::string p = tcp::PeerToString(pc->handle.addrs[0]);
    if (peers.find(p) == std::string::npos) peers += (peers.empty() ? "" : ", ") + p;
  }
  FF_WARN("freed %zu unfinished connect(s) to %s: %s; %zu socket(s) closed", dropped.size(), peers.c_str(), why,
          sockets);
}

Status StartPath(PathAttempt& a) { return tcp::StartConnect(a.remote, &a.local, a.sport_lo, a.sport_hi, &a.socket); }

}  // namespace

size_t ExpireAbandonedConnects() {
  const auto idle = std::chrono::milliseconds(PluginState::Get().config().connect_timeout_ms);
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<PendingConnect>> dropped;
  {
    PendingRegistry& r = Registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.live.empty()) return 0;
    dropped = TakeIdle(r, [&](const PendingEntry& e) { return now - e.last_call >= idle; });
  }
  LogDropped(dropped, "NCCL stopped calling them (no call for FLEXIFORCE_CONNECT_TIMEOUT_MS)");
  return dropped.size();
}

size_t DropPendingConnects(const NetContext* ctx) {
  std::vector<std::unique_ptr<PendingConnect>> dropped;
  {
    PendingRegistry& r = Registry();
    std::lock_guard<std::mutex> lock(r.mu);
    dropped = TakeIdle(r, [&](const PendingEntry& e) { return e.pc->ctx == ctx; });
  }
  LogDropped(dropped, "their context was finalized");
  return dropped.size();
}

size_t PendingConnectCount() {
  PendingRegistry& r = Registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.live.size();
}

Status ConnectStep(NetContext* ctx, int config_tc, int dev, void* handle, std::unique_ptr<SendComm>* out) {
  out->reset();
  PluginState& st = PluginState::Get();
  const Config& cfg = st.config();
  if (handle == nullptr) return InvalidArgument("connect handle is NULL");
  if (dev < 0 || dev >= st.device_count())
    return InvalidArgument("connect on device " + std::to_string(dev) + "; accepted 0 to " +
                           std::to_string(st.device_count() - 1));
  ExpireAbandonedConnects();
  ClaimedConnect claim;
  if (Status cs = claim.Claim(handle); !cs.ok()) return cs;
  PendingConnect* pc = claim.get();
  if (pc == nullptr) {
    if (Status s = st.PrepareVerbsForThisProcess(); !s.ok()) return s;
    auto fresh = std::make_unique<PendingConnect>();
    Status ds = DecodeHandle(handle, &fresh->handle);
    if (!ds.ok()) return ds;
    if (getrandom(&fresh->conn_id, sizeof(fresh->conn_id), 0) != sizeof(fresh->conn_id) ||
        getrandom(&fresh->conn_nonce, sizeof(fresh->conn_nonce), 0) != sizeof(fresh->conn_nonce))
      return SystemError(ErrnoMessage("getrandom", errno));
    fresh->key = DeriveConnectionKey(fresh->handle.secret, fresh->conn_id, fresh->conn_nonce);
    fresh->deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(cfg.connect_timeout_ms);
    TaskProfile& task = st.task();
    sla::TrafficClassInputs tci;
    tci.steer = task.steer;
    tci.comm_config = config_tc != FF_NCCL_NET_TRAFFIC_CLASS_UNDEF ? config_tc : ctx->traffic_class;
    tci.knob = cfg.traffic_class;
    tci.level = task.level;
    sla::TrafficClassDecision tcd = sla::DecideTrafficClass(tci);
    fresh->tos = tcd.tos;
    fresh->ctx = ctx;
    const int npaths = cfg.paths_per_connection;
    if (st.verbs()) {
      // One RC queue pair per path on the device NCCL chose, each with its own flow label (the RoCE v2
      // UDP source port, so ECMP spreads them); each is set up over a TCP stream from the device's
      // bootstrap interface to the listener's handle address.
      const VerbsDevice& vd = st.verbs_devices()[static_cast<size_t>(dev)];
      sockaddr_storage local = st.devices()[static_cast<size_t>(vd.bootstrap)].addr;
      if (local.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&local)->sin_port = 0;
      else reinterpret_cast<sockaddr_in6*>(&local)->sin6_port = 0;
      fresh->plan = PathPlan{};
      for (int i = 0; i < npaths; ++i) fresh->plan.paths.push_back(PlannedPath{local, fresh->handle.addrs[0], 0, 0});
      fresh->plan.path_name = vd.name + ":" + std::to_string(vd.port) + " -> " + tcp::PeerToString(fresh->handle.addrs[0]);
      std::string ports;
      for (int s : st.VerbsSlots(dev, npaths)) {
        const VerbsDevice& sd = st.verbs_devices()[static_cast<size_t>(s)];
        ports += (ports.empty() ? "" : ", ") + sd.name + ":" + std::to_string(sd.port);
      }
      fresh->plan.summary = std::to_string(npaths) + " RC QP(s) on " + ports + " (handshake over " +
                            st.devices()[static_cast<size_t>(vd.bootstrap)].name + ")";
    } else {
      fresh->plan = PlanPaths(dev, fresh->handle, npaths, task);
    }
    sla::PacingInputs pin;
    pin.steer = task.steer;
    pin.level = task.level;
    pin.level3_cap_pct = cfg.level3_cap_pct;
    pin.link_mbps = cfg.link_speed_mbps > 0 ? cfg.link_speed_mbps
                    : st.verbs()           ? st.verbs_devices()[static_cast<size_t>(dev)].speed_mbps
                                           : st.devices()[static_cast<size_t>(dev)].speed_mbps;
    pin.npaths = npaths;
    const sla::PacingDecision pace = sla::DecidePacing(pin);
    fresh->pacing_bytes_per_s = st.verbs() ? 0 : pace.path_bytes_per_s;  // TCP pacing (SO_MAX_PACING_RATE) only
    FF_INFO(NCCL_NET, "connect to %s: task %s %s, TOS %d (%s), pacing %s (%.0f Mbit/s per connection); paths: %s",
            tcp::PeerToString(fresh->handle.addrs[0]).c_str(), task.decl.task.id.c_str(), sla::SlaLevelName(task.level),
            tcd.tos, sla::TrafficClassSourceName(tcd.source), pace.reason, pace.connection_bytes_per_s * 8 / 1e6,
            fresh->plan.summary.c_str());
    if (!fresh->plan.sla_attainable) {
      FF_INFO(NCCL_NET, "SLA %u us unattainable on every path to %s; using the best path anyway", task.sla_us,
              tcp::PeerToString(fresh->handle.addrs[0]).c_str());
      if (task.stats && task.stats_task != sla::StatsTable::kInvalid) task.stats->AddSlaUnattainable(task.stats_task);
    }
    for (int i = 0; i < npaths; ++i) {
      PathAttempt a;
      FF_PROBE(path_choice, task.task_hash, tcp::PeerToString(fresh->handle.addrs[0]).c_str(), i,
               fresh->plan.path_id, fresh->plan.sla_attainable ? 1 : 0);
      a.local = fresh->plan.paths[i].local;
      a.remote = fresh->plan.paths[i].remote;
      a.sport_lo = fresh->plan.paths[i].sport_lo;
      a.sport_hi = fresh->plan.paths[i].sport_hi;
      a.route = fresh->plan.paths[i].route;
      // The eager threshold tells the receiver what may come before its descriptors: SendComm keeps
      // a ring only when both knobs are non-zero, and never over verbs (its options, further down).
      const uint32_t eager = !st.verbs() && cfg.eager_bytes > 0 && cfg.eager_ring_bytes > 0
                                 ? static_cast<uint32_t>(cfg.eager_bytes)
                                 : 0;
      a.hello = MakeSignedHello(fresh->key, fresh->conn_id, fresh->conn_nonce, npaths, i,
                                static_cast<uint64_t>(cfg.chunk_bytes), task.sla_us,
                                st.verbs() ? kHelloFlagVerbs : uint16_t{0}, eager);
#if FF_WITH_VERBS
      if (st.verbs()) {
        verbs::RdmaPathOptions ro;
        // Distinct flow labels per path and connection: the label becomes the RoCE v2 source port.
        const uint16_t sport = static_cast<uint16_t>(0xC000 | ((fresh->conn_id >> 8) + static_cast<uint64_t>(i) * 0x1111) % 0x4000);
        if (Status fs = verbs::FlowLabelForUdpSourcePort(sport, &ro.qp.flow_label); !fs.ok()) return fs;
        ApplyQpConfig(cfg, tcd.tos, tcd.sl, &ro.qp);
        const std::vector<int> slots = st.VerbsSlots(dev, npaths);
        const int pdev = slots[static_cast<size_t>(i) % slots.size()];
        ro.key_slot = static_cast<int>(static_cast<size_t>(i) % slots.size());
        a.recipe = VerbsPathRecipe{st.verbs_devices()[static_cast<size_t>(pdev)].rdma, ro};
        Status vs = VerbsPathSetup::Create(VerbsPathSetup::Role::kConnector, i, *a.recipe.dev, ro, &a.verbs);
        if (!vs.ok()) return vs;
      }
#endif
      Status s = StartPath(a);
      if (!s.ok()) return s;
      fresh->paths.push_back(std::move(a));
    }
    pc = fresh.get();
    claim.Adopt(handle, std::move(fresh));
  }

  bool all_done = true;
  const auto now = std::chrono::steady_clock::now();
  const bool grace_over = pc->first_done != std::chrono::steady_clock::time_point{} &&
                          now - pc->first_done >= PathSetupGrace(cfg.connect_timeout_ms);
  for (auto& a : pc->paths) {
    if (a.stage == PathAttempt::Stage::kConnecting && grace_over) {
      a.socket.reset();
      a.stage = PathAttempt::Stage::kAbsent;
      continue;
    }
    if (a.stage == PathAttempt::Stage::kConnecting) {
      int err = 0;
      tcp::ConnectProgress cp = tcp::PollConnect(a.socket.fd(), &err);
      if (cp == tcp::ConnectProgress::kFailed) {
        if ((err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH) &&
            std::chrono::steady_clock::now() < pc->deadline) {
          a.socket.reset();
          Status s = StartPath(a);  // the listener may not be up yet; try again
          if (!s.ok()) {
            claim.Finish(handle);
            return s;
          }
          all_done = false;
          continue;
        }
        const bool retried = err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH;
        Status s = RemoteError(ErrnoMessage("connect to " + tcp::PeerToString(a.remote), err) +
                               (retried ? ", still after retrying for " + std::to_string(cfg.connect_timeout_ms) +
                                              " ms (FLEXIFORCE_CONNECT_TIMEOUT_MS): is the peer's listener gone?"
                                        : std::string()));
        claim.Finish(handle);
        return s;
      }
      if (cp == tcp::ConnectProgress::kPending) {
        if (std::chrono::steady_clock::now() > pc->deadline) {
          Status s = RemoteError("connect to " + tcp::PeerToString(a.remote) + " timed out after " +
                                 std::to_string(cfg.connect_timeout_ms) + " ms (FLEXIFORCE_CONNECT_TIMEOUT_MS)");
          claim.Finish(handle);
          return s;
        }
        all_done = false;
        continue;
      }
      tcp::PathSocketOptions o;
      o.tos = pc->tos;
      o.buffer_bytes = static_cast<int>(cfg.socket_buffer_bytes);
      o.congestion = cfg.tcp_congestion;
      o.user_timeout_ms = cfg.peer_timeout_ms;
      o.max_pacing_bytes_per_s = pc->pacing_bytes_per_s;
      Status s = tcp::ApplyPathOptions(a.socket.fd(), a.remote.ss_family, o);
      if (!s.ok()) {
        claim.Finish(handle);
        return s;
      }
      a.stage = PathAttempt::Stage::kHello;
    }
    if (a.stage == PathAttempt::Stage::kHello) {
      iovec iov{reinterpret_cast<char*>(&a.hello) + a.sent, sizeof(HelloWire) - a.sent};
      ssize_t w = tcp::SendSome(a.socket.fd(), &iov, 1);
      if (w < 0) {
        Status s = RemoteError(ErrnoMessage("hello to " + tcp::PeerToString(a.remote), errno));
        claim.Finish(handle);
        return s;
      }
      a.sent += static_cast<uint32_t>(w);
      if (a.sent == sizeof(HelloWire)) a.stage = st.verbs() ? PathAttempt::Stage::kVerbs : PathAttempt::Stage::kDone;
    }
#if FF_WITH_VERBS
    if (a.stage == PathAttempt::Stage::kVerbs) {
      bool done = false;
      Status vs = a.verbs->Step(a.socket.fd(), &done);
      if (!vs.ok()) {
        Status s = RemoteError("RDMA setup with " + tcp::PeerToString(a.remote) + ": " + vs.message());
        claim.Finish(handle);
        return s;
      }
      if (!done && std::chrono::steady_clock::now() > pc->deadline) {
        Status s = RemoteError("RDMA setup with " + tcp::PeerToString(a.remote) + " timed out after " +
                               std::to_string(cfg.connect_timeout_ms) + " ms (FLEXIFORCE_CONNECT_TIMEOUT_MS)");
        claim.Finish(handle);
        return s;
      }
      if (done) a.stage = PathAttempt::Stage::kDone;
    }
#endif
    if (a.stage == PathAttempt::Stage::kDone && pc->first_done == std::chrono::steady_clock::time_point{})
      pc->first_done = now;
    all_done &= a.stage == PathAttempt::Stage::kDone || a.stage == PathAttempt::Stage::kAbsent;
  }
  if (!all_done) return Status::Ok();

  std::vector<std::unique_ptr<Path>> paths;
  std::vector<int> absent;
  std::vector<std::string> path_ends(pc->paths.size());  // for the path_up probe
  for (size_t i = 0; i < pc->paths.size(); ++i) {
    auto& a = pc->paths[i];
    if (a.stage == PathAttempt::Stage::kAbsent) {
      absent.push_back(static_cast<int>(i));
      paths.push_back(std::make_unique<StreamPath>(
          static_cast<int>(i),
          std::make_unique<AbsentStream>(tcp::AddressToString(a.local) + "->" + tcp::PeerToString(a.remote) +
                                         " (not connected)")));
      paths.back()->MarkDead();
      continue;
    }
#if FF_WITH_VERBS
    if (a.verbs) {
      paths.push_back(a.verbs->TakePath(a.socket.release()));  // the stream now tells of the peer's exit
      continue;
    }
#endif
    std::string desc = tcp::AddressToString(a.local) + ":" + std::to_string(tcp::LocalPort(a.socket.fd())) + "->" +
                       tcp::PeerToString(a.remote);
    path_ends[i] = desc;
    paths.push_back(
        std::make_unique<StreamPath>(static_cast<int>(i), std::make_unique<tcp::TcpStream>(std::move(a.socket), desc)));
    paths.back()->set_route(a.route);
  }
  CommOptions opts;
  opts.chunk_bytes = static_cast<uint64_t>(cfg.chunk_bytes);
  opts.stripe_min_bytes = static_cast<uint64_t>(cfg.stripe_min_bytes);
  opts.max_queued_chunks = cfg.max_queued_chunks;
  opts.path_stall_ms = static_cast<uint32_t>(cfg.path_stall_ms);
  opts.path_stall_fast_ms = static_cast<uint32_t>(cfg.path_stall_fast_ms);
  opts.resend_timeout_ms = static_cast<uint32_t>(cfg.resend_timeout_ms);
  opts.path_loss_ppm = static_cast<uint32_t>(cfg.path_loss_ppm);
  opts.link_events = cfg.link_events;
  TaskProfile& task = st.task();
  opts.stats_task = task.stats_task;
  opts.task_hash = task.task_hash;
  opts.sla_us = task.sla_us;
  opts.stats = task.stats.get();
  opts.profile = &task;
  opts.task = task.decl.task.id;
  opts.path_id = pc->plan.path_id;
  opts.path_name = pc->plan.path_name;
  opts.net_attr = &pc->ctx->attr;
  opts.failback_ms = static_cast<uint32_t>(cfg.failback_ms);
  opts.dual_path_ms = static_cast<uint32_t>(cfg.dual_path_ms);
  opts.eager_bytes = static_cast<uint64_t>(cfg.eager_bytes);
  opts.eager_ring_bytes = static_cast<uint64_t>(cfg.eager_ring_bytes);
  opts.coalesce_ns = static_cast<uint64_t>(cfg.coalesce_us) * 1000;
  opts.nic_watch = st.nic_watch();
  if (st.verbs()) {
    // Eager sends would post from the retransmit ring, registering and deregistering pieces of it per
    // chunk; over verbs every send completes on its acknowledgement.
    opts.eager_bytes = 0;
    // A completed RDMA write is in the peer's memory (RC), so the "peer holds every byte but never
    // acknowledges" re-send has nothing to recover - and a re-sent write would land in a buffer the
    // receiver may have completed and NCCL reused.
    opts.resend_timeout_ms = 0;
    // No hedging either: a hedged path is drained but kept open, and its late writes could land in a
    // buffer the re-sent copies let the receiver complete. Over verbs a silent path is fenced (QP to
    // ERR, flushed) by the absolute rule, FLEXIFORCE_PATH_STALL_MS, before its chunks go elsewhere.
    opts.path_stall_fast_ms = 0;
  }
  if (cfg.failback_ms > 0) {
    tcp::PathSocketOptions so;
    so.tos = pc->tos;
    so.buffer_bytes = static_cast<int>(cfg.socket_buffer_bytes);
    so.congestion = cfg.tcp_congestion;
    so.user_timeout_ms = cfg.peer_timeout_ms;
    so.max_pacing_bytes_per_s = pc->pacing_bytes_per_s;
    std::vector<PathEndpoint> endpoints;
    for (const auto& a : pc->paths) endpoints.push_back(PathEndpoint{a.local, a.remote, a.sport_lo, a.sport_hi});
#if FF_WITH_VERBS
    if (st.verbs()) {
      // A failed QP comes back as a new QP on its port, set up over a rejoin stream from the bootstrap
      // interface (plugin/verbs_reconnect.h); one attempt may take the connect timeout, 5 s at most.
      std::vector<VerbsPathRecipe> recipes;
      for (const auto& a : pc->paths) recipes.push_back(a.recipe);
      so.max_pacing_bytes_per_s = 0;
      opts.reconnector = std::make_shared<VerbsReconnector>(
          pc->conn_id, pc->key, static_cast<int>(pc->paths.size()), opts.chunk_bytes, opts.sla_us, endpoints.front(),
          std::move(recipes), so, cfg.link_events,
          std::min<uint64_t>(uint64_t(cfg.connect_timeout_ms), 5000) * 1'000'000);
    }
#endif
    if (!st.verbs())
      opts.reconnector = std::make_shared<TcpReconnector>(pc->conn_id, pc->key,
                                                          static_cast<int>(pc->paths.size()), opts.chunk_bytes,
                                                          opts.sla_us, std::move(endpoints), so, cfg.link_events);
  }
  std::string peer = tcp::PeerToString(pc->handle.addrs[0]);
  *out = std::make_unique<SendComm>(std::move(paths), opts, peer);
  FF_PROBE(connect, opts.task_hash, peer.c_str(), static_cast<int>(pc->paths.size() - absent.size()), opts.sla_us,
           pc->tos);
  if (FF_PROBE_ENABLED(path_up))
    for (size_t i = 0; i < path_ends.size(); ++i)
      if (!path_ends[i].empty()) FF_PROBE(path_up, opts.task_hash, peer.c_str(), static_cast<int>(i), path_ends[i].c_str());
  for (int i : absent) (*out)->StartWithoutPath(i);
  if (!absent.empty())
    FF_WARN("connected to %s with %zu of %zu path(s): the others did not connect within %lld ms of the first; "
            "they join through failback",
            peer.c_str(), pc->paths.size() - absent.size(), pc->paths.size(),
            static_cast<long long>(PathSetupGrace(cfg.connect_timeout_ms).count()));
  else
    FF_INFO(NCCL_NET, "connected to %s with %zu path(s)", peer.c_str(), pc->paths.size());
  claim.Finish(handle);
  return Status::Ok();
}

}  // namespace ff
