// Path planning: asks the path oracle (pathctl/) for a primary and backups under the task's SLA.
#include "plugin/path_planner.h"

#include <arpa/inet.h>

#include <cstring>
#include <mutex>

#include "pathctl/path_name.h"
#include "pathctl/path_oracle.h"
#include "base/logging.h"
#include "plugin/plugin_state.h"
#include "tcp/interfaces.h"

namespace ff {

std::string LocalInterfaceName(const std::string& ip) {
  for (const auto& d : PluginState::Get().devices())
    if (tcp::AddressToString(d.addr) == ip) return d.name;
  return {};
}

namespace {

bool ParseIp(const std::string& ip, sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  auto* v4 = reinterpret_cast<sockaddr_in*>(out);
  if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    return true;
  }
  return false;
}

RouteLinks ToRouteLinks(const std::vector<uint32_t>& links) {
  RouteLinks r;
  for (uint32_t l : links) r.Add(l);
  return r;
}

PathPlan RoundRobin(int dev, const ListenHandle& remote, int npaths) {
  PluginState& st = PluginState::Get();
  std::vector<int> order = st.PathOrder(dev);
  PathPlan plan;
  for (int i = 0; i < npaths; ++i) {
    PlannedPath p;
    p.remote = remote.addrs[i % remote.addrs.size()];
    int local = order[i % order.size()];
    if (st.devices()[local].addr.ss_family != p.remote.ss_family) local = dev;
    p.local = st.devices()[local].addr;
    if (p.local.ss_family != p.remote.ss_family) p.remote = remote.addrs[0];
    plan.paths.push_back(p);
  }
  if (!plan.paths.empty()) {
    const std::string local_ip = tcp::AddressToString(plan.paths[0].local);
    plan.path_name = pathctl::UnsteeredPathName(LocalInterfaceName(local_ip), local_ip,
                                                tcp::AddressToString(plan.paths[0].remote));
  }
  plan.summary = "round robin over " + std::to_string(order.size()) + " local interface(s)";
  return plan;
}

// A process-wide oracle when a topology file names the fabric; otherwise one per peer built from
// the interfaces on both ends.
std::shared_ptr<pathctl::PathOracle> OracleFor(const std::vector<std::string>& locals,
                                               const std::vector<std::string>& remotes, std::string* note) {
  static std::mutex mu;
  // Never destroyed: a connect still in progress on NCCL's thread during exit may use it.
  static auto* shared_oracle = new std::shared_ptr<pathctl::PathOracle>;
  std::shared_ptr<pathctl::PathOracle>& shared = *shared_oracle;
  if (PluginState::Get().config().topology_file.empty())
    return pathctl::PathOracle::FromInterfaces(locals, remotes);
  std::lock_guard<std::mutex> lock(mu);
  if (!shared) shared = pathctl::PathOracle::FromEnvironment(locals, remotes, note);
  return shared;
}

}  // namespace

PathPlan PlanPaths(int dev, const ListenHandle& remote, int npaths, const TaskProfile& task) {
  if (!task.steer) return RoundRobin(dev, remote, npaths);
  PluginState& st = PluginState::Get();
  std::vector<std::string> locals, remotes;
  pathctl::TopoDistances topo;  // each local NIC's PCIe distance from the GPU (see TopoDistance)
  for (int d : st.PathOrder(dev)) {
    locals.push_back(tcp::AddressToString(st.devices()[d].addr));
    topo.push_back(st.TopoDistance(dev, d));
  }
  for (const auto& a : remote.addrs) remotes.push_back(tcp::AddressToString(a));
  std::string note;
  auto oracle = OracleFor(locals, remotes, &note);
  if (!note.empty()) FF_WARN("path oracle: %s", note.c_str());
  auto choice = oracle->Query(locals, remotes[0], task.sla_us, 0, topo);
  if (!choice->routed) {
    PathPlan plan = RoundRobin(dev, remote, npaths);
    plan.summary = "oracle has no route from " + locals[0] + " to " + remotes[0] + "; " + plan.summary;
    return plan;
  }
  PathPlan plan;
  plan.steered = true;
  plan.path_id = choice->path_id;
  plan.path_name = pathctl::SteeredPathName(oracle->topology(), *choice, LocalInterfaceName(choice->local_ip));
  plan.sla_attainable = choice->sla_attainable;
  // Path 0 takes the primary; further paths take the backups in order (most disjoint first), so a
  // failed path's traffic already has somewhere else to go.
  for (int i = 0; i < npaths; ++i) {
    const pathctl::PathOption& o =
        i == 0 || choice->backups.empty() ? static_cast<const pathctl::PathOption&>(*choice)
                                          : choice->backups[(i - 1) % choice->backups.size()];
    PlannedPath p;
    sockaddr_storage l{}, r{};
    if (!ParseIp(o.local_ip, &l) || !ParseIp(o.remote_ip, &r)) return RoundRobin(dev, remote, npaths);
    p.local = l;
    p.remote = remote.addrs[0];
    for (const auto& a : remote.addrs)
      if (tcp::AddressToString(a) == o.remote_ip) p.remote = a;  // keep the listener's port
    p.sport_lo = o.sport_lo;
    p.sport_hi = o.sport_hi;
    p.route = ToRouteLinks(pathctl::FabricLinks(oracle->topology(), o.links));
    plan.paths.push_back(p);
    if (i < 3) {
      std::string hops;
      for (const auto& h : o.hops) hops += (hops.empty() ? "" : ">") + h;
      plan.summary += (i ? "; " : "") + std::string(i ? "backup " : "primary ") + hops + " sport " +
                      std::to_string(o.sport_lo) + "-" + std::to_string(o.sport_hi);
      if (o.topo_distance) plan.summary += " (PCIe " + std::string(pcie::DistanceName(*o.topo_distance)) + ")";
    }
  }
  return plan;
}

RouteLinks AcceptedPathRoute(const sockaddr_storage& connecting, const sockaddr_storage& accepting) {
  if (PluginState::Get().config().topology_file.empty()) return {};
  const std::string from = tcp::AddressToString(connecting), to = tcp::AddressToString(accepting);
  std::string note;
  auto oracle = OracleFor({to}, {from}, &note);
  // Observing only, this is where the file is first read (steering reads it at connect).
  if (!note.empty()) FF_WARN("path oracle: %s", note.c_str());
  auto choice = oracle->Query({from}, to, 0, 0);
  if (!choice->routed) return {};
  const uint16_t port = connecting.ss_family == AF_INET
                            ? ntohs(reinterpret_cast<const sockaddr_in*>(&connecting)->sin_port)
                            : ntohs(reinterpret_cast<const sockaddr_in6*>(&connecting)->sin6_port);
  std::vector<const pathctl::PathOption*> options = {choice.get()};
  for (const auto& b : choice->backups) options.push_back(&b);
  for (const auto* o : options) {
    // A path without a port choice point (one route between the two) holds every port.
    if ((o->sport_lo == 0 && o->sport_hi == 0) || (port >= o->sport_lo && port <= o->sport_hi))
      return ToRouteLinks(pathctl::FabricLinks(oracle->topology(), o->links));
  }
  return {};
}

}  // namespace ff
