/* Subcommands of the `uroce` program. Each takes argc/argv starting at its
 * own name and returns the process exit status. */
#ifndef UROCE_TOOLS_TOOL_H
#define UROCE_TOOLS_TOOL_H

int cmd_dump(int argc, char **argv);
int cmd_pktgen(int argc, char **argv);
int cmd_perf(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_launch(int argc, char **argv);
int cmd_coll_bench(int argc, char **argv);
int cmd_plan(int argc, char **argv);

#endif
