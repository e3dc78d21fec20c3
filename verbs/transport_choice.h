// FLEXIFORCE_TRANSPORT=auto|verbs|tcp made concrete: whether this process carries its connections over
// RDMA verbs or TCP, on which ports, and why, in one sentence for the log.
#pragma once

#include <string>

#include "base/status.h"
#include "verbs/device_discovery.h"
#include "verbs/ibverbs_loader.h"

namespace ff::verbs {

enum class TransportSetting { kAuto, kVerbs, kTcp };

// "auto", "verbs", "tcp" (the registry has already refused anything else); false for other text.
bool ParseTransportSetting(const std::string& text, TransportSetting* out);

struct TransportChoice {
  bool verbs = false;
  std::string reason;     // "FLEXIFORCE_TRANSPORT=auto: 2 ACTIVE RDMA port(s) (rxe_a0:1, rxe_b0:1)"
  Discovery discovery;    // the usable ports when verbs is chosen (empty otherwise)
};

// tcp: TCP without touching libibverbs. auto: verbs when `ib` is available and discovery finds an
// ACTIVE usable port, else TCP with the reason. verbs: the same, but no library or no port is an
// error naming the variable, the reason and the accepted forms. Discovery warnings are returned in
// out->discovery.warnings for the caller to log.
Status ChooseTransport(TransportSetting setting, const IbverbsLoader& ib, const DiscoveryOptions& options,
                       TransportChoice* out);

}  // namespace ff::verbs
