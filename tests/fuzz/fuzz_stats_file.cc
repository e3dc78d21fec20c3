// libFuzzer target: the statistics file reader (sla/stats_file_reader.cc). The input becomes a file
// with a valid header prefix (so slots and tasks are reached) unless its first byte asks for raw bytes.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "sla/stats_file_format.h"
#include "sla/task_stats.h"

namespace fmt = ff::sla::stats_format;

namespace {
// The scratch file each input is written to; removed when the fuzzer exits (one was left per run).
struct ScratchFile {
  std::string path = "/tmp/ff-fuzz-stats-" + std::to_string(getpid());
  ~ScratchFile() { ::unlink(path.c_str()); }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const ScratchFile scratch;
  const std::string& path = scratch.path;
  std::vector<uint8_t> file;
  if (data[0] & 1) {
    file.assign(data + 1, data + size);
  } else {
    const uint32_t slots = 1 + (size > 1 ? data[1] % 4 : 0);
    const uint32_t tasks = 1 + (size > 2 ? data[2] % 4 : 0);
    file.assign(fmt::FileSize(slots, tasks), 0);
    size_t n = size > 3 ? size - 3 : 0;
    std::memcpy(file.data(), data + 3, n < file.size() ? n : file.size());
    // Header fields the reader checks first; the rest (slots, tasks, names, states) is the fuzzer's.
    auto* h = reinterpret_cast<fmt::Header*>(file.data());
    std::memcpy(h->magic, fmt::kMagic, sizeof(fmt::kMagic));
    h->version = fmt::kVersion;
    h->header_size = sizeof(fmt::Header);
    h->slot_size = sizeof(fmt::Slot);
    h->task_size = sizeof(fmt::TaskEntry);
    if (!(data[0] & 2)) {
      h->slot_capacity = slots;
      h->task_capacity = tasks;
    }
    if (!(data[0] & 4)) h->pid = 1;
    h->ready.store(1);
  }
  {
    ff::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd.valid() || ::write(fd.get(), file.data(), file.size()) != static_cast<ssize_t>(file.size())) return 0;
  }
  std::string error;
  (void)ff::sla::ReadStatsFile(path, &error);
  return 0;
}
