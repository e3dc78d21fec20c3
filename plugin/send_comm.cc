// Send path: message -> chunks -> least-loaded path; acknowledgements complete requests.
#include "plugin/send_comm.h"

#include <algorithm>
#include <chrono>

#include "plugin/link_monitor.h"
#include "plugin/logging.h"
#include "plugin/probes.h"
#include "tcp/interfaces.h"
#include "tcp/tcp_stream.h"
#include "plugin/task_profile.h"

namespace ff {

Status SendComm::Isend(const void* data, uint64_t size, int tag, void* phandle, SendRequest** out) {
  *out = nullptr;
  if (!error_.ok()) return error_;
  if (size > kMaxMessageBytes) return InvalidArgument("isend size " + std::to_string(size) + " beyond the limit");
  if (size > 0 && data == nullptr) return InvalidArgument("isend of " + std::to_string(size) + " bytes from NULL");
  if (gate_.paused() || inflight_count_ == kMaxRequests) {
    // "Retry later" - and move things along meanwhile: a caller that only retries isend (without
    // testing its outstanding requests) must still see the failover finish or a slot free up.
    return Progress().ok() ? Status::Ok() : error_;
  }
  SendRequest* r = pool_.Acquire(RequestKind::kSend, this);
  if (r == nullptr) return Status::Ok();
  if (inflight_count_ == 0) ack_progress_ns_ = NowNs();  // the timeout counts from the first message owed
  r->seq = next_seq_++;
  r->data = static_cast<const char*>(data);
  r->size = size;
  r->chunk = ChunkBytesFor(size, opts_.chunk_bytes);
  r->tag = tag;
  r->phandle = phandle;
  r->collective = Classify(phandle);
  r->start_ns = NowNs();
  FF_PROBE(send_post, opts_.task_hash, r->collective, size, peer_.c_str(), r->home_path, opts_.sla_us, 0,
           opts_.task.c_str());
  inflight_[(inflight_head_ + inflight_count_) % kMaxRequests] = r;
  ++inflight_count_;
  *out = r;
  // Start the bytes moving now; small messages often leave in this very call. A failure found
  // here is sticky and reported by test(), which is where NCCL expects it.
  (void)Progress();
  return Status::Ok();
}

StreamPath* SendComm::PickPath(SendRequest& r) {
  if (r.home_path >= 0) {
    StreamPath& p = *paths_[r.home_path];
    if (p.alive() && !p.draining())
      return p.queued_data_frames() < opts_.max_queued_chunks && p.CanQueue() ? &p : nullptr;
    r.home_path = -1;
  }
  // Least loaded: bytes queued here, plus - for striped messages - what the kernel still holds for
  // the socket (unsent or unacknowledged). A slow or lossy path takes everything the kernel will
  // buffer, so our own queue alone would keep feeding it; one ioctl per path per 512 KiB chunk.
  const bool striped = r.size >= opts_.stripe_min_bytes;
  StreamPath* best = nullptr;
  uint64_t best_load = 0;
  for (auto& p : paths_) {
    if (!p->alive() || p->draining() || !p->CanQueue() || p->queued_data_frames() >= opts_.max_queued_chunks)
      continue;
    uint64_t load = p->queued_payload_bytes();
    if (striped) load += static_cast<uint64_t>(std::max<int64_t>(p->KernelUnackedBytes(), 0));
    if (best == nullptr || load < best_load) {
      best = p.get();
      best_load = load;
    }
  }
  if (best != nullptr && r.size < opts_.stripe_min_bytes) r.home_path = best->index();
  return best;
}

void SendComm::QueueChunk(SendRequest& r, StreamPath& p, uint64_t offset) {
  uint64_t len = std::min<uint64_t>(r.chunk, r.size - offset);
  FrameHeader h{};
  h.type = static_cast<uint8_t>(FrameType::kData);
  h.path = static_cast<uint16_t>(p.index());
  h.tag = r.tag;
  h.length = static_cast<uint32_t>(len);
  h.seq = r.seq;
  h.offset = offset;
  h.total = r.size;
  h.task_hash = opts_.task_hash;
  h.sla_us = opts_.sla_us;
  h.collective = r.collective;
  SealHeader(&h);
  p.Queue(h, r.data + offset);
  r.chunk_path[offset / r.chunk] = static_cast<uint8_t>(p.index());
}

void SendComm::Schedule() {
  for (int i = 0; i < inflight_count_; ++i) {
    SendRequest& r = *inflight_[(inflight_head_ + i) % kMaxRequests];
    if (r.seq >= credit_) return;  // its receive buffer is not posted yet
    // Chunks whose path died go first: the receiver's cumulative acknowledgement waits on them.
    for (size_t w = 0; r.resend_count > 0 && w < r.resend.size(); ++w) {
      while (r.resend[w] != 0) {
        StreamPath* p = PickPath(r);
        if (p == nullptr) return;
        int bit = __builtin_ctzll(r.resend[w]);
        r.resend[w] &= r.resend[w] - 1;
        --r.resend_count;
        QueueChunk(r, *p, (w * 64 + static_cast<uint64_t>(bit)) * r.chunk);
      }
    }
    while (r.next_offset < r.size || (r.size == 0 && !r.zero_queued)) {
      StreamPath* p = PickPath(r);
      if (p == nullptr) return;
      QueueChunk(r, *p, r.next_offset);
      r.next_offset += std::min<uint64_t>(r.chunk, r.size - r.next_offset);
      r.zero_queued = true;
    }
  }
}

void SendComm::StartWithoutPath(int index) {
  const uint64_t now = NowNs();
  Rejoin& rj = rejoin_[static_cast<size_t>(index)];
  rj.down_ns = now;
  rj.next_try_ns = now + uint64_t{opts_.failback_ms} * 1'000'000;
  paths_[static_cast<size_t>(index)]->MarkDead();
}

void SendComm::OnPathLost(StreamPath& dead, const std::string& why, uint64_t silent_ns) {
  const uint64_t now = NowNs();
  Rejoin& rj = rejoin_[static_cast<size_t>(dead.index())];
  // A path that fails again within kRelapseNs of coming back (a lossy or flapping link) waits twice
  // as long before the next failback, up to 16x, so it does not bounce traffic every few seconds.
  constexpr uint64_t kRelapseNs = 10'000'000'000ull;
  rj.relapses = rj.back_ns != 0 && now - rj.back_ns < kRelapseNs ? std::min(rj.relapses + 1, 4) : 0;
  rj.down_ns = now;
  rj.next_try_ns = now + (uint64_t{opts_.failback_ms} * 1'000'000 << rj.relapses);
  rj.attempts = 0;
  const uint64_t bit = uint64_t{1} << dead.index();
  if (hedged_ & bit) {
    // Its data went elsewhere when it first fell silent; nothing is owed, nothing to pause for.
    hedged_ &= ~bit;
    FF_WARN("path %d (%s) to %s is down: %s (silent %.1f ms); its data had been re-sent when it fell silent",
            dead.index(), dead.stream().Describe().c_str(), peer_.c_str(), why.c_str(), silent_ns / 1e6);
    return;
  }
  BeginFailover(dead, why, silent_ns);
}

bool SendComm::OnPathSilent(StreamPath& p, const std::string& why, uint64_t silent_ns) {
  // Nowhere to hedge to: leave the verdict to the absolute rule and the socket's own timeout.
  if (usable_paths() < 2 || p.draining()) return true;
  p.SetDraining(true);
  watchdog_.NoteDrained(p.index(), NowNs());
  hedged_ |= uint64_t{1} << p.index();
  BeginFailover(p, why + "; drained and kept open until it answers or is declared dead", silent_ns);
  return true;
}

void SendComm::BeginFailover(StreamPath& dead, const std::string& why, uint64_t silent_ns) {
  // Pause: completions are held and new sends refused until the re-sent data is acknowledged.
  const uint64_t now = NowNs();
  if (!failover_.active) {
    failover_ = Failover{};
    failover_.active = true;
    failover_.detected_ns = now;
    failover_.detected_unix_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    failover_.silent_ns = silent_ns;
    failover_.acked_at_detect = acked_seq_;
    gate_.Pause();
    FF_PROBE(pause, opts_.task_hash, peer_.c_str());
  } else {
    failover_.from += "; ";
  }
  failover_.from += std::to_string(dead.index()) + " (" + dead.stream().Describe() + "): " + why;
  // Switch: every chunk that was queued on the dead path and is not known delivered goes again on
  // the paths left; the receiver drops any copy it already has.
  const uint8_t idx = static_cast<uint8_t>(dead.index());
  uint64_t resent = 0;
  for (int i = 0; i < inflight_count_; ++i) {
    SendRequest& r = *inflight_[(inflight_head_ + i) % kMaxRequests];
    if (r.acked) continue;
    if (r.home_path == dead.index()) r.home_path = -1;
    const uint64_t queued = r.size == 0 ? (r.zero_queued ? 1 : 0) : (r.next_offset + r.chunk - 1) / r.chunk;
    for (uint64_t c = 0; c < queued; ++c) {
      uint64_t bit = uint64_t{1} << (c % 64);
      if (r.chunk_path[c] != idx || (r.resend[c / 64] & bit)) continue;
      r.resend[c / 64] |= bit;
      ++r.resend_count;
      resent += std::min<uint64_t>(r.chunk, r.size - c * r.chunk);
    }
  }
  failover_.resent_bytes += resent;
  resent_bytes_ += resent;
  if (inflight_count_ == 0) {
    EndFailover();  // nothing owed: resume at once
    return;
  }
  // The receiver's acknowledgements may have been riding the dead path: ask for them again.
  RequestAcks();
}

void SendComm::RequestAcks() {
  for (auto& p : paths_) {
    if (!p->alive() || p->draining() || !p->CanQueue()) continue;
    QueueControl(*p, Control{FrameType::kAckRequest, acked_seq_});
  }
}

void SendComm::EndFailover() {
  if (!failover_.active) return;
  failover_.active = false;
  gate_.Resume();
  FF_PROBE(resume, opts_.task_hash, peer_.c_str());
  ++failover_events_;
  const uint64_t paused_ns = NowNs() - failover_.detected_ns;
  FF_PROBE(failover, opts_.task_hash, peer_.c_str(), alive_paths(), failover_.resent_bytes, paused_ns);
  if (opts_.stats != nullptr && opts_.stats_task != sla::StatsTable::kInvalid)
    opts_.stats->AddFailover(opts_.stats_task, 1, failover_.resent_bytes, paused_ns);
  // One line per event; the unix timestamp lets a benchmark line it up with the moment of the cut.
  FF_WARN("failover to %s: path %s; detected after %.2f ms without progress, paused %.2f ms, re-sent %llu bytes; "
          "now on %s (detected at unix %.6f)",
          peer_.c_str(), failover_.from.c_str(), failover_.silent_ns / 1e6, paused_ns / 1e6,
          static_cast<unsigned long long>(failover_.resent_bytes), DescribeAlive().c_str(),
          failover_.detected_unix_ns / 1e9);
}

HeaderVerdict SendComm::OnHeader(StreamPath&, const FrameHeader& h, char** dest) {
  *dest = nullptr;
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::kAck:
      if (h.seq > next_seq_) {
        reject_reason_ = "acknowledgement for message " + std::to_string(h.seq) + " never sent";
        return HeaderVerdict::kReject;
      }
      return HeaderVerdict::kAccept;
    case FrameType::kRejoinInfo:
      if (h.offset > 65535) {
        reject_reason_ = "rejoin port " + std::to_string(h.offset) + " out of range";
        return HeaderVerdict::kReject;
      }
      return HeaderVerdict::kAccept;
    case FrameType::kAbort:
      reject_reason_ = h.tag == static_cast<int32_t>(AbortReason::kMessageTooLarge)
                           ? "the receiver aborted: a message was larger than its posted receive buffer"
                           : "the receiver aborted the connection (protocol error)";
      return HeaderVerdict::kReject;
    default:
      reject_reason_ = "unexpected frame type " + std::to_string(h.type) + " on a send connection";
      return HeaderVerdict::kReject;
  }
}

void SendComm::OnFrameComplete(StreamPath&, const FrameHeader& h) {
  if (h.type == static_cast<uint8_t>(FrameType::kRejoinInfo)) {
    rejoin_port_ = static_cast<uint16_t>(h.offset);
    return;
  }
  if (h.offset > credit_) credit_ = h.offset;
  // Acted on after this pump round: failing a path over from inside another path's parser is unsafe.
  // A report about an earlier incarnation of the path (before a failback) is stale.
  if ((h.flags & kAckFlagPathDown) && h.tag >= 0 && h.tag < path_count() && h.total == path_generation(h.tag))
    peer_lost_ |= uint64_t{1} << h.tag;
  if ((h.flags & (kAckFlagNicDegraded | kAckFlagNicRecovered)) && h.tag >= 0 && h.tag < path_count() &&
      h.total == path_generation(h.tag)) {
    const uint64_t bit = uint64_t{1} << h.tag;
    const uint64_t was = peer_nic_degraded_;
    if (h.flags & kAckFlagNicDegraded)
      peer_nic_degraded_ |= bit;
    else
      peer_nic_degraded_ &= ~bit;
    peer_nic_news_ |= (was ^ peer_nic_degraded_) & bit;
  }
  if (h.seq <= acked_seq_) return;
  acked_seq_ = h.seq;
  // Resume once the receiver acknowledges past where it stood at the cut: data flows again.
  if (failover_.active && acked_seq_ > failover_.acked_at_detect) EndFailover();
  while (inflight_count_ > 0) {
    SendRequest* r = inflight_[inflight_head_];
    if (r->seq >= acked_seq_) break;
    r->acked = true;
    FF_PROBE(send_done, opts_.task_hash, r->collective, r->size, peer_.c_str(), r->home_path, opts_.sla_us,
             NowNs() - r->start_ns, opts_.task.c_str());
    Record(r->collective, r->size, NowNs() - r->start_ns, sla::Direction::kSend);
    inflight_head_ = (inflight_head_ + 1) % kMaxRequests;
    --inflight_count_;
  }
}

Status SendComm::Progress() {
  if (!error_.ok()) return error_;
  const bool waiting = inflight_count_ > 0;
  if (waiting && !CheckHealth()) return error_;
  for (int round = 0; round < 4; ++round) {
    if (waiting) {
      for (auto& p : paths_) {
        if (!p->alive()) continue;
        if (!HandlePump(*p, p->PumpRx(*this))) return error_;
      }
    }
    if (peer_lost_ != 0 && !ApplyPeerLoss()) return error_;
    // A degraded NIC's paths are drained as long as the verdict stands (not only when it changes):
    // a drain that had to wait - the other path was draining itself at the time - still happens.
    // With the dual-path canary a comparison decides once per change instead.
    const uint64_t nic_bad = opts_.dual_path_ms == 0 ? (peer_nic_degraded_ | nic_degraded_) : peer_nic_news_;
    peer_nic_news_ = 0;
    if (nic_bad != 0) {
      for (auto& p : paths_) {
        const uint64_t bit = uint64_t{1} << p->index();
        if (!(nic_bad & bit) || !p->alive() || p->draining()) continue;
        if (peer_nic_degraded_ & bit)
          SoftDegrade(*p, "the receiver's NIC under it degraded (error counters)", NowNs());
        else if (nic_degraded_ & bit)
          SoftDegrade(*p, "NIC " + PathInterface(p->index()) + " degraded", NowNs());
      }
    }
    if (round == 0 && rejoin_port_ != 0 && opts_.failback_ms != 0 && alive_paths() < path_count()) {
      const uint64_t now = NowNs();
      if (now >= next_failback_check_ns_) TryFailback(now);
    }
    if (waiting && round == 0) CheckAckTimeout(NowNs());
    Schedule();
    if (!FlushAll()) return error_;
    bool more = false;
    for (int i = 0; i < inflight_count_ && !more; ++i) {
      const SendRequest& r = *inflight_[(inflight_head_ + i) % kMaxRequests];
      more = r.next_offset < r.size || r.resend_count > 0;
    }
    if (!more) break;
  }
  return error_;
}

void SendComm::ProbeCredit(uint64_t now_ns) {
  // Messages wait for credit (the receiver's posted buffers). If credit does not move, the receiver
  // may simply be busy - or its credit went out on a path that died silently, which nothing else
  // here would notice (no data in flight on it). Ask for it again on every path, backing off.
  const SendRequest& head = *inflight_[inflight_head_];
  if (head.seq < credit_ || credit_ != credit_seen_) {
    credit_seen_ = credit_;
    credit_wait_ns_ = now_ns;
    credit_probe_gap_ns_ = kCreditProbeNs;
    return;
  }
  if (now_ns - credit_wait_ns_ < credit_probe_gap_ns_) return;
  RequestAcks();
  credit_wait_ns_ = now_ns;
  credit_probe_gap_ns_ = std::min<uint64_t>(credit_probe_gap_ns_ * 2, 1'000'000'000);
}

void SendComm::CheckAckTimeout(uint64_t now_ns) {
  if (inflight_count_ > 0) ProbeCredit(now_ns);
  if (opts_.resend_timeout_ms == 0 || inflight_count_ == 0) return;
  if (acked_seq_ != ack_seen_) {
    ack_seen_ = acked_seq_;
    ack_progress_ns_ = now_ns;
    timeout_streak_ = 0;
    stuck_reported_ = false;
    return;
  }
  // Doubles while nothing is acknowledged, so a receiver that merely stopped progressing costs a
  // few duplicate transfers, not a storm.
  if (!stuck_reported_ && now_ns - ack_progress_ns_ >= kStuckReportNs) {
    stuck_reported_ = true;
    const SendRequest& h = *inflight_[inflight_head_];
    FF_WARN("send to %s: no acknowledgement for %.1f s: acked<%llu next=%llu credit<%llu inflight=%d head{seq=%llu "
            "size=%llu queued_to=%llu resend=%d}%s",
            peer_.c_str(), (now_ns - ack_progress_ns_) / 1e9, static_cast<unsigned long long>(acked_seq_),
            static_cast<unsigned long long>(next_seq_), static_cast<unsigned long long>(credit_), inflight_count_,
            static_cast<unsigned long long>(h.seq), static_cast<unsigned long long>(h.size),
            static_cast<unsigned long long>(h.next_offset), h.resend_count, DescribePaths().c_str());
  }
  const uint64_t timeout_ns = (uint64_t{opts_.resend_timeout_ms} * 1'000'000) << std::min(timeout_streak_, 6u);
  if (now_ns - ack_progress_ns_ < timeout_ns) return;
  // Only when everything we wrote has reached the peer's kernel (nothing queued here, nothing
  // unacknowledged in any live socket): then the receiver dropped it, e.g. with a path it reset,
  // and only a re-send recovers. A slow link never gets here - its bytes are still in flight.
  for (auto& p : paths_) {
    if (!p->alive()) continue;
    if (p->queued_frames() > 0 || p->KernelUnackedBytes() != 0) return;
  }
  uint64_t bytes = 0;
  for (int i = 0; i < inflight_count_; ++i) {
    SendRequest& r = *inflight_[(inflight_head_ + i) % kMaxRequests];
    if (r.acked || r.seq >= credit_) continue;
    const uint64_t queued = r.size == 0 ? (r.zero_queued ? 1 : 0) : (r.next_offset + r.chunk - 1) / r.chunk;
    for (uint64_t c = 0; c < queued; ++c) {
      uint64_t bit = uint64_t{1} << (c % 64);
      if (r.resend[c / 64] & bit) continue;
      r.resend[c / 64] |= bit;
      ++r.resend_count;
      bytes += r.size == 0 ? 0 : std::min<uint64_t>(r.chunk, r.size - c * r.chunk);
    }
    if (r.home_path >= 0 && !paths_[static_cast<size_t>(r.home_path)]->alive()) r.home_path = -1;
  }
  RequestAcks();  // the acknowledgement itself may be what went missing
  ++timeout_resends_;
  ++timeout_streak_;
  resent_bytes_ += bytes;
  ack_progress_ns_ = now_ns;
  FF_WARN("no acknowledgement from %s for %u ms although the peer holds every byte sent; re-sending %llu bytes of "
          "%d unacknowledged message(s) on %s",
          peer_.c_str(), opts_.resend_timeout_ms, static_cast<unsigned long long>(bytes), inflight_count_,
          DescribeAlive().c_str());
  if (opts_.stats != nullptr && opts_.stats_task != sla::StatsTable::kInvalid)
    opts_.stats->AddFailover(opts_.stats_task, 1, bytes, 0);
}

bool SendComm::ApplyPeerLoss() {
  const uint64_t lost = peer_lost_;
  peer_lost_ = 0;
  for (auto& p : paths_) {
    if (!(lost & (uint64_t{1} << p->index())) || !p->alive()) continue;
    // Only while another path remains: the last one is left to the socket timeout, as in CheckHealth.
    if (alive_paths() < 2) break;
    if (!PathDown(*p, "the receiver lost it (carrier or socket error on its side)", PathFault::kPeerReported))
      return false;
  }
  return true;
}

void SendComm::FailbackAttemptFailed(int path, uint64_t now_ns, const std::string& why) {
  Rejoin& rj = rejoin_[static_cast<size_t>(path)];
  rj.connecting = false;
  rj.socket.reset();
  rj.sent = 0;
  ++rj.attempts;
  // A path that keeps failing is tried ever more rarely (up to 16x the failback time).
  rj.next_try_ns = now_ns + (uint64_t{opts_.failback_ms} * 1'000'000 << std::min(rj.attempts + rj.relapses, 4));
  FF_INFO(NCCL_NET, "failback of path %d to %s: attempt %d failed (%s); next in %.1f s", path, peer_.c_str(),
          rj.attempts, why.c_str(), (rj.next_try_ns - now_ns) / 1e9);
}

void SendComm::TryFailback(uint64_t now_ns) {
  next_failback_check_ns_ = now_ns + 5'000'000;  // the checks below cost syscalls: a few per 5 ms at most
  const uint64_t stable_ns = uint64_t{opts_.failback_ms} * 1'000'000;
  for (auto& path : paths_) {
    const int i = path->index();
    if (path->alive() || static_cast<size_t>(i) >= opts_.endpoints.size()) continue;
    Rejoin& rj = rejoin_[static_cast<size_t>(i)];
    const PathEndpoint& ep = opts_.endpoints[static_cast<size_t>(i)];
    if (!rj.connecting) {
      if (now_ns < rj.next_try_ns) continue;
      if (rj.ifindex < 0) rj.ifindex = LinkMonitor::InterfaceOfAddress(ep.local);
      // After carrier loss: wait until the interface has been up for the whole failback time.
      if (opts_.link_events && rj.ifindex > 0) {
        LinkMonitor::Get().Poll(now_ns);
        if (!LinkMonitor::Get().StableUp(rj.ifindex, now_ns, stable_ns)) {
          rj.next_try_ns = now_ns + 50'000'000;
          continue;
        }
      }
      sockaddr_storage remote = ep.remote;
      if (remote.ss_family == AF_INET)
        reinterpret_cast<sockaddr_in*>(&remote)->sin_port = htons(rejoin_port_);
      else
        reinterpret_cast<sockaddr_in6*>(&remote)->sin6_port = htons(rejoin_port_);
      Status s = tcp::StartConnect(remote, &ep.local, ep.sport_lo, ep.sport_hi, &rj.socket);
      if (!s.ok()) {
        FailbackAttemptFailed(i, now_ns, s.message());
        continue;
      }
      rj.connecting = true;
      rj.deadline_ns = now_ns + 1'000'000'000;  // a path that cannot complete a handshake in 1 s is not back
      rj.sent = 0;
      FrameHeader& h = rj.hello;
      h = FrameHeader{};
      h.type = static_cast<uint8_t>(FrameType::kHello);
      h.flags = kHelloFlagRejoin;
      h.path = static_cast<uint16_t>(i);
      h.tag = i;
      h.seq = opts_.conn_id;
      h.offset = opts_.secret;
      h.total = static_cast<uint64_t>(path_count());
      h.task_hash = opts_.chunk_bytes;
      h.sla_us = opts_.sla_us;
      SealHeader(&h);
    }
    int err = 0;
    tcp::ConnectProgress cp = tcp::PollConnect(rj.socket.fd(), &err);
    if (cp == tcp::ConnectProgress::kFailed) {
      FailbackAttemptFailed(i, now_ns, ErrnoMessage("connect", err));
      continue;
    }
    if (cp == tcp::ConnectProgress::kPending) {
      if (now_ns > rj.deadline_ns) FailbackAttemptFailed(i, now_ns, "no handshake within 1 s");
      continue;
    }
    if (rj.sent == 0) (void)tcp::ApplyPathOptions(rj.socket.fd(), ep.remote.ss_family, opts_.socket_options);
    iovec iov{reinterpret_cast<char*>(&rj.hello) + rj.sent, sizeof(FrameHeader) - rj.sent};
    ssize_t w = tcp::SendSome(rj.socket.fd(), &iov, 1);
    if (w < 0) {
      FailbackAttemptFailed(i, now_ns, ErrnoMessage("hello", errno));
      continue;
    }
    rj.sent += static_cast<uint32_t>(w);
    if (rj.sent < sizeof(FrameHeader)) continue;
    sockaddr_storage remote = ep.remote;
    if (remote.ss_family == AF_INET)
      reinterpret_cast<sockaddr_in*>(&remote)->sin_port = htons(rejoin_port_);
    else
      reinterpret_cast<sockaddr_in6*>(&remote)->sin6_port = htons(rejoin_port_);
    const std::string desc = tcp::AddressToString(ep.local) + ":" + std::to_string(tcp::LocalPort(rj.socket.fd())) +
                             "->" + tcp::PeerToString(remote);
    const uint64_t down_ns = now_ns - rj.down_ns;
    const int attempts = rj.attempts + 1;
    ReplacePath(i, std::make_unique<tcp::TcpStream>(std::move(rj.socket), desc));
    const int relapses = rj.relapses;
    rj = Rejoin{};
    rj.back_ns = now_ns;
    rj.relapses = relapses;
    ++failbacks_;
    FF_PROBE(failback, opts_.task_hash, peer_.c_str(), i);
    if (opts_.stats != nullptr && opts_.stats_task != sla::StatsTable::kInvalid)
      opts_.stats->AddFailback(opts_.stats_task);
    FF_WARN("failback to %s: path %d (%s) reconnected after %.2f s down (attempt %d); now on %s", peer_.c_str(), i,
            desc.c_str(), down_ns / 1e9, attempts, DescribeAlive().c_str());
    if (opts_.dual_path_ms > 0 && !dual_.active())
      StartDualPath(*paths_[static_cast<size_t>(i)], DualPathCompare::Kind::kReturn, "", now_ns);
  }
}

Status SendComm::Test(SendRequest* r, int* done, uint64_t* size) {
  *done = 0;
  // While a failover holds completions, testing even an acknowledged request must progress the
  // communicator: the caller may be waiting on exactly this request, and the failover ends only
  // when the re-sent data's acknowledgements are read.
  Status s = r->acked && !gate_.paused() ? Status::Ok() : Progress();
  if (!r->acked && !s.ok()) return s;  // a completed request stays complete even if the comm failed later
  if (gate_.paused() || !r->acked) return Status::Ok();
  *done = 1;
  if (size) *size = r->size;
  pool_.Release(r);
  return Status::Ok();
}

}  // namespace ff
