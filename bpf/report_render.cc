// Markdown and self-contained HTML (inline SVG) renderings of the probe report.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "bpf/report_analysis.h"

namespace ff::probe {

namespace {

std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// Send-side rows merged per {task, collective}: the histograms the page draws.
std::map<std::pair<std::string, std::string>, FlowCounters> PerTaskCollective(const Snapshot& s) {
  std::map<std::pair<std::string, std::string>, FlowCounters> out;
  for (const auto& [id, c] : s.flows) {
    if (id.dir != "send") continue;
    FlowCounters& a = out[{id.task, id.collective}];
    a.messages += c.messages;
    a.bytes += c.bytes;
    a.latency_sum_ns += c.latency_sum_ns;
    a.sla_violations += c.sla_violations;
    if (c.sla_us) a.sla_us = c.sla_us;
    for (size_t i = 0; i < a.hist.size(); ++i) a.hist[i] += c.hist[i];
  }
  return out;
}

std::string HistogramSvg(const FlowCounters& c) {
  int lo = FF_PROBE_BUCKETS, hi = 0;
  for (int b = 0; b < FF_PROBE_BUCKETS; ++b)
    if (c.hist[static_cast<size_t>(b)]) lo = std::min(lo, b), hi = std::max(hi, b);
  const int sla_b = c.sla_us ? static_cast<int>(std::log2(static_cast<double>(c.sla_us) * 1000)) : -1;
  if (sla_b >= 0) lo = std::min(lo, sla_b), hi = std::max(hi, sla_b);
  if (lo > hi) return "<p>no messages</p>";
  const int n = hi - lo + 1, w = 28, h = 120;
  uint64_t peak = 1;
  for (int b = lo; b <= hi; ++b) peak = std::max(peak, c.hist[static_cast<size_t>(b)]);
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << n * w + 20 << "' height='" << h + 40 << "'>";
  for (int b = lo; b <= hi; ++b) {
    const double frac = static_cast<double>(c.hist[static_cast<size_t>(b)]) / static_cast<double>(peak);
    const int bh = static_cast<int>(frac * h);
    const int x = 10 + (b - lo) * w;
    o << "<rect x='" << x << "' y='" << h - bh << "' width='" << w - 4 << "' height='" << bh
      << "' fill='#4a7fb5'><title>" << c.hist[static_cast<size_t>(b)] << " messages in [2^" << b << ", 2^" << b + 1
      << ") ns</title></rect>";
    if ((b - lo) % 2 == 0)
      o << "<text x='" << x << "' y='" << h + 14 << "' font-size='9'>"
        << (b >= 20 ? Fmt("%.0fms", std::ldexp(1.0, b) / 1e6) : b >= 10 ? Fmt("%.0fus", std::ldexp(1.0, b) / 1e3)
                                                                          : Fmt("%.0fns", std::ldexp(1.0, b)))
        << "</text>";
  }
  if (sla_b >= 0) {
    const double pos = std::log2(static_cast<double>(c.sla_us) * 1000) - lo;
    const int x = 10 + static_cast<int>(pos * w);
    o << "<line x1='" << x << "' y1='0' x2='" << x << "' y2='" << h << "' stroke='#c0392b' stroke-width='2'/>"
      << "<text x='" << x + 3 << "' y='12' font-size='10' fill='#c0392b'>SLA " << c.sla_us << " us</text>";
  }
  o << "<text x='10' y='" << h + 32 << "' font-size='10'>latency (log2 buckets), " << c.messages << " messages, "
    << c.sla_violations << " over SLA</text></svg>";
  return o.str();
}

std::string HeatMapSvg(const Snapshot& s) {
  // Rows: task/collective; columns: peer; colour: mean send latency; text: MiB moved.
  std::set<std::string> peers;
  std::map<std::pair<std::string, std::string>, FlowCounters> cells;
  std::set<std::string> rows;
  for (const auto& [id, c] : s.flows) {
    if (id.dir != "send") continue;
    const std::string row = id.task + " / " + id.collective;
    rows.insert(row);
    peers.insert(id.peer);
    FlowCounters& a = cells[{row, id.peer}];
    a.messages += c.messages;
    a.bytes += c.bytes;
    a.latency_sum_ns += c.latency_sum_ns;
  }
  if (rows.empty()) return "<p>no traffic</p>";
  double worst = 1;
  for (const auto& [k, c] : cells) worst = std::max(worst, c.messages ? double(c.latency_sum_ns) / double(c.messages) : 0);
  const int cw = 130, ch = 34, left = 220, top = 30;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << left + cw * int(peers.size()) + 10 << "' height='"
    << top + ch * int(rows.size()) + 10 << "'>";
  int x = 0;
  for (const auto& p : peers) o << "<text x='" << left + x++ * cw << "' y='20' font-size='10'>" << Escape(p) << "</text>";
  int y = 0;
  for (const auto& r : rows) {
    o << "<text x='4' y='" << top + y * ch + 20 << "' font-size='10'>" << Escape(r) << "</text>";
    x = 0;
    for (const auto& p : peers) {
      auto it = cells.find({r, p});
      if (it != cells.end() && it->second.messages) {
        const double mean = double(it->second.latency_sum_ns) / double(it->second.messages);
        const int heat = static_cast<int>(255 * mean / worst);
        o << "<rect x='" << left + x * cw << "' y='" << top + y * ch << "' width='" << cw - 4 << "' height='" << ch - 4
          << "' fill='rgb(" << heat << "," << 200 - heat * 3 / 4 << ",80)'><title>mean " << Fmt("%.1f", mean / 1000)
          << " us</title></rect><text x='" << left + x * cw + 4 << "' y='" << top + y * ch + 19
          << "' font-size='10'>" << Fmt("%.1f us", mean / 1000) << ", " << Fmt("%.1f MiB", double(it->second.bytes) / 1048576)
          << "</text>";
      }
      ++x;
    }
    ++y;
  }
  o << "</svg>";
  return o.str();
}

std::string Count(const nlohmann::json& v) { return v.is_null() ? "not available" : v.dump(); }

// Per NIC: FEC blocks and rate, RDMA loss counters, whether flagged and why.
std::string HiddenLossMarkdown(const nlohmann::json& h) {
  std::ostringstream o;
  o << "\n## Hidden loss (NIC FEC and RDMA counters)\n\n"
    << h["formula"].get<std::string>() << "; flagged above " << Fmt("%.3g", h["threshold"].get<double>())
    << ", or when an RDMA error or loss counter moved. NICs: " << h["nics_from"].get<std::string>() << ".\n\n";
  if (h["nics"].empty()) {
    o << "none\n";
    return o.str();
  }
  o << "| NIC | rx bytes | FEC corrected blocks | FEC uncorrectable blocks | FEC error rate | RDMA error and loss counters | "
       "flagged |\n|---|---|---|---|---|---|---|\n";
  for (const auto& n : h["nics"]) {
    const auto& fec = n["fec"];
    const auto& rdma = n["rdma"];
    o << "| " << n["nic"].get<std::string>() << " | " << Count(n["rx_bytes"]) << " | ";
    if (fec["available"].get<bool>()) {
      o << Count(fec["corrected_blocks"]) << " | " << Count(fec["uncorrectable_blocks"]) << " | "
        << (fec["error_rate"].is_null() ? "not available (" + fec["why_no_rate"].get<std::string>() + ")"
                                        : Fmt("%.3g", fec["error_rate"].get<double>()))
        << " | ";
    } else {
      o << "not available | not available | " << fec["why"].get<std::string>() << " | ";
    }
    if (rdma["available"].get<bool>()) {
      o << rdma["device"].get<std::string>() << " port " << rdma["port"] << ":";
      for (const auto& [name, v] : rdma["counters"].items()) o << " " << name << " " << Count(v);
    } else {
      o << rdma["why"].get<std::string>();
    }
    o << " | ";
    if (n["flagged"].get<bool>()) {
      o << "**yes**:";
      for (const auto& r : n["reasons"]) o << " " << r.get<std::string>() << ";";
    } else {
      o << "no";
    }
    o << " |\n";
  }
  return o.str();
}

std::string FindingsMarkdown(const ReportFindings& f) {
  std::ostringstream o;
  o << "## Tasks missing their SLA\n\n";
  if (f.sla_misses.empty()) o << "none\n";
  for (const auto& m : f.sla_misses)
    o << "- " << m["task"].get<std::string>() << ": " << m["violations"] << " of " << m["messages"]
      << " messages over " << m["sla_us"] << " us (mean " << Fmt("%.1f", m["mean_latency_us"].get<double>())
      << " us)\n";
  o << "\n## Peer pairs above mean + 3 sigma\n\n";
  if (f.outlier_pairs.empty()) o << "none\n";
  for (const auto& m : f.outlier_pairs)
    o << "- " << m["task"].get<std::string>() << " -> " << m["peer"].get<std::string>() << ": mean "
      << Fmt("%.1f", m["mean_latency_us"].get<double>()) << " us, threshold "
      << Fmt("%.1f", m["threshold_us"].get<double>()) << " us\n";
  o << "\n## TCP retransmits\n\n";
  if (f.retransmits.empty()) o << "none\n";
  for (const auto& m : f.retransmits)
  {
    o << "- " << m["local"].get<std::string>() << " -> " << m["remote"].get<std::string>() << ": " << m["count"];
    if (m.contains("pid")) {
      o << " (task " << (m["task"].get<std::string>().empty() ? "?" : m["task"].get<std::string>()) << ", pid "
        << m["pid"];
      if (!m["peer"].get<std::string>().empty()) o << ", peer " << m["peer"].get<std::string>();
      if (m["path"].get<int>() >= 0) o << ", path " << m["path"];
      o << (m["match"] == "process" ? "; a socket of that process, not known to be a path" : "") << ")";
    }
    o << "\n";
  }
  o << "\n## Hot spots\n\n";
  if (f.hot_spots.empty()) o << "none\n";
  for (const auto& m : f.hot_spots) {
    if (m.contains("link"))
      o << "- " << m["where"].get<std::string>() << ": task " << m["task"].get<std::string>() << " sent " << m["bytes"]
        << " of its " << m["link_bytes"] << " bytes (" << Fmt("%.0f", 100 * m["share"].get<double>()) << "%)\n";
    else
      o << "- " << m["where"].get<std::string>() << ": " << m["bytes"] << " bytes ("
        << Fmt("%.0f", 100 * m["share"].get<double>()) << "% of all)\n";
  }
  if (!f.links.is_null() && f.links["unrouted_bytes"].get<uint64_t>() != 0)
    o << "\n" << f.links["unrouted_bytes"] << " sent bytes not placed on the topology (no path socket, or its addresses "
      << "are not in the file)\n";
  if (!f.hidden_loss.is_null()) o << HiddenLossMarkdown(f.hidden_loss);
  return o.str();
}

// Rows of the event timeline shown in Markdown/HTML (report.json has every event).
constexpr size_t kTimelineRows = 1000;

std::string DetailsText(const nlohmann::json& d) {
  std::string out;
  for (const auto& [k, v] : d.items()) out += (out.empty() ? "" : ", ") + k + "=" + v.dump();
  return out;
}

std::string TimelineMarkdown(const Snapshot& total) {
  std::ostringstream o;
  o << "\n## Event timeline\n\n";
  if (total.timeline.empty()) {
    o << "none";
    if (total.timeline_dropped) o << " (" << total.timeline_dropped << " dropped)";
    o << "\n";
    return o.str();
  }
  o << "| time (UTC) | pid | task | event | peer | path | details |\n|---|---|---|---|---|---|---|\n";
  size_t n = 0;
  for (const auto& e : total.timeline) {
    if (n++ == kTimelineRows) break;
    o << "| " << IsoTime(e.wall_s) << " | " << e.pid << " | " << e.task << " | " << e.event << " | " << e.peer
      << " | " << (e.path < 0 ? std::string("-") : std::to_string(e.path)) << " | " << DetailsText(e.details) << " |\n";
  }
  if (total.timeline.size() > kTimelineRows)
    o << "\n" << total.timeline.size() - kTimelineRows << " more in report.json\n";
  if (total.timeline_dropped) o << "\n" << total.timeline_dropped << " event(s) dropped (ring buffer full)\n";
  return o.str();
}

std::string TimelineHtml(const Snapshot& total) {
  std::ostringstream o;
  o << "<h2>Event timeline</h2>";
  if (total.timeline.empty()) return o.str() + "<p>none</p>";
  o << "<table><tr><th>time (UTC)</th><th>pid</th><th>task</th><th>event</th><th>peer</th><th>path</th>"
       "<th>details</th></tr>";
  size_t n = 0;
  for (const auto& e : total.timeline) {
    if (n++ == kTimelineRows) break;
    o << "<tr><td>" << IsoTime(e.wall_s) << "</td><td>" << e.pid << "</td><td>" << Escape(e.task) << "</td><td>"
      << Escape(e.event) << "</td><td>" << Escape(e.peer) << "</td><td>"
      << (e.path < 0 ? std::string("-") : std::to_string(e.path)) << "</td><td>" << Escape(DetailsText(e.details))
      << "</td></tr>";
  }
  o << "</table>";
  if (total.timeline.size() > kTimelineRows)
    o << "<p>" << total.timeline.size() - kTimelineRows << " more in report.json</p>";
  if (total.timeline_dropped) o << "<p>" << total.timeline_dropped << " event(s) dropped (ring buffer full)</p>";
  return o.str();
}

}  // namespace

std::string ReportMarkdown(const Snapshot& total, const ReportFindings& f, double duration_s) {
  std::ostringstream o;
  o << "# FlexiForce probe report\n\nObserved for " << Fmt("%.1f", duration_s) << " s.\n\n";
  o << "| task | collective | messages | MiB | mean us | p99 us | SLA us | over SLA |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& [k, c] : PerTaskCollective(total))
    o << "| " << k.first << " | " << k.second << " | " << c.messages << " | "
      << Fmt("%.1f", double(c.bytes) / 1048576) << " | "
      << Fmt("%.1f", c.messages ? double(c.latency_sum_ns) / double(c.messages) / 1000 : 0) << " | "
      << Fmt("%.1f", double(c.QuantileNs(0.99)) / 1000) << " | " << c.sla_us << " | " << c.sla_violations << " |\n";
  o << "\n" << FindingsMarkdown(f);
  o << TimelineMarkdown(total);
  return o.str();
}

std::string ReportHtml(const Snapshot& total, const ReportFindings& f, double duration_s) {
  std::ostringstream o;
  o << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>FlexiForce probe report</title>"
       "<style>body{font-family:sans-serif;margin:2em}h2{margin-top:1.5em}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:2px 6px}</style></head><body>"
    << "<h1>FlexiForce probe report</h1><p>Observed for " << Fmt("%.1f", duration_s) << " s.</p>";
  o << "<h2>Latency per task and collective</h2>";
  for (const auto& [k, c] : PerTaskCollective(total))
    o << "<h3>" << Escape(k.first) << " / " << Escape(k.second) << "</h3>" << HistogramSvg(c);
  o << "<h2>Peer heat map (mean send latency)</h2>" << HeatMapSvg(total);
  // The findings in Markdown form, one paragraph per line: no second renderer to keep in step.
  o << "<h2>Findings</h2><pre>" << Escape(FindingsMarkdown(f)) << "</pre>";
  o << TimelineHtml(total) << "</body></html>\n";
  return o.str();
}

}  // namespace ff::probe
