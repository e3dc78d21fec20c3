// Fabric generators; node ids and IPs follow a fixed scheme so generated files are stable.
#include "pathctl/topology_generators.h"

#include <random>
#include <stdexcept>
#include <string>

namespace ff::pathctl {

namespace {

class Builder {
 public:
  explicit Builder(const LinkDefaults& d) : defaults_(d), rng_(d.seed) {}

  uint32_t AddNode(std::string id, NodeKind kind, std::string host = {}, std::string ip = {},
                   std::string ifname = {}, int rail = -1) {
    std::string err;
    Node n{std::move(id), kind, std::move(host), std::move(ip), std::move(ifname), rail};
    if (!topo_.AddNode(std::move(n), &err)) throw std::logic_error("generator: " + err);
    return static_cast<uint32_t>(topo_.nodes().size() - 1);
  }
  void AddLink(uint32_t a, uint32_t b) {
    Link l;
    l.a = a;
    l.b = b;
    l.capacity_gbps = defaults_.capacity_gbps;
    l.latency_us = defaults_.latency_us;
    if (defaults_.latency_jitter > 0)
      l.latency_us *= 1.0 + defaults_.latency_jitter * std::uniform_real_distribution<double>(0, 1)(rng_);
    l.free_buffer_bytes = defaults_.free_buffer_bytes;
    std::string err;
    if (!topo_.AddLink(std::move(l), &err)) throw std::logic_error("generator: " + err);
  }
  // A host node plus `nics` NIC nodes; returns the first NIC's index (NICs are consecutive).
  uint32_t AddHost(const std::string& host, int nics, uint32_t ip_index, int rail_base) {
    AddNode(host, NodeKind::kHost);
    uint32_t first = 0;
    for (int r = 0; r < nics; ++r) {
      // 10.<hi>.<lo>.<nic+2>: unique for up to 65536 hosts with up to 250 NICs each.
      std::string ip = "10." + std::to_string(ip_index >> 8) + "." + std::to_string(ip_index & 255) + "." +
                       std::to_string(r + 2);
      uint32_t n = AddNode(host + "-nic" + std::to_string(r), NodeKind::kNic, host, ip, "eth" + std::to_string(r),
                           rail_base >= 0 ? r : -1);
      if (r == 0) first = n;
    }
    return first;
  }
  Topology Take(std::string name) {
    topo_.name = std::move(name);
    topo_.Finalize();
    return std::move(topo_);
  }
  Topology& topo() { return topo_; }

 private:
  LinkDefaults defaults_;
  std::mt19937_64 rng_;
  Topology topo_;
};

void Require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(what);
}

// Splits [49152, 65535] evenly so each spine owns one contiguous source-port range.
EntropySpec SpineRanges(int spines) {
  EntropySpec e;
  e.kind = EntropySpec::Kind::kSportRanges;
  const int lo = 49152, span = 65536 - lo, width = span / spines;
  for (int s = 0; s < spines; ++s) {
    int hi = s == spines - 1 ? 65535 : lo + (s + 1) * width - 1;
    e.ranges.push_back({static_cast<uint16_t>(lo + s * width), static_cast<uint16_t>(hi), "spine" + std::to_string(s)});
  }
  return e;
}

}  // namespace

Topology GenerateLeafSpine(const LeafSpineSpec& spec) {
  Require(spec.leaves >= 1 && spec.spines >= 1 && spec.hosts_per_leaf >= 1 && spec.nics_per_host >= 1,
          "leaf-spine: leaves, spines, hosts per leaf and NICs per host must all be >= 1");
  Require(spec.spines <= 16384, "leaf-spine: at most 16384 spines (one source port each)");
  Builder b(spec.link);
  std::vector<uint32_t> spines, leaves;
  for (int s = 0; s < spec.spines; ++s) spines.push_back(b.AddNode("spine" + std::to_string(s), NodeKind::kSpine));
  for (int l = 0; l < spec.leaves; ++l) leaves.push_back(b.AddNode("leaf" + std::to_string(l), NodeKind::kLeaf));
  for (uint32_t l : leaves)
    for (uint32_t s : spines) b.AddLink(l, s);
  uint32_t host_index = 0;
  for (int l = 0; l < spec.leaves; ++l) {
    for (int h = 0; h < spec.hosts_per_leaf; ++h, ++host_index) {
      uint32_t nic = b.AddHost("h" + std::to_string(host_index), spec.nics_per_host, host_index, -1);
      for (int r = 0; r < spec.nics_per_host; ++r) b.AddLink(nic + r, leaves[l]);
    }
  }
  b.topo().entropy = SpineRanges(spec.spines);
  return b.Take("leaf-spine");
}

Topology GenerateFatTree(const FatTreeSpec& spec) {
  Require(spec.k >= 2 && spec.k % 2 == 0 && spec.k <= 64, "fat-tree: k must be even, 2..64");
  const int k = spec.k, half = k / 2;
  Builder b(spec.link);
  std::vector<uint32_t> core;
  for (int i = 0; i < half * half; ++i) core.push_back(b.AddNode("core" + std::to_string(i), NodeKind::kCore));
  uint32_t host_index = 0;
  for (int p = 0; p < k; ++p) {
    std::vector<uint32_t> agg, edge;
    for (int i = 0; i < half; ++i)
      agg.push_back(b.AddNode("p" + std::to_string(p) + "-agg" + std::to_string(i), NodeKind::kSpine));
    for (int i = 0; i < half; ++i)
      edge.push_back(b.AddNode("p" + std::to_string(p) + "-edge" + std::to_string(i), NodeKind::kLeaf));
    // Aggregation switch i reaches core switches i*half .. i*half+half-1.
    for (int i = 0; i < half; ++i)
      for (int j = 0; j < half; ++j) b.AddLink(agg[i], core[i * half + j]);
    for (uint32_t e : edge)
      for (uint32_t a : agg) b.AddLink(e, a);
    for (uint32_t e : edge) {
      for (int h = 0; h < half; ++h, ++host_index) {
        uint32_t nic = b.AddHost("h" + std::to_string(host_index), 1, host_index, -1);
        b.AddLink(nic, e);
      }
    }
  }
  return b.Take("fat-tree");
}

Topology GenerateRail(const RailSpec& spec) {
  Require(spec.hosts >= 1 && spec.rails >= 1 && spec.spines >= 1 && spec.rails <= 250,
          "rail: hosts, rails (<= 250) and spines must be >= 1");
  Builder b(spec.link);
  std::vector<uint32_t> spines, rails;
  for (int s = 0; s < spec.spines; ++s) spines.push_back(b.AddNode("spine" + std::to_string(s), NodeKind::kSpine));
  for (int r = 0; r < spec.rails; ++r) rails.push_back(b.AddNode("rail" + std::to_string(r), NodeKind::kLeaf));
  for (uint32_t r : rails)
    for (uint32_t s : spines) b.AddLink(r, s);
  for (int h = 0; h < spec.hosts; ++h) {
    uint32_t nic = b.AddHost("h" + std::to_string(h), spec.rails, static_cast<uint32_t>(h), 0);
    for (int r = 0; r < spec.rails; ++r) b.AddLink(nic + r, rails[r]);
  }
  b.topo().entropy = SpineRanges(spec.spines);
  return b.Take("rail");
}

}  // namespace ff::pathctl
