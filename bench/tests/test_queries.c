/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The benchmark queries (bench/queries.h) compute what their definition
 * says.  Each test feeds Nexmark events from the generator through sources
 * of its own (one per stream, with monotonous watermarks on date_time),
 * collects the query's output and compares it with a reference computed
 * here directly from the same events, by brute force.  Bid prices are
 * folded into a small range where ties at the maximum matter.
 *
 * Arrival order between two sources is not under a test's control, except
 * by a gate: a source whose reader returns "wait" until another source has
 * read all its rows (a latch, not a sleep), so that, e.g., every bid of q4
 * is read before any auction.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "it_helpers.h"
#include "queries.h"
#include "sl_test.h"
#include "stream_io.h"

/* ---- sources of generated events --------------------------------------- */

#define T0_US 1700000000000000ll /* event time of event 0 */

typedef struct nex_src_s {
  vsrc_t v;
  const sl_nexmark_config_t *cfg;
  int64_t step_us;      /* event time between two events of the schedule */
  int64_t price_mod;    /* 0: prices as generated */
  uint64_t *ids;        /* the event numbers of this stream, ascending */
  uint64_t n;
  _Atomic uint64_t read; /* rows built so far */
  _Atomic uint64_t *gate; /* NULL, or read nothing until *gate >= gate_n */
  uint64_t gate_n;
} nex_src_t;

static void nex_event(const sl_nexmark_config_t *cfg, int64_t step_us,
                      int64_t price_mod, uint64_t id, sl_nex_event_t *ev) {
  sl_nexmark_generate(cfg, id, T0_US + (int64_t)id * step_us, ev);
  if (ev->kind == SL_NEX_BID && price_mod) ev->bid.price %= price_mod;
}

static void nex_gen(const vsrc_t *v, uint32_t split, uint64_t i,
                    sl_row_builder_t *b) {
  (void)split;
  nex_src_t *s = (nex_src_t *)v->user;
  static _Thread_local sl_nex_event_t ev;
  nex_event(s->cfg, s->step_us, s->price_mod, s->ids[i], &ev);
  sl_nexmark_row(&ev, ev.date_time_us, ev.date_time_us, b);
  atomic_fetch_add(&s->read, 1);
}

static int gated_poll(void *rd, sl_source_out_t *out, sl_error_t **e) {
  vreader_t *r = rd;
  nex_src_t *s = (nex_src_t *)r->src->user;
  if (s->gate && atomic_load(s->gate) < s->gate_n) {
    sl_source_wait_until(out, sl_source_now(out) + 200000);
    return SL_POLL_WAIT;
  }
  return vsrc_poll(rd, out, e);
}

static const sl_source_vt_t gated_vt = {.type_name = "nexmark-test",
                                        .plan = vsrc_plan,
                                        .reader_open = vsrc_open,
                                        .reader_poll = gated_poll,
                                        .reader_position = vsrc_pos,
                                        .reader_close = vsrc_close,
                                        .destroy = vsrc_destroy};

/* The events of a test: n events of the schedule, by stream. */
typedef struct nex_set_s {
  sl_nexmark_config_t cfg;
  int64_t step_us, price_mod;
  nex_src_t src[3]; /* by sl_nex_kind_t */
  sl_schema_t *schema[3];
  const sl_workload_t *w;
} nex_set_t;

static void nex_set_init(nex_set_t *set, const sl_workload_t *w, uint64_t n,
                         int64_t step_us, int64_t price_mod) {
  memset(set, 0, sizeof(*set));
  set->w = w;
  set->cfg = w->nexmark;
  set->step_us = step_us;
  set->price_mod = price_mod;
  for (int k = 0; k < 3; k++) {
    nex_src_t *s = &set->src[k];
    s->ids = calloc(n, sizeof(uint64_t));
    SL_ASSERT_TRUE(s->ids != NULL);
    s->cfg = &set->cfg;
    s->step_us = step_us;
    s->price_mod = price_mod;
  }
  for (uint64_t i = 0; i < n; i++) {
    nex_src_t *s = &set->src[sl_nexmark_kind(&set->cfg, i)];
    s->ids[s->n++] = i;
  }
  for (int k = 0; k < 3; k++) {
    vsrc_init(&set->src[k].v, 1, set->src[k].n, nex_gen, &set->src[k]);
    atomic_init(&set->src[k].read, 0);
  }
}

static void nex_set_free(nex_set_t *set) {
  for (int k = 0; k < 3; k++) {
    free(set->src[k].ids);
    if (set->schema[k]) sl_schema_unref(set->schema[k]);
  }
}

/* Read stream `second` only after every row of stream `first`. */
static void nex_set_gate(nex_set_t *set, sl_nex_kind_t first,
                         sl_nex_kind_t second) {
  set->src[second].gate = &set->src[first].read;
  set->src[second].gate_n = set->src[first].n;
}

static sl_stream_t *nex_source(void *user, sl_job_t *job, const char *name) {
  nex_set_t *set = user;
  int k = sl_workload_stream(set->w, name);
  SL_ASSERT_TRUE(k >= 0 && k < 3);
  if (set->schema[k] == NULL)
    SL_ASSERT_EQ_INT(sl_ring_stream_schema(set->w, (uint32_t)k,
                                           &set->schema[k], NULL), SL_OK);
  sl_stream_t *s = sl_job_source(job, name, &gated_vt, &set->src[k].v,
                                 set->schema[k]);
  sl_watermark_config_t wc;
  sl_watermark_config_init(&wc);
  wc.time_field = "date_time";
  wc.strategy = SL_WM_MONOTONOUS;
  return sl_source_watermarks(s, &wc);
}

static void nexmark_workload(sl_workload_t *w, uint32_t needed, double eps) {
  sl_workload_defaults(w);
  w->kind = SL_WORKLOAD_NEXMARK;
  w->needed = needed;
  w->splits = 1;
  w->nexmark.events_per_second = eps;
  SL_ASSERT_EQ_INT(sl_workload_init(w), 0);
}

/* Run query `name` over the set into c (parallelism p). */
static void run_query(const char *name, nex_set_t *set, uint32_t p,
                      csink_t *c) {
  const sl_query_t *q = sl_query_find(name);
  SL_ASSERT_TRUE(q != NULL);
  sl_job_t *job = new_job(p);
  sl_schema_t *schemas[8];
  uint32_t n_schemas = 0;
  sl_error_t *err = NULL;
  sl_stream_t *s = sl_query_build(job, q, nex_source, set, schemas,
                                  &n_schemas, &err);
  if (s == NULL) SL_TEST_FAIL("build %s: %s", name, sl_error_message(err));
  csink_init(c);
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, c));
  run_ok(job);
  sl_job_destroy(job);
  for (uint32_t i = 0; i < n_schemas; i++) sl_schema_unref(schemas[i]);
}

/* ---- q4 ----------------------------------------------------------------- */

#define N_CATEGORIES 5
#define FIRST_CATEGORY 10

typedef struct q4_ref_s {
  int64_t total[N_CATEGORIES];
  int64_t auctions[N_CATEGORIES];
} q4_ref_t;

/* Flink's q4 by brute force: for every auction, the highest price of its
 * bids with date_time in [auction date_time, expires]; per category the
 * mean of those over the auctions that have one. */
static void q4_reference(const nex_set_t *set, q4_ref_t *ref) {
  memset(ref, 0, sizeof(*ref));
  const nex_src_t *as = &set->src[SL_NEX_AUCTION], *bs = &set->src[SL_NEX_BID];
  static sl_nex_event_t ev;
  int64_t first_id = 0;
  int64_t *start = calloc(as->n, 8), *expires = calloc(as->n, 8);
  int64_t *cat = calloc(as->n, 8), *best = calloc(as->n, 8);
  for (uint64_t i = 0; i < as->n; i++) {
    nex_event(&set->cfg, set->step_us, set->price_mod, as->ids[i], &ev);
    if (i == 0) first_id = ev.auction.id;
    SL_ASSERT_EQ_INT(ev.auction.id, first_id + (int64_t)i);
    start[i] = ev.date_time_us;
    expires[i] = ev.auction.expires_us;
    cat[i] = ev.auction.category;
    best[i] = -1;
  }
  for (uint64_t i = 0; i < bs->n; i++) {
    nex_event(&set->cfg, set->step_us, set->price_mod, bs->ids[i], &ev);
    int64_t a = ev.bid.auction - first_id;
    if (a < 0 || a >= (int64_t)as->n) continue;
    if (ev.date_time_us < start[a] || ev.date_time_us > expires[a]) continue;
    if (ev.bid.price > best[a]) best[a] = ev.bid.price;
  }
  for (uint64_t i = 0; i < as->n; i++) {
    if (best[i] < 0) continue;
    int64_t c = cat[i] - FIRST_CATEGORY;
    SL_ASSERT_TRUE(c >= 0 && c < N_CATEGORIES);
    ref->total[c] += best[i];
    ref->auctions[c]++;
  }
  free(start), free(expires), free(cat), free(best);
}

/* The last row per category is the query's current answer; earlier rows
 * are updates of it (+I first, then +U). */
static void q4_check(const csink_t *c, const q4_ref_t *ref) {
  bool seen[N_CATEGORIES] = {false};
  double avg[N_CATEGORIES];
  int64_t auctions[N_CATEGORIES];
  for (size_t i = 0; i < c->n_rows; i++) {
    sl_row_t r = crow(c, i);
    int64_t k = sl_row_get_i64(&r, 0) - FIRST_CATEGORY;
    SL_ASSERT_TRUE(k >= 0 && k < N_CATEGORIES);
    SL_ASSERT_EQ_INT(sl_row_kind(&r), seen[k] ? SL_ROW_UPDATE_AFTER
                                              : SL_ROW_INSERT);
    seen[k] = true;
    avg[k] = sl_row_get_f64(&r, 1);
    auctions[k] = sl_row_get_i64(&r, 2);
  }
  uint32_t n_with = 0;
  for (int k = 0; k < N_CATEGORIES; k++) {
    SL_ASSERT_EQ_INT(seen[k], ref->auctions[k] > 0);
    if (!seen[k]) continue;
    n_with++;
    SL_ASSERT_EQ_INT(auctions[k], ref->auctions[k]);
    double want = (double)ref->total[k] / (double)ref->auctions[k];
    if (avg[k] != want)
      SL_TEST_FAIL("category %d: average %.6f, want %.6f", k + FIRST_CATEGORY,
                   avg[k], want);
  }
  SL_ASSERT_EQ_INT(n_with, N_CATEGORIES);
}

/* 60,000 events at 10,000 events/s: about 3,600 auctions that last up to
 * 0.33 s, 55,000 bids of which some go to auctions not started yet or
 * already expired. */
static void q4_case(uint32_t p, int gate) {
  sl_workload_t w;
  nexmark_workload(&w, (1u << SL_NEX_AUCTION) | (1u << SL_NEX_BID), 10000);
  nex_set_t set;
  nex_set_init(&set, &w, 60000, 100, 1000);
  if (gate == 1) nex_set_gate(&set, SL_NEX_BID, SL_NEX_AUCTION);
  if (gate == 2) nex_set_gate(&set, SL_NEX_AUCTION, SL_NEX_BID);
  q4_ref_t ref;
  q4_reference(&set, &ref);
  csink_t c;
  run_query("q4", &set, p, &c);
  q4_check(&c, &ref);
  csink_free(&c);
  nex_set_free(&set);
  sl_workload_close(&w);
}

SL_TEST(q4_average_winning_price_per_category_matches_brute_force) {
  q4_case(2, 0);
}

SL_TEST(q4_bids_read_before_their_auctions_still_count) {
  q4_case(1, 1); /* every bid waits for its auction */
}

SL_TEST(q4_auctions_read_before_any_bid) {
  q4_case(2, 2); /* auctions wait for the bids' watermark to expire */
}

/* ---- q7 ----------------------------------------------------------------- */

typedef struct q7_row_s {
  int64_t window_end, auction, price, bidder, date_time;
  uint64_t extra_hash;
} q7_row_t;

static uint64_t hash_bytes(const void *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
  return h;
}

static int q7_cmp(const void *a, const void *b) {
  return memcmp(a, b, sizeof(q7_row_t));
}

#define WINDOW_US 10000000ll

SL_TEST(q7_every_bid_at_the_highest_price_of_its_window) {
  sl_workload_t w;
  nexmark_workload(&w, 1u << SL_NEX_BID, 2000);
  nex_set_t set;
  /* 2,000 events per 1 s of event time: 20,000 per window, 3.3 windows;
   * prices below 50, so that dozens of bids tie at a window's maximum. */
  nex_set_init(&set, &w, 66000, 500, 50);
  const nex_src_t *bs = &set.src[SL_NEX_BID];
  q7_row_t *want = calloc(bs->n, sizeof(q7_row_t));
  static sl_nex_event_t ev;
  size_t n_want = 0;
  int64_t wend = INT64_MIN, best = -1;
  size_t first = 0;
  /* Bids are in event-time order: one window after the other. */
  for (uint64_t i = 0; i <= bs->n; i++) {
    int64_t end = INT64_MAX;
    if (i < bs->n) {
      nex_event(&set.cfg, set.step_us, set.price_mod, bs->ids[i], &ev);
      int64_t t = ev.date_time_us;
      end = t - t % WINDOW_US + WINDOW_US;
    }
    if (end != wend) { /* keep the previous window's rows at its best */
      size_t k = first;
      for (size_t j = first; j < n_want; j++)
        if (want[j].price == best) want[k++] = want[j];
      n_want = k;
      first = n_want;
      wend = end;
      best = -1;
    }
    if (i == bs->n) break;
    if (ev.bid.price < best) continue;
    best = ev.bid.price;
    want[n_want++] = (q7_row_t){end, ev.bid.auction, ev.bid.price,
                                ev.bid.bidder, ev.date_time_us,
                                hash_bytes(ev.bid.extra.p, ev.bid.extra.len)};
  }
  SL_ASSERT_TRUE(n_want >= 4 * 10); /* ties in each of the 4 windows */

  csink_t c;
  run_query("q7", &set, 2, &c);
  SL_ASSERT_EQ_INT(c.n_rows, n_want);
  q7_row_t *got = calloc(c.n_rows + 1, sizeof(q7_row_t));
  for (size_t i = 0; i < c.n_rows; i++) {
    sl_row_t r = crow(&c, i);
    SL_ASSERT_EQ_INT(sl_row_kind(&r), SL_ROW_INSERT);
    sl_slice_t x = sl_row_get_str(&r, 4);
    got[i] = (q7_row_t){sl_row_get_i64(&r, 5), sl_row_get_i64(&r, 0),
                        sl_row_get_i64(&r, 1), sl_row_get_i64(&r, 2),
                        sl_row_get_i64(&r, 3), hash_bytes(x.ptr, x.len)};
    /* The latency origin: the window's latest bid, within the window. */
    int64_t ev_t = sl_row_get_i64(&r, 6);
    SL_ASSERT_TRUE(ev_t >= got[i].date_time && ev_t < got[i].window_end);
  }
  qsort(want, n_want, sizeof(q7_row_t), q7_cmp);
  qsort(got, c.n_rows, sizeof(q7_row_t), q7_cmp);
  for (size_t i = 0; i < n_want; i++)
    if (memcmp(&got[i], &want[i], sizeof(q7_row_t)) != 0)
      SL_TEST_FAIL("row %zu: window end %lld auction %lld price %lld bidder "
                   "%lld, want window end %lld auction %lld price %lld "
                   "bidder %lld", i, (long long)got[i].window_end,
                   (long long)got[i].auction, (long long)got[i].price,
                   (long long)got[i].bidder, (long long)want[i].window_end,
                   (long long)want[i].auction, (long long)want[i].price,
                   (long long)want[i].bidder);
  free(got);
  free(want);
  csink_free(&c);
  nex_set_free(&set);
  sl_workload_close(&w);
}

/* ---- q3, q5, q8: rows compared as sorted tuples ------------------------- */

typedef struct tup_s {
  int64_t v[4];
} tup_t;

static int tup_cmp(const void *a, const void *b) {
  const tup_t *x = a, *y = b;
  for (int i = 0; i < 4; i++)
    if (x->v[i] != y->v[i]) return x->v[i] < y->v[i] ? -1 : 1;
  return 0;
}

static void assert_tuples_equal(tup_t *got, size_t n_got, tup_t *want,
                                size_t n_want, const char *what) {
  qsort(got, n_got, sizeof(tup_t), tup_cmp);
  qsort(want, n_want, sizeof(tup_t), tup_cmp);
  size_t n = n_got < n_want ? n_got : n_want;
  for (size_t i = 0; i < n; i++)
    if (tup_cmp(&got[i], &want[i]) != 0)
      SL_TEST_FAIL("%s: sorted row %zu is (%lld, %lld, %lld, %lld), want "
                   "(%lld, %lld, %lld, %lld)", what, i,
                   (long long)got[i].v[0], (long long)got[i].v[1],
                   (long long)got[i].v[2], (long long)got[i].v[3],
                   (long long)want[i].v[0], (long long)want[i].v[1],
                   (long long)want[i].v[2], (long long)want[i].v[3]);
  if (n_got != n_want)
    SL_TEST_FAIL("%s: %zu rows, want %zu", what, n_got, n_want);
}

static int64_t hash_slice(sl_slice_t x) {
  return (int64_t)hash_bytes(x.ptr, x.len);
}

static int64_t hash_str(sl_nex_str_t x) {
  return (int64_t)hash_bytes(x.p, x.len);
}

/* q5: per sliding window (10 s every 2 s) the auctions with most bids. */
SL_TEST(q5_auctions_with_the_most_bids_of_each_sliding_window) {
  sl_workload_t w;
  nexmark_workload(&w, 1u << SL_NEX_BID, 2000);
  nex_set_t set;
  nex_set_init(&set, &w, 66000, 500, 0);
  const nex_src_t *bs = &set.src[SL_NEX_BID];
  const int64_t slide = 2000000, size = 10000000;
  /* Counts per (window end, auction): windows are few, auctions dense. */
  static sl_nex_event_t ev;
  nex_event(&set.cfg, set.step_us, 0, bs->ids[0], &ev);
  int64_t t_first = ev.date_time_us, a_min = INT64_MAX, a_max = INT64_MIN;
  int64_t end0 = t_first - t_first % slide + slide; /* first window end */
  for (uint64_t i = 0; i < bs->n; i++) {
    nex_event(&set.cfg, set.step_us, 0, bs->ids[i], &ev);
    if (ev.bid.auction < a_min) a_min = ev.bid.auction;
    if (ev.bid.auction > a_max) a_max = ev.bid.auction;
  }
  int64_t t_last = ev.date_time_us;
  size_t n_win = (size_t)((t_last - t_last % slide + size - end0) / slide + 1);
  size_t n_auc = (size_t)(a_max - a_min + 1);
  int64_t *cnt = calloc(n_win * n_auc, 8);
  for (uint64_t i = 0; i < bs->n; i++) {
    nex_event(&set.cfg, set.step_us, 0, bs->ids[i], &ev);
    int64_t t = ev.date_time_us, e = t - t % slide + slide;
    for (int64_t j = 0; j < size / slide; j++) { /* the 5 windows of t */
      size_t wi = (size_t)((e + j * slide - end0) / slide);
      SL_ASSERT_TRUE(wi < n_win);
      cnt[wi * n_auc + (size_t)(ev.bid.auction - a_min)]++;
    }
  }
  tup_t *want = calloc(n_win * n_auc + 1, sizeof(tup_t));
  size_t n_want = 0;
  for (size_t wi = 0; wi < n_win; wi++) {
    int64_t best = 0;
    for (size_t a = 0; a < n_auc; a++)
      if (cnt[wi * n_auc + a] > best) best = cnt[wi * n_auc + a];
    for (size_t a = 0; best > 0 && a < n_auc; a++)
      if (cnt[wi * n_auc + a] == best)
        want[n_want++] = (tup_t){{end0 + (int64_t)wi * slide,
                                  a_min + (int64_t)a, best, 0}};
  }
  SL_ASSERT_TRUE(n_want >= 15); /* 33 s of bids: 20 windows or more */
  csink_t c;
  run_query("q5", &set, 2, &c);
  tup_t *got = calloc(c.n_rows + 1, sizeof(tup_t));
  for (size_t i = 0; i < c.n_rows; i++) {
    sl_row_t r = crow(&c, i);
    got[i] = (tup_t){{sl_row_get_i64(&r, 2), sl_row_get_i64(&r, 0),
                      sl_row_get_i64(&r, 1), 0}};
  }
  assert_tuples_equal(got, c.n_rows, want, n_want, "q5");
  free(got), free(want), free(cnt);
  csink_free(&c);
  nex_set_free(&set);
  sl_workload_close(&w);
}

/* Persons by id (ids are dense from the first). */
typedef struct persons_s {
  int64_t first;
  size_t n;
  int64_t *date_time, *name, *city;
  char (*state)[3];
} persons_t;

static void persons_load(const nex_set_t *set, persons_t *p) {
  const nex_src_t *ps = &set->src[SL_NEX_PERSON];
  static sl_nex_event_t ev;
  p->n = ps->n;
  p->date_time = calloc(p->n + 1, 8);
  p->name = calloc(p->n + 1, 8);
  p->city = calloc(p->n + 1, 8);
  p->state = calloc(p->n + 1, 3);
  for (uint64_t i = 0; i < ps->n; i++) {
    nex_event(&set->cfg, set->step_us, 0, ps->ids[i], &ev);
    if (i == 0) p->first = ev.person.id;
    SL_ASSERT_EQ_INT(ev.person.id, p->first + (int64_t)i);
    p->date_time[i] = ev.date_time_us;
    p->name[i] = hash_str(ev.person.name);
    p->city[i] = hash_str(ev.person.city);
    SL_ASSERT_EQ_INT(ev.person.state.len, 2);
    memcpy(p->state[i], ev.person.state.p, 2);
  }
}

static void persons_free(persons_t *p) {
  free(p->date_time), free(p->name), free(p->city), free(p->state);
}

/* q3: auctions of category 10 with their sellers from OR, ID or CA. */
SL_TEST(q3_local_item_suggestions_are_the_join_by_brute_force) {
  sl_workload_t w;
  nexmark_workload(&w, (1u << SL_NEX_PERSON) | (1u << SL_NEX_AUCTION), 2000);
  nex_set_t set;
  nex_set_init(&set, &w, 100000, 500, 0);
  persons_t ps;
  persons_load(&set, &ps);
  const nex_src_t *as = &set.src[SL_NEX_AUCTION];
  static sl_nex_event_t ev;
  tup_t *want = calloc(as->n + 1, sizeof(tup_t));
  size_t n_want = 0;
  for (uint64_t i = 0; i < as->n; i++) {
    nex_event(&set.cfg, set.step_us, 0, as->ids[i], &ev);
    int64_t k = ev.auction.seller - ps.first;
    if (ev.auction.category != 10 || k < 0 || k >= (int64_t)ps.n) continue;
    const char *st = ps.state[k];
    if (strcmp(st, "OR") && strcmp(st, "ID") && strcmp(st, "CA")) continue;
    want[n_want++] = (tup_t){{ev.auction.id, ps.name[k], ps.city[k],
                              st[0] * 256 + st[1]}};
  }
  SL_ASSERT_TRUE(n_want >= 100);
  csink_t c;
  run_query("q3", &set, 2, &c);
  tup_t *got = calloc(c.n_rows + 1, sizeof(tup_t));
  for (size_t i = 0; i < c.n_rows; i++) {
    sl_row_t r = crow(&c, i);
    SL_ASSERT_EQ_INT(sl_row_kind(&r), SL_ROW_INSERT);
    sl_slice_t st = sl_row_get_str(&r, 2);
    SL_ASSERT_EQ_INT(st.len, 2);
    got[i] = (tup_t){{sl_row_get_i64(&r, 3), hash_slice(sl_row_get_str(&r, 0)),
                      hash_slice(sl_row_get_str(&r, 1)),
                      st.ptr[0] * 256 + st.ptr[1]}};
  }
  assert_tuples_equal(got, c.n_rows, want, n_want, "q3");
  free(got), free(want);
  persons_free(&ps);
  csink_free(&c);
  nex_set_free(&set);
  sl_workload_close(&w);
}

/* q8: persons who opened an auction within the 10 s tumbling window in
 * which they registered, once per person and window. */
SL_TEST(q8_new_users_with_an_auction_in_their_window) {
  sl_workload_t w;
  nexmark_workload(&w, (1u << SL_NEX_PERSON) | (1u << SL_NEX_AUCTION), 2000);
  nex_set_t set;
  nex_set_init(&set, &w, 100000, 500, 0); /* 50 s: 5 or 6 windows */
  persons_t ps;
  persons_load(&set, &ps);
  const nex_src_t *as = &set.src[SL_NEX_AUCTION];
  static sl_nex_event_t ev;
  bool *hit = calloc(ps.n + 1, 1);
  for (uint64_t i = 0; i < as->n; i++) {
    nex_event(&set.cfg, set.step_us, 0, as->ids[i], &ev);
    int64_t k = ev.auction.seller - ps.first;
    if (k < 0 || k >= (int64_t)ps.n) continue;
    if (ev.date_time_us / WINDOW_US == ps.date_time[k] / WINDOW_US)
      hit[k] = true;
  }
  tup_t *want = calloc(ps.n + 1, sizeof(tup_t));
  size_t n_want = 0;
  for (size_t k = 0; k < ps.n; k++)
    if (hit[k])
      want[n_want++] = (tup_t){{ps.first + (int64_t)k, ps.name[k],
                                ps.date_time[k] - ps.date_time[k] % WINDOW_US,
                                0}};
  SL_ASSERT_TRUE(n_want >= 50);
  csink_t c;
  run_query("q8", &set, 2, &c);
  tup_t *got = calloc(c.n_rows + 1, sizeof(tup_t));
  for (size_t i = 0; i < c.n_rows; i++) {
    sl_row_t r = crow(&c, i);
    got[i] = (tup_t){{sl_row_get_i64(&r, 0), hash_slice(sl_row_get_str(&r, 1)),
                      sl_row_get_i64(&r, 2), 0}};
  }
  assert_tuples_equal(got, c.n_rows, want, n_want, "q8");
  free(got), free(want), free(hit);
  persons_free(&ps);
  csink_free(&c);
  nex_set_free(&set);
  sl_workload_close(&w);
}

SL_TEST(unknown_query_names_itself) {
  SL_ASSERT_TRUE(sl_query_find("q6") == NULL);
  SL_ASSERT_TRUE(strstr(sl_query_names(), "q4") != NULL);
  SL_ASSERT_TRUE(strstr(sl_query_names(), "wjoin") != NULL);
}
