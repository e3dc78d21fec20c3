// Frame header sealing and validation.
#include "plugin/wire_format.h"

#include <cstring>

namespace ff {

uint32_t HeaderChecksum(const FrameHeader& h) {
  unsigned char bytes[sizeof(FrameHeader)];
  std::memcpy(bytes, &h, sizeof(h));
  uint32_t x = 2166136261u;
  for (size_t i = 0; i < offsetof(FrameHeader, checksum); ++i) {
    x ^= bytes[i];
    x *= 16777619u;
  }
  return x;
}

void SealHeader(FrameHeader* h) {
  h->magic = kFrameMagic;
  h->version = kWireVersion;
  h->checksum = HeaderChecksum(*h);
}

std::string ValidateHeader(const FrameHeader& h) {
  if (h.magic != kFrameMagic) return "bad magic";
  if (h.version != kWireVersion) return "unsupported wire version " + std::to_string(h.version);
  if (h.checksum != HeaderChecksum(h)) return "header checksum mismatch";
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::kData:
      if (h.total > kMaxMessageBytes) return "message size " + std::to_string(h.total) + " beyond the limit";
      if (h.length > kMaxFramePayload) return "frame payload " + std::to_string(h.length) + " beyond the limit";
      if (h.offset > h.total || h.length > h.total - h.offset)
        return "frame [" + std::to_string(h.offset) + ", +" + std::to_string(h.length) + ") outside message of " +
               std::to_string(h.total) + " bytes";
      return {};
    case FrameType::kAck:
    case FrameType::kHello:
    case FrameType::kAbort:
    case FrameType::kRejoinInfo:
    case FrameType::kAckRequest:
      if (h.length != 0) return "control frame with payload";
      return {};
  }
  return "unknown frame type " + std::to_string(h.type);
}

}  // namespace ff
