/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pipeline files: a YAML document (read with libyaml) that names a source,
 * a list of transforms and a sink, turned into a job with the public API
 * only.  Every error names the file, line, column and field.  The format is
 * documented in docs/pipeline.md.
 */
#ifndef SL_CLI_PIPELINE_H
#define SL_CLI_PIPELINE_H

#include "sluice/sluice.h"

typedef struct sl_pipeline_s sl_pipeline_t;

/**
 * @brief Read a pipeline file and apply --set overrides ("a.b=value",
 * "transforms[1].emit=final").  On failure *out_msg holds the message
 * (caller frees with sl_free()).
 */
int sl_pipeline_load(const char *path, const char *const *sets,
                     uint32_t n_sets, sl_pipeline_t **out_pl, char **out_msg);
/**
 * @brief Like sl_pipeline_load, from text already in memory; path names it
 * in messages.  text need not be NUL-terminated.  (The fuzz target of the
 * loader, tests/fuzz/fuzz_pipeline.c, enters here.)
 */
int sl_pipeline_load_text(const char *path, const char *text, size_t len,
                          const char *const *sets, uint32_t n_sets,
                          sl_pipeline_t **out_pl, char **out_msg);
/* Options of `sluice run` that shape the job. */
typedef struct sl_pipeline_run_s {
  uint32_t parallelism;     /* > 0 overrides the file */
  const char *restore_from; /* --from-checkpoint DIR */
  bool is_resume;           /* --resume: newest usable checkpoint, if any */
  /* sluice validate: build the job without touching the file system (the
   * checkpoint directory is checked, not created). */
  bool is_validate;
  /* sluice validate --connect: also connect to the sinks' servers and
   * check reachability, credentials, tables and server settings. */
  bool is_connect;
  /* --allow-duplicate-sink-output (sl_job_config_t). */
  bool allow_duplicate_sink_output;
} sl_pipeline_run_t;

/** @brief Build the job (run may be NULL).  The job is not started. */
int sl_pipeline_build(sl_pipeline_t *pl, const sl_pipeline_run_t *run,
                      sl_job_t **out_job, char **out_msg);
/** @brief True when the source is unbounded (a generator without count). */
bool sl_pipeline_is_unbounded(const sl_pipeline_t *pl);
/**
 * @brief sluice validate --connect: connect to the external systems of the
 * built pipeline's sinks (a postgres sink) and run their start checks.
 * Call after sl_pipeline_build, while the job lives.
 * @return SL_OK, or an error with *out_msg (caller frees with sl_free).
 */
int sl_pipeline_check_connect(sl_pipeline_t *pl, char **out_msg);
const char *sl_pipeline_name(const sl_pipeline_t *pl);
void sl_pipeline_destroy(sl_pipeline_t *pl);

#endif
