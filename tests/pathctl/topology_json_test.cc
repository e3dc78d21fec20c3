// Topology JSON schema: the emulator's minimal form loads; errors name element and field.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "pathctl/topology_generators.h"
#include "pathctl/topology_json.h"

namespace ff::pathctl {
namespace {

const char* kEmulatorForm = R"({"version":1,
 "nodes":[{"id":"h0","kind":"host"},{"id":"h0-nic0","kind":"nic","host":"h0","ip":"10.1.0.2","ifname":"eth0"},
          {"id":"h1","kind":"host"},{"id":"h1-nic0","kind":"nic","host":"h1","ip":"10.2.0.2","ifname":"eth0"},
          {"id":"leaf0","kind":"leaf"},{"id":"leaf1","kind":"tor"},{"id":"spine0","kind":"spine"},{"id":"spine1","kind":"spine"}],
 "links":[{"a":"h0-nic0","b":"leaf0","capacity_gbps":10,"latency_us":2,"utilization":0,"free_buffer_bytes":4194304,"fec_error_rate":0,"state":"up"},
          {"a":"h1-nic0","b":"leaf1"},
          {"a":"leaf0","b":"spine0"},{"a":"leaf0","b":"spine1"},{"a":"leaf1","b":"spine0"},{"a":"leaf1","b":"spine1"}],
 "entropy":{"kind":"sport-ranges","ranges":[{"lo":49152,"hi":53247,"via":"spine0"},{"lo":53248,"hi":57343,"via":"spine1"}]}})";

std::string ErrorOf(const std::string& text) {
  std::string err;
  auto t = ParseTopologyJson(text, &err);
  EXPECT_FALSE(t.has_value()) << text;
  return err;
}

TEST(TopologyJson, LoadsTheEmulatorsMinimalFormWithDefaults) {
  std::string err;
  auto t = ParseTopologyJson(kEmulatorForm, &err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->nodes().size(), 8u);
  EXPECT_EQ(t->links().size(), 6u);
  EXPECT_EQ(t->node(*t->FindNicByIp("10.1.0.2")).id, "h0-nic0");
  EXPECT_EQ(t->node(*t->FindNode("leaf1")).kind, NodeKind::kLeaf);  // "tor" alias
  const Link& first = t->link(0);
  EXPECT_DOUBLE_EQ(first.capacity_gbps, 10);
  EXPECT_DOUBLE_EQ(first.latency_us, 2);
  EXPECT_EQ(first.free_buffer_bytes, 4194304u);
  const Link& defaulted = t->link(1);
  EXPECT_DOUBLE_EQ(defaulted.capacity_gbps, 100);
  EXPECT_DOUBLE_EQ(defaulted.latency_us, 1);
  EXPECT_EQ(defaulted.state, LinkState::kUp);
  EXPECT_EQ(t->entropy.kind, EntropySpec::Kind::kSportRanges);
  ASSERT_EQ(t->entropy.ranges.size(), 2u);
  EXPECT_EQ(t->entropy.ranges[1].via, "spine1");
  // Links are bidirectional: found from either end, and both ends list the neighbour.
  EXPECT_EQ(t->FindLink("leaf0", "h0-nic0"), t->FindLink("h0-nic0", "leaf0"));
  EXPECT_EQ(t->Neighbors(*t->FindNode("leaf0")).size(), 3u);
}

TEST(TopologyJson, ErrorNamesLinkIndexAndFieldForBadLatency) {
  std::string text = R"({"version":1,"nodes":[{"id":"a","kind":"nic"},{"id":"b","kind":"leaf"}],
    "links":[{"a":"a","b":"b"},{"a":"b","b":"a","latency_us":-1}]})";
  EXPECT_EQ(ErrorOf(text), "links[1].latency_us must be > 0 (got -1)");
}

TEST(TopologyJson, ErrorsNameTheOffendingElement) {
  EXPECT_EQ(ErrorOf(R"({"nodes":[],"links":[]})"), "version is required (must be 1)");
  EXPECT_EQ(ErrorOf(R"({"version":1,"nodes":[{"id":"a","kind":"router"}],"links":[]})"),
            "nodes[0].kind must be one of gpu, nic, host, leaf, tor, spine, core, top, nvswitch (got \"router\")");
  EXPECT_EQ(ErrorOf(R"({"version":1,"nodes":[{"id":"a","kind":"leaf"}],"links":[{"a":"a","b":"zz"}]})"),
            "links[0].b names unknown node 'zz'");
  EXPECT_EQ(ErrorOf(R"({"version":1,"nodes":[{"id":"a","kind":"leaf"},{"id":"b","kind":"nic"}],
                       "links":[{"a":"a","b":"b","utilization":1.5}]})"),
            "links[0].utilization must be <= 1 (got 1.5)");
  EXPECT_EQ(ErrorOf(R"({"version":1,"nodes":[{"id":"a","kind":"leaf"},{"id":"b","kind":"nic"}],
                       "links":[{"a":"a","b":"b","state":"flaky"}]})"),
            "links[0].state must be one of up, degraded, down (got \"flaky\")");
  EXPECT_EQ(ErrorOf(R"({"version":1,"nodes":[{"id":"a","kind":"leaf"},{"id":"a","kind":"nic"}],"links":[]})"),
            "nodes[1].id - duplicate node id 'a'");
  EXPECT_EQ(ErrorOf(R"({"version":1,"nodes":[{"id":"n","kind":"nic","host":"x"}],"links":[]})"),
            "nodes[0].host names unknown node 'x'");
  EXPECT_EQ(ErrorOf(R"({"version":1,"nodes":[{"id":"s","kind":"spine"}],"links":[],
                       "entropy":{"kind":"sport-ranges","ranges":[{"lo":10,"hi":20,"via":"s"},{"lo":15,"hi":30,"via":"s"}]}})"),
            "entropy.ranges[1] overlaps entropy.ranges[0]");
  EXPECT_EQ(ErrorOf(R"({"version":1,"nodes":[{"id":"n","kind":"nic"}],"links":[],
                       "entropy":{"kind":"sport-ranges","ranges":[{"lo":10,"hi":20,"via":"n"}]}})"),
            "entropy.ranges[0].via must name a switch ('n' is not one)");
  EXPECT_NE(ErrorOf("{not json").find("not valid JSON"), std::string::npos);
}

TEST(TopologyJson, UnknownFieldsAreWarningsNotErrors) {
  std::vector<std::string> warnings;
  std::string err;
  auto t = ParseTopologyJson(R"({"version":1,"nodes":[{"id":"a","kind":"leaf","netns":"x"}],"links":[]})", &err, &warnings);
  ASSERT_TRUE(t) << err;
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "nodes[0].netns: unknown field, ignored");
}

TEST(TopologyJson, WriterRoundTripsGeneratedFabric) {
  RailSpec spec;
  spec.hosts = 3;
  spec.rails = 2;
  spec.link.latency_jitter = 0.3;
  Topology a = GenerateRail(spec);
  std::string err;
  auto b = ParseTopologyJson(TopologyToJson(a), &err);
  ASSERT_TRUE(b) << err;
  ASSERT_EQ(a.links().size(), b->links().size());
  for (uint32_t i = 0; i < a.links().size(); ++i) {
    EXPECT_EQ(a.link(i).id, b->link(i).id);
    EXPECT_DOUBLE_EQ(a.link(i).latency_us, b->link(i).latency_us);
  }
  EXPECT_EQ(b->entropy.ranges.size(), 2u);
  EXPECT_EQ(b->node(*b->FindNode("h2-nic1")).rail, 1);
}

}  // namespace
}  // namespace ff::pathctl

namespace ff::pathctl {
namespace {

// Found by tests/fuzz/fuzz_topology_json: a number beyond double ("1e400") made nlohmann throw
// out_of_range (not parse_error) out of ParseTopologyJson, which promises nullopt and a message.
TEST(TopologyJson, FuzzFoundNumberBeyondDoubleIsAnErrorNotAnException) {
  std::ifstream in(std::string(FF_FUZZ_REGRESSIONS) + "/topology_number_overflow.json");
  ASSERT_TRUE(in.good());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string error;
  std::optional<Topology> t;
  EXPECT_NO_THROW(t = ParseTopologyJson(text, &error));
  EXPECT_FALSE(t.has_value());
  EXPECT_NE(error.find("numbers must fit a double"), std::string::npos) << error;
}

}  // namespace
}  // namespace ff::pathctl
