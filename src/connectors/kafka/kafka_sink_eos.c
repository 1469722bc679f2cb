/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kafka sink, delivery exactly-once: one Kafka transaction per sink
 * subtask and checkpoint epoch, committed when the checkpoint completes,
 * with the epoch's records kept in the checkpoint as a replay log and a
 * marker committed inside each transaction.  docs/connectors.md ("Kafka
 * sink, exactly-once") is the user's view; this is the design.
 *
 * Transactional ids.  Subtask s owns a pool of K ids "<prefix>-<s>-<k>",
 * k < K (transaction_pool_size), one librdkafka producer each, made by
 * the subtask's committer and lent to its writer: librdkafka can commit a
 * transaction only from the producer instance that began it, and has no
 * call to resume another instance's transaction.  One id holds the epoch
 * being filled (OPEN); the others hold epochs prepared at a barrier and
 * waiting for their checkpoint to complete (PREPARED); the rest are FREE.
 *
 * The marker.  Every transaction also commits, with
 * send_offsets_to_transaction, the offset N (the checkpoint id of its
 * epoch) of partition 0 of the output topic for the consumer group named
 * like the transactional id, with the metadata
 * "sluice:v1;ckpt=N;job=<job>;sink=<uid>".  Committed offsets of a group
 * are read back with read_committed isolation, so the marker is N exactly
 * when the transaction of epoch N committed.  One group per id keeps each
 * marker written by a single transactional id at a time, so it only rises.
 * A slot's group is created ("registered", a transaction holding only the
 * marker 0) before its first epoch, so listing the groups of a prefix
 * (ListConsumerGroups) finds every id that may hold a transaction.
 *
 * The replay log.  The epoch's records (key, value, the partition when it
 * was chosen here) are the committable: the engine keeps it in the
 * checkpoint (operator state sink.committables), so that an epoch whose
 * transaction is gone can be written again.
 *
 *   writer, epoch N (records after barrier N-1):
 *     first record: a FREE id, begin_transaction; every record: produce
 *       and append to the log
 *     prepare(N): flush, check every delivery report, send the marker N;
 *       the committable is {k, records}; the id is PREPARED(N)
 *   commit(N, origin i, {k, records})   (checkpoint N completed)
 *     the id is this subtask's and PREPARED(N): commit_transaction
 *       ok -> OK; retriable -> RETRY (the call resumes); requires abort ->
 *       abort, then replay; fatal (fenced, expired by the broker) -> a new
 *       producer for the id, then as below
 *     otherwise (a restored committable): a producer for "<prefix>-<i>-<k>"
 *       whose init_transactions fences older instances, aborts an open
 *       transaction and waits for one being committed; then the marker:
 *       >= N -> ALREADY; < N -> replay
 *     replay: begin, produce the records, flush, marker N, commit -> OK
 *   recover (after the restored committables): init_transactions on every
 *     id of the subtask (fencing zombies, aborting epochs after the
 *     restored checkpoint) and on every registered id of the old subtasks
 *     it owns (also beyond both parallelisms: an attempt that never
 *     checkpointed), then closes the latter.
 *
 * So a crash between completion and commit, a lost commit reply and a
 * transaction the broker aborted by timeout become a re-send or an
 * ALREADY, never a loss; a marker can only say "committed" for a
 * transaction that committed, so never a duplicate.  Two jobs on one
 * prefix: the marker's job and sink differ -> fail at start; at run time
 * the loser of a fencing war fails with "taken over".
 *
 * Threads: a subtask's writer and committer run on its task's thread; the
 * sink context's table of committers is shared by the subtasks (mutex).
 * Delivery reports are served on the same thread (poll, flush).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "connectors/kafka/kafka_sink_int.h"
#include "core/core.h"
#include "core/inject.h"
#include "sluice/sluice.h"

#define LOG_MAGIC 'K'
#define LOG_VERSION 2u
#define LOG_FIXED 10u /* magic, version, u32 slot, u32 records */
#define MAX_EPOCH_BYTES (512u << 20)
#define NO_KEY UINT32_MAX
#define TXN_TIMEOUT_DEFAULT "900000" /* Kafka's default transaction.max.timeout.ms */

typedef enum { SLOT_FREE = 0, SLOT_OPEN, SLOT_PREPARED } slot_state_t;

typedef struct kslot_s {
  struct keos_committer_s *c;
  uint32_t i, k; /* the id "<prefix>-<i>-<k>" */
  char id[256];
  rd_kafka_t *rk; /* NULL: not started (no init_transactions yet) */
  slot_state_t state;
  uint64_t ckpt; /* PREPARED: the checkpoint of its epoch */
  uint64_t n_sent, n_done;
  bool has_error;
  rd_kafka_resp_err_t err;
  int32_t err_part;
} kslot_t;

typedef struct keos_committer_s {
  sl__ksink_t *s;
  char *prefix, *meta; /* meta: "job=<job>;sink=<uid>" */
  uint32_t j, p;
  kslot_t *own; /* K slots of subtask j */
  uint32_t K;
  kslot_t **other; /* started slots of other ids (restore, recover) */
  uint32_t n_other, cap_other;
  uint32_t (*listed)[2]; /* registered ids (i, k) of the prefix */
  uint32_t n_listed;
  int init_timeout_ms;
  uint32_t next; /* the own id to try first for the next epoch */
} keos_committer_t;

typedef struct keos_writer_s {
  keos_committer_t *c;
  uint32_t *key_idx;
  sl_bytes_t key, val;
  int32_t n_parts;
  uint32_t rr;
  kslot_t *cur; /* the slot of the open epoch, or NULL */
  sl_bytes_t log; /* the open epoch's committable: header, records */
  uint32_t n_log;
} keos_writer_t;

/* ------------------------------------------------------------------ */
/* Slots. */

static void slot_dr(rd_kafka_t *rk, const rd_kafka_message_t *m,
                    void *opaque) {
  (void)rk;
  kslot_t *sl = opaque;
  sl->n_done++;
  if (m->err && !sl->has_error) {
    sl->has_error = true;
    sl->err = m->err;
    sl->err_part = m->partition;
  }
}

static void slot_stop(kslot_t *sl) {
  if (sl->rk) rd_kafka_destroy(sl->rk);
  sl->rk = NULL;
  sl->state = SLOT_FREE;
  sl->n_sent = sl->n_done = 0;
  sl->has_error = false;
}

static bool is_fenced(rd_kafka_resp_err_t e) {
  return e == RD_KAFKA_RESP_ERR__FENCED ||
         e == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
         e == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH ||
         e == RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
}

typedef enum { TXN_OK = 0, TXN_RETRY, TXN_ABORT, TXN_FATAL } txn_class_t;

/* Classify and consume a transactional call's error, with a message
 * "kafka sink: <what> of transactional id '<id>': ..." in *out_err. */
static txn_class_t txn_error(kslot_t *sl, const char *what,
                             rd_kafka_error_t *e, sl_error_t **out_err) {
  if (e == NULL) return TXN_OK;
  rd_kafka_resp_err_t code = rd_kafka_error_code(e);
  txn_class_t cl = rd_kafka_error_is_fatal(e) ? TXN_FATAL
                   : rd_kafka_error_txn_requires_abort(e) ? TXN_ABORT
                   : rd_kafka_error_is_retriable(e)       ? TXN_RETRY
                                                          : TXN_FATAL;
  const char *hint = "";
  if (code == RD_KAFKA_RESP_ERR_INVALID_TRANSACTION_TIMEOUT)
    hint = "; transaction.timeout.ms (a sink property, 900000 by default) "
           "must not exceed the broker's transaction.max.timeout.ms";
  else if (is_fenced(code) || rd_kafka_error_is_fatal(e))
    hint = "; this producer may no longer use the id: the broker aborted "
           "its transaction after transaction.timeout.ms, or another "
           "producer took the id over (another job or sink with the same "
           "transactional_id_prefix, or an older attempt of this job still "
           "running)";
  sl_error_set(out_err, SL_EIO,
               "kafka sink: %s of transactional id '%s' failed: %s (%s)%s",
               what, sl->id, rd_kafka_error_string(e),
               rd_kafka_err2name(code), hint);
  if (cl == TXN_FATAL && out_err && *out_err &&
      code == RD_KAFKA_RESP_ERR_INVALID_TRANSACTION_TIMEOUT)
    sl_error_set_fatal(*out_err, true);
  rd_kafka_error_destroy(e);
  return cl;
}

/* A producer for the slot's id and init_transactions: older instances
 * are fenced, their open transaction aborted, one being committed waited
 * for.  TXN_RETRY when the broker did not answer in time. */
static txn_class_t slot_start(kslot_t *sl, sl_error_t **out_err) {
  keos_committer_t *c = sl->c;
  if (sl->rk) return TXN_OK;
  /* message.timeout.ms bounds a flush (a delivery report that never
   * comes); librdkafka would raise it to transaction.timeout.ms, so it is
   * set to at-least-once's 300 s, or to transaction.timeout.ms when that
   * is shorter (the user's properties still win). */
  long long txn = atoll(TXN_TIMEOUT_DEFAULT);
  for (uint32_t i = 0; i < c->s->n_props; i++)
    if (strcmp(c->s->props[2 * i], "transaction.timeout.ms") == 0)
      txn = atoll(c->s->props[2 * i + 1]);
  char msg_timeout[24]; /* librdkafka wants it <= transaction.timeout.ms */
  snprintf(msg_timeout, sizeof(msg_timeout), "%lld",
           txn > 0 && txn < 300000 ? txn : 300000);
  const char *const extra[][2] = {
      {"transactional.id", sl->id},
      {"transaction.timeout.ms", TXN_TIMEOUT_DEFAULT},
      {"message.timeout.ms", msg_timeout},
  };
  sl->n_sent = sl->n_done = 0;
  sl->has_error = false;
  sl->state = SLOT_FREE;
  int rc = sl__ksink_producer(c->s, extra, 3, slot_dr, sl, &sl->rk, out_err);
  if (rc != SL_OK) return TXN_FATAL;
  txn_class_t cl = txn_error(
      sl, "init_transactions",
      rd_kafka_init_transactions(sl->rk, c->init_timeout_ms), out_err);
  if (cl != TXN_OK) slot_stop(sl);
  return cl == TXN_OK ? TXN_OK : cl == TXN_FATAL ? TXN_FATAL : TXN_RETRY;
}

/* Wait until every record of the slot has its delivery report. */
static int slot_flush(kslot_t *sl, sl_error_t **out_err) {
  while (sl->n_done < sl->n_sent) rd_kafka_flush(sl->rk, 1000);
  if (sl->has_error) {
    sl->has_error = false;
    return sl_error_set(out_err, SL_EIO,
                        "kafka sink: delivery to topic '%s' partition %d "
                        "(transactional id '%s') failed: %s (%s)",
                        sl->c->s->topic, (int)sl->err_part, sl->id,
                        rd_kafka_err2str(sl->err), rd_kafka_err2name(sl->err));
  }
  return SL_OK;
}

static int slot_produce(kslot_t *sl, int32_t part, const void *key,
                        size_t klen, bool has_key, const void *val,
                        size_t vlen, sl_error_t **out_err) {
  static char empty[1];
  void *vp = vlen ? (void *)val : empty;
  void *kp = !has_key ? NULL : klen ? (void *)key : empty;
  for (;;) {
    rd_kafka_resp_err_t e = rd_kafka_producev(
        sl->rk, RD_KAFKA_V_TOPIC(sl->c->s->topic), RD_KAFKA_V_PARTITION(part),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_VALUE(vp, vlen),
        RD_KAFKA_V_KEY(kp, has_key ? klen : 0), RD_KAFKA_V_END);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) break;
    if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
      return sl_error_set(out_err, SL_EIO,
                          "kafka sink: cannot send a record to topic '%s' "
                          "(transactional id '%s'): %s (%s)",
                          sl->c->s->topic, sl->id, rd_kafka_err2str(e),
                          rd_kafka_err2name(e));
    rd_kafka_poll(sl->rk, 100); /* the queue is full: wait for reports */
  }
  sl->n_sent++;
  rd_kafka_poll(sl->rk, 0);
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Markers. */

static void marker_meta(const keos_committer_t *c, uint64_t ckpt, char *buf,
                        size_t size) {
  snprintf(buf, size, "sluice:v1;ckpt=%llu;%s", (unsigned long long)ckpt,
           c->meta);
}

/* The marker of the id (a group of that name): *out_off -1 when none,
 * *out_meta the metadata (caller frees; NULL when none).  stable: after
 * init_transactions on the id, so no transaction of it is pending; a
 * read_committed consumer then asks for stable offsets and would wait
 * (UNSTABLE_OFFSET_COMMIT) for a pending one.  !stable: the offsets
 * committed so far, pending transactions ignored (a lower bound, for
 * committed_max, which must not wait for ids another subtask fences). */
static int marker_read(keos_committer_t *c, const char *id, bool stable,
                       int64_t *out_off, char **out_meta,
                       sl_error_t **out_err) {
  *out_off = -1;
  *out_meta = NULL;
  char errstr[512];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  if (conf == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  const char *const set[][2] = {{"bootstrap.servers", c->s->bootstrap},
                                {"group.id", id},
                                {"isolation.level", stable
                                                        ? "read_committed"
                                                        : "read_uncommitted"},
                                {"enable.auto.commit", "false"},
                                {"log.connection.close", "false"},
                                {"client.id", "sluice"}};
  for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++)
    if (rd_kafka_conf_set(conf, set[i][0], set[i][1], errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return sl_error_set(out_err, SL_EINVAL, "kafka sink: %s", errstr);
    }
  rd_kafka_conf_set_log_cb(conf, sl__ksink_log_quiet);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr,
                                sizeof(errstr));
  if (rk == NULL) {
    rd_kafka_conf_destroy(conf);
    return sl_error_set(out_err, SL_EINVAL, "kafka sink: %s", errstr);
  }
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(l, c->s->topic, 0);
  rd_kafka_resp_err_t e = rd_kafka_committed(rk, l, c->init_timeout_ms);
  if (e == RD_KAFKA_RESP_ERR_NO_ERROR) e = l->elems[0].err;
  int rc = SL_OK;
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rc = sl_error_set(out_err, SL_EIO,
                      "kafka sink: cannot read the marker of transactional "
                      "id '%s' (the committed offset of group '%s' for "
                      "topic '%s' partition 0): %s (%s)",
                      id, id, c->s->topic, rd_kafka_err2str(e),
                      rd_kafka_err2name(e));
  } else if (l->elems[0].offset >= 0) {
    *out_off = l->elems[0].offset;
    if (l->elems[0].metadata_size) {
      *out_meta = sl_strndup(l->elems[0].metadata,
                             l->elems[0].metadata_size);
      if (*out_meta == NULL)
        rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
  }
  rd_kafka_topic_partition_list_destroy(l);
  rd_kafka_destroy(rk);
  return rc;
}

/* The marker belongs to this job and sink (or there is none). */
static int marker_owner(keos_committer_t *c, const char *id,
                        const char *meta, sl_error_t **out_err) {
  if (meta == NULL) return SL_OK;
  const char *p = strncmp(meta, "sluice:v1;ckpt=", 15) == 0
                      ? strchr(meta + 15, ';')
                      : NULL;
  if (p && strcmp(p + 1, c->meta) == 0) return SL_OK;
  int rc = sl_error_set(out_err, SL_EINVAL,
                        "kafka sink: transactional id '%s' is used by "
                        "another job or sink: its marker (group '%s') says "
                        "'%s', this sink is '%s'; two jobs or sinks must not "
                        "share a transactional_id_prefix ('%s')",
                        id, id, meta, c->meta, c->prefix);
  if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
  return rc;
}

/* send_offsets_to_transaction of the marker ckpt, retried with the same
 * offsets while retriable (as rdkafka.h requires). */
static txn_class_t marker_send(kslot_t *sl, uint64_t ckpt,
                               sl_error_t **out_err) {
  keos_committer_t *c = sl->c;
  char meta[600];
  marker_meta(c, ckpt, meta, sizeof(meta));
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_t *tp =
      rd_kafka_topic_partition_list_add(l, c->s->topic, 0);
  tp->offset = (int64_t)ckpt;
  tp->metadata = sl_strdup(meta);
  if (tp->metadata == NULL) {
    rd_kafka_topic_partition_list_destroy(l);
    sl_error_set(out_err, SL_ENOMEM, "out of memory");
    return TXN_FATAL;
  }
  tp->metadata_size = strlen(meta);
  rd_kafka_consumer_group_metadata_t *g =
      rd_kafka_consumer_group_metadata_new(sl->id);
  txn_class_t cl = TXN_RETRY;
  for (int tries = 0; cl == TXN_RETRY && tries < 10; tries++) {
    if (tries && out_err) {
      sl_error_destroy(*out_err);
      *out_err = NULL;
    }
    cl = txn_error(sl, "sending the marker",
                   rd_kafka_send_offsets_to_transaction(sl->rk, l, g,
                                                        c->init_timeout_ms),
                   out_err);
  }
  rd_kafka_consumer_group_metadata_destroy(g);
  /* librdkafka frees metadata with free(); it was ours: take it back. */
  sl_free(tp->metadata);
  tp->metadata = NULL;
  tp->metadata_size = 0;
  rd_kafka_topic_partition_list_destroy(l);
  return cl;
}

/* ------------------------------------------------------------------ */
/* The committer. */

/* The slot of id "<prefix>-<i>-<k>" among the other slots, added when
 * absent. */
static kslot_t *other_slot_named(keos_committer_t *c, const char *prefix,
                                 uint32_t i, uint32_t k) {
  char id[256];
  snprintf(id, sizeof(id), "%s-%u-%u", prefix, i, k);
  for (uint32_t n = 0; n < c->n_other; n++)
    if (strcmp(c->other[n]->id, id) == 0) return c->other[n];
  if (c->n_other == c->cap_other) {
    uint32_t cap = c->cap_other ? 2 * c->cap_other : 8;
    kslot_t **o = sl_realloc(c->other, cap * sizeof(*o));
    if (o == NULL) return NULL;
    c->other = o;
    c->cap_other = cap;
  }
  kslot_t *sl = sl_calloc(1, sizeof(*sl));
  if (sl == NULL) return NULL;
  sl->c = c;
  sl->i = i;
  sl->k = k;
  snprintf(sl->id, sizeof(sl->id), "%s", id);
  c->other[c->n_other++] = sl;
  return sl;
}

static kslot_t *other_slot(keos_committer_t *c, uint32_t i, uint32_t k) {
  return other_slot_named(c, c->prefix, i, k);
}

static kslot_t *slot_of(keos_committer_t *c, uint32_t i, uint32_t k) {
  if (i == c->j && k < c->K) return &c->own[k];
  return other_slot(c, i, k);
}

/* The registered ids of the prefix, from ListConsumerGroups. */
static int list_ids(keos_committer_t *c, sl_error_t **out_err) {
  rd_kafka_t *rk = NULL;
  int rc = sl__ksink_producer(c->s, NULL, 0, slot_dr, NULL, &rk, out_err);
  if (rc != SL_OK) return rc;
  /* The servers and the topic first, with the messages of at-least-once
   * and within the sink's timeout. */
  int32_t parts;
  if ((rc = sl__ksink_partitions(c->s, rk, &parts, out_err)) != SL_OK) {
    rd_kafka_destroy(rk);
    return rc;
  }
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t *o =
      rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS);
  char errstr[256];
  rd_kafka_AdminOptions_set_request_timeout(o, c->init_timeout_ms, errstr,
                                            sizeof(errstr));
  rd_kafka_ListConsumerGroups(rk, o, q);
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, c->init_timeout_ms + 5000);
  const rd_kafka_ListConsumerGroups_result_t *res =
      ev ? rd_kafka_event_ListConsumerGroups_result(ev) : NULL;
  if (ev == NULL || rd_kafka_event_error(ev) || res == NULL) {
    rc = sl_error_set(out_err, SL_EIO,
                      "kafka sink: cannot list the consumer groups at %s "
                      "(to find the transactional ids of prefix '%s'): %s",
                      c->s->bootstrap, c->prefix,
                      ev ? rd_kafka_event_error_string(ev) : "timed out");
  } else {
    size_t n = 0, n_err = 0;
    const rd_kafka_error_t **errs =
        rd_kafka_ListConsumerGroups_result_errors(res, &n_err);
    if (n_err)
      /* A broker that did not answer: its groups would be missed (ids
       * left unfenced, a lower committed_max). */
      rc = sl_error_set(out_err, SL_EIO,
                        "kafka sink: listing the consumer groups at %s (to "
                        "find the transactional ids of prefix '%s') failed "
                        "on %zu broker(s): %s",
                        c->s->bootstrap, c->prefix, n_err,
                        rd_kafka_error_string(errs[0]));
    const rd_kafka_ConsumerGroupListing_t **gl =
        rd_kafka_ListConsumerGroups_result_valid(res, &n);
    size_t plen = strlen(c->prefix);
    for (size_t g = 0; g < n && rc == SL_OK; g++) {
      const char *name = rd_kafka_ConsumerGroupListing_group_id(gl[g]);
      unsigned i, k;
      char tail;
      if (strncmp(name, c->prefix, plen) != 0 || name[plen] != '-' ||
          sscanf(name + plen + 1, "%u-%u%c", &i, &k, &tail) != 2)
        continue;
      char back[256];
      snprintf(back, sizeof(back), "%s-%u-%u", c->prefix, i, k);
      if (strcmp(back, name) != 0) continue;
      uint32_t(*l)[2] =
          sl_realloc(c->listed, (c->n_listed + 1) * sizeof(*c->listed));
      if (l == NULL) {
        rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
        break;
      }
      c->listed = l;
      c->listed[c->n_listed][0] = i;
      c->listed[c->n_listed][1] = k;
      c->n_listed++;
    }
  }
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_AdminOptions_destroy(o);
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(rk);
  return rc;
}

static void committer_close(void *cm) {
  keos_committer_t *c = cm;
  if (c == NULL) return;
  sl__ksink_t *s = c->s;
  pthread_mutex_lock(&s->mu);
  if (c->j < s->n_subs && s->subs[c->j] == c) s->subs[c->j] = NULL;
  pthread_mutex_unlock(&s->mu);
  for (uint32_t k = 0; c->own && k < c->K; k++) slot_stop(&c->own[k]);
  for (uint32_t n = 0; n < c->n_other; n++) {
    slot_stop(c->other[n]);
    sl_free(c->other[n]);
  }
  sl_free(c->other);
  sl_free(c->own);
  sl_free(c->listed);
  sl_free(c->prefix);
  sl_free(c->meta);
  sl_free(c);
}

static int committer_open(void *ctx, const sl_committer_init_t *init,
                          void **out, sl_error_t **out_err) {
  sl__ksink_t *s = ctx;
  keos_committer_t *c = sl_calloc(1, sizeof(*c));
  if (c == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  c->s = s;
  c->j = init->subtask;
  c->p = init->parallelism;
  c->K = s->pool_size;
  c->init_timeout_ms = s->timeout_ms > 30000 ? s->timeout_ms : 30000;
  char buf[600];
  if (s->txn_prefix)
    snprintf(buf, sizeof(buf), "%s", s->txn_prefix);
  else
    snprintf(buf, sizeof(buf), "sluice-%s-%s", init->job, init->uid);
  int rc = SL_OK;
  if (strlen(buf) > 200) {
    rc = sl_error_set(out_err, SL_EINVAL,
                      "kafka sink: the transactional id prefix '%s' (made "
                      "of the job's name and the sink's uid) is longer than "
                      "200 characters; set transactional_id_prefix",
                      buf);
    goto fail;
  }
  c->prefix = sl_strdup(buf);
  snprintf(buf, sizeof(buf), "job=%s;sink=%s", init->job, init->uid);
  c->meta = sl_strdup(buf);
  c->own = sl_calloc(c->K, sizeof(kslot_t));
  if (c->prefix == NULL || c->meta == NULL || c->own == NULL) {
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
    goto fail;
  }
  for (uint32_t k = 0; k < c->K; k++) {
    c->own[k].c = c;
    c->own[k].i = c->j;
    c->own[k].k = k;
    snprintf(c->own[k].id, sizeof(c->own[k].id), "%s-%u-%u", c->prefix,
             c->j, k);
  }
  if ((rc = list_ids(c, out_err)) != SL_OK) goto fail;
  pthread_mutex_lock(&s->mu);
  if (c->j >= s->n_subs) {
    struct keos_committer_s **t =
        sl_realloc(s->subs, (c->j + 1) * sizeof(*t));
    if (t == NULL) {
      pthread_mutex_unlock(&s->mu);
      rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
      goto fail;
    }
    for (uint32_t n = s->n_subs; n <= c->j; n++) t[n] = NULL;
    s->subs = t;
    s->n_subs = c->j + 1;
  }
  s->subs[c->j] = c;
  pthread_mutex_unlock(&s->mu);
  *out = c;
  return SL_OK;
fail:
  committer_close(c);
  return rc;
}

/* Parse a committable (format in kafka_sink_int.h), checking every
 * bound; its records are then read with sl__kafka_eos_log_record. */
int sl__kafka_eos_log_parse(const uint8_t *b, size_t len, sl__klog_t *out) {
  if (len < LOG_FIXED + 4 || b[0] != LOG_MAGIC || b[1] != LOG_VERSION)
    return SL_ECORRUPT;
  out->slot = sl__get_u32le(b + 2);
  out->n = sl__get_u32le(b + 6);
  size_t off = LOG_FIXED;
  for (int f = 0; f < 2; f++) {
    if (len - off < 2) return SL_ECORRUPT;
    size_t l = (size_t)b[off] | (size_t)b[off + 1] << 8;
    off += 2;
    if (len - off < l) return SL_ECORRUPT;
    if (f == 0) out->prefix = (const char *)b + off, out->prefix_len = l;
    else out->topic = (const char *)b + off, out->topic_len = l;
    off += l;
  }
  out->rec = b + off;
  for (uint32_t r = 0; r < out->n; r++) {
    if (len - off < 4) return SL_ECORRUPT;
    uint32_t kl = sl__get_u32le(b + off);
    off += 4;
    if (kl != NO_KEY) {
      if (len - off < kl) return SL_ECORRUPT;
      off += kl;
    }
    if (len - off < 8) return SL_ECORRUPT;
    uint32_t vl = sl__get_u32le(b + off);
    off += 4;
    if (len - off - 4 < vl) return SL_ECORRUPT;
    off += (size_t)vl;
    if ((int32_t)sl__get_u32le(b + off) < -1) return SL_ECORRUPT;
    off += 4;
  }
  return off == len ? SL_OK : SL_ECORRUPT;
}

const uint8_t *sl__kafka_eos_log_record(const uint8_t *rec, sl__klog_rec_t *r) {
  uint32_t kl = sl__get_u32le(rec);
  rec += 4;
  r->has_key = kl != NO_KEY;
  r->key = rec;
  r->klen = r->has_key ? kl : 0;
  rec += r->klen;
  r->vlen = sl__get_u32le(rec);
  r->val = rec + 4;
  rec += 4 + r->vlen;
  r->part = (int32_t)sl__get_u32le(rec);
  return rec + 4;
}

/* Write the records of a committable again in a new transaction of the
 * (started, FREE) slot, with the marker ckpt, and commit it. */
static txn_class_t replay(kslot_t *sl, uint64_t ckpt, uint32_t n,
                          const uint8_t *rec, sl_error_t **out_err) {
  txn_class_t cl =
      txn_error(sl, "begin_transaction (replay of checkpoint)",
                rd_kafka_begin_transaction(sl->rk), out_err);
  if (cl != TXN_OK) return cl;
  sl->state = SLOT_OPEN;
  for (uint32_t i = 0; i < n; i++) {
    sl__klog_rec_t r;
    rec = sl__kafka_eos_log_record(rec, &r);
    if (slot_produce(sl, r.part, r.key, r.klen, r.has_key, r.val, r.vlen,
                     out_err) != SL_OK)
      return TXN_ABORT;
  }
  if (slot_flush(sl, out_err) != SL_OK) return TXN_ABORT;
  if ((cl = marker_send(sl, ckpt, out_err)) != TXN_OK) return cl;
  cl = txn_error(sl, "commit_transaction (replay)",
                 rd_kafka_commit_transaction(sl->rk, sl->c->init_timeout_ms),
                 out_err);
  if (cl == TXN_OK) sl->state = SLOT_FREE;
  return cl;
}

/* The restored path: fence the id, read its marker, replay if needed.
 * A failure leaves the slot stopped, so that the next try starts over. */
static int commit_by_marker(keos_committer_t *c, kslot_t *sl, uint64_t ckpt,
                            uint32_t n, const uint8_t *rec,
                            sl_commit_status_t *st, sl_error_t **out_err) {
  txn_class_t cl = slot_start(sl, out_err);
  if (cl != TXN_OK) {
    *st = cl == TXN_FATAL ? SL_COMMIT_FATAL : SL_COMMIT_RETRY;
    return cl == TXN_FATAL ? SL_EIO : SL_OK;
  }
  int64_t off;
  char *meta;
  int rc = marker_read(c, sl->id, true, &off, &meta, out_err);
  if (rc != SL_OK) {
    slot_stop(sl);
    *st = SL_COMMIT_RETRY;
    return rc == SL_ENOMEM ? rc : SL_OK;
  }
  rc = marker_owner(c, sl->id, meta, out_err);
  sl_free(meta);
  if (rc != SL_OK) {
    *st = SL_COMMIT_FATAL;
    return rc;
  }
  if (off < 0) {
    /* Every id is registered (marker 0) before its first epoch and used
     * round robin, so its marker is refreshed at every few checkpoints:
     * no marker means the group's offsets expired (the job was down
     * longer than the broker's offsets.retention.minutes) or were
     * deleted.  Whether epoch ckpt committed is then unknown: refuse
     * rather than guess (a replay could duplicate it, ALREADY lose it). */
    slot_stop(sl);
    *st = SL_COMMIT_FATAL;
    int rc2 = sl_error_set(out_err, SL_EIO,
                           "kafka sink: the marker of transactional id '%s' "
                           "(consumer group '%s') is gone, so whether the "
                           "epoch of checkpoint %llu was committed cannot be "
                           "told: consumer group offsets expire after the "
                           "broker's offsets.retention.minutes (was the job "
                           "down longer?) or the group was deleted.  Check "
                           "topic '%s' for that epoch's records, then "
                           "restore another checkpoint or start afresh",
                           sl->id, sl->id, (unsigned long long)ckpt,
                           c->s->topic);
    if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
    return rc2;
  }
  if ((uint64_t)off >= ckpt) {
    *st = SL_COMMIT_ALREADY;
    return SL_OK;
  }
  cl = replay(sl, ckpt, n, rec, out_err);
  if (cl == TXN_OK) {
    *st = SL_COMMIT_OK;
    return SL_OK;
  }
  slot_stop(sl);
  *st = cl == TXN_FATAL ? SL_COMMIT_FATAL : SL_COMMIT_RETRY;
  return cl == TXN_FATAL ? SL_EIO : SL_OK;
}

static int committer_commit(void *cm, uint64_t ckpt, uint32_t origin,
                            const uint8_t *bytes, size_t len,
                            uint32_t attempt, sl_commit_status_t *st,
                            sl_error_t **out_err) {
  (void)attempt;
  keos_committer_t *c = cm;
  sl__klog_t lg;
  *st = SL_COMMIT_FATAL;
  if (sl__kafka_eos_log_parse(bytes, len, &lg) != SL_OK)
    return sl_error_set(out_err, SL_CORRUPT("malformed kafka committable"),
                        "kafka sink: the committable of checkpoint %llu "
                        "(subtask %u) is malformed",
                        (unsigned long long)ckpt, origin);
  if (lg.topic_len != strlen(c->s->topic) ||
      memcmp(lg.topic, c->s->topic, lg.topic_len) != 0) {
    int rc = sl_error_set(out_err, SL_EINVAL,
                          "kafka sink: the epoch of checkpoint %llu (subtask "
                          "%u) was written for topic '%.*s', and the sink now "
                          "writes topic '%s': its records cannot be "
                          "committed to the new topic; restore with the old "
                          "topic, or start afresh",
                          (unsigned long long)ckpt, origin,
                          (int)lg.topic_len, lg.topic, c->s->topic);
    if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
    return rc;
  }
  kslot_t *sl;
  if (lg.prefix_len == strlen(c->prefix) &&
      memcmp(lg.prefix, c->prefix, lg.prefix_len) == 0) {
    sl = slot_of(c, origin, lg.slot);
  } else {
    /* The prefix changed since: the epoch is on an id of the old one. */
    char old[256];
    snprintf(old, sizeof(old), "%.*s", (int)lg.prefix_len, lg.prefix);
    sl = other_slot_named(c, old, origin, lg.slot);
  }
  if (sl == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  if (sl->rk && sl->state == SLOT_PREPARED && sl->ckpt == ckpt) {
    txn_class_t cl = txn_error(
        sl, "commit_transaction",
        rd_kafka_commit_transaction(sl->rk, c->init_timeout_ms), out_err);
    if (cl == TXN_OK) {
      sl->state = SLOT_FREE;
      int rc = SL_INJECT("kafka.sink.after_commit_transaction");
      if (rc != SL_OK)
        return sl_error_set(out_err, rc, "injected failure at "
                            "kafka.sink.after_commit_transaction");
      *st = SL_COMMIT_OK;
      return SL_OK;
    }
    if (cl == TXN_RETRY) { /* commit_transaction resumes when called again */
      *st = SL_COMMIT_RETRY;
      return SL_OK;
    }
    /* Aborted (the broker expired it, or it requires an abort) or fenced.
     * Not here: the records of later epochs are in the log already, and
     * writing this epoch again now would put it after them (a key's
     * updates out of order); and fencing the id again could fence a newer
     * attempt.  The task fails; the restore writes the epochs again in
     * order (restore path below). */
    if (out_err && *out_err)
      sl_error_prefix(*out_err, "the epoch of checkpoint %llu was not "
                      "committed; it is written again from the checkpoint "
                      "after a restart", (unsigned long long)ckpt);
    slot_stop(sl);
    *st = SL_COMMIT_RESTART;
    return SL_OK;
  }
  if (sl->state != SLOT_FREE)
    return sl_error_set(out_err, SL_ESTATE,
                        "kafka sink: transactional id '%s' holds the epoch "
                        "of checkpoint %llu, not %llu",
                        sl->id, (unsigned long long)sl->ckpt,
                        (unsigned long long)ckpt);
  return commit_by_marker(c, sl, ckpt, lg.n, lg.rec, st, out_err);
}

/* Start one of the subtask's own ids: fence, check the owner of its
 * marker, register it (a marker 0) when it has none. */
static int own_start(keos_committer_t *c, kslot_t *sl, sl_error_t **out_err) {
  if (sl->rk) return SL_OK;
  /* A registered id: check its owner before fencing it (fencing aborts
   * the owner's open transaction), from the offsets committed so far. */
  for (uint32_t n = 0; n < c->n_listed; n++) {
    if (c->listed[n][0] != sl->i || c->listed[n][1] != sl->k) continue;
    int64_t off0;
    char *meta0;
    int rc0 = marker_read(c, sl->id, false, &off0, &meta0, out_err);
    if (rc0 == SL_OK) rc0 = marker_owner(c, sl->id, meta0, out_err);
    sl_free(meta0);
    if (rc0 != SL_OK) return rc0;
    break;
  }
  txn_class_t cl = slot_start(sl, out_err);
  if (cl != TXN_OK) return SL_EIO;
  int64_t off;
  char *meta;
  int rc = marker_read(c, sl->id, true, &off, &meta, out_err);
  if (rc == SL_OK) rc = marker_owner(c, sl->id, meta, out_err);
  sl_free(meta);
  if (rc == SL_OK && off < 0) {
    cl = txn_error(sl, "begin_transaction (registration)",
                   rd_kafka_begin_transaction(sl->rk), out_err);
    if (cl == TXN_OK) cl = marker_send(sl, 0, out_err);
    if (cl == TXN_OK)
      cl = txn_error(sl, "commit_transaction (registration)",
                     rd_kafka_commit_transaction(sl->rk, c->init_timeout_ms),
                     out_err);
    if (cl != TXN_OK) rc = SL_EIO;
  }
  if (rc != SL_OK) slot_stop(sl);
  return rc;
}

static bool is_owned(const keos_committer_t *c, uint32_t i) {
  return i % c->p == c->j;
}

static int committer_recover(void *cm, sl_error_t **out_err) {
  keos_committer_t *c = cm;
  int rc = SL_OK;
  for (uint32_t k = 0; rc == SL_OK && k < c->K; k++)
    rc = own_start(c, &c->own[k], out_err);
  /* Every registered id of an owned subtask beyond the own pool: the old
   * subtasks of a larger parallelism (recorded or not), a larger pool. */
  for (uint32_t n = 0; rc == SL_OK && n < c->n_listed; n++) {
    uint32_t i = c->listed[n][0], k = c->listed[n][1];
    if (!is_owned(c, i) || (i == c->j && k < c->K)) continue;
    kslot_t *sl = other_slot(c, i, k);
    if (sl == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    if (sl->rk == NULL && slot_start(sl, out_err) != TXN_OK) rc = SL_EIO;
  }
  for (uint32_t n = 0; n < c->n_other; n++) slot_stop(c->other[n]);
  return rc;
}

static int committed_max(void *cm, uint64_t *out_ckpt, sl_bytes_t *evidence,
                         sl_error_t **out_err) {
  keos_committer_t *c = cm;
  *out_ckpt = 0;
  char best[256] = "";
  for (uint32_t n = 0; n < c->n_listed; n++) {
    char id[256];
    snprintf(id, sizeof(id), "%s-%u-%u", c->prefix, c->listed[n][0],
             c->listed[n][1]);
    int64_t off;
    char *meta;
    int rc = marker_read(c, id, false, &off, &meta, out_err);
    if (rc != SL_OK) return rc;
    bool mine = marker_owner(c, id, meta, NULL) == SL_OK;
    sl_free(meta);
    if (mine && off > 0 && (uint64_t)off > *out_ckpt) {
      *out_ckpt = (uint64_t)off;
      snprintf(best, sizeof(best), "%s", id);
    }
  }
  if (*out_ckpt) {
    char buf[600];
    int m = snprintf(buf, sizeof(buf),
                     "the marker of transactional id '%s' (group '%s', "
                     "topic '%s' partition 0) is checkpoint %llu",
                     best, best, c->s->topic,
                     (unsigned long long)*out_ckpt);
    if (m > 0) sl_bytes_append(evidence, buf, (size_t)m);
  }
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* The writer. */

static int writer_close(void *wr, bool is_success, sl_error_t **out_err) {
  keos_writer_t *w = wr;
  int rc = SL_OK;
  /* The engine prepares the last epoch at the final checkpoint, so a
   * successful end has no open epoch with rows; if it had, say so rather
   * than drop them silently. */
  if (is_success && w->cur && w->n_log)
    rc = sl_error_set(out_err, SL_ESTATE,
                      "kafka sink: %u records of subtask %u were written "
                      "after the last checkpoint and are not committed",
                      w->n_log, w->c->j);
  if (w->cur) {
    /* Rows after the last prepare are never committed (sl_connector.h). */
    /* Abort now so that read_committed readers are not held back until
     * the broker's timeout; briefly: the next attempt's init_transactions
     * aborts it anyway. */
    rd_kafka_error_t *e = rd_kafka_abort_transaction(w->cur->rk, 5000);
    if (e) {
      rd_kafka_error_destroy(e);
      slot_stop(w->cur);
    } else {
      w->cur->state = SLOT_FREE;
    }
    w->cur = NULL;
  }
  sl_bytes_close(&w->key);
  sl_bytes_close(&w->val);
  sl_bytes_close(&w->log);
  sl_free(w->key_idx);
  sl_free(w);
  return rc;
}

static int writer_open(void *ctx, const sl_sink_init_t *init, void **out,
                       sl_error_t **out_err) {
  sl__ksink_t *s = ctx;
  keos_committer_t *c = NULL;
  pthread_mutex_lock(&s->mu);
  if (init->subtask < s->n_subs) c = s->subs[init->subtask];
  pthread_mutex_unlock(&s->mu);
  if (c == NULL)
    return sl_error_set(out_err, SL_ESTATE,
                        "kafka sink: the writer of subtask %u opened before "
                        "its committer", init->subtask);
  keos_writer_t *w = sl_calloc(1, sizeof(*w));
  if (w == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  w->c = c;
  w->rr = init->subtask;
  sl_bytes_init(&w->key);
  sl_bytes_init(&w->val);
  sl_bytes_init(&w->log);
  int rc = sl__ksink_key_idx(s, init->schema, &w->key_idx, out_err);
  if (rc == SL_OK) rc = own_start(c, &c->own[0], out_err);
  if (rc == SL_OK)
    rc = sl__ksink_partitions(s, c->own[0].rk, &w->n_parts, out_err);
  if (rc != SL_OK) {
    writer_close(w, false, NULL);
    return rc;
  }
  *out = w;
  return SL_OK;
}

/* A FREE id for a new epoch, started, with its transaction begun. */
static int epoch_begin(keos_writer_t *w, sl_error_t **out_err) {
  keos_committer_t *c = w->c;
  /* Round robin over the free ids, so that every id commits often and
   * its marker never ages towards the broker's offsets retention (an
   * absent marker is then proof of a long outage; see commit_by_marker). */
  kslot_t *sl = NULL;
  for (uint32_t n = 0; n < c->K && sl == NULL; n++) {
    kslot_t *cand = &c->own[(c->next + n) % c->K];
    if (cand->state == SLOT_FREE) sl = cand;
  }
  if (sl) c->next = (sl->k + 1) % c->K;
  if (sl == NULL)
    return sl_error_set(out_err, SL_EAGAIN,
                        "kafka sink: all %u transactional ids of subtask %u "
                        "hold epochs waiting for their checkpoints to "
                        "complete (checkpoints keep failing); raise "
                        "transaction_pool_size or find why checkpoints do "
                        "not complete",
                        c->K, c->j);
  int rc = own_start(c, sl, out_err);
  if (rc != SL_OK) return rc;
  if (txn_error(sl, "begin_transaction", rd_kafka_begin_transaction(sl->rk),
                out_err) != TXN_OK) {
    slot_stop(sl);
    return SL_EIO;
  }
  sl->state = SLOT_OPEN;
  w->cur = sl;
  w->n_log = 0;
  w->log.len = 0;
  uint8_t fixed[LOG_FIXED] = {0};
  const char *f[2] = {c->prefix, c->s->topic};
  rc = sl_bytes_append(&w->log, fixed, sizeof(fixed));
  for (int i = 0; rc == SL_OK && i < 2; i++) {
    size_t l = strlen(f[i]);
    uint8_t l2[2] = {(uint8_t)(l & 0xff), (uint8_t)(l >> 8)};
    rc = sl_bytes_append(&w->log, l2, 2);
    if (rc == SL_OK) rc = sl_bytes_append(&w->log, f[i], l);
  }
  return rc == SL_OK ? SL_OK
                     : sl_error_set(out_err, SL_ENOMEM, "out of memory");
}

static int log_u32(sl_bytes_t *b, uint32_t v) {
  uint8_t x[4];
  sl__put_u32le(x, v);
  return sl_bytes_append(b, x, 4);
}

static int writer_write(void *wr, const sl_row_t *row, sl_error_t **out_err) {
  keos_writer_t *w = wr;
  sl__ksink_t *s = w->c->s;
  int rc;
  if (w->cur == NULL && (rc = epoch_begin(w, out_err)) != SL_OK) return rc;
  kslot_t *sl = w->cur;
  if (sl->has_error) return slot_flush(sl, out_err);
  rc = sl__ksink_format(s, w->key_idx, row, &w->key, &w->val, out_err);
  if (rc != SL_OK) return rc;
  int32_t part = RD_KAFKA_PARTITION_UA;
  if (s->n_key == 0) part = (int32_t)(w->rr++ % (uint32_t)w->n_parts);
  if ((rc = log_u32(&w->log, s->n_key ? (uint32_t)w->key.len : NO_KEY)) ||
      (s->n_key && (rc = sl_bytes_append(&w->log, w->key.data,
                                         w->key.len))) ||
      (rc = log_u32(&w->log, (uint32_t)w->val.len)) ||
      (rc = sl_bytes_append(&w->log, w->val.data, w->val.len)) ||
      (rc = log_u32(&w->log, (uint32_t)part)))
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  w->n_log++;
  if (w->log.len > MAX_EPOCH_BYTES) {
    rc = sl_error_set(out_err, SL_EOVERFLOW,
                      "kafka sink: the records of one checkpoint epoch of "
                      "subtask %u exceed %u MiB; the exactly-once sink keeps "
                      "them in memory and in the checkpoint until the "
                      "checkpoint completes: lower checkpoint.interval_ms",
                      w->c->j, MAX_EPOCH_BYTES >> 20);
    if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
    return rc;
  }
  return slot_produce(sl, part, w->key.data, w->key.len, s->n_key != 0,
                      w->val.data, w->val.len, out_err);
}

static int writer_flush(void *wr, sl_error_t **out_err) {
  keos_writer_t *w = wr;
  return w->cur ? slot_flush(w->cur, out_err) : SL_OK;
}

static int writer_prepare(void *wr, uint64_t ckpt, sl_bytes_t *out,
                          sl_error_t **out_err) {
  keos_writer_t *w = wr;
  kslot_t *sl = w->cur;
  if (sl == NULL) return SL_OK; /* no records: no transaction */
  int rc = slot_flush(sl, out_err);
  if (rc != SL_OK) return rc;
  if (marker_send(sl, ckpt, out_err) != TXN_OK) return SL_EIO;
  w->log.data[0] = LOG_MAGIC;
  w->log.data[1] = LOG_VERSION;
  sl__put_u32le(w->log.data + 2, sl->k);
  sl__put_u32le(w->log.data + 6, w->n_log);
  if (sl_bytes_append(out, w->log.data, w->log.len) != SL_OK)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  sl->state = SLOT_PREPARED;
  sl->ckpt = ckpt;
  w->cur = NULL;
  w->log.len = 0;
  w->n_log = 0;
  return SL_OK;
}

const sl_sink_vt_t sl__kafka_eos_vt = {
    .type_name = "kafka",
    .writer_open = writer_open,
    .write = writer_write,
    .flush = writer_flush,
    .writer_close = writer_close,
    .destroy = sl__ksink_destroy,
    .prepare = writer_prepare,
    .committer_open = committer_open,
    .commit = committer_commit,
    .recover = committer_recover,
    .committer_close = committer_close,
    .committed_max = committed_max,
};
