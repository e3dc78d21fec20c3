// The batch of completed messages behind the msgs_done probe (core/probe_batch.h).
#include "core/probe_batch.h"

#include <gtest/gtest.h>

#include <cstddef>

namespace ff {
namespace {

// The layout bpf/probe.bpf.c reads (it includes the same header; these catch a reordering).
static_assert(sizeof(ff_probe_record) == 24);
static_assert(offsetof(ff_probe_record, bytes) == 8);
static_assert(offsetof(ff_probe_record, path) == 16);
static_assert(offsetof(ff_probe_record, collective) == 20);
static_assert(offsetof(ff_probe_record, dir) == 22);

TEST(ProbeBatch, FullAfterBatchMaxRecordsWhichKeepTheirFields) {
  ProbeBatch b;
  for (int i = 0; i < FF_PROBE_BATCH_MAX - 1; ++i)
    EXPECT_FALSE(b.Append(i & 1, static_cast<uint16_t>(i), 1000u + i, i - 1, 10u * i, 5)) << i;
  EXPECT_EQ(b.count(), uint64_t{FF_PROBE_BATCH_MAX - 1});
  EXPECT_TRUE(b.Append(FF_PROBE_RECV_DIR, 7, 99, -1, 123, 6));
  ASSERT_EQ(b.count(), uint64_t{FF_PROBE_BATCH_MAX});
  for (int i = 0; i < FF_PROBE_BATCH_MAX - 1; ++i) {
    const ff_probe_record& r = b.records()[i];
    EXPECT_EQ(r.dir, i & 1);
    EXPECT_EQ(r.collective, i);
    EXPECT_EQ(r.bytes, 1000u + i);
    EXPECT_EQ(r.path, i - 1);
    EXPECT_EQ(r.latency_ns, 10u * i);
    EXPECT_EQ(r.reserved, 0);
  }
  EXPECT_EQ(b.records()[FF_PROBE_BATCH_MAX - 1].path, -1);
  b.Clear();
  EXPECT_EQ(b.count(), 0u);
}

TEST(ProbeBatch, OldCountsFromTheFirstRecordSinceTheLastClear) {
  ProbeBatch b;
  EXPECT_FALSE(b.Old(ProbeBatch::kMaxAgeNs * 10));  // empty: nothing to fire
  b.Append(FF_PROBE_SEND_DIR, 1, 8, 0, 1, 1000);
  b.Append(FF_PROBE_SEND_DIR, 1, 8, 0, 1, 1000 + ProbeBatch::kMaxAgeNs);  // a later record does not restart it
  EXPECT_FALSE(b.Old(1000 + ProbeBatch::kMaxAgeNs - 1));
  EXPECT_TRUE(b.Old(1000 + ProbeBatch::kMaxAgeNs));
  b.Clear();
  b.Append(FF_PROBE_SEND_DIR, 1, 8, 0, 1, 5000 + ProbeBatch::kMaxAgeNs);
  EXPECT_FALSE(b.Old(5000 + ProbeBatch::kMaxAgeNs));
}

}  // namespace
}  // namespace ff
