// Listen handle codec: round trip, 128-byte bound, malformed input rejected with a reason.
#include "plugin/listen_handle.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

namespace ff {
namespace {

sockaddr_storage V4(const char* ip, uint16_t port) {
  sockaddr_storage s{};
  auto* a = reinterpret_cast<sockaddr_in*>(&s);
  a->sin_family = AF_INET;
  a->sin_port = htons(port);
  inet_pton(AF_INET, ip, &a->sin_addr);
  return s;
}
sockaddr_storage V6(const char* ip, uint16_t port) {
  sockaddr_storage s{};
  auto* a = reinterpret_cast<sockaddr_in6*>(&s);
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &a->sin6_addr);
  return s;
}

TEST(ListenHandle, MixedFamiliesRoundTrip) {
  ListenHandle h;
  for (size_t i = 0; i < kSecretBytes; ++i) h.secret[i] = static_cast<uint8_t>(0x11 * (i + 1));
  h.addrs = {V4("10.0.0.1", 4000), V6("fd00::2", 5000), V4("10.0.1.1", 6000)};
  char buf[kHandleBytes];
  ASSERT_TRUE(EncodeHandle(h, buf).ok());
  ListenHandle d;
  ASSERT_TRUE(DecodeHandle(buf, &d).ok());
  EXPECT_EQ(d.secret, h.secret);
  ASSERT_EQ(d.addrs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(std::memcmp(&d.addrs[i], &h.addrs[i], sizeof(sockaddr_in6)), 0) << i;
}

TEST(ListenHandle, ConnectStateBytesStartZero) {
  ListenHandle h;
  h.addrs = {V4("10.0.0.1", 4000)};
  char buf[kHandleBytes];
  std::memset(buf, 0xee, sizeof(buf));
  ASSERT_TRUE(EncodeHandle(h, buf).ok());
  for (size_t i = kConnectStateOffset; i < kConnectStateOffset + 8; ++i) EXPECT_EQ(buf[i], 0);
}

TEST(ListenHandle, GarbageAndBadFieldsAreRejectedWithReasons) {
  char buf[kHandleBytes];
  std::memset(buf, 0x41, sizeof(buf));
  ListenHandle junk;
  Status s = DecodeHandle(buf, &junk);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("magic"), std::string::npos);

  ListenHandle h;
  h.addrs = {V4("10.0.0.1", 4000)};
  ASSERT_TRUE(EncodeHandle(h, buf).ok());
  char bad[kHandleBytes];
  std::memcpy(bad, buf, sizeof(buf));
  constexpr size_t kAddr0 = kConnectStateOffset + 8;  // the first address entry
  bad[kAddr0] = 9;  // unknown family
  ListenHandle d;
  EXPECT_NE(DecodeHandle(bad, &d).message().find("family"), std::string::npos);
  std::memcpy(bad, buf, sizeof(buf));
  bad[5] = 0;
  EXPECT_FALSE(DecodeHandle(bad, &d).ok());
  std::memcpy(bad, buf, sizeof(buf));
  bad[kAddr0 + 1] = bad[kAddr0 + 2] = 0;  // port 0
  EXPECT_NE(DecodeHandle(bad, &d).message().find("port"), std::string::npos);
  EXPECT_FALSE(DecodeHandle(nullptr, &d).ok());
}

TEST(ListenHandle, TooManyAddressesIsAnError) {
  ListenHandle h;
  for (int i = 0; i < 9; ++i) h.addrs.push_back(V4("10.0.0.1", 4000));
  char buf[kHandleBytes];
  EXPECT_FALSE(EncodeHandle(h, buf).ok());
}

TEST(ListenHandle, SecretIsSixteenBytesAndSurvivesTheRoundTrip) {
  ListenHandle h;
  for (size_t i = 0; i < kSecretBytes; ++i) h.secret[i] = static_cast<uint8_t>(0xa0 + i);
  h.addrs = {V4("10.0.0.1", 4000)};
  char buf[kHandleBytes];
  ASSERT_TRUE(EncodeHandle(h, buf).ok());
  ListenHandle d;
  ASSERT_TRUE(DecodeHandle(buf, &d).ok());
  EXPECT_EQ(d.secret, h.secret);
  // Every one of the 16 bytes counts: flipping the last one changes the secret read back.
  buf[8 + kSecretBytes - 1] ^= 1;
  ASSERT_TRUE(DecodeHandle(buf, &d).ok());
  EXPECT_NE(d.secret, h.secret);
}

TEST(ListenHandle, AVersionOneHandleIsRefusedByVersion) {
  ListenHandle h;
  h.addrs = {V4("10.0.0.1", 4000)};
  char buf[kHandleBytes];
  ASSERT_TRUE(EncodeHandle(h, buf).ok());
  buf[4] = 1;  // the 64-bit-secret layout of earlier releases
  ListenHandle d;
  const Status s = DecodeHandle(buf, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("version 1 unsupported"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ff
