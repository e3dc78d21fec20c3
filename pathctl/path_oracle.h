// The path oracle used by the plugin: which local NIC, remote address, source ports and
// backups to use for a task, answered from a published immutable snapshot.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pathctl/backup_table.h"
#include "base/clock.h"
#include "pathctl/link_health.h"
#include "pathctl/path_ranker.h"
#include "pathctl/ranking_policy.h"
#include "pathctl/topology.h"
#include "pcie/topo_distance.h"

namespace ff::pathctl {

// One usable path. sport_lo..sport_hi: TCP/UDP source ports that steer traffic onto it (0,0 =
// any). path_id: FNV-1a of the hop ids, the same on every host for the same path.
struct PathOption {
  std::string local_ip;
  std::string remote_ip;
  uint16_t sport_lo = 0;
  uint16_t sport_hi = 0;
  uint32_t path_id = 0;
  double latency_us = 0;
  double score = 0;       // the ranker's score plus the topo_distance cost of local_ip; lower is better
  bool feasible = false;  // met every SLA constraint
  // PCIe distance between the GPU and local_ip as the query gave it; nullopt when not given.
  std::optional<pcie::PciDistance> topo_distance;
  std::vector<std::string> hops;   // node ids, local NIC first
  std::vector<uint32_t> links;     // link indices (for ReportLinkHealth by index)
};

// The links of a path that join two switches (leaf-spine, spine-core, ...), sorted: what a cut
// behind the switches can break, the same for both directions of the path. A NIC's own link is left
// out: its carrier is watched directly, and every path of that NIC crosses it.
std::vector<uint32_t> FabricLinks(const Topology& topology, const std::vector<uint32_t>& links);

struct PathChoice : PathOption {
  int level = 3;                  // SLA level 1..3
  bool sla_attainable = false;    // false: best effort, no path met the SLA
  bool routed = false;            // false: an endpoint is not in the graph; use local_ip, any port
  std::vector<PathOption> backups;  // most link-disjoint first
};

// Per local address of a query, the PCIe distance between the GPU the traffic comes from and that
// NIC (pcie::ClassifyDistance); nullopt: unknown (no cost). Shorter than the address list: the
// rest are unknown.
using TopoDistances = std::vector<std::optional<pcie::PciDistance>>;

struct OracleOptions {
  Policy policy;
  HealthPolicy health;
  const Clock* clock = nullptr;        // nullptr: steady clock
  size_t precompute_max_nics = 128;    // precompute all NIC pairs (no SLA) when there are at most this many NICs
};

struct OracleStats {
  uint64_t tables_computed = 0;     // backup-table entries ranked (first time or after a health change)
  uint64_t queries_computed = 0;    // cache misses and re-derivations after health changes
  uint64_t unattainable = 0;        // computed choices whose SLA could not be met
  uint64_t health_transitions = 0;
  uint64_t snapshots_published = 0;
};

class PathOracle {
 public:
  static std::shared_ptr<PathOracle> FromTopology(Topology topology, OracleOptions options = {});
  // Embedded default graph when no topology file exists: each local NIC -> one switch -> each
  // remote NIC, so every local/remote pair is a single-hop path.
  static std::shared_ptr<PathOracle> FromInterfaces(const std::vector<std::string>& local_ips,
                                                    const std::vector<std::string>& remote_ips,
                                                    OracleOptions options = {});
  // FLEXIFORCE_TOPOLOGY names a topology file: use it; unset, or unreadable (then *note says
  // why): FromInterfaces.
  static std::shared_ptr<PathOracle> FromEnvironment(const std::vector<std::string>& local_ips,
                                                     const std::vector<std::string>& remote_ips,
                                                     std::string* note, OracleOptions options = {});

  // sla_us <= 0: no SLA. Cached answers are a lock-free snapshot read plus a hash lookup; a
  // miss ranks under a writer mutex and publishes a new snapshot. Never returns null.
  std::shared_ptr<const PathChoice> Query(const std::vector<std::string>& local_ips, const std::string& remote_ip,
                                          double sla_us, uint64_t size_bytes);
  // The same, with each local NIC's topo_distance: a path's score grows by
  // Policy::topo_distance_cost_us of its local NIC's distance, so the primary and backups prefer the
  // NICs nearest the GPU among paths the fabric rates alike.
  std::shared_ptr<const PathChoice> Query(const std::vector<std::string>& local_ips, const std::string& remote_ip,
                                          double sla_us, uint64_t size_bytes, const TopoDistances& topo_distance);

  // Health input. Returns true when the link's state changed (affected entries were
  // recomputed and a new snapshot published). Unknown links return false.
  bool ReportLinkHealth(uint32_t link, HealthSignal signal);
  bool ReportLinkHealth(const std::string& link_id, HealthSignal signal);
  bool ReportLinkHealth(const std::string& a, const std::string& b, HealthSignal signal);
  // Applies the signal to every link of the NIC with this address (carrier loss on eth0).
  bool ReportInterfaceHealth(const std::string& ip, HealthSignal signal);
  // Processes recoveries whose stable period has elapsed; returns true if any link came back.
  bool Tick();

  // Ranks all pairs among these endpoints for the given SLA/size now, so later queries hit.
  void Precompute(const std::vector<std::string>& ips, double sla_us, uint64_t size_bytes);

  const Topology& topology() const { return topo_; }
  LinkState link_state(uint32_t link) const;
  OracleStats stats() const;

  PathOracle(Topology topology, OracleOptions options);  // use the factories
  PathOracle(const PathOracle&) = delete;
  PathOracle& operator=(const PathOracle&) = delete;

 private:
  struct CachedQuery {
    std::vector<std::string> locals;
    std::string remote;
    TopoDistances topo;
    int64_t sla_key;
    int size_class;
    std::vector<TableKey> tables;
    std::shared_ptr<const PathChoice> choice;
  };
  struct Snapshot {
    uint64_t epoch = 0;
    std::unordered_map<TableKey, std::shared_ptr<const TableEntry>, TableKeyHash> tables;
    std::unordered_map<uint64_t, std::vector<std::shared_ptr<const CachedQuery>>> queries;
  };
  static uint64_t QueryHash(const std::vector<std::string>& locals, const TopoDistances& topo,
                            const std::string& remote, int64_t sla_key, int size_class);
  // Writer side; mu_ held.
  std::shared_ptr<const TableEntry> TableLocked(Snapshot& snap, const TableKey& key);
  std::shared_ptr<const CachedQuery> BuildQueryLocked(Snapshot& snap, const std::vector<std::string>& locals,
                                                      const TopoDistances& topo, const std::string& remote,
                                                      int64_t sla_key, int size_class);
  PathOption ToOption(const RankedPath& r, std::optional<pcie::PciDistance> topo) const;
  double TopoCost(std::optional<pcie::PciDistance> d) const;
  bool ApplyTransitionsLocked(const std::vector<HealthTransition>& transitions);

  Topology topo_;
  OracleOptions options_;
  SteadyClock steady_;
  mutable std::mutex mu_;
  PathRanker ranker_;           // mu_
  LinkHealthTracker health_;    // mu_
  std::vector<uint64_t> bad_since_epoch_;  // mu_: epoch at which a link left the up state
  OracleStats stats_;           // mu_
  std::atomic<std::shared_ptr<const Snapshot>> snapshot_;
};

// FNV-1a over the hop ids, separated so "a","bc" and "ab","c" differ.
uint32_t PathId(const std::vector<std::string>& hops);

}  // namespace ff::pathctl
