// UTF-8 validation by the well-formed byte sequences of Unicode's table 3-7.
#include "sla/utf8_text.h"

#include <cstdint>

namespace ff::sla {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool InRange(unsigned char c, unsigned char lo, unsigned char hi) { return c >= lo && c <= hi; }

// Length of the well-formed sequence starting at s[i], 0 if none does.
size_t SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const size_t left = s.size() - i;
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (InRange(c, 0xC2, 0xDF)) return left >= 2 && InRange(b(1), 0x80, 0xBF) ? 2 : 0;
  if (InRange(c, 0xE0, 0xEF)) {
    if (left < 3) return 0;
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80;  // E0: no overlong forms
    const unsigned char hi = c == 0xED ? 0x9F : 0xBF;  // ED: no surrogates
    return InRange(b(1), lo, hi) && InRange(b(2), 0x80, 0xBF) ? 3 : 0;
  }
  if (InRange(c, 0xF0, 0xF4)) {
    if (left < 4) return 0;
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80;  // F0: no overlong forms
    const unsigned char hi = c == 0xF4 ? 0x8F : 0xBF;  // F4: nothing above U+10FFFF
    return InRange(b(1), lo, hi) && InRange(b(2), 0x80, 0xBF) && InRange(b(3), 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::string SanitizedUtf8(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size();) {
    const size_t n = SequenceLength(raw, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    const auto c = static_cast<unsigned char>(raw[i]);
    if (n == 1 && (c < 0x20 || c == 0x7F)) {
      out += '?';
    } else {
      out.append(raw.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace ff::sla
