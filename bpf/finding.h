// One result of `flexiforce probe check`: a severity, what was checked, and what was found.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ff::probe {

enum class Severity { kOk, kWarn, kError };  // kError: a job started now would fail or misbehave

struct Finding {
  Severity severity = Severity::kOk;
  std::string topic;    // "interface", "rdma", "env", "shm", "bpf"
  std::string message;  // one line, for people
  nlohmann::json detail = nlohmann::json::object();  // the same facts, for tools (--json)
};

using Findings = std::vector<Finding>;

const char* SeverityName(Severity s);  // "ok", "warn", "error"

}  // namespace ff::probe
