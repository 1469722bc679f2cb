/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine side of two-phase-commit sinks (sl_connector.h): the sink
 * operator that prepares an epoch at every barrier, keeps every committable
 * not yet confirmed committed in its operator state "sink.committables",
 * commits them when a checkpoint completes (retrying with backoff on the
 * scheduler's wake-ups, never sleeping), and on restore commits the
 * restored committables, then lets the connector abort lingering
 * transactions, then opens the writer.  See README.md and
 * docs/connectors.md ("Two-phase-commit sinks").
 *
 * DESIGN NOTES
 *
 *   per committable (origin subtask s, checkpoint N):
 *
 *   (epoch open) --prepare(N), sink_pre_snapshot--> PENDING
 *   PENDING --N completes or a later one (subsuming)--> COMMITTING
 *   COMMITTING --OK / ALREADY--> gone (removed from the list)
 *   COMMITTING --RETRY--> PENDING (retry_at = now + backoff; attempts kept)
 *   COMMITTING --LOST / FATAL / RETRY past max attempts--> task fails
 *   COMMITTING --RESTART--> PENDING, task fails retriably (restore commits)
 *   PENDING --N aborted--> PENDING (unchanged: the next completion commits)
 *
 *   transition                function
 *   open -> PENDING           sink_pre_snapshot()
 *   PENDING -> COMMITTING     commit_due(), from sink_complete(),
 *                             sink_poll() (retry) or sink_open() (restore)
 *   restore                   sl__sink2pc_restore() then sink_open()
 *
 * Invariants (tests cite them):
 *  S1. A committable joins the list before the sync snapshot of its
 *      checkpoint copies the list, so checkpoint N holds it (and every
 *      older one not yet confirmed).
 *  S2. An entry leaves the list only on OK or ALREADY.
 *  S3. Commits run in ascending (checkpoint, origin) order; a RETRY stops
 *      the round, so no later committable is committed before an earlier
 *      one (of any origin: stricter than per origin, and simpler).
 *  S4. An aborted checkpoint changes nothing in the list.
 *  S5. Restore order: commit every restored committable (all are <= the
 *      restored checkpoint C), then recover(), then writer_open().  A RETRY
 *      while restoring fails the attempt with a retriable error: the
 *      restart strategy's delay is the backoff (the task cannot take input
 *      before its writer is open).
 *  S6. After a change of parallelism old subtask i's entries go to new
 *      subtask i % p' (sl__sink2pc_restore); the largest parallelism ever
 *      recorded is kept in the state, so ownership of lingering
 *      transactions of subtasks beyond p' is never forgotten.
 *  S7. Restoring C never re-emits committed output silently: before the
 *      restored committables are committed, a sink that can prove it
 *      (committed_max) is asked for the newest checkpoint K it committed;
 *      K > C fails the job (fatal, nothing committed) unless the job
 *      allows duplicate sink output (check_newer_output).  A fresh start
 *      is not checked: it is a new run, not a return to older output.
 *  S8. While a commit waits for its retry, no row reaches the writer (the
 *      task waits out the backoff and retries first: await_retry).
 *
 * The single commit point of an epoch is the connector's commit; the
 * engine's part is to call it, at least once, for every committable of a
 * completed checkpoint.
 */
#include <stdio.h>
#include <time.h>

#include "checkpoint/checkpoint.h"
#include "core/inject.h"
#include "ops/ops.h"
#include "sluice/sl_metrics.h"

#define STATE_NAME "sink.committables"
#define META_KEY UINT32_MAX  /* entry holding the recorded parallelism */
#define ENTRY_VERSION 1u
#define DEFAULT_MAX_ATTEMPTS 10u
#define DEFAULT_BACKOFF_MS 100
#define DEFAULT_MAX_BACKOFF_MS 30000

typedef struct pend_s {
  uint64_t ckpt;
  uint32_t origin;
  uint32_t attempts;
  uint8_t *bytes; /* owned */
  uint32_t len;
  int64_t since_ns; /* realtime clock: prepared, or restored (metrics) */
} pend_t;

/* The counters a connector adds to (sl_connector.h). */
struct sl_sink_counters_s {
  _Atomic uint64_t lingering_aborted;
};

/*
 * The subtask's metrics (sl_sink_metrics_t).  Stored on the task's thread
 * (and by the planner before the task runs), loaded by
 * sl__sink2pc_metrics() on any thread.  All relaxed: each is a value on
 * its own and orders nothing else.
 */
typedef struct sink_stats_s {
  _Atomic uint32_t pending;
  _Atomic int64_t oldest_since_ns; /* 0: nothing pending */
  _Atomic uint64_t attempts, ok, already, retries, lost;
} sink_stats_t;

/* One sink subtask; used on its task's thread only, except stats and
 * counters, which are atomics that the metrics reader loads. */
typedef struct sink2pc_s {
  void *writer;
  void *committer;
  pend_t *pend;          /* sorted by (ckpt, origin) */
  uint32_t n_pend, cap_pend;
  uint64_t commit_upto;  /* newest completed checkpoint seen */
  int64_t retry_at;      /* 0: no retry waiting */
  uint64_t last_prepared;
  uint64_t restored_id;
  uint32_t restored_par; /* 0: fresh start */
  uint32_t max_par;      /* largest parallelism recorded in the state */
  bool is_ended;         /* end_input ran */
  int fail_rc;           /* a failure to report from poll (S2 stays) */
  sink_stats_t stats;
  sl_sink_counters_t counters;
} sink2pc_t;

#define STAT_ADD(s, f) \
  atomic_fetch_add_explicit(&(s)->stats.f, 1, memory_order_relaxed)

/* Publish the pending gauges after the list changed. */
static void pend_publish(sink2pc_t *s) {
  int64_t oldest = 0;
  for (uint32_t i = 0; i < s->n_pend; i++)
    if (oldest == 0 || s->pend[i].since_ns < oldest)
      oldest = s->pend[i].since_ns;
  atomic_store_explicit(&s->stats.pending, s->n_pend, memory_order_relaxed);
  atomic_store_explicit(&s->stats.oldest_since_ns, oldest,
                        memory_order_relaxed);
}

void sl_sink_counters_add_lingering_aborted(sl_sink_counters_t *c,
                                           uint64_t n) {
  if (c != NULL)
    atomic_fetch_add_explicit(&c->lingering_aborted, n, memory_order_relaxed);
}

static const sl_op_cfg_t *cfg_of(const sl_op_t *op) { return op->cfg; }

bool sl_sink_is_transactional(const sl_sink_vt_t *vt) {
  return vt != NULL && vt->prepare != NULL && vt->committer_open != NULL &&
         vt->commit != NULL;
}

int sl__sink2pc_impl_create(const sl_op_cfg_t *cfg, void **out_impl) {
  SL_UNUSED(cfg);
  sink2pc_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return SL_ENOMEM;
  *out_impl = s;
  return SL_OK;
}

void sl__sink2pc_impl_destroy(void *impl) {
  sink2pc_t *s = impl;
  if (s == NULL) return;
  for (uint32_t i = 0; i < s->n_pend; i++) sl_free(s->pend[i].bytes);
  sl_free(s->pend);
  sl_free(s);
}

static int pend_cmp(const pend_t *a, uint64_t ckpt, uint32_t origin) {
  if (a->ckpt != ckpt) return a->ckpt < ckpt ? -1 : 1;
  if (a->origin != origin) return a->origin < origin ? -1 : 1;
  return 0;
}

/* Insert in (ckpt, origin) order; takes bytes.  A duplicate is corrupt. */
static int pend_add(sink2pc_t *s, uint64_t ckpt, uint32_t origin,
                    uint32_t attempts, uint8_t *bytes, uint32_t len) {
  uint32_t at = s->n_pend;
  while (at > 0 && pend_cmp(&s->pend[at - 1], ckpt, origin) > 0) at--;
  if (at > 0 && pend_cmp(&s->pend[at - 1], ckpt, origin) == 0)
    return SL_ECORRUPT;
  if (s->n_pend == s->cap_pend) {
    uint32_t cap = s->cap_pend ? s->cap_pend * 2 : 8;
    pend_t *p = sl_realloc(s->pend, cap * sizeof(*p));
    if (p == NULL) return SL_ENOMEM;
    s->pend = p;
    s->cap_pend = cap;
  }
  memmove(&s->pend[at + 1], &s->pend[at], (s->n_pend - at) * sizeof(pend_t));
  int64_t now = sl__clock_realtime_ns();
  s->pend[at] = (pend_t){ckpt, origin, attempts, bytes, len, now ? now : 1};
  s->n_pend++;
  pend_publish(s);
  return SL_OK;
}

static void pend_remove_first(sink2pc_t *s) {
  sl_free(s->pend[0].bytes);
  memmove(&s->pend[0], &s->pend[1], (s->n_pend - 1) * sizeof(pend_t));
  s->n_pend--;
  pend_publish(s);
}

/* Fail the task (the error is recorded on the op) and remember it, so
 * that poll() reports it from the notification path too. */
static int fail(sl_op_t *op, sink2pc_t *s, sl_error_t *err, int rc,
                bool is_fatal) {
  if (err && is_fatal) sl_error_set_fatal(err, true);
  if (err && !is_fatal) sl_error_set_retriable(err, true);
  rc = sl__op_fail_err(op, err, rc);
  s->fail_rc = rc;
  return rc;
}

static int64_t backoff_ns(const sl_op_cfg_t *c, uint32_t attempts) {
  int64_t base = c->commit_backoff_ms > 0 ? c->commit_backoff_ms
                                          : DEFAULT_BACKOFF_MS;
  int64_t max = c->commit_max_backoff_ms > 0 ? c->commit_max_backoff_ms
                                             : DEFAULT_MAX_BACKOFF_MS;
  int64_t d = base;
  for (uint32_t i = 1; i < attempts && d < max; i++) d *= 2;
  return (d < max ? d : max) * 1000000ll;
}

static const char *status_name(sl_commit_status_t st) {
  switch (st) {
  case SL_COMMIT_OK: return "OK";
  case SL_COMMIT_ALREADY: return "ALREADY";
  case SL_COMMIT_RETRY: return "RETRY";
  case SL_COMMIT_LOST: return "LOST";
  case SL_COMMIT_FATAL: return "FATAL";
  case SL_COMMIT_RESTART: return "RESTART";
  }
  return "an unknown status";
}

/*
 * Commit every pending committable with ckpt <= upto, in order (S3).
 * is_restore: the restored ones before the writer opens (S5).  Returns
 * SL_OK (done, or a retry is scheduled) or the failure code.
 */
static int commit_due(sl_op_t *op, sink2pc_t *s, uint64_t upto,
                      bool is_restore) {
  const sl_op_cfg_t *c = cfg_of(op);
  const sl_sink_vt_t *vt = c->sink_vt;
  uint32_t max_attempts = c->commit_max_attempts ? c->commit_max_attempts
                                                 : DEFAULT_MAX_ATTEMPTS;
  while (s->n_pend > 0 && s->pend[0].ckpt <= upto) {
    pend_t *e = &s->pend[0];
    e->attempts++;
    int rc = SL_INJECT("sink.before_commit");
    if (rc != SL_OK)
      return fail(op, s, sl_error_create(rc, "injected failure at "
                  "sink.before_commit"), rc, false);
    sl_commit_status_t st = SL_COMMIT_FATAL;
    sl_error_t *err = NULL;
    STAT_ADD(s, attempts);
    rc = vt->commit(s->committer, e->ckpt, e->origin, e->bytes, e->len,
                    e->attempts, &st, &err);
    if (rc != SL_OK) st = SL_COMMIT_FATAL;
    if (st == SL_COMMIT_OK) STAT_ADD(s, ok);
    else if (st == SL_COMMIT_ALREADY) STAT_ADD(s, already);
    else if (st == SL_COMMIT_RETRY) STAT_ADD(s, retries);
    else if (st == SL_COMMIT_LOST) STAT_ADD(s, lost);
    if (st == SL_COMMIT_OK || st == SL_COMMIT_ALREADY) {
      sl_error_destroy(err);
      rc = SL_INJECT("sink.after_commit_ok");
      if (rc != SL_OK)
        return fail(op, s, sl_error_create(rc, "injected failure at "
                    "sink.after_commit_ok"), rc, false);
      pend_remove_first(s);
      continue;
    }
    const char *why = err ? sl_error_message(err) : "no message";
    if (st == SL_COMMIT_RESTART) {
      /* The connector can commit it only from a restore: fail the task
       * retriably; the entry stays in the list (S2), and the checkpoint
       * that holds it is restored. */
      sl_error_t *f = sl_error_create(
          SL_EAGAIN, "sink '%s' (subtask %u of %u): commit of checkpoint %llu "
          "(prepared by subtask %u) answered RESTART: it is committed again "
          "after a restore%s: %s", op->uid, op->subtask + 1, op->parallelism,
          (unsigned long long)e->ckpt, e->origin + 1,
          is_restore ? " (answered while restoring)" : "", why);
      sl_error_destroy(err);
      return fail(op, s, f, SL_EAGAIN, false);
    }
    if (st == SL_COMMIT_RETRY &&
        (is_restore || e->attempts >= max_attempts)) {
      sl_error_t *f = sl_error_create(
          SL_EAGAIN, "sink '%s' (subtask %u of %u): commit of checkpoint %llu "
          "(prepared by subtask %u) still answers RETRY after %u "
          "attempt(s)%s: %s", op->uid, op->subtask + 1, op->parallelism,
          (unsigned long long)e->ckpt, e->origin + 1, e->attempts,
          is_restore ? " while restoring" : "", why);
      sl_error_destroy(err);
      return fail(op, s, f, SL_EAGAIN, false);
    }
    if (st == SL_COMMIT_RETRY) {
      sl_log(SL_LOG_WARN, "sink '%s' (subtask %u of %u): commit of "
             "checkpoint %llu (prepared by subtask %u), attempt %u, answers "
             "RETRY: %s", op->uid, op->subtask + 1, op->parallelism,
             (unsigned long long)e->ckpt, e->origin + 1,
             e->attempts, why);
      sl_error_destroy(err);
      s->retry_at = sl__task_now(op->task) + backoff_ns(c, e->attempts);
      sl__task_wake_at(op->task, s->retry_at);
      return SL_OK;
    }
    /* LOST or FATAL: the job stops loudly; a restart would not help. */
    int code = rc != SL_OK ? rc : SL_EFAILED;
    sl_error_t *f = sl_error_create(
        code, "sink '%s' (subtask %u of %u): commit of checkpoint %llu "
        "(prepared by subtask %u, attempt %u) answered %s%s: %s", op->uid,
        op->subtask + 1, op->parallelism, (unsigned long long)e->ckpt,
        e->origin + 1, e->attempts,
        status_name(st),
        st == SL_COMMIT_LOST ? " (the transaction is gone and was not "
                               "committed: that epoch's output is lost)"
                             : "",
        why);
    sl_error_destroy(err);
    return fail(op, s, f, code, true);
  }
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Operator state: entry key = origin subtask, bytes = version u8, ckpt
 * u64, attempts u32, len u32, committable; and one META_KEY entry with
 * version u8 and the largest parallelism recorded, u32. */

static int put_entry(sl_ckpt_opstate_t *os, uint32_t key, const uint8_t *p,
                     size_t len) {
  sl_ckpt_entry_t *e = &os->entries[os->n_entries];
  e->bytes = sl_malloc(len ? len : 1);
  if (e->bytes == NULL) return SL_ENOMEM;
  memcpy(e->bytes, p, len);
  e->key = key;
  e->len = (uint32_t)len;
  os->n_entries++;
  return SL_OK;
}

static int sink_snapshot_opstate(sl_op_t *op, uint64_t id,
                                 sl_ckpt_subtask_t *sub) {
  SL_UNUSED(id);
  sink2pc_t *s = op->impl;
  sl_ckpt_opstate_t *ops = sl_realloc(sub->opstates, (sub->n_opstates + 1) *
                                                         sizeof(*ops));
  if (ops == NULL) goto nomem;
  sub->opstates = ops;
  sl_ckpt_opstate_t *os = &ops[sub->n_opstates++];
  memset(os, 0, sizeof(*os));
  os->name = sl_strdup(STATE_NAME);
  os->entries = sl_calloc(s->n_pend + 1, sizeof(sl_ckpt_entry_t));
  if (os->name == NULL || os->entries == NULL) goto nomem;
  uint8_t meta[5];
  meta[0] = ENTRY_VERSION;
  sl__put_u32le(meta + 1, SL_MAX(s->max_par, op->parallelism));
  if (put_entry(os, META_KEY, meta, sizeof(meta)) != SL_OK) goto nomem;
  for (uint32_t i = 0; i < s->n_pend; i++) {
    const pend_t *e = &s->pend[i];
    size_t n = 17 + (size_t)e->len;
    uint8_t *b = sl_malloc(n);
    if (b == NULL) goto nomem;
    b[0] = ENTRY_VERSION;
    sl__put_u64le(b + 1, e->ckpt);
    sl__put_u32le(b + 9, e->attempts);
    sl__put_u32le(b + 13, e->len);
    if (e->len) memcpy(b + 17, e->bytes, e->len);
    int rc = put_entry(os, e->origin, b, n);
    sl_free(b);
    if (rc != SL_OK) goto nomem;
  }
  return SL_OK;
nomem:
  return sl__op_fail(op, SL_ENOMEM, "out of memory saving the committables");
}

int sl__sink2pc_restore(const sl_ckpt_meta_t *m, const sl_ckpt_op_t *mop,
                        sl_op_t *op, sl_error_t **out_err) {
  sink2pc_t *s = op->impl;
  s->restored_id = m->id;
  s->restored_par = mop->parallelism;
  s->max_par = SL_MAX(s->max_par, mop->parallelism);
  for (uint32_t i = 0; i < mop->n_subtasks; i++) {
    const sl_ckpt_subtask_t *sub = &mop->subtasks[i];
    const sl_ckpt_opstate_t *os = sl__ckpt_opstate(sub, STATE_NAME);
    if (os == NULL) continue;
    for (uint32_t k = 0; k < os->n_entries; k++) {
      const sl_ckpt_entry_t *e = &os->entries[k];
      if (e->key == META_KEY) {
        if (e->len != 5 || e->bytes[0] != ENTRY_VERSION) goto corrupt;
        s->max_par = SL_MAX(s->max_par, sl__get_u32le(e->bytes + 1));
        continue;
      }
      /* S6: old subtask i's entries go to new subtask i % p'. */
      if (sub->subtask % op->parallelism != op->subtask) continue;
      if (e->len < 17 || e->bytes[0] != ENTRY_VERSION) goto corrupt;
      uint64_t ckpt = sl__get_u64le(e->bytes + 1);
      uint32_t attempts = sl__get_u32le(e->bytes + 9);
      uint32_t len = sl__get_u32le(e->bytes + 13);
      if (len != e->len - 17 || ckpt == 0 || ckpt > m->id) goto corrupt;
      uint8_t *b = sl_malloc(len ? len : 1);
      if (b == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
      if (len) memcpy(b, e->bytes + 17, len);
      int rc = pend_add(s, ckpt, e->key, attempts, b, len);
      if (rc != SL_OK) {
        sl_free(b);
        if (rc == SL_ENOMEM)
          return sl_error_set(out_err, rc, "out of memory");
        goto corrupt;
      }
    }
  }
  return SL_OK;
corrupt:
  return sl_error_set(out_err, SL_CORRUPT("malformed sink committable"),
                      "checkpoint %llu is corrupt: a committable of sink '%s' "
                      "(operator state %s) is malformed or stored twice",
                      (unsigned long long)m->id, op->uid, STATE_NAME);
}

bool sl__sink2pc_metrics(const sl_op_t *op, int64_t now_ns,
                         struct sl_sink_metrics_s *out) {
  if (op->vt != &sl__op_sink2pc_vt || op->impl == NULL) return false;
  sink2pc_t *s = op->impl;
  memset(out, 0, sizeof(*out));
  out->uid = op->uid;
  out->subtask = op->subtask;
  out->pending = atomic_load_explicit(&s->stats.pending, memory_order_relaxed);
  int64_t since =
      atomic_load_explicit(&s->stats.oldest_since_ns, memory_order_relaxed);
  out->oldest_pending_age_ns = since > 0 && now_ns > since ? now_ns - since
                                                           : 0;
  out->commit_attempts =
      atomic_load_explicit(&s->stats.attempts, memory_order_relaxed);
  out->committed = atomic_load_explicit(&s->stats.ok, memory_order_relaxed);
  out->already_committed =
      atomic_load_explicit(&s->stats.already, memory_order_relaxed);
  out->retries = atomic_load_explicit(&s->stats.retries, memory_order_relaxed);
  out->lost = atomic_load_explicit(&s->stats.lost, memory_order_relaxed);
  out->lingering_aborted = atomic_load_explicit(
      &s->counters.lingering_aborted, memory_order_relaxed);
  return true;
}

/* ------------------------------------------------------------------ */
/* The operator. */

/*
 * S7 (rule 0.3-7 of the connectors note).  Restoring checkpoint C replays
 * the input after C, and the sink emits it again; if the sink already
 * committed the output of a checkpoint K > C, that output appears twice.
 * Only the connector can know (its marker rows, finished files), so it is
 * asked, once per subtask: each asks about every subtask of the sink, so
 * all refuse alike before any of them commits.  The comparison is between
 * checkpoint ids, the ids prepare() was given, never epoch ids: the epoch
 * that follows C is named C and is committed at a checkpoint after C.
 *
 * Every completed checkpoint commits only committables <= itself, so a
 * restore of the newest completed checkpoint (a restart, --resume) always
 * passes, also after aborted checkpoints (their transactions are committed
 * only by a later completed checkpoint, or rolled back by recover).  A
 * restore of an older one (--from-checkpoint of a retained checkpoint or
 * a savepoint, or --resume falling back past a damaged newest checkpoint
 * whose output was committed) is refused unless allowed.
 */
static int check_newer_output(sl_op_t *op, sink2pc_t *s) {
  const sl_op_cfg_t *c = cfg_of(op);
  if (c->sink_vt->committed_max == NULL) return SL_OK;
  uint64_t k = 0;
  sl_bytes_t ev;
  sl_bytes_init(&ev);
  sl_error_t *err = NULL;
  int rc = c->sink_vt->committed_max(s->committer, &k, &ev, &err);
  if (rc != SL_OK) {
    sl_bytes_close(&ev);
    if (err == NULL) err = sl_error_create(rc, "%s", sl_strerror(rc));
    sl_error_prefix(err, "sink '%s' (subtask %u of %u): cannot tell which "
                    "checkpoints it already committed", op->uid,
                    op->subtask + 1, op->parallelism);
    return fail(op, s, err, rc, false);
  }
  sl_error_destroy(err);
  if (k <= s->restored_id) {
    sl_bytes_close(&ev);
    return SL_OK;
  }
  const char *why = ev.len ? (const char *)ev.data : "";
  int why_len = ev.len > 1000 ? 1000 : (int)ev.len;
  if (c->allow_duplicate_output) {
    if (op->subtask == 0)
      sl_log(SL_LOG_WARN, "sink '%s' already committed checkpoint %llu > %llu; "
             "restoring checkpoint %llu re-emits output (allowed by "
             "--allow-duplicate-sink-output)%s%.*s", op->uid,
             (unsigned long long)k, (unsigned long long)s->restored_id,
             (unsigned long long)s->restored_id, why_len ? ": " : "", why_len,
             why);
    sl_bytes_close(&ev);
    return SL_OK;
  }
  sl_error_t *f = sl_error_create(
      SL_ESTATE, "sink '%s' already committed checkpoint %llu > %llu; "
      "restoring checkpoint %llu re-emits output%s%.*s%s; resume from the "
      "newest checkpoint (--resume), or pass --allow-duplicate-sink-output "
      "(sl_job_config_t.allow_duplicate_sink_output) to accept the "
      "duplicates", op->uid, (unsigned long long)k,
      (unsigned long long)s->restored_id, (unsigned long long)s->restored_id,
      why_len ? " (" : "", why_len, why, why_len ? ")" : "");
  sl_bytes_close(&ev);
  return fail(op, s, f, SL_ESTATE, true);
}

static int sink_open(sl_op_t *op) {
  const sl_op_cfg_t *c = cfg_of(op);
  const sl_sink_vt_t *vt = c->sink_vt;
  sink2pc_t *s = op->impl;
  const sl_job_rt_t *rt = sl__task_job(op->task);
  /* The attempt's restored checkpoint, also when it held nothing of this
   * sink (sl__sink2pc_restore did not run). */
  if (s->restored_id == 0)
    s->restored_id = sl__task_restored_checkpoint(op->task);
  uint32_t span = SL_MAX(s->max_par, op->parallelism);
  uint32_t *owned = sl_calloc(span + 1, sizeof(uint32_t));
  if (owned == NULL) return sl__op_fail(op, SL_ENOMEM, "out of memory");
  uint32_t n_owned = 0;
  for (uint32_t i = op->subtask; i < span; i += op->parallelism)
    owned[n_owned++] = i;
  sl_committer_init_t ci = {rt->job_name,      op->uid,
                            op->subtask,       op->parallelism,
                            s->restored_id,    s->restored_par,
                            owned,             n_owned,
                            rt->epoch_id,      &s->counters};
  sl_error_t *err = NULL;
  int rc = vt->committer_open(c->sink_ctx, &ci, &s->committer, &err);
  sl_free(owned);
  if (rc != SL_OK) {
    s->committer = NULL;
    return fail(op, s, err, rc, false);
  }
  s->max_par = span;
  /* S7 before anything is committed; S5: restored committables first,
   * then recover, then the writer. */
  if (s->restored_id != 0 && (rc = check_newer_output(op, s)) != SL_OK)
    return rc;
  if (s->restored_id != 0) {
    if ((rc = SL_INJECT("sink.restore.before_commit")) != SL_OK)
      return fail(op, s, sl_error_create(rc, "injected failure at "
                  "sink.restore.before_commit"), rc, false);
    if ((rc = commit_due(op, s, s->restored_id, true)) != SL_OK) return rc;
  }
  if ((rc = SL_INJECT("sink.restore.before_recover")) != SL_OK)
    return fail(op, s, sl_error_create(rc, "injected failure at "
                "sink.restore.before_recover"), rc, false);
  if (vt->recover && (rc = vt->recover(s->committer, &err)) != SL_OK)
    return fail(op, s, err, rc, false);
  if ((rc = SL_INJECT("sink.restore.after_recover")) != SL_OK)
    return fail(op, s, sl_error_create(rc, "injected failure at "
                "sink.restore.after_recover"), rc, false);
  sl_sink_init_t init = {op->subtask,     op->parallelism, op->in_schema[0],
                         op->uid,         s->restored_id != 0,
                         s->restored_id,  rt->job_name,    rt->epoch_id};
  rc = vt->writer_open(c->sink_ctx, &init, &s->writer, &err);
  if (rc != SL_OK) {
    s->writer = NULL;
    return fail(op, s, err, rc, false);
  }
  return SL_OK;
}

/* S8. No row of a later epoch goes to the writer while the commit of an
 * earlier one waits for its retry: the prepared transaction may hold locks
 * those rows need (an XA PREPARED branch keeps its InnoDB row locks), and
 * the writer would wait for them on the very thread that is to retry the
 * commit, until the server's lock wait timeout fails the job.  The task
 * waits out the backoff instead (backpressure) and retries first; a commit
 * that still answers RETRY after its attempts fails the task as before. */
static int await_retry(sl_op_t *op, sink2pc_t *s) {
  while (s->fail_rc == SL_OK && s->retry_at != 0) {
    int64_t wait = s->retry_at - sl__task_now(op->task);
    if (wait > 0) {
      struct timespec ts = {(time_t)(wait / 1000000000ll),
                            (long)(wait % 1000000000ll)};
      nanosleep(&ts, NULL);
      continue;
    }
    s->retry_at = 0;
    int rc = commit_due(op, s, s->commit_upto, false);
    if (rc != SL_OK) return rc;
  }
  return s->fail_rc;
}

static int sink_process(sl_op_t *op, uint32_t input, const sl_row_t *row) {
  SL_UNUSED(input);
  sink2pc_t *s = op->impl;
  if (SL_UNLIKELY(s->retry_at != 0)) {
    int rc = await_retry(op, s);
    if (rc != SL_OK) return rc;
  }
  sl_error_t *err = NULL;
  int rc = cfg_of(op)->sink_vt->write(s->writer, row, &err);
  if (SL_UNLIKELY(rc != SL_OK)) return sl__op_fail_err(op, err, rc);
  return SL_OK;
}

static int sink_flush(sl_op_t *op) {
  const sl_sink_vt_t *vt = cfg_of(op)->sink_vt;
  sink2pc_t *s = op->impl;
  if (vt->flush == NULL || s->writer == NULL) return SL_OK;
  if (SL_UNLIKELY(s->retry_at != 0)) {
    int rc = await_retry(op, s);
    if (rc != SL_OK) return rc;
  }
  sl_error_t *err = NULL;
  int rc = vt->flush(s->writer, &err);
  return rc == SL_OK ? SL_OK : sl__op_fail_err(op, err, rc);
}

static int sink_end_input(sl_op_t *op) {
  sink2pc_t *s = op->impl;
  s->is_ended = true;
  return sink_flush(op);
}

/* Barrier id: close the epoch (S1).  A failure fails the task: nothing of
 * the epoch is prepared, and the sources will not replay it otherwise. */
static int sink_pre_snapshot(sl_op_t *op, uint64_t id) {
  const sl_sink_vt_t *vt = cfg_of(op)->sink_vt;
  sink2pc_t *s = op->impl;
  if (s->writer == NULL) return SL_OK;
  int rc = sink_flush(op);
  if (rc != SL_OK) return rc;
  if ((rc = SL_INJECT("sink.before_prepare")) != SL_OK)
    return sl__op_fail(op, rc, "injected failure at sink.before_prepare");
  sl_bytes_t b;
  sl_bytes_init(&b);
  sl_error_t *err = NULL;
  rc = vt->prepare(s->writer, id, &b, &err);
  if (rc != SL_OK) {
    sl_bytes_close(&b);
    if (err)
      sl_error_prefix(err, "sink '%s' (subtask %u of %u): prepare for "
                      "checkpoint %llu failed", op->uid, op->subtask + 1,
                      op->parallelism,
                      (unsigned long long)id);
    return sl__op_fail_err(op, err, rc);
  }
  s->last_prepared = id;
  if (b.len > UINT32_MAX - 17) {
    sl_bytes_close(&b);
    return sl__op_fail(op, SL_EOVERFLOW, "sink '%s': a committable of %zu "
                       "bytes is too large", op->uid, b.len);
  }
  if (b.len > 0) {
    uint8_t *p = sl_malloc(b.len);
    if (p) memcpy(p, b.data, b.len);
    rc = p ? pend_add(s, id, op->subtask, 0, p, (uint32_t)b.len) : SL_ENOMEM;
    if (rc != SL_OK) {
      sl_free(p);
      sl_bytes_close(&b);
      return sl__op_fail(op, rc == SL_ENOMEM ? rc : SL_ESTATE,
                         "sink '%s': cannot keep the committable of "
                         "checkpoint %llu: %s", op->uid,
                         (unsigned long long)id, sl_strerror(rc));
    }
  }
  sl_bytes_close(&b);
  if ((rc = SL_INJECT("sink.after_prepare")) != SL_OK)
    return sl__op_fail(op, rc, "injected failure at sink.after_prepare");
  return SL_OK;
}

static void sink_complete(sl_op_t *op, uint64_t id) {
  sink2pc_t *s = op->impl;
  if (id > s->commit_upto) s->commit_upto = id;
  if (s->fail_rc != SL_OK || s->retry_at != 0) return;
  commit_due(op, s, s->commit_upto, false);
}

static void sink_aborted(sl_op_t *op, uint64_t id) {
  sink2pc_t *s = op->impl;
  /* S4: the list stays.  But once input ended no later checkpoint comes
   * in this attempt: the final one aborted, so the last epoch cannot
   * commit here; fail, and the restart replays it. */
  if (s->fail_rc == SL_OK && s->is_ended && s->n_pend > 0 &&
      id >= s->last_prepared)
    /* Not SL_ECANCELED: that code means "cancelled" and is never
     * restarted. */
    fail(op, s, sl_error_create(SL_EFAILED, "sink '%s' (subtask %u of %u): the "
         "final checkpoint %llu was aborted, so the last epoch cannot commit "
         "in this attempt; the job restarts from its latest completed "
         "checkpoint", op->uid, op->subtask + 1, op->parallelism,
         (unsigned long long)id),
         SL_EFAILED, false);
}

static int sink_poll(sl_op_t *op) {
  sink2pc_t *s = op->impl;
  if (s->fail_rc != SL_OK) return s->fail_rc;
  if (s->retry_at != 0 && sl__task_now(op->task) >= s->retry_at) {
    s->retry_at = 0;
    return commit_due(op, s, s->commit_upto, false);
  }
  return SL_OK;
}

static int sink_may_finish(sl_op_t *op) {
  sink2pc_t *s = op->impl;
  if (s->fail_rc != SL_OK) return s->fail_rc;
  return s->n_pend == 0 ? 1 : 0;
}

static void sink_close(sl_op_t *op, bool is_success) {
  const sl_sink_vt_t *vt = cfg_of(op)->sink_vt;
  sink2pc_t *s = op->impl;
  if (s->writer) {
    sl_error_t *err = NULL;
    int rc = vt->writer_close(s->writer, is_success, &err);
    s->writer = NULL;
    if (rc != SL_OK) {
      if (is_success) sl__op_fail_err(op, err, rc);
      else sl_error_destroy(err);
    }
  }
  if (s->committer && vt->committer_close) vt->committer_close(s->committer);
  s->committer = NULL;
}

const sl_op_vt_t sl__op_sink2pc_vt = {
    .name = "sink",
    .open = sink_open,
    .process = sink_process,
    .end_input = sink_end_input,
    .close = sink_close,
    .checkpoint_complete = sink_complete,
    .checkpoint_aborted = sink_aborted,
    .pre_snapshot = sink_pre_snapshot,
    .snapshot_opstate = sink_snapshot_opstate,
    .poll = sink_poll,
    .may_finish = sink_may_finish,
};
