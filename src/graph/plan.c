/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The planner: turns the logical graph into tasks, channels and state for
 * one attempt (run.c runs attempts; restore.c applies a checkpoint).
 *
 * Planning, in order:
 *  1. Resolve each node's parallelism (node, else job default, else the
 *     number of cores), capped by max_parallelism.
 *  2. Chain: a node joins its input's chain when it has exactly one input,
 *     the edge was not repartitioned (key_by, rebalance, broadcast), both
 *     have the same parallelism, and the node is not a source, union or
 *     connect.  Nodes are in topological order, so one pass suffices.
 *  3. Ask each source for its list of splits (stable ids); split s of the
 *     list goes to subtask s % p.  Positions are restored by id (restore).
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

#include "graph/graph.h"
#include "runtime/task_int.h"

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
    sl_split_list_t *all = NULL;
    if (head->kind == SL_NODE_SOURCE && head->src_vt->enumerator == NULL) {
      sl_error_t *err = NULL;
      const char *dup = NULL;
      int rc = sl_split_list_create(&all);
      if (rc != SL_OK) return rc;
      rc = head->src_vt->plan(head->src_ctx, c->par, all, &err);
      if (rc == SL_OK && (rc = sl__split_list_check(all, &dup)) == SL_OK &&
          dup != NULL)
        rc = plan_error(&err, SL_EINVAL, "split '%s' is listed twice", dup);
      n_splits = all->n;
      sl_split_list_destroy(job->nodes[c->head]->splits);
      job->nodes[c->head]->splits = all;
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
        src->all = all;
        pthread_mutex_init(&src->mbox_lock, NULL);
        /* With an enumerator, splits come from the reader's restored state
         * and from the enumerator (enum_plan.c); n_splits is 0 here. */
        if (head->enum_host) src->link = &job->nodes[c->head]->enum_link;
        src->splits = sl_calloc(n_splits / c->par + 1, sizeof(sl_split_init_t));
        if (src->splits == NULL) return SL_ENOMEM;
        if (src->link && sl__source_reserve(src, 1) != SL_OK)
          return SL_ENOMEM;
        for (uint32_t sp = s; sp < n_splits; sp += c->par) {
          src->splits[src->n_splits].split = sp;
          src->splits[src->n_splits++].id = all->ids[sp];
        }
        t->sout.task = t;
        t->sout.op = t->ops[0];
        if (head->wm_cfg) {
          sl_wmgen_t *g = sl_calloc(1, sizeof(*g));
          if (g == NULL) return SL_ENOMEM;
          src->wm = g;
          g->cfg = head->wm_cfg;
          g->field = (uint32_t)sl_schema_index(head->schema,
                                               head->wm_cfg->time_field);
          g->splits = sl_calloc(src->n_splits + 1 > src->cap_splits
                                    ? src->n_splits + 1
                                    : src->cap_splits,
                                sizeof(sl_wm_split_t));
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
    w->is_flush_each = job->cfg.buffer_timeout_ms == 0;
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

/*
 * A source subtask without splits (fewer files than subtasks) has nothing
 * to say about event time, but until it runs and ends, its receivers would
 * take its SL_WATERMARK_MIN as the minimum and hold their watermark back:
 * a row far behind the other inputs' watermark would then join a window or
 * go to the late sink depending on which task the scheduler ran first.  So
 * its output channels start idle, decided here before any task runs (after
 * the restore, which gives readers their restored splits): the receivers
 * leave them out of the minimum from the first record on, and the
 * subtask's final SL_WATERMARK_MAX and end of input change nothing.
 * A task all of whose inputs come from such tasks is empty too (tasks are
 * in topological order, so one pass suffices).
 *
 * A reader of a source with an enumerator that holds no split yet is
 * idle the same way (Flink's source operator likewise reports idle when
 * none of its outputs is active): it may get a split at any time, and then (source_out.c,
 * add_splits) it tells its receivers it is active again before its first
 * record, and so does every empty task downstream of it when its input
 * becomes active (task.c, apply_wm_min).  For that the task itself starts
 * idle (is_wm_idle), in agreement with its receivers.
 */
static int mark_empty_tasks(sl_job_t *job) {
  bool *is_empty = sl_calloc(job->rt.n_tasks + 1, sizeof(bool));
  if (is_empty == NULL) return SL_ENOMEM;
  for (uint32_t i = 0; i < job->rt.n_tasks; i++) {
    sl_task_t *t = job->rt.tasks[i];
    bool e = t->source ? t->source->n_splits == 0 : t->n_inputs > 0;
    for (uint32_t k = 0; !t->source && k < t->n_inputs && e; k++)
      e = t->inputs[k]->sender && t->inputs[k]->sender->index < i &&
          is_empty[t->inputs[k]->sender->index];
    is_empty[i] = e;
    if (e) t->is_wm_idle = true;
    for (uint32_t w = 0; e && w < t->n_writers; w++)
      for (uint32_t c = 0; c < t->writers[w]->n_chs; c++)
        t->writers[w]->chs[c]->is_idle = true;
  }
  sl_free(is_empty);
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
  const sl_node_t *tx_sink = NULL;
  for (uint32_t i = 0; i < job->n_nodes; i++)
    if (job->nodes[i]->kind == SL_NODE_SINK) {
      has_sink = true;
      if (job->nodes[i]->vt == &sl__op_sink2pc_vt) tx_sink = job->nodes[i];
    }
  if (!has_sink)
    return plan_error(out_err, SL_EINVAL,
                      "the job has no sink, so it would produce nothing");
  if (tx_sink && job->coord == NULL)
    return plan_error(out_err, SL_EINVAL,
                      "sink '%s' is transactional (two-phase commit): it "
                      "commits its output only when a checkpoint completes, "
                      "and the job has no checkpoint directory, so nothing "
                      "would ever be committed; set checkpoint.dir",
                      tx_sink->uid);
  /* Two-phase-commit sinks need the final checkpoint (runtime/task.c). */
  job->rt.needs_final_ckpt = tx_sink != NULL;
  job->rt.job_name = job->name;
  job->rt.buffer_timeout_ns = job->cfg.buffer_timeout_ms < 0
                                  ? -1
                                  : job->cfg.buffer_timeout_ms * 1000000;
  int rc = resolve_parallelism(job, out_err);
  if (rc != SL_OK) return rc;
  if ((rc = build_chains(job)) != SL_OK) goto fail;
  if ((rc = sl__enum_plan_hosts(job, meta, out_err)) != SL_OK) return rc;
  if ((rc = create_tasks(job, out_err)) != SL_OK) goto fail;
  for (uint32_t i = 0; i < job->n_nodes; i++) {
    sl_node_t *m = job->nodes[i];
    for (uint32_t k = 0; k < m->n_inputs; k++)
      if ((rc = connect_edge(job, m, k)) != SL_OK) goto fail;
  }
  job->is_restore_corrupt = false;
  job->rt.restored_ckpt = meta ? meta->id : 0;
  if (meta && (rc = sl__restore_plan(job, meta, out_err)) != SL_OK) {
    job->is_restore_corrupt = rc == SL_ECORRUPT;
    return rc;
  }
  if ((rc = mark_empty_tasks(job)) != SL_OK) goto fail;
  return SL_OK;
fail:
  if (rc == SL_ENOMEM)
    return plan_error(out_err, rc, "out of memory planning the job");
  return rc;
}

int sl__plan_take_states(sl_job_t *job, sl_kstate_t ***out, uint32_t *out_n) {
  sl_kstate_t **v = sl_calloc(job->n_ops + 1, sizeof(*v));
  if (v == NULL) return SL_ENOMEM;
  uint32_t n = 0;
  for (uint32_t i = 0; i < job->n_ops; i++)
    if (job->ops[i]->kstate) {
      v[n++] = job->ops[i]->kstate;
      job->ops[i]->kstate = NULL;
    }
  *out = v;
  *out_n = n;
  return SL_OK;
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
      sl_source_rt_t *src = t->source;
      if (src->reader) src->vt->reader_close(src->reader);
      for (uint32_t k = 0; k < src->n_splits; k++) {
        sl_free((void *)src->splits[k].position);
        if (src->link) sl_free((void *)src->splits[k].id); /* owned */
      }
      for (sl_enum_event_t *e = src->mbox, *nx; e; e = nx) {
        nx = e->next;
        sl__enum_event_free(e);
      }
      pthread_mutex_destroy(&src->mbox_lock);
      sl_free(src->is_finished);
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
  for (uint32_t i = 0; i < job->n_nodes; i++) {
    sl_split_list_destroy(job->nodes[i]->splits);
    job->nodes[i]->splits = NULL;
  }
  for (uint32_t c = 0; c < job->n_chains; c++) sl_free(job->chains[c].nodes);
  sl_free(job->chains);
  job->chains = NULL;
  job->n_chains = 0;
  if (job->rt.sched) { /* a restart unset it already, under rt.lock */
    job->rt.sched->ops->destroy(job->rt.sched);
    job->rt.sched = NULL;
  }
  sl_error_destroy(job->rt.err);
  job->rt.err = NULL;
  job->rt.has_failed = false;
}
