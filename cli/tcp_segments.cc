#include "cli/tcp_segments.h"

#include <dirent.h>
#include <linux/tcp.h>  // glibc's tcp_info lacks tcpi_segs_out / tcpi_segs_in
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>

namespace ff::cli {

std::optional<uint64_t> ProcessTcpSegments() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return std::nullopt;
  const int own = ::dirfd(dir);
  uint64_t total = 0;
  bool counted = true;
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;  // ".", "..", the listing's own fd
    tcp_info ti{};
    socklen_t len = sizeof(ti);
    // Not a socket (ENOTSOCK), or not TCP (EOPNOTSUPP, ENOPROTOOPT): not a connection to count.
    if (::getsockopt(static_cast<int>(fd), IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) continue;
    if (len < offsetof(tcp_info, tcpi_segs_in) + sizeof(ti.tcpi_segs_in)) {
      counted = false;  // a kernel older than 4.2
      break;
    }
    total += uint64_t{ti.tcpi_segs_out} + uint64_t{ti.tcpi_segs_in};
  }
  ::closedir(dir);
  if (!counted) return std::nullopt;
  return total;
}

}  // namespace ff::cli
