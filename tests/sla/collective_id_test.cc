#include "sla/collective_id.h"

#include <gtest/gtest.h>

namespace ff::sla {
namespace {

TEST(CollectiveId, SingleOpBitDecodes) {
  EXPECT_EQ(CollectiveFromOpMask(1u << 0), Collective::kBroadcast);
  EXPECT_EQ(CollectiveFromOpMask(1u << 2), Collective::kAllGather);
  EXPECT_EQ(CollectiveFromOpMask(1u << 3), Collective::kReduceScatter);
  EXPECT_EQ(CollectiveFromOpMask(1u << 4), Collective::kAllReduce);
  EXPECT_EQ(CollectiveFromOpMask(1u << 7), Collective::kRecv);
  EXPECT_EQ(CollectiveFromOpMask(1u << 10), Collective::kGather);
  EXPECT_STREQ(CollectiveName(CollectiveFromOpMask(1u << 8)), "AllToAll");
}

TEST(CollectiveId, UndefinedEmptyAndUnknownBitsAreUnknown) {
  EXPECT_EQ(CollectiveFromOpMask(0xFFFFFFFFu), Collective::kUnknown);
  EXPECT_EQ(CollectiveFromOpMask(0), Collective::kUnknown);
  EXPECT_EQ(CollectiveFromOpMask(1u << 11), Collective::kUnknown);
  EXPECT_STREQ(CollectiveName(Collective::kUnknown), "unknown");
}

TEST(CollectiveId, SeveralBitsAreMixed) {
  const uint32_t p2p_hint = (1u << 6) | (1u << 7) | (1u << 8) | (1u << 9) | (1u << 10);
  EXPECT_EQ(CollectiveFromOpMask(p2p_hint), Collective::kMixed);
}

TEST(CollectiveId, NcclNamesIncludingAlltoAllSpelling) {
  EXPECT_EQ(CollectiveFromName("AllReduce"), Collective::kAllReduce);
  EXPECT_EQ(CollectiveFromName("AlltoAll"), Collective::kAllToAll);
  EXPECT_EQ(CollectiveFromName("Send"), Collective::kSend);
  EXPECT_EQ(CollectiveFromName("PutSignal"), Collective::kUnknown);
}

TEST(CollectiveId, AlgorithmAndProtocolMasks) {
  EXPECT_STREQ(AlgorithmNameFromMask(1u << 1), "Ring");
  EXPECT_STREQ(AlgorithmNameFromMask(1u << 6), "PAT");
  EXPECT_STREQ(AlgorithmNameFromMask(3), "mixed");
  EXPECT_STREQ(ProtocolNameFromMask(1u << 2), "Simple");
  EXPECT_STREQ(ProtocolNameFromMask(0xFFFFFFFFu), "unknown");
}

TEST(CollectiveId, FallbackOrderProfilerThenNetAttrThenUnknown) {
  CollectiveAttribution prof;
  prof.collective = Collective::kAllGather;
  prof.seq_number = 9;
  prof.source = CollectiveAttribution::Source::kProfiler;
  const auto a = ChooseAttribution(prof, 1u << 4, 1u << 1);
  EXPECT_EQ(a.collective, Collective::kAllGather);
  EXPECT_EQ(a.seq_number, 9u);

  const auto b = ChooseAttribution({}, 1u << 4, 1u << 1);
  EXPECT_EQ(b.collective, Collective::kAllReduce);
  EXPECT_EQ(b.source, CollectiveAttribution::Source::kNetAttr);
  EXPECT_STREQ(b.algorithm, "Ring");

  const auto c = ChooseAttribution({}, 0xFFFFFFFFu, 0xFFFFFFFFu);
  EXPECT_EQ(c.collective, Collective::kUnknown);
  EXPECT_EQ(c.source, CollectiveAttribution::Source::kNone);
}

}  // namespace
}  // namespace ff::sla
