// Linux PSI CPU pressure, read at most every 250 ms for the whole process.
#include "health/cpu_pressure.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace ff::health {
namespace {
std::atomic<uint64_t> g_next_read_ns{0};
std::atomic<uint32_t> g_value_ppm{0};
std::atomic<int64_t> g_override_ppm{-1};
std::atomic<bool> g_reading{false};

uint32_t ReadPpm() {
  const int fd = open("/proc/pressure/cpu", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const double v = CpuPressure::Parse(std::string(buf, static_cast<size_t>(n)));
  return v < 0 ? 0 : static_cast<uint32_t>(v * 1e6);
}
}  // namespace

double CpuPressure::Parse(const std::string& text) {
  // "some avg10=12.34 avg60=... total=..." (percent)
  const size_t line = text.find("some ");
  if (line == std::string::npos) return -1;
  const size_t at = text.find("avg10=", line);
  if (at == std::string::npos || text.find('\n', line) < at) return -1;
  const char* start = text.c_str() + at + 6;
  char* end = nullptr;
  const double pct = std::strtod(start, &end);
  if (end == start || pct < 0 || pct > 100) return -1;
  return pct / 100.0;
}

double CpuPressure::Some10(uint64_t now_ns) {
  const int64_t pinned = g_override_ppm.load(std::memory_order_relaxed);
  if (pinned >= 0) return static_cast<double>(pinned) / 1e6;
  if (now_ns >= g_next_read_ns.load(std::memory_order_relaxed) && !g_reading.exchange(true, std::memory_order_acquire)) {
    g_next_read_ns.store(now_ns + kReadNs, std::memory_order_relaxed);
    g_value_ppm.store(ReadPpm(), std::memory_order_relaxed);
    g_reading.store(false, std::memory_order_release);
  }
  return static_cast<double>(g_value_ppm.load(std::memory_order_relaxed)) / 1e6;
}

void CpuPressure::OverrideForTest(double value) {
  g_override_ppm.store(value < 0 ? -1 : static_cast<int64_t>(value * 1e6), std::memory_order_relaxed);
}

}  // namespace ff::health
