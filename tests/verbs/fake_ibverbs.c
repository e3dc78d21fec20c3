/* A stand-in libibverbs for unit tests: the exported calls the loader resolves, backed by a device
 * table the test sets, a call log, and one-shot failure injection. No kernel, no device.
 * Contexts carry a data-path ops table (posts succeed, CQs stay empty) and a real async event fd
 * (an eventfd, blocking as the real library leaves it); tests inject async events, count their
 * acknowledgements, and read back the attributes of the last ibv_modify_qp per target state. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* verbs.h turns these into inline wrappers; the fake defines the exported symbols themselves. */
#undef ibv_query_port
#undef ibv_reg_mr

#define FAKE_MAX_DEVICES 8
#define FAKE_MAX_PORTS 4

struct fake_device {
  struct ibv_device dev;
  int num_ports;
  char ports[FAKE_MAX_PORTS]; /* 'A' active Ethernet, 'D' down Ethernet, 'I' active InfiniBand */
};

static struct fake_device g_devices[FAKE_MAX_DEVICES];
static int g_num_devices;
static char g_log[8192];
static char g_fail_call[64];
static int g_fail_errno;

#define FAKE_MAX_EVENTS 16
#define FAKE_MAX_QPS 64
struct fake_event {
  char device[IBV_SYSFS_NAME_MAX];
  int type;
  int arg; /* the port for port events, the QP number for QP events */
};
static struct fake_event g_events[FAKE_MAX_EVENTS];
static int g_num_events;
static int g_event_acks;
static int g_event_would_block; /* reads of an empty, blocking async fd: the real library would hang */
static struct ibv_qp* g_qps[FAKE_MAX_QPS];
static struct {
  int seen;
  int mask;
  struct ibv_qp_attr attr;
} g_last_modify[IBV_QPS_ERR + 1];
static int g_posted_send_wrs;
static struct ibv_send_wr g_last_send_wr;
static struct ibv_sge g_last_send_sge;
static int g_last_reg_access = -1;
/* Completions for signaled send work requests, when a test turned them on (g_complete_status >= 0). */
#define FAKE_MAX_WCS 64
static int g_complete_status = -1;
static struct {
  struct ibv_cq* cq;
  struct ibv_wc wc;
} g_wcs[FAKE_MAX_WCS];
static int g_num_wcs;
/* ibv_reg_dmabuf_mr (FAKE_IBV_WITH_DMABUF): the errno of the fd -1 probe, and the last registration. */
static int g_dmabuf_probe_errno = EBADF;
static struct {
  int seen;
  uint64_t offset;
  size_t length;
  uint64_t iova;
  int fd;
  int access;
} g_last_dmabuf;

static void log_call(const char* call, const char* object) {
  size_t used = strlen(g_log);
  snprintf(g_log + used, sizeof(g_log) - used, "%s %s\n", call, object);
}

/* Returns nonzero (and sets errno) when the test asked this call to fail once. */
static int should_fail(const char* call) {
  if (g_fail_call[0] == '\0' || strcmp(g_fail_call, call) != 0) return 0;
  g_fail_call[0] = '\0';
  errno = g_fail_errno;
  return 1;
}

static const char* ctx_name(struct ibv_context* c) { return c && c->device ? c->device->name : "?"; }

/* --- test controls --------------------------------------------------------------------------- */

/* "mlx5_0=AD,rxe0=A": device names and their ports' kinds (see struct fake_device). */
void fake_ibv_set_devices(const char* spec) {
  memset(g_devices, 0, sizeof(g_devices));
  g_num_devices = 0;
  char buf[512];
  snprintf(buf, sizeof(buf), "%s", spec);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && g_num_devices < FAKE_MAX_DEVICES;
       tok = strtok_r(NULL, ",", &save)) {
    struct fake_device* d = &g_devices[g_num_devices++];
    char* eq = strchr(tok, '=');
    const char* ports = eq ? eq + 1 : "A";
    if (eq) *eq = '\0';
    snprintf(d->dev.name, sizeof(d->dev.name), "%s", tok);
    d->dev.node_type = IBV_NODE_CA;
    d->dev.transport_type = IBV_TRANSPORT_IB;
    d->num_ports = (int)strlen(ports) < FAKE_MAX_PORTS ? (int)strlen(ports) : FAKE_MAX_PORTS;
    memcpy(d->ports, ports, (size_t)d->num_ports);
  }
}
const char* fake_ibv_log(void) { return g_log; }
void fake_ibv_reset(void) {
  g_log[0] = '\0';
  g_fail_call[0] = '\0';
}
void fake_ibv_fail_next(const char* call, int err) {
  snprintf(g_fail_call, sizeof(g_fail_call), "%s", call);
  g_fail_errno = err;
}
/* Queues an async event for the next ibv_get_async_event on a context of `device`. */
void fake_ibv_inject_async_event(const char* device, int type, int arg) {
  if (g_num_events >= FAKE_MAX_EVENTS) return;
  struct fake_event* e = &g_events[g_num_events++];
  snprintf(e->device, sizeof(e->device), "%s", device);
  e->type = type;
  e->arg = arg;
}
int fake_ibv_pending_async_events(void) { return g_num_events; }
int fake_ibv_async_acks(void) { return g_event_acks; }
int fake_ibv_async_would_block(void) { return g_event_would_block; }
int fake_ibv_posted_send_wrs(void) { return g_posted_send_wrs; }
void fake_ibv_last_send_wr(struct ibv_send_wr* wr, struct ibv_sge* sge) {
  *wr = g_last_send_wr;
  *sge = g_last_send_sge;
}
int fake_ibv_last_reg_access(void) { return g_last_reg_access; }
void fake_ibv_complete_sends(int status) { g_complete_status = status; }
void fake_ibv_set_dmabuf_probe_errno(int err) { g_dmabuf_probe_errno = err; }
int fake_ibv_last_dmabuf(uint64_t* offset, size_t* length, uint64_t* iova, int* fd, int* access) {
  *offset = g_last_dmabuf.offset;
  *length = g_last_dmabuf.length;
  *iova = g_last_dmabuf.iova;
  *fd = g_last_dmabuf.fd;
  *access = g_last_dmabuf.access;
  return g_last_dmabuf.seen;
}
/* The attributes and mask of the last ibv_modify_qp to `state`; 0 when there was none. */
int fake_ibv_last_modify(int state, struct ibv_qp_attr* attr, int* mask) {
  if (state < 0 || state > IBV_QPS_ERR || !g_last_modify[state].seen) return 0;
  *attr = g_last_modify[state].attr;
  *mask = g_last_modify[state].mask;
  return 1;
}
void fake_ibv_reset_events(void) {
  g_num_events = 0;
  g_event_acks = 0;
  g_event_would_block = 0;
  g_posted_send_wrs = 0;
  memset(g_last_modify, 0, sizeof(g_last_modify));
  memset(&g_last_send_wr, 0, sizeof(g_last_send_wr));
  memset(&g_last_send_sge, 0, sizeof(g_last_send_sge));
  g_last_reg_access = -1;
  g_complete_status = -1;
  g_num_wcs = 0;
  g_dmabuf_probe_errno = EBADF;
  memset(&g_last_dmabuf, 0, sizeof(g_last_dmabuf));
}

/* --- the context's data-path ops (verbs.h calls them inline) ------------------------------------- */

static int fake_poll_cq(struct ibv_cq* cq, int n, struct ibv_wc* wc) {
  int got = 0;
  for (int i = 0; i < g_num_wcs && got < n;) {
    if (g_wcs[i].cq != cq) {
      i++;
      continue;
    }
    wc[got++] = g_wcs[i].wc;
    memmove(&g_wcs[i], &g_wcs[i + 1], sizeof(g_wcs[0]) * (size_t)(g_num_wcs - i - 1));
    g_num_wcs--;
  }
  return got;
}
static int fake_post_send(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad) {
  (void)bad;
  if (qp->state != IBV_QPS_RTS) return EINVAL;
  for (; wr; wr = wr->next) {
    g_posted_send_wrs++;
    g_last_send_wr = *wr;
    g_last_send_wr.next = NULL;
    g_last_send_wr.sg_list = NULL;
    if (wr->num_sge > 0) g_last_send_sge = wr->sg_list[0];
    if (g_complete_status >= 0 && (wr->send_flags & IBV_SEND_SIGNALED) && g_num_wcs < FAKE_MAX_WCS) {
      memset(&g_wcs[g_num_wcs], 0, sizeof(g_wcs[0]));
      g_wcs[g_num_wcs].cq = qp->send_cq;
      g_wcs[g_num_wcs].wc.wr_id = wr->wr_id;
      g_wcs[g_num_wcs].wc.status = (enum ibv_wc_status)g_complete_status;
      g_wcs[g_num_wcs].wc.opcode = wr->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_SEND;
      g_wcs[g_num_wcs].wc.qp_num = qp->qp_num;
      g_num_wcs++;
    }
  }
  return 0;
}
static int fake_post_recv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad) {
  (void)qp;
  (void)wr;
  (void)bad;
  return 0;
}

/* --- the exported verbs calls ---------------------------------------------------------------- */

struct ibv_device** ibv_get_device_list(int* num) {
  if (should_fail("ibv_get_device_list")) return NULL;
  struct ibv_device** list = calloc((size_t)g_num_devices + 1, sizeof(*list));
  for (int i = 0; i < g_num_devices; i++) list[i] = &g_devices[i].dev;
  if (num) *num = g_num_devices;
  log_call("get_device_list", "");
  return list;
}
void ibv_free_device_list(struct ibv_device** list) {
  log_call("free_device_list", "");
  free(list);
}
const char* ibv_get_device_name(struct ibv_device* d) { return d->name; }
__be64 ibv_get_device_guid(struct ibv_device* d) {
  return htobe64(0x0002c90300a0b000ULL + (uint64_t)((struct fake_device*)d - g_devices));
}
struct ibv_context* ibv_open_device(struct ibv_device* d) {
  if (should_fail("ibv_open_device")) return NULL;
  /* abi_compat stays NULL: not an extended context, so queries take the compat symbols. */
  struct ibv_context* c = calloc(1, sizeof(*c));
  c->device = d;
  c->async_fd = eventfd(0, 0);
  c->cmd_fd = -1;
  c->ops.poll_cq = fake_poll_cq;
  c->ops.post_send = fake_post_send;
  c->ops.post_recv = fake_post_recv;
  log_call("open_device", d->name);
  return c;
}
int ibv_close_device(struct ibv_context* c) {
  log_call("close_device", ctx_name(c));
  if (c->async_fd >= 0) close(c->async_fd);
  free(c);
  return 0;
}
int ibv_query_device(struct ibv_context* c, struct ibv_device_attr* a) {
  memset(a, 0, sizeof(*a));
  a->phys_port_cnt = (uint8_t)((struct fake_device*)c->device)->num_ports;
  a->max_qp_wr = 32768;
  a->max_cqe = 4194303;
  return 0;
}
int ibv_query_port(struct ibv_context* c, uint8_t port, struct _compat_ibv_port_attr* compat) {
  struct fake_device* d = (struct fake_device*)c->device;
  if (port < 1 || port > d->num_ports) return EINVAL;
  struct ibv_port_attr* a = (struct ibv_port_attr*)compat; /* the caller passes the full struct */
  const char kind = d->ports[port - 1];
  a->state = kind == 'D' ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = kind == 'I' ? IBV_MTU_4096 : IBV_MTU_1024;
  a->gid_tbl_len = 16;
  a->lid = kind == 'I' ? (uint16_t)(port + 10) : 0;
  a->link_layer = kind == 'I' ? IBV_LINK_LAYER_INFINIBAND : IBV_LINK_LAYER_ETHERNET;
  log_call("query_port", d->dev.name);
  return 0;
}
int ibv_query_gid(struct ibv_context* c, uint8_t port, int index, union ibv_gid* gid) {
  (void)c;
  (void)port;
  memset(gid, 0, sizeof(*gid));
  gid->raw[0] = 0xfe;
  gid->raw[1] = 0x80;
  gid->raw[15] = (uint8_t)index;
  return 0;
}
struct ibv_pd* ibv_alloc_pd(struct ibv_context* c) {
  if (should_fail("ibv_alloc_pd")) return NULL;
  struct ibv_pd* pd = calloc(1, sizeof(*pd));
  pd->context = c;
  log_call("alloc_pd", ctx_name(c));
  return pd;
}
int ibv_dealloc_pd(struct ibv_pd* pd) {
  if (should_fail("ibv_dealloc_pd")) return errno;
  log_call("dealloc_pd", ctx_name(pd->context));
  free(pd);
  return 0;
}
struct ibv_mr* ibv_reg_mr(struct ibv_pd* pd, void* addr, size_t length, int access) {
  if (should_fail("ibv_reg_mr")) return NULL;
  static uint32_t next_key = 0x100;
  struct ibv_mr* mr = calloc(1, sizeof(*mr));
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->lkey = mr->rkey = next_key++;
  g_last_reg_access = access;
  log_call("reg_mr", ctx_name(pd->context));
  return mr;
}
#ifdef FAKE_IBV_WITH_DMABUF /* rdma-core >= 34; the default fake predates it */
struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                                 int access) {
  if (fd == -1) { /* the capability probe */
    errno = g_dmabuf_probe_errno;
    return NULL;
  }
  if (should_fail("ibv_reg_dmabuf_mr")) return NULL;
  static uint32_t next_key = 0x8000;
  struct ibv_mr* mr = calloc(1, sizeof(*mr));
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = (void*)(uintptr_t)iova;
  mr->length = length;
  mr->lkey = mr->rkey = next_key++;
  g_last_dmabuf.seen = 1;
  g_last_dmabuf.offset = offset;
  g_last_dmabuf.length = length;
  g_last_dmabuf.iova = iova;
  g_last_dmabuf.fd = fd;
  g_last_dmabuf.access = access;
  log_call("reg_dmabuf_mr", ctx_name(pd->context));
  return mr;
}
#endif
int ibv_dereg_mr(struct ibv_mr* mr) {
  log_call("dereg_mr", ctx_name(mr->context));
  free(mr);
  return 0;
}
struct ibv_comp_channel* ibv_create_comp_channel(struct ibv_context* c) {
  struct ibv_comp_channel* ch = calloc(1, sizeof(*ch));
  ch->context = c;
  ch->fd = -1;
  log_call("create_comp_channel", ctx_name(c));
  return ch;
}
int ibv_destroy_comp_channel(struct ibv_comp_channel* ch) {
  log_call("destroy_comp_channel", ctx_name(ch->context));
  free(ch);
  return 0;
}
struct ibv_cq* ibv_create_cq(struct ibv_context* c, int cqe, void* cq_context, struct ibv_comp_channel* ch,
                             int comp_vector) {
  if (should_fail("ibv_create_cq")) return NULL;
  struct ibv_cq* cq = calloc(1, sizeof(*cq));
  cq->context = c;
  cq->channel = ch;
  cq->cq_context = cq_context;
  cq->cqe = cqe;
  (void)comp_vector;
  log_call("create_cq", ctx_name(c));
  return cq;
}
int ibv_destroy_cq(struct ibv_cq* cq) {
  log_call("destroy_cq", ctx_name(cq->context));
  free(cq);
  return 0;
}
int ibv_get_cq_event(struct ibv_comp_channel* ch, struct ibv_cq** cq, void** ctx) {
  (void)ch;
  (void)cq;
  (void)ctx;
  errno = EAGAIN;
  return -1;
}
void ibv_ack_cq_events(struct ibv_cq* cq, unsigned int n) {
  (void)cq;
  (void)n;
}
struct ibv_qp* ibv_create_qp(struct ibv_pd* pd, struct ibv_qp_init_attr* attr) {
  if (should_fail("ibv_create_qp")) return NULL;
  static uint32_t next_qpn = 0x11;
  struct ibv_qp* qp = calloc(1, sizeof(*qp));
  qp->context = pd->context;
  qp->pd = pd;
  qp->send_cq = attr->send_cq;
  qp->recv_cq = attr->recv_cq;
  qp->qp_type = attr->qp_type;
  qp->qp_num = next_qpn++;
  qp->state = IBV_QPS_RESET;
  for (int i = 0; i < FAKE_MAX_QPS; i++) {
    if (g_qps[i] == NULL) {
      g_qps[i] = qp;
      break;
    }
  }
  log_call("create_qp", ctx_name(pd->context));
  return qp;
}
#ifndef FAKE_IBV_OMIT_QP_CALLS /* the "old or broken library" variant lacks these */
int ibv_modify_qp(struct ibv_qp* qp, struct ibv_qp_attr* attr, int mask) {
  if (mask & IBV_QP_STATE) {
    qp->state = attr->qp_state;
    if (attr->qp_state <= IBV_QPS_ERR) {
      g_last_modify[attr->qp_state].seen = 1;
      g_last_modify[attr->qp_state].mask = mask;
      g_last_modify[attr->qp_state].attr = *attr;
    }
  }
  log_call("modify_qp", ctx_name(qp->context));
  return 0;
}
int ibv_destroy_qp(struct ibv_qp* qp) {
  log_call("destroy_qp", ctx_name(qp->context));
  for (int i = 0; i < FAKE_MAX_QPS; i++)
    if (g_qps[i] == qp) g_qps[i] = NULL;
  free(qp);
  return 0;
}
#endif
int ibv_query_qp(struct ibv_qp* qp, struct ibv_qp_attr* attr, int mask, struct ibv_qp_init_attr* init) {
  (void)mask;
  (void)init;
  memset(attr, 0, sizeof(*attr));
  attr->qp_state = qp->state;
  return 0;
}
int ibv_get_async_event(struct ibv_context* c, struct ibv_async_event* e) {
  for (int i = 0; i < g_num_events; i++) {
    if (strcmp(g_events[i].device, ctx_name(c)) != 0) continue;
    struct fake_event ev = g_events[i];
    memmove(&g_events[i], &g_events[i + 1], (size_t)(g_num_events - i - 1) * sizeof(ev));
    g_num_events--;
    memset(e, 0, sizeof(*e));
    e->event_type = (enum ibv_event_type)ev.type;
    switch (ev.type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_COMM_EST:
      case IBV_EVENT_SQ_DRAINED:
      case IBV_EVENT_PATH_MIG:
      case IBV_EVENT_PATH_MIG_ERR:
      case IBV_EVENT_QP_LAST_WQE_REACHED:
        for (int q = 0; q < FAKE_MAX_QPS; q++)
          if (g_qps[q] != NULL && g_qps[q]->qp_num == (uint32_t)ev.arg) e->element.qp = g_qps[q];
        break;
      case IBV_EVENT_CQ_ERR:
        e->element.cq = NULL;
        break;
      default:
        e->element.port_num = ev.arg;
        break;
    }
    log_call("get_async_event", ctx_name(c));
    return 0;
  }
  /* Nothing queued: the real library's read(2) blocks unless the fd is O_NONBLOCK. */
  const int flags = fcntl(c->async_fd, F_GETFL);
  if (flags < 0 || !(flags & O_NONBLOCK)) {
    g_event_would_block++;
    errno = EDEADLK;
    return -1;
  }
  errno = EAGAIN;
  return -1;
}
void ibv_ack_async_event(struct ibv_async_event* e) {
  (void)e;
  g_event_acks++;
}
const char* ibv_event_type_str(enum ibv_event_type e) {
  return e == IBV_EVENT_PORT_ERR ? "port error" : "event";
}
const char* ibv_wc_status_str(enum ibv_wc_status s) { return s == IBV_WC_SUCCESS ? "success" : "error"; }
