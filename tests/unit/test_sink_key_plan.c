/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The edge into an upsert sink with a key (docs/pipeline.md, "Sink
 * parallelism and keys"): the pipeline keys the sink's input by the
 * sink's key, so that one key's rows reach one sink subtask, unless the
 * rows come from an aggregate keyed by those fields at the sink's
 * parallelism (then the edge stays forward, the sink chained to it).  The
 * pipelines are built and planned (sl__plan_build), not run: the
 * channels into the sink's tasks say which edge the planner made.  The
 * sinks do not connect while a job is built and planned.
 */
#include "cli/pipeline.h"
#include "graph/graph.h"
#include "runtime/runtime.h"
#include "sl_test.h"

typedef enum edge_e { FORWARD_CHAINED, HASH, ROUND_ROBIN } edge_t;

/* Build and plan the running example with this sink section and job
 * parallelism; the edge into the sink "sink", and how many channels feed
 * its tasks. */
static edge_t plan_edge(uint32_t job_par, const char *extra_transform,
                        const char *sink, uint32_t *out_n_chs) {
  char text[4096];
  snprintf(text, sizeof(text),
           "name: keyplan\nparallelism: %u\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 1000}\n"
           "source: {type: generator, uid: deltas, seed: 42, count: 100,\n"
           "         splits: 2, keys: 10, columns: [key, amount]}\n"
           "transforms:\n"
           "  - project: {account: key, amount: amount}\n"
           "  - aggregate: {key: [account], values: {balance: sum(amount)},\n"
           "                emit: updates}\n"
           "    uid: balances\n"
           "%s"
           "sink: %s\n",
           job_par, sl_test_dir(), extra_transform, sink);
  sl_pipeline_t *pl = NULL;
  char *msg = NULL;
  int rc = sl_pipeline_load_text("keyplan.yaml", text, strlen(text), NULL, 0,
                                 &pl, &msg);
  if (rc != SL_OK) SL_TEST_FAIL("load: %s", msg ? msg : sl_strerror(rc));
  sl_job_t *job = NULL;
  rc = sl_pipeline_build(pl, NULL, &job, &msg);
  if (rc != SL_OK) SL_TEST_FAIL("build: %s", msg ? msg : sl_strerror(rc));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__plan_build(job, NULL, &err), err);
  const sl_node_t *snk = NULL;
  for (uint32_t i = 0; i < job->n_nodes; i++)
    if (job->nodes[i]->kind == SL_NODE_SINK &&
        strcmp(job->nodes[i]->uid, "sink") == 0)
      snk = job->nodes[i];
  SL_ASSERT_TRUE(snk != NULL);
  edge_t e = FORWARD_CHAINED;
  uint32_t n = 0, n_hash = 0;
  const sl_chain_t *c = &job->chains[snk->chain];
  /* Chained, the sink shares the tasks of the aggregate (whose inputs
   * are the aggregate's); else its chain starts with it. */
  for (uint32_t i = 0; !snk->is_chained && i < job->n_channels; i++) {
    const sl_channel_t *ch = job->channels[i];
    for (uint32_t s = 0; s < c->par; s++)
      if (ch->receiver == job->rt.tasks[c->first_task + s]) {
        n++;
        n_hash += ch->has_hash;
      }
  }
  if (snk->is_chained) {
    SL_ASSERT_EQ_INT(snk->inputs[0].part, SL_PART_FORWARD);
    e = FORWARD_CHAINED;
  } else {
    SL_ASSERT_TRUE(n > 0);
    SL_ASSERT_TRUE(n_hash == 0 || n_hash == n);
    e = n_hash ? HASH : ROUND_ROBIN;
  }
  *out_n_chs = n;
  sl_job_destroy(job);
  sl_pipeline_destroy(pl);
  return e;
}

#define PG_UPSERT                                                        \
  "{type: postgres, conninfo: \"host=127.0.0.1 port=1\", table: t, "     \
  "mode: upsert, key: [account]"
#define MY_UPSERT                                                        \
  "{type: mariadb, host: 127.0.0.1, port: 1, user: root, database: d, "  \
  "table: t, mode: upsert, key: [account]"

SL_TEST(pg_upsert_more_subtasks_hashes_on_key) {
  uint32_t n;
  SL_ASSERT_EQ_INT(plan_edge(2, "", PG_UPSERT ", parallelism: 4}", &n), HASH);
  SL_ASSERT_EQ_INT(n, 2 * 4); /* every sender to every sink subtask */
}

SL_TEST(pg_upsert_fewer_subtasks_hashes_on_key) {
  uint32_t n;
  SL_ASSERT_EQ_INT(plan_edge(3, "", PG_UPSERT ", parallelism: 1}", &n), HASH);
  SL_ASSERT_EQ_INT(n, 3);
}

SL_TEST(mariadb_upsert_more_subtasks_hashes_on_key) {
  uint32_t n;
  SL_ASSERT_EQ_INT(plan_edge(2, "", MY_UPSERT ", parallelism: 4}", &n), HASH);
  SL_ASSERT_EQ_INT(n, 2 * 4);
}

SL_TEST(upsert_same_parallelism_after_keyed_aggregate_stays_forward) {
  uint32_t n;
  SL_ASSERT_EQ_INT(plan_edge(2, "", PG_UPSERT "}", &n), FORWARD_CHAINED);
  SL_ASSERT_EQ_INT(plan_edge(2, "", PG_UPSERT ", parallelism: 2}", &n),
                   FORWARD_CHAINED);
  SL_ASSERT_EQ_INT(plan_edge(2, "", MY_UPSERT "}", &n), FORWARD_CHAINED);
  /* A filter at the same parallelism keeps the rows where they are. */
  SL_ASSERT_EQ_INT(plan_edge(2, "  - filter: \"balance > 0\"\n",
                             PG_UPSERT "}", &n),
                   FORWARD_CHAINED);
}

SL_TEST(upsert_after_a_project_hashes_even_at_same_parallelism) {
  /* A project may rename or recompute the key: sluice does not prove the
   * rows are still keyed by the sink's key, and keys them. */
  uint32_t n;
  SL_ASSERT_EQ_INT(plan_edge(2, "  - project: {account: account, "
                             "balance: balance}\n", PG_UPSERT "}", &n),
                   HASH);
  SL_ASSERT_EQ_INT(n, 2 * 2);
}

SL_TEST(upsert_after_a_filter_of_other_parallelism_hashes) {
  uint32_t n;
  SL_ASSERT_EQ_INT(plan_edge(2, "  - filter: \"balance > 0\"\n"
                             "    parallelism: 3\n", PG_UPSERT "}", &n),
                   HASH);
  SL_ASSERT_EQ_INT(n, 3 * 2);
}

SL_TEST(insert_mode_keeps_round_robin) {
  /* An insert sink has no key: rows go round robin as before. */
  uint32_t n;
  SL_ASSERT_EQ_INT(plan_edge(2, "  - filter: \"balance > 0\"\n",
                             "{type: postgres, conninfo: \"host=127.0.0.1 "
                             "port=1\", table: t, mode: insert, "
                             "parallelism: 4}", &n),
                   ROUND_ROBIN);
  SL_ASSERT_EQ_INT(n, 2 * 4);
}
