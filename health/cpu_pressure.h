// CPU pressure (Linux PSI, /proc/pressure/cpu): the share of time runnable tasks waited for a CPU.
//
// The relative (hedge) rule reads it: on a host whose CPUs are oversubscribed, softirq work that
// acknowledges one connection's segments can wait tens of milliseconds behind other tasks while
// another connection's acknowledgements flow - from TCP_INFO that looks exactly like a path cut
// behind a switch. PSI tells the two apart: a cut leaves the CPUs alone.
#pragma once

#include <cstdint>
#include <string>

namespace ff::health {

class CpuPressure {
 public:
  // The pressure now, as a fraction (0..1): the larger of the kernel's "some avg10" and the share of
  // the last read interval (kReadNs, from the "some total" stall counter) that tasks waited for a
  // CPU. avg10 is a 10 s average: a job that starts on an idle host and oversubscribes it at once
  // (four busy-polling ranks on 2 cores: 40-80%) reads ~10% for its first seconds, so its first
  // collectives were judged as on an idle host. The interval's own share follows the load within
  // kReadNs. (The healthy paths the emulator's quiet scenario hedged early in a process were mostly
  // TCP's tail-loss probe at work: PathWatchdog::TailProbeAllowance.) 0 where PSI is unavailable. Re-read at most every
  // kReadNs, process-wide, lock-free (one thread reads the file, the others see the last value).
  static double Now(uint64_t now_ns);
  static constexpr uint64_t kReadNs = 250'000'000;
  // Parses the file's text; -1 when it has no "some ... avg10=" field.
  static double Parse(const std::string& text);
  // "some total=" (microseconds of stall since boot); false when absent or malformed.
  static bool ParseTotal(const std::string& text, uint64_t* total_us);
  // The interval's share: stall microseconds gained over the wall time between two reads, clamped
  // to 0..1; -1 when the reads are too close (< kMinIntervalNs: too noisy) or too far apart
  // (> kMaxIntervalNs: stale, avg10 covers that), or the counter went back.
  static double IntervalShare(uint64_t prev_total_us, uint64_t prev_ns, uint64_t total_us, uint64_t now_ns);
  static constexpr uint64_t kMinIntervalNs = 100'000'000;
  static constexpr uint64_t kMaxIntervalNs = 2'000'000'000;
  // Tests: pins the value (>= 0), or goes back to the file (< 0).
  static void OverrideForTest(double value);
};

}  // namespace ff::health
