// RDMA device and port discovery (see device_discovery.h).
#include "verbs/device_discovery.h"

#include <endian.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>

#include "pcie/net_device_path.h"
#include "verbs/rdma_sysfs.h"
#include "verbs/verbs_owners.h"

namespace ff::verbs {
namespace {

// What one port looks like before GID selection, from whichever source knows it.
struct PortFacts {
  bool active = false;
  bool infiniband = false;
  int active_mtu = 0;
  uint16_t lid = 0;
};

// Fills everything sysfs knows and selects the GID; false (with a warning) when the port cannot
// carry connections.
bool CompletePort(const DiscoveryOptions& o, const std::string& device, int port, const PortFacts& facts,
                  uint64_t guid, Discovery* d) {
  VerbsPort p;
  p.device = device;
  p.port = port;
  p.infiniband = facts.infiniband;
  p.active_mtu = facts.active_mtu;
  p.lid = facts.lid;
  p.guid = guid;
  const std::string where = device + " port " + std::to_string(port);
  const std::string dir = IbPortDir(o.root, device, port);
  if (auto rate = ReadSysfsLine(dir + "/rate")) {
    const int mbps = ParseRateMbps(*rate);
    if (mbps < 0) {
      d->warnings.push_back(dir + "/rate: '" + *rate +
                            "' is not a rate (expected e.g. '100 Gb/sec (4X EDR)')");
    }
    p.speed_mbps = std::max(mbps, 0);
  }
  std::vector<std::string> gid_warnings;
  const auto table = ReadGidTable(o.root, device, port, &gid_warnings);
  d->warnings.insert(d->warnings.end(), gid_warnings.begin(), gid_warnings.end());
  Status s = SelectGid(table, facts.infiniband, o.gid, where, &p.gid);
  if (!s.ok()) {
    d->warnings.push_back(s.message() + "; port not used");
    return false;
  }
  p.netdev = p.gid.ndev;
  if (p.netdev.empty() && !facts.infiniband) {
    for (const GidEntry& e : table) {
      if (!e.ndev.empty()) {
        p.netdev = e.ndev;
        break;
      }
    }
  }
  // The PCIe component owns pciPath for every transport: the device node resolved through its
  // symlinks, or for a virtual device (rxe, siw) its netdev's, where NCCL's topology places it.
  p.pci_path = pcie::RdmaDevicePath(SysfsDir(o.root), device, p.netdev);
  d->ports.push_back(std::move(p));
  return true;
}

uint64_t SysfsGuid(const DiscoveryOptions& o, const std::string& device, Discovery* d) {
  uint64_t guid = 0;
  const std::string path = IbDeviceDir(o.root, device) + "/node_guid";
  if (auto text = ReadSysfsLine(path); text && !ParseNodeGuid(*text, &guid)) {
    d->warnings.push_back(path + ": '" + *text + "' is not a GUID (expected e.g. b83f:d203:006a:e616)");
  }
  return guid;
}

}  // namespace

int ParseRateMbps(std::string_view rate) {
  // "<number> Gb/sec (<width> <speed>)": the number may be fractional (2.5, 12.5, 53.125).
  const size_t unit = rate.find(" Gb/sec");
  if (unit == std::string_view::npos || unit == 0) return -1;
  const std::string number(rate.substr(0, unit));
  size_t used = 0;
  double gbps = 0;
  try {
    gbps = std::stod(number, &used);
  } catch (...) {
    return -1;
  }
  if (used != number.size() || !(gbps > 0) || gbps > 1e6) return -1;
  return static_cast<int>(std::lround(gbps * 1000.0));
}

bool ParseNodeGuid(std::string_view text, uint64_t* guid) {
  // Four groups of four hex digits, separated by ':'.
  if (text.size() != 19) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (i % 5 == 4) {
      if (c != ':') return false;
      continue;
    }
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    v = (v << 4) | static_cast<uint64_t>(
                       std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10);
  }
  *guid = v;
  return true;
}

Discovery DiscoverFromSysfs(const DiscoveryOptions& o) {
  Discovery d;
  for (const std::string& device : DirectoryEntries(SysfsDir(o.root) + "/class/infiniband")) {
    if (!o.filter.MayMatchDevice(device)) continue;
    const uint64_t guid = SysfsGuid(o, device, &d);
    for (int port : NumericEntries(IbDeviceDir(o.root, device) + "/ports")) {
      if (!o.filter.Matches(device, port)) continue;
      const std::string dir = IbPortDir(o.root, device, port);
      PortFacts f;
      // "4: ACTIVE": the number is enum ibv_port_state.
      f.active = ReadSysfsLine(dir + "/state").value_or("").rfind("4:", 0) == 0;
      f.infiniband = ReadSysfsLine(dir + "/link_layer").value_or("") == "InfiniBand";
      if (!f.active) continue;
      CompletePort(o, device, port, f, guid, &d);
    }
  }
  return d;
}

Discovery DiscoverWithVerbs(const IbverbsLoader& ib, const DiscoveryOptions& o) {
  Discovery d;
  if (!ib.available()) return d;
  DeviceListOwner list;
  int n = 0;
  if (Status s = GetDeviceList(ib, &list, &n); !s.ok()) {
    // ENOSYS: the kernel has no RDMA subsystem (no uverbs) - a host without RDMA devices, which
    // the transport choice reports at INFO ("no RDMA device"), not a fault worth a warning.
    if (errno != ENOSYS) d.warnings.push_back(s.message());
    return d;
  }
  std::vector<ibv_device*> devices(list.get(), list.get() + n);
  std::sort(devices.begin(), devices.end(), [&](ibv_device* a, ibv_device* b) {
    return std::string_view(ib.api().get_device_name(a)) < std::string_view(ib.api().get_device_name(b));
  });
  for (ibv_device* dev : devices) {
    const std::string name = ib.api().get_device_name(dev);
    if (!o.filter.MayMatchDevice(name)) continue;
    ContextOwner ctx;
    if (Status s = OpenDevice(ib, dev, &ctx); !s.ok()) {
      d.warnings.push_back(s.message() + "; device not used");
      continue;
    }
    ibv_device_attr attr{};
    if (int rc = ib.api().query_device(ctx.get(), &attr); rc != 0) {
      d.warnings.push_back(ErrnoMessage("ibv_query_device(" + name + ")", rc > 0 ? rc : errno) +
                           "; device not used");
      continue;
    }
    const uint64_t guid = be64toh(ib.api().get_device_guid(dev));
    for (int port = 1; port <= attr.phys_port_cnt; ++port) {
      if (!o.filter.Matches(name, port)) continue;
      ibv_port_attr pa{};
      if (int rc = ib.QueryPort(ctx.get(), static_cast<uint8_t>(port), &pa); rc != 0) {
        d.warnings.push_back(
            ErrnoMessage("ibv_query_port(" + name + ", " + std::to_string(port) + ")", rc > 0 ? rc : errno) +
            "; port not used");
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) continue;
      PortFacts f;
      f.active = true;
      f.infiniband = pa.link_layer == IBV_LINK_LAYER_INFINIBAND;
      f.active_mtu = pa.active_mtu;
      f.lid = pa.lid;
      CompletePort(o, name, port, f, guid, &d);
    }
  }
  return d;
}

}  // namespace ff::verbs
