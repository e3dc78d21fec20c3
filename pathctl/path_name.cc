// Path names for statistics and logs, built from the oracle's hops and the local interface.
#include "pathctl/path_name.h"

namespace ff::pathctl {

std::vector<std::string> SteeredSwitches(const Topology& topo, const std::vector<std::string>& hops) {
  std::vector<std::string> out;
  for (const std::string& id : hops) {
    const auto n = topo.FindNode(id);
    if (!n) continue;  // a hop the topology no longer has: nothing to say about it
    const NodeKind k = topo.node(*n).kind;
    if (k == NodeKind::kSpine || k == NodeKind::kCore) out.push_back(id);
  }
  return out;
}

std::string SteeredPathName(const Topology& topo, const PathOption& option, std::string_view ifname) {
  std::string name;
  if (ifname.empty() && !option.hops.empty()) {
    if (const auto n = topo.FindNode(option.hops.front())) ifname = topo.node(*n).ifname;
  }
  if (!ifname.empty()) name.append(ifname).append(" ");
  name.append(option.local_ip).append(" -> ").append(option.remote_ip);
  const std::vector<std::string> via = SteeredSwitches(topo, option.hops);
  for (size_t i = 0; i < via.size(); ++i) name.append(i == 0 ? " via " : ",").append(via[i]);
  return name;
}

std::string UnsteeredPathName(std::string_view ifname, std::string_view local_ip, std::string_view remote_ip) {
  std::string name(ifname.empty() ? local_ip : ifname);
  return name.append(" -> ").append(remote_ip);
}

std::string ReceivedPathName(std::string_view ifname, std::string_view local_ip, std::string_view remote_ip) {
  std::string name(ifname.empty() ? local_ip : ifname);
  return name.append(" <- ").append(remote_ip);
}

}  // namespace ff::pathctl
