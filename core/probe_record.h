/* One completed message as the plugin hands it to the msgs_done USDT probe (core/probe_batch.h),
   in batches: C layout, read by the BPF program (bpf/probe.bpf.c) with one copy per batch. */
#ifndef FF_CORE_PROBE_RECORD_H
#define FF_CORE_PROBE_RECORD_H

#define FF_PROBE_BATCH_MAX 32 /* records per msgs_done firing */
#define FF_PROBE_SEND_DIR 0
#define FF_PROBE_RECV_DIR 1

struct ff_probe_record {
  unsigned long long latency_ns; /* post to completion */
  unsigned long long bytes;
  int path;                  /* path index; -1: striped over several */
  unsigned short collective; /* sla::Collective */
  unsigned char dir;         /* FF_PROBE_SEND_DIR or FF_PROBE_RECV_DIR */
  unsigned char reserved;
};

#endif
