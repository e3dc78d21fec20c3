// Receive path: tag matching within grouped receives, bounds checks, duplicate suppression, cumulative acks.
#include "core/recv_comm.h"

#include "base/logging.h"
#include "core/probes.h"
#include "core/task_profile.h"

#include <algorithm>
#include <cstring>

namespace ff {

RecvComm::RecvComm(std::vector<std::unique_ptr<Path>> paths, const CommOptions& opts, std::string peer)
    : Comm(std::move(paths), opts, std::move(peer)), parked_(static_cast<size_t>(path_count())) {}

bool RecvComm::AdoptRejoins(uint64_t now) {
  std::vector<ReconnectInbox::Arrival> arrivals;
  if (opts_.reconnect_inbox->Take(&arrivals)) {
    for (auto& a : arrivals) {
      if (a.index < 0 || a.index >= path_count()) continue;
      ParkedRejoin& pr = parked_[static_cast<size_t>(a.index)];
      if (pr.path == nullptr) ++parked_count_;  // a newer rejoin for the same path supersedes the parked one
      pr.path = std::move(a.path);
      pr.peer = std::move(a.peer);
      pr.since_ns = now;
      Path& old = *paths_[static_cast<size_t>(a.index)];
      if (old.alive() && old.CanQueue()) {
        const AckMsg probe{acked_, 0, 0};  // repeats what the sender already has: harmless if it is live
        QueueControl(old, FrameType::kAck, &probe, sizeof(probe));
      }
    }
  }
  if (parked_count_ == 0) return true;
  for (int i = 0; i < path_count(); ++i) {
    ParkedRejoin& pr = parked_[static_cast<size_t>(i)];
    if (pr.path == nullptr) continue;
    Path& old = *paths_[static_cast<size_t>(i)];
    if (old.alive()) {
      // Learn the old stream's fate now: the reset answering the probe, an end of stream, an error.
      if (const int err = old.PendingError(); err != 0) {
        if (!PathDown(old, ErrnoMessage("path reset", err))) return false;
      } else if (!HandlePump(old, old.Poll(*this))) {
        return false;
      }
    }
    if (old.alive()) {
      if (now - pr.since_ns < kRejoinHoldNs) continue;
      ++rejoins_refused_;
      FF_WARN("refused a rejoin of path %d from %s: that path is alive here (%s) and answered for %llu ms; a "
              "live path is never replaced",
              i, pr.peer.c_str(), old.Describe().c_str(), static_cast<unsigned long long>(kRejoinHoldNs / 1'000'000));
      pr.path.reset();
      --parked_count_;
      continue;
    }
    ReplacePath(i, std::move(pr.path));
    --parked_count_;
    // Whatever the old path was receiving is gone with it; the sender re-sent that chunk.
    path_entry_[static_cast<size_t>(i)] = nullptr;
    DropStaged(i);
    // The new socket's remote end, as at accept (the sender announces its side after its failback).
    FF_PROBE(path_up, opts_.task_hash, peer_.c_str(), i, paths_[static_cast<size_t>(i)]->Describe().c_str());
    FF_WARN("path %d from %s reconnected (failback); receiving on %s", i, pr.peer.c_str(), DescribeAlive().c_str());
  }
  return true;
}

Status RecvComm::Irecv(int n, void* const* data, const uint64_t* sizes, const int* tags, RecvRequest** out,
                       const std::array<uint32_t, 4>* rkeys) {
  *out = nullptr;
  if (!error_.ok()) return error_;
  if (n < 1 || n > kMaxRecvs)
    return InvalidArgument("irecv of " + std::to_string(n) + " buffers; accepted 1 to " + std::to_string(kMaxRecvs));
  for (int i = 0; i < n; ++i) {
    if (sizes[i] > 0 && data[i] == nullptr)
      return InvalidArgument("irecv buffer " + std::to_string(i) + " is NULL with size " + std::to_string(sizes[i]));
    for (int j = 0; j < i; ++j)
      if (tags[i] == tags[j] && n > 1)
        return InvalidUsage("grouped irecv with duplicate tag " + std::to_string(tags[i]));
  }
  if (alive_paths() == 0) return RemoteError("no path left to " + peer_);
  if (gate_.paused() || active_count_ == kMaxRequests) return Progress().ok() ? Status::Ok() : error_;
  RecvRequest* r = pool_.Acquire(RequestKind::kRecv, this);
  if (r == nullptr) return Status::Ok();
  r->n = n;
  r->seq_base = next_post_seq_;
  r->start_ns = NowNs();
  FF_PROBE(recv_post, opts_.task_hash, 0xffff, n == 1 ? sizes[0] : uint64_t{0}, peer_.c_str(), -1, opts_.sla_us, 0,
           opts_.task.c_str());
  if (next_post_seq_ == credit_sent_) posted_since_ns_ = r->start_ns;
  next_post_seq_ += static_cast<uint64_t>(n);
  for (int i = 0; i < n; ++i) {
    RecvEntry& e = r->entries[i];
    e = RecvEntry{};
    e.data = static_cast<char*>(data[i]);
    e.capacity = sizes[i];
    e.tag = tags[i];
    if (rkeys != nullptr) e.rkeys = rkeys[i];
  }
  active_[active_count_++] = r;
  *out = r;
  if (staged_count_ > 0) DeliverStaged();
  // No progress here: the caller's test() comes next and does it all - reads the paths, sends what
  // acknowledgements are due. The caller's own send usually comes first (ping-pong, ring steps), so
  // this keeps system calls off its critical path, and a progress pass here that could only skip
  // those was a tenth of a small message's work. Only the first irecv progresses: it tells the
  // sender how a failed path can come back (failback).
  if (opts_.reconnect_inbox && !reconnect_info_sent_) {
    (void)Progress();  // an error found here is reported by test(), with this request
    return Status::Ok();
  }
  // Except descriptors the sender may not do without, while it holds few: its message cannot leave
  // before them, so they go now, as NCCL's IB transport posts its clear-to-send in irecv. Held for
  // this comm's next test(), a caller that posts the receive and then retries its own isend in the
  // same thread - to this peer or, through it, to itself - waited forever.
  if (next_post_seq_ > credit_sent_ && credit_sent_ < cum_done_ + kDescLowWater && SenderMayWaitForDescriptors() &&
      SendDueAck())
    (void)FlushAll();
  return Status::Ok();
}

bool RecvComm::UnsolicitedPossible() const {
  return opts_.eager_bytes != 0 && opts_.eager_ring_bytes != 0 && !paths_.empty() && !paths_[0]->NeedsPostedBuffer();
}

bool RecvComm::SenderMayWaitForDescriptors() const {
  // What the sender may send unsolicited: a message of at most a chunk while those beyond its credit
  // stay within kMaxUnsolicitedMsgs and kMaxUnsolicitedBytes. Those it sent since this side last
  // published count (the receiver's view: what completed since), and each unpublished buffer counts
  // whole - its message may fill it.
  if (!UnsolicitedPossible()) return true;
  const uint64_t limit = std::min<uint64_t>(kMaxUnsolicitedBytes, opts_.chunk_bytes);
  uint64_t msgs = cum_done_ - std::min(cum_done_, std::max(acked_, credit_sent_));
  uint64_t bytes = done_bytes_since_ack_;
  return !ForEachUnpublished([&](uint64_t c) {
    bytes += c;
    return !(c > limit || bytes > kMaxUnsolicitedBytes || ++msgs > kMaxUnsolicitedMsgs);
  });
}

RecvEntry* RecvComm::FindEntry(const FrameHeader& h, RecvRequest** req) {
  for (int i = 0; i < active_count_; ++i) {
    RecvRequest* r = active_[i];
    if (h.seq < r->seq_base || h.seq >= r->seq_base + static_cast<uint64_t>(r->n)) continue;
    *req = r;
    for (int k = 0; k < r->n; ++k) {
      RecvEntry& e = r->entries[k];
      if (e.bound && e.seq == h.seq) return &e;
    }
    // First frame of this message: bind it to the buffer posted with its tag (any tag for n == 1).
    for (int k = 0; k < r->n; ++k) {
      RecvEntry& e = r->entries[k];
      if (!e.bound && (r->n == 1 || e.tag == h.tag)) {
        e.bound = true;
        e.seq = h.seq;
        return &e;
      }
    }
    return nullptr;
  }
  return nullptr;
}

HeaderVerdict RecvComm::OnHeader(Path& path, const FrameHeader& h, char** dest) {
  *dest = nullptr;
  const int pi = path.index();
  path_entry_[pi] = nullptr;
  if (h.type == static_cast<uint8_t>(FrameType::kAckRequest)) {
    ack_all_paths_ = true;
    ack_requested_ = true;
    return HeaderVerdict::kAccept;
  }
  if (h.type == static_cast<uint8_t>(FrameType::kPathEvent)) {
    *dest = reinterpret_cast<char*>(&notice_in_);  // ValidateHeader checked the payload's size
    return HeaderVerdict::kAccept;
  }
  if (fence_due_ != 0 && h.type == static_cast<uint8_t>(FrameType::kData)) return HeaderVerdict::kStall;
  if (h.type == static_cast<uint8_t>(FrameType::kAbort)) {
    reject_reason_ = "the sender " + peer_ + " aborted the connection (its message did not fit the posted buffer, "
                     "or it failed)";
    return HeaderVerdict::kReject;
  }
  if (h.type != static_cast<uint8_t>(FrameType::kData)) {
    reject_reason_ = "unexpected frame type " + std::to_string(h.type) + " on a receive connection";
    return HeaderVerdict::kReject;
  }
  last_rx_path_ = pi;
  last_rx_large_ = h.total >= kRoundRobinMinBytes;
  last_rx_small_ = h.total <= kLoneReceiveMaxBytes;
  return PlaceData(pi, h, dest);
}

HeaderVerdict RecvComm::PlaceData(int pi, const FrameHeader& h, char** dest) {
  *dest = nullptr;
  path_entry_[static_cast<size_t>(pi)] = nullptr;
  if (h.seq < cum_done_ || (h.seq < cum_done_ + kDoneWindow && done_bits_[h.seq % kDoneWindow])) {
    // A re-sent copy of a message already complete: discard it. The sender re-sends only what it
    // thinks unacknowledged, so our acknowledgements may be getting lost: send the next on every path.
    ack_all_paths_ = true;
    return HeaderVerdict::kAccept;
  }
  if (h.seq >= next_post_seq_) {
    // Its buffer is not posted yet: stage it if it is an unsolicited eager frame that fits, else
    // leave it in the path until the receive is posted.
    for (const Staged& s : staged_)
      if (s.used && s.h.seq == h.seq && s.h.offset == h.offset) return HeaderVerdict::kAccept;  // a re-sent copy
    const int slot = StageFrame(h);
    if (slot < 0) return HeaderVerdict::kStall;
    path_stage_[static_cast<size_t>(pi)] = static_cast<int8_t>(slot + 1);
    staged_[static_cast<size_t>(slot)].lane = pi;
    *dest = stage_buf_.get() + staged_[static_cast<size_t>(slot)].pos;
    return HeaderVerdict::kAccept;
  }
  RecvRequest* req = nullptr;
  RecvEntry* e = FindEntry(h, &req);
  if (e == nullptr) {
    reject_reason_ = "message " + std::to_string(h.seq) + " with tag " + std::to_string(h.tag) +
                     " matches no buffer of the posted grouped receive";
    SendAbort(AbortReason::kProtocolError, h.seq);
    return HeaderVerdict::kReject;
  }
  if (!e->size_known) {
    if (h.total > e->capacity) {
      reject_reason_ = "message " + std::to_string(h.seq) + " (tag " + std::to_string(h.tag) + ") has " +
                       std::to_string(h.total) + " bytes but the posted receive buffer holds " +
                       std::to_string(e->capacity);
      SendAbort(AbortReason::kMessageTooLarge, h.seq);
      return HeaderVerdict::kReject;
    }
    e->size_known = true;
    e->total = h.total;
    e->collective = h.collective;
    e->chunk = ChunkBytesFor(h.total, opts_.chunk_bytes);
  } else if (h.total != e->total) {
    reject_reason_ = "message " + std::to_string(h.seq) + " changed size from " + std::to_string(e->total) +
                     " to " + std::to_string(h.total);
    return HeaderVerdict::kReject;
  }
  uint64_t idx = h.offset / e->chunk;
  if (h.offset % e->chunk != 0 || idx >= kChunkBitmapBits || (h.length != std::min(e->chunk, h.total - h.offset) &&
                                                              h.total != 0)) {
    reject_reason_ = "frame at offset " + std::to_string(h.offset) + " is not aligned to the " +
                     std::to_string(e->chunk) + "-byte chunks of message " + std::to_string(h.seq);
    return HeaderVerdict::kReject;
  }
  path_req_[pi] = req;
  if (e->chunks_seen[idx / 64] & (uint64_t{1} << (idx % 64))) {  // duplicate chunk
    ack_all_paths_ = true;
    return HeaderVerdict::kAccept;
  }
  path_entry_[pi] = e;
  path_offset_[pi] = h.offset;
  *dest = e->data + h.offset;
  return HeaderVerdict::kAccept;
}

void RecvComm::OnFrameComplete(Path& path, const FrameHeader& h) {
  if (h.type == static_cast<uint8_t>(FrameType::kPathEvent)) {
    // The sender failed a path over and fenced its end: fence ours before the next chunk (Progress).
    // kRouteDown: the sender lost the path to a failure of its route; this process's paths on the
    // same route (its own sends to this peer over that spine, say) are suspect from now on.
    const PathEventMsg e = notice_in_;
    const auto ev = static_cast<PathEvent>(e.event);
    if ((ev == PathEvent::kDown || ev == PathEvent::kRouteDown) && e.path < path_count() && e.path != path.index() &&
        e.generation == path_generation(e.path) && paths_[e.path]->alive()) {
      fence_due_ |= uint64_t{1} << e.path;
      if (ev == PathEvent::kRouteDown && !paths_[e.path]->route().empty()) {
        PathWatchdog::RecordRouteFailure(paths_[e.path]->route(), NowNs());
        FF_INFO(NCCL_NET, "receive path %d (%s) from %s: the sender lost it to a route failure; other paths of this "
                "process over its %d fabric link(s) are suspect", e.path, paths_[e.path]->Describe().c_str(),
                peer_.c_str(), paths_[e.path]->route().n);
      }
    }
    return;
  }
  const size_t pi = static_cast<size_t>(path.index());
  if (path_stage_[pi] != 0) {
    Staged& s = staged_[static_cast<size_t>(path_stage_[pi] - 1)];
    path_stage_[pi] = 0;
    s.complete = true;
    s.lane = -1;
    ++frames_done_;
    if (s.h.seq < next_post_seq_) DeliverStaged();  // posted while its payload was arriving
    return;
  }
  CompleteData(path.index(), h);
}

int RecvComm::StageFrame(const FrameHeader& h) {
  // Only what a sender may send unsolicited: one chunk holding a whole message, within the budget
  // and the duplicate window. Anything else waits in its path, as before v4.
  if (h.offset != 0 || h.length != h.total || h.total > kMaxUnsolicitedBytes ||
      h.seq >= next_post_seq_ + kMaxUnsolicitedMsgs || staged_count_ == static_cast<int>(staged_.size()))
    return -1;
  constexpr uint64_t kArena = 2 * kMaxUnsolicitedBytes;
  const uint64_t need = (h.length + 63) & ~uint64_t{63};
  if (stage_head_ + need > kArena) {
    // Compact: live frames move to the front (at most kMaxUnsolicitedMsgs small copies, and only
    // when the arena's tail is used up; a path still filling a slot pins it where it is).
    bool filling = false;
    for (const Staged& s : staged_) filling |= s.used && !s.complete;
    if (filling) return -1;
    uint64_t at = 0;
    for (int pass = 0; pass < static_cast<int>(staged_.size()); ++pass) {
      Staged* low = nullptr;  // the lowest-positioned live frame not yet moved
      for (Staged& s : staged_)
        if (s.used && s.pos >= at && (low == nullptr || s.pos < low->pos)) low = &s;
      if (low == nullptr) break;
      const uint64_t len = (low->h.length + 63) & ~uint64_t{63};
      if (low->pos != at) std::memmove(stage_buf_.get() + at, stage_buf_.get() + low->pos, low->h.length);
      low->pos = at;
      at += len;
    }
    stage_head_ = at;
    if (stage_head_ + need > kArena) return -1;
  }
  if (!stage_buf_) stage_buf_.reset(new char[kArena]);
  for (size_t i = 0; i < staged_.size(); ++i) {
    Staged& s = staged_[i];
    if (s.used) continue;
    s.used = true;
    s.complete = false;
    s.h = h;
    s.pos = stage_head_;
    stage_head_ += need;
    ++staged_count_;
    ++staged_frames_;
    return static_cast<int>(i);
  }
  return -1;
}

void RecvComm::DeliverStaged() {
  // In sequence order: a grouped receive binds its buffers by tag as frames arrive.
  while (staged_count_ > 0 && error_.ok()) {
    Staged* next = nullptr;
    for (Staged& s : staged_)
      if (s.used && s.complete && s.h.seq < next_post_seq_ && (next == nullptr || s.h.seq < next->h.seq)) next = &s;
    if (next == nullptr) return;
    const FrameHeader h = next->h;
    char* dest = nullptr;
    const HeaderVerdict v = PlaceData(kStageLane, h, &dest);
    if (v == HeaderVerdict::kReject) {
      next->used = false;
      --staged_count_;
      Fail(InvalidUsage(reject_reason_));
      return;
    }
    if (dest != nullptr && h.length > 0) std::memcpy(dest, stage_buf_.get() + next->pos, h.length);
    next->used = false;
    --staged_count_;
    if (staged_count_ == 0) stage_head_ = 0;
    CompleteData(kStageLane, h);
  }
}

void RecvComm::DropStaged(int pi) {
  int8_t& slot = path_stage_[static_cast<size_t>(pi)];
  if (slot == 0) return;
  Staged& s = staged_[static_cast<size_t>(slot - 1)];
  slot = 0;
  if (!s.used || s.complete) return;
  s.used = false;  // its sender re-sends it: the chunk was on a path that is gone
  --staged_count_;
  if (staged_count_ == 0) stage_head_ = 0;
}

void RecvComm::CompleteData(int lane, const FrameHeader& h) {
  const size_t li = static_cast<size_t>(lane);
  RecvEntry* e = path_entry_[li];
  if (e == nullptr) return;  // discarded duplicate
  path_entry_[li] = nullptr;
  uint64_t idx = h.offset / e->chunk;
  e->chunks_seen[idx / 64] |= uint64_t{1} << (idx % 64);
  ++frames_done_;
  e->received += h.length;
  // After a failover the same chunk can be arriving on two paths at once (the original on a path
  // that is stalling, the copy on a live one). The first to finish wins; the other's remaining bytes
  // must not land in the buffer, which NCCL may reuse as soon as the message completes.
  for (auto& q : paths_) {
    int qi = q->index();
    if (qi != lane && path_entry_[qi] == e && path_offset_[qi] == h.offset) {
      q->DiscardCurrentPayload();
      path_entry_[qi] = nullptr;
    }
  }
  if (e->received < e->total || e->done) return;
  e->done = true;
  ++messages_done_;
  done_bytes_since_ack_ += e->total;
  if (h.flags & kDataFlagAckNow) {
    ack_now_ = true;
    ack_now_bytes_ += e->total;
    ack_now_until_ = std::max(ack_now_until_, h.seq + 1);
  }
  RecvRequest* r = path_req_[li];
  ++r->done_count;
  // One clock read per path read, shared by the messages it completes (a read of a stream takes
  // many small ones at once; each clock read costs ~25 ns, a fifth of a small message's own work).
  uint64_t now;
  if (rx_stamp_shared_) {
    if (rx_stamp_ns_ == 0) rx_stamp_ns_ = NowNs();
    now = rx_stamp_ns_;
  } else {
    now = NowNs();
  }
  Record(e->collective, e->total, now - r->start_ns, sla::Direction::kRecv, now);
  FF_PROBE(recv_done, opts_.task_hash, e->collective, e->total, peer_.c_str(), lane == kStageLane ? -1 : lane, opts_.sla_us,
           now - r->start_ns, opts_.task.c_str());
  ProbeDone(FF_PROBE_RECV_DIR, e->collective, e->total, lane == kStageLane ? -1 : lane, now - r->start_ns, now);
  done_bits_[h.seq % kDoneWindow] = true;
  if (cum_done_ == acked_) done_since_ns_ = now;
  while (done_bits_[cum_done_ % kDoneWindow]) {
    done_bits_[cum_done_ % kDoneWindow] = false;
    ++cum_done_;
  }
  if (r->done_count == r->n) {
    for (int i = 0; i < active_count_; ++i) {
      if (active_[i] == r) {
        active_[i] = active_[--active_count_];
        break;
      }
    }
  }
}

void RecvComm::OnPathLost(Path& p, const std::string& why, uint64_t silent_ns) {
  DropStaged(p.index());
  Comm::OnPathLost(p, why, silent_ns);
  SendPathEvent(p.index(), St(p.index()).route_failed ? PathEvent::kRouteDown : PathEvent::kDown);
}

void RecvComm::OnNicVerdict(Path& p, bool degraded, const std::string& why) {
  FF_WARN("receive path %d (%s) from %s: %s; telling the sender", p.index(), p.Describe().c_str(), peer_.c_str(),
          degraded ? why.c_str() : "NIC recovered");
  SendPathEvent(p.index(), degraded ? PathEvent::kNicDegraded : PathEvent::kNicRecovered);
}

void RecvComm::OnFailed() {
  // Best effort on whatever path is left: a sender still waiting for acknowledgements gets an
  // error at once instead of waiting for its own timeouts.
  SendAbort(AbortReason::kProtocolError, cum_done_);
}

void RecvComm::SendAbort(AbortReason reason, uint64_t seq) {
  AbortMsg m{};
  m.reason = static_cast<int32_t>(reason);
  m.seq = seq;
  for (auto& p : paths_) {
    if (!p->alive() || !p->CanQueue()) continue;
    QueueControl(*p, FrameType::kAbort, &m, sizeof(m));
    p->Flush();
  }
}

bool RecvComm::SendPathEvent(int path, PathEvent event) {
  // Path reports go on every live path: the one they are about may be the one the sender listens on.
  // The path's incarnation rides along, so a report that crosses a reconnect is not applied to the new one.
  PathEventMsg m{};
  m.path = static_cast<uint16_t>(path);
  m.event = static_cast<uint16_t>(event);
  m.generation = path_generation(path);
  bool sent = false;
  for (auto& p : paths_) {
    if (!p->alive() || !p->CanQueue()) continue;
    QueueControl(*p, FrameType::kPathEvent, &m, sizeof(m));
    p->Flush();
    sent = true;
  }
  ack_all_paths_ = true;  // acknowledgements that rode the lost path go again everywhere
  return sent;
}

bool RecvComm::SendAck(bool all_paths, bool republish) {
  // Routine acknowledgements take one path - the one that last delivered data, which is evidently
  // alive. After a duplicate, a path loss or the sender's request they go on every live path: a path
  // can be dead without either end knowing yet, and an acknowledgement lost there would leave the
  // sender waiting. Duplicates of a cumulative acknowledgement and of descriptors are harmless.
  Path* only = nullptr;
  if (!all_paths && last_rx_path_ >= 0 && paths_[static_cast<size_t>(last_rx_path_)]->alive() &&
      paths_[static_cast<size_t>(last_rx_path_)]->CanQueue())
    only = paths_[static_cast<size_t>(last_rx_path_)].get();
  // The descriptors to publish, in sequence order, whole groups per frame.
  const uint64_t from = republish ? cum_done_ : credit_sent_;
  RecvDescriptor desc[kMaxRequests * kMaxRecvs];
  int nd = 0;
  for (int i = 0; i < active_count_; ++i) {
    const RecvRequest& r = *active_[i];
    if (r.seq_base + static_cast<uint64_t>(r.n) <= from) continue;
    for (int k = 0; k < r.n; ++k) {
      const RecvEntry& e = r.entries[k];
      RecvDescriptor& d = desc[nd++];
      d = RecvDescriptor{};
      d.seq = r.seq_base + static_cast<uint64_t>(k);
      d.capacity = e.capacity;
      d.tag = e.tag;
      d.group_n = static_cast<uint16_t>(r.n);
      d.group_idx = static_cast<uint16_t>(k);
      if (e.rkeys != std::array<uint32_t, 4>{}) {
        d.addr = reinterpret_cast<uint64_t>(e.data);
        for (size_t j = 0; j < 4; ++j) d.keys[j] = e.rkeys[j];
      }
    }
  }
  std::sort(desc, desc + nd, [](const RecvDescriptor& a, const RecvDescriptor& b) { return a.seq < b.seq; });
  char frame[kMaxControlPayload];
  bool sent = false;
  int at = 0;
  do {
    AckMsg a{};
    a.cum_done = cum_done_;
    int take = 0;
    while (at + take < nd && take < static_cast<int>(kMaxDescriptorsPerAck)) {
      const RecvDescriptor& g = desc[at + take];
      if (g.group_idx == 0 && take + g.group_n > static_cast<int>(kMaxDescriptorsPerAck)) break;  // whole groups
      ++take;
    }
    a.descriptors = static_cast<uint32_t>(take);
    std::memcpy(frame, &a, sizeof(a));
    std::memcpy(frame + sizeof(a), desc + at, static_cast<size_t>(take) * sizeof(RecvDescriptor));
    const uint32_t len = static_cast<uint32_t>(sizeof(a) + static_cast<size_t>(take) * sizeof(RecvDescriptor));
    at += take;
    sent = false;
    for (auto& p : paths_) {
      if (!p->alive() || !p->CanQueue() || (only != nullptr && p.get() != only)) continue;
      QueueControl(*p, FrameType::kAck, frame, len);
      sent = true;
    }
    if (!sent) return false;
  } while (at < nd);
  return sent;
}

bool RecvComm::OnlySmallBuffersUnpublished(uint64_t* capacity) const {
  *capacity = 0;
  if (!UnsolicitedPossible()) return false;
  // Eager-sized buffers, any number of them; larger ones up to one chunk (a message the sender may
  // still send unsolicited, completing on its acknowledgement) while all the unpublished buffers
  // together hold at most half the unsolicited byte budget. In a ping-pong of 128 KiB messages (one
  // receive posted at a time) the descriptor went in a control frame of its own after every reply:
  // a system call at each end and four segments per round trip, for a buffer the sender did not
  // need to hear of. A pipeline with several large receives posted still publishes at once.
  const uint64_t small = std::min<uint64_t>(opts_.eager_bytes, std::min<uint64_t>(kMaxUnsolicitedBytes, opts_.chunk_bytes));
  const uint64_t lone = std::min<uint64_t>(kMaxUnsolicitedBytes / 2, opts_.chunk_bytes);
  bool larger = false;
  const bool all_fit = ForEachUnpublished([&](uint64_t c) {
    if (c > small) {
      if (c > lone) return false;
      larger = true;
    }
    *capacity += c;
    return true;
  });
  return all_fit && (!larger || *capacity <= kMaxUnsolicitedBytes / 2);
}

void RecvComm::ReportIfStuck(uint64_t now_ns) {
  if (frames_done_ != frames_seen_) {
    frames_seen_ = frames_done_;
    last_frame_ns_ = now_ns;
    stuck_reported_ = false;
    return;
  }
  if (last_frame_ns_ == 0) last_frame_ns_ = now_ns;
  if (stuck_reported_ || now_ns - last_frame_ns_ < kStuckReportNs) return;
  stuck_reported_ = true;
  std::string reqs;
  for (int i = 0; i < active_count_; ++i) {
    const RecvRequest& r = *active_[i];
    reqs += " [" + std::to_string(r.seq_base) + "+" + std::to_string(r.n) + " done " + std::to_string(r.done_count);
    for (int k = 0; k < r.n; ++k)
      reqs += " " + std::to_string(r.entries[k].received) + "/" +
              (r.entries[k].size_known ? std::to_string(r.entries[k].total) : std::string("?"));
    reqs += "]";
  }
  FF_WARN("receive from %s: no frame for %.1f s: posted<%llu done<%llu acked<%llu credit<%llu active:%s%s",
          peer_.c_str(), (now_ns - last_frame_ns_) / 1e9, static_cast<unsigned long long>(next_post_seq_),
          static_cast<unsigned long long>(cum_done_), static_cast<unsigned long long>(acked_),
          static_cast<unsigned long long>(credit_sent_), reqs.c_str(), DescribePaths().c_str());
}

bool RecvComm::FenceNotified() {
  while (fence_due_ != 0) {
    const int i = __builtin_ctzll(fence_due_);
    fence_due_ &= fence_due_ - 1;
    Path& p = *paths_[static_cast<size_t>(i)];
    if (!p.alive()) continue;  // failed here already (and fenced then)
    ++fences_on_notice_;
    // Synchronous: when PathDown returns, this end of the path accepts nothing more (RDMA: the QP is
    // in ERR and its receives are flushed), so the chunks held in the other paths may complete receives.
    if (!PathDown(p, "the sender failed it over; fenced here before its re-sent chunks are taken",
                  PathFault::kPeerReported))
      return false;
  }
  return true;
}

Status RecvComm::Progress() {
  if (!error_.ok()) return error_;
  const uint64_t now = NowNs();  // the one clock read of a call that completes nothing
  uint64_t completed_ns = 0;     // the latest completion's clock read in this call
  const uint64_t done_at_entry = messages_done_;
  const bool expecting = active_count_ > 0;
  if (opts_.reconnect_inbox) {
    if (!reconnect_info_sent_) {
      // Tells the sender how a failed path can come back.
      reconnect_info_sent_ = true;
      const ReconnectInfo info = opts_.reconnect_inbox->Info();
      if (info.port != 0) {
        for (auto& p : paths_) {
          if (!p->alive() || !p->CanQueue()) continue;
          QueueControl(*p, FrameType::kReconnectInfo, &info, sizeof(info));
        }
      }
    }
    // Rejoins take seconds to matter (failback); looking for them once per kRejoinPollNs, or while one
    // is parked, keeps the transport's inbox off every call (a tenth of a small message's work).
    if (parked_count_ > 0 || now - std::min(now, last_rejoin_poll_ns_) >= kRejoinPollNs) {
      last_rejoin_poll_ns_ = now;
      opts_.reconnect_inbox->Poll(now);
      if (!AdoptRejoins(now)) return error_;
    }
  }
  ProbeFlushIfOld(now);
  if (!CheckHealth(now)) return error_;
  const uint64_t poll_ns = now;  // the stuck report and the read pacing
  if (expecting) ReportIfStuck(poll_ns);
  // Every path is read, starting with the one that last delivered data;
  // once a receive completed the others wait for the next call (a reply is due now, and an idle
  // path costs a system call to find empty).
  if (expecting) {
    // After stopping early, the next call starts past the path that stopped it, so a path whose
    // neighbour keeps completing receives is never left unread.
    const int n = static_cast<int>(paths_.size());
    int first = last_rx_path_ >= 0 && last_rx_path_ < n ? last_rx_path_ : 0;
    if (poll_after_ >= 0) first = (poll_after_ + 1) % n;
    poll_after_ = -1;
    const uint64_t done_before = messages_done_;
    // A lone small receive (a ping-pong): a stream leaves what it reads in its socket until its next
    // read, so the kernel's acknowledgement goes after the caller's reply (StreamPath::kPeekMaxBytes).
    const bool one_posted = next_post_seq_ - cum_done_ == 1;
    const bool lone = last_rx_small_ && one_posted;
    for (int k = 0; k < n; ++k) {
      const int i = (first + k) % n;
      Path& p = *paths_[static_cast<size_t>(i)];
      if (!p.alive()) continue;
      // A path whose last read came back empty is read again only after kIdlePollGapNs, unless it
      // delivered the last data: in a ping-pong every message comes on one path, and reading the
      // others each call doubled the system calls of the wait (and the reply's latency with them).
      // A path carrying traffic (stripes, streaming) never comes back empty for long, so it is read
      // every call.
      // After a message of kRoundRobinMinBytes or more the next comes on another path (the sender
      // takes them in turn): every path is read.
      // The gap doubles while the path stays empty and one receive is posted (a ping-pong: the idle
      // path, read every 10 us, was a system call in the way of the message on the other). With
      // several posted (streaming) the sender moves to another path whenever its queue runs long,
      // and a path read 160 us late stalled 32-64 KiB streams by a third: their gap stays 10 us.
      uint64_t& empty_ns = empty_read_ns_[static_cast<size_t>(i)];
      uint8_t& streak = empty_streak_[static_cast<size_t>(i)];
      const unsigned shift = one_posted ? std::min<unsigned>(streak, kIdlePollMaxShift) : 0;
      if (empty_ns != 0 && i != last_rx_path_ && !last_rx_large_ && poll_ns - empty_ns < (kIdlePollGapNs << shift))
        continue;
      rx_stamp_ns_ = 0;
      rx_stamp_shared_ = true;
      p.HintLoneReceive(lone);
      const PumpResult pumped = p.Poll(*this);
      rx_stamp_shared_ = false;
      completed_ns = std::max(completed_ns, rx_stamp_ns_);
      if (!HandlePump(p, pumped)) return error_;
      if (p.LastPollEmpty()) {
        if (!one_posted)
          streak = 0;
        else if (empty_ns != 0 && streak < kIdlePollMaxShift)
          ++streak;
        empty_ns = poll_ns;
      } else {
        empty_ns = 0;
        streak = 0;
      }
      if (fence_due_ != 0 && !FenceNotified()) return error_;
      if (messages_done_ != done_before) {
        if (k + 1 < n) poll_after_ = i;
        break;
      }
    }
  }
  // Acknowledgements and descriptors, batched: at once when the sender waits on them (a message that
  // completes only on its acknowledgement, few descriptors left to it, its explicit request), else
  // once per ack_batch messages or ack_delay_us.
  // The call's clock read, or a completion's read during it (later): the batching delays below are
  // 100 us or more, far above the few microseconds one call lasts, and both differences saturate at 0.
  const uint64_t ack_now = std::max(now, completed_ns);
  const uint64_t delay_ns = uint64_t{opts_.ack_delay_us} * 1000;
  const uint64_t ack_now_delay_ns = uint64_t{opts_.ack_now_delay_us} * 1000;
  const bool repeat = ack_requested_ || (ack_all_paths_ && cum_done_ == acked_);
  bool send = repeat;
  // Buffers that only messages able to come unsolicited fit (eager, one chunk, on a stream) need no
  // prompt descriptor: theirs ride the next acknowledgement, or go after the batch/delay.
  // Tiny buffers (all unpublished ones together within a quarter of the sender's unsolicited byte
  // budget) are published kDescBatchTiny at a time: in a ping-pong of small messages one control
  // frame per 4 messages was a quarter of the data's own system calls.
  // Descriptors go after ack_now_delay_us, or ack_delay_us while the unpublished buffers together hold
  // no more than the sender's unsolicited byte budget per message (8 KiB): it then runs out of
  // messages (kMaxUnsolicitedMsgs) only, and the acknowledgement batch comes first. With larger ones
  // a ping-pong spent the budget in a few messages and waited (32 KiB round trips: 23 -> 113 us at a
  // 1 ms delay); the budget rule below guards any delay.
  if (next_post_seq_ > credit_sent_) {
    uint64_t capacity = 0;
    const bool only_small = OnlySmallBuffersUnpublished(&capacity);
    const uint64_t batch = only_small && capacity <= kMaxUnsolicitedBytes / 4 ? kDescBatchTiny : kDescBatch;
    const uint64_t desc_delay_ns =
        only_small && capacity <= kMaxUnsolicitedBytes / kMaxUnsolicitedMsgs ? delay_ns : ack_now_delay_ns;
    if ((!only_small && credit_sent_ < cum_done_ + kDescLowWater) || next_post_seq_ - credit_sent_ >= batch ||
        ack_now - std::min(ack_now, posted_since_ns_) >= desc_delay_ns)
      send = true;
  }
  // Eager messages need no prompt acknowledgement: their sender completed them already, asks for one
  // (kDataFlagAckNow) when its ring runs low, and closes once its peer's transport holds everything.
  // So an acknowledgement held back here rides the next descriptor frame - in a ping-pong, after the
  // caller's own reply has left - instead of costing a system call on the message's critical path.
  // A message whose sender waits on its acknowledgement (kDataFlagAckNow: not eager, or its ring
  // running low) is acknowledged at once when it leaves nothing posted: the application may call
  // nothing more here for a while. While receives are posted behind it, the application keeps
  // calling in, so the acknowledgement waits for up to kAckNowBatch messages (or the delay): a
  // stream of messages above the eager threshold cost one control frame - a system call at each
  // end - per message. The sender's window still moves: one cumulative acknowledgement completes
  // the batch. But never past kAckNowBytes: the application may go away right after this call (to
  // check what it received, or to serve other connections), and an acknowledgement held here for
  // that long is one the sender times out on - four 64 MiB messages held by a receiver checking
  // their contents were re-sent whole after 250 ms. For large messages the batch saves nothing.
  const bool ack_due = ack_now_ && (cum_done_ >= next_post_seq_ || cum_done_ - acked_ >= kAckNowBatch ||
                                    ack_now_bytes_ >= kAckNowBytes);
  // Held at most ack_now_delay_us when the sender waits on it, ack_delay_us when it only frees ring room.
  // The sender runs ahead of what it heard from here (descriptors published, messages acknowledged)
  // by at most kMaxUnsolicitedMsgs messages and kMaxUnsolicitedBytes, then waits: a ping-pong of
  // 32 KiB messages (one receive posted at a time, so descriptors wait for their batch or the delay)
  // stopped every 8 messages for the whole delay. Once three quarters of either went, it hears from
  // the next call that completes nothing (in a ping-pong, after the caller's reply has left: a frame
  // sent in the completing call sits on the reply's critical path); past seven eighths, from this one.
  const uint64_t told = std::max(acked_, credit_sent_);
  if (cum_done_ > told) {
    const uint64_t msgs = cum_done_ - told;
    if (msgs >= kMaxUnsolicitedMsgs * 7 / 8 || done_bytes_since_ack_ >= kMaxUnsolicitedBytes * 7 / 8 ||
        (messages_done_ == done_at_entry &&
         (msgs >= kMaxUnsolicitedMsgs * 3 / 4 || done_bytes_since_ack_ >= kMaxUnsolicitedBytes * 3 / 4)))
      send = true;
  }
  if (cum_done_ > acked_ && (ack_due || cum_done_ - acked_ >= opts_.ack_batch ||
                              ack_now - std::min(ack_now, done_since_ns_) >= (ack_now_ ? ack_now_delay_ns : delay_ns)))
    send = true;
  // An acknowledgement that leaves nothing posted may be the last this receiver sends for a long
  // time: its application may call nothing more on this comm until the sender, waiting on exactly
  // this acknowledgement, moves on (a collective's last step, then a barrier). The path that last
  // delivered data can have died right after (a cut the receiver cannot see), so it goes on every
  // live path. While receives are posted ahead (steady streaming) one path still carries it. Only a
  // sender that waits on it (a message flagged kDataFlagAckNow: not eager, or its ring running low)
  // needs that: eager messages completed at their sender already, and a lost acknowledgement of
  // them costs nothing but ring room - a failover re-sends them, the duplicates are acknowledged
  // on every path, and a closing sender asks (kAckRequest, answered on every path). Streaming small
  // eager messages, the receiver catches up with its posted receives every few messages: sending
  // each of those acknowledgements twice was most of its control frames.
  if (send) (void)SendDueAck();
  if (!FlushAll()) return error_;
  return error_;
}

bool RecvComm::SendDueAck() {
  const bool last_for_now = ack_now_ && cum_done_ > acked_ && cum_done_ >= next_post_seq_;
  if (!SendAck(ack_all_paths_ || ack_requested_ || last_for_now, ack_requested_)) return false;
  ack_all_paths_ = false;
  ack_requested_ = false;
  // A message that asked for its acknowledgement at once but completed ahead of an earlier one is not
  // covered yet: the request stands until the acknowledgement that covers it (its sender waits on
  // exactly that one; held for the eager batch instead, a receiver whose application stopped calling
  // after its last receive left the sender waiting for good - a 4-rank AllGather hung in 1 of 6 runs
  // with FLEXIFORCE_EAGER_BYTES=4M).
  if (cum_done_ >= ack_now_until_) {
    ack_now_ = false;
    ack_now_bytes_ = 0;
  }
  done_bytes_since_ack_ = 0;
  acked_ = cum_done_;
  credit_sent_ = next_post_seq_;
  return true;
}

void RecvComm::AcknowledgeBeforeClose(uint64_t drain_timeout_ns) {
  if (!error_.ok()) return;
  if (cum_done_ > acked_ && SendAck(true, false)) acked_ = cum_done_;
  (void)FlushAll();
  // Over verbs a receiver that closed right after its last test() destroyed the queue pairs with
  // that test()'s acknowledgement still posted: the sender, waiting for it, saw the peer exit and
  // failed its last message (VM lane, LegacyTables.V8IntSizedTableCarriesAMessage, once in three).
  const uint64_t deadline = NowNs() + drain_timeout_ns;
  for (;;) {
    bool pending = false;
    for (auto& p : paths_) {
      if (!p->alive() || p->PayloadFreeAfterFlush()) continue;
      if (!p->Flush()) continue;  // failed: nothing more will leave on it
      pending |= !p->Quiescent();
    }
    if (!pending || NowNs() >= deadline) return;
  }
}

Status RecvComm::Test(RecvRequest* r, int* done, uint64_t* sizes) {
  *done = 0;
  Status s = Progress();
  if (r->done_count < r->n && !s.ok()) return s;
  if (gate_.paused()) return error_.ok() ? Status::Ok() : error_;  // a pause that can never end (SendComm::Test)
  if (r->done_count < r->n) return Status::Ok();
  *done = 1;
  if (sizes)
    for (int i = 0; i < r->n; ++i) sizes[i] = r->entries[i].total;
  pool_.Release(r);
  return Status::Ok();
}

}  // namespace ff
