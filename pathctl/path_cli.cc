// `flexiforce path`: rank paths, generate and check topology files, benchmark the oracle.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "pathctl/path_bench.h"
#include "pathctl/path_oracle.h"
#include "pathctl/path_ranker.h"
#include "pathctl/topology_generators.h"
#include "pathctl/topology_json.h"

namespace ff {

namespace {

using pathctl::Topology;

std::optional<uint32_t> Endpoint(const Topology& t, const std::string& name) {
  if (auto n = t.FindNode(name)) return n;
  return t.FindNicByIp(name);
}

int Rank(const std::string& file, const std::string& src_name, const std::string& dst_name, double sla_us, size_t k,
         uint64_t size, bool json) {
  std::string err;
  auto topo = pathctl::LoadTopologyFile(file, &err);
  if (!topo) {
    std::fprintf(stderr, "flexiforce path rank: %s\n", err.c_str());
    return 1;
  }
  auto src = Endpoint(*topo, src_name), dst = Endpoint(*topo, dst_name);
  if (!src || !dst) {
    std::fprintf(stderr, "flexiforce path rank: --%s '%s' is neither a node id nor a NIC ip in %s\n",
                 src ? "dst" : "src", (src ? dst_name : src_name).c_str(), file.c_str());
    return 2;
  }
  pathctl::Policy policy;
  policy.k = k;
  pathctl::PathRanker ranker(*topo, policy);
  pathctl::Ranking r = ranker.Rank(*src, *dst, sla_us, size);
  auto hops = [&](const pathctl::Path& p) {
    std::vector<std::string> h;
    for (uint32_t n : p.nodes) h.push_back(topo->node(n).id);
    return h;
  };
  if (json) {
    nlohmann::json out = {{"src", topo->node(*src).id},
                          {"dst", topo->node(*dst).id},
                          {"sla_us", sla_us},
                          {"size_bytes", size},
                          {"level", static_cast<int>(r.level)},
                          {"sla_attainable", r.sla_attainable}};
    nlohmann::json paths = nlohmann::json::array();
    for (const auto& p : r.paths) {
      const auto& v = p.verdicts;
      paths.push_back({{"hops", hops(p.path)},
                       {"path_id", pathctl::PathId(hops(p.path))},
                       {"latency_us", p.latency_us},
                       {"penalty", p.penalty},
                       {"score", p.score},
                       {"bottleneck_gbps", p.bottleneck_gbps},
                       {"feasible", p.feasible},
                       {"verdicts",
                        {{"hop_latency", v.hop_latency},
                         {"buffer", v.buffer},
                         {"bandwidth", v.bandwidth},
                         {"level", v.level},
                         {"healthy", v.healthy},
                         {"steerable", v.steerable}}},
                       {"sport_lo", p.entropy.sport_lo},
                       {"sport_hi", p.entropy.sport_hi}});
    }
    out["paths"] = std::move(paths);
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  std::printf("%s -> %s  sla=%s  level=%d  size=%llu  %s\n", topo->node(*src).id.c_str(), topo->node(*dst).id.c_str(),
              sla_us > 0 ? (std::to_string(sla_us) + "us").c_str() : "none", static_cast<int>(r.level),
              static_cast<unsigned long long>(size), r.sla_attainable ? "SLA attainable" : "SLA UNATTAINABLE (best effort)");
  std::printf("%-4s %-8s %12s %10s %12s %10s  %-28s %-13s %s\n", "rank", "feasible", "score", "latency", "penalty",
              "bw_gbps", "verdicts(lat,buf,bw,lvl,ok,ent)", "sports", "hops");
  int i = 0;
  for (const auto& p : r.paths) {
    const auto& v = p.verdicts;
    std::string verd;
    for (bool b : {v.hop_latency, v.buffer, v.bandwidth, v.level, v.healthy, v.steerable}) verd += b ? "Y" : "n";
    std::string sports = p.entropy.sport_hi ? std::to_string(p.entropy.sport_lo) + "-" + std::to_string(p.entropy.sport_hi)
                                            : std::string("any");
    std::string hs;
    for (const auto& h : hops(p.path)) hs += (hs.empty() ? "" : " > ") + h;
    std::printf("%-4d %-8s %12.2f %10.2f %12.2f %10.1f  %-28s %-13s %s\n", ++i, p.feasible ? "yes" : "no", p.score,
                p.latency_us, p.penalty, p.bottleneck_gbps, verd.c_str(), sports.c_str(), hs.c_str());
  }
  if (r.paths.empty()) std::printf("(no path)\n");
  return r.paths.empty() ? 3 : 0;
}

int Check(const std::string& file, bool json) {
  std::string err;
  std::vector<std::string> warnings;
  auto topo = pathctl::LoadTopologyFile(file, &err, &warnings);
  if (!topo) {
    if (json)
      std::printf("%s\n", nlohmann::json({{"file", file}, {"ok", false}, {"error", err}}).dump(1).c_str());
    else
      std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  std::map<std::string, int> kinds;
  for (const auto& n : topo->nodes()) ++kinds[std::string(pathctl::NodeKindName(n.kind))];
  std::map<std::string, int> states;
  for (const auto& l : topo->links()) ++states[std::string(pathctl::LinkStateName(l.state))];
  const char* ek = topo->entropy.kind == pathctl::EntropySpec::Kind::kSportRanges ? "sport-ranges"
                   : topo->entropy.kind == pathctl::EntropySpec::Kind::kLinearHash ? "linear-hash"
                                                                                   : "none";
  if (json) {
    std::printf("%s\n", nlohmann::json({{"file", file},
                                        {"ok", true},
                                        {"nodes", topo->nodes().size()},
                                        {"links", topo->links().size()},
                                        {"kinds", kinds},
                                        {"link_states", states},
                                        {"entropy", ek},
                                        {"warnings", warnings}})
                            .dump(1)
                            .c_str());
    return 0;
  }
  std::printf("%s: ok, %zu nodes, %zu links, entropy %s\n", file.c_str(), topo->nodes().size(), topo->links().size(), ek);
  for (const auto& [k, c] : kinds) std::printf("  %-9s %d\n", k.c_str(), c);
  for (const auto& [s, c] : states) std::printf("  links %-8s %d\n", s.c_str(), c);
  for (const auto& w : warnings) std::printf("  warning: %s\n", w.c_str());
  return 0;
}

int WriteTopology(const Topology& t, const std::string& out) {
  std::string text = pathctl::TopologyToJson(t) + "\n";
  if (out == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::ofstream f(out);
  if (!f || !(f << text)) {
    std::fprintf(stderr, "flexiforce path gen: cannot write '%s'\n", out.c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s: %zu nodes, %zu links\n", out.c_str(), t.nodes().size(), t.links().size());
  return 0;
}

}  // namespace

int RunPathCommand(int argc, char** argv) {
  CLI::App app{"Fabric graphs, SLA-aware path ranking, topology generators and the oracle benchmark."};
  app.name("flexiforce path");
  app.require_subcommand(1);

  auto* rank = app.add_subcommand("rank", "rank the k shortest paths between two endpoints under an SLA");
  std::string topo_file, src, dst;
  double sla_us = 0;
  size_t k = 5;
  uint64_t size = 0;
  bool json = false;
  rank->add_option("--topology", topo_file, "topology JSON file (see pathctl/TOPOLOGY.md)")->required();
  rank->add_option("--src", src, "source node id or NIC ip")->required();
  rank->add_option("--dst", dst, "destination node id or NIC ip")->required();
  rank->add_option("--sla-us", sla_us, "latency SLA in microseconds; 0 = none (Level 3)")->check(CLI::NonNegativeNumber);
  rank->add_option("--k", k, "candidate paths to rank")->check(CLI::Range(1, 1000));
  rank->add_option("--size", size, "message size in bytes, for the bandwidth constraint; 0 = none");
  rank->add_flag("--json", json, "print JSON");

  auto* gen = app.add_subcommand("gen", "generate a topology file");
  gen->require_subcommand(1);
  std::string out = "-";
  pathctl::LinkDefaults link;
  auto add_common = [&](CLI::App* c) {
    c->add_option("-o,--output", out, "output file ('-' = stdout)");
    c->add_option("--capacity-gbps", link.capacity_gbps, "link capacity")->check(CLI::PositiveNumber);
    c->add_option("--latency-us", link.latency_us, "per-link latency")->check(CLI::PositiveNumber);
    c->add_option("--free-buffer-bytes", link.free_buffer_bytes, "free buffer per link");
    c->add_option("--jitter", link.latency_jitter, "random extra latency fraction per link, 0..10")->check(CLI::Range(0.0, 10.0));
    c->add_option("--seed", link.seed, "seed for --jitter");
  };
  pathctl::LeafSpineSpec ls;
  auto* g_ls = gen->add_subcommand("leaf-spine", "two-tier leaf-spine, sport-range entropy per spine");
  g_ls->add_option("--leaves", ls.leaves, "leaf switches")->check(CLI::Range(1, 4096));
  g_ls->add_option("--spines", ls.spines, "spine switches")->check(CLI::Range(1, 4096));
  g_ls->add_option("--hosts-per-leaf", ls.hosts_per_leaf, "hosts under each leaf")->check(CLI::Range(1, 4096));
  g_ls->add_option("--nics-per-host", ls.nics_per_host, "NICs per host")->check(CLI::Range(1, 64));
  add_common(g_ls);
  pathctl::FatTreeSpec ft;
  auto* g_ft = gen->add_subcommand("fat-tree", "three-tier k-ary fat tree (k^3/4 hosts)");
  g_ft->add_option("--k", ft.k, "pod count, even, 2..64")->check(CLI::Range(2, 64));
  add_common(g_ft);
  pathctl::RailSpec rs;
  auto* g_rail = gen->add_subcommand("rail", "rail-optimised: NIC r of every host on rail switch r");
  g_rail->add_option("--hosts", rs.hosts, "hosts")->check(CLI::Range(1, 65536));
  g_rail->add_option("--rails", rs.rails, "rails (NICs per host)")->check(CLI::Range(1, 250));
  g_rail->add_option("--spines", rs.spines, "spine switches")->check(CLI::Range(1, 4096));
  add_common(g_rail);

  auto* check = app.add_subcommand("check", "validate a topology file and summarise it");
  std::string check_file;
  check->add_option("file", check_file, "topology JSON file")->required();
  check->add_flag("--json", json, "print JSON");

  auto* bench = app.add_subcommand("bench", "time ranking and cached lookups against networkx, same queries");
  pathctl::BenchOptions bo;
  bench->add_option("--k", bo.k, "paths per query")->check(CLI::Range(1, 100));
  bench->add_option("--queries", bo.queries, "queries per topology (ours)")->check(CLI::Range(1, 100000));
  bench->add_option("--networkx-queries", bo.networkx_queries, "queries per topology also run by networkx")
      ->check(CLI::Range(0, 1000));
  bench->add_option("--fat-tree-k", bo.fat_tree_k, "fat tree size (32 = 8192 hosts)")->check(CLI::Range(4, 64));
  bench->add_flag("!--no-networkx", bo.networkx, "skip the networkx side");
  bench->add_option("--python", bo.python, "python with networkx");
  bench->add_option("--networkx-script", bo.networkx_script, "path of bench_networkx.py");
  bench->add_flag("--json", bo.json, "print JSON");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (rank->parsed()) return Rank(topo_file, src, dst, sla_us, k, size, json);
    if (check->parsed()) return Check(check_file, json);
    if (bench->parsed()) return pathctl::RunPathBench(bo);
    if (g_ls->parsed()) {
      ls.link = link;
      return WriteTopology(pathctl::GenerateLeafSpine(ls), out);
    }
    if (g_ft->parsed()) {
      ft.link = link;
      return WriteTopology(pathctl::GenerateFatTree(ft), out);
    }
    if (g_rail->parsed()) {
      rs.link = link;
      return WriteTopology(pathctl::GenerateRail(rs), out);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flexiforce path: %s\n", e.what());
    return 1;
  }
  return 2;
}

}  // namespace ff
