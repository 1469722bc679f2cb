/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interface of the graph module: the logical job graph that the sl_job_*
 * and sl_stream_* builder calls create, and the planner that turns it into
 * chained tasks, channels and keyed-state backends.  See README.md.
 */
#ifndef SL_GRAPH_GRAPH_H
#define SL_GRAPH_GRAPH_H

#include "checkpoint/checkpoint.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "sluice/sluice.h"

typedef enum sl_node_kind_e {
  SL_NODE_SOURCE = 0,
  SL_NODE_MAP,
  SL_NODE_FILTER,
  SL_NODE_FLAT_MAP,
  SL_NODE_PROCESS,
  SL_NODE_CONNECT,
  SL_NODE_UNION,
  SL_NODE_SINK
} sl_node_kind_t;

typedef struct sl_node_s sl_node_t;

/*
 * A stream handle: the output of a node, possibly with a partitioning for
 * the next edge (key_by, rebalance, broadcast).  Owned by the job.
 */
struct sl_stream_s {
  sl_job_t *job;
  sl_node_t *node;
  sl_part_t part;        /* FORWARD: not set explicitly */
  bool is_explicit;
  sl_keysel_t *keysel;   /* HASH only; owned by the job */
  uint32_t port;         /* 0: the main output; 1: the side output */
};

struct sl_node_s {
  uint32_t id;
  sl_node_kind_t kind;
  char *uid;
  uint32_t parallelism;   /* 0 = job default */
  sl_schema_t *schema;    /* output schema (sink: input schema) */
  sl_schema_t *side_schema; /* side output (port 1), or NULL */
  sl_watermark_config_t *wm_cfg; /* sources: watermark strategy, or NULL */
  const sl_op_vt_t *vt;
  sl_op_cfg_t cfg;
  const sl_source_vt_t *src_vt;
  void *src_ctx;
  sl_stream_t inputs[2];  /* copies of the input handles */
  sl_stream_t *union_inputs; /* union: n_inputs handles */
  uint32_t n_inputs;
  /* Planner results. */
  uint32_t par;           /* resolved parallelism */
  uint32_t chain;         /* index of the chain it belongs to */
  bool is_chained;        /* chained to its single input */
  sl_split_list_t *splits; /* sources: the plan's splits, shared by the
                              subtasks; freed by sl__plan_destroy */
  /* Sources with an enumerator (enum_plan.c).  The host lives across
   * attempts, from the first plan to sl_job_destroy. */
  struct sl_enum_host_s *enum_host;
  sl_enum_link_t enum_link;   /* the readers' link; host = enum_host */
  bool is_enum_rescale;       /* this attempt: the old readers' splits go
                                 back to the enumerator */
  uint32_t enum_first_task;   /* this attempt: task of reader 0 */
  sl_job_t *enum_job;
};

typedef struct sl_chain_s {
  uint32_t head;          /* node id */
  uint32_t *nodes;        /* in topological order */
  uint32_t n_nodes;
  uint32_t par;
  uint32_t first_task;    /* tasks first_task .. first_task + par - 1 */
} sl_chain_t;

typedef enum sl_job_state_e {
  SL_JOB_BUILDING = 0,
  SL_JOB_RUNNING,
  SL_JOB_FINISHED
} sl_job_state_t;

struct sl_job_s {
  sl_job_config_t cfg;
  char *name;
  sl_node_t **nodes;
  uint32_t n_nodes;
  sl_stream_t **handles;
  uint32_t n_handles;
  sl_keysel_t **keysels;
  uint32_t n_keysels;
  sl_error_t *err; /* first builder error */
  /* Plan and runtime. */
  sl_chain_t *chains;
  uint32_t n_chains;
  sl_job_rt_t rt;
  sl_channel_t **channels;
  uint32_t n_channels;
  sl_op_t **ops;           /* every operator instance */
  uint32_t n_ops;
  _Atomic int state;       /* sl_job_state_t */
  int64_t start_ns;
  pthread_t bg_thread;     /* sl_job_start */
  bool has_bg_thread;
  /* Frees the keyed state of a failed attempt while the next one restores
   * (run.c, "reaper"); joined before another starts and by
   * sl_job_destroy. */
  pthread_t reaper;
  bool has_reaper;
  int bg_rc;
  sl_error_t *bg_err;
  /* Checkpoints and restarts. */
  sl_coord_t *coord;       /* NULL: checkpoints off */
  sl_ckpt_hooks_t *hooks;
  _Atomic uint32_t n_restarts;
  _Atomic bool is_user_canceled; /* sl_job_cancel; rt.is_canceled also
                                    stops an attempt after a failure */
  pthread_cond_t cancel_cond; /* interrupts a restart delay; rt.lock */
  bool is_restore_corrupt; /* the last plan failed reading a checkpoint */
  bool is_plan_failed;     /* the last attempt failed before running */
  char *ckpt_dir;          /* owned copies of the configuration's strings */
  char *restore_path;
};

/** @brief Schema of the rows of a stream handle (its port's schema). */
static inline sl_schema_t *sl__stream_schema(const sl_stream_t *s) {
  return s->port ? s->node->side_schema : s->node->schema;
}

/** @brief Record a builder error (the first one is kept). */
void sl__job_set_error(sl_job_t *job, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** @brief A new handle owned by the job. */
sl_stream_t *sl__job_new_handle(sl_job_t *job, sl_node_t *node);
/** @brief A new node owned by the job, with one input (or none). */
sl_node_t *sl__job_new_node(sl_job_t *job, sl_node_kind_t kind,
                            const char *uid, const sl_stream_t *in);

/**
 * @brief Build tasks, channels and state for the job, restoring from meta
 * when it is not NULL.  Called by run, once per attempt.
 */
int sl__plan_build(sl_job_t *job, const sl_ckpt_meta_t *meta,
                   sl_error_t **out_err);
void sl__plan_destroy(sl_job_t *job);
/** @brief Move every operator's keyed state out of the plan (the caller
 * destroys them) so that sl__plan_destroy does not free them.  On
 * SL_ENOMEM nothing moved. */
int sl__plan_take_states(sl_job_t *job, sl_kstate_t ***out, uint32_t *out_n);
/** @brief Wait for the reaper of an earlier attempt, if any. */
void sl__job_join_reaper(sl_job_t *job);

/* Sources with an enumerator (enum_plan.c). */

/** @brief For each such source, before its tasks are made: keep its
 * enumerator host and reset its readers to meta (an in-process restart
 * the tracker can judge), or create it from meta's state.  @thread the
 * job's controlling thread. */
int sl__enum_plan_hosts(sl_job_t *job, const sl_ckpt_meta_t *meta,
                        sl_error_t **out_err);
/** @brief The splits reader subtask `subtask` of source n restores from
 * checkpoint m (or, at another parallelism, all old readers' splits back
 * to the enumerator, once, with subtask 0). */
int sl__enum_restore_reader(sl_node_t *n, const sl_ckpt_meta_t *m,
                            const sl_ckpt_op_t *mop, sl_source_rt_t *src,
                            uint32_t subtask, sl_error_t **out_err);
/** @brief The scheduler exists: the gateways deliver to this attempt's
 * readers.  @thread the job's controlling thread. */
void sl__enum_plan_attach(sl_job_t *job);
/** @brief The attempt ended: the gateways hold events again. */
void sl__enum_plan_detach(sl_job_t *job);
/** @brief Stop and free every enumerator (sl_job_destroy). */
void sl__enum_plan_destroy(sl_job_t *job);

/* Restore (restore.c). */

/**
 * @brief The restore point of the first attempt, from the configuration
 * (restore_from, or the newest checkpoint with resume_latest).  *has says
 * whether meta was filled.  @thread the job's caller.
 */
int sl__restore_initial(sl_job_t *job, sl_ckpt_meta_t *meta, bool *has,
                        sl_error_t **out_err);
/**
 * @brief Restore every operator instance of the built plan from m.  Sets
 * no job flags; SL_ECORRUPT means a file of the checkpoint is damaged.
 * @thread the job's caller, before the tasks run.
 */
int sl__restore_plan(sl_job_t *job, const sl_ckpt_meta_t *m,
                     sl_error_t **out_err);

#endif
