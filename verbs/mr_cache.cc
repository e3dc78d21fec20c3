// Registration cache (see mr_cache.h).
#include "verbs/mr_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/logging.h"
#include "verbs/verbs_owners.h"

namespace ff::verbs {
namespace {

std::string Range(uintptr_t start, uintptr_t end) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "[0x%zx, 0x%zx)", static_cast<size_t>(start), static_cast<size_t>(end));
  return buf;
}

}  // namespace

MrRegistrar VerbsRegistrar(const IbverbsLoader& ib, ibv_pd* pd, int access) {
  return MrRegistrar{[&ib, pd, access](uintptr_t start, size_t length, MrHandle* out) {
                       MrOwner mr;
                       Status s = RegMr(ib, pd, reinterpret_cast<void*>(start), length, access, &mr);
                       if (!s.ok()) return s;
                       out->lkey = mr->lkey;
                       out->rkey = mr->rkey;
                       out->opaque = mr.release();  // owned by the cache entry from here on
                       return Status::Ok();
                     },
                     [&ib](const MrHandle& h) {
                       MrOwner owner(static_cast<ibv_mr*>(h.opaque),
                                     {&ib.api()});  // released (dereg) at scope end
                     },
                     [&ib, pd, access](uintptr_t start, size_t length, int fd, uint64_t offset, MrHandle* out) {
                       const int device_access = access | IBV_ACCESS_REMOTE_READ;
                       MrOwner mr;
                       Status s = fd < 0 ? RegMr(ib, pd, reinterpret_cast<void*>(start), length, device_access, &mr)
                                         : RegDmabufMr(ib, pd, offset, length, start, fd, device_access, &mr);
                       if (!s.ok()) return s;
                       out->lkey = mr->lkey;
                       out->rkey = mr->rkey;
                       out->opaque = mr.release();
                       return Status::Ok();
                     }};
}

MrCache::MrCache(MrRegistrar registrar, size_t page_size)
    : registrar_(std::move(registrar)),
      page_size_(page_size != 0 ? page_size : static_cast<size_t>(sysconf(_SC_PAGESIZE))) {}

MrCache::~MrCache() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!entries_.empty()) {
    FF_INFO(NCCL_NET, "verbs: deregistering %zu memory regions still cached at teardown", entries_.size());
  }
  for (const Entry& e : entries_) registrar_.dereg(e.handle);
}

Status MrCache::Acquire(const void* addr, size_t length, MrRef* out) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t mask = page_size_ - 1;
  // Length 0 still names a byte address; register the page that holds it.
  const size_t len = std::max<size_t>(length, 1);
  if (a > UINTPTR_MAX - len - mask) {
    return InvalidArgument("memory registration of " + std::to_string(length) + " bytes at " + Range(a, a) +
                           " wraps the address space");
  }
  const uintptr_t start = a & ~mask;
  const uintptr_t end = (a + len + mask) & ~mask;
  std::lock_guard<std::mutex> lock(mu_);
  if (Share(a, a + len, out)) return Status::Ok();
  MrHandle h;
  Status s = registrar_.reg(start, end - start, &h);
  if (!s.ok()) return Status(s.code(), "registering " + Range(start, end) + ": " + s.message());
  entries_.push_back(Entry{next_id_++, start, end, h, 1, false});
  const Entry& e = entries_.back();
  *out = MrRef{e.id, e.start, static_cast<size_t>(e.end - e.start), e.handle};
  return Status::Ok();
}

bool MrCache::Share(uintptr_t start, uintptr_t end, MrRef* out) {
  for (Entry& e : entries_) {
    if (e.start <= start && end <= e.end) {
      ++e.refs;
      *out = MrRef{e.id, e.start, static_cast<size_t>(e.end - e.start), e.handle};
      return true;
    }
  }
  return false;
}

Status MrCache::AcquireDevice(const void* addr, size_t length, int fd, uint64_t offset, MrRef* out) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (addr == nullptr || length == 0)
    return InvalidArgument("GPU memory registration needs a non-NULL buffer and a length above 0 (got " +
                           std::to_string(length) + " bytes at " + Range(a, a) + ")");
  if (a > UINTPTR_MAX - length)
    return InvalidArgument("GPU memory registration of " + std::to_string(length) + " bytes wraps the address space");
  const uintptr_t end = a + length;
  std::lock_guard<std::mutex> lock(mu_);
  if (Share(a, end, out)) return Status::Ok();
  if (!registrar_.reg_device)
    return InvalidUsage("registering GPU memory " + Range(a, end) + ": this device has no GPU memory registration");
  MrHandle h;
  Status s = registrar_.reg_device(a, length, fd, offset, &h);
  if (!s.ok())
    return Status(s.code(), "registering GPU memory " + Range(a, end) +
                                (fd >= 0 ? " (DMA-BUF fd " + std::to_string(fd) + ", offset " + std::to_string(offset) + ")"
                                         : std::string(" (by address: needs nvidia-peermem)")) +
                                ": " + s.message());
  entries_.push_back(Entry{next_id_++, a, end, h, 1, true});
  const Entry& e = entries_.back();
  *out = MrRef{e.id, e.start, static_cast<size_t>(e.end - e.start), e.handle};
  return Status::Ok();
}

Status MrCache::Release(const MrRef& ref) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.id == ref.id; });
  if (it == entries_.end()) {
    return InvalidUsage("memory region " + std::to_string(ref.id) + " " +
                        Range(ref.start, ref.start + ref.length) +
                        " released but not held (released twice, or never acquired)");
  }
  if (--it->refs > 0) return Status::Ok();
  registrar_.dereg(it->handle);
  entries_.erase(it);
  return Status::Ok();
}

size_t MrCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace ff::verbs
