// Text from another process's shared memory made safe to print: valid UTF-8, no control bytes.
#pragma once

#include <string>
#include <string_view>

namespace ff::sla {

// `raw` with every byte that does not start a well-formed UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF included) replaced by U+FFFD, and every ASCII control
// byte by '?': JSON encoders throw on invalid UTF-8, and control bytes would drive a terminal.
std::string SanitizedUtf8(std::string_view raw);

}  // namespace ff::sla
