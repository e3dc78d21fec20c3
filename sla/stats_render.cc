#include "sla/stats_render.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

namespace ff::sla {
namespace {

// Upper bound of histogram bucket b in ns (buckets 0..kLatencyBuckets-2; the last is overflow).
uint64_t BucketUpperNs(int b) { return uint64_t{1} << b; }

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return std::string(buf, n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof(buf) - 1));
}

// What a person calls the path: its name, or for a version-2 file (no names) its numeric id.
std::string PathLabel(const SlotSnapshot& s) {
  return s.path_name.empty() ? "id " + std::to_string(s.path_id) : s.path_name;
}

std::string FlowLabels(const StatsSnapshot& p, const SlotSnapshot& s, const char* direction) {
  return "pid=\"" + std::to_string(p.pid) + "\",task=\"" + EscapePrometheusLabel(s.task) + "\",collective=\"" +
         CollectiveName(s.collective) + "\",peer=\"" + EscapePrometheusLabel(s.peer) + "\",path=\"" +
         std::to_string(s.path_id) + "\",path_name=\"" + EscapePrometheusLabel(s.path_name) + "\",direction=\"" +
         direction + "\"";
}

std::string TaskLabels(const StatsSnapshot& p, const TaskSnapshot& t) {
  return "pid=\"" + std::to_string(p.pid) + "\",task=\"" + EscapePrometheusLabel(t.task) + "\"";
}

void Family(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

using FlowVisitor = std::function<void(const StatsSnapshot&, const SlotSnapshot&, const char*, const DirectionSnapshot&)>;
void ForEachFlow(const std::vector<StatsSnapshot>& snaps, const FlowVisitor& fn) {
  for (const auto& p : snaps) {
    for (const auto& s : p.slots) {
      if (s.send.messages) fn(p, s, "send", s.send);
      if (s.recv.messages) fn(p, s, "recv", s.recv);
    }
  }
}

nlohmann::json DirectionJson(const DirectionSnapshot& d) {
  nlohmann::json hist = nlohmann::json::array();
  for (int b = 0; b < kLatencyBuckets; ++b) {
    if (d.histogram[b] == 0) continue;
    nlohmann::json bucket = {{"count", d.histogram[b]}};
    bucket["le_ns"] = b < kLatencyBuckets - 1 ? nlohmann::json(BucketUpperNs(b)) : nlohmann::json(nullptr);
    hist.push_back(bucket);
  }
  return {{"bytes", d.bytes},
          {"messages", d.messages},
          {"latency_sum_ns", d.latency_sum_ns},
          {"latency_histogram", hist}};
}

}  // namespace

std::string EscapePrometheusLabel(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string RenderStatsPrometheus(const std::vector<StatsSnapshot>& snaps) {
  std::string out;
  Family(out, "flexiforce_bytes_total", "counter", "Bytes carried per task, collective, peer, path and direction.");
  ForEachFlow(snaps, [&](const auto& p, const auto& s, const char* dir, const DirectionSnapshot& d) {
    out += "flexiforce_bytes_total{" + FlowLabels(p, s, dir) + "} " + std::to_string(d.bytes) + "\n";
  });
  Family(out, "flexiforce_messages_total", "counter", "Messages carried per task, collective, peer, path and direction.");
  ForEachFlow(snaps, [&](const auto& p, const auto& s, const char* dir, const DirectionSnapshot& d) {
    out += "flexiforce_messages_total{" + FlowLabels(p, s, dir) + "} " + std::to_string(d.messages) + "\n";
  });
  Family(out, "flexiforce_message_latency_seconds", "histogram",
         "Message completion latency (post to completion) in seconds.");
  ForEachFlow(snaps, [&](const auto& p, const auto& s, const char* dir, const DirectionSnapshot& d) {
    const std::string labels = FlowLabels(p, s, dir);
    uint64_t cumulative = 0;
    for (int b = 0; b < kLatencyBuckets - 1; ++b) {
      cumulative += d.histogram[b];
      out += "flexiforce_message_latency_seconds_bucket{" + labels +
             Format(",le=\"%.10g\"} %" PRIu64 "\n", static_cast<double>(BucketUpperNs(b)) * 1e-9, cumulative);
    }
    out += "flexiforce_message_latency_seconds_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(d.messages) + "\n";
    out += "flexiforce_message_latency_seconds_sum{" + labels +
           Format("} %.10g\n", static_cast<double>(d.latency_sum_ns) * 1e-9);
    out += "flexiforce_message_latency_seconds_count{" + labels + "} " + std::to_string(d.messages) + "\n";
  });

  struct TaskMetric {
    const char* name;
    const char* type;
    const char* help;
    std::function<std::string(const TaskSnapshot&)> value;  // empty: no sample
  };
  const TaskMetric task_metrics[] = {
      {"flexiforce_task_heat", "gauge", "Heat index: 100 * throughput (MB/s) / SLA (us) over the last window.",
       [](const TaskSnapshot& t) { return Format("%.10g", t.heat); }},
      {"flexiforce_task_sla_seconds", "gauge", "Declared latency SLA (AI_SLA_LATENCY) in seconds.",
       [](const TaskSnapshot& t) {
         return t.sla_ns ? Format("%.10g", static_cast<double>(*t.sla_ns) * 1e-9) : std::string();
       }},
      {"flexiforce_task_sla_level", "gauge", "SLA level (1: < 50 us, 2: 50-100 us, 3: above or none).",
       [](const TaskSnapshot& t) { return std::to_string(t.level); }},
      {"flexiforce_sla_unattainable_total", "counter", "Path choices where no path could meet the task's SLA.",
       [](const TaskSnapshot& t) { return std::to_string(t.sla_unattainable); }},
      {"flexiforce_failover_events_total", "counter", "Failovers to a backup path.",
       [](const TaskSnapshot& t) { return std::to_string(t.failover_events); }},
      {"flexiforce_failover_resent_bytes_total", "counter", "Bytes re-sent on a backup path after a failover.",
       [](const TaskSnapshot& t) { return std::to_string(t.failover_bytes_resent); }},
      {"flexiforce_failover_paused_seconds_total", "counter", "Time communicators were paused by failovers.",
       [](const TaskSnapshot& t) { return Format("%.10g", static_cast<double>(t.failover_paused_ns) * 1e-9); }},
      {"flexiforce_failbacks_total", "counter", "Failed paths reconnected and back in service.",
       [](const TaskSnapshot& t) { return std::to_string(t.failbacks); }},
  };
  for (const auto& m : task_metrics) {
    Family(out, m.name, m.type, m.help);
    for (const auto& p : snaps) {
      for (const auto& t : p.tasks) {
        const std::string v = m.value(t);
        if (!v.empty()) out += std::string(m.name) + "{" + TaskLabels(p, t) + "} " + v + "\n";
      }
    }
  }
  Family(out, "flexiforce_stats_dropped_records_total", "counter",
         "Records lost because the process's statistics table was full.");
  for (const auto& p : snaps)
    out += "flexiforce_stats_dropped_records_total{pid=\"" + std::to_string(p.pid) + "\"} " +
           std::to_string(p.dropped) + "\n";
  return out;
}

std::string RenderStatsJson(const std::vector<StatsSnapshot>& snaps) {
  nlohmann::json procs = nlohmann::json::array();
  for (const auto& p : snaps) {
    nlohmann::json tasks = nlohmann::json::array();
    for (const auto& t : p.tasks) {
      tasks.push_back({{"task", t.task},
                       {"sla_ns", t.sla_ns ? nlohmann::json(*t.sla_ns) : nlohmann::json(nullptr)},
                       {"level", t.level},
                       {"heat", t.heat},
                       {"sla_unattainable", t.sla_unattainable},
                       {"failover", {{"events", t.failover_events},
                                     {"bytes_resent", t.failover_bytes_resent},
                                     {"paused_ns", t.failover_paused_ns},
                                     {"failbacks", t.failbacks}}}});
    }
    nlohmann::json flows = nlohmann::json::array();
    for (const auto& s : p.slots) {
      flows.push_back({{"task", s.task},
                       {"collective", CollectiveName(s.collective)},
                       {"peer", s.peer},
                       {"path", s.path_id},
                       {"path_name", s.path_name},
                       {"closed_connections", s.closed_connections()},
                       {"send", DirectionJson(s.send)},
                       {"recv", DirectionJson(s.recv)}});
    }
    procs.push_back({{"pid", p.pid},
                     {"alive", p.alive},
                     {"file", p.path},
                     {"dropped_records", p.dropped},
                     {"tasks", tasks},
                     {"flows", flows}});
  }
  return nlohmann::json({{"processes", procs}}).dump(2) + "\n";
}

std::string RenderStatsText(const std::vector<StatsSnapshot>& snaps) {
  std::string out;
  if (snaps.empty()) return "no FlexiForce statistics found\n";
  for (const auto& p : snaps) {
    out += Format("pid %" PRId64 "%s  (%s)\n", p.pid, p.alive ? "" : " [not running]", p.path.c_str());
    for (const auto& t : p.tasks) {
      out += Format("  task %-24s level %d  sla %s  heat %.3f  sla-unattainable %" PRIu64 "  failovers %" PRIu64 "  failbacks %" PRIu64 "\n",
                    t.task.c_str(), t.level,
                    t.sla_ns ? Format("%.3fus", static_cast<double>(*t.sla_ns) / 1e3).c_str() : "none", t.heat,
                    t.sla_unattainable, t.failover_events, t.failbacks);
    }
    // The path goes last: its name ("eth0 10.0.0.1 -> 10.0.0.2 via spine1") is long and of any width.
    out += Format("  %-20s %-13s %-22s %4s %14s %10s %12s  %s\n", "task", "collective", "peer", "dir", "bytes",
                  "messages", "mean-lat-us", "path");
    ForEachFlow({p}, [&](const auto&, const SlotSnapshot& s, const char* dir, const DirectionSnapshot& d) {
      const double mean_us = d.messages ? static_cast<double>(d.latency_sum_ns) / d.messages / 1e3 : 0.0;
      out += Format("  %-20s %-13s %-22s %4s %14" PRIu64 " %10" PRIu64 " %12.2f  %s\n", s.task.c_str(),
                    CollectiveName(s.collective), s.peer.c_str(), dir, d.bytes, d.messages, mean_us,
                    PathLabel(s).c_str());
    });
    if (p.dropped) out += Format("  %" PRIu64 " records dropped: statistics table full\n", p.dropped);
  }
  return out;
}

}  // namespace ff::sla
