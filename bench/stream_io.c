/* SPDX-License-Identifier: Apache-2.0 */
/* The ring source and the latency sink (stream_io.h). */
#include "stream_io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 256

int64_t sl_mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- schemas ----------------------------------------------------------- */

#define I64 {SL_TYPE_INT64, 0, 0, false}
#define STR {SL_TYPE_STRING, 0, 0, false}
#define TS {SL_TYPE_TIMESTAMP, 0, 0, false}

static const sl_field_t keys_fields[] = {
    {"key", I64}, {"value", I64}, {"date_time", TS}, {"ingest_time", TS}};
static const sl_field_t bid_fields[] = {
    {"auction", I64}, {"bidder", I64}, {"price", I64}, {"channel", STR},
    {"url", STR}, {"date_time", TS}, {"extra", STR}, {"ingest_time", TS}};
static const sl_field_t person_fields[] = {
    {"id", I64}, {"name", STR}, {"email_address", STR},
    {"credit_card", STR}, {"city", STR}, {"state", STR}, {"date_time", TS},
    {"extra", STR}, {"ingest_time", TS}};
static const sl_field_t auction_fields[] = {
    {"id", I64}, {"item_name", STR}, {"description", STR},
    {"initial_bid", I64}, {"reserve", I64}, {"date_time", TS},
    {"expires", TS}, {"seller", I64}, {"category", I64}, {"extra", STR},
    {"ingest_time", TS}};

int sl_ring_stream_schema(const sl_workload_t *w, uint32_t stream,
                          sl_schema_t **out, sl_error_t **out_err) {
  const sl_field_t *f = keys_fields;
  uint32_t n = 4;
  if (w->kind == SL_WORKLOAD_NEXMARK) {
    if (stream == SL_NEX_BID) f = bid_fields, n = 8;
    else if (stream == SL_NEX_PERSON) f = person_fields, n = 9;
    else f = auction_fields, n = 11;
  }
  return sl_schema_create(f, n, out, out_err);
}

/* ---- the ring source --------------------------------------------------- */

typedef struct rsrc_s {
  const sl_workload_t *w;
  const char *prefix;
  uint32_t stream;
} rsrc_t;

typedef struct rreader_s {
  const rsrc_t *src;
  uint32_t n;             /* assigned splits */
  uint32_t split[SL_WORKLOAD_MAX_SPLITS];
  sl_ring_t ring[SL_WORKLOAD_MAX_SPLITS];
  bool is_ended[SL_WORKLOAD_MAX_SPLITS];
  uint32_t next;          /* round-robin over splits */
} rreader_t;

static int rsrc_plan(void *ctx, uint32_t parallelism, sl_split_list_t *l,
                     sl_error_t **out_err) {
  const rsrc_t *s = ctx;
  (void)parallelism;
  for (uint32_t i = 0; i < s->w->splits; i++) {
    char path[4096];
    sl_workload_ring_path(s->w, s->prefix, s->stream, i, path, sizeof(path));
    sl_ring_t r;
    int rc = sl_ring_open(path, &r);
    if (rc != 0)
      return sl_error_set(out_err, SL_EIO, "ring source: cannot open the "
                          "ring '%s': %s", path,
                          rc == -EPROTO ? "not a ring" : strerror(-rc));
    sl_ring_close(&r);
    if (sl_split_list_add(l, path) != SL_OK)
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  return SL_OK;
}

static void rreader_close(void *rd) {
  rreader_t *r = rd;
  for (uint32_t i = 0; i < r->n; i++) sl_ring_close(&r->ring[i]);
  free(r);
}

static int rreader_open(void *ctx, const sl_reader_init_t *init,
                        void **out_reader, sl_error_t **out_err) {
  const rsrc_t *s = ctx;
  rreader_t *r = calloc(1, sizeof(*r));
  if (r == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  r->src = s;
  for (uint32_t i = 0; i < init->n_splits; i++) {
    const sl_split_init_t *si = &init->splits[i];
    char path[4096];
    sl_workload_ring_path(s->w, s->prefix, s->stream, si->split, path,
                          sizeof(path));
    if (si->position != NULL) {
      rreader_close(r);
      return sl_error_set(out_err, SL_ENOTSUP, "ring source '%s': "
                          "cannot start from a checkpointed position (a "
                          "ring does not replay; benchmark runs are not "
                          "restored)", path);
    }
    int rc = sl_ring_open(path, &r->ring[r->n]);
    if (rc != 0) {
      rreader_close(r);
      return sl_error_set(out_err, SL_EIO, "ring source: cannot open the "
                          "ring '%s': %s", path,
                          rc == -EPROTO ? "not a ring" : strerror(-rc));
    }
    r->split[r->n++] = si->split;
  }
  *out_reader = r;
  return SL_OK;
}

static void set_str(sl_row_builder_t *b, uint32_t i, sl_nex_str_t s) {
  sl_row_builder_set_str(b, i, s.p, s.len);
}

void sl_nexmark_row(const sl_nex_event_t *ev, int64_t date_time_us,
                    int64_t ingest_us, sl_row_builder_t *b) {
  if (ev->kind == SL_NEX_BID) {
    sl_row_builder_set_i64(b, 0, ev->bid.auction);
    sl_row_builder_set_i64(b, 1, ev->bid.bidder);
    sl_row_builder_set_i64(b, 2, ev->bid.price);
    set_str(b, 3, ev->bid.channel);
    set_str(b, 4, ev->bid.url);
    sl_row_builder_set_i64(b, 5, date_time_us);
    set_str(b, 6, ev->bid.extra);
    sl_row_builder_set_i64(b, 7, ingest_us);
  } else if (ev->kind == SL_NEX_PERSON) {
    sl_row_builder_set_i64(b, 0, ev->person.id);
    set_str(b, 1, ev->person.name);
    set_str(b, 2, ev->person.email_address);
    set_str(b, 3, ev->person.credit_card);
    set_str(b, 4, ev->person.city);
    set_str(b, 5, ev->person.state);
    sl_row_builder_set_i64(b, 6, date_time_us);
    set_str(b, 7, ev->person.extra);
    sl_row_builder_set_i64(b, 8, ingest_us);
  } else {
    sl_row_builder_set_i64(b, 0, ev->auction.id);
    set_str(b, 1, ev->auction.item_name);
    set_str(b, 2, ev->auction.description);
    sl_row_builder_set_i64(b, 3, ev->auction.initial_bid);
    sl_row_builder_set_i64(b, 4, ev->auction.reserve);
    sl_row_builder_set_i64(b, 5, date_time_us);
    sl_row_builder_set_i64(b, 6, ev->auction.expires_us);
    sl_row_builder_set_i64(b, 7, ev->auction.seller);
    sl_row_builder_set_i64(b, 8, ev->auction.category);
    set_str(b, 9, ev->auction.extra);
    sl_row_builder_set_i64(b, 10, ingest_us);
  }
}

/* Build the row of one event; false if the payload is malformed. */
static bool build(const rsrc_t *s, sl_ring_event_t *e, int64_t now_us,
                  sl_row_builder_t *b) {
  int64_t t = e->gen_ns / 1000;
  if (s->w->kind != SL_WORKLOAD_NEXMARK) {
    sl_row_builder_set_i64(b, 0, (int64_t)e->key);
    sl_row_builder_set_i64(b, 1, e->value);
    sl_row_builder_set_i64(b, 2, t);
    sl_row_builder_set_i64(b, 3, now_us);
    return true;
  }
  sl_nex_event_t ev;
  if (sl_nexmark_decode(sl_ring_payload(e), e->len, &ev) != 0 ||
      (uint32_t)ev.kind != s->stream)
    return false;
  sl_nexmark_row(&ev, t, now_us, b);
  return true;
}

static int rreader_poll(void *rd, sl_source_out_t *out, sl_error_t **out_err) {
  rreader_t *r = rd;
  uint32_t n_ended = 0;
  for (uint32_t k = 0; k < r->n; k++) {
    uint32_t i = (r->next + k) % r->n;
    if (r->is_ended[i]) {
      n_ended++;
      continue;
    }
    sl_ring_t *ring = &r->ring[i];
    bool is_done = sl_ring_is_done(ring); /* before the peek: then empty
                                             means ended */
    uint64_t first;
    size_t n = sl_ring_peek(ring, &first, BATCH);
    if (n == 0) {
      if (is_done) {
        r->is_ended[i] = true;
        sl_source_split_finished(out, r->split[i]);
        n_ended++;
      }
      continue;
    }
    if (r->n > 1) sl_source_set_split(out, r->split[i]);
    int64_t now_us = sl_mono_us();
    size_t done = 0;
    bool is_more = true;
    while (done < n && is_more) {
      sl_ring_event_t *e = sl_ring_slot(ring, first + done);
      sl_row_builder_t *b = sl_source_builder(out);
      if (!build(r->src, e, now_us, b))
        return sl_error_set(out_err, SL_ECORRUPT, "ring source: event %llu "
                            "of ring %s.%u is malformed (kind %u, %u "
                            "payload bytes)", (unsigned long long)e->seq,
                            r->src->w->stream_names[r->src->stream],
                            r->split[i], e->kind, e->len);
      done++;
      is_more = sl_source_emit_builder(out, out_err);
    }
    sl_ring_consume(ring, done);
    if (!is_more) {
      r->next = (i + 1) % r->n;
      if (out_err && *out_err) return sl_error_code(*out_err);
      return SL_POLL_MORE;
    }
    r->next = (i + 1) % r->n;
    return SL_POLL_MORE;
  }
  if (n_ended == r->n) return SL_POLL_END;
  /* Nothing in any ring: look again shortly (adds at most ~20 us). */
  sl_source_wait_until(out, sl_source_now(out) + 20000);
  return SL_POLL_WAIT;
}

static int rreader_position(void *rd, uint32_t split, sl_bytes_t *out) {
  rreader_t *r = rd;
  for (uint32_t i = 0; i < r->n; i++) {
    if (r->split[i] != split) continue;
    uint64_t tail = atomic_load_explicit(&r->ring[i].hdr->tail,
                                         memory_order_relaxed);
    return sl_bytes_append(out, &tail, sizeof(tail));
  }
  return SL_EINVAL;
}

static void rsrc_destroy(void *ctx) { free(ctx); }

static const sl_source_vt_t ring_source_vt = {
    "ring", rsrc_plan, rreader_open, rreader_poll, rreader_position,
    rreader_close, rsrc_destroy};

int sl_ring_source_create(const sl_workload_t *w, const char *prefix,
                          uint32_t stream, const sl_source_vt_t **out_vt,
                          void **out_ctx, sl_error_t **out_err) {
  if (stream >= w->n_streams)
    return sl_error_set(out_err, SL_EINVAL, "ring source: no stream %u", stream);
  rsrc_t *s = calloc(1, sizeof(*s));
  if (s == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  s->w = w;
  s->prefix = prefix;
  s->stream = stream;
  *out_vt = &ring_source_vt;
  *out_ctx = s;
  return SL_OK;
}

/* ---- the latency sink -------------------------------------------------- */

int sl_lat_shared_init(sl_lat_shared_t *s) {
  memset(s, 0, sizeof(*s));
  sl_bench_hist_init(&s->event_time);
  sl_bench_hist_init(&s->proc_time);
  return pthread_mutex_init(&s->mu, NULL) == 0 ? 0 : -1;
}

void sl_lat_shared_destroy(sl_lat_shared_t *s) { pthread_mutex_destroy(&s->mu); }

uint64_t sl_lat_shared_take(sl_lat_shared_t *s, sl_bench_hist_t *ev,
                            sl_bench_hist_t *pt) {
  pthread_mutex_lock(&s->mu);
  *ev = s->event_time;
  *pt = s->proc_time;
  uint64_t rows = s->rows;
  sl_bench_hist_reset(&s->event_time);
  sl_bench_hist_reset(&s->proc_time);
  s->rows = 0;
  pthread_mutex_unlock(&s->mu);
  return rows;
}

typedef struct lsink_s {
  sl_lat_shared_t *shared;
  const char *time_field, *ingest_field;
  const char *time_field2, *ingest_field2; /* or NULL */
} lsink_t;

typedef struct lwriter_s {
  lsink_t *sink;
  int time_i, ingest_i, time_i2, ingest_i2; /* -1: none */
  uint64_t rows, since_check;
  int64_t next_flush_ns;
  sl_bench_hist_t ev, pt;
} lwriter_t;

#define FLUSH_NS 20000000 /* 20 ms */

static void lw_flush(lwriter_t *w) {
  sl_lat_shared_t *s = w->sink->shared;
  pthread_mutex_lock(&s->mu);
  sl_bench_hist_merge(&s->event_time, &w->ev);
  sl_bench_hist_merge(&s->proc_time, &w->pt);
  s->rows += w->rows;
  pthread_mutex_unlock(&s->mu);
  sl_bench_hist_reset(&w->ev);
  sl_bench_hist_reset(&w->pt);
  w->rows = 0;
}

static int field_index(const sl_schema_t *schema, const char *name,
                       sl_error_t **out_err) {
  int i = sl_schema_index(schema, name);
  if (i < 0)
    return sl_error_set(out_err, SL_EINVAL, "latency sink: the input has no "
                        "field '%s'", name);
  sl_type_id_t t = sl_schema_field(schema, (uint32_t)i)->type.id;
  if (t != SL_TYPE_TIMESTAMP && t != SL_TYPE_INT64)
    return sl_error_set(out_err, SL_EINVAL, "latency sink: field '%s' is %s, "
                        "not a timestamp", name, sl_type_name(t));
  return i;
}

static int lw_open(void *ctx, const sl_sink_init_t *init, void **out,
                   sl_error_t **out_err) {
  lsink_t *k = ctx;
  int ti = field_index(init->schema, k->time_field, out_err);
  if (ti < 0) return ti;
  int ii = -1;
  if (k->ingest_field) {
    ii = field_index(init->schema, k->ingest_field, out_err);
    if (ii < 0) return ii;
  }
  int ti2 = -1, ii2 = -1;
  if (k->time_field2) {
    ti2 = field_index(init->schema, k->time_field2, out_err);
    if (ti2 < 0) return ti2;
  }
  if (k->ingest_field2) {
    ii2 = field_index(init->schema, k->ingest_field2, out_err);
    if (ii2 < 0) return ii2;
  }
  lwriter_t *w = malloc(sizeof(*w));
  if (w == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  memset(w, 0, offsetof(lwriter_t, ev));
  sl_bench_hist_init(&w->ev);
  sl_bench_hist_init(&w->pt);
  w->sink = k;
  w->time_i = ti;
  w->ingest_i = ii;
  w->time_i2 = ti2;
  w->ingest_i2 = ii2;
  w->next_flush_ns = mono_ns() + FLUSH_NS;
  *out = w;
  return SL_OK;
}

/* The larger of fields a and b (either may be -1 or null); INT64_MIN if
 * neither has a value. */
static int64_t origin(const sl_row_t *row, int a, int b) {
  int64_t t = INT64_MIN;
  if (a >= 0 && !sl_row_is_null(row, (uint32_t)a))
    t = sl_row_get_i64(row, (uint32_t)a);
  if (b >= 0 && !sl_row_is_null(row, (uint32_t)b)) {
    int64_t u = sl_row_get_i64(row, (uint32_t)b);
    if (u > t) t = u;
  }
  return t;
}

static int lw_write(void *wr, const sl_row_t *row, sl_error_t **out_err) {
  (void)out_err;
  lwriter_t *w = wr;
  w->rows++;
  sl_row_kind_t kind = sl_row_kind(row);
  if (kind == SL_ROW_UPDATE_BEFORE || kind == SL_ROW_DELETE) return SL_OK;
  /* One clock read per row: the latency of this row is what is measured. */
  int64_t now = mono_ns();
  int64_t t = origin(row, w->time_i, w->time_i2);
  if (t != INT64_MIN) sl_bench_hist_record(&w->ev, now - t * 1000);
  t = origin(row, w->ingest_i, w->ingest_i2);
  if (t != INT64_MIN) sl_bench_hist_record(&w->pt, now - t * 1000);
  if (now >= w->next_flush_ns) {
    lw_flush(w);
    w->next_flush_ns = now + FLUSH_NS;
  }
  return SL_OK;
}

static int lw_close(void *wr, bool is_success, sl_error_t **out_err) {
  (void)is_success, (void)out_err;
  lwriter_t *w = wr;
  lw_flush(w);
  free(w);
  return SL_OK;
}

static void lsink_destroy(void *ctx) { free(ctx); }

static const sl_sink_vt_t lat_sink_vt = {"latency", lw_open, lw_write, NULL,
                                         lw_close, lsink_destroy};

int sl_lat_sink_create(sl_lat_shared_t *shared, const char *time_field,
                       const char *ingest_field, const sl_sink_vt_t **out_vt,
                       void **out_ctx) {
  return sl_lat_sink_create2(shared, time_field, NULL, ingest_field, NULL,
                             out_vt, out_ctx);
}

int sl_lat_sink_create2(sl_lat_shared_t *shared, const char *time_field,
                        const char *time_field2, const char *ingest_field,
                        const char *ingest_field2,
                        const sl_sink_vt_t **out_vt, void **out_ctx) {
  lsink_t *k = calloc(1, sizeof(*k));
  if (k == NULL) return SL_ENOMEM;
  k->shared = shared;
  k->time_field = time_field;
  k->ingest_field = ingest_field;
  k->time_field2 = time_field2;
  k->ingest_field2 = ingest_field2;
  *out_vt = &lat_sink_vt;
  *out_ctx = k;
  return SL_OK;
}
