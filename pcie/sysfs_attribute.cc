// Sysfs attribute reader (see sysfs_attribute.h).
#include "pcie/sysfs_attribute.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <utility>

namespace ff::pcie {

SysfsAttribute::SysfsAttribute(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
}

SysfsAttribute::~SysfsAttribute() {
  if (fd_ >= 0) ::close(fd_);
}

SysfsAttribute::SysfsAttribute(SysfsAttribute&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), warned_(other.warned_) {}

SysfsAttribute& SysfsAttribute::operator=(SysfsAttribute&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    warned_ = other.warned_;
  }
  return *this;
}

void SysfsAttribute::ReopenIfReplaced() const {
  // A file replaced by rename (how fixture trees and tools update a file atomically) leaves our
  // descriptor on the unlinked old inode, which would read stale values forever. sysfs never does
  // this; the check costs one fstat per read.
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || st.st_nlink != 0) return;
  const int fresh = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fresh < 0) return;
  ::close(fd_);
  fd_ = fresh;
}

std::optional<std::string_view> SysfsAttribute::ReadText(char* buf, size_t cap) const {
  if (fd_ < 0 || cap == 0) return std::nullopt;
  ReopenIfReplaced();
  ssize_t n;
  do {
    // sysfs regenerates the content on every read at offset 0.
    n = ::pread(fd_, buf, cap - 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return std::nullopt;
  size_t len = static_cast<size_t>(n);
  while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' ' || buf[len - 1] == '\t')) --len;
  buf[len] = '\0';
  return std::string_view(buf, len);
}

std::optional<uint64_t> ParseU64(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\n')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n')) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> SysfsAttribute::ReadU64(const WarnFn& warn) {
  char buf[64];
  auto text = ReadText(buf, sizeof buf);
  if (!text) return std::nullopt;
  auto v = ParseU64(*text);
  if (!v) ReportMalformed(warn, *text, "a decimal unsigned integer, e.g. '1234'");
  return v;
}

void SysfsAttribute::ReportMalformed(const WarnFn& warn, std::string_view got, std::string_view expected) {
  if (warned_ || !warn) return;
  warned_ = true;
  std::string msg = path_ + ": cannot parse '";
  msg.append(got.substr(0, 60));
  msg += "', expected ";
  msg.append(expected);
  msg += "; ignoring this file";
  warn(msg);
}

}  // namespace ff::pcie
