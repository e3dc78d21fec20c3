// Environment access as a function, so parsing is tested with maps instead of setenv.
#pragma once

#include <functional>

namespace ff::sla {

// Returns the variable's value, or nullptr when it is not set.
using EnvLookup = std::function<const char*(const char*)>;

// The real process environment (getenv).
EnvLookup ProcessEnv();

}  // namespace ff::sla
