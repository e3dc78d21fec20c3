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

  // Path `index` never connected (setup grace expired): it starts dead and joins through failback.
  void StartWithoutPath(int index);

  uint64_t unacked_messages() const { return next_seq_ - acked_seq_; }
  uint64_t resent_bytes() const { return resent_bytes_; }

  HeaderVerdict OnHeader(StreamPath& path, const FrameHeader& h, char** dest) override;
  void OnFrameComplete(StreamPath& path, const FrameHeader& h) override;

 private:
  void Schedule();
  StreamPath* PickPath(SendRequest& r);
  void QueueChunk(SendRequest& r, StreamPath& p, uint64_t offset);
  void OnPathLost(StreamPath& p, const std::string& why, uint64_t silent_ns) override;
  bool OnPathSilent(StreamPath& p, const std::string& why, uint64_t silent_ns) override;
  // Pauses completions and re-queues every unacknowledged chunk that was on path `p` (failover).
  void BeginFailover(StreamPath& p, const std::string& why, uint64_t silent_ns);
  void EndFailover();
  // Fails over the paths the receiver reported lost (kAckFlagPathDown); false when the comm failed.
  bool ApplyPeerLoss();
  bool ExpectingTraffic() const override { return inflight_count_ > 0; }
  // Failback: reconnects failed paths through the receiver's rejoin listener, one step per call.
  void TryFailback(uint64_t now_ns);
  void FailbackAttemptFailed(int path, uint64_t now_ns, const std::string& why);

  RequestPool<SendRequest> pool_;
  std::array<SendRequest*, kMaxRequests> inflight_{};  // in sequence order
  int inflight_head_ = 0;
  int inflight_count_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t acked_seq_ = 0;
  uint64_t credit_ = 0;
  // Acknowledgement timeout: last time the cumulative ack moved (or sending started).
  uint64_t ack_progress_ns_ = 0;
  uint64_t ack_seen_ = 0;
  uint64_t timeout_resends_ = 0;
  uint32_t timeout_streak_ = 0;
  bool stuck_reported_ = false;
  void CheckAckTimeout(uint64_t now_ns);
  // Asks the receiver to repeat its acknowledgement and credit on every usable path (kAckRequest).
  void RequestAcks();
  void ProbeCredit(uint64_t now_ns);
  static constexpr uint64_t kCreditProbeNs = 20'000'000;
  uint64_t credit_seen_ = 0;
  uint64_t credit_wait_ns_ = 0;
  uint64_t credit_probe_gap_ns_ = kCreditProbeNs;  // the receiver has posted buffers for every message below this  // every message below this is acknowledged
  uint64_t resent_bytes_ = 0;
  uint64_t peer_lost_ = 0;  // bit i: the receiver reported path i lost
  uint64_t peer_nic_news_ = 0;  // bit i: peer_nic_degraded_ bit i changed; acted on after the pump round

  // The failover in progress: completions are held (gate paused) from detection until the
  // re-sent data is acknowledged, and then one line describes the whole event.
  struct Failover {
    bool active = false;
    uint64_t detected_ns = 0;
    uint64_t detected_unix_ns = 0;
    uint64_t silent_ns = 0;
    uint64_t resent_bytes = 0;
    uint64_t acked_at_detect = 0;
    std::string from;  // "0 (desc): cause"
  } failover_;
  uint64_t failover_events_ = 0;

  struct Rejoin {
    uint64_t down_ns = 0;      // when the path failed; 0 while it is alive
    uint64_t back_ns = 0;      // when it last came back (failback)
    int relapses = 0;          // failures soon after coming back: each doubles the next wait
    uint64_t next_try_ns = 0;  // earliest next connect attempt
    int attempts = 0;
    int ifindex = -1;  // local interface of the path; -1 until resolved
    bool connecting = false;
    tcp::Socket socket;
    uint64_t deadline_ns = 0;
    FrameHeader hello{};
    uint32_t sent = 0;
  };
  std::array<Rejoin, 16> rejoin_{};
  uint16_t rejoin_port_ = 0;  // the receiver's rejoin listener (kRejoinInfo); 0: failback unavailable
  uint64_t next_failback_check_ns_ = 0;
  uint64_t failbacks_ = 0;

 public:
  uint64_t failover_events() const { return failover_events_; }
  uint64_t failbacks() const { return failbacks_; }
};

}  // namespace ff
