/* uroce run: the device nodes and sysfs entries that rdma-core-based
 * discovery reads, for the program alone. UCX takes a device only if
 * /dev/infiniband/<dev_name> is a character device it may read and write;
 * libfabric and others read /sys/class/infiniband and
 * /sys/class/infiniband_verbs. The program gets a mount namespace of its
 * own in which these exist (a user namespace too when not root), so
 * nothing on the host changes and a real RDMA device there is hidden from
 * it, as the drop-in hides it. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_dev.h"

#define MAX_ENTRIES 1024

static int fail(const char *what, const char *path) {
  fprintf(stderr, "uroce run: device nodes: %s %s: %s\n", what, path,
          strerror(errno));
  return -1;
}

static int write_str(const char *path, const char *s) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail("cannot create", path);
  size_t n = strlen(s);
  ssize_t w = write(fd, s, n);
  close(fd);
  return w == (ssize_t)n ? 0 : fail("cannot write", path);
}

static int writef(const char *dir, const char *file, const char *fmt, ...) {
  char path[512], buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  snprintf(path, sizeof(path), "%s/%s", dir, file);
  return write_str(path, buf);
}

static int mkdirs(const char *fmt, ...) {
  char path[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(path, sizeof(path), fmt, ap);
  va_end(ap);
  for (char *p = path + 1;; p++) {
    if (*p == '/' || !*p) {
      char c = *p;
      *p = 0;
      if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return fail("cannot make", path);
      *p = c;
      if (!c)
        return 0;
    }
  }
}

/* Covers dir with a tmpfs that holds what dir held: each entry bound back
 * from the covered directory (reached through an fd opened before), each
 * symbolic link made again. Then new entries can be added to dir. */
static int shadow(const char *dir) {
  int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return fail("cannot open", dir);
  int lfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = lfd < 0 ? NULL : fdopendir(lfd);
  if (!d) {
    close(fd);
    return fail("cannot list", dir);
  }
  char(*names)[NAME_MAX + 1] = calloc(MAX_ENTRIES, sizeof(*names));
  size_t n = 0;
  struct dirent *e;
  while (names && n < MAX_ENTRIES && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      snprintf(names[n++], sizeof(*names), "%s", e->d_name);
  closedir(d);
  int rv = -1;
  if (!names || n == MAX_ENTRIES) {
    errno = names ? E2BIG : ENOMEM;
    fail("too many entries in", dir);
    goto out;
  }
  if (mount("tmpfs", dir, "tmpfs", MS_NOSUID, "mode=0755") < 0) {
    fail("cannot mount a tmpfs on", dir);
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    char src[64 + NAME_MAX], dst[512 + NAME_MAX], link[PATH_MAX];
    if (fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue; /* gone meanwhile */
    snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", fd, names[i]);
    snprintf(dst, sizeof(dst), "%s/%s", dir, names[i]);
    if (S_ISLNK(st.st_mode)) {
      ssize_t k = readlinkat(fd, names[i], link, sizeof(link) - 1);
      if (k < 0)
        continue;
      link[k] = 0;
      if (symlink(link, dst) < 0) {
        fail("cannot link", dst);
        goto out;
      }
      continue;
    }
    int made =
        S_ISDIR(st.st_mode) ? mkdir(dst, 0755) : mknod(dst, S_IFREG | 0644, 0);
    if (made < 0 || mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0) {
      fail("cannot bind back", dst);
      goto out;
    }
  }
  rv = 0;
out:
  free(names);
  close(fd);
  return rv;
}

/* Makes parent/name an empty directory of the namespace's own: a tmpfs
 * over it where it exists (hiding a host device's entries), else a new
 * directory in parent shadowed once. */
static int own_dir(const char *parent, const char *name, bool *shadowed) {
  char path[512];
  struct stat st;
  snprintf(path, sizeof(path), "%s/%s", parent, name);
  if (stat(path, &st) < 0 && !*shadowed) {
    if (shadow(parent) < 0)
      return -1;
    *shadowed = true;
  }
  if (stat(path, &st) < 0) {
    if (mkdir(path, 0755) < 0)
      return fail("cannot make", path);
    return 0;
  }
  if (mount("tmpfs", path, "tmpfs", MS_NOSUID, "mode=0755") < 0)
    return fail("cannot mount a tmpfs on", path);
  return 0;
}

/* The endpoint address as a GID in sysfs' notation, and its interface. */
static int addr_gid(const char *addr, uint8_t gid[16],
                    char ifname[IF_NAMESIZE]) {
  struct in_addr a4;
  memset(gid, 0, 16);
  snprintf(ifname, IF_NAMESIZE, "lo");
  bool v4 = inet_pton(AF_INET, addr, &a4) == 1;
  if (v4) {
    gid[10] = gid[11] = 0xff;
    memcpy(gid + 12, &a4, 4);
  } else if (inet_pton(AF_INET6, addr, gid) != 1) {
    errno = EINVAL;
    return fail("bad address", addr);
  }
  struct ifaddrs *ifa;
  if (getifaddrs(&ifa) == 0) {
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
      if (!i->ifa_addr)
        continue;
      if ((v4 && i->ifa_addr->sa_family == AF_INET &&
           !memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, &a4, 4)) ||
          (!v4 && i->ifa_addr->sa_family == AF_INET6 &&
           !memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, gid,
                   16))) {
        snprintf(ifname, IF_NAMESIZE, "%s", i->ifa_name);
        break;
      }
    }
    freeifaddrs(ifa);
  }
  return 0;
}

/* What the kernel's sysfs says of an RoCE device, for what uroce is: one
 * port, active, GID indexes 0 and 1 the endpoint's address (RoCE v2), as
 * the drop-in reports them (docs/verbs.md). */
static int sysfs_fill(const char *ibdev, const char *uverbs, const char *addr) {
  uint8_t gid[16];
  char ifname[IF_NAMESIZE], g[48] = "";
  if (addr_gid(addr, gid, ifname) < 0)
    return -1;
  for (int i = 0; i < 16; i += 2)
    snprintf(g + strlen(g), sizeof(g) - strlen(g), "%s%02x%02x", i ? ":" : "",
             gid[i], gid[i + 1]);
  char d[256], p[320];
  snprintf(d, sizeof(d), "/sys/class/infiniband/%s", ibdev);
  snprintf(p, sizeof(p), "%s/ports/1", d);
  if (mkdirs("%s/gids", p) < 0 || mkdirs("%s/gid_attrs/types", p) < 0 ||
      mkdirs("%s/gid_attrs/ndevs", p) < 0 || mkdirs("%s/pkeys", p) < 0)
    return -1;
  int rv =
      writef(d, "node_type", "1: CA\n") |
      writef(d, "node_desc", "uroce userspace RoCEv2\n") |
      writef(d, "fw_ver", "uroce\n") | writef(d, "hca_type", "uroce\n") |
      writef(d, "board_id", "uroce\n") | writef(p, "state", "4: ACTIVE\n") |
      writef(p, "phys_state", "5: LinkUp\n") |
      writef(p, "link_layer", "Ethernet\n") |
      writef(p, "rate", "100 Gb/sec (4X EDR)\n") | writef(p, "lid", "0x0\n") |
      writef(p, "sm_lid", "0x0\n") | writef(p, "lid_mask_count", "0\n") |
      writef(p, "pkeys/0", "0xffff\n");
  for (int i = 0; i < 2; i++) {
    char n[32];
    snprintf(n, sizeof(n), "gids/%d", i);
    rv |= writef(p, n, "%s\n", g);
    snprintf(n, sizeof(n), "gid_attrs/types/%d", i);
    rv |= writef(p, n, "RoCE v2\n");
    snprintf(n, sizeof(n), "gid_attrs/ndevs/%d", i);
    rv |= writef(p, n, "%s\n", ifname);
  }
  snprintf(d, sizeof(d), "/sys/class/infiniband_verbs/%s", uverbs);
  if (rv || mkdirs("%s", d) < 0)
    return -1;
  /* 231:192 is the kernel's first uverbs minor; abi_version 6 the ABI
   * rdma-core 44 speaks. */
  return writef(d, "ibdev", "%s\n", ibdev) | writef(d, "abi_version", "6\n") |
         writef(d, "dev", "231:192\n") |
         writef("/sys/class/infiniband_verbs", "abi_version", "6\n");
}

/* Not root: a user namespace in which this user is itself and may mount. */
static int enter_user_ns(void) {
  uid_t uid = getuid();
  gid_t gid = getgid();
  char map[64];
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
    return -1;
  snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
  if (write_str("/proc/self/uid_map", map) < 0 ||
      write_str("/proc/self/setgroups", "deny\n") < 0)
    return -1;
  snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
  return write_str("/proc/self/gid_map", map);
}

int run_dev_setup(const char *ibdev, const char *uverbs, const char *addr) {
  if (unshare(CLONE_NEWNS) < 0 && (errno != EPERM || enter_user_ns() < 0))
    return fail("cannot make a mount namespace", "");
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    return fail("cannot make mounts private", "/");
  bool dev_shadowed = false, sys_shadowed = false;
  char node[128];
  snprintf(node, sizeof(node), "/dev/infiniband/%s", uverbs);
  /* The node is /dev/null bound in: a character device the program may
   * open read-write (the drop-in's cmd_fd), through which nothing goes. */
  if (own_dir("/dev", "infiniband", &dev_shadowed) < 0 ||
      mknod(node, S_IFREG | 0666, 0) < 0 ||
      mount("/dev/null", node, NULL, MS_BIND, NULL) < 0)
    return fail("cannot make", node);
  if (own_dir("/sys/class", "infiniband", &sys_shadowed) < 0 ||
      own_dir("/sys/class", "infiniband_verbs", &sys_shadowed) < 0)
    return -1;
  return sysfs_fill(ibdev, uverbs, addr);
}
