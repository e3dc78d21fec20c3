// FEC statistics over ethtool netlink, or from fixture files under a root prefix (see fec_stats.h).
#include "health/fec_stats.h"

#include <fcntl.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pcie/sysfs_attribute.h"

namespace ff::health {

namespace {

// Appends one attribute at *off in buf; returns the offset of its header (for nesting).
size_t PutAttr(unsigned char* buf, size_t* off, uint16_t type, const void* data, size_t len) {
  const size_t at = *off;
  nlattr a{static_cast<uint16_t>(NLA_HDRLEN + len), type};
  std::memcpy(buf + at, &a, sizeof a);
  if (len) std::memcpy(buf + at + NLA_HDRLEN, data, len);
  const size_t padded = NLA_ALIGN(NLA_HDRLEN + len);
  std::memset(buf + at + NLA_HDRLEN + len, 0, padded - NLA_HDRLEN - len);
  *off = at + padded;
  return at;
}

void CloseNest(unsigned char* buf, size_t nest_at, size_t end) {
  nlattr a;
  std::memcpy(&a, buf + nest_at, sizeof a);
  a.nla_len = static_cast<uint16_t>(end - nest_at);
  std::memcpy(buf + nest_at, &a, sizeof a);
}

// Calls fn(type, payload, len) for each attribute in [p, p+len).
template <typename Fn>
void ForEachAttr(const unsigned char* p, size_t len, Fn&& fn) {
  while (len >= NLA_HDRLEN) {
    nlattr a;
    std::memcpy(&a, p, sizeof a);
    if (a.nla_len < NLA_HDRLEN || a.nla_len > len) return;
    fn(static_cast<uint16_t>(a.nla_type & NLA_TYPE_MASK), p + NLA_HDRLEN, static_cast<size_t>(a.nla_len - NLA_HDRLEN));
    const size_t step = NLA_ALIGN(a.nla_len);
    if (step >= len) return;
    p += step;
    len -= step;
  }
}

std::optional<uint64_t> FirstU64(const unsigned char* p, size_t len) {
  // A zero-length array means the driver does not report this counter.
  if (len < sizeof(uint64_t)) return std::nullopt;
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::string Errno(const char* what, int err) { return std::string(what) + ": " + std::strerror(err); }

}  // namespace

std::string_view FecStatusName(FecStatus s) {
  switch (s) {
    case FecStatus::kOk: return "ok";
    case FecStatus::kUnsupported: return "unsupported";
    case FecStatus::kError: return "error";
  }
  return "?";
}

bool ParseFecFixture(std::string_view content, FecStats* out, std::string* error) {
  *out = {};
  int line_no = 0;
  while (!content.empty()) {
    auto nl = content.find('\n');
    std::string_view line = content.substr(0, nl);
    content = nl == std::string_view::npos ? std::string_view() : content.substr(nl + 1);
    ++line_no;
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r' || line.back() == '\t')) line.remove_suffix(1);
    if (line.empty()) continue;
    auto sp = line.find(' ');
    std::string_view key = line.substr(0, sp);
    auto value = sp == std::string_view::npos ? std::nullopt : pcie::ParseU64(line.substr(sp + 1));
    std::optional<uint64_t>* slot = key == "corrected_blocks"       ? &out->corrected_blocks
                                    : key == "uncorrectable_blocks" ? &out->uncorrectable_blocks
                                    : key == "corrected_bits"       ? &out->corrected_bits
                                                                    : nullptr;
    if (!slot || !value) {
      *error = "line " + std::to_string(line_no) + " '" + std::string(line.substr(0, 60)) +
               "': expected 'corrected_blocks N', 'uncorrectable_blocks N' or 'corrected_bits N'";
      return false;
    }
    *slot = value;
  }
  return true;
}

FecStatsSource::FecStatsSource(std::string root) : root_(std::move(root)) {}

FecStatsSource::~FecStatsSource() {
  if (sock_ >= 0) ::close(sock_);
}

FecStatus FecStatsSource::Read(const std::string& ifname, FecStats* out, std::string* error) {
  *out = {};
  return root_.empty() ? ReadNetlink(ifname, out, error) : ReadFixture(ifname, out, error);
}

FecStatus FecStatsSource::ReadFixture(const std::string& ifname, FecStats* out, std::string* error) {
  const std::string path = root_ + "/ethtool/" + ifname + "/fec";
  pcie::SysfsAttribute file(path);
  if (!file.present()) return FecStatus::kUnsupported;
  char buf[512];
  auto text = file.ReadText(buf, sizeof buf);
  if (!text) {
    *error = Errno(path.c_str(), errno);
    return FecStatus::kError;
  }
  std::string why;
  if (!ParseFecFixture(*text, out, &why)) {
    *error = path + ": " + why;
    return FecStatus::kError;
  }
  const bool any = out->corrected_blocks || out->uncorrectable_blocks || out->corrected_bits;
  return any ? FecStatus::kOk : FecStatus::kUnsupported;
}

int FecStatsSource::Transact(size_t len, const nlmsghdr** reply, std::string* error) {
  nlmsghdr* req = reinterpret_cast<nlmsghdr*>(req_);
  req->nlmsg_len = static_cast<uint32_t>(len);
  req->nlmsg_seq = ++seq_;
  req->nlmsg_pid = 0;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(sock_, req_, len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    *error = Errno("ethtool netlink send", errno);
    return -1;
  }
  for (;;) {
    ssize_t n = ::recv(sock_, resp_, sizeof resp_, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = Errno("ethtool netlink receive", errno);
      return -1;
    }
    size_t left = static_cast<size_t>(n);
    for (auto* h = reinterpret_cast<const nlmsghdr*>(resp_); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      // A reply to an earlier request that timed out: skip it.
      if (h->nlmsg_seq != seq_) continue;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        return -e->error;
      }
      *reply = h;
      return 0;
    }
  }
}

bool FecStatsSource::EnsureFamily(bool* unsupported, std::string* error) {
  if (family_) return true;
  if (family_missing_) {
    *unsupported = true;
    return false;
  }
  if (sock_ < 0) {
    sock_ = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
    if (sock_ < 0) {
      *error = Errno("ethtool netlink socket", errno);
      return false;
    }
    // A poller must never hang on a kernel that does not answer.
    timeval tv{0, 200 * 1000};
    ::setsockopt(sock_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  std::memset(req_, 0, sizeof req_);
  auto* nh = reinterpret_cast<nlmsghdr*>(req_);
  nh->nlmsg_type = GENL_ID_CTRL;
  nh->nlmsg_flags = NLM_F_REQUEST;
  auto* gh = reinterpret_cast<genlmsghdr*>(req_ + NLMSG_HDRLEN);
  gh->cmd = CTRL_CMD_GETFAMILY;
  gh->version = 1;
  size_t off = NLMSG_HDRLEN + GENL_HDRLEN;
  PutAttr(req_, &off, CTRL_ATTR_FAMILY_NAME, ETHTOOL_GENL_NAME, sizeof ETHTOOL_GENL_NAME);
  const nlmsghdr* reply = nullptr;
  int rc = Transact(off, &reply, error);
  if (rc < 0) return false;
  if (rc == ENOENT) {  // kernel built without ethtool netlink
    family_missing_ = true;
    *unsupported = true;
    return false;
  }
  if (rc != 0) {
    *error = Errno("resolving generic netlink family 'ethtool'", rc);
    return false;
  }
  const auto* body = static_cast<const unsigned char*>(NLMSG_DATA(reply)) + GENL_HDRLEN;
  const size_t body_len = reply->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;
  ForEachAttr(body, body_len, [&](uint16_t type, const unsigned char* p, size_t len) {
    if (type == CTRL_ATTR_FAMILY_ID && len >= sizeof(uint16_t)) std::memcpy(&family_, p, sizeof family_);
  });
  if (!family_) {
    *error = "generic netlink family 'ethtool': reply without a family id";
    return false;
  }
  return true;
}

FecStatus FecStatsSource::ReadNetlink(const std::string& ifname, FecStats* out, std::string* error) {
  bool unsupported = false;
  if (!EnsureFamily(&unsupported, error)) return unsupported ? FecStatus::kUnsupported : FecStatus::kError;
  if (ifname.size() >= 16) {
    *error = "interface name '" + ifname + "' is longer than 15 characters";
    return FecStatus::kError;
  }
  std::memset(req_, 0, sizeof req_);
  auto* nh = reinterpret_cast<nlmsghdr*>(req_);
  nh->nlmsg_type = family_;
  nh->nlmsg_flags = NLM_F_REQUEST;
  auto* gh = reinterpret_cast<genlmsghdr*>(req_ + NLMSG_HDRLEN);
  gh->cmd = ETHTOOL_MSG_FEC_GET;
  gh->version = ETHTOOL_GENL_VERSION;
  size_t off = NLMSG_HDRLEN + GENL_HDRLEN;
  const size_t nest = PutAttr(req_, &off, ETHTOOL_A_FEC_HEADER | NLA_F_NESTED, nullptr, 0);
  PutAttr(req_, &off, ETHTOOL_A_HEADER_DEV_NAME, ifname.c_str(), ifname.size() + 1);
  const uint32_t flags = ETHTOOL_FLAG_STATS | ETHTOOL_FLAG_COMPACT_BITSETS;
  PutAttr(req_, &off, ETHTOOL_A_HEADER_FLAGS, &flags, sizeof flags);
  CloseNest(req_, nest, off);

  const nlmsghdr* reply = nullptr;
  int rc = Transact(off, &reply, error);
  if (rc < 0) return FecStatus::kError;
  // No FEC on this device (veth, lo, virtio) or the interface went away: the source is absent.
  if (rc == EOPNOTSUPP || rc == ENODEV) return FecStatus::kUnsupported;
  if (rc != 0) {
    *error = Errno(("ethtool FEC query of '" + ifname + "'").c_str(), rc);
    return FecStatus::kError;
  }
  const auto* body = static_cast<const unsigned char*>(NLMSG_DATA(reply)) + GENL_HDRLEN;
  const size_t body_len = reply->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;
  ForEachAttr(body, body_len, [&](uint16_t type, const unsigned char* p, size_t len) {
    if (type != ETHTOOL_A_FEC_STATS) return;
    ForEachAttr(p, len, [&](uint16_t st, const unsigned char* sp, size_t slen) {
      if (st == ETHTOOL_A_FEC_STAT_CORRECTED) out->corrected_blocks = FirstU64(sp, slen);
      if (st == ETHTOOL_A_FEC_STAT_UNCORR) out->uncorrectable_blocks = FirstU64(sp, slen);
      if (st == ETHTOOL_A_FEC_STAT_CORR_BITS) out->corrected_bits = FirstU64(sp, slen);
    });
  });
  const bool any = out->corrected_blocks || out->uncorrectable_blocks || out->corrected_bits;
  return any ? FecStatus::kOk : FecStatus::kUnsupported;
}

}  // namespace ff::health
