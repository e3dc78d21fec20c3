// Net interface and RDMA port counter readers: fixture trees and the real lo.
#include "health/nic_counters.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/pcie/fixture_tree.h"

namespace ff::health {
namespace {

using ff::testing::FixtureTree;

void WriteStats(const FixtureTree& t, const std::string& ifname, uint64_t base) {
  const std::string s = "sys/class/net/" + ifname + "/statistics/";
  const char* names[] = {"rx_packets", "rx_bytes", "rx_crc_errors", "rx_frame_errors", "rx_errors", "rx_dropped", "tx_errors"};
  uint64_t v = base;
  for (const char* n : names) t.Write(s + n, std::to_string(v++) + "\n");
  t.Write("sys/class/net/" + ifname + "/carrier_changes", std::to_string(v++) + "\n");
  t.Write("sys/class/net/" + ifname + "/speed", "100000\n");
}

TEST(NicCounterReader, ReadsEveryNetCounterFile) {
  FixtureTree t;
  WriteStats(t, "eth0", 10);
  NicCounterReader r(t.root(), "eth0");
  ASSERT_TRUE(r.interface_exists());
  EXPECT_TRUE(r.has_net_counters());
  EXPECT_FALSE(r.has_rdma());
  NetCounters c;
  r.ReadNet(&c, nullptr);
  EXPECT_EQ(*c[NetCounter::kRxPackets], 10u);
  EXPECT_EQ(*c[NetCounter::kRxBytes], 11u);
  EXPECT_EQ(*c[NetCounter::kRxCrcErrors], 12u);
  EXPECT_EQ(*c[NetCounter::kRxFrameErrors], 13u);
  EXPECT_EQ(*c[NetCounter::kRxErrors], 14u);
  EXPECT_EQ(*c[NetCounter::kRxDropped], 15u);
  EXPECT_EQ(*c[NetCounter::kTxErrors], 16u);
  EXPECT_EQ(*c[NetCounter::kCarrierChanges], 17u);
  EXPECT_EQ(*c[NetCounter::kSpeedMbps], 100000u);
}

TEST(NicCounterReader, ACounterFileReplacedByRenameIsReadAfresh) {
  // Tools and fixture writers update a file atomically: write a new one, rename it over the old.
  FixtureTree t;
  WriteStats(t, "eth0", 10);
  NicCounterReader r(t.root(), "eth0");
  NetCounters c;
  r.ReadNet(&c, nullptr);
  ASSERT_EQ(*c[NetCounter::kRxCrcErrors], 12u);
  const std::string dir = t.root() + "/sys/class/net/eth0/statistics/";
  t.Write("sys/class/net/eth0/statistics/rx_crc_errors.new", "99\n");
  ASSERT_EQ(::rename((dir + "rx_crc_errors.new").c_str(), (dir + "rx_crc_errors").c_str()), 0);
  r.ReadNet(&c, nullptr);
  EXPECT_EQ(*c[NetCounter::kRxCrcErrors], 99u);
}

TEST(NicCounterReader, MissingFilesAreAbsentAndUnknownSpeedIsSilent) {
  FixtureTree t;
  t.Write("sys/class/net/veth0/statistics/rx_packets", "5\n");
  t.Write("sys/class/net/veth0/speed", "-1\n");
  NicCounterReader r(t.root(), "veth0");
  NetCounters c;
  int warnings = 0;
  r.ReadNet(&c, [&](const std::string&) { ++warnings; });
  EXPECT_EQ(warnings, 0);
  EXPECT_EQ(*c[NetCounter::kRxPackets], 5u);
  EXPECT_FALSE(c[NetCounter::kRxCrcErrors]);
  EXPECT_FALSE(c[NetCounter::kSpeedMbps]);
  EXPECT_FALSE(r.has_rdma());

  NicCounterReader gone(t.root(), "nosuch0");
  EXPECT_FALSE(gone.interface_exists());
  EXPECT_FALSE(gone.has_net_counters());
}

TEST(NicCounterReader, MalformedCounterWarnsOnceNamingTheFile) {
  FixtureTree t;
  WriteStats(t, "eth0", 1);
  t.Write("sys/class/net/eth0/statistics/rx_crc_errors", "lots\n");
  NicCounterReader r(t.root(), "eth0");
  NetCounters c;
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& m) { warnings.push_back(m); };
  r.ReadNet(&c, warn);
  r.ReadNet(&c, warn);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("statistics/rx_crc_errors"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("decimal unsigned integer"), std::string::npos) << warnings[0];
  EXPECT_FALSE(c[NetCounter::kRxCrcErrors]);
  EXPECT_EQ(*c[NetCounter::kRxPackets], 1u);
}

void AddRdma(const FixtureTree& t, const std::string& ifname, const std::string& dev, int port, uint64_t base) {
  t.Mkdir("sys/class/net/" + ifname + "/device/infiniband/" + dev);
  const std::string c = "sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/counters/";
  const char* names[] = {"symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
                         "local_link_integrity_errors", "excessive_buffer_overrun_errors"};
  uint64_t v = base;
  for (const char* n : names) t.Write(c + n, std::to_string(v++) + "\n");
}

TEST(NicCounterReader, FindsRdmaPortBehindTheInterfaceAndReadsItsCounters) {
  FixtureTree t;
  WriteStats(t, "eth0", 0);
  AddRdma(t, "eth0", "mlx5_0", 1, 100);
  NicCounterReader r(t.root(), "eth0");
  ASSERT_TRUE(r.has_rdma());
  EXPECT_EQ(r.rdma_device(), "mlx5_0");
  EXPECT_EQ(r.rdma_port(), 1u);
  RdmaCounters c;
  r.ReadRdma(&c, nullptr);
  EXPECT_EQ(*c[RdmaCounter::kSymbolError], 100u);
  EXPECT_EQ(*c[RdmaCounter::kLinkErrorRecovery], 101u);
  EXPECT_EQ(*c[RdmaCounter::kLinkDowned], 102u);
  EXPECT_EQ(*c[RdmaCounter::kPortRcvErrors], 103u);
  EXPECT_EQ(*c[RdmaCounter::kLocalLinkIntegrityErrors], 104u);
  EXPECT_EQ(*c[RdmaCounter::kExcessiveBufferOverrunErrors], 105u);
}

TEST(NicCounterReader, DevPortSelectsThePortOfATwoPortDevice) {
  FixtureTree t;
  WriteStats(t, "eth1", 0);
  AddRdma(t, "eth1", "mlx4_0", 1, 0);
  AddRdma(t, "eth1", "mlx4_0", 2, 50);
  t.Write("sys/class/net/eth1/dev_port", "1\n");
  NicCounterReader r(t.root(), "eth1");
  EXPECT_EQ(r.rdma_port(), 2u);
  RdmaCounters c;
  r.ReadRdma(&c, nullptr);
  EXPECT_EQ(*c[RdmaCounter::kSymbolError], 50u);
}

TEST(NicCounterReader, ReadsTheLossHwCountersItsDriverKeeps) {
  FixtureTree t;
  WriteStats(t, "eth0", 0);
  AddRdma(t, "eth0", "mlx5_0", 1, 0);
  NicCounterReader none(t.root(), "eth0");
  EXPECT_FALSE(none.has_rdma_loss_counters());  // counters/ but no hw_counters/
  const std::string hw = "sys/class/infiniband/mlx5_0/ports/1/hw_counters/";
  t.Write(hw + "out_of_sequence", "12\n");
  t.Write(hw + "local_ack_timeout_err", "3\n");
  t.Write(hw + "rcvd_seq_err", "5\n");      // rxe's name
  t.Write(hw + "rx_write_requests", "9\n");  // not a loss counter
  NicCounterReader r(t.root(), "eth0");
  ASSERT_TRUE(r.has_rdma_loss_counters());
  RdmaLossCounters c;
  r.ReadRdmaLoss(&c, nullptr);
  EXPECT_EQ(*c[RdmaLossCounter::kOutOfSequence], 12u);
  EXPECT_EQ(*c[RdmaLossCounter::kLocalAckTimeoutErr], 3u);
  EXPECT_EQ(*c[RdmaLossCounter::kRxeRcvdSeqErr], 5u);
  EXPECT_FALSE(c[RdmaLossCounter::kPacketSeqErr]);
  EXPECT_EQ(RdmaLossCounterName(RdmaLossCounter::kImpliedNakSeqErr), "implied_nak_seq_err");
  t.Write(hw + "out_of_sequence", "20\n");
  r.ReadRdmaLoss(&c, nullptr);
  EXPECT_EQ(*c[RdmaLossCounter::kOutOfSequence], 20u);
}

// Real kernel: lo's counters are live and grow when a datagram crosses it.
TEST(NicCounterReaderRealKernel, LoopbackCountersGrowAfterSendingAPacket) {
  NicCounterReader r("", "lo");
  ASSERT_TRUE(r.interface_exists());
  NetCounters before, after;
  r.ReadNet(&before, nullptr);
  ASSERT_TRUE(before[NetCounter::kRxPackets]);
  ASSERT_TRUE(before[NetCounter::kRxBytes]);

  int rx = ::socket(AF_INET, SOCK_DGRAM, 0), tx = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(rx, 0);
  ASSERT_GE(tx, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(rx, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(rx, reinterpret_cast<sockaddr*>(&a), &len), 0);
  char payload[1000] = {};
  ASSERT_EQ(::sendto(tx, payload, sizeof payload, 0, reinterpret_cast<sockaddr*>(&a), sizeof a),
            static_cast<ssize_t>(sizeof payload));
  char got[1000];
  ASSERT_EQ(::recv(rx, got, sizeof got, 0), static_cast<ssize_t>(sizeof got));
  ::close(rx);
  ::close(tx);

  r.ReadNet(&after, nullptr);
  EXPECT_GE(*after[NetCounter::kRxPackets], *before[NetCounter::kRxPackets] + 1);
  EXPECT_GE(*after[NetCounter::kRxBytes], *before[NetCounter::kRxBytes] + sizeof payload);
  EXPECT_FALSE(after[NetCounter::kSpeedMbps]) << "the kernel has no speed for lo";
}

}  // namespace
}  // namespace ff::health
