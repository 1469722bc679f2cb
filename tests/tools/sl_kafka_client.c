/* SPDX-License-Identifier: Apache-2.0 */
/*
 * librdkafka client steps for the broker tests and sl-kafka-check.  See
 * sl_kafka_client.h.
 */
#define _GNU_SOURCE
#include "sl_kafka_client.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OP_TIMEOUT_MS 30000

struct dr_count {
  int ok;
  int failed;
  rd_kafka_resp_err_t first_err;
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void quiet_log(const rd_kafka_t *rk, int level, const char *fac,
                      const char *buf) {
  (void)rk;
  (void)level;
  (void)fac;
  (void)buf;
}

static void quiet_error(rd_kafka_t *rk, int err, const char *reason,
                        void *opaque) {
  (void)rk;
  (void)err;
  (void)reason;
  (void)opaque;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m,
                        void *opaque) {
  (void)rk;
  (void)opaque;
  struct dr_count *c = m->_private;
  if (c == NULL) return;
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    c->ok++;
  } else {
    if (c->failed++ == 0) c->first_err = m->err;
  }
}

int sl_kc_new(const char *bootstrap, rd_kafka_type_t type,
              const char *const *settings, rd_kafka_t **out_rk,
              sl_error_t **out_err) {
  rd_kafka_conf_t *c = rd_kafka_conf_new();
  char e[512];
  if (rd_kafka_conf_set(c, "bootstrap.servers", bootstrap, e, sizeof(e)) !=
      RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(c);
    return sl_error_set(out_err, SL_EINVAL, "bootstrap.servers=%s: %s",
                        bootstrap, e);
  }
  for (const char *const *s = settings; s != NULL && s[0] != NULL; s += 2) {
    if (rd_kafka_conf_set(c, s[0], s[1], e, sizeof(e)) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(c);
      return sl_error_set(out_err, SL_EINVAL, "librdkafka setting %s=%s: %s",
                          s[0], s[1], e);
    }
  }
  rd_kafka_conf_set_log_cb(c, quiet_log);
  rd_kafka_conf_set_error_cb(c, quiet_error);
  if (type == RD_KAFKA_PRODUCER) rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
  rd_kafka_t *rk = rd_kafka_new(type, c, e, sizeof(e));
  if (rk == NULL) {
    rd_kafka_conf_destroy(c);
    return sl_error_set(out_err, SL_EIO, "rd_kafka_new: %s", e);
  }
  *out_rk = rk;
  return SL_OK;
}

int sl_kc_txn_result(rd_kafka_error_t *error, const char *what,
                     sl_error_t **out_err) {
  if (error == NULL) return SL_OK;
  int rc = sl_error_set(out_err, SL_EIO, "%s: %s: %s%s%s%s", what,
                        rd_kafka_error_name(error),
                        rd_kafka_error_string(error),
                        rd_kafka_error_is_fatal(error) ? " (fatal)" : "",
                        rd_kafka_error_is_retriable(error) ? " (retriable)"
                                                           : "",
                        rd_kafka_error_txn_requires_abort(error)
                            ? " (abortable)"
                            : "");
  rd_kafka_error_destroy(error);
  return rc;
}

int sl_kc_txn_producer(const char *bootstrap, const char *txn_id,
                       const char *const *settings, rd_kafka_t **out_rk,
                       sl_error_t **out_err) {
  const char *base[32] = {"transactional.id", txn_id};
  int n = 2;
  for (const char *const *s = settings; s != NULL && s[0] != NULL && n < 30;
       s += 2) {
    base[n++] = s[0];
    base[n++] = s[1];
  }
  base[n] = NULL;
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_new(bootstrap, RD_KAFKA_PRODUCER, base, &rk, out_err);
  if (rc != SL_OK) return rc;
  rc = sl_kc_txn_result(rd_kafka_init_transactions(rk, OP_TIMEOUT_MS),
                        "rd_kafka_init_transactions", out_err);
  if (rc != SL_OK) {
    rd_kafka_destroy(rk);
    return rc;
  }
  *out_rk = rk;
  return SL_OK;
}

int sl_kc_produce(rd_kafka_t *rk, const char *topic, int partition,
                  const char *prefix, int first, int n, bool wait,
                  sl_error_t **out_err) {
  struct dr_count c = {0, 0, RD_KAFKA_RESP_ERR_NO_ERROR};
  for (int i = first; i < first + n; i++) {
    char v[256];
    snprintf(v, sizeof(v), "%s%d", prefix, i);
    rd_kafka_resp_err_t e;
    do {
      e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
                            RD_KAFKA_V_PARTITION(partition),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                            RD_KAFKA_V_VALUE(v, strlen(v)),
                            RD_KAFKA_V_OPAQUE(wait ? &c : NULL),
                            RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) rd_kafka_poll(rk, 100);
    } while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (wait) rd_kafka_flush(rk, OP_TIMEOUT_MS);
      return sl_error_set(out_err, SL_EIO, "produce to %s/%d: %s (%s)", topic,
                          partition, rd_kafka_err2name(e),
                          rd_kafka_err2str(e));
    }
  }
  if (!wait) return SL_OK;
  rd_kafka_resp_err_t fe = rd_kafka_flush(rk, OP_TIMEOUT_MS);
  if (fe != RD_KAFKA_RESP_ERR_NO_ERROR)
    return sl_error_set(out_err, SL_EIO, "flush to %s/%d: %s (%d of %d "
                        "delivered)", topic, partition, rd_kafka_err2name(fe),
                        c.ok, n);
  if (c.failed > 0 || c.ok != n)
    return sl_error_set(out_err, SL_EIO,
                        "produce to %s/%d: %d of %d delivered; first "
                        "failure %s (%s)", topic, partition, c.ok, n,
                        rd_kafka_err2name(c.first_err),
                        rd_kafka_err2str(c.first_err));
  return SL_OK;
}

void sl_kc_values_free(char **values, int n) {
  for (int i = 0; i < n; i++) free(values[i]);
  free(values);
}

int sl_kc_read_partition(const char *bootstrap, const char *topic,
                         int partition, bool read_committed,
                         char ***out_values, int *out_n,
                         sl_error_t **out_err) {
  const char *settings[] = {
      "group.id", "sl-kc-reader",
      "enable.auto.commit", "false",
      "enable.partition.eof", "true",
      /* The end of a partition is the first empty fetch: answered at
       * once instead of after the default 500 ms. */
      "fetch.wait.max.ms", "10",
      "isolation.level", read_committed ? "read_committed"
                                        : "read_uncommitted",
      NULL};
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_new(bootstrap, RD_KAFKA_CONSUMER, settings, &rk, out_err);
  if (rc != SL_OK) return rc;
  rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(tp, topic, partition)->offset =
      RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_resp_err_t e = rd_kafka_assign(rk, tp);
  rd_kafka_topic_partition_list_destroy(tp);
  char **vals = NULL;
  int n = 0, cap = 0;
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rc = sl_error_set(out_err, SL_EIO, "assign %s/%d: %s", topic, partition,
                      rd_kafka_err2str(e));
  } else {
    int64_t deadline = now_ms() + OP_TIMEOUT_MS;
    for (;;) {
      rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
      if (m == NULL) {
        if (now_ms() < deadline) continue;
        rc = sl_error_set(out_err, -ETIMEDOUT,
                          "reading %s/%d: no end of partition within %d ms "
                          "(%d records read)", topic, partition,
                          OP_TIMEOUT_MS, n);
        break;
      }
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        rd_kafka_message_destroy(m);
        break;
      }
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rc = sl_error_set(out_err, SL_EIO, "reading %s/%d: %s (%s)", topic,
                          partition, rd_kafka_err2name(m->err),
                          rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
        break;
      }
      if (n == cap) {
        cap = cap ? cap * 2 : 16;
        char **nv = realloc(vals, (size_t)cap * sizeof(*vals));
        if (nv == NULL) {
          rd_kafka_message_destroy(m);
          rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
          break;
        }
        vals = nv;
      }
      vals[n] = strndup(m->payload ? (const char *)m->payload : "", m->len);
      n++;
      rd_kafka_message_destroy(m);
    }
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  if (rc != SL_OK) {
    sl_kc_values_free(vals, n);
    return rc;
  }
  *out_values = vals;
  *out_n = n;
  return SL_OK;
}

int sl_kc_committed(const char *bootstrap, const char *group,
                    const char *topic, int partition, int64_t *out_offset,
                    char **out_metadata, sl_error_t **out_err) {
  const char *settings[] = {"group.id", group, "enable.auto.commit", "false",
                            NULL};
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_new(bootstrap, RD_KAFKA_CONSUMER, settings, &rk, out_err);
  if (rc != SL_OK) return rc;
  rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(tp, topic, partition);
  rd_kafka_resp_err_t e = rd_kafka_committed(rk, tp, OP_TIMEOUT_MS);
  if (e == RD_KAFKA_RESP_ERR_NO_ERROR) e = tp->elems[0].err;
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rc = sl_error_set(out_err, SL_EIO, "committed offset of group %s on "
                      "%s/%d: %s (%s)", group, topic, partition,
                      rd_kafka_err2name(e), rd_kafka_err2str(e));
  } else {
    int64_t off = tp->elems[0].offset;
    *out_offset = off < 0 ? -1 : off;
    if (out_metadata != NULL)
      *out_metadata = tp->elems[0].metadata_size > 0
                          ? strndup(tp->elems[0].metadata,
                                    tp->elems[0].metadata_size)
                          : NULL;
  }
  rd_kafka_topic_partition_list_destroy(tp);
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The feature check. */

struct check {
  const char *bootstrap;
  FILE *out;
  char topic[64];
  int failed;
};

static void report(struct check *c, const char *step, int rc,
                   sl_error_t *err) {
  if (rc == SL_OK) {
    fprintf(c->out, "ok    %s\n", step);
  } else {
    c->failed++;
    fprintf(c->out, "FAIL  %s: %s\n", step,
            err ? sl_error_message(err) : sl_strerror(rc));
  }
  fflush(c->out);
  sl_error_destroy(err);
}

static int expect_values(char **vals, int n, const char *const *want,
                         int n_want, const char *what, sl_error_t **err) {
  if (n != n_want)
    return sl_error_set(err, SL_EIO, "%s: %d records, expected %d", what, n,
                        n_want);
  for (int i = 0; i < n; i++)
    if (strcmp(vals[i], want[i]) != 0)
      return sl_error_set(err, SL_EIO, "%s: record %d is '%s', expected "
                          "'%s'", what, i, vals[i], want[i]);
  return SL_OK;
}

static int step_create_topic(struct check *c, sl_error_t **err) {
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_new(c->bootstrap, RD_KAFKA_PRODUCER, NULL, &rk, err);
  if (rc != SL_OK) return rc;
  char e[512];
  rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(c->topic, 2, 1, e,
                                                  sizeof(e));
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t *ao =
      rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_operation_timeout(ao, OP_TIMEOUT_MS, e,
                                              sizeof(e));
  rd_kafka_CreateTopics(rk, &nt, 1, ao, q);
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, OP_TIMEOUT_MS + 5000);
  if (ev == NULL) {
    rc = sl_error_set(err, -ETIMEDOUT, "CreateTopics: no answer");
  } else if (rd_kafka_event_error(ev)) {
    rc = sl_error_set(err, SL_EIO, "CreateTopics: %s",
                      rd_kafka_event_error_string(ev));
  } else {
    size_t n = 0;
    const rd_kafka_topic_result_t **tr = rd_kafka_CreateTopics_result_topics(
        rd_kafka_event_CreateTopics_result(ev), &n);
    if (n != 1 || rd_kafka_topic_result_error(tr[0]))
      rc = sl_error_set(err, SL_EIO, "CreateTopics: %s",
                        n == 1 ? rd_kafka_topic_result_error_string(tr[0])
                               : "no result");
  }
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_AdminOptions_destroy(ao);
  rd_kafka_queue_destroy(q);
  rd_kafka_NewTopic_destroy(nt);
  /* Wait until both partitions have a leader. */
  int64_t deadline = now_ms() + OP_TIMEOUT_MS;
  while (rc == SL_OK) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, c->topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    bool ready = false;
    if (rd_kafka_metadata(rk, 0, rkt, &md, 5000) == 0) {
      ready = md->topic_cnt == 1 && md->topics[0].err == 0 &&
              md->topics[0].partition_cnt == 2 &&
              md->topics[0].partitions[0].leader >= 0 &&
              md->topics[0].partitions[1].leader >= 0;
      rd_kafka_metadata_destroy(md);
    }
    rd_kafka_topic_destroy(rkt);
    if (ready) break;
    if (now_ms() > deadline)
      rc = sl_error_set(err, -ETIMEDOUT, "topic %s has no leaders",
                        c->topic);
    else
      usleep(50000);
  }
  rd_kafka_destroy(rk);
  return rc;
}

static int step_idempotent_produce(struct check *c, sl_error_t **err) {
  const char *s[] = {"enable.idempotence", "true", NULL};
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_new(c->bootstrap, RD_KAFKA_PRODUCER, s, &rk, err);
  if (rc != SL_OK) return rc;
  rc = sl_kc_produce(rk, c->topic, 0, "p", 0, 10, true, err);
  rd_kafka_destroy(rk);
  return rc;
}

static int step_read_assigned(struct check *c, sl_error_t **err) {
  char **v = NULL;
  int n = 0;
  int rc = sl_kc_read_partition(c->bootstrap, c->topic, 0, true, &v, &n, err);
  if (rc != SL_OK) return rc;
  const char *want[10] = {"p0", "p1", "p2", "p3", "p4",
                          "p5", "p6", "p7", "p8", "p9"};
  rc = expect_values(v, n, want, 10, "read_committed via assign()", err);
  sl_kc_values_free(v, n);
  return rc;
}

static int step_list_offsets(struct check *c, sl_error_t **err) {
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_new(c->bootstrap, RD_KAFKA_PRODUCER, NULL, &rk, err);
  if (rc != SL_OK) return rc;
  int64_t lo = -1, hi = -1;
  rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
      rk, c->topic, 0, &lo, &hi, OP_TIMEOUT_MS);
  if (e != 0) {
    rc = sl_error_set(err, SL_EIO, "query_watermark_offsets: %s",
                      rd_kafka_err2str(e));
  } else if (lo != 0 || hi != 10) {
    rc = sl_error_set(err, SL_EIO, "watermarks %" PRId64 "..%" PRId64
                      ", expected 0..10", lo, hi);
  } else {
    /* offsets_for_times: timestamp 0 is the first record. */
    rd_kafka_topic_partition_list_t *tp =
        rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(tp, c->topic, 0)->offset = 0;
    e = rd_kafka_offsets_for_times(rk, tp, OP_TIMEOUT_MS);
    if (e == 0) e = tp->elems[0].err;
    if (e != 0)
      rc = sl_error_set(err, SL_EIO, "offsets_for_times: %s",
                        rd_kafka_err2str(e));
    else if (tp->elems[0].offset != 0)
      rc = sl_error_set(err, SL_EIO, "offsets_for_times(0) = %" PRId64,
                        tp->elems[0].offset);
    rd_kafka_topic_partition_list_destroy(tp);
  }
  rd_kafka_destroy(rk);
  return rc;
}

static int send_marker(rd_kafka_t *rk, const char *group, const char *topic,
                       int64_t offset, const char *meta, sl_error_t **err) {
  rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_t *e = rd_kafka_topic_partition_list_add(tp, topic,
                                                                    0);
  e->offset = offset;
  e->metadata = strdup(meta);
  e->metadata_size = strlen(meta);
  rd_kafka_consumer_group_metadata_t *cg =
      rd_kafka_consumer_group_metadata_new(group);
  int rc = sl_kc_txn_result(
      rd_kafka_send_offsets_to_transaction(rk, tp, cg, OP_TIMEOUT_MS),
      "rd_kafka_send_offsets_to_transaction", err);
  rd_kafka_consumer_group_metadata_destroy(cg);
  rd_kafka_topic_partition_list_destroy(tp);
  return rc;
}

static int step_txn_commit(struct check *c, sl_error_t **err) {
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_txn_producer(c->bootstrap, "sl-check-txn", NULL, &rk, err);
  if (rc != SL_OK) return rc;
  rc = sl_kc_txn_result(rd_kafka_begin_transaction(rk),
                        "rd_kafka_begin_transaction", err);
  if (rc == SL_OK) rc = sl_kc_produce(rk, c->topic, 1, "t", 0, 5, false, err);
  if (rc == SL_OK)
    rc = send_marker(rk, "sl-check-marker", c->topic, 42, "sluice:check",
                     err);
  if (rc == SL_OK)
    rc = sl_kc_txn_result(rd_kafka_commit_transaction(rk, OP_TIMEOUT_MS),
                          "rd_kafka_commit_transaction", err);
  rd_kafka_destroy(rk);
  return rc;
}

static int step_txn_abort(struct check *c, sl_error_t **err) {
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_txn_producer(c->bootstrap, "sl-check-txn", NULL, &rk, err);
  if (rc != SL_OK) return rc;
  rc = sl_kc_txn_result(rd_kafka_begin_transaction(rk),
                        "rd_kafka_begin_transaction", err);
  if (rc == SL_OK) rc = sl_kc_produce(rk, c->topic, 1, "a", 0, 3, false, err);
  if (rc == SL_OK) rc = sl_kc_txn_result(rd_kafka_flush(rk, OP_TIMEOUT_MS)
                                             ? rd_kafka_error_new(
                                                   RD_KAFKA_RESP_ERR__TIMED_OUT,
                                                   "flush timed out")
                                             : NULL,
                                         "rd_kafka_flush", err);
  if (rc == SL_OK)
    rc = sl_kc_txn_result(rd_kafka_abort_transaction(rk, OP_TIMEOUT_MS),
                          "rd_kafka_abort_transaction", err);
  rd_kafka_destroy(rk);
  return rc;
}

static int step_read_committed_filters(struct check *c, sl_error_t **err) {
  char **v = NULL;
  int n = 0;
  int rc = sl_kc_read_partition(c->bootstrap, c->topic, 1, true, &v, &n, err);
  if (rc != SL_OK) return rc;
  const char *want[5] = {"t0", "t1", "t2", "t3", "t4"};
  rc = expect_values(v, n, want, 5, "read_committed after commit and abort",
                     err);
  sl_kc_values_free(v, n);
  if (rc != SL_OK) return rc;
  rc = sl_kc_read_partition(c->bootstrap, c->topic, 1, false, &v, &n, err);
  if (rc != SL_OK) return rc;
  if (n != 8)
    rc = sl_error_set(err, SL_EIO, "read_uncommitted: %d records, expected 8 "
                      "(5 committed, 3 aborted)", n);
  sl_kc_values_free(v, n);
  return rc;
}

static int step_marker(struct check *c, sl_error_t **err) {
  int64_t off = -1;
  char *meta = NULL;
  int rc = sl_kc_committed(c->bootstrap, "sl-check-marker", c->topic, 0, &off,
                           &meta, err);
  if (rc != SL_OK) return rc;
  if (off != 42 || meta == NULL || strcmp(meta, "sluice:check") != 0)
    rc = sl_error_set(err, SL_EIO, "transactional offset %" PRId64
                      " metadata '%s', expected 42 'sluice:check'", off,
                      meta ? meta : "(none)");
  free(meta);
  return rc;
}

/* An admin call's result event from a fresh handle, or NULL (*err). */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q, const char *what,
                                   sl_error_t **err) {
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
  if (ev == NULL || rd_kafka_event_error(ev)) {
    sl_error_set(err, SL_EIO, "%s: %s", what,
                 ev ? rd_kafka_event_error_string(ev) : "timed out");
    if (ev) rd_kafka_event_destroy(ev);
    return NULL;
  }
  return ev;
}

/* The exactly-once sink finds its ids by their marker groups: a group
 * holding only a transactional offset must be listed. */
static int step_list_groups(struct check *c, sl_error_t **err) {
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_new(c->bootstrap, RD_KAFKA_PRODUCER, NULL, &rk, err);
  if (rc != SL_OK) return rc;
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  rd_kafka_ListConsumerGroups(rk, NULL, q);
  rd_kafka_event_t *ev = admin_wait(q, "ListConsumerGroups", err);
  rc = SL_EIO;
  if (ev) {
    size_t n = 0, n_err = 0;
    const rd_kafka_ListConsumerGroups_result_t *r =
        rd_kafka_event_ListConsumerGroups_result(ev);
    const rd_kafka_ConsumerGroupListing_t **gl =
        rd_kafka_ListConsumerGroups_result_valid(r, &n);
    rd_kafka_ListConsumerGroups_result_errors(r, &n_err);
    for (size_t i = 0; i < n; i++)
      if (strcmp(rd_kafka_ConsumerGroupListing_group_id(gl[i]),
                 "sl-check-marker") == 0)
        rc = SL_OK;
    if (rc != SL_OK)
      sl_error_set(err, SL_EIO, "the group 'sl-check-marker' (offsets only) "
                   "is not among the %zu listed (%zu errors)", n, n_err);
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(rk);
  return rc;
}

/* The timing check reads transaction.max.timeout.ms of a broker. */
static int step_describe_configs(struct check *c, sl_error_t **err) {
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_new(c->bootstrap, RD_KAFKA_PRODUCER, NULL, &rk, err);
  if (rc != SL_OK) return rc;
  const struct rd_kafka_metadata *md = NULL;
  rd_kafka_resp_err_t me = rd_kafka_metadata(rk, 0, NULL, &md, 30000);
  char id[16] = "1";
  if (me == RD_KAFKA_RESP_ERR_NO_ERROR && md->broker_cnt)
    snprintf(id, sizeof(id), "%d", (int)md->brokers[0].id);
  if (md) rd_kafka_metadata_destroy(md);
  rd_kafka_ConfigResource_t *res =
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_BROKER, id);
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  rd_kafka_DescribeConfigs(rk, &res, 1, NULL, q);
  rd_kafka_event_t *ev = admin_wait(q, "DescribeConfigs", err);
  rc = SL_EIO;
  if (ev) {
    size_t nr = 0, ne = 0;
    const rd_kafka_ConfigResource_t **rs =
        rd_kafka_DescribeConfigs_result_resources(
            rd_kafka_event_DescribeConfigs_result(ev), &nr);
    const rd_kafka_ConfigEntry_t **es =
        nr ? rd_kafka_ConfigResource_configs(rs[0], &ne) : NULL;
    for (size_t i = 0; i < ne; i++) {
      const char *v = rd_kafka_ConfigEntry_value(es[i]);
      if (strcmp(rd_kafka_ConfigEntry_name(es[i]),
                 "transaction.max.timeout.ms") == 0 &&
          v && atoll(v) > 0)
        rc = SL_OK;
    }
    if (rc != SL_OK)
      sl_error_set(err, SL_EIO, "broker %s: no transaction.max.timeout.ms "
                   "among %zu settings", id, ne);
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_ConfigResource_destroy(res);
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(rk);
  return rc;
}

static int step_group_commit(struct check *c, sl_error_t **err) {
  const char *s[] = {"group.id", "sl-check-commit", "enable.auto.commit",
                     "false", NULL};
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_new(c->bootstrap, RD_KAFKA_CONSUMER, s, &rk, err);
  if (rc != SL_OK) return rc;
  rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(tp, c->topic, 0)->offset = 7;
  rd_kafka_resp_err_t e = rd_kafka_commit(rk, tp, 0);
  rd_kafka_topic_partition_list_destroy(tp);
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  if (e != 0)
    return sl_error_set(err, SL_EIO, "rd_kafka_commit: %s",
                        rd_kafka_err2str(e));
  int64_t off = -1;
  rc = sl_kc_committed(c->bootstrap, "sl-check-commit", c->topic, 0, &off,
                       NULL, err);
  if (rc == SL_OK && off != 7)
    rc = sl_error_set(err, SL_EIO, "committed %" PRId64 ", expected 7", off);
  return rc;
}

static int step_subscribe(struct check *c, sl_error_t **err) {
  const char *s[] = {"group.id", "sl-check-subscribe",
                     "auto.offset.reset", "earliest",
                     "enable.auto.commit", "false", NULL};
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_new(c->bootstrap, RD_KAFKA_CONSUMER, s, &rk, err);
  if (rc != SL_OK) return rc;
  rd_kafka_poll_set_consumer(rk);
  rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(tp, c->topic, RD_KAFKA_PARTITION_UA);
  rd_kafka_resp_err_t e = rd_kafka_subscribe(rk, tp);
  rd_kafka_topic_partition_list_destroy(tp);
  int got = 0;
  if (e != 0) {
    rc = sl_error_set(err, SL_EIO, "rd_kafka_subscribe: %s",
                      rd_kafka_err2str(e));
  } else {
    int64_t deadline = now_ms() + OP_TIMEOUT_MS;
    while (got < 15 && now_ms() < deadline) {
      rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
      if (m == NULL) continue;
      if (m->err == 0) {
        got++;
      } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        rc = sl_error_set(err, SL_EIO, "group consumer: %s (%s)",
                          rd_kafka_err2name(m->err),
                          rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
        break;
      }
      rd_kafka_message_destroy(m);
    }
    if (rc == SL_OK && got != 15)
      rc = sl_error_set(err, -ETIMEDOUT, "group consumer (subscribe) read "
                        "%d of 15 committed records", got);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return rc;
}

static int step_fencing(struct check *c, sl_error_t **err) {
  rd_kafka_t *a = NULL, *b = NULL;
  int rc = sl_kc_txn_producer(c->bootstrap, "sl-check-fence", NULL, &a, err);
  if (rc != SL_OK) return rc;
  rc = sl_kc_txn_result(rd_kafka_begin_transaction(a),
                        "rd_kafka_begin_transaction", err);
  if (rc == SL_OK) rc = sl_kc_produce(a, c->topic, 0, "z", 0, 1, false, err);
  if (rc == SL_OK) {
    rd_kafka_flush(a, OP_TIMEOUT_MS);
    rc = sl_kc_txn_producer(c->bootstrap, "sl-check-fence", NULL, &b, err);
  }
  if (rc == SL_OK) {
    rd_kafka_error_t *e = rd_kafka_commit_transaction(a, OP_TIMEOUT_MS);
    if (e == NULL) {
      rc = sl_error_set(err, SL_EIO, "the fenced producer committed");
    } else if (!rd_kafka_error_is_fatal(e)) {
      rc = sl_error_set(err, SL_EIO, "the fenced producer's commit failed "
                        "with %s, not a fatal error",
                        rd_kafka_error_name(e));
      rd_kafka_error_destroy(e);
    } else {
      rd_kafka_error_destroy(e);
    }
  }
  if (b) rd_kafka_destroy(b);
  rd_kafka_destroy(a);
  return rc;
}

static int step_metadata(struct check *c, sl_error_t **err) {
  rd_kafka_t *rk = NULL;
  int rc = sl_kc_new(c->bootstrap, RD_KAFKA_PRODUCER, NULL, &rk, err);
  if (rc != SL_OK) return rc;
  const struct rd_kafka_metadata *md = NULL;
  rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, NULL, &md, OP_TIMEOUT_MS);
  if (e != 0)
    rc = sl_error_set(err, SL_EIO, "metadata: %s", rd_kafka_err2str(e));
  else if (md->broker_cnt < 1)
    rc = sl_error_set(err, SL_EIO, "metadata lists no broker");
  if (md) rd_kafka_metadata_destroy(md);
  rd_kafka_destroy(rk);
  return rc;
}

int sl_kafka_client_check(const char *bootstrap, FILE *out) {
  struct check c = {.bootstrap = bootstrap, .out = out, .failed = 0};
  snprintf(c.topic, sizeof(c.topic), "sl-check-%d-%lld", (int)getpid(),
           (long long)now_ms());
  static const struct {
    const char *name;
    int (*fn)(struct check *, sl_error_t **);
  } steps[SL_KAFKA_CHECK_STEPS] = {
      {"metadata (ApiVersions, Metadata)", step_metadata},
      {"admin: CreateTopics, 2 partitions", step_create_topic},
      {"idempotent produce (InitProducerId, Produce)",
       step_idempotent_produce},
      {"consume via assign(), read_committed (Fetch)", step_read_assigned},
      {"list offsets: watermarks, offsets_for_times (ListOffsets)",
       step_list_offsets},
      {"transaction: init, begin, produce, send_offsets_to_transaction, "
       "commit",
       step_txn_commit},
      {"transaction: begin, produce, abort", step_txn_abort},
      {"read_committed hides the aborted records", step_read_committed_filters},
      {"committed transactional offset and metadata (OffsetFetch)",
       step_marker},
      {"group offset commit (OffsetCommit)", step_group_commit},
      {"group consumer: subscribe() (JoinGroup, SyncGroup, Heartbeat)",
       step_subscribe},
      {"fencing: a second init_transactions fences the first producer",
       step_fencing},
      {"admin: ListConsumerGroups lists a group of offsets only",
       step_list_groups},
      {"admin: DescribeConfigs of a broker (transaction.max.timeout.ms)",
       step_describe_configs},
  };
  for (int i = 0; i < SL_KAFKA_CHECK_STEPS; i++) {
    sl_error_t *err = NULL;
    int rc = steps[i].fn(&c, &err);
    report(&c, steps[i].name, rc, err);
  }
  return c.failed;
}
