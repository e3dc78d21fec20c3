// FEC statistics: the fixture stand-in and the real ethtool netlink query.
#include "health/fec_stats.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/pcie/fixture_tree.h"

namespace ff::health {
namespace {

using ff::testing::FixtureTree;

TEST(FecFixture, ParsesAllThreeCountersAndAllowsMissingOnes) {
  FecStats s;
  std::string err;
  ASSERT_TRUE(ParseFecFixture("corrected_blocks 10\nuncorrectable_blocks 2\ncorrected_bits 300\n", &s, &err)) << err;
  EXPECT_EQ(*s.corrected_blocks, 10u);
  EXPECT_EQ(*s.uncorrectable_blocks, 2u);
  EXPECT_EQ(*s.corrected_bits, 300u);
  ASSERT_TRUE(ParseFecFixture("uncorrectable_blocks 7\n", &s, &err)) << err;
  EXPECT_EQ(*s.uncorrectable_blocks, 7u);
  EXPECT_FALSE(s.corrected_bits);
}

TEST(FecFixture, RejectsUnknownKeysAndBadNumbersWithTheLine) {
  FecStats s;
  std::string err;
  EXPECT_FALSE(ParseFecFixture("corrected_blocks 1\nbogus 3\n", &s, &err));
  EXPECT_NE(err.find("line 2 'bogus 3'"), std::string::npos) << err;
  EXPECT_FALSE(ParseFecFixture("uncorrectable_blocks many\n", &s, &err));
  EXPECT_NE(err.find("uncorrectable_blocks N"), std::string::npos) << err;
}

TEST(FecStatsSource, FixtureFileUnderRootIsRead) {
  FixtureTree t;
  t.Write("ethtool/eth0/fec", "corrected_blocks 5\nuncorrectable_blocks 1\ncorrected_bits 9\n");
  FecStatsSource src(t.root());
  FecStats s;
  std::string err;
  ASSERT_EQ(src.Read("eth0", &s, &err), FecStatus::kOk) << err;
  EXPECT_EQ(*s.corrected_blocks, 5u);
  EXPECT_EQ(*s.uncorrectable_blocks, 1u);
  EXPECT_EQ(*s.corrected_bits, 9u);
}

TEST(FecStatsSource, MissingFixtureIsUnsupportedNotAnError) {
  FixtureTree t;
  FecStatsSource src(t.root());
  FecStats s;
  std::string err;
  EXPECT_EQ(src.Read("veth0", &s, &err), FecStatus::kUnsupported);
  EXPECT_TRUE(err.empty());
}

TEST(FecStatsSource, MalformedFixtureIsAnErrorNamingTheFile) {
  FixtureTree t;
  t.Write("ethtool/eth0/fec", "corrected_blocks ten\n");
  FecStatsSource src(t.root());
  FecStats s;
  std::string err;
  EXPECT_EQ(src.Read("eth0", &s, &err), FecStatus::kError);
  EXPECT_NE(err.find(t.Path("ethtool/eth0/fec")), std::string::npos) << err;
  EXPECT_NE(err.find("corrected_blocks N"), std::string::npos) << err;
}

// Real kernel: lo has no FEC; the netlink query must say so cleanly, every time.
TEST(FecStatsSourceRealKernel, LoopbackFecQueryIsUnsupported) {
  FecStatsSource src("");
  for (int i = 0; i < 3; ++i) {
    FecStats s;
    std::string err;
    EXPECT_EQ(src.Read("lo", &s, &err), FecStatus::kUnsupported) << err;
    EXPECT_TRUE(err.empty()) << err;
    EXPECT_FALSE(s.uncorrectable_blocks);
  }
}

TEST(FecStatsSourceRealKernel, MissingInterfaceIsUnsupported) {
  FecStatsSource src("");
  FecStats s;
  std::string err;
  EXPECT_EQ(src.Read("ffnosuch0", &s, &err), FecStatus::kUnsupported) << err;
}

}  // namespace
}  // namespace ff::health
