// `flexiforce probe report`: what an operator reads before turning steering on, computed from totals.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bpf/probe_snapshot.h"
#include "pathctl/topology.h"

namespace ff::probe {

struct ReportFindings {
  nlohmann::json sla_misses = nlohmann::json::array();  // tasks with messages slower than their SLA
  nlohmann::json outlier_pairs = nlohmann::json::array();  // {task, peer} mean latency above mean + 3 sigma
  nlohmann::json retransmits = nlohmann::json::array();
  // Without a topology: peers/paths carrying over twice the mean bytes. With one: links on which one
  // task sent more than 80% of the bytes (bpf/link_hot_spots.h).
  nlohmann::json hot_spots = nlohmann::json::array();
  nlohmann::json links;  // with a topology: every loaded link's bytes per task, and the unrouted bytes
  // FEC and RDMA loss counters per NIC over the window (bpf/hidden_loss.h); null when not sampled.
  nlohmann::json hidden_loss;
};

// `topology`: the fabric file (pathctl's format) when given, for the link hot spots.
ReportFindings Analyze(const Snapshot& total, const pathctl::Topology* topology = nullptr);

// The whole report as JSON: findings, totals, duration.
nlohmann::json ReportJson(const Snapshot& total, const ReportFindings& f, double duration_s);
std::string ReportMarkdown(const Snapshot& total, const ReportFindings& f, double duration_s);
// One self-contained page: inline SVG latency histograms (per task and collective, SLA line) and a peer heat map.
std::string ReportHtml(const Snapshot& total, const ReportFindings& f, double duration_s);

}  // namespace ff::probe
