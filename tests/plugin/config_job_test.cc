// Job variables in the config registry: the value the plugin uses and why, for valid, bad and fallback inputs.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "plugin/config_registry.h"
#include "sla/task_identity.h"
#include "sla/traffic_class.h"

namespace ff {
namespace {

EnvLookup Env(std::map<std::string, std::string> m) {
  return [m = std::move(m)](const char* n) -> const char* {
    auto it = m.find(n);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}

const sla::ProcessIdentity kSelf{"host-a", 4242, 777};

const JobValue& Find(const std::vector<JobValue>& values, const std::string& name) {
  for (const auto& v : values)
    if (name == v.spec->name) return v;
  ADD_FAILURE() << name << " missing from ResolveJob";
  static JobValue none{};
  return none;
}

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ConfigJob, CoversTheThreeJobVariablesInRegistryOrder) {
  auto job = ConfigRegistry::ResolveJob(Env({}), kSelf);
  ASSERT_EQ(job.size(), ConfigRegistry::JobSpecs().size());
  ASSERT_EQ(job.size(), 3u);
  EXPECT_STREQ(job[0].spec->name, "AI_SLA_LATENCY");
  EXPECT_STREQ(job[1].spec->name, "AI_TASK_ID");
  EXPECT_STREQ(job[2].spec->name, "AI_FLEXIFORCE_ENABLE");
  for (const auto& s : ConfigRegistry::JobSpecs()) {
    EXPECT_GT(std::string(s.doc).size(), 20u) << s.name;
    EXPECT_GT(std::string(s.accepted).size(), 5u) << s.name;
  }
}

TEST(ConfigJob, UnsetMeansNoSlaLevel3ObserveAndADerivedId) {
  auto job = ConfigRegistry::ResolveJob(Env({}), kSelf);
  const auto& sla = Find(job, "AI_SLA_LATENCY");
  EXPECT_FALSE(sla.set);
  EXPECT_EQ(sla.value, "none");
  EXPECT_EQ(sla.source, "default");
  EXPECT_TRUE(Has(sla.effect, "Level 3")) << sla.effect;
  EXPECT_TRUE(sla.error.empty());
  const auto& task = Find(job, "AI_TASK_ID");
  EXPECT_EQ(task.source, "derived");
  EXPECT_EQ(task.value, sla::DeriveTaskId(kSelf));
  const auto& en = Find(job, "AI_FLEXIFORCE_ENABLE");
  EXPECT_EQ(en.value, "observe");
  EXPECT_EQ(en.source, "default");
}

TEST(ConfigJob, ValidSlaGivesItsLevel) {
  struct Case {
    const char* raw;
    const char* value;
    const char* level;
  } cases[] = {{"50", "50 us", "Level 2"}, {"0.03ms", "30 us", "Level 1"}, {"100us", "100 us", "Level 2"},
               {"250", "250 us", "Level 3"}, {"49999ns", "49999 ns", "Level 1"}};
  for (const auto& c : cases) {
    auto job = ConfigRegistry::ResolveJob(Env({{"AI_SLA_LATENCY", c.raw}}), kSelf);
    const auto& v = Find(job, "AI_SLA_LATENCY");
    EXPECT_EQ(v.value, c.value) << c.raw;
    EXPECT_EQ(v.source, "AI_SLA_LATENCY") << c.raw;
    EXPECT_TRUE(Has(v.effect, c.level)) << c.raw << ": " << v.effect;
    EXPECT_TRUE(v.error.empty()) << v.error;
  }
}

TEST(ConfigJob, BadSlaNamesInputAcceptedFormAndLevel3) {
  for (const char* raw : {"abc", "-5", "0", "20s", "50 parsecs"}) {
    auto job = ConfigRegistry::ResolveJob(Env({{"AI_SLA_LATENCY", raw}}), kSelf);
    const auto& v = Find(job, "AI_SLA_LATENCY");
    EXPECT_TRUE(v.set);
    EXPECT_EQ(v.raw, raw);
    EXPECT_EQ(v.value, "none") << raw;
    EXPECT_TRUE(Has(v.error, std::string("AI_SLA_LATENCY='") + raw + "'")) << v.error;
    EXPECT_TRUE(Has(v.error, "accepted:")) << v.error;
    EXPECT_TRUE(Has(v.error, "the job runs at Level 3")) << v.error;
    EXPECT_FALSE(Has(v.error, "using no SLA")) << "the parser's tail is replaced, not repeated: " << v.error;
  }
}

TEST(ConfigJob, SteeringShowsTrafficClassAndPacing) {
  auto l1 = ConfigRegistry::ResolveJob(Env({{"AI_SLA_LATENCY", "20"}, {"AI_FLEXIFORCE_ENABLE", "1"}}), kSelf);
  const auto& v1 = Find(l1, "AI_SLA_LATENCY");
  // Level 1's DSCP from sla/traffic_class.h's map, as the connector would set it.
  sla::TrafficClassMap map;
  EXPECT_TRUE(Has(v1.effect, "DSCP " + std::to_string(map.dscp[0]))) << v1.effect;
  EXPECT_TRUE(Has(v1.effect, "unpaced")) << v1.effect;
  EXPECT_EQ(Find(l1, "AI_FLEXIFORCE_ENABLE").value, "steer");

  auto l3 = ConfigRegistry::ResolveJob(
      Env({{"AI_FLEXIFORCE_ENABLE", "yes"}, {"FLEXIFORCE_LEVEL3_CAP_PCT", "60"}, {"FLEXIFORCE_TRAFFIC_CLASS", "72"}}),
      kSelf);
  const auto& v3 = Find(l3, "AI_SLA_LATENCY");
  EXPECT_TRUE(Has(v3.effect, "paced to 60%")) << v3.effect;
  EXPECT_TRUE(Has(v3.effect, "TOS 72")) << v3.effect;
  EXPECT_TRUE(Has(v3.effect, "FLEXIFORCE_TRAFFIC_CLASS")) << v3.effect;

  auto obs = ConfigRegistry::ResolveJob(Env({{"AI_SLA_LATENCY", "20"}}), kSelf);
  EXPECT_TRUE(Has(Find(obs, "AI_SLA_LATENCY").effect, "observe only")) << Find(obs, "AI_SLA_LATENCY").effect;
  EXPECT_FALSE(Has(Find(obs, "AI_SLA_LATENCY").effect, "DSCP"));
}

TEST(ConfigJob, BadEnableObservesAndSaysSo) {
  auto job = ConfigRegistry::ResolveJob(Env({{"AI_FLEXIFORCE_ENABLE", "maybe"}}), kSelf);
  const auto& v = Find(job, "AI_FLEXIFORCE_ENABLE");
  EXPECT_EQ(v.value, "observe");
  EXPECT_EQ(v.source, "default");
  EXPECT_TRUE(Has(v.error, "AI_FLEXIFORCE_ENABLE='maybe'")) << v.error;
  EXPECT_TRUE(Has(v.error, "accepted")) << v.error;
}

TEST(ConfigJob, TaskIdFallbacksAreExplained) {
  auto job = ConfigRegistry::ResolveJob(
      Env({{"TORCHELASTIC_RUN_ID", "none"}, {"SLURM_JOB_ID", "4711"}, {"PMIX_NAMESPACE", "prterun-x@1"}}), kSelf);
  const auto& v = Find(job, "AI_TASK_ID");
  EXPECT_EQ(v.value, "4711");
  EXPECT_EQ(v.source, "SLURM_JOB_ID");
  EXPECT_TRUE(Has(v.effect, "SLURM_JOB_ID")) << v.effect;
  ASSERT_EQ(v.fallbacks.size(), sla::LauncherIdVariables().size());
  std::map<std::string, std::string> state;
  for (const auto& f : v.fallbacks) state[f.name] = f.state;
  EXPECT_EQ(state["TORCHELASTIC_RUN_ID"], "set, not usable as an id");
  EXPECT_EQ(state["SLURM_JOB_ID"], "used");
  EXPECT_EQ(state["OMPI_MCA_orte_ess_jobid"], "unset");
  EXPECT_EQ(state["PMIX_NAMESPACE"], "valid, not used: an earlier variable wins");
}

TEST(ConfigJob, BadTaskIdIsReportedAndTheFallbackNamed) {
  auto job = ConfigRegistry::ResolveJob(Env({{"AI_TASK_ID", "has space"}, {"TORCHELASTIC_RUN_ID", "rdzv-9"}}), kSelf);
  const auto& v = Find(job, "AI_TASK_ID");
  EXPECT_EQ(v.value, "rdzv-9");
  EXPECT_EQ(v.source, "TORCHELASTIC_RUN_ID");
  EXPECT_TRUE(Has(v.error, "AI_TASK_ID='has space'")) << v.error;
  EXPECT_TRUE(Has(v.error, "accepted")) << v.error;
  EXPECT_TRUE(Has(v.error, "using rdzv-9 (from TORCHELASTIC_RUN_ID)")) << v.error;

  auto ok = ConfigRegistry::ResolveJob(Env({{"AI_TASK_ID", "llama-run3"}, {"SLURM_JOB_ID", "1"}}), kSelf);
  EXPECT_EQ(Find(ok, "AI_TASK_ID").value, "llama-run3");
  EXPECT_EQ(Find(ok, "AI_TASK_ID").source, "AI_TASK_ID");
  EXPECT_TRUE(Find(ok, "AI_TASK_ID").error.empty());
}

}  // namespace
}  // namespace ff
