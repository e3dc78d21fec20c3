// Preflight of the host's network: TCP interfaces as the plugin selects them, and RDMA devices.
#include <fstream>

#include "bpf/preflight.h"
#include "bpf/rdma_devices.h"
#include "pcie/device_inventory.h"
#include "pcie/gpu_direct.h"
#include "tcp/interfaces.h"

namespace ff::probe {

namespace {

std::string SysfsLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

const char* Env(const PreflightInputs& in, const char* name) {
  const char* v = in.env ? in.env(name) : nullptr;
  return v;
}

}  // namespace

void CheckInterfaces(const PreflightInputs& in, Findings* out) {
  const char* family = Env(in, "NCCL_SOCKET_FAMILY");
  const char* spec = Env(in, "NCCL_SOCKET_IFNAME");
  const auto all = tcp::ListInterfaces(family ? family : "", in.sysfs_root);
  const auto chosen = tcp::SelectInterfaces(all, spec ? spec : "");
  for (const auto& i : all) {
    bool selected = false;
    for (const auto& c : chosen) selected |= c.name == i.name && tcp::AddressToString(c.addr) == tcp::AddressToString(i.addr);
    const std::string net = in.sysfs_root + "/class/net/" + i.name;
    // Read speed here rather than NetInterface::speed_mbps, which substitutes a default for unknown.
    const std::string speed = SysfsLine(net + "/speed");
    const std::string carrier = SysfsLine(net + "/carrier");
    Finding f;
    f.topic = "interface";
    f.severity = selected && carrier == "0" ? Severity::kWarn : Severity::kOk;
    f.message = i.name + " " + tcp::AddressToString(i.addr) + " speed " +
                (speed.empty() || speed[0] == '-' ? std::string("unknown") : speed + " Mb/s") + " carrier " +
                (carrier.empty() ? std::string("unknown") : carrier == "1" ? "up" : "DOWN") + " pci " +
                (i.pci_path.empty() ? std::string("none (virtual)") : i.pci_path) +
                (selected ? " [selected]" : " [not selected]");
    f.detail = {{"name", i.name},         {"address", tcp::AddressToString(i.addr)},
                {"speed", speed},         {"carrier", carrier},
                {"pci_path", i.pci_path}, {"selected", selected},
                {"loopback", i.loopback}};
    out->push_back(std::move(f));
  }
  Finding sum;
  sum.topic = "interface";
  sum.detail = {{"NCCL_SOCKET_IFNAME", spec ? spec : ""}, {"selected", chosen.size()}};
  if (chosen.empty()) {
    sum.severity = Severity::kError;
    sum.message = std::string("no usable interface") +
                  (spec ? std::string(" matches NCCL_SOCKET_IFNAME=") + spec : std::string(" is up with an address"));
  } else {
    bool only_lo = true;
    for (const auto& c : chosen) only_lo &= c.loopback;
    sum.severity = only_lo ? Severity::kWarn : Severity::kOk;
    sum.message = std::to_string(chosen.size()) + " interface(s) selected" +
                  (only_lo ? ": loopback only, so this host cannot reach another" : "");
  }
  out->push_back(std::move(sum));
}

void CheckRdma(const PreflightInputs& in, Findings* out) {
  const char* gid_env = Env(in, "NCCL_IB_GID_INDEX");
  int gid_index = -1;
  if (gid_env != nullptr && *gid_env != '\0') {
    try {
      gid_index = std::stoi(gid_env);
    } catch (...) {
      out->push_back({Severity::kError, "rdma", std::string("NCCL_IB_GID_INDEX='") + gid_env + "' is not a number"});
    }
  }
  const char* hca = Env(in, "NCCL_IB_HCA");
  const auto devs = ListRdmaDevices(in.sysfs_root, gid_index);
  if (devs.empty()) {
    Finding f{Severity::kOk, "rdma", "none: no RDMA device under /sys/class/infiniband (TCP only)"};
    if (hca != nullptr && *hca != '\0') {
      f.severity = Severity::kWarn;
      f.message = std::string("none, although NCCL_IB_HCA=") + hca + " is set";
    }
    f.detail = {{"devices", nlohmann::json::array()}};
    out->push_back(std::move(f));
    return;
  }
  int usable = 0;
  for (const auto& d : devs) {
    for (const auto& p : d.ports) {
      const bool wanted = HcaFilterMatches(hca ? hca : "", d.name, p.port);
      Finding f;
      f.topic = "rdma";
      f.message = d.name + ":" + std::to_string(p.port) + " " + p.state + " " + p.link_layer + " gid ";
      if (p.selected) {
        f.message += std::to_string(p.selected->index) + " " + p.selected->gid + " (" + p.selected->type +
                     (p.selected->ndev.empty() ? "" : ", " + p.selected->ndev) + ")";
      } else {
        f.message += "none usable for RoCEv2/IPv4";
      }
      f.message += wanted ? " [selected]" : " [excluded by NCCL_IB_HCA]";
      const bool ok = p.state == "ACTIVE" && p.selected.has_value();
      usable += wanted && ok;
      f.severity = wanted && !ok ? Severity::kWarn : Severity::kOk;
      f.detail = {{"device", d.name}, {"port", p.port}, {"state", p.state}, {"link_layer", p.link_layer},
                  {"selected", wanted}};
      if (p.selected)
        f.detail["gid"] = {{"index", p.selected->index}, {"gid", p.selected->gid}, {"type", p.selected->type},
                           {"ndev", p.selected->ndev}};
      out->push_back(std::move(f));
    }
  }
  if (hca != nullptr && *hca != '\0' && usable == 0)
    out->push_back({Severity::kWarn, "rdma", std::string("NCCL_IB_HCA=") + hca + " selects no active port with a usable GID"});
  CheckGpuDirect(in, out);
}

void CheckGpuDirect(const PreflightInputs& in, Findings* out) {
  // GPUs are counted from the tree above sysfs (the inventory scans <root>/sys).
  std::string root = in.sysfs_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  int nvidia = -1;  // unknown when the sysfs directory is not called sys
  if (root.size() >= 4 && root.compare(root.size() - 4, 4, "/sys") == 0) {
    nvidia = 0;
    for (const auto& g : pcie::ScanInventory(root.size() == 4 ? "/" : root.substr(0, root.size() - 4)).gpus)
      nvidia += g.vendor == pcie::kVendorNvidia;
  }
  const std::string module = pcie::PeerMemModule(in.sysfs_root);
  Finding f;
  f.topic = "rdma";
  if (!module.empty()) {
    f.message = "GPUDirect RDMA: " + module + " loaded, so the NICs can register CUDA buffers (ptrSupport CUDA)";
  } else {
    f.message = "GPUDirect RDMA: no nvidia-peermem module; CUDA buffers need a NIC that registers DMA-BUFs (the "
                "plugin asks each device at init), else NCCL stages them through host memory";
    // A GPU host whose NICs cannot reach GPU memory runs, but slower: worth a warning, not a stop.
    if (nvidia > 0) f.severity = Severity::kWarn;
  }
  if (nvidia >= 0) f.message += " (" + std::to_string(nvidia) + " NVIDIA GPU(s))";
  f.detail = {{"peermem_module", module}, {"nvidia_gpus", nvidia}};
  out->push_back(std::move(f));
}

}  // namespace ff::probe
