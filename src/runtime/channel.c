/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Buffers and channels.  A channel is a bounded single-producer,
 * single-consumer queue of buffers; its bound is the sender's credit, so a
 * slow receiver makes its sender wait instead of growing memory.  Consumed
 * buffers go back to the sender through a second ring and are reused.
 * See README.md ("Channels and credits").
 *
 * Wake-up protocol (no lost wake-ups):
 *  W1. The sender increments count after storing the slot; if count was 0,
 *      it wakes the receiver.  A receiver that saw count == 0 on every
 *      input and then stopped is therefore woken by the next push.
 *  W2. The receiver decrements count after reading the slot; when count
 *      falls to half the credits (to credits - 1 with fewer than 4 credits),
 *      it wakes the sender, which may be waiting for credit.  A sender that
 *      saw no credit saw count == credits, and the receiver keeps popping
 *      while buffers are queued, so count passes that mark after the sender
 *      looked.  Waking at half rather than at the first free slot lets the
 *      sender refill several buffers per wake-up.
 *  The scheduler's wake is coalescing: waking a running task makes it run
 *  again once more, so a wake that races with the task's last check is
 *  never lost.
 */
#include "runtime/task_int.h"

sl_buf_t *sl__buf_new(uint32_t cap) {
  sl_buf_t *b = sl_malloc(sizeof(*b) + cap);
  if (b == NULL) return NULL;
  b->kind = SL_BUF_DATA;
  b->len = 0;
  b->cap = cap;
  b->n_records = 0;
  b->value = 0;
  b->ts = 0;
  b->next = NULL;
  b->data = (uint8_t *)(b + 1);
  return b;
}

void sl__buf_free(sl_buf_t *b) { sl_free(b); }

static uint32_t pow2_at_least(uint32_t n) {
  uint32_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

int sl__channel_create(uint32_t credits, uint32_t buffer_size,
                       sl_channel_t **out) {
  if (credits == 0) credits = 1;
  sl_channel_t *ch = sl_calloc(1, sizeof(*ch));
  if (ch == NULL) return SL_ENOMEM;
  uint32_t n = pow2_at_least(credits);
  uint32_t rn = pow2_at_least(credits + 4);
  ch->ring = sl_calloc(n, sizeof(sl_buf_t *));
  ch->ret = sl_calloc(rn, sizeof(sl_buf_t *));
  if (ch->ring == NULL || ch->ret == NULL) {
    sl_free(ch->ring);
    sl_free(ch->ret);
    sl_free(ch);
    return SL_ENOMEM;
  }
  ch->mask = n - 1;
  ch->ret_mask = rn - 1;
  ch->credits = credits;
  ch->wake_at = credits < 4 ? credits : credits / 2 + 1;
  ch->buffer_size = buffer_size;
  atomic_init(&ch->count, 0);
  ch->wm = SL_WATERMARK_MIN;
  atomic_init(&ch->ret_head, 0);
  atomic_init(&ch->ret_tail, 0);
  *out = ch;
  return SL_OK;
}

void sl__channel_destroy(sl_channel_t *ch) {
  if (ch == NULL) return;
  uint32_t count = atomic_load(&ch->count);
  for (uint32_t i = 0; i < count; i++)
    sl__buf_free(ch->ring[(ch->head + i) & ch->mask]);
  uint32_t h = atomic_load(&ch->ret_head), t = atomic_load(&ch->ret_tail);
  for (; h != t; h++) sl__buf_free(ch->ret[h & ch->ret_mask]);
  sl__buf_free(ch->cur);
  sl_buf_t *p = ch->pending_head;
  while (p) {
    sl_buf_t *n = p->next;
    sl__buf_free(p);
    p = n;
  }
  sl_free(ch->ring);
  sl_free(ch->ret);
  sl_free(ch);
}

int sl__channel_push(sl_channel_t *ch, sl_buf_t *buf) {
  /* acquire: pairs with the receiver's decrement, so the slot we reuse has
   * been read. */
  if (atomic_load_explicit(&ch->count, memory_order_acquire) >= ch->credits)
    return SL_EAGAIN;
  ch->ring[ch->tail & ch->mask] = buf;
  ch->tail++;
  /* acq_rel: publishes the slot to the receiver (W1). */
  uint32_t prev = atomic_fetch_add_explicit(&ch->count, 1,
                                            memory_order_acq_rel);
  if (prev == 0 && ch->receiver)
    ch->receiver->sched->ops->wake(ch->receiver->sched, ch->receiver);
  return SL_OK;
}

sl_buf_t *sl__channel_pop(sl_channel_t *ch) {
  if (atomic_load_explicit(&ch->count, memory_order_acquire) == 0) return NULL;
  sl_buf_t *buf = ch->ring[ch->head & ch->mask];
  ch->head++;
  /* acq_rel: releases the slot back to the sender (W2). */
  uint32_t prev = atomic_fetch_sub_explicit(&ch->count, 1,
                                            memory_order_acq_rel);
  if (prev == ch->wake_at && ch->sender)
    ch->sender->sched->ops->wake(ch->sender->sched, ch->sender);
  return buf;
}

void sl__channel_recycle(sl_channel_t *ch, sl_buf_t *buf) {
  if (buf->cap != ch->buffer_size) {
    sl__buf_free(buf); /* an oversized one-off buffer */
    return;
  }
  uint32_t t = atomic_load_explicit(&ch->ret_tail, memory_order_relaxed);
  uint32_t h = atomic_load_explicit(&ch->ret_head, memory_order_acquire);
  if (t - h > ch->ret_mask) {
    sl__buf_free(buf);
    return;
  }
  ch->ret[t & ch->ret_mask] = buf;
  /* release: the sender must see the slot before the new tail. */
  atomic_store_explicit(&ch->ret_tail, t + 1, memory_order_release);
}

sl_buf_t *sl__channel_get_buffer(sl_channel_t *ch, uint32_t min_cap) {
  if (min_cap <= ch->buffer_size) {
    uint32_t h = atomic_load_explicit(&ch->ret_head, memory_order_relaxed);
    /* acquire: pairs with the receiver's release of ret_tail. */
    uint32_t t = atomic_load_explicit(&ch->ret_tail, memory_order_acquire);
    if (h != t) {
      sl_buf_t *b = ch->ret[h & ch->ret_mask];
      /* release: the receiver may reuse the slot only after we read it. */
      atomic_store_explicit(&ch->ret_head, h + 1, memory_order_release);
      b->kind = SL_BUF_DATA;
      b->len = 0;
      b->n_records = 0;
      b->next = NULL;
      return b;
    }
    return sl__buf_new(ch->buffer_size);
  }
  return sl__buf_new(min_cap);
}

void sl__channel_send(sl_channel_t *ch, sl_buf_t *buf) {
  if (ch->n_pending == 0 && sl__channel_push(ch, buf) == SL_OK) return;
  buf->next = NULL;
  if (ch->pending_tail) ch->pending_tail->next = buf;
  else ch->pending_head = buf;
  ch->pending_tail = buf;
  if (ch->n_pending++ == 0 && ch->sender) sl__task_note_blocked(ch->sender, ch);
}

bool sl__channel_flush_pending(sl_channel_t *ch) {
  while (ch->pending_head) {
    sl_buf_t *b = ch->pending_head, *next = b->next; /* b is gone once pushed */
    if (sl__channel_push(ch, b) != SL_OK) return false;
    ch->pending_head = next;
    if (next == NULL) ch->pending_tail = NULL;
    if (--ch->n_pending == 0 && ch->sender) ch->sender->n_blocked--;
  }
  return true;
}
