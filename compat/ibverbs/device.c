/* libibverbs drop-in: the device list, contexts, and the queries a RoCE
 * device answers (device, port, GID, P_Key), plus the string helpers.
 *
 * There is one device, "uroce0" (UROCE_DEV_NAME renames it). Its endpoint is
 * UROCE_ADDR (default 127.0.0.1) on UDP port UROCE_PORT (default 4791);
 * `uroce run` sets these per process. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uv_device g_dev;
static struct uroce_device *g_udev; /* shared by every open context */
static unsigned g_udev_refs;

int uv_errno(int err) {
  if (err >= 0)
    return 0;
  switch (err) {
  case UROCE_ERR_INVALID_ARGUMENT:
  case UROCE_ERR_BAD_STATE:
  case UROCE_ERR_CAPS:
    return EINVAL;
  case UROCE_ERR_NOT_SUPPORTED:
    return EOPNOTSUPP;
  case UROCE_ERR_QUEUE_FULL:
  case UROCE_ERR_NOBUF:
    return ENOMEM;
  case UROCE_ERR_BUSY:
    return EBUSY;
  case UROCE_ERR_CQ_OVERFLOW:
    return EOVERFLOW;
  }
  return err > -1000 ? -err : EIO;
}

void *uv_fail(int err) {
  errno = uv_errno(err);
  return NULL;
}

static const char *env_or(const char *name, const char *def) {
  const char *v = getenv(name);
  return v && *v ? v : def;
}

static void dev_init(void) {
  struct ibv_device *d = &g_dev.dev;
  if (d->name[0])
    return;
  d->node_type = IBV_NODE_CA;
  d->transport_type = IBV_TRANSPORT_IB;
  snprintf(d->name, sizeof(d->name), "%s", env_or("UROCE_DEV_NAME", "uroce0"));
  snprintf(d->dev_name, sizeof(d->dev_name), "uverbs0");
  snprintf(d->dev_path, sizeof(d->dev_path),
           "/sys/class/infiniband_verbs/uverbs0");
  snprintf(d->ibdev_path, sizeof(d->ibdev_path), "/sys/class/infiniband/%s",
           d->name);
}

UV_EXPORT struct ibv_device **ibv_get_device_list(int *num) {
  struct ibv_device **list = calloc(2, sizeof(*list));
  if (!list) {
    errno = ENOMEM;
    return NULL;
  }
  pthread_mutex_lock(&g_lock);
  dev_init();
  pthread_mutex_unlock(&g_lock);
  list[0] = &g_dev.dev;
  if (num)
    *num = 1;
  return list;
}

UV_EXPORT void ibv_free_device_list(struct ibv_device **list) {
  free(list);
}

UV_EXPORT const char *ibv_get_device_name(struct ibv_device *device) {
  return device ? device->name : NULL;
}

UV_EXPORT int ibv_get_device_index(struct ibv_device *device) {
  return device ? 0 : -1;
}

/* A node GUID made from the endpoint address, stable across runs. */
static uint64_t node_guid(void) {
  const char *a = env_or("UROCE_ADDR", "127.0.0.1");
  uint64_t h = 1469598103934665603ull;
  for (; *a; a++)
    h = (h ^ (uint8_t)*a) * 1099511628211ull;
  return (h & ~0xFF00000000000000ull) | 0x0200000000000000ull;
}

UV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device) {
  uint64_t g = node_guid(), be = 0;
  uint8_t *p = (uint8_t *)&be;
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(g >> (56 - 8 * i));
  return be;
}

/* The endpoint's interface: its index and MTU. 127.x addresses that are
 * not configured anywhere are on lo. */
static void find_iface(const uint8_t gid[16], int *ifindex) {
  struct ifaddrs *ifa, *i;
  static const uint8_t v4pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  bool v4 = !memcmp(gid, v4pfx, 12);
  *ifindex = 0;
  if (getifaddrs(&ifa) == 0) {
    for (i = ifa; i; i = i->ifa_next) {
      if (!i->ifa_addr)
        continue;
      if (v4 && i->ifa_addr->sa_family == AF_INET &&
          !memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, gid + 12, 4))
        break;
      if (!v4 && i->ifa_addr->sa_family == AF_INET6 &&
          !memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, gid, 16))
        break;
    }
    if (i)
      *ifindex = (int)if_nametoindex(i->ifa_name);
    freeifaddrs(ifa);
  }
  if (!*ifindex && v4 && gid[12] == 127)
    *ifindex = (int)if_nametoindex("lo");
}

/* UROCE_STATS=1 (uroce run --stats): the device's counters, when the
 * program closes it. */
static void print_stats(struct uroce_device *d) {
  struct uroce_device_stats st;
  uroce_device_get_stats(d, &st);
  fprintf(stderr,
          "uroce %s stats: tx_pkts=%llu rx_pkts=%llu rx_bad_icrc=%llu "
          "rx_malformed=%llu rx_dropped_impair=%llu rx_dropped_engine=%llu "
          "retransmits=%llu go_backs=%llu timeouts=%llu naks_tx=%llu "
          "rnr_naks_tx=%llu "
          "acks_tx=%llu\n",
          env_or("UROCE_ADDR", "127.0.0.1"), (unsigned long long)st.tx_pkts,
          (unsigned long long)st.rx_pkts, (unsigned long long)st.rx_bad_icrc,
          (unsigned long long)st.rx_malformed,
          (unsigned long long)st.rx_dropped_impair,
          (unsigned long long)st.rx_dropped_engine,
          (unsigned long long)st.retransmits, (unsigned long long)st.go_backs,
          (unsigned long long)st.timeouts, (unsigned long long)st.naks_tx,
          (unsigned long long)st.rnr_naks_tx, (unsigned long long)st.acks_tx);
}

static int udev_get(struct uroce_device **out) {
  int rv = 0;
  pthread_mutex_lock(&g_lock);
  if (!g_udev) {
    struct uroce_device_attr a;
    memset(&a, 0, sizeof(a));
    a.addr = env_or("UROCE_ADDR", "127.0.0.1");
    a.port = (uint16_t)atoi(env_or("UROCE_PORT", "0"));
    a.pcap = getenv("UROCE_PCAP");
    a.cc = getenv("UROCE_CC");
    /* testing: drop this share (0 <= P < 1) of the received packets */
    a.rx_drop = atof(env_or("UROCE_RX_DROP", "0"));
    /* ... of them only requests or only responses (acks, READ data) */
    const char *only = env_or("UROCE_RX_DROP_ONLY", "");
    a.rx_drop_only = !strcmp(only, "requests")    ? UROCE_RX_DROP_REQUESTS
                     : !strcmp(only, "responses") ? UROCE_RX_DROP_RESPONSES
                     : !*only || !strcmp(only, "any") ? UROCE_RX_DROP_ANY
                                                      : -1;
    if (a.rx_drop_only < 0)
      fprintf(stderr, "uroce: UROCE_RX_DROP_ONLY '%s': expected any, "
                      "requests or responses\n", only);
    a.progress = UROCE_PROGRESS_THREAD;
    /* 1: send payload straight from registered memory; 0: stage each
     * send in one buffer; unset: the device's choice */
    const char *g = getenv("UROCE_TX_GATHER");
    a.tx_gather = !g || !*g ? 0 : atoi(g) ? 1 : -1;
    rv = uroce_device_open(&g_udev, &a);
  }
  if (rv == 0) {
    g_udev_refs++;
    *out = g_udev;
  }
  pthread_mutex_unlock(&g_lock);
  return rv;
}

static void udev_put(void) {
  pthread_mutex_lock(&g_lock);
  if (--g_udev_refs == 0) {
    if (atoi(env_or("UROCE_STATS", "0")))
      print_stats(g_udev);
    uroce_device_close(g_udev);
    g_udev = NULL;
  }
  pthread_mutex_unlock(&g_lock);
}

/* A context's command descriptor is open for its whole life, as the
 * kernel's uverbs file is: the device's node where `uroce run` made one,
 * /dev/null elsewhere. No command goes through it (there is no kernel
 * side), so importing a context from it fails with EOPNOTSUPP. */
static int open_cmd_fd(const struct ibv_device *device) {
  char path[96];
  snprintf(path, sizeof(path), "/dev/infiniband/%s", device->dev_name);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  return fd;
}

UV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device) {
  if (!device) {
    errno = EINVAL;
    return NULL;
  }
  struct uv_context *ctx = calloc(1, sizeof(*ctx));
  if (!ctx) {
    errno = ENOMEM;
    return NULL;
  }
  int rv = udev_get(&ctx->udev);
  if (rv < 0) {
    fprintf(stderr, "uroce: cannot open the device on %s: %s\n",
            env_or("UROCE_ADDR", "127.0.0.1"), uroce_strerror(rv));
    free(ctx);
    return uv_fail(rv);
  }
  uroce_device_gid(ctx->udev, ctx->gid[UV_GID_INDEX]);
  memcpy(ctx->gid[0], ctx->gid[UV_GID_INDEX], 16);
  find_iface(ctx->gid[UV_GID_INDEX], &ctx->ifindex);
  pthread_mutex_init(&ctx->lock, NULL);
  struct ibv_context *c = &ctx->vctx.context;
  c->device = device;
  c->cmd_fd = open_cmd_fd(device);
  if (c->cmd_fd < 0) {
    int e = errno;
    udev_put();
    free(ctx);
    errno = e;
    return NULL;
  }
  c->async_fd = uroce_async_fd(ctx->udev);
  c->num_comp_vectors = 1;
  pthread_mutex_init(&c->mutex, NULL);
  c->abi_compat = __VERBS_ABI_IS_EXTENDED;
  ctx->vctx.sz = sizeof(ctx->vctx);
  uv_set_context_ops(ctx);
  return c;
}

UV_EXPORT int ibv_close_device(struct ibv_context *context) {
  struct uv_context *ctx = uv_ctx(context);
  udev_put();
  close(context->cmd_fd);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
  return 0;
}

/* ---- queries ---- */

static void fill_device_attr(struct uv_context *ctx,
                             struct ibv_device_attr *a) {
  memset(a, 0, sizeof(*a));
  snprintf(a->fw_ver, sizeof(a->fw_ver), "uroce %s", uroce_version());
  a->node_guid = ibv_get_device_guid(ctx->vctx.context.device);
  a->sys_image_guid = a->node_guid;
  a->max_mr_size = UINT64_MAX;
  a->page_size_cap = 0xfffff000;
  a->vendor_id = 0xffffff;
  a->vendor_part_id = 0;
  a->hw_ver = 0;
  a->max_qp = UROCE_DEVICE_MAX_QP;
  a->max_qp_wr = 65536;
  a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR |
                        IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN |
                        IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_CHANGE_PHY_PORT |
                        IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B |
                        IBV_DEVICE_XRC;
  a->max_sge = UROCE_MAX_SGE;
  a->max_sge_rd = UROCE_MAX_SGE;
  a->max_cq = 16384;
  a->max_cqe = (1 << 22) - 1;
  /* Regions and windows share one table of UROCE_DEVICE_MAX_MR keys. */
  a->max_mr = UROCE_DEVICE_MAX_MR;
  a->max_mw = UROCE_DEVICE_MAX_MR;
  a->max_pd = 1 << 16;
  a->max_qp_rd_atom = UROCE_MAX_RD_ATOMIC;
  a->max_res_rd_atom = UROCE_MAX_RD_ATOMIC * UROCE_DEVICE_MAX_QP;
  a->max_qp_init_rd_atom = UROCE_MAX_RD_ATOMIC;
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_ah = 1 << 20;
  a->max_srq = 1 << 16;
  a->max_srq_wr = 65536;
  a->max_srq_sge = UROCE_MAX_SGE;
  a->max_pkeys = 1;
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = 1;
}

UV_EXPORT int ibv_query_device(struct ibv_context *context,
                               struct ibv_device_attr *attr) {
  if (!context || !attr)
    return EINVAL;
  fill_device_attr(uv_ctx(context), attr);
  return 0;
}

int uv_query_device_ex(struct ibv_context *context,
                       const struct ibv_query_device_ex_input *input,
                       struct ibv_device_attr_ex *attr, size_t attr_size) {
  if (!attr || attr_size < sizeof(attr->orig_attr))
    return EINVAL;
  if (input && input->comp_mask)
    return EINVAL;
  struct ibv_device_attr_ex full;
  memset(&full, 0, sizeof(full));
  fill_device_attr(uv_ctx(context), &full.orig_attr);
  full.phys_port_cnt_ex = 1;
  full.max_wq_type_rq = 0;
  full.max_dm_size = UV_DM_MAX;
  /* On-demand paging is what uroce always does: it reads and writes a
   * registration's memory by address when a packet needs it, and pins
   * nothing. Implicit (whole address space) registration is not
   * offered. */
  full.odp_caps.general_caps = IBV_ODP_SUPPORT;
  full.odp_caps.per_transport_caps.rc_odp_caps =
      IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
      IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
  full.odp_caps.per_transport_caps.uc_odp_caps =
      IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
      IBV_ODP_SUPPORT_SRQ_RECV;
  full.odp_caps.per_transport_caps.ud_odp_caps =
      IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
  full.xrc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE |
                      IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
                      IBV_ODP_SUPPORT_SRQ_RECV;
  memcpy(attr, &full, attr_size < sizeof(full) ? attr_size : sizeof(full));
  return 0;
}

int uv_query_port(struct ibv_context *context, uint8_t port_num,
                  struct ibv_port_attr *attr, size_t attr_len) {
  if (!context || !attr)
    return EINVAL;
  if (port_num != 1)
    return EINVAL;
  struct uv_context *ctx = uv_ctx(context);
  struct ibv_port_attr p;
  memset(&p, 0, sizeof(p));
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = IBV_MTU_4096;
  p.active_mtu = (enum ibv_mtu)uroce_device_active_mtu(ctx->udev);
  p.gid_tbl_len = UV_GID_TBL_SIZE;
  p.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  p.max_msg_sz = UROCE_MAX_MSG;
  p.pkey_tbl_len = 1;
  p.lid = 0;
  p.sm_lid = 0;
  p.lmc = 0;
  p.max_vl_num = 1;
  p.active_width = 2;  /* 4X */
  p.active_speed = 32; /* 25 Gb/s per lane (EDR): a 100 Gb/s port */
  p.phys_state = 5;    /* LinkUp */
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  memcpy(attr, &p, attr_len < sizeof(p) ? attr_len : sizeof(p));
  return 0;
}

/* The exported compat symbol: callers built before the port attributes
 * grew pass the old, shorter structure (up to phys_state: 48 bytes). */
#undef ibv_query_port
UV_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
                             struct _compat_ibv_port_attr *attr) {
  return uv_query_port(context, port_num, (struct ibv_port_attr *)attr,
                       offsetof(struct ibv_port_attr, link_layer));
}

UV_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num,
                            int index, union ibv_gid *gid) {
  if (!context || !gid || port_num != 1 || index < 0 ||
      index >= UV_GID_TBL_SIZE) {
    errno = EINVAL;
    return -1;
  }
  if (index < UV_GID_TBL_LEN)
    memcpy(gid->raw, uv_ctx(context)->gid[index], 16);
  else
    memset(gid->raw, 0, 16); /* empty, as libibverbs reports one */
  return 0;
}

/* rdma-core's enum ibv_gid_type_sysfs (driver.h, not installed): 0 is IB /
 * RoCE v1, 1 is RoCE v2. */
UV_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
                                 unsigned int index, unsigned int *type) {
  if (!context || !type || port_num != 1 || index >= UV_GID_TBL_SIZE) {
    errno = EINVAL;
    return -1;
  }
  *type = index < UV_GID_TBL_LEN; /* libibverbs says v1 for an empty one */
  return 0;
}

static void gid_entry(struct uv_context *ctx, uint32_t index,
                      struct ibv_gid_entry *e) {
  memset(e, 0, sizeof(*e));
  memcpy(e->gid.raw, ctx->gid[index], 16);
  e->gid_index = index;
  e->port_num = 1;
  e->gid_type = IBV_GID_TYPE_ROCE_V2;
  e->ndev_ifindex = (uint32_t)ctx->ifindex;
}

UV_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
                                uint32_t gid_index, struct ibv_gid_entry *entry,
                                uint32_t flags, size_t entry_size) {
  if (!context || !entry || flags || entry_size < sizeof(*entry))
    return EINVAL;
  if (port_num != 1 || gid_index >= UV_GID_TBL_LEN)
    return ENODATA;
  gid_entry(uv_ctx(context), gid_index, entry);
  return 0;
}

UV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context,
                                       struct ibv_gid_entry *entries,
                                       size_t max_entries, uint32_t flags,
                                       size_t entry_size) {
  if (!context || flags || entry_size < sizeof(*entries))
    return -EINVAL;
  if (max_entries < UV_GID_TBL_LEN)
    return -EINVAL;
  for (uint32_t i = 0; i < UV_GID_TBL_LEN; i++)
    gid_entry(
        uv_ctx(context), i,
        (struct ibv_gid_entry *)(void *)((char *)entries + i * entry_size));
  return UV_GID_TBL_LEN;
}

UV_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num,
                             int index, __be16 *pkey) {
  if (!context || !pkey || port_num != 1 || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htons(0xffff);
  return 0;
}

UV_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num,
                                 __be16 pkey) {
  if (port_num != 1 || (ntohs(pkey) & 0x7fff) != 0x7fff)
    return -1;
  return 0;
}

/* The sysfs files programs read about a device: served from what the
 * device reports, since there is no kernel device behind it. */
UV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
                                  size_t size) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, file);
  FILE *f = fopen(path, "r");
  if (f) {
    size_t n = fread(buf, 1, size ? size - 1 : 0, f);
    fclose(f);
    if (size)
      buf[n] = 0;
    if (n && buf[n - 1] == '\n')
      buf[--n] = 0;
    return (int)n;
  }
  if (!strncmp(dir, "/sys/class/infiniband/", 22) && size) {
    const char *v = NULL;
    if (!strcmp(file, "node_desc"))
      v = "uroce userspace RoCEv2";
    else if (!strcmp(file, "board_id"))
      v = "uroce";
    else if (!strcmp(file, "fw_ver"))
      v = uroce_version();
    if (v) {
      int n = snprintf(buf, size, "%s", v);
      return n < (int)size ? n : (int)size - 1;
    }
  }
  errno = ENOENT;
  return -1;
}

/* rdma-core's signature (libibverbs/sysfs.c): the sysfs root, honouring
 * SYSFS_PATH as rdma-core does. librdmacm, UCX and libfabric call it while
 * they look for devices; the older (char *, size_t) form crashed them. */
UV_EXPORT const char *ibv_get_sysfs_path(void) {
  const char *env = getenv("SYSFS_PATH");
  return (env && *env) ? env : "/sys";
}

/* ---- strings ---- */

UV_EXPORT const char *ibv_node_type_str(enum ibv_node_type t) {
  static const char *const n[] = {
      "unknown",           "InfiniBand channel adapter",
      "InfiniBand switch", "InfiniBand router",
      "iWARP NIC",         "usNIC",
      "usNIC UDP",         "unspecified"};
  return (t >= 1 && t <= 7) ? n[t] : n[0];
}

UV_EXPORT const char *ibv_port_state_str(enum ibv_port_state s) {
  static const char *const n[] = {"PORT_NOP",    "PORT_DOWN",
                                  "PORT_INIT",   "PORT_ARMED",
                                  "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
  return (s >= 0 && s <= 5) ? n[s] : "invalid state";
}

UV_EXPORT const char *ibv_event_type_str(enum ibv_event_type e) {
  static const char *const n[] = {"CQ error",
                                  "local work queue catastrophic error",
                                  "invalid request local work queue error",
                                  "local access violation work queue error",
                                  "communication established",
                                  "send queue drained",
                                  "path migrated",
                                  "path migration request error",
                                  "local catastrophic error",
                                  "port active",
                                  "port error",
                                  "LID change",
                                  "P_Key change",
                                  "SM change",
                                  "SRQ catastrophic error",
                                  "SRQ limit reached",
                                  "last WQE reached",
                                  "client reregistration",
                                  "GID table change",
                                  "WQ fatal"};
  return (e >= 0 && e < (int)(sizeof(n) / sizeof(n[0]))) ? n[e] : "unknown";
}

UV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status s) {
  static const char *const n[] = {"success",
                                  "local length error",
                                  "local QP operation error",
                                  "local EE context operation error",
                                  "local protection error",
                                  "Work Request Flushed Error",
                                  "memory management operation error",
                                  "bad response error",
                                  "local access error",
                                  "remote invalid request error",
                                  "remote access error",
                                  "remote operation error",
                                  "transport retry counter exceeded",
                                  "RNR retry counter exceeded",
                                  "local RDD violation error",
                                  "remote invalid RD request",
                                  "aborted error",
                                  "invalid EE context number",
                                  "invalid EE context state",
                                  "fatal error",
                                  "response timeout error",
                                  "general error",
                                  "TM error",
                                  "TM rendezvous pending"};
  return (s >= 0 && s < (int)(sizeof(n) / sizeof(n[0]))) ? n[s] : "unknown";
}

/* ---- rates ---- */

static const struct {
  int rate, mult, mbps;
} rates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},     {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},  {IBV_RATE_14_GBPS, 0, 14062},
    {IBV_RATE_56_GBPS, 0, 56250},     {IBV_RATE_112_GBPS, 0, 112500},
    {IBV_RATE_168_GBPS, 0, 168750},   {IBV_RATE_25_GBPS, 10, 25781},
    {IBV_RATE_100_GBPS, 40, 103125},  {IBV_RATE_200_GBPS, 80, 206250},
    {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},    {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},
};
#define NRATES (sizeof(rates) / sizeof(rates[0]))

UV_EXPORT int ibv_rate_to_mult(enum ibv_rate rate) {
  for (size_t i = 0; i < NRATES; i++)
    if (rates[i].rate == (int)rate && rates[i].mult)
      return rates[i].mult;
  return -1;
}

UV_EXPORT enum ibv_rate mult_to_ibv_rate(int mult) {
  for (size_t i = 0; i < NRATES; i++)
    if (rates[i].mult == mult && mult)
      return (enum ibv_rate)rates[i].rate;
  return IBV_RATE_MAX;
}

UV_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate) {
  for (size_t i = 0; i < NRATES; i++)
    if (rates[i].rate == (int)rate)
      return rates[i].mbps;
  return -1;
}

UV_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps) {
  for (size_t i = 0; i < NRATES; i++)
    if (rates[i].mbps == mbps)
      return (enum ibv_rate)rates[i].rate;
  return IBV_RATE_MAX;
}

/* ---- fork support: uroce's memory needs no pinning, so fork is safe ---- */

UV_EXPORT int ibv_fork_init(void) {
  return 0;
}

UV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) {
  return IBV_FORK_UNNEEDED;
}

UV_EXPORT int ibv_dontfork_range(void *base, size_t size) {
  return 0;
}

UV_EXPORT int ibv_dofork_range(void *base, size_t size) {
  return 0;
}
