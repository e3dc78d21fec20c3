// What the probe's BPF maps hold at one moment, in C++ terms, and the difference of two moments.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "bpf/probe_maps.h"

namespace ff::probe {

struct FlowId {
  std::string task;
  std::string collective;  // sla::CollectiveName, "unknown" when unattributed
  std::string peer;
  int path = -1;  // -1: striped
  std::string dir;  // "send" / "recv"
  auto Tie() const { return std::tie(task, collective, peer, path, dir); }
  bool operator<(const FlowId& o) const { return Tie() < o.Tie(); }
};

struct FlowCounters {
  uint64_t messages = 0;
  uint64_t bytes = 0;
  uint64_t latency_sum_ns = 0;
  uint64_t sla_violations = 0;
  uint64_t sla_us = 0;
  std::array<uint64_t, FF_PROBE_BUCKETS> hist{};
  // Latency below which `q` (0..1) of the messages completed, from the log2 buckets (upper edge).
  uint64_t QuantileNs(double q) const;
};

struct SocketId {
  std::string local;   // "10.0.0.1:41234"
  std::string remote;
  bool operator<(const SocketId& o) const { return std::tie(local, remote) < std::tie(o.local, o.remote); }
};

// One control-plane event from the ring buffer, decoded.
struct TimelineEvent {
  uint64_t mono_ns = 0;    // CLOCK_MONOTONIC, as the BPF program read it
  double wall_s = 0;       // the same moment in seconds since the epoch
  int pid = 0;
  int tid = 0;
  std::string comm;
  uint64_t task_hash = 0;
  std::string task;        // the task id whose hash the probe passed ("" until resolved)
  std::string event;       // "connect", "accept", "path_choice", "failover", ...
  std::string peer;
  int path = -1;           // path index for path_choice, drain, failback; -1 otherwise
  nlohmann::json details;  // the probe's other arguments, named
};

// Decodes one ring-buffer record (task left empty; `mono_to_wall_s` converts the monotonic clock).
TimelineEvent TimelineEventFromRecord(const ff_event& r, double mono_to_wall_s);

// FNV-1a 64 of a task id: the task hash the plugin passes to its probes (core/task_profile.cc).
uint64_t TaskHash(const std::string& task_id);

struct Snapshot {
  std::map<FlowId, FlowCounters> flows;
  std::map<SocketId, uint64_t> retransmits;
  std::array<uint64_t, FF_EV_COUNT> events{};
  bool posts_counted = false;  // send_post/recv_post were attached (probe --posts); else their counts mean nothing
  std::vector<TimelineEvent> timeline;  // in arrival order; an interval holds the events that arrived in it
  uint64_t timeline_dropped = 0;        // events the ring (or the tool's cap) had no room for
  // TCP sockets of the processes that sent events, seen in /proc while sampling: 4-tuple -> pid.
  std::map<SocketId, int> socket_owners;
};

// Counters of `now` minus `before` (rows absent before count from zero; rows that did not move are dropped).
Snapshot Difference(const Snapshot& now, const Snapshot& before);

// Converts one raw map entry (decodes names, the collective, the direction).
FlowId FlowIdFromKey(const ff_flow_key& k);
FlowCounters CountersFromValue(const ff_flow_stats& v);
SocketId SocketIdFromKey(const ff_sock_key& k);

const char* EventName(int ev);  // "send_post", "failover", ...

nlohmann::json TimelineJson(const std::vector<TimelineEvent>& events);
// "2026-12-01T22:40:00.123456Z"
std::string IsoTime(double wall_s);

nlohmann::json SnapshotJson(const Snapshot& s);

}  // namespace ff::probe
