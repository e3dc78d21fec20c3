// Sending side of a connection: chunks and stripes messages over paths, completes them on acknowledgement.
#pragma once

#include "plugin/comm.h"
#include "plugin/requests.h"

namespace ff {

class SendComm final : public Comm {
 public:
  using Comm::Comm;

  // Queues a message; *out is nullptr (retry later) when paused or when 32 requests are in flight.
  Status Isend(const void* data, uint64_t size, int tag, void* phandle, SendRequest** out);
  // Progresses and reports completion; releases the request when done.
  Status Test(SendRequest* r, int* done, uint64_t* size);
  Status Progress() override;

  uint64_t unacked_messages() const { return next_seq_ - acked_seq_; }
  uint64_t resent_bytes() const { return resent_bytes_; }

  HeaderVerdict OnHeader(StreamPath& path, const FrameHeader& h, char** dest) override;
  void OnFrameComplete(StreamPath& path, const FrameHeader& h) override;

 private:
  void Schedule();
  StreamPath* PickPath(SendRequest& r);
  void OnPathLost() override;
  bool ExpectingTraffic() const override { return inflight_count_ > 0; }

  RequestPool<SendRequest> pool_;
  std::array<SendRequest*, kMaxRequests> inflight_{};  // in sequence order
  int inflight_head_ = 0;
  int inflight_count_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t acked_seq_ = 0;  // every message below this is acknowledged
  uint64_t resent_bytes_ = 0;
};

}  // namespace ff
