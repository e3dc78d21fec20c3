// libFuzzer target: frame header validation (core/wire_format), raw and with a valid seal so the per-type checks are reached.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/wire_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ff::FrameHeader h{};
  std::memcpy(&h, data, size < sizeof(h) ? size : sizeof(h));
  (void)ff::ValidateHeader(h);
  // Most random headers die at the magic or checksum; sealing lets the type and length checks run.
  ff::SealHeader(&h);
  const std::string why = ff::ValidateHeader(h);
  if (why.empty() && h.type == static_cast<uint8_t>(ff::FrameType::kData) &&
      (h.offset > h.total || h.length > h.total - h.offset))
    __builtin_trap();  // a data frame outside its message passed validation
  return 0;
}
