/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The streaming benchmarks' queries (queries.h).  Field numbers in the
 * functions below are those of the input schemas in stream_io.h.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "queries.h"

/* ---- the query table --------------------------------------------------- */

static const sl_query_t queries[] = {
    {"q0", SL_WORKLOAD_NEXMARK, 1u << SL_NEX_BID, "date_time", NULL,
     "ingest_time", NULL, "Nexmark q0 pass-through"},
    {"q1", SL_WORKLOAD_NEXMARK, 1u << SL_NEX_BID, "date_time", NULL,
     "ingest_time", NULL, "Nexmark q1 currency conversion"},
    {"q2", SL_WORKLOAD_NEXMARK, 1u << SL_NEX_BID, "date_time", NULL,
     "ingest_time", NULL, "Nexmark q2 selection"},
    {"q3", SL_WORKLOAD_NEXMARK, (1u << SL_NEX_PERSON) | (1u << SL_NEX_AUCTION),
     "date_time", NULL, "ingest_time", NULL,
     "Nexmark q3 local item suggestion (join)"},
    {"q4", SL_WORKLOAD_NEXMARK, (1u << SL_NEX_AUCTION) | (1u << SL_NEX_BID),
     "date_time", NULL, "ingest_time", NULL,
     "Nexmark q4 average price per category (join until expiry, max, avg)"},
    {"q5", SL_WORKLOAD_NEXMARK, 1u << SL_NEX_BID, "event_time", NULL,
     "ingest_time", NULL, "Nexmark q5 hot items (sliding 10 s / 2 s)"},
    {"q7", SL_WORKLOAD_NEXMARK, 1u << SL_NEX_BID, "event_time", NULL,
     "ingest_time", NULL, "Nexmark q7 highest bid (tumbling 10 s)"},
    {"q8", SL_WORKLOAD_NEXMARK, (1u << SL_NEX_PERSON) | (1u << SL_NEX_AUCTION),
     "date_time", NULL, "ingest_time", NULL,
     "Nexmark q8 new users (tumbling 10 s join)"},
    {"count", SL_WORKLOAD_KEYS, 1, "date_time", NULL, "ingest_time", NULL,
     "keyed running count (Zipf keys)"},
    {"wagg", SL_WORKLOAD_KEYS, 1, "event_time", NULL, "ingest_time", NULL,
     "Karimov windowed aggregation (sliding 8 s / 4 s)"},
    {"wjoin", SL_WORKLOAD_PAIRS, 3, "date_time", "date_time_right",
     "ingest_time", "ingest_time_right",
     "Karimov windowed join (tumbling 2 s)"},
};
#define N_QUERIES (sizeof(queries) / sizeof(queries[0]))

const sl_query_t *sl_query_find(const char *name) {
  for (size_t i = 0; i < N_QUERIES; i++)
    if (strcmp(queries[i].name, name) == 0) return &queries[i];
  return NULL;
}

const char *sl_query_names(void) {
  static char names[128];
  if (names[0] == 0)
    for (size_t i = 0, n = 0; i < N_QUERIES; i++) {
      size_t k = strlen(queries[i].name);
      if (n + k + 2 > sizeof(names)) break;
      if (i) names[n++] = ' ';
      memcpy(names + n, queries[i].name, k + 1);
      n += k;
    }
  return names;
}

/* q0/q1: the projection of a bid (fields 0 auction, 1 bidder, 2 price,
 * 5 date_time, 6 extra, 7 ingest_time). */
static int q0_map(sl_ctx_t *ctx, void *user, const sl_row_t *in,
                  sl_row_builder_t *out) {
  (void)ctx, (void)user;
  sl_row_builder_set_i64(out, 0, sl_row_get_i64(in, 0));
  sl_row_builder_set_i64(out, 1, sl_row_get_i64(in, 1));
  sl_row_builder_set_i64(out, 2, sl_row_get_i64(in, 2));
  sl_row_builder_set_i64(out, 3, sl_row_get_i64(in, 5));
  sl_slice_t x = sl_row_get_str(in, 6);
  sl_row_builder_set_str(out, 4, x.ptr, x.len);
  sl_row_builder_set_i64(out, 5, sl_row_get_i64(in, 7));
  return SL_OK;
}

static int q1_map(sl_ctx_t *ctx, void *user, const sl_row_t *in,
                  sl_row_builder_t *out) {
  q0_map(ctx, user, in, out);
  sl_row_builder_set_f64(out, 2, 0.908 * (double)sl_row_get_i64(in, 2));
  return SL_OK;
}

static int q2_filter(sl_ctx_t *ctx, void *user, const sl_row_t *in) {
  (void)ctx, (void)user;
  return sl_row_get_i64(in, 0) % 123 == 0;
}

static int q2_map(sl_ctx_t *ctx, void *user, const sl_row_t *in,
                  sl_row_builder_t *out) {
  (void)ctx, (void)user;
  sl_row_builder_set_i64(out, 0, sl_row_get_i64(in, 0));
  sl_row_builder_set_i64(out, 1, sl_row_get_i64(in, 2));
  sl_row_builder_set_i64(out, 2, sl_row_get_i64(in, 5));
  sl_row_builder_set_i64(out, 3, sl_row_get_i64(in, 7));
  return SL_OK;
}

/* ---- q3, q5, q8 (q4 and q7 below) -------------------------------------------------------- */

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int q3_auction_filter(sl_ctx_t *ctx, void *user, const sl_row_t *in) {
  (void)ctx, (void)user;
  return sl_row_get_i64(in, 8) == 10; /* category */
}

static int q3_person_filter(sl_ctx_t *ctx, void *user, const sl_row_t *in) {
  (void)ctx, (void)user;
  sl_slice_t st = sl_row_get_str(in, 5); /* state */
  return st.len == 2 && ((st.ptr[0] == 'O' && st.ptr[1] == 'R') ||
                         (st.ptr[0] == 'I' && st.ptr[1] == 'D') ||
                         (st.ptr[0] == 'C' && st.ptr[1] == 'A'));
}

/* The join of auction (0..10) and person (11..19) rows: name, city, state,
 * the auction id; the latency origins are the later of the two rows. */
static int q3_map(sl_ctx_t *ctx, void *user, const sl_row_t *in,
                  sl_row_builder_t *out) {
  (void)ctx, (void)user;
  for (uint32_t i = 0; i < 3; i++) {
    sl_slice_t x = sl_row_get_str(in, i == 0 ? 12 : 14 + i);
    sl_row_builder_set_str(out, i, x.ptr, x.len);
  }
  sl_row_builder_set_i64(out, 3, sl_row_get_i64(in, 0));
  sl_row_builder_set_i64(out, 4, max64(sl_row_get_i64(in, 5),
                                       sl_row_get_i64(in, 17)));
  sl_row_builder_set_i64(out, 5, max64(sl_row_get_i64(in, 10),
                                       sl_row_get_i64(in, 19)));
  return SL_OK;
}

/* q5 second stage, keyed by window_end: the auctions with the most bids of
 * each window.  Input: auction, window_start, window_end, event_time, num,
 * ingest_time (the first stage's window results).  Value state: max num,
 * latest event and ingest time, then the auctions at max num.  q7's second
 * stage (below) has the same local data. */
typedef struct top_local_s {
  sl_state_t *top;
  sl_bytes_t buf, items;
} top_local_t;

static int top_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  top_local_t *l = calloc(1, sizeof(*l));
  if (l == NULL) return SL_ENOMEM;
  sl_bytes_init(&l->buf);
  sl_bytes_init(&l->items);
  sl_ctx_set_local(ctx, l);
  sl_state_desc_t d = {"top", SL_STATE_VALUE, 1, NULL, NULL};
  return sl_ctx_state(ctx, &d, &l->top);
}

static void top_close(sl_ctx_t *ctx, void *user) {
  (void)user;
  top_local_t *l = sl_ctx_local(ctx);
  if (l) sl_bytes_close(&l->buf), sl_bytes_close(&l->items);
  free(l);
}

/* Fold one first-stage result into its window's value: v (q5: count, q7:
 * price), the latency origins, and the entries to keep when v is the
 * window's highest so far (they replace those of a lower one). */
static int top_fold(sl_ctx_t *ctx, top_local_t *l, int64_t wend, int64_t v,
                    int64_t ev, int64_t ing, const void *entries,
                    size_t len) {
  sl_slice_t cur;
  int rc = sl_value_get(l->top, &cur);
  if (rc != SL_OK && rc != SL_ENOTFOUND) return rc;
  bool is_found = rc == SL_OK;
  int64_t h[3] = {INT64_MIN, INT64_MIN, INT64_MIN};
  if (is_found) {
    memcpy(h, cur.ptr, sizeof(h));
  } else {
    /* The whole first-stage result of a window arrives before the
     * watermark that passes its end: fire then. */
    if ((rc = sl_ctx_event_timer_register(ctx, wend - 1)) != SL_OK) return rc;
  }
  sl_bytes_clear(&l->buf);
  if (is_found && v <= h[0]) rc = sl_bytes_append(&l->buf, cur.ptr, cur.len);
  else rc = sl_bytes_append(&l->buf, h, sizeof(h));
  if (rc == SL_OK && v >= h[0]) rc = sl_bytes_append(&l->buf, entries, len);
  if (rc != SL_OK) return rc;
  h[0] = max64(h[0], v);
  h[1] = max64(h[1], ev);
  h[2] = max64(h[2], ing);
  memcpy(l->buf.data, h, sizeof(h));
  return sl_value_put(l->top, l->buf.data, l->buf.len);
}

static int top_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  int64_t auction = sl_row_get_i64(row, 0);
  return top_fold(ctx, sl_ctx_local(ctx), sl_row_get_i64(row, 2),
                  sl_row_get_i64(row, 4), sl_row_get_i64(row, 3),
                  sl_row_get_i64(row, 5), &auction, sizeof(auction));
}

static int top_timer(sl_ctx_t *ctx, void *user, int64_t ts) {
  (void)user;
  top_local_t *l = sl_ctx_local(ctx);
  sl_slice_t cur;
  int rc = sl_value_get(l->top, &cur);
  if (rc == SL_ENOTFOUND) return SL_OK;
  if (rc != SL_OK) return rc;
  int64_t h[3];
  memcpy(h, cur.ptr, sizeof(h));
  for (uint32_t off = sizeof(h); off + 8 <= cur.len; off += 8) {
    int64_t auction;
    memcpy(&auction, cur.ptr + off, 8);
    sl_row_builder_t *b = sl_ctx_builder(ctx);
    sl_row_builder_set_i64(b, 0, auction);
    sl_row_builder_set_i64(b, 1, h[0]);
    sl_row_builder_set_i64(b, 2, ts + 1);
    sl_row_builder_set_i64(b, 3, h[1]);
    sl_row_builder_set_i64(b, 4, h[2]);
    if ((rc = sl_ctx_emit_builder(ctx)) != SL_OK) return rc;
  }
  return sl_state_clear(l->top);
}

/* ---- q4 ------------------------------------------------------------------
 * Flink's q4 is a regular join of auctions and bids on the auction id with
 * B.date_time BETWEEN A.date_time AND A.expires, max(price) per auction,
 * then avg of those per category; the max changes retract the avg's input.
 * Here the first stage is a process function on the connected streams,
 * keyed by auction id, that keeps each auction until the watermark passes
 * its expiry (no later bid can match it then) and emits, for every change
 * of an auction's highest matching bid, the change of the category's total
 * and count: (category, price - old max, 0), or (category, price, 1) for an
 * auction's first matching bid.  The second stage is the engine's keyed
 * aggregate (sums) over those changes and a map to the average: the same
 * result as Flink's retractions, one row per change instead of two.
 *
 * Auctions and bids come from two sources, so a bid can arrive before its
 * auction: it waits in list state until the watermark passes its date_time
 * (then every auction that started at or before it has arrived), and is
 * dropped if its auction has not (an auction that started later, or one
 * already closed: neither can match). */

typedef struct q4_auction_s {
  int64_t category, start, expires, ingest;
  int64_t max; /* INT64_MIN: no matching bid yet */
} q4_auction_t;

typedef struct q4_bid_s {
  int64_t price, date_time, ingest;
} q4_bid_t;

typedef struct q4_local_s {
  sl_state_t *auction, *pending;
  sl_bytes_t buf;
} q4_local_t;

/* Pending bids wait for a timer at their date_time rounded up to this
 * (fewer distinct timers; a bid may only wait longer). */
#define Q4_PENDING_US 10000

static int q4_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  q4_local_t *l = calloc(1, sizeof(*l));
  if (l == NULL) return SL_ENOMEM;
  sl_bytes_init(&l->buf);
  sl_ctx_set_local(ctx, l);
  sl_state_desc_t a = {"auction", SL_STATE_VALUE, 1, NULL, NULL};
  sl_state_desc_t p = {"pending", SL_STATE_LIST, 1, NULL, NULL};
  int rc = sl_ctx_state(ctx, &a, &l->auction);
  return rc ? rc : sl_ctx_state(ctx, &p, &l->pending);
}

static void q4_close(sl_ctx_t *ctx, void *user) {
  (void)user;
  q4_local_t *l = sl_ctx_local(ctx);
  if (l) sl_bytes_close(&l->buf);
  free(l);
}

/* Fold a bid into its auction *a (state written by the caller when
 * *is_changed).  The latency origins are the later of auction and bid. */
static int q4_fold(sl_ctx_t *ctx, q4_auction_t *a, const q4_bid_t *b,
                   bool *is_changed) {
  if (b->date_time < a->start || b->date_time > a->expires ||
      b->price <= a->max)
    return SL_OK;
  bool is_first = a->max == INT64_MIN;
  sl_row_builder_t *o = sl_ctx_builder(ctx);
  sl_row_builder_set_i64(o, 0, a->category);
  sl_row_builder_set_i64(o, 1, is_first ? b->price : b->price - a->max);
  sl_row_builder_set_i64(o, 2, is_first ? 1 : 0);
  sl_row_builder_set_i64(o, 3, max64(b->date_time, a->start));
  sl_row_builder_set_i64(o, 4, max64(b->ingest, a->ingest));
  a->max = b->price;
  *is_changed = true;
  return sl_ctx_emit_builder(ctx);
}

/* An auction row: id 0, date_time 5, expires 6, category 8, ingest 10. */
static int q4_process_auction(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  q4_local_t *l = sl_ctx_local(ctx);
  sl_slice_t cur;
  int rc = sl_value_get(l->auction, &cur);
  if (rc == SL_OK)
    return sl_ctx_fail(ctx, SL_EINVAL, "q4: auction %lld arrived twice",
                       (long long)sl_row_get_i64(row, 0));
  if (rc != SL_ENOTFOUND) return rc;
  q4_auction_t a = {sl_row_get_i64(row, 8), sl_row_get_i64(row, 5),
                    sl_row_get_i64(row, 6), sl_row_get_i64(row, 10),
                    INT64_MIN};
  /* Once the watermark passes expires, no bid that can match is to come. */
  if ((rc = sl_ctx_event_timer_register(ctx, a.expires)) != SL_OK) return rc;
  sl_list_iter_t it;
  if ((rc = sl_list_iter(l->pending, &it)) != SL_OK) return rc;
  bool is_changed = false, had_pending = false;
  sl_slice_t item;
  while (sl_list_next(&it, &item)) {
    q4_bid_t b;
    memcpy(&b, item.ptr, sizeof(b));
    had_pending = true;
    if ((rc = q4_fold(ctx, &a, &b, &is_changed)) != SL_OK) return rc;
  }
  if (had_pending && (rc = sl_state_clear(l->pending)) != SL_OK) return rc;
  return sl_value_put(l->auction, &a, sizeof(a));
}

/* A bid row: auction 0, price 2, date_time 5, ingest 7. */
static int q4_process_bid(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  q4_local_t *l = sl_ctx_local(ctx);
  q4_bid_t b = {sl_row_get_i64(row, 2), sl_row_get_i64(row, 5),
                sl_row_get_i64(row, 7)};
  sl_slice_t cur;
  int rc = sl_value_get(l->auction, &cur);
  if (rc == SL_ENOTFOUND) {
    int64_t t = (b.date_time + Q4_PENDING_US - 1) / Q4_PENDING_US *
                Q4_PENDING_US;
    if ((rc = sl_ctx_event_timer_register(ctx, t)) != SL_OK) return rc;
    return sl_list_add(l->pending, &b, sizeof(b));
  }
  if (rc != SL_OK) return rc;
  q4_auction_t a;
  memcpy(&a, cur.ptr, sizeof(a));
  bool is_changed = false;
  if ((rc = q4_fold(ctx, &a, &b, &is_changed)) != SL_OK) return rc;
  return is_changed ? sl_value_put(l->auction, &a, sizeof(a)) : SL_OK;
}

static int q4_timer(sl_ctx_t *ctx, void *user, int64_t ts) {
  (void)user;
  q4_local_t *l = sl_ctx_local(ctx);
  sl_slice_t cur;
  int rc = sl_value_get(l->auction, &cur);
  if (rc == SL_OK) {
    q4_auction_t a;
    memcpy(&a, cur.ptr, sizeof(a));
    /* Expired: its highest bid is final (a pending-bid timer may come
     * first; then the watermark is past expires too). */
    return ts >= a.expires ? sl_state_clear(l->auction) : SL_OK;
  }
  if (rc != SL_ENOTFOUND) return rc;
  /* Drop the pending bids the watermark passed: their auction has not
   * come and no auction that can match them is to come. */
  sl_list_iter_t it;
  if ((rc = sl_list_iter(l->pending, &it)) != SL_OK) return rc;
  sl_bytes_clear(&l->buf);
  bool is_dropped = false;
  sl_slice_t item;
  while (sl_list_next(&it, &item)) {
    q4_bid_t b;
    memcpy(&b, item.ptr, sizeof(b));
    if (b.date_time <= ts) is_dropped = true;
    else if ((rc = sl_bytes_append(&l->buf, &b, sizeof(b))) != SL_OK)
      return rc;
  }
  if (!is_dropped) return SL_OK;
  if ((rc = sl_state_clear(l->pending)) != SL_OK) return rc;
  for (size_t off = 0; off < l->buf.len; off += sizeof(q4_bid_t))
    if ((rc = sl_list_add(l->pending, l->buf.data + off,
                          sizeof(q4_bid_t))) != SL_OK)
      return rc;
  return SL_OK;
}

/* After the sums per category: category 0, total 1, auctions 2, date_time
 * 3, ingest_time 4 -> category, avg_price (float64), auctions, date_time,
 * ingest_time. */
static int q4_avg(sl_ctx_t *ctx, void *user, const sl_row_t *in,
                  sl_row_builder_t *out) {
  (void)ctx, (void)user;
  int64_t n = sl_row_get_i64(in, 2);
  sl_row_builder_set_i64(out, 0, sl_row_get_i64(in, 0));
  sl_row_builder_set_f64(out, 1, n ? (double)sl_row_get_i64(in, 1) /
                                         (double)n : 0.0);
  sl_row_builder_set_i64(out, 2, n);
  sl_row_builder_set_i64(out, 3, sl_row_get_i64(in, 3));
  sl_row_builder_set_i64(out, 4, sl_row_get_i64(in, 4));
  return SL_OK;
}

/* ---- q7 ------------------------------------------------------------------
 * Flink's q7 takes max(price) over tumbling 10 s windows of all bids and
 * joins it back to the bids of the window with that price.  Here, so that
 * the first stage runs in parallel: per auction and window, the highest
 * price and the bids at it (window_reduce), then keyed by window end, the
 * window's highest price and every bid at it, emitted when the watermark
 * passes the window's end.
 *
 * A packed bid: bidder, date_time (int64), extra length (uint32), extra.
 * The first stage's accumulator: price, max ingest_time, auction, then the
 * packed bids at that price; its result row: auction, price, window_end,
 * event_time, ingest_time, bids (bytes: the packed bids).  The second
 * stage's value: price, max event_time, max ingest_time, then (auction,
 * packed bid) for each bid at the window's price. */

static int q7_pack_bid(sl_bytes_t *out, const sl_row_t *row) {
  int64_t v[2] = {sl_row_get_i64(row, 1), sl_row_get_i64(row, 5)};
  sl_slice_t x = sl_row_get_str(row, 6);
  uint32_t n = x.len;
  int rc = sl_bytes_append(out, v, sizeof(v));
  if (rc == SL_OK) rc = sl_bytes_append(out, &n, sizeof(n));
  if (rc == SL_OK) rc = sl_bytes_append(out, x.ptr, n);
  return rc;
}

/* The length of the packed bid at p (at least 20 bytes remain). */
static size_t q7_bid_len(const uint8_t *p) {
  uint32_t n;
  memcpy(&n, p + 16, sizeof(n));
  return 20 + (size_t)n;
}

static int q7_add(void *user, const sl_row_t *row, sl_bytes_t *acc) {
  (void)user;
  int64_t h[3] = {sl_row_get_i64(row, 2), sl_row_get_i64(row, 7),
                  sl_row_get_i64(row, 0)};
  if (acc->len >= sizeof(h)) {
    int64_t cur[3];
    memcpy(cur, acc->data, sizeof(cur));
    if (h[1] < cur[1]) h[1] = cur[1];
    if (h[0] < cur[0]) { /* below the highest: only the ingest time */
      memcpy(acc->data + 8, &h[1], 8);
      return SL_OK;
    }
    if (h[0] == cur[0]) { /* a tie: one more bid at the highest price */
      memcpy(acc->data + 8, &h[1], 8);
      return q7_pack_bid(acc, row);
    }
  }
  sl_bytes_clear(acc); /* the first bid, or a higher price */
  int rc = sl_bytes_append(acc, h, sizeof(h));
  return rc ? rc : q7_pack_bid(acc, row);
}

static int q7_result(sl_ctx_t *ctx, void *user, const sl_window_t *w,
                     sl_slice_t acc, sl_row_builder_t *out) {
  (void)ctx, (void)user;
  int64_t h[3];
  memcpy(h, acc.ptr, sizeof(h));
  sl_row_builder_set_i64(out, 0, h[2]);
  sl_row_builder_set_i64(out, 1, h[0]);
  sl_row_builder_set_i64(out, 2, w->end_us);
  sl_row_builder_set_i64(out, 3, w->max_ts_us);
  sl_row_builder_set_i64(out, 4, h[1]);
  sl_row_builder_set_str(out, 5, acc.ptr + sizeof(h),
                           (uint32_t)(acc.len - sizeof(h)));
  return SL_OK;
}

/* Second stage, keyed by window_end. */
static int q7_top_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  top_local_t *l = sl_ctx_local(ctx);
  int64_t auction = sl_row_get_i64(row, 0);
  sl_slice_t bids = sl_row_get_str(row, 5);
  sl_bytes_clear(&l->items); /* (auction, packed bid) per bid */
  for (size_t off = 0, n; off + 20 <= bids.len; off += n) {
    n = q7_bid_len(bids.ptr + off);
    if (off + n > bids.len) break;
    int rc = sl_bytes_append(&l->items, &auction, 8);
    if (rc == SL_OK) rc = sl_bytes_append(&l->items, bids.ptr + off, n);
    if (rc != SL_OK) return rc;
  }
  return top_fold(ctx, l, sl_row_get_i64(row, 2), sl_row_get_i64(row, 1),
                  sl_row_get_i64(row, 3), sl_row_get_i64(row, 4),
                  l->items.data, l->items.len);
}

static int q7_top_timer(sl_ctx_t *ctx, void *user, int64_t ts) {
  (void)user;
  top_local_t *l = sl_ctx_local(ctx);
  sl_slice_t cur;
  int rc = sl_value_get(l->top, &cur);
  if (rc == SL_ENOTFOUND) return SL_OK;
  if (rc != SL_OK) return rc;
  int64_t h[3];
  memcpy(h, cur.ptr, sizeof(h));
  for (size_t off = sizeof(h); off + 28 <= cur.len;) {
    const uint8_t *p = cur.ptr + off;
    int64_t v[3];
    uint32_t n;
    memcpy(v, p, sizeof(v)); /* auction, bidder, date_time */
    memcpy(&n, p + 24, sizeof(n));
    sl_row_builder_t *b = sl_ctx_builder(ctx);
    sl_row_builder_set_i64(b, 0, v[0]);
    sl_row_builder_set_i64(b, 1, h[0]);
    sl_row_builder_set_i64(b, 2, v[1]);
    sl_row_builder_set_i64(b, 3, v[2]);
    sl_row_builder_set_str(b, 4, (const char *)p + 28, n);
    sl_row_builder_set_i64(b, 5, ts + 1);
    sl_row_builder_set_i64(b, 6, h[1]);
    sl_row_builder_set_i64(b, 7, h[2]);
    if ((rc = sl_ctx_emit_builder(ctx)) != SL_OK) return rc;
    off += 28 + (size_t)n;
  }
  return sl_state_clear(l->top);
}

/* q8 after the window join of person (0..8) and auction (9..19) rows,
 * window_start 20, window_end 21; keyed by (person id, window_start):
 * emit each new person of a window once. */
typedef struct once_local_s {
  sl_state_t *seen;
} once_local_t;

static int once_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  once_local_t *l = calloc(1, sizeof(*l));
  if (l == NULL) return SL_ENOMEM;
  sl_ctx_set_local(ctx, l);
  sl_state_desc_t d = {"seen", SL_STATE_VALUE, 1, NULL, NULL};
  return sl_ctx_state(ctx, &d, &l->seen);
}

static void once_close(sl_ctx_t *ctx, void *user) {
  (void)user;
  free(sl_ctx_local(ctx));
}

static int once_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  once_local_t *l = sl_ctx_local(ctx);
  int64_t v;
  int rc = sl_value_get_i64(l->seen, &v);
  if (rc == SL_OK) return SL_OK;
  if (rc != SL_ENOTFOUND) return rc;
  if ((rc = sl_value_put_i64(l->seen, 1)) != SL_OK) return rc;
  /* The window's pairs all come before the watermark past its end. */
  if ((rc = sl_ctx_event_timer_register(ctx, sl_row_get_i64(row, 21) - 1)))
    return rc;
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_i64(b, 0, sl_row_get_i64(row, 0));
  sl_slice_t name = sl_row_get_str(row, 1);
  sl_row_builder_set_str(b, 1, name.ptr, name.len);
  sl_row_builder_set_i64(b, 2, sl_row_get_i64(row, 20));
  sl_row_builder_set_i64(b, 3, max64(sl_row_get_i64(row, 6),
                                     sl_row_get_i64(row, 14)));
  sl_row_builder_set_i64(b, 4, max64(sl_row_get_i64(row, 8),
                                     sl_row_get_i64(row, 19)));
  return sl_ctx_emit_builder(ctx);
}

static int once_timer(sl_ctx_t *ctx, void *user, int64_t ts) {
  (void)user, (void)ts;
  once_local_t *l = sl_ctx_local(ctx);
  return sl_state_clear(l->seen);
}

#define F(n, t) {n, {t, 0, 0, false}}

/* A schema the query owns until the caller unrefs it. */
static sl_schema_t *schema(const sl_field_t *f, uint32_t n,
                           sl_schema_t **schemas, uint32_t *n_schemas,
                           sl_error_t **out_err) {
  sl_schema_t *out = NULL;
  if (sl_schema_create(f, n, &out, out_err) != SL_OK) return NULL;
  schemas[(*n_schemas)++] = out;
  return out;
}

#define SCHEMA(f) schema(f, sizeof(f) / sizeof(f[0]), schemas, n_schemas, \
                         out_err)
#define SOURCE(name) src(src_user, job, name)

/* The second stage of q5, q7 and q8: a process function keyed by fields. */
static sl_stream_t *keyed_process(sl_stream_t *s, const char *const *key,
                                  uint32_t n_key, const char *uid,
                                  sl_schema_t *out, sl_process_fns_t *fns,
                                  int (*open)(sl_ctx_t *, void *),
                                  int (*process)(sl_ctx_t *, void *,
                                                 const sl_row_t *),
                                  void (*close)(sl_ctx_t *, void *),
                                  int (*timer)(sl_ctx_t *, void *, int64_t)) {
  fns->open = open;
  fns->process = process;
  fns->close = close;
  fns->on_event_timer = timer;
  return sl_stream_process(sl_stream_key_by_fields(s, key, n_key), uid, out,
                           fns, NULL);
}

sl_stream_t *sl_query_build(sl_job_t *job, const sl_query_t *q,
                            sl_query_source_fn src, void *src_user,
                            sl_schema_t **schemas, uint32_t *n_schemas,
                            sl_error_t **out_err) {
  sl_stream_t *s = NULL;
  sl_schema_t *out = NULL;
  sl_process_fns_t fns;
  memset(&fns, 0, sizeof(fns));
  sl_window_spec_t ws;
  sl_window_spec_init(&ws);
  ws.time_field = "date_time";
  if (strcmp(q->name, "q0") == 0 || strcmp(q->name, "q1") == 0) {
    bool is_q1 = q->name[1] == '1';
    sl_field_t f[] = {F("auction", SL_TYPE_INT64), F("bidder", SL_TYPE_INT64),
                      F("price", is_q1 ? SL_TYPE_FLOAT64 : SL_TYPE_INT64),
                      F("date_time", SL_TYPE_TIMESTAMP),
                      F("extra", SL_TYPE_STRING),
                      F("ingest_time", SL_TYPE_TIMESTAMP)};
    if ((out = SCHEMA(f)) == NULL) return NULL;
    s = sl_stream_map(SOURCE("bid"), q->name, out, is_q1 ? q1_map : q0_map,
                      NULL);
  } else if (strcmp(q->name, "q2") == 0) {
    sl_field_t f[] = {F("auction", SL_TYPE_INT64), F("price", SL_TYPE_INT64),
                      F("date_time", SL_TYPE_TIMESTAMP),
                      F("ingest_time", SL_TYPE_TIMESTAMP)};
    if ((out = SCHEMA(f)) == NULL) return NULL;
    s = sl_stream_filter(SOURCE("bid"), "q2-filter", q2_filter, NULL);
    s = sl_stream_map(s, "q2", out, q2_map, NULL);
  } else if (strcmp(q->name, "q3") == 0) {
    sl_field_t f[] = {F("name", SL_TYPE_STRING), F("city", SL_TYPE_STRING),
                      F("state", SL_TYPE_STRING), F("id", SL_TYPE_INT64),
                      F("date_time", SL_TYPE_TIMESTAMP),
                      F("ingest_time", SL_TYPE_TIMESTAMP)};
    if ((out = SCHEMA(f)) == NULL) return NULL;
    const char *seller[] = {"seller"}, *id[] = {"id"};
    sl_stream_t *a = sl_stream_filter(SOURCE("auction"), "q3-category",
                                      q3_auction_filter, NULL);
    a = sl_stream_key_by_fields(a, seller, 1);
    sl_stream_t *p = sl_stream_filter(SOURCE("person"), "q3-state",
                                      q3_person_filter, NULL);
    p = sl_stream_key_by_fields(p, id, 1);
    s = sl_stream_join(a, p, "q3-join");
    s = sl_stream_map(s, "q3", out, q3_map, NULL);
  } else if (strcmp(q->name, "q4") == 0) {
    sl_field_t fd[] = {F("category", SL_TYPE_INT64),
                       F("d_total", SL_TYPE_INT64),
                       F("d_auctions", SL_TYPE_INT64),
                       F("date_time", SL_TYPE_TIMESTAMP),
                       F("ingest_time", SL_TYPE_TIMESTAMP)};
    sl_field_t f[] = {F("category", SL_TYPE_INT64),
                      F("avg_price", SL_TYPE_FLOAT64),
                      F("auctions", SL_TYPE_INT64),
                      F("date_time", SL_TYPE_TIMESTAMP),
                      F("ingest_time", SL_TYPE_TIMESTAMP)};
    sl_schema_t *delta = SCHEMA(fd);
    if (delta == NULL || (out = SCHEMA(f)) == NULL) return NULL;
    const char *id[] = {"id"}, *auction[] = {"auction"};
    const char *category[] = {"category"};
    sl_stream_t *a = sl_stream_key_by_fields(SOURCE("auction"), id, 1);
    sl_stream_t *b = sl_stream_key_by_fields(SOURCE("bid"), auction, 1);
    fns.open = q4_open;
    fns.process = q4_process_auction;
    fns.process2 = q4_process_bid;
    fns.close = q4_close;
    fns.on_event_timer = q4_timer;
    s = sl_stream_connect(a, b, "q4-max", delta, &fns, NULL);
    s = sl_stream_key_by_fields(s, category, 1);
    sl_agg_t aggs[] = {{"total", SL_AGG_SUM, "d_total"},
                       {"auctions", SL_AGG_SUM, "d_auctions"},
                       {"date_time", SL_AGG_MAX, "date_time"},
                       {"ingest_time", SL_AGG_MAX, "ingest_time"}};
    s = sl_stream_aggregate(s, "q4-sums", aggs, 4, SL_AGG_EMIT_UPDATES);
    s = sl_stream_map(s, "q4-avg", out, q4_avg, NULL);
  } else if (strcmp(q->name, "q5") == 0) {
    /* Bids per auction over sliding windows, then the auctions with the
     * most of each window. */
    sl_field_t f[] = {F("auction", SL_TYPE_INT64), F("num", SL_TYPE_INT64),
                      F("window_end", SL_TYPE_TIMESTAMP),
                      F("event_time", SL_TYPE_TIMESTAMP),
                      F("ingest_time", SL_TYPE_TIMESTAMP)};
    if ((out = SCHEMA(f)) == NULL) return NULL;
    const char *auction[] = {"auction"}, *wend[] = {"window_end"};
    s = sl_stream_key_by_fields(SOURCE("bid"), auction, 1);
    ws.kind = SL_WINDOW_SLIDING;
    ws.size_us = 10000000;
    ws.slide_us = 2000000;
    sl_agg_t aggs[] = {{"num", SL_AGG_COUNT, NULL},
                       {"ingest_time", SL_AGG_MAX, "ingest_time"}};
    s = sl_stream_window_aggregate(s, "q5-count", &ws, aggs, 2);
    s = keyed_process(s, wend, 1, "q5-top", out, &fns, top_open, top_process,
                      top_close, top_timer);
  } else if (strcmp(q->name, "q7") == 0) {
    sl_field_t f1[] = {F("auction", SL_TYPE_INT64), F("price", SL_TYPE_INT64),
                       F("window_end", SL_TYPE_TIMESTAMP),
                       F("event_time", SL_TYPE_TIMESTAMP),
                       F("ingest_time", SL_TYPE_TIMESTAMP),
                       F("bids", SL_TYPE_BYTES)};
    sl_field_t f[] = {F("auction", SL_TYPE_INT64), F("price", SL_TYPE_INT64),
                      F("bidder", SL_TYPE_INT64),
                      F("date_time", SL_TYPE_TIMESTAMP),
                      F("extra", SL_TYPE_STRING),
                      F("window_end", SL_TYPE_TIMESTAMP),
                      F("event_time", SL_TYPE_TIMESTAMP),
                      F("ingest_time", SL_TYPE_TIMESTAMP)};
    sl_schema_t *best = SCHEMA(f1);
    if (best == NULL || (out = SCHEMA(f)) == NULL) return NULL;
    const char *auction[] = {"auction"}, *wend[] = {"window_end"};
    s = sl_stream_key_by_fields(SOURCE("bid"), auction, 1);
    ws.kind = SL_WINDOW_TUMBLING;
    ws.size_us = 10000000;
    sl_window_agg_fns_t wf = {q7_add, NULL, q7_result};
    s = sl_stream_window_reduce(s, "q7-max", &ws, best, &wf, NULL);
    s = keyed_process(s, wend, 1, "q7-top", out, &fns, top_open,
                      q7_top_process, top_close, q7_top_timer);
  } else if (strcmp(q->name, "q8") == 0) {
    sl_field_t f[] = {F("id", SL_TYPE_INT64), F("name", SL_TYPE_STRING),
                      F("window_start", SL_TYPE_TIMESTAMP),
                      F("date_time", SL_TYPE_TIMESTAMP),
                      F("ingest_time", SL_TYPE_TIMESTAMP)};
    if ((out = SCHEMA(f)) == NULL) return NULL;
    const char *seller[] = {"seller"}, *id[] = {"id"};
    const char *once_key[] = {"id", "window_start"};
    sl_stream_t *p = sl_stream_key_by_fields(SOURCE("person"), id, 1);
    sl_stream_t *a = sl_stream_key_by_fields(SOURCE("auction"), seller, 1);
    ws.size_us = 10000000;
    s = sl_stream_window_join(p, a, "q8-join", &ws, "date_time");
    s = keyed_process(s, once_key, 2, "q8", out, &fns, once_open,
                      once_process, once_close, once_timer);
  } else if (strcmp(q->name, "count") == 0) {
    const char *key[] = {"key"};
    s = sl_stream_key_by_fields(SOURCE("keys"), key, 1);
    sl_agg_t aggs[] = {{"n", SL_AGG_COUNT, NULL},
                       {"date_time", SL_AGG_MAX, "date_time"},
                       {"ingest_time", SL_AGG_MAX, "ingest_time"}};
    s = sl_stream_aggregate(s, "count", aggs, 3, SL_AGG_EMIT_UPDATES);
  } else if (strcmp(q->name, "wagg") == 0) {
    const char *key[] = {"key"};
    s = sl_stream_key_by_fields(SOURCE("keys"), key, 1);
    ws.kind = SL_WINDOW_SLIDING;
    ws.size_us = 8000000;
    ws.slide_us = 4000000;
    sl_agg_t aggs[] = {{"sum", SL_AGG_SUM, "value"},
                       {"ingest_time", SL_AGG_MAX, "ingest_time"}};
    s = sl_stream_window_aggregate(s, "wagg", &ws, aggs, 2);
  } else if (strcmp(q->name, "wjoin") == 0) {
    const char *key[] = {"key"};
    sl_stream_t *l = sl_stream_key_by_fields(SOURCE("left"), key, 1);
    sl_stream_t *r = sl_stream_key_by_fields(SOURCE("right"), key, 1);
    ws.size_us = 2000000;
    s = sl_stream_window_join(l, r, "wjoin", &ws, "date_time");
  } else {
    sl_error_set(out_err, SL_EINVAL, "no query '%s'", q->name);
    return NULL;
  }
  if (s == NULL) {
    const sl_error_t *e = sl_job_error(job);
    sl_error_set(out_err, e ? sl_error_code(e) : SL_EINVAL, "query %s: %s",
                 q->name, e ? sl_error_message(e) : "a source is missing");
  }
  return s;
}
