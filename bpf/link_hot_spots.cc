// Per-link bytes per task from the topology file, and the links one task dominates.
#include "bpf/link_hot_spots.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "pathctl/path_oracle.h"

namespace ff::probe {

namespace {

struct Ends {
  std::string local_ip;
  uint16_t sport = 0;
  std::string remote_ip;
};

// "10.0.0.1:41234" or "[fe80::1]:41234" -> address, port.
bool SplitEndpoint(const std::string& s, std::string* ip, uint16_t* port) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string a = s.substr(0, colon);
  if (a.size() >= 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
  *ip = a;
  *port = static_cast<uint16_t>(std::strtoul(s.c_str() + colon + 1, nullptr, 10));
  return true;
}

std::optional<Ends> ParseEnds(const std::string& ends) {
  const size_t arrow = ends.find("->");
  if (arrow == std::string::npos) return std::nullopt;  // the accepting side: not the sender's socket
  Ends e;
  uint16_t rport = 0;
  if (!SplitEndpoint(ends.substr(0, arrow), &e.local_ip, &e.sport) ||
      !SplitEndpoint(ends.substr(arrow + 2), &e.remote_ip, &rport))
    return std::nullopt;
  return e;
}

}  // namespace

LinkLoad LinkHotSpots(const Snapshot& total, const pathctl::Topology& topology, double threshold) {
  LinkLoad out;
  // Connecting-side path sockets by {task, peer, path}: the latest one, since failback announces the
  // socket that replaced a failed path with another path_up (the window's bytes all go on it).
  std::map<std::tuple<std::string, std::string, int>, Ends> sockets;
  std::map<std::pair<std::string, std::string>, std::vector<std::tuple<std::string, std::string, int>>> paths_of;
  for (const auto& e : total.timeline) {
    if (e.event != "path_up") continue;
    auto ends = ParseEnds(e.details.value("ends", std::string()));
    if (!ends) continue;
    const auto key = std::make_tuple(e.task, e.peer, e.path);
    if (sockets.insert_or_assign(key, *ends).second) paths_of[{e.task, e.peer}].push_back(key);
  }
  std::map<std::pair<std::string, std::string>, std::vector<Ends>> by_connection;  // one socket per path
  for (const auto& [conn, keys] : paths_of)
    for (const auto& k : keys) by_connection[conn].push_back(sockets.at(k));
  auto oracle = pathctl::PathOracle::FromTopology(topology);
  std::map<std::tuple<std::string, std::string, uint16_t>, std::optional<std::vector<uint32_t>>> routes;
  auto route = [&](const Ends& s) -> const std::optional<std::vector<uint32_t>>& {
    auto key = std::make_tuple(s.local_ip, s.remote_ip, s.sport);
    auto it = routes.find(key);
    if (it != routes.end()) return it->second;
    std::optional<std::vector<uint32_t>> links;
    auto choice = oracle->Query({s.local_ip}, s.remote_ip, 0, 0);
    if (choice->routed) {
      std::vector<const pathctl::PathOption*> options = {choice.get()};
      for (const auto& b : choice->backups) options.push_back(&b);
      for (const auto* o : options) {
        const bool any = o->sport_lo == 0 && o->sport_hi == 0;
        if (any || (s.sport >= o->sport_lo && s.sport <= o->sport_hi)) {
          links = o->links;
          break;
        }
      }
    }
    return routes.emplace(key, std::move(links)).first->second;
  };
  std::map<uint32_t, std::map<std::string, uint64_t>> load;  // link -> task -> bytes
  for (const auto& [id, c] : total.flows) {
    if (id.dir != "send" || c.bytes == 0) continue;
    std::vector<Ends> over;
    if (id.path >= 0) {
      auto it = sockets.find({id.task, id.peer, id.path});
      if (it != sockets.end()) over = {it->second};
    } else if (auto it = by_connection.find({id.task, id.peer}); it != by_connection.end()) {
      over = it->second;
    }
    if (over.empty()) {
      out.unrouted_bytes += c.bytes;
      continue;
    }
    const uint64_t share = c.bytes / over.size();
    for (size_t i = 0; i < over.size(); ++i) {
      const uint64_t b = share + (i == 0 ? c.bytes % over.size() : 0);
      const auto& links = route(over[i]);
      if (!links) {
        out.unrouted_bytes += b;
        continue;
      }
      for (uint32_t l : *links) load[l][id.task] += b;
    }
  }
  for (const auto& [l, tasks] : load) {
    uint64_t sum = 0;
    const std::pair<const std::string, uint64_t>* top = nullptr;
    for (const auto& t : tasks) {
      sum += t.second;
      if (top == nullptr || t.second > top->second) top = &t;
    }
    const std::string& link_id = topology.link(l).id;
    out.links.push_back({{"link", link_id}, {"bytes", sum}, {"tasks", tasks}});
    const double share = sum ? static_cast<double>(top->second) / static_cast<double>(sum) : 0;
    if (top != nullptr && share > threshold)
      out.hot_spots.push_back({{"where", "link " + link_id},
                               {"link", link_id},
                               {"task", top->first},
                               {"bytes", top->second},
                               {"link_bytes", sum},
                               {"share", share}});
  }
  return out;
}

}  // namespace ff::probe
