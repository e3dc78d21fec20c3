// Renders statistics snapshots as a human table, JSON, or Prometheus text exposition format.
#pragma once

#include <string>
#include <vector>

#include "sla/task_stats.h"

namespace ff::sla {

std::string RenderStatsText(const std::vector<StatsSnapshot>& snapshots);
std::string RenderStatsJson(const std::vector<StatsSnapshot>& snapshots);
// Prometheus text format 0.0.4, one family per metric, suitable for node_exporter's textfile
// collector (write to a *.prom file atomically: render to a temp file, then rename).
std::string RenderStatsPrometheus(const std::vector<StatsSnapshot>& snapshots);

// Escapes a Prometheus label value (backslash, double quote, newline).
std::string EscapePrometheusLabel(const std::string& value);

}  // namespace ff::sla
