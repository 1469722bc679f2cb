/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The submit-time check of an exactly-once Kafka sink's timing
 * (sl_kafka_sink_check_timing; docs/connectors.md "Kafka sink,
 * exactly-once: the timing check").  An epoch's transaction lives from its
 * first record until the checkpoint that closes it completes and the
 * commit runs; the broker aborts a transaction older than the producer's
 * transaction.timeout.ms, and refuses a producer whose timeout is above
 * its transaction.max.timeout.ms; a marker (a consumer group's committed
 * offset) expires after offsets.retention.minutes without a commit.  The
 * check compares those with the job's checkpoint and restart settings:
 *
 *   refused (or warned, with refusals_as_warnings):
 *     R1  transaction.timeout.ms <= the trigger period (max of
 *         checkpoint.interval_ms and min_pause_ms): every epoch outlives
 *         its transaction even when checkpoints are instant
 *     R2  transaction_pool_size < checkpoint.max_concurrent + 1: the open
 *         epoch and one per checkpoint in flight need an id each
 *     R3  (broker) transaction.timeout.ms > transaction.max.timeout.ms
 *     R4  (broker) a restart delay >= offsets.retention.minutes: markers
 *         of pending epochs can expire while the job waits to restart
 *   warned:
 *     W1  transaction.timeout.ms < period + checkpoint.timeout_ms: a slow
 *         checkpoint completes after the broker aborted its epoch, which
 *         sluice then re-sends from the checkpoint (redone, not lost)
 *     (not warned: epochs waiting behind checkpoints aborted in a row can
 *     expire likewise; with the defaults, 4 x (interval + 10 min) is above
 *     every broker's default cap, so the warning would always show)
 *     W2  checkpoint.interval_ms 0 (on demand): an epoch lasts until a
 *         checkpoint is triggered
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "sluice/sluice.h"

#define DEFAULT_TXN_TIMEOUT_MS 900000 /* kafka_sink_eos.c */
#define DEFAULT_POOL 5
#define DEFAULT_CKPT_TIMEOUT_MS 600000 /* sl_job.h */

/* A refusal: an error, or a warning when allowed. */
static int refuse(bool as_warning, sl_error_t **out_err, const char *msg) {
  if (as_warning) {
    sl_log(SL_LOG_WARN, "%s (allowed by check_timing: warn)", msg);
    return SL_OK;
  }
  int rc = sl_error_set(out_err, SL_EINVAL, "%s", msg);
  if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
  return rc;
}

static const char *prop(const sl_kafka_sink_config_t *cfg, const char *name) {
  for (const char *const *p = cfg->properties; p && p[0] && p[1]; p += 2)
    if (strcmp(p[0], name) == 0) return p[1];
  return NULL;
}

/* transaction.max.timeout.ms and offsets.retention.minutes of a broker of
 * the cluster (DescribeConfigs); -1 when a value is missing. */
static int broker_limits(const sl_kafka_sink_config_t *cfg, int timeout_ms,
                         int64_t *out_max_txn_ms, int64_t *out_ret_min,
                         sl_error_t **out_err) {
  *out_max_txn_ms = *out_ret_min = -1;
  char errstr[512] = "out of memory";
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  if (conf == NULL ||
      rd_kafka_conf_set(conf, "bootstrap.servers", cfg->bootstrap_servers,
                        errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK ||
      rd_kafka_conf_set(conf, "log.connection.close", "false", errstr,
                        sizeof(errstr)) != RD_KAFKA_CONF_OK ||
      rd_kafka_conf_set(conf, "log_level", "0", errstr, sizeof(errstr)) !=
          RD_KAFKA_CONF_OK) {
    if (conf) rd_kafka_conf_destroy(conf);
    return sl_error_set(out_err, SL_EINVAL, "kafka sink: %s", errstr);
  }
  rd_kafka_t *rk =
      rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (rk == NULL) {
    rd_kafka_conf_destroy(conf);
    return sl_error_set(out_err, SL_EINVAL, "kafka sink: %s", errstr);
  }
  const struct rd_kafka_metadata *md = NULL;
  rd_kafka_resp_err_t me = rd_kafka_metadata(rk, 0, NULL, &md, timeout_ms);
  int rc = SL_OK;
  if (me != RD_KAFKA_RESP_ERR_NO_ERROR || md->broker_cnt == 0) {
    rc = sl_error_set(out_err, SL_EIO,
                      "kafka sink: cannot reach the bootstrap servers %s "
                      "within %d ms (to read the broker's transaction and "
                      "offset limits): %s",
                      cfg->bootstrap_servers, timeout_ms,
                      me ? rd_kafka_err2str(me) : "no broker in the metadata");
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_destroy(rk);
    return rc;
  }
  char id[16];
  snprintf(id, sizeof(id), "%d", (int)md->brokers[0].id);
  rd_kafka_metadata_destroy(md);
  rd_kafka_ConfigResource_t *res =
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_BROKER, id);
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t *o =
      rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
  rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, errstr,
                                            sizeof(errstr));
  rd_kafka_DescribeConfigs(rk, &res, 1, o, q);
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 5000);
  const rd_kafka_DescribeConfigs_result_t *r =
      ev ? rd_kafka_event_DescribeConfigs_result(ev) : NULL;
  if (ev == NULL || r == NULL || rd_kafka_event_error(ev)) {
    rc = sl_error_set(out_err, SL_EIO,
                      "kafka sink: cannot read the configuration of broker "
                      "%s at %s: %s",
                      id, cfg->bootstrap_servers,
                      ev ? rd_kafka_event_error_string(ev) : "timed out");
  } else {
    size_t nr = 0;
    const rd_kafka_ConfigResource_t **rs =
        rd_kafka_DescribeConfigs_result_resources(r, &nr);
    for (size_t i = 0; i < nr; i++) {
      size_t ne = 0;
      const rd_kafka_ConfigEntry_t **es =
          rd_kafka_ConfigResource_configs(rs[i], &ne);
      for (size_t e = 0; e < ne; e++) {
        const char *n = rd_kafka_ConfigEntry_name(es[e]);
        const char *v = rd_kafka_ConfigEntry_value(es[e]);
        if (v == NULL) continue;
        if (strcmp(n, "transaction.max.timeout.ms") == 0)
          *out_max_txn_ms = strtoll(v, NULL, 10);
        else if (strcmp(n, "offsets.retention.minutes") == 0)
          *out_ret_min = strtoll(v, NULL, 10);
      }
    }
  }
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_AdminOptions_destroy(o);
  rd_kafka_queue_destroy(q);
  rd_kafka_ConfigResource_destroy(res);
  rd_kafka_destroy(rk);
  return rc;
}

int sl_kafka_sink_check_timing(const sl_kafka_sink_config_t *cfg,
                               const sl_checkpoint_config_t *ck,
                               const sl_restart_config_t *rs,
                               bool query_broker, bool refusals_as_warnings,
                               sl_error_t **out_err) {
  if (cfg->delivery != SL_DELIVERY_EXACTLY_ONCE) return SL_OK;
  char msg[1024];
  int64_t txn = DEFAULT_TXN_TIMEOUT_MS;
  const char *tv = prop(cfg, "transaction.timeout.ms");
  if (tv) {
    char *end;
    errno = 0;
    long long v = strtoll(tv, &end, 10);
    if (errno || *end || end == tv || v <= 0)
      return sl_error_set(out_err, SL_EINVAL,
                          "kafka sink: property transaction.timeout.ms '%s' "
                          "is not a positive number of milliseconds", tv);
    txn = v;
  }
  uint32_t pool =
      cfg->transaction_pool_size ? cfg->transaction_pool_size : DEFAULT_POOL;
  int64_t interval = ck->interval_ms;
  int64_t period = interval > ck->min_pause_ms ? interval : ck->min_pause_ms;
  int64_t ctimeout = ck->timeout_ms > 0 ? ck->timeout_ms
                                        : DEFAULT_CKPT_TIMEOUT_MS;
  uint32_t conc = ck->max_concurrent ? ck->max_concurrent : 1;
  int rc;
  if (interval > 0 && txn <= period) {
    snprintf(msg, sizeof(msg),
             "kafka sink: transaction.timeout.ms %lld is not above the "
             "checkpoint trigger period %lld ms (checkpoint.interval_ms "
             "%lld, min_pause_ms %lld): the broker would abort every "
             "epoch's transaction before its checkpoint completes; raise "
             "transaction.timeout.ms (a sink property) above %lld",
             (long long)txn, (long long)period, (long long)interval,
             (long long)ck->min_pause_ms, (long long)(period + ctimeout));
    if ((rc = refuse(refusals_as_warnings, out_err, msg)) != SL_OK)
      return rc;
  }
  if (pool < conc + 1) {
    snprintf(msg, sizeof(msg),
             "kafka sink: transaction_pool_size %u is below "
             "checkpoint.max_concurrent %u + 1: the open epoch and each "
             "checkpoint in flight need a transactional id of their own",
             pool, conc);
    if ((rc = refuse(refusals_as_warnings, out_err, msg)) != SL_OK)
      return rc;
  }
  if (interval == 0)
    sl_log(SL_LOG_WARN,
           "kafka sink '%s': checkpoint.interval_ms is 0 (checkpoints only "
           "on demand): an epoch's transaction stays open until a "
           "checkpoint completes, and the broker aborts it after "
           "transaction.timeout.ms %lld (sluice then re-sends the epoch)",
           cfg->topic, (long long)txn);
  else if (txn < period + ctimeout)
    sl_log(SL_LOG_WARN,
           "kafka sink '%s': transaction.timeout.ms %lld is below the "
           "checkpoint trigger period %lld ms + checkpoint.timeout_ms %lld: "
           "a slow checkpoint can complete after the broker aborted its "
           "epoch's transaction; sluice then re-sends the epoch from the "
           "checkpoint (no loss, no duplicate; the work is redone)",
           cfg->topic, (long long)txn, (long long)period,
           (long long)ctimeout);
  if (!query_broker) return SL_OK;
  int64_t max_txn, ret_min;
  int timeout = cfg->timeout_ms > 0 ? (int)cfg->timeout_ms : 10000;
  if ((rc = broker_limits(cfg, timeout, &max_txn, &ret_min, out_err)) !=
      SL_OK)
    return rc;
  if (max_txn > 0 && txn > max_txn) {
    snprintf(msg, sizeof(msg),
             "kafka sink: transaction.timeout.ms %lld is above the broker's "
             "transaction.max.timeout.ms %lld at %s: the broker refuses "
             "such a producer; lower the sink property or raise the "
             "broker's setting",
             (long long)txn, (long long)max_txn, cfg->bootstrap_servers);
    if ((rc = refuse(refusals_as_warnings, out_err, msg)) != SL_OK)
      return rc;
  }
  int64_t delay = 0;
  if (rs && rs->kind == SL_RESTART_FIXED_DELAY) delay = rs->delay_ms;
  if (rs && rs->kind == SL_RESTART_EXPONENTIAL)
    delay = rs->max_delay_ms > 0 ? rs->max_delay_ms : 60000;
  if (ret_min > 0 && delay >= ret_min * 60000) {
    snprintf(msg, sizeof(msg),
             "kafka sink: a restart waits up to %lld ms, not less than the "
             "broker's offsets.retention.minutes %lld: the markers of epochs "
             "waiting to be committed can expire meanwhile, and the restore "
             "then cannot tell whether they were committed; shorten the "
             "restart delay",
             (long long)delay, (long long)ret_min);
    if ((rc = refuse(refusals_as_warnings, out_err, msg)) != SL_OK)
      return rc;
  }
  return SL_OK;
}
