// What a job declares about itself through the environment: latency SLA, task id, steer/observe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sla/env_lookup.h"
#include "sla/task_identity.h"
#include "sla/warnings.h"

namespace ff::sla {

inline constexpr const char* kEnvSlaLatency = "AI_SLA_LATENCY";
inline constexpr const char* kEnvEnable = "AI_FLEXIFORCE_ENABLE";

// Largest SLA accepted: anything above 10 s is a typo (e.g. a value in ns without unit), not a latency goal.
inline constexpr uint64_t kMaxSlaLatencyNs = 10'000'000'000ull;

// Result of parsing one value: either a value or an error naming the variable and the accepted form.
template <typename T>
struct ParseResult {
  std::optional<T> value;
  std::string error;  // empty when the input was valid (or absent)
};

// Parses an SLA latency. A bare number is microseconds ("50"); an explicit unit is one of
// ns, us, µs, ms, s ("50us", "0.05ms", "50000ns"). Rejects non-numeric, negative, zero,
// non-finite and > 10 s. `text == nullptr` (unset) yields no value and no error.
ParseResult<uint64_t> ParseSlaLatencyNs(const char* text);

// Parses AI_FLEXIFORCE_ENABLE: "1"/"true"/"on"/"yes" steer, "0"/"false"/"off"/"no"/"" observe
// (case-insensitive). Unset yields observe without error.
ParseResult<bool> ParseEnable(const char* text);

// Everything FlexiForce reads from the job's environment at init.
struct SlaDeclaration {
  std::optional<uint64_t> latency_ns;  // none: the job declared no SLA (Level 3)
  TaskId task;
  bool steer = false;  // false: observe only, change nothing on the wire
};

// Reads the declaration; each bad value is reported to `warnings` and its default applies.
SlaDeclaration ReadSlaDeclaration(const EnvLookup& env, Warnings& warnings,
                                  const ProcessIdentity& self = CurrentProcessIdentity());

}  // namespace ff::sla
