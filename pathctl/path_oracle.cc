// Path oracle: snapshot publication, query derivation from backup tables, health updates.
#include "pathctl/path_oracle.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "pathctl/topology_json.h"

namespace ff::pathctl {

uint32_t PathId(const std::vector<std::string>& hops) {
  uint32_t h = 2166136261u;
  for (const std::string& s : hops) {
    for (unsigned char c : s) h = (h ^ c) * 16777619u;
    h = (h ^ 0xFFu) * 16777619u;
  }
  return h;
}

PathOracle::PathOracle(Topology topology, OracleOptions options)
    : topo_(std::move(topology)),
      options_(options),
      ranker_(topo_, options_.policy),
      health_(topo_.links().size(), options_.clock ? *options_.clock : steady_, options_.health),
      bad_since_epoch_(topo_.links().size(), 0) {
  snapshot_.store(std::make_shared<const Snapshot>());
}

std::shared_ptr<PathOracle> PathOracle::FromTopology(Topology topology, OracleOptions options) {
  auto oracle = std::make_shared<PathOracle>(std::move(topology), options);
  std::vector<std::string> ips;
  for (const Node& n : oracle->topo_.nodes())
    if (n.kind == NodeKind::kNic && !n.ip.empty()) ips.push_back(n.ip);
  if (!ips.empty() && ips.size() <= options.precompute_max_nics) oracle->Precompute(ips, 0, 0);
  return oracle;
}

std::shared_ptr<PathOracle> PathOracle::FromInterfaces(const std::vector<std::string>& local_ips,
                                                       const std::vector<std::string>& remote_ips,
                                                       OracleOptions options) {
  Topology t;
  t.name = "embedded-default";
  std::string err;
  t.AddNode({"local", NodeKind::kHost, "", "", "", -1}, &err);
  t.AddNode({"remote", NodeKind::kHost, "", "", "", -1}, &err);
  t.AddNode({"fabric0", NodeKind::kLeaf, "", "", "", -1}, &err);
  auto add_nics = [&](const std::vector<std::string>& ips, const char* host) {
    for (const std::string& ip : ips) {
      // An address listed twice (or on both sides) keeps its first node.
      if (!t.AddNode({std::string(host) + "-" + ip, NodeKind::kNic, host, ip, "", -1}, &err)) continue;
      Link l;
      l.a = static_cast<uint32_t>(t.nodes().size() - 1);
      l.b = 2;
      t.AddLink(std::move(l), &err);
    }
  };
  add_nics(local_ips, "local");
  add_nics(remote_ips, "remote");
  t.Finalize();
  return FromTopology(std::move(t), options);
}

std::shared_ptr<PathOracle> PathOracle::FromEnvironment(const std::vector<std::string>& local_ips,
                                                        const std::vector<std::string>& remote_ips, std::string* note,
                                                        OracleOptions options) {
  const char* path = std::getenv("FLEXIFORCE_TOPOLOGY");
  if (path && *path) {
    std::string err;
    if (auto t = LoadTopologyFile(path, &err)) return FromTopology(std::move(*t), options);
    if (note) *note = "FLEXIFORCE_TOPOLOGY: " + err + "; using the embedded default graph";
  }
  return FromInterfaces(local_ips, remote_ips, options);
}

uint64_t PathOracle::QueryHash(const std::vector<std::string>& locals, const TopoDistances& topo,
                               const std::string& remote, int64_t sla_key, int size_class) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0x1F) * 1099511628211ull;
  };
  for (const std::string& l : locals) mix(l);
  for (const auto& d : topo) h = (h ^ (d ? static_cast<uint64_t>(*d) + 1 : 0)) * 1099511628211ull;
  mix(remote);
  h = (h ^ static_cast<uint64_t>(sla_key)) * 1099511628211ull;
  h = (h ^ static_cast<uint64_t>(size_class)) * 1099511628211ull;
  return h;
}

std::shared_ptr<const PathChoice> PathOracle::Query(const std::vector<std::string>& local_ips,
                                                    const std::string& remote_ip, double sla_us, uint64_t size_bytes) {
  return Query(local_ips, remote_ip, sla_us, size_bytes, TopoDistances{});
}

std::shared_ptr<const PathChoice> PathOracle::Query(const std::vector<std::string>& local_ips,
                                                    const std::string& remote_ip, double sla_us, uint64_t size_bytes,
                                                    const TopoDistances& topo_distance) {
  const int64_t sla_key = SlaKey(sla_us);
  const int size_class = SizeClass(size_bytes);
  // Trailing unknowns say nothing: "{PIX, unknown}" and "{PIX}" are one query.
  TopoDistances topo(topo_distance.begin(),
                     topo_distance.begin() + static_cast<std::ptrdiff_t>(std::min(topo_distance.size(), local_ips.size())));
  while (!topo.empty() && !topo.back()) topo.pop_back();
  const uint64_t h = QueryHash(local_ips, topo, remote_ip, sla_key, size_class);
  auto find = [&](const Snapshot& s) -> std::shared_ptr<const PathChoice> {
    auto it = s.queries.find(h);
    if (it == s.queries.end()) return nullptr;
    for (const auto& q : it->second)
      if (q->sla_key == sla_key && q->size_class == size_class && q->remote == remote_ip && q->locals == local_ips &&
          q->topo == topo)
        return q->choice;
    return nullptr;
  };
  {
    std::shared_ptr<const Snapshot> snap = snapshot_.load(std::memory_order_acquire);
    if (auto c = find(*snap)) return c;
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<const Snapshot> current = snapshot_.load(std::memory_order_acquire);
  if (auto c = find(*current)) return c;  // another thread published it meanwhile
  auto next = std::make_shared<Snapshot>(*current);
  auto q = BuildQueryLocked(*next, local_ips, topo, remote_ip, sla_key, size_class);
  next->queries[h].push_back(q);
  ++stats_.snapshots_published;
  snapshot_.store(std::move(next), std::memory_order_release);
  return q->choice;
}

std::shared_ptr<const TableEntry> PathOracle::TableLocked(Snapshot& snap, const TableKey& key) {
  auto it = snap.tables.find(key);
  if (it != snap.tables.end()) return it->second;
  auto e = ComputeEntry(ranker_, key, snap.epoch);
  ++stats_.tables_computed;
  snap.tables.emplace(key, e);
  return e;
}

double PathOracle::TopoCost(std::optional<pcie::PciDistance> d) const {
  if (!d) return 0;
  const auto i = static_cast<size_t>(*d);
  const auto& cost = options_.policy.topo_distance_cost_us;
  return i < std::size(cost) ? cost[i] : cost[std::size(cost) - 1];
}

PathOption PathOracle::ToOption(const RankedPath& r, std::optional<pcie::PciDistance> topo) const {
  PathOption o;
  o.topo_distance = topo;
  const auto& nodes = r.path.nodes;
  o.local_ip = topo_.node(nodes.front()).ip;
  o.remote_ip = topo_.node(nodes.back()).ip;
  o.sport_lo = r.entropy.sport_lo;
  o.sport_hi = r.entropy.sport_hi;
  o.latency_us = r.latency_us;
  o.score = r.score;
  o.feasible = r.feasible;
  for (uint32_t n : nodes) o.hops.push_back(topo_.node(n).id);
  o.links = r.path.links;
  o.path_id = PathId(o.hops);
  return o;
}

std::shared_ptr<const PathOracle::CachedQuery> PathOracle::BuildQueryLocked(Snapshot& snap,
                                                                           const std::vector<std::string>& locals,
                                                                           const TopoDistances& topo,
                                                                           const std::string& remote,
                                                                           int64_t sla_key, int size_class) {
  ++stats_.queries_computed;
  auto q = std::make_shared<CachedQuery>();
  q->locals = locals;
  q->topo = topo;
  q->remote = remote;
  q->sla_key = sla_key;
  q->size_class = size_class;
  auto choice = std::make_shared<PathChoice>();
  choice->level = static_cast<int>(LevelForSla(SlaFromKey(sla_key), options_.policy));
  choice->local_ip = locals.empty() ? std::string() : locals.front();
  choice->remote_ip = remote;

  std::vector<std::shared_ptr<const TableEntry>> entries;
  std::vector<std::optional<pcie::PciDistance>> entry_topo;  // of each entry's local NIC
  auto dst = topo_.FindNicByIp(remote);
  if (dst) {
    for (size_t i = 0; i < locals.size(); ++i) {
      auto src = topo_.FindNicByIp(locals[i]);
      if (!src || *src == *dst) continue;
      TableKey key{*src, *dst, sla_key, size_class};
      q->tables.push_back(key);
      entries.push_back(TableLocked(snap, key));
      entry_topo.push_back(i < topo.size() ? topo[i] : std::nullopt);
    }
  }
  // The cached rankings are per NIC pair, independent of the GPU; its distance to each local NIC
  // is added here, on copies, before the primary and backups are picked.
  std::vector<RankedPath> scored;
  std::vector<std::optional<pcie::PciDistance>> scored_topo;
  for (size_t e = 0; e < entries.size(); ++e) {
    for (const RankedPath& r : entries[e]->ranking.paths) {
      scored.push_back(r);
      scored.back().score += TopoCost(entry_topo[e]);
      scored_topo.push_back(entry_topo[e]);
    }
  }
  std::vector<const RankedPath*> candidates;
  for (const RankedPath& r : scored) candidates.push_back(&r);
  std::vector<size_t> pick = SelectPrimaryAndBackups(candidates, options_.policy.backups);
  if (!pick.empty()) {
    static_cast<PathOption&>(*choice) = ToOption(scored[pick[0]], scored_topo[pick[0]]);
    choice->routed = true;
    choice->sla_attainable = scored[pick[0]].feasible;
    for (size_t i = 1; i < pick.size(); ++i) choice->backups.push_back(ToOption(scored[pick[i]], scored_topo[pick[i]]));
  }
  if (!choice->sla_attainable) ++stats_.unattainable;
  q->choice = std::move(choice);
  return q;
}

bool PathOracle::ApplyTransitionsLocked(const std::vector<HealthTransition>& transitions) {
  if (transitions.empty()) return false;
  std::shared_ptr<const Snapshot> current = snapshot_.load(std::memory_order_acquire);
  auto next = std::make_shared<Snapshot>(*current);
  ++next->epoch;
  std::vector<TableKey> affected;
  for (const HealthTransition& t : transitions) {
    ++stats_.health_transitions;
    ranker_.SetLinkState(t.link, t.to);
    const bool was_bad = t.from != LinkState::kUp;
    for (const auto& [key, entry] : next->tables) {
      // Affected: the entry's candidates use the link, or it was ranked while the link was out
      // of service (so a recovered link may now give it a better path).
      bool uses = std::binary_search(entry->links.begin(), entry->links.end(), t.link);
      if (uses || (was_bad && entry->computed_epoch >= bad_since_epoch_[t.link])) affected.push_back(key);
    }
    if (!was_bad) bad_since_epoch_[t.link] = next->epoch;
  }
  std::sort(affected.begin(), affected.end(), [](const TableKey& a, const TableKey& b) {
    return std::tie(a.src, a.dst, a.sla_key, a.size_class) < std::tie(b.src, b.dst, b.sla_key, b.size_class);
  });
  affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
  for (const TableKey& key : affected) {
    next->tables[key] = ComputeEntry(ranker_, key, next->epoch);
    ++stats_.tables_computed;
  }
  // Re-derive only the cached answers built from a recomputed entry.
  for (auto& [hash, list] : next->queries) {
    for (auto& q : list) {
      bool hit = std::any_of(q->tables.begin(), q->tables.end(), [&](const TableKey& k) {
        return std::find(affected.begin(), affected.end(), k) != affected.end();
      });
      if (hit) q = BuildQueryLocked(*next, q->locals, q->topo, q->remote, q->sla_key, q->size_class);
    }
  }
  ++stats_.snapshots_published;
  snapshot_.store(std::move(next), std::memory_order_release);
  return true;
}

bool PathOracle::ReportLinkHealth(uint32_t link, HealthSignal signal) {
  if (link >= topo_.links().size()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<HealthTransition> ts;
  if (auto t = health_.Report(link, signal)) ts.push_back(*t);
  for (const auto& t : health_.Tick()) ts.push_back(t);
  bool changed = std::any_of(ts.begin(), ts.end(), [link](const HealthTransition& t) { return t.link == link; });
  ApplyTransitionsLocked(ts);
  return changed;
}

bool PathOracle::ReportLinkHealth(const std::string& link_id, HealthSignal signal) {
  auto l = topo_.FindLink(link_id);
  return l && ReportLinkHealth(*l, signal);
}

bool PathOracle::ReportLinkHealth(const std::string& a, const std::string& b, HealthSignal signal) {
  auto l = topo_.FindLink(a, b);
  return l && ReportLinkHealth(*l, signal);
}

bool PathOracle::ReportInterfaceHealth(const std::string& ip, HealthSignal signal) {
  auto n = topo_.FindNicByIp(ip);
  if (!n) return false;
  bool changed = false;
  for (const Arc& arc : topo_.Neighbors(*n)) changed = ReportLinkHealth(arc.link, signal) || changed;
  return changed;
}

bool PathOracle::Tick() {
  std::lock_guard<std::mutex> lock(mu_);
  return ApplyTransitionsLocked(health_.Tick());
}

void PathOracle::Precompute(const std::vector<std::string>& ips, double sla_us, uint64_t size_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto next = std::make_shared<Snapshot>(*snapshot_.load(std::memory_order_acquire));
  const int64_t sla_key = SlaKey(sla_us);
  const int size_class = SizeClass(size_bytes);
  // Destination-major, so the ranker's per-destination reverse tree serves every source.
  for (const std::string& b : ips) {
    auto dst = topo_.FindNicByIp(b);
    if (!dst) continue;
    for (const std::string& a : ips) {
      auto src = topo_.FindNicByIp(a);
      if (src && *dst != *src) TableLocked(*next, {*src, *dst, sla_key, size_class});
    }
  }
  ++stats_.snapshots_published;
  snapshot_.store(std::move(next), std::memory_order_release);
}

LinkState PathOracle::link_state(uint32_t link) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ranker_.link_state(link);
}

OracleStats PathOracle::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<uint32_t> FabricLinks(const Topology& topology, const std::vector<uint32_t>& links) {
  std::vector<uint32_t> out;
  const auto nodes = topology.nodes();
  const auto all = topology.links();
  for (uint32_t l : links) {
    if (l >= all.size()) continue;
    const Link& k = all[l];
    if (k.a < nodes.size() && k.b < nodes.size() && IsSwitch(nodes[k.a].kind) && IsSwitch(nodes[k.b].kind))
      out.push_back(l);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace ff::pathctl
