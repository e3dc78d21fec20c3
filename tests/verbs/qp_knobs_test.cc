// The QP knobs end to end, over the fake libibverbs: the environment, the registry, the plugin's
// ApplyQpConfig, RdmaPath::Connect, and the attributes the fake's ibv_modify_qp received for RTR and
// RTS. Bad values are refused with the accepted form and leave the defaults on the QP.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "plugin/config_registry.h"
#include "plugin/verbs_setup.h"
#include "tests/verbs/fake_verbs.h"
#include "verbs/rdma_path.h"

namespace ff {
namespace {

using Env = std::map<std::string, std::string>;

Config ConfigFrom(const Env& env, std::vector<KnobValue>* values = nullptr) {
  auto v = ConfigRegistry::Resolve([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  if (values) *values = v;
  return ConfigRegistry::ToConfig(v);
}

struct Modified {
  ibv_qp_attr rtr{};
  int rtr_mask = 0;
  ibv_qp_attr rts{};
  int rts_mask = 0;
};

// One path on the fake's rxe0 port 1 (active MTU 1024), connected to a peer whose port runs 4096.
Modified ConnectWith(const testing::FakeVerbs& fake, const Config& cfg, int policy_tc, int policy_sl) {
  Modified m;
  std::unique_ptr<verbs::RdmaDevice> dev;
  Status s = verbs::OpenRdmaDevice(fake.loader(), "rxe0", 1, 0, &dev);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return m;
  verbs::RdmaPathOptions ro;
  ApplyQpConfig(cfg, policy_tc, policy_sl, &ro.qp);
  std::unique_ptr<verbs::RdmaPath> path;
  s = verbs::RdmaPath::Create(0, *dev, ro, &path);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return m;
  verbs::RdmaEndpoint remote;
  remote.qpn = 0x4242;
  remote.psn = 0x123;
  remote.mtu = IBV_MTU_4096;
  remote.gid[0] = 0xfe;
  remote.gid[1] = 0x80;
  s = path->Connect(remote);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(fake.LastModify(IBV_QPS_RTR, &m.rtr, &m.rtr_mask));
  EXPECT_TRUE(fake.LastModify(IBV_QPS_RTS, &m.rts, &m.rts_mask));
  return m;
}

TEST(QpKnobs, DefaultsReachModifyQp) {
  testing::FakeVerbs fake("rxe0=A");
  const Modified m = ConnectWith(fake, ConfigFrom({}), -1, -1);
  EXPECT_EQ(m.rtr.path_mtu, IBV_MTU_1024);  // the smaller port's active MTU; no cap by default
  EXPECT_EQ(m.rtr.ah_attr.grh.traffic_class, 0);
  EXPECT_EQ(m.rtr.ah_attr.sl, 0);
  EXPECT_EQ(m.rtr_mask & (IBV_QP_PATH_MTU | IBV_QP_AV), IBV_QP_PATH_MTU | IBV_QP_AV);
  EXPECT_EQ(m.rts.timeout, 14);
  EXPECT_EQ(m.rts.retry_cnt, 3);
  EXPECT_EQ(m.rts_mask & (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT), IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT);
}

TEST(QpKnobs, EachKnobReachesModifyQp) {
  testing::FakeVerbs fake("rxe0=A");
  const Config cfg = ConfigFrom({{"NCCL_IB_TIMEOUT", "9"},
                                 {"NCCL_IB_RETRY_CNT", "5"},
                                 {"NCCL_IB_SL", "4"},
                                 {"NCCL_IB_TC", "106"},
                                 {"FLEXIFORCE_IB_MTU", "512"}});
  const Modified m = ConnectWith(fake, cfg, -1, -1);
  EXPECT_EQ(m.rtr.path_mtu, IBV_MTU_512);  // capped under the port's 1024
  EXPECT_EQ(m.rtr.ah_attr.grh.traffic_class, 106);
  EXPECT_EQ(m.rtr.ah_attr.sl, 4);
  EXPECT_EQ(m.rts.timeout, 9);
  EXPECT_EQ(m.rts.retry_cnt, 5);
  // A cap above the active MTU changes nothing.
  const Modified big = ConnectWith(fake, ConfigFrom({{"FLEXIFORCE_IB_MTU", "2048"}}), -1, -1);
  EXPECT_EQ(big.rtr.path_mtu, IBV_MTU_1024);
}

TEST(QpKnobs, ThePolicysTrafficClassAndSlWinOverNcclIbTcAndSl) {
  testing::FakeVerbs fake("rxe0=A");
  const Config cfg = ConfigFrom({{"NCCL_IB_SL", "4"}, {"NCCL_IB_TC", "106"}});
  // What connect() passes: sla::DecideTrafficClass's tos (a communicator's trafficClass, or the SLA
  // level when steering) and sl.
  const Modified m = ConnectWith(fake, cfg, 46 << 2, 2);
  EXPECT_EQ(m.rtr.ah_attr.grh.traffic_class, 46 << 2);
  EXPECT_EQ(m.rtr.ah_attr.sl, 2);
  // An explicit traffic class carries no SL: NCCL_IB_SL fills it.
  const Modified tc_only = ConnectWith(fake, cfg, 34 << 2, -1);
  EXPECT_EQ(tc_only.rtr.ah_attr.grh.traffic_class, 34 << 2);
  EXPECT_EQ(tc_only.rtr.ah_attr.sl, 4);
}

TEST(QpKnobs, BadValuesNameTheAcceptedFormAndKeepTheDefaultOnTheQp) {
  testing::FakeVerbs fake("rxe0=A");
  struct Case {
    const char* name;
    const char* value;
    const char* message;
  };
  for (const Case& c : {Case{"NCCL_IB_TIMEOUT", "0", "NCCL_IB_TIMEOUT='0' is not valid; accepted: an integer from 1 to 31; using the default 14"},
                        Case{"NCCL_IB_TIMEOUT", "fast", "accepted: an integer from 1 to 31"},
                        Case{"NCCL_IB_RETRY_CNT", "8", "NCCL_IB_RETRY_CNT='8' is not valid; accepted: an integer from 0 to 7; using the default 3"},
                        Case{"NCCL_IB_SL", "16", "accepted: an integer from -1 to 15; using the default -1"},
                        Case{"NCCL_IB_TC", "256", "accepted: an integer from -1 to 255; using the default -1"},
                        Case{"FLEXIFORCE_IB_MTU", "9000",
                             "FLEXIFORCE_IB_MTU='9000' is not valid; accepted: 256, 512, 1024, 2048 or 4096; using the default 4096"}}) {
    std::vector<KnobValue> values;
    const Config cfg = ConfigFrom({{c.name, c.value}}, &values);
    bool found = false;
    for (const auto& v : values) {
      if (std::string(v.spec->name) != c.name) continue;
      found = true;
      EXPECT_NE(v.error.find(c.message), std::string::npos) << v.error;
      EXPECT_FALSE(v.from_env);
    }
    EXPECT_TRUE(found) << c.name;
    const Modified m = ConnectWith(fake, cfg, -1, -1);
    EXPECT_EQ(m.rtr.path_mtu, IBV_MTU_1024) << c.name;
    EXPECT_EQ(m.rtr.ah_attr.grh.traffic_class, 0) << c.name;
    EXPECT_EQ(m.rtr.ah_attr.sl, 0) << c.name;
    EXPECT_EQ(m.rts.timeout, 14) << c.name;
    EXPECT_EQ(m.rts.retry_cnt, 3) << c.name;
  }
}

}  // namespace
}  // namespace ff
