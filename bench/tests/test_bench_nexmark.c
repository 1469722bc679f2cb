/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-bench-nexmark (bench/bench_nexmark.c) prints the peer contract's
 * canonical answer: each test runs the program on a small input with
 * --out and compares the sorted lines with an answer computed here by
 * brute force from the generator (nexmark.h), with the contract's event
 * times, not from the engine.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nexmark.h"
#include "sl_test.h"

#define T0_US 1700000000000000ll
#define N_EVENTS 60000
#define RATE 10000

static sl_nex_event_t ev;

static sl_nexmark_config_t config(void) {
  sl_nexmark_config_t c;
  sl_nexmark_config_init(&c);
  c.seed = 42;
  c.events_per_second = RATE;
  return c;
}

static int64_t date_time(uint64_t i) {
  return T0_US + (int64_t)(i * 1000000u / RATE);
}

/* A growing array of lines. */
typedef struct lines_s {
  char **s;
  size_t n, cap;
} lines_t;

static void add(lines_t *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add(lines_t *l, const char *fmt, ...) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 1024;
    l->s = realloc(l->s, l->cap * sizeof(char *));
    SL_ASSERT_TRUE(l->s != NULL);
  }
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  SL_ASSERT_TRUE(n >= 0 && (size_t)n < sizeof(buf));
  l->s[l->n] = strdup(buf);
  SL_ASSERT_TRUE(l->s[l->n++] != NULL);
}

static int cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void lines_free(lines_t *l) {
  for (size_t i = 0; i < l->n; i++) free(l->s[i]);
  free(l->s);
}

/* Run the program on query q; its answer's lines into *out, and the
 * results count it printed. */
static void run(const char *q, lines_t *out, unsigned long long *results) {
  const char *bin = getenv("SL_TEST_BIN_DIR");
  SL_ASSERT_TRUE(bin != NULL);
  char prog[4096], dir[] = "/tmp/sl-test-nexmark-XXXXXX";
  SL_ASSERT_TRUE(mkdtemp(dir) != NULL);
  char file[4200], so[4200], se[4200], cmd[16384];
  snprintf(prog, sizeof(prog), "%s/sluice-bench-nexmark", bin);
  snprintf(file, sizeof(file), "%s/out.txt", dir);
  snprintf(so, sizeof(so), "%s/stdout", dir);
  snprintf(se, sizeof(se), "%s/stderr", dir);
  SL_ASSERT_TRUE(snprintf(cmd, sizeof(cmd), "'%s' --query %s --events %d --rate %d "
           "--checkpoint-ms 200 --out '%s' >'%s' 2>'%s'", prog, q,
           N_EVENTS, RATE, file, so, se) < (int)sizeof(cmd));
  size_t len;
  int st = system(cmd);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char *e = sl_test_read_file(se, &len);
    SL_TEST_FAIL("%s failed (%d): %s", cmd, st, e ? e : "");
  }
  char *text = sl_test_read_file(so, &len);
  char want[64];
  snprintf(want, sizeof(want), "query=%s events=%d results=", q, N_EVENTS);
  SL_ASSERT_TRUE(text != NULL && strncmp(text, want, strlen(want)) == 0);
  *results = strtoull(text + strlen(want), NULL, 10);
  free(text);
  text = sl_test_read_file(file, &len);
  SL_ASSERT_TRUE(text != NULL);
  memset(out, 0, sizeof(*out));
  for (char *p = text, *nl; *p; p = nl + 1) {
    nl = strchr(p, '\n');
    SL_ASSERT_TRUE(nl != NULL); /* every line ends with a newline */
    *nl = 0;
    add(out, "%s", p);
  }
  free(text);
  SL_ASSERT_TRUE(snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir) > 0);
  SL_ASSERT_EQ_INT(system(cmd), 0);
}

/* Sort both and compare line by line. */
static void same(lines_t *got, lines_t *want, unsigned long long results) {
  qsort(got->s, got->n, sizeof(char *), cmp);
  qsort(want->s, want->n, sizeof(char *), cmp);
  SL_ASSERT_TRUE(want->n > 0);
  for (size_t i = 0; i < got->n && i < want->n; i++)
    if (strcmp(got->s[i], want->s[i]) != 0)
      SL_TEST_FAIL("sorted line %zu: got '%s', want '%s'", i + 1, got->s[i],
                   want->s[i]);
  SL_ASSERT_EQ_INT(got->n, want->n);
  SL_ASSERT_EQ_INT(results, want->n);
}

SL_TEST(q2_answer_is_the_selection) {
  sl_nexmark_config_t c = config();
  lines_t want = {0}, got;
  for (uint64_t i = 0; i < N_EVENTS; i++) {
    if (sl_nexmark_kind(&c, i) != SL_NEX_BID) continue;
    sl_nexmark_generate(&c, i, date_time(i), &ev);
    if (ev.bid.auction % 123 == 0)
      add(&want, "%lld\t%lld", (long long)ev.bid.auction,
          (long long)ev.bid.price);
  }
  unsigned long long results;
  run("q2", &got, &results);
  same(&got, &want, results);
  lines_free(&got);
  lines_free(&want);
}

typedef struct wa_s {
  int64_t wend, auction;
} wa_t;

static int cmp_wa(const void *a, const void *b) {
  const wa_t *x = a, *y = b;
  if (x->wend != y->wend) return x->wend < y->wend ? -1 : 1;
  return x->auction < y->auction ? -1 : x->auction > y->auction;
}

SL_TEST(q5_answer_is_the_hot_items_of_every_window) {
  sl_nexmark_config_t c = config();
  const int64_t size = 10000000, slide = 2000000;
  size_t cap = N_EVENTS * 5, n = 0;
  wa_t *p = malloc(cap * sizeof(wa_t));
  SL_ASSERT_TRUE(p != NULL);
  /* Every (window, auction) of every bid: the windows [e - size, e) with
   * e a multiple of the slide that hold its date_time. */
  for (uint64_t i = 0; i < N_EVENTS; i++) {
    if (sl_nexmark_kind(&c, i) != SL_NEX_BID) continue;
    int64_t t = date_time(i);
    sl_nexmark_generate(&c, i, t, &ev);
    for (int64_t e = (t / slide + 1) * slide; e - size <= t; e += slide) {
      SL_ASSERT_TRUE(n < cap);
      p[n++] = (wa_t){e, ev.bid.auction};
    }
  }
  qsort(p, n, sizeof(wa_t), cmp_wa);
  lines_t want = {0}, got;
  for (size_t w = 0; w < n;) { /* one window */
    size_t end = w;
    int64_t best = 0;
    while (end < n && p[end].wend == p[w].wend) end++;
    for (int pass = 0; pass < 2; pass++)
      for (size_t i = w; i < end;) { /* one auction */
        size_t j = i;
        while (j < end && p[j].auction == p[i].auction) j++;
        int64_t num = (int64_t)(j - i);
        if (pass == 0 && num > best) best = num;
        if (pass == 1 && num == best)
          add(&want, "%lld\t%lld\t%lld", (long long)p[i].auction,
              (long long)num, (long long)p[w].wend);
        i = j;
      }
    w = end;
  }
  free(p);
  unsigned long long results;
  run("q5", &got, &results);
  same(&got, &want, results);
  lines_free(&got);
  lines_free(&want);
}

/* q4's answer is the final value per category (one line each), not the
 * changelog of updates: per auction the highest price of its bids with
 * date_time in [auction date_time, expires]; per category the mean of
 * those ("%.3f", sum / count as double) and the count. */
SL_TEST(q4_answer_is_the_final_value_per_category) {
  sl_nexmark_config_t c = config();
  int64_t first = -1;
  size_t n_auctions = 0;
  int64_t *start = calloc(N_EVENTS, 8), *expires = calloc(N_EVENTS, 8);
  int64_t *cat = calloc(N_EVENTS, 8), *best = calloc(N_EVENTS, 8);
  SL_ASSERT_TRUE(start && expires && cat && best);
  for (uint64_t i = 0; i < N_EVENTS; i++) {
    if (sl_nexmark_kind(&c, i) != SL_NEX_AUCTION) continue;
    sl_nexmark_generate(&c, i, date_time(i), &ev);
    if (first < 0) first = ev.auction.id;
    size_t a = (size_t)(ev.auction.id - first);
    SL_ASSERT_EQ_INT(a, n_auctions);
    start[a] = ev.date_time_us;
    expires[a] = ev.auction.expires_us;
    cat[a] = ev.auction.category;
    best[a] = -1;
    n_auctions++;
  }
  for (uint64_t i = 0; i < N_EVENTS; i++) {
    if (sl_nexmark_kind(&c, i) != SL_NEX_BID) continue;
    int64_t t = date_time(i);
    sl_nexmark_generate(&c, i, t, &ev);
    int64_t a = ev.bid.auction - first;
    if (a < 0 || a >= (int64_t)n_auctions) continue;
    if (t < start[a] || t > expires[a]) continue;
    if (ev.bid.price > best[a]) best[a] = ev.bid.price;
  }
  int64_t total[64] = {0}, count[64] = {0};
  for (size_t a = 0; a < n_auctions; a++) {
    if (best[a] < 0) continue;
    SL_ASSERT_TRUE(cat[a] >= 0 && cat[a] < 64);
    total[cat[a]] += best[a];
    count[cat[a]]++;
  }
  lines_t want = {0}, got;
  for (int k = 0; k < 64; k++)
    if (count[k])
      add(&want, "%d\t%.3f\t%lld", k, (double)total[k] / (double)count[k],
          (long long)count[k]);
  SL_ASSERT_TRUE(want.n >= 2);
  unsigned long long results;
  run("q4", &got, &results);
  same(&got, &want, results);
  lines_free(&got);
  lines_free(&want);
  free(start), free(expires), free(cat), free(best);
}
