// The attributes that take an RC queue pair from RESET through INIT, RTR and RTS: pure functions of
// a small parameter struct, so every field and mask bit is checked without a device.
#pragma once

#include <infiniband/verbs.h>  // types only

#include <array>
#include <cstdint>

#include "base/status.h"

namespace ff::verbs {

struct RcQpParams {
  uint8_t port = 1;
  uint8_t gid_index = 0;  // local GID (gid_select.h)
  uint16_t pkey_index = 0;
  int access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

  // The peer, from the connection handshake.
  std::array<uint8_t, 16> remote_gid{};
  uint16_t remote_lid = 0;  // InfiniBand only; RoCE routes by GID
  uint32_t remote_qpn = 0;  // 24 bits
  uint32_t remote_psn = 0;  // the peer's first send PSN: our receive PSN (24 bits)
  uint32_t local_psn = 0;   // our first send PSN (24 bits)

  // Path MTU: the port's active MTU, capped by a knob (a fabric whose switches carry less).
  ibv_mtu port_active_mtu = IBV_MTU_1024;
  ibv_mtu mtu_cap = IBV_MTU_4096;

  // Steering, from the oracle: the flow label (20 bits) feeds the RoCE v2 UDP source port, so it is
  // the path entropy; the GRH traffic class byte (DSCP << 2 plus the ECN bits, NCCL_IB_TC's
  // convention); SL for InfiniBand/PFC. ApplyQpKnobs fills the last two from the policy and knobs.
  uint32_t flow_label = 0;
  uint8_t traffic_class = 0;  // 8 bits
  uint8_t sl = 0;             // 4 bits
  uint8_t hop_limit = 255;

  // Transport retry (defaults: QpKnobs below, which says why).
  uint8_t timeout = 14;            // 5 bits
  uint8_t retry_cnt = 3;           // 3 bits
  uint8_t rnr_retry = 7;           // 7 = retry forever: receives are pre-posted, RNR means "slow", not dead
  uint8_t min_rnr_timer = 12;      // 0.64 ms between RNR retries
  uint8_t max_rd_atomic = 1;       // outstanding RDMA reads we issue (flush reads only)
  uint8_t max_dest_rd_atomic = 1;  // RDMA reads the peer may have outstanding at us
};

// The QP knobs (NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT, NCCL_IB_SL, NCCL_IB_TC, FLEXIFORCE_IB_MTU), as
// the plugin's registry resolved them.
//
// Why timeout 14 and retry_cnt 3. The local ACK timeout is 4.096 us * 2^timeout = 67.1 ms per try,
// and the QP gives up after retry_cnt retries: (3 + 1) x 67.1 = 268 ms.
//  - 67 ms per try is far above any fabric round trip, even on a host whose CPUs are saturated (the
//    VM lane under TCG sees 20+ ms per 512 KiB write), so a busy but healthy path does not make the
//    HCA retransmit.
//  - 268 ms is above the watchdog's absolute rule (FLEXIFORCE_PATH_STALL_MS, 100 ms; core/path_health.h),
//    so the watchdog, not the transport, decides a silent QP is dead on a connection with another path;
//    and it is well under FLEXIFORCE_PEER_TIMEOUT_MS (10 s), which bounds the last path, where the
//    QP's own give-up (IBV_WC_RETRY_EXC_ERR) is what ends it.
//  - NCCL's defaults (timeout 20, 7 retries: 8 x 4.3 s = 34 s) would hold a dead path's work requests,
//    and a last path's failure, for half a minute.
// timeout 0 means "wait forever" in the IB spec, so the knob starts at 1.
struct QpKnobs {
  int timeout = 14;          // NCCL_IB_TIMEOUT, 1..31
  int retry_cnt = 3;         // NCCL_IB_RETRY_CNT, 0..7
  int sl = -1;               // NCCL_IB_SL, 0..15; -1: the SLA policy's SL, else 0
  int traffic_class = -1;    // NCCL_IB_TC, 0..255; -1: the SLA policy's traffic class, else 0
  ibv_mtu mtu_cap = IBV_MTU_4096;  // FLEXIFORCE_IB_MTU: the path MTU is the ports' active MTU under this
};

// The fields of `p` the knobs and the traffic-class policy set. `policy_tc` is the traffic-class byte
// the policy chose (the communicator's ncclConfig trafficClass, FLEXIFORCE_TRAFFIC_CLASS, or the SLA
// level's DSCP when steering), -1 when it leaves the backend's default; `policy_sl` likewise (the SLA
// level's SL). Precedence: the policy, then NCCL_IB_TC / NCCL_IB_SL, then 0 - so a communicator's
// trafficClass always wins, as it does for NCCL's own transport.
void ApplyQpKnobs(const QpKnobs& k, int policy_tc, int policy_sl, RcQpParams* p);

// (retry_cnt + 1) x 4.096 us x 2^timeout: how long a QP retries a silent peer before it fails.
double QpGiveUpMs(int timeout, int retry_cnt);

struct QpTransition {
  ibv_qp_attr attr{};
  int mask = 0;
};

// Checks every field against its width (PSN/QPN 24 bits, flow label 20, SL 4, timeout 5,
// retry 3), port >= 1 and the MTU enums; the error names the field and its accepted range.
Status ValidateRcQpParams(const RcQpParams& p);

QpTransition BuildInit(const RcQpParams& p);
QpTransition BuildRtr(const RcQpParams& p);
QpTransition BuildRts(const RcQpParams& p);

// min(port's active MTU, cap): the enum is ordered by size.
ibv_mtu EffectivePathMtu(ibv_mtu active, ibv_mtu cap);

// The RoCE v2 UDP source port a flow label produces (the kernel's folding of the 20 bits into 14,
// above 0xC000), and a flow label that produces a wanted source port in [0xC000, 0xFFFF]: how the
// oracle's source-port entropy becomes a QP's flow label. Never returns 0 (0 means "let the HCA hash").
uint16_t UdpSourcePortForFlowLabel(uint32_t flow_label);
Status FlowLabelForUdpSourcePort(uint16_t sport, uint32_t* flow_label);

}  // namespace ff::verbs
