#include "sla/profiler_event_pool.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "nccl/profiler_abi.h"

namespace ff::sla {
namespace {

ProfilerEventInfo Coll(const char* func, uint64_t seq, uint64_t count) {
  ProfilerEventInfo i;
  i.type = ncclProfileColl;
  i.func = func;
  i.seq_number = seq;
  i.count = count;
  i.datatype = "ncclFloat32";
  i.algo = "Ring";
  return i;
}

ProfilerEventInfo Child(uint64_t type, void* parent) {
  ProfilerEventInfo i;
  i.type = type;
  i.parent = parent;
  return i;
}

// NCCL 2.27+'s per-step record: the ProxyStep handle first, NCCL's own pointer after it.
struct FakeNcclStepRecord {
  void* step_event_handle;
  void* sub_args;
};

TEST(ProfilerEventPool, WalksNetPluginToProxyStepToProxyOpToColl) {
  ProfilerEventPool pool(64, 8);
  void* coll = pool.Start(Coll("AllReduce", 41, 1 << 20));
  void* op = pool.Start(Child(ncclProfileProxyOp, coll));
  void* step = pool.Start(Child(ncclProfileProxyStep, op));
  void* net = pool.Start(Child(ncclProfileNetPlugin, step));
  ASSERT_NE(net, nullptr);
  for (void* h : {net, step, op, coll}) {
    const auto a = pool.Attribute(h);
    EXPECT_EQ(a.collective, Collective::kAllReduce);
    EXPECT_EQ(a.seq_number, 41u);
    EXPECT_EQ(a.count, uint64_t{1} << 20);
    EXPECT_STREQ(a.datatype, "ncclFloat32");
    EXPECT_STREQ(a.algorithm, "Ring");
    EXPECT_EQ(a.source, CollectiveAttribution::Source::kProfiler);
  }
  FakeNcclStepRecord rec{step, reinterpret_cast<void*>(0x1234)};
  EXPECT_EQ(pool.AttributeNetEvent(&rec).collective, Collective::kAllReduce);
  EXPECT_EQ(pool.AttributeNetEvent(step).collective, Collective::kAllReduce);  // pre-2.27 style
}

TEST(ProfilerEventPool, P2pAttributionCarriesPeer) {
  ProfilerEventPool pool(64, 8);
  ProfilerEventInfo p2p;
  p2p.type = ncclProfileP2p;
  p2p.func = "Send";
  p2p.peer = 5;
  p2p.count = 77;
  void* task = pool.Start(p2p);
  void* op = pool.Start(Child(ncclProfileProxyOp, task));
  void* step = pool.Start(Child(ncclProfileProxyStep, op));
  const auto a = pool.Attribute(step);
  EXPECT_EQ(a.collective, Collective::kSend);
  EXPECT_EQ(a.peer, 5);
  EXPECT_EQ(a.count, 77u);
}

TEST(ProfilerEventPool, ForeignOrMissingHandlesAttributeAsNone) {
  ProfilerEventPool pool(64, 8);
  int foreign = 0;
  FakeNcclStepRecord no_profiler{nullptr, nullptr};
  FakeNcclStepRecord other_profiler{&foreign, nullptr};
  EXPECT_EQ(pool.AttributeNetEvent(nullptr).source, CollectiveAttribution::Source::kNone);
  EXPECT_EQ(pool.AttributeNetEvent(&no_profiler).source, CollectiveAttribution::Source::kNone);
  EXPECT_EQ(pool.AttributeNetEvent(&other_profiler).source, CollectiveAttribution::Source::kNone);
  void* coll = pool.Start(Coll("AllGather", 1, 1));
  // A pointer inside the pool but not at a slot boundary is not an event.
  EXPECT_FALSE(pool.Owns(static_cast<char*>(coll) + 1));
  // A ProxyStep whose parent is unknown to us has no collective.
  void* orphan = pool.Start(Child(ncclProfileProxyStep, &foreign));
  EXPECT_EQ(pool.Attribute(orphan).source, CollectiveAttribution::Source::kNone);
}

TEST(ProfilerEventPool, StoppedCollStaysValidForLateProxyOps) {
  ProfilerEventPool pool(64, 4);
  void* coll = pool.Start(Coll("Broadcast", 3, 10));
  pool.Stop(coll);  // NCCL stops Coll at kernel launch, before the proxy starts its ops
  void* op = pool.Start(Child(ncclProfileProxyOp, coll));
  void* step = pool.Start(Child(ncclProfileProxyStep, op));
  EXPECT_EQ(pool.Attribute(step).collective, Collective::kBroadcast);
  pool.Stop(step);
  pool.Stop(op);
  EXPECT_EQ(pool.LiveEvents(), 1u);  // only the lingering Coll
}

TEST(ProfilerEventPool, ParentOutlivesLingerWhileChildrenLive) {
  ProfilerEventPool pool(64, 2);
  void* coll = pool.Start(Coll("ReduceScatter", 8, 1));
  void* op = pool.Start(Child(ncclProfileProxyOp, coll));
  pool.Stop(coll);
  for (int i = 0; i < 5; ++i) pool.Stop(pool.Start(Coll("AllReduce", 100 + i, 1)));  // push it out of the ring
  EXPECT_EQ(pool.Attribute(op).collective, Collective::kReduceScatter);
  pool.Stop(op);  // last reference: the Coll goes back to the pool too
  EXPECT_EQ(pool.LiveEvents(), 2u);  // the two newest Colls still linger
}

TEST(ProfilerEventPool, ExhaustionYieldsNullAndRecovers) {
  ProfilerEventPool pool(4, 0);
  std::vector<void*> held;
  for (int i = 0; i < 4; ++i) held.push_back(pool.Start(Child(ncclProfileProxyOp, nullptr)));
  EXPECT_EQ(pool.Start(Child(ncclProfileProxyOp, nullptr)), nullptr);
  EXPECT_EQ(pool.Exhausted(), 1u);
  pool.Stop(held.back());
  EXPECT_NE(pool.Start(Child(ncclProfileProxyOp, nullptr)), nullptr);
}

TEST(ProfilerEventPool, UntrackedTypesAreNotStored) {
  ProfilerEventPool pool(4, 0);
  EXPECT_EQ(pool.Start(Child(ncclProfileProxyCtrl, nullptr)), nullptr);
  EXPECT_EQ(pool.LiveEvents(), 0u);
}

TEST(ProfilerEventPool, ConcurrentStartStopKeepsCountsBalanced) {
  ProfilerEventPool pool(1024, 16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 20000; ++i) {
        void* coll = pool.Start(Coll(t % 2 ? "AllReduce" : "AllGather", static_cast<uint64_t>(i), 1));
        void* op = pool.Start(Child(ncclProfileProxyOp, coll));
        pool.Stop(coll);
        void* step = pool.Start(Child(ncclProfileProxyStep, op));
        const auto a = pool.Attribute(step);
        if (a.collective != (t % 2 ? Collective::kAllReduce : Collective::kAllGather) ||
            a.seq_number != static_cast<uint64_t>(i))
          ADD_FAILURE() << "wrong attribution in thread " << t;
        pool.Stop(step);
        pool.Stop(op);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(pool.LiveEvents(), 16u);  // exactly the linger ring
  EXPECT_EQ(pool.Exhausted(), 0u);
}

}  // namespace
}  // namespace ff::sla
