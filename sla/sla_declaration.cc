#include "sla/sla_declaration.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>

namespace ff::sla {
namespace {

constexpr const char* kLatencyForm =
    "accepted: a positive number of microseconds up to 10 s, optionally with a unit ns, us, ms or s "
    "(e.g. AI_SLA_LATENCY=50, 50us, 0.05ms, 50000ns)";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Nanoseconds per unit, 0 when the unit is unknown. An empty unit means microseconds.
double UnitNs(std::string_view unit) {
  const std::string u = Lower(Trim(unit));
  if (u.empty() || u == "us" || u == "\xc2\xb5s" || u == "usec") return 1e3;
  if (u == "ns") return 1.0;
  if (u == "ms" || u == "msec") return 1e6;
  if (u == "s" || u == "sec") return 1e9;
  return 0.0;
}

std::string LatencyError(const char* text, const std::string& why) {
  return std::string(kEnvSlaLatency) + "='" + text + "' is invalid (" + why + "); " + kLatencyForm;
}

}  // namespace

ParseResult<uint64_t> ParseSlaLatencyNs(const char* text) {
  if (text == nullptr) return {};
  const std::string_view s = Trim(text);
  if (s.empty()) return {std::nullopt, LatencyError(text, "empty")};
  double number = 0.0;
  // from_chars is locale-independent, unlike strtod: a job's LC_NUMERIC must not change "0.05".
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), number, std::chars_format::fixed);
  if (ec != std::errc() || end == s.data()) return {std::nullopt, LatencyError(text, "not a number")};
  const double unit_ns = UnitNs(std::string_view(end, static_cast<size_t>(s.data() + s.size() - end)));
  if (unit_ns == 0.0) {
    const bool exponent = end < s.data() + s.size() && (*end == 'e' || *end == 'E') && end + 1 < s.data() + s.size() &&
                          (std::isdigit(static_cast<unsigned char>(end[1])) || end[1] == '+' || end[1] == '-');
    return {std::nullopt, LatencyError(text, exponent ? "exponent notation is not accepted" : "unknown unit")};
  }
  if (!std::isfinite(number)) return {std::nullopt, LatencyError(text, "not finite")};
  if (number < 0) return {std::nullopt, LatencyError(text, "negative")};
  const double ns = std::round(number * unit_ns);
  if (ns < 1.0) return {std::nullopt, LatencyError(text, "zero")};
  if (ns > static_cast<double>(kMaxSlaLatencyNs)) return {std::nullopt, LatencyError(text, "above 10 s")};
  return {static_cast<uint64_t>(ns), {}};
}

ParseResult<bool> ParseEnable(const char* text) {
  if (text == nullptr) return {false, {}};
  const std::string v = Lower(Trim(text));
  if (v == "1" || v == "true" || v == "on" || v == "yes") return {true, {}};
  if (v.empty() || v == "0" || v == "false" || v == "off" || v == "no") return {false, {}};
  return {false, std::string(kEnvEnable) + "='" + text +
                     "' is invalid; accepted: 1, true, on or yes to steer (choose paths and traffic classes, "
                     "fail over), 0, false, off, no or unset to observe only; observing"};
}

SlaDeclaration ReadSlaDeclaration(const EnvLookup& env, Warnings& warnings, const ProcessIdentity& self) {
  SlaDeclaration d;
  auto latency = ParseSlaLatencyNs(env(kEnvSlaLatency));
  if (!latency.error.empty()) warnings.Report(kEnvSlaLatency, latency.error + "; using no SLA (Level 3)");
  d.latency_ns = latency.value;
  auto enable = ParseEnable(env(kEnvEnable));
  if (!enable.error.empty()) warnings.Report(kEnvEnable, enable.error);
  d.steer = enable.value.value_or(false);
  d.task = ResolveTaskId(env, warnings, self);
  return d;
}

}  // namespace ff::sla
