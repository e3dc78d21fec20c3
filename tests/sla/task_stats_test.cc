#include "sla/task_stats.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "sla/stats_file_format.h"

namespace ff::sla {
namespace {

class TaskStatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ff-sla-stats-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.dir = dir_;
    options_.slots = 64;
    options_.tasks = 4;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  StatsTableOptions options_;
};

TEST(LatencyBucket, UpperBoundsArePowersOfTwoNanoseconds) {
  EXPECT_EQ(LatencyBucket(0), 0);
  EXPECT_EQ(LatencyBucket(1), 0);
  EXPECT_EQ(LatencyBucket(2), 1);
  EXPECT_EQ(LatencyBucket(3), 2);
  EXPECT_EQ(LatencyBucket(4), 2);
  EXPECT_EQ(LatencyBucket(1024), 10);
  EXPECT_EQ(LatencyBucket(1025), 11);
  EXPECT_EQ(LatencyBucket(~uint64_t{0}), kLatencyBuckets - 1);
}

// Unsteered paths all carry id 0: only their names tell eth0's traffic from eth1's, so the name is
// part of the key. A name longer than its field is cut at 127 bytes and still matches itself.
TEST_F(TaskStatsTest, PathNameIsPartOfTheKeyAndTruncatedToItsField) {
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  const std::string long_name = "eth0 " + std::string(200, 'x');
  const StatsKey eth0{"job1", Collective::kAllReduce, "10.0.0.2:5000", 0, "eth0 -> 10.0.0.2"};
  const StatsKey eth1{"job1", Collective::kAllReduce, "10.0.0.2:5001", 0, "eth1 -> 10.0.0.2"};
  const StatsKey longer{"job1", Collective::kAllReduce, "10.0.0.2:5002", 0, long_name};
  EXPECT_NE(table->Resolve(eth0), table->Resolve(eth1));
  EXPECT_EQ(table->Resolve(eth0), table->Resolve({"job1", Collective::kAllReduce, "10.0.0.2:6000", 0, "eth0 -> 10.0.0.2"}));
  EXPECT_EQ(table->Resolve(longer), table->Resolve(longer));
  table->Record(eth0, 100, 1, Direction::kSend);
  table->Record(eth1, 7, 1, Direction::kSend);
  table->Record(longer, 1, 1, Direction::kSend);
  auto snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  ASSERT_EQ(snap->slots.size(), 3u);
  std::map<std::string, uint64_t> bytes;
  for (const auto& s : snap->slots) bytes[s.path_name] = s.send.bytes;
  EXPECT_EQ(bytes["eth0 -> 10.0.0.2"], 100u);
  EXPECT_EQ(bytes["eth1 -> 10.0.0.2"], 7u);
  EXPECT_EQ(bytes[long_name.substr(0, kStatsPathNameCapacity - 1)], 1u);
}

TEST_F(TaskStatsTest, RecordsAreReadBackExactlyInProcess) {
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  const StatsKey k{"job1", Collective::kAllReduce, "10.0.0.2:5000", 1};
  table->Record(k, 1000, 1500, Direction::kSend);
  table->Record(k, 24, 3, Direction::kSend);
  table->Record(k, 7, 9, Direction::kRecv);
  table->Record({"job1", Collective::kAllGather, "10.0.0.2:5000", 1}, 5, 5, Direction::kSend);
  const uint32_t t = table->ResolveTask("job1");
  table->SetTaskSla(t, 50'000, 2);
  table->SetTaskHeat(t, 12.5);
  table->AddSlaUnattainable(t, 3);
  table->AddFailover(t, 1, 4096, 17'000'000);

  auto snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  EXPECT_TRUE(snap->alive);
  EXPECT_EQ(snap->pid, getpid());
  ASSERT_EQ(snap->slots.size(), 2u);
  const auto& ar = snap->slots[0].collective == Collective::kAllReduce ? snap->slots[0] : snap->slots[1];
  EXPECT_EQ(ar.task, "job1");
  EXPECT_EQ(ar.peer, "10.0.0.2");  // keyed by address: the ephemeral port is not kept
  EXPECT_EQ(ar.path_id, 1u);
  EXPECT_EQ(ar.send.bytes, 1024u);
  EXPECT_EQ(ar.send.messages, 2u);
  EXPECT_EQ(ar.send.latency_sum_ns, 1503u);
  EXPECT_EQ(ar.send.histogram[LatencyBucket(1500)], 1u);
  EXPECT_EQ(ar.send.histogram[LatencyBucket(3)], 1u);
  EXPECT_EQ(ar.recv.bytes, 7u);
  ASSERT_EQ(snap->tasks.size(), 1u);
  EXPECT_EQ(snap->tasks[0].sla_ns, 50'000u);
  EXPECT_EQ(snap->tasks[0].level, 2);
  EXPECT_DOUBLE_EQ(snap->tasks[0].heat, 12.5);
  EXPECT_EQ(snap->tasks[0].sla_unattainable, 3u);
  EXPECT_EQ(snap->tasks[0].failover_bytes_resent, 4096u);
  EXPECT_EQ(snap->tasks[0].failover_paused_ns, 17'000'000u);
}

// Only slots that nobody references can be reclaimed. With every slot held a new key is dropped
// (and counted), as before; a released slot first becomes its task's closed-connections slot,
// and the next released one is then reclaimed for the new key.
TEST_F(TaskStatsTest, FullTableOfReferencedSlotsCountsDropsInsteadOfOverwriting) {
  options_.slots = 2;
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  const uint32_t a = table->Resolve({"j", Collective::kBroadcast, "peer", 0});
  const uint32_t b = table->Resolve({"j", Collective::kBroadcast, "peer", 1});
  ASSERT_NE(a, StatsTable::kInvalid);
  ASSERT_NE(b, StatsTable::kInvalid);
  table->Record(a, 10, 1, Direction::kSend);
  table->Record(b, 20, 1, Direction::kSend);
  table->Record({"j", Collective::kBroadcast, "peer", 2}, 1, 1, Direction::kSend);
  auto snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  EXPECT_EQ(snap->slots.size(), 2u);
  EXPECT_EQ(snap->dropped, 1u);

  // `a` released: it becomes the closed-connections slot of (j, Broadcast), which leaves nothing
  // to reclaim for the new key while `b` is held.
  table->Release(a);
  EXPECT_EQ(table->Resolve({"j", Collective::kBroadcast, "peer", 3}), StatsTable::kInvalid);
  snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  EXPECT_EQ(snap->dropped, 2u);
  ASSERT_EQ(snap->slots.size(), 2u);
  EXPECT_TRUE(snap->slots[0].closed_connections());
  EXPECT_EQ(snap->slots[0].peer, "(closed)");
  EXPECT_EQ(snap->slots[0].path_name, "closed connections");
  EXPECT_EQ(snap->slots[0].send.bytes, 10u);
  EXPECT_EQ(snap->slots[1].send.bytes, 20u);  // `b`, held, untouched

  // `b` released: reclaimed for the new key, its bytes added to the closed connections.
  table->Release(b);
  const uint32_t c = table->Resolve({"j", Collective::kBroadcast, "peer", 3});
  EXPECT_EQ(c, b);
  table->Record(c, 5, 1, Direction::kSend);
  snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  EXPECT_EQ(snap->dropped, 2u);
  ASSERT_EQ(snap->slots.size(), 2u);
  EXPECT_EQ(snap->slots[0].send.bytes, 30u);
  EXPECT_EQ(snap->slots[0].send.messages, 2u);
  EXPECT_EQ(snap->slots[1].path_id, 3u);
  EXPECT_EQ(snap->slots[1].send.bytes, 5u);
  EXPECT_EQ(snap->slots[1].send.messages, 1u);
}

// What the reader reports summed per task, collective and direction, closed connections included.
struct Totals {
  uint64_t bytes = 0, messages = 0, latency_sum_ns = 0;
  std::vector<uint64_t> histogram = std::vector<uint64_t>(kLatencyBuckets);
  void Add(uint64_t b, uint64_t latency_ns) {
    bytes += b;
    ++messages;
    latency_sum_ns += latency_ns;
    ++histogram[LatencyBucket(latency_ns)];
  }
  void Add(const DirectionSnapshot& d) {
    bytes += d.bytes;
    messages += d.messages;
    latency_sum_ns += d.latency_sum_ns;
    for (int b = 0; b < kLatencyBuckets; ++b) histogram[b] += d.histogram[b];
  }
  bool operator==(const Totals&) const = default;
};
using TotalsKey = std::tuple<std::string, Collective, int>;  // task, collective, direction

std::map<TotalsKey, Totals> SumPerTask(const StatsSnapshot& snap) {
  std::map<TotalsKey, Totals> out;
  for (const auto& s : snap.slots) {
    out[{s.task, s.collective, 0}].Add(s.send);
    out[{s.task, s.collective, 1}].Add(s.recv);
  }
  return out;
}

// A long job: thousands of connections to distinct peers (and some back to earlier ones) opened,
// used and closed one after another in an 8-slot table. Nothing is dropped, and what the reader
// reports per task equals what was recorded, to the message and histogram bucket.
TEST_F(TaskStatsTest, ClosedConnectionsSlotsAreReclaimedAndTaskTotalsKept) {
  options_.slots = 8;
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  const char* tasks[] = {"jobA", "jobB"};
  const Collective collectives[] = {Collective::kAllReduce, Collective::kAllGather};
  std::map<TotalsKey, Totals> expected;
  std::deque<uint32_t> open;  // up to three connections at once
  for (int i = 0; i < 5000; ++i) {
    // 700 distinct peers: some come back while their slot still exists, others after it was reclaimed.
    const int p = (i * 7) % 700;
    const std::string peer = "10.1." + std::to_string(p / 200) + "." + std::to_string(p % 200) + ":" +
                             std::to_string(40000 + i);
    const std::string path = "eth" + std::to_string(i % 2) + " -> 10.1.0." + std::to_string(p % 200);
    const StatsKey key{tasks[p % 2], collectives[(p / 2) % 2], peer, static_cast<uint32_t>(p % 3), path};
    const uint32_t slot = table->Resolve(key);
    ASSERT_NE(slot, StatsTable::kInvalid) << "connection " << i;
    for (int m = 0; m < 1 + i % 3; ++m) {
      const uint64_t bytes = 100 + i + m, latency = 1ull << ((i + m) % 30);
      table->Record(slot, bytes, latency, Direction::kSend);
      expected[{key.task.data(), key.collective, 0}].Add(bytes, latency);
      table->Record(slot, bytes / 2, latency + 1, Direction::kRecv);
      expected[{key.task.data(), key.collective, 1}].Add(bytes / 2, latency + 1);
    }
    open.push_back(slot);
    if (open.size() > 3) {
      table->Release(open.front());
      open.pop_front();
    }
  }
  auto snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  EXPECT_EQ(snap->dropped, 0u);
  EXPECT_EQ(snap->slots.size(), 8u);
  EXPECT_TRUE(SumPerTask(*snap) == expected);
  int closed = 0;
  std::set<std::tuple<std::string, Collective, std::string, uint32_t, std::string>> keys;
  for (const auto& s : snap->slots) {
    closed += s.closed_connections();
    // A key is never in two slots: every lookup found its slot, also past a reclaimed one.
    EXPECT_TRUE(keys.insert({s.task, s.collective, s.peer, s.path_id, s.path_name}).second) << s.peer;
  }
  EXPECT_EQ(closed, 4);  // one per task and collective
  for (const auto& [k, t] : expected) EXPECT_GT(t.messages, 0u);

  // Every key still in the table is found where it is: resolving them all reclaims nothing.
  std::vector<uint32_t> again;
  for (const auto& s : snap->slots) {
    if (s.closed_connections()) continue;
    again.push_back(table->Resolve({s.task, s.collective, s.peer, s.path_id, s.path_name}));
    EXPECT_NE(again.back(), StatsTable::kInvalid);
  }
  for (uint32_t s : again) table->Release(s);
  auto after = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(after) << error;
  EXPECT_EQ(after->dropped, 0u);
  ASSERT_EQ(after->slots.size(), snap->slots.size());
  for (size_t i = 0; i < after->slots.size(); ++i) {
    EXPECT_EQ(after->slots[i].peer, snap->slots[i].peer);
    EXPECT_EQ(after->slots[i].send.bytes, snap->slots[i].send.bytes);
  }
}

// A connection that stays open through thousands of others keeps its slot and its counters.
TEST_F(TaskStatsTest, ReferencedSlotIsNeverReclaimed) {
  options_.slots = 8;
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  const StatsKey held_key{"job", Collective::kAllReduce, "10.9.9.9:1234", 7, "eth0 -> 10.9.9.9"};
  const uint32_t held = table->Resolve(held_key);
  ASSERT_NE(held, StatsTable::kInvalid);
  // Older than every slot below: the first victim if references did not protect it.
  table->Record(held, 4096, 1000, Direction::kSend);
  table->Record(held, 512, 3000, Direction::kRecv);
  for (int i = 0; i < 3000; ++i) {
    const uint32_t s = table->Resolve({"job", Collective::kAllReduce, "10.2.0." + std::to_string(i) + ":1", 7,
                                       "eth0 -> 10.2.0." + std::to_string(i)});
    ASSERT_NE(s, StatsTable::kInvalid) << i;
    ASSERT_NE(s, held) << i;
    table->Record(s, 1, 1, Direction::kSend);
    table->Release(s);
    if (i % 500 == 0) table->Record(held, 4096, 1000, Direction::kSend);
  }
  EXPECT_EQ(table->Resolve(held_key), held);  // still found, under its key
  table->Release(held);
  auto snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  EXPECT_EQ(snap->dropped, 0u);
  const SlotSnapshot* h = nullptr;
  uint64_t closed_bytes = 0;
  for (const auto& s : snap->slots) {
    if (s.peer == "10.9.9.9") h = &s;
    if (s.closed_connections()) closed_bytes += s.send.bytes;
  }
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->path_id, 7u);
  EXPECT_EQ(h->send.bytes, 7u * 4096u);
  EXPECT_EQ(h->send.messages, 7u);
  EXPECT_EQ(h->send.histogram[LatencyBucket(1000)], 7u);
  EXPECT_EQ(h->recv.bytes, 512u);
  EXPECT_EQ(h->recv.latency_sum_ns, 3000u);
  EXPECT_EQ(closed_bytes + 6u, 3000u);  // six recent ones still have their own slots
}

// Threads record on the slots they hold while others open, use and close connections to new
// peers (reclaiming slots all along) and a reader polls the file: the totals come out exact, and
// no read ever reports more than had been recorded (a slot counted twice while being moved).
TEST_F(TaskStatsTest, ConcurrentRecordsOnHeldSlotsWhileOthersAreReclaimed) {
  options_.slots = 16;
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  constexpr int kHolders = 3, kChurners = 2, kRecords = 20000, kConnections = 2000;
  std::atomic<uint64_t> issued{0};  // bytes about to be recorded, counted before they are
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kHolders; ++t)
    threads.emplace_back([&, t] {
      const uint32_t s = table->Resolve({"job", Collective::kAllReduce, "10.3.0." + std::to_string(t), 0, "held"});
      for (int i = 0; i < kRecords; ++i) {
        issued.fetch_add(3, std::memory_order_relaxed);
        table->Record(s, 3, 100, Direction::kSend);
      }
      table->Release(s);
    });
  for (int t = 0; t < kChurners; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kConnections; ++i) {
        const uint32_t s = table->Resolve(
            {"job", Collective::kAllReduce, "10.4." + std::to_string(t) + "." + std::to_string(i), 0, "churn"});
        for (int m = 0; m < 5; ++m) {
          issued.fetch_add(1000, std::memory_order_relaxed);
          table->Record(s, 1000, 50, Direction::kSend);
        }
        table->Release(s);
      }
    });
  std::thread reader([&] {
    int reads = 0;
    while (!done.load() || reads < 10) {
      std::string e;
      auto snap = ReadStatsFile(table->path(), &e);
      ASSERT_TRUE(snap) << e;
      uint64_t bytes = 0;
      for (const auto& s : snap->slots) bytes += s.send.bytes;
      ASSERT_LE(bytes, issued.load()) << "a read counted a slot twice";
      ++reads;
    }
  });
  for (auto& th : threads) th.join();
  done = true;
  reader.join();
  auto snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  EXPECT_EQ(snap->dropped, 0u);
  uint64_t bytes = 0, messages = 0;
  for (const auto& s : snap->slots) {
    bytes += s.send.bytes;
    messages += s.send.messages;
    if (s.path_name == "held") {
      EXPECT_EQ(s.send.bytes, 3u * kRecords) << s.peer;
      EXPECT_EQ(s.send.messages, uint64_t{kRecords}) << s.peer;
    }
  }
  EXPECT_EQ(bytes, issued.load());
  EXPECT_EQ(bytes, uint64_t{kHolders} * kRecords * 3 + uint64_t{kChurners} * kConnections * 5 * 1000);
  EXPECT_EQ(messages, uint64_t{kHolders} * kRecords + uint64_t{kChurners} * kConnections * 5);
}

// The same, made deterministic: the slot the reader is copying is reclaimed right after its
// counters were copied (the reader's test seam). Copied before the move, counted again in the
// closed-connections slot read after it, it would count twice; the reader reads closed slots
// first and re-checks each slot after copying it, so it can miss the slot but not count it twice.
uint32_t g_victim = StatsTable::kInvalid;
StatsTable* g_table = nullptr;
void ReclaimVictimWhileItIsCopied(uint32_t index) {
  if (index != g_victim) return;
  g_victim = StatsTable::kInvalid;  // once
  g_table->Release(g_table->Resolve({"job", Collective::kAllReduce, "10.6.1.1", 0, "new"}));
}

TEST_F(TaskStatsTest, SlotReclaimedWhileTheReaderCopiesItIsNeverCountedTwice) {
  options_.slots = 8;
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  std::vector<uint32_t> slots;
  for (int i = 0; i < 8; ++i) {
    slots.push_back(table->Resolve({"job", Collective::kAllReduce, "10.6.0." + std::to_string(i), 0, "p"}));
    table->Record(slots.back(), 1000, 1, Direction::kSend);
  }
  std::sort(slots.begin(), slots.end());
  // Released highest index first: that slot becomes the closed-connections slot, and every victim
  // after it lies below it, so a reader going by index meets the victim before the closed slot.
  table->Release(slots.back());
  for (size_t i = 0; i + 1 < slots.size(); ++i) table->Release(slots[i]);
  const uint32_t first = table->Resolve({"job", Collective::kAllReduce, "10.6.1.0", 0, "new"});
  ASSERT_EQ(first, slots[0]);  // slots[7] became the closed slot, slots[0] was folded into it
  table->Release(first);
  g_victim = slots[1];
  g_table = table.get();
  stats_format::g_slot_copied_hook = &ReclaimVictimWhileItIsCopied;
  auto snap = ReadStatsFile(table->path(), &error);
  stats_format::g_slot_copied_hook = nullptr;
  ASSERT_TRUE(snap) << error;
  EXPECT_EQ(g_victim, StatsTable::kInvalid) << "the victim was not read";
  uint64_t bytes = 0;
  for (const auto& s : snap->slots) bytes += s.send.bytes;
  EXPECT_LE(bytes, 8000u) << "a slot reclaimed while it was read was counted twice";
  EXPECT_GE(bytes, 7000u);  // at most the victim missed
  snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  bytes = 0;
  for (const auto& s : snap->slots) bytes += s.send.bytes;
  EXPECT_EQ(bytes, 8000u);
  EXPECT_EQ(snap->dropped, 0u);
}

// A reader polling while slots are reclaimed as fast as one thread can open and close connections:
// each connection's traffic is moved into the closed-connections slot when its slot is reclaimed,
// and a read must never see it in both (it may miss it for a moment). Every connection carries 1 GB,
// so one double count exceeds everything a read can miss of the traffic in flight.
TEST_F(TaskStatsTest, ReaderNeverCountsAReclaimedSlotTwice) {
  options_.slots = 16;
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  constexpr uint64_t kBytes = 1'000'000'000;
  constexpr int kConnections = 5000;
  std::atomic<uint64_t> issued{0};
  std::atomic<bool> done{false};
  std::thread churn([&] {
    for (int i = 0; i < kConnections; ++i) {
      // Reclaims the slot of connection i - 3 (folds it into the closed connections).
      const uint32_t s = table->Resolve({"job", Collective::kAllReduce, "10.5.0." + std::to_string(i), 0, "p"});
      // Then nothing changes for 20 us: `issued` is exactly what was recorded, and a read that
      // counted the move twice reports 1 GB more.
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
      while (std::chrono::steady_clock::now() < until) {
      }
      issued.fetch_add(kBytes);
      table->Record(s, kBytes, 1, Direction::kSend);
      table->Release(s);
    }
    done = true;
  });
  int reads = 0, over = 0;
  while (!done.load() || reads < 10) {
    auto snap = ReadStatsFile(table->path(), &error);
    ASSERT_TRUE(snap) << error;
    uint64_t bytes = 0;
    for (const auto& s : snap->slots) bytes += s.send.bytes;
    over += bytes > issued.load();
    ++reads;
  }
  churn.join();
  EXPECT_EQ(over, 0) << "of " << reads << " reads, " << over << " counted a reclaimed slot twice";
  auto snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  uint64_t bytes = 0;
  for (const auto& s : snap->slots) bytes += s.send.bytes;
  EXPECT_EQ(bytes, kConnections * kBytes);
  EXPECT_EQ(snap->dropped, 0u);
}

TEST_F(TaskStatsTest, ConcurrentWritersOnSharedKeysCountExactly) {
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&table, t] {
      for (int i = 0; i < 20000; ++i)
        table->Record({"job", Collective::kAllReduce, (i + t) % 2 ? "a" : "b", 0}, 3, 100, Direction::kRecv);
    });
  for (auto& th : threads) th.join();
  auto snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->slots.size(), 2u);
  EXPECT_EQ(snap->slots[0].recv.messages + snap->slots[1].recv.messages, 80000u);
  EXPECT_EQ(snap->slots[0].recv.bytes + snap->slots[1].recv.bytes, 240000u);
}

TEST_F(TaskStatsTest, AnotherProcessReadsExactCountsWhileWriterRuns) {
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::string error;
    auto table = StatsTable::Open(options_, &error);
    if (!table) ::_exit(3);
    for (int i = 0; i < 1000; ++i) {
      table->Record({"jobX", Collective::kAllReduce, "rank1", 0}, 4096, 20'000, Direction::kSend);
      table->Record({"jobX", Collective::kBroadcast, "rank0", 2}, 100, 900, Direction::kRecv);
    }
    const char c = 'r';
    if (::write(ready[1], &c, 1) != 1) ::_exit(4);
    char d;
    if (::read(done[0], &d, 1) != 1) ::_exit(5);
    ::_exit(0);  // leaves the file as a crash would
  }
  // Only the child writes `ready` and reads `done`: a child that dies early then gives EOF, not a hang.
  ::close(ready[1]);
  ::close(done[0]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  std::string error;
  auto snap = ReadStatsFile(StatsFilePath(dir_, child), &error);
  ASSERT_TRUE(snap) << error;
  EXPECT_TRUE(snap->alive);
  EXPECT_EQ(snap->pid, child);
  ASSERT_EQ(snap->slots.size(), 2u);
  for (const auto& s : snap->slots) {
    if (s.collective == Collective::kAllReduce) {
      EXPECT_EQ(s.send.bytes, 4096u * 1000u);
      EXPECT_EQ(s.send.messages, 1000u);
      EXPECT_EQ(s.send.histogram[LatencyBucket(20'000)], 1000u);
      EXPECT_EQ(s.recv.messages, 0u);
    } else {
      EXPECT_EQ(s.collective, Collective::kBroadcast);
      EXPECT_EQ(s.path_id, 2u);
      EXPECT_EQ(s.recv.bytes, 100u * 1000u);
    }
  }
  ASSERT_EQ(::write(done[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);

  // The writer is gone: its file is stale, and --gc removes it.
  auto stale = ReadStatsFile(StatsFilePath(dir_, child), &error);
  ASSERT_TRUE(stale);
  EXPECT_FALSE(stale->alive);
  const auto removed = RemoveStaleStatsFiles(dir_);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_TRUE(ListStatsFiles(dir_).empty());
}

TEST_F(TaskStatsTest, CleanCloseRemovesTheFile) {
  std::string error;
  std::string path;
  {
    auto table = StatsTable::Open(options_, &error);
    ASSERT_TRUE(table) << error;
    path = table->path();
    EXPECT_TRUE(std::filesystem::exists(path));
    EXPECT_EQ(ListStatsFiles(dir_).size(), 1u);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

// A child forked after the table opened (a data-loader worker) runs the same exit handlers when it
// exits normally; the file is its parent's and must stay, writable and readable, for both the
// removing and the keeping setting.
TEST_F(TaskStatsTest, ForkedChildClosingTheTableLeavesTheParentsFile) {
  for (bool remove_on_close : {true, false}) {
    options_.remove_on_close = remove_on_close;
    std::string error;
    auto table = StatsTable::Open(options_, &error);
    ASSERT_TRUE(table) << error;
    const std::string path = table->path();
    const auto mode_before = std::filesystem::status(path).permissions();
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      table->RemoveFile();
      table.reset();  // the destructor's removal too
      _exit(0);
    }
    int st = 0;
    ASSERT_EQ(waitpid(child, &st, 0), child);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    EXPECT_TRUE(std::filesystem::exists(path)) << "remove_on_close=" << remove_on_close;
    EXPECT_EQ(std::filesystem::status(path).permissions(), mode_before) << "remove_on_close=" << remove_on_close;
    table->Record(StatsKey{"t", Collective::kAllReduce, "peer", 0}, 100, 1000, Direction::kSend);
    auto snap = ReadStatsFile(path, &error);
    ASSERT_TRUE(snap) << error;
    table.reset();  // the parent's own close still removes (or keeps) it
    EXPECT_EQ(std::filesystem::exists(path), !remove_on_close);
    std::filesystem::remove(path);
  }
}

TEST_F(TaskStatsTest, ReaderRejectsForeignFiles) {
  const std::string path = dir_ + "/flexiforce-stats-1";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(std::string(4096, 'z').c_str(), f);
  std::fclose(f);
  std::string error;
  EXPECT_FALSE(ReadStatsFile(path, &error));
  EXPECT_NE(error.find("not a FlexiForce statistics file"), std::string::npos) << error;
  EXPECT_FALSE(ReadStatsFile(dir_ + "/missing", &error));
}

}  // namespace
}  // namespace ff::sla
