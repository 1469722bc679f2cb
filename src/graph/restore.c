/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Restore: which checkpoint an attempt starts from, and applying it to a
 * freshly built plan.  Operators map by uid; keyed state is read by
 * whichever new subtask owns its key groups (so the parallelism may
 * differ), source positions go to the subtask that reads the split, and
 * the channel state of an unaligned checkpoint to the task whose head
 * wrote it.  State the job cannot place is an error.  The reading itself
 * is in checkpoint/ckpt_task.c; falling back to an older checkpoint when
 * one turns out corrupt is in run.c.  See README.md.
 */
#include "graph/graph.h"
#include "runtime/task_int.h"

/* Does the checkpoint hold anything for this operator? */
static bool has_state(const sl_ckpt_op_t *mop) {
  for (uint32_t i = 0; i < mop->n_subtasks; i++)
    if (mop->subtasks[i].state_file || mop->subtasks[i].channel_file ||
        mop->subtasks[i].n_opstates)
      return true;
  return false;
}

static const sl_node_t *node_by_uid(const sl_job_t *job, const char *uid) {
  for (uint32_t i = 0; i < job->n_nodes; i++)
    if (strcmp(job->nodes[i]->uid, uid) == 0) return job->nodes[i];
  return NULL;
}

/*
 * Restore every operator instance from meta.  Operators map by uid; the
 * checkpoint's key groups are read by whichever new subtask owns them, so
 * the parallelism may differ.  State the job cannot place is an error.
 */
int sl__restore_plan(sl_job_t *job, const sl_ckpt_meta_t *m,
                     sl_error_t **out_err) {
  if (m->max_parallelism != job->cfg.max_parallelism)
    return sl_error_set(out_err, SL_EINVAL,
                        "checkpoint %llu was taken with max_parallelism %u "
                        "but the job has %u; the number of key groups cannot "
                        "change",
                        (unsigned long long)m->id, m->max_parallelism,
                        job->cfg.max_parallelism);
  for (uint32_t i = 0; i < m->n_ops; i++) {
    const sl_ckpt_op_t *mop = &m->ops[i];
    if (!has_state(mop)) continue;
    const sl_node_t *n = node_by_uid(job, mop->uid);
    if (n == NULL)
      return sl_error_set(out_err, SL_EINVAL,
                          "checkpoint %llu holds state of operator '%s', which "
                          "this job does not have (operators map by uid)",
                          (unsigned long long)m->id, mop->uid);
    bool has_keyed = false;
    for (uint32_t k = 0; k < mop->n_subtasks; k++)
      if (mop->subtasks[k].state_file) has_keyed = true;
    bool is_keyed = (n->kind == SL_NODE_PROCESS || n->kind == SL_NODE_CONNECT) &&
                    n->inputs[0].part == SL_PART_HASH;
    if (has_keyed && !is_keyed)
      return sl_error_set(out_err, SL_EINVAL,
                          "checkpoint %llu holds keyed state of operator '%s', "
                          "which is not keyed in this job",
                          (unsigned long long)m->id, mop->uid);
  }
  for (uint32_t i = 0; i < job->n_ops; i++) {
    sl_op_t *op = job->ops[i];
    const sl_ckpt_op_t *mop = sl__ckpt_meta_op(m, op->uid);
    if (mop == NULL) continue;
    int rc = SL_OK;
    if (op->kstate) rc = sl__ckpt_restore_keyed(m, mop, op, out_err);
    if (rc == SL_OK && op->task->source && op->task->ops[0] == op)
      rc = sl__ckpt_restore_positions(m, mop, op->task->source,
                                      op->subtask == 0, out_err);
    if (rc == SL_OK && op->task->ops[0] == op)
      rc = sl__ckpt_restore_channels(m, mop, op->task, out_err);
    if (rc == SL_OK && op->vt == &sl__op_sink2pc_vt)
      rc = sl__sink2pc_restore(m, mop, op, out_err);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

/* The restore point of the first attempt, from the configuration. */
int sl__restore_initial(sl_job_t *job, sl_ckpt_meta_t *meta, bool *has,
                        sl_error_t **out_err) {
  *has = false;
  if (job->cfg.restore_from) {
    sl_error_t *err = NULL;
    int rc = sl__ckpt_read_meta(job->cfg.restore_from, meta, &err);
    if (rc == SL_OK) rc = sl__ckpt_check_files(meta, &err);
    if (rc != SL_OK) {
      sl__ckpt_meta_clear(meta);
      if (rc == SL_ENOTFOUND) rc = SL_EINVAL;
      sl_error_set(out_err, rc, "cannot restore from '%s': %s",
                   job->cfg.restore_from, sl_error_message(err));
      sl_error_destroy(err);
      return rc;
    }
    *has = true;
    return SL_OK;
  }
  if (job->cfg.resume_latest && job->coord) {
    sl_error_t *err = NULL;
    const char *jobdir = sl__coord_job_dir(job->coord);
    int rc = sl__ckpt_load_latest(jobdir, meta, &err);
    if (rc == SL_ENOTFOUND) {
      /* Nothing to resume: a fresh start, and a warning when there are
       * checkpoint directories none of which completed (a process killed
       * before its first checkpoint completed, or deleted _metadata
       * files).  Not an error: resuming is how a killed job is started
       * again, and it must work however early the kill came. */
      sl_error_destroy(err);
      uint64_t *ids = NULL;
      uint32_t n = 0;
      if (sl__ckpt_list(jobdir, &ids, &n, NULL) == SL_OK && n > 0)
        sl_log(SL_LOG_WARN, "no completed checkpoint to resume from in '%s' "
               "(%u chk-* directories, none with a _metadata file); the job "
               "starts from the beginning", jobdir, n);
      else
        sl_log(SL_LOG_INFO, "no checkpoint to resume from in '%s'; the job "
               "starts from the beginning", jobdir);
      sl_free(ids);
      return SL_OK;
    }
    if (rc != SL_OK) {
      if (out_err && *out_err == NULL) *out_err = err;
      else sl_error_destroy(err);
      return rc;
    }
    sl_log(SL_LOG_INFO, "resuming from checkpoint %llu",
           (unsigned long long)meta->id);
    *has = true;
  }
  return SL_OK;
}
