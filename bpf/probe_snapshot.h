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

struct Snapshot {
  std::map<FlowId, FlowCounters> flows;
  std::map<SocketId, uint64_t> retransmits;
  std::array<uint64_t, FF_EV_COUNT> events{};
};

// Counters of `now` minus `before` (rows absent before count from zero; rows that did not move are dropped).
Snapshot Difference(const Snapshot& now, const Snapshot& before);

// Converts one raw map entry (decodes names, the collective, the direction).
FlowId FlowIdFromKey(const ff_flow_key& k);
FlowCounters CountersFromValue(const ff_flow_stats& v);
SocketId SocketIdFromKey(const ff_sock_key& k);

const char* EventName(int ev);  // "send_post", "failover", ...

nlohmann::json SnapshotJson(const Snapshot& s);

}  // namespace ff::probe
