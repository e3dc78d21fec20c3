// Linux PSI CPU pressure, read at most every 250 ms for the whole process.
#include "health/cpu_pressure.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ff::health {
namespace {
std::atomic<uint64_t> g_next_read_ns{0};
std::atomic<uint32_t> g_value_ppm{0};
std::atomic<int64_t> g_override_ppm{-1};
std::atomic<bool> g_reading{false};
// The previous read's stall counter and clock; touched only by the thread holding g_reading.
uint64_t g_prev_total_us = 0;
uint64_t g_prev_ns = 0;

uint32_t ReadPpm(uint64_t now_ns) {
  const int fd = open("/proc/pressure/cpu", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  const std::string text(buf, static_cast<size_t>(n));
  double v = CpuPressure::Parse(text);
  uint64_t total_us = 0;
  if (CpuPressure::ParseTotal(text, &total_us)) {
    if (g_prev_ns != 0) v = std::max(v, CpuPressure::IntervalShare(g_prev_total_us, g_prev_ns, total_us, now_ns));
    g_prev_total_us = total_us;
    g_prev_ns = now_ns;
  }
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

bool CpuPressure::ParseTotal(const std::string& text, uint64_t* total_us) {
  const size_t line = text.find("some ");
  if (line == std::string::npos) return false;
  const size_t at = text.find("total=", line);
  if (at == std::string::npos || text.find('\n', line) < at) return false;
  const char* start = text.c_str() + at + 6;
  if (*start < '0' || *start > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(start, &end, 10);
  if (end == start || errno == ERANGE || (*end != '\0' && *end != '\n' && *end != ' ')) return false;
  *total_us = v;
  return true;
}

double CpuPressure::IntervalShare(uint64_t prev_total_us, uint64_t prev_ns, uint64_t total_us, uint64_t now_ns) {
  if (now_ns <= prev_ns || total_us < prev_total_us) return -1;
  const uint64_t span_ns = now_ns - prev_ns;
  if (span_ns < kMinIntervalNs || span_ns > kMaxIntervalNs) return -1;
  const double share = static_cast<double>(total_us - prev_total_us) * 1000.0 / static_cast<double>(span_ns);
  return std::clamp(share, 0.0, 1.0);
}

double CpuPressure::Now(uint64_t now_ns) {
  const int64_t pinned = g_override_ppm.load(std::memory_order_relaxed);
  if (pinned >= 0) return static_cast<double>(pinned) / 1e6;
  if (now_ns >= g_next_read_ns.load(std::memory_order_relaxed) && !g_reading.exchange(true, std::memory_order_acquire)) {
    g_next_read_ns.store(now_ns + kReadNs, std::memory_order_relaxed);
    g_value_ppm.store(ReadPpm(now_ns), std::memory_order_relaxed);
    g_reading.store(false, std::memory_order_release);
  }
  return static_cast<double>(g_value_ppm.load(std::memory_order_relaxed)) / 1e6;
}

void CpuPressure::OverrideForTest(double value) {
  g_override_ppm.store(value < 0 ? -1 : static_cast<int64_t>(value * 1e6), std::memory_order_relaxed);
}

}  // namespace ff::health
