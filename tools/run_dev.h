/* uroce run's device nodes and sysfs entries (tools/run_dev.c). */
#ifndef UROCE_TOOLS_RUN_DEV_H
#define UROCE_TOOLS_RUN_DEV_H

/* Moves this process into a mount namespace of its own (and a user
 * namespace when not root) in which /dev/infiniband/<uverbs> and
 * /sys/class/infiniband{,_verbs} describe device ibdev at endpoint addr,
 * and nothing else there. Returns 0, or -1 after a line on stderr. */
int run_dev_setup(const char *ibdev, const char *uverbs, const char *addr);

#endif
