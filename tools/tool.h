/* Subcommands of the `uroce` program. Each takes argc/argv starting at its
 * own name and returns the process exit status. */
#ifndef UROCE_TOOLS_TOOL_H
#define UROCE_TOOLS_TOOL_H

int cmd_dump(int argc, char **argv);
int cmd_pktgen(int argc, char **argv);
int cmd_perf(int argc, char **argv);
int cmd_sim(int argc, char **argv);
/* uroce-sim-mpi: this process's MPI rank and the ranks (0: not under
 * MPI); only rank 0 prints and writes. */
extern unsigned tool_sim_rank, tool_sim_ranks;
/* Whether every rank has ok (uroce-sim-mpi; NULL otherwise). */
extern int (*tool_sim_agree)(int ok);
int cmd_run(int argc, char **argv);
int cmd_launch(int argc, char **argv);
int cmd_coll_bench(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_trace(int argc, char **argv);

/* tools/outdir.c. tool_mkdirs makes path and its parents (0, or -1 with
 * errno). tool_gnuplot runs gnuplot on script in dir, its messages kept
 * in dir/plots.log; returns 0 if it ran, succeeded and said nothing,
 * else -1 after a line on stderr that names tool. */
int tool_mkdirs(const char *path);
int tool_gnuplot(const char *tool, const char *dir, const char *script);

#endif
