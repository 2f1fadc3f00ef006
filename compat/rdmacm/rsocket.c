/* rsockets (rsocket, rsend, riomap, ...): the socket API over RDMA that
 * rdma-core's librdmacm also carries. Not implemented by the drop-in: each
 * call fails with ENOSYS so that a program (or the rsocket preload
 * library) sees a clear error instead of a missing symbol
 * (docs/rdmacm.md). */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "cma.h"

#define ENOSYS_INT(name, ...)                                                  \
  RC_EXPORT int name(__VA_ARGS__) {                                            \
    errno = ENOSYS;                                                            \
    return -1;                                                                 \
  }
#define ENOSYS_SSIZE(name, ...)                                                \
  RC_EXPORT ssize_t name(__VA_ARGS__) {                                        \
    errno = ENOSYS;                                                            \
    return -1;                                                                 \
  }

ENOSYS_INT(rsocket, int domain, int type, int protocol)
ENOSYS_INT(rbind, int socket, const struct sockaddr *addr, socklen_t addrlen)
ENOSYS_INT(rlisten, int socket, int backlog)
ENOSYS_INT(raccept, int socket, struct sockaddr *addr, socklen_t *addrlen)
ENOSYS_INT(rconnect, int socket, const struct sockaddr *addr, socklen_t addrlen)
ENOSYS_INT(rshutdown, int socket, int how)
ENOSYS_INT(rclose, int socket)
ENOSYS_SSIZE(rrecv, int socket, void *buf, size_t len, int flags)
ENOSYS_SSIZE(rrecvfrom, int socket, void *buf, size_t len, int flags,
             struct sockaddr *src_addr, socklen_t *addrlen)
ENOSYS_SSIZE(rrecvmsg, int socket, struct msghdr *msg, int flags)
ENOSYS_SSIZE(rsend, int socket, const void *buf, size_t len, int flags)
ENOSYS_SSIZE(rsendto, int socket, const void *buf, size_t len, int flags,
             const struct sockaddr *dest_addr, socklen_t addrlen)
ENOSYS_SSIZE(rsendmsg, int socket, const struct msghdr *msg, int flags)
ENOSYS_SSIZE(rread, int socket, void *buf, size_t count)
ENOSYS_SSIZE(rreadv, int socket, const struct iovec *iov, int iovcnt)
ENOSYS_SSIZE(rwrite, int socket, const void *buf, size_t count)
ENOSYS_SSIZE(rwritev, int socket, const struct iovec *iov, int iovcnt)
ENOSYS_INT(rpoll, struct pollfd *fds, nfds_t nfds, int timeout)
ENOSYS_INT(rselect, int nfds, fd_set *readfds, fd_set *writefds,
           fd_set *exceptfds, struct timeval *timeout)
ENOSYS_INT(rgetpeername, int socket, struct sockaddr *addr, socklen_t *addrlen)
ENOSYS_INT(rgetsockname, int socket, struct sockaddr *addr, socklen_t *addrlen)
ENOSYS_INT(rsetsockopt, int socket, int level, int optname, const void *optval,
           socklen_t optlen)
ENOSYS_INT(rgetsockopt, int socket, int level, int optname, void *optval,
           socklen_t *optlen)
ENOSYS_INT(rfcntl, int socket, int cmd, ...)
ENOSYS_SSIZE(riowrite, int socket, const void *buf, size_t count, off_t offset,
             int flags)
ENOSYS_INT(riounmap, int socket, void *buf, size_t len)

RC_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags,
                       off_t offset) {
  (void)socket, (void)buf, (void)len, (void)prot, (void)flags, (void)offset;
  errno = ENOSYS;
  return -1;
}
