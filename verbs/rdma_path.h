// The verbs implementation of the communicator's Path: one RC queue pair; data chunks by RDMA WRITE WITH
// IMMEDIATE into the receiver's published buffer, control frames by SEND into a ring of pre-posted receives.
//
// Wire use of one path (both ends run this class):
//   - a control frame is one SEND of header + payload into one of the peer's receive slots;
//   - a data chunk is two work requests posted together: an unsignaled SEND of its 64-byte header, then
//     an RDMA WRITE WITH IMMEDIATE of the payload to descriptor.addr + header.offset with the
//     descriptor's key for this device. The peer sees the header's receive completion, then the
//     immediate's (RC keeps them in order, and the immediate completes only once the bytes are in
//     place), and only then hands the frame to its sink: the sender placed the bytes itself.
#pragma once

#include <infiniband/verbs.h>  // types only

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "core/path.h"
#include "verbs/async_events.h"
#include "verbs/ibverbs_loader.h"
#include "verbs/mr_cache.h"
#include "verbs/qp_attrs.h"
#include "verbs/verbs_owners.h"

namespace ff::verbs {

// One opened port and what every path on it shares. Members are declared in the order the kernel
// needs them destroyed in reverse: the cache's registrations go before the PD, the PD before the context.
struct RdmaDevice {
  const IbverbsLoader* ib = nullptr;
  ContextOwner context;
  std::unique_ptr<AsyncEvents> events;  // the context's async events; null when its fd cannot be read
  PdOwner pd;
  std::unique_ptr<MrCache> mrs;  // host buffers: the sender's payloads, the receiver's posted buffers
  std::string name;
  uint8_t port = 1;
  uint8_t gid_index = 0;
  ibv_gid gid{};
  uint16_t lid = 0;
  ibv_mtu active_mtu = IBV_MTU_1024;
  std::string netdev;  // RoCE: the interface behind the port (LocalIfindex); empty when unknown
};

// Opens `name`, queries `port` and GID `gid_index`, allocates the PD and the registration cache
// (local write and remote write access: the receiver's buffers are written by the peer).
Status OpenRdmaDevice(const IbverbsLoader& ib, const std::string& name, int port, int gid_index,
                      std::unique_ptr<RdmaDevice>* out);

// What one end tells the other to connect a queue pair (the bootstrap exchanges it; 32 bytes).
struct RdmaEndpoint {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint8_t mtu = 0;  // ibv_mtu of the sender's port: the path uses the smaller of the two
  // The receiving end's: which RecvDescriptor::keys slot holds its registrations on this path's
  // device (a connection's QPs may sit on several ports, each with its own rkeys). 0xff: keep ours.
  uint8_t key_slot = 0xff;
  uint32_t reserved = 0;
  std::array<uint8_t, 16> gid{};
};
static_assert(sizeof(RdmaEndpoint) == 32, "RdmaEndpoint is exchanged as bytes");

struct RdmaPathOptions {
  int key_slot = 0;  // which RecvDescriptor::keys entry holds this device's remote key (the peer's
                     // endpoint may name another: see RdmaEndpoint::key_slot)
  RcQpParams qp;     // retry, MTU cap, steering; port, GID and the peer are filled in by the path
};

class RdmaPath final : public Path {
 public:
  static constexpr int kTxRing = 64;            // frames queued or posted
  static constexpr int kRxRing = 128;           // receives kept posted
  static constexpr uint32_t kSlotBytes = 1024;  // one control frame: header + its largest payload
  static_assert(kSlotBytes >= sizeof(FrameHeader) + kMaxControlPayload, "a control frame fits a slot");

  // Creates the CQs and the QP (in INIT, receives posted). `dev` must outlive the path.
  static Status Create(int index, RdmaDevice& dev, const RdmaPathOptions& options, std::unique_ptr<RdmaPath>* out);
  ~RdmaPath() override;

  RdmaEndpoint local() const;
  // RTR and RTS against the peer's endpoint; `peer` names it in Describe ("10.99.0.2").
  Status Connect(const RdmaEndpoint& remote);

  bool CanQueue() const override { return tx_count_ < kTxRing; }
  // Control frames are copied into a registered slot; a data frame needs QueueData (its destination).
  void Queue(const FrameHeader& sealed, const char* payload) override;
  // With `mem` covering the payload and holding this device's keys, the write uses its local key;
  // else the payload's registration is looked up in the device's cache (and held until completion).
  void QueueData(const FrameHeader& sealed, const char* payload, const RecvDescriptor& dest,
                 const MemHandle* mem) override;
  bool NeedsPostedBuffer() const override { return true; }
  int queued_frames() const override { return tx_count_ - tx_posted_; }
  uint64_t queued_payload_bytes() const override { return queued_payload_bytes_; }
  int queued_data_frames() const override { return queued_data_frames_; }
  // Reaps send completions, then posts what is queued while the send queue has room.
  bool Flush() override;
  void DropQueued() override;
  // QP to ERR, then waits for every posted work request's flushed completion: afterwards this QP
  // transmits nothing more, and its receives are gone too.
  void Fence() override;
  // The bytes are already in place (the sender wrote them); nothing to discard.
  void DiscardCurrentPayload() override {}
  PumpResult Poll(FrameSink& sink) override;
  const std::string& rx_error() const override { return rx_error_; }
  int last_errno() const override { return last_errno_; }
  // Bytes of posted work requests not yet completed (headers and control frames included, so 0
  // means no outstanding send work request).
  int64_t InFlightBytes() const override { return static_cast<int64_t>(inflight_bytes_); }
  PathSample Sample() const override;
  int PendingError() const override { return pending_errno_; }
  int LocalIfindex() const override;
  std::string Describe() const override { return describe_; }
  std::string DebugState() const override;

  // Keeps `fd` (the connection's bootstrap stream, a socket the peer process holds open) and checks
  // it at most every kPeerWatchNs from Poll: the peer closing it (its process exited or died) ends
  // the path with kClosed. An RC QP alone cannot tell: a receiver that never sends has no work
  // request that could fail when the sending process dies. -1: no watch.
  void WatchPeer(int fd);
  static constexpr uint64_t kPeerWatchNs = 10'000'000;

  uint64_t bytes_written() const { return bytes_acked_; }
  uint32_t qpn() const;

 private:
  struct TxFrame {
    FrameHeader hdr;
    const char* payload;  // data: the caller's bytes; control: copied into the slot
    uint64_t raddr;       // data: where the payload goes at the peer
    uint32_t rkey;
    MrRef mr;  // data: the payload's registration, held until the write completes
    uint32_t wr_bytes;
    bool has_lkey = false;  // data: the payload's local key came with NCCL's handle (else: the cache)
    uint32_t lkey = 0;
  };
  // A receive completion not yet handed to the sink (the sink stalled, or its pair is pending).
  struct RxDone {
    uint32_t slot;
    uint32_t byte_len;
    uint32_t imm;
    bool with_imm;
  };

  RdmaPath(int index, RdmaDevice& dev, const RdmaPathOptions& options);
  Status Init();
  bool PostFrame(int slot);
  void ReapSends();
  bool PostRecv(uint32_t slot);
  void CompleteHead(bool ok);
  void NoteSendError(const ibv_wc& wc);
  PumpResult Deliver(FrameSink& sink, const RxDone& d, bool* consumed);
  // Reads the device's async events (at most once per AsyncEvents::kPollIntervalNs) and, when one
  // fails this path, records it as the pending error and moves the QP to ERR at once: nothing posted
  // may still go out if the port comes back. True when the path failed now.
  bool CheckDeviceEvents();

  RdmaDevice& dev_;
  const IbvApi& api_;
  RdmaPathOptions options_;
  // Destroyed in reverse: QP before the CQs it uses, MRs before the buffers they pin.
  std::unique_ptr<char[]> tx_store_;  // kTxRing slots: headers and control payloads
  std::unique_ptr<char[]> rx_store_;  // kRxRing slots
  MrOwner tx_mr_;
  MrOwner rx_mr_;
  CqOwner send_cq_;
  CqOwner recv_cq_;
  QpOwner qp_;

  uint32_t local_psn_ = 0;
  bool connected_ = false;
  bool fenced_ = false;
  std::string describe_;
  mutable int ifindex_ = -1;

  std::array<TxFrame, kTxRing> tx_{};
  int tx_head_ = 0;
  int tx_count_ = 0;   // queued + posted
  int tx_posted_ = 0;  // the first tx_posted_ frames from tx_head_ are posted
  int queued_data_frames_ = 0;
  uint64_t queued_payload_bytes_ = 0;
  uint64_t inflight_bytes_ = 0;
  uint32_t inflight_wrs_ = 0;  // work requests posted and not completed (a data frame is two)
  uint32_t tx_imm_ = 0;  // data chunks sent: the immediate carries it, the peer checks the order

  std::array<RxDone, kRxRing> rx_backlog_{};
  int rx_backlog_head_ = 0;
  int rx_backlog_count_ = 0;
  bool rx_have_header_ = false;  // a data header arrived; its immediate is next
  FrameHeader rx_hdr_{};
  uint32_t rx_hdr_slot_ = 0;
  uint32_t rx_imm_ = 0;

  std::string rx_error_;
  int last_errno_ = 0;
  int pending_errno_ = 0;
  uint64_t bytes_acked_ = 0;  // data payload bytes whose WRITE completed
  uint64_t wrs_posted_ = 0;
  uint64_t last_progress_ns_ = 0;
  int peer_fd_ = -1;
  bool peer_watch_off_ = false;  // the watch stream failed on its own network: kept open, not read
  uint64_t peer_checked_ns_ = 0;
  bool peer_exited_ = false;  // the watch saw the peer process exit; kClosed once the receives are read
  uint64_t events_seen_ = 0;  // AsyncEvents::generation() last checked
  bool event_failed_ = false;  // an async event failed this path (rx_error_ names it)
};

}  // namespace ff::verbs
