// JSON topology loader/writer with validation that names the offending element and field.
#include "pathctl/topology_json.h"

#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace ff::pathctl {

namespace {

using nlohmann::json;

struct SchemaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string Describe(const json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw SchemaError(where + " " + what);
}

void WarnUnknown(const json& obj, const std::string& where, std::initializer_list<const char*> known,
                 std::vector<std::string>* warnings) {
  if (!warnings) return;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    if (!ok) warnings->push_back(where + "." + it.key() + ": unknown field, ignored");
  }
}

std::string RequiredString(const json& obj, const char* field, const std::string& where) {
  auto it = obj.find(field);
  if (it == obj.end()) Fail(where + "." + field, "is required (a non-empty string)");
  if (!it->is_string() || it->get_ref<const std::string&>().empty())
    Fail(where + "." + field, "must be a non-empty string (got " + Describe(*it) + ")");
  return it->get<std::string>();
}

std::string OptionalString(const json& obj, const char* field, const std::string& where) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_string()) Fail(where + "." + field, "must be a string (got " + Describe(*it) + ")");
  return it->get<std::string>();
}

// Numbers with a range check; the message states the accepted range.
double Number(const json& obj, const char* field, const std::string& where, double def, double lo,
              bool lo_inclusive, double hi) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_number()) Fail(where + "." + field, "must be a number (got " + Describe(*it) + ")");
  double v = it->get<double>();
  if (lo_inclusive ? v < lo : v <= lo) {
    std::ostringstream m;
    m << "must be " << (lo_inclusive ? ">= " : "> ") << lo << " (got " << Describe(*it) << ")";
    Fail(where + "." + field, m.str());
  }
  if (v > hi) {
    std::ostringstream m;
    m << "must be <= " << hi << " (got " << Describe(*it) << ")";
    Fail(where + "." + field, m.str());
  }
  return v;
}

int64_t Integer(const json& obj, const char* field, const std::string& where, int64_t def, int64_t lo,
                int64_t hi) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_number_integer())
    Fail(where + "." + field, "must be an integer (got " + Describe(*it) + ")");
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    Fail(where + "." + field,
         "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " + Describe(*it) + ")");
  return v;
}

const json& RequiredArray(const json& obj, const char* field, const std::string& where) {
  auto it = obj.find(field);
  if (it == obj.end()) Fail(where + field, "is required (an array)");
  if (!it->is_array()) Fail(where + field, "must be an array (got " + Describe(*it) + ")");
  return *it;
}

void ParseEntropy(const json& e, const Topology& topo, EntropySpec* out, std::vector<std::string>* warnings) {
  if (!e.is_object()) Fail("entropy", "must be an object (got " + Describe(e) + ")");
  std::string kind = RequiredString(e, "kind", "entropy");
  auto check_via = [&](const std::string& via, const std::string& where) {
    auto n = topo.FindNode(via);
    if (!n) Fail(where, "names unknown node '" + via + "'");
    if (!IsSwitch(topo.node(*n).kind)) Fail(where, "must name a switch ('" + via + "' is not one)");
  };
  if (kind == "none") {
    out->kind = EntropySpec::Kind::kNone;
    WarnUnknown(e, "entropy", {"kind"}, warnings);
  } else if (kind == "sport-ranges") {
    out->kind = EntropySpec::Kind::kSportRanges;
    WarnUnknown(e, "entropy", {"kind", "ranges"}, warnings);
    const json& ranges = RequiredArray(e, "ranges", "entropy.");
    for (size_t i = 0; i < ranges.size(); ++i) {
      std::string where = "entropy.ranges[" + std::to_string(i) + "]";
      const json& r = ranges[i];
      if (!r.is_object()) Fail(where, "must be an object {lo, hi, via}");
      if (!r.contains("lo") || !r.contains("hi")) Fail(where, "needs both lo and hi (ports 1-65535)");
      EntropyRange er;
      er.lo = static_cast<uint16_t>(Integer(r, "lo", where, 0, 1, 65535));
      er.hi = static_cast<uint16_t>(Integer(r, "hi", where, 0, 1, 65535));
      if (er.lo > er.hi) Fail(where + ".lo", "must be <= hi");
      er.via = RequiredString(r, "via", where);
      check_via(er.via, where + ".via");
      for (size_t j = 0; j < out->ranges.size(); ++j)
        if (er.lo <= out->ranges[j].hi && out->ranges[j].lo <= er.hi)
          Fail(where, "overlaps entropy.ranges[" + std::to_string(j) + "]");
      out->ranges.push_back(std::move(er));
    }
  } else if (kind == "linear-hash") {
    out->kind = EntropySpec::Kind::kLinearHash;
    WarnUnknown(e, "entropy", {"kind", "base", "vias"}, warnings);
    out->base = static_cast<uint16_t>(Integer(e, "base", "entropy", 49152, 1, 65535));
    const json& vias = RequiredArray(e, "vias", "entropy.");
    if (vias.empty()) Fail("entropy.vias", "must list at least one switch");
    for (size_t i = 0; i < vias.size(); ++i) {
      std::string where = "entropy.vias[" + std::to_string(i) + "]";
      if (!vias[i].is_string()) Fail(where, "must be a switch id string");
      check_via(vias[i].get<std::string>(), where);
      out->vias.push_back(vias[i].get<std::string>());
    }
    if (out->base + vias.size() - 1 > 65535) Fail("entropy.base", "leaves no room for one port per via");
  } else {
    Fail("entropy.kind", "must be one of none, sport-ranges, linear-hash (got \"" + kind + "\")");
  }
}

Topology Parse(const json& doc, std::vector<std::string>* warnings) {
  if (!doc.is_object()) Fail("topology", "must be a JSON object with version, nodes, links");
  WarnUnknown(doc, "topology", {"version", "name", "nodes", "links", "entropy"}, warnings);
  if (!doc.contains("version")) Fail("version", "is required (must be 1)");
  if (Integer(doc, "version", "topology", 1, 1, 1) != 1) Fail("version", "must be 1");
  Topology topo;
  topo.name = OptionalString(doc, "name", "topology");

  const json& nodes = RequiredArray(doc, "nodes", "");
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::string where = "nodes[" + std::to_string(i) + "]";
    const json& n = nodes[i];
    if (!n.is_object()) Fail(where, "must be an object {id, kind, ...}");
    WarnUnknown(n, where, {"id", "kind", "host", "ip", "ifname", "rail"}, warnings);
    Node node;
    node.id = RequiredString(n, "id", where);
    std::string kind = RequiredString(n, "kind", where);
    auto k = ParseNodeKind(kind);
    if (!k)
      Fail(where + ".kind",
           "must be one of gpu, nic, host, leaf, tor, spine, core, top, nvswitch (got \"" + kind + "\")");
    node.kind = *k;
    node.host = OptionalString(n, "host", where);
    node.ip = OptionalString(n, "ip", where);
    node.ifname = OptionalString(n, "ifname", where);
    node.rail = static_cast<int>(Integer(n, "rail", where, -1, -1, 1 << 20));
    std::string err;
    if (!topo.AddNode(std::move(node), &err)) Fail(where + ".id", err == "" ? "is invalid" : "- " + err);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = topo.node(static_cast<uint32_t>(i));
    if (n.host.empty()) continue;
    auto h = topo.FindNode(n.host);
    if (!h) Fail("nodes[" + std::to_string(i) + "].host", "names unknown node '" + n.host + "'");
    if (topo.node(*h).kind != NodeKind::kHost)
      Fail("nodes[" + std::to_string(i) + "].host", "must name a node of kind host ('" + n.host + "' is not)");
  }

  const json& links = RequiredArray(doc, "links", "");
  for (size_t i = 0; i < links.size(); ++i) {
    std::string where = "links[" + std::to_string(i) + "]";
    const json& l = links[i];
    if (!l.is_object()) Fail(where, "must be an object {a, b, ...}");
    WarnUnknown(l, where,
                {"id", "a", "b", "capacity_gbps", "latency_us", "utilization", "free_buffer_bytes",
                 "fec_error_rate", "state"},
                warnings);
    Link link;
    link.id = OptionalString(l, "id", where);
    std::string a = RequiredString(l, "a", where), b = RequiredString(l, "b", where);
    auto na = topo.FindNode(a), nb = topo.FindNode(b);
    if (!na) Fail(where + ".a", "names unknown node '" + a + "'");
    if (!nb) Fail(where + ".b", "names unknown node '" + b + "'");
    if (*na == *nb) Fail(where + ".b", "must differ from a (self-loop on '" + a + "')");
    link.a = *na;
    link.b = *nb;
    link.capacity_gbps = Number(l, "capacity_gbps", where, 100.0, 0.0, false, 1e6);
    link.latency_us = Number(l, "latency_us", where, 1.0, 0.0, false, 1e9);
    link.utilization = Number(l, "utilization", where, 0.0, 0.0, true, 1.0);
    link.free_buffer_bytes =
        static_cast<uint64_t>(Integer(l, "free_buffer_bytes", where, 16 << 20, 0, int64_t{1} << 50));
    link.fec_error_rate = Number(l, "fec_error_rate", where, 0.0, 0.0, true, 1.0);
    std::string state = OptionalString(l, "state", where);
    if (!state.empty()) {
      auto s = ParseLinkState(state);
      if (!s) Fail(where + ".state", "must be one of up, degraded, down (got \"" + state + "\")");
      link.state = *s;
    }
    std::string err;
    if (!topo.AddLink(std::move(link), &err)) Fail(where + ".id", "- " + err);
  }
  if (auto it = doc.find("entropy"); it != doc.end() && !it->is_null()) {
    ParseEntropy(*it, topo, &topo.entropy, warnings);
  }
  topo.Finalize();
  return topo;
}

}  // namespace

std::optional<Topology> ParseTopologyJson(std::string_view text, std::string* error,
                                          std::vector<std::string>* warnings) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    if (error) *error = std::string("not valid JSON: ") + e.what();
    return std::nullopt;
  } catch (const json::exception& e) {
    // e.g. out_of_range 406 for a number beyond double ("1e400"): the parser throws it, not parse_error.
    if (error) *error = std::string("not valid JSON (numbers must fit a double): ") + e.what();
    return std::nullopt;
  }
  try {
    return Parse(doc, warnings);
  } catch (const SchemaError& e) {
    if (error) *error = e.what();
  } catch (const json::exception& e) {
    if (error) *error = std::string("topology: ") + e.what();
  }
  return std::nullopt;
}

std::optional<Topology> LoadTopologyFile(const std::string& path, std::string* error,
                                         std::vector<std::string>* warnings) {
  std::ifstream in(path);
  if (!in) {
    if (error) *error = "cannot open topology file '" + path + "'";
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = ParseTopologyJson(ss.str(), error, warnings);
  if (!t && error) *error = path + ": " + *error;
  return t;
}

std::string TopologyToJson(const Topology& topo, int indent) {
  json doc;
  doc["version"] = 1;
  if (!topo.name.empty()) doc["name"] = topo.name;
  json nodes = json::array();
  for (const Node& n : topo.nodes()) {
    json j = {{"id", n.id}, {"kind", NodeKindName(n.kind)}};
    if (!n.host.empty()) j["host"] = n.host;
    if (!n.ip.empty()) j["ip"] = n.ip;
    if (!n.ifname.empty()) j["ifname"] = n.ifname;
    if (n.rail >= 0) j["rail"] = n.rail;
    nodes.push_back(std::move(j));
  }
  doc["nodes"] = std::move(nodes);
  json links = json::array();
  for (const Link& l : topo.links()) {
    json j = {{"a", topo.node(l.a).id},
              {"b", topo.node(l.b).id},
              {"capacity_gbps", l.capacity_gbps},
              {"latency_us", l.latency_us},
              {"utilization", l.utilization},
              {"free_buffer_bytes", l.free_buffer_bytes},
              {"fec_error_rate", l.fec_error_rate},
              {"state", LinkStateName(l.state)}};
    if (l.id != topo.node(l.a).id + "~" + topo.node(l.b).id) j["id"] = l.id;
    links.push_back(std::move(j));
  }
  doc["links"] = std::move(links);
  const EntropySpec& e = topo.entropy;
  if (e.kind == EntropySpec::Kind::kSportRanges) {
    json r = json::array();
    for (const auto& er : e.ranges) r.push_back({{"lo", er.lo}, {"hi", er.hi}, {"via", er.via}});
    doc["entropy"] = {{"kind", "sport-ranges"}, {"ranges", std::move(r)}};
  } else if (e.kind == EntropySpec::Kind::kLinearHash) {
    doc["entropy"] = {{"kind", "linear-hash"}, {"base", e.base}, {"vias", e.vias}};
  }
  return doc.dump(indent);
}

}  // namespace ff::pathctl
