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
  // "some avg10" as a fraction (0..1); 0 where PSI is unavailable. Re-read at most every kReadNs,
  // process-wide, lock-free (one thread reads the file, the others see the last value).
  static double Some10(uint64_t now_ns);
  static constexpr uint64_t kReadNs = 250'000'000;
  // Parses the file's text; -1 when it has no "some ... avg10=" field.
  static double Parse(const std::string& text);
  // Tests: pins the value (>= 0), or goes back to the file (< 0).
  static void OverrideForTest(double value);
};

}  // namespace ff::health
