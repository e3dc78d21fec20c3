#include "sla/sla_declaration.h"

#include <gtest/gtest.h>

#include "tests/sla/env_map.h"

namespace ff::sla {
namespace {

using testing::MapEnv;

TEST(SlaLatencyParse, BareNumberIsMicroseconds) {
  EXPECT_EQ(ParseSlaLatencyNs("50").value, 50'000u);
  EXPECT_EQ(ParseSlaLatencyNs(" 75 ").value, 75'000u);
  EXPECT_EQ(ParseSlaLatencyNs("12.5").value, 12'500u);
}

TEST(SlaLatencyParse, ExplicitUnitsConvertToNanoseconds) {
  EXPECT_EQ(ParseSlaLatencyNs("50us").value, 50'000u);
  EXPECT_EQ(ParseSlaLatencyNs("50 us").value, 50'000u);
  EXPECT_EQ(ParseSlaLatencyNs("50\xc2\xb5s").value, 50'000u);
  EXPECT_EQ(ParseSlaLatencyNs("0.05ms").value, 50'000u);
  EXPECT_EQ(ParseSlaLatencyNs("50000ns").value, 50'000u);
  EXPECT_EQ(ParseSlaLatencyNs("2MS").value, 2'000'000u);
  EXPECT_EQ(ParseSlaLatencyNs("1s").value, 1'000'000'000u);
}

TEST(SlaLatencyParse, UnsetIsNoSlaWithoutError) {
  const auto r = ParseSlaLatencyNs(nullptr);
  EXPECT_FALSE(r.value);
  EXPECT_TRUE(r.error.empty());
}

TEST(SlaLatencyParse, RejectsBadValuesNamingVariableAndForm) {
  for (const char* bad : {"", "abc", "-5", "0", "0us", "0.0001ns", "11s", "20000000", "5 parsecs", "nan", "inf",
                          "1e3", "50usx", "--5"}) {
    const auto r = ParseSlaLatencyNs(bad);
    EXPECT_FALSE(r.value) << "accepted '" << bad << "'";
    EXPECT_NE(r.error.find("AI_SLA_LATENCY"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("accepted:"), std::string::npos) << r.error;
  }
}

TEST(SlaLatencyParse, ExponentNotationIsNamedNotCalledAUnit) {
  for (const char* bad : {"1e9", "5E3", "2e-3", "1e+2"}) {
    const auto r = ParseSlaLatencyNs(bad);
    EXPECT_FALSE(r.value) << bad;
    EXPECT_NE(r.error.find("exponent notation is not accepted"), std::string::npos) << r.error;
  }
  EXPECT_NE(ParseSlaLatencyNs("5 parsecs").error.find("unknown unit"), std::string::npos);
  EXPECT_NE(ParseSlaLatencyNs("5em").error.find("unknown unit"), std::string::npos);
}

TEST(SlaLatencyParse, TenSecondsIsTheLargestAccepted) {
  EXPECT_EQ(ParseSlaLatencyNs("10s").value, kMaxSlaLatencyNs);
  EXPECT_FALSE(ParseSlaLatencyNs("10000001").value);
}

TEST(EnableParse, OneSteersZeroOrUnsetObserves) {
  EXPECT_TRUE(*ParseEnable("1").value);
  EXPECT_TRUE(*ParseEnable("TRUE").value);
  EXPECT_FALSE(*ParseEnable("0").value);
  EXPECT_FALSE(*ParseEnable(nullptr).value);
  EXPECT_TRUE(ParseEnable(nullptr).error.empty());
}

TEST(EnableParse, GarbageObservesAndReports) {
  const auto r = ParseEnable("2");
  EXPECT_FALSE(*r.value);
  EXPECT_NE(r.error.find("AI_FLEXIFORCE_ENABLE"), std::string::npos);
  // The message lists every word the parser takes, not only 1 and 0.
  for (const char* word : {"true", "on", "yes", "false", "off", "no"}) {
    EXPECT_NE(r.error.find(word), std::string::npos) << word << " missing from: " << r.error;
    EXPECT_TRUE(ParseEnable(word).error.empty()) << word;
  }
}

TEST(SlaDeclaration, ReadsAllThreeVariables) {
  Warnings w;
  const auto d = ReadSlaDeclaration(
      MapEnv({{"AI_SLA_LATENCY", "0.08ms"}, {"AI_TASK_ID", "llama-7b"}, {"AI_FLEXIFORCE_ENABLE", "1"}}), w);
  EXPECT_EQ(d.latency_ns, 80'000u);
  EXPECT_EQ(d.task.id, "llama-7b");
  EXPECT_EQ(d.task.source, "AI_TASK_ID");
  EXPECT_TRUE(d.steer);
  EXPECT_TRUE(w.All().empty());
}

TEST(SlaDeclaration, BadValuesFallBackToDefaultsAndWarnOncePerVariable) {
  Warnings w;
  const auto env = MapEnv({{"AI_SLA_LATENCY", "fast"}, {"AI_FLEXIFORCE_ENABLE", "maybe"}});
  for (int i = 0; i < 3; ++i) {
    const auto d = ReadSlaDeclaration(env, w);
    EXPECT_FALSE(d.latency_ns);
    EXPECT_FALSE(d.steer);
  }
  const auto all = w.All();
  ASSERT_EQ(all.size(), 2u);
  std::vector<std::string> drained;
  w.Drain([&](const std::string& m) { drained.push_back(m); });
  w.Drain([&](const std::string& m) { drained.push_back(m); });
  EXPECT_EQ(drained, all);
}

}  // namespace
}  // namespace ff::sla
