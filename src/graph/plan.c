/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The planner and the job's run, wait, cancel and metrics calls.
 *
 * Planning, in order:
 *  1. Resolve each node's parallelism (node, else job default, else the
 *     number of cores), capped by max_parallelism.
 *  2. Chain: a node joins its input's chain when it has exactly one input,
 *     the edge was not repartitioned (key_by, rebalance, broadcast), both
 *     have the same parallelism, and the node is not a source, union or
 *     connect.  Nodes are in topological order, so one pass suffices.
 *  3. Ask each source for its splits; split s goes to subtask s % p.
 *  4. Create a task per (chain, subtask) and an operator instance per node
 *     of the chain; keyed operators get a heap state backend for their
 *     key-group range and a timer service.
 *  5. For each edge that is not chained, create a record writer at the
 *     producing operator and channels: forward edges connect subtask i to
 *     subtask i, the others connect every pair.
 * See README.md.
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "graph/graph.h"

static int plan_error(sl_error_t **out_err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int plan_error(sl_error_t **out_err, int code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return sl_error_set(out_err, code, "%s", msg);
}

/* Input handle k of a node (union inputs are all logical input 0). */
static const sl_stream_t *node_input(const sl_node_t *n, uint32_t k) {
  return n->kind == SL_NODE_UNION ? &n->union_inputs[k] : &n->inputs[k];
}

static uint32_t node_input_index(const sl_node_t *n, uint32_t k) {
  return n->kind == SL_NODE_UNION ? 0 : k;
}

static int resolve_parallelism(sl_job_t *job, sl_error_t **out_err) {
  uint32_t def = job->cfg.parallelism ? job->cfg.parallelism : sl__cpu_count();
  if (def > job->cfg.max_parallelism) def = job->cfg.max_parallelism;
  for (uint32_t i = 0; i < job->n_nodes; i++) {
    sl_node_t *n = job->nodes[i];
    n->par = n->parallelism ? n->parallelism : def;
    if (n->par > job->cfg.max_parallelism)
      return plan_error(out_err, SL_EINVAL,
                        "operator '%s' has parallelism %u, above "
                        "max_parallelism %u",
                        n->uid, n->par, job->cfg.max_parallelism);
  }
  return SL_OK;
}

static int build_chains(sl_job_t *job) {
  job->chains = sl_calloc(job->n_nodes, sizeof(sl_chain_t));
  if (job->chains == NULL) return SL_ENOMEM;
  for (uint32_t i = 0; i < job->n_nodes; i++) {
    sl_node_t *n = job->nodes[i];
    const sl_node_t *up = n->n_inputs == 1 ? n->inputs[0].node : NULL;
    n->is_chained = n->kind != SL_NODE_SOURCE && n->kind != SL_NODE_UNION &&
                    n->kind != SL_NODE_CONNECT && n->n_inputs == 1 &&
                    !n->inputs[0].is_explicit && n->inputs[0].port == 0 &&
                    up->par == n->par &&
                    up->kind != SL_NODE_SINK;
    sl_chain_t *c;
    if (n->is_chained) {
      n->chain = up->chain;
      c = &job->chains[n->chain];
    } else {
      n->chain = job->n_chains++;
      c = &job->chains[n->chain];
      c->head = n->id;
      c->par = n->par;
      c->nodes = sl_calloc(job->n_nodes, sizeof(uint32_t));
      if (c->nodes == NULL) return SL_ENOMEM;
    }
    c->nodes[c->n_nodes++] = n->id;
  }
  return SL_OK;
}

static bool push_ptr(void ***arr, uint32_t *n, void *p) {
  uint32_t k = *n;
  if (k == 0 || (k & (k - 1)) == 0) {
    void **a = sl_realloc(*arr, (k ? k * 2 : 4) * sizeof(void *));
    if (a == NULL) return false;
    *arr = a;
  }
  (*arr)[(*n)++] = p;
  return true;
}

static sl_op_t *task_op(const sl_job_t *job, const sl_task_t *t,
                        uint32_t node_id) {
  const sl_chain_t *c = &job->chains[job->nodes[node_id]->chain];
  for (uint32_t i = 0; i < c->n_nodes; i++)
    if (c->nodes[i] == node_id) return t->ops[i];
  return NULL;
}

static sl_task_t *chain_task(const sl_job_t *job, uint32_t chain,
                             uint32_t subtask) {
  return job->rt.tasks[job->chains[chain].first_task + subtask];
}

static bool add_target(sl_op_t *op, sl_op_t *to, uint32_t input,
                       sl_writer_t *w) {
  sl_out_target_t *t =
      sl_realloc(op->targets, (op->n_targets + 1) * sizeof(*t));
  if (t == NULL) return false;
  op->targets = t;
  t[op->n_targets].op = to;
  t[op->n_targets].input = input;
  t[op->n_targets].w = w;
  op->n_targets++;
  return true;
}

static bool add_side_target(sl_op_t *op, uint32_t port, uint32_t input,
                            sl_writer_t *w) {
  uint32_t k = op->n_side_targets;
  sl_out_target_t *t = sl_realloc(op->side_targets, (k + 1) * sizeof(*t));
  if (t == NULL) return false;
  op->side_targets = t;
  uint32_t *ports = sl_realloc(op->side_ports, (k + 1) * sizeof(uint32_t));
  if (ports == NULL) return false;
  op->side_ports = ports;
  t[k].op = NULL;
  t[k].input = input;
  t[k].w = w;
  ports[k] = port;
  op->n_side_targets++;
  return true;
}

static int create_op(sl_job_t *job, sl_task_t *t, const sl_node_t *n,
                     uint32_t subtask, sl_op_t **out) {
  sl_op_t *op = sl_calloc(1, sizeof(*op));
  if (op == NULL) return SL_ENOMEM;
  op->vt = n->vt;
  op->cfg = &n->cfg;
  op->task = t;
  op->uid = n->uid;
  op->subtask = subtask;
  op->parallelism = n->par;
  op->max_parallelism = job->cfg.max_parallelism;
  op->out_schema = n->schema;
  op->collector.op = op;
  op->ckpt_op = n->id;
  atomic_init(&op->n_in, 0);
  atomic_init(&op->n_out, 0);
  sl_bytes_init(&op->keybuf);
  if (!push_ptr((void ***)&job->ops, &job->n_ops, op)) {
    sl_free(op);
    return SL_ENOMEM;
  }
  if (sl_row_builder_init(&op->out_b, n->schema) != SL_OK) return SL_ENOMEM;
  for (uint32_t k = 0; k < n->n_inputs && k < 2; k++)
    op->in_schema[k] = sl__stream_schema(node_input(n, k));
  if (n->kind == SL_NODE_UNION) op->in_schema[0] = n->schema;
  bool is_keyed = (n->kind == SL_NODE_PROCESS || n->kind == SL_NODE_CONNECT) &&
                  n->inputs[0].part == SL_PART_HASH;
  if (is_keyed) {
    uint32_t m = job->cfg.max_parallelism;
    uint32_t start = sl_key_group_range_start(subtask, m, n->par);
    uint32_t end = sl_key_group_range_end(subtask, m, n->par);
    int rc = sl__kstate_create(m, start, end, &op->kstate);
    if (rc != SL_OK) return rc;
    if ((rc = sl__timers_create(&op->timers)) != SL_OK ||
        (rc = sl__timers_create(&op->etimers)) != SL_OK)
      return rc;
    for (uint32_t k = 0; k < n->n_inputs; k++) op->keysel[k] = n->inputs[k].keysel;
    op->is_keyed = true;
    if (!push_ptr((void ***)&t->timer_ops, &t->n_timer_ops, op))
      return SL_ENOMEM;
  }
  if (n->cfg.impl_create) {
    int rc = n->cfg.impl_create(&n->cfg, &op->impl);
    if (rc != SL_OK) return rc;
  }
  *out = op;
  return SL_OK;
}

static int create_tasks(sl_job_t *job, sl_error_t **out_err) {
  uint32_t n_tasks = 0;
  for (uint32_t c = 0; c < job->n_chains; c++) {
    job->chains[c].first_task = n_tasks;
    n_tasks += job->chains[c].par;
  }
  job->rt.tasks = sl_calloc(n_tasks ? n_tasks : 1, sizeof(sl_task_t *));
  if (job->rt.tasks == NULL) return SL_ENOMEM;
  job->rt.n_tasks = n_tasks;
  for (uint32_t ci = 0; ci < job->n_chains; ci++) {
    const sl_chain_t *c = &job->chains[ci];
    const sl_node_t *head = job->nodes[c->head];
    /* Source splits. */
    uint32_t n_splits = 0;
    if (head->kind == SL_NODE_SOURCE) {
      sl_error_t *err = NULL;
      int rc = head->src_vt->plan(head->src_ctx, c->par, &n_splits, &err);
      if (rc != SL_OK) {
        if (out_err && *out_err == NULL) {
          if (err) sl_error_prefix(err, "source '%s'", head->uid);
          *out_err = err ? err
                         : sl_error_create(rc, "source '%s': %s", head->uid,
                                           sl_strerror(rc));
        } else {
          sl_error_destroy(err);
        }
        return rc;
      }
    }
    for (uint32_t s = 0; s < c->par; s++) {
      sl_task_t *t = sl_calloc(1, sizeof(*t));
      if (t == NULL) return SL_ENOMEM;
      job->rt.tasks[c->first_task + s] = t;
      t->job = &job->rt;
      t->index = c->first_task + s;
      t->subtask = s;
      t->parallelism = c->par;
      atomic_init(&t->sched_state, SL_TASK_IDLE);
      atomic_init(&t->busy_ns, 0);
      atomic_init(&t->backpressured_ns, 0);
      atomic_init(&t->idle_ns, 0);
      atomic_init(&t->is_finished, false);
      atomic_init(&t->ckpt_trigger, 0);
      atomic_init(&t->ckpt_complete, 0);
      atomic_init(&t->ckpt_abort, 0);
      t->wm = SL_WATERMARK_MIN;
      atomic_init(&t->wm_metric, SL_WATERMARK_MIN);
      sl_bytes_init(&t->timer_key);
      t->waker.task = t;
      sl_bytes_t name;
      sl_bytes_init(&name);
      for (uint32_t i = 0; i < c->n_nodes; i++)
        sl_bytes_printf(&name, "%s%s", i ? " -> " : "",
                        job->nodes[c->nodes[i]]->uid);
      if (sl_bytes_append(&name, "", 1) != SL_OK) return SL_ENOMEM;
      t->name = (char *)name.data;
      t->ops = sl_calloc(c->n_nodes, sizeof(sl_op_t *));
      if (t->ops == NULL) return SL_ENOMEM;
      t->n_ops = c->n_nodes;
      for (uint32_t i = 0; i < c->n_nodes; i++) {
        int rc = create_op(job, t, job->nodes[c->nodes[i]], s, &t->ops[i]);
        if (rc != SL_OK) return rc;
      }
      if (head->kind == SL_NODE_SOURCE) {
        sl_source_rt_t *src = sl_calloc(1, sizeof(*src));
        if (src == NULL) return SL_ENOMEM;
        t->source = src;
        src->vt = head->src_vt;
        src->ctx = head->src_ctx;
        src->splits = sl_calloc(n_splits / c->par + 1, sizeof(sl_split_init_t));
        if (src->splits == NULL) return SL_ENOMEM;
        for (uint32_t sp = s; sp < n_splits; sp += c->par)
          src->splits[src->n_splits++].split = sp;
        t->sout.task = t;
        t->sout.op = t->ops[0];
        if (head->wm_cfg) {
          sl_wmgen_t *g = sl_calloc(1, sizeof(*g));
          if (g == NULL) return SL_ENOMEM;
          src->wm = g;
          g->cfg = head->wm_cfg;
          g->field = (uint32_t)sl_schema_index(head->schema,
                                               head->wm_cfg->time_field);
          g->splits = sl_calloc(src->n_splits + 1, sizeof(sl_wm_split_t));
          if (g->splits == NULL) return SL_ENOMEM;
          for (uint32_t k = 0; k < src->n_splits; k++)
            g->splits[k].max_ts = SL_WATERMARK_MIN;
          t->sout.wm = g;
          job->rt.has_event_time = true;
        }
      }
    }
  }
  return SL_OK;
}

static int connect_edge(sl_job_t *job, sl_node_t *m, uint32_t k) {
  const sl_stream_t *h = node_input(m, k);
  const sl_node_t *p = h->node;
  uint32_t input = node_input_index(m, k);
  const sl_chain_t *pc = &job->chains[p->chain];
  if (m->is_chained) {
    for (uint32_t s = 0; s < pc->par; s++) {
      sl_task_t *t = chain_task(job, p->chain, s);
      if (!add_target(task_op(job, t, p->id), task_op(job, t, m->id), input,
                      NULL))
        return SL_ENOMEM;
    }
    return SL_OK;
  }
  sl_part_t part = h->is_explicit ? h->part
                   : p->par == m->par ? SL_PART_FORWARD
                                      : SL_PART_REBALANCE;
  for (uint32_t i = 0; i < p->par; i++) {
    sl_task_t *st = chain_task(job, p->chain, i);
    sl_writer_t *w = sl_calloc(1, sizeof(*w));
    if (w == NULL) return SL_ENOMEM;
    if (!push_ptr((void ***)&st->writers, &st->n_writers, w)) {
      sl_free(w);
      return SL_ENOMEM;
    }
    w->task = st;
    w->index = st->n_writers - 1;
    w->schema = sl__stream_schema(h);
    w->part = part;
    w->keysel = h->keysel;
    w->max_parallelism = job->cfg.max_parallelism;
    w->rr = i % m->par;
    sl_bytes_init(&w->keybuf);
    uint32_t n_chs = part == SL_PART_FORWARD ? 1 : m->par;
    w->chs = sl_calloc(n_chs, sizeof(sl_channel_t *));
    if (w->chs == NULL) return SL_ENOMEM;
    for (uint32_t j = 0; j < n_chs; j++) {
      uint32_t recv = part == SL_PART_FORWARD ? i : j;
      sl_task_t *rt = chain_task(job, m->chain, recv);
      sl_channel_t *ch;
      int rc = sl__channel_create(job->cfg.channel_buffers,
                                  job->cfg.buffer_size, &ch);
      if (rc != SL_OK) return rc;
      if (!push_ptr((void ***)&job->channels, &job->n_channels, ch)) {
        sl__channel_destroy(ch);
        return SL_ENOMEM;
      }
      ch->sender = st;
      ch->receiver = rt;
      ch->input = input;
      ch->has_hash = part == SL_PART_HASH;
      w->chs[w->n_chs++] = ch;
      if (!push_ptr((void ***)&rt->inputs, &rt->n_inputs, ch) ||
          !push_ptr((void ***)&st->out_chs, &st->n_out_chs, ch))
        return SL_ENOMEM;
    }
    sl_op_t *pop = task_op(job, st, p->id);
    if (h->port ? !add_side_target(pop, h->port, input, w)
                : !add_target(pop, NULL, input, w))
      return SL_ENOMEM;
  }
  return SL_OK;
}

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
static int restore_from(sl_job_t *job, const sl_ckpt_meta_t *m,
                        sl_error_t **out_err) {
  if (m->max_parallelism != job->cfg.max_parallelism)
    return plan_error(out_err, SL_EINVAL,
                      "checkpoint %llu was taken with max_parallelism %u but "
                      "the job has %u; the number of key groups cannot change",
                      (unsigned long long)m->id, m->max_parallelism,
                      job->cfg.max_parallelism);
  for (uint32_t i = 0; i < m->n_ops; i++) {
    const sl_ckpt_op_t *mop = &m->ops[i];
    if (!has_state(mop)) continue;
    const sl_node_t *n = node_by_uid(job, mop->uid);
    if (n == NULL)
      return plan_error(out_err, SL_EINVAL,
                        "checkpoint %llu holds state of operator '%s', which "
                        "this job does not have (operators map by uid)",
                        (unsigned long long)m->id, mop->uid);
    bool has_keyed = false;
    for (uint32_t k = 0; k < mop->n_subtasks; k++)
      if (mop->subtasks[k].state_file) has_keyed = true;
    bool is_keyed = (n->kind == SL_NODE_PROCESS || n->kind == SL_NODE_CONNECT) &&
                    n->inputs[0].part == SL_PART_HASH;
    if (has_keyed && !is_keyed)
      return plan_error(out_err, SL_EINVAL,
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
      rc = sl__ckpt_restore_positions(mop, op->task->source, out_err);
    if (rc == SL_OK && op->task->ops[0] == op)
      rc = sl__ckpt_restore_channels(m, mop, op->task, out_err);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

int sl__plan_build(sl_job_t *job, const sl_ckpt_meta_t *meta,
                   sl_error_t **out_err) {
  if (job->err) {
    return sl_error_set(out_err, sl_error_code(job->err), "%s",
                        sl_error_message(job->err));
  }
  if (job->n_nodes == 0)
    return plan_error(out_err, SL_EINVAL, "the job has no operators");
  bool has_sink = false;
  for (uint32_t i = 0; i < job->n_nodes; i++)
    if (job->nodes[i]->kind == SL_NODE_SINK) has_sink = true;
  if (!has_sink)
    return plan_error(out_err, SL_EINVAL,
                      "the job has no sink, so it would produce nothing");
  int rc = resolve_parallelism(job, out_err);
  if (rc != SL_OK) return rc;
  if ((rc = build_chains(job)) != SL_OK) goto fail;
  if ((rc = create_tasks(job, out_err)) != SL_OK) goto fail;
  for (uint32_t i = 0; i < job->n_nodes; i++) {
    sl_node_t *m = job->nodes[i];
    for (uint32_t k = 0; k < m->n_inputs; k++)
      if ((rc = connect_edge(job, m, k)) != SL_OK) goto fail;
  }
  job->is_restore_corrupt = false;
  if (meta && (rc = restore_from(job, meta, out_err)) != SL_OK) {
    job->is_restore_corrupt = rc == SL_ECORRUPT;
    return rc;
  }
  return SL_OK;
fail:
  if (rc == SL_ENOMEM)
    return plan_error(out_err, rc, "out of memory planning the job");
  return rc;
}

void sl__plan_destroy(sl_job_t *job) {
  for (uint32_t i = 0; i < job->n_ops; i++) {
    sl_op_t *op = job->ops[i];
    if (op->impl && op->cfg && ((const sl_op_cfg_t *)op->cfg)->impl_destroy)
      ((const sl_op_cfg_t *)op->cfg)->impl_destroy(op->impl);
    sl_row_builder_close(&op->out_b);
    sl_bytes_close(&op->keybuf);
    sl__kstate_destroy(op->kstate);
    sl__timers_destroy(op->timers);
    sl__timers_destroy(op->etimers);
    sl_free(op->targets);
    sl_free(op->side_targets);
    sl_free(op->side_ports);
    sl_free(op);
  }
  sl_free(job->ops);
  job->ops = NULL;
  job->n_ops = 0;
  for (uint32_t i = 0; i < job->rt.n_tasks; i++) {
    sl_task_t *t = job->rt.tasks[i];
    if (t == NULL) continue;
    for (uint32_t w = 0; w < t->n_writers; w++) {
      sl_free(t->writers[w]->chs);
      sl_bytes_close(&t->writers[w]->keybuf);
      sl_free(t->writers[w]);
    }
    if (t->source) {
      if (t->source->reader) t->source->vt->reader_close(t->source->reader);
      for (uint32_t k = 0; k < t->source->n_splits; k++)
        sl_free((void *)t->source->splits[k].position);
      sl_free(t->source->splits);
      if (t->source->wm) sl_free(t->source->wm->splits);
      sl_free(t->source->wm);
      sl_free(t->source);
    }
    sl__task_destroy(t);
  }
  sl_free(job->rt.tasks);
  job->rt.tasks = NULL;
  job->rt.n_tasks = 0;
  for (uint32_t i = 0; i < job->n_channels; i++)
    sl__channel_destroy(job->channels[i]);
  sl_free(job->channels);
  job->channels = NULL;
  job->n_channels = 0;
  for (uint32_t c = 0; c < job->n_chains; c++) sl_free(job->chains[c].nodes);
  sl_free(job->chains);
  job->chains = NULL;
  job->n_chains = 0;
  if (job->rt.sched) job->rt.sched->ops->destroy(job->rt.sched);
  job->rt.sched = NULL;
  sl_error_destroy(job->rt.err);
  job->rt.err = NULL;
}

/* ------------------------------------------------------------------ */

/* Delay before restart number k (1-based) per the restart strategy. */
static int64_t restart_delay_ms(const sl_restart_config_t *r, uint32_t k) {
  if (r->kind != SL_RESTART_EXPONENTIAL) return r->delay_ms;
  double mult = r->multiplier > 1 ? r->multiplier : 2.0;
  double max = r->max_delay_ms > 0 ? (double)r->max_delay_ms : 60000.0;
  double d = (double)r->delay_ms;
  for (uint32_t i = 1; i < k && d < max; i++) d *= mult;
  return (int64_t)(d < max ? d : max);
}

/* Wait ms, or less if the job is cancelled.  Not task code: the job's
 * controlling thread may wait. */
static void restart_wait(sl_job_t *job, int64_t ms) {
  if (ms <= 0) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t ns = (int64_t)ts.tv_nsec + (ms % 1000) * 1000000ll;
  ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000ll);
  ts.tv_nsec = (long)(ns % 1000000000ll);
  pthread_mutex_lock(&job->rt.lock);
  while (!atomic_load(&job->is_user_canceled))
    if (pthread_cond_timedwait(&job->cancel_cond, &job->rt.lock, &ts) != 0)
      break;
  pthread_mutex_unlock(&job->rt.lock);
}

/* One attempt: build (restoring from meta), run every task, tear down the
 * scheduler.  Returns the attempt's result; the plan stays for metrics. */
static int run_attempt(sl_job_t *job, const sl_ckpt_meta_t *meta,
                       sl_error_t **out_err) {
  /* A user cancel before or between attempts stops the job; the internal
   * flag only ever stops one attempt. */
  atomic_store(&job->rt.is_canceled, atomic_load(&job->is_user_canceled));
  int rc = sl__plan_build(job, meta, out_err);
  job->is_plan_failed = rc != SL_OK; /* not worth a restart */
  if (rc != SL_OK) /* a bad configuration: fatal, unless memory ran out */
    return rc == SL_ENOMEM ? rc : sl__error_fatal(out_err, rc);
  sl_sched_t *sched;
  rc = sl__sched_pool_create(job->cfg.n_workers, job->rt.tasks,
                             job->rt.n_tasks, &sched);
  if (rc != SL_OK) return sl_error_set(out_err, rc, "cannot create the scheduler");
  sl_io_pool_t *io = NULL;
  if (job->coord) {
    sl_coord_op_t *ops = sl_calloc(job->n_nodes + 1, sizeof(sl_coord_op_t));
    rc = ops ? sl__io_pool_create(1, &io) : SL_ENOMEM;
    if (rc == SL_OK)
      rc = sl__ckpt_hooks_create(job->coord, io, job->cfg.checkpoint.mode,
                                 job->cfg.checkpoint.alignment_timeout_ms,
                                 &job->hooks);
    for (uint32_t i = 0; rc == SL_OK && i < job->n_nodes; i++) {
      ops[i].uid = job->nodes[i]->uid;
      ops[i].parallelism = job->nodes[i]->par;
    }
    if (rc == SL_OK)
      rc = sl__coord_attach(job->coord, job->rt.tasks, job->rt.n_tasks, ops,
                            job->n_nodes, io);
    sl_free(ops);
    if (rc != SL_OK) {
      sl__io_pool_destroy(io);
      sched->ops->destroy(sched);
      return sl_error_set(out_err, rc, "cannot start checkpointing");
    }
    job->rt.ckpt = job->hooks;
  }
  if (job->start_ns == 0) job->start_ns = sl__clock_realtime_ns();
  pthread_mutex_lock(&job->rt.lock);
  job->rt.sched = sched;
  pthread_mutex_unlock(&job->rt.lock);
  rc = sched->ops->run(sched);
  /* Drain the async phase before the coordinator forgets this attempt. */
  if (job->coord) {
    sl__io_pool_destroy(io);
    sl__coord_detach(job->coord);
  }
  pthread_mutex_lock(&job->rt.lock);
  sl_error_t *err = job->rt.err;
  job->rt.err = NULL;
  pthread_mutex_unlock(&job->rt.lock);
  if (rc != SL_OK) {
    sl_error_destroy(err);
    return sl_error_set(out_err, rc, "cannot start worker threads: %s",
                        sl_strerror(rc));
  }
  if (err) {
    rc = sl_error_code(err);
    if (rc == SL_OK) rc = SL_EFAILED;
    if (out_err && *out_err == NULL) *out_err = err;
    else sl_error_destroy(err);
    return rc;
  }
  if (atomic_load(&job->is_user_canceled))
    return sl_error_set(out_err, SL_ECANCELED, "the job was cancelled");
  return SL_OK;
}

static void teardown_attempt(sl_job_t *job) {
  sl__plan_destroy(job);
  sl__ckpt_hooks_destroy(job->hooks);
  job->hooks = NULL;
  job->rt.ckpt = NULL;
}

/* The restore point of the first attempt, from the configuration. */
static int initial_restore(sl_job_t *job, sl_ckpt_meta_t *meta, bool *has,
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
    int rc = sl__ckpt_load_latest(sl__coord_job_dir(job->coord), meta, &err);
    if (rc == SL_ENOTFOUND) {
      sl_error_destroy(err);
      return SL_OK; /* nothing to resume: a fresh start */
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

int sl_job_run(sl_job_t *job, sl_error_t **out_err) {
  int expect = SL_JOB_BUILDING;
  if (!atomic_compare_exchange_strong(&job->state, &expect, SL_JOB_RUNNING))
    return sl_error_set(out_err, SL_ESTATE, "a job can run only once");
  if (job->err) {
    atomic_store(&job->state, SL_JOB_FINISHED);
    return sl_error_set(out_err, sl_error_code(job->err), "%s",
                        sl_error_message(job->err));
  }
  int rc = SL_OK;
  sl_ckpt_meta_t meta;
  memset(&meta, 0, sizeof(meta));
  bool has_meta;
  if ((rc = initial_restore(job, &meta, &has_meta, out_err)) != SL_OK) {
    atomic_store(&job->state, SL_JOB_FINISHED);
    return rc;
  }
  const sl_restart_config_t *rs = &job->cfg.restart;
  for (uint32_t attempt = 0;; attempt++) {
    sl_error_t *err = NULL;
    rc = run_attempt(job, has_meta ? &meta : NULL, &err);
    /* A checkpoint found damaged while restoring (a file's checksum): fall
     * back to the one before it, unless the user named this one. */
    while (rc == SL_ECORRUPT && job->is_restore_corrupt && has_meta &&
           job->coord && (job->cfg.restore_from == NULL || attempt > 0)) {
      uint64_t bad = meta.id;
      sl_ckpt_meta_t older;
      sl_error_t *lerr = NULL;
      int lrc = sl__ckpt_load_latest_below(sl__coord_job_dir(job->coord), bad,
                                           &older, &lerr);
      if (lrc != SL_OK) {
        sl_error_prefix(err, "checkpoint %llu is corrupt and no older one is "
                        "usable", (unsigned long long)bad);
        sl_error_destroy(lerr);
        break;
      }
      sl_log(SL_LOG_WARN, "checkpoint %llu is corrupt (%s); falling back to "
             "checkpoint %llu", (unsigned long long)bad, sl_error_message(err),
             (unsigned long long)older.id);
      sl_error_destroy(err);
      err = NULL;
      sl_error_destroy(lerr);
      teardown_attempt(job);
      sl__ckpt_meta_clear(&meta);
      meta = older;
      rc = run_attempt(job, &meta, &err);
    }
    /* The error's class decides first: a fatal one (a malformed input
     * record, a bad configuration) would fail every attempt the same way. */
    bool is_fatal = sl_error_is_fatal(err);
    if (rc != SL_OK && is_fatal && rs->kind != SL_RESTART_NONE)
      sl_log(SL_LOG_INFO, "job '%s' is not restarted: the error is fatal",
             job->name);
    bool can_restart = rc != SL_OK && rc != SL_ECANCELED && !is_fatal &&
                       !job->is_plan_failed && rs->kind != SL_RESTART_NONE &&
                       (rs->max_attempts == 0 || attempt < rs->max_attempts) &&
                       !atomic_load(&job->is_user_canceled);
    if (!can_restart) {
      if (err) {
        if (out_err && *out_err == NULL) *out_err = err;
        else sl_error_destroy(err);
      }
      break;
    }
    sl_log(SL_LOG_WARN, "job '%s' failed (%s%s); restart %u%s", job->name,
           sl_error_message(err),
           sl_error_is_retriable(err) ? ", retriable" : "", attempt + 1,
           job->coord ? " from the latest checkpoint" : " from the beginning");
    sl_error_destroy(err);
    teardown_attempt(job);
    atomic_fetch_add(&job->n_restarts, 1);
    restart_wait(job, restart_delay_ms(rs, attempt + 1));
    /* Restart from the newest completed checkpoint, if any. */
    if (job->coord && sl__coord_latest(job->coord) != 0) {
      sl_ckpt_meta_t latest;
      sl_error_t *lerr = NULL;
      if (sl__ckpt_load_latest(sl__coord_job_dir(job->coord), &latest,
                               &lerr) == SL_OK) {
        sl__ckpt_meta_clear(&meta);
        meta = latest;
        has_meta = true;
      } else {
        sl_log(SL_LOG_WARN, "cannot load the latest checkpoint: %s",
               sl_error_message(lerr));
      }
      sl_error_destroy(lerr);
    }
    if (atomic_load(&job->is_user_canceled)) {
      rc = sl_error_set(out_err, SL_ECANCELED, "the job was cancelled");
      break;
    }
  }
  sl__ckpt_meta_clear(&meta);
  atomic_store(&job->state, SL_JOB_FINISHED);
  return rc;
}

int sl_job_trigger_checkpoint(sl_job_t *job, uint64_t *out_id,
                              sl_error_t **out_err) {
  if (job->coord == NULL)
    return sl_error_set(out_err, SL_ESTATE,
                        "checkpoints are off (no checkpoint directory)");
  return sl__coord_trigger(job->coord, out_id, out_err);
}

int sl_job_wait_checkpoint(sl_job_t *job, uint64_t id, int64_t timeout_ms,
                           sl_checkpoint_stats_t *out) {
  if (job->coord == NULL) return SL_ESTATE;
  return sl__coord_wait(job->coord, id, timeout_ms, out);
}

int sl_job_last_checkpoint(sl_job_t *job, sl_checkpoint_stats_t *out) {
  if (job->coord == NULL) return SL_ENOTFOUND;
  return sl__coord_last(job->coord, out);
}

uint32_t sl_job_checkpoint_history(sl_job_t *job, sl_checkpoint_stats_t *out,
                                   uint32_t max) {
  return job->coord ? sl__coord_history(job->coord, out, max) : 0;
}

int sl_job_checkpoint_tasks(sl_job_t *job, uint64_t id,
                            sl_checkpoint_task_stats_t **out, uint32_t *out_n) {
  if (job->coord == NULL) return SL_ENOTFOUND;
  return sl__coord_task_stats(job->coord, id, out, out_n);
}

uint32_t sl_job_restarts(const sl_job_t *job) {
  return atomic_load(&((sl_job_t *)job)->n_restarts);
}

static void *bg_main(void *arg) {
  sl_job_t *job = arg;
  job->bg_rc = sl_job_run(job, &job->bg_err);
  return NULL;
}

int sl_job_start(sl_job_t *job, sl_error_t **out_err) {
  if (job->has_bg_thread || atomic_load(&job->state) != SL_JOB_BUILDING)
    return sl_error_set(out_err, SL_ESTATE, "a job can run only once");
  int e = pthread_create(&job->bg_thread, NULL, bg_main, job);
  if (e != 0)
    return sl_error_set(out_err, -e, "cannot start the job thread: %s",
                        strerror(e));
  job->has_bg_thread = true;
  return SL_OK;
}

int sl_job_wait(sl_job_t *job, sl_error_t **out_err) {
  if (!job->has_bg_thread)
    return sl_error_set(out_err, SL_ESTATE, "the job was not started");
  pthread_join(job->bg_thread, NULL);
  job->has_bg_thread = false;
  if (out_err && *out_err == NULL) {
    *out_err = job->bg_err;
    job->bg_err = NULL;
  }
  return job->bg_rc;
}

void sl_job_cancel(sl_job_t *job) {
  atomic_store(&job->is_user_canceled, true);
  sl__job_rt_cancel(&job->rt);
  pthread_mutex_lock(&job->rt.lock);
  pthread_cond_broadcast(&job->cancel_cond); /* a restart delay */
  pthread_mutex_unlock(&job->rt.lock);
}

int sl_job_metrics(sl_job_t *job, sl_metrics_t *out) {
  memset(out, 0, sizeof(*out));
  out->time_ns = sl__clock_realtime_ns();
  pthread_mutex_lock(&job->rt.lock);
  bool is_running = job->rt.sched != NULL;
  out->start_ns = job->start_ns;
  pthread_mutex_unlock(&job->rt.lock);
  if (!is_running) return SL_OK;
  /* The plan is immutable while the scheduler exists. */
  out->ops = sl_calloc(job->n_ops + 1, sizeof(sl_op_metrics_t));
  out->tasks = sl_calloc(job->rt.n_tasks + 1, sizeof(sl_task_metrics_t));
  if (out->ops == NULL || out->tasks == NULL) {
    sl_metrics_close(out);
    return SL_ENOMEM;
  }
  for (uint32_t i = 0; i < job->n_ops; i++) {
    const sl_op_t *op = job->ops[i];
    sl_op_metrics_t *m = &out->ops[out->n_ops++];
    m->uid = op->uid;
    m->subtask = op->subtask;
    m->task = op->task->index;
    m->records_in = atomic_load_explicit(&op->n_in, memory_order_relaxed);
    m->records_out = atomic_load_explicit(&op->n_out, memory_order_relaxed);
  }
  for (uint32_t i = 0; i < job->rt.n_tasks; i++) {
    sl_task_t *t = job->rt.tasks[i];
    sl_task_metrics_t *m = &out->tasks[out->n_tasks++];
    m->name = t->name;
    m->subtask = t->subtask;
    m->busy_ns = atomic_load_explicit(&t->busy_ns, memory_order_relaxed);
    m->backpressured_ns =
        atomic_load_explicit(&t->backpressured_ns, memory_order_relaxed);
    m->idle_ns = atomic_load_explicit(&t->idle_ns, memory_order_relaxed);
    m->watermark = atomic_load_explicit(&t->wm_metric, memory_order_relaxed);
    m->is_finished = atomic_load_explicit(&t->is_finished, memory_order_acquire);
  }
  return SL_OK;
}

void sl_metrics_close(sl_metrics_t *m) {
  sl_free(m->ops);
  sl_free(m->tasks);
  memset(m, 0, sizeof(*m));
}
