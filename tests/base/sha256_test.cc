// SHA-256 against the FIPS 180-4 example messages and HMAC-SHA256 against RFC 4231's test cases.
#include "base/sha256.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ff {
namespace {

std::string Hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}
std::string Hex(const Sha256Digest& d) { return Hex(d.data(), d.size()); }
std::string Sha(const std::string& m) { return Hex(Sha256Of(m.data(), m.size())); }
std::string Hmac(const std::vector<uint8_t>& key, const std::string& m) {
  return Hex(HmacSha256Of(key.data(), key.size(), m.data(), m.size()));
}

TEST(Sha256Test, MatchesTheFips180ExampleMessages) {
  EXPECT_EQ(Sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrst"
                "nopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(Sha(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, SplitUpdatesGiveTheSameDigestAsOneUpdate) {
  const std::string m(1000, 'x');
  for (size_t cut : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 999u}) {
    Sha256 s;
    s.Update(m.data(), cut);
    s.Update(m.data() + cut, m.size() - cut);
    EXPECT_EQ(Hex(s.Finish()), Sha(m)) << "cut at " << cut;
  }
}

TEST(HmacSha256Test, MatchesRfc4231TestCases) {
  EXPECT_EQ(Hmac(std::vector<uint8_t>(20, 0x0b), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(Hmac({'J', 'e', 'f', 'e'}, "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(Hmac(std::vector<uint8_t>(20, 0xaa), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::vector<uint8_t> k4;
  for (uint8_t i = 1; i <= 25; ++i) k4.push_back(i);
  EXPECT_EQ(Hmac(k4, std::string(50, '\xcd')), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Test case 5 is specified truncated to 128 bits.
  EXPECT_EQ(Hmac(std::vector<uint8_t>(20, 0x0c), "Test With Truncation").substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
  const std::vector<uint8_t> long_key(131, 0xaa);
  EXPECT_EQ(Hmac(long_key, "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(Hmac(long_key,
                 "This is a test using a larger than block-size key and a larger than block-size data. The key needs "
                 "to be hashed before being used by the HMAC algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(HmacSha256Test, ConstantTimeEqualTellsEqualFromDifferent) {
  const uint8_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4}, c[4] = {1, 2, 3, 5};
  EXPECT_TRUE(ConstantTimeEqual(a, b, 4));
  EXPECT_FALSE(ConstantTimeEqual(a, c, 4));
}

}  // namespace
}  // namespace ff
