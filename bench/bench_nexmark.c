/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-bench-nexmark: one Nexmark query over events generated inside the
 * process, run to the end of its input, the program the peer harness
 * (bench_peers.c) runs beside Flink's and DBSP's.  The command line, the
 * event times and the canonical output are the contract of bench/peers/
 * (bench/README.md, "Beside Flink and DBSP"):
 *
 *   sluice-bench-nexmark --query q0|q1|q2|q3|q4|q5|q7|q8 --events N
 *       [--seed S (42)] [--rate R (10000000)] [--checkpoint-ms MS (1000;
 *       0: none)] [--state heap|hashmap (sluice has one backend)]
 *       [--ckpt-dir DIR (a fresh temp dir, removed at exit)] [--out FILE]
 *
 * Sources.  One source per stream the query reads (bid, person, auction;
 * the schemas of stream_io.h), parallelism 1, one split each.  Every
 * source walks the same event numbers 0..N-1, asks the cheap kind test
 * (sl_nexmark_kind) of each, and generates only the events of its kind;
 * the first source also generates, and drops, the events of the kinds no
 * source of the query reads.  So each event is generated exactly once, as
 * Nexmark's single generator does (its cost is part of the figure).
 * date_time of event i is 1700000000000000 + i * 1000000 / R (integer
 * microseconds); ingest_time = date_time (nothing reads it for the
 * answer).  Watermarks are monotonous on date_time; the end of input is the
 * final watermark (every window fires, every q4 auction closes).  A
 * source's position is the next event number, so a checkpoint holds it.
 *
 * Sink.  With --out, one line per result row: the query's answer fields,
 * TAB-separated (int64 and timestamps decimal, float64 "%.3f", strings
 * raw), unsorted; q4 keeps the last value of each category and writes
 * those at the end (its final answer, not its changelog).  Without --out
 * it counts rows only.  At the end, one line on stdout:
 * "query=qN events=N results=R".
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "queries.h"
#include "runutil.h"
#include "stream_io.h"

#define T0_US 1700000000000000ll
#define BATCH 256

typedef struct opts_s {
  const char *query;
  uint64_t events, seed, rate;
  int64_t checkpoint_ms;
  const char *ckpt_dir, *out;
} opts_t;

/* ---- the source -------------------------------------------------------- */

typedef struct gen_s {
  sl_nexmark_config_t cfg;
  uint64_t n_events, rate;
  sl_nex_kind_t kind;   /* the rows this source emits */
  unsigned drop_kinds;  /* other kinds it generates and drops (bitmask) */
} gen_t;

typedef struct gen_reader_s {
  const gen_t *g;
  uint64_t next;
  bool is_ended;
  sl_nex_event_t ev;
} gen_reader_t;

static int64_t date_time_us(uint64_t rate, uint64_t i) {
  return T0_US + (int64_t)(i * 1000000u / rate);
}

static int gen_plan(void *ctx, uint32_t parallelism, sl_split_list_t *l,
                    sl_error_t **out_err) {
  const gen_t *g = ctx;
  (void)parallelism;
  if (sl_split_list_addf(l, "nexmark/%u/seed=%llu", (unsigned)g->kind,
                         (unsigned long long)g->cfg.seed) != SL_OK)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  return SL_OK;
}

static int gen_open(void *ctx, const sl_reader_init_t *init, void **out,
                    sl_error_t **out_err) {
  gen_reader_t *r = calloc(1, sizeof(*r));
  if (r == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  r->g = ctx;
  r->is_ended = init->n_splits == 0;
  for (uint32_t i = 0; i < init->n_splits; i++) {
    const sl_split_init_t *si = &init->splits[i];
    if (si->position == NULL) continue;
    uint64_t pos[2];
    if (si->position_len != sizeof(pos)) {
      free(r);
      return sl_error_set(out_err, SL_ECORRUPT, "nexmark source %s: a "
                          "position of %zu bytes, not %zu", si->id,
                          si->position_len, sizeof(pos));
    }
    memcpy(pos, si->position, sizeof(pos));
    const gen_t *g = r->g;
    if (pos[1] != g->n_events || pos[0] > pos[1]) {
      free(r);
      return sl_error_set(out_err, SL_EINVAL, "nexmark source %s: position "
                          "%llu of %llu events does not fit this run's %llu",
                          si->id, (unsigned long long)pos[0],
                          (unsigned long long)pos[1],
                          (unsigned long long)g->n_events);
    }
    r->next = pos[0];
  }
  *out = r;
  return SL_OK;
}

static int gen_poll(void *rd, sl_source_out_t *out, sl_error_t **out_err) {
  gen_reader_t *r = rd;
  const gen_t *g = r->g;
  if (r->is_ended) return SL_POLL_END;
  uint64_t end = r->next + BATCH;
  if (end > g->n_events) end = g->n_events;
  while (r->next < end) {
    uint64_t i = r->next++;
    sl_nex_kind_t k = sl_nexmark_kind(&g->cfg, i);
    if (k != g->kind) {
      if (g->drop_kinds & (1u << k))
        sl_nexmark_generate(&g->cfg, i, date_time_us(g->rate, i), &r->ev);
      continue;
    }
    int64_t t = date_time_us(g->rate, i);
    sl_nexmark_generate(&g->cfg, i, t, &r->ev);
    sl_row_builder_t *b = sl_source_builder(out);
    sl_nexmark_row(&r->ev, t, t, b);
    if (!sl_source_emit_builder(out, out_err)) {
      if (out_err && *out_err) return sl_error_code(*out_err);
      return SL_POLL_MORE;
    }
  }
  if (r->next >= g->n_events) {
    r->is_ended = true;
    sl_source_split_finished(out, 0);
    return SL_POLL_END;
  }
  return SL_POLL_MORE;
}

static int gen_position(void *rd, uint32_t split, sl_bytes_t *out) {
  gen_reader_t *r = rd;
  (void)split;
  uint64_t pos[2] = {r->next, r->g->n_events};
  return sl_bytes_append(out, pos, sizeof(pos));
}

static void gen_close(void *rd) { free(rd); }
static void gen_destroy(void *ctx) { (void)ctx; }

static const sl_source_vt_t gen_vt = {"nexmark",    gen_plan,     gen_open,
                                      gen_poll,     gen_position, gen_close,
                                      gen_destroy};

typedef struct sources_s {
  const sl_workload_t *w;
  gen_t gen[3];
  bool is_first_taken;
  unsigned unread; /* kinds no source of the query reads */
  sl_schema_t **schemas;
  uint32_t *n_schemas;
} sources_t;

static sl_stream_t *source(void *user, sl_job_t *job, const char *name) {
  sources_t *s = user;
  int k = sl_workload_stream(s->w, name);
  sl_schema_t *schema;
  if (k < 0 || k > 2 ||
      sl_ring_stream_schema(s->w, (uint32_t)k, &schema, NULL) != SL_OK)
    return NULL;
  s->schemas[(*s->n_schemas)++] = schema;
  gen_t *g = &s->gen[k];
  if (!s->is_first_taken) g->drop_kinds = s->unread;
  s->is_first_taken = true;
  sl_stream_t *st = sl_job_source(job, name, &gen_vt, g, schema);
  sl_watermark_config_t wc;
  sl_watermark_config_init(&wc);
  wc.time_field = "date_time";
  wc.strategy = SL_WM_MONOTONOUS;
  return sl_source_watermarks(st, &wc);
}

/* ---- the canonical sink ------------------------------------------------ */

#define MAX_CATEGORIES 64

typedef struct csink_s {
  FILE *f;            /* NULL: count only */
  uint32_t n_fields;  /* the answer's fields: the first n of the schema */
  bool is_final;      /* q4: the last value per category */
  _Atomic uint64_t results;
} csink_t;

typedef struct cwriter_s {
  csink_t *k;
  const sl_schema_t *schema;
  uint64_t results;
  /* q4 */
  uint32_t n_cat;
  int64_t cat[MAX_CATEGORIES];
  char *line[MAX_CATEGORIES];
  char buf[8192];
} cwriter_t;

static int cw_open(void *ctx, const sl_sink_init_t *init, void **out,
                   sl_error_t **out_err) {
  csink_t *k = ctx;
  if (sl_schema_n_fields(init->schema) < k->n_fields)
    return sl_error_set(out_err, SL_EINVAL, "canonical sink: %u fields, "
                        "fewer than the answer's %u",
                        sl_schema_n_fields(init->schema), k->n_fields);
  cwriter_t *w = calloc(1, sizeof(*w));
  if (w == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  w->k = k;
  w->schema = init->schema;
  *out = w;
  return SL_OK;
}

/* The canonical line of row (no newline) into w->buf; its length. */
static size_t cw_format(cwriter_t *w, const sl_row_t *row) {
  size_t n = 0, cap = sizeof(w->buf);
  for (uint32_t i = 0; i < w->k->n_fields && n < cap; i++) {
    if (i) w->buf[n++] = '\t';
    sl_type_id_t t = sl_schema_field(w->schema, i)->type.id;
    int m = 0;
    if (sl_row_is_null(row, i)) {
      m = snprintf(w->buf + n, cap - n, "NULL");
    } else if (t == SL_TYPE_FLOAT64) {
      m = snprintf(w->buf + n, cap - n, "%.3f", sl_row_get_f64(row, i));
    } else if (t == SL_TYPE_STRING || t == SL_TYPE_BYTES) {
      sl_slice_t s = sl_row_get_str(row, i);
      size_t len = s.len < cap - n ? s.len : cap - n;
      memcpy(w->buf + n, s.ptr, len);
      m = (int)len;
    } else {
      m = snprintf(w->buf + n, cap - n, "%lld",
                   (long long)sl_row_get_i64(row, i));
    }
    if (m > 0) n += (size_t)m < cap - n ? (size_t)m : cap - n - 1;
  }
  return n < cap ? n : cap - 1;
}

static int cw_write(void *wr, const sl_row_t *row, sl_error_t **out_err) {
  cwriter_t *w = wr;
  sl_row_kind_t kind = sl_row_kind(row);
  if (!w->k->is_final) {
    if (kind != SL_ROW_INSERT && kind != SL_ROW_UPDATE_AFTER)
      return sl_error_set(out_err, SL_EINVAL, "canonical sink: a %s row in "
                          "an append-only answer", sl_row_kind_name(kind));
    w->results++;
    if (w->k->f) {
      size_t n = cw_format(w, row);
      w->buf[n++] = '\n';
      if (fwrite(w->buf, 1, n, w->k->f) != n)
        return sl_error_set(out_err, SL_EIO, "canonical sink: write: %s",
                            strerror(errno));
    }
    return SL_OK;
  }
  /* The final value per key (field 0): +I/+U replace it, -D removes it,
   * -U is followed by its +U. */
  if (kind == SL_ROW_UPDATE_BEFORE) return SL_OK;
  int64_t key = sl_row_get_i64(row, 0);
  uint32_t i = 0;
  while (i < w->n_cat && w->cat[i] != key) i++;
  if (kind == SL_ROW_DELETE) {
    if (i < w->n_cat) {
      free(w->line[i]);
      w->cat[i] = w->cat[w->n_cat - 1];
      w->line[i] = w->line[--w->n_cat];
    }
    return SL_OK;
  }
  if (i == w->n_cat) {
    if (w->n_cat == MAX_CATEGORIES)
      return sl_error_set(out_err, SL_EOVERFLOW, "canonical sink: more than %d "
                          "keys in a final answer", MAX_CATEGORIES);
    w->cat[w->n_cat] = key;
    w->line[w->n_cat++] = NULL;
  }
  size_t n = cw_format(w, row);
  char *s = realloc(w->line[i], n + 2);
  if (s == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  memcpy(s, w->buf, n);
  s[n] = '\n';
  s[n + 1] = 0;
  w->line[i] = s;
  return SL_OK;
}

static int cw_close(void *wr, bool is_success, sl_error_t **out_err) {
  cwriter_t *w = wr;
  int rc = SL_OK;
  if (w->k->is_final) {
    w->results = w->n_cat;
    for (uint32_t i = 0; i < w->n_cat; i++) {
      if (is_success && w->k->f && fputs(w->line[i], w->k->f) == EOF)
        rc = sl_error_set(out_err, SL_EIO, "canonical sink: write: %s",
                          strerror(errno));
      free(w->line[i]);
    }
  }
  atomic_fetch_add(&w->k->results, w->results);
  free(w);
  return rc;
}

static void cw_destroy(void *ctx) { (void)ctx; }

static const sl_sink_vt_t canon_vt = {"canonical", cw_open, cw_write, NULL,
                                      cw_close,    cw_destroy};

/* The answer's fields of each query (the first n of its output). */
static uint32_t answer_fields(const char *q) {
  static const struct { const char *q; uint32_t n; } t[] = {
      {"q0", 5}, {"q1", 5}, {"q2", 2}, {"q3", 4},
      {"q4", 3}, {"q5", 3}, {"q7", 6}, {"q8", 3}};
  for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
    if (strcmp(t[i].q, q) == 0) return t[i].n;
  return 0;
}

/* ---- main -------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: sluice-bench-nexmark --query q0|q1|q2|q3|q4|q5|q7|q8 "
          "--events N\n"
          "         [--seed S (42)] [--rate R events/s of event time "
          "(10000000)]\n"
          "         [--checkpoint-ms MS (1000; 0: none)] [--state heap]\n"
          "         [--ckpt-dir DIR (a fresh temp dir, removed at exit)]\n"
          "         [--out FILE (the canonical answer; without it, count "
          "only)]\n");
}

static int run(const opts_t *o, const sl_query_t *q) {
  sl_workload_t w;
  sl_workload_defaults(&w);
  w.kind = SL_WORKLOAD_NEXMARK;
  w.needed = q->needed;
  w.splits = 1;
  w.nexmark.seed = o->seed;
  w.nexmark.events_per_second = (double)o->rate;
  if (sl_workload_init(&w) != 0) {
    fprintf(stderr, "sluice-bench-nexmark: bad workload\n");
    return 1;
  }
  sl_nexmark_config_t cfg;
  sl_nexmark_config_init(&cfg);
  cfg.seed = o->seed;
  cfg.events_per_second = (double)o->rate;

  char tmp[64] = "";
  const char *ckdir = o->ckpt_dir;
  if (o->checkpoint_ms > 0 && ckdir == NULL) {
    snprintf(tmp, sizeof(tmp), "/tmp/sluice-nexmark-ckpt-XXXXXX");
    if (mkdtemp(tmp) == NULL) {
      fprintf(stderr, "sluice-bench-nexmark: mkdtemp: %s\n", strerror(errno));
      return 1;
    }
    ckdir = tmp;
  }
  FILE *f = NULL;
  if (o->out && (f = fopen(o->out, "w")) == NULL) {
    fprintf(stderr, "sluice-bench-nexmark: cannot write %s: %s\n", o->out,
            strerror(errno));
    if (tmp[0]) sl_bench_rm_rf(tmp);
    sl_workload_close(&w);
    return 1;
  }
  if (f) setvbuf(f, NULL, _IOFBF, 1 << 20);

  sl_schema_t *schemas[8];
  uint32_t n_schemas = 0;
  sources_t src;
  memset(&src, 0, sizeof(src));
  src.w = &w;
  src.schemas = schemas;
  src.n_schemas = &n_schemas;
  src.unread = 7u & ~q->needed;
  for (int k = 0; k < 3; k++) {
    src.gen[k].cfg = cfg;
    src.gen[k].n_events = o->events;
    src.gen[k].rate = o->rate;
    src.gen[k].kind = (sl_nex_kind_t)k;
  }
  csink_t sink;
  memset(&sink, 0, sizeof(sink));
  sink.f = f;
  sink.n_fields = answer_fields(q->name);
  sink.is_final = strcmp(q->name, "q4") == 0;
  atomic_init(&sink.results, 0);

  sl_job_config_t jc;
  sl_job_config_init(&jc);
  jc.name = q->name;
  jc.parallelism = 1;
  jc.n_workers = 1;
  if (o->checkpoint_ms > 0) {
    jc.checkpoint.dir = ckdir;
    jc.checkpoint.interval_ms = o->checkpoint_ms;
  }
  sl_job_t *job = NULL;
  sl_error_t *err = NULL;
  int rc = sl_job_create(&jc, &job, &err);
  if (rc == SL_OK) {
    sl_stream_t *s = sl_query_build(job, q, source, &src, schemas,
                                    &n_schemas, &err);
    rc = s == NULL ? (err ? sl_error_code(err) : SL_EINVAL)
                   : sl_stream_sink(s, "canonical", &canon_vt, &sink);
    if (s != NULL && rc != SL_OK && err == NULL && sl_job_error(job))
      sl_error_set(&err, rc, "%s", sl_error_message(sl_job_error(job)));
  }
  if (rc == SL_OK) rc = sl_job_run(job, &err);
  /* As the peers do: how many checkpoints the run took (the last one's
   * id; an attempt cut by the end of input is not among them). */
  sl_checkpoint_stats_t cs;
  if (rc == SL_OK && o->checkpoint_ms > 0)
    fprintf(stderr, "sluice-bench-nexmark: %llu checkpoints (every %lld "
            "ms, heap)\n",
            sl_job_last_checkpoint(job, &cs) != SL_OK ? 0ull
            : cs.result == SL_OK ? (unsigned long long)cs.id
                                 : (unsigned long long)cs.id - 1,
            (long long)o->checkpoint_ms);
  else if (rc == SL_OK)
    fprintf(stderr, "sluice-bench-nexmark: no checkpoints "
            "(--checkpoint-ms 0)\n");
  if (rc != SL_OK)
    fprintf(stderr, "sluice-bench-nexmark: %s: %s\n", q->name,
            err ? sl_error_message(err) : "the job failed");
  sl_error_destroy(err);
  sl_job_destroy(job);
  for (uint32_t i = 0; i < n_schemas; i++) sl_schema_unref(schemas[i]);
  if (f && fclose(f) != 0 && rc == SL_OK) {
    fprintf(stderr, "sluice-bench-nexmark: %s: %s\n", o->out,
            strerror(errno));
    rc = SL_EIO;
  }
  if (tmp[0]) sl_bench_rm_rf(tmp);
  sl_workload_close(&w);
  if (rc != SL_OK) return 1;
  printf("query=%s events=%llu results=%llu\n", q->name,
         (unsigned long long)o->events,
         (unsigned long long)atomic_load(&sink.results));
  return 0;
}

int main(int argc, char **argv) {
  opts_t o = {NULL, 0, 42, 10000000, 1000, NULL, NULL};
  bool has_events = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t n = 0;
    bool is_num = v && sl_bench_parse_u64(v, &n);
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (v == NULL) {
      fprintf(stderr, "sluice-bench-nexmark: %s needs a value\n", a);
      return 2;
    }
    i++;
    if (strcmp(a, "--query") == 0) o.query = v;
    else if (strcmp(a, "--ckpt-dir") == 0) o.ckpt_dir = v;
    else if (strcmp(a, "--out") == 0) o.out = v;
    else if (strcmp(a, "--state") == 0) {
      if (strcmp(v, "heap") != 0 && strcmp(v, "hashmap") != 0) {
        fprintf(stderr, "sluice-bench-nexmark: --state %s: sluice has one "
                "state backend, heap (or say hashmap)\n", v);
        return 2;
      }
    } else if (!is_num) {
      fprintf(stderr, "sluice-bench-nexmark: %s %s: not a whole number "
              "(or an unknown option)\n", a, v);
      usage(stderr);
      return 2;
    } else if (strcmp(a, "--events") == 0) o.events = n, has_events = true;
    else if (strcmp(a, "--seed") == 0) o.seed = n;
    else if (strcmp(a, "--rate") == 0) o.rate = n;
    else if (strcmp(a, "--checkpoint-ms") == 0) o.checkpoint_ms = (int64_t)n;
    else {
      fprintf(stderr, "sluice-bench-nexmark: unknown option %s\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (o.query == NULL || !has_events) {
    usage(stderr);
    return 2;
  }
  if (strcmp(o.query, "q6") == 0) {
    fprintf(stderr, "sluice-bench-nexmark: q6 is not run (Flink's Nexmark "
            "does not support it; bench/queries.c has none)\n");
    return 2;
  }
  const sl_query_t *q = sl_query_find(o.query);
  if (q == NULL || q->workload != SL_WORKLOAD_NEXMARK ||
      answer_fields(q->name) == 0) {
    fprintf(stderr, "sluice-bench-nexmark: no query '%s' (q0 q1 q2 q3 q4 q5 "
            "q7 q8)\n", o.query);
    return 2;
  }
  if (o.rate == 0 || o.rate > 1000000000000ull) {
    fprintf(stderr, "sluice-bench-nexmark: --rate must be in [1, 1e12]\n");
    return 2;
  }
  return run(&o, q);
}
