/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of channels (src/runtime/channel.c): FIFO order, SL_EAGAIN exactly
 * at the credit limit, pending buffers of sl__channel_send flushed in order
 * when credit returns, the wake-up protocol (W1, W2 of channel.c) through a
 * recording scheduler, buffer recycling (the same buffers come back;
 * oversized and event buffers are freed), and a producer and a consumer
 * thread moving 1,000,000 sequence-numbered records through two credits,
 * which must arrive complete and in order, cleanly under ThreadSanitizer.
 */
#include <pthread.h>
#include <sched.h>

#include "runtime/task_int.h"
#include "sl_test.h"

static sl_buf_t *buf_with(uint32_t cap, int64_t value) {
  sl_buf_t *b = sl__buf_new(cap);
  SL_ASSERT_TRUE(b != NULL);
  b->value = value;
  return b;
}

static void drain_and_free(sl_channel_t *ch) {
  sl_buf_t *b;
  while ((b = sl__channel_pop(ch)) != NULL) sl__buf_free(b);
}

SL_TEST(channel_fifo_order) {
  sl_channel_t *ch;
  SL_ASSERT_OK(sl__channel_create(4, 1024, &ch));
  SL_ASSERT_TRUE(sl__channel_pop(ch) == NULL);
  SL_ASSERT_TRUE(!sl__channel_has_data(ch));
  /* Interleave pushes and pops so that the ring wraps many times. */
  int64_t next_push = 0, next_pop = 0;
  for (int round = 0; round < 1000; round++) {
    int n_push = 1 + round % 4;
    for (int i = 0; i < n_push; i++) {
      int rc = sl__channel_push(ch, buf_with(0, next_push));
      SL_ASSERT_OK(rc);
      next_push++;
    }
    SL_ASSERT_TRUE(sl__channel_has_data(ch));
    int n_pop = 1 + (round * 7) % n_push;
    if (round % 5 == 4) n_pop = n_push + 4; /* drain */
    for (int i = 0; i < n_pop; i++) {
      sl_buf_t *b = sl__channel_pop(ch);
      if (b == NULL) break;
      SL_ASSERT_EQ_INT(b->value, next_pop);
      next_pop++;
      sl__buf_free(b);
    }
    /* Keep the backlog below the credit. */
    while (next_push - next_pop > 0) {
      sl_buf_t *b = sl__channel_pop(ch);
      SL_ASSERT_TRUE(b != NULL);
      SL_ASSERT_EQ_INT(b->value, next_pop);
      next_pop++;
      sl__buf_free(b);
    }
  }
  SL_ASSERT_EQ_INT(next_pop, next_push);
  SL_ASSERT_TRUE(sl__channel_pop(ch) == NULL);
  sl__channel_destroy(ch);
}

SL_TEST(channel_eagain_at_credit) {
  static const uint32_t credits[] = {1, 2, 3, 4, 5, 7, 8, 16, 100};
  for (size_t c = 0; c < sizeof(credits) / sizeof(credits[0]); c++) {
    uint32_t n = credits[c];
    sl_channel_t *ch;
    SL_ASSERT_OK(sl__channel_create(n, 256, &ch));
    SL_ASSERT_EQ_INT(ch->credits, n);
    int64_t v = 0, expect = 0;
    for (int round = 0; round < 3; round++) {
      /* Exactly n queued buffers are accepted ... */
      while (atomic_load(&ch->count) < n)
        SL_ASSERT_OK(sl__channel_push(ch, buf_with(0, v++)));
      /* ... and the next push is refused, leaving the buffer with the
       * caller. */
      sl_buf_t *extra = buf_with(0, -1);
      SL_ASSERT_EQ_INT(sl__channel_push(ch, extra), SL_EAGAIN);
      SL_ASSERT_EQ_INT(sl__channel_push(ch, extra), SL_EAGAIN);
      SL_ASSERT_EQ_INT(atomic_load(&ch->count), n);
      /* One pop returns one credit. */
      sl_buf_t *b = sl__channel_pop(ch);
      SL_ASSERT_EQ_INT(b->value, expect++);
      sl__buf_free(b);
      extra->value = v++;
      SL_ASSERT_OK(sl__channel_push(ch, extra));
      sl_buf_t *refused = buf_with(0, -2);
      SL_ASSERT_EQ_INT(sl__channel_push(ch, refused), SL_EAGAIN);
      sl__buf_free(refused);
      /* The refused buffers never entered the queue. */
      for (uint32_t i = 0; i < n / 2 + 1; i++) {
        b = sl__channel_pop(ch);
        SL_ASSERT_TRUE(b != NULL);
        SL_ASSERT_EQ_INT(b->value, expect++);
        sl__buf_free(b);
      }
    }
    while (atomic_load(&ch->count) > 0) {
      sl_buf_t *b = sl__channel_pop(ch);
      SL_ASSERT_EQ_INT(b->value, expect++);
      sl__buf_free(b);
    }
    SL_ASSERT_EQ_INT(expect, v);
    SL_ASSERT_TRUE(sl__channel_pop(ch) == NULL);
    sl__channel_destroy(ch);
  }
  /* Zero credits means one. */
  sl_channel_t *ch;
  SL_ASSERT_OK(sl__channel_create(0, 256, &ch));
  SL_ASSERT_OK(sl__channel_push(ch, buf_with(0, 0)));
  sl_buf_t *b = buf_with(0, 1);
  SL_ASSERT_EQ_INT(sl__channel_push(ch, b), SL_EAGAIN);
  sl__buf_free(b);
  drain_and_free(ch);
  sl__channel_destroy(ch);
}

/* ------------------------------------------------------------------ */
/* A scheduler that only records wake-ups, and tasks that use it. */

typedef struct rec_sched_s {
  sl_sched_t base;
  sl_task_t *woken[64];
  uint32_t n_woken;
} rec_sched_t;

static void rec_wake(sl_sched_t *s, sl_task_t *t) {
  rec_sched_t *r = (rec_sched_t *)s;
  SL_ASSERT_TRUE(r->n_woken < 64);
  r->woken[r->n_woken++] = t;
}
static void rec_wake_at(sl_sched_t *s, sl_task_t *t, int64_t at) {
  (void)s;
  (void)t;
  (void)at;
}
static int64_t rec_now(sl_sched_t *s) {
  (void)s;
  return 0;
}
static int rec_run(sl_sched_t *s) {
  (void)s;
  return SL_OK;
}
static void rec_destroy(sl_sched_t *s) { (void)s; }
static const sl_sched_ops_t rec_ops = {rec_wake, rec_wake_at, rec_now, rec_run,
                                       rec_destroy};

static uint32_t n_wakes_of(const rec_sched_t *r, const sl_task_t *t) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < r->n_woken; i++) n += r->woken[i] == t;
  return n;
}

SL_TEST(channel_send_keeps_pending_in_order) {
  rec_sched_t rs;
  memset(&rs, 0, sizeof(rs));
  rs.base.ops = &rec_ops;
  sl_task_t *sender = calloc(1, sizeof(*sender));
  sender->sched = &rs.base;
  sl_channel_t *ch;
  SL_ASSERT_OK(sl__channel_create(2, 256, &ch));
  ch->sender = sender;

  /* Two fit; three more stay pending, and the sender is marked blocked
   * once. */
  for (int64_t i = 0; i < 5; i++) sl__channel_send(ch, buf_with(0, i));
  SL_ASSERT_EQ_INT(atomic_load(&ch->count), 2);
  SL_ASSERT_EQ_INT(ch->n_pending, 3);
  SL_ASSERT_EQ_INT(sender->n_blocked, 1);
  SL_ASSERT_EQ_INT(ch->pending_head->value, 2);
  SL_ASSERT_EQ_INT(ch->pending_tail->value, 4);
  /* No credit: nothing moves. */
  SL_ASSERT_TRUE(!sl__channel_flush_pending(ch));
  SL_ASSERT_EQ_INT(ch->n_pending, 3);

  /* One pop, one buffer moves. */
  sl_buf_t *b = sl__channel_pop(ch);
  SL_ASSERT_EQ_INT(b->value, 0);
  sl__buf_free(b);
  SL_ASSERT_TRUE(!sl__channel_flush_pending(ch));
  SL_ASSERT_EQ_INT(ch->n_pending, 2);
  SL_ASSERT_EQ_INT(atomic_load(&ch->count), 2);

  /* A send while buffers are pending must not overtake them, even with
   * credit available. */
  b = sl__channel_pop(ch);
  SL_ASSERT_EQ_INT(b->value, 1);
  sl__buf_free(b);
  SL_ASSERT_EQ_INT(atomic_load(&ch->count), 1);
  sl__channel_send(ch, buf_with(0, 5));
  SL_ASSERT_EQ_INT(ch->n_pending, 3);
  SL_ASSERT_EQ_INT(atomic_load(&ch->count), 1);
  SL_ASSERT_EQ_INT(sender->n_blocked, 1);

  /* Drain while flushing: order 2, 3, 4, 5. */
  int64_t expect = 2;
  bool is_flushed = false;
  for (int guard = 0; guard < 100 && expect < 6; guard++) {
    is_flushed = sl__channel_flush_pending(ch);
    b = sl__channel_pop(ch);
    if (b == NULL) continue;
    SL_ASSERT_EQ_INT(b->value, expect);
    expect++;
    sl__buf_free(b);
  }
  SL_ASSERT_EQ_INT(expect, 6);
  SL_ASSERT_TRUE(is_flushed);
  SL_ASSERT_TRUE(sl__channel_flush_pending(ch));
  SL_ASSERT_EQ_INT(ch->n_pending, 0);
  SL_ASSERT_TRUE(ch->pending_head == NULL && ch->pending_tail == NULL);
  SL_ASSERT_EQ_INT(sender->n_blocked, 0);
  SL_ASSERT_TRUE(sl__channel_pop(ch) == NULL);

  /* With nothing pending and credit, send pushes directly. */
  sl__channel_send(ch, buf_with(0, 6));
  SL_ASSERT_EQ_INT(ch->n_pending, 0);
  SL_ASSERT_EQ_INT(atomic_load(&ch->count), 1);
  /* Buffers still pending at destroy are freed (ASan checks leaks). */
  sl__channel_send(ch, buf_with(0, 7));
  sl__channel_send(ch, buf_with(0, 8));
  sl__channel_send(ch, buf_with(0, 9));
  SL_ASSERT_EQ_INT(atomic_load(&ch->count), 2);
  SL_ASSERT_EQ_INT(ch->n_pending, 2);
  SL_ASSERT_EQ_INT(sender->n_blocked, 1);
  ch->cur = buf_with(256, 10);
  sl__channel_destroy(ch);
  free(sender);
}

/*
 * W1: a push that finds the channel empty wakes the receiver, and only
 * that push.  W2: a pop wakes the sender when it finds wake_at buffers
 * queued (the credits with fewer than 4, else credits / 2 + 1), once per
 * drain from full.
 */
SL_TEST(channel_wakeups) {
  static const uint32_t credits[] = {1, 2, 3, 4, 5, 8, 9};
  for (size_t c = 0; c < sizeof(credits) / sizeof(credits[0]); c++) {
    uint32_t n = credits[c];
    rec_sched_t rs;
    memset(&rs, 0, sizeof(rs));
    rs.base.ops = &rec_ops;
    sl_task_t *sender = calloc(1, sizeof(*sender));
    sl_task_t *receiver = calloc(1, sizeof(*receiver));
    sender->sched = &rs.base;
    receiver->sched = &rs.base;
    sl_channel_t *ch;
    SL_ASSERT_OK(sl__channel_create(n, 256, &ch));
    ch->sender = sender;
    ch->receiver = receiver;
    uint32_t wake_at = n < 4 ? n : n / 2 + 1;
    SL_ASSERT_EQ_INT(ch->wake_at, wake_at);
    for (int round = 0; round < 2; round++) {
      rs.n_woken = 0;
      for (uint32_t i = 0; i < n; i++) {
        SL_ASSERT_OK(sl__channel_push(ch, buf_with(0, i)));
        SL_ASSERT_EQ_INT(n_wakes_of(&rs, receiver), 1);
      }
      SL_ASSERT_EQ_INT(n_wakes_of(&rs, sender), 0);
      /* A sender that found no credit is woken while the receiver drains,
       * exactly once. */
      for (uint32_t i = n; i > 0; i--) {
        sl_buf_t *b = sl__channel_pop(ch);
        sl__buf_free(b);
        uint32_t after = i - 1;
        SL_ASSERT_EQ_INT(n_wakes_of(&rs, sender), after < wake_at ? 1 : 0);
      }
      SL_ASSERT_EQ_INT(n_wakes_of(&rs, receiver), 1);
      /* Half full: popping below wake_at from a count under it does not
       * wake again. */
      rs.n_woken = 0;
      SL_ASSERT_OK(sl__channel_push(ch, buf_with(0, 0)));
      sl__buf_free(sl__channel_pop(ch));
      SL_ASSERT_EQ_INT(n_wakes_of(&rs, sender), wake_at == 1 ? 1 : 0);
    }
    sl__channel_destroy(ch);
    free(sender);
    free(receiver);
  }
}

/* ------------------------------------------------------------------ */
/* Recycling.  A counting allocator shows which buffers are freed. */

static _Atomic uint64_t n_allocs, n_frees;

static void *count_malloc(size_t n) {
  atomic_fetch_add(&n_allocs, 1);
  return malloc(n);
}
static void *count_calloc(size_t n, size_t size) {
  atomic_fetch_add(&n_allocs, 1);
  return calloc(n, size);
}
static void *count_realloc(void *p, size_t n) {
  if (p == NULL) atomic_fetch_add(&n_allocs, 1);
  return realloc(p, n);
}
static void count_free(void *p) {
  atomic_fetch_add(&n_frees, 1);
  free(p);
}
static const sl_allocator_t counting = {count_malloc, count_calloc,
                                        count_realloc, count_free};

SL_TEST(channel_recycle_reuses_buffers) {
  sl_set_allocator(&counting);
  const uint32_t size = 512;
  sl_channel_t *ch;
  SL_ASSERT_OK(sl__channel_create(4, size, &ch));
  /* Nothing to recycle yet: new buffers of the channel's size. */
  sl_buf_t *a = sl__channel_get_buffer(ch, 0);
  sl_buf_t *b = sl__channel_get_buffer(ch, size);
  SL_ASSERT_TRUE(a != NULL && b != NULL && a != b);
  SL_ASSERT_EQ_INT(a->cap, size);
  SL_ASSERT_EQ_INT(b->cap, size);
  /* Through the channel and back: the same buffers return, in the order
   * they were recycled, reset for reuse. */
  a->len = 100;
  a->n_records = 3;
  a->kind = SL_BUF_WATERMARK;
  SL_ASSERT_OK(sl__channel_push(ch, a));
  SL_ASSERT_OK(sl__channel_push(ch, b));
  sl_buf_t *x = sl__channel_pop(ch), *y = sl__channel_pop(ch);
  SL_ASSERT_EQ_PTR(x, a);
  SL_ASSERT_EQ_PTR(y, b);
  sl__channel_recycle(ch, x);
  sl__channel_recycle(ch, y);
  uint64_t allocs = atomic_load(&n_allocs);
  sl_buf_t *r1 = sl__channel_get_buffer(ch, 10);
  sl_buf_t *r2 = sl__channel_get_buffer(ch, size);
  SL_ASSERT_EQ_PTR(r1, a);
  SL_ASSERT_EQ_PTR(r2, b);
  SL_ASSERT_EQ_INT(atomic_load(&n_allocs), allocs); /* no new allocation */
  SL_ASSERT_EQ_INT(r1->len, 0);
  SL_ASSERT_EQ_INT(r1->n_records, 0);
  SL_ASSERT_EQ_INT(r1->kind, SL_BUF_DATA);
  SL_ASSERT_TRUE(r1->next == NULL);
  /* The return ring is empty again: the next one is new. */
  sl_buf_t *c = sl__channel_get_buffer(ch, 0);
  SL_ASSERT_TRUE(c != a && c != b);
  SL_ASSERT_EQ_INT(atomic_load(&n_allocs), allocs + 1);

  /* Many rounds with a steady population of three buffers allocate
   * nothing. */
  sl_buf_t *pool[3] = {r1, r2, c};
  allocs = atomic_load(&n_allocs);
  for (int round = 0; round < 1000; round++) {
    for (int i = 0; i < 3; i++) SL_ASSERT_OK(sl__channel_push(ch, pool[i]));
    for (int i = 0; i < 3; i++) sl__channel_recycle(ch, sl__channel_pop(ch));
    for (int i = 0; i < 3; i++) {
      sl_buf_t *g = sl__channel_get_buffer(ch, 0);
      SL_ASSERT_TRUE(g == r1 || g == r2 || g == c);
      pool[i] = g;
    }
  }
  SL_ASSERT_EQ_INT(atomic_load(&n_allocs), allocs);
  for (int i = 0; i < 3; i++) sl__channel_recycle(ch, pool[i]);
  sl__channel_destroy(ch); /* frees what is in the return ring */
  sl_set_allocator(NULL);
}

SL_TEST(channel_oversized_buffers_are_freed) {
  sl_set_allocator(&counting);
  const uint32_t size = 512;
  sl_channel_t *ch;
  SL_ASSERT_OK(sl__channel_create(4, size, &ch));
  /* A record larger than the buffer size gets a one-off buffer. */
  sl_buf_t *big = sl__channel_get_buffer(ch, size + 1);
  SL_ASSERT_TRUE(big != NULL);
  SL_ASSERT_EQ_INT(big->cap, size + 1);
  SL_ASSERT_OK(sl__channel_push(ch, big));
  sl_buf_t *got = sl__channel_pop(ch);
  SL_ASSERT_EQ_PTR(got, big);
  uint64_t frees = atomic_load(&n_frees);
  uint32_t tail = atomic_load(&ch->ret_tail);
  sl__channel_recycle(ch, got);
  /* Freed, not queued for reuse. */
  SL_ASSERT_EQ_INT(atomic_load(&n_frees), frees + 1);
  SL_ASSERT_EQ_INT(atomic_load(&ch->ret_tail), tail);
  /* Event buffers (capacity 0) are freed the same way. */
  sl_buf_t *ev = sl__buf_new(0);
  ev->kind = SL_BUF_EOP;
  sl__channel_recycle(ch, ev);
  SL_ASSERT_EQ_INT(atomic_load(&n_frees), frees + 2);
  SL_ASSERT_EQ_INT(atomic_load(&ch->ret_tail), tail);
  /* An oversized request never takes a recycled buffer. */
  sl_buf_t *small = sl__channel_get_buffer(ch, 0);
  sl__channel_recycle(ch, small);
  SL_ASSERT_EQ_INT(atomic_load(&ch->ret_tail), tail + 1);
  sl_buf_t *big2 = sl__channel_get_buffer(ch, 4 * size);
  SL_ASSERT_TRUE(big2 != small);
  SL_ASSERT_EQ_INT(big2->cap, 4 * size);
  SL_ASSERT_EQ_INT(atomic_load(&ch->ret_head), tail); /* still queued */
  sl__buf_free(big2);
  SL_ASSERT_EQ_PTR(sl__channel_get_buffer(ch, size), small);
  /* When the return ring is full, further buffers are freed. */
  uint32_t ring = ch->ret_mask + 1;
  sl_buf_t **bufs = calloc(ring + 3, sizeof(*bufs));
  bufs[0] = small;
  for (uint32_t i = 1; i < ring + 3; i++) bufs[i] = sl__buf_new(size);
  frees = atomic_load(&n_frees);
  for (uint32_t i = 0; i < ring + 3; i++) sl__channel_recycle(ch, bufs[i]);
  SL_ASSERT_EQ_INT(atomic_load(&n_frees), frees + 3);
  SL_ASSERT_EQ_INT(atomic_load(&ch->ret_tail) - atomic_load(&ch->ret_head),
                   ring);
  /* They come back in order. */
  for (uint32_t i = 0; i < ring; i++)
    SL_ASSERT_EQ_PTR(sl__channel_get_buffer(ch, 0), bufs[i]);
  for (uint32_t i = 0; i < ring; i++) sl__channel_recycle(ch, bufs[i]);
  free(bufs);
  uint64_t allocs = atomic_load(&n_allocs);
  frees = atomic_load(&n_frees);
  sl__channel_destroy(ch);
  /* Destroy frees the ring buffers, both rings and the channel. */
  SL_ASSERT_EQ_INT(atomic_load(&n_frees) - frees, ring + 3);
  SL_ASSERT_EQ_INT(atomic_load(&n_allocs), allocs);
  sl_set_allocator(NULL);
}

/* ------------------------------------------------------------------ */
/* Two threads. */

#define N_RECORDS 1000000u
#define FRAME 12u /* [u32 len = 8][u64 seq] */

typedef struct pc_s {
  sl_channel_t *ch;
  bool use_send; /* sl__channel_send + flush_pending instead of push */
  /* Written by the consumer, read after join. */
  uint64_t n_received;
  uint64_t n_buffers;
  uint64_t first_bad_seq;
  uint64_t bad_expected;
  bool has_error;
  bool saw_eop;
  uint64_t n_oversized;
} pc_t;

static void push_spin(pc_t *pc, sl_buf_t *b) {
  if (pc->use_send) {
    sl__channel_send(pc->ch, b);
    while (!sl__channel_flush_pending(pc->ch)) sched_yield();
    return;
  }
  while (sl__channel_push(pc->ch, b) == SL_EAGAIN) sched_yield();
}

static void *producer_main(void *arg) {
  pc_t *pc = arg;
  uint64_t seq = 0;
  uint32_t n_buf = 0;
  while (seq < N_RECORDS) {
    /* Mostly recycled buffers of a varying fill, now and then a one-off
     * oversized buffer. */
    uint32_t want = (n_buf % 97 == 96) ? pc->ch->buffer_size + FRAME : 0;
    sl_buf_t *b = sl__channel_get_buffer(pc->ch, want);
    if (b == NULL) abort();
    uint32_t n_fill = 1 + n_buf % 7;
    for (uint32_t k = 0; k < n_fill && seq < N_RECORDS &&
                         b->cap - b->len >= FRAME;
         k++) {
      uint32_t len = 8;
      memcpy(b->data + b->len, &len, 4);
      memcpy(b->data + b->len + 4, &seq, 8);
      b->len += FRAME;
      b->n_records++;
      seq++;
    }
    n_buf++;
    push_spin(pc, b);
  }
  sl_buf_t *eop = sl__buf_new(0);
  if (eop == NULL) abort();
  eop->kind = SL_BUF_EOP;
  push_spin(pc, eop);
  return NULL;
}

static void *consumer_main(void *arg) {
  pc_t *pc = arg;
  uint64_t expect = 0;
  for (;;) {
    sl_buf_t *b = sl__channel_pop(pc->ch);
    if (b == NULL) {
      sched_yield();
      continue;
    }
    if (b->kind == SL_BUF_EOP) {
      pc->saw_eop = true;
      sl__channel_recycle(pc->ch, b);
      break;
    }
    pc->n_buffers++;
    if (b->cap != pc->ch->buffer_size) pc->n_oversized++;
    if (b->len != b->n_records * FRAME && !pc->has_error) {
      pc->has_error = true;
      pc->first_bad_seq = UINT64_MAX;
      pc->bad_expected = expect;
    }
    for (uint32_t off = 0; off + FRAME <= b->len; off += FRAME) {
      uint32_t len;
      uint64_t seq;
      memcpy(&len, b->data + off, 4);
      memcpy(&seq, b->data + off + 4, 8);
      if ((len != 8 || seq != expect) && !pc->has_error) {
        pc->has_error = true;
        pc->first_bad_seq = seq;
        pc->bad_expected = expect;
      }
      expect = seq + 1;
      pc->n_received++;
    }
    sl__channel_recycle(pc->ch, b);
  }
  return NULL;
}

static void run_two_threads(bool use_send) {
  pc_t pc;
  memset(&pc, 0, sizeof(pc));
  pc.use_send = use_send;
  /* Sender and receiver tasks stay NULL: no wake-ups, both sides spin. */
  SL_ASSERT_OK(sl__channel_create(2, 256, &pc.ch));
  SL_ASSERT_TRUE(pc.ch->sender == NULL && pc.ch->receiver == NULL);
  pthread_t prod, cons;
  SL_ASSERT_EQ_INT(pthread_create(&cons, NULL, consumer_main, &pc), 0);
  SL_ASSERT_EQ_INT(pthread_create(&prod, NULL, producer_main, &pc), 0);
  pthread_join(prod, NULL);
  pthread_join(cons, NULL);
  if (pc.has_error)
    SL_TEST_FAIL("record %llu arrived where %llu was expected",
                 (unsigned long long)pc.first_bad_seq,
                 (unsigned long long)pc.bad_expected);
  SL_ASSERT_TRUE(pc.saw_eop);
  SL_ASSERT_EQ_INT(pc.n_received, N_RECORDS);
  SL_ASSERT_TRUE(pc.n_oversized > 0);
  SL_ASSERT_EQ_INT(atomic_load(&pc.ch->count), 0);
  SL_ASSERT_EQ_INT(pc.ch->n_pending, 0);
  printf("%llu buffers, %llu oversized\n", (unsigned long long)pc.n_buffers,
         (unsigned long long)pc.n_oversized);
  sl__channel_destroy(pc.ch);
}

SL_TEST(channel_two_threads_push) { run_two_threads(false); }
SL_TEST(channel_two_threads_send) { run_two_threads(true); }
