// `flexiforce config`: prints the knob registry with defaults, effective values and documentation.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "plugin/config_registry.h"

namespace ff {

int RunConfigCommand(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json")) {
      json = true;
    } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::printf(
          "usage: flexiforce config [--json]\n\n"
          "Prints every configuration knob the plugin reads, its default, the value the current\n"
          "environment gives it, and what it does. Bad values are reported and the default is used.\n");
      return 0;
    } else {
      std::fprintf(stderr, "flexiforce config: unknown option '%s' (accepted: --json, --help)\n", argv[i]);
      return 2;
    }
  }
  auto values = ConfigRegistry::Resolve([](const char* n) { return std::getenv(n); });
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : values) {
      static const char* kTypes[] = {"int", "bytes", "bool", "string"};
      nlohmann::json k = {{"name", v.spec->name},
                          {"type", kTypes[static_cast<int>(v.spec->type)]},
                          {"default", v.spec->default_value},
                          {"value", v.text},
                          {"from_env", v.from_env},
                          {"doc", v.spec->doc}};
      if (v.spec->type == KnobType::kInt || v.spec->type == KnobType::kBytes) {
        k["min"] = v.spec->min;
        k["max"] = v.spec->max;
      }
      if (!v.error.empty()) k["error"] = v.error;
      out.push_back(k);
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  for (const auto& v : values) {
    std::printf("%-30s = %-10s (default %s%s)\n    %s\n", v.spec->name, v.text.empty() ? "\"\"" : v.text.c_str(),
                v.spec->default_value[0] ? v.spec->default_value : "\"\"", v.from_env ? ", from environment" : "",
                v.spec->doc);
    if (!v.error.empty()) std::printf("    WARNING: %s\n", v.error.c_str());
  }
  return 0;
}

}  // namespace ff
