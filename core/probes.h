// USDT probe points of the plugin (provider "flexiforce"); `flexiforce probe` attaches BPF to them.
#pragma once

// Each probe has a semaphore that the kernel raises while a tracer is attached (uprobe reference
// counting). FF_PROBE tests it first, so an unattached probe costs one load and a branch that is
// predicted not taken, and its arguments are not even computed. Without <sys/sdt.h> (CMake says so),
// or configured with -DFF_USDT=OFF, every probe compiles to nothing.
//
// Arguments, all integers or pointers:
//   send_post/send_done/recv_post/recv_done: task hash, collective, bytes, peer (const char*), path
//     index (-1: striped over several), SLA us, latency ns (0 for *_post), task id (const char*).
//   msgs_done: task hash, peer (const char*), task id (const char*), SLA us, records (const
//     ff_probe_record*, core/probe_record.h), count (1..FF_PROBE_BATCH_MAX): the completed messages of
//     one communicator, in batches (core/probe_batch.h); what `flexiforce probe` attaches to.
//   connect/accept: task hash, peer, paths, SLA us, traffic-class byte (-1 left to the OS).
//   path_choice: task hash, peer, path index, plan path id, SLA attainable (0/1).
//   failover: task hash, peer, paths alive, re-sent bytes, paused ns.
//   drain / failback: task hash, peer, path index.
//   pause / resume: task hash, peer.
//   path_up: task hash, peer, path index, the path socket's ends (const char*): "local:port->remote:port"
//     on the connecting side, the remote "address:port" on the accepting side (whose local end is the
//     listening address); once per path when a connection is made, and again on both sides when failback
//     brings a path back on a new socket, so a tool can name a socket's path.

#if defined(FF_HAVE_SDT)

// Registers only: libbpf decodes register and constant USDT operands on every version we meet,
// while memory operands with an index register are not decoded by older ones.
#define STAP_SDT_ARG_CONSTRAINT nr
#define _SDT_HAS_SEMAPHORES 1
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>
#if defined(__x86_64__)
// The probe site is a 5-byte nop (0f 1f 44 00 00) instead of sys/sdt.h's 1-byte one. Kernels with
// optimized uprobes (x86-64, arch_uprobe_optimize) turn an attached nop5 into a call to a
// trampoline that enters the kernel by a system call instead of the int3 trap: an attached site
// costs 1.9 us of CPU instead of 6.5 us here (ff-probe-microbench, same run). Older kernels trap
// on it as on any nop. Bytes, not the mnemonic: its operand's commas cannot pass through
// sys/sdt.h's macros.
#undef _SDT_NOP
#define _SDT_NOP .byte 0x0f; .byte 0x1f; .byte 0x44; .byte 0x00; .byte 0x00
#endif

#define FF_PROBE_SEMAPHORE(name) flexiforce_##name##_semaphore
#define FF_PROBE_DECLARE(name) extern "C" volatile unsigned short FF_PROBE_SEMAPHORE(name)

FF_PROBE_DECLARE(send_post);
FF_PROBE_DECLARE(send_done);
FF_PROBE_DECLARE(recv_post);
FF_PROBE_DECLARE(recv_done);
FF_PROBE_DECLARE(connect);
FF_PROBE_DECLARE(accept);
FF_PROBE_DECLARE(path_choice);
FF_PROBE_DECLARE(failover);
FF_PROBE_DECLARE(drain);
FF_PROBE_DECLARE(failback);
FF_PROBE_DECLARE(pause);
FF_PROBE_DECLARE(resume);
FF_PROBE_DECLARE(path_up);
FF_PROBE_DECLARE(msgs_done);

// True while some tracer is attached to probe `name`.
#define FF_PROBE_ENABLED(name) __builtin_expect(FF_PROBE_SEMAPHORE(name) != 0, 0)
#define FF_PROBE(name, ...)                                          \
  do {                                                               \
    if (FF_PROBE_ENABLED(name)) STAP_PROBEV(flexiforce, name, __VA_ARGS__); \
  } while (0)

#else

// Compiled out: the arguments are still parsed (both builds see the same expressions, and variables
// computed only for a probe are not "unused"), never evaluated, and no code is left.
namespace ff::probe_detail {
template <typename... Args>
inline void Discard(const Args&...) {}
}  // namespace ff::probe_detail
#define FF_PROBE_ENABLED(name) false
#define FF_PROBE(name, ...)                                   \
  do {                                                        \
    if (false) ::ff::probe_detail::Discard(__VA_ARGS__); \
  } while (0)

#endif
