// Storage of the USDT probe semaphores: the tracer's kernel raises them while it is attached.
#include "core/probes.h"

#if defined(FF_HAVE_SDT)
// The section name is what tracers (and readelf) expect semaphores in; the note carries the address.
// (The braces make these definitions: a bare `extern "C"` before an initialised variable would be an extern.)
#define FF_PROBE_DEFINE(name)                                                                                  \
  extern "C" {                                                                                                 \
  __attribute__((section(".probes"), visibility("hidden"))) volatile unsigned short FF_PROBE_SEMAPHORE(name) = 0; \
  }

FF_PROBE_DEFINE(send_post)
FF_PROBE_DEFINE(send_done)
FF_PROBE_DEFINE(recv_post)
FF_PROBE_DEFINE(recv_done)
FF_PROBE_DEFINE(connect)
FF_PROBE_DEFINE(accept)
FF_PROBE_DEFINE(path_choice)
FF_PROBE_DEFINE(failover)
FF_PROBE_DEFINE(drain)
FF_PROBE_DEFINE(failback)
FF_PROBE_DEFINE(pause)
FF_PROBE_DEFINE(resume)
FF_PROBE_DEFINE(path_up)
FF_PROBE_DEFINE(msgs_done)
#endif
