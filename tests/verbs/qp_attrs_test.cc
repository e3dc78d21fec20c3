// RC QP transitions: every attribute field and mask bit of INIT, RTR and RTS; MTU capping; range
// checks naming the field; the flow label <-> RoCE v2 UDP source port mapping the oracle relies on.
#include "verbs/qp_attrs.h"

#include <gtest/gtest.h>

namespace ff::verbs {
namespace {

RcQpParams Sample() {
  RcQpParams p;
  p.port = 2;
  p.gid_index = 3;
  p.pkey_index = 1;
  for (int i = 0; i < 16; ++i) p.remote_gid[i] = static_cast<uint8_t>(0xa0 + i);
  p.remote_lid = 0x1234;
  p.remote_qpn = 0xabcdef;
  p.remote_psn = 0x123456;
  p.local_psn = 0x654321;
  p.port_active_mtu = IBV_MTU_4096;
  p.mtu_cap = IBV_MTU_2048;
  p.flow_label = 0xfedcb;
  p.traffic_class = (26 << 2) | 1;  // AF31, ECN-capable
  p.sl = 3;
  p.hop_limit = 64;
  return p;
}

TEST(QpAttrs, InitSetsPortPkeyAndAccessOnly) {
  QpTransition t = BuildInit(Sample());
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(t.attr.port_num, 2);
  EXPECT_EQ(t.attr.pkey_index, 1);
  EXPECT_EQ(t.attr.qp_access_flags,
            unsigned(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

TEST(QpAttrs, RtrCarriesThePeerPathAndSteering) {
  QpTransition t = BuildRtr(Sample());
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(t.attr.path_mtu, IBV_MTU_2048);  // capped
  EXPECT_EQ(t.attr.dest_qp_num, 0xabcdefu);
  EXPECT_EQ(t.attr.rq_psn, 0x123456u);
  EXPECT_EQ(t.attr.max_dest_rd_atomic, 1);
  EXPECT_EQ(t.attr.min_rnr_timer, 12);
  const ibv_ah_attr& ah = t.attr.ah_attr;
  EXPECT_EQ(ah.is_global, 1);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(ah.grh.dgid.raw[i], 0xa0 + i) << i;
  EXPECT_EQ(ah.grh.sgid_index, 3);
  EXPECT_EQ(ah.grh.flow_label, 0xfedcbu);
  EXPECT_EQ(ah.grh.hop_limit, 64);
  EXPECT_EQ(ah.grh.traffic_class, (26 << 2) | 1);  // the whole byte, as NCCL_IB_TC gives it
  EXPECT_EQ(ah.dlid, 0x1234);
  EXPECT_EQ(ah.sl, 3);
  EXPECT_EQ(ah.src_path_bits, 0);
  EXPECT_EQ(ah.static_rate, 0);
  EXPECT_EQ(ah.port_num, 2);
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  // Nothing of RTS leaks into RTR (the kernel rejects unexpected mask bits per transition).
  EXPECT_EQ(t.mask & (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_SQ_PSN), 0);
}

TEST(QpAttrs, RtsUsesRetryDefaultsThatLeaveTheDecisionToTheWatchdog) {
  QpTransition t = BuildRts(Sample());
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(t.attr.timeout, 14);
  EXPECT_EQ(t.attr.retry_cnt, 3);
  EXPECT_EQ(t.attr.rnr_retry, 7);
  EXPECT_EQ(t.attr.sq_psn, 0x654321u);
  EXPECT_EQ(t.attr.max_rd_atomic, 1);
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                        IBV_QP_MAX_QP_RD_ATOMIC);
  // The transport gives up after (retry_cnt + 1) ACK timeouts: above the 100 ms hard stall rule,
  // far below NCCL's ~30 s.
  const double give_up_ms = (t.attr.retry_cnt + 1) * 4.096e-3 * (1 << t.attr.timeout);
  EXPECT_GT(give_up_ms, 100.0);
  EXPECT_LT(give_up_ms, 1000.0);
  EXPECT_DOUBLE_EQ(QpGiveUpMs(t.attr.timeout, t.attr.retry_cnt), give_up_ms);
  // The knobs' defaults are the same numbers.
  EXPECT_EQ(QpKnobs{}.timeout, 14);
  EXPECT_EQ(QpKnobs{}.retry_cnt, 3);
  // NCCL's defaults would keep a dead QP retrying for half a minute.
  EXPECT_NEAR(QpGiveUpMs(20, 7), 34360.0, 1.0);
}

TEST(QpAttrs, KnobsApplyUnderTheTrafficClassPolicy) {
  QpKnobs k;
  k.timeout = 9;
  k.retry_cnt = 5;
  k.sl = 4;
  k.traffic_class = 106;
  k.mtu_cap = IBV_MTU_512;
  RcQpParams p;
  ApplyQpKnobs(k, -1, -1, &p);  // the policy leaves the default: the knobs apply
  EXPECT_EQ(p.timeout, 9);
  EXPECT_EQ(p.retry_cnt, 5);
  EXPECT_EQ(p.sl, 4);
  EXPECT_EQ(p.traffic_class, 106);
  EXPECT_EQ(p.mtu_cap, IBV_MTU_512);
  ApplyQpKnobs(k, 46 << 2, 2, &p);  // a communicator's trafficClass, or the SLA level: they win
  EXPECT_EQ(p.traffic_class, 46 << 2);
  EXPECT_EQ(p.sl, 2);
  ApplyQpKnobs(QpKnobs{}, -1, -1, &p);  // nothing set anywhere: 0, as NCCL
  EXPECT_EQ(p.traffic_class, 0);
  EXPECT_EQ(p.sl, 0);
  EXPECT_EQ(p.mtu_cap, IBV_MTU_4096);
}

TEST(QpAttrs, PathMtuIsThePortsActiveMtuUnderTheCap) {
  EXPECT_EQ(EffectivePathMtu(IBV_MTU_1024, IBV_MTU_4096), IBV_MTU_1024);  // rxe over a 1500-byte netdev
  EXPECT_EQ(EffectivePathMtu(IBV_MTU_4096, IBV_MTU_4096), IBV_MTU_4096);
  EXPECT_EQ(EffectivePathMtu(IBV_MTU_4096, IBV_MTU_512), IBV_MTU_512);
}

TEST(QpAttrs, ValidationNamesTheFieldAndItsRange) {
  EXPECT_TRUE(ValidateRcQpParams(Sample()).ok());
  struct Case {
    void (*mutate)(RcQpParams&);
    const char* text;
  };
  for (const Case& c : {Case{[](RcQpParams& p) { p.port = 0; }, "port=0 out of range; accepted: 1..255"},
                        Case{[](RcQpParams& p) { p.remote_qpn = 1u << 24; }, "remote_qpn=16777216"},
                        Case{[](RcQpParams& p) { p.remote_psn = 1u << 24; }, "remote_psn="},
                        Case{[](RcQpParams& p) { p.local_psn = 1u << 24; }, "local_psn="},
                        Case{[](RcQpParams& p) { p.flow_label = 1u << 20; }, "flow_label=1048576"},
                        Case{[](RcQpParams& p) { p.sl = 16; }, "sl=16"},
                        Case{[](RcQpParams& p) { p.timeout = 32; }, "timeout=32"},
                        Case{[](RcQpParams& p) { p.retry_cnt = 8; }, "retry_cnt=8"},
                        Case{[](RcQpParams& p) { p.rnr_retry = 8; }, "rnr_retry=8"},
                        Case{[](RcQpParams& p) { p.mtu_cap = static_cast<ibv_mtu>(6); }, "mtu_cap=6"}}) {
    RcQpParams p = Sample();
    c.mutate(p);
    Status s = ValidateRcQpParams(p);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_NE(s.message().find(c.text), std::string::npos) << s.message();
  }
}

TEST(QpAttrs, FlowLabelMapsToTheWantedRoceSourcePort) {
  // Known value of the kernel's folding: 0xfedcb -> low 0x2dcb ^ high 0x3f = 0x2df4 | 0xc000.
  EXPECT_EQ(UdpSourcePortForFlowLabel(0xfedcb), 0xedf4);
  EXPECT_EQ(UdpSourcePortForFlowLabel(0), 0xc000);
  for (uint32_t sport = 0xc000; sport <= 0xffff; ++sport) {
    uint32_t fl = 0;
    ASSERT_TRUE(FlowLabelForUdpSourcePort(static_cast<uint16_t>(sport), &fl).ok());
    ASSERT_NE(fl, 0u) << sport;
    ASSERT_LE(fl, 0xfffffu);
    ASSERT_EQ(UdpSourcePortForFlowLabel(fl), sport);
  }
  uint32_t fl = 0;
  Status s = FlowLabelForUdpSourcePort(4791, &fl);
  EXPECT_NE(s.message().find("accepted: 49152..65535"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ff::verbs
