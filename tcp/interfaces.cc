// Interface enumeration with getifaddrs plus sysfs facts (PCI path, speed).
#include "tcp/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <climits>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "pcie/net_device_path.h"

namespace ff::tcp {

IfnameFilter::IfnameFilter(const std::string& spec) {
  std::string s = spec;
  if (!s.empty() && s[0] == '^') {
    exclude_ = true;
    s.erase(0, 1);
  }
  if (!s.empty() && s[0] == '=') {
    exact_ = true;
    s.erase(0, 1);
  }
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(start, comma - start);
    if (!item.empty()) entries_.push_back(item);
    start = comma + 1;
  }
}

bool IfnameFilter::Matches(const std::string& ifname) const {
  bool hit = false;
  for (const auto& e : entries_) {
    if (exact_ ? ifname == e : ifname.compare(0, e.size(), e) == 0) {
      hit = true;
      break;
    }
  }
  return exclude_ ? !hit : hit;
}

std::string AddressToString(const sockaddr_storage& addr) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, buf, sizeof(buf));
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

namespace {

int ReadSpeed(const std::string& sysfs_root, const std::string& ifname) {
  std::ifstream f(sysfs_root + "/class/net/" + ifname + "/speed");
  long v = -1;
  if (f >> v && v > 0 && v < INT_MAX) return static_cast<int>(v);
  return kDefaultSpeedMbps;
}

}  // namespace

std::vector<NetInterface> ListInterfaces(const std::string& family, const std::string& sysfs_root) {
  std::vector<NetInterface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> owner(list, &freeifaddrs);
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    int fam = it->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (family == "AF_INET" && fam != AF_INET) continue;
    if (family == "AF_INET6" && fam != AF_INET6) continue;
    if (!(it->ifa_flags & IFF_UP) || !(it->ifa_flags & IFF_RUNNING)) continue;
    if (fam == AF_INET6) {
      auto* a6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;
    }
    bool dup = false;  // one address per interface, the first reported (IPv4 first by convention)
    for (const auto& e : out) dup |= e.name == it->ifa_name;
    if (dup) continue;
    NetInterface ni;
    ni.name = it->ifa_name;
    ni.addr_len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&ni.addr, it->ifa_addr, ni.addr_len);
    ni.loopback = (it->ifa_flags & IFF_LOOPBACK) != 0;
    ni.pci_path = pcie::NetDevicePath(sysfs_root, ni.name);
    ni.speed_mbps = ReadSpeed(sysfs_root, ni.name);
    out.push_back(std::move(ni));
  }
  // IPv4 before IPv6 for the same ordering NCCL users expect.
  std::stable_partition(out.begin(), out.end(),
                        [](const NetInterface& n) { return n.addr.ss_family == AF_INET; });
  return out;
}

std::vector<NetInterface> SelectInterfaces(const std::vector<NetInterface>& all, const std::string& ifname_spec) {
  std::vector<NetInterface> out;
  if (!ifname_spec.empty()) {
    IfnameFilter filter(ifname_spec);
    for (const auto& n : all)
      if (filter.Matches(n.name)) out.push_back(n);
    return out;
  }
  IfnameFilter virtuals("docker,lo,virbr");
  for (const auto& n : all)
    if (!virtuals.Matches(n.name) && !n.loopback) out.push_back(n);
  if (out.empty()) {
    for (const auto& n : all)
      if (IfnameFilter("docker").Matches(n.name)) out.push_back(n);
  }
  if (out.empty()) {
    for (const auto& n : all)
      if (n.loopback) out.push_back(n);
  }
  return out;
}

int InterfaceIndexOfAddress(const sockaddr_storage& addr) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  int index = 0;
  for (ifaddrs* a = list; a != nullptr && index == 0; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != addr.ss_family) continue;
    bool same = false;
    if (addr.ss_family == AF_INET) {
      same = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr ==
             reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr.s_addr;
    } else if (addr.ss_family == AF_INET6) {
      same = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr,
                         &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, sizeof(in6_addr)) == 0;
    }
    if (same) index = static_cast<int>(if_nametoindex(a->ifa_name));
  }
  freeifaddrs(list);
  return index;
}

}  // namespace ff::tcp
