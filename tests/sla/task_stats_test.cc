#include "sla/task_stats.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

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

TEST_F(TaskStatsTest, FullTableCountsDropsInsteadOfOverwriting) {
  options_.slots = 2;
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  for (uint32_t p = 0; p < 3; ++p) table->Record({"j", Collective::kBroadcast, "peer", p}, 1, 1, Direction::kSend);
  auto snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->slots.size(), 2u);
  EXPECT_EQ(snap->dropped, 1u);
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
