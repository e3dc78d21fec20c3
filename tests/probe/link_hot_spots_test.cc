// Link hot spots from a topology file: bytes per task routed by the path sockets' source ports.
#include "bpf/link_hot_spots.h"

#include <gtest/gtest.h>

#include "pathctl/topology_json.h"

namespace ff::probe {
namespace {

// Two hosts on two leaves, two spines chosen by source port (spine0: 49152-57343, spine1: 57344-65534).
constexpr const char* kTopology = R"({
  "version": 1,
  "nodes": [
    {"id": "h0", "kind": "host"}, {"id": "h0-nic0", "kind": "nic", "host": "h0", "ip": "10.1.0.2"},
    {"id": "h1", "kind": "host"}, {"id": "h1-nic0", "kind": "nic", "host": "h1", "ip": "10.1.0.3"},
    {"id": "leaf0", "kind": "leaf"}, {"id": "leaf1", "kind": "leaf"},
    {"id": "spine0", "kind": "spine"}, {"id": "spine1", "kind": "spine"}
  ],
  "links": [
    {"a": "h0-nic0", "b": "leaf0"}, {"a": "h1-nic0", "b": "leaf1"},
    {"a": "leaf0", "b": "spine0"}, {"a": "leaf0", "b": "spine1"},
    {"a": "leaf1", "b": "spine0"}, {"a": "leaf1", "b": "spine1"}
  ],
  "entropy": {"kind": "sport-ranges", "ranges": [{"lo": 49152, "hi": 57343, "via": "spine0"},
                                                  {"lo": 57344, "hi": 65534, "via": "spine1"}]}
})";

TimelineEvent PathUp(const std::string& task, const std::string& peer, int path, const std::string& ends) {
  TimelineEvent e;
  e.pid = 1;
  e.task = task;
  e.event = "path_up";
  e.peer = peer;
  e.path = path;
  e.details = {{"ends", ends}};
  return e;
}

void AddFlow(Snapshot& s, const std::string& task, const std::string& peer, int path, const std::string& dir,
             uint64_t bytes) {
  FlowId id;
  id.task = task;
  id.collective = "AllReduce";
  id.peer = peer;
  id.path = path;
  id.dir = dir;
  FlowCounters c;
  c.messages = 1;
  c.bytes = bytes;
  s.flows[id] = c;
}

TEST(ProbeLinkHotSpots, OneTaskOverEightyPercentOfALinksBytesIsAHotSpot) {
  std::string error;
  auto topo = pathctl::ParseTopologyJson(kTopology, &error);
  ASSERT_TRUE(topo) << error;
  Snapshot s;
  s.timeline = {
      PathUp("A", "10.1.0.3:5000", 0, "10.1.0.2:50000->10.1.0.3:5000"),  // spine0
      PathUp("A", "10.1.0.3:5000", 1, "10.1.0.2:60000->10.1.0.3:5000"),  // spine1
      PathUp("B", "10.1.0.3:5001", 0, "10.1.0.2:50001->10.1.0.3:5001"),  // spine0
      PathUp("B", "10.1.0.3:5001", 1, "10.1.0.2:60001->10.1.0.3:5001"),  // spine1
      PathUp("B", "10.1.0.2:7000", 0, "10.1.0.3:40000"),                 // an accepting side: not a sender's socket
  };
  AddFlow(s, "A", "10.1.0.3:5000", 0, "send", 900);
  AddFlow(s, "A", "10.1.0.3:5000", 1, "send", 100);
  AddFlow(s, "B", "10.1.0.3:5001", -1, "send", 201);  // striped: 101 on path 0, 100 on path 1
  AddFlow(s, "A", "10.1.0.3:5000", 0, "recv", 1u << 30);  // receive rows are not counted
  AddFlow(s, "C", "10.9.9.9:1", 0, "send", 50);           // no path socket: unrouted
  const LinkLoad l = LinkHotSpots(s, *topo);
  EXPECT_EQ(l.unrouted_bytes, 50u);
  std::map<std::string, nlohmann::json> links;
  for (const auto& x : l.links) links[x["link"].get<std::string>()] = x;
  ASSERT_EQ(links.size(), 6u) << l.links.dump();
  EXPECT_EQ(links["h0-nic0~leaf0"]["bytes"], 1201);
  EXPECT_EQ(links["leaf0~spine0"]["tasks"]["A"], 900);
  EXPECT_EQ(links["leaf0~spine0"]["tasks"]["B"], 101);
  EXPECT_EQ(links["leaf1~spine1"]["tasks"]["A"], 100);
  EXPECT_EQ(links["leaf1~spine1"]["tasks"]["B"], 100);
  std::map<std::string, nlohmann::json> hot;
  for (const auto& h : l.hot_spots) hot[h["link"].get<std::string>()] = h;
  // A: 900 of 1001 on spine0's links (89.9%), 1000 of 1201 on the NICs' (83.3%); 50% on spine1's.
  ASSERT_EQ(hot.size(), 4u) << l.hot_spots.dump();
  for (const char* id : {"h0-nic0~leaf0", "h1-nic0~leaf1", "leaf0~spine0", "leaf1~spine0"}) {
    ASSERT_TRUE(hot.count(id)) << id << " " << l.hot_spots.dump();
    EXPECT_EQ(hot[id]["task"], "A");
  }
  EXPECT_EQ(hot["leaf0~spine0"]["bytes"], 900);
  EXPECT_EQ(hot["leaf0~spine0"]["link_bytes"], 1001);
  EXPECT_NEAR(hot["h0-nic0~leaf0"]["share"].get<double>(), 1000.0 / 1201.0, 1e-9);
  // A higher threshold keeps only spine0's links.
  EXPECT_EQ(LinkHotSpots(s, *topo, 0.85).hot_spots.size(), 2u);
}

TEST(ProbeLinkHotSpots, AFailedBackPathIsPlacedOnItsNewSocketOnly) {
  std::string error;
  auto topo = pathctl::ParseTopologyJson(kTopology, &error);
  ASSERT_TRUE(topo) << error;
  Snapshot s;
  s.timeline = {
      PathUp("A", "10.1.0.3:5000", 0, "10.1.0.2:50000->10.1.0.3:5000"),  // spine0
      PathUp("A", "10.1.0.3:5000", 1, "10.1.0.2:50002->10.1.0.3:5000"),  // spine0; fails, then
      PathUp("A", "10.1.0.3:5000", 1, "10.1.0.2:60000->10.1.0.3:6000"),  // failback on spine1
  };
  AddFlow(s, "A", "10.1.0.3:5000", 1, "send", 300);   // path 1: on its latest socket
  AddFlow(s, "A", "10.1.0.3:5000", -1, "send", 100);  // striped: one socket per path, 50 each
  const LinkLoad l = LinkHotSpots(s, *topo);
  EXPECT_EQ(l.unrouted_bytes, 0u);
  std::map<std::string, nlohmann::json> links;
  for (const auto& x : l.links) links[x["link"].get<std::string>()] = x;
  EXPECT_EQ(links["h0-nic0~leaf0"]["bytes"], 400) << l.links.dump();
  EXPECT_EQ(links["leaf0~spine0"]["bytes"], 50) << l.links.dump();
  EXPECT_EQ(links["leaf0~spine1"]["bytes"], 350) << l.links.dump();
}

}  // namespace
}  // namespace ff::probe
