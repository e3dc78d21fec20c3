// Send path: message -> descriptor match -> chunks -> least-loaded path; eager messages complete once
// handed to the transport, the others on acknowledgement.
#include "core/send_comm.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <unistd.h>

#include "base/logging.h"
#include "core/probes.h"
#include "core/task_profile.h"

namespace ff {

SendComm::SendComm(std::vector<std::unique_ptr<Path>> paths, const CommOptions& opts, std::string peer)
    : Comm(std::move(paths), opts, std::move(peer)),
      desc_(new RecvDescriptor[kDescWindow]()),
      desc_seq_(new uint64_t[kDescWindow]()) {
  // A ring smaller than the eager size still carries the eager sends that fit it (FLEXIFORCE_EAGER_RING:
  // a send that does not fit waits for its acknowledgement instead); without one, every send waits
  // for its descriptor too. FLEXIFORCE_EAGER_BYTES=4M with the 2 MiB default ring used to leave no ring
  // at all.
  if (opts_.eager_bytes > 0 && opts_.eager_ring_bytes > 0) {
    ring_size_ = opts_.eager_ring_bytes;
    ring_.reset(new char[ring_size_]);
    // Every page faulted in now, at connect, not by the first eager sends: the ring is written
    // sequentially and a 2 MiB ring is 512 first-touch page faults spread over the first 2 MiB
    // of small messages (a collective's first iterations). The ring wraps anyway, so a running
    // job holds all of it either way.
    std::memset(ring_.get(), 0, ring_size_);
  }
  unsolicited_ok_ = ring_ != nullptr && !paths_.empty();
  copy_after_write_ = ring_ != nullptr && !paths_.empty();
  for (const auto& p : paths_) {
    unsolicited_ok_ &= !p->NeedsPostedBuffer();
    needs_descriptor_ |= p->NeedsPostedBuffer();
    copy_after_write_ &= p->PayloadFreeAfterFlush();
  }
}

char* SendComm::RingReserve(uint64_t len, uint64_t* end) {
  const uint64_t pos = ring_head_ % ring_size_;
  const uint64_t pad = pos + len > ring_size_ ? ring_size_ - pos : 0;  // a copy never wraps
  if (ring_head_ + pad + len - ring_tail_ > ring_size_) return nullptr;
  ring_head_ += pad;
  char* p = ring_.get() + ring_head_ % ring_size_;
  ring_head_ += len;
  *end = ring_head_;
  return p;
}

Status SendComm::Isend(const void* data, uint64_t size, int tag, void* phandle, SendRequest** out,
                       const MemHandle* mem) {
  *out = nullptr;
  if (!error_.ok()) return error_;
  if (size > kMaxMessageBytes) return InvalidArgument("isend size " + std::to_string(size) + " beyond the limit");
  if (size > 0 && data == nullptr) return InvalidArgument("isend of " + std::to_string(size) + " bytes from NULL");
  if (gate_.paused() || inflight_count() == kMaxMsgs) {
    // "Retry later" - and move things along meanwhile: a caller that only retries isend (without
    // testing its outstanding requests) must still see the failover finish or a slot free up.
    return Progress().ok() ? Status::Ok() : error_;
  }
  // A message that can go neither into a published buffer nor unsolicited, accepted now, would be
  // sent only by a later test() - of its own request, when the caller has no other send left to
  // test: "retry later" until its descriptor is here (AwaitDescriptor). A caller with older sends
  // outstanding tests them, and each such test() sends this one once its descriptor is read; on a
  // stream such a message is then accepted and queued at once (retrying it instead cost the
  // emulator's 2-8 MiB AllReduce 2-5%: a retry is a pass that progressed nothing).
  auto must_wait = [&] {
    return next_seq_ >= credit_ && (needs_descriptor_ || (pool_.in_use() == 0 && !UnsolicitedWouldFit(size)));
  };
  if (must_wait()) {
    if (!AwaitDescriptor()) return error_;
    if (must_wait()) return Status::Ok();
  }
  SendRequest* r = pool_.Acquire(RequestKind::kSend, this);
  if (r == nullptr) return Status::Ok();
  const uint64_t now = NowNs();
  if (inflight_count() == 0) {  // the timeout counts from the first message owed
    ack_progress_ns_ = now;
    acks_asked_ = false;
  }
  const uint64_t seq = next_seq_++;
  SendMsg& m = Msg(seq);
  m.seq = seq;
  m.data = static_cast<const char*>(data);
  m.size = size;
  posted_bytes_ += size;
  m.bytes_end = posted_bytes_;
  m.chunk = ChunkBytesFor(size, opts_.chunk_bytes);
  m.next_offset = 0;
  m.zero_queued = false;
  m.matched = false;
  m.eager = false;
  m.ack_soon = false;
  m.home_path = -1;
  m.tag = tag;
  m.collective = Classify(phandle);
  m.start_ns = now;
  m.ring_end = 0;
  m.ring_copy = nullptr;
  m.resend = {};
  m.resend_count = 0;
  m.mem = mem != nullptr && mem->Covers(data, size) ? mem : nullptr;
  if (ring_ && size <= opts_.eager_bytes) {
    // Eager: the bytes are copied into the retransmit ring, so the caller's buffer is free as soon
    // as they are handed to the transport; a failover re-sends them from the ring. On a stream the
    // copy is made after the write (below, or at the latest when the request completes).
    uint64_t end = ring_tail_;
    char* copy = size == 0 ? nullptr : RingReserve(size, &end);
    if (size == 0 || copy != nullptr) {
      if (copy != nullptr && copy_after_write_) {
        m.ring_copy = copy;
      } else {
        if (copy != nullptr) std::memcpy(copy, data, size);
        m.data = copy;
        m.mem = nullptr;  // the chunks leave from the ring's copy
      }
      m.ring_end = end;
      m.eager = true;
      // The receiver acknowledges eager messages lazily; past half the ring or of the message slots
      // this one asks for its acknowledgement at once, so the sender never runs dry waiting - unless
      // an earlier one still waits for its answer (which acknowledges this one too if it comes
      // later). Every message asking made the receiver answer each at once, on every path, when it
      // caught up with its posted receives: streaming 8 KiB messages through a 512 KiB ring ran at
      // 0.55 GB/s, two control frames per message.
      const bool low = (ring_head_ - ring_tail_) * 2 > ring_size_ || inflight_count() * 2 > kMaxMsgs;
      m.ack_soon = low && ack_soon_seq_ <= acked_seq_;
      if (m.ack_soon) ack_soon_seq_ = seq + 1;
      ++eager_messages_;
    }
  }
  r->seq = seq;
  r->size = size;
  r->eager = m.eager;
  r->collective = m.collective;
  r->start_ns = now;
  FF_PROBE(send_post, opts_.task_hash, m.collective, size, peer_.c_str(), m.home_path, opts_.sla_us, 0,
           opts_.task.c_str());
  *out = r;
  // Coalescing: a send posted soon after the last write waits for the sends that follow, so a
  // burst of messages leaves in one write instead of one system call each (on loopback that call
  // also runs the receiver's TCP stack; it was the whole cost of a small message, and half of a
  // 128 KiB one). Eager sends are held up to kMaxHeldBytes together, larger ones (which complete
  // on their acknowledgement anyway) up to kMaxHeldRendezvousBytes. A send is held at most
  // coalesce_ns: the next isend or test() after that writes it, and so does any test() of a
  // request still held (eager completion needs the bytes handed to the transport).
  // Only while the caller has an older send to test: the test() that releases the last request not
  // held writes the held ones (Test), so a caller that tests what it posted never waits on a hold.
  // A lone message (a ping-pong, a collective's last step) finds the last write long past and goes.
  if ((m.eager ? held_bytes_ + size <= kMaxHeldBytes : held_bytes_ + size <= kMaxHeldRendezvousBytes) &&
      opts_.coalesce_ns != 0 && held_ < kMaxHeld &&
      pool_.in_use() - held_ >= 2 && now - last_write_ns_ < opts_.coalesce_ns) {
    ++held_;
    held_bytes_ += size;
    return Status::Ok();
  }
  // Start the bytes moving now; small messages often leave in this very call. A failure found
  // here is sticky and reported by test(), which is where NCCL expects it.
  write_only_ = true;
  (void)Progress(now);
  write_only_ = false;
  // From the end of the write: on loopback the write itself takes longer than the caller needs to
  // post the next send.
  if (opts_.coalesce_ns != 0) last_write_ns_ = NowNs();
  // The bytes are on their way (or queued, still pointing at the caller's buffer until written):
  // the ring copy now costs the peer nothing. An acknowledged message needs none.
  if (seq >= acked_seq_) SecureEagerCopy(m);
  return Status::Ok();
}

bool SendComm::AwaitDescriptor() {
  // A transport that writes into the receiver's posted buffer (RDMA WRITE) cannot send a message
  // before that buffer's descriptor arrived, and a stream cannot send one that is not allowed to go
  // unsolicited (above a chunk or the unsolicited budget, or no eager ring). Accepting it anyway
  // would leave it to be sent by a later test() of this very request, and a caller that tests its
  // receive first (a ping-pong whose reply waits on this message) would wait forever. So isend says
  // "retry later" until the descriptor is here, as NCCL's IB transport does, and reads what the
  // receiver sent meanwhile. On streams not again within kAwaitPollGapNs of the last read of every
  // path (this call's or a test()'s): a caller that retries isend between tests would read each
  // socket twice per pass.
  const uint64_t now = NowNs();
  if (!needs_descriptor_ && now - std::min(now, last_rx_poll_ns_) < kAwaitPollGapNs) return error_.ok();
  for (auto& p : paths_) {
    if (!p->alive()) continue;
    if (!HandlePump(*p, p->Poll(*this))) return false;
  }
  if (!error_.ok()) return false;
  last_rx_poll_ns_ = now;
  // A peer that closed every path (an orderly close when nothing was owed) will post nothing more.
  if (alive_paths() == 0) {
    Fail(RemoteError("no path left to " + peer_ + ": the peer closed the connection before posting a receive "
                     "for this send (its process exited?)"));
    return false;
  }
  // The receiver's descriptors may have gone out on a path that died silently: ask again, backing off.
  if (next_seq_ >= credit_) {
    ProbeCredit(now);
    if (!FlushAll()) return false;
  }
  return error_.ok();
}

uint64_t SendComm::DrainForClose(uint64_t timeout_ns) {
  const uint64_t start = NowNs();
  closing_ = true;
  FF_INFO(NCCL_NET, "closing the send connection to %s: %llu message(s) sent, %llu eager, %llu before their receive "
          "was posted, %llu byte(s) re-sent", peer_.c_str(), static_cast<unsigned long long>(next_seq_),
          static_cast<unsigned long long>(eager_messages_), static_cast<unsigned long long>(unsolicited_messages_),
          static_cast<unsigned long long>(resent_bytes_));
  // Eager messages are acknowledged lazily, and a receiver with nothing posted is not progressing:
  // once every owed byte sits in the peer's transport, ask once for the acknowledgement, give it a
  // moment, and close - nothing is lost (a failover is what would need the ring, and there is none).
  // A send above the eager threshold (or one the ring had no room for) completes only on its
  // acknowledgement: one still unacknowledged here never completed, so its caller abandoned it -
  // NCCL closes with requests pending only when it aborts, often because the peer never posted the
  // receive. Nothing was promised for it or for what follows it: the close then waits only until
  // the eager messages before it, which did complete, are handed to the transport, not for
  // acknowledgements that may never come (it waited up to 5 s per connection).
  uint64_t abandoned = next_seq_;
  for (uint64_t seq = acked_seq_; seq < next_seq_; ++seq)
    if (!Msg(seq).eager) {
      abandoned = seq;
      break;
    }
  uint64_t delivered_ns = 0;
  while (next_seq_ > acked_seq_ && error_.ok() && NowNs() - start < timeout_ns) {
    (void)Progress();
    if (next_seq_ == acked_seq_) break;
    if (abandoned < next_seq_ && abandoned >= acked_seq_ && HandedToTransport(abandoned)) {
      FF_INFO(NCCL_NET, "closing the send connection to %s: %llu message(s) from message %llu on never completed "
              "(the caller closed with its send pending, as an abort does); not waiting for them", peer_.c_str(),
              static_cast<unsigned long long>(next_seq_ - abandoned), static_cast<unsigned long long>(abandoned));
      return next_seq_ - acked_seq_;
    }
    if (OwedOnlyAcknowledgements()) {
      const uint64_t now = NowNs();
      if (delivered_ns == 0) {
        delivered_ns = now;  // asked once: the request itself is in flight for a moment
        RequestAcks();
        (void)FlushAll();
      } else if (now - delivered_ns >= kCloseAckGraceNs) {
        FF_INFO(NCCL_NET, "closing the send connection to %s: the peer's transport holds all %llu eager message(s) "
                "not yet acknowledged", peer_.c_str(), static_cast<unsigned long long>(next_seq_ - acked_seq_));
        return 0;
      }
    }
    usleep(50);
  }
  if (next_seq_ > acked_seq_ && error_.ok()) ReportUnfinishedFailover("not resumed: the connection is closing");
  if (next_seq_ > acked_seq_ && error_.ok())
    FF_WARN("closing the send connection to %s with %llu message(s) unacknowledged after %.1f s", peer_.c_str(),
            static_cast<unsigned long long>(next_seq_ - acked_seq_), (NowNs() - start) / 1e9);
  return next_seq_ - acked_seq_;
}

void SendComm::OnReadmit(Path& /*p*/) {
  ReportUnfinishedFailover("still paused when a drained path returned: the receiver has not acknowledged past the cut");
}

void SendComm::ReportUnfinishedFailover(const char* state) {
  if (!failover_.active || failover_.reported) return;
  failover_.reported = true;
  FF_WARN("failover to %s: path %s; detected after %.2f ms without progress, %s (%.2f ms after), re-sent %llu bytes; "
          "now on %s (detected at unix %.6f)",
          peer_.c_str(), failover_.from.c_str(), failover_.silent_ns / 1e6, state,
          (NowNs() - failover_.detected_ns) / 1e6, static_cast<unsigned long long>(failover_.resent_bytes),
          DescribeAlive().c_str(), failover_.detected_unix_ns / 1e9);
}

void SendComm::OnFailed() {
  AbortMsg m{};
  m.reason = static_cast<int32_t>(AbortReason::kProtocolError);
  m.seq = acked_seq_;
  for (auto& p : paths_) {
    if (!p->alive() || !p->CanQueue()) continue;
    QueueControl(*p, FrameType::kAbort, &m, sizeof(m));
    p->Flush();
  }
}

bool SendComm::Match(SendMsg& m) {
  const RecvDescriptor& d = desc_[m.seq % kDescWindow];
  const uint64_t base = m.seq - d.group_idx;
  const RecvDescriptor* hit = nullptr;
  std::string tags;
  for (uint64_t s = base; s < base + d.group_n; ++s) {
    const RecvDescriptor& e = desc_[s % kDescWindow];
    if (desc_seq_[s % kDescWindow] != s + 1) return true;  // the group is not complete yet: wait
    if (d.group_n == 1 || e.tag == m.tag) {
      hit = &e;
      break;
    }
    tags += (tags.empty() ? "" : ", ") + std::to_string(e.tag);
  }
  if (hit == nullptr) {
    Fail(InvalidUsage("message " + std::to_string(m.seq) + " to " + peer_ + " has tag " + std::to_string(m.tag) +
                      ", which matches no buffer of the receiver's grouped receive (tags " + tags + ")"));
    return false;
  }
  if (m.size > hit->capacity) {
    Fail(InvalidUsage("message " + std::to_string(m.seq) + " to " + peer_ + " (tag " + std::to_string(m.tag) +
                      ") has " + std::to_string(m.size) + " bytes but the receiver posted a buffer of " +
                      std::to_string(hit->capacity)));
    return false;
  }
  m.matched = true;
  m.dest = *hit;
  return true;
}

Path* SendComm::PickPath(SendMsg& m) {
  // A path that still owes the receiver a fence notice takes no chunk before it.
  auto owes = [&](const Path& p) {
    const size_t i = static_cast<size_t>(p.index());
    return i < notice_owed_.size() && notice_owed_[i] != 0;
  };
  if (m.home_path >= 0) {
    Path& p = *paths_[static_cast<size_t>(m.home_path)];
    if (p.alive() && !p.draining())
      return p.queued_data_frames() < opts_.max_queued_chunks && p.CanQueue() && !owes(p) ? &p : nullptr;
    m.home_path = -1;
  }
  // Least loaded: bytes queued here, plus - for striped messages - what the transport still holds
  // (unsent or unacknowledged). A slow or lossy path takes everything the kernel will buffer, so our
  // own queue alone would keep feeding it.
  const bool striped = m.size >= opts_.stripe_min_bytes;
  Path* best = nullptr;
  uint64_t best_load = 0;
  // The queue limit counts chunks; small messages may fill a path's queue up to kStickyQueueBytes
  // instead, so that a burst of them is written at once.
  auto usable = [&](const Path& p) {
    const bool room = p.queued_data_frames() < opts_.max_queued_chunks ||
                      (!striped && p.queued_payload_bytes() + m.size <= kStickyQueueBytes);
    return p.alive() && !p.draining() && p.CanQueue() && room && !owes(p);
  };
  // Small messages stay on the path the last one took while its queue is short: messages queued
  // together on one path leave in one write (coalescing), where spreading them would cost a write
  // per path. Past kStickyQueueBytes the least loaded path takes over.
  // Whole messages from kRoundRobinMinBytes on (below the striping size) take the next usable path
  // instead: there is nothing to coalesce, and on one path they queued behind each other in one
  // socket - the emulator's 4-rank 512 KiB AllReduce (128 KiB steps) ran at 0.72-0.77x the raw
  // backend taking them in turn over two sockets, 0.90-0.96x now. (From 64 KiB on, its 256 KiB
  // AllReduce fell from 1.00x to 0.86-0.90x: the receiver reads every path after such a message.)
  if (!striped && m.size >= kRoundRobinMinBytes) {
    const size_t n = paths_.size();
    const size_t after = last_small_path_ >= 0 ? static_cast<size_t>(last_small_path_) : n - 1;
    for (size_t k = 1; k <= n && best == nullptr; ++k) {
      Path& p = *paths_[(after + k) % n];
      if (usable(p)) best = &p;
    }
  } else if (!striped && last_small_path_ >= 0 && static_cast<size_t>(last_small_path_) < paths_.size()) {
    Path& p = *paths_[static_cast<size_t>(last_small_path_)];
    if (usable(p) && p.queued_payload_bytes() + m.size <= kStickyQueueBytes) best = &p;
  }
  if (striped) {
    // With one usable path there is nothing to compare: no need to ask the transport.
    int usable_count = 0;
    for (auto& p : paths_)
      if (usable(*p) && ++usable_count == 1) best = p.get();
    if (usable_count <= 1) return best;
    best = nullptr;
  }
  for (auto& p : paths_) {
    if (best != nullptr && !striped) break;
    if (!usable(*p)) continue;
    uint64_t load = p->queued_payload_bytes();
    if (striped) load += InFlightThisPass(*p);
    if (best == nullptr || load < best_load) {
      best = p.get();
      best_load = load;
    }
  }
  if (best != nullptr && !striped) m.home_path = last_small_path_ = best->index();
  return best;
}

uint64_t SendComm::InFlightThisPass(const Path& p) {
  // Asked once per path per Schedule pass (a stream answers from a system call at most every
  // StreamPath::kInFlightRefreshNs, else from its last reading): nothing is written to the
  // transport while a pass queues chunks, so the figure can only have shrunk since (the peer
  // acknowledging), and the chunks queued in this pass are counted by queued_payload_bytes.
  const size_t i = static_cast<size_t>(p.index());
  if (i >= inflight_pass_.size()) inflight_pass_.resize(paths_.size() > i ? paths_.size() : i + 1, kInFlightUnread);
  if (inflight_pass_[i] == kInFlightUnread) inflight_pass_[i] = std::max<int64_t>(p.InFlightEstimate(NowNs()), 0);
  return static_cast<uint64_t>(inflight_pass_[i]);
}

void SendComm::QueueChunk(SendMsg& m, Path& p, uint64_t offset) {
  uint64_t len = std::min<uint64_t>(m.chunk, m.size - offset);
  FrameHeader h{};
  h.type = static_cast<uint8_t>(FrameType::kData);
  h.path = static_cast<uint16_t>(p.index());
  h.tag = m.tag;
  h.length = static_cast<uint32_t>(len);
  h.seq = m.seq;
  h.offset = offset;
  h.total = m.size;
  h.task_hash = opts_.task_hash;
  h.sla_us = opts_.sla_us;
  h.collective = m.collective;
  h.flags = m.eager && !m.ack_soon ? 0 : kDataFlagAckNow;
  SealHeader(&h);
  p.QueueData(h, m.data + offset, m.dest, m.mem);
  m.chunk_path[offset / m.chunk] = static_cast<uint8_t>(p.index());
}

void SendComm::Schedule() {
  std::fill(inflight_pass_.begin(), inflight_pass_.end(), kInFlightUnread);
  QueueFenceNotices();
  // Messages below sched_seq_ are wholly handed to paths; only a re-send (failover, timeout) moves
  // the cursor back. Eager messages wait lazily for their acknowledgement, so walking every one of
  // them on each call was most of a small message's scheduling work.
  sched_seq_ = std::max(acked_seq_, sched_seq_);
  for (uint64_t seq = sched_seq_; seq < next_seq_; ++seq) {
    SendMsg& m = Msg(seq);
    if (!m.matched) {
      if (m.seq < credit_) {
        if (!Match(m)) return;
        if (!m.matched) return;
      } else if (!SendUnsolicited(m)) {
        return;  // its receive buffer is not posted yet
      }
    }
    // Chunks whose path died go first: the receiver's cumulative acknowledgement waits on them.
    for (size_t w = 0; m.resend_count > 0 && w < m.resend.size(); ++w) {
      while (m.resend[w] != 0) {
        Path* p = PickPath(m);
        if (p == nullptr) return;
        int bit = __builtin_ctzll(m.resend[w]);
        m.resend[w] &= m.resend[w] - 1;
        --m.resend_count;
        QueueChunk(m, *p, (w * 64 + static_cast<uint64_t>(bit)) * m.chunk);
      }
    }
    while (m.next_offset < m.size || (m.size == 0 && !m.zero_queued)) {
      Path* p = PickPath(m);
      if (p == nullptr) return;
      QueueChunk(m, *p, m.next_offset);
      m.next_offset += std::min<uint64_t>(m.chunk, m.size - m.next_offset);
      m.zero_queued = true;
    }
    if (seq == sched_seq_) sched_seq_ = seq + 1;
  }
}

bool SendComm::UnsolicitedFits(const SendMsg& m) const {
  // Eager or not: the budget below is what the receiver's staging arena always has room for, so a
  // message sent early never stalls its path there (a stalled path could hold back a chunk re-sent
  // after a failover behind it). A message that is not eager still completes on its acknowledgement.
  if (!unsolicited_ok_ || m.size > m.chunk || failover_.active) return false;
  if (m.seq < credit_ || m.seq - credit_ >= kMaxUnsolicitedMsgs) return false;
  // Messages between the credit and this one all went unsolicited (Schedule sends in order): their
  // bytes are the difference of the running totals, while the credit's message still has its slot.
  uint64_t bytes = m.size;
  if (next_seq_ - credit_ <= kMaxMsgs) {
    const SendMsg& first = msgs_[credit_ % kMaxMsgs];
    bytes = m.bytes_end - (first.bytes_end - first.size);
  } else {
    for (uint64_t s = credit_; s < m.seq; ++s) bytes += msgs_[s % kMaxMsgs].size;
  }
  return bytes <= kMaxUnsolicitedBytes;
}

bool SendComm::UnsolicitedWouldFit(uint64_t size) const {
  // UnsolicitedFits for the message isend is about to create (sequence next_seq_ >= credit_).
  if (!unsolicited_ok_ || size > ChunkBytesFor(size, opts_.chunk_bytes)) return false;
  if (next_seq_ - credit_ >= kMaxUnsolicitedMsgs) return false;
  uint64_t bytes = size;
  if (next_seq_ > credit_) {  // messages credit_..next_seq_-1 are posted and still in their slots
    const SendMsg& first = msgs_[credit_ % kMaxMsgs];
    bytes += posted_bytes_ - (first.bytes_end - first.size);
  }
  return bytes <= kMaxUnsolicitedBytes;
}

bool SendComm::SendUnsolicited(SendMsg& m) {
  if (!UnsolicitedFits(m)) return false;
  m.matched = true;
  m.dest = RecvDescriptor{};  // a stream ignores it; the receiver checks tag and size on arrival
  ++unsolicited_messages_;
  return true;
}

bool SendComm::HandedToTransport(uint64_t end_seq) const {
  for (uint64_t seq = acked_seq_; seq < end_seq; ++seq) {
    const SendMsg& m = msgs_[seq % kMaxMsgs];
    if (!m.matched || m.next_offset < m.size || (m.size == 0 && !m.zero_queued) || m.resend_count > 0) return false;
  }
  for (const auto& p : paths_)
    if (p->alive() && p->queued_data_frames() > 0) return false;
  return !failover_.active;
}

bool SendComm::OwedOnlyAcknowledgements() const {
  for (uint64_t seq = acked_seq_; seq < next_seq_; ++seq) {
    const SendMsg& m = msgs_[seq % kMaxMsgs];
    if (!m.eager || !m.matched || m.next_offset < m.size || (m.size == 0 && !m.zero_queued) || m.resend_count > 0)
      return false;
  }
  for (const auto& p : paths_)
    if (p->alive() && !p->Quiescent()) return false;
  return !failover_.active;
}

void SendComm::StartWithoutPath(int index) {
  const uint64_t now = NowNs();
  PathState& rj = St(index);
  rj.down_ns = now;
  rj.next_try_ns = now + uint64_t{opts_.failback_ms} * 1'000'000;
  paths_[static_cast<size_t>(index)]->MarkDead();
}

void SendComm::OnPathLost(Path& dead, const std::string& why, uint64_t silent_ns) {
  const uint64_t now = NowNs();
  PathState& rj = St(dead.index());
  // A path that fails again within kRelapseNs of coming back (a lossy or flapping link) waits twice
  // as long before the next failback, up to 16x, so it does not bounce traffic every few seconds.
  constexpr uint64_t kRelapseNs = 10'000'000'000ull;
  rj.relapses = rj.back_ns != 0 && now - rj.back_ns < kRelapseNs ? std::min(rj.relapses + 1, 4) : 0;
  rj.down_ns = now;
  rj.next_try_ns = now + (uint64_t{opts_.failback_ms} * 1'000'000 << rj.relapses);
  rj.attempts = 0;
  // Lost to a failure of its route (and not reported so by the receiver, which knows): tell the
  // receiver, whose process may be sending to us over the same route and hearing nothing back.
  if (rj.route_failed && !rj.peer_route_failed && !dead.route().empty()) {
    PathEventMsg m{};
    m.path = static_cast<uint16_t>(dead.index());
    m.event = static_cast<uint16_t>(PathEvent::kRouteDown);
    m.generation = path_generation(dead.index());
    for (auto& q : paths_)
      if (q->alive() && q.get() != &dead && q->CanQueue()) QueueControl(*q, FrameType::kPathEvent, &m, sizeof(m));
  }
  if (rj.route_drained_ns != 0 && !OwesOnPath(dead.index())) {
    // Drained while idle when its route failed elsewhere, and nothing sent on it is unacknowledged:
    // no failover, nothing to re-send or pause for (the probe frames on it were all it carried).
    rj.route_drained_ns = 0;
    FF_WARN("path %d (%s) to %s is down: %s (silent %.1f ms); drained since its route failed elsewhere, it held "
            "nothing unacknowledged",
            dead.index(), dead.Describe().c_str(), peer_.c_str(), why.c_str(), silent_ns / 1e6);
    return;
  }
  if (rj.hedged) {
    // Its data went elsewhere when it first fell silent; nothing is owed, nothing to pause for.
    rj.hedged = false;
    FF_WARN("path %d (%s) to %s is down: %s (silent %.1f ms); its data had been re-sent when it fell silent",
            dead.index(), dead.Describe().c_str(), peer_.c_str(), why.c_str(), silent_ns / 1e6);
    return;
  }
  BeginFailover(dead, why, silent_ns);
}

bool SendComm::OnPathSilent(Path& p, const std::string& why, uint64_t silent_ns) {
  // Nowhere to hedge to: leave the verdict to the absolute rule and the socket's own timeout.
  if (usable_paths() < 2 || p.draining()) return true;
  p.SetDraining(true);
  watchdog_.NoteDrained(p.index(), NowNs());
  St(p.index()).hedged = true;
  BeginFailover(p, why + "; drained and kept open until it answers or is declared dead", silent_ns);
  return true;
}

void SendComm::BeginFailover(Path& dead, const std::string& why, uint64_t silent_ns) {
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
  failover_.from += std::to_string(dead.index()) + " (" + dead.Describe() + "): " + why;
  // Switch: every chunk that was queued on the dead path and is not known delivered goes again on
  // the paths left; the receiver drops any copy it already has.
  const uint8_t idx = static_cast<uint8_t>(dead.index());
  uint64_t resent = 0;
  for (uint64_t seq = acked_seq_; seq < next_seq_; ++seq) {
    SendMsg& m = Msg(seq);
    if (m.home_path == dead.index()) m.home_path = -1;
    const uint64_t queued = m.size == 0 ? (m.zero_queued ? 1 : 0) : (m.next_offset + m.chunk - 1) / m.chunk;
    for (uint64_t c = 0; c < queued; ++c) {
      uint64_t bit = uint64_t{1} << (c % 64);
      if (m.chunk_path[c] != idx || (m.resend[c / 64] & bit)) continue;
      m.resend[c / 64] |= bit;
      ++m.resend_count;
      sched_seq_ = std::min(sched_seq_, m.seq);
      resent += std::min<uint64_t>(m.chunk, m.size - c * m.chunk);
    }
  }
  failover_.resent_bytes += resent;
  resent_bytes_ += resent;
  // A dead path whose transport wrote straight into the receiver's buffers: the receiver must fence
  // its end before any chunk re-sent elsewhere can complete a receive (see QueueFenceNotices). A
  // hedged path is still open and was not fenced here (the plugin never hedges RDMA paths).
  if (dead.NeedsPostedBuffer() && !dead.alive()) {
    if (notice_owed_.size() < paths_.size()) notice_owed_.resize(paths_.size(), 0);
    for (auto& q : paths_)
      if (q.get() != &dead && q->alive()) notice_owed_[static_cast<size_t>(q->index())] |= uint64_t{1} << idx;
    QueueFenceNotices();
  }
  if (inflight_count() == 0) {
    EndFailover();  // nothing owed: resume at once
    return;
  }
  // The receiver's acknowledgements may have been riding the dead path: ask for them again.
  RequestAcks();
}

bool SendComm::OwesOnPath(int index) {
  const auto idx = static_cast<uint8_t>(index);
  for (uint64_t seq = acked_seq_; seq < next_seq_; ++seq) {
    const SendMsg& m = Msg(seq);
    const uint64_t queued = m.size == 0 ? (m.zero_queued ? 1 : 0) : (m.next_offset + m.chunk - 1) / m.chunk;
    for (uint64_t c = 0; c < queued; ++c)
      if (m.chunk_path[c] == idx && !(m.resend[c / 64] & (uint64_t{1} << (c % 64)))) return true;
  }
  return false;
}

void SendComm::SendWitness(Path& p) {
  if (p.alive() && !p.draining() && p.CanQueue()) QueueControl(p, FrameType::kAckRequest);
}

void SendComm::ProbeRoute(Path& p) {
  // Two frames written apart leave as two segments: the absolute rule judges two or more in flight.
  for (int i = 0; i < 2 && p.alive() && p.CanQueue(); ++i) {
    QueueControl(p, FrameType::kAckRequest);
    if (!p.Flush()) return;  // the error is acted on by the next progress round
  }
}

void SendComm::QueueFenceNotices() {
  for (auto& q : paths_) {
    const size_t qi = static_cast<size_t>(q->index());
    if (qi >= notice_owed_.size() || notice_owed_[qi] == 0) continue;
    if (!q->alive()) {
      notice_owed_[qi] = 0;
      continue;
    }
    while (notice_owed_[qi] != 0 && q->CanQueue()) {
      const int dead = __builtin_ctzll(notice_owed_[qi]);
      notice_owed_[qi] &= notice_owed_[qi] - 1;
      PathEventMsg m{};
      m.path = static_cast<uint16_t>(dead);
      m.event = static_cast<uint16_t>(PathEvent::kDown);
      m.generation = path_generation(dead);
      QueueControl(*q, FrameType::kPathEvent, &m, sizeof(m));
      ++fence_notices_;
    }
  }
}

void SendComm::RequestAcks() {
  for (auto& p : paths_) {
    if (!p->alive() || p->draining() || !p->CanQueue()) continue;
    QueueControl(*p, FrameType::kAckRequest);
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
  // (A line for it may have gone out while it was under way - ReportUnfinishedFailover - and this one
  // still goes: tools read every ended failover from this form.)
  FF_WARN("failover to %s: path %s; detected after %.2f ms without progress, paused %.2f ms, re-sent %llu bytes; "
          "now on %s (detected at unix %.6f)",
          peer_.c_str(), failover_.from.c_str(), failover_.silent_ns / 1e6, paused_ns / 1e6,
          static_cast<unsigned long long>(failover_.resent_bytes), DescribeAlive().c_str(),
          failover_.detected_unix_ns / 1e9);
}

HeaderVerdict SendComm::OnHeader(Path& path, const FrameHeader& h, char** dest) {
  *dest = nullptr;
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::kAck:
    case FrameType::kPathEvent:
    case FrameType::kReconnectInfo:
      *dest = ControlBuffer(path.index());  // ValidateHeader bounded the length
      return HeaderVerdict::kAccept;
    case FrameType::kAbort:
      reject_reason_ = "the receiver aborted the connection";
      return HeaderVerdict::kReject;
    default:
      reject_reason_ = "unexpected frame type " + std::to_string(h.type) + " on a send connection";
      return HeaderVerdict::kReject;
  }
}

void SendComm::OnFrameComplete(Path& path, const FrameHeader& h) {
  const char* b = ControlBuffer(path.index());
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::kReconnectInfo: {
      ReconnectInfo info;
      std::memcpy(&info, b, sizeof(info));
      if (opts_.reconnector) opts_.reconnector->OnPeerInfo(info);
      return;
    }
    case FrameType::kPathEvent: {
      PathEventMsg e;
      std::memcpy(&e, b, sizeof(e));
      OnPathEvent(e);
      return;
    }
    case FrameType::kAck: {
      AckMsg a;
      std::memcpy(&a, b, sizeof(a));
      if (a.descriptors != (h.length - sizeof(AckMsg)) / sizeof(RecvDescriptor)) {
        Fail(RemoteError("acknowledgement from " + peer_ + " announces " + std::to_string(a.descriptors) +
                         " descriptors in " + std::to_string(h.length) + " bytes"));
        return;
      }
      OnAck(a, reinterpret_cast<const RecvDescriptor*>(b + sizeof(AckMsg)));
      return;
    }
    default:
      return;
  }
}

void SendComm::OnPathEvent(const PathEventMsg& e) {
  // Acted on after this pump round: failing a path over from inside another path's parser is unsafe.
  // A report about an earlier incarnation of the path (before a failback) is stale.
  if (e.path >= path_count() || e.generation != path_generation(e.path)) return;
  PathState& st = St(e.path);
  const bool was = st.peer_nic_degraded;
  switch (static_cast<PathEvent>(e.event)) {
    case PathEvent::kDown:
      st.peer_lost = true;
      break;
    case PathEvent::kRouteDown:
      st.peer_lost = true;
      st.peer_route_failed = true;
      break;
    case PathEvent::kNicDegraded:
      st.peer_nic_degraded = true;
      break;
    case PathEvent::kNicRecovered:
      st.peer_nic_degraded = false;
      break;
  }
  st.peer_nic_news |= was != st.peer_nic_degraded;
  peer_news_ = true;
}

void SendComm::OnAck(const AckMsg& a, const RecvDescriptor* d) {
  if (a.cum_done > next_seq_) {
    Fail(RemoteError("acknowledgement from " + peer_ + " for message " + std::to_string(a.cum_done) +
                     " never sent"));
    return;
  }
  const uint64_t credit_before_ack = credit_;
  for (uint32_t i = 0; i < a.descriptors; ++i) {
    const RecvDescriptor& x = d[i];
    // A descriptor of an acknowledged message still matters while a later message of its group is
    // owed: Match needs the whole group's tags. Acknowledgements and descriptors travel on different
    // paths, so the acknowledgement can be read first. Older ones, or beyond what we keep, are
    // repeats or lies. (Slots [acked - kMaxMsgs, acked) never alias the window ahead.)
    static_assert(kMaxRecvs <= kMaxMsgs, "a group must fit in the acknowledged slots kept");
    const uint64_t oldest = acked_seq_ >= kMaxRecvs - 1 ? acked_seq_ - (kMaxRecvs - 1) : 0;
    if (x.seq < oldest || x.seq >= acked_seq_ + kDescWindow - kMaxMsgs || x.group_n == 0 ||
        x.group_n > kMaxRecvs || x.group_idx >= x.group_n || x.group_idx > x.seq)
      continue;
    const uint64_t slot = x.seq % kDescWindow;
    if (desc_seq_[slot] == x.seq + 1) continue;  // a repeat (after an acknowledgement request)
    desc_[slot] = x;
    desc_seq_[slot] = x.seq + 1;
  }
  while (desc_seq_[credit_ % kDescWindow] == credit_ + 1) ++credit_;
  // The acknowledgement clock of a message sent before its receive was posted starts when its
  // descriptor arrives, not at the last call that found nothing owed: a caller that was away for a
  // while (or a descheduled thread) would otherwise find the timeout expired at once and re-send
  // what the receiver is only now reading.
  if (acked_seq_ >= credit_before_ack && acked_seq_ < credit_) ack_clock_restart_ = true;
  ++acks_received_;
  if (a.cum_done <= acked_seq_) return;
  uint64_t now = 0;  // read for the first message counted here (eager ones were counted at completion)
  for (uint64_t seq = acked_seq_; seq < a.cum_done; ++seq) {
    SendMsg& m = Msg(seq);
    if (m.eager) {  // counted when its request completed
      if (m.ring_end > ring_tail_) ring_tail_ = m.ring_end;
      continue;
    }
    if (now == 0) now = NowNs();
    FF_PROBE(send_done, opts_.task_hash, m.collective, m.size, peer_.c_str(), m.home_path, opts_.sla_us,
             now - m.start_ns, opts_.task.c_str());
    ProbeDone(FF_PROBE_SEND_DIR, m.collective, m.size, m.home_path, now - m.start_ns, now);
    Record(m.collective, m.size, now - m.start_ns, sla::Direction::kSend, now);
  }
  acked_seq_ = a.cum_done;
  // An unsolicited message can be acknowledged before its descriptor arrives, which is then dropped
  // as a repeat: what the receiver acknowledged it had certainly posted.
  if (credit_ < acked_seq_) {
    credit_ = acked_seq_;
    while (desc_seq_[credit_ % kDescWindow] == credit_ + 1) ++credit_;
  }
  if (acked_seq_ == next_seq_) ring_tail_ = ring_head_;
  // Resume once the receiver acknowledges past where it stood at the cut: data flows again.
  if (failover_.active && acked_seq_ > failover_.acked_at_detect) EndFailover();
}

bool SendComm::RxCanWait() const {
  // Reading acknowledgements costs a system call per path even when there is nothing: inside isend
  // it is skipped while nothing the new message needs is owed (credit, ring room, a free
  // message slot). Progress still reads every kMaxRxSkips + 1 calls, after the write.
  const bool credit_ok = credit_ >= next_seq_ || (next_seq_ > 0 && UnsolicitedFits(msgs_[(next_seq_ - 1) % kMaxMsgs]));
  return !failover_.active && credit_ok && inflight_count() < kMaxMsgs / 2 &&
         (ring_size_ == 0 || (ring_head_ - ring_tail_) * 2 < ring_size_);
}

Status SendComm::Progress() { return Progress(NowNs()); }

Status SendComm::Progress(uint64_t now) {
  if (!error_.ok()) return error_;
  if (held_ > 0) {  // sends held for coalescing are scheduled and written below
    held_ = 0;
    held_bytes_ = 0;
    wrote_held_ = true;
  }
  ProbeFlushIfOld(now);
  const bool waiting = inflight_count() > 0;
  // Reading can wait inside isend, and in a test() that only writes an eager send held for coalescing
  // - but never past the acknowledgement timeout, which must judge what the peer sent, not what
  // still sits unread in the sockets.
  const bool overdue = waiting && opts_.resend_timeout_ms != 0 &&
                       now - std::min(now, ack_progress_ns_) >= uint64_t{opts_.resend_timeout_ms} * 500'000;
  const bool read_rx = waiting && (!(write_only_ && RxCanWait()) || overdue);
  // A call that only writes leaves the periodic work - the health check, and reading the peer's
  // frames every kMaxRxSkips + 1 calls so its reports are still seen promptly - until after the
  // write: in a ping-pong this call sends the reply, and those system calls (two paths: a read on
  // each, a sample every millisecond) sat between the peer's message and the answer to it.
  const bool after_write = write_only_;
  const bool read_rx_after = waiting && !read_rx && rx_skips_ >= kMaxRxSkips;
  rx_skips_ = read_rx || read_rx_after ? 0 : rx_skips_ + 1;
  if (waiting && !after_write && !CheckHealth(now)) return error_;
  for (int round = 0; round < 4; ++round) {
    if (read_rx || round > 0) {
      for (auto& p : paths_) {
        if (!p->alive()) continue;
        if (!HandlePump(*p, p->Poll(*this))) return error_;
      }
      if (!error_.ok()) return error_;
      last_rx_poll_ns_ = now;
    }
    if (peer_news_ && !ApplyPeerLoss()) return error_;
    // A degraded NIC's paths are drained as long as the verdict stands (not only when it changes):
    // a drain that had to wait - the other path was draining itself at the time - still happens.
    // With the dual-path canary a comparison decides once per change instead.
    for (auto& p : paths_) {
      PathState& st = St(p->index());
      const bool bad = opts_.dual_path_ms == 0 ? st.peer_nic_degraded || st.nic_degraded : st.peer_nic_news;
      st.peer_nic_news = false;
      if (!bad || !p->alive() || p->draining()) continue;
      if (st.peer_nic_degraded)
        SoftDegrade(*p, "the receiver's NIC under it degraded (error counters)", now);
      else if (st.nic_degraded)
        SoftDegrade(*p, "NIC " + PathInterface(p->index()) + " degraded", now);
    }
    if (round == 0 && opts_.reconnector && opts_.reconnector->Available() && opts_.failback_ms != 0 &&
        alive_paths() < path_count()) {
      if (now >= next_failback_check_ns_) TryFailback(now);
    }
    if (waiting && round == 0) CheckAckTimeout(now);
    Schedule();
    if (!error_.ok()) return error_;
    if (!FlushAll()) return error_;
    bool more = false;
    for (uint64_t seq = std::max(acked_seq_, sched_seq_); seq < next_seq_ && !more; ++seq) {
      const SendMsg& m = Msg(seq);
      if (!m.matched) break;
      more = m.next_offset < m.size || m.resend_count > 0;
    }
    if (!more) break;
  }
  if (waiting && after_write) {
    const uint64_t checked_ns = last_health_ns_;
    if (!CheckHealth(now)) return error_;
    if (read_rx_after) {
      for (auto& p : paths_) {
        if (!p->alive()) continue;
        if (!HandlePump(*p, p->Poll(*this))) return error_;
      }
      if (!error_.ok()) return error_;
      last_rx_poll_ns_ = now;
      if (peer_news_ && !ApplyPeerLoss()) return error_;
    }
    // What the check or the peer's frames changed (a failover's re-sends, new credit) goes now.
    if (read_rx_after || checked_ns != last_health_ns_) {
      Schedule();
      if (!error_.ok() || !FlushAll()) return error_;
    }
  }
  return error_;
}

void SendComm::ProbeCredit(uint64_t now_ns) {
  // Messages wait for credit (the receiver's posted buffers). If credit does not move, the receiver
  // may simply be busy - or its credit went out on a path that died silently, which nothing else
  // here would notice (no data in flight on it). Ask for it again on every path, backing off.
  if (acked_seq_ < credit_ || credit_ != credit_seen_) {
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
  if (inflight_count() > 0) ProbeCredit(now_ns);
  if (opts_.resend_timeout_ms == 0 || inflight_count() == 0) return;
  if (ack_clock_restart_ || acked_seq_ != ack_seen_ || acked_seq_ >= credit_) {
    ack_clock_restart_ = false;
    // Progress, or nothing owed yet: the oldest message owed went before its receive was posted
    // (unsolicited), and a receiver that has not posted it cannot acknowledge it. The clock starts
    // once its descriptor is here (ProbeCredit above asks again for descriptors that went missing).
    ack_seen_ = acked_seq_;
    acks_asked_ = false;
    ack_progress_ns_ = now_ns;
    timeout_streak_ = 0;
    stuck_reported_ = false;
    return;
  }
  // The oldest message owed cannot be acknowledged before its last byte is handed to the transport.
  // A long one (a slow receiver, a caller that comes by rarely) may take longer than the timeout to
  // write, and between two writes its paths can look idle: empty queues, nothing unacknowledged in
  // the kernel. Its clock moves with every chunk written (the back-off streak stays), and it is never
  // re-sent while still being written. A write that stops for good still gets the report below.
  const SendMsg& head = Msg(acked_seq_);
  const bool head_writing = head.matched && (head.next_offset < head.size || head.resend_count > 0);
  if (head_mark_seq_ != head.seq + 1 || head_mark_offset_ != head.next_offset) {
    head_mark_seq_ = head.seq + 1;
    head_mark_offset_ = head.next_offset;
    if (head.matched) {
      ack_progress_ns_ = now_ns;
      stuck_reported_ = false;
      return;
    }
  }
  // Doubles while nothing is acknowledged, so a receiver that merely stopped progressing costs a
  // few duplicate transfers, not a storm.
  if (!stuck_reported_ && now_ns - ack_progress_ns_ >= kStuckReportNs) {
    stuck_reported_ = true;
    const SendMsg& h = Msg(acked_seq_);
    FF_WARN("send to %s: no acknowledgement for %.1f s: acked<%llu next=%llu credit<%llu inflight=%d head{seq=%llu "
            "size=%llu queued_to=%llu resend=%d}%s",
            peer_.c_str(), (now_ns - ack_progress_ns_) / 1e9, static_cast<unsigned long long>(acked_seq_),
            static_cast<unsigned long long>(next_seq_), static_cast<unsigned long long>(credit_), inflight_count(),
            static_cast<unsigned long long>(h.seq), static_cast<unsigned long long>(h.size),
            static_cast<unsigned long long>(h.next_offset), h.resend_count, DescribePaths().c_str());
  }
  // On an oversubscribed host the receiver may simply not have run: wait at least 4x the watchdog's
  // CPU-pressure allowance (200 ms when saturated) before re-sending what its kernel holds.
  const uint64_t timeout_ns = std::max((uint64_t{opts_.resend_timeout_ms} * 1'000'000) << std::min(timeout_streak_, 6u),
                                       4 * PathWatchdog::PressureAllowance(now_ns));
  if (now_ns - ack_progress_ns_ < timeout_ns || head_writing) return;
  // Only when everything we wrote has reached the peer's kernel (nothing queued here, nothing
  // unacknowledged in any live socket): then the receiver dropped it, e.g. with a path it reset,
  // and only a re-send recovers. A slow link never gets here - its bytes are still in flight.
  for (auto& p : paths_) {
    if (!p->alive()) continue;
    if (p->queued_frames() > 0 || p->InFlightBytes() != 0) return;
  }
  // The peer's transport holds everything, yet nothing is acknowledged. Either the receiver dropped
  // data (only a re-send recovers), or it simply has not run: eager messages are acknowledged
  // lazily, and any acknowledgement waits for the receiver's next call - an application checking
  // what it received, or a proxy thread serving other connections, can be away for longer than the
  // timeout (a receiver checking four 64 MiB messages got all four re-sent after 250 ms). So ask
  // first, and re-send only when the receiver is evidently progressing (an acknowledgement arrived
  // since we asked) and still lacks them. An acknowledgement frame sent before the data arrived
  // proves nothing: only one answering our request (kAckRequest, sent at the previous timeout) does.
  const bool answered = acks_asked_ && acks_received_ != acks_at_timeout_;
  if (!answered) {
    acks_asked_ = true;
    acks_at_timeout_ = acks_received_;
    RequestAcks();
    ++timeout_streak_;
    ack_progress_ns_ = now_ns;
    return;
  }
  acks_asked_ = false;
  uint64_t bytes = 0;
  for (uint64_t seq = acked_seq_; seq < next_seq_; ++seq) {
    SendMsg& r = Msg(seq);
    if (!r.matched) continue;
    const uint64_t queued = r.size == 0 ? (r.zero_queued ? 1 : 0) : (r.next_offset + r.chunk - 1) / r.chunk;
    for (uint64_t c = 0; c < queued; ++c) {
      uint64_t bit = uint64_t{1} << (c % 64);
      if (r.resend[c / 64] & bit) continue;
      r.resend[c / 64] |= bit;
      ++r.resend_count;
      sched_seq_ = std::min(sched_seq_, r.seq);
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
          peer_.c_str(), opts_.resend_timeout_ms, static_cast<unsigned long long>(bytes), inflight_count(),
          DescribeAlive().c_str());
  if (opts_.stats != nullptr && opts_.stats_task != sla::StatsTable::kInvalid)
    opts_.stats->AddFailover(opts_.stats_task, 1, bytes, 0);
}

bool SendComm::ApplyPeerLoss() {
  peer_news_ = false;
  for (auto& p : paths_) {
    PathState& st = St(p->index());
    const bool lost = st.peer_lost;
    st.peer_lost = false;
    if (!lost || !p->alive()) continue;
    // Only while another path remains: the last one is left to the socket timeout, as in CheckHealth.
    if (alive_paths() < 2) break;
    if (st.peer_route_failed) {
      NoteRouteFailure(*p, "the receiver lost it to a route failure");
      if (!PathDown(*p, "the receiver lost it to a route failure (unreachable, or no acknowledgement, on its side)",
                    PathFault::kPeerReported))
        return false;
      continue;
    }
    if (!PathDown(*p, "the receiver lost it (carrier or socket error on its side)", PathFault::kPeerReported))
      return false;
  }
  return true;
}

void SendComm::FailbackAttemptFailed(int path, uint64_t now_ns, const std::string& why) {
  PathState& rj = St(path);
  rj.connecting = false;
  ++rj.attempts;
  // A path that keeps failing is tried ever more rarely (up to 16x the failback time).
  rj.next_try_ns = now_ns + (uint64_t{opts_.failback_ms} * 1'000'000 << std::min(rj.attempts + rj.relapses, 4));
  FF_INFO(NCCL_NET, "failback of path %d to %s: attempt %d failed (%s); next in %.1f s", path, peer_.c_str(),
          rj.attempts, why.c_str(), (rj.next_try_ns - now_ns) / 1e9);
}

void SendComm::TryFailback(uint64_t now_ns) {
  next_failback_check_ns_ = now_ns + 5'000'000;  // an attempt costs system calls: a few per 5 ms at most
  const uint64_t stable_ns = uint64_t{opts_.failback_ms} * 1'000'000;
  Reconnector& rc = *opts_.reconnector;
  for (auto& path : paths_) {
    const int i = path->index();
    if (path->alive() || i >= kMaxPaths || St(i).closed_by_peer) continue;
    PathState& rj = St(i);
    if (!rj.connecting) {
      if (now_ns < rj.next_try_ns) continue;
      if (!rc.Ready(i, now_ns, stable_ns)) {
        rj.next_try_ns = now_ns + 50'000'000;
        continue;
      }
      rj.connecting = true;
    }
    std::unique_ptr<Path> fresh;
    std::string detail;
    const Reconnector::Step step = rc.Advance(i, now_ns, &fresh, &detail);
    if (step == Reconnector::Step::kPending) continue;
    if (step == Reconnector::Step::kFailed) {
      FailbackAttemptFailed(i, now_ns, detail);
      continue;
    }
    const uint64_t down_ns = now_ns - rj.down_ns;
    const int attempts = rj.attempts + 1;
    ReplacePath(i, std::move(fresh));
    // ReplacePath started a new incarnation; the failback schedule starts over.
    PathState& fresh_st = St(i);
    fresh_st.down_ns = 0;
    fresh_st.next_try_ns = 0;
    fresh_st.attempts = 0;
    fresh_st.connecting = false;
    fresh_st.back_ns = now_ns;
    ++failbacks_;
    FF_PROBE(failback, opts_.task_hash, peer_.c_str(), i);
    // The new socket's ends, as at connect, so the probe names its retransmissions after this path.
    FF_PROBE(path_up, opts_.task_hash, peer_.c_str(), i, paths_[static_cast<size_t>(i)]->Describe().c_str());
    if (opts_.stats != nullptr && opts_.stats_task != sla::StatsTable::kInvalid)
      opts_.stats->AddFailback(opts_.stats_task);
    ReportUnfinishedFailover("still paused when a failed path reconnected: the receiver has not acknowledged past the cut");
    FF_WARN("failback to %s: path %d (%s) reconnected after %.2f s down (attempt %d); now on %s", peer_.c_str(), i,
            detail.c_str(), down_ns / 1e9, attempts, DescribeAlive().c_str());
    if (opts_.dual_path_ms > 0 && !dual_.active())
      StartDualPath(*paths_[static_cast<size_t>(i)], DualPathCompare::Kind::kReturn, "", now_ns);
  }
}

Status SendComm::Test(SendRequest* r, int* done, uint64_t* size) {
  *done = 0;
  // An eager message is complete once all of it was handed to the transport: its copy stays in the
  // ring until acknowledged, for a failover to re-send. Any other completes on its acknowledgement.
  auto complete = [&] {
    if (r->seq < acked_seq_) return true;
    if (!r->eager) return false;
    const SendMsg& m = Msg(r->seq);
    if (!m.matched || m.next_offset < m.size || (m.size == 0 && !m.zero_queued) || m.resend_count > 0)
      return false;
    for (const auto& p : paths_)
      if (p->alive() && p->queued_data_frames() > 0) return false;
    return true;
  };
  // While a failover holds completions, testing even a finished request must progress the
  // communicator: the caller may be waiting on exactly this request, and the failover ends only
  // when the re-sent data's acknowledgements are read.
  uint64_t now = 0;  // one clock read where this call needs one, shared by its uses below
  const bool write_held =
      held_ > 0 && (pool_.in_use() - held_ <= 1 || (now = NowNs()) - last_write_ns_ >= opts_.coalesce_ns);
  Status s = Status::Ok();
  if (!complete() || gate_.paused() || write_held) {
    // An eager send completes once its bytes are handed to the transport: nothing from the peer is
    // needed for that, so its test() reads the peer's frames only when RxCanWait says they matter
    // (streaming small messages, the empty reads here were a system call per write on each path).
    write_only_ = r->eager && !gate_.paused();
    s = Progress(now != 0 ? now : NowNs());
    write_only_ = false;
    now = 0;  // a completion below is timed after the write, not before it
  }
  if (wrote_held_) {
    wrote_held_ = false;
    last_write_ns_ = now = NowNs();  // from the end of the write, as in isend
  }
  const bool finished = complete();
  if (!finished && !s.ok()) return s;  // a completed request stays complete even if the comm failed later
  // A failover that lost the last path never resumes: what it held is not complete, and saying "not
  // yet" would leave the caller polling forever.
  if (gate_.paused()) return error_.ok() ? Status::Ok() : error_;
  if (!finished) return Status::Ok();
  *done = 1;
  if (size) *size = r->size;
  if (r->eager && r->seq >= acked_seq_) SecureEagerCopy(Msg(r->seq));  // the caller may reuse its buffer now
  if (r->eager) {
    if (now == 0) now = NowNs();
    const uint64_t latency = now - r->start_ns;
    const int path = r->seq < acked_seq_ ? -1 : Msg(r->seq).home_path;
    FF_PROBE(send_done, opts_.task_hash, r->collective, r->size, peer_.c_str(), path, opts_.sla_us, latency,
             opts_.task.c_str());
    ProbeDone(FF_PROBE_SEND_DIR, r->collective, r->size, path, latency, now);
    Record(r->collective, r->size, latency, sla::Direction::kSend, now);
  }
  pool_.Release(r);
  return Status::Ok();
}

}  // namespace ff
