/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The planner's side of sources with an enumerator (sl_connector.h): the
 * enumerator host of each such source (checkpoint/enum_host.c) lives
 * across attempts; each attempt either resets its readers to the restored
 * checkpoint (a restart in the same process, which the assignment tracker
 * can judge) or creates the enumerator from the checkpoint's state (the
 * first attempt, a restore in a new process, a fallback to a checkpoint
 * older than the newest completed one, another parallelism).  Readers
 * restore the splits of their own old subtask; at another parallelism, or
 * from a checkpoint without enumerator state, every old reader's splits go
 * back to the enumerator with their positions and it assigns them again:
 * splits are redistributed by the enumerator, never by key group.  See
 * README.md.
 */
#include "graph/graph.h"
#include "runtime/task_int.h"

static int l_add_reader(void *h, uint32_t s) {
  return sl__enum_host_add_reader(h, s);
}
static int l_request(void *h, uint32_t s) {
  return sl__enum_host_request_split(h, s);
}
static int l_finished(void *h, uint32_t s, const char *id) {
  return sl__enum_host_split_finished(h, s, id);
}
static int l_event(void *h, uint32_t s, const uint8_t *ev, size_t len) {
  return sl__enum_host_reader_event(h, s, ev, len);
}
static void l_snapshot(void *h, uint32_t s, uint64_t id) {
  sl__enum_host_reader_snapshot(h, s, id);
}
static int l_status(void *h, sl_error_t **out_err) {
  return sl__enum_host_status(h, out_err);
}

/* The gateway's delivery: to the mailbox of reader ev->subtask. */
static void deliver(void *user, sl_enum_event_t *ev) {
  sl_node_t *n = user;
  sl_task_t *t = n->enum_job->rt.tasks[n->enum_first_task + ev->subtask];
  sl__source_deliver(t, ev);
}

/* The enumerator failed: every reader runs and finds the status (one
 * waiting for an assignment would otherwise wait for good). */
static void wake_readers(void *user) {
  sl_node_t *n = user;
  for (uint32_t s = 0; s < n->par; s++) {
    sl_task_t *t = n->enum_job->rt.tasks[n->enum_first_task + s];
    t->sched->ops->wake(t->sched, t);
  }
}

/* Does the checkpoint hold split positions of op (any old subtask)? */
static bool has_splits(const sl_ckpt_op_t *mop) {
  for (uint32_t i = 0; mop && i < mop->n_subtasks; i++) {
    const sl_ckpt_opstate_t *os =
        sl__ckpt_opstate(&mop->subtasks[i], "source.splits");
    if (os && os->n_entries) return true;
  }
  return false;
}

static int corrupt(const sl_ckpt_meta_t *m, const char *uid,
                   sl_error_t **out_err) {
  return sl_error_set(out_err, SL_CORRUPT("malformed split position"),
                      "checkpoint %llu is corrupt: a split position of "
                      "source '%s' is malformed", (unsigned long long)m->id,
                      uid);
}

/*
 * The splits the checkpoint's readers hold (every old subtask), for the
 * enumerator's create (sl_enum_init_t.restored_splits): ids copied into
 * *out_ids, positions borrowed from mop.  A checkpoint of an earlier
 * sluice that stored positions by split index is refused here, as for a
 * source without an enumerator.
 */
static int held_splits(const sl_ckpt_meta_t *m, const sl_ckpt_op_t *mop,
                       sl_split_t **out, char ***out_ids, uint32_t *out_n,
                       sl_error_t **out_err) {
  uint32_t n_all = 0;
  for (uint32_t i = 0; i < mop->n_subtasks; i++) {
    if (sl__ckpt_opstate(&mop->subtasks[i], "source.positions") != NULL)
      return sl_error_set(out_err, SL_EINVAL,
                          "checkpoint %llu stores the positions of source "
                          "'%s' by split index (an earlier sluice); they "
                          "cannot be matched to splits by identity: start "
                          "the job without restoring this checkpoint",
                          (unsigned long long)m->id, mop->uid);
    const sl_ckpt_opstate_t *os =
        sl__ckpt_opstate(&mop->subtasks[i], "source.splits");
    if (os) n_all += os->n_entries;
  }
  sl_split_t *all = sl_calloc(n_all + 1, sizeof(*all));
  char **ids = sl_calloc(n_all + 1, sizeof(char *));
  int rc = all && ids ? SL_OK : SL_ENOMEM;
  uint32_t k = 0;
  for (uint32_t i = 0; rc == SL_OK && i < mop->n_subtasks; i++) {
    const sl_ckpt_opstate_t *os =
        sl__ckpt_opstate(&mop->subtasks[i], "source.splits");
    for (uint32_t e = 0; os && rc == SL_OK && e < os->n_entries; e++) {
      sl_split_pos_t sp;
      if (sl__split_pos_decode(os->entries[e].bytes, os->entries[e].len,
                               &sp) != SL_OK) {
        rc = corrupt(m, mop->uid, out_err);
        break;
      }
      if ((ids[k] = sl_strndup(sp.id, sp.id_len)) == NULL) {
        rc = SL_ENOMEM;
        break;
      }
      all[k].id = ids[k];
      all[k].state = sp.pos;
      all[k].state_len = sp.pos_len;
      k++;
    }
  }
  if (rc != SL_OK) {
    for (uint32_t i = 0; ids && i < k; i++) sl_free(ids[i]);
    sl_free(ids);
    sl_free(all);
    return rc == SL_ENOMEM ? sl_error_set(out_err, rc, "out of memory") : rc;
  }
  *out = all;
  *out_ids = ids;
  *out_n = k;
  return SL_OK;
}

static int plan_host(sl_job_t *job, sl_node_t *n, const sl_ckpt_meta_t *meta,
                     sl_error_t **out_err) {
  uint64_t id = meta ? meta->id : 0;
  const sl_ckpt_op_t *mop = meta ? sl__ckpt_meta_op(meta, n->uid) : NULL;
  bool is_same_par = mop == NULL || mop->parallelism == n->par;
  sl_enum_host_t *h = n->enum_host;
  n->enum_job = job;
  /* A restart in this process, to a checkpoint the tracker still knows:
   * the live enumerator keeps its state; each reader's assignments after
   * the checkpoint come back (seed 004: A stays, B and C return). */
  /* A failed enumerator (sticky) is not kept: it is created again from
   * the checkpoint, as in a new process. */
  if (h && sl__enum_host_status(h, NULL) == SL_OK &&
      sl__enum_host_parallelism(h) == n->par && is_same_par &&
      id >= sl__enum_host_horizon(h)) {
    for (uint32_t s = 0; s < n->par; s++) {
      int rc = sl__enum_host_subtask_reset(h, s, id, out_err);
      if (rc != SL_OK) return rc;
    }
    n->is_enum_rescale = false;
    return SL_OK;
  }
  sl__enum_host_destroy(h);
  n->enum_host = NULL;
  if (mop && has_splits(mop) && !mop->has_enum_state)
    sl_log(SL_LOG_INFO, "checkpoint %llu holds no enumerator state of "
           "source '%s' (taken before it had one): its readers' splits go "
           "back to the enumerator with their positions",
           (unsigned long long)id, n->uid);
  sl_enum_init_t init = {n->par, NULL, 0, id, n->uid, NULL, 0};
  if (mop && mop->has_enum_state) {
    init.state = mop->enum_state;
    init.state_len = mop->enum_state_len;
  }
  sl_split_t *held = NULL;
  char **ids = NULL;
  uint32_t n_held = 0;
  int rc = mop ? held_splits(meta, mop, &held, &ids, &n_held, out_err)
               : SL_OK;
  if (rc != SL_OK) return rc;
  init.restored_splits = held;
  init.n_restored_splits = n_held;
  rc = sl__enum_host_create(n->uid, n->src_vt->enumerator, n->src_ctx, &init,
                            true, &n->enum_host, out_err);
  for (uint32_t i = 0; i < n_held; i++) sl_free(ids[i]);
  sl_free(ids);
  sl_free(held);
  if (rc != SL_OK) return rc;
  n->is_enum_rescale = mop != NULL && (!is_same_par || !mop->has_enum_state);
  return SL_OK;
}

int sl__enum_plan_hosts(sl_job_t *job, const sl_ckpt_meta_t *meta,
                        sl_error_t **out_err) {
  for (uint32_t i = 0; i < job->n_nodes; i++) {
    sl_node_t *n = job->nodes[i];
    if (n->kind != SL_NODE_SOURCE || n->src_vt->enumerator == NULL) continue;
    if (n->src_vt->reader_add_splits == NULL)
      return sl_error_set(out_err, SL_EINVAL, "source '%s' has an "
                          "enumerator but its reader lacks reader_add_splits",
                          n->uid);
    int rc = plan_host(job, n, meta, out_err);
    if (rc != SL_OK) return rc;
    n->enum_link = (sl_enum_link_t){n->enum_host, l_add_reader, l_request,
                                    l_finished,   l_event,      l_snapshot,
                                    l_status};
  }
  return SL_OK;
}

/* Copy a stored split into a reader's list (owned id and position). */
static int take_split(sl_source_rt_t *src, const sl_split_pos_t *sp) {
  if (sl__source_reserve(src, 1) != SL_OK) return SL_ENOMEM;
  sl_split_init_t *si = &src->splits[src->n_splits];
  memset(si, 0, sizeof(*si));
  char *id = sl_strndup(sp->id, sp->id_len);
  uint8_t *pos = sl_malloc(sp->pos_len ? sp->pos_len : 1);
  if (id == NULL || pos == NULL) {
    sl_free(id);
    sl_free(pos);
    return SL_ENOMEM;
  }
  if (sp->pos_len) memcpy(pos, sp->pos, sp->pos_len);
  si->split = src->n_splits;
  si->id = id;
  si->position = pos;
  si->position_len = sp->pos_len;
  if (src->wm) {
    memset(&src->wm->splits[src->n_splits], 0, sizeof(sl_wm_split_t));
    src->wm->splits[src->n_splits].max_ts = SL_WATERMARK_MIN;
  }
  src->n_splits++;
  return SL_OK;
}

int sl__enum_restore_reader(sl_node_t *n, const sl_ckpt_meta_t *m,
                            const sl_ckpt_op_t *mop, sl_source_rt_t *src,
                            uint32_t subtask, sl_error_t **out_err) {
  if (!n->is_enum_rescale) {
    if (subtask >= mop->n_subtasks) return SL_OK;
    const sl_ckpt_opstate_t *os =
        sl__ckpt_opstate(&mop->subtasks[subtask], "source.splits");
    for (uint32_t e = 0; os && e < os->n_entries; e++) {
      sl_split_pos_t sp;
      if (sl__split_pos_decode(os->entries[e].bytes, os->entries[e].len,
                               &sp) != SL_OK)
        return corrupt(m, n->uid, out_err);
      if (take_split(src, &sp) != SL_OK)
        return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
    return SL_OK;
  }
  if (subtask != 0) return SL_OK;
  /* Another parallelism (or no enumerator state): every old reader's
   * splits go back to the enumerator, with their positions. */
  sl_split_t *all = NULL;
  char **ids = NULL;
  uint32_t k = 0;
  int rc = held_splits(m, mop, &all, &ids, &k, out_err);
  if (rc != SL_OK) return rc;
  rc = sl__enum_host_add_splits_back(n->enum_host, all, k, out_err);
  for (uint32_t i = 0; i < k; i++) sl_free(ids[i]);
  sl_free(ids);
  sl_free(all);
  return rc;
}

void sl__enum_plan_attach(sl_job_t *job) {
  for (uint32_t i = 0; i < job->n_nodes; i++) {
    sl_node_t *n = job->nodes[i];
    if (n->enum_host == NULL) continue;
    n->enum_first_task = job->chains[n->chain].first_task;
    sl__enum_host_attach(n->enum_host, deliver, n);
    sl__enum_host_on_fail(n->enum_host, wake_readers, n);
  }
}

void sl__enum_plan_detach(sl_job_t *job) {
  for (uint32_t i = 0; i < job->n_nodes; i++)
    if (job->nodes[i]->enum_host) {
      sl__enum_host_attach(job->nodes[i]->enum_host, NULL, NULL);
      sl__enum_host_on_fail(job->nodes[i]->enum_host, NULL, NULL);
      /* A trigger waiting for a stuck enumerator ends now, so that the
       * coordinator can stop. */
      sl__enum_host_interrupt(job->nodes[i]->enum_host);
    }
}

void sl__enum_plan_destroy(sl_job_t *job) {
  for (uint32_t i = 0; i < job->n_nodes; i++) {
    sl__enum_host_destroy(job->nodes[i]->enum_host);
    job->nodes[i]->enum_host = NULL;
  }
}
