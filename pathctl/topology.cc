// Fabric graph model: node/link registry and the compressed adjacency arrays.
#include "pathctl/topology.h"

#include <array>

namespace ff::pathctl {

namespace {
struct KindName {
  std::string_view name;
  NodeKind kind;
};
constexpr std::array<KindName, 9> kKindNames = {{{"gpu", NodeKind::kGpu},
                                                 {"nic", NodeKind::kNic},
                                                 {"host", NodeKind::kHost},
                                                 {"leaf", NodeKind::kLeaf},
                                                 {"spine", NodeKind::kSpine},
                                                 {"core", NodeKind::kCore},
                                                 {"nvswitch", NodeKind::kNvSwitch},
                                                 {"tor", NodeKind::kLeaf},
                                                 {"top", NodeKind::kCore}}};
}  // namespace

std::string_view NodeKindName(NodeKind kind) {
  for (const auto& k : kKindNames)
    if (k.kind == kind) return k.name;
  return "?";
}

std::optional<NodeKind> ParseNodeKind(std::string_view name) {
  for (const auto& k : kKindNames)
    if (k.name == name) return k.kind;
  return std::nullopt;
}

std::string_view LinkStateName(LinkState state) {
  switch (state) {
    case LinkState::kUp: return "up";
    case LinkState::kDegraded: return "degraded";
    case LinkState::kDown: return "down";
  }
  return "?";
}

std::optional<LinkState> ParseLinkState(std::string_view name) {
  if (name == "up") return LinkState::kUp;
  if (name == "degraded") return LinkState::kDegraded;
  if (name == "down") return LinkState::kDown;
  return std::nullopt;
}

bool Topology::AddNode(Node node, std::string* error) {
  if (node_index_.count(node.id)) {
    if (error) *error = "duplicate node id '" + node.id + "'";
    return false;
  }
  if (!node.ip.empty()) {
    if (ip_index_.count(node.ip)) {
      if (error) *error = "ip " + node.ip + " of '" + node.id + "' already belongs to another node";
      return false;
    }
    ip_index_.emplace(node.ip, static_cast<uint32_t>(nodes_.size()));
  }
  node_index_.emplace(node.id, static_cast<uint32_t>(nodes_.size()));
  nodes_.push_back(std::move(node));
  return true;
}

bool Topology::AddLink(Link link, std::string* error) {
  if (link.a >= nodes_.size() || link.b >= nodes_.size() || link.a == link.b) {
    if (error) *error = "link endpoints must be two distinct existing nodes";
    return false;
  }
  if (link.id.empty()) link.id = nodes_[link.a].id + "~" + nodes_[link.b].id;
  if (link_index_.count(link.id)) {
    if (error) *error = "duplicate link id '" + link.id + "'";
    return false;
  }
  link_index_.emplace(link.id, static_cast<uint32_t>(links_.size()));
  links_.push_back(std::move(link));
  return true;
}

void Topology::Finalize() {
  offsets_.assign(nodes_.size() + 1, 0);
  for (const auto& l : links_) {
    ++offsets_[l.a + 1];
    ++offsets_[l.b + 1];
  }
  for (size_t i = 1; i < offsets_.size(); ++i) offsets_[i] += offsets_[i - 1];
  arcs_.resize(offsets_.back());
  std::vector<uint32_t> fill(offsets_.begin(), offsets_.end() - 1);
  for (uint32_t i = 0; i < links_.size(); ++i) {
    arcs_[fill[links_[i].a]++] = {links_[i].b, i};
    arcs_[fill[links_[i].b]++] = {links_[i].a, i};
  }
}

std::optional<uint32_t> Topology::FindNode(std::string_view id) const {
  auto it = node_index_.find(std::string(id));
  if (it == node_index_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> Topology::FindNicByIp(std::string_view ip) const {
  auto it = ip_index_.find(std::string(ip));
  if (it == ip_index_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> Topology::FindLink(std::string_view id) const {
  auto it = link_index_.find(std::string(id));
  if (it == link_index_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> Topology::FindLink(std::string_view a, std::string_view b) const {
  auto na = FindNode(a), nb = FindNode(b);
  if (!na || !nb || offsets_.empty()) return std::nullopt;
  for (const Arc& arc : Neighbors(*na))
    if (arc.to == *nb) return arc.link;
  return std::nullopt;
}

}  // namespace ff::pathctl
