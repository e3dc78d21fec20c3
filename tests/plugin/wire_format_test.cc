// Frame header validation: every field a peer controls is checked before use.
#include "core/wire_format.h"

#include <gtest/gtest.h>

namespace ff {
namespace {

FrameHeader Data(uint64_t offset, uint32_t length, uint64_t total) {
  FrameHeader h{};
  h.type = static_cast<uint8_t>(FrameType::kData);
  h.offset = offset;
  h.length = length;
  h.total = total;
  SealHeader(&h);
  return h;
}

TEST(WireFormat, SealedDataHeaderValidates) { EXPECT_EQ(ValidateHeader(Data(0, 100, 100)), ""); }

TEST(WireFormat, AnyFlippedByteIsDetected) {
  for (size_t i = 0; i < sizeof(FrameHeader); ++i) {
    FrameHeader h = Data(4096, 4096, 1 << 20);
    reinterpret_cast<unsigned char*>(&h)[i] ^= 0x40;
    EXPECT_NE(ValidateHeader(h), "") << "byte " << i;
  }
}

TEST(WireFormat, FrameOutsideItsMessageIsRejected) {
  EXPECT_NE(ValidateHeader(Data(90, 20, 100)), "");
  EXPECT_NE(ValidateHeader(Data(~uint64_t{0} - 5, 10, 100)), "");
  EXPECT_NE(ValidateHeader(Data(0, 10, kMaxMessageBytes + 1)), "");
}

TEST(WireFormat, ControlFrameWithPayloadAndUnknownTypeAreRejected) {
  FrameHeader h{};
  h.type = static_cast<uint8_t>(FrameType::kAck);
  h.length = 5;
  SealHeader(&h);
  EXPECT_NE(ValidateHeader(h), "");
  FrameHeader u{};
  u.type = 99;
  SealHeader(&u);
  EXPECT_NE(ValidateHeader(u).find("unknown frame type"), std::string::npos);
}

TEST(WireFormat, OtherVersionIsRejectedByName) {
  FrameHeader h = Data(0, 1, 1);
  h.version = 7;
  h.checksum = HeaderChecksum(h);
  EXPECT_NE(ValidateHeader(h).find("version"), std::string::npos);
}

}  // namespace
}  // namespace ff
