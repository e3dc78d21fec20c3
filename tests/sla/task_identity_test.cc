#include "sla/task_identity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/sla/env_map.h"

namespace ff::sla {
namespace {

using testing::MapEnv;

const ProcessIdentity kSelf{"node17", 4242, 987654};

TEST(TaskIdentity, AiTaskIdWins) {
  Warnings w;
  const auto t = ResolveTaskId(MapEnv({{"AI_TASK_ID", "job-a"}, {"SLURM_JOB_ID", "77"}}), w, kSelf);
  EXPECT_EQ(t.id, "job-a");
  EXPECT_EQ(t.source, "AI_TASK_ID");
}

TEST(TaskIdentity, LauncherIdsInOrder) {
  Warnings w;
  EXPECT_EQ(ResolveTaskId(MapEnv({{"TORCHELASTIC_RUN_ID", "r1"}, {"SLURM_JOB_ID", "77"}}), w, kSelf).source,
            "TORCHELASTIC_RUN_ID");
  EXPECT_EQ(ResolveTaskId(MapEnv({{"SLURM_JOB_ID", "77"}, {"PMIX_NAMESPACE", "ns"}}), w, kSelf).id, "77");
  EXPECT_EQ(ResolveTaskId(MapEnv({{"OMPI_MCA_orte_ess_jobid", "123"}, {"PMIX_NAMESPACE", "ns"}}), w, kSelf).id,
            "123");
  EXPECT_EQ(ResolveTaskId(MapEnv({{"PMIX_NAMESPACE", "prterun-n1-55@1"}}), w, kSelf).id, "prterun-n1-55@1");
}

TEST(TaskIdentity, TorchrunPlaceholderNoneIsSkipped) {
  Warnings w;
  const auto t = ResolveTaskId(MapEnv({{"TORCHELASTIC_RUN_ID", "none"}, {"SLURM_JOB_ID", "77"}}), w, kSelf);
  EXPECT_EQ(t.source, "SLURM_JOB_ID");
}

TEST(TaskIdentity, InvalidAiTaskIdIsReportedAndSkipped) {
  Warnings w;
  const auto t = ResolveTaskId(MapEnv({{"AI_TASK_ID", "has space"}, {"SLURM_JOB_ID", "77"}}), w, kSelf);
  EXPECT_EQ(t.id, "77");
  ASSERT_EQ(w.All().size(), 1u);
  EXPECT_NE(w.All()[0].find("AI_TASK_ID"), std::string::npos);
  Warnings w2;
  EXPECT_EQ(ResolveTaskId(MapEnv({{"AI_TASK_ID", std::string(64, 'x')}}), w2, kSelf).source, "derived");
  EXPECT_EQ(w2.All().size(), 1u);
}

TEST(TaskIdentity, DerivedIdIsStableAndDistinguishesProcesses) {
  Warnings w;
  const auto a = ResolveTaskId(MapEnv({}), w, kSelf);
  EXPECT_EQ(a.source, "derived");
  EXPECT_EQ(a.id, DeriveTaskId(kSelf));
  EXPECT_EQ(a.id.rfind("auto-", 0), 0u);
  EXPECT_EQ(a.id.size(), 5u + 16u);
  EXPECT_NE(DeriveTaskId({"node17", 4243, 987654}), a.id);
  EXPECT_NE(DeriveTaskId({"node18", 4242, 987654}), a.id);
  EXPECT_NE(DeriveTaskId({"node17", 4242, 987655}), a.id);
}

TEST(TaskIdentity, StatStartTimeParsesDespiteParenthesesInCommand) {
  const std::string line =
      "1234 (we ird) (x) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 55555 1000 10 0";
  EXPECT_EQ(ParseStatStartTicks(line), 55555u);
  EXPECT_EQ(ParseStatStartTicks("garbage"), 0u);
}

TEST(TaskIdentity, CurrentProcessReadsRealStartTime) {
  const auto self = CurrentProcessIdentity();
  EXPECT_EQ(self.pid, getpid());
  EXPECT_GT(self.start_ticks, 0u);
  EXPECT_FALSE(self.hostname.empty());
  EXPECT_EQ(DeriveTaskId(self), DeriveTaskId(CurrentProcessIdentity()));
}

}  // namespace
}  // namespace ff::sla
