// Reads and writes the JSON topology format documented in pathctl/TOPOLOGY.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pathctl/topology.h"

namespace ff::pathctl {

// On failure returns nullopt and sets *error to a message naming the element and field,
// e.g. "links[12].latency_us must be > 0 (got -1)". Unknown fields are not errors (other
// tools may add their own); they are listed in *warnings when it is given.
std::optional<Topology> ParseTopologyJson(std::string_view text, std::string* error,
                                          std::vector<std::string>* warnings = nullptr);
std::optional<Topology> LoadTopologyFile(const std::string& path, std::string* error,
                                         std::vector<std::string>* warnings = nullptr);

// Serialises every field, so Parse(ToJson(t)) reproduces t.
std::string TopologyToJson(const Topology& topology, int indent = 1);

}  // namespace ff::pathctl
