// The seam between the communicator core and a transport: one path of a connection, at chunk level.
//
// The core (comm, send_comm, recv_comm, the watchdog rules) sees only this interface. A transport
// implements it once: tcp/ with a framed byte stream (StreamPath), verbs/ with queue pairs. What the
// core needs from a path:
//   - post a data chunk or a control message (Queue), with room to do so (CanQueue);
//   - progress: push what is queued (Flush) and deliver what landed (Poll) to a FrameSink;
//   - load (what it still holds) and whether the peer holds everything (Quiescent);
//   - fence: after Fence() nothing sent on this path can ever land at the peer (TCP: reset;
//     RDMA: QP to ERR and its flushed completions drained);
//   - a neutral health sample for the watchdog rules;
//   - a description for log lines and the local interface for carrier/NIC verdicts.
// Per-path state the core keeps about a path (alive, draining) sits in this base class so that every
// transport shares it; the rest (hedged, degraded, generation) is in the communicator's path table.
#pragma once

#include <cstdint>
#include <string>

#include "core/mem_handle.h"
#include "core/wire_format.h"

namespace ff {

class Path;

// The links of a path's route that join two switches, as the wiring knows them (the path oracle's
// link indices, pathctl::FabricLinks): the same for both directions of a route, so two paths that
// share one share the fate of a cut there. Empty: unknown (no topology file, or not a stream path).
struct RouteLinks {
  static constexpr int kMax = 8;
  uint32_t link[kMax] = {};
  int n = 0;
  bool empty() const { return n == 0; }
  void Add(uint32_t l) {
    if (n < kMax) link[n++] = l;
  }
  bool Contains(uint32_t l) const {
    for (int i = 0; i < n; ++i)
      if (link[i] == l) return true;
    return false;
  }
};

enum class HeaderVerdict { kAccept, kStall, kReject };

// Receives parsed frames; implemented by the send and receive communicators.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // `h` is validated. Set *dest to where the payload goes (nullptr discards it). kStall leaves the
  // frame with the path until the sink can place it; kReject is a protocol error (sink keeps the reason).
  virtual HeaderVerdict OnHeader(Path& path, const FrameHeader& h, char** dest) = 0;
  virtual void OnFrameComplete(Path& path, const FrameHeader& h) = 0;
};

enum class PumpResult { kIdle, kStalled, kClosed, kIoError, kBadFrame, kRejected };

// What a transport reports about one path's progress, judged by the watchdog (path_health.h). The
// names follow TCP_INFO; a transport without segments counts its own units (work requests for verbs).
struct PathSample {
  bool valid = false;
  uint32_t unacked_segments = 0;  // sent, not yet acknowledged by the peer's transport
  uint64_t bytes_acked = 0;       // cumulative, grows with every new acknowledgement
  uint32_t ms_since_ack = 0;      // age of the last acknowledgement
  uint32_t retransmits = 0;
  uint32_t rto_us = 0;
  uint64_t segs_out = 0;  // units sent, retransmissions included
  uint32_t rtt_us = 0;    // smoothed round-trip time
  uint32_t sacked = 0;    // units the peer holds out of order (loss recovery in progress)
  uint32_t dsack_dups = 0;  // retransmitted units the peer reports it already had (spurious)
  uint32_t reord_seen = 0;  // reordering events the sender detected
  uint8_t ca_state = 0;     // congestion-avoidance state (TCP_CA_*): 3 = fast recovery
  // Flow control, for the log's evidence (window_known false where the transport does not say): the
  // room the peer last advertised (TCP: tcpi_snd_wnd) and the bytes sent and not acknowledged.
  bool window_known = false;
  uint32_t peer_window = 0;
  uint64_t in_flight_bytes = 0;
  uint32_t mss = 0;  // the largest unit the transport sends (TCP: tcpi_snd_mss); 0 where unknown
};

class Path {
 public:
  explicit Path(int index) : index_(index) {}
  virtual ~Path() = default;
  Path(const Path&) = delete;
  Path& operator=(const Path&) = delete;

  int index() const { return index_; }
  bool alive() const { return alive_; }
  void MarkDead() { alive_ = false; }
  // A draining path is alive (it finishes what it holds, carries control messages) but takes no new chunks.
  bool draining() const { return draining_; }
  void SetDraining(bool d) { draining_ = d; }
  // The fabric links under this path (RouteLinks); empty: unknown.
  const RouteLinks& route() const { return route_; }
  void set_route(const RouteLinks& r) { route_ = r; }

  // Outgoing. A data frame references its payload until Flush has handed it to the transport.
  virtual bool CanQueue() const = 0;
  virtual void Queue(const FrameHeader& sealed, const char* payload) = 0;
  // A data chunk together with the receiver's descriptor of its message's buffer (the chunk goes to
  // dest.addr + sealed.offset): RDMA writes it there itself, so it needs the address and keys; a
  // stream ignores them, since there the receiver places the chunk.
  // `mem`: NCCL's handle of the buffer the payload lies in (nullptr: none); RDMA takes the payload's
  // local key from it rather than looking the buffer up.
  virtual void QueueData(const FrameHeader& sealed, const char* payload, const RecvDescriptor& dest,
                         const MemHandle* mem) {
    (void)dest;
    (void)mem;
    Queue(sealed, payload);
  }
  // Whether a data chunk needs the receiver's posted-buffer descriptor before it can be sent (RDMA
  // WRITE places it there); a stream may send small eager messages ahead of it (unsolicited).
  virtual bool NeedsPostedBuffer() const { return false; }
  // Whether a data frame's payload is never read again once Flush handed the frame over (a stream's
  // write copies it into the kernel). False where the transport reads it later: RDMA reads the
  // buffer until its work request completes, long after the post.
  virtual bool PayloadFreeAfterFlush() const { return false; }
  virtual int queued_frames() const = 0;
  virtual uint64_t queued_payload_bytes() const = 0;
  virtual int queued_data_frames() const = 0;
  // Hands queued frames to the transport; false on an error (last_errno()).
  virtual bool Flush() = 0;
  // Forgets queued frames (a dead path's chunks are re-sent elsewhere by the communicator).
  virtual void DropQueued() = 0;
  // After this returns nothing this path sent can land at the peer any more.
  virtual void Fence() = 0;
  // The rest of the chunk now being received is dropped: its copy already arrived on another path.
  virtual void DiscardCurrentPayload() = 0;
  // Incoming: delivers frames to `sink` until the transport has nothing more or the sink stalls.
  virtual PumpResult Poll(FrameSink& sink) = 0;
  // The last Poll read nothing at all. A transport whose Poll costs a system call (a stream's
  // non-blocking read) says so, and the receiver reads a path that keeps coming back empty less
  // often; the default (false) suits a transport that reads a completion queue in user space.
  virtual bool LastPollEmpty() const { return false; }
  // The receiver waits on one small message at a time (a ping-pong, a latency-bound collective's
  // steps): a transport may then defer the receive's bookkeeping to its next read, after the
  // caller's reply (a stream: its kernel's acknowledgement). The default ignores the hint.
  virtual void HintLoneReceive(bool lone) { (void)lone; }
  virtual const std::string& rx_error() const = 0;
  virtual int last_errno() const = 0;

  // Bytes handed to the transport that the peer has not acknowledged yet (-1: unknown).
  virtual int64_t InFlightBytes() const = 0;
  // InFlightBytes for choosing between paths, where a slightly stale figure will do: a transport
  // whose figure costs a system call may answer from a reading younger than its refresh interval
  // plus what it handed over since (an upper bound: the peer may have acknowledged some meanwhile).
  virtual int64_t InFlightEstimate(uint64_t now_ns) const {
    (void)now_ns;
    return InFlightBytes();
  }
  // The peer's transport holds every byte handed over (nothing queued, nothing in flight).
  bool Quiescent() const { return queued_frames() == 0 && InFlightBytes() == 0; }
  virtual PathSample Sample() const = 0;
  // A pending asynchronous error on the path (errno value), 0 when none.
  virtual int PendingError() const = 0;
  // Interface index of the local end (carrier and NIC verdicts); 0 when unknown.
  virtual int LocalIfindex() const = 0;
  virtual std::string Describe() const = 0;
  virtual std::string DebugState() const = 0;

 private:
  int index_;
  bool alive_ = true;
  bool draining_ = false;
  RouteLinks route_;
};

}  // namespace ff
