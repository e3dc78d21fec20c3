// NCCL_IB_HCA: which RDMA devices and ports the verbs backend may use, in NCCL's own syntax.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ff::verbs {

// "mlx5"               every port of every device whose name starts with mlx5
// "=mlx5_0:1,mlx5_1:1" port 1 of exactly mlx5_0 and mlx5_1 ('=' makes the whole list exact)
// "^=mlx5_1,mlx5_4"    everything but exactly mlx5_1 and mlx5_4 ('^' makes the whole list an exclusion)
// '^' then '=' come once, at the start of the list, as in NCCL; whitespace around entries is ignored.
class HcaFilter {
 public:
  struct Entry {
    std::string device;
    int port = -1;  // -1: every port
  };

  static constexpr const char* kAcceptedForm =
      "[^][=]DEVICE[:PORT][,DEVICE[:PORT]...], e.g. mlx5_0:1,mlx5_1 or ^=mlx5_2 (PORT a number >= 1)";

  // An empty filter: every device and port is allowed (NCCL_IB_HCA unset or blank).
  HcaFilter() = default;

  // Parses `spec`; on error `out` is untouched and the message names NCCL_IB_HCA, the offending
  // entry and kAcceptedForm.
  static Status Parse(std::string_view spec, HcaFilter* out);

  bool Matches(std::string_view device, int port) const;
  // True when some port of `device` could match (device-level pre-filter before opening it).
  bool MayMatchDevice(std::string_view device) const;

  bool empty() const { return entries_.empty(); }
  bool exclude() const { return exclude_; }
  bool exact() const { return exact_; }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  bool NameMatches(const Entry& e, std::string_view device) const;

  bool exclude_ = false;
  bool exact_ = false;
  std::vector<Entry> entries_;
};

}  // namespace ff::verbs
