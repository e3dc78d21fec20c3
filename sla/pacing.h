// Level-3 bandwidth cap: how fast a connection's paths may send (SO_MAX_PACING_RATE), from the SLA level.
#pragma once

#include <cstdint>

#include "sla/sla_level.h"

namespace ff::sla {

struct PacingInputs {
  bool steer = false;                // AI_FLEXIFORCE_ENABLE=1; observe-only never paces
  SlaLevel level = SlaLevel::kLevel3;
  int level3_cap_pct = 80;           // FLEXIFORCE_LEVEL3_CAP_PCT: percent of the link rate
  int64_t link_mbps = 0;             // the device's link rate (knob or sysfs); <= 0 unknown
  int npaths = 1;                    // paths (sockets) the connection stripes over
};

struct PacingDecision {
  // 0 = unpaced. The cap is the connection's: each path gets an equal share, so the sum over the
  // paths never exceeds it (after a failover the survivors keep their share: still under the cap).
  uint64_t connection_bytes_per_s = 0;
  uint64_t path_bytes_per_s = 0;
  const char* reason = "";  // why (un)paced, for the connect log line
};

PacingDecision DecidePacing(const PacingInputs& in);

}  // namespace ff::sla
