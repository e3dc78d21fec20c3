// Runs `flexiforce stats` in-process against a private statistics directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sla/task_stats.h"

namespace ff {
int RunStatsCommand(int argc, char** argv);
}

namespace ff::sla {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int RunCli(std::vector<std::string> args, std::string* out) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  const int rc = RunStatsCommand(static_cast<int>(argv.size()), argv.data());
  std::fflush(stdout);
  *out = ::testing::internal::GetCapturedStdout();
  return rc;
}

class StatsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ff-sla-cli-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(StatsCliTest, JsonForOwnPidShowsRecordedFlow) {
  StatsTableOptions o;
  o.dir = dir_;
  std::string error;
  auto table = StatsTable::Open(o, &error);
  ASSERT_TRUE(table) << error;
  table->Record({"job7", Collective::kAllGather, "rank2", 0}, 123, 456, Direction::kSend);
  std::string out;
  ASSERT_EQ(RunCli({"stats", "--dir", dir_, "--pid", std::to_string(getpid()), "--json"}, &out), 0);
  const auto j = nlohmann::json::parse(out);
  const auto& flow = j.at("processes").at(0).at("flows").at(0);
  EXPECT_EQ(flow.at("task"), "job7");
  EXPECT_EQ(flow.at("collective"), "AllGather");
  EXPECT_EQ(flow.at("send").at("bytes"), 123);

  ASSERT_EQ(RunCli({"stats", "--dir", dir_, "--prometheus"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("collective=\"AllGather\""));
}

// Paths are named by what they are; the oracle's hash stays in --json only, beside the name.
TEST_F(StatsCliTest, TextNamesPathsNotHashesAndJsonHasBoth) {
  StatsTableOptions o;
  o.dir = dir_;
  std::string error;
  auto table = StatsTable::Open(o, &error);
  ASSERT_TRUE(table) << error;
  const uint32_t steered_id = 1622425797;
  table->Record({"train-a", Collective::kAllReduce, "10.0.0.2:5000", steered_id, "eth0 10.0.0.1 -> 10.0.0.2 via spine1"},
                1000, 2000, Direction::kSend);
  table->Record({"infer-b", Collective::kBroadcast, "10.0.0.2:5001", 0, "eth1 -> 10.0.0.2"}, 10, 20,
                Direction::kSend);
  table->Record({"infer-b", Collective::kBroadcast, "10.0.0.2:5001", 0, "eth0 <- 10.0.0.2"}, 10, 20,
                Direction::kRecv);
  std::string out;
  ASSERT_EQ(RunCli({"stats", "--dir", dir_, "--pid", std::to_string(getpid())}, &out), 0);
  EXPECT_THAT(out, HasSubstr("eth0 10.0.0.1 -> 10.0.0.2 via spine1"));
  EXPECT_THAT(out, HasSubstr("eth1 -> 10.0.0.2"));
  EXPECT_THAT(out, HasSubstr("eth0 <- 10.0.0.2"));
  EXPECT_THAT(out, Not(HasSubstr(std::to_string(steered_id))));

  ASSERT_EQ(RunCli({"stats", "--dir", dir_, "--pid", std::to_string(getpid()), "--json"}, &out), 0);
  const auto flows = nlohmann::json::parse(out).at("processes").at(0).at("flows");
  ASSERT_EQ(flows.size(), 3u);  // same task, collective and peer, different names: separate flows
  bool found = false;
  for (const auto& f : flows) {
    if (f.at("task") != "train-a") continue;
    found = true;
    EXPECT_EQ(f.at("path"), steered_id);
    EXPECT_EQ(f.at("path_name"), "eth0 10.0.0.1 -> 10.0.0.2 via spine1");
  }
  EXPECT_TRUE(found) << out;
}

TEST_F(StatsCliTest, MissingPidFailsAndHelpSucceeds) {
  std::string out;
  EXPECT_EQ(RunCli({"stats", "--dir", dir_, "--pid", "999999"}, &out), 1);
  EXPECT_EQ(RunCli({"stats", "--help"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("--prometheus"));
  EXPECT_NE(RunCli({"stats", "--json", "--prometheus"}, &out), 0);
}

TEST_F(StatsCliTest, GcRemovesOnlyDeadOwners) {
  StatsTableOptions o;
  o.dir = dir_;
  std::string error;
  auto live = StatsTable::Open(o, &error);
  ASSERT_TRUE(live) << error;
  // A child that dies without closing its table leaves a file, as a crashed job does.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto t = StatsTable::Open(o, &error);
    ::_exit(t ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(ListStatsFiles(dir_).size(), 2u);
  std::string out;
  ASSERT_EQ(RunCli({"stats", "--dir", dir_}, &out), 0);
  EXPECT_THAT(out, Not(HasSubstr("pid " + std::to_string(child))));  // stale files are not shown
  ASSERT_EQ(RunCli({"stats", "--dir", dir_, "--gc"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("flexiforce-stats-" + std::to_string(child)));
  EXPECT_TRUE(std::filesystem::exists(live->path()));
  EXPECT_EQ(ListStatsFiles(dir_).size(), 1u);
}

}  // namespace
}  // namespace ff::sla
