// NicHealthMonitor: detections from counter deltas, debounce, recovery, sources, threading.
#include "health/nic_health_monitor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/pcie/fixture_tree.h"

namespace ff::health {
namespace {

using namespace std::chrono_literals;
using ff::testing::FixtureTree;

class FakeClock final : public Clock {
 public:
  std::chrono::nanoseconds Now() const override { return now; }
  std::chrono::nanoseconds now{1s};
};

constexpr char kPort[] = "0000:00:01.0";
constexpr char kBdf[] = "0000:3b:00.0";

class NicHealthMonitorTest : public ::testing::Test {
 protected:
  // eth0: a RoCE NIC with every source; counters start at zero and a x16 Gen4 link.
  void MakeFullNic() {
    t.AddPciDevice(kPort, kBdf);
    t.AddNetInterface("eth0", kPort, kBdf);
    for (const char* n : {"rx_packets", "rx_bytes", "rx_crc_errors", "rx_frame_errors", "rx_errors", "rx_dropped",
                          "tx_errors"})
      Net(n, 0);
    t.Write("sys/class/net/eth0/carrier_changes", "2\n");
    t.Write("sys/class/net/eth0/speed", "100000\n");
    Fec(0, 0);
    t.Mkdir("sys/class/net/eth0/device/infiniband/mlx5_0");
    for (const char* n : {"symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
                          "local_link_integrity_errors", "excessive_buffer_overrun_errors"})
      Rdma(n, 0);
    Pcie("current_link_width", "16");
    Pcie("max_link_width", "16");
    Pcie("current_link_speed", "16.0 GT/s PCIe");
    Pcie("max_link_speed", "16.0 GT/s PCIe");
  }
  void Net(const std::string& name, uint64_t v) {
    t.Write("sys/class/net/eth0/statistics/" + name, std::to_string(v) + "\n");
  }
  void Fec(uint64_t uncorr, uint64_t corr_bits) {
    t.Write("ethtool/eth0/fec", "corrected_blocks " + std::to_string(corr_bits / 4) + "\nuncorrectable_blocks " +
                                    std::to_string(uncorr) + "\ncorrected_bits " + std::to_string(corr_bits) + "\n");
  }
  void Rdma(const std::string& name, uint64_t v) {
    t.Write("sys/class/infiniband/mlx5_0/ports/1/counters/" + name, std::to_string(v) + "\n");
  }
  void Pcie(const std::string& file, const std::string& v) { t.Write(t.PciDir(kPort, kBdf) + "/" + file, v + "\n"); }

  void Start(const std::string& ifname = "eth0") {
    NicHealthConfig c;
    c.root = t.root();
    c.warn = [this](const std::string& m) { warnings.push_back(m); };
    monitor = std::make_unique<NicHealthMonitor>(c, clock);
    monitor->Watch(ifname);
    baseline = monitor->Poll();
  }
  std::vector<NicVerdictChange> Step(std::chrono::milliseconds d = 100ms) {
    clock.now += d;
    return monitor->Poll();
  }
  // One interval of traffic: a million packets, with `uncorr` uncorrectable FEC blocks.
  std::vector<NicVerdictChange> TrafficStep(uint64_t uncorr) {
    packets += 1'000'000;
    fec_uncorr += uncorr;
    Net("rx_packets", packets);
    Fec(fec_uncorr, 0);
    return Step();
  }

  FixtureTree t;
  FakeClock clock;
  std::vector<std::string> warnings;
  std::unique_ptr<NicHealthMonitor> monitor;
  std::vector<NicVerdictChange> baseline;
  uint64_t packets = 0, fec_uncorr = 0;
};

TEST_F(NicHealthMonitorTest, FecRateAboveThresholdThreeTimesWithin500msDegrades) {
  MakeFullNic();
  Start();
  EXPECT_TRUE(baseline.empty());
  EXPECT_TRUE(TrafficStep(10).empty());
  EXPECT_TRUE(TrafficStep(10).empty());
  EXPECT_FALSE(monitor->IsDegraded("eth0"));
  auto c = TrafficStep(10);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].ifname, "eth0");
  EXPECT_TRUE(c[0].degraded);
  EXPECT_NE(c[0].reason.find("fec uncorrectable 10 blocks in 100 ms (rate 1e-05 > 1e-06"), std::string::npos)
      << c[0].reason;
  EXPECT_TRUE(monitor->IsDegraded("eth0"));
  EXPECT_NE(monitor->Describe("eth0").find("DEGRADED"), std::string::npos);
  EXPECT_TRUE(warnings.empty());
}

TEST_F(NicHealthMonitorTest, TwoDetectionsDoNotDegrade) {
  MakeFullNic();
  Start();
  EXPECT_TRUE(TrafficStep(10).empty());
  EXPECT_TRUE(TrafficStep(10).empty());
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(TrafficStep(0).empty());
  EXPECT_FALSE(monitor->IsDegraded("eth0"));
  EXPECT_EQ(monitor->Snapshot("eth0")->detections, 2u);
}

TEST_F(NicHealthMonitorTest, FecRateAtOrBelowThresholdIsNoDetection) {
  MakeFullNic();
  Start();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(TrafficStep(1).empty());  // 1e-6 is not above 1e-6
  EXPECT_EQ(monitor->Snapshot("eth0")->detections, 0u);
}

TEST_F(NicHealthMonitorTest, DetectionsSpacedMoreThan500msApartDoNotDegrade) {
  MakeFullNic();
  Start();
  for (int round = 0; round < 4; ++round) {
    EXPECT_TRUE(TrafficStep(10).empty());
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(TrafficStep(0).empty());  // 600 ms between detections
  }
  EXPECT_EQ(monitor->Snapshot("eth0")->detections, 4u);
  EXPECT_FALSE(monitor->IsDegraded("eth0"));
}

TEST_F(NicHealthMonitorTest, RecoversAfterTheStablePeriod) {
  MakeFullNic();
  Start();
  TrafficStep(10);
  TrafficStep(10);
  ASSERT_EQ(TrafficStep(10).size(), 1u);  // degraded at +300 ms
  for (int i = 0; i < 19; ++i) EXPECT_TRUE(TrafficStep(0).empty()) << "step " << i;  // up to +2200 ms
  EXPECT_TRUE(monitor->IsDegraded("eth0"));
  auto c = TrafficStep(0);  // +2300 ms: 2 s without a detection
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c[0].degraded);
  EXPECT_NE(c[0].reason.find("no detection for 2000 ms"), std::string::npos) << c[0].reason;
  EXPECT_FALSE(monitor->IsDegraded("eth0"));
}

TEST_F(NicHealthMonitorTest, PcieWidthDropFromX16ToX8Degrades) {
  MakeFullNic();
  Start();
  EXPECT_TRUE(Step().empty());
  Pcie("current_link_width", "8");
  EXPECT_TRUE(Step().empty());
  EXPECT_TRUE(Step().empty());
  auto c = Step();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].degraded);
  EXPECT_NE(c[0].reason.find("pcie 0000:3b:00.0 link width x8 below x16"), std::string::npos) << c[0].reason;
  // A width that stays low keeps the NIC degraded.
  for (int i = 0; i < 30; ++i) EXPECT_TRUE(Step().empty());
  EXPECT_TRUE(monitor->IsDegraded("eth0"));
}

TEST_F(NicHealthMonitorTest, PcieSpeedBelowWhatTheFirstSampleSawDegradesWithoutMaxFiles) {
  MakeFullNic();
  t.Remove(t.PciDir(kPort, kBdf) + "/max_link_speed");
  t.Remove(t.PciDir(kPort, kBdf) + "/max_link_width");
  Start();
  Pcie("current_link_speed", "8.0 GT/s PCIe");
  Step();
  Step();
  auto c = Step();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NE(c[0].reason.find("8.0 GT/s below 16.0 GT/s seen at first sample"), std::string::npos) << c[0].reason;
}

TEST_F(NicHealthMonitorTest, PcieTrainedAtTheUpstreamPortsMaximumIsHealthy) {
  MakeFullNic();
  Pcie("max_link_speed", "32.0 GT/s PCIe");  // Gen5 NIC ...
  t.Write(std::string("sys/devices/pci0000:00/") + kPort + "/max_link_speed", "16.0 GT/s PCIe\n");  // ... Gen4 slot
  Start();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(Step().empty());
  EXPECT_EQ(monitor->Snapshot("eth0")->detections, 0u);
}

TEST_F(NicHealthMonitorTest, RdmaSymbolErrorRiseDegrades) {
  MakeFullNic();
  Start();
  Rdma("symbol_error", 3);
  EXPECT_TRUE(Step().empty());
  Rdma("symbol_error", 5);
  EXPECT_TRUE(Step().empty());
  Rdma("symbol_error", 9);
  auto c = Step();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NE(c[0].reason.find("rdma mlx5_0 port 1 symbol_error +4 in 100 ms"), std::string::npos) << c[0].reason;
}

// Soft-RoCE on a veth: no <if>/device, so the port is found by the netdev its GID table names, and
// its transport loss counters over the interface's packets are a detection (the VM's netem scenario).
class SoftRoceLoss : public NicHealthMonitorTest {
 protected:
  void MakeRxeOnVeth() {
    for (const char* n : {"rx_packets", "tx_packets", "rx_bytes", "rx_crc_errors", "rx_frame_errors"})
      t.Write(std::string("sys/class/net/va0/statistics/") + n, "0\n");
    t.Write("sys/class/net/va0/carrier_changes", "1\n");
    t.Write("sys/class/infiniband/rxe_b0/ports/1/gid_attrs/ndevs/0", "vb0\n");  // another port's
    t.Write("sys/class/infiniband/rxe_a0/ports/1/gid_attrs/ndevs/0", "va0\n");
    for (const char* n : {"out_of_seq_request", "rcvd_seq_err", "completer_retry_err", "duplicate_request",
                          "retry_exceeded_err", "send_rnr_err"})
      Hw(n, 0);
  }
  void Hw(const std::string& name, uint64_t v) {
    hw[name] = v;
    t.Write("sys/class/infiniband/rxe_a0/ports/1/hw_counters/" + name, std::to_string(v) + "\n");
  }
  // One 100 ms step with `pkts` packets each way and the named counters risen by `by`.
  std::vector<NicVerdictChange> LossStep(uint64_t pkts, const std::vector<std::pair<std::string, uint64_t>>& by) {
    rx += pkts;
    tx += pkts;
    t.Write("sys/class/net/va0/statistics/rx_packets", std::to_string(rx) + "\n");
    t.Write("sys/class/net/va0/statistics/tx_packets", std::to_string(tx) + "\n");
    for (const auto& [name, d] : by) Hw(name, hw[name] + d);
    return Step();
  }
  std::map<std::string, uint64_t> hw;
  uint64_t rx = 0, tx = 0;
};

TEST_F(SoftRoceLoss, ThePortIsFoundByItsGidNetdevAndSteadyLossDegradesIt) {
  MakeRxeOnVeth();
  Start("va0");
  const NicSnapshot before = *monitor->Snapshot("va0");
  EXPECT_EQ(before.rdma_device, "rxe_a0");
  EXPECT_EQ(before.rdma_port, 1u);
  // 1% of 10,000 packets lost per 100 ms: NAKs at the requester, out-of-sequence at the responder.
  EXPECT_TRUE(LossStep(5000, {{"rcvd_seq_err", 40}, {"out_of_seq_request", 60}}).empty());
  EXPECT_TRUE(LossStep(5000, {{"rcvd_seq_err", 40}, {"out_of_seq_request", 60}, {"completer_retry_err", 60}}).empty());
  auto c = LossStep(5000, {{"out_of_seq_request", 100}});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].degraded);
  EXPECT_NE(c[0].reason.find("rdma rxe_a0 port 1 hidden loss 0.01 per packet > 0.001 (out_of_seq_request +100 over "
                             "10000 packets in 100 ms)"),
            std::string::npos)
      << c[0].reason;
}

TEST_F(SoftRoceLoss, AStrayNakLateTimersOrAReceiverNotReadyAreNoDetection) {
  MakeRxeOnVeth();
  Start("va0");
  for (int i = 0; i < 6; ++i) {
    // 2 gaps in 10,000 packets (2e-4, a stray NAK); a busy host's late retransmission timers and the
    // duplicates they cause (the VM's healthy link showed 25 in 1625 packets); RNR and retry-exhausted
    // counters - every step.
    EXPECT_TRUE(LossStep(5000, {{"rcvd_seq_err", 2}, {"completer_retry_err", 40}, {"duplicate_request", 40},
                                {"send_rnr_err", 50}, {"retry_exceeded_err", 1}})
                    .empty())
        << "step " << i;
  }
  EXPECT_FALSE(monitor->Snapshot("va0")->degraded);
  EXPECT_EQ(monitor->Snapshot("va0")->detections, 0u);
}

TEST_F(NicHealthMonitorTest, CrcErrorRateAboveThresholdDegrades) {
  MakeFullNic();
  Start();
  for (int i = 1; i <= 3; ++i) {
    Net("rx_packets", 1'000'000u * i);
    Net("rx_crc_errors", 5u * i);
    Net("rx_frame_errors", 1u * i);
    auto c = Step();
    if (i < 3) EXPECT_TRUE(c.empty());
    else {
      ASSERT_EQ(c.size(), 1u);
      EXPECT_NE(c[0].reason.find("rx crc+frame errors 6 in 100 ms (rate 6e-06"), std::string::npos) << c[0].reason;
    }
  }
}

TEST_F(NicHealthMonitorTest, PreFecBerUsesLineRateAndItsOwnThreshold) {
  MakeFullNic();
  Start();
  // 100 Gb/s for 100 ms = 1e10 bits: 1e4 corrected bits is BER 1e-6 (fine), 1e6 is 1e-4 (bad).
  Fec(0, 10'000);
  Step();
  EXPECT_EQ(monitor->Snapshot("eth0")->detections, 0u);
  Fec(0, 1'010'000);
  Step();
  auto s = monitor->Snapshot("eth0");
  EXPECT_EQ(s->detections, 1u);
  EXPECT_NE(s->last_detection.find("pre-FEC BER 0.0001 > 1e-05"), std::string::npos) << s->last_detection;
}

TEST_F(NicHealthMonitorTest, CounterResetRebaselinesInsteadOfDetecting) {
  MakeFullNic();
  Fec(1000, 0);
  Net("rx_crc_errors", 500);
  Rdma("symbol_error", 70);
  Start();
  Fec(0, 0);  // driver reset: everything went down
  Net("rx_crc_errors", 0);
  Rdma("symbol_error", 0);
  Net("rx_packets", 10);
  EXPECT_TRUE(Step().empty());
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(Step().empty());
  EXPECT_EQ(monitor->Snapshot("eth0")->detections, 0u);
  // Counting resumes from the new baseline.
  Rdma("symbol_error", 1);
  Step();
  EXPECT_EQ(monitor->Snapshot("eth0")->detections, 1u);
}

TEST_F(NicHealthMonitorTest, PollWithinTheIntervalReadsNothing) {
  MakeFullNic();
  Net("rx_packets", 42);
  Start();
  EXPECT_EQ(monitor->samples(), 1u);
  Net("rx_packets", 43);
  Rdma("symbol_error", 1000);
  t.Remove("ethtool/eth0/fec");
  for (int i = 0; i < 9; ++i) EXPECT_TRUE(Step(10ms).empty());  // +90 ms
  EXPECT_EQ(monitor->samples(), 1u);
  auto s = monitor->Snapshot("eth0");
  EXPECT_EQ(*s->counters[NetCounter::kRxPackets], 42u) << "a poll inside the interval read the counters";
  EXPECT_EQ(s->detections, 0u);
  EXPECT_TRUE(warnings.empty());
  Step(10ms);  // +100 ms: now it samples
  EXPECT_EQ(monitor->samples(), 2u);
  EXPECT_EQ(*monitor->Snapshot("eth0")->counters[NetCounter::kRxPackets], 43u);
}

TEST_F(NicHealthMonitorTest, InterfaceWithoutFecRdmaOrPcieHasThoseSourcesAbsent) {
  t.Write("sys/class/net/veth0/statistics/rx_packets", "1\n");
  t.Write("sys/class/net/veth0/speed", "-1\n");
  Start("veth0");
  monitor->Watch("nosuch0");
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(Step().empty());
  auto s = monitor->Snapshot("veth0");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->exists);
  EXPECT_TRUE(s->has_counters);
  EXPECT_EQ(s->fec_status, FecStatus::kUnsupported);
  EXPECT_TRUE(s->rdma_device.empty());
  EXPECT_TRUE(s->pci_address.empty());
  EXPECT_FALSE(s->has_pcie_link);
  EXPECT_EQ(s->samples, 5u);
  EXPECT_TRUE(warnings.empty());
  EXPECT_NE(monitor->Describe("veth0").find("healthy; sources: counters[rx_packets=1]"), std::string::npos)
      << monitor->Describe("veth0");
  EXPECT_FALSE(monitor->Snapshot("nosuch0")->exists);
  EXPECT_EQ(monitor->Describe("nosuch0"), "nosuch0: no such interface");
  EXPECT_EQ(monitor->Describe("other"), "other: not watched");
  EXPECT_FALSE(monitor->Snapshot("other"));
}

TEST_F(NicHealthMonitorTest, MalformedFileWarnsOnceAndIsIgnored) {
  MakeFullNic();
  Net("rx_crc_errors", 0);
  Start();
  Net("rx_crc_errors", 0);
  t.Write("sys/class/net/eth0/statistics/rx_crc_errors", "n/a\n");
  t.Write("ethtool/eth0/fec", "uncorrectable_blocks: 5\n");
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(Step().empty());
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("statistics/rx_crc_errors: cannot parse 'n/a'"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("ethtool/eth0/fec"), std::string::npos) << warnings[1];
  EXPECT_EQ(monitor->Snapshot("eth0")->detections, 0u);
}

TEST_F(NicHealthMonitorTest, ConcurrentPollReturnsAtOnceWhileAnotherThreadSamples) {
  MakeFullNic();
  t.Write("sys/class/net/eth0/statistics/tx_errors", "bad\n");  // makes the first sample warn ...
  NicHealthConfig c;
  c.root = t.root();
  std::promise<void> entered, release;
  auto released = release.get_future().share();
  c.warn = [&](const std::string&) {  // ... and the warning blocks inside Poll
    entered.set_value();
    released.wait();
  };
  NicHealthMonitor m(c, clock);
  m.Watch("eth0");
  auto first = std::async(std::launch::async, [&] { return m.Poll(); });
  entered.get_future().wait();
  auto second = std::async(std::launch::async, [&] {
    auto r = m.Poll();
    return r.empty() && !m.IsDegraded("eth0");
  });
  const bool quick = second.wait_for(5s) == std::future_status::ready;
  release.set_value();
  first.get();
  ASSERT_TRUE(quick) << "a second Poll() waited for the one in progress";
  EXPECT_TRUE(second.get());
  EXPECT_EQ(m.samples(), 1u);
}

// Real kernel: lo has counters but no FEC, PCI device or RDMA port - all quiet.
TEST(NicHealthMonitorRealKernel, LoopbackHasCountersOnlyAndNoWarnings) {
  FakeClock clock;
  std::vector<std::string> warnings;
  NicHealthConfig c;
  c.warn = [&](const std::string& m) { warnings.push_back(m); };
  NicHealthMonitor m(c, clock);
  m.Watch("lo");
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(m.Poll().empty());
    clock.now += 100ms;
  }
  auto s = m.Snapshot("lo");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->has_counters);
  EXPECT_TRUE(s->counters[NetCounter::kRxPackets]);
  EXPECT_EQ(s->fec_status, FecStatus::kUnsupported);
  EXPECT_TRUE(s->pci_address.empty());
  EXPECT_TRUE(s->rdma_device.empty());
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

}  // namespace
}  // namespace ff::health
