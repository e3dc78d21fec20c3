// The transport decision: the library, then the ports discovery finds, then the setting's rule.
#include "verbs/transport_choice.h"

namespace ff::verbs {

bool ParseTransportSetting(const std::string& text, TransportSetting* out) {
  if (text == "auto") *out = TransportSetting::kAuto;
  else if (text == "verbs") *out = TransportSetting::kVerbs;
  else if (text == "tcp") *out = TransportSetting::kTcp;
  else return false;
  return true;
}

Status ChooseTransport(TransportSetting setting, const IbverbsLoader& ib, const DiscoveryOptions& options,
                       TransportChoice* out) {
  *out = TransportChoice{};
  if (setting == TransportSetting::kTcp) {
    out->reason = "FLEXIFORCE_TRANSPORT=tcp";
    return Status::Ok();
  }
  const char* var = setting == TransportSetting::kAuto ? "FLEXIFORCE_TRANSPORT=auto" : "FLEXIFORCE_TRANSPORT=verbs";
  std::string why_not;
  if (!ib.available()) {
    why_not = ib.library() + " cannot be used (" + ib.error() + ")";
  } else {
    out->discovery = DiscoverWithVerbs(ib, options);
    if (out->discovery.ports.empty()) {
      why_not = std::string("no ACTIVE RDMA port with a usable GID") +
                (options.filter.empty() ? std::string() : " matches NCCL_IB_HCA") + " (" +
                std::to_string(ib.DeviceCount()) + " verbs device(s) seen)";
    }
  }
  if (!why_not.empty()) {
    if (setting == TransportSetting::kVerbs)
      return SystemError(std::string(var) + " but " + why_not +
                         "; set FLEXIFORCE_TRANSPORT=tcp or auto (accepted: auto, verbs or tcp) to use TCP");
    out->reason = std::string(var) + ": TCP, since " + why_not;
    return Status::Ok();
  }
  out->verbs = true;
  std::string list;
  for (const auto& p : out->discovery.ports)
    list += (list.empty() ? "" : ", ") + p.device + ":" + std::to_string(p.port);
  out->reason = std::string(var) + ": RDMA verbs on " + std::to_string(out->discovery.ports.size()) +
                " ACTIVE port(s) (" + list + ")";
  return Status::Ok();
}

}  // namespace ff::verbs
