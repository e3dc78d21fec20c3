// Decoding of the probe's map entries and interval arithmetic on them.
#include "bpf/probe_snapshot.h"

#include <arpa/inet.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "sla/collective_id.h"

namespace ff::probe {

uint64_t FlowCounters::QuantileNs(double q) const {
  if (messages == 0) return 0;
  const double want = q * static_cast<double>(messages);
  uint64_t seen = 0;
  for (int b = 0; b < FF_PROBE_BUCKETS; ++b) {
    seen += hist[static_cast<size_t>(b)];
    if (static_cast<double>(seen) >= want) return b >= 63 ? UINT64_MAX : (uint64_t{2} << b);
  }
  return uint64_t{2} << (FF_PROBE_BUCKETS - 1);
}

namespace {

std::string Bounded(const char* s, size_t cap) { return std::string(s, strnlen(s, cap)); }

std::string Endpoint(unsigned short family, const unsigned char* addr, unsigned short port) {
  char buf[INET6_ADDRSTRLEN] = {};
  const bool v4 = family == AF_INET;
  inet_ntop(v4 ? AF_INET : AF_INET6, addr, buf, sizeof(buf));
  return v4 ? std::string(buf) + ":" + std::to_string(port) : "[" + std::string(buf) + "]:" + std::to_string(port);
}

FlowCounters Minus(const FlowCounters& a, const FlowCounters& b) {
  FlowCounters d;
  d.messages = a.messages - b.messages;
  d.bytes = a.bytes - b.bytes;
  d.latency_sum_ns = a.latency_sum_ns - b.latency_sum_ns;
  d.sla_violations = a.sla_violations - b.sla_violations;
  d.sla_us = a.sla_us;
  for (size_t i = 0; i < d.hist.size(); ++i) d.hist[i] = a.hist[i] - b.hist[i];
  return d;
}

}  // namespace

FlowId FlowIdFromKey(const ff_flow_key& k) {
  FlowId id;
  id.task = Bounded(k.task, sizeof(k.task));
  id.peer = Bounded(k.peer, sizeof(k.peer));
  id.path = k.path;
  id.collective = k.collective > 255 ? "unknown" : sla::CollectiveName(static_cast<sla::Collective>(k.collective));
  id.dir = k.dir == FF_PROBE_SEND ? "send" : "recv";
  return id;
}

FlowCounters CountersFromValue(const ff_flow_stats& v) {
  FlowCounters c;
  c.messages = v.messages;
  c.bytes = v.bytes;
  c.latency_sum_ns = v.latency_sum_ns;
  c.sla_violations = v.sla_violations;
  c.sla_us = v.sla_us;
  for (size_t i = 0; i < c.hist.size(); ++i) c.hist[i] = v.hist[i];
  return c;
}

SocketId SocketIdFromKey(const ff_sock_key& k) {
  return {Endpoint(k.family, k.saddr, k.sport), Endpoint(k.family, k.daddr, k.dport)};
}

const char* EventName(int ev) {
  static const char* const kNames[FF_EV_COUNT] = {"send_post", "recv_post", "connect", "accept", "path_choice",
                                                  "failover",  "drain",     "failback", "pause",  "resume",
                                                  "path_up"};
  return ev >= 0 && ev < FF_EV_COUNT ? kNames[ev] : "?";
}

uint64_t TaskHash(const std::string& task_id) {
  uint64_t h = 1469598103934665603ull;
  for (char c : task_id) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

TimelineEvent TimelineEventFromRecord(const ff_event& r, double mono_to_wall_s) {
  TimelineEvent e;
  e.mono_ns = r.time_ns;
  e.wall_s = static_cast<double>(r.time_ns) / 1e9 + mono_to_wall_s;
  e.pid = static_cast<int>(r.pid);
  e.tid = static_cast<int>(r.tid);
  e.comm = Bounded(r.comm, sizeof(r.comm));
  e.task_hash = r.task_hash;
  e.peer = Bounded(r.peer, sizeof(r.peer));
  e.event = EventName(static_cast<int>(r.event));
  // Argument names after task hash and peer (core/probes.h).
  static const char* const kNone[] = {nullptr};
  const char* const* names = kNone;
  static const char* const kConnect[] = {"paths", "sla_us", "traffic_class", nullptr};
  static const char* const kChoice[] = {"path", "plan_path_id", "sla_attainable", nullptr};
  static const char* const kFailover[] = {"paths_alive", "resent_bytes", "paused_ns", nullptr};
  static const char* const kPath[] = {"path", nullptr};
  static const char* const kPathUp[] = {"path", "", nullptr};  // the second is the string `ends`
  switch (r.event) {
    case FF_EV_CONNECT:
    case FF_EV_ACCEPT: names = kConnect; break;
    case FF_EV_PATH_CHOICE: names = kChoice; break;
    case FF_EV_FAILOVER: names = kFailover; break;
    case FF_EV_DRAIN:
    case FF_EV_FAILBACK: names = kPath; break;
    case FF_EV_PATH_UP: names = kPathUp; break;
    default: break;
  }
  e.details = nlohmann::json::object();
  for (unsigned i = 0; i < r.nargs && i < FF_EVENT_ARGS && names[i] != nullptr; ++i) {
    if (!std::strcmp(names[i], "path"))
      e.path = static_cast<int>(r.args[i]);
    else if (!*names[i])
      e.details["ends"] = Bounded(r.ends, sizeof(r.ends));
    else
      e.details[names[i]] = r.args[i];
  }
  return e;
}

std::string IsoTime(double wall_s) {
  const double whole = std::floor(wall_s);
  const std::time_t t = static_cast<std::time_t>(whole);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[48];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof(buf) - n, ".%06ldZ", static_cast<long>((wall_s - whole) * 1e6));
  return buf;
}

nlohmann::json TimelineJson(const std::vector<TimelineEvent>& events) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& e : events)
    a.push_back({{"time", IsoTime(e.wall_s)},
                 {"mono_ns", e.mono_ns},
                 {"pid", e.pid},
                 {"tid", e.tid},
                 {"comm", e.comm},
                 {"task", e.task},
                 {"event", e.event},
                 {"peer", e.peer},
                 {"path", e.path},
                 {"details", e.details}});
  return a;
}

Snapshot Difference(const Snapshot& now, const Snapshot& before) {
  Snapshot d;
  if (now.timeline.size() > before.timeline.size())
    d.timeline.assign(now.timeline.begin() + static_cast<std::ptrdiff_t>(before.timeline.size()), now.timeline.end());
  d.timeline_dropped = now.timeline_dropped - before.timeline_dropped;
  for (const auto& [id, c] : now.flows) {
    auto it = before.flows.find(id);
    FlowCounters diff = it == before.flows.end() ? c : Minus(c, it->second);
    if (diff.messages != 0) d.flows.emplace(id, diff);
  }
  for (const auto& [id, n] : now.retransmits) {
    auto it = before.retransmits.find(id);
    const uint64_t diff = n - (it == before.retransmits.end() ? 0 : it->second);
    if (diff != 0) d.retransmits.emplace(id, diff);
  }
  for (size_t i = 0; i < d.events.size(); ++i) d.events[i] = now.events[i] - before.events[i];
  d.posts_counted = now.posts_counted;
  return d;
}

nlohmann::json SnapshotJson(const Snapshot& s) {
  nlohmann::json j;
  j["flows"] = nlohmann::json::array();
  for (const auto& [id, c] : s.flows) {
    j["flows"].push_back({{"task", id.task},
                          {"collective", id.collective},
                          {"peer", id.peer},
                          {"path", id.path},
                          {"dir", id.dir},
                          {"messages", c.messages},
                          {"bytes", c.bytes},
                          {"latency_sum_ns", c.latency_sum_ns},
                          {"mean_latency_ns", c.messages ? c.latency_sum_ns / c.messages : 0},
                          {"p50_latency_ns", c.QuantileNs(0.5)},
                          {"p99_latency_ns", c.QuantileNs(0.99)},
                          {"sla_us", c.sla_us},
                          {"sla_violations", c.sla_violations},
                          {"latency_hist_log2_ns", c.hist}});
  }
  j["retransmits"] = nlohmann::json::array();
  for (const auto& [id, n] : s.retransmits)
    j["retransmits"].push_back({{"local", id.local}, {"remote", id.remote}, {"count", n}});
  j["events"] = nlohmann::json::object();
  for (int i = 0; i < FF_EV_COUNT; ++i) {
    // Posts are counted only when their probes were attached (--posts): no key rather than a false 0.
    if (!s.posts_counted && (i == FF_EV_SEND_POST || i == FF_EV_RECV_POST)) continue;
    j["events"][EventName(i)] = s.events[static_cast<size_t>(i)];
  }
  j["posts_counted"] = s.posts_counted;
  j["timeline"] = TimelineJson(s.timeline);
  j["timeline_dropped"] = s.timeline_dropped;
  return j;
}

}  // namespace ff::probe
