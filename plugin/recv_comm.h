// Receiving side of a connection: matches frames to posted buffers, reassembles, acknowledges.
#pragma once

#include <bitset>

#include "plugin/comm.h"
#include "plugin/rejoin_hub.h"
#include "plugin/requests.h"

namespace ff {

class RecvComm final : public Comm {
 public:
  // Registers with the rejoin hub when failback is on (opts.failback_ms > 0).
  RecvComm(std::vector<std::unique_ptr<StreamPath>> paths, const CommOptions& opts, std::string peer);
  ~RecvComm() override;

  // Posts n buffers (a grouped receive); *out is nullptr (retry later) when paused or full.
  Status Irecv(int n, void* const* data, const uint64_t* sizes, const int* tags, RecvRequest** out);
  // Progresses and reports completion with the real message sizes; releases the request when done.
  Status Test(RecvRequest* r, int* done, uint64_t* sizes);
  Status Progress() override;

  HeaderVerdict OnHeader(StreamPath& path, const FrameHeader& h, char** dest) override;
  void OnFrameComplete(StreamPath& path, const FrameHeader& h) override;

 private:
  static constexpr uint64_t kDoneWindow = 1024;  // > kMaxRequests * kMaxRecvs messages in flight

  bool ExpectingTraffic() const override { return active_count_ > 0; }
  RecvEntry* FindEntry(const FrameHeader& h, RecvRequest** req);
  bool SendControl(FrameType type, uint64_t seq, int32_t tag, uint16_t flags = 0, uint64_t total = 0);
  // Takes the paths the sender reconnected (failback) in place of the failed ones.
  void AdoptRejoins();
  // Logs the loss and tells the sender on the paths left, so it fails over without waiting.
  void OnPathLost(StreamPath& p, const std::string& why, uint64_t silent_ns) override;
  // The receiver cannot steer: it tells the sender, which drains the path.
  void OnNicVerdict(StreamPath& p, bool degraded, const std::string& why) override;

  RequestPool<RecvRequest> pool_;
  std::array<RecvRequest*, kMaxRequests> active_{};
  int active_count_ = 0;
  uint64_t next_post_seq_ = 0;  // sequence of the next message a posted buffer will take
  uint64_t cum_done_ = 0;       // every message below this arrived whole
  uint64_t acked_ = 0;          // last cumulative acknowledgement sent
  // Last credit sent. The sender sends only messages whose buffer is posted, so a path never
  // carries a frame the receiver must leave unread - which would block re-sent chunks behind it.
  uint64_t credit_sent_ = 0;
  int last_rx_path_ = -1;       // path that last delivered a data frame
  bool ack_all_paths_ = false;  // a duplicate arrived: the next acknowledgement goes on every path
  bool ack_requested_ = false;  // the sender asked for the acknowledgement again (kAckRequest)
  // Stuck-communicator diagnostics: frames completed, and when the count last moved.
  uint64_t frames_done_ = 0;
  uint64_t frames_seen_ = 0;
  uint64_t last_frame_ns_ = 0;
  bool stuck_reported_ = false;
  void ReportIfStuck(uint64_t now_ns);
  void OnFailed() override;
  std::bitset<kDoneWindow> done_bits_;
  RejoinMailbox rejoin_box_;
  bool rejoin_registered_ = false;
  uint16_t rejoin_port_ = 0;     // told to the sender once (kRejoinInfo)
  bool rejoin_info_sent_ = false;
  std::array<RecvEntry*, 64> path_entry_{};
  std::array<RecvRequest*, 64> path_req_{};
  std::array<uint64_t, 64> path_offset_{};  // offset of the chunk each path is receiving
};

}  // namespace ff
