/* Command-line values, parsed the same way by every subcommand. A value
 * that is missing, not a number (NaN and infinities included), has
 * anything after the number, or lies outside [lo, hi] is reported on
 * stderr as "uroce TOOL: OPTION 'VALUE': WHY" and the function returns -1;
 * the caller then exits with status 2. On success they return 0 and store
 * the value. */
#ifndef UROCE_TOOLS_ARGS_H
#define UROCE_TOOLS_ARGS_H

#include <stdint.h>

/* Decimal or 0x hexadecimal; no sign. */
int arg_u64(const char *tool, const char *opt, const char *s, uint64_t lo,
            uint64_t hi, uint64_t *out);
/* Decimal, optionally negative. */
int arg_int(const char *tool, const char *opt, const char *s, int lo, int hi,
            int *out);
/* A finite decimal number. */
int arg_double(const char *tool, const char *opt, const char *s, double lo,
               double hi, double *out);
/* Bytes: an integer or decimal with an optional binary suffix K, M or G
 * (KiB, MiB, GiB; upper or lower case) and an optional B ("1.5M", "64KB").
 * The result must be a whole number of bytes. */
int arg_size(const char *tool, const char *opt, const char *s, uint64_t lo,
             uint64_t hi, uint64_t *out);
/* A TCP or UDP port, 1 .. 65535. */
int arg_port(const char *tool, const char *opt, const char *s, uint16_t *out);

/* A file that the tool, or the program it starts, will write (--pcap):
 * created if missing, not truncated, so that a bad path is reported now
 * by its name ("uroce perf: --pcap /x/y.pcap: No such file or directory")
 * and not later as the failure of something else. */
int arg_out_file(const char *tool, const char *opt, const char *path);

/* After getopt_long has named a bad option (argv[0] is "uroce TOOL", so
 * its message reads "uroce TOOL: unrecognized option '--bogus'"): a
 * pointer to --help rather than the whole usage, which would bury it. */
void arg_see_help(const char *tool);

#endif
