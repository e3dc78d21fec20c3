// Reading and acting on a device's asynchronous events (see async_events.h).
#include "verbs/async_events.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "base/logging.h"

namespace ff::verbs {

std::string AsyncEventName(int type) {
  switch (type) {
    case IBV_EVENT_CQ_ERR: return "IBV_EVENT_CQ_ERR";
    case IBV_EVENT_QP_FATAL: return "IBV_EVENT_QP_FATAL";
    case IBV_EVENT_QP_REQ_ERR: return "IBV_EVENT_QP_REQ_ERR";
    case IBV_EVENT_QP_ACCESS_ERR: return "IBV_EVENT_QP_ACCESS_ERR";
    case IBV_EVENT_COMM_EST: return "IBV_EVENT_COMM_EST";
    case IBV_EVENT_SQ_DRAINED: return "IBV_EVENT_SQ_DRAINED";
    case IBV_EVENT_PATH_MIG: return "IBV_EVENT_PATH_MIG";
    case IBV_EVENT_PATH_MIG_ERR: return "IBV_EVENT_PATH_MIG_ERR";
    case IBV_EVENT_DEVICE_FATAL: return "IBV_EVENT_DEVICE_FATAL";
    case IBV_EVENT_PORT_ACTIVE: return "IBV_EVENT_PORT_ACTIVE";
    case IBV_EVENT_PORT_ERR: return "IBV_EVENT_PORT_ERR";
    case IBV_EVENT_LID_CHANGE: return "IBV_EVENT_LID_CHANGE";
    case IBV_EVENT_PKEY_CHANGE: return "IBV_EVENT_PKEY_CHANGE";
    case IBV_EVENT_SM_CHANGE: return "IBV_EVENT_SM_CHANGE";
    case IBV_EVENT_SRQ_ERR: return "IBV_EVENT_SRQ_ERR";
    case IBV_EVENT_SRQ_LIMIT_REACHED: return "IBV_EVENT_SRQ_LIMIT_REACHED";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "IBV_EVENT_QP_LAST_WQE_REACHED";
    case IBV_EVENT_CLIENT_REREGISTER: return "IBV_EVENT_CLIENT_REREGISTER";
    case IBV_EVENT_GID_CHANGE: return "IBV_EVENT_GID_CHANGE";
    case IBV_EVENT_WQ_FATAL: return "IBV_EVENT_WQ_FATAL";
  }
  return "IBV_EVENT_" + std::to_string(type);
}

AsyncEvents::AsyncEvents(const IbverbsLoader& ib, ibv_context* context, std::string device)
    : api_(ib.api()), context_(context), device_(std::move(device)) {}

Status AsyncEvents::Init() {
  if (context_ == nullptr || api_.get_async_event == nullptr || api_.ack_async_event == nullptr)
    return InvalidArgument("async events of " + device_ + ": no context or no ibv_get_async_event");
  const int fd = context_->async_fd;
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return SystemError(ErrnoMessage("fcntl(O_NONBLOCK) on the async event fd " + std::to_string(fd) + " of " + device_,
                                    errno));
  enabled_ = true;
  return Status::Ok();
}

uint64_t AsyncEvents::PollIfDue(uint64_t now_ns) {
  if (!enabled_) return generation();
  if (now_ns - last_poll_ns_.load(std::memory_order_relaxed) < kPollIntervalNs) return generation();
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return generation();  // another path of this device is reading right now
  last_poll_ns_.store(now_ns, std::memory_order_relaxed);
  ReadLocked();
  return generation();
}

uint64_t AsyncEvents::PollNow() {
  if (!enabled_) return generation();
  std::lock_guard<std::mutex> lock(mu_);
  ReadLocked();
  return generation();
}

void AsyncEvents::ReadLocked() {
  for (;;) {
    ibv_async_event e{};
    if (api_.get_async_event(context_, &e) != 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && !read_error_logged_) {
        read_error_logged_ = true;
        FF_WARN("verbs: %s: ibv_get_async_event failed: %s; port and QP events of this device are not seen",
                device_.c_str(), std::strerror(errno));
      }
      return;
    }
    events_read_.fetch_add(1, std::memory_order_relaxed);
    Handle(e);
    // At once: ibv_destroy_qp / ibv_destroy_cq wait until every event about the object is acknowledged.
    api_.ack_async_event(&e);
  }
}

void AsyncEvents::Handle(const ibv_async_event& e) {
  // The kernel may report event types newer than this build's enum: read the raw value, since loading
  // an out-of-range value as the enum is undefined (UBSan: "not a valid value for type ibv_event_type").
  int type = 0;
  static_assert(sizeof(e.event_type) == sizeof(type), "ibv_event_type is an int-sized enum");
  std::memcpy(&type, &e.event_type, sizeof(type));
  const std::string name = AsyncEventName(type);
  const bool known = name != "IBV_EVENT_" + std::to_string(type);
  const char* text =
      api_.event_type_str != nullptr && known ? api_.event_type_str(static_cast<ibv_event_type>(type)) : "unknown";
  bool changed = false;
  switch (type) {
    case IBV_EVENT_PORT_ERR: {
      const uint8_t port = static_cast<uint8_t>(e.element.port_num);
      changed = ports_down_.emplace(port, "async event " + name + " on " + device_ + " port " +
                                              std::to_string(port)).second;
      FF_WARN("verbs: %s port %u: %s (%s): failing every path on the port", device_.c_str(), unsigned{port},
              name.c_str(), text);
      break;
    }
    case IBV_EVENT_PORT_ACTIVE: {
      const uint8_t port = static_cast<uint8_t>(e.element.port_num);
      changed = ports_down_.erase(port) > 0;
      FF_WARN("verbs: %s port %u: %s (%s): the port is eligible again; paths that failed on it return as new "
              "queue pairs through failback (FLEXIFORCE_FAILBACK_MS)",
              device_.c_str(), unsigned{port}, name.c_str(), text);
      break;
    }
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR: {
      const uint32_t qpn = e.element.qp != nullptr ? e.element.qp->qp_num : 0;
      const int err = type == IBV_EVENT_QP_ACCESS_ERR ? EACCES
                      : type == IBV_EVENT_QP_REQ_ERR  ? EPROTO
                                                              : EIO;
      changed = qps_failed_.emplace(qpn, std::make_pair(err, "async event " + name + " on " + device_ + " QP " +
                                                                 std::to_string(qpn))).second;
      FF_WARN("verbs: %s QP %u: %s (%s): failing its path", device_.c_str(), qpn, name.c_str(), text);
      break;
    }
    case IBV_EVENT_CQ_ERR:
    case IBV_EVENT_DEVICE_FATAL:
      if (device_err_ == 0) {
        device_err_ = type == IBV_EVENT_DEVICE_FATAL ? ENODEV : EIO;
        device_why_ = "async event " + name + " on " + device_;
        changed = true;
      }
      FF_WARN("verbs: %s: %s (%s): failing every path on the device", device_.c_str(), name.c_str(), text);
      break;
    case IBV_EVENT_GID_CHANGE:
      FF_WARN("verbs: %s port %u: %s (%s): the GID table changed; connected QPs keep the GID they use",
              device_.c_str(), static_cast<unsigned>(e.element.port_num), name.c_str(), text);
      break;
    default:
      FF_INFO(NCCL_NET, "verbs: %s: %s (%s), nothing to do", device_.c_str(), name.c_str(), text);
      break;
  }
  if (changed) generation_.fetch_add(1, std::memory_order_acq_rel);
}

AsyncEvents::Verdict AsyncEvents::ForPath(uint8_t port, uint32_t qpn) const {
  std::lock_guard<std::mutex> lock(mu_);
  Verdict v;
  if (device_err_ != 0) {
    v.err = device_err_;
    v.why = device_why_;
  } else if (auto q = qps_failed_.find(qpn); q != qps_failed_.end()) {
    v.err = q->second.first;
    v.why = q->second.second;
  } else if (auto p = ports_down_.find(port); p != ports_down_.end()) {
    v.err = ENETDOWN;
    v.why = p->second;
  }
  return v;
}

bool AsyncEvents::PortDown(uint8_t port) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ports_down_.count(port) > 0;
}

void AsyncEvents::ForgetQp(uint32_t qpn) {
  std::lock_guard<std::mutex> lock(mu_);
  qps_failed_.erase(qpn);
}

}  // namespace ff::verbs
