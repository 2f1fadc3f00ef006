/* uroce plan: size, price and time the network options of a GPU cluster
 * from a spec (YAML); rank them, write plan.json, CSV and plots, and
 * compare two specs or two catalogues (docs/plan.md). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plan/plan.h"
#include "tool.h"
#include "util/clock.h"

#define MAX_OPTIONS 512

struct opts {
  const char *out, *catalogue;
  bool quiet, plots, analytical;
};

/* One option with its results. */
struct result {
  struct plan_option o;
  struct plan_phase_times ph_model, ph_sim;
  struct plan_perf model, sim;
  struct plan_probe_stats st;
  bool simulated, pareto;
  char why[200];                             /* why not simulated */
  double probe_model_us[2], probe_sim_us[2]; /* ring, all-to-all mean */
  double probe_cal_us[2]; /* the model the sim is checked against: given
                             the simulator's ECMP hash where it hashes */
};

struct plan_run {
  struct plan_spec sp;
  struct result *r;
  uint32_t n;
  double wall_s;
  /* progress */
  uint32_t done, total;
  const char *current;
  bool bar;
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: uroce plan [OPTIONS] SPEC.yaml\n"
          "       uroce plan [OPTIONS] --compare A.yaml B.yaml\n"
          "       uroce plan [OPTIONS] --compare-catalogue CAT.yaml "
          "SPEC.yaml\n\n"
          "Sizes every network option of a GPU cluster spec (fabric, NIC:GPU\n"
          "ratio, NIC speed, topology, switch radix), prices its bill of\n"
          "materials from the parts catalogue, and estimates the training\n"
          "step time: analytically for every option, and packet by packet\n"
          "(uroce sim) where the simulator can run it. Writes plan.json,\n"
          "plan.csv, bom.csv, calibration.csv, plots.gp and, when gnuplot is\n"
          "installed, cost_vs_step.png and bom.png.\n\n"
          "options:\n"
          "  -o, --out DIR            output folder (default plan-out/NAME)\n"
          "  --catalogue FILE         a catalogue read after the spec's,\n"
          "                           overriding parts of the same name\n"
          "  --compare A B            run two specs, print them side by side\n"
          "  --compare-catalogue CAT  run SPEC with its catalogues, then with\n"
          "                           CAT on top, side by side\n"
          "  --analytical             no packet-level simulation\n"
          "  -q, --quiet              no progress bar\n"
          "  --no-plots               do not run gnuplot\n"
          "  -h, --help               this text\n\n"
          "The spec and catalogue formats are in docs/plan.md; examples are\n"
          "in examples/plan/.\n");
}

static void draw_bar(struct plan_run *pr) {
  if (!pr->bar)
    return;
  int w = 30, fill = pr->total ? (int)(w * pr->done / pr->total) : w;
  fprintf(stderr, "\r[%.*s%*s] %u/%u probes  %-40.40s", fill,
          "##############################", w - fill, "", pr->done, pr->total,
          pr->current ? pr->current : "");
  fflush(stderr);
}

static void on_probe(void *arg, const char *what) {
  struct plan_run *pr = arg;
  pr->done++;
  (void)what;
  draw_bar(pr);
}

/* The performance a ranking uses: measured where simulated. */
static const struct plan_perf *best(const struct result *r) {
  return r->simulated ? &r->sim : &r->model;
}

static int by_step(const void *a, const void *b) {
  const struct result *x = a, *y = b;
  if (x->o.feasible != y->o.feasible)
    return x->o.feasible ? -1 : 1;
  double d = best(x)->t_step_s - best(y)->t_step_s;
  if (fabs(d) > 1e-12)
    return d < 0 ? -1 : 1;
  return x->o.capex < y->o.capex ? -1 : x->o.capex > y->o.capex;
}

static void mark_pareto(struct plan_run *pr) {
  for (uint32_t i = 0; i < pr->n; i++) {
    struct result *a = &pr->r[i];
    a->pareto = a->o.feasible;
    for (uint32_t j = 0; j < pr->n && a->pareto; j++) {
      struct result *b = &pr->r[j];
      if (j == i || !b->o.feasible)
        continue;
      double sa = best(a)->t_step_s, sb = best(b)->t_step_s;
      if (b->o.capex <= a->o.capex && sb <= sa &&
          (b->o.capex < a->o.capex || sb < sa))
        a->pareto = false;
    }
  }
}

static int evaluate(struct plan_run *pr, const struct opts *op, char *err,
                    size_t errlen) {
  struct plan_spec *sp = &pr->sp;
  pr->r = calloc(MAX_OPTIONS, sizeof *pr->r);
  struct plan_option *tmp = calloc(MAX_OPTIONS, sizeof *tmp);
  if (!pr->r || !tmp) {
    free(tmp);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int n = plan_enumerate(sp, tmp, MAX_OPTIONS, err, errlen);
  if (n < 0) {
    free(tmp);
    return -1;
  }
  pr->n = (uint32_t)n;
  pr->total = 0;
  for (uint32_t i = 0; i < pr->n; i++) {
    struct result *r = &pr->r[i];
    r->o = tmp[i];
    if (!r->o.feasible) {
      snprintf(r->why, sizeof r->why, "%s", r->o.why);
      continue;
    }
    if (op->analytical && r->o.fabric != PLAN_IB)
      snprintf(r->why, sizeof r->why, "analytical only: --analytical");
    else if (plan_probe_possible(sp, &r->o, r->why, sizeof r->why)) {
      r->simulated = true;
      pr->total += 1 + plan_a2a_probes(sp, &r->o);
    }
  }
  free(tmp);
  pr->bar = !op->quiet && isatty(2) && pr->total;
  double t0 = mono_s();
  for (uint32_t i = 0; i < pr->n; i++) {
    struct result *r = &pr->r[i];
    if (!r->o.feasible)
      continue;
    plan_model_phases(sp, &r->o, &r->ph_model);
    plan_perf_from(sp, &r->o, &r->ph_model, &r->model);
    double ideal = sp->probe_bytes * 8 / (r->o.speed_gbps * r->model.eff * 1e3);
    double lat = plan_probe_latency_us(&r->o);
    r->probe_model_us[0] = r->ph_model.ring_factor * ideal + lat;
    r->probe_model_us[1] = r->ph_model.a2a_factor * ideal + lat;
    if (!r->simulated)
      continue;
    pr->current = r->o.name;
    draw_bar(pr);
    if (!pr->bar && !op->quiet)
      fprintf(stderr, "uroce plan: simulating %s (%u NICs)\n", r->o.name,
              r->o.nics);
    if (plan_probe(sp, &r->o, &r->ph_sim, &r->st, on_probe, pr, err, errlen)) {
      if (pr->bar)
        fputc('\n', stderr);
      return -1;
    }
    plan_perf_from(sp, &r->o, &r->ph_sim, &r->sim);
    r->probe_sim_us[0] = r->ph_sim.ring_factor * ideal + lat;
    r->probe_sim_us[1] = r->ph_sim.a2a_factor * ideal + lat;
    bool hashed = r->ph_sim.ring_hashed > 0;
    r->probe_cal_us[0] =
        hashed ? r->ph_sim.ring_hashed * ideal + lat : r->probe_model_us[0];
    r->probe_cal_us[1] =
        hashed ? r->ph_sim.a2a_hashed * ideal + lat : r->probe_model_us[1];
  }
  if (pr->bar)
    fprintf(stderr, "\r%*s\r", 110, "");
  pr->wall_s = mono_s() - t0;
  qsort(pr->r, pr->n, sizeof *pr->r, by_step);
  mark_pareto(pr);
  return 0;
}

/* ---- Output. ---- */

static const char *basis(const struct result *r) {
  return r->simulated ? "sim" : "model";
}

/* Simulated, but the probes lost packets that the transport recovered by
 * timeout: scaling such a probe to the step's bytes scales a fixed
 * timeout cost too, so the step time is a warning, not an estimate. */
static bool lossy(const struct result *r) {
  return r->simulated && r->ph_model.lossy_saturated && r->st.drops > 0;
}

/* The model leaves out what such a probe met: drops, or back-pressure. */
static bool outside_model(const struct result *r) {
  return r->ph_model.lossy_saturated || r->ph_model.credit_saturated;
}

static const char *basis_label(const struct result *r) {
  return lossy(r) ? "sim*" : basis(r);
}

/* The table's bus bandwidth column, named for what it measures. */
static const char *headline_col(const struct plan_spec *sp) {
  switch (plan_headline_coll(sp)) {
  case PLAN_C_ALLREDUCE:
    return "AR busbw";
  case PLAN_C_REDUCE_SCATTER:
  case PLAN_C_ALLGATHER:
    return "RS/AG busbw";
  default:
    return "A2A busbw";
  }
}

static void print_table(FILE *f, const struct plan_run *pr) {
  const struct plan_spec *sp = &pr->sp;
  char wl[256] = "";
  size_t n = 0;
  for (int k = 0; k < PLAN_NCOLL; k++)
    if (sp->coll_bytes[k] > 0 && n < sizeof wl)
      n += (size_t)snprintf(wl + n, sizeof wl - n, "%s%s %.0f MiB",
                            n ? ", " : "", plan_coll_name[k],
                            sp->coll_bytes[k] / 1048576);
  fprintf(f,
          "%s: %u GPUs, %u per server; step = %.1f ms compute + "
          "communication (%s per GPU, overlap %.0f%%)\n",
          sp->name, sp->gpus, sp->gpus_per_server, sp->compute_s * 1e3, wl,
          sp->overlap * 100);
  if (sp->trace[0])
    fprintf(f, "collectives from the trace %s: %u in a step\n", sp->trace,
            sp->nops);
  fprintf(f, "basis: sim = network phases measured packet by packet (uroce "
             "sim), model = analytical only\n\n");
  fprintf(f,
          "%-3s %-30s %5s %6s %5s %5s %5s %8s %7s %8s %8s %11s %7s %-5s %s\n",
          "#", "option", "NICs", "leaf", "spine", "core", "os", "capex$M", "kW",
          "step ms", "comm ms", headline_col(sp), "$/Gbps", "basis", "");
  for (uint32_t i = 0; i < pr->n; i++) {
    const struct result *r = &pr->r[i];
    const struct plan_option *o = &r->o;
    if (!o->feasible)
      continue;
    const struct plan_perf *p = best(r);
    fprintf(f,
            "%-3u %-30s %5u %6u %5u %5u %5.2f %8.2f %7.1f %8.2f %8.2f "
            "%9.1f G %7.1f %-5s %s\n",
            i + 1, o->name, o->nics, o->sw[1], o->sw[2], o->sw[3], o->oversub,
            o->capex / 1e6, o->power_w / 1e3, p->t_step_s * 1e3,
            p->t_comm_s * 1e3, p->busbw_gbps, p->usd_per_gbps, basis_label(r),
            r->pareto ? "pareto" : "");
  }
  for (uint32_t i = 0; i < pr->n; i++)
    if (!pr->r[i].o.feasible)
      fprintf(f, "    %-30s not buildable: %s\n", pr->r[i].o.name,
              pr->r[i].o.why);
  fprintf(f, "\nnotes:\n");
  for (uint32_t i = 0; i < pr->n; i++)
    if (pr->r[i].o.feasible && !pr->r[i].simulated)
      fprintf(f, "  %-30s %s\n", pr->r[i].o.name, pr->r[i].why);
  for (uint32_t i = 0; i < pr->n; i++)
    if (pr->r[i].o.feasible && !pr->r[i].simulated &&
        pr->r[i].ph_model.lossy_saturated)
      fprintf(f,
              "  %-30s model: a lossy fabric offered more than a link's "
              "rate; the model counts no trimmed packets or resends (the "
              "simulator's UET-style switches trim there), so this step "
              "time may be a little optimistic\n",
              pr->r[i].o.name);
  for (uint32_t i = 0; i < pr->n; i++)
    if (pr->r[i].o.feasible && pr->r[i].ph_model.credit_saturated)
      fprintf(f,
              "  %-30s %s: a phase offers a link more than its rate; "
              "InfiniBand's credits then hold senders back link by link: "
              "the model shares the spines' ports by input port, as their "
              "arbiters do, but leaves out head-of-line blocking in their "
              "input buffers, so its time is a little low%s\n",
              pr->r[i].o.name, basis(&pr->r[i]),
              pr->r[i].simulated ? ", and the ranking uses the sim" : "");
  for (uint32_t i = 0; i < pr->n; i++)
    if (lossy(&pr->r[i]))
      fprintf(f,
              "  %-30s sim*: %llu packets dropped in the probes (lossy "
              "fabric past a link's rate; %llu more trimmed and resent at "
              "once) and recovered by timeout; the step time scales that "
              "timeout with the bytes, so read it as 'this option loses "
              "packets', not as an estimate\n",
              pr->r[i].o.name, (unsigned long long)pr->r[i].st.drops,
              (unsigned long long)pr->r[i].st.trims);
  static const char *const what[PLAN_NCOLL] = {
      "allreduce", "reduce-scatter and all-gather", "", "all-to-all"};
  fprintf(f,
          "  os = leaf down:up bandwidth; %s = %s bus bandwidth per GPU "
          "(nccl-tests definition); $/Gbps = network capex / (GPUs x %s)\n",
          headline_col(sp), what[plan_headline_coll(sp)], headline_col(sp));
  fprintf(f, "  prices: see each part's source in plan.json (the default "
             "catalogue is illustrative)\n");
}

static double agree(double model, double sim) {
  return sim > 0 ? model / sim : 0;
}

static void print_calibration(FILE *f, const struct plan_run *pr) {
  bool any = false;
  double worst = 0, worst_out = 0;
  for (uint32_t i = 0; i < pr->n; i++) {
    const struct result *r = &pr->r[i];
    if (!r->simulated)
      continue;
    if (!any)
      fprintf(f,
              "\ncalibration: probe phases, analytical vs packet-level "
              "(%.0f KiB per flow, every NIC at once; times in us)\n"
              "  model = expected (ECMP: over random hashing); hashed = "
              "the same model given the simulator's ECMP placement\n"
              "%-30s %8s %8s %8s %6s | %8s %8s %8s %6s | %6s %6s\n",
              pr->sp.probe_bytes / 1024, "option", "ring mod", "hashed", "sim",
              "ratio", "a2a mod", "hashed", "sim", "ratio", "step", "wall s");
    any = true;
    bool a2a = r->ph_sim.a2a;
    double a = agree(r->probe_cal_us[0], r->probe_sim_us[0]);
    double b = a2a ? agree(r->probe_cal_us[1], r->probe_sim_us[1]) : 1;
    double c = agree(r->model.t_step_s, r->sim.t_step_s);
    double w = fmax(fabs(a - 1), fabs(b - 1));
    bool out = outside_model(r);
    worst = fmax(worst, w);
    if (out)
      worst_out = fmax(worst_out, w);
    bool h = r->ph_sim.ring_hashed > 0;
    char hr[16] = "-", am[16] = "-", ha[16] = "-", as[16] = "-", ab[16] = "-";
    if (h)
      snprintf(hr, sizeof hr, "%.2f", r->probe_cal_us[0]);
    if (h && a2a)
      snprintf(ha, sizeof ha, "%.2f", r->probe_cal_us[1]);
    if (a2a) { /* no all-to-all in the step: none probed */
      snprintf(am, sizeof am, "%.2f", r->probe_model_us[1]);
      snprintf(as, sizeof as, "%.2f", r->probe_sim_us[1]);
      snprintf(ab, sizeof ab, "%.3f", b);
    }
    fprintf(f,
            "%-30s %8.2f %8s %8.2f %6.3f | %8s %8s %8s %6s | %6.3f "
            "%6.1f%s\n",
            r->o.name, r->probe_model_us[0], hr, r->probe_sim_us[0], a, am, ha,
            as, ab, c, r->st.wall_s, out ? "  (*)" : "");
  }
  if (any)
    fprintf(f,
            "ratio = model (hashed where ECMP) / sim; step = model step "
            "time / step time from the sim's phases\n"
            "worst probe disagreement: %.1f%%%s\n",
            worst * 100,
            worst > 0.10 ? "  (OVER 10%: the ranking uses the sim)" : "");
  if (worst_out > 0)
    fprintf(f,
            "(*) a phase offered a link more than its rate: the model "
            "shares InfiniBand's spine ports by input as credits do, but "
            "leaves out head-of-line blocking in their input buffers, and "
            "the UET-style probes' trimmed packets and their resends; worst "
            "disagreement there %.1f%%\n",
            worst_out * 100);
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fputc('\\', f);
    if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", *s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

static void json_perf(FILE *f, const struct plan_perf *p) {
  fprintf(f,
          "{\"efficiency\": %.6f, \"goodput_gbps\": %.3f, \"alpha_us\": "
          "%.3f, \"ring_factor\": %.4f, \"a2a_factor\": %.4f, "
          "\"allreduce_ms\": %.4f, \"allreduce_nvlink_ms\": %.4f, "
          "\"allreduce_net_ms\": %.4f, \"alltoall_ms\": %.4f, "
          "\"reduce_scatter_allgather_ms\": %.4f, "
          "\"comm_ms\": %.4f, \"step_ms\": %.4f, \"busbw_allreduce_gbps\": "
          "%.3f, \"busbw_alltoall_gbps\": %.3f, "
          "\"busbw_reduce_scatter_allgather_gbps\": %.3f, "
          "\"usd_per_gbps\": %.3f}",
          p->eff, p->rate_gbps, p->alpha_us, p->phases.ring_factor,
          p->phases.a2a_factor, p->t_allreduce_s * 1e3, p->t_ar_nvlink_s * 1e3,
          p->t_ar_net_s * 1e3, p->t_alltoall_s * 1e3, p->t_rs_ag_s * 1e3,
          p->t_comm_s * 1e3, p->t_step_s * 1e3, p->busbw_ar_gbps,
          p->busbw_a2a_gbps, p->busbw_rs_ag_gbps, p->usd_per_gbps);
}

static void write_json(FILE *f, const struct plan_run *pr) {
  const struct plan_spec *sp = &pr->sp;
  fprintf(f, "{\n  \"spec\": ");
  json_str(f, sp->path);
  fprintf(f, ",\n  \"name\": ");
  json_str(f, sp->name);
  fprintf(f,
          ",\n  \"gpus\": %u,\n  \"gpus_per_server\": %u,\n  "
          "\"allreduce_bytes\": %.0f,\n  \"alltoall_bytes\": %.0f,\n  "
          "\"compute_ms\": %.3f,\n  \"overlap\": %.3f,\n  \"catalogues\": [",
          sp->gpus, sp->gpus_per_server, sp->allreduce_bytes,
          sp->alltoall_bytes, sp->compute_s * 1e3, sp->overlap);
  for (uint32_t i = 0; i < sp->ncatalogues; i++) {
    fprintf(f, i ? ", " : "");
    json_str(f, sp->catalogues[i]);
  }
  fprintf(f, "],\n  \"trace\": ");
  if (sp->trace[0])
    json_str(f, sp->trace);
  else
    fprintf(f, "null");
  fprintf(f, ",\n  \"collectives\": [");
  for (uint32_t i = 0; i < sp->nops; i++)
    fprintf(f, "%s{\"collective\": \"%s\", \"bytes\": %.0f, \"count\": %u}",
            i ? ", " : "", plan_coll_name[sp->ops[i].kind], sp->ops[i].bytes,
            sp->ops[i].count);
  fprintf(f, "],\n  \"wall_s\": %.2f,\n  \"options\": [\n", pr->wall_s);
  for (uint32_t i = 0; i < pr->n; i++) {
    const struct result *r = &pr->r[i];
    const struct plan_option *o = &r->o;
    fprintf(f, "    {\"rank\": %u, \"name\": ", i + 1);
    json_str(f, o->name);
    fprintf(
        f, ", \"fabric\": \"%s\", \"topology\": ", plan_fabric_name(o->fabric));
    json_str(f, o->topo.name);
    fprintf(f,
            ", \"tiers\": %u, \"rail\": %s, \"nic_gpu\": \"%u:%u\", "
            "\"speed_gbps\": %g, \"radix\": %u, \"feasible\": %s",
            o->topo.tiers, o->topo.rail ? "true" : "false", o->ratio_nic,
            o->ratio_gpu, o->speed_gbps, o->radix,
            o->feasible ? "true" : "false");
    if (!o->feasible) {
      fprintf(f, ", \"why\": ");
      json_str(f, o->why);
      fprintf(f, "}%s\n", i + 1 < pr->n ? "," : "");
      continue;
    }
    fprintf(
        f,
        ", \"servers\": %u, \"nics\": %u, \"switches\": [%u, %u, %u], "
        "\"leaf_down\": %u, \"leaf_up\": %u, \"oversubscription\": "
        "%.4f, \"pods\": %u, \"links\": [%u, %u, %u], "
        "\"mean_cable_m\": [%.2f, %.2f, %.2f], \"switch_ports_used\": "
        "%llu, \"switch_ports_total\": %llu, \"switch_ports_spare\": "
        "%llu, \"capex_usd\": %.2f, \"power_w\": %.1f, \"bom\": [",
        o->servers, o->nics, o->sw[1], o->sw[2], o->sw[3], o->down, o->up,
        o->oversub, o->pods, o->links[0], o->links[1], o->links[2],
        o->cable_len[0], o->cable_len[1], o->cable_len[2],
        (unsigned long long)(o->ports_used - o->links[0]),
        (unsigned long long)o->ports_total,
        (unsigned long long)(o->ports_total - (o->ports_used - o->links[0])),
        o->capex, o->power_w);
    for (uint32_t j = 0; j < o->nitems; j++) {
      const struct plan_bom_item *it = &o->item[j];
      fprintf(f, "%s\n      {\"line\": \"%s\", \"part\": ", j ? "," : "",
              plan_bom_line_name(it->line));
      json_str(f, it->part->name);
      fprintf(f,
              ", \"qty\": %.2f, \"unit_usd\": %.2f, \"cost_usd\": %.2f, "
              "\"power_w\": %.1f, \"source\": ",
              it->qty, it->part->price_usd, it->cost, it->power);
      json_str(f, it->part->source);
      fprintf(f, "}");
    }
    fprintf(f,
            "],\n     \"basis\": \"%s\", \"pareto\": %s, \"model\": ", basis(r),
            r->pareto ? "true" : "false");
    json_perf(f, &r->model);
    fprintf(f, ",\n     \"sim\": ");
    if (r->simulated) {
      json_perf(f, &r->sim);
      char a2a[160] = "\"a2a_probe_model_us\": null, \"a2a_probe_hashed_us\": "
                      "null, \"a2a_probe_sim_us\": null";
      if (r->ph_sim.a2a)
        snprintf(a2a, sizeof a2a,
                 "\"a2a_probe_model_us\": %.3f, \"a2a_probe_hashed_us\": "
                 "%.3f, \"a2a_probe_sim_us\": %.3f",
                 r->probe_model_us[1], r->probe_cal_us[1], r->probe_sim_us[1]);
      fprintf(f,
              ",\n     \"calibration\": {\"ring_probe_model_us\": %.3f, "
              "\"ring_probe_hashed_us\": %.3f, "
              "\"ring_probe_sim_us\": %.3f, %s, \"sim_wall_s\": %.2f, "
              "\"sim_events\": %llu, \"sim_drops\": %llu, \"sim_trims\": "
              "%llu, \"sim_pauses\": %llu, \"outside_model\": %s}",
              r->probe_model_us[0], r->probe_cal_us[0], r->probe_sim_us[0], a2a,
              r->st.wall_s, (unsigned long long)r->st.events,
              (unsigned long long)r->st.drops, (unsigned long long)r->st.trims,
              (unsigned long long)r->st.pauses,
              outside_model(r) ? "true" : "false");
    } else {
      fprintf(f, "null, \"why_not_simulated\": ");
      json_str(f, r->why);
    }
    fprintf(f, "}%s\n", i + 1 < pr->n ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
}

static void write_csv(FILE *f, const struct plan_run *pr) {
  fprintf(f, "rank,option,fabric,topology,tiers,rail,nic_gpu,speed_gbps,"
             "radix,nics,leaf,spine,core,oversub,capex_usd,power_w,"
             "nic_usd,switch_usd,cable_usd,optic_usd,fibre_usd,step_ms,"
             "comm_ms,allreduce_ms,alltoall_ms,busbw_ar_gbps,"
             "busbw_a2a_gbps,usd_per_gbps,basis,pareto,model_step_ms,"
             "rs_ag_ms,busbw_rs_ag_gbps\n");
  for (uint32_t i = 0; i < pr->n; i++) {
    const struct result *r = &pr->r[i];
    const struct plan_option *o = &r->o;
    if (!o->feasible)
      continue;
    const struct plan_perf *p = best(r);
    const double *lc = o->line_cost;
    fprintf(f,
            "%u,%s,%s,%s,%u,%d,%u:%u,%g,%u,%u,%u,%u,%u,%.4f,%.2f,%.1f,"
            "%.2f,%.2f,%.2f,%.2f,%.2f,%.4f,%.4f,%.4f,%.4f,%.3f,%.3f,%.3f,"
            "%s,%d,%.4f,%.4f,%.3f\n",
            i + 1, o->name, plan_fabric_name(o->fabric), o->topo.name,
            o->topo.tiers, o->topo.rail, o->ratio_nic, o->ratio_gpu,
            o->speed_gbps, o->radix, o->nics, o->sw[1], o->sw[2], o->sw[3],
            o->oversub, o->capex, o->power_w, lc[PLAN_BOM_NIC],
            lc[PLAN_BOM_SW1] + lc[PLAN_BOM_SW2] + lc[PLAN_BOM_SW3],
            lc[PLAN_BOM_CABLE], lc[PLAN_BOM_OPTIC], lc[PLAN_BOM_FIBRE],
            p->t_step_s * 1e3, p->t_comm_s * 1e3, p->t_allreduce_s * 1e3,
            p->t_alltoall_s * 1e3, p->busbw_ar_gbps, p->busbw_a2a_gbps,
            p->usd_per_gbps, basis_label(r), r->pareto, r->model.t_step_s * 1e3,
            p->t_rs_ag_s * 1e3, p->busbw_rs_ag_gbps);
  }
}

static void write_bom_csv(FILE *f, const struct plan_run *pr) {
  fprintf(f, "option,line,part,qty,unit_usd,cost_usd,power_w,source\n");
  for (uint32_t i = 0; i < pr->n; i++) {
    const struct plan_option *o = &pr->r[i].o;
    for (uint32_t j = 0; j < o->nitems; j++) {
      const struct plan_bom_item *it = &o->item[j];
      fprintf(f, "%s,%s,%s,%.2f,%.2f,%.2f,%.1f,\"%s\"\n", o->name,
              plan_bom_line_name(it->line), it->part->name, it->qty,
              it->part->price_usd, it->cost, it->power, it->part->source);
    }
  }
}

static void write_calibration_csv(FILE *f, const struct plan_run *pr) {
  fprintf(f, "option,ring_model_us,ring_hashed_us,ring_sim_us,a2a_model_us,"
             "a2a_hashed_us,a2a_sim_us,step_model_ms,step_sim_ms,"
             "sim_wall_s\n");
  for (uint32_t i = 0; i < pr->n; i++) {
    const struct result *r = &pr->r[i];
    if (!r->simulated)
      continue;
    char a2a[80] = ",,"; /* empty: the step has no all-to-all */
    if (r->ph_sim.a2a)
      snprintf(a2a, sizeof a2a, "%.3f,%.3f,%.3f", r->probe_model_us[1],
               r->probe_cal_us[1], r->probe_sim_us[1]);
    fprintf(f, "%s,%.3f,%.3f,%.3f,%s,%.4f,%.4f,%.2f\n", r->o.name,
            r->probe_model_us[0], r->probe_cal_us[0], r->probe_sim_us[0], a2a,
            r->model.t_step_s * 1e3, r->sim.t_step_s * 1e3, r->st.wall_s);
  }
}

/* Plot data: one row per option, the Pareto front sorted by step time.
 * Options that land on (nearly) the same spot share one label ("3,4"),
 * on the first of them, so labels do not print over each other. */
static void write_plot_data(const char *dir, const struct plan_run *pr) {
  char path[1100];
  snprintf(path, sizeof path, "%s/points.dat", dir);
  FILE *f = fopen(path, "w");
  if (!f)
    return;
  /* Spots closer than 2.5% of the axes' spans share a label. */
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (uint32_t i = 0; i < pr->n; i++)
    if (pr->r[i].o.feasible) {
      double x = best(&pr->r[i])->t_step_s, y = pr->r[i].o.capex;
      x0 = fmin(x0, x), x1 = fmax(x1, x), y0 = fmin(y0, y), y1 = fmax(y1, y);
    }
  double dx = 0.025 * (x1 - x0) * 1e3, dy = 0.025 * (y1 - y0) / 1e6;
  for (int fab = 0; fab < PLAN_NFABRIC; fab++) {
    fprintf(f, "# %s\n", plan_fabric_name((enum plan_fabric)fab));
    for (uint32_t i = 0; i < pr->n; i++) {
      const struct result *r = &pr->r[i];
      if (!r->o.feasible || (int)r->o.fabric != fab)
        continue;
      double x = best(r)->t_step_s * 1e3, y = r->o.capex / 1e6;
      char label[128] = "";
      bool first = true;
      for (uint32_t j = 0; j < pr->n; j++) {
        const struct result *q = &pr->r[j];
        if (!q->o.feasible || fabs(best(q)->t_step_s * 1e3 - x) > dx ||
            fabs(q->o.capex / 1e6 - y) > dy)
          continue;
        if (j < i)
          first = false;
        size_t l = strlen(label);
        snprintf(label + l, sizeof label - l, "%s%u", l ? "," : "", j + 1);
      }
      fprintf(f, "%.4f %.4f \"%s\" %s\n", x, y, first ? label : "", basis(r));
    }
    fprintf(f, "\n\n");
  }
  fprintf(f, "# pareto\n");
  for (uint32_t i = 0; i < pr->n; i++)
    if (pr->r[i].pareto)
      fprintf(f, "%.4f %.4f\n", best(&pr->r[i])->t_step_s * 1e3,
              pr->r[i].o.capex / 1e6);
  fclose(f);
}

static void write_plots(const char *dir, const struct plan_run *pr) {
  write_plot_data(dir, pr);
  char path[1100];
  snprintf(path, sizeof path, "%s/plots.gp", dir);
  FILE *f = fopen(path, "w");
  if (!f)
    return;
  uint32_t nf = 0;
  for (uint32_t i = 0; i < pr->n; i++)
    nf += pr->r[i].o.feasible;
  fprintf(f,
          "# uroce plan: cost against step time, and the BOM per option.\n"
          "set terminal pngcairo size 1000,640 noenhanced font ',11'\n"
          "set output 'cost_vs_step.png'\n"
          "set title '%s: network capex vs training step time (labels = "
          "rank in plan.csv; hollow = analytical only)'\n"
          "set xlabel 'step time (ms)'\nset ylabel 'network capex (M$)'\n"
          "set grid\nset key top right\nset offsets graph 0.06, graph 0.06, "
          "graph 0.08, graph 0.08\n"
          "plot 'points.dat' index 3 using 1:2 with lines lw 2 dt 2 lc "
          "rgb '#555555' title 'Pareto front', \\\n",
          pr->sp.name);
  static const char *col[] = {"#1b9e77", "#d95f02", "#7570b3"};
  static const int pt[] = {7, 5, 9}; /* circle, square, triangle */
  for (int fab = 0; fab < PLAN_NFABRIC; fab++)
    fprintf(f,
            "  'points.dat' index %d using 1:(strcol(4) eq 'sim' ? $2 : "
            "1/0) with points pt %d ps 1.8 lc rgb '%s' title '%s', \\\n"
            "  'points.dat' index %d using 1:(strcol(4) eq 'model' ? $2 : "
            "1/0) with points pt %d ps 1.8 lw 2 lc rgb '%s' notitle, \\\n"
            "  'points.dat' index %d using 1:2:3 with labels offset 1.2,0.8 "
            "notitle%s\n",
            fab, pt[fab], col[fab], plan_fabric_name((enum plan_fabric)fab),
            fab, pt[fab] - 1, col[fab], fab,
            fab < PLAN_NFABRIC - 1 ? ", \\" : "");
  fprintf(f,
          "\nset output 'bom.png'\n"
          "set terminal pngcairo size %u,640 noenhanced font ',10'\n"
          "set title '%s: bill of materials per option (rank order)'\n"
          "set datafile separator ','\n"
          "set style data histograms\nset style histogram rowstacked\n"
          "set style fill solid 0.85 border -1\nset boxwidth 0.7\n"
          "set xtics rotate by -40 left\nset ylabel 'capex (M$)'\n"
          "set xlabel ''\nset key outside right top Left reverse\n"
          "set offsets 0, 0, 0, 0\nset bmargin 11\n"
          "plot 'plan.csv' every ::1 using ($17/1e6):xtic(2) title 'NICs', "
          "'' every ::1 using ($18/1e6) title 'switches', "
          "'' every ::1 using ($19/1e6) title 'DAC/AOC', "
          "'' every ::1 using ($20/1e6) title 'transceivers', "
          "'' every ::1 using ($21/1e6) title 'fibre'\n",
          nf * 70 + 300 < 1000 ? 1000 : nf * 70 + 300, pr->sp.name);
  fclose(f);
}

static int write_all(const char *dir, const struct plan_run *pr,
                     const struct opts *op) {
  if (tool_mkdirs(dir)) {
    fprintf(stderr, "uroce plan: %s: %s\n", dir, strerror(errno));
    return 1;
  }
  static const char *names[] = {"plan.json", "plan.csv", "bom.csv",
                                "calibration.csv", "table.txt"};
  for (int i = 0; i < 5; i++) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    FILE *f = fopen(path, "w");
    if (!f) {
      fprintf(stderr, "uroce plan: %s: %s\n", path, strerror(errno));
      return 1;
    }
    if (i == 0)
      write_json(f, pr);
    else if (i == 1)
      write_csv(f, pr);
    else if (i == 2)
      write_bom_csv(f, pr);
    else if (i == 3)
      write_calibration_csv(f, pr);
    else {
      print_table(f, pr);
      print_calibration(f, pr);
    }
    fclose(f);
  }
  write_plots(dir, pr);
  if (op->plots)
    tool_gnuplot("plan", dir, "plots.gp");
  return 0;
}

static int run_spec(const char *path, const char *extra_cat,
                    const struct opts *op, const char *dir,
                    struct plan_run *pr) {
  char err[1024] = "";
  memset(pr, 0, sizeof *pr);
  if (plan_spec_load(path, &pr->sp, err, sizeof err)) {
    fprintf(stderr, "uroce plan: %s\n", err);
    return 2;
  }
  if (extra_cat) {
    if (plan_catalogue_load(extra_cat, &pr->sp.cat, err, sizeof err)) {
      fprintf(stderr, "uroce plan: %s\n", err);
      return 2;
    }
    if (pr->sp.ncatalogues < 4)
      snprintf(pr->sp.catalogues[pr->sp.ncatalogues++],
               sizeof pr->sp.catalogues[0], "%s", extra_cat);
  }
  double t0 = mono_s();
  if (evaluate(pr, op, err, sizeof err)) {
    fprintf(stderr, "uroce plan: %s\n", err);
    return 2;
  }
  pr->wall_s = mono_s() - t0;
  char outdir[1024];
  if (dir)
    snprintf(outdir, sizeof outdir, "%s", dir);
  else
    snprintf(outdir, sizeof outdir, "plan-out/%s", pr->sp.name);
  print_table(stdout, pr);
  print_calibration(stdout, pr);
  int rc = write_all(outdir, pr, op);
  printf("\n%u options in %.1f s wall; results in %s/\n", pr->n, pr->wall_s,
         outdir);
  return rc;
}

static const struct result *find(const struct plan_run *pr, const char *name) {
  for (uint32_t i = 0; i < pr->n; i++)
    if (!strcmp(pr->r[i].o.name, name))
      return &pr->r[i];
  return NULL;
}

static void print_compare(FILE *f, const char *la, const struct plan_run *a,
                          const char *lb, const struct plan_run *b) {
  fprintf(f, "\nA = %s, B = %s\n", la, lb);
  fprintf(f, "%-28s %9s %9s %7s %9s %9s %7s\n", "option", "A capex$M",
          "B capex$M", "B/A", "A step ms", "B step ms", "B/A");
  for (uint32_t i = 0; i < a->n; i++) {
    const struct result *x = &a->r[i], *y = find(b, x->o.name);
    if (!x->o.feasible)
      continue;
    if (!y || !y->o.feasible) {
      fprintf(f, "%-28s %9.2f %9s\n", x->o.name, x->o.capex / 1e6, "-");
      continue;
    }
    fprintf(f, "%-28s %9.2f %9.2f %7.3f %9.2f %9.2f %7.3f\n", x->o.name,
            x->o.capex / 1e6, y->o.capex / 1e6, y->o.capex / x->o.capex,
            best(x)->t_step_s * 1e3, best(y)->t_step_s * 1e3,
            best(y)->t_step_s / best(x)->t_step_s);
  }
  for (uint32_t i = 0; i < b->n; i++)
    if (b->r[i].o.feasible && !find(a, b->r[i].o.name))
      fprintf(f, "%-28s %9s %9.2f\n", b->r[i].o.name, "-",
              b->r[i].o.capex / 1e6);
  fprintf(f, "best step: A %s, B %s\n", a->n ? a->r[0].o.name : "-",
          b->n ? b->r[0].o.name : "-");
}

static int compare(const char *a, const char *b, const char *cat_b,
                   const struct opts *op) {
  const char *base = op->out ? op->out : "plan-out/compare";
  char da[1024], db[1024];
  snprintf(da, sizeof da, "%s/A", base);
  snprintf(db, sizeof db, "%s/B", base);
  struct plan_run ra, rb;
  int rc = run_spec(a, op->catalogue, op, da, &ra);
  if (!rc)
    rc = run_spec(b, cat_b ? cat_b : op->catalogue, op, db, &rb);
  if (rc)
    return rc;
  char la[600], lb[1200];
  snprintf(la, sizeof la, "%s", a);
  if (cat_b)
    snprintf(lb, sizeof lb, "%s with catalogue %s", b, cat_b);
  else
    snprintf(lb, sizeof lb, "%s", b);
  print_compare(stdout, la, &ra, lb, &rb);
  char path[1100];
  snprintf(path, sizeof path, "%s/compare.txt", base);
  FILE *f = fopen(path, "w");
  if (f) {
    print_compare(f, la, &ra, lb, &rb);
    fclose(f);
  }
  free(ra.r);
  free(rb.r);
  return 0;
}

int cmd_plan(int argc, char **argv) {
  static const struct option lo[] = {
      {"out", required_argument, 0, 'o'},
      {"catalogue", required_argument, 0, 'C'},
      {"compare", no_argument, 0, 'c'},
      {"compare-catalogue", required_argument, 0, 'K'},
      {"analytical", no_argument, 0, 'a'},
      {"quiet", no_argument, 0, 'q'},
      {"no-plots", no_argument, 0, 'P'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  struct opts op = {.plots = true};
  bool cmp = false;
  const char *cmp_cat = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "o:qh", lo, 0)) != -1) {
    switch (c) {
    case 'o':
      op.out = optarg;
      break;
    case 'C':
      op.catalogue = optarg;
      break;
    case 'c':
      cmp = true;
      break;
    case 'K':
      cmp_cat = optarg;
      break;
    case 'a':
      op.analytical = true;
      break;
    case 'q':
      op.quiet = true;
      break;
    case 'P':
      op.plots = false;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  int n = argc - optind;
  if (cmp && cmp_cat) {
    fprintf(stderr, "uroce plan: --compare and --compare-catalogue are "
                    "alternatives\n");
    return 2;
  }
  if (cmp ? n != 2 : n != 1) {
    usage(stderr);
    return 2;
  }
  if (cmp)
    return compare(argv[optind], argv[optind + 1], NULL, &op);
  if (cmp_cat)
    return compare(argv[optind], argv[optind], cmp_cat, &op);
  struct plan_run pr;
  int rc = run_spec(argv[optind], op.catalogue, &op, op.out, &pr);
  free(pr.r);
  return rc;
}
