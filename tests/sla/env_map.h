// Test helper: an EnvLookup backed by a map, so parsing tests need no setenv.
#pragma once

#include <map>
#include <string>

#include "sla/env_lookup.h"

namespace ff::sla::testing {

inline EnvLookup MapEnv(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace ff::sla::testing
