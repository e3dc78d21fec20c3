// One sysfs attribute kept open and re-read with pread at offset 0, so periodic sampling costs
// one syscall per value and no allocation; missing files are "absent", malformed ones warn once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ff::pcie {

// Receives one human-readable warning (the file and the form it should have had).
using WarnFn = std::function<void(const std::string& message)>;

class SysfsAttribute {
 public:
  SysfsAttribute() = default;
  // Opens `path` read-only; a file that does not exist (or cannot be opened) leaves it absent.
  explicit SysfsAttribute(std::string path);
  ~SysfsAttribute();
  SysfsAttribute(SysfsAttribute&& other) noexcept;
  SysfsAttribute& operator=(SysfsAttribute&& other) noexcept;
  SysfsAttribute(const SysfsAttribute&) = delete;
  SysfsAttribute& operator=(const SysfsAttribute&) = delete;

  bool present() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  // Reads the current content into buf (NUL-terminated, trailing whitespace trimmed).
  // nullopt when absent or when the kernel refuses the read (e.g. `speed` of lo: EINVAL).
  std::optional<std::string_view> ReadText(char* buf, size_t cap) const;

  // Reads a decimal unsigned integer. A malformed content calls warn once for this file,
  // naming it and the expected form, and yields nullopt; so does an absent file, silently.
  std::optional<uint64_t> ReadU64(const WarnFn& warn);

  // Reports (once per attribute) that the content did not have the expected form.
  void ReportMalformed(const WarnFn& warn, std::string_view got, std::string_view expected);

 private:
  void ReopenIfReplaced() const;

  std::string path_;
  mutable int fd_ = -1;
  bool warned_ = false;
};

// Parses a decimal u64 with optional surrounding whitespace; nullopt on anything else.
std::optional<uint64_t> ParseU64(std::string_view text);

}  // namespace ff::pcie
