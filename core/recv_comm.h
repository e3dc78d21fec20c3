// Receiving side of a connection: matches frames to posted buffers, reassembles, acknowledges.
#pragma once

#include <bitset>
#include <memory>

#include "core/comm.h"
#include "core/requests.h"

namespace ff {

class RecvComm final : public Comm {
 public:
  RecvComm(std::vector<std::unique_ptr<Path>> paths, const CommOptions& opts, std::string peer);

  // Posts n buffers (a grouped receive); *out is nullptr (retry later) when paused or full.
  // `rkeys` (may be null): each buffer's RDMA remote keys, one per device slot of the connection; a
  // buffer with a non-zero key has its address and keys published in its descriptor, where an RDMA
  // path writes the message.
  Status Irecv(int n, void* const* data, const uint64_t* sizes, const int* tags, RecvRequest** out,
               const std::array<uint32_t, 4>* rkeys = nullptr);
  // Progresses and reports completion with the real message sizes; releases the request when done.
  Status Test(RecvRequest* r, int* done, uint64_t* sizes);
  Status Progress() override;
  // Before close: the acknowledgement of messages received but not yet acknowledged (eager ones are
  // acknowledged lazily) goes out now, on every live path, so the sender's close finds them
  // delivered instead of a connection its peer closed under them. Then, for at most
  // `drain_timeout_ns`, it waits on the paths whose transport drops what it was handed when the path
  // goes (Path::PayloadFreeAfterFlush false: RDMA's posted work requests die with their queue pair)
  // until that left: the sender completes its last messages only on the acknowledgement, usually
  // sent by the test() just before the close.
  void AcknowledgeBeforeClose(uint64_t drain_timeout_ns = 0);

  HeaderVerdict OnHeader(Path& path, const FrameHeader& h, char** dest) override;
  void OnFrameComplete(Path& path, const FrameHeader& h) override;

 private:
  static constexpr uint64_t kDoneWindow = 1024;  // > kMaxRequests * kMaxRecvs messages in flight

  bool ExpectingTraffic() const override { return active_count_ > 0; }
  bool PeerClosesFirst() const override { return true; }
  RecvEntry* FindEntry(const FrameHeader& h, RecvRequest** req);
  // A data frame arriving on lane `pi` (a path's index, or kStageLane for a staged frame): matches
  // it to its posted buffer (or stages it when none is posted yet) and says where its payload goes.
  HeaderVerdict PlaceData(int pi, const FrameHeader& h, char** dest);
  // The payload of the frame placed on lane `pi` has landed.
  void CompleteData(int pi, const FrameHeader& h);
  // Unsolicited frames (wire v4): a single-chunk eager message that arrived before its buffer was
  // posted is read into the staging area, so its path keeps flowing (re-sent chunks after a failover
  // may queue behind it); it is copied to the buffer when the receive is posted.
  int StageFrame(const FrameHeader& h);  // slot, or -1 when it does not fit (the path then stalls)
  void DeliverStaged();                  // every complete staged frame whose buffer is now posted
  void DropStaged(int pi);               // the path filling a slot is gone
  // Sends the cumulative acknowledgement with the descriptors not yet published (all from cum_done_
  // when `republish`), on the path that last delivered data or, when `all_paths`, on every live path.
  bool SendAck(bool all_paths, bool republish);
  // SendAck of what is due (the cumulative acknowledgement, every unpublished descriptor) and its
  // bookkeeping; false when no path could take it.
  bool SendDueAck();
  // Whether the sender may send anything unsolicited (SendComm::UnsolicitedWouldFit): only with an
  // eager ring (FLEXIFORCE_EAGER_BYTES and FLEXIFORCE_EAGER_RING non-zero) over a stream; otherwise
  // every message waits for its buffer's descriptor.
  bool UnsolicitedPossible() const;
  // Calls f(capacity) for each posted buffer whose descriptor is not published yet, in order, until
  // f returns false; returns whether it ran to the end.
  template <class F>
  bool ForEachUnpublished(F&& f) const {
    for (int i = 0; i < active_count_; ++i) {
      const RecvRequest& r = *active_[i];
      for (int k = 0; k < r.n; ++k)
        if (r.seq_base + static_cast<uint64_t>(k) >= credit_sent_ && !f(r.entries[k].capacity)) return false;
    }
    return true;
  }
  // Whether the sender may need an unpublished descriptor before it can send into that buffer (above
  // what may come unsolicited); irecv then publishes at once.
  bool SenderMayWaitForDescriptors() const;
  // Every buffer whose descriptor is not published yet takes only messages a sender may send
  // without one (wire v4 unsolicited messages): eager-sized buffers, or larger ones up to a chunk
  // while all of them together hold at most half the unsolicited byte budget.
  // *capacity: the bytes those buffers hold together.
  bool OnlySmallBuffersUnpublished(uint64_t* capacity) const;
  bool SendPathEvent(int path, PathEvent event);
  void SendAbort(AbortReason reason, uint64_t seq);
  // Takes the paths the sender reconnected (failback) in place of failed ones. A rejoin for a path
  // that is alive here is parked: the old stream is probed (an acknowledgement: a sender that gave
  // the stream up answers with a reset) and the rejoin adopted once the old path fails, or refused
  // after kRejoinHoldNs - a live path is never replaced. False when the communicator failed.
  bool AdoptRejoins(uint64_t now_ns);
  uint64_t rejoins_refused() const { return rejoins_refused_; }
  // Logs the loss and tells the sender on the paths left, so it fails over without waiting.
  void OnPathLost(Path& p, const std::string& why, uint64_t silent_ns) override;
  // The receiver cannot steer: it tells the sender, which drains the path.
  void OnNicVerdict(Path& p, bool degraded, const std::string& why) override;

  RequestPool<RecvRequest> pool_;
  std::array<RecvRequest*, kMaxRequests> active_{};
  int active_count_ = 0;
  uint64_t next_post_seq_ = 0;  // sequence of the next message a posted buffer will take
  uint64_t cum_done_ = 0;       // every message below this arrived whole
  uint64_t acked_ = 0;          // last cumulative acknowledgement sent
  // Descriptors are published for every posted buffer below this. The sender sends only messages
  // whose buffer is posted, so a path never carries a frame the receiver must leave unread - which
  // would block re-sent chunks behind it.
  uint64_t credit_sent_ = 0;
  bool ack_now_ = false;          // a message whose sender waits on its acknowledgement completed
  uint64_t done_since_ns_ = 0;    // when cum_done_ first moved past acked_
  uint64_t posted_since_ns_ = 0;  // when next_post_seq_ first moved past credit_sent_
  static constexpr uint64_t kDescLowWater = 4;  // publish at once when the sender holds fewer
  static constexpr uint64_t kDescBatch = 4;
  static constexpr uint64_t kAckNowBatch = 4;  // see Progress: acknowledgements a waiting sender gets
  // Bytes of completed messages whose sender waits on their acknowledgement, not yet acknowledged:
  // from kAckNowBytes on the acknowledgement goes at once (one control frame per MiB costs nothing).
  uint64_t ack_now_bytes_ = 0;
  // One past the highest message that asked for a prompt acknowledgement (kDataFlagAckNow): ack_now_
  // stays set until a cumulative acknowledgement covers it. Striped over paths, such a message can
  // complete before an earlier one; an acknowledgement sent in between (a descriptor, an eager
  // batch's delay) stops short of it and must not end the request.
  uint64_t ack_now_until_ = 0;
  // Bytes of messages completed since the last acknowledgement (see Progress: the sender's budget).
  uint64_t done_bytes_since_ack_ = 0;
  static constexpr uint64_t kAckNowBytes = 1 << 20;
  static constexpr uint64_t kDescBatchTiny = kMaxUnsolicitedMsgs / 2;
  int last_rx_path_ = -1;       // path that last delivered a data frame
  bool last_rx_large_ = false;
  bool last_rx_small_ = false;  // ... of at most kLoneReceiveMaxBytes (Path::HintLoneReceive)  // ... of a message of kRoundRobinMinBytes or more
  bool ack_all_paths_ = false;  // a duplicate arrived: the next acknowledgement goes on every path
  // The sender's fence notices (SendComm::QueueFenceNotices): paths it failed over whose end here is
  // not fenced yet. While any is due, data frames wait in their paths (kStall): no chunk re-sent
  // after the failover completes a receive before the fence is done.
  uint64_t fence_due_ = 0;
  PathEventMsg notice_in_{};
  uint64_t fences_on_notice_ = 0;
  bool FenceNotified();  // false when the communicator failed (the last path)

 public:
  uint64_t fences_on_notice() const { return fences_on_notice_; }  // tests

 private:
  bool ack_requested_ = false;  // the sender asked for the acknowledgement again (kAckRequest)
  // Stuck-communicator diagnostics: frames completed, and when the count last moved.
  uint64_t frames_done_ = 0;
  uint64_t frames_seen_ = 0;
  uint64_t last_frame_ns_ = 0;
  // The clock read shared by every message one path read of Progress completes (0: not read yet);
  // outside such a read (rx_stamp_shared_ false) each completion reads the clock itself.
  uint64_t rx_stamp_ns_ = 0;
  bool rx_stamp_shared_ = false;
  bool stuck_reported_ = false;
  void ReportIfStuck(uint64_t now_ns);
  void OnFailed() override;
  std::bitset<kDoneWindow> done_bits_;
  bool reconnect_info_sent_ = false;  // told to the sender once (kReconnectInfo)
  struct ParkedRejoin {
    std::unique_ptr<Path> path;  // null: none parked for this path
    std::string peer;
    uint64_t since_ns = 0;
  };
  static constexpr uint64_t kRejoinHoldNs = 1'000'000'000;
  std::vector<ParkedRejoin> parked_;  // one slot per path, sized at construction
  int parked_count_ = 0;
  uint64_t rejoins_refused_ = 0;
  // Lanes: one per path index, plus kStageLane for frames delivered from the staging area.
  static constexpr int kStageLane = 63;
  std::array<RecvEntry*, 64> path_entry_{};
  std::array<RecvRequest*, 64> path_req_{};
  std::array<uint64_t, 64> path_offset_{};  // offset of the chunk each path is receiving
  struct Staged {
    bool used = false;
    bool complete = false;
    int lane = -1;       // the path reading its payload, until complete
    FrameHeader h{};
    uint64_t pos = 0;    // in stage_buf_
  };
  std::array<Staged, kMaxUnsolicitedMsgs> staged_{};
  int staged_count_ = 0;
  std::unique_ptr<char[]> stage_buf_;  // 2 x kMaxUnsolicitedBytes, allocated at first use
  uint64_t stage_head_ = 0;            // bump position; compacted when a frame does not fit
  std::array<int8_t, 64> path_stage_{};  // slot + 1 each path is filling (0: none)
  uint64_t staged_frames_ = 0;
  uint64_t messages_done_ = 0;  // messages received whole
  int poll_after_ = -1;         // the last read stopped early after this path
  // When each path's last read came back empty (0: it delivered something); see Progress.
  std::array<uint64_t, 64> empty_read_ns_{};
  // How many reads in a row came back empty: the gap before the next doubles with each, from
  // kIdlePollGapNs up to kIdlePollGapNs << kIdlePollMaxShift.
  std::array<uint8_t, 64> empty_streak_{};
  static constexpr uint64_t kIdlePollGapNs = 10'000;
  static constexpr unsigned kIdlePollMaxShift = 4;  // 160 us
  // One receive posted and the last message this small: the paths are told it is a lone receive.
  // Two frames of this size (with their 64-byte headers) fit in 536 bytes, the smallest segment size
  // a Linux receiver assumes, so its kernel acknowledges them inside the read (a bare ACK on the
  // reply's critical path) rather than on arrival. Larger ones are acknowledged on arrival while the
  // connection has carried only small segments, and there an extra read per message cost more than
  // it saved (512 B-4 KiB round trips 1.18-1.37x -> 1.35-1.58x raw).
  static constexpr uint64_t kLoneReceiveMaxBytes = 192;
  static constexpr uint64_t kRejoinPollNs = 1'000'000;  // see Progress: how often rejoins are looked for
  uint64_t last_rejoin_poll_ns_ = 0;

 public:
  uint64_t staged_frames() const { return staged_frames_; }
};

}  // namespace ff
