// Sending side of a connection: chunks and stripes messages over paths, matches them to the receiver's
// posted buffers, completes eager messages at once and the others on acknowledgement.
#pragma once

#include <memory>

#include "core/comm.h"
#include "core/requests.h"

namespace ff {

class SendComm final : public Comm {
 public:
  SendComm(std::vector<std::unique_ptr<Path>> paths, const CommOptions& opts, std::string peer);

  // Queues a message; *out is nullptr (retry later) when paused or when no request or message slot is free.
  // `mem`: NCCL's handle of the buffer (nullptr: none); a transport that reads the buffer itself
  // takes its keys from it instead of looking the buffer up. It must stay registered until the
  // request completes (NCCL deregisters only then).
  Status Isend(const void* data, uint64_t size, int tag, void* phandle, SendRequest** out,
               const MemHandle* mem = nullptr);
  // Progresses and reports completion; releases the request when done.
  Status Test(SendRequest* r, int* done, uint64_t* size);
  Status Progress() override;
  // The same with the caller's clock read (isend has one already).
  Status Progress(uint64_t now_ns);

  // Before close: eager messages completed to the caller but not yet acknowledged are still owed to
  // the receiver (a failover would re-send them). Progresses until the receiver holds everything,
  // the communicator fails, or `timeout_ns` passes; returns the messages still unacknowledged.
  uint64_t DrainForClose(uint64_t timeout_ns);

  // Path `index` never connected (setup grace expired): it starts dead and joins through failback.
  void StartWithoutPath(int index);

  uint64_t unacked_messages() const { return next_seq_ - acked_seq_; }
  uint64_t resent_bytes() const { return resent_bytes_; }
  uint64_t timeout_resends() const { return timeout_resends_; }
  uint64_t eager_messages() const { return eager_messages_; }
  uint64_t unsolicited_messages() const { return unsolicited_messages_; }

  HeaderVerdict OnHeader(Path& path, const FrameHeader& h, char** dest) override;
  void OnFrameComplete(Path& path, const FrameHeader& h) override;

  // Messages not yet acknowledged (each in one slot of the ring below).
  static constexpr int kMaxMsgs = 128;
  // Posted-receive descriptors the sender keeps (more than kMaxRequests x kMaxRecvs can be posted).
  static constexpr uint64_t kDescWindow = 1024;
  // Send coalescing (Isend): sends above the eager threshold held for one write, in bytes at most.
  // They complete on their acknowledgement either way, and on loopback a write also runs the
  // receiver's TCP stack: a 128 KiB write took 32 us, a 512 KiB one 52 us. Streaming 128 KiB sends
  // rose from 3.3 to 4.8 GB/s holding up to 512 KiB. At 512 KiB a 1 MiB send was never held: each
  // one left in 512 KiB writes per path (one chunk each, as its isend came), raw TCP's backlog in
  // 960 KiB ones. Holding up to 4 MiB, about half the writes are 960 KiB (StreamPath::kMaxWriteBytes);
  // 1 MiB streams moved from 0.83x to 0.95x raw TCP, 512 KiB ones from 0.69x to 0.87x (medians of
  // 6-8 alternating runs, same host, same run as raw); 2-8 MiB and the emulator's AllReduce moved
  // within their noise.
  static constexpr uint64_t kMaxHeldRendezvousBytes = 4 * 1024 * 1024;
  // Send coalescing: sends held for one write at most, and eager sends' bytes together at most.
  // FLEXIFORCE_COALESCE_US's text names all three (tests/plugin/config_registry_test.cc checks).
  static constexpr int kMaxHeld = 16;
  static constexpr uint64_t kMaxHeldBytes = 128 * 1024;

 private:
  SendMsg& Msg(uint64_t seq) { return msgs_[seq % kMaxMsgs]; }
  int inflight_count() const { return static_cast<int>(next_seq_ - acked_seq_); }
  void Schedule();
  // Checks message `m` against the receiver's descriptor; false (and the comm failed) on a mismatch.
  bool Match(SendMsg& m);
  Path* PickPath(SendMsg& m);
  uint64_t InFlightThisPass(const Path& p);
  void QueueChunk(SendMsg& m, Path& p, uint64_t offset);
  void OnPathLost(Path& p, const std::string& why, uint64_t silent_ns) override;
  bool OnPathSilent(Path& p, const std::string& why, uint64_t silent_ns) override;
  // An acknowledgement request on an idle path: the peer's acknowledgement of it is the witness.
  void SendWitness(Path& p) override;
  void ProbeRoute(Path& p) override;
  // Whether a chunk sent on path `index` is still unacknowledged and not marked for re-sending.
  bool OwesOnPath(int index);
  // Pauses completions and re-queues every unacknowledged chunk that was on path `p` (failover).
  void BeginFailover(Path& p, const std::string& why, uint64_t silent_ns);
  void EndFailover();
  // Fence notices (transports that write into the receiver's memory, NeedsPostedBuffer): after a
  // failover every surviving path owes the receiver a PathEvent::kDown for the dead path, queued
  // ahead of any chunk it carries from then on. The receiver fences its end of the dead path when
  // the first one arrives, before it takes another chunk, so a late write of the fenced path can
  // never land in a buffer that a re-sent chunk completed and NCCL reused.
  // notice_owed_[q]: the dead paths whose notice path q has not queued yet; q gets no chunk until 0.
  void QueueFenceNotices();
  std::vector<uint64_t> notice_owed_;
  uint64_t fence_notices_ = 0;

 public:
  uint64_t fence_notices() const { return fence_notices_; }  // queued so far (tests)

 private:
  // Fails over the paths the receiver reported lost (PathEvent::kDown); false when the comm failed.
  bool ApplyPeerLoss();
  // Eager messages the peer's transport holds are owed only their (lazy) acknowledgement: a peer that
  // closes in order after reading them ends nothing that is still expected.
  bool ExpectingTraffic() const override { return next_seq_ > acked_seq_ && !OwedOnlyAcknowledgements(); }
  bool NothingOwed() const override { return next_seq_ == acked_seq_; }
  // After the first fatal error: tell the receiver, so it does not wait for messages that never come.
  void OnFailed() override;
  void OnReadmit(Path& p) override;
  void OnFailing() override { ReportUnfinishedFailover("not resumed: the communicator failed"); }
  // The failover line, for one that has not ended (the receiver has not acknowledged past the cut)
  // when the communicator fails, closes, or takes a drained path back: `state` says which.
  void ReportUnfinishedFailover(const char* state);
  // Failback: reconnects failed paths through the transport's reconnector, one step per call.
  void TryFailback(uint64_t now_ns);
  void FailbackAttemptFailed(int path, uint64_t now_ns, const std::string& why);
  void OnAck(const AckMsg& a, const RecvDescriptor* d);
  void OnPathEvent(const PathEventMsg& e);
  // Eager ring: reserves `len` bytes; nullptr when the ring is full.
  char* RingReserve(uint64_t len, uint64_t* end);
  // An eager message written from the caller's buffer (copy_after_write_) gets its ring copy now:
  // before its request completes, after which only the copy may be re-sent.
  void SecureEagerCopy(SendMsg& m) {
    if (m.ring_copy == nullptr) return;
    std::memcpy(m.ring_copy, m.data, m.size);
    m.data = m.ring_copy;
    m.ring_copy = nullptr;
    m.mem = nullptr;  // the caller's registration does not cover the copy
  }
  // Whether reading the paths' incoming frames can wait: nothing this call needs is owed by the peer.
  bool RxCanWait() const;
  // Whether message `m` (beyond the credit) may go before its descriptor: a single-chunk message on
  // stream paths, within the unsolicited budget, outside a failover. Marks it matched.
  bool SendUnsolicited(SendMsg& m);
  bool UnsolicitedFits(const SendMsg& m) const;
  bool UnsolicitedWouldFit(uint64_t size) const;  // the same, for the message isend would post now
  // Every message owed is eager, wholly handed over, and every live path's peer holds all it was
  // sent: only the acknowledgement is missing, and nothing needs re-sending.
  bool OwedOnlyAcknowledgements() const;
  // Every message before end_seq was scheduled whole and nothing waits in a path's queue (close).
  bool HandedToTransport(uint64_t end_seq) const;

  RequestPool<SendRequest> pool_;
  std::array<SendMsg, kMaxMsgs> msgs_{};
  uint64_t next_seq_ = 0;
  uint64_t acked_seq_ = 0;  // every message below this is acknowledged
  uint64_t sched_seq_ = 0;  // messages in [acked_seq_, sched_seq_) are wholly queued, nothing to re-send
  uint64_t posted_bytes_ = 0;  // bytes of every message posted so far (SendMsg::bytes_end)
  uint64_t credit_ = 0;     // the receiver has published descriptors for every message below this
  std::unique_ptr<RecvDescriptor[]> desc_;  // kDescWindow, by seq
  std::unique_ptr<uint64_t[]> desc_seq_;    // seq + 1 of the descriptor in each slot (0: none)
  // Eager retransmit ring: [ring_tail_, ring_head_) holds unacknowledged eager copies (positions grow
  // without bound; the byte is ring_[pos % size]).
  std::unique_ptr<char[]> ring_;
  uint64_t ring_size_ = 0;
  uint64_t ring_head_ = 0;
  uint64_t ring_tail_ = 0;
  uint64_t eager_messages_ = 0;
  uint64_t ack_soon_seq_ = 0;  // 1 + the last eager message that asked for a prompt acknowledgement
  uint32_t rx_skips_ = 0;
  static constexpr uint32_t kMaxRxSkips = 15;
  bool unsolicited_ok_ = false;  // every path is a stream (no posted-buffer descriptor needed)
  bool needs_descriptor_ = false;  // a path writes into the receiver's posted buffer (RDMA)
  // Every path is done with a payload once it is written (a stream): an eager message is written
  // from the caller's buffer first and copied into the ring after, off the peer's critical path (a
  // 64 KiB copy is several microseconds; the receiver is reading meanwhile).
  bool copy_after_write_ = false;
  uint64_t acks_received_ = 0;   // acknowledgement frames read (the receiver is progressing)
  uint64_t acks_at_timeout_ = 0;
  bool acks_asked_ = false;      // the acknowledgement timeout asked for one (eager messages only owed)
  uint64_t unsolicited_messages_ = 0;
  // Set around a progress call that only has to write (isend; test() of an eager send held for
  // coalescing): reading the peer's frames can wait then (RxCanWait).
  bool write_only_ = false;
  // Send coalescing (Isend): sends held since the last write, and when that was.
  int held_ = 0;
  uint64_t held_bytes_ = 0;
  uint64_t last_write_ns_ = 0;
  bool wrote_held_ = false;
  // PickPath: each path's bytes in the transport, read at most once per Schedule pass.
  static constexpr int64_t kInFlightUnread = -1;
  std::vector<int64_t> inflight_pass_;
  // PickPath: the path the last small (unstriped) message took, kept while its queue is short.
  int last_small_path_ = -1;
  static constexpr uint64_t kStickyQueueBytes = 128 * 1024;
  // Acknowledgement timeout: last time the cumulative ack moved (or sending started).
  uint64_t ack_progress_ns_ = 0;
  uint64_t ack_seen_ = 0;
  bool ack_clock_restart_ = false;  // a descriptor made a message owed: its clock starts now
  uint64_t timeout_resends_ = 0;
  uint32_t timeout_streak_ = 0;
  // How far the oldest message owed was handed to the transport at the last look (its sequence + 1,
  // and offset): while that moves, the message is still being written and cannot be overdue.
  uint64_t head_mark_seq_ = 0;
  uint64_t head_mark_offset_ = 0;
  bool stuck_reported_ = false;
  void CheckAckTimeout(uint64_t now_ns);
  // Asks the receiver to repeat its acknowledgement and descriptors on every usable path (kAckRequest).
  void RequestAcks();
  void ProbeCredit(uint64_t now_ns);
  bool AwaitDescriptor();  // isend of a message that needs its descriptor: reads the receiver's news; false on error
  static constexpr uint64_t kCreditProbeNs = 20'000'000;
  static constexpr uint64_t kAwaitPollGapNs = 5'000;  // AwaitDescriptor on streams: reads at most this often
  uint64_t last_rx_poll_ns_ = 0;  // when Progress or AwaitDescriptor last read every path
  // Close: how long an acknowledgement is awaited once the peer's transport holds every eager byte.
  static constexpr uint64_t kCloseAckGraceNs = 2'000'000;
  uint64_t credit_seen_ = 0;
  uint64_t credit_wait_ns_ = 0;
  uint64_t credit_probe_gap_ns_ = kCreditProbeNs;
  uint64_t resent_bytes_ = 0;
  bool peer_news_ = false;  // some path's peer_lost or peer_nic_news is set

  // The failover in progress: completions are held (gate paused) from detection until the
  // re-sent data is acknowledged, and then one line describes the whole event.
  struct Failover {
    bool active = false;
    uint64_t detected_ns = 0;
    uint64_t detected_unix_ns = 0;
    uint64_t silent_ns = 0;
    uint64_t resent_bytes = 0;
    uint64_t acked_at_detect = 0;
    bool reported = false;  // ReportUnfinishedFailover logged it (once)
    std::string from;  // "0 (desc): cause"
  } failover_;
  uint64_t failover_events_ = 0;

  uint64_t next_failback_check_ns_ = 0;
  uint64_t failbacks_ = 0;

 public:
  uint64_t failover_events() const { return failover_events_; }
  uint64_t failbacks() const { return failbacks_; }
};

}  // namespace ff
