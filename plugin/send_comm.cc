// Send path: message -> chunks -> least-loaded path; acknowledgements complete requests.
#include "plugin/send_comm.h"

#include <algorithm>

#include "plugin/logging.h"
#include "plugin/task_profile.h"

namespace ff {

Status SendComm::Isend(const void* data, uint64_t size, int tag, void* phandle, SendRequest** out) {
  *out = nullptr;
  if (!error_.ok()) return error_;
  if (size > kMaxMessageBytes) return InvalidArgument("isend size " + std::to_string(size) + " beyond the limit");
  if (size > 0 && data == nullptr) return InvalidArgument("isend of " + std::to_string(size) + " bytes from NULL");
  if (gate_.paused() || inflight_count_ == kMaxRequests) return Status::Ok();
  SendRequest* r = pool_.Acquire(RequestKind::kSend, this);
  if (r == nullptr) return Status::Ok();
  r->seq = next_seq_++;
  r->data = static_cast<const char*>(data);
  r->size = size;
  r->chunk = ChunkBytesFor(size, opts_.chunk_bytes);
  r->tag = tag;
  r->phandle = phandle;
  r->collective = Classify(phandle);
  r->start_ns = NowNs();
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
    if (p.alive()) return p.queued_data_frames() < opts_.max_queued_chunks && p.CanQueue() ? &p : nullptr;
    r.home_path = -1;
  }
  StreamPath* best = nullptr;
  for (auto& p : paths_) {
    if (!p->alive() || !p->CanQueue() || p->queued_data_frames() >= opts_.max_queued_chunks) continue;
    if (best == nullptr || p->queued_payload_bytes() < best->queued_payload_bytes()) best = p.get();
  }
  if (best != nullptr && r.size < opts_.stripe_min_bytes) r.home_path = best->index();
  return best;
}

void SendComm::Schedule() {
  for (int i = 0; i < inflight_count_; ++i) {
    SendRequest& r = *inflight_[(inflight_head_ + i) % kMaxRequests];
    while (r.next_offset < r.size || (r.size == 0 && !r.zero_queued)) {
      StreamPath* p = PickPath(r);
      if (p == nullptr) return;
      uint64_t len = std::min<uint64_t>(r.chunk, r.size - r.next_offset);
      FrameHeader h{};
      h.type = static_cast<uint8_t>(FrameType::kData);
      h.path = static_cast<uint16_t>(p->index());
      h.tag = r.tag;
      h.length = static_cast<uint32_t>(len);
      h.seq = r.seq;
      h.offset = r.next_offset;
      h.total = r.size;
      h.task_hash = opts_.task_hash;
      h.sla_us = opts_.sla_us;
      h.collective = r.collective;
      SealHeader(&h);
      p->Queue(h, r.data + r.next_offset);
      r.next_offset += len;
      r.zero_queued = true;
    }
  }
}

void SendComm::OnPathLost() {
  // Everything not yet acknowledged goes again, from its first byte; the receiver drops duplicates.
  for (int i = 0; i < inflight_count_; ++i) {
    SendRequest& r = *inflight_[(inflight_head_ + i) % kMaxRequests];
    if (r.acked) continue;
    resent_bytes_ += r.next_offset;
    r.next_offset = 0;
    r.zero_queued = false;
    r.home_path = -1;
  }
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
  if (h.seq <= acked_seq_) return;
  acked_seq_ = h.seq;
  while (inflight_count_ > 0) {
    SendRequest* r = inflight_[inflight_head_];
    if (r->seq >= acked_seq_) break;
    r->acked = true;
    Record(r->collective, r->size, NowNs() - r->start_ns, sla::Direction::kSend);
    inflight_head_ = (inflight_head_ + 1) % kMaxRequests;
    --inflight_count_;
  }
}

Status SendComm::Progress() {
  if (!error_.ok()) return error_;
  const bool waiting = inflight_count_ > 0;
  for (int round = 0; round < 4; ++round) {
    if (waiting) {
      for (auto& p : paths_) {
        if (!p->alive()) continue;
        if (!HandlePump(*p, p->PumpRx(*this))) return error_;
      }
    }
    Schedule();
    if (!FlushAll()) return error_;
    bool more = false;
    for (int i = 0; i < inflight_count_ && !more; ++i) {
      const SendRequest& r = *inflight_[(inflight_head_ + i) % kMaxRequests];
      more = r.next_offset < r.size;
    }
    if (!more) break;
  }
  return error_;
}

Status SendComm::Test(SendRequest* r, int* done, uint64_t* size) {
  *done = 0;
  Status s = r->acked ? Status::Ok() : Progress();
  if (!r->acked && !s.ok()) return s;  // a completed request stays complete even if the comm failed later
  if (gate_.paused() || !r->acked) return Status::Ok();
  *done = 1;
  if (size) *size = r->size;
  pool_.Release(r);
  return Status::Ok();
}

}  // namespace ff
