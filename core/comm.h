// Transport-independent communicator core shared by the send and receive sides: paths, errors, pause gate.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/dual_path.h"
#include "core/path.h"
#include "core/path_health.h"
#include "core/pause_gate.h"
#include "core/probe_batch.h"
#include "core/reconnect.h"
#include "nccl/net_abi.h"
#include "sla/task_stats.h"

namespace ff {

struct TaskProfile;

class NicWatch;

// What a communicator stamps on every frame and how it chunks (fixed at connect time).
struct CommOptions {
  uint64_t chunk_bytes = 512 * 1024;
  uint64_t stripe_min_bytes = 256 * 1024;
  int max_queued_chunks = 2;
  uint64_t task_hash = 0;
  uint32_t sla_us = 0;
  // Telemetry: where per-collective statistics go and what the context last said via setNetAttr.
  sla::StatsTable* stats = nullptr;
  std::string task;
  uint32_t path_id = 0;
  std::string path_name;  // "eth0 10.0.0.1 -> 10.0.0.2 via spine1": what path_id is, for the statistics
  const ncclNetAttr_t* net_attr = nullptr;
  uint32_t stats_task = sla::StatsTable::kInvalid;  // where failover counters go
  TaskProfile* profile = nullptr;             // heat index of the task
  // Self-healing: a path with bytes in flight and no acknowledgement for this long is dead (0: off);
  // carrier loss on a path's interface (rtnetlink) kills it at once.
  uint32_t path_stall_ms = 0;
  uint32_t path_stall_fast_ms = 0;  // relative rule (PathWatchdog::JudgeRelative); 0: off
  uint32_t path_loss_ppm = PathWatchdog::kDefaultLossPpm;  // soft rule's loss threshold
  uint32_t resend_timeout_ms = 0;  // 0: no acknowledgement-timeout re-send
  bool link_events = false;
  // Eager sends: a message up to this size completes once copied into the connection's retransmit
  // ring of eager_ring_bytes (0: every send completes on its acknowledgement).
  uint64_t eager_bytes = 0;
  uint64_t eager_ring_bytes = 0;
  // Send coalescing (sender): an eager send posted within this long of the last write waits to
  // leave with the next ones (SendComm::Isend); 0: every send is written at once.
  uint64_t coalesce_ns = 0;
  // Acknowledgement batching (receiver): eager messages are acknowledged at most once per ack_batch
  // messages or ack_delay_us (their sender completed them already; only its retransmit ring waits),
  // and tiny buffers' descriptors (8 KiB or less unpublished) wait as long. An acknowledgement its
  // sender waits on (held while receives are posted behind it) and other descriptors wait at most
  // ack_now_delay_us.
  uint32_t ack_batch = 16;
  uint32_t ack_delay_us = 1000;
  uint32_t ack_now_delay_us = 100;
  // Failback: the transport's reconnector (sender) or inbox (receiver); null: never reconnected.
  std::shared_ptr<Reconnector> reconnector;
  std::shared_ptr<ReconnectInbox> reconnect_inbox;
  NicWatch* nic_watch = nullptr;  // process-wide NIC verdicts (device health); null: none
  uint32_t failback_ms = 0;   // 0: a failed path is never reconnected
  uint32_t dual_path_ms = 0;  // 0: no canary comparison before moving traffic
};

// Whole (unstriped) messages of this size and more take the paths in turn; smaller ones stay on the
// path the last one took (SendComm::PickPath). The receiver, after one this large, reads every path
// on each call: the next one comes on another (RecvComm::Progress). Striped messages (from
// FLEXIFORCE_STRIPE_MIN, 256 KiB by default) use every path anyway.
constexpr uint64_t kRoundRobinMinBytes = 128 * 1024;

class Comm : public FrameSink {
 public:
  Comm(std::vector<std::unique_ptr<Path>> paths, const CommOptions& opts, std::string peer);
  ~Comm() override;

  // Moves bytes on every path; returns the communicator's sticky error once one happened.
  virtual Status Progress() = 0;
  const Status& error() const { return error_; }
  PauseGate& gate() { return gate_; }
  int path_count() const { return static_cast<int>(paths_.size()); }
  int alive_paths() const;
  int usable_paths() const;  // alive and not draining: what new chunks may use
  const std::string& peer() const { return peer_; }
  // The wiring's object that holds this communicator (the plugin's handle); the core never reads it.
  void* owner = nullptr;

 protected:
  // Records the first fatal error and logs it once.
  void Fail(Status s);
  // A path failed: mark it dead. Returns false when no path is left (the communicator has failed).
  bool PathDown(Path& p, const std::string& why, PathFault cause = PathFault::kNone);
  // Path `p` failed in a way that condemns its route (IsRouteFailure, or the peer said so): records
  // the route process-wide, so other paths on it are judged by the route-fate rule
  // (PathWatchdog::JudgeRouteFate), and marks the path so the peer is told (OnPathLost).
  void NoteRouteFailure(Path& p, const char* how);
  // Runs the path watchdog; false when the communicator failed.
  // now_ns: the caller's clock read (one per progress call; a clock read costs ~25 ns here).
  bool CheckHealth(uint64_t now_ns);
  // "2 (10.0.0.1:50000->10.0.0.2:41234)" for every live path, for failover log lines.
  std::string DescribeAlive() const;
  // Every path's state, for the one-time "stuck communicator" warning.
  std::string DescribePaths() const;
  static constexpr uint64_t kStuckReportNs = 2'000'000'000ull;
  std::string DescribeUsable() const;
  Path* FirstAlive();
  // Collective of a message: the profiler's attribution, else setNetAttr's op bits, else unknown.
  uint16_t Classify(void* phandle) const;
  // now_ns: when the message completed (the caller read the clock for its latency already).
  void Record(uint16_t collective, uint64_t bytes, uint64_t latency_ns, sla::Direction dir, uint64_t now_ns);
  // A completed message for the batched probe (msgs_done, core/probe_batch.h); a branch unattached.
  void ProbeDone(uint8_t dir, uint16_t collective, uint64_t bytes, int path, uint64_t latency_ns, uint64_t now_ns) {
    FF_PROBE_BATCH_ADD(probe_batch_, ProbeSource(), dir, collective, bytes, path, latency_ns, now_ns);
  }
  // On each progress call: fires batched records older than ProbeBatch::kMaxAgeNs.
  void ProbeFlushIfOld(uint64_t now_ns) {
    if (probe_batch_.Old(now_ns)) FF_PROBE_BATCH_FIRE(probe_batch_, ProbeSource());
  }
  // Called after path `p` died while others remain: the sender re-sends what was not acknowledged.
  // The default (receiver) logs the event; nothing is owed on a receive connection.
  virtual void OnPathLost(Path& p, const std::string& why, uint64_t silent_ns);
  // The relative rule flagged path `p` (PathFault::kSilent). The sender hedges: it re-sends the path's
  // data elsewhere and drains it, leaving the verdict to the absolute rule. Default: treat as lost.
  virtual bool OnPathSilent(Path& p, const std::string& why, uint64_t silent_ns);
  // The watchdog wants an acknowledgement on idle path `p` as the relative rule's witness
  // (PathWatchdog::WitnessWanted). The sender sends a small control frame; default: nothing.
  virtual void SendWitness(Path& /*p*/) {}
  // An idle path was drained because its route failed elsewhere: the sender sends two small control
  // frames on it, which a working route acknowledges and a dead one leaves unacknowledged (then the
  // absolute rule declares the path dead). Default: nothing.
  virtual void ProbeRoute(Path& /*p*/) {}
  // What the communicator knows about each path, in one table. The transport's own state (alive,
  // draining) sits in the Path; everything else is here, indexed by path.
  struct PathState {
    uint32_t generation = 0;         // incarnation: a report about an older one is ignored
    bool hedged = false;             // drained after the relative rule, its data re-sent, not yet judged
    bool nic_degraded = false;       // its local NIC is degraded
    bool peer_nic_degraded = false;  // the receiver reported its NIC under this path degraded
    bool peer_nic_news = false;      // peer_nic_degraded changed; acted on after the pump round (sender)
    bool peer_lost = false;          // the receiver reported it lost; acted on after the pump round (sender)
    bool closed_by_peer = false;     // the peer closed it in order with nothing owed: no failback
    bool route_failed = false;       // it failed in a way that condemns its route (IsRouteFailure)
    bool peer_route_failed = false;  // the receiver reported it lost to a route failure (sender)
    uint64_t route_drained_ns = 0;   // when it was drained, idle, because its route failed elsewhere (0: not)
    std::string ifname;              // local interface, resolved once per incarnation
    // Failback schedule (sender; the transport's reconnector does the connecting).
    uint64_t down_ns = 0;      // when the path failed; 0 while it is alive
    uint64_t back_ns = 0;      // when it last came back
    int relapses = 0;          // failures soon after coming back: each doubles the next wait
    uint64_t next_try_ns = 0;  // earliest next attempt
    int attempts = 0;
    bool connecting = false;
  };
  static constexpr int kMaxPaths = 16;
  std::array<PathState, kMaxPaths> state_{};
  PathState& St(int i) { return state_[static_cast<size_t>(i)]; }
  const PathState& St(int i) const { return state_[static_cast<size_t>(i)]; }
  // Handles a PumpRx result; false when the communicator must stop processing this round.
  bool HandlePump(Path& p, PumpResult r);
  // Whether bytes are still owed on this communicator: EOF is an error only then.
  virtual bool ExpectingTraffic() const = 0;
  // Whether nothing is owed either way: every message sent is acknowledged (sender), no receive is
  // waiting (receiver). Stricter than !ExpectingTraffic(), which trusts the peer's transport.
  virtual bool NothingOwed() const { return !ExpectingTraffic(); }
  // Set while closing (the sender's drain for close): a peer that resets a path then is a peer that
  // closed its end while a frame of ours sat unread there (a close then resets instead of ending
  // in order), not a failure to recover from.
  bool closing_ = false;
  // Whether the peer normally closes first: a sender's eager messages complete before they are
  // delivered, so it closes (and resets a path where a frame of ours sat unread) while its receiver
  // still reads the last of them.
  virtual bool PeerClosesFirst() const { return false; }
  // While closing (or always, where the peer closes first), a path the peer reset or closed (`err`:
  // ECONNRESET, EPIPE): reads what every path still holds first (the last acknowledgement or message
  // may wait on another one), then, when nothing is owed, lets the path go as an orderly close does
  // (no failover, no warning) and returns true.
  bool PeerClosedAfterAll(Path& p, int err);
  // After the first fatal error: the receiver tells its sender, so neither side waits on the other.
  virtual void OnFailed() {}
  // Just before the failure is logged: what the log needs first (logging only).
  virtual void OnFailing() {}
  // A drained path is about to return to service (the sender reports a failover still under way).
  virtual void OnReadmit(Path& /*p*/) {}
  bool FlushAll();
  // Soft degradation: stop putting new chunks on `p` (what it holds still completes).
  void Drain(Path& p, const std::string& why);
  // Puts drained paths that stayed clean for the failback time back into service.
  void ReadmitDrained(uint64_t now_ns);
  // Dual-path canary (opts_.dual_path_ms > 0): starts / concludes a comparison of path `p` with the others.
  void StartDualPath(Path& p, DualPathCompare::Kind kind, const std::string& why, uint64_t now_ns);
  void FinishDualPath();
  DualPathCompare dual_;
  // NIC soft health: re-evaluates every path when the process-wide verdicts change.
  void CheckNics(uint64_t now_ns);
  // Local interface name of path `i` (resolved once per incarnation; empty when unknown).
  const std::string& PathInterface(int i);
  // A path's NIC verdict changed: the sender drains it (or compares first, dual-path mode).
  virtual void OnNicVerdict(Path& p, bool degraded, const std::string& why);
  // Soft degradation from any source: drain now, or start a dual-path comparison.
  void SoftDegrade(Path& p, const std::string& why, uint64_t now_ns);
  bool NicDegraded(int path) const { return St(path).nic_degraded || St(path).peer_nic_degraded; }
  uint64_t nic_gen_seen_ = ~uint64_t{0};
  uint64_t dual_path_moves_ = 0;
  uint64_t dual_path_keeps_ = 0;

  // Queues a control frame with its typed payload on `p`, stamped with this connection's task.
  void QueueControl(Path& p, FrameType type, const void* payload = nullptr, uint32_t length = 0);
  // Where a control frame's payload is read to (one buffer per path: a frame may arrive in pieces).
  char* ControlBuffer(int path);
  // Puts a fresh path in place of path `index` (failback); the old one, dead or stale, is fenced and dropped.
  void ReplacePath(int index, std::unique_ptr<Path> path);
  // Incarnation of each path index: a loss report about an older incarnation is ignored.
  uint32_t path_generation(int index) const { return St(index).generation; }

  std::vector<std::unique_ptr<Path>> paths_;
  CommOptions opts_;
  std::string peer_;
  ProbeBatch probe_batch_;
  ProbeBatch::Source ProbeSource() const { return {opts_.task_hash, peer_.c_str(), opts_.task.c_str(), opts_.sla_us}; }
  PauseGate gate_;
  PathWatchdog watchdog_;
  // CheckHealth's last full pass: its rules judge over milliseconds, so a busy-polling caller's
  // calls within kHealthGapNs of it find nothing new (with two paths they were a fifth of a small
  // message's work).
  static constexpr uint64_t kHealthGapNs = 20'000;
  uint64_t last_health_ns_ = 0;
  Status error_;
  std::string reject_reason_;  // set by OnHeader when it rejects a frame
  std::unique_ptr<char[]> control_rx_;  // paths x kMaxControlPayload
  std::array<uint32_t, 16> stats_slots_;  // per collective, resolved on first use, released by ~Comm
};

}  // namespace ff
