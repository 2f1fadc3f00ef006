/* What the tools that write an output folder share: making the folder,
 * and running gnuplot over the script they wrote into it. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tool.h"

int tool_mkdirs(const char *path) {
  char buf[1024];
  if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(buf, 0777) && errno != EEXIST)
        return -1;
      *p = '/';
    }
  return mkdir(buf, 0777) && errno != EEXIST ? -1 : 0;
}

/* gnuplot's messages go into plots.log in dir, so that they do not mix
 * with the tool's own; the log is removed when it stayed empty. */
int tool_gnuplot(const char *tool, const char *dir, const char *script) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (!pid) {
    if (chdir(dir))
      _exit(126);
    int fd = open("plots.log", O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execlp("gnuplot", "gnuplot", script, (char *)0);
    _exit(127);
  }
  int st;
  if (waitpid(pid, &st, 0) < 0)
    return -1;
  char log[1100];
  snprintf(log, sizeof log, "%s/plots.log", dir);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
    unlink(log);
    fprintf(stderr, "uroce %s: gnuplot not found; %s is in %s\n", tool, script,
            dir);
    return -1;
  }
  struct stat sb;
  bool quiet = !stat(log, &sb) && sb.st_size == 0;
  if (quiet)
    unlink(log);
  if (!WIFEXITED(st) || WEXITSTATUS(st) || !quiet) {
    fprintf(stderr, "uroce %s: gnuplot %s; its messages are in %s\n", tool,
            WIFEXITED(st) && !WEXITSTATUS(st) ? "complained" : "failed", log);
    return -1;
  }
  return 0;
}
