// Drives the exported ncclProfiler_v4/v5 tables the way NCCL does, with synthetic descriptors.
#include <gtest/gtest.h>

#include "sla/net_event_probe.h"
#include "nccl/profiler_abi.h"
#include "sla/profiler_event_pool.h"

extern "C" ncclProfiler_v4_t ncclProfiler_v4;
extern "C" ncclProfiler_v5_t ncclProfiler_v5;

namespace ff::sla {
namespace {

struct FakeNcclStepRecord {
  void* step_event_handle;
  void* sub_args;
};

TEST(ProfilerPluginV5, AttributesIsendPhandleToCollective) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(ncclProfiler_v5.init(&ctx, 0xabc, &mask, "comm", 2, 4, 1, nullptr), ncclSuccess);
  EXPECT_TRUE(mask & ncclProfileColl);
  EXPECT_TRUE(mask & ncclProfileProxyStep);
  EXPECT_TRUE(mask & ncclProfileNetPlugin);

  ncclProfilerEventDescr_v5_t d{};
  d.type = ncclProfileColl;
  d.coll.base.func = "AllGather";
  d.coll.base.seqNumber = 12;
  d.coll.base.count = 4096;
  d.coll.base.datatype = "ncclBfloat16";
  d.coll.base.algo = "Ring";
  void* coll = nullptr;
  ncclProfiler_v5.startEvent(ctx, &coll, &d);
  ASSERT_NE(coll, nullptr);
  ncclProfiler_v5.stopEvent(coll);  // as NCCL does right after the launch

  ncclProfilerEventDescr_v5_t op{};
  op.type = ncclProfileProxyOp;
  op.parentObj = coll;
  op.proxyOp.isSend = 1;
  void* op_h = nullptr;
  ncclProfiler_v5.startEvent(ctx, &op_h, &op);
  ncclProfilerEventDescr_v5_t st{};
  st.type = ncclProfileProxyStep;
  st.parentObj = op_h;
  FakeNcclStepRecord rec{nullptr, nullptr};
  ncclProfiler_v5.startEvent(ctx, &rec.step_event_handle, &st);

  const auto a = AttributeNetEvent(&rec);
  EXPECT_EQ(a.collective, Collective::kAllGather);
  EXPECT_EQ(a.seq_number, 12u);
  EXPECT_EQ(a.count, 4096u);
  EXPECT_STREQ(a.datatype, "ncclBfloat16");

  // The documented route: NCCL turns the net plugin's callback into a NetPlugin startEvent.
  NetEventProbe probe;
  ncclProfilerEventDescr_v5_t net{};
  net.type = ncclProfileNetPlugin;
  net.parentObj = rec.step_event_handle;
  net.netPlugin.id = kFlexiForceNetEventId;
  net.netPlugin.data = &probe;
  void* net_h = reinterpret_cast<void*>(1);
  ncclProfiler_v5.startEvent(ctx, &net_h, &net);
  EXPECT_EQ(net_h, nullptr);
  EXPECT_EQ(probe.result.collective, Collective::kAllGather);
  EXPECT_EQ(ncclProfiler_v5.stopEvent(net_h), ncclSuccess);

  ncclProfiler_v5.stopEvent(rec.step_event_handle);
  ncclProfiler_v5.stopEvent(op_h);
  EXPECT_EQ(ncclProfiler_v5.finalize(ctx), ncclSuccess);
}

TEST(ProfilerPluginV4, AttributesP2pThroughV4Layout) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(ncclProfiler_v4.init(&ctx, &mask, "comm", 0x1, 2, 2, 0, nullptr), ncclSuccess);
  ncclProfilerEventDescr_v4_t d{};
  d.type = ncclProfileP2p;
  d.p2p.func = "Recv";
  d.p2p.peer = 3;
  d.p2p.count = 99;
  void* p2p = nullptr;
  ncclProfiler_v4.startEvent(ctx, &p2p, &d);
  ncclProfilerEventDescr_v4_t op{};
  op.type = ncclProfileProxyOp;
  op.parentObj = p2p;
  void* op_h = nullptr;
  ncclProfiler_v4.startEvent(ctx, &op_h, &op);
  ncclProfilerEventDescr_v4_t st{};
  st.type = ncclProfileProxyStep;
  st.parentObj = op_h;
  FakeNcclStepRecord rec{nullptr, nullptr};
  ncclProfiler_v4.startEvent(ctx, &rec.step_event_handle, &st);
  const auto a = AttributeNetEvent(&rec);
  EXPECT_EQ(a.collective, Collective::kRecv);
  EXPECT_EQ(a.peer, 3);
  EXPECT_EQ(a.count, 99u);
  ncclProfiler_v4.stopEvent(rec.step_event_handle);
  ncclProfiler_v4.stopEvent(op_h);
  ncclProfiler_v4.stopEvent(p2p);
  EXPECT_EQ(ncclProfiler_v4.finalize(ctx), ncclSuccess);
  EXPECT_STREQ(ncclProfiler_v4.name, "FlexiForce");
}

}  // namespace
}  // namespace ff::sla
