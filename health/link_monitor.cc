// rtnetlink RTM_NEWLINK events -> set of interfaces without carrier.
#include "health/link_monitor.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/logging.h"

namespace ff {

LinkMonitor& LinkMonitor::Get() {
  static LinkMonitor* monitor = new LinkMonitor();  // never destroyed: comms may poll during exit
  return *monitor;
}

LinkMonitor::LinkMonitor() {
  fd_ = ::socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd_ < 0) {
    FF_INFO(NCCL_NET, "no rtnetlink socket (%s): carrier loss is found by the path watchdog only", strerror(errno));
    return;
  }
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_LINK;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    FF_INFO(NCCL_NET, "cannot join rtnetlink link events (%s)", strerror(errno));
    ::close(fd_);
    fd_ = -1;
    return;
  }
  // Learn interfaces that are already down, so a comm created after the event still sees it.
  struct {
    nlmsghdr nh;
    ifinfomsg ifi;
  } req{};
  req.nh.nlmsg_len = sizeof(req);
  req.nh.nlmsg_type = RTM_GETLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.ifi.ifi_family = AF_UNSPEC;
  (void)::send(fd_, &req, sizeof(req), 0);
}

LinkMonitor::~LinkMonitor() {
  if (fd_ >= 0) ::close(fd_);
}

void LinkMonitor::Drain(uint64_t now_ns) {
  alignas(nlmsghdr) char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOBUFS) {
      // Events were dropped: our view may be stale, so count it as a change and let paths re-check.
      ++generation_;
      continue;
    }
    if (n <= 0) return;
    int len = static_cast<int>(n);
    for (auto* nh = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(nh, len); nh = NLMSG_NEXT(nh, len)) {
      if (nh->nlmsg_type != RTM_NEWLINK && nh->nlmsg_type != RTM_DELLINK) continue;
      auto* ifi = static_cast<ifinfomsg*>(NLMSG_DATA(nh));
      // IFF_RUNNING is the operational state: it drops with the carrier (NO-CARRIER).
      bool down = nh->nlmsg_type == RTM_DELLINK || !(ifi->ifi_flags & IFF_UP) || !(ifi->ifi_flags & IFF_RUNNING);
      SetDown(ifi->ifi_index, down, now_ns);
    }
  }
}

void LinkMonitor::SetDown(int ifindex, bool down, uint64_t now_ns) {
  auto it = std::find(down_.begin(), down_.end(), ifindex);
  if (down == (it != down_.end())) return;
  if (down)
    down_.push_back(ifindex);
  else
    down_.erase(it);
  ++generation_;
  auto c = std::find_if(changed_ns_.begin(), changed_ns_.end(),
                        [&](const std::pair<int, uint64_t>& e) { return e.first == ifindex; });
  if (c == changed_ns_.end())
    changed_ns_.emplace_back(ifindex, now_ns);
  else
    c->second = now_ns;
}

void LinkMonitor::WatchCarrier(int ifindex) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& f : carrier_files_)
    if (f.ifindex == ifindex) return;
  char name[IF_NAMESIZE] = {};
  if (if_indextoname(static_cast<unsigned>(ifindex), name) == nullptr) return;
  const std::string path = std::string("/sys/class/net/") + name + "/carrier";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // no sysfs here: rtnetlink events only
  carrier_files_.push_back(CarrierFile{ifindex, fd});
}

void LinkMonitor::ReadCarriers(uint64_t now_ns) {
  for (const auto& f : carrier_files_) {
    char c = 0;
    // "1" with carrier, "0" without; an administratively down interface fails the read (EINVAL).
    const ssize_t n = ::pread(f.fd, &c, 1, 0);
    SetDown(f.ifindex, n != 1 || c != '1', now_ns);
  }
}

uint64_t LinkMonitor::Poll(uint64_t now_ns, uint64_t min_interval_ns) {
  if (fd_ < 0) return 0;
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return generation_;  // another thread is reading; its result is as good
  if (now_ns - last_poll_ns_ >= min_interval_ns) {
    last_poll_ns_ = now_ns;
    Drain(now_ns);
    ReadCarriers(now_ns);
  }
  return generation_;
}

bool LinkMonitor::IsDown(int ifindex) {
  std::lock_guard<std::mutex> lock(mu_);
  return std::find(down_.begin(), down_.end(), ifindex) != down_.end();
}

bool LinkMonitor::StableUp(int ifindex, uint64_t now_ns, uint64_t stable_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (std::find(down_.begin(), down_.end(), ifindex) != down_.end()) return false;
  for (const auto& [index, when] : changed_ns_)
    if (index == ifindex) return now_ns - when >= stable_ns;
  return true;
}

}  // namespace ff
