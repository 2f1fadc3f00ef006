/* The shared command-line value parser (tools/args.c): what it accepts,
 * and that everything it refuses is refused with the option and the value
 * named. stderr goes to a temporary file that each case reads back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tools/args.h"
#include "t.h"

static int err_fd = -1, saved_fd = -1;
static char msg[512];

/* While a call runs, its stderr goes to a temporary file; msg gets what it
 * printed. Check failures still reach the real stderr. */
static void begin_capture(void) {
  fflush(stderr);
  if (ftruncate(err_fd, 0) != 0 || lseek(err_fd, 0, SEEK_SET) != 0)
    abort();
  saved_fd = dup(2);
  dup2(err_fd, 2);
}

static void end_capture(void) {
  fflush(stderr);
  dup2(saved_fd, 2);
  close(saved_fd);
  ssize_t n = pread(err_fd, msg, sizeof msg - 1, 0);
  msg[n > 0 ? n : 0] = 0;
}

#define CALL(expr)                                                             \
  ({                                                                           \
    begin_capture();                                                           \
    int r_ = (expr);                                                           \
    end_capture();                                                             \
    r_;                                                                        \
  })

/* A refused value: -1, and a message naming the tool, option and value. */
#define REFUSED(call, opt, val)                                                \
  do {                                                                         \
    CHECK_EQ(CALL(call), -1);                                                  \
    CHECK(strstr(msg, "uroce t: ") == msg);                                    \
    CHECK(strstr(msg, opt " '" val "'") != NULL);                              \
  } while (0)

static void test_u64(void) {
  uint64_t v = 7;
  CHECK_EQ(arg_u64("t", "-n", "0", 0, 10, &v), 0);
  CHECK_EQ(v, 0);
  CHECK_EQ(arg_u64("t", "-n", "0x10", 0, 100, &v), 0);
  CHECK_EQ(v, 16);
  CHECK_EQ(arg_u64("t", "-n", "18446744073709551615", 0, UINT64_MAX, &v), 0);
  CHECK(v == UINT64_MAX);
  REFUSED(arg_u64("t", "-n", "18446744073709551616", 0, UINT64_MAX, &v), "-n",
          "18446744073709551616");
  REFUSED(arg_u64("t", "-n", "-1", 0, 10, &v), "-n", "-1");
  REFUSED(arg_u64("t", "-n", " 1", 0, 10, &v), "-n", " 1");
  REFUSED(arg_u64("t", "-n", "10x", 0, 100, &v), "-n", "10x");
  REFUSED(arg_u64("t", "-n", "", 0, 10, &v), "-n", "");
  REFUSED(arg_u64("t", "-n", "11", 0, 10, &v), "-n", "11");
  CHECK(strstr(msg, "0 .. 10") != NULL);
  REFUSED(arg_u64("t", "-n", "0", 1, 10, &v), "-n", "0");
  CHECK(v == UINT64_MAX); /* untouched by the refusals */
}

static void test_int(void) {
  int v = 0;
  CHECK_EQ(arg_int("t", "--busy-poll", "-1", -1, 100, &v), 0);
  CHECK_EQ(v, -1);
  CHECK_EQ(arg_int("t", "-n", "4096", 1, 4096, &v), 0);
  CHECK_EQ(v, 4096);
  REFUSED(arg_int("t", "-n", "0", 1, 4096, &v), "-n", "0");
  REFUSED(arg_int("t", "-n", "100000", 1, 4096, &v), "-n", "100000");
  REFUSED(arg_int("t", "-n", "99999999999999999999", 1, 4096, &v), "-n",
          "99999999999999999999");
  REFUSED(arg_int("t", "-n", "2.5", 1, 4096, &v), "-n", "2.5");
  REFUSED(arg_int("t", "-n", "+3", 1, 4096, &v), "-n", "+3");
  CHECK_EQ(v, 4096);
}

static void test_double(void) {
  double v = 0;
  CHECK_EQ(arg_double("t", "-D", "2.5", 0.001, 86400, &v), 0);
  CHECK(v == 2.5);
  CHECK_EQ(arg_double("t", "-D", "1e3", 0.001, 86400, &v), 0);
  CHECK(v == 1000);
  REFUSED(arg_double("t", "-D", "nan", 0.001, 86400, &v), "-D", "nan");
  REFUSED(arg_double("t", "-D", "NaN", 0.001, 86400, &v), "-D", "NaN");
  REFUSED(arg_double("t", "-D", "inf", 0.001, 86400, &v), "-D", "inf");
  REFUSED(arg_double("t", "-D", "1e999", 0.001, 86400, &v), "-D", "1e999");
  REFUSED(arg_double("t", "-D", "-nan", -1, 1, &v), "-D", "-nan");
  REFUSED(arg_double("t", "-D", "0", 0.001, 86400, &v), "-D", "0");
  REFUSED(arg_double("t", "-D", "5s", 0.001, 86400, &v), "-D", "5s");
  CHECK(v == 1000);
}

static void test_size(void) {
  uint64_t v = 0;
  CHECK_EQ(arg_size("t", "-b", "8", 1, 1ull << 34, &v), 0);
  CHECK_EQ(v, 8);
  CHECK_EQ(arg_size("t", "-b", "64K", 1, 1ull << 34, &v), 0);
  CHECK_EQ(v, 65536);
  CHECK_EQ(arg_size("t", "-b", "1.5m", 1, 1ull << 34, &v), 0);
  CHECK_EQ(v, 1572864);
  CHECK_EQ(arg_size("t", "-b", "2GB", 1, 1ull << 34, &v), 0);
  CHECK_EQ(v, 2147483648ll);
  REFUSED(arg_size("t", "-b", "0", 1, 1ull << 34, &v), "-b", "0");
  CHECK(strstr(msg, "1 .. 16G") != NULL);
  REFUSED(arg_size("t", "-b", "1T", 1, 1ull << 34, &v), "-b", "1T");
  REFUSED(arg_size("t", "-b", "32G", 1, 1ull << 34, &v), "-b", "32G");
  REFUSED(arg_size("t", "-b", "1.3", 1, 1ull << 34, &v), "-b", "1.3");
  REFUSED(arg_size("t", "-b", "nanK", 1, 1ull << 34, &v), "-b", "nanK");
  REFUSED(arg_size("t", "-b", "-1K", 1, 1ull << 34, &v), "-b", "-1K");
  REFUSED(arg_size("t", "-b", "1e30", 1, UINT64_MAX, &v), "-b", "1e30");
  CHECK_EQ(v, 2147483648ll);
}

static void test_port_and_file(void) {
  uint16_t p = 0;
  CHECK_EQ(arg_port("t", "--udp-port", "4791", &p), 0);
  CHECK_EQ(p, 4791);
  REFUSED(arg_port("t", "--udp-port", "0", &p), "--udp-port", "0");
  REFUSED(arg_port("t", "--udp-port", "65536", &p), "--udp-port", "65536");
  CHECK_EQ(p, 4791);
  REFUSED(arg_out_file("t", "--pcap", "/nonexistent-dir/x.pcap"), "--pcap",
          "/nonexistent-dir/x.pcap");
  CHECK(strstr(msg, "No such file or directory") != NULL);
  char path[] = "/tmp/uroce-test-args-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  CHECK(write(fd, "keep", 4) == 4);
  close(fd);
  CHECK_EQ(CALL(arg_out_file("t", "--pcap", path)), 0);
  CHECK_EQ(strlen(msg), 0);
  FILE *f = fopen(path, "r");
  char buf[8] = {0};
  CHECK(f && fread(buf, 1, 4, f) == 4 && !strcmp(buf, "keep")); /* kept */
  if (f)
    fclose(f);
  unlink(path);
}

int main(void) {
  char path[] = "/tmp/uroce-test-args-err-XXXXXX";
  err_fd = mkstemp(path);
  if (err_fd < 0)
    return 1;
  unlink(path);
  T_RUN(test_u64);
  T_RUN(test_int);
  T_RUN(test_double);
  T_RUN(test_size);
  T_RUN(test_port_and_file);
  return T_DONE();
}
