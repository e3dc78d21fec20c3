/* Map keys and values shared by probe.bpf.c and the probe tool (C and C++, no kernel headers). */
#ifndef FF_BPF_PROBE_MAPS_H
#define FF_BPF_PROBE_MAPS_H

#define FF_PROBE_TASK_LEN 64 /* task ids are at most 63 bytes (sla/task_identity.h) */
#define FF_PROBE_PEER_LEN 48 /* "address:port" of IPv6 peers fits */
#define FF_PROBE_BUCKETS 40  /* bucket b: latency in [2^b, 2^(b+1)) ns; the last takes the rest */
#define FF_PROBE_MAX_FLOWS 16384
#define FF_PROBE_MAX_SOCKETS 16384

enum ff_probe_dir { FF_PROBE_SEND = 0, FF_PROBE_RECV = 1 };

/* One completed-message bucket: {task, collective, peer, path, direction}. */
struct ff_flow_key {
  char task[FF_PROBE_TASK_LEN];
  char peer[FF_PROBE_PEER_LEN];
  unsigned long long task_hash;
  int path; /* -1: striped over several paths */
  unsigned short collective;
  unsigned char dir;
  unsigned char pad;
};

struct ff_flow_stats {
  unsigned long long messages;
  unsigned long long bytes;
  unsigned long long latency_sum_ns;
  unsigned long long sla_violations; /* completed slower than the task's SLA */
  unsigned long long sla_us;         /* the SLA the plugin stamped (0: none) */
  unsigned long long hist[FF_PROBE_BUCKETS];
};

/* TCP retransmissions by socket 4-tuple; IPv4 addresses use the first 4 bytes. */
struct ff_sock_key {
  unsigned char saddr[16];
  unsigned char daddr[16];
  unsigned short sport; /* host order */
  unsigned short dport; /* host order */
  unsigned short family;
  unsigned short pad;
};

/* Index into the `events` array map: posts and control-plane events, for the per-interval header. */
enum ff_probe_event {
  FF_EV_SEND_POST = 0,
  FF_EV_RECV_POST,
  FF_EV_CONNECT,
  FF_EV_ACCEPT,
  FF_EV_PATH_CHOICE,
  FF_EV_FAILOVER,
  FF_EV_DRAIN,
  FF_EV_FAILBACK,
  FF_EV_PAUSE,
  FF_EV_RESUME,
  FF_EV_PATH_UP,
  FF_EV_COUNT
};

/* One control-plane event, as the `event_ring` ring buffer carries it. */
#define FF_EVENT_ARGS 3
struct ff_event {
  unsigned long long time_ns;   /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
  unsigned long long task_hash;
  long long args[FF_EVENT_ARGS]; /* the probe's arguments after task hash and peer, 0 where it has fewer */
  unsigned int pid;             /* thread group */
  unsigned int tid;
  unsigned int event;           /* enum ff_probe_event */
  unsigned int nargs;           /* how many of args the probe passed */
  char comm[16];
  char peer[FF_PROBE_PEER_LEN];
  char ends[2 * FF_PROBE_PEER_LEN + 16]; /* path_up: the path socket's ends, "[v6]:port->[v6]:port" fits */
};
#define FF_EVENT_RING_BYTES (256 * 1024)

#endif
