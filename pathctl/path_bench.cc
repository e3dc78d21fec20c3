// `flexiforce path bench`: times Yen's search, full ranking and cached lookups on generated
// fabrics, runs networkx on the same queries, and checks that the path sets agree.
#include "pathctl/path_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "pathctl/k_shortest_paths.h"
#include "pathctl/path_oracle.h"
#include "pathctl/path_ranker.h"
#include "pathctl/topology_generators.h"
#include "pathctl/topology_json.h"

#ifndef FF_PATHCTL_NETWORKX_SCRIPT
#define FF_PATHCTL_NETWORKX_SCRIPT "pathctl/bench_networkx.py"
#endif

namespace ff::pathctl {

namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Case {
  std::string name;
  Topology topo;
};

struct Row {
  std::string name;
  size_t nodes = 0, links = 0, queries = 0, nx_queries = 0;
  double ksp_us = 0, rank_us = 0, rank_sla_us = 0, lookup_ns = 0, nx_ms = 0, speedup = 0;
  size_t identical_costs = 0, identical_paths = 0;
  std::string nx_error;
};

std::vector<std::pair<uint32_t, uint32_t>> PickQueries(const Topology& t, size_t n) {
  std::vector<uint32_t> nics;
  for (uint32_t i = 0; i < t.nodes().size(); ++i)
    if (t.node(i).kind == NodeKind::kNic) nics.push_back(i);
  std::mt19937 rng(7);
  std::vector<std::pair<uint32_t, uint32_t>> q;
  while (q.size() < n && nics.size() >= 2) {
    uint32_t a = nics[rng() % nics.size()], b = nics[rng() % nics.size()];
    if (a != b) q.emplace_back(a, b);
  }
  return q;
}

std::string TempPath(const char* what) {
  return "/tmp/ff-path-bench-" + std::to_string(getpid()) + "-" + what + ".json";
}

// Runs networkx on the first nx_count queries; fills row and per-query path sets.
bool RunNetworkx(const BenchOptions& o, const Topology& t, const std::vector<std::pair<uint32_t, uint32_t>>& queries,
                 size_t nx_count, nlohmann::json* result, std::string* error) {
  std::string topo_file = TempPath("topo"), query_file = TempPath("queries"), out_file = TempPath("out");
  {
    std::ofstream f(topo_file);
    f << TopologyToJson(t, -1);
    nlohmann::json q = {{"k", o.k}, {"queries", nlohmann::json::array()}};
    for (size_t i = 0; i < nx_count; ++i)
      q["queries"].push_back({t.node(queries[i].first).id, t.node(queries[i].second).id});
    std::ofstream g(query_file);
    g << q.dump();
  }
  std::string script = o.networkx_script.empty() ? FF_PATHCTL_NETWORKX_SCRIPT : o.networkx_script;
  std::string cmd = o.python + " '" + script + "' '" + topo_file + "' '" + query_file + "' > '" + out_file + "'";
  int rc = std::system(cmd.c_str());
  std::ifstream in(out_file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(topo_file.c_str());
  std::remove(query_file.c_str());
  std::remove(out_file.c_str());
  if (rc != 0) {
    *error = "networkx side failed (exit " + std::to_string(rc) + "): " + cmd;
    return false;
  }
  try {
    *result = nlohmann::json::parse(ss.str());
  } catch (const std::exception& e) {
    *error = std::string("networkx output unreadable: ") + e.what();
    return false;
  }
  return true;
}

bool SameCosts(std::vector<double> a, std::vector<double> b) {
  if (a.size() != b.size()) return false;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  for (size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > 1e-9 * std::max(1.0, std::fabs(a[i]))) return false;
  return true;
}

Row RunCase(const BenchOptions& o, Case& c) {
  Row row;
  row.name = c.name;
  const Topology& t = c.topo;
  row.nodes = t.nodes().size();
  row.links = t.links().size();
  auto queries = PickQueries(t, o.queries);
  row.queries = queries.size();

  std::vector<double> weight(t.links().size());
  for (uint32_t l = 0; l < t.links().size(); ++l) weight[l] = t.link(l).latency_us;
  std::vector<uint8_t> transit(t.nodes().size());
  for (uint32_t n = 0; n < t.nodes().size(); ++n) transit[n] = IsSwitch(t.node(n).kind);

  KShortestPaths ksp(t);
  std::vector<std::vector<Path>> ours;
  std::vector<double> ksp_us, rank_us, rank_sla_us;
  for (const auto& [s, d] : queries) {
    auto t0 = Clock::now();
    ours.push_back(ksp.Find(s, d, o.k, weight, transit));
    ksp_us.push_back(Micros(Clock::now() - t0));
  }
  Policy policy;
  policy.k = o.k;
  PathRanker ranker(t, policy);
  for (const auto& [s, d] : queries) {
    auto t0 = Clock::now();
    Ranking r = ranker.Rank(s, d, 0, 1 << 20);
    rank_us.push_back(Micros(Clock::now() - t0));
    t0 = Clock::now();
    Ranking r2 = ranker.Rank(s, d, 80, 1 << 20);  // Level 2: excludes the core tier
    rank_sla_us.push_back(Micros(Clock::now() - t0));
    if (r.paths.empty() && r2.paths.empty()) std::fprintf(stderr, "bench: no path for a query\n");
  }
  row.ksp_us = Median(ksp_us);
  row.rank_us = Median(rank_us);
  row.rank_sla_us = Median(rank_sla_us);

  // Cached lookup: one miss, then repeated hits on the published snapshot.
  OracleOptions oo;
  oo.policy = policy;
  oo.precompute_max_nics = 0;
  auto oracle = PathOracle::FromTopology(c.topo, oo);
  std::vector<std::string> local{t.node(queries[0].first).ip};
  std::string remote = t.node(queries[0].second).ip;
  oracle->Query(local, remote, 80, 1 << 20);
  const int iters = 200000;
  size_t sink = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) sink += oracle->Query(local, remote, 80, 1 << 20)->path_id & 1;
  row.lookup_ns = Micros(Clock::now() - t0) * 1000.0 / iters + static_cast<double>(sink & 0);

  if (o.networkx && o.networkx_queries > 0) {
    size_t nx_count = std::min(o.networkx_queries, queries.size());
    nlohmann::json nx;
    if (RunNetworkx(o, t, queries, nx_count, &nx, &row.nx_error)) {
      std::vector<double> nx_us, our_us;
      const auto& results = nx["results"];
      for (size_t i = 0; i < results.size() && i < nx_count; ++i) {
        nx_us.push_back(results[i]["seconds"].get<double>() * 1e6);
        our_us.push_back(ksp_us[i]);
        std::vector<double> our_costs, nx_costs = results[i]["costs"].get<std::vector<double>>();
        std::set<std::vector<std::string>> our_paths, nx_paths;
        for (const Path& p : ours[i]) {
          our_costs.push_back(p.cost);
          std::vector<std::string> ids;
          for (uint32_t n : p.nodes) ids.push_back(t.node(n).id);
          our_paths.insert(ids);
        }
        for (const auto& p : results[i]["paths"]) nx_paths.insert(p.get<std::vector<std::string>>());
        row.identical_costs += SameCosts(our_costs, nx_costs);
        row.identical_paths += our_paths == nx_paths;
      }
      row.nx_queries = nx_us.size();
      row.nx_ms = Median(nx_us) / 1000.0;
      double ours_sum = 0, nx_sum = 0;
      for (double v : our_us) ours_sum += v;
      for (double v : nx_us) nx_sum += v;
      row.speedup = ours_sum > 0 ? nx_sum / ours_sum : 0;
    }
  }
  return row;
}

}  // namespace

int RunPathBench(const BenchOptions& o) {
  std::vector<Case> cases;
  LinkDefaults jitter;
  jitter.latency_jitter = 0.5;  // distinct path costs, so both sides must find the same paths
  LeafSpineSpec ls;
  ls.leaves = 16;
  ls.spines = 8;
  ls.hosts_per_leaf = 6;
  ls.link = jitter;
  cases.push_back({"leaf-spine 16x8x6 (216 nodes)", GenerateLeafSpine(ls)});
  FatTreeSpec ft;
  ft.k = o.fat_tree_k;
  ft.link = jitter;
  const int hosts = ft.k * ft.k * ft.k / 4;
  cases.push_back({"fat-tree k=" + std::to_string(ft.k) + " (" + std::to_string(hosts) + " hosts)", GenerateFatTree(ft)});

  std::vector<Row> rows;
  for (Case& c : cases) rows.push_back(RunCase(o, c));

  bool agree = true;
  for (const Row& r : rows) agree = agree && r.identical_costs == r.nx_queries && r.nx_error.empty();
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows)
      out.push_back({{"topology", r.name},
                     {"nodes", r.nodes},
                     {"links", r.links},
                     {"k", o.k},
                     {"queries", r.queries},
                     {"ksp_median_us", r.ksp_us},
                     {"rank_median_us", r.rank_us},
                     {"rank_level2_median_us", r.rank_sla_us},
                     {"cached_lookup_ns", r.lookup_ns},
                     {"networkx_queries", r.nx_queries},
                     {"networkx_median_ms", r.nx_ms},
                     {"speedup_vs_networkx", r.speedup},
                     {"identical_cost_sets", r.identical_costs},
                     {"identical_path_sets", r.identical_paths},
                     {"networkx_error", r.nx_error}});
    std::printf("%s\n", out.dump(1).c_str());
  } else {
    std::printf("k=%zu; ours: median of %zu queries; networkx: same first %zu queries\n", o.k, o.queries,
                o.networkx ? o.networkx_queries : size_t{0});
    std::printf("%-34s %6s %6s %9s %9s %9s %10s %10s %9s %11s %11s\n", "topology", "nodes", "links", "ksp_us",
                "rank_us", "rankL2_us", "lookup_ns", "nx_ms", "speedup", "same_costs", "same_paths");
    for (const Row& r : rows) {
      std::printf("%-34s %6zu %6zu %9.1f %9.1f %9.1f %10.1f %10.2f %8.0fx %7zu/%-3zu %7zu/%-3zu\n", r.name.c_str(),
                  r.nodes, r.links, r.ksp_us, r.rank_us, r.rank_sla_us, r.lookup_ns, r.nx_ms, r.speedup,
                  r.identical_costs, r.nx_queries, r.identical_paths, r.nx_queries);
      if (!r.nx_error.empty()) std::printf("  %s\n", r.nx_error.c_str());
    }
    std::printf("same_paths may fall short of same_costs only where equal-cost paths tie at the k-th place.\n");
  }
  return agree ? 0 : 1;
}

}  // namespace ff::pathctl
