// Fabric graph model: nodes (GPUs, NICs, hosts, switches), bidirectional links with their
// health attributes, and how the fabric hashes flows onto paths (path entropy).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ff::pathctl {

enum class NodeKind : uint8_t { kGpu, kNic, kHost, kLeaf, kSpine, kCore, kNvSwitch };
enum class LinkState : uint8_t { kUp, kDegraded, kDown };

// Canonical JSON names ("leaf", "core", ...); ParseNodeKind also accepts the aliases tor and top.
std::string_view NodeKindName(NodeKind kind);
std::optional<NodeKind> ParseNodeKind(std::string_view name);
std::string_view LinkStateName(LinkState state);
std::optional<LinkState> ParseLinkState(std::string_view name);

// Switches forward traffic; GPUs, NICs and hosts only start or end a path.
inline bool IsSwitch(NodeKind k) {
  return k == NodeKind::kLeaf || k == NodeKind::kSpine || k == NodeKind::kCore || k == NodeKind::kNvSwitch;
}

struct Node {
  std::string id;
  NodeKind kind = NodeKind::kHost;
  std::string host;    // owning host id, for GPUs and NICs
  std::string ip;      // NIC address, used to map interfaces to graph endpoints
  std::string ifname;  // NIC interface name
  int rail = -1;       // rail index in rail-optimised fabrics, -1 when none
};

struct Link {
  std::string id;  // defaults to "<a>~<b>"
  uint32_t a = 0;  // node indices
  uint32_t b = 0;
  double capacity_gbps = 100.0;
  double latency_us = 1.0;
  double utilization = 0.0;                 // fraction of capacity in use, [0,1]
  uint64_t free_buffer_bytes = 16u << 20;   // free switch buffer on this hop
  double fec_error_rate = 0.0;              // pre-FEC symbol error rate
  LinkState state = LinkState::kUp;

  uint32_t Other(uint32_t n) const { return n == a ? b : a; }
  double AvailableGbps() const { return capacity_gbps * (1.0 - utilization); }
};

// How the fabric spreads flows: either a source-port range per spine (the emulator's policy
// routing), or a linear hash (port - base) mod N over an ordered list of switches.
struct EntropyRange {
  uint16_t lo = 0;
  uint16_t hi = 0;
  std::string via;  // switch id that traffic in [lo,hi] crosses
};
struct EntropySpec {
  enum class Kind : uint8_t { kNone, kSportRanges, kLinearHash };
  Kind kind = Kind::kNone;
  std::vector<EntropyRange> ranges;  // kSportRanges
  uint16_t base = 49152;             // kLinearHash
  std::vector<std::string> vias;     // kLinearHash, index = (port - base) mod vias.size()
};

struct Arc {
  uint32_t to;
  uint32_t link;
};

// Immutable once Finalize() ran; adjacency is a compressed array so searches touch
// contiguous memory.
class Topology {
 public:
  // Both return false and set *error when the id is a duplicate / an endpoint is unknown.
  bool AddNode(Node node, std::string* error);
  bool AddLink(Link link, std::string* error);
  // Builds adjacency; call after the last Add.
  void Finalize();

  std::span<const Node> nodes() const { return nodes_; }
  std::span<const Link> links() const { return links_; }
  const Node& node(uint32_t i) const { return nodes_[i]; }
  const Link& link(uint32_t i) const { return links_[i]; }
  std::span<const Arc> Neighbors(uint32_t n) const {
    return {arcs_.data() + offsets_[n], arcs_.data() + offsets_[n + 1]};
  }

  std::optional<uint32_t> FindNode(std::string_view id) const;
  std::optional<uint32_t> FindNicByIp(std::string_view ip) const;
  std::optional<uint32_t> FindLink(std::string_view id) const;
  std::optional<uint32_t> FindLink(std::string_view a, std::string_view b) const;

  EntropySpec entropy;
  std::string name;

 private:
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<uint32_t> offsets_;
  std::vector<Arc> arcs_;
  std::unordered_map<std::string, uint32_t> node_index_;
  std::unordered_map<std::string, uint32_t> ip_index_;
  std::unordered_map<std::string, uint32_t> link_index_;
};

}  // namespace ff::pathctl
