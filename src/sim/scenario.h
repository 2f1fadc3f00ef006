/* Scenario files: YAML (libyaml) into a struct sim_cfg. Unknown keys,
 * duplicate keys and bad values are errors that name the file, line and
 * key. Paths inside (workload file, size distribution) are relative to the
 * scenario's folder. The schema is in docs/sim.md. */
#ifndef UROCE_SIM_SCENARIO_H
#define UROCE_SIM_SCENARIO_H

#include "sim/sim.h"

/* The largest scenario file read (bytes). */
#define SIM_SCENARIO_MAX (1u << 20)

/* Fills cfg (starting from sim_cfg_default) from the file at path; name
 * receives the scenario's name (the file's base name unless it sets
 * name:). Returns 0, or -1 with the message in err. Free cfg with
 * sim_cfg_free(). */
int sim_scenario_load(const char *path, struct sim_cfg *cfg, char *name,
                      size_t namelen, char *err, size_t errlen);

/* The same from a string (tests); base is the folder for relative paths. */
int sim_scenario_parse(const char *text, size_t len, const char *label,
                       const char *base, struct sim_cfg *cfg, char *name,
                       size_t namelen, char *err, size_t errlen);

#endif
