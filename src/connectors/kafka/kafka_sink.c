/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kafka sink (librdkafka), delivery at-least-once.
 *
 * One idempotent producer (enable.idempotence=true: a retried batch is
 * written once, in order per partition) per writer subtask.  A row becomes
 * one record: the value is the row formatted by the file sink's formatters
 * (sl_json_format, sl_csv_format) without the line end, the key the text of
 * the key fields.  Keyed records are placed by librdkafka's partitioner
 * murmur2_random, which for a non-null key is the Java client's default
 * partitioner ((murmur2(key) & 0x7fffffff) % partitions), so Java and other
 * clients agree with sluice on a key's partition; without key fields the
 * writer picks partitions round robin over the partitions it saw at open.
 *
 * The guarantee.  The producer's delivery reports are served on the
 * writer's own thread (rd_kafka_poll / rd_kafka_flush); the writer counts
 * records sent and reports received.  flush (called before the snapshot
 * of every checkpoint and when the input ends) waits until every record
 * has its report, and fails the task if any report carried an error,
 * naming topic, partition and the error: a completed checkpoint never
 * covers a record the broker did not acknowledge (acks=all, which
 * idempotence implies).  After a failure the job restores the last
 * completed checkpoint and the rows after it are sent again: duplicates,
 * never a loss.  A record whose report never comes fails at librdkafka's
 * message.timeout.ms (300 s by default), so flush ends.
 */
#include <stdio.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "connectors/kafka/kafka_conf.h"
#include "connectors/kafka/kafka_sink_int.h"
#include "sluice/sluice.h"

typedef sl__ksink_t ksink_t;

typedef struct kwriter_s {
  ksink_t *s;
  rd_kafka_t *rk;
  rd_kafka_topic_t *rkt;
  int32_t n_parts;
  uint32_t rr;       /* next round-robin partition */
  uint32_t *key_idx; /* the key fields' indexes in the schema */
  sl_bytes_t val, key;
  uint64_t n_sent, n_done;
  /* The first failed delivery report since the last flush. */
  bool has_error;
  int32_t err_part;
  rd_kafka_resp_err_t err;
} kwriter_t;

void sl__ksink_log_quiet(const rd_kafka_t *rk, int level, const char *fac,
                         const char *buf) {
  (void)rk, (void)level, (void)fac, (void)buf;
}

/* Served on the writer's thread by rd_kafka_poll and rd_kafka_flush. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m,
                        void *opaque) {
  (void)rk;
  kwriter_t *w = opaque;
  w->n_done++;
  if (m->err && !w->has_error) {
    w->has_error = true;
    w->err = m->err;
    w->err_part = m->partition;
  }
}

static int delivery_error(kwriter_t *w, sl_error_t **out_err) {
  w->has_error = false;
  return sl_error_set(out_err, SL_EIO,
                      "kafka sink: delivery to topic '%s' partition %d "
                      "failed: %s (%s)",
                      w->s->topic, (int)w->err_part, rd_kafka_err2str(w->err),
                      rd_kafka_err2name(w->err));
}

int sl__ksink_producer(const sl__ksink_t *s, const char *const (*extra)[2],
                       size_t n_extra,
                       void (*dr)(rd_kafka_t *, const rd_kafka_message_t *,
                                  void *),
                       void *opaque, rd_kafka_t **out_rk,
                       sl_error_t **out_err) {
  char errstr[512];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  if (conf == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  const char *const set[][2] = {
      {"bootstrap.servers", s->bootstrap},
      {"enable.idempotence", "true"},
      {"partitioner", "murmur2_random"},
      {"allow.auto.create.topics", "false"},
      {"log.connection.close", "false"},
      {"client.id", "sluice"},
  };
  int rc = sl__kafka_conf_apply(conf, set, sizeof(set) / sizeof(set[0]),
                                NULL, 0, "kafka sink", out_err);
  if (rc == SL_OK)
    rc = sl__kafka_conf_apply(conf, extra, n_extra, s->props, s->n_props,
                              "kafka sink", out_err);
  if (rc != SL_OK) {
    rd_kafka_conf_destroy(conf);
    return rc;
  }
  rd_kafka_conf_set_dr_msg_cb(conf, dr);
  rd_kafka_conf_set_opaque(conf, opaque);
  rd_kafka_conf_set_log_cb(conf, sl__ksink_log_quiet);
  *out_rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (*out_rk == NULL) {
    rd_kafka_conf_destroy(conf);
    return sl_error_set(out_err, SL_EINVAL, "kafka sink: %s", errstr);
  }
  return SL_OK;
}

int sl__ksink_partitions(const sl__ksink_t *s, rd_kafka_t *rk,
                         int32_t *out_n, sl_error_t **out_err) {
  rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, s->topic, NULL);
  if (rkt == NULL)
    return sl_error_set(out_err, SL_EINVAL, "kafka sink: topic '%s': %s",
                        s->topic, rd_kafka_err2str(rd_kafka_last_error()));
  const struct rd_kafka_metadata *md = NULL;
  rd_kafka_resp_err_t me = rd_kafka_metadata(rk, 0, rkt, &md, s->timeout_ms);
  rd_kafka_topic_destroy(rkt);
  if (me != RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (me == RD_KAFKA_RESP_ERR__TIMED_OUT ||
        me == RD_KAFKA_RESP_ERR__TRANSPORT ||
        me == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
      return sl_error_set(out_err, SL_EIO,
                          "kafka sink: cannot reach the bootstrap servers %s "
                          "within %d ms: %s (%s)",
                          s->bootstrap, s->timeout_ms, rd_kafka_err2str(me),
                          rd_kafka_err2name(me));
    return sl_error_set(out_err, SL_EIO,
                        "kafka sink: cannot read the metadata of topic '%s' "
                        "from %s: %s (%s)",
                        s->topic, s->bootstrap, rd_kafka_err2str(me),
                        rd_kafka_err2name(me));
  }
  rd_kafka_resp_err_t te = md->topic_cnt == 1
                               ? md->topics[0].err
                               : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
  int32_t n = md->topic_cnt == 1 ? md->topics[0].partition_cnt : 0;
  rd_kafka_metadata_destroy(md);
  if (te == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
      (te == RD_KAFKA_RESP_ERR_NO_ERROR && n == 0)) {
    int rc = sl_error_set(out_err, SL_ENOTFOUND,
                          "kafka sink: topic '%s' does not exist on the "
                          "cluster at %s (sluice does not create topics)",
                          s->topic, s->bootstrap);
    if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
    return rc;
  }
  if (te != RD_KAFKA_RESP_ERR_NO_ERROR)
    return sl_error_set(out_err, SL_EIO, "kafka sink: topic '%s' at %s: %s "
                        "(%s)", s->topic, s->bootstrap, rd_kafka_err2str(te),
                        rd_kafka_err2name(te));
  *out_n = n;
  return SL_OK;
}

int sl__ksink_key_idx(const sl__ksink_t *s, const sl_schema_t *schema,
                      uint32_t **out, sl_error_t **out_err) {
  *out = NULL;
  if (s->n_key == 0) return SL_OK;
  uint32_t *idx = sl_calloc(s->n_key, sizeof(uint32_t));
  if (idx == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  for (uint32_t k = 0; k < s->n_key; k++) {
    int i = sl_schema_index(schema, s->key_fields[k]);
    if (i < 0) {
      sl_free(idx);
      int rc = sl_error_set(out_err, SL_EINVAL,
                            "kafka sink: key field '%s' is not in the rows "
                            "the sink gets", s->key_fields[k]);
      if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
      return rc;
    }
    idx[k] = (uint32_t)i;
  }
  *out = idx;
  return SL_OK;
}

int sl__ksink_format(const sl__ksink_t *s, const uint32_t *key_idx,
                     const sl_row_t *row, sl_bytes_t *key, sl_bytes_t *val,
                     sl_error_t **out_err) {
  val->len = 0;
  int rc = s->format == SL_FORMAT_JSON
               ? sl_json_format(row, s->changelog, val)
               : sl_csv_format(row, s->delim, s->changelog, val);
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "kafka sink: cannot format a row for "
                        "topic '%s': %s", s->topic, sl_strerror(rc));
  if (val->len && val->data[val->len - 1] == '\n') val->len--;
  key->len = 0;
  for (uint32_t k = 0; rc == SL_OK && k < s->n_key; k++) {
    if (k) rc = sl_bytes_append(key, ",", 1);
    if (rc == SL_OK) rc = sl_value_format(row, key_idx[k], key);
  }
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "kafka sink: cannot format a key for "
                        "topic '%s': %s", s->topic, sl_strerror(rc));
  return SL_OK;
}

/* Wait for every outstanding delivery report; then report a failed one. */
static int writer_flush(void *wr, sl_error_t **out_err) {
  kwriter_t *w = wr;
  while (w->n_done < w->n_sent) rd_kafka_flush(w->rk, 1000);
  if (w->has_error) return delivery_error(w, out_err);
  return SL_OK;
}

static int writer_close(void *wr, bool is_success, sl_error_t **out_err) {
  kwriter_t *w = wr;
  int rc = SL_OK;
  if (w->rk) {
    if (is_success) {
      rc = writer_flush(w, out_err);
    } else {
      /* Failed or cancelled: the rows after the last completed checkpoint
       * are sent again by the next attempt; drop what is still queued. */
      rd_kafka_purge(w->rk, RD_KAFKA_PURGE_F_QUEUE);
      rd_kafka_flush(w->rk, 1000);
      rd_kafka_purge(w->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
      rd_kafka_poll(w->rk, 0);
    }
    if (w->rkt) rd_kafka_topic_destroy(w->rkt);
    rd_kafka_destroy(w->rk);
  }
  sl_bytes_close(&w->val);
  sl_bytes_close(&w->key);
  sl_free(w->key_idx);
  sl_free(w);
  return rc;
}

static int writer_open(void *ctx, const sl_sink_init_t *init, void **out,
                       sl_error_t **out_err) {
  ksink_t *s = ctx;
  kwriter_t *w = sl_calloc(1, sizeof(*w));
  if (w == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  w->s = s;
  sl_bytes_init(&w->val);
  sl_bytes_init(&w->key);
  /* Start round robin at a different partition in every subtask. */
  w->rr = init->subtask;
  int rc = sl__ksink_key_idx(s, init->schema, &w->key_idx, out_err);
  if (rc == SL_OK)
    rc = sl__ksink_producer(s, NULL, 0, on_delivery, w, &w->rk, out_err);
  if (rc == SL_OK) rc = sl__ksink_partitions(s, w->rk, &w->n_parts, out_err);
  if (rc == SL_OK && (w->rkt = rd_kafka_topic_new(w->rk, s->topic, NULL)) ==
                         NULL)
    rc = sl_error_set(out_err, SL_EINVAL, "kafka sink: topic '%s': %s",
                      s->topic, rd_kafka_err2str(rd_kafka_last_error()));
  if (rc != SL_OK) {
    writer_close(w, false, NULL);
    return rc;
  }
  *out = w;
  return SL_OK;
}

static int writer_write(void *wr, const sl_row_t *row, sl_error_t **out_err) {
  kwriter_t *w = wr;
  const ksink_t *s = w->s;
  if (w->has_error) return delivery_error(w, out_err);
  int rc = sl__ksink_format(s, w->key_idx, row, &w->key, &w->val, out_err);
  if (rc != SL_OK) return rc;
  int32_t part = RD_KAFKA_PARTITION_UA;
  if (s->n_key == 0) part = (int32_t)(w->rr++ % (uint32_t)w->n_parts);
  /* An empty value still needs a non-NULL pointer to be a record. */
  static char empty[1];
  void *vp = w->val.len ? (void *)w->val.data : empty;
  void *kp = s->n_key == 0 ? NULL : w->key.len ? (void *)w->key.data : empty;
  for (;;) {
    if (rd_kafka_produce(w->rkt, part, RD_KAFKA_MSG_F_COPY, vp, w->val.len,
                         kp, w->key.len, NULL) == 0)
      break;
    rd_kafka_resp_err_t e = rd_kafka_last_error();
    if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
      return sl_error_set(out_err, SL_EIO,
                          "kafka sink: cannot send a record to topic '%s': "
                          "%s (%s)",
                          s->topic, rd_kafka_err2str(e), rd_kafka_err2name(e));
    rd_kafka_poll(w->rk, 100); /* the queue is full: wait for reports */
  }
  w->n_sent++;
  rd_kafka_poll(w->rk, 0);
  return SL_OK;
}

void sl__ksink_destroy(void *ctx) {
  ksink_t *s = ctx;
  if (s == NULL) return;
  sl_free(s->txn_prefix);
  sl_free(s->subs);
  pthread_mutex_destroy(&s->mu);
  sl_free(s->bootstrap);
  sl_free(s->topic);
  sl__kafka_strs_free(s->key_fields, s->n_key);
  sl__kafka_strs_free(s->props, 2 * s->n_props);
  sl_free(s);
}

static const sl_sink_vt_t kafka_vt = {"kafka",      writer_open,
                                      writer_write, writer_flush,
                                      writer_close, sl__ksink_destroy};

void sl_kafka_sink_config_init(sl_kafka_sink_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->format = SL_FORMAT_JSON;
  cfg->delivery = SL_DELIVERY_AT_LEAST_ONCE;
}

static bool topic_ok(const char *t) {
  size_t n = strlen(t);
  if (n == 0 || n > 249) return false;
  for (size_t i = 0; i < n; i++) {
    char c = t[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return false;
  }
  return true;
}

int sl_kafka_sink_create(const sl_kafka_sink_config_t *cfg,
                         const sl_sink_vt_t **out_vt, void **out_ctx,
                         sl_error_t **out_err) {
  bool eos = cfg->delivery == SL_DELIVERY_EXACTLY_ONCE;
  if (!eos && cfg->delivery != SL_DELIVERY_AT_LEAST_ONCE)
    return sl_error_set(out_err, SL_EINVAL, "kafka sink: unknown delivery "
                        "%d", (int)cfg->delivery);
  if (cfg->bootstrap_servers == NULL || cfg->bootstrap_servers[0] == '\0')
    return sl_error_set(out_err, SL_EINVAL,
                        "kafka sink: bootstrap_servers is required");
  if (cfg->topic == NULL || !topic_ok(cfg->topic))
    return sl_error_set(out_err, SL_EINVAL,
                        "kafka sink: '%s' is not a valid topic name (1 to "
                        "249 of a-z A-Z 0-9 . _ -)",
                        cfg->topic ? cfg->topic : "");
  if (cfg->format != SL_FORMAT_JSON && cfg->format != SL_FORMAT_CSV)
    return sl_error_set(out_err, SL_EINVAL, "kafka sink: unknown format");
  if (cfg->csv_delimiter == '"' || cfg->csv_delimiter == '\r' ||
      cfg->csv_delimiter == '\n')
    return sl_error_set(out_err, SL_EINVAL,
                        "kafka sink: invalid CSV delimiter");
  if (cfg->timeout_ms < 0 || cfg->timeout_ms > 3600000)
    return sl_error_set(out_err, SL_EINVAL,
                        "kafka sink: timeout_ms out of range");
  for (uint32_t k = 0; k < cfg->n_key_fields; k++)
    if (cfg->key_fields == NULL || cfg->key_fields[k] == NULL)
      return sl_error_set(out_err, SL_EINVAL, "kafka sink: key field %u "
                          "has no name", k);
  if (!eos && (cfg->transactional_id_prefix || cfg->transaction_pool_size))
    return sl_error_set(out_err, SL_EINVAL,
                        "kafka sink: transactional_id_prefix and "
                        "transaction_pool_size need delivery exactly-once");
  if (cfg->transactional_id_prefix) {
    size_t n = strlen(cfg->transactional_id_prefix);
    bool ok = n > 0 && n <= 200;
    for (size_t i = 0; ok && i < n; i++)
      ok = (unsigned char)cfg->transactional_id_prefix[i] > ' ' &&
           cfg->transactional_id_prefix[i] != 0x7f;
    if (!ok)
      return sl_error_set(out_err, SL_EINVAL,
                          "kafka sink: transactional_id_prefix '%s' must "
                          "have 1 to 200 printable characters without "
                          "spaces", cfg->transactional_id_prefix);
  }
  if (cfg->transaction_pool_size > 1000)
    return sl_error_set(out_err, SL_EINVAL,
                        "kafka sink: transaction_pool_size %u is above 1000",
                        cfg->transaction_pool_size);
  static const char *const refused[] = {
      "bootstrap.servers", "enable.idempotence", "partitioner",
      "transactional.id", "dr_cb", "dr_msg_cb", "opaque", NULL};
  char **props;
  uint32_t n_props;
  int rc = sl__kafka_props_copy(cfg->properties, refused, "kafka sink",
                                "sink", &props, &n_props, out_err);
  if (rc != SL_OK) return rc;
  ksink_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) {
    sl__kafka_strs_free(props, 2 * n_props);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  pthread_mutex_init(&s->mu, NULL);
  s->props = props;
  s->n_props = n_props;
  s->is_eos = eos;
  s->pool_size = cfg->transaction_pool_size ? cfg->transaction_pool_size : 5;
  if (cfg->transactional_id_prefix &&
      (s->txn_prefix = sl_strdup(cfg->transactional_id_prefix)) == NULL)
    goto nomem;
  s->format = cfg->format;
  s->delim = cfg->csv_delimiter ? cfg->csv_delimiter : ',';
  s->changelog = cfg->changelog;
  s->timeout_ms = cfg->timeout_ms ? (int)cfg->timeout_ms : 10000;
  if ((s->bootstrap = sl_strdup(cfg->bootstrap_servers)) == NULL ||
      (s->topic = sl_strdup(cfg->topic)) == NULL)
    goto nomem;
  if (cfg->n_key_fields) {
    if ((s->key_fields = sl_calloc(cfg->n_key_fields, sizeof(char *))) ==
        NULL)
      goto nomem;
    for (; s->n_key < cfg->n_key_fields; s->n_key++)
      if ((s->key_fields[s->n_key] = sl_strdup(cfg->key_fields[s->n_key])) ==
          NULL) {
        s->n_key++;
        goto nomem;
      }
  }
  *out_vt = eos ? &sl__kafka_eos_vt : &kafka_vt;
  *out_ctx = s;
  return SL_OK;
nomem:
  sl__ksink_destroy(s);
  return sl_error_set(out_err, SL_ENOMEM, "out of memory");
}
