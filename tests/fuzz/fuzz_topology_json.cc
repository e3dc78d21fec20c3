// libFuzzer target: the topology JSON parser (pathctl/topology_json): deep nesting, huge numbers, duplicate keys.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pathctl/topology_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string error;
  std::vector<std::string> warnings;
  auto t = ff::pathctl::ParseTopologyJson(std::string_view(reinterpret_cast<const char*>(data), size), &error,
                                          &warnings);
  if (!t) return 0;
  // What parses must serialise and parse again.
  const std::string json = ff::pathctl::TopologyToJson(*t);
  std::string error2;
  if (!ff::pathctl::ParseTopologyJson(json, &error2)) __builtin_trap();
  return 0;
}
