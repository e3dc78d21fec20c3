#include "sla/stats_render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <set>
#include <sstream>

namespace ff::sla {
namespace {

using ::testing::HasSubstr;

std::vector<StatsSnapshot> Sample() {
  StatsSnapshot p;
  p.pid = 321;
  p.alive = true;
  p.path = "/dev/shm/flexiforce-stats-321";
  SlotSnapshot s;
  s.task = "job\"1";
  s.collective = Collective::kAllReduce;
  s.peer = "10.0.0.2:5000";
  s.path_id = 1;
  s.path_name = "eth0 10.0.0.1 -> 10.0.0.2 via spine1";
  s.send.bytes = 3000;
  s.send.messages = 3;
  s.send.latency_sum_ns = 3500;
  s.send.histogram[LatencyBucket(1000)] = 2;
  s.send.histogram[LatencyBucket(1500)] = 1;
  p.slots.push_back(s);
  TaskSnapshot t;
  t.task = "job\"1";
  t.sla_ns = 50'000;
  t.level = 2;
  t.heat = 4.5;
  t.failover_events = 1;
  p.tasks.push_back(t);
  return {p};
}

TEST(StatsRender, PrometheusFollowsTextExpositionFormat) {
  const std::string text = RenderStatsPrometheus(Sample());
  // Every line is a HELP/TYPE comment or `name{labels} value`.
  const std::regex sample(R"(^[a-zA-Z_:][a-zA-Z0-9_:]*\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\} [-+0-9.eE]+|\+Inf$)");
  const std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  std::istringstream in(text);
  std::string line;
  std::set<std::string> typed;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(typed.insert(name).second) << "family declared twice: " << name;
    }
    EXPECT_TRUE(std::regex_match(line, sample) || std::regex_match(line, comment)) << "bad line: " << line;
  }
  EXPECT_THAT(text, HasSubstr("flexiforce_bytes_total{pid=\"321\",task=\"job\\\"1\",collective=\"AllReduce\","
                              "peer=\"10.0.0.2:5000\",path=\"1\",path_name=\"eth0 10.0.0.1 -> 10.0.0.2 via spine1\","
                              "direction=\"send\"} 3000\n"));
  // Cumulative histogram: 2 at <= 1024 ns, 3 at <= 2048 ns, +Inf equals the count.
  EXPECT_THAT(text, HasSubstr("direction=\"send\",le=\"1.024e-06\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("direction=\"send\",le=\"2.048e-06\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("direction=\"send\",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("flexiforce_message_latency_seconds_sum{"));
  EXPECT_THAT(text, HasSubstr("flexiforce_task_sla_seconds{pid=\"321\",task=\"job\\\"1\"} 5e-05\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE flexiforce_message_latency_seconds histogram\n"));
  // The receive direction carried nothing, so it has no samples.
  EXPECT_EQ(text.find("direction=\"recv\""), std::string::npos);
}

TEST(StatsRender, JsonCarriesEveryCounter) {
  const auto j = nlohmann::json::parse(RenderStatsJson(Sample()));
  const auto& p = j.at("processes").at(0);
  EXPECT_EQ(p.at("pid"), 321);
  const auto& f = p.at("flows").at(0);
  EXPECT_EQ(f.at("collective"), "AllReduce");
  EXPECT_EQ(f.at("path"), 1);  // the oracle's id stays for scripts that join on it
  EXPECT_EQ(f.at("path_name"), "eth0 10.0.0.1 -> 10.0.0.2 via spine1");
  EXPECT_EQ(f.at("send").at("bytes"), 3000);
  EXPECT_EQ(f.at("send").at("latency_histogram").size(), 2u);
  EXPECT_EQ(f.at("send").at("latency_histogram").at(0).at("le_ns"), 1024);
  EXPECT_EQ(p.at("tasks").at(0).at("sla_ns"), 50000);
  EXPECT_EQ(p.at("tasks").at(0).at("failover").at("events"), 1);
}

TEST(StatsRender, LabelEscaping) {
  EXPECT_EQ(EscapePrometheusLabel("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

TEST(StatsRender, TextNamesProcessAndFlows) {
  const std::string text = RenderStatsText(Sample());
  EXPECT_THAT(text, HasSubstr("pid 321"));
  EXPECT_THAT(text, HasSubstr("AllReduce"));
  EXPECT_THAT(RenderStatsText({}), HasSubstr("no FlexiForce statistics"));
}

TEST(StatsRender, TextNamesThePathNotItsHash) {
  auto snaps = Sample();
  snaps[0].slots[0].path_id = 1622425797;  // an oracle hash, as a steered path carries
  const std::string text = RenderStatsText(snaps);
  EXPECT_THAT(text, HasSubstr("eth0 10.0.0.1 -> 10.0.0.2 via spine1"));
  EXPECT_EQ(text.find("1622425797"), std::string::npos) << text;
  // A version-2 file has no names: the id is shown, marked as one.
  snaps[0].slots[0].path_name.clear();
  EXPECT_THAT(RenderStatsText(snaps), HasSubstr("id 1622425797"));
}

// The slot that holds a task's closed connections (reclaimed slots' totals) reads as what it is in
// every format: peer "(closed)" and path "closed connections", and --json says so in a field.
TEST(StatsRender, ClosedConnectionsSlotIsNamedInEveryFormat) {
  auto snaps = Sample();
  SlotSnapshot closed;
  closed.task = "job\"1";
  closed.collective = Collective::kAllReduce;
  closed.peer = std::string(kStatsClosedPeer);
  closed.path_name = std::string(kStatsClosedPathName);
  closed.send.bytes = 123456;
  closed.send.messages = 789;
  ASSERT_TRUE(closed.closed_connections());
  ASSERT_FALSE(snaps[0].slots[0].closed_connections());
  snaps[0].slots.push_back(closed);

  const std::string text = RenderStatsText(snaps);
  EXPECT_THAT(text, ::testing::ContainsRegex(R"(\(closed\) +send +123456 +789 .* closed connections)")) << text;
  const auto flows = nlohmann::json::parse(RenderStatsJson(snaps)).at("processes").at(0).at("flows");
  ASSERT_EQ(flows.size(), 2u);
  EXPECT_EQ(flows.at(0).at("closed_connections"), false);
  EXPECT_EQ(flows.at(1).at("closed_connections"), true);
  EXPECT_EQ(flows.at(1).at("peer"), "(closed)");
  EXPECT_EQ(flows.at(1).at("path_name"), "closed connections");
  EXPECT_EQ(flows.at(1).at("send").at("bytes"), 123456u);
  EXPECT_THAT(RenderStatsPrometheus(snaps),
              HasSubstr("peer=\"(closed)\",path=\"0\",path_name=\"closed connections\",direction=\"send\"} 123456\n"));
}

}  // namespace
}  // namespace ff::sla
