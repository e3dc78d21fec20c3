// Net interface and RDMA port counter reader (see nic_counters.h).
#include "health/nic_counters.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace ff::health {

namespace {

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

constexpr std::string_view kNetNames[kNetCounterCount] = {
    "rx_packets", "rx_bytes", "rx_crc_errors", "rx_frame_errors", "rx_errors",
    "rx_dropped", "tx_errors", "tx_packets", "carrier_changes", "speed",
};
constexpr std::string_view kRdmaNames[kRdmaCounterCount] = {
    "symbol_error",          "link_error_recovery",        "link_downed",
    "port_rcv_errors",       "local_link_integrity_errors", "excessive_buffer_overrun_errors",
};

constexpr std::string_view kRdmaLossNames[kRdmaLossCounterCount] = {
    "out_of_sequence",   "packet_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err",
    "duplicate_request", "implied_nak_seq_err", "out_of_buffer",    "out_of_seq_request",
    "rcvd_seq_err",      "retry_exceeded_err", "completer_retry_err",
};

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  std::unique_ptr<DIR, DirCloser> d(::opendir(dir.c_str()));
  if (!d) return names;
  while (dirent* e = ::readdir(d.get())) {
    if (e->d_name[0] == '.') continue;
    names.emplace_back(e->d_name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool IsDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::string_view NetCounterName(NetCounter c) { return kNetNames[static_cast<size_t>(c)]; }
std::string_view RdmaCounterName(RdmaCounter c) { return kRdmaNames[static_cast<size_t>(c)]; }
std::string_view RdmaLossCounterName(RdmaLossCounter c) { return kRdmaLossNames[static_cast<size_t>(c)]; }

NicCounterReader::NicCounterReader(const std::string& root, const std::string& ifname) : ifname_(ifname) {
  const std::string ifdir = root + "/sys/class/net/" + ifname;
  exists_ = IsDir(ifdir);
  if (!exists_) return;
  for (size_t i = 0; i < kNetCounterCount; ++i) {
    const auto c = static_cast<NetCounter>(i);
    const bool in_ifdir = c == NetCounter::kCarrierChanges || c == NetCounter::kSpeedMbps;
    net_[i] = pcie::SysfsAttribute(ifdir + (in_ifdir ? "/" : "/statistics/") + std::string(kNetNames[i]));
  }

  // RoCE: the PCI function of the netdev also carries an RDMA device.
  auto ib = ListDir(ifdir + "/device/infiniband");
  std::string ibdir;
  uint32_t port = 0;
  if (!ib.empty()) {
    ibdir = root + "/sys/class/infiniband/" + ib.front();
    std::vector<uint32_t> numbers;
    for (const auto& p : ListDir(ibdir + "/ports")) {
      if (auto v = pcie::ParseU64(p)) numbers.push_back(static_cast<uint32_t>(*v));
    }
    if (numbers.empty()) return;
    std::sort(numbers.begin(), numbers.end());
    port = numbers.front();
    // Two-port adapters with one IB device (mlx4) expose one netdev per port; dev_port tells which.
    pcie::SysfsAttribute dev_port(ifdir + "/dev_port");
    if (auto dp = dev_port.ReadU64(nullptr)) {
      if (std::find(numbers.begin(), numbers.end(), *dp + 1) != numbers.end()) port = static_cast<uint32_t>(*dp + 1);
    }
    rdma_device_ = ib.front();
  } else {
    // No device behind the interface (Soft-RoCE on a veth): the port whose first GID is on it.
    const std::string classdir = root + "/sys/class/infiniband/";
    for (const auto& dev : ListDir(classdir)) {
      for (const auto& p : ListDir(classdir + dev + "/ports")) {
        char buf[64];
        pcie::SysfsAttribute ndev(classdir + dev + "/ports/" + p + "/gid_attrs/ndevs/0");
        auto text = ndev.ReadText(buf, sizeof buf);
        auto num = pcie::ParseU64(p);
        if (!text || !num || *text != ifname) continue;
        rdma_device_ = dev;
        port = static_cast<uint32_t>(*num);
        break;
      }
      if (!rdma_device_.empty()) break;
    }
    if (rdma_device_.empty()) return;
    ibdir = classdir + rdma_device_;
  }
  rdma_port_ = port;
  const std::string cdir = ibdir + "/ports/" + std::to_string(port) + "/counters/";
  for (size_t i = 0; i < kRdmaCounterCount; ++i) rdma_[i] = pcie::SysfsAttribute(cdir + std::string(kRdmaNames[i]));
  const std::string hdir = ibdir + "/ports/" + std::to_string(port) + "/hw_counters/";
  for (size_t i = 0; i < kRdmaLossCounterCount; ++i)
    rdma_loss_[i] = pcie::SysfsAttribute(hdir + std::string(kRdmaLossNames[i]));
}

bool NicCounterReader::has_net_counters() const {
  return std::any_of(net_.begin(), net_.end(), [](const pcie::SysfsAttribute& a) { return a.present(); });
}

void NicCounterReader::ReadNet(NetCounters* out, const WarnFn& warn) {
  for (size_t i = 0; i < kNetCounterCount; ++i) {
    if (static_cast<NetCounter>(i) == NetCounter::kSpeedMbps) {
      // "-1" (unknown, e.g. veth without a set speed) is not malformed, just no speed.
      char buf[32];
      auto text = net_[i].ReadText(buf, sizeof buf);
      out->values[i] = std::nullopt;
      if (!text || *text == "-1") continue;
      out->values[i] = pcie::ParseU64(*text);
      if (!out->values[i]) net_[i].ReportMalformed(warn, *text, "a speed in Mb/s such as '100000', or '-1'");
      continue;
    }
    out->values[i] = net_[i].ReadU64(warn);
  }
}

void NicCounterReader::ReadRdma(RdmaCounters* out, const WarnFn& warn) {
  for (size_t i = 0; i < kRdmaCounterCount; ++i) out->values[i] = rdma_[i].ReadU64(warn);
}

bool NicCounterReader::has_rdma_loss_counters() const {
  return std::any_of(rdma_loss_.begin(), rdma_loss_.end(), [](const pcie::SysfsAttribute& a) { return a.present(); });
}

void NicCounterReader::ReadRdmaLoss(RdmaLossCounters* out, const WarnFn& warn) {
  for (size_t i = 0; i < kRdmaLossCounterCount; ++i) out->values[i] = rdma_loss_[i].ReadU64(warn);
}

}  // namespace ff::health
