// NIC soft-health monitor (see nic_health_monitor.h for the detection rules).
#include "health/nic_health_monitor.h"

#include <cinttypes>
#include <cstdio>

#include "pathctl/link_health.h"

namespace ff::health {
using pathctl::HealthPolicy;
using pathctl::HealthSignalKind;
using pathctl::HealthTransition;
using pathctl::LinkHealthTracker;
using pathctl::LinkState;

namespace {

using std::chrono::nanoseconds;

// Delta of a monotonic counter; nullopt without two readings or when it went down (wrap,
// driver reset), which re-baselines instead of counting as errors.
std::optional<uint64_t> Delta(const std::optional<uint64_t>& prev, const std::optional<uint64_t>& cur) {
  if (!prev || !cur || *cur < *prev) return std::nullopt;
  return *cur - *prev;
}

double Ms(nanoseconds d) { return static_cast<double>(d.count()) / 1e6; }

// Appends printf-formatted text to s; reuses its capacity (no allocation once warm).
template <typename... Args>
void Append(std::string* s, const char* fmt, Args... args) {
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, fmt, args...);
  if (n <= 0) return;
  if (!s->empty()) s->append("; ");
  s->append(buf, std::min(static_cast<size_t>(n), sizeof buf - 1));
}

}  // namespace

struct NicHealthMonitor::Nic {
  Nic(const NicHealthConfig& config, const std::string& name, const Clock& clock)
      : ifname(name),
        counters(config.root, name),
        tracker(1, clock,
                HealthPolicy{.soft_detections = config.soft_detections,
                             .soft_window = config.soft_window,
                             .recovery_stable = config.recovery_stable}) {
    if (auto bdf = pcie::ResolveNetInterfacePciAddress(config.root, name)) pcie = pcie::PcieLinkReader(config.root, *bdf);
    has_loss = counters.has_rdma() && counters.has_rdma_loss_counters();
  }

  std::string ifname;
  NicCounterReader counters;
  pcie::PcieLinkReader pcie;
  LinkHealthTracker tracker;
  bool fec_present = false;
  bool fec_warned = false;

  bool have_prev = false;
  nanoseconds prev_time{0};
  NetCounters net, prev_net;
  RdmaCounters rdma, prev_rdma;
  bool has_loss = false;  // the port keeps transport loss counters (hw_counters)
  RdmaLossCounters loss, prev_loss;
  FecStatus fec_status = FecStatus::kUnsupported;
  FecStats fec, prev_fec;
  pcie::PcieLinkState link, prev_link;
  std::optional<uint32_t> first_width;
  std::optional<double> first_speed;

  bool degraded = false;
  std::string reason, last_detection, scratch, fec_error;
  uint64_t detections = 0, samples = 0;
};

NicHealthMonitor::NicHealthMonitor(NicHealthConfig config, const Clock& clock)
    : config_(std::move(config)), clock_(clock), fec_(config_.root) {
  warn_ = config_.warn ? config_.warn : [](const std::string& m) { std::fprintf(stderr, "flexiforce health: %s\n", m.c_str()); };
}

NicHealthMonitor::~NicHealthMonitor() = default;

void NicHealthMonitor::Warn(const std::string& message) const { warn_(message); }

void NicHealthMonitor::Watch(const std::string& ifname) {
  std::lock_guard lk(mu_);
  if (nics_.count(ifname)) return;
  auto nic = std::make_unique<Nic>(config_, ifname, clock_);
  // One query decides whether this interface has FEC statistics at all; veth, lo and
  // virtio answer "unsupported" and are never asked again.
  if (nic->counters.interface_exists()) {
    FecStats probe;
    std::string err;
    FecStatus s = fec_.Read(ifname, &probe, &err);
    nic->fec_present = s != FecStatus::kUnsupported;
    if (s == FecStatus::kError) {
      nic->fec_warned = true;
      Warn(err);
    }
  }
  nics_.emplace(ifname, std::move(nic));
  std::lock_guard vl(verdict_mu_);
  verdicts_.emplace(ifname, false);
}

std::vector<NicVerdictChange> NicHealthMonitor::Poll() {
  std::vector<NicVerdictChange> changes;
  std::unique_lock lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) return changes;  // another thread is sampling right now
  const nanoseconds now = clock_.Now();
  if (sampled_ && now - last_sample_ < config_.interval) return changes;
  sampled_ = true;
  last_sample_ = now;
  samples_.fetch_add(1, std::memory_order_relaxed);
  for (auto& [name, nic] : nics_) Sample(*nic, now, &changes);
  return changes;
}

void NicHealthMonitor::Sample(Nic& nic, nanoseconds now, std::vector<NicVerdictChange>* changes) {
  if (!nic.counters.interface_exists()) return;
  ++nic.samples;
  nic.counters.ReadNet(&nic.net, warn_);
  if (nic.counters.has_rdma()) nic.counters.ReadRdma(&nic.rdma, warn_);
  if (nic.has_loss) nic.counters.ReadRdmaLoss(&nic.loss, warn_);
  if (nic.fec_present) {
    nic.fec_status = fec_.Read(nic.ifname, &nic.fec, &nic.fec_error);
    if (nic.fec_status == FecStatus::kError && !nic.fec_warned) {
      nic.fec_warned = true;
      Warn(nic.fec_error);
    }
  }
  if (nic.pcie.present()) nic.pcie.Read(&nic.link, warn_);

  std::string& why = nic.scratch;
  why.clear();
  const nanoseconds dt = now - nic.prev_time;
  const double dt_ms = Ms(dt);

  if (nic.have_prev) {
    // Received packets over the interval; a reset counter skips the rate checks this time.
    const auto& rxp_prev = nic.prev_net[NetCounter::kRxPackets];
    const auto& rxp_cur = nic.net[NetCounter::kRxPackets];
    const auto rx_packets = Delta(rxp_prev, rxp_cur);
    const bool rx_known = rx_packets || !rxp_cur;  // absent counter: judge against 1
    const double packets = static_cast<double>(rx_packets.value_or(0) ? *rx_packets : 1);

    if (auto uncorr = Delta(nic.prev_fec.uncorrectable_blocks, nic.fec.uncorrectable_blocks); uncorr && *uncorr && rx_known) {
      const double rate = static_cast<double>(*uncorr) / packets;
      if (rate > config_.fec_error_rate)
        Append(&why, "fec uncorrectable %" PRIu64 " blocks in %.0f ms (rate %.2g > %.2g per rx packet)", *uncorr, dt_ms,
               rate, config_.fec_error_rate);
    }
    if (auto bits = Delta(nic.prev_fec.corrected_bits, nic.fec.corrected_bits); bits && *bits && dt.count() > 0) {
      const auto& speed = nic.net[NetCounter::kSpeedMbps];
      const auto rx_bytes = Delta(nic.prev_net[NetCounter::kRxBytes], nic.net[NetCounter::kRxBytes]);
      double line_bits = 0;
      if (speed && *speed) line_bits = static_cast<double>(*speed) * 1e6 * static_cast<double>(dt.count()) / 1e9;
      else if (rx_bytes) line_bits = static_cast<double>(*rx_bytes) * 8;
      const double ber = static_cast<double>(*bits) / std::max(line_bits, 1.0);
      if (ber > config_.fec_corrected_ber)
        Append(&why, "fec corrected %" PRIu64 " bits in %.0f ms (pre-FEC BER %.2g > %.2g)", *bits, dt_ms, ber,
               config_.fec_corrected_ber);
    }
    const auto crc = Delta(nic.prev_net[NetCounter::kRxCrcErrors], nic.net[NetCounter::kRxCrcErrors]);
    const auto frame = Delta(nic.prev_net[NetCounter::kRxFrameErrors], nic.net[NetCounter::kRxFrameErrors]);
    if (const uint64_t bad = crc.value_or(0) + frame.value_or(0); bad && rx_known) {
      const double rate = static_cast<double>(bad) / packets;
      if (rate > config_.crc_error_rate)
        Append(&why, "rx crc+frame errors %" PRIu64 " in %.0f ms (rate %.2g > %.2g per rx packet)", bad, dt_ms, rate,
               config_.crc_error_rate);
    }
    if (auto flaps = Delta(nic.prev_net[NetCounter::kCarrierChanges], nic.net[NetCounter::kCarrierChanges]); flaps && *flaps)
      Append(&why, "carrier_changes +%" PRIu64 " in %.0f ms", *flaps, dt_ms);
    for (size_t i = 0; i < kRdmaCounterCount; ++i) {
      if (auto d = Delta(nic.prev_rdma.values[i], nic.rdma.values[i]); d && *d)
        Append(&why, "rdma %s port %u %s +%" PRIu64 " in %.0f ms", nic.counters.rdma_device().c_str(),
               nic.counters.rdma_port(), RdmaCounterName(static_cast<RdmaCounter>(i)).data(), *d, dt_ms);
    }
    if (nic.has_loss) {
      // Transport loss on the wire (see the header); the counter names that rose go in the reason.
      static constexpr RdmaLossCounter kLoss[] = {
          RdmaLossCounter::kOutOfSequence, RdmaLossCounter::kPacketSeqErr, RdmaLossCounter::kImpliedNakSeqErr,
          RdmaLossCounter::kRxeOutOfSeqRequest, RdmaLossCounter::kRxeRcvdSeqErr};
      uint64_t events = 0;
      std::string which;
      for (RdmaLossCounter c : kLoss) {
        const size_t i = static_cast<size_t>(c);
        if (auto d = Delta(nic.prev_loss.values[i], nic.loss.values[i]); d && *d) {
          events += *d;
          which += (which.empty() ? "" : ", ") + std::string(RdmaLossCounterName(c)) + " +" + std::to_string(*d);
        }
      }
      if (events != 0) {
        const auto rx = Delta(nic.prev_net[NetCounter::kRxPackets], nic.net[NetCounter::kRxPackets]);
        const auto tx = Delta(nic.prev_net[NetCounter::kTxPackets], nic.net[NetCounter::kTxPackets]);
        const uint64_t pkts = std::max<uint64_t>(rx.value_or(0) + tx.value_or(0), 1);
        const double rate = static_cast<double>(events) / static_cast<double>(pkts);
        if (rate > config_.rdma_loss_rate)
          Append(&why, "rdma %s port %u hidden loss %.2g per packet > %.2g (%s over %" PRIu64 " packets in %.0f ms)",
                 nic.counters.rdma_device().c_str(), nic.counters.rdma_port(), rate, config_.rdma_loss_rate,
                 which.c_str(), pkts, dt_ms);
      }
    }
    const std::pair<const std::optional<uint64_t>*, const std::optional<uint64_t>*> aer[] = {
        {&nic.prev_link.aer_correctable, &nic.link.aer_correctable},
        {&nic.prev_link.aer_nonfatal, &nic.link.aer_nonfatal},
        {&nic.prev_link.aer_fatal, &nic.link.aer_fatal}};
    const char* aer_names[] = {"correctable", "nonfatal", "fatal"};
    for (size_t i = 0; i < 3; ++i) {
      if (auto d = Delta(*aer[i].first, *aer[i].second); d && *d)
        Append(&why, "pcie %s aer %s errors +%" PRIu64 " in %.0f ms", nic.pcie.pci_address().c_str(), aer_names[i], *d,
               dt_ms);
    }
  }

  // PCIe link training is a state: judged on every sample, the first included.
  if (config_.pcie_degradation && nic.pcie.has_link()) {
    const auto& l = nic.link;
    if (!nic.first_width && l.current_width) nic.first_width = l.current_width;
    if (!nic.first_speed && l.current_speed_gts) nic.first_speed = l.current_speed_gts;
    const auto capable_width = l.capable_width();
    const auto capable_speed = l.capable_speed_gts();
    if (l.current_width) {
      if (capable_width && *l.current_width < *capable_width)
        Append(&why, "pcie %s link width x%u below x%u the link can reach", nic.pcie.pci_address().c_str(),
               *l.current_width, *capable_width);
      else if (*l.current_width < *nic.first_width)
        Append(&why, "pcie %s link width x%u below x%u seen at first sample", nic.pcie.pci_address().c_str(),
               *l.current_width, *nic.first_width);
    }
    if (l.current_speed_gts) {
      if (capable_speed && *l.current_speed_gts < *capable_speed)
        Append(&why, "pcie %s link speed %.1f GT/s below %.1f GT/s the link can reach", nic.pcie.pci_address().c_str(),
               *l.current_speed_gts, *capable_speed);
      else if (*l.current_speed_gts < *nic.first_speed)
        Append(&why, "pcie %s link speed %.1f GT/s below %.1f GT/s seen at first sample",
               nic.pcie.pci_address().c_str(), *l.current_speed_gts, *nic.first_speed);
    }
  }

  nic.have_prev = true;
  nic.prev_time = now;
  nic.prev_net = nic.net;
  nic.prev_rdma = nic.rdma;
  nic.prev_loss = nic.loss;
  nic.prev_fec = nic.fec;
  nic.prev_link = nic.link;

  std::optional<HealthTransition> t;
  if (!why.empty()) {
    ++nic.detections;
    nic.last_detection = why;
    t = nic.tracker.Report(0, {HealthSignalKind::kErrorCounters, 1});
  }
  if (!t) {
    auto ticks = nic.tracker.Tick();
    if (!ticks.empty()) t = ticks.front();
  }
  if (!t) return;
  nic.degraded = t->to != LinkState::kUp;
  if (nic.degraded) {
    char tail[96];
    std::snprintf(tail, sizeof tail, " (%d detections within %.0f ms)", config_.soft_detections, Ms(config_.soft_window));
    nic.reason = why + tail;
  } else {
    char text[96];
    std::snprintf(text, sizeof text, "no detection for %.0f ms", Ms(config_.recovery_stable));
    nic.reason = text;
  }
  changes->push_back({nic.ifname, nic.degraded, nic.reason});
  std::lock_guard vl(verdict_mu_);
  if (auto it = verdicts_.find(nic.ifname); it != verdicts_.end()) it->second = nic.degraded;
}

bool NicHealthMonitor::IsDegraded(const std::string& ifname) const {
  std::lock_guard vl(verdict_mu_);
  auto it = verdicts_.find(ifname);
  return it != verdicts_.end() && it->second;
}

std::vector<std::string> NicHealthMonitor::Watched() const {
  std::lock_guard lk(mu_);
  std::vector<std::string> out;
  for (const auto& [name, nic] : nics_) out.push_back(name);
  return out;
}

std::optional<NicSnapshot> NicHealthMonitor::Snapshot(const std::string& ifname) const {
  std::lock_guard lk(mu_);
  auto it = nics_.find(ifname);
  if (it == nics_.end()) return std::nullopt;
  const Nic& n = *it->second;
  NicSnapshot s;
  s.ifname = n.ifname;
  s.exists = n.counters.interface_exists();
  s.degraded = n.degraded;
  s.reason = n.reason;
  s.last_detection = n.last_detection;
  s.detections = n.detections;
  s.samples = n.samples;
  s.has_counters = n.counters.has_net_counters();
  s.counters = n.net;
  s.fec_status = n.fec_present ? n.fec_status : FecStatus::kUnsupported;
  s.fec = n.fec;
  s.rdma_device = n.counters.rdma_device();
  s.rdma_port = n.counters.rdma_port();
  s.rdma = n.rdma;
  s.pci_address = n.pcie.pci_address();
  s.has_pcie_link = n.pcie.has_link();
  s.has_aer = n.pcie.has_aer();
  s.pcie = n.link;
  return s;
}

std::string NicHealthMonitor::Describe(const std::string& ifname) const {
  auto s = Snapshot(ifname);
  if (!s) return ifname + ": not watched";
  if (!s->exists) return ifname + ": no such interface";
  std::string out = ifname + (s->degraded ? ": DEGRADED" : ": healthy");
  if (!s->reason.empty()) out += " (" + s->reason + ")";
  out += "; sources:";
  if (s->has_counters) {
    out += " counters[";
    bool first = true;
    for (size_t i = 0; i < kNetCounterCount; ++i) {
      if (!s->counters.values[i]) continue;
      out += (first ? "" : " ") + std::string(NetCounterName(static_cast<NetCounter>(i))) + "=" +
             std::to_string(*s->counters.values[i]);
      first = false;
    }
    out += "]";
  }
  if (s->fec_status != FecStatus::kUnsupported) {
    out += " fec[";
    if (s->fec_status == FecStatus::kError) out += "error";
    if (s->fec.corrected_blocks) out += "corrected_blocks=" + std::to_string(*s->fec.corrected_blocks) + " ";
    if (s->fec.uncorrectable_blocks) out += "uncorrectable_blocks=" + std::to_string(*s->fec.uncorrectable_blocks) + " ";
    if (s->fec.corrected_bits) out += "corrected_bits=" + std::to_string(*s->fec.corrected_bits);
    if (out.back() == ' ') out.pop_back();
    out += "]";
  }
  if (!s->rdma_device.empty()) {
    out += " rdma[" + s->rdma_device + "/" + std::to_string(s->rdma_port);
    for (size_t i = 0; i < kRdmaCounterCount; ++i) {
      if (s->rdma.values[i])
        out += " " + std::string(RdmaCounterName(static_cast<RdmaCounter>(i))) + "=" + std::to_string(*s->rdma.values[i]);
    }
    out += "]";
  }
  if (s->has_pcie_link || s->has_aer) {
    char buf[160];
    const auto& l = s->pcie;
    std::snprintf(buf, sizeof buf, " pcie[%s x%u/x%u %.1f/%.1f GT/s", s->pci_address.c_str(), l.current_width.value_or(0),
                  l.capable_width().value_or(0), l.current_speed_gts.value_or(0), l.capable_speed_gts().value_or(0));
    out += buf;
    if (s->has_aer) {
      std::snprintf(buf, sizeof buf, " aer cor=%" PRIu64 " nonfatal=%" PRIu64 " fatal=%" PRIu64,
                    l.aer_correctable.value_or(0), l.aer_nonfatal.value_or(0), l.aer_fatal.value_or(0));
      out += buf;
    }
    out += "]";
  }
  if (!s->has_counters && s->fec_status == FecStatus::kUnsupported && s->rdma_device.empty() && !s->has_pcie_link &&
      !s->has_aer)
    out += " none";
  return out;
}

}  // namespace ff::health
