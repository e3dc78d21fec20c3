// Device discovery at init, logged one line per device as NCCL's own transports do.
#include "plugin/plugin_state.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/logging.h"
#include "pcie/device_inventory.h"
#include "sla/task_stats.h"
#if FF_WITH_VERBS
#include "verbs/rdma_path.h"
#include "verbs/gpu_memory.h"
#include "verbs/transport_choice.h"
#endif

namespace ff {

PluginState& PluginState::Get() {
  // Never destroyed: NCCL's proxy thread may still poll communicators (which point into the task
  // profile and statistics) while main returns and static destructors run.
  static PluginState* state = new PluginState();
  return *state;
}

namespace {

// At exit the statistics file's name goes (unless FLEXIFORCE_STATS_KEEP=1), as it did when the
// state was destroyed; the mapping stays, so a thread still recording writes to valid memory.
void RemoveStatsFileAtExit() {
  TaskProfile& task = PluginState::Get().task();
  if (task.stats) task.stats->RemoveFile();
}

}  // namespace

Status PluginState::ChooseTransport() {
  const std::string& setting = config_->transport;
#if FF_WITH_VERBS
  verbs::TransportSetting ts = verbs::TransportSetting::kAuto;
  if (!verbs::ParseTransportSetting(setting, &ts)) ts = verbs::TransportSetting::kAuto;  // the registry warned
  verbs::DiscoveryOptions o;
  auto refuse_or_tcp = [&](const std::string& why) -> Status {
    if (ts == verbs::TransportSetting::kVerbs)
      return InvalidArgument("FLEXIFORCE_TRANSPORT=verbs: " + why + "; accepted: auto, verbs or tcp");
    FF_INFO(NCCL_INIT | NCCL_NET, "transport: TCP (FLEXIFORCE_TRANSPORT=%s: %s)", setting.c_str(), why.c_str());
    return Status::Ok();
  };
  if (ts != verbs::TransportSetting::kTcp) {
    if (Status s = verbs::HcaFilter::Parse(config_->ib_hca, &o.filter); !s.ok()) return refuse_or_tcp(s.message());
    if (const char* g = std::getenv("NCCL_IB_GID_INDEX"); g && *g)
      if (Status s = verbs::ParseGidIndex(g, &o.gid.gid_index); !s.ok()) return refuse_or_tcp(s.message());
    if (const char* f = std::getenv("NCCL_IB_ADDR_FAMILY"); f && *f)
      if (Status s = verbs::ParseAddrFamily(f, &o.gid.addr_family); !s.ok()) return refuse_or_tcp(s.message());
  }
  // Never destroyed, as the process-wide loader: devices opened through it live as long.
  const verbs::IbverbsLoader& ib = config_->ibverbs_library.empty()
                                       ? verbs::IbverbsLoader::Get()
                                       : *new verbs::IbverbsLoader(config_->ibverbs_library);
  if (!config_->sysfs_root.empty()) o.root = config_->sysfs_root;  // fixture trees in tests
  verbs::TransportChoice choice;
  if (Status s = verbs::ChooseTransport(ts, ib, o, &choice); !s.ok()) return s;
  for (const auto& w : choice.discovery.warnings) FF_WARN("verbs: %s", w.c_str());
  if (!choice.verbs) {
    FF_INFO(NCCL_INIT | NCCL_NET, "transport: TCP (%s)", choice.reason.c_str());
    return Status::Ok();
  }
  std::vector<VerbsDevice> out;
  std::string failures;
  for (const auto& p : choice.discovery.ports) {
    std::unique_ptr<verbs::RdmaDevice> dev;
    Status s = verbs::OpenRdmaDevice(ib, p.device, p.port, p.gid.index, &dev);
    if (!s.ok()) {
      FF_WARN("verbs: cannot open %s port %d: %s", p.device.c_str(), p.port, s.message().c_str());
      failures += (failures.empty() ? "" : "; ") + s.message();
      continue;
    }
    VerbsDevice v;
    v.name = p.device;
    v.port = p.port;
    v.pci_path = p.pci_path;
    v.guid = p.guid;
    v.speed_mbps = p.speed_mbps;
    v.netdev = p.netdev;
    v.bootstrap = 0;
    v.gid_index = p.gid.index;
    for (size_t i = 0; i < devices_.size(); ++i)
      if (!p.netdev.empty() && devices_[i].name == p.netdev) v.bootstrap = static_cast<int>(i);
    v.ptr_support = NCCL_PTR_HOST;
    if (verbs::PeerMemLoaded(config_->sysfs_root.empty() ? "/" : config_->sysfs_root)) v.ptr_support |= NCCL_PTR_CUDA;
    if (verbs::DmabufSupported(ib, dev->pd.get())) v.ptr_support |= NCCL_PTR_DMABUF;
    FF_INFO(NCCL_INIT | NCCL_NET, "verbs: %s:%d memory: host%s%s", p.device.c_str(), p.port,
            (v.ptr_support & NCCL_PTR_CUDA) ? ", CUDA (nvidia-peermem)" : "",
            (v.ptr_support & NCCL_PTR_DMABUF) ? ", DMA-BUF" : "");
    v.rdma = dev.release();  // never closed: see VerbsDevice
    out.push_back(std::move(v));
  }
  if (out.empty()) return refuse_or_tcp("no RDMA port could be opened (" + failures + ")");
  verbs_devices_ = std::move(out);
  FF_INFO(NCCL_INIT | NCCL_NET, "transport: RDMA verbs (%s)", choice.reason.c_str());
  {
    const Config& c = *config_;
    const double try_ms = verbs::QpGiveUpMs(c.ib_timeout, 0);
    const double give_up_ms = verbs::QpGiveUpMs(c.ib_timeout, c.ib_retry_cnt);
    FF_INFO(NCCL_INIT | NCCL_NET,
            "verbs QPs: NCCL_IB_TIMEOUT %d (%.1f ms per try), NCCL_IB_RETRY_CNT %d (gives up after %.0f ms), MTU cap %d, "
            "SL %d, traffic class %d (-1: the SLA policy's, else 0)",
            c.ib_timeout, try_ms, c.ib_retry_cnt, give_up_ms, 128 << c.ib_mtu, c.ib_sl, c.ib_tc);
    // The watchdog should judge a silent QP before the QP's own retries run out (verbs/qp_attrs.h).
    if (c.path_stall_ms > 0 && give_up_ms <= c.path_stall_ms)
      FF_WARN("verbs: a QP gives up after %.0f ms (NCCL_IB_TIMEOUT=%d, NCCL_IB_RETRY_CNT=%d), before "
              "FLEXIFORCE_PATH_STALL_MS=%d: a silent path fails on the transport's retry error, not the watchdog",
              give_up_ms, c.ib_timeout, c.ib_retry_cnt, c.path_stall_ms);
  }
  for (size_t i = 0; i < verbs_devices_.size(); ++i) {
    const auto& d = verbs_devices_[i];
    FF_INFO(NCCL_INIT | NCCL_NET, "dev %zu: %s port %d speed %d Mbps%s%s, handshakes over %s", i, d.name.c_str(), d.port,
            d.speed_mbps, d.netdev.empty() ? "" : " netdev ", d.netdev.c_str(),
            devices_[static_cast<size_t>(d.bootstrap)].name.c_str());
  }
  return Status::Ok();
#else
  if (setting == "verbs")
    return InvalidArgument(
        "FLEXIFORCE_TRANSPORT=verbs: this build has no verbs backend (infiniband/verbs.h was missing when it was "
        "built); accepted: auto, verbs or tcp");
  FF_INFO(NCCL_INIT | NCCL_NET, "transport: TCP (FLEXIFORCE_TRANSPORT=%s; built without the verbs backend)",
          setting.c_str());
  return Status::Ok();
#endif
}

Status PluginState::Init(ncclDebugLogger_t logger) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (logger != nullptr) SetNcclLogger(logger);
  if (initialized_) return Status::Ok();
  config_ = &ConfigRegistry::Get();
  if (!config_->socket_family.empty() && config_->socket_family != "AF_INET" &&
      config_->socket_family != "AF_INET6") {
    FF_WARN("NCCL_SOCKET_FAMILY='%s' is not valid; accepted: AF_INET or AF_INET6; using any family",
            config_->socket_family.c_str());
  }
  std::string fam = config_->socket_family == "AF_INET" || config_->socket_family == "AF_INET6"
                        ? config_->socket_family
                        : std::string();
  devices_ = tcp::SelectInterfaces(tcp::ListInterfaces(fam), config_->socket_ifname);
  if (devices_.empty()) {
    return SystemError("no usable network interface" +
                       (config_->socket_ifname.empty() ? std::string()
                                                       : " matches NCCL_SOCKET_IFNAME='" + config_->socket_ifname +
                                                             "' (syntax: prefixes, ^ to exclude, = for exact names)"));
  }
  for (const auto& d : devices_) placements_.push_back(pcie::PlaceDevicePath(d.pci_path));
  if (Status s = ChooseTransport(); !s.ok()) return s;
  init_pid_ = ::getpid();
  std::string list;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const auto& d = devices_[i];
    // With verbs the TCP interfaces only carry connection handshakes; NCCL's devices are the ports above.
    FF_INFO(NCCL_INIT | NCCL_NET, "%s %zu: %s %s speed %d Mbps%s", verbs() ? "handshake interface" : "dev", i,
            d.name.c_str(), tcp::AddressToString(d.addr).c_str(), d.speed_mbps, d.pci_path.empty() ? " (virtual)" : "");
    list += (i ? " " : "") + std::to_string(i) + ":" + d.name;
  }
  if (verbs()) {
    list.clear();
    for (size_t i = 0; i < verbs_devices_.size(); ++i)
      list += (i ? " " : "") + std::to_string(i) + ":" + verbs_devices_[i].name + ":" + std::to_string(verbs_devices_[i].port);
  }
  FF_INFO(NCCL_INIT | NCCL_NET, "Using [%s], %d path(s) per connection, chunk %lld bytes", list.c_str(),
          config_->paths_per_connection, static_cast<long long>(config_->chunk_bytes));
  if (config_->nic_health) {
    std::vector<std::string> names;
    for (const auto& d : devices_) names.push_back(d.name);
    // Over verbs the paths' interfaces are the RDMA ports' netdevs (their counters, and the port's
    // loss counters, judge the QPs on them); the handshake interfaces may be others.
    for (const auto& v : verbs_devices_)
      if (!v.netdev.empty() && std::find(names.begin(), names.end(), v.netdev) == names.end()) names.push_back(v.netdev);
    nic_watch_ = std::make_unique<NicWatch>(config_->sysfs_root, names);
  }
  task_ = TaskProfile::Load(config_->stats_enabled, config_->stats_keep, config_->stats_dir, config_->stats_slots);
  if (task_->stats) {
    std::atexit(RemoveStatsFileAtExit);  // registered by this library: runs at its unload too
    // Killed and crashed jobs leave their files behind (about 1 MB each, in memory under /dev/shm):
    // beyond the newest few, the first process to start after them removes them.
    const auto removed = sla::RemoveCrashedStatsFiles(config_->stats_dir, config_->stats_keep_crashed);
    if (!removed.empty())
      FF_INFO(NCCL_INIT, "removed %zu statistics file(s) of processes that were killed or crashed in %s, keeping the "
              "newest %u (FLEXIFORCE_STATS_KEEP_CRASHED)", removed.size(), config_->stats_dir.c_str(),
              config_->stats_keep_crashed);
  }
  std::memset(&default_context_.attr, 0xff, sizeof(default_context_.attr));
  initialized_.store(true, std::memory_order_release);
  return Status::Ok();
}

Status PluginState::PrepareVerbsForThisProcess() {
  if (!verbs()) return Status::Ok();
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const int pid = static_cast<int>(::getpid());
  if (pid == init_pid_.load(std::memory_order_acquire)) return Status::Ok();
#if FF_WITH_VERBS
  std::vector<verbs::RdmaDevice*> fresh;
  for (const auto& v : verbs_devices_) {
    std::unique_ptr<verbs::RdmaDevice> dev;
    Status s = verbs::OpenRdmaDevice(*v.rdma->ib, v.name, v.port, v.gid_index, &dev);
    if (!s.ok())
      return SystemError("this process (" + std::to_string(pid) + ") was forked from " +
                         std::to_string(init_pid_.load()) + " after init and cannot reopen " + v.name + ": " +
                         s.message());
    fresh.push_back(dev.release());
  }
  // The inherited devices are the parent's (their file descriptors are shared with it): leaked here
  // on purpose, never closed or deregistered from this process.
  for (size_t i = 0; i < fresh.size(); ++i) verbs_devices_[i].rdma = fresh[i];
  FF_INFO(NCCL_INIT | NCCL_NET, "verbs: process %d was forked after init (by %d); reopened %zu RDMA device(s)", pid,
          init_pid_.load(), fresh.size());
  init_pid_.store(pid, std::memory_order_release);
  return Status::Ok();
#else
  return InternalError("verbs devices without the verbs backend");
#endif
}

std::vector<int> PluginState::VerbsSlots(int dev, int npaths) const {
  const int n = static_cast<int>(verbs_devices_.size());
  const int count = config_->spread_nics ? std::min({n, npaths, 4}) : 1;
  std::vector<int> out;
  for (int i = 0; i < count; ++i) out.push_back((dev + i) % n);
  return out;
}

std::vector<int> PluginState::PathOrder(int dev) const {
  std::vector<int> order{dev};
  if (!config_->spread_nics) return order;
  // NCCL picked `dev` as the NIC nearest its GPU (from the pciPath we report); a connection's further
  // paths take the other NICs nearest that one first (PIX..SYS), so they stay off the socket
  // interconnect while a closer NIC exists. Virtual interfaces have no placement and keep their order.
  for (size_t i : pcie::OrderByDistance(placements_[static_cast<size_t>(dev)], placements_))
    if (static_cast<int>(i) != dev) order.push_back(static_cast<int>(i));
  return order;
}

std::optional<pcie::PciDistance> PluginState::TopoDistance(int dev, int other) const {
  const size_t n = placements_.size();
  if (dev < 0 || other < 0 || static_cast<size_t>(dev) >= n || static_cast<size_t>(other) >= n) return std::nullopt;
  if (dev == other) return pcie::PciDistance::kPix;
  return pcie::KnownDistance(placements_[static_cast<size_t>(dev)], placements_[static_cast<size_t>(other)]);
}

}  // namespace ff
