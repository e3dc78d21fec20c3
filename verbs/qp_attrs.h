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
  // the path entropy; traffic class is DSCP << 2 (ECN bits left to the NIC); SL for InfiniBand/PFC.
  uint32_t flow_label = 0;
  uint8_t dscp = 0;  // 6 bits
  uint8_t sl = 0;    // 4 bits
  uint8_t hop_limit = 255;

  // Transport retry. The local ACK timeout is 4.096 us * 2^timeout: 14 -> ~67 ms per try, and the
  // QP gives up after retry_cnt retries, ~4 x 67 = 268 ms. The plugin's watchdog decides first
  // (FLEXIFORCE_PATH_STALL_FAST_MS 10 ms hedges, FLEXIFORCE_PATH_STALL_MS 100 ms fails the path) and
  // fences the QP itself; NCCL's defaults (timeout 20, 7 retries: ~30 s) would hold a dead path's
  // work requests for half a minute. 67 ms stays far above any fabric round trip, so congestion
  // alone does not make the HCA retransmit.
  uint8_t timeout = 14;            // 5 bits
  uint8_t retry_cnt = 3;           // 3 bits
  uint8_t rnr_retry = 7;           // 7 = retry forever: receives are pre-posted, RNR means "slow", not dead
  uint8_t min_rnr_timer = 12;      // 0.64 ms between RNR retries
  uint8_t max_rd_atomic = 1;       // outstanding RDMA reads we issue (flush reads only)
  uint8_t max_dest_rd_atomic = 1;  // RDMA reads the peer may have outstanding at us
};

struct QpTransition {
  ibv_qp_attr attr{};
  int mask = 0;
};

// Checks every field against its width (PSN/QPN 24 bits, flow label 20, DSCP 6, SL 4, timeout 5,
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
