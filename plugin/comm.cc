// Path bookkeeping and error policy common to both communicator directions.
#include "plugin/comm.h"

#include <cstring>

#include "plugin/logging.h"
#include "sla/profiler_event_pool.h"

namespace ff {

Comm::Comm(std::vector<std::unique_ptr<StreamPath>> paths, const CommOptions& opts, std::string peer)
    : paths_(std::move(paths)), opts_(opts), peer_(std::move(peer)) {
  stats_slots_.fill(sla::StatsTable::kInvalid);
}

uint16_t Comm::Classify(void* phandle) const {
  sla::CollectiveAttribution prof;
  if (phandle != nullptr) prof = sla::AttributeNetEvent(phandle);
  uint32_t op = opts_.net_attr ? opts_.net_attr->op : sla::kNetAttrUndefined;
  uint32_t algo = opts_.net_attr ? opts_.net_attr->algo : sla::kNetAttrUndefined;
  return static_cast<uint16_t>(sla::ChooseAttribution(prof, op, algo).collective);
}

void Comm::Record(uint16_t collective, uint64_t bytes, uint64_t latency_ns, sla::Direction dir) {
  if (opts_.stats == nullptr) return;
  size_t idx = collective <= 10 ? collective : collective == static_cast<uint16_t>(sla::Collective::kMixed) ? 11 : 12;
  uint32_t& slot = stats_slots_[idx];
  if (slot == sla::StatsTable::kInvalid) {
    sla::StatsKey key{opts_.task, static_cast<sla::Collective>(collective), peer_, opts_.path_id};
    slot = opts_.stats->Resolve(key);
  }
  opts_.stats->Record(slot, bytes, latency_ns, dir);
}

int Comm::alive_paths() const {
  int n = 0;
  for (const auto& p : paths_) n += p->alive();
  return n;
}

void Comm::Fail(Status s) {
  if (!error_.ok()) return;
  FF_WARN("communicator with %s failed: %s", peer_.c_str(), s.message().c_str());
  error_ = std::move(s);
}

StreamPath* Comm::FirstAlive() {
  for (auto& p : paths_)
    if (p->alive()) return p.get();
  return nullptr;
}

bool Comm::PathDown(StreamPath& p, const std::string& why) {
  if (!p.alive()) return alive_paths() > 0;
  p.MarkDead();
  p.DropQueued();
  int left = alive_paths();
  if (left == 0) {
    Fail(RemoteError("lost the last path to " + peer_ + ": " + why));
    return false;
  }
  FF_WARN("path %d (%s) to %s is down: %s; continuing on %d path(s)", p.index(), p.stream().Describe().c_str(),
          peer_.c_str(), why.c_str(), left);
  OnPathLost();
  return true;
}

bool Comm::HandlePump(StreamPath& p, PumpResult r) {
  switch (r) {
    case PumpResult::kIdle:
    case PumpResult::kStalled:
      return true;
    case PumpResult::kClosed:
      // The peer may have finished and closed while its last acknowledgement waits on another path:
      // read the other paths before calling this a failure.
      if (ExpectingTraffic()) {
        for (auto& q : paths_)
          if (q.get() != &p && q->alive()) (void)q->PumpRx(*this);
      }
      if (!ExpectingTraffic()) {
        // An orderly close with nothing outstanding is not an error; the path is simply gone.
        p.MarkDead();
        return true;
      }
      return PathDown(p, "peer closed the connection");
    case PumpResult::kIoError:
      return PathDown(p, ErrnoMessage("receive failed", p.last_errno()));
    case PumpResult::kBadFrame:
      Fail(RemoteError(p.rx_error()));
      return false;
    case PumpResult::kRejected:
      Fail(RemoteError(reject_reason_));
      return false;
  }
  return true;
}

bool Comm::FlushAll() {
  for (auto& p : paths_) {
    if (!p->alive() || p->queued_frames() == 0) continue;
    if (!p->Flush()) {
      if (!PathDown(*p, ErrnoMessage("send failed", p->last_errno()))) return false;
    }
  }
  return true;
}

}  // namespace ff
