// BPF side of `flexiforce probe`: counts the plugin's messages from its USDT probes and TCP retransmits.
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "core/probe_record.h"
#include "probe_maps.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, FF_PROBE_MAX_FLOWS);
  __type(key, struct ff_flow_key);
  __type(value, struct ff_flow_stats);
} flows SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, FF_PROBE_MAX_SOCKETS);
  __type(key, struct ff_sock_key);
  __type(value, __u64);
} retransmits SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, FF_EV_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} events SEC(".maps");

// Control-plane events, one record each, for the report's timeline (the counters above stay).
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, FF_EVENT_RING_BYTES);
} event_ring SEC(".maps");

// Events the ring had no room for (index 0).
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} ring_drops SEC(".maps");

// Keys are too large for the 512-byte stack together with the rest; one scratch slot per CPU.
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct ff_flow_key);
} scratch SEC(".maps");

static const struct ff_flow_stats zero_stats;

static __always_inline void count_event(__u32 ev) {
  __u64* n = bpf_map_lookup_elem(&events, &ev);
  if (n) __sync_fetch_and_add(n, 1);
}

static __always_inline __u32 log2_bucket(__u64 v) {
  __u32 b = 0;
  // Unrolled binary search: the verifier sees a bounded, loop-free computation.
  if (v >> 32) { v >>= 32; b += 32; }
  if (v >> 16) { v >>= 16; b += 16; }
  if (v >> 8) { v >>= 8; b += 8; }
  if (v >> 4) { v >>= 4; b += 4; }
  if (v >> 2) { v >>= 2; b += 2; }
  if (v >> 1) { b += 1; }
  return b < FF_PROBE_BUCKETS ? b : FF_PROBE_BUCKETS - 1;
}

// Adds one message to its flow; `key` names the flow (task, peer, path, collective, direction).
static __always_inline void count_message(struct ff_flow_key* key, __u64 bytes, __u64 sla_us, __u64 latency_ns) {
  struct ff_flow_stats* s = bpf_map_lookup_elem(&flows, key);
  if (!s) {
    bpf_map_update_elem(&flows, key, &zero_stats, BPF_NOEXIST);
    s = bpf_map_lookup_elem(&flows, key);
    if (!s) return;  // the table is full
  }
  __sync_fetch_and_add(&s->messages, 1);
  __sync_fetch_and_add(&s->bytes, bytes);
  __sync_fetch_and_add(&s->latency_sum_ns, latency_ns);
  s->sla_us = sla_us;
  if (sla_us != 0 && latency_ns > sla_us * 1000) __sync_fetch_and_add(&s->sla_violations, 1);
  __u32 b = log2_bucket(latency_ns);
  if (b < FF_PROBE_BUCKETS) __sync_fetch_and_add(&s->hist[b], 1);
}

// The key's task and peer, read from the plugin's strings.
static __always_inline struct ff_flow_key* flow_key(__u64 task_hash, const void* task, const void* peer) {
  __u32 zero = 0;
  struct ff_flow_key* key = bpf_map_lookup_elem(&scratch, &zero);
  if (!key) return 0;
  __builtin_memset(key, 0, sizeof(*key));
  bpf_probe_read_user_str(key->task, sizeof(key->task), task);
  bpf_probe_read_user_str(key->peer, sizeof(key->peer), peer);
  key->task_hash = task_hash;
  return key;
}

static __always_inline int record_done(__u8 dir, __u64 task_hash, __u64 collective, __u64 bytes, const void* peer,
                                       long path, __u64 sla_us, __u64 latency_ns, const void* task) {
  struct ff_flow_key* key = flow_key(task_hash, task, peer);
  if (!key) return 0;
  key->path = (int)path;
  key->collective = (unsigned short)collective;
  key->dir = dir;
  count_message(key, bytes, sla_us, latency_ns);
  return 0;
}

// The plugin's batches of completed messages (core/probe_batch.h): one copy of up to
// FF_PROBE_BATCH_MAX records per hit, per CPU.
_Static_assert((FF_PROBE_BATCH_MAX & (FF_PROBE_BATCH_MAX - 1)) == 0, "a power of two: count_record masks with it");
struct batch_buf {
  struct ff_probe_record rec[FF_PROBE_BATCH_MAX];
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct batch_buf);
} batch_scratch SEC(".maps");

struct batch_ctx {
  __u64 sla_us;
};

// One record of the batch in batch_scratch, into its flow (the key in scratch already names the task
// and peer). A bpf_loop callback: the verifier checks it once, not once per record.
static long count_record(__u32 i, void* data) {
  struct batch_ctx* ctx = data;
  __u32 zero = 0;
  struct batch_buf* buf = bpf_map_lookup_elem(&batch_scratch, &zero);
  struct ff_flow_key* key = bpf_map_lookup_elem(&scratch, &zero);
  if (!buf || !key) return 1;
  // bpf_loop runs at most FF_PROBE_BATCH_MAX times; the mask (a power of two) is the bound the
  // verifier sees, and barrier_var keeps the compiler from dropping it.
  barrier_var(i);
  i &= FF_PROBE_BATCH_MAX - 1;
  struct ff_probe_record* r = &buf->rec[i];
  key->path = r->path;
  key->collective = r->collective;
  key->dir = r->dir;
  count_message(key, r->bytes, ctx->sla_us, r->latency_ns);
  return 0;
}

// What `flexiforce probe` attaches to: the task and peer strings are read once per batch, and each
// record only sets the key's path, collective and direction.
SEC("usdt")
int BPF_USDT(msgs_done, __u64 task_hash, void* peer, void* task, __u64 sla_us, void* records, __u64 count) {
  if (count == 0 || !records) return 0;
  if (count > FF_PROBE_BATCH_MAX) count = FF_PROBE_BATCH_MAX;
  __u32 zero = 0;
  struct batch_buf* buf = bpf_map_lookup_elem(&batch_scratch, &zero);
  if (!buf) return 0;
  if (bpf_probe_read_user(buf->rec, count * sizeof(struct ff_probe_record), records) != 0) return 0;
  if (!flow_key(task_hash, task, peer)) return 0;
  struct batch_ctx loop = {.sla_us = sla_us};
  bpf_loop(count, count_record, &loop, 0);
  return 0;
}

// Per-message probes: attached only to plugin builds without msgs_done.
SEC("usdt")
int BPF_USDT(send_done, __u64 task_hash, __u64 collective, __u64 bytes, void* peer, long path, __u64 sla_us,
             __u64 latency_ns, void* task) {
  return record_done(FF_PROBE_SEND, task_hash, collective, bytes, peer, path, sla_us, latency_ns, task);
}

SEC("usdt")
int BPF_USDT(recv_done, __u64 task_hash, __u64 collective, __u64 bytes, void* peer, long path, __u64 sla_us,
             __u64 latency_ns, void* task) {
  return record_done(FF_PROBE_RECV, task_hash, collective, bytes, peer, path, sla_us, latency_ns, task);
}

// Posts are only counted: the table shows them per interval.
#define FF_COUNTING_PROBE(name, ev) \
  SEC("usdt") int name(struct pt_regs* ctx) { count_event(ev); return 0; }

FF_COUNTING_PROBE(send_post, FF_EV_SEND_POST)
FF_COUNTING_PROBE(recv_post, FF_EV_RECV_POST)

// Control-plane probes (task hash, peer, then up to three integers): counted, and one record each
// into the ring buffer.
static __always_inline int emit_event(struct pt_regs* ctx, __u32 ev, int string_arg3) {
  count_event(ev);
  struct ff_event* e = bpf_ringbuf_reserve(&event_ring, sizeof(*e), 0);
  if (!e) {
    __u32 zero = 0;
    __u64* n = bpf_map_lookup_elem(&ring_drops, &zero);
    if (n) __sync_fetch_and_add(n, 1);
    return 0;
  }
  __builtin_memset(e, 0, sizeof(*e));
  e->time_ns = bpf_ktime_get_ns();
  __u64 id = bpf_get_current_pid_tgid();
  e->pid = id >> 32;
  e->tid = (__u32)id;
  e->event = ev;
  bpf_get_current_comm(e->comm, sizeof(e->comm));
  long v = 0;
  if (bpf_usdt_arg(ctx, 0, &v) == 0) e->task_hash = (__u64)v;
  v = 0;
  if (bpf_usdt_arg(ctx, 1, &v) == 0 && v) bpf_probe_read_user_str(e->peer, sizeof(e->peer), (const void*)v);
  int n = bpf_usdt_arg_cnt(ctx);
  e->nargs = n > 2 ? (__u32)(n - 2) : 0;
  if (e->nargs > FF_EVENT_ARGS) e->nargs = FF_EVENT_ARGS;
  v = 0;
  if (n > 2 && bpf_usdt_arg(ctx, 2, &v) == 0) e->args[0] = v;
  v = 0;
  if (n > 3 && bpf_usdt_arg(ctx, 3, &v) == 0) {
    if (string_arg3) {
      if (v) bpf_probe_read_user_str(e->ends, sizeof(e->ends), (const void*)v);
    } else {
      e->args[1] = v;
    }
  }
  v = 0;
  if (n > 4 && bpf_usdt_arg(ctx, 4, &v) == 0) e->args[2] = v;
  bpf_ringbuf_submit(e, 0);
  return 0;
}

#define FF_EVENT_PROBE(name, ev) \
  SEC("usdt") int name(struct pt_regs* ctx) { return emit_event(ctx, ev, 0); }

FF_EVENT_PROBE(on_connect, FF_EV_CONNECT)
FF_EVENT_PROBE(on_accept, FF_EV_ACCEPT)
FF_EVENT_PROBE(path_choice, FF_EV_PATH_CHOICE)
FF_EVENT_PROBE(failover, FF_EV_FAILOVER)
FF_EVENT_PROBE(drain, FF_EV_DRAIN)
FF_EVENT_PROBE(failback, FF_EV_FAILBACK)
FF_EVENT_PROBE(on_pause, FF_EV_PAUSE)
FF_EVENT_PROBE(on_resume, FF_EV_RESUME)

SEC("usdt") int path_up(struct pt_regs* ctx) { return emit_event(ctx, FF_EV_PATH_UP, 1); }

// BTF-typed tracepoint: needs no tracefs mount, and reads the socket with CO-RE.
SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tcp_retransmit, const struct sock* sk) {
  struct ff_sock_key key;
  __builtin_memset(&key, 0, sizeof(key));
  key.family = BPF_CORE_READ(sk, __sk_common.skc_family);
  key.sport = BPF_CORE_READ(sk, __sk_common.skc_num);
  key.dport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
  if (key.family == 2 /* AF_INET */) {
    __u32 s = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
    __u32 d = BPF_CORE_READ(sk, __sk_common.skc_daddr);
    __builtin_memcpy(key.saddr, &s, 4);
    __builtin_memcpy(key.daddr, &d, 4);
  } else {
    BPF_CORE_READ_INTO(&key.saddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
    BPF_CORE_READ_INTO(&key.daddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
  }
  __u64 one = 1;
  __u64* n = bpf_map_lookup_elem(&retransmits, &key);
  if (n)
    __sync_fetch_and_add(n, 1);
  else
    bpf_map_update_elem(&retransmits, &key, &one, BPF_NOEXIST);
  return 0;
}
