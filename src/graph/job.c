/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The job builder: sl_job_* and sl_stream_* calls that create the logical
 * graph.  Errors are deferred: the first one is kept in the job and
 * returned by sl_job_run(), and calls given a NULL stream return NULL.
 * Nodes are created in topological order (inputs exist before consumers),
 * which the planner relies on.  See README.md.
 */
#include <stdarg.h>
#include <stdio.h>

#include "graph/graph.h"

void sl_job_config_init(sl_job_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->name = "job";
  cfg->max_parallelism = SL_DEFAULT_MAX_PARALLELISM;
  cfg->buffer_size = 32768;
  cfg->channel_buffers = 4;
  cfg->buffer_timeout_ms = SL_DEFAULT_BUFFER_TIMEOUT_MS;
}

/* A job name that is safe as one path component (SL_MAX_JOB_NAME): with a
 * checkpoint directory it becomes <dir>/<name>, and "../x" or "a/b" would
 * put the checkpoints somewhere else. */
static bool job_name_is_safe(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > SL_MAX_JOB_NAME || name[0] == '.') return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    bool is_ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!is_ok) return false;
  }
  return true;
}

int sl_job_create(const sl_job_config_t *cfg_in, sl_job_t **out,
                  sl_error_t **out_err) {
  sl_job_config_t cfg;
  if (cfg_in) cfg = *cfg_in;
  else sl_job_config_init(&cfg);
  if (cfg.max_parallelism == 0) cfg.max_parallelism = SL_DEFAULT_MAX_PARALLELISM;
  if (cfg.max_parallelism > SL_MAX_PARALLELISM_LIMIT)
    return sl_error_set(out_err, SL_EINVAL,
                        "max_parallelism %u is above the limit %u",
                        cfg.max_parallelism, SL_MAX_PARALLELISM_LIMIT);
  if (cfg.parallelism > cfg.max_parallelism)
    return sl_error_set(out_err, SL_EINVAL,
                        "parallelism %u is above max_parallelism %u",
                        cfg.parallelism, cfg.max_parallelism);
  if (cfg.buffer_size == 0) cfg.buffer_size = 32768;
  if (cfg.buffer_size < 256 || cfg.buffer_size > (64u << 20))
    return sl_error_set(out_err, SL_EINVAL,
                        "buffer_size %u must be between 256 and 67108864",
                        cfg.buffer_size);
  if (cfg.channel_buffers == 0) cfg.channel_buffers = 4;
  if (cfg.channel_buffers > 1024)
    return sl_error_set(out_err, SL_EINVAL,
                        "channel_buffers %u must be at most 1024",
                        cfg.channel_buffers);
  if (cfg.buffer_timeout_ms < -1 ||
      cfg.buffer_timeout_ms > SL_MAX_DURATION_MS)
    return sl_error_set(out_err, SL_EINVAL,
                        "buffer_timeout_ms %lld must be -1 (off), 0 (every "
                        "record) or a number of milliseconds up to %lld",
                        (long long)cfg.buffer_timeout_ms,
                        (long long)SL_MAX_DURATION_MS);
  const sl_checkpoint_config_t *ck = &cfg.checkpoint;
  if (ck->interval_ms < 0 || ck->timeout_ms < 0 || ck->min_pause_ms < 0 ||
      ck->alignment_timeout_ms < 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "checkpoint intervals and timeouts must not be "
                        "negative");
  /* Larger values overflow when the coordinator adds them, in nanoseconds,
   * to the clock: a checkpoint at every tick, or one that expires at once. */
  if (ck->interval_ms > SL_MAX_DURATION_MS ||
      ck->timeout_ms > SL_MAX_DURATION_MS ||
      ck->min_pause_ms > SL_MAX_DURATION_MS ||
      ck->alignment_timeout_ms > SL_MAX_DURATION_MS)
    return sl_error_set(out_err, SL_EINVAL,
                        "checkpoint intervals and timeouts must be at most "
                        "%lld ms (one year)", (long long)SL_MAX_DURATION_MS);
  if ((unsigned)ck->mode > SL_CKPT_AT_LEAST_ONCE)
    return sl_error_set(out_err, SL_EINVAL, "unknown checkpoint mode %d",
                        (int)ck->mode);
  if (ck->dir && ck->dir[0] == '\0')
    return sl_error_set(out_err, SL_EINVAL, "the checkpoint directory is empty");
  if ((unsigned)cfg.restart.kind > SL_RESTART_EXPONENTIAL ||
      cfg.restart.delay_ms < 0 || cfg.restart.max_delay_ms < 0 ||
      cfg.restart.delay_ms > SL_MAX_DURATION_MS ||
      cfg.restart.max_delay_ms > SL_MAX_DURATION_MS)
    return sl_error_set(out_err, SL_EINVAL, "invalid restart strategy");
  const char *name = cfg.name ? cfg.name : "job";
  if (ck->dir && !job_name_is_safe(name))
    return sl_error_set(out_err, SL_EINVAL,
                        "job name '%s' cannot name a checkpoint directory: "
                        "use 1 to %d letters, digits, '.', '_' or '-', not "
                        "starting with '.'", name, SL_MAX_JOB_NAME);
  if (cfg.resume_latest && ck->dir == NULL)
    return sl_error_set(out_err, SL_EINVAL,
                        "resume_latest needs a checkpoint directory");
  sl_job_t *job = sl_calloc(1, sizeof(*job));
  if (job == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  job->cfg = cfg;
  job->name = sl_strdup(cfg.name ? cfg.name : "job");
  if (job->name == NULL) {
    sl_free(job);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  job->cfg.name = job->name;
  job->ckpt_dir = cfg.checkpoint.dir ? sl_strdup(cfg.checkpoint.dir) : NULL;
  job->restore_path = cfg.restore_from ? sl_strdup(cfg.restore_from) : NULL;
  job->cfg.checkpoint.dir = job->ckpt_dir;
  job->cfg.restore_from = job->restore_path;
  pthread_mutex_init(&job->rt.lock, NULL);
  pthread_cond_init(&job->cancel_cond, NULL);
  /* The coordinator exists for the job's life, so that any thread may
   * trigger checkpoints once the job runs. */
  if (job->ckpt_dir) {
    int rc = sl__coord_create(&job->cfg.checkpoint, job->name,
                              job->cfg.max_parallelism, &job->coord, out_err);
    if (rc != SL_OK) {
      sl_job_destroy(job);
      return rc;
    }
  }
  atomic_init(&job->rt.is_canceled, false);
  atomic_init(&job->rt.n_live, 0);
  atomic_init(&job->state, SL_JOB_BUILDING);
  *out = job;
  return SL_OK;
}

void sl__job_set_error(sl_job_t *job, int code, const char *fmt, ...) {
  if (job->err) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  job->err = sl_error_create(code, "%s", msg);
}

const sl_error_t *sl_job_error(const sl_job_t *job) { return job->err; }

static bool grow(void **arr, uint32_t n, size_t elem) {
  if ((n & (n - 1)) != 0 && n != 0) return true; /* room until power of 2 */
  void *p = sl_realloc(*arr, (n ? n * 2 : 4) * elem);
  if (p == NULL) return false;
  *arr = p;
  return true;
}

sl_stream_t *sl__job_new_handle(sl_job_t *job, sl_node_t *node) {
  if (!grow((void **)&job->handles, job->n_handles, sizeof(sl_stream_t *)))
    goto nomem;
  sl_stream_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) goto nomem;
  s->job = job;
  s->node = node;
  s->part = SL_PART_FORWARD;
  job->handles[job->n_handles++] = s;
  return s;
nomem:
  sl__job_set_error(job, SL_ENOMEM, "out of memory building the job");
  return NULL;
}

static bool uid_taken(const sl_job_t *job, const char *uid) {
  for (uint32_t i = 0; i < job->n_nodes; i++)
    if (strcmp(job->nodes[i]->uid, uid) == 0) return true;
  return false;
}

static const char *kind_names[] = {"source",  "map",     "filter",
                                   "flat_map", "process", "connect",
                                   "union",   "sink"};

sl_node_t *sl__job_new_node(sl_job_t *job, sl_node_kind_t kind,
                            const char *uid, const sl_stream_t *in) {
  if (atomic_load(&job->state) != SL_JOB_BUILDING) {
    sl__job_set_error(job, SL_ESTATE, "the job is already running");
    return NULL;
  }
  char auto_uid[64];
  if (uid == NULL || uid[0] == '\0') {
    if (kind == SL_NODE_SOURCE || kind == SL_NODE_PROCESS ||
        kind == SL_NODE_CONNECT || kind == SL_NODE_SINK) {
      sl__job_set_error(job, SL_EINVAL,
                        "a %s needs a uid: it keeps state that a restore "
                        "maps by uid",
                        kind_names[kind]);
      return NULL;
    }
    snprintf(auto_uid, sizeof(auto_uid), "%s-%u", kind_names[kind],
             job->n_nodes + 1);
    uid = auto_uid;
  }
  if (uid_taken(job, uid)) {
    sl__job_set_error(job, SL_EINVAL, "operator uid '%s' is used twice", uid);
    return NULL;
  }
  if (!grow((void **)&job->nodes, job->n_nodes, sizeof(sl_node_t *))) {
    sl__job_set_error(job, SL_ENOMEM, "out of memory building the job");
    return NULL;
  }
  sl_node_t *n = sl_calloc(1, sizeof(*n));
  if (n == NULL || (n->uid = sl_strdup(uid)) == NULL) {
    sl_free(n);
    sl__job_set_error(job, SL_ENOMEM, "out of memory building the job");
    return NULL;
  }
  n->id = job->n_nodes;
  n->kind = kind;
  if (in) {
    n->inputs[0] = *in;
    n->n_inputs = 1;
  }
  job->nodes[job->n_nodes++] = n;
  return n;
}

sl_stream_t *sl_job_source(sl_job_t *job, const char *uid,
                           const sl_source_vt_t *vt, void *ctx,
                           sl_schema_t *schema) {
  if (vt == NULL || schema == NULL) {
    if (vt && vt->destroy && ctx) vt->destroy(ctx);
    sl__job_set_error(job, SL_EINVAL, "sl_job_source: %s is NULL",
                      vt ? "schema" : "the source");
    return NULL;
  }
  sl_node_t *n = sl__job_new_node(job, SL_NODE_SOURCE, uid, NULL);
  if (n == NULL) {
    if (vt->destroy) vt->destroy(ctx);
    return NULL;
  }
  n->vt = &sl__op_source_vt;
  n->src_vt = vt;
  n->src_ctx = ctx;
  n->schema = sl_schema_ref(schema);
  return sl__job_new_handle(job, n);
}

static sl_node_t *one_input(sl_stream_t *in, sl_node_kind_t kind,
                            const char *uid, sl_schema_t *out_schema,
                            const sl_op_vt_t *vt) {
  if (in == NULL) return NULL;
  sl_job_t *job = in->job;
  if (in->node->kind == SL_NODE_SINK) {
    sl__job_set_error(job, SL_EINVAL, "a sink has no output stream");
    return NULL;
  }
  sl_node_t *n = sl__job_new_node(job, kind, uid, in);
  if (n == NULL) return NULL;
  n->vt = vt;
  n->schema = sl_schema_ref(out_schema ? out_schema : sl__stream_schema(in));
  return n;
}

sl_stream_t *sl_stream_map(sl_stream_t *in, const char *uid,
                           sl_schema_t *out_schema, sl_map_fn fn, void *user) {
  if (in && (fn == NULL || out_schema == NULL)) {
    sl__job_set_error(in->job, SL_EINVAL, "sl_stream_map: %s is NULL",
                      fn ? "the output schema" : "the map function");
    return NULL;
  }
  sl_node_t *n = one_input(in, SL_NODE_MAP, uid, out_schema, &sl__op_map_vt);
  if (n == NULL) return NULL;
  n->cfg.map = fn;
  n->cfg.user = user;
  return sl__job_new_handle(in->job, n);
}

sl_stream_t *sl_stream_filter(sl_stream_t *in, const char *uid,
                              sl_filter_fn fn, void *user) {
  if (in && fn == NULL) {
    sl__job_set_error(in->job, SL_EINVAL, "sl_stream_filter: no function");
    return NULL;
  }
  sl_node_t *n = one_input(in, SL_NODE_FILTER, uid, NULL, &sl__op_filter_vt);
  if (n == NULL) return NULL;
  n->cfg.filter = fn;
  n->cfg.user = user;
  return sl__job_new_handle(in->job, n);
}

sl_stream_t *sl_stream_flat_map(sl_stream_t *in, const char *uid,
                                sl_schema_t *out_schema, sl_flat_map_fn fn,
                                void *user) {
  if (in && (fn == NULL || out_schema == NULL)) {
    sl__job_set_error(in->job, SL_EINVAL, "sl_stream_flat_map: %s is NULL",
                      fn ? "the output schema" : "the function");
    return NULL;
  }
  sl_node_t *n =
      one_input(in, SL_NODE_FLAT_MAP, uid, out_schema, &sl__op_flat_map_vt);
  if (n == NULL) return NULL;
  n->cfg.flat_map = fn;
  n->cfg.user = user;
  return sl__job_new_handle(in->job, n);
}

static sl_stream_t *repartition(sl_stream_t *in, sl_part_t part,
                                sl_keysel_t *ks) {
  if (in == NULL) return NULL;
  sl_stream_t *s = sl__job_new_handle(in->job, in->node);
  if (s == NULL) return NULL;
  s->part = part;
  s->is_explicit = true;
  s->keysel = ks;
  s->port = in->port;
  return s;
}

static sl_keysel_t *new_keysel(sl_job_t *job) {
  if (!grow((void **)&job->keysels, job->n_keysels, sizeof(sl_keysel_t *)))
    goto nomem;
  sl_keysel_t *ks = sl_calloc(1, sizeof(*ks));
  if (ks == NULL) goto nomem;
  job->keysels[job->n_keysels++] = ks;
  return ks;
nomem:
  sl__job_set_error(job, SL_ENOMEM, "out of memory building the job");
  return NULL;
}

sl_stream_t *sl_stream_key_by_fields(sl_stream_t *in,
                                     const char *const *fields,
                                     uint32_t n_fields) {
  if (in == NULL) return NULL;
  sl_job_t *job = in->job;
  if (n_fields == 0) {
    sl__job_set_error(job, SL_EINVAL, "key_by needs at least one field");
    return NULL;
  }
  sl_keysel_t *ks = new_keysel(job);
  if (ks == NULL) return NULL;
  ks->fields = sl_calloc(n_fields, sizeof(uint32_t));
  ks->types = sl_calloc(n_fields, 1);
  if (ks->fields == NULL || ks->types == NULL) {
    sl__job_set_error(job, SL_ENOMEM, "out of memory building the job");
    return NULL;
  }
  for (uint32_t i = 0; i < n_fields; i++) {
    int idx = sl_schema_index(sl__stream_schema(in), fields[i]);
    if (idx < 0) {
      sl__job_set_error(job, SL_EINVAL,
                        "key_by: field '%s' is not in the output of '%s'",
                        fields[i], in->node->uid);
      return NULL;
    }
    ks->fields[i] = (uint32_t)idx;
    ks->types[i] = sl_schema_field(sl__stream_schema(in), (uint32_t)idx)->type.id;
  }
  ks->n_fields = n_fields;
  /* Fixed-width key bytes: marker + 1 (bool), 4 (int32) or 8 bytes. */
  uint32_t fixed = 0;
  for (uint32_t i = 0; i < n_fields && fixed != UINT32_MAX; i++) {
    uint8_t t = ks->types[i];
    if (t == SL_TYPE_STRING || t == SL_TYPE_BYTES) fixed = UINT32_MAX;
    else fixed += t == SL_TYPE_BOOL ? 2 : t == SL_TYPE_INT32 ? 5 : 9;
  }
  ks->max_fixed = fixed == UINT32_MAX ? 0 : fixed;
  return repartition(in, SL_PART_HASH, ks);
}

sl_stream_t *sl_stream_key_by(sl_stream_t *in, sl_key_fn fn, void *user) {
  if (in == NULL) return NULL;
  if (fn == NULL) {
    sl__job_set_error(in->job, SL_EINVAL, "key_by: no key function");
    return NULL;
  }
  sl_keysel_t *ks = new_keysel(in->job);
  if (ks == NULL) return NULL;
  ks->fn = fn;
  ks->user = user;
  return repartition(in, SL_PART_HASH, ks);
}

sl_stream_t *sl_stream_rebalance(sl_stream_t *in) {
  return repartition(in, SL_PART_REBALANCE, NULL);
}

sl_stream_t *sl_stream_broadcast(sl_stream_t *in) {
  return repartition(in, SL_PART_BROADCAST, NULL);
}

sl_stream_t *sl_stream_process(sl_stream_t *in, const char *uid,
                               sl_schema_t *out_schema,
                               const sl_process_fns_t *fns, void *user) {
  if (in == NULL) return NULL;
  if (fns == NULL || fns->process == NULL || out_schema == NULL) {
    sl__job_set_error(in->job, SL_EINVAL,
                      "sl_stream_process: %s is missing",
                      out_schema ? "the process function" : "the output schema");
    return NULL;
  }
  sl_node_t *n =
      one_input(in, SL_NODE_PROCESS, uid, out_schema, &sl__op_process_vt);
  if (n == NULL) return NULL;
  n->cfg.fns = *fns;
  n->cfg.user = user;
  return sl__job_new_handle(in->job, n);
}

sl_stream_t *sl_stream_connect(sl_stream_t *a, sl_stream_t *b,
                               const char *uid, sl_schema_t *out_schema,
                               const sl_process_fns_t *fns, void *user) {
  if (a == NULL || b == NULL) return NULL;
  sl_job_t *job = a->job;
  if (b->job != job) {
    sl__job_set_error(job, SL_EINVAL, "connect: streams of different jobs");
    return NULL;
  }
  if (fns == NULL || fns->process == NULL || fns->process2 == NULL ||
      out_schema == NULL) {
    sl__job_set_error(job, SL_EINVAL,
                      "sl_stream_connect needs process, process2 and an "
                      "output schema");
    return NULL;
  }
  if ((a->part == SL_PART_HASH) != (b->part == SL_PART_HASH)) {
    sl__job_set_error(job, SL_EINVAL,
                      "connect: key both inputs or neither (operator '%s')",
                      uid ? uid : "");
    return NULL;
  }
  sl_node_t *n = one_input(a, SL_NODE_CONNECT, uid, out_schema,
                           &sl__op_process_vt);
  if (n == NULL) return NULL;
  n->inputs[1] = *b;
  n->n_inputs = 2;
  n->cfg.fns = *fns;
  n->cfg.user = user;
  return sl__job_new_handle(job, n);
}

sl_stream_t *sl_stream_union(sl_stream_t *const *streams, uint32_t n) {
  if (n == 0 || streams == NULL) return NULL;
  for (uint32_t i = 0; i < n; i++)
    if (streams[i] == NULL) return NULL;
  sl_job_t *job = streams[0]->job;
  for (uint32_t i = 1; i < n; i++) {
    if (!sl_schema_equal(sl__stream_schema(streams[i]), sl__stream_schema(streams[0]))) {
      sl__job_set_error(job, SL_EINVAL,
                        "union: the output of '%s' and of '%s' have "
                        "different schemas",
                        streams[0]->node->uid, streams[i]->node->uid);
      return NULL;
    }
  }
  sl_node_t *u = one_input(streams[0], SL_NODE_UNION, NULL, NULL,
                           &sl__op_union_vt);
  if (u == NULL) return NULL;
  u->union_inputs = sl_calloc(n, sizeof(sl_stream_t));
  if (u->union_inputs == NULL) {
    sl__job_set_error(job, SL_ENOMEM, "out of memory building the job");
    return NULL;
  }
  for (uint32_t i = 0; i < n; i++) u->union_inputs[i] = *streams[i];
  u->n_inputs = n;
  return sl__job_new_handle(job, u);
}

int sl_stream_sink(sl_stream_t *in, const char *uid, const sl_sink_vt_t *vt,
                   void *ctx) {
  if (in == NULL) {
    if (vt && vt->destroy && ctx) vt->destroy(ctx);
    return SL_EINVAL;
  }
  if (vt == NULL) {
    sl__job_set_error(in->job, SL_EINVAL, "sl_stream_sink: no sink");
    return SL_EINVAL;
  }
  bool is_2pc = sl_sink_is_transactional(vt);
  if (!is_2pc && (vt->prepare || vt->commit || vt->committer_open)) {
    sl__job_set_error(in->job, SL_EINVAL, "sink '%s': a two-phase-commit "
                      "sink sets prepare, committer_open and commit "
                      "together", uid ? uid : vt->type_name);
    if (vt->destroy) vt->destroy(ctx);
    return SL_EINVAL;
  }
  sl_node_t *n = one_input(in, SL_NODE_SINK, uid, NULL,
                           is_2pc ? &sl__op_sink2pc_vt : &sl__op_sink_vt);
  if (n == NULL) {
    if (vt->destroy) vt->destroy(ctx);
    return sl_error_code(in->job->err);
  }
  n->cfg.sink_vt = vt;
  n->cfg.sink_ctx = ctx;
  if (is_2pc) {
    const sl_checkpoint_config_t *cc = &in->job->cfg.checkpoint;
    n->cfg.impl_create = sl__sink2pc_impl_create;
    n->cfg.impl_destroy = sl__sink2pc_impl_destroy;
    n->cfg.commit_max_attempts = cc->sink_commit_max_attempts;
    n->cfg.commit_backoff_ms = cc->sink_commit_backoff_ms;
    n->cfg.commit_max_backoff_ms = cc->sink_commit_max_backoff_ms;
    n->cfg.allow_duplicate_output = in->job->cfg.allow_duplicate_sink_output;
  }
  return SL_OK;
}

sl_stream_t *sl_stream_set_parallelism(sl_stream_t *s, uint32_t p) {
  if (s == NULL) return NULL;
  if (s->node->kind == SL_NODE_UNION) {
    sl__job_set_error(s->job, SL_EINVAL,
                      "set the parallelism of the operator after a union");
    return NULL;
  }
  s->node->parallelism = p;
  return s;
}

int sl_stream_set_sink_parallelism(sl_stream_t *s, uint32_t p) {
  if (s == NULL) return SL_EINVAL;
  sl_job_t *job = s->job;
  for (uint32_t i = job->n_nodes; i-- > 0;) {
    sl_node_t *n = job->nodes[i];
    if (n->kind == SL_NODE_SINK && n->inputs[0].node == s->node) {
      n->parallelism = p;
      return SL_OK;
    }
  }
  sl__job_set_error(job, SL_EINVAL, "no sink on the output of '%s'",
                    s->node->uid);
  return SL_EINVAL;
}

const sl_schema_t *sl_stream_schema(const sl_stream_t *s) {
  return s ? sl__stream_schema(s) : NULL;
}

void sl_job_destroy(sl_job_t *job) {
  if (job == NULL) return;
  if (job->has_bg_thread) {
    sl_job_cancel(job);
    pthread_join(job->bg_thread, NULL);
  }
  sl__job_join_reaper(job);
  sl__plan_destroy(job);
  sl__enum_plan_destroy(job); /* before the sources they belong to */
  sl__ckpt_hooks_destroy(job->hooks);
  sl__coord_destroy(job->coord);
  for (uint32_t i = 0; i < job->n_nodes; i++) {
    sl_node_t *n = job->nodes[i];
    if (n->src_vt && n->src_vt->destroy) n->src_vt->destroy(n->src_ctx);
    if (n->cfg.sink_vt && n->cfg.sink_vt->destroy)
      n->cfg.sink_vt->destroy(n->cfg.sink_ctx);
    if (n->cfg.cfg_destroy && n->cfg.impl_cfg)
      n->cfg.cfg_destroy(n->cfg.impl_cfg);
    sl_schema_unref(n->schema);
    sl_schema_unref(n->side_schema);
    if (n->wm_cfg) sl_free((char *)n->wm_cfg->time_field);
    sl_free(n->wm_cfg);
    sl_free(n->union_inputs);
    sl_free(n->uid);
    sl_free(n);
  }
  sl_free(job->nodes);
  for (uint32_t i = 0; i < job->n_handles; i++) sl_free(job->handles[i]);
  sl_free(job->handles);
  for (uint32_t i = 0; i < job->n_keysels; i++) {
    sl_free(job->keysels[i]->fields);
    sl_free(job->keysels[i]->types);
    sl_free(job->keysels[i]);
  }
  sl_free(job->keysels);
  sl_error_destroy(job->err);
  sl_error_destroy(job->bg_err);
  pthread_mutex_destroy(&job->rt.lock);
  pthread_cond_destroy(&job->cancel_cond);
  sl_free(job->ckpt_dir);
  sl_free(job->restore_path);
  sl_free(job->name);
  sl_free(job);
}

/* ------------------------------------------------------------------ */
/* Event time (sl_time.h). */

void sl_watermark_config_init(sl_watermark_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->strategy = SL_WM_BOUNDED;
  cfg->interval_ms = 200;
}

sl_stream_t *sl_source_watermarks(sl_stream_t *source,
                                  const sl_watermark_config_t *cfg) {
  if (source == NULL) return NULL;
  sl_job_t *job = source->job;
  sl_node_t *n = source->node;
  if (n->kind != SL_NODE_SOURCE || source->port != 0) {
    sl__job_set_error(job, SL_EINVAL,
                      "watermarks: '%s' is not a source; watermarks are "
                      "generated by sources", n->uid);
    return NULL;
  }
  if (cfg == NULL || cfg->time_field == NULL) {
    sl__job_set_error(job, SL_EINVAL,
                      "watermarks of source '%s': no event-time field",
                      n->uid);
    return NULL;
  }
  int idx = sl_schema_index(n->schema, cfg->time_field);
  if (idx < 0) {
    sl__job_set_error(job, SL_EINVAL,
                      "watermarks of source '%s': no field '%s' in its "
                      "schema", n->uid, cfg->time_field);
    return NULL;
  }
  sl_type_t ty = sl_schema_field(n->schema, (uint32_t)idx)->type;
  if (ty.id != SL_TYPE_TIMESTAMP && ty.id != SL_TYPE_INT64) {
    char tb[32];
    sl__job_set_error(job, SL_ETYPE,
                      "watermarks of source '%s': event-time field '%s' is "
                      "%s; it must be timestamp or int64 (microseconds)",
                      n->uid, cfg->time_field,
                      sl_type_format(ty, tb, sizeof(tb)));
    return NULL;
  }
  if ((unsigned)cfg->strategy > SL_WM_MONOTONOUS ||
      cfg->max_out_of_orderness_us < 0 || cfg->idle_timeout_ms < 0 ||
      cfg->interval_ms < 0 || cfg->idle_timeout_ms > SL_MAX_DURATION_MS ||
      cfg->interval_ms > SL_MAX_DURATION_MS ||
      (cfg->strategy == SL_WM_MONOTONOUS && cfg->max_out_of_orderness_us)) {
    sl__job_set_error(job, SL_EINVAL,
                      "watermarks of source '%s': invalid strategy, delay, "
                      "idle timeout or interval", n->uid);
    return NULL;
  }
  if (n->wm_cfg) {
    sl__job_set_error(job, SL_EINVAL,
                      "source '%s' already has a watermark strategy", n->uid);
    return NULL;
  }
  sl_watermark_config_t *c = sl_malloc(sizeof(*c));
  char *f = sl_strdup(cfg->time_field);
  if (c == NULL || f == NULL) {
    sl_free(c);
    sl_free(f);
    sl__job_set_error(job, SL_ENOMEM, "out of memory building the job");
    return NULL;
  }
  *c = *cfg;
  c->time_field = f;
  n->wm_cfg = c;
  return source;
}
