/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The task side of checkpoints: the snapshot hook (sync phase on the task
 * thread, async phase on the I/O pool) and restoring operators from a
 * checkpoint's metadata and files.  See README.md.
 *
 * Sync phase (task thread, between two records): pin every keyed state
 * backend (O(states x key groups)), copy the pending timers, read the
 * source positions.  Async phase (I/O thread): write one state file per
 * keyed operator subtask, fsync it, acknowledge with the file names, sizes
 * and checksums.  The async job copies what it needs and never touches the
 * task, which may be gone (restarted) by the time it runs.
 */
#include <stdatomic.h>
#include <stdio.h>

#include "checkpoint/checkpoint.h"
#include "core/inject.h"
#include "runtime/runtime.h"
#include "sluice/sluice.h"

typedef struct keyed_snap_s {
  uint32_t sub;              /* index into the job's subs */
  sl_kstate_snap_t *snap;
  uint32_t kg_start, kg_end;
  sl_ckpt_timer_t *timers;
  uint32_t n_timers, cap_timers;
  char *path;
} keyed_snap_t;

typedef struct snap_job_s {
  sl_coord_t *coord;
  sl_io_pool_t *io;
  uint64_t id;
  uint8_t *chan;             /* channel state (unaligned), owned */
  size_t chan_len;
  char *chan_path;
  uint32_t task;
  sl_ckpt_subtask_t *subs;
  uint32_t *op_index;
  uint32_t n_ops;
  keyed_snap_t *keyed;
  uint32_t n_keyed;
  sl_ckpt_task_stats_t stats;
} snap_job_t;

static void job_free(snap_job_t *j) {
  if (j == NULL) return;
  for (uint32_t i = 0; i < j->n_keyed; i++) {
    keyed_snap_t *k = &j->keyed[i];
    sl__kstate_snap_release(k->snap);
    for (uint32_t t = 0; t < k->n_timers; t++) sl_free(k->timers[t].key);
    sl_free(k->timers);
    sl_free(k->path);
  }
  sl_free(j->keyed);
  sl_free(j->chan);
  sl_free(j->chan_path);
  if (j->subs)
    for (uint32_t i = 0; i < j->n_ops; i++) sl__ckpt_subtask_clear(&j->subs[i]);
  sl_free(j->subs);
  sl_free(j->op_index);
  sl_free(j);
}

static int add_timer_in(keyed_snap_t *k, uint8_t domain, int64_t ts,
                        const uint8_t *key, uint32_t len) {
  if (k->n_timers == k->cap_timers) {
    uint32_t cap = k->cap_timers ? k->cap_timers * 2 : 64;
    sl_ckpt_timer_t *t = sl_realloc(k->timers, cap * sizeof(*t));
    if (t == NULL) return SL_ENOMEM;
    k->timers = t;
    k->cap_timers = cap;
  }
  sl_ckpt_timer_t *t = &k->timers[k->n_timers];
  t->key = sl_malloc(len ? len : 1);
  if (t->key == NULL) return SL_ENOMEM;
  memcpy(t->key, key, len);
  t->len = len;
  t->ts = ts;
  t->domain = domain;
  t->kg = 0; /* set by the caller, which knows max_parallelism */
  k->n_timers++;
  return SL_OK;
}

static int add_timer(void *user, int64_t ts, const uint8_t *key,
                     uint32_t len) {
  return add_timer_in(user, 0, ts, key, len);
}

static int add_event_timer(void *user, int64_t ts, const uint8_t *key,
                           uint32_t len) {
  return add_timer_in(user, 1, ts, key, len);
}

/* Source positions as operator state "source.splits": one entry per
 * assigned split, holding its id and position (sl__split_pos_encode), so
 * that a restore maps them by id, never by index. */
static int snapshot_positions(sl_task_t *t, sl_ckpt_subtask_t *sub) {
  sl_source_rt_t *src = sl__task_source(t);
  sub->opstates = sl_calloc(1, sizeof(sl_ckpt_opstate_t));
  if (sub->opstates == NULL) return SL_ENOMEM;
  sub->n_opstates = 1;
  sl_ckpt_opstate_t *os = &sub->opstates[0];
  os->name = sl_strdup("source.splits");
  os->entries = sl_calloc(src->n_splits + 1, sizeof(sl_ckpt_entry_t));
  if (os->name == NULL || os->entries == NULL) return SL_ENOMEM;
  sl_bytes_t pos, ent;
  sl_bytes_init(&pos);
  sl_bytes_init(&ent);
  int rc = SL_OK;
  for (uint32_t i = 0; i < src->n_splits && rc == SL_OK; i++) {
    /* A finished split of an enumerator's leaves the reader's state. */
    if (src->link && src->is_finished[i]) continue;
    pos.len = ent.len = 0;
    rc = src->vt->reader_position(src->reader, src->splits[i].split, &pos);
    if (rc == SL_OK)
      rc = sl__split_pos_encode(src->splits[i].id, pos.data, pos.len, &ent);
    if (rc != SL_OK) break;
    sl_ckpt_entry_t *e = &os->entries[os->n_entries];
    e->key = i; /* unused: the id names the split */
    e->len = (uint32_t)ent.len;
    e->bytes = sl_malloc(ent.len);
    if (e->bytes == NULL) {
      rc = SL_ENOMEM;
      break;
    }
    memcpy(e->bytes, ent.data, ent.len);
    os->n_entries++;
  }
  sl_bytes_close(&pos);
  sl_bytes_close(&ent);
  return rc;
}

static void async_main(void *arg) {
  snap_job_t *j = arg;
  int64_t t0 = sl__clock_realtime_ns();
  sl_error_t *err = NULL;
  int rc = SL_OK;
  for (uint32_t i = 0; i < j->n_keyed && rc == SL_OK; i++) {
    keyed_snap_t *k = &j->keyed[i];
    sl_ckpt_subtask_t *s = &j->subs[k->sub];
    rc = sl__ckpt_write_state(k->path, k->snap, k->kg_start, k->kg_end,
                              k->timers, k->n_timers, &s->state_size,
                              &s->state_checksum, &err);
    j->stats.bytes += s->state_size;
    /* The file is written: the pinned version is no longer needed. */
    sl__kstate_snap_release(k->snap);
    k->snap = NULL;
  }
  if (rc == SL_OK && j->chan_len) {
    sl_ckpt_subtask_t *s = &j->subs[0];
    rc = sl__ckpt_write_blob(j->chan_path, j->chan, j->chan_len,
                             &s->channel_checksum, &err);
    s->channel_size = j->chan_len;
    j->stats.bytes += j->chan_len;
    j->stats.channel_bytes = j->chan_len;
  }
  if (rc == SL_OK && (rc = SL_INJECT("task.async_before_ack")) != SL_OK)
    err = sl_error_create(rc, "injected failure at task.async_before_ack");
  if (rc != SL_OK) {
    if (err) sl_error_prefix(err, "checkpoint %llu", (unsigned long long)j->id);
    sl__coord_decline(j->coord, j->id, err, true);
    job_free(j);
    return;
  }
  j->stats.async_ns = sl__clock_realtime_ns() - t0;
  sl__coord_ack(j->coord, j->id, j->task, j->subs, j->op_index, j->n_ops,
                &j->stats, true);
  j->subs = NULL; /* moved */
  job_free(j);
}

typedef struct hooks_ctx_s {
  sl_coord_t *coord;
  sl_io_pool_t *io;
} hooks_ctx_t;

int sl__ckpt_snapshot_sync(void *ctx, sl_task_t *t, uint64_t id,
                           const sl_ckpt_timing_t *timing, void **out_snap) {
  hooks_ctx_t *h = ctx;
  sl_op_t *head = sl__task_op(t, 0);
  uint32_t n_ops = sl__task_n_ops(t);
  int rc = SL_INJECT("task.before_sync_snapshot");
  if (rc != SL_OK)
    return sl__op_fail(head, rc,
                       "injected failure at task.before_sync_snapshot");
  int64_t t0 = sl__task_now(t);
  snap_job_t *j = sl_calloc(1, sizeof(*j));
  if (j == NULL) goto nomem;
  j->coord = h->coord;
  j->io = h->io;
  j->id = id;
  j->task = sl__task_index(t);
  j->n_ops = n_ops;
  j->subs = sl_calloc(n_ops, sizeof(sl_ckpt_subtask_t));
  j->op_index = sl_calloc(n_ops, sizeof(uint32_t));
  j->keyed = sl_calloc(n_ops, sizeof(keyed_snap_t));
  if (!j->subs || !j->op_index || !j->keyed) goto nomem;
  char *ckdir = sl__coord_ckpt_dir(h->coord, id);
  if (ckdir == NULL) goto nomem;
  for (uint32_t i = 0; i < n_ops; i++) {
    sl_op_t *op = sl__task_op(t, i);
    sl_ckpt_subtask_t *s = &j->subs[i];
    j->op_index[i] = op->ckpt_op;
    s->subtask = op->subtask;
    s->kg_start = 1;
    s->kg_end = 0; /* none */
    if (i == 0 && sl__task_source(t) &&
        (rc = snapshot_positions(t, s)) != SL_OK) {
      sl_free(ckdir);
      job_free(j);
      return sl__op_fail(op, rc, "cannot read the source positions: %s",
                         sl_strerror(rc));
    }
    if (op->vt->snapshot_opstate &&
        (rc = op->vt->snapshot_opstate(op, id, s)) != SL_OK) {
      sl_free(ckdir);
      job_free(j);
      return rc; /* the operator recorded its error */
    }
    /* The reader's state for id is taken: the enumerator's events held
     * for this reader since its snapshot for id may pass now (gateway). */
    const sl_source_rt_t *src = i == 0 ? sl__task_source(t) : NULL;
    if (src && src->link)
      src->link->reader_snapshot(src->link->host, op->subtask, id);
    if (op->kstate == NULL) continue;
    keyed_snap_t *k = &j->keyed[j->n_keyed++];
    k->sub = i;
    k->kg_start = sl_key_group_range_start(op->subtask, op->max_parallelism,
                                           op->parallelism);
    k->kg_end = sl_key_group_range_end(op->subtask, op->max_parallelism,
                                       op->parallelism);
    s->kg_start = k->kg_start;
    s->kg_end = k->kg_end;
    sl__kstate_gc(op->kstate);
    s->state_file = sl__ckpt_file_name(op->uid, op->subtask, ".state");
    sl_bytes_t path;
    sl_bytes_init(&path);
    if (s->state_file) sl_bytes_printf(&path, "%s/%s", ckdir, s->state_file);
    k->path = (char *)path.data;
    if (s->state_file == NULL || k->path == NULL ||
        sl__kstate_snapshot(op->kstate, &k->snap) != SL_OK ||
        (op->timers && sl__timers_export(op->timers, add_timer, k) != SL_OK) ||
        (op->etimers &&
         sl__timers_export(op->etimers, add_event_timer, k) != SL_OK)) {
      sl_free(ckdir);
      goto nomem;
    }
    for (uint32_t x = 0; x < k->n_timers; x++)
      k->timers[x].kg =
          sl_key_group(k->timers[x].key, k->timers[x].len, op->max_parallelism);
  }
  {
    /* Where channel state goes if this turns out to be unaligned. */
    j->subs[0].channel_file = sl__ckpt_file_name(head->uid, head->subtask,
                                                 ".channel");
    sl_bytes_t cp;
    sl_bytes_init(&cp);
    if (j->subs[0].channel_file)
      sl_bytes_printf(&cp, "%s/%s", ckdir, j->subs[0].channel_file);
    j->chan_path = (char *)cp.data;
    if (j->chan_path == NULL) {
      sl_free(ckdir);
      goto nomem;
    }
  }
  sl_free(ckdir);
  j->stats.sync_ns = sl__task_now(t) - t0;
  j->stats.barrier_delay_ns = timing->barrier_delay_ns; /* absolute; see ack */
  j->stats.alignment_ns = timing->alignment_ns;
  j->stats.is_unaligned = timing->is_unaligned;
  if ((rc = SL_INJECT("task.after_sync_snapshot")) != SL_OK) {
    job_free(j);
    return sl__op_fail(head, rc,
                       "injected failure at task.after_sync_snapshot");
  }
  *out_snap = j;
  return SL_OK;
nomem:
  job_free(j);
  return sl__op_fail(head, SL_ENOMEM, "out of memory taking a snapshot");
}

int sl__ckpt_snapshot_submit(void *ctx, void *snap, const uint8_t *chan,
                             size_t chan_len) {
  SL_UNUSED(ctx);
  snap_job_t *j = snap;
  if (chan_len) {
    j->chan = sl_malloc(chan_len);
    if (j->chan == NULL) {
      sl__coord_decline(j->coord, j->id,
                        sl_error_create(SL_ENOMEM, "out of memory"), false);
      job_free(j);
      return SL_OK; /* the checkpoint fails, not the task */
    }
    memcpy(j->chan, chan, chan_len);
    j->chan_len = chan_len;
  } else if (j->subs[0].channel_file) {
    sl_free(j->subs[0].channel_file); /* aligned: no channel state */
    j->subs[0].channel_file = NULL;
  }
  if (j->n_keyed == 0 && j->chan_len == 0) {
    /* Nothing to write: acknowledge from the task thread. */
    sl__coord_ack(j->coord, j->id, j->task, j->subs, j->op_index, j->n_ops,
                  &j->stats, false);
    j->subs = NULL;
    job_free(j);
    return SL_OK;
  }
  sl__coord_io_begin(j->coord, j->id);
  if (sl__io_submit(j->io, async_main, j) != SL_OK) {
    sl__coord_decline(j->coord, j->id,
                      sl_error_create(SL_ENOMEM, "cannot queue a snapshot"),
                      true);
    job_free(j);
  }
  return SL_OK;
}

void sl__ckpt_snapshot_drop(void *ctx, void *snap) {
  SL_UNUSED(ctx);
  job_free(snap);
}

void sl__ckpt_task_finished(void *ctx, sl_task_t *t) {
  hooks_ctx_t *h = ctx;
  sl__coord_task_finished(h->coord, sl__task_last_snapshot(t));
}

static void ckpt_source_ended(void *ctx, sl_task_t *t) {
  SL_UNUSED(t);
  hooks_ctx_t *h = ctx;
  sl__coord_source_ended(h->coord);
}

/* ------------------------------------------------------------------ */
/* Restore. */

/*
 * Restore of an operator subtask's keyed state in parallel.  The files
 * whose key groups overlap the subtask's range are opened one after the
 * other (which registers their states, in order); then every (file, key
 * group) is an item, read on sl__io_restore_threads() threads: a state
 * keeps one map per key group, so items write disjoint maps.  Timers go
 * to the operator's one timer queue, so each item buffers its own and they
 * are added afterwards in item order, as a serial restore adds them.  The
 * error reported is that of the first failing item in item order (the one
 * a serial restore would report); items after a failure are skipped.
 */
typedef struct rfile_s {
  char *path;
  sl_ckpt_sfile_t *f;
  sl_state_t **states; /* file state index -> backend state */
  uint32_t n_states;
  sl_error_t **out_err; /* while opening */
  sl_op_t *op;
} rfile_t;

typedef struct ritem_s {
  uint32_t file, kg;
  int rc;
  sl_error_t *err;
  sl_bytes_t timers; /* (domain u8, ts i64le, klen u32le, key)... */
} ritem_t;

typedef struct rjob_s {
  rfile_t *files;
  ritem_t *items;
  uint32_t n_items;
  sl_bytes_t *scratch; /* per worker */
  _Atomic uint32_t first_failed; /* n_items: none */
} rjob_t;

/* What a reader callback sees: the item being read. */
typedef struct rctx_s {
  rfile_t *rf;
  ritem_t *it;
} rctx_t;

static int r_states(void *user, const sl_state_desc_t *descs,
                    const uint64_t *fps, uint32_t n) {
  rfile_t *r = user;
  sl_free(r->states);
  r->states = sl_calloc(n + 1, sizeof(sl_state_t *));
  if (r->states == NULL) return SL_ENOMEM;
  r->n_states = n;
  for (uint32_t i = 0; i < n; i++) {
    int rc = sl__kstate_restore_state(r->op->kstate, &descs[i],
                                      fps ? &fps[i] : NULL, &r->states[i],
                                      r->out_err);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

static int r_entry(void *user, uint32_t state, uint32_t kg, const uint8_t *key,
                   uint32_t klen, uint32_t nslen, const uint8_t *val,
                   uint32_t vlen) {
  rctx_t *c = user;
  if (state >= c->rf->n_states) return SL_ECORRUPT;
  int rc = sl__kstate_restore_entry(c->rf->states[state], kg, key, klen,
                                    nslen, val, vlen);
  if (rc == SL_ECORRUPT)
    return sl_error_set(&c->it->err, rc,
                        "checkpoint file '%s' is corrupt: an entry of key "
                        "group %u does not belong to it or is malformed",
                        c->rf->path, kg);
  return rc;
}

/* The entry count of (state, kg) before its entries: the map is sized
 * once instead of growing while it fills (the reader bounds n by the
 * section's length, so a corrupt count cannot allocate). */
static int r_count(void *user, uint32_t state, uint32_t kg, uint64_t n) {
  rctx_t *c = user;
  if (state >= c->rf->n_states) return SL_ECORRUPT;
  int rc = sl__kstate_restore_reserve(c->rf->states[state], kg, n);
  if (rc == SL_ECORRUPT)
    return sl_error_set(&c->it->err, rc,
                        "checkpoint file '%s' is corrupt: key group %u is "
                        "outside the subtask's range", c->rf->path, kg);
  return rc;
}

static int r_timer(void *user, uint32_t kg, uint8_t domain, int64_t ts,
                   const uint8_t *key, uint32_t klen) {
  rctx_t *c = user;
  SL_UNUSED(kg);
  sl_bytes_t *b = &c->it->timers;
  uint8_t h[13];
  h[0] = domain;
  sl__put_u64le(h + 1, (uint64_t)ts);
  memcpy(h + 9, &klen, 4);
  if (sl_bytes_append(b, h, 13) != SL_OK ||
      sl_bytes_append(b, key, klen) != SL_OK)
    return SL_ENOMEM;
  return SL_OK;
}

static void restore_item(void *arg, uint32_t worker, uint32_t i) {
  rjob_t *j = arg;
  ritem_t *it = &j->items[i];
  if (atomic_load_explicit(&j->first_failed, memory_order_relaxed) < i) return;
  rfile_t *rf = &j->files[it->file];
  rctx_t c = {rf, it};
  sl_ckpt_reader_t rd = {NULL, r_entry, r_timer, &c, r_count};
  it->rc = sl__ckpt_state_read_kg(rf->f, it->kg, &rd, &j->scratch[worker],
                                  &it->err);
  if (it->rc != SL_OK) {
    uint32_t cur = atomic_load(&j->first_failed);
    while (i < cur &&
           !atomic_compare_exchange_weak(&j->first_failed, &cur, i)) {
    }
  }
}

static int add_timers(sl_op_t *op, const sl_bytes_t *b) {
  size_t off = 0;
  while (off < b->len) {
    uint8_t domain = b->data[off];
    int64_t ts = (int64_t)sl__get_u64le(b->data + off + 1);
    uint32_t klen;
    memcpy(&klen, b->data + off + 9, 4);
    sl_timers_t *tm = domain ? op->etimers : op->timers;
    int rc = tm ? sl__timers_add(tm, ts, b->data + off + 13, klen) : SL_OK;
    if (rc != SL_OK) return rc;
    off += 13 + (size_t)klen;
  }
  return SL_OK;
}

/* Restore the keyed state of op (its key-group range) from every subtask
 * of the checkpoint whose range overlaps: this is also rescaling. */
int sl__ckpt_restore_keyed(const sl_ckpt_meta_t *m, const sl_ckpt_op_t *mop,
                           sl_op_t *op, sl_error_t **out_err) {
  uint32_t a = sl_key_group_range_start(op->subtask, op->max_parallelism,
                                        op->parallelism);
  uint32_t b = sl_key_group_range_end(op->subtask, op->max_parallelism,
                                      op->parallelism);
  rjob_t j;
  memset(&j, 0, sizeof(j));
  uint32_t n_files = 0, n_threads = sl__io_restore_threads();
  int rc = SL_OK;
  j.files = sl_calloc(mop->n_subtasks + 1, sizeof(rfile_t));
  j.scratch = sl_calloc(n_threads, sizeof(sl_bytes_t));
  if (j.files == NULL || j.scratch == NULL) goto nomem;
  for (uint32_t t = 0; t < n_threads; t++) sl_bytes_init(&j.scratch[t]);
  size_t n_items = 0;
  for (uint32_t i = 0; i < mop->n_subtasks; i++) {
    const sl_ckpt_subtask_t *s = &mop->subtasks[i];
    if (s->state_file == NULL || s->kg_end < s->kg_start) continue;
    uint32_t lo = SL_MAX(a, s->kg_start), hi = SL_MIN(b, s->kg_end);
    if (lo > hi) continue;
    rfile_t *rf = &j.files[n_files++];
    rf->op = op;
    rf->out_err = out_err;
    sl_bytes_t path;
    sl_bytes_init(&path);
    if (sl_bytes_printf(&path, "%s/%s", m->dir, s->state_file) != SL_OK)
      goto nomem;
    rf->path = (char *)path.data;
    sl_ckpt_reader_t rd = {r_states, NULL, NULL, rf, NULL};
    rc = sl__ckpt_state_open(rf->path, s->state_size, s->state_checksum, &rd,
                             &rf->f, out_err);
    if (rc != SL_OK) goto out;
    for (uint32_t kg = lo; kg <= hi && kg >= lo; kg++)
      if (sl__ckpt_state_has_kg(rf->f, kg)) n_items++;
  }
  if (n_items >= UINT32_MAX) goto nomem;
  j.n_items = (uint32_t)n_items;
  j.items = sl_calloc(n_items + 1, sizeof(ritem_t));
  if (j.items == NULL) goto nomem;
  {
    uint32_t k = 0, f = 0;
    for (uint32_t i = 0; i < mop->n_subtasks; i++) {
      const sl_ckpt_subtask_t *s = &mop->subtasks[i];
      if (s->state_file == NULL || s->kg_end < s->kg_start) continue;
      uint32_t lo = SL_MAX(a, s->kg_start), hi = SL_MIN(b, s->kg_end);
      if (lo > hi) continue;
      for (uint32_t kg = lo; kg <= hi && kg >= lo; kg++)
        if (sl__ckpt_state_has_kg(j.files[f].f, kg)) {
          j.items[k].file = f;
          j.items[k].kg = kg;
          sl_bytes_init(&j.items[k].timers);
          k++;
        }
      f++;
    }
  }
  atomic_init(&j.first_failed, j.n_items);
  sl__io_parallel_for(n_threads, j.n_items, restore_item, &j);
  uint32_t bad = atomic_load(&j.first_failed);
  if (bad < j.n_items) {
    rc = j.items[bad].rc;
    if (out_err && *out_err == NULL) {
      *out_err = j.items[bad].err;
      j.items[bad].err = NULL;
    }
    goto out;
  }
  for (uint32_t k = 0; k < j.n_items && rc == SL_OK; k++)
    rc = add_timers(op, &j.items[k].timers);
  goto out;
nomem:
  rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
out:
  if (rc != SL_OK && out_err && *out_err == NULL)
    *out_err = sl_error_create(rc, "cannot restore operator '%s': %s",
                               op->uid, sl_strerror(rc));
  for (uint32_t k = 0; j.items && k < j.n_items; k++) {
    sl_error_destroy(j.items[k].err);
    sl_bytes_close(&j.items[k].timers);
  }
  sl_free(j.items);
  for (uint32_t f = 0; f < n_files; f++) {
    sl__ckpt_state_close(j.files[f].f);
    sl_free(j.files[f].states);
    sl_free(j.files[f].path);
  }
  sl_free(j.files);
  for (uint32_t t = 0; j.scratch && t < n_threads; t++)
    sl_bytes_close(&j.scratch[t]);
  sl_free(j.scratch);
  return rc;
}

/*
 * Positions of the splits a source subtask reads, by split id, from any old
 * subtask: at another parallelism the splits move between subtasks and
 * each still gets its own position.  A split the checkpoint lacks starts
 * from its beginning (a file new in the directory); a stored split the
 * source no longer lists is an error (check_all, once per source), since
 * its remaining records would be lost silently.  Whether a position still
 * fits its split (a file not shorter, a generator split not smaller) is
 * the reader's check, in reader_open.  Linear scans: splits x entries
 * string comparisons, a few million at most for thousands of files.
 */
int sl__ckpt_restore_positions(const sl_ckpt_meta_t *m,
                               const sl_ckpt_op_t *mop, sl_source_rt_t *src,
                               bool check_all, sl_error_t **out_err) {
  for (uint32_t i = 0; i < mop->n_subtasks; i++) {
    const sl_ckpt_subtask_t *sub = &mop->subtasks[i];
    if (sl__ckpt_opstate(sub, "source.positions") != NULL)
      return sl_error_set(out_err, SL_EINVAL,
                          "checkpoint %llu stores the positions of source "
                          "'%s' by split index (an earlier sluice); they "
                          "cannot be matched to splits by identity: start "
                          "the job without restoring this checkpoint",
                          (unsigned long long)m->id, mop->uid);
    const sl_ckpt_opstate_t *os = sl__ckpt_opstate(sub, "source.splits");
    for (uint32_t e = 0; os && e < os->n_entries; e++) {
      sl_split_pos_t sp;
      if (sl__split_pos_decode(os->entries[e].bytes, os->entries[e].len,
                               &sp) != SL_OK)
        return sl_error_set(out_err, SL_CORRUPT("malformed split position"),
                            "checkpoint %llu is corrupt: a split position "
                            "of source '%s' is malformed",
                            (unsigned long long)m->id, mop->uid);
      if (check_all && sl__split_list_find(src->all, sp.id, sp.id_len) < 0)
        return sl_error_set(out_err, SL_EINVAL,
                            "checkpoint %llu holds a position of split "
                            "'%.*s' of source '%s', which the source no "
                            "longer has (%u splits now; a file removed or "
                            "renamed, another generator seed or split "
                            "count?); its remaining records would be lost",
                            (unsigned long long)m->id, (int)sp.id_len, sp.id,
                            mop->uid, src->all->n);
      for (uint32_t k = 0; k < src->n_splits; k++) {
        sl_split_init_t *si = &src->splits[k];
        if (strncmp(si->id, sp.id, sp.id_len) != 0 || si->id[sp.id_len])
          continue;
        if (si->position != NULL)
          return sl_error_set(out_err, SL_CORRUPT("split stored twice"),
                              "checkpoint %llu is corrupt: split '%s' of "
                              "source '%s' has two positions",
                              (unsigned long long)m->id, si->id, mop->uid);
        uint8_t *p = sl_malloc(sp.pos_len ? sp.pos_len : 1);
        if (p == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
        if (sp.pos_len) memcpy(p, sp.pos, sp.pos_len);
        si->position = p;
        si->position_len = sp.pos_len;
        break;
      }
    }
  }
  return SL_OK;
}

/* Channel state of an unaligned checkpoint for the task whose head is op:
 * the records it had received but not processed, replayed first. */
int sl__ckpt_restore_channels(const sl_ckpt_meta_t *m, const sl_ckpt_op_t *mop,
                              sl_task_t *t, sl_error_t **out_err) {
  sl_op_t *op = sl__task_op(t, 0);
  bool has_channels = false;
  for (uint32_t i = 0; i < mop->n_subtasks; i++)
    if (mop->subtasks[i].channel_file) has_channels = true;
  if (!has_channels) return SL_OK;
  if (mop->parallelism != op->parallelism)
    return sl_error_set(out_err, SL_ENOTSUP,
                        "checkpoint %llu is unaligned and holds in-flight "
                        "records of operator '%s' at parallelism %u; it can "
                        "be restored only at that parallelism (this job has "
                        "%u); take an aligned checkpoint to rescale",
                        (unsigned long long)m->id, op->uid, mop->parallelism,
                        op->parallelism);
  const sl_ckpt_subtask_t *s = op->subtask < mop->n_subtasks
                                   ? &mop->subtasks[op->subtask]
                                   : NULL;
  if (s == NULL || s->channel_file == NULL || s->channel_size == 0)
    return SL_OK;
  sl_bytes_t path;
  sl_bytes_init(&path);
  sl_bytes_printf(&path, "%s/%s", m->dir, s->channel_file);
  uint8_t *blob = NULL;
  int rc = path.data ? sl__ckpt_read_blob((char *)path.data, s->channel_size,
                                          s->channel_checksum, &blob, out_err)
                     : SL_ENOMEM;
  sl_bytes_close(&path);
  if (rc != SL_OK) return rc;
  /* Validated entry by entry before it is trusted (runtime/chanstate.h). */
  if (sl__task_restore_channel_state(t, blob, s->channel_size) != SL_OK) {
    sl_free(blob);
    return sl_error_set(out_err, SL_ECORRUPT,
                        "checkpoint file '%s/%s' is corrupt: malformed "
                        "in-flight records", m->dir, s->channel_file);
  }
  return SL_OK;
}

static hooks_ctx_t *hooks_ctx_new(sl_coord_t *coord, sl_io_pool_t *io) {
  hooks_ctx_t *h = sl_calloc(1, sizeof(*h));
  if (h) {
    h->coord = coord;
    h->io = io;
  }
  return h;
}

int sl__ckpt_hooks_create(sl_coord_t *coord, sl_io_pool_t *io, int mode,
                          int64_t alignment_timeout_ms,
                          sl_ckpt_hooks_t **out) {
  sl_ckpt_hooks_t *hk = sl_calloc(1, sizeof(*hk));
  if (hk == NULL) return SL_ENOMEM;
  hk->ctx = hooks_ctx_new(coord, io);
  if (hk->ctx == NULL) {
    sl_free(hk);
    return SL_ENOMEM;
  }
  hk->snapshot_sync = sl__ckpt_snapshot_sync;
  hk->snapshot_submit = sl__ckpt_snapshot_submit;
  hk->snapshot_drop = sl__ckpt_snapshot_drop;
  hk->task_finished = sl__ckpt_task_finished;
  hk->source_ended = ckpt_source_ended;
  hk->mode = mode;
  hk->alignment_timeout_ns = alignment_timeout_ms * 1000000ll;
  *out = hk;
  return SL_OK;
}

void sl__ckpt_hooks_destroy(sl_ckpt_hooks_t *hk) {
  if (hk == NULL) return;
  sl_free(hk->ctx);
  sl_free(hk);
}
