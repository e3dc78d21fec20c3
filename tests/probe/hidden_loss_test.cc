// probe report's hidden loss: FEC and RDMA loss counters per NIC over the window, on fixture trees
// (sysfs under <root>/sys, ethtool FEC under <root>/ethtool/<if>/fec, as tests/nic_health uses them).
#include "bpf/hidden_loss.h"

#include <gtest/gtest.h>

#include <string>

#include "bpf/report_analysis.h"
#include "tests/pcie/fixture_tree.h"

namespace ff::probe {
namespace {

using ff::testing::FixtureTree;

void WriteRx(const FixtureTree& t, const std::string& ifname, uint64_t rx_bytes) {
  t.Write("sys/class/net/" + ifname + "/statistics/rx_bytes", std::to_string(rx_bytes) + "\n");
}

void WriteFec(const FixtureTree& t, const std::string& ifname, uint64_t corrected, uint64_t uncorrectable) {
  t.Write("ethtool/" + ifname + "/fec", "corrected_blocks " + std::to_string(corrected) +
                                            "\nuncorrectable_blocks " + std::to_string(uncorrectable) + "\n");
}

// An RDMA device behind `ifname` (RoCE) with the given port counters and hw_counters.
void WriteRdma(const FixtureTree& t, const std::string& ifname, const std::string& dev,
               const std::map<std::string, uint64_t>& port, const std::map<std::string, uint64_t>& hw) {
  t.Mkdir("sys/class/net/" + ifname + "/device/infiniband/" + dev);
  t.Mkdir("sys/class/infiniband/" + dev + "/ports/1");
  for (const auto& [name, v] : port)
    t.Write("sys/class/infiniband/" + dev + "/ports/1/counters/" + name, std::to_string(v) + "\n");
  for (const auto& [name, v] : hw)
    t.Write("sys/class/infiniband/" + dev + "/ports/1/hw_counters/" + name, std::to_string(v) + "\n");
}

const nlohmann::json* Nic(const nlohmann::json& h, const std::string& name) {
  for (const auto& n : h["nics"])
    if (n["nic"] == name) return &n;
  return nullptr;
}

TEST(ProbeHiddenLoss, FecErrorRateAboveThresholdIsFlaggedAndBelowIsNot) {
  FixtureTree t;
  for (const char* n : {"eth0", "eth1"}) {
    WriteRx(t, n, 1000);
    WriteFec(t, n, 50, 7);
  }
  HiddenLossSampler sampler(t.root());
  const auto start = sampler.Sample();
  // 1e9 bytes = 8e9 bits. eth0: 1000 + 200 errored blocks -> 1.5e-7; eth1: 500 + 10 -> 6.4e-8.
  WriteRx(t, "eth0", 1000 + 1'000'000'000);
  WriteFec(t, "eth0", 50 + 1000, 7 + 200);
  WriteRx(t, "eth1", 1000 + 1'000'000'000);
  WriteFec(t, "eth1", 50 + 500, 7 + 10);
  const nlohmann::json h = HiddenLoss(start, sampler.Sample(), {});
  ASSERT_EQ(h["nics"].size(), 2u) << h.dump(2);

  const nlohmann::json& e0 = *Nic(h, "eth0");
  EXPECT_EQ(e0["rx_bytes"], 1'000'000'000u);
  EXPECT_TRUE(e0["fec"]["available"].get<bool>());
  EXPECT_EQ(e0["fec"]["corrected_blocks"], 1000u);
  EXPECT_EQ(e0["fec"]["uncorrectable_blocks"], 200u);
  EXPECT_DOUBLE_EQ(e0["fec"]["error_rate"].get<double>(), 1200.0 / 8e9);
  EXPECT_TRUE(e0["flagged"].get<bool>());
  ASSERT_EQ(e0["reasons"].size(), 1u);
  EXPECT_NE(e0["reasons"][0].get<std::string>().find("FEC error rate 1.5e-07 > 1e-07"), std::string::npos)
      << e0["reasons"];

  const nlohmann::json& e1 = *Nic(h, "eth1");
  EXPECT_DOUBLE_EQ(e1["fec"]["error_rate"].get<double>(), 510.0 / 8e9);
  EXPECT_FALSE(e1["flagged"].get<bool>()) << e1.dump();
  EXPECT_TRUE(e1["reasons"].empty());
  // No RDMA device behind either: said so, not zeros.
  EXPECT_FALSE(e0["rdma"]["available"].get<bool>());
  EXPECT_NE(e0["rdma"]["why"].get<std::string>().find("not available"), std::string::npos);
}

TEST(ProbeHiddenLoss, AMissingSourceIsNotAvailableRatherThanZero) {
  FixtureTree t;
  WriteRx(t, "veth0", 10);  // no ethtool fixture: FEC unsupported, as on veth
  HiddenLossSampler sampler(t.root());
  const auto start = sampler.Sample();
  WriteRx(t, "veth0", 5000);
  const nlohmann::json h = HiddenLoss(start, sampler.Sample(), {});
  ASSERT_EQ(h["nics"].size(), 1u);
  const nlohmann::json& v = h["nics"][0];
  EXPECT_EQ(v["rx_bytes"], 4990u);
  EXPECT_FALSE(v["fec"]["available"].get<bool>());
  EXPECT_FALSE(v["fec"].contains("corrected_blocks"));
  EXPECT_NE(v["fec"]["why"].get<std::string>().find("not available"), std::string::npos);
  EXPECT_FALSE(v["rdma"]["available"].get<bool>());
  EXPECT_FALSE(v["flagged"].get<bool>());

  ReportFindings f;
  f.hidden_loss = h;
  const std::string md = ReportMarkdown(Snapshot{}, f, 1.0);
  const size_t at = md.find("## Hidden loss");
  ASSERT_NE(at, std::string::npos) << md;
  EXPECT_NE(md.find("| veth0 | 4990 | not available | not available |", at), std::string::npos) << md;
  EXPECT_NE(md.find("(corrected blocks + uncorrectable blocks) / (8 x rx_bytes)", at), std::string::npos);
  const std::string html = ReportHtml(Snapshot{}, f, 1.0);
  EXPECT_NE(html.find("Hidden loss"), std::string::npos);
  EXPECT_NE(html.find("| veth0 | 4990 | not available"), std::string::npos);
  EXPECT_EQ(ReportJson(Snapshot{}, f, 1.0)["findings"]["hidden_loss"], h);
}

TEST(ProbeHiddenLoss, RdmaCountersThatMoveAreFlagged) {
  FixtureTree t;
  WriteRx(t, "eth2", 0);
  WriteRdma(t, "eth2", "mlx5_0", {{"symbol_error", 0}},
            {{"out_of_sequence", 4}, {"packet_seq_err", 9}, {"duplicate_request", 0}});
  WriteRx(t, "eth3", 0);
  WriteRdma(t, "eth3", "mlx5_1", {}, {{"local_ack_timeout_err", 1}});
  WriteRx(t, "eth4", 0);
  WriteRdma(t, "eth4", "mlx5_2", {}, {});  // a device with none of them
  WriteRx(t, "eth5", 0);
  WriteRdma(t, "eth5", "mlx5_3", {{"port_rcv_errors", 10}}, {});
  HiddenLossSampler sampler(t.root());
  const auto start = sampler.Sample();
  WriteRx(t, "eth2", 100);
  t.Write("sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_sequence", "7\n");
  WriteRx(t, "eth3", 100);
  t.Write("sys/class/infiniband/mlx5_3/ports/1/counters/port_rcv_errors", "12\n");
  const nlohmann::json h = HiddenLoss(start, sampler.Sample(), {});
  ASSERT_EQ(h["nics"].size(), 4u) << h.dump(2);

  const nlohmann::json& a = *Nic(h, "eth2");
  ASSERT_TRUE(a["rdma"]["available"].get<bool>()) << a.dump();
  EXPECT_EQ(a["rdma"]["device"], "mlx5_0");
  EXPECT_EQ(a["rdma"]["port"], 1);
  EXPECT_EQ(
      a["rdma"]["counters"],
      nlohmann::json(
          {{"out_of_sequence", 3}, {"packet_seq_err", 0}, {"duplicate_request", 0}, {"symbol_error", 0}}));
  EXPECT_EQ(a["rdma"]["moved"], nlohmann::json::array({"out_of_sequence"}));
  EXPECT_TRUE(a["flagged"].get<bool>());
  EXPECT_EQ(a["reasons"], nlohmann::json::array({"RDMA out_of_sequence +3"}));

  const nlohmann::json& b = *Nic(h, "eth3");
  EXPECT_TRUE(b["rdma"]["available"].get<bool>());
  EXPECT_TRUE(b["rdma"]["moved"].empty());
  EXPECT_FALSE(b["flagged"].get<bool>());

  const nlohmann::json& c = *Nic(h, "eth4");
  EXPECT_FALSE(c["rdma"]["available"].get<bool>());
  EXPECT_NE(c["rdma"]["why"].get<std::string>().find("has none"), std::string::npos);

  // The port's error counters (those the NIC health monitor judges) count too.
  const nlohmann::json& d = *Nic(h, "eth5");
  EXPECT_EQ(d["rdma"]["counters"], nlohmann::json({{"port_rcv_errors", 2}}));
  EXPECT_TRUE(d["flagged"].get<bool>());
  EXPECT_EQ(d["reasons"], nlohmann::json::array({"RDMA port_rcv_errors +2"}));
}

TEST(ProbeHiddenLoss, ErroredBlocksWithoutTrafficAndCounterResets) {
  FixtureTree t;
  WriteRx(t, "eth0", 500);
  WriteFec(t, "eth0", 10, 0);
  WriteRx(t, "eth1", 500);
  WriteFec(t, "eth1", 10, 0);
  HiddenLossSampler sampler(t.root());
  const auto start = sampler.Sample();
  WriteFec(t, "eth0", 12, 0);  // no bytes received, yet two errored codewords: flagged, no rate
  WriteRx(t, "eth1", 900);
  WriteFec(t, "eth1", 3, 0);  // went backwards (driver reload): not available, not a huge delta
  const nlohmann::json h = HiddenLoss(start, sampler.Sample(), {});
  const nlohmann::json& a = *Nic(h, "eth0");
  EXPECT_TRUE(a["fec"]["error_rate"].is_null());
  EXPECT_TRUE(a["flagged"].get<bool>());
  const nlohmann::json& b = *Nic(h, "eth1");
  EXPECT_TRUE(b["fec"]["corrected_blocks"].is_null());
  EXPECT_EQ(b["fec"]["errored_blocks"], 0u);
  EXPECT_FALSE(b["flagged"].get<bool>());
}

TEST(ProbeHiddenLoss, PathInterfacesComeFromConnectingPathSockets) {
  std::vector<TimelineEvent> tl(4);
  tl[0].event = "path_up";
  tl[0].details = {{"ends", "10.0.0.1:41000->10.0.0.2:5000"}};
  tl[1].event = "path_up";
  tl[1].details = {{"ends", "10.0.0.2:5000"}};  // accepting side: only the remote end, ignored
  tl[2].event = "path_up";
  tl[2].details = {{"ends", "[fd00::1]:41001->[fd00::2]:5000"}};
  tl[3].event = "connect";
  tl[3].details = {{"ends", "10.9.9.9:1->10.0.0.2:5000"}};
  std::vector<std::string> asked;
  const auto nics = PathInterfaces(tl, [&](const std::string& a) {
    asked.push_back(a);
    return a == "10.0.0.1" ? "eth0" : a == "fd00::1" ? "eth1" : "";
  });
  EXPECT_EQ(asked, (std::vector<std::string>{"10.0.0.1", "fd00::1"}));
  EXPECT_EQ(nics, (std::set<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(InterfaceOfLocalAddress("127.0.0.1"), "lo");

  // With path NICs known only those are reported (lo too, when the paths use it); without, every
  // interface but lo.
  FixtureTree t;
  for (const char* n : {"lo", "eth0", "eth1"}) WriteRx(t, n, 1);
  HiddenLossSampler sampler(t.root());
  const auto s = sampler.Sample();
  const auto names = [](const nlohmann::json& h) {
    std::vector<std::string> v;
    for (const auto& n : h["nics"]) v.push_back(n["nic"]);
    return v;
  };
  EXPECT_EQ(names(HiddenLoss(s, s, {})), (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(names(HiddenLoss(s, s, {"lo", "eth1"})), (std::vector<std::string>{"eth1", "lo"}));
}

}  // namespace
}  // namespace ff::probe
