// Network-interface discovery and NCCL_SOCKET_IFNAME-style selection for the TCP transport.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <vector>

namespace ff::tcp {

// One usable interface address.
struct NetInterface {
  std::string name;
  sockaddr_storage addr{};  // port 0
  socklen_t addr_len = 0;
  std::string pci_path;  // sysfs device path, empty for virtual interfaces
  int speed_mbps = 0;    // from sysfs; kDefaultSpeedMbps when unknown
  bool loopback = false;
};

constexpr int kDefaultSpeedMbps = 10000;

// NCCL's interface selection syntax: "eth,ib" prefixes; "^docker" excludes; "=eth0" exact names.
class IfnameFilter {
 public:
  explicit IfnameFilter(const std::string& spec);
  bool Matches(const std::string& ifname) const;
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<std::string> entries_;
  bool exclude_ = false;
  bool exact_ = false;
};

// Address of an interface as text ("10.0.0.1" or "fe80::1").
std::string AddressToString(const sockaddr_storage& addr);
// Index of the local interface that holds `addr` (0 when none does).
int InterfaceIndexOfAddress(const sockaddr_storage& addr);

// Lists up, running interfaces with an IPv4/IPv6 address (link-local IPv6 skipped), honouring
// `family` ("", "AF_INET", "AF_INET6"). Sysfs is read under `sysfs_root` so tests can use fixtures.
std::vector<NetInterface> ListInterfaces(const std::string& family, const std::string& sysfs_root = "/sys");

// NCCL's default choice: the user's filter if set; otherwise real interfaces (not docker*, lo, virbr*)
// and only when there are none, loopback.
std::vector<NetInterface> SelectInterfaces(const std::vector<NetInterface>& all, const std::string& ifname_spec);

}  // namespace ff::tcp
