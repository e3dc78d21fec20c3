// RC QP state transitions (see qp_attrs.h).
#include "verbs/qp_attrs.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ff::verbs {
namespace {

constexpr uint32_t k24Bits = 0xffffff;
constexpr uint32_t kFlowLabelBits = 0xfffff;
constexpr uint16_t kRoceSportMin = 0xc000;  // RoCE v2 source ports live in [0xC000, 0xFFFF]

Status OutOfRange(const char* field, uint64_t value, const char* accepted) {
  return InvalidArgument(std::string("RC QP parameter ") + field + "=" + std::to_string(value) +
                         " out of range; accepted: " + accepted);
}

bool ValidMtu(ibv_mtu m) { return m >= IBV_MTU_256 && m <= IBV_MTU_4096; }

}  // namespace

Status ValidateRcQpParams(const RcQpParams& p) {
  if (p.port < 1) return OutOfRange("port", p.port, "1..255");
  if (p.remote_qpn > k24Bits) return OutOfRange("remote_qpn", p.remote_qpn, "0..0xffffff (24 bits)");
  if (p.remote_psn > k24Bits) return OutOfRange("remote_psn", p.remote_psn, "0..0xffffff (24 bits)");
  if (p.local_psn > k24Bits) return OutOfRange("local_psn", p.local_psn, "0..0xffffff (24 bits)");
  if (p.flow_label > kFlowLabelBits) return OutOfRange("flow_label", p.flow_label, "0..0xfffff (20 bits)");
  if (p.sl > 15) return OutOfRange("sl", p.sl, "0..15");
  if (p.timeout > 31) return OutOfRange("timeout", p.timeout, "0..31 (4.096 us * 2^timeout)");
  if (p.retry_cnt > 7) return OutOfRange("retry_cnt", p.retry_cnt, "0..7");
  if (p.rnr_retry > 7) return OutOfRange("rnr_retry", p.rnr_retry, "0..7 (7 = infinite)");
  if (p.min_rnr_timer > 31) return OutOfRange("min_rnr_timer", p.min_rnr_timer, "0..31");
  if (!ValidMtu(p.port_active_mtu))
    return OutOfRange("port_active_mtu", p.port_active_mtu, "IBV_MTU_256..IBV_MTU_4096");
  if (!ValidMtu(p.mtu_cap)) return OutOfRange("mtu_cap", p.mtu_cap, "IBV_MTU_256..IBV_MTU_4096");
  return Status::Ok();
}

ibv_mtu EffectivePathMtu(ibv_mtu active, ibv_mtu cap) { return std::min(active, cap); }

void ApplyQpKnobs(const QpKnobs& k, int policy_tc, int policy_sl, RcQpParams* p) {
  p->timeout = static_cast<uint8_t>(k.timeout);
  p->retry_cnt = static_cast<uint8_t>(k.retry_cnt);
  p->mtu_cap = k.mtu_cap;
  const int tc = policy_tc >= 0 && policy_tc <= 255 ? policy_tc : k.traffic_class;
  p->traffic_class = static_cast<uint8_t>(tc >= 0 && tc <= 255 ? tc : 0);
  const int sl = policy_sl >= 0 && policy_sl <= 15 ? policy_sl : k.sl;
  p->sl = static_cast<uint8_t>(sl >= 0 && sl <= 15 ? sl : 0);
}

double QpGiveUpMs(int timeout, int retry_cnt) {
  return (retry_cnt + 1) * 4.096e-3 * static_cast<double>(1ull << std::min(std::max(timeout, 0), 31));
}

QpTransition BuildInit(const RcQpParams& p) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_INIT;
  t.attr.pkey_index = p.pkey_index;
  t.attr.port_num = p.port;
  t.attr.qp_access_flags = static_cast<unsigned>(p.access_flags);
  t.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  return t;
}

QpTransition BuildRtr(const RcQpParams& p) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTR;
  t.attr.path_mtu = EffectivePathMtu(p.port_active_mtu, p.mtu_cap);
  t.attr.dest_qp_num = p.remote_qpn & k24Bits;
  t.attr.rq_psn = p.remote_psn & k24Bits;
  t.attr.max_dest_rd_atomic = p.max_dest_rd_atomic;
  t.attr.min_rnr_timer = p.min_rnr_timer;
  ibv_ah_attr& ah = t.attr.ah_attr;
  // Always global: RoCE needs the GRH to route at all, and on InfiniBand it is harmless and lets
  // the same code cross subnets; the LID matters only on InfiniBand.
  ah.is_global = 1;
  std::memcpy(ah.grh.dgid.raw, p.remote_gid.data(), sizeof(ah.grh.dgid.raw));
  ah.grh.sgid_index = p.gid_index;
  ah.grh.flow_label = p.flow_label & kFlowLabelBits;
  ah.grh.hop_limit = p.hop_limit;
  ah.grh.traffic_class = p.traffic_class;
  ah.dlid = p.remote_lid;
  ah.sl = p.sl;
  ah.src_path_bits = 0;
  ah.static_rate = 0;
  ah.port_num = p.port;
  t.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  return t;
}

QpTransition BuildRts(const RcQpParams& p) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTS;
  t.attr.timeout = p.timeout;
  t.attr.retry_cnt = p.retry_cnt;
  t.attr.rnr_retry = p.rnr_retry;
  t.attr.sq_psn = p.local_psn & k24Bits;
  t.attr.max_rd_atomic = p.max_rd_atomic;
  t.mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
           IBV_QP_MAX_QP_RD_ATOMIC;
  return t;
}

uint16_t UdpSourcePortForFlowLabel(uint32_t flow_label) {
  // The kernel folds the upper 6 of the 20 bits onto the lower 14 and sets the top two port bits.
  const uint32_t low = flow_label & 0x3fff;
  const uint32_t high = (flow_label & 0xfc000) >> 14;
  return static_cast<uint16_t>((low ^ high) | kRoceSportMin);
}

Status FlowLabelForUdpSourcePort(uint16_t sport, uint32_t* flow_label) {
  if (sport < kRoceSportMin) {
    return InvalidArgument("RoCE v2 source port " + std::to_string(sport) +
                           " cannot come from a flow label; accepted: 49152..65535");
  }
  const uint32_t low = sport & 0x3fff;
  // A zero flow label would let the HCA pick the port from the QP numbers; 0xC000 comes from
  // high=1, low=1 instead (1 ^ 1 = 0).
  *flow_label = low != 0 ? low : ((1u << 14) | 1u);
  return Status::Ok();
}

}  // namespace ff::verbs
