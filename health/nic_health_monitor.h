// Soft health of local NICs: samples error counters (net, FEC, RDMA port, PCIe link/AER),
// turns counter deltas into detections and debounces them into per-NIC degraded verdicts.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "health/fec_stats.h"
#include "health/nic_counters.h"
#include "pcie/pcie_link.h"

namespace ff::health {

// One sample of one interface is a *detection* when any of these holds (counters compare
// against the previous sample; the first sample of a counter, or a counter that went down
// (wrap, driver reset), only records a baseline):
//  - FEC: uncorrectable blocks / received packets > fec_error_rate. Each uncorrectable block
//    corrupts the frame it carries, so this is the frame-loss ratio the PHY inflicts - what
//    the transport above pays for. The denominator is max(rx_packets delta, 1), so
//    uncorrectable blocks on an idle link still count.
//  - FEC: corrected bits / bits the PHY received > fec_corrected_ber (pre-FEC bit error
//    rate, the early warning before blocks become uncorrectable). Bits received = link
//    speed x elapsed time (a PHY receives idles too); rx_bytes*8 when the speed is unknown.
//  - (rx_crc_errors + rx_frame_errors) / max(rx_packets delta, 1) > crc_error_rate.
//  - any rise of an RDMA port error counter (symbol_error, link_error_recovery, link_downed,
//    port_rcv_errors, local_link_integrity_errors, excessive_buffer_overrun_errors), of
//    carrier_changes (a flapping link), or of a PCIe AER total.
//  - RDMA hidden loss: the port's counters of sequence gaps (hw_counters: out_of_sequence,
//    packet_seq_err, implied_nak_seq_err; rxe's out_of_seq_request, rcvd_seq_err: a packet that
//    never arrived, seen by the responder or NAKed to the requester) over the interface's packets
//    (rx + tx: RoCE traffic crosses a software device's netdev) > rdma_loss_rate. Left out:
//    retransmission timeouts and duplicate requests (local_ack_timeout_err, completer_retry_err,
//    duplicate_request), which a busy host's late timers cause on a healthy link - the analogue of
//    TCP's DSACK-reported spurious retransmissions (seen under Soft-RoCE in the VM: 25 duplicates
//    in 1625 packets before any loss was injected); and RNR and buffer shortages (a slow receiver).
//  - PCIe current width/speed below what the link can reach (the smaller of the device's and
//    the upstream port's maxima) or below what the first sample saw. This is a state, not a
//    delta, so it counts from the first sample on and keeps counting while it lasts.
// Debounce (same policy and code as LinkHealthTracker): `soft_detections` detections within
// `soft_window` -> degraded; degraded -> healthy after `recovery_stable` with no detection.
struct NicHealthConfig {
  std::string root;  // "" = the real /sys and ethtool netlink; else a fixture tree
  std::chrono::nanoseconds interval = std::chrono::milliseconds(100);  // sample at most this often
  double fec_error_rate = 1e-6;     // uncorrectable blocks per received packet (the article's 1e-6)
  double fec_corrected_ber = 1e-5;  // pre-FEC BER; RS(544,514) corrects up to ~2.4e-4
  double crc_error_rate = 1e-6;     // CRC + framing errors per received packet
  // Loss events per packet on an RDMA port. A RoCE fabric is run lossless (PFC): a healthy port
  // counts none, so any steady rate is a fault; 1e-3 keeps a stray NAK in a quiet 100 ms sample
  // (one event over a few packets is a high ratio, but needs 3 such samples in 500 ms) apart from
  // a link that loses 1 packet in 1000 - where go-back-N retransmission already costs more
  // throughput than moving the traffic does.
  double rdma_loss_rate = 1e-3;
  bool pcie_degradation = true;     // count PCIe width/speed below capability as a detection
  int soft_detections = 3;
  std::chrono::nanoseconds soft_window = std::chrono::milliseconds(500);
  std::chrono::nanoseconds recovery_stable = std::chrono::milliseconds(2000);
  // Receives each warning once (malformed file, FEC query failure); nullptr = stderr.
  WarnFn warn;
};

struct NicVerdictChange {
  std::string ifname;
  bool degraded = false;
  std::string reason;  // the detection that tipped it, or why it recovered
};

// Latest view of one watched interface, for display.
struct NicSnapshot {
  std::string ifname;
  bool exists = false;  // <root>/sys/class/net/<ifname> was found at Watch()
  bool degraded = false;
  std::string reason;         // of the last verdict change
  std::string last_detection; // most recent detection, even if it did not (yet) change the verdict
  uint64_t detections = 0;    // detections since Watch()
  uint64_t samples = 0;
  bool has_counters = false;
  NetCounters counters;
  FecStatus fec_status = FecStatus::kUnsupported;
  FecStats fec;
  std::string rdma_device;  // empty: no RDMA port behind this interface
  uint32_t rdma_port = 0;
  RdmaCounters rdma;
  std::string pci_address;  // empty: no PCI device
  bool has_pcie_link = false;
  bool has_aer = false;
  pcie::PcieLinkState pcie;
};

class NicHealthMonitor {
 public:
  NicHealthMonitor(NicHealthConfig config, const Clock& clock);
  ~NicHealthMonitor();
  NicHealthMonitor(const NicHealthMonitor&) = delete;
  NicHealthMonitor& operator=(const NicHealthMonitor&) = delete;

  // Starts watching an interface: finds its sources (counters, FEC, RDMA port, PCI device)
  // now. Watching a name twice is a no-op; a name that does not exist has no sources.
  void Watch(const std::string& ifname);

  // Samples every watched interface if `interval` has elapsed since the last sample (the
  // first call samples at once) and returns the verdict changes. Returns at once, reading
  // nothing, within the interval or while another thread is polling.
  std::vector<NicVerdictChange> Poll();

  // Cheap and never waits for a poll in progress (safe on the data path).
  bool IsDegraded(const std::string& ifname) const;
  // One line: verdict, reason, sources found and their latest values.
  std::string Describe(const std::string& ifname) const;
  std::optional<NicSnapshot> Snapshot(const std::string& ifname) const;
  std::vector<std::string> Watched() const;
  // Number of sampling rounds done (each reads every watched interface once).
  uint64_t samples() const { return samples_.load(std::memory_order_relaxed); }

 private:
  struct Nic;
  void Sample(Nic& nic, std::chrono::nanoseconds now, std::vector<NicVerdictChange>* changes);
  void Warn(const std::string& message) const;

  NicHealthConfig config_;
  const Clock& clock_;
  WarnFn warn_;
  mutable std::mutex mu_;  // guards everything below but verdicts_
  std::map<std::string, std::unique_ptr<Nic>, std::less<>> nics_;
  FecStatsSource fec_;
  bool sampled_ = false;
  std::chrono::nanoseconds last_sample_{0};
  std::atomic<uint64_t> samples_{0};
  // Verdicts for IsDegraded(); its own lock is never held across I/O.
  mutable std::mutex verdict_mu_;
  std::map<std::string, bool, std::less<>> verdicts_;
};

}  // namespace ff::health
