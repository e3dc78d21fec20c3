// Path bookkeeping and error policy common to both communicator directions.
#include "core/comm.h"

#include <net/if.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/logging.h"
#include "core/probes.h"
#include "core/task_profile.h"
#include "health/nic_watch.h"
#include "sla/profiler_event_pool.h"

namespace ff {

Comm::Comm(std::vector<std::unique_ptr<Path>> paths, const CommOptions& opts, std::string peer)
    : paths_(std::move(paths)),
      opts_(opts),
      peer_(std::move(peer)),
      watchdog_(uint64_t{opts.path_stall_ms} * 1'000'000, opts.link_events, uint64_t{opts.path_stall_fast_ms} * 1'000'000) {
  stats_slots_.fill(sla::StatsTable::kInvalid);
  control_rx_.reset(new char[paths_.size() * kMaxControlPayload]);
  watchdog_.set_loss_ratio(opts.path_loss_ppm / 1e6);
}

Comm::~Comm() {
  FF_PROBE_BATCH_FIRE(probe_batch_, ProbeSource());  // a tracer counts every message it completed
  if (opts_.profile != nullptr) opts_.profile->PublishHeat();
  // The slots stay (a later connection to the same peer finds them) but may now be reclaimed for
  // other keys, their totals kept under the task's closed connections.
  if (opts_.stats != nullptr)
    for (uint32_t slot : stats_slots_) opts_.stats->Release(slot);
}

uint16_t Comm::Classify(void* phandle) const {
  sla::CollectiveAttribution prof;
  if (phandle != nullptr) prof = sla::AttributeNetEvent(phandle);
  // setNetAttr writes these on NCCL's service thread (plugin/net_api.cc): atomic loads.
  auto get = [](const uint32_t& f) {
    return std::atomic_ref(const_cast<uint32_t&>(f)).load(std::memory_order_relaxed);
  };
  uint32_t op = opts_.net_attr ? get(opts_.net_attr->op) : sla::kNetAttrUndefined;
  uint32_t algo = opts_.net_attr ? get(opts_.net_attr->algo) : sla::kNetAttrUndefined;
  return static_cast<uint16_t>(sla::ChooseAttribution(prof, op, algo).collective);
}

void Comm::Record(uint16_t collective, uint64_t bytes, uint64_t latency_ns, sla::Direction dir, uint64_t now_ns) {
  if (opts_.profile != nullptr && dir == sla::Direction::kSend) opts_.profile->AddBytes(bytes, now_ns);
  if (opts_.stats == nullptr) return;
  size_t idx = collective <= 10 ? collective : collective == static_cast<uint16_t>(sla::Collective::kMixed) ? 11 : 12;
  uint32_t& slot = stats_slots_[idx];
  if (slot == sla::StatsTable::kInvalid) {
    sla::StatsKey key{opts_.task, static_cast<sla::Collective>(collective), peer_, opts_.path_id, opts_.path_name};
    slot = opts_.stats->Resolve(key);
  }
  opts_.stats->Record(slot, bytes, latency_ns, dir);
}

int Comm::alive_paths() const {
  int n = 0;
  for (const auto& p : paths_) n += p->alive();
  return n;
}

int Comm::usable_paths() const {
  int n = 0;
  for (const auto& p : paths_) n += p->alive() && !p->draining();
  return n;
}

void Comm::Fail(Status s) {
  if (!error_.ok()) return;
  OnFailing();
  FF_WARN("communicator with %s failed: %s", peer_.c_str(), s.message().c_str());
  error_ = std::move(s);
  OnFailed();
}

Path* Comm::FirstAlive() {
  for (auto& p : paths_)
    if (p->alive()) return p.get();
  return nullptr;
}

bool Comm::PathDown(Path& p, const std::string& why, PathFault cause) {
  if (!p.alive()) return alive_paths() > 0;
  const uint64_t silent_ns = watchdog_.SilentFor(p.index(), NowNs());
  p.MarkDead();
  // A path we gave up on while its socket still works (stall, carrier) is reset, so nothing it
  // still holds can arrive after the data was re-sent elsewhere.
  if (cause != PathFault::kNone) p.Fence();
  p.DropQueued();
  int left = alive_paths();
  if (left == 0) {
    Fail(RemoteError("lost the last path to " + peer_ + ": " + why));
    return false;
  }
  // A lossy path beats none: when only drained paths are left, they carry traffic again.
  if (usable_paths() == 0) {
    for (auto& q : paths_) {
      if (!q->alive() || !q->draining()) continue;
      q->SetDraining(false);
      watchdog_.NoteReadmitted(q->index());
    }
  }
  OnPathLost(p, why, silent_ns);
  return true;
}

bool Comm::OnPathSilent(Path& p, const std::string& why, uint64_t) {
  return PathDown(p, why, PathFault::kSilent);
}

void Comm::OnPathLost(Path& p, const std::string& why, uint64_t silent_ns) {
  FF_WARN("path %d (%s) to %s is down: %s (silent %.1f ms); continuing on %s", p.index(),
          p.Describe().c_str(), peer_.c_str(), why.c_str(), silent_ns / 1e6, DescribeAlive().c_str());
}

std::string Comm::DescribePaths() const {
  std::string out;
  for (const auto& q : paths_) out += "; " + q->DebugState();
  return out;
}

std::string Comm::DescribeAlive() const {
  std::string out;
  for (const auto& q : paths_) {
    if (!q->alive()) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(q->index()) + " (" + q->Describe() + ")";
  }
  return out.empty() ? "no path" : out;
}

void Comm::QueueControl(Path& p, FrameType type, const void* payload, uint32_t length) {
  FrameHeader h{};
  h.type = static_cast<uint8_t>(type);
  h.path = static_cast<uint16_t>(p.index());
  h.length = length;
  h.task_hash = opts_.task_hash;
  SealHeader(&h);
  p.Queue(h, static_cast<const char*>(payload));
}

char* Comm::ControlBuffer(int path) { return control_rx_.get() + static_cast<size_t>(path) * kMaxControlPayload; }

void Comm::ReplacePath(int index, std::unique_ptr<Path> path) {
  auto& slot = paths_[static_cast<size_t>(index)];
  if (path->route().empty()) path->set_route(slot->route());  // failback reconnects over the same route
  PathWatchdog::ClearRouteFailure(path->route());             // which it just crossed
  if (slot->alive()) slot->Fence();  // stale: the peer gave up on it, whatever it still holds is re-sent
  slot = std::move(path);
  if (dual_.active() && dual_.subject() == index) dual_.Cancel();
  PathState& st = St(index);
  ++st.generation;
  st.hedged = false;
  st.closed_by_peer = false;
  st.route_failed = false;
  st.peer_route_failed = false;
  st.route_drained_ns = 0;
  st.ifname.clear();
  nic_gen_seen_ = ~uint64_t{0};  // judge the new path's NIC on the next check
  watchdog_.ResetPath(index);
}

const std::string& Comm::PathInterface(int i) {
  std::string& name = St(i).ifname;
  if (!name.empty()) return name;
  const int index = paths_[static_cast<size_t>(i)]->LocalIfindex();
  char buf[IF_NAMESIZE] = {};
  if (index > 0 && if_indextoname(static_cast<unsigned>(index), buf) != nullptr) name = buf;
  return name;
}

void Comm::CheckNics(uint64_t now_ns) {
  NicWatch* nw = opts_.nic_watch;
  if (nw == nullptr) return;
  const uint64_t gen = nw->Poll(now_ns);
  if (gen == nic_gen_seen_) return;
  nic_gen_seen_ = gen;
  for (auto& p : paths_) {
    if (!p->alive()) continue;
    const std::string& name = PathInterface(p->index());
    if (name.empty()) continue;
    const bool degraded = nw->Degraded(name);
    if (degraded == St(p->index()).nic_degraded) continue;
    St(p->index()).nic_degraded = degraded;
    OnNicVerdict(*p, degraded, "NIC " + name + " degraded: " + nw->Reason(name));
  }
}

void Comm::OnNicVerdict(Path& p, bool degraded, const std::string& why) {
  // Recovery needs nothing here: a drained path returns through ReadmitDrained once clean.
  if (degraded) SoftDegrade(p, why, NowNs());
}

void Comm::SoftDegrade(Path& p, const std::string& why, uint64_t now_ns) {
  // Move traffic only while another path takes it, and one whose NICs are healthy: when every path's
  // NIC is degraded alike, moving traffic gains nothing. A degraded path stays better than an error.
  if (!p.alive() || p.draining() || usable_paths() < 2) return;
  bool healthy_other = false;
  for (const auto& q : paths_)
    healthy_other |= q.get() != &p && q->alive() && !q->draining() && !NicDegraded(q->index());
  if (!healthy_other) return;
  if (opts_.dual_path_ms == 0)
    Drain(p, why);
  else if (!dual_.active())
    StartDualPath(p, DualPathCompare::Kind::kLeave, why, now_ns);
}

bool Comm::CheckHealth(uint64_t now) {
  if (now >= last_health_ns_ && now - last_health_ns_ < kHealthGapNs) return true;
  last_health_ns_ = now;
  if (alive_paths() >= 2) CheckNics(now);
  // The watchdog only ever removes a path while another remains: the last path is left to the
  // socket's own timeout (FLEXIFORCE_PEER_TIMEOUT_MS), which then fails the communicator.
  if (!watchdog_.enabled() || alive_paths() < 2) return true;
  ReadmitDrained(now);
  if (dual_.active())
    for (const auto& p : paths_)
      if (p->alive()) dual_.ObserveRtt(p->index(), watchdog_.LastRttUs(p->index()));
  if (dual_.Due(now)) FinishDualPath();
  PathFaultReport rep;
  if (!watchdog_.Check(paths_, now, &rep)) {
    uint64_t usable = 0;
    for (const auto& p : paths_)
      if (p->alive() && !p->draining() && p->index() < 64) usable |= uint64_t{1} << p->index();
    if (const int w = watchdog_.WitnessWanted(now, usable); w >= 0) SendWitness(*paths_[static_cast<size_t>(w)]);
    return true;
  }
  Path& p = *paths_[static_cast<size_t>(rep.path)];
  if (rep.cause == PathFault::kSocketError && PeerClosedAfterAll(p, rep.err)) return true;
  const std::string why = std::string(PathFaultName(rep.cause)) + " (" + rep.detail + ")";
  if (IsRouteFailure(rep.cause, rep.err)) NoteRouteFailure(p, PathFaultName(rep.cause));
  if (IsSoftFault(rep.cause)) {
    SoftDegrade(p, why, now);  // debounced soft signal
    return true;
  }
  if (rep.cause == PathFault::kRouteFate && rep.idle) {
    // Nothing stuck on it yet: keep new chunks off a route that just failed elsewhere, and ask for an
    // acknowledgement: a working route answers (which clears its failure, and the path returns after
    // the failback time), a dead one leaves the path to the absolute rule and failback.
    if (usable_paths() >= 2) {
      Drain(p, why);
      St(p.index()).route_drained_ns = NowNs();
      ProbeRoute(p);
    }
    return true;
  }
  if (IsHedgeFault(rep.cause)) return OnPathSilent(p, why, rep.silent_ns);
  return PathDown(p, why, rep.cause);
}

void Comm::NoteRouteFailure(Path& p, const char* how) {
  if (!p.alive()) return;
  St(p.index()).route_failed = true;
  if (p.route().empty()) return;
  PathWatchdog::RecordRouteFailure(p.route(), NowNs());
  FF_INFO(NCCL_NET, "path %d (%s) to %s: its route failed (%s); other paths of this process over its %d fabric "
          "link(s) are suspect", p.index(), p.Describe().c_str(), peer_.c_str(), how, p.route().n);
}

void Comm::Drain(Path& p, const std::string& why) {
  p.SetDraining(true);
  FF_PROBE(drain, opts_.task_hash, peer_.c_str(), p.index());
  watchdog_.NoteDrained(p.index(), NowNs());
  if (opts_.stats != nullptr && opts_.stats_task != sla::StatsTable::kInvalid)
    opts_.stats->AddFailover(opts_.stats_task, 1, 0, 0);
  FF_WARN("draining path %d (%s) to %s: %s; new chunks go to %s, nothing re-sent", p.index(),
          p.Describe().c_str(), peer_.c_str(), why.c_str(), DescribeUsable().c_str());
}

void Comm::StartDualPath(Path& p, DualPathCompare::Kind kind, const std::string& why, uint64_t now_ns) {
  dual_.Start(p.index(), kind, now_ns, uint64_t{opts_.dual_path_ms} * 1'000'000, paths_);
  FF_WARN("dual-path to %s: path %d (%s) %s; both keep carrying for %u ms and are compared before traffic moves",
          peer_.c_str(), p.index(), p.Describe().c_str(),
          kind == DualPathCompare::Kind::kLeave ? ("is degraded: " + why).c_str() : "is returning to service",
          opts_.dual_path_ms);
}

void Comm::FinishDualPath() {
  const int i = dual_.subject();
  const DualPathCompare::Kind kind = dual_.kind();
  const DualPathVerdict v = dual_.Finish(paths_);
  Path& p = *paths_[static_cast<size_t>(i)];
  if (!p.alive() || p.draining()) return;
  if (!v.conclusive && dual_.extensions() < DualPathCompare::kMaxExtensions) {
    // Too little traffic in the window to compare (between collectives): look again.
    dual_.Extend(NowNs(), uint64_t{opts_.dual_path_ms} * 1'000'000, paths_);
    return;
  }
  const bool leaving = kind == DualPathCompare::Kind::kLeave;
  if (v.subject_worse && usable_paths() >= 2) {
    ++dual_path_moves_;
    Drain(p, std::string("dual-path comparison over ") +
                 std::to_string(opts_.dual_path_ms * static_cast<uint32_t>(dual_.extensions() + 1)) + " ms: " + v.why +
                 (leaving ? "; the other paths are better, cutting over" : "; the returning path is worse, drained again"));
    return;
  }
  ++dual_path_keeps_;
  watchdog_.NoteReadmitted(i);  // the detections that started this comparison are spent
  FF_WARN("dual-path to %s: keeping path %d (%s): %s; %s", peer_.c_str(), i, p.Describe().c_str(),
          v.why.c_str(), leaving ? "no other path is better, so moving traffic would not help" : "it is back in full service");
}

void Comm::ReadmitDrained(uint64_t now_ns) {
  for (auto& p : paths_) {
    if (!p->alive() || !p->draining() || NicDegraded(p->index()) || !watchdog_.ReadyToReadmit(p->index(), now_ns))
      continue;
    PathState& st = St(p->index());
    // A path drained because its route failed elsewhere, which has since answered its probe: the
    // route works (for its links at least).
    if (st.route_drained_ns != 0 && watchdog_.LastAdvanceNs(p->index()) > st.route_drained_ns)
      PathWatchdog::ClearRouteFailure(p->route());
    if (PathWatchdog::RouteFailedAt(p->route(), now_ns) != 0) continue;  // a link under it failed lately
    OnReadmit(*p);
    p->SetDraining(false);
    watchdog_.NoteReadmitted(p->index());
    St(p->index()).hedged = false;
    st.route_drained_ns = 0;
    FF_WARN("path %d (%s) to %s is back in service: no retransmission for the failback time", p->index(),
            p->Describe().c_str(), peer_.c_str());
    if (opts_.dual_path_ms > 0 && !dual_.active()) StartDualPath(*p, DualPathCompare::Kind::kReturn, "", now_ns);
  }
}

std::string Comm::DescribeUsable() const {
  std::string out;
  for (const auto& q : paths_) {
    if (!q->alive() || q->draining()) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(q->index()) + " (" + q->Describe() + ")";
  }
  return out.empty() ? "no path" : out;
}

bool Comm::HandlePump(Path& p, PumpResult r) {
  switch (r) {
    case PumpResult::kIdle:
    case PumpResult::kStalled:
      return true;
    case PumpResult::kClosed:
      // The peer may have finished and closed while its last acknowledgement waits on another path:
      // read the other paths before calling this a failure.
      if (ExpectingTraffic()) {
        for (auto& q : paths_)
          if (q.get() != &p && q->alive()) (void)q->Poll(*this);
      }
      if (!ExpectingTraffic()) {
        // An orderly close with nothing outstanding is not an error; the path is simply gone, and
        // the peer that closed it will not want it back (no failback).
        St(p.index()).closed_by_peer = true;
        p.MarkDead();
        return true;
      }
      return PathDown(p, "peer closed the connection");
    case PumpResult::kIoError:
      if (PeerClosedAfterAll(p, p.last_errno())) return true;
      if (IsRouteFailure(PathFault::kNone, p.last_errno())) NoteRouteFailure(p, "receive failed");
      // The transport's own account, when it has one (verbs: the async event or failed completion).
      return PathDown(p, ErrnoMessage("receive failed", p.last_errno()) + (p.rx_error().empty() ? "" : "; " + p.rx_error()));
    case PumpResult::kBadFrame:
      Fail(RemoteError(p.rx_error()));
      return false;
    case PumpResult::kRejected:
      Fail(RemoteError(reject_reason_));
      return false;
  }
  return true;
}

bool Comm::PeerClosedAfterAll(Path& p, int err) {
  if (!(closing_ || PeerClosesFirst()) || (err != ECONNRESET && err != EPIPE) || !p.alive()) return false;
  // What the peer sent before it closed is still readable: its last acknowledgement may be on any path.
  for (auto& q : paths_)
    if (q->alive()) (void)q->Poll(*this);
  if (!error_.ok() || !p.alive() || !NothingOwed()) return false;
  FF_INFO(NCCL_NET, "path %d (%s) to %s: the peer closed its end (%s) with nothing owed either way", p.index(),
          p.Describe().c_str(), peer_.c_str(), std::strerror(err));
  St(p.index()).closed_by_peer = true;
  p.MarkDead();
  p.DropQueued();
  return true;
}

bool Comm::FlushAll() {
  for (auto& p : paths_) {
    if (!p->alive() || p->queued_frames() == 0) continue;
    if (!p->Flush()) {
      if (PeerClosedAfterAll(*p, p->last_errno())) continue;
      if (IsRouteFailure(PathFault::kNone, p->last_errno())) NoteRouteFailure(*p, "send failed");
      if (!PathDown(*p, ErrnoMessage("send failed", p->last_errno()))) return false;
    }
  }
  return true;
}

}  // namespace ff
