#include "sla/env_lookup.h"

#include <cstdlib>

namespace ff::sla {

EnvLookup ProcessEnv() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

}  // namespace ff::sla
