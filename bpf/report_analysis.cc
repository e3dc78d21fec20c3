// Report findings: SLA misses per task, latency outliers among peer pairs, retransmits, hot spots.
#include "bpf/report_analysis.h"

#include "bpf/link_hot_spots.h"
#include "bpf/socket_owners.h"

#include <cmath>
#include <map>

namespace ff::probe {

namespace {

struct Acc {
  uint64_t messages = 0, bytes = 0, latency_sum_ns = 0, violations = 0, sla_us = 0;
  void Add(const FlowCounters& c) {
    messages += c.messages;
    bytes += c.bytes;
    latency_sum_ns += c.latency_sum_ns;
    violations += c.sla_violations;
    if (c.sla_us) sla_us = c.sla_us;
  }
  double MeanNs() const { return messages ? static_cast<double>(latency_sum_ns) / static_cast<double>(messages) : 0; }
};

}  // namespace

ReportFindings Analyze(const Snapshot& total, const pathctl::Topology* topology) {
  ReportFindings f;
  // Send-side completion (acknowledged by the receiver) is the latency a rank waits for; receive rows
  // would count each message twice in a loopback run.
  std::map<std::string, Acc> tasks;
  std::map<std::pair<std::string, std::string>, Acc> pairs;
  std::map<std::string, Acc> peer_paths;
  for (const auto& [id, c] : total.flows) {
    if (id.dir != "send") continue;
    tasks[id.task].Add(c);
    pairs[{id.task, id.peer}].Add(c);
    peer_paths[id.peer + (id.path < 0 ? " striped" : " path " + std::to_string(id.path))].Add(c);
  }
  for (const auto& [task, a] : tasks) {
    if (a.violations == 0) continue;
    f.sla_misses.push_back({{"task", task},
                            {"sla_us", a.sla_us},
                            {"messages", a.messages},
                            {"violations", a.violations},
                            {"fraction", static_cast<double>(a.violations) / static_cast<double>(a.messages)},
                            {"mean_latency_us", a.MeanNs() / 1000}});
  }
  if (pairs.size() >= 2) {
    double sum = 0, sq = 0;
    for (const auto& [k, a] : pairs) sum += a.MeanNs();
    const double mean = sum / static_cast<double>(pairs.size());
    for (const auto& [k, a] : pairs) sq += (a.MeanNs() - mean) * (a.MeanNs() - mean);
    const double sigma = std::sqrt(sq / static_cast<double>(pairs.size()));
    for (const auto& [k, a] : pairs) {
      if (sigma > 0 && a.MeanNs() > mean + 3 * sigma)
        f.outlier_pairs.push_back({{"task", k.first},
                                   {"peer", k.second},
                                   {"mean_latency_us", a.MeanNs() / 1000},
                                   {"threshold_us", (mean + 3 * sigma) / 1000}});
    }
  }
  f.retransmits = JoinRetransmits(total.retransmits, total.socket_owners, total.timeline);
  if (topology != nullptr) {
    LinkLoad l = LinkHotSpots(total, *topology);
    f.hot_spots = std::move(l.hot_spots);
    f.links = {{"links", std::move(l.links)}, {"unrouted_bytes", l.unrouted_bytes}};
  } else if (!peer_paths.empty()) {
    double bytes = 0;
    for (const auto& [k, a] : peer_paths) bytes += static_cast<double>(a.bytes);
    const double mean = bytes / static_cast<double>(peer_paths.size());
    for (const auto& [k, a] : peer_paths) {
      if (peer_paths.size() >= 2 && static_cast<double>(a.bytes) > 2 * mean)
        f.hot_spots.push_back({{"where", k}, {"bytes", a.bytes}, {"share", static_cast<double>(a.bytes) / bytes}});
    }
  }
  return f;
}

nlohmann::json ReportJson(const Snapshot& total, const ReportFindings& f, double duration_s) {
  nlohmann::json j = SnapshotJson(total);
  j["duration_s"] = duration_s;
  j["findings"] = {{"sla_misses", f.sla_misses},
                   {"outlier_pairs", f.outlier_pairs},
                   {"retransmits", f.retransmits},
                   {"hot_spots", f.hot_spots}};
  if (!f.links.is_null()) j["findings"]["topology_links"] = f.links;
  if (!f.hidden_loss.is_null()) j["findings"]["hidden_loss"] = f.hidden_loss;
  return j;
}

}  // namespace ff::probe
