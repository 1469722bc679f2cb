/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kafka source (librdkafka), on the source framework's enumerator.
 *
 * Splits.  One per partition, id "<topic>/<partition>" (a topic name has
 * no '/').  The enumerator (one per source, on the enumerator thread) owns
 * a metadata handle; it lists the topics' partitions at start and every
 * discovery interval, and gives each new partition to reader subtask
 * (hash(topic) + partition) % parallelism, once that reader has opened.
 * Its state: the partitions it has seen and the splits not yet handed out;
 * a partition a reader holds is in the reader's state.
 *
 * Split state (a reader position, and the start of a new split), 18 bytes:
 * version 1, kind (0 offset, 1 earliest, 2 latest, 3 committed,
 * 4 timestamp), i64le value (the offset or the timestamp), i64le end
 * (bounded: the offset to stop at; -1 unbounded).  A reader turns every
 * kind into an offset when the split arrives; an offset of kind 0 must
 * still be in the log (low <= offset <= high watermark): one deleted by
 * retention is a fatal error naming topic, partition and offset.  The
 * consumer runs with auto.offset.reset=error, so an offset deleted while
 * the reader is behind fails the same way rather than jumping.
 *
 * Reader.  One consumer per reader subtask, assign()ed the partitions it
 * holds with their offsets (assign, never subscribe: no group rebalance).
 * The position of a split is the offset after the last record emitted (or
 * after a control record, when the consumer reports the partition's end
 * there).  Bounded: a split is finished once its position reaches the end
 * offset (records at or past it are dropped), which also holds when the
 * partition ends in a transaction's control record (the end-of-partition
 * event gives the position past it).
 *
 * Commits.  The engine has no checkpoint-complete callback for source
 * readers, but enumerators have one.  A reader sends the position of each
 * split it snapshots to the enumerator (an event, posted from the snapshot
 * on the reader's task, so it is in the enumerator's inbox before that
 * checkpoint's completion); the enumerator keeps the latest offset per
 * partition and commits them (asynchronously) to the group when a
 * checkpoint completes.  With one checkpoint in flight (the default) the
 * group thus gets exactly the offsets of each completed checkpoint; with
 * several, possibly those of a later snapshot.  They are for monitoring; a
 * restore uses the checkpoint.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "connectors/kafka/kafka_conf.h"
#include "connectors/kafka/kafka_decode.h"
#include "sluice/sluice.h"

#define POS_LEN 18u
#define POS_VERSION 1u
enum { K_OFFSET = 0, K_EARLIEST, K_LATEST, K_COMMITTED, K_TIMESTAMP };

typedef struct ksrc_s {
  char *bootstrap;
  char **topics;
  uint32_t n_topics;
  char *group;
  sl_kafka_start_t start;
  int64_t start_ts;
  sl_kafka_partition_offset_t *offsets; /* topics owned */
  uint32_t n_offsets;
  sl_kafka_format_t format;
  char delim;
  sl_schema_t *value_schema;
  sl_schema_t *schema;
  int f_ts, f_hdr, f_key, f_part, f_off;
  bool bounded;
  bool read_uncommitted;
  int64_t discovery_ms;
  int timeout_ms;
  char **props; /* name, value pairs */
  uint32_t n_props;
} ksrc_t;

/* ------------------------------------------------------------------ */
/* Shared helpers */

static void store_u64le(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void pos_encode(uint8_t out[POS_LEN], int kind, int64_t v,
                       int64_t end) {
  out[0] = POS_VERSION;
  out[1] = (uint8_t)kind;
  store_u64le(out + 2, (uint64_t)v);
  store_u64le(out + 10, (uint64_t)end);
}

/* Split id "<topic>/<partition>" into its parts (topic copied). */
static int parse_id(const char *id, char **out_topic, int32_t *out_part) {
  const char *slash = strrchr(id, '/');
  if (slash == NULL || slash == id || slash[1] == '\0') return SL_ECORRUPT;
  char *end;
  long p = strtol(slash + 1, &end, 10);
  if (*end != '\0' || p < 0 || p > INT32_MAX) return SL_ECORRUPT;
  *out_topic = sl_strndup(id, (size_t)(slash - id));
  if (*out_topic == NULL) return SL_ENOMEM;
  *out_part = (int32_t)p;
  return SL_OK;
}

static int kerr(sl_error_t **out_err, int code, const char *what,
                rd_kafka_resp_err_t e) {
  return sl_error_set(out_err, code, "%s: %s (%s)", what, rd_kafka_err2str(e),
                      rd_kafka_err2name(e));
}

static void log_quiet(const rd_kafka_t *rk, int level, const char *fac,
                      const char *buf) {
  (void)rk, (void)level, (void)fac, (void)buf;
}

/* A handle of type with sluice's settings and the user's properties. */
static int new_handle(const ksrc_t *s, rd_kafka_type_t type, bool group,
                      rd_kafka_t **out, sl_error_t **out_err) {
  char errstr[512];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  if (conf == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  const char *const set[][2] = {
      {"bootstrap.servers", s->bootstrap},
      {"isolation.level",
       s->read_uncommitted ? "read_uncommitted" : "read_committed"},
      {"enable.auto.commit", "false"},
      {"enable.auto.offset.store", "false"},
      {"auto.offset.reset", "error"},
      {"enable.partition.eof", "true"},
      {"allow.auto.create.topics", "false"},
      {"log.connection.close", "false"},
      {"client.id", "sluice"},
  };
  int rc = sl__kafka_conf_apply(conf, set, sizeof(set) / sizeof(set[0]),
                                s->props, s->n_props, "kafka source",
                                out_err);
  if (rc != SL_OK) {
    rd_kafka_conf_destroy(conf);
    return rc;
  }
  /* librdkafka's assign() needs a group.id even though assign() never
   * joins the group; without group_id sluice names one that it never
   * commits to.  (group.id is refused among the user's properties, so
   * setting it after them changes nothing.) */
  if (group &&
      rd_kafka_conf_set(conf, "group.id", s->group ? s->group : "sluice",
                        errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    return sl_error_set(out_err, SL_EINVAL, "kafka source: %s", errstr);
  }
  rd_kafka_conf_set_log_cb(conf, log_quiet);
  rd_kafka_t *rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
  if (rk == NULL) {
    rd_kafka_conf_destroy(conf);
    return sl_error_set(out_err, SL_EINVAL, "kafka source: %s", errstr);
  }
  *out = rk;
  return SL_OK;
}

/* Low and high (or last stable) watermark of topic/partition. */
static int watermarks(const ksrc_t *s, rd_kafka_t *rk, const char *topic,
                      int32_t part, int64_t *lo, int64_t *hi,
                      sl_error_t **out_err) {
  rd_kafka_resp_err_t e =
      rd_kafka_query_watermark_offsets(rk, topic, part, lo, hi, s->timeout_ms);
  /* A partition added to the topic after this handle last read its
   * metadata (one discovered while the job runs) is unknown to the handle
   * until that metadata is read again: read it, and ask again, for at
   * most the timeout. */
  for (int i = 0; e == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION &&
                  i < s->timeout_ms / 100; i++) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    if (rkt != NULL &&
        rd_kafka_metadata(rk, 0, rkt, &md, s->timeout_ms) ==
            RD_KAFKA_RESP_ERR_NO_ERROR)
      rd_kafka_metadata_destroy(md);
    if (rkt != NULL) rd_kafka_topic_destroy(rkt);
    e = rd_kafka_query_watermark_offsets(rk, topic, part, lo, hi,
                                         s->timeout_ms);
    if (e == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) {
      struct timespec ts = {0, 100 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  if (e == RD_KAFKA_RESP_ERR_NO_ERROR) return SL_OK;
  char what[512];
  snprintf(what, sizeof(what),
           "kafka source: cannot list the offsets of topic '%s' partition "
           "%d at %s",
           topic, part, s->bootstrap);
  return kerr(out_err, SL_EIO, what, e);
}

/* ------------------------------------------------------------------ */
/* Enumerator */

typedef struct kpend_s {
  char *id;
  uint32_t owner;
  uint8_t pos[POS_LEN];
} kpend_t;

typedef struct kenum_s {
  ksrc_t *src;
  rd_kafka_t *rk;
  uint32_t par;
  bool is_discovered; /* the first discovery ran (in this or an earlier
                         run): later partitions start at earliest */
  char **seen;
  uint32_t n_seen, cap_seen;
  kpend_t *pend;
  uint32_t n_pend, cap_pend;
  bool *ready; /* reader subtask opened */
  /* Offsets reported by readers' snapshots, committed on completion. */
  char **c_ids;
  int64_t *c_offs;
  uint32_t n_commit, cap_commit;
} kenum_t;

static bool enum_seen(const kenum_t *e, const char *id) {
  for (uint32_t i = 0; i < e->n_seen; i++)
    if (strcmp(e->seen[i], id) == 0) return true;
  return false;
}

static int enum_add_seen(kenum_t *e, const char *id) {
  if (e->n_seen == e->cap_seen) {
    uint32_t cap = e->cap_seen ? 2 * e->cap_seen : 16;
    char **l = sl_realloc(e->seen, cap * sizeof(char *));
    if (l == NULL) return SL_ENOMEM;
    e->seen = l;
    e->cap_seen = cap;
  }
  if ((e->seen[e->n_seen] = sl_strdup(id)) == NULL) return SL_ENOMEM;
  e->n_seen++;
  return SL_OK;
}

static uint32_t owner_of(const kenum_t *e, const char *topic, int32_t part) {
  uint64_t h = sl_hash64(topic, strlen(topic));
  return (uint32_t)((h % e->par + (uint64_t)part) % e->par);
}

static int enum_add_pend(kenum_t *e, const char *id, uint32_t owner,
                         const uint8_t pos[POS_LEN]) {
  if (e->n_pend == e->cap_pend) {
    uint32_t cap = e->cap_pend ? 2 * e->cap_pend : 16;
    kpend_t *l = sl_realloc(e->pend, cap * sizeof(*l));
    if (l == NULL) return SL_ENOMEM;
    e->pend = l;
    e->cap_pend = cap;
  }
  kpend_t *p = &e->pend[e->n_pend];
  if ((p->id = sl_strdup(id)) == NULL) return SL_ENOMEM;
  p->owner = owner;
  memcpy(p->pos, pos, POS_LEN);
  e->n_pend++;
  return SL_OK;
}

static void enum_close(void *en) {
  kenum_t *e = en;
  if (e == NULL) return;
  if (e->rk) rd_kafka_destroy(e->rk);
  sl__kafka_strs_free(e->seen, e->n_seen);
  for (uint32_t i = 0; i < e->n_pend; i++) sl_free(e->pend[i].id);
  sl_free(e->pend);
  sl_free(e->ready);
  sl__kafka_strs_free(e->c_ids, e->n_commit);
  sl_free(e->c_offs);
  sl_free(e);
}

/* State: version 1, is_discovered byte, u64 n_seen and ids (u64 length,
 * bytes), u64 n_pend and (id, POS_LEN bytes). */
static int enum_snapshot(void *en, uint64_t id, sl_bytes_t *out) {
  (void)id;
  kenum_t *e = en;
  uint8_t hdr[2] = {1, e->is_discovered ? 1 : 0};
  int rc = sl_bytes_append(out, hdr, 2);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->n_seen);
  for (uint32_t i = 0; rc == SL_OK && i < e->n_seen; i++) {
    rc = sl_bytes_append_u64le(out, strlen(e->seen[i]));
    if (rc == SL_OK) rc = sl_bytes_append_str(out, e->seen[i]);
  }
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->n_pend);
  for (uint32_t i = 0; rc == SL_OK && i < e->n_pend; i++) {
    rc = sl_bytes_append_u64le(out, strlen(e->pend[i].id));
    if (rc == SL_OK) rc = sl_bytes_append_str(out, e->pend[i].id);
    if (rc == SL_OK) rc = sl_bytes_append(out, e->pend[i].pos, POS_LEN);
  }
  return rc;
}

static int take_str(const uint8_t **p, const uint8_t *end, char **out) {
  if (end - *p < 8) return SL_ECORRUPT;
  uint64_t n = sl_load_u64le(*p);
  *p += 8;
  if (n == 0 || n > 4096 || n > (uint64_t)(end - *p) || memchr(*p, 0, n))
    return SL_ECORRUPT;
  if ((*out = sl_strndup((const char *)*p, (size_t)n)) == NULL)
    return SL_ENOMEM;
  *p += n;
  return SL_OK;
}

static int enum_decode(kenum_t *e, const uint8_t *p, size_t len) {
  const uint8_t *end = p + len;
  if (len < 2 || p[0] != 1 || p[1] > 1) return SL_ECORRUPT;
  e->is_discovered = p[1] == 1;
  p += 2;
  for (int part = 0; part < 2; part++) {
    if (end - p < 8) return SL_ECORRUPT;
    uint64_t n = sl_load_u64le(p);
    p += 8;
    if (n > (uint64_t)(end - p) / 9) return SL_ECORRUPT;
    for (uint64_t i = 0; i < n; i++) {
      char *id = NULL, *topic = NULL;
      int32_t pt;
      int rc = take_str(&p, end, &id);
      if (rc == SL_OK) rc = parse_id(id, &topic, &pt);
      if (rc == SL_OK && part == 0) rc = enum_add_seen(e, id);
      if (rc == SL_OK && part == 1) {
        if (end - p < (ptrdiff_t)POS_LEN || p[0] != POS_VERSION) {
          rc = SL_ECORRUPT;
        } else {
          rc = enum_add_pend(e, id, owner_of(e, topic, pt), p);
          p += POS_LEN;
        }
      }
      sl_free(id);
      sl_free(topic);
      if (rc != SL_OK) return rc;
    }
  }
  return p == end ? SL_OK : SL_ECORRUPT;
}

static int enum_create(void *ctx, const sl_enum_init_t *init, void **out,
                       sl_error_t **out_err) {
  ksrc_t *s = ctx;
  kenum_t *e = sl_calloc(1, sizeof(*e));
  if (e) e->ready = sl_calloc(init->parallelism ? init->parallelism : 1, 1);
  if (e == NULL || e->ready == NULL) {
    enum_close(e);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  e->src = s;
  e->par = init->parallelism ? init->parallelism : 1;
  if (init->state) {
    int rc = enum_decode(e, init->state, init->state_len);
    if (rc != SL_OK) {
      enum_close(e);
      return sl_error_set(out_err, rc, rc == SL_ENOMEM ? "out of memory"
                          : "kafka source: the enumerator's state in "
                          "checkpoint %llu is corrupt",
                          (unsigned long long)init->restored_checkpoint_id);
    }
  }
  int rc = new_handle(s, RD_KAFKA_CONSUMER, s->group != NULL, &e->rk,
                      out_err);
  if (rc != SL_OK) {
    enum_close(e);
    return rc;
  }
  *out = e;
  return SL_OK;
}

/* A reader's snapshot offset: kind byte 2, i64le offset, the split id. */
static int enum_event(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                      const uint8_t *ev, size_t len, sl_error_t **out_err) {
  kenum_t *e = en;
  (void)ec, (void)subtask;
  if (len < 10 || len > 9 + 4096 || ev[0] != 2 || memchr(ev + 9, 0, len - 9))
    return sl_error_set(out_err, SL_ECORRUPT, "kafka source: a corrupt "
                        "offset event from reader %u", subtask);
  if (e->src->group == NULL) return SL_OK;
  int64_t off = (int64_t)sl_load_u64le(ev + 1);
  const char *id = (const char *)ev + 9;
  size_t idlen = len - 9;
  for (uint32_t i = 0; i < e->n_commit; i++)
    if (strlen(e->c_ids[i]) == idlen && memcmp(e->c_ids[i], id, idlen) == 0) {
      e->c_offs[i] = off;
      return SL_OK;
    }
  if (e->n_commit == e->cap_commit) {
    uint32_t cap = e->cap_commit ? 2 * e->cap_commit : 16;
    char **l = sl_realloc(e->c_ids, cap * sizeof(char *));
    if (l) e->c_ids = l;
    int64_t *o = l ? sl_realloc(e->c_offs, cap * sizeof(int64_t)) : NULL;
    if (o) e->c_offs = o;
    if (l == NULL || o == NULL)
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    e->cap_commit = cap;
  }
  if ((e->c_ids[e->n_commit] = sl_strndup(id, idlen)) == NULL)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  e->c_offs[e->n_commit++] = off;
  return SL_OK;
}

/* Commit the offsets the readers reported (monitoring: failures are not
 * the job's; librdkafka reports them to no one). */
static void enum_complete(void *en, uint64_t checkpoint_id) {
  kenum_t *e = en;
  (void)checkpoint_id;
  if (e->src->group == NULL || e->n_commit == 0) return;
  rd_kafka_topic_partition_list_t *l =
      rd_kafka_topic_partition_list_new((int)e->n_commit);
  for (uint32_t i = 0; i < e->n_commit; i++) {
    char *topic = NULL;
    int32_t pt;
    if (parse_id(e->c_ids[i], &topic, &pt) == SL_OK)
      rd_kafka_topic_partition_list_add(l, topic, pt)->offset = e->c_offs[i];
    sl_free(topic);
    sl_free(e->c_ids[i]);
  }
  e->n_commit = 0;
  if (l->cnt > 0) rd_kafka_commit(e->rk, l, 1);
  rd_kafka_topic_partition_list_destroy(l);
  rd_kafka_poll(e->rk, 0); /* serve the replies of earlier commits */
}

/* Hand the pending splits of opened readers to them. */
static int enum_serve(kenum_t *e, sl_enum_ctx_t *ec, sl_error_t **out_err) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < e->n_pend; i++) {
    kpend_t *p = &e->pend[i];
    if (p->owner >= e->par || !e->ready[p->owner]) {
      e->pend[k++] = *p;
      continue;
    }
    sl_split_t sp = {p->id, p->pos, POS_LEN};
    int rc = sl_enum_assign(ec, p->owner, &sp);
    if (rc != SL_OK) {
      /* Keep the rest (this one included) pending. */
      memmove(&e->pend[k], &e->pend[i], (e->n_pend - i) * sizeof(*p));
      e->n_pend = k + (e->n_pend - i);
      return sl_error_set(out_err, rc, "kafka source: cannot assign "
                          "partition %s: %s", p->id, sl_strerror(rc));
    }
    sl_free(p->id);
  }
  e->n_pend = k;
  if (e->src->bounded && e->is_discovered) {
    for (uint32_t r = 0; r < e->par; r++) {
      if (!e->ready[r]) continue;
      /* The event tells the reader it may end (below, reader_poll). */
      static const uint8_t all_assigned = 1;
      int rc = sl_enum_signal_no_more_splits(ec, r);
      if (rc == SL_OK) rc = sl_enum_send_event(ec, r, &all_assigned, 1);
      if (rc != SL_OK)
        return sl_error_set(out_err, rc, "out of memory");
    }
  }
  return SL_OK;
}

/* Where a partition found by the first discovery starts. */
static void start_pos(const ksrc_t *s, const char *topic, int32_t part,
                      int64_t end, uint8_t pos[POS_LEN]) {
  switch (s->start) {
  case SL_KAFKA_START_LATEST: pos_encode(pos, K_LATEST, 0, end); return;
  case SL_KAFKA_START_COMMITTED: pos_encode(pos, K_COMMITTED, 0, end); return;
  case SL_KAFKA_START_TIMESTAMP:
    pos_encode(pos, K_TIMESTAMP, s->start_ts, end);
    return;
  case SL_KAFKA_START_OFFSETS:
    for (uint32_t i = 0; i < s->n_offsets; i++)
      if (s->offsets[i].partition == part &&
          strcmp(s->offsets[i].topic, topic) == 0) {
        pos_encode(pos, K_OFFSET, s->offsets[i].offset, end);
        return;
      }
    break;
  case SL_KAFKA_START_EARLIEST: break;
  }
  pos_encode(pos, K_EARLIEST, 0, end);
}

static int enum_discover(void *en, sl_enum_ctx_t *ec, sl_error_t **out_err) {
  kenum_t *e = en;
  ksrc_t *s = e->src;
  if (!s->bounded) sl_enum_set_discovery_interval(ec, s->discovery_ms);
  if (s->bounded && e->is_discovered) return enum_serve(e, ec, out_err);
  for (uint32_t t = 0; t < s->n_topics; t++) {
    const char *topic = s->topics[t];
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(e->rk, topic, NULL);
    if (rkt == NULL)
      return sl_error_set(out_err, SL_EINVAL, "kafka source: topic '%s': %s",
                          topic, rd_kafka_err2str(rd_kafka_last_error()));
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t me =
        rd_kafka_metadata(e->rk, 0, rkt, &md, s->timeout_ms);
    rd_kafka_topic_destroy(rkt);
    if (me != RD_KAFKA_RESP_ERR_NO_ERROR) {
      char what[1024];
      if (me == RD_KAFKA_RESP_ERR__TIMED_OUT ||
          me == RD_KAFKA_RESP_ERR__TRANSPORT ||
          me == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        snprintf(what, sizeof(what),
                 "kafka source: cannot reach the bootstrap servers %s "
                 "within %d ms",
                 s->bootstrap, s->timeout_ms);
      else
        snprintf(what, sizeof(what),
                 "kafka source: cannot read the metadata of topic '%s' "
                 "from %s",
                 topic, s->bootstrap);
      return kerr(out_err, SL_EIO, what, me);
    }
    if (md->topic_cnt != 1 || md->topics[0].err) {
      rd_kafka_resp_err_t te =
          md->topic_cnt == 1 ? md->topics[0].err
                             : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
      rd_kafka_metadata_destroy(md);
      if (te == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        int rc = sl_error_set(out_err, SL_ENOTFOUND,
                              "kafka source: topic '%s' does not exist on "
                              "the cluster at %s",
                              topic, s->bootstrap);
        if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
        return rc;
      }
      char what[512];
      snprintf(what, sizeof(what), "kafka source: topic '%s' at %s", topic,
               s->bootstrap);
      return kerr(out_err, SL_EIO, what, te);
    }
    const rd_kafka_metadata_topic_t *mt = &md->topics[0];
    /* Partitions in order of their number. */
    int32_t n_parts = mt->partition_cnt, max_id = -1;
    for (int32_t i = 0; i < n_parts; i++)
      if (mt->partitions[i].id > max_id) max_id = mt->partitions[i].id;
    rd_kafka_metadata_destroy(md);
    for (int32_t pt = 0; pt <= max_id; pt++) {
      char id[600];
      snprintf(id, sizeof(id), "%s/%d", topic, pt);
      if (enum_seen(e, id)) continue;
      int64_t end = -1, lo = 0;
      if (s->bounded) {
        int rc = watermarks(s, e->rk, topic, pt, &lo, &end, out_err);
        if (rc != SL_OK) return rc;
      }
      uint8_t pos[POS_LEN];
      if (e->is_discovered) pos_encode(pos, K_EARLIEST, 0, end);
      else start_pos(s, topic, pt, end, pos);
      int rc = enum_add_seen(e, id);
      if (rc == SL_OK) rc = enum_add_pend(e, id, owner_of(e, topic, pt), pos);
      if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
    }
  }
  e->is_discovered = true;
  return enum_serve(e, ec, out_err);
}

static int enum_request(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                        sl_error_t **out_err) {
  kenum_t *e = en;
  if (subtask < e->par) e->ready[subtask] = true;
  return enum_serve(e, ec, out_err);
}

static int enum_add_reader(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                           sl_error_t **out_err) {
  return enum_request(en, ec, subtask, out_err);
}

static int enum_back(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                     const sl_split_t *sp, uint32_t n, sl_error_t **out_err) {
  kenum_t *e = en;
  (void)subtask;
  for (uint32_t i = 0; i < n; i++) {
    char *topic = NULL;
    int32_t pt;
    int rc = parse_id(sp[i].id, &topic, &pt);
    if (rc == SL_OK && (sp[i].state == NULL || sp[i].state_len != POS_LEN ||
                        sp[i].state[0] != POS_VERSION))
      rc = SL_ECORRUPT;
    /* A split also pending from a fresh first discovery is pending once,
     * at the position it comes back with. */
    for (uint32_t k = 0; rc == SL_OK && k < e->n_pend; k++) {
      if (strcmp(e->pend[k].id, sp[i].id) != 0) continue;
      sl_free(e->pend[k].id);
      memmove(&e->pend[k], &e->pend[k + 1],
              (e->n_pend - k - 1) * sizeof(kpend_t));
      e->n_pend--;
      break;
    }
    if (rc == SL_OK && !enum_seen(e, sp[i].id)) rc = enum_add_seen(e, sp[i].id);
    if (rc == SL_OK)
      rc = enum_add_pend(e, sp[i].id, owner_of(e, topic, pt), sp[i].state);
    sl_free(topic);
    if (rc != SL_OK)
      return sl_error_set(out_err, rc, "kafka source: split '%s' came back "
                          "%s", sp[i].id, rc == SL_ENOMEM ? "(out of memory)"
                          : "with a corrupt position");
  }
  return enum_serve(e, ec, out_err);
}

static const sl_enum_vt_t kafka_enum_vt = {
    .create = enum_create,
    .discover = enum_discover,
    .handle_split_request = enum_request,
    .add_splits_back = enum_back,
    .add_reader = enum_add_reader,
    .handle_reader_event = enum_event,
    .snapshot = enum_snapshot,
    .checkpoint_complete = enum_complete,
    .close = enum_close,
};

/* ------------------------------------------------------------------ */
/* Reader */

typedef struct kpart_s {
  uint32_t split; /* index */
  const char *id; /* borrowed until reader_close */
  char *topic;
  int32_t part;
  int64_t next;   /* offset of the next record to emit */
  int64_t end;    /* bounded: stop here; -1 */
  bool is_done;
  bool is_reported; /* sl_source_split_finished was called */
} kpart_t;

typedef struct kreader_s {
  const ksrc_t *src;
  rd_kafka_t *rk;
  rd_kafka_queue_t *q;
  sl_source_waker_t *waker;
  kpart_t *parts;
  uint32_t n_parts, cap_parts;
  sl_kafka_decoder_t dec;
  bool has_dec;
  sl_source_out_t *out; /* the task's, from the first poll (stable) */
  bool is_all_assigned; /* bounded: the enumerator assigned every split */
} kreader_t;

static void on_queue(rd_kafka_t *rk, void *opaque) {
  (void)rk;
  sl_source_waker_wake(opaque);
}

static void reader_close(void *r) {
  kreader_t *rd = r;
  if (rd == NULL) return;
  if (rd->q) {
    rd_kafka_queue_cb_event_enable(rd->q, NULL, NULL);
    rd_kafka_queue_destroy(rd->q);
  }
  if (rd->rk) {
    rd_kafka_assign(rd->rk, NULL);
    rd_kafka_consumer_close(rd->rk);
    rd_kafka_destroy(rd->rk);
  }
  for (uint32_t i = 0; i < rd->n_parts; i++) sl_free(rd->parts[i].topic);
  sl_free(rd->parts);
  if (rd->has_dec) sl__kafka_decoder_close(&rd->dec);
  sl_free(rd);
}

static int fatal(sl_error_t **out_err, int rc) {
  if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
  return rc;
}

/* Turn a split's start into an offset (and check a stored offset). */
static int resolve(kreader_t *rd, kpart_t *p, int kind, int64_t v,
                   sl_error_t **out_err) {
  const ksrc_t *s = rd->src;
  int64_t lo, hi;
  int rc = watermarks(s, rd->rk, p->topic, p->part, &lo, &hi, out_err);
  if (rc != SL_OK) return rc;
  switch (kind) {
  case K_EARLIEST: p->next = lo; return SL_OK;
  case K_LATEST: p->next = hi; return SL_OK;
  case K_OFFSET:
    if (v < lo) {
      sl_error_set(out_err, SL_ENOTFOUND,
                   "kafka source: topic '%s' partition %d: offset %lld is "
                   "no longer in the log (its earliest offset is %lld: "
                   "deleted by retention?); refusing to skip records",
                   p->topic, p->part, (long long)v, (long long)lo);
      return fatal(out_err, SL_ENOTFOUND);
    }
    if (v > hi) {
      sl_error_set(out_err, SL_EINVAL,
                   "kafka source: topic '%s' partition %d: offset %lld is "
                   "past the end of the log (%lld); was the topic "
                   "re-created?",
                   p->topic, p->part, (long long)v, (long long)hi);
      return fatal(out_err, SL_EINVAL);
    }
    p->next = v;
    return SL_OK;
  case K_COMMITTED: {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, p->topic, p->part);
    rd_kafka_resp_err_t e = rd_kafka_committed(rd->rk, l, s->timeout_ms);
    int64_t off = l->elems[0].offset;
    rd_kafka_resp_err_t pe = l->elems[0].err;
    rd_kafka_topic_partition_list_destroy(l);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) e = pe;
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      char what[600];
      snprintf(what, sizeof(what),
               "kafka source: cannot read the committed offset of group "
               "'%s' for topic '%s' partition %d",
               s->group, p->topic, p->part);
      return kerr(out_err, SL_EIO, what, e);
    }
    if (off < 0) {
      p->next = lo; /* none committed: earliest */
      return SL_OK;
    }
    return resolve(rd, p, K_OFFSET, off, out_err);
  }
  case K_TIMESTAMP: {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, p->topic, p->part)->offset = v;
    rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(rd->rk, l,
                                                       s->timeout_ms);
    int64_t off = l->elems[0].offset;
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) e = l->elems[0].err;
    rd_kafka_topic_partition_list_destroy(l);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      char what[600];
      snprintf(what, sizeof(what),
               "kafka source: cannot find the offset of timestamp %lld in "
               "topic '%s' partition %d",
               (long long)v, p->topic, p->part);
      return kerr(out_err, SL_EIO, what, e);
    }
    p->next = off < 0 ? hi : off;
    return SL_OK;
  }
  }
  return sl_error_set(out_err, SL_ECORRUPT, "kafka source: split '%s': "
                      "unknown start kind %d", p->id, kind);
}

/* assign() every partition not finished, at its next offset. */
static int reassign(kreader_t *rd, sl_error_t **out_err) {
  rd_kafka_topic_partition_list_t *l =
      rd_kafka_topic_partition_list_new((int)rd->n_parts);
  for (uint32_t i = 0; i < rd->n_parts; i++) {
    kpart_t *p = &rd->parts[i];
    if (p->is_done) continue;
    rd_kafka_topic_partition_list_add(l, p->topic, p->part)->offset = p->next;
  }
  rd_kafka_resp_err_t e = rd_kafka_assign(rd->rk, l);
  rd_kafka_topic_partition_list_destroy(l);
  return e == RD_KAFKA_RESP_ERR_NO_ERROR
             ? SL_OK
             : kerr(out_err, SL_EIO, "kafka source: assign", e);
}

static int add_splits(kreader_t *rd, const sl_split_init_t *si, uint32_t n,
                      sl_error_t **out_err) {
  if (rd->n_parts + n > rd->cap_parts) {
    uint32_t cap = rd->cap_parts ? rd->cap_parts : 4;
    while (cap < rd->n_parts + n) cap *= 2;
    kpart_t *l = sl_realloc(rd->parts, cap * sizeof(*l));
    if (l == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    rd->parts = l;
    rd->cap_parts = cap;
  }
  for (uint32_t i = 0; i < n; i++) {
    kpart_t *p = &rd->parts[rd->n_parts];
    memset(p, 0, sizeof(*p));
    p->split = si[i].split;
    p->id = si[i].id;
    p->end = -1;
    int rc = parse_id(si[i].id, &p->topic, &p->part);
    if (rc != SL_OK)
      return sl_error_set(out_err, rc, "kafka source: bad split id '%s'",
                          si[i].id);
    rd->n_parts++;
    int kind = K_EARLIEST;
    int64_t v = 0;
    if (si[i].position) {
      const uint8_t *q = si[i].position;
      if (si[i].position_len != POS_LEN || q[0] != POS_VERSION ||
          q[1] > K_TIMESTAMP)
        return fatal(out_err,
                     sl_error_set(out_err, SL_ECORRUPT,
                                  "kafka source: partition '%s': the stored "
                                  "position (%zu bytes) is corrupt",
                                  p->id, si[i].position_len));
      kind = q[1];
      v = (int64_t)sl_load_u64le(q + 2);
      p->end = (int64_t)sl_load_u64le(q + 10);
    }
    if ((rc = resolve(rd, p, kind, v, out_err)) != SL_OK) return rc;
    if (p->end >= 0 && p->next >= p->end) p->is_done = true;
  }
  return reassign(rd, out_err);
}

static int reader_open(void *ctx, const sl_reader_init_t *init, void **out,
                       sl_error_t **out_err) {
  const ksrc_t *s = ctx;
  kreader_t *rd = sl_calloc(1, sizeof(*rd));
  if (rd == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  rd->src = s;
  rd->waker = init->waker;
  int rc = sl__kafka_decoder_init(&rd->dec, s->format, s->delim,
                                  s->value_schema, s->schema, out_err);
  if (rc == SL_OK) {
    rd->has_dec = true;
    rd->dec.f_timestamp = s->f_ts;
    rd->dec.f_headers = s->f_hdr;
    rd->dec.f_key = s->f_key;
    rd->dec.f_partition = s->f_part;
    rd->dec.f_offset = s->f_off;
    rc = new_handle(s, RD_KAFKA_CONSUMER, true, &rd->rk, out_err);
  }
  if (rc == SL_OK) {
    rd_kafka_poll_set_consumer(rd->rk);
    rd->q = rd_kafka_queue_get_consumer(rd->rk);
    if (rd->q && rd->waker)
      rd_kafka_queue_cb_event_enable(rd->q, on_queue, rd->waker);
    rc = add_splits(rd, init->splits, init->n_splits, out_err);
  }
  if (rc != SL_OK) {
    reader_close(rd);
    return rc;
  }
  *out = rd;
  return SL_OK;
}

static int reader_add_splits(void *r, const sl_split_init_t *splits,
                             uint32_t n, sl_error_t **out_err) {
  return add_splits(r, splits, n, out_err);
}

static kpart_t *find_part(kreader_t *rd, const char *topic, int32_t part) {
  for (uint32_t i = 0; i < rd->n_parts; i++)
    if (rd->parts[i].part == part && strcmp(rd->parts[i].topic, topic) == 0)
      return &rd->parts[i];
  return NULL;
}

static void finish_part(kreader_t *rd, kpart_t *p, sl_source_out_t *out) {
  if (p->is_reported) return;
  p->is_done = p->is_reported = true;
  sl_source_split_finished(out, p->split);
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(l, p->topic, p->part);
  rd_kafka_pause_partitions(rd->rk, l);
  rd_kafka_topic_partition_list_destroy(l);
}

static int decode_emit(kreader_t *rd, kpart_t *p, rd_kafka_message_t *m,
                       sl_source_out_t *out, bool *out_more,
                       sl_error_t **out_err) {
  sl_kafka_hdr_t hbuf[32], *hs = hbuf;
  size_t nh = 0;
  rd_kafka_headers_t *hdrs = NULL;
  if (rd->src->f_hdr >= 0 && rd_kafka_message_headers(m, &hdrs) ==
                                 RD_KAFKA_RESP_ERR_NO_ERROR) {
    size_t cnt = rd_kafka_header_cnt(hdrs);
    if (cnt > 32 && (hs = sl_calloc(cnt, sizeof(*hs))) == NULL)
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    const char *name;
    const void *val;
    size_t len;
    while (nh < cnt &&
           rd_kafka_header_get_all(hdrs, nh, &name, &val, &len) ==
               RD_KAFKA_RESP_ERR_NO_ERROR) {
      hs[nh].name = name;
      hs[nh].value = val;
      hs[nh].len = len;
      nh++;
    }
  }
  rd_kafka_timestamp_type_t tt;
  sl_kafka_rec_t rec = {
      m->payload, m->len, m->key, m->key_len,
      rd_kafka_message_timestamp(m, &tt), m->partition, m->offset, hs, nh};
  sl_source_set_split(out, p->split);
  sl_row_builder_t *b = sl_source_builder(out);
  sl_error_t *err = NULL;
  int rc = sl__kafka_decode(&rd->dec, &rec, b, &err);
  if (hs != hbuf) sl_free(hs);
  if (rc == SL_OK) {
    p->next = m->offset + 1;
    *out_more = sl_source_emit_builder(out, &err);
    if (err) rc = SL_EPARSE;
    if (rc == SL_OK) return SL_OK;
  }
  if (err == NULL) sl_error_set(&err, rc, "%s", sl_strerror(rc));
  sl_error_prefix(err, "kafka source: topic '%s' partition %d offset %lld",
                  p->topic, p->part, (long long)m->offset);
  if (rc != SL_ENOMEM) sl_error_set_fatal(err, true);
  if (out_err && *out_err == NULL) *out_err = err;
  else sl_error_destroy(err);
  return rc;
}

static int reader_poll(void *r, sl_source_out_t *out, sl_error_t **out_err) {
  kreader_t *rd = r;
  rd->out = out;
  for (;;) {
    bool all_done = true;
    for (uint32_t i = 0; i < rd->n_parts; i++) {
      kpart_t *p = &rd->parts[i];
      if (p->is_done && !p->is_reported) finish_part(rd, p, out);
      all_done &= p->is_done;
    }
    /* Bounded: end once the enumerator has handed out every split (its
     * event) and they are read.  Until then wait on a timer, not
     * SL_POLL_END: a task waiting for an assignment is not woken when the
     * enumerator fails (an unreachable cluster), a timer is.  (The
     * enumerator host now wakes its readers when it fails,
     * sl__enum_host_on_fail in checkpoint/enum_host.c, so the timer is
     * no longer needed for that.) */
    if (rd->src->bounded && all_done && rd->is_all_assigned)
      return SL_POLL_END;
    rd_kafka_message_t *m = rd_kafka_consumer_poll(rd->rk, 0);
    if (m == NULL) {
      sl_source_wait_until(out, sl_source_now(out) + 200 * 1000000LL);
      return SL_POLL_WAIT;
    }
    const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : NULL;
    kpart_t *p = topic ? find_part(rd, topic, m->partition) : NULL;
    int rc = SL_OK;
    bool more = true;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      /* The end of what is there now: the offset is past any control
       * record at the end. */
      if (p && !p->is_done) {
        if (m->offset > p->next) p->next = m->offset;
        if (p->end >= 0 && p->next >= p->end) finish_part(rd, p, out);
      }
    } else if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
               m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE) {
      rc = sl_error_set(out_err, SL_ENOTFOUND,
                        "kafka source: topic '%s' partition %d: offset %lld "
                        "is no longer in the log (deleted by retention?); "
                        "refusing to skip records: %s",
                        topic ? topic : "?", m->partition,
                        (long long)(p ? p->next : m->offset),
                        rd_kafka_message_errstr(m));
      rc = fatal(out_err, rc);
    } else if (m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
               m->err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
               m->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
               m->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
               m->err == RD_KAFKA_RESP_ERR__FATAL) {
      rc = sl_error_set(out_err, SL_EIO,
                        "kafka source: topic '%s' partition %d: %s",
                        topic ? topic : "?", m->partition,
                        rd_kafka_message_errstr(m));
    } else if (m->err) {
      /* Transient (a broker down, a leader change): librdkafka retries. */
    } else if (p && !p->is_done && m->offset >= p->next) {
      if (p->end >= 0 && m->offset >= p->end) {
        finish_part(rd, p, out);
      } else {
        rc = decode_emit(rd, p, m, out, &more, out_err);
        if (rc == SL_OK && p->end >= 0 && p->next >= p->end)
          finish_part(rd, p, out);
      }
    }
    rd_kafka_message_destroy(m);
    if (rc != SL_OK) return rc;
    if (!more) return SL_POLL_MORE;
  }
}

static int reader_event(void *r, const uint8_t *ev, size_t len,
                        sl_error_t **out_err) {
  kreader_t *rd = r;
  if (len != 1 || ev[0] != 1)
    return sl_error_set(out_err, SL_ECORRUPT, "kafka source: unknown "
                        "event from the enumerator");
  rd->is_all_assigned = true;
  return SL_OK;
}

static int reader_position(void *r, uint32_t split, sl_bytes_t *out) {
  kreader_t *rd = r;
  for (uint32_t i = 0; i < rd->n_parts; i++) {
    kpart_t *p = &rd->parts[i];
    if (p->split != split) continue;
    uint8_t pos[POS_LEN];
    pos_encode(pos, K_OFFSET, p->next, p->end);
    /* Tell the enumerator, which commits it to the group when the
     * checkpoint completes (see the top of the file). */
    size_t idlen = strlen(p->id);
    if (rd->src->group && rd->out && idlen <= 4096) {
      uint8_t ev[9 + 4096];
      ev[0] = 2;
      store_u64le(ev + 1, (uint64_t)p->next);
      memcpy(ev + 9, p->id, idlen);
      int rc = sl_source_send_event(rd->out, ev, 9 + idlen);
      if (rc != SL_OK) return rc;
    }
    return sl_bytes_append(out, pos, POS_LEN);
  }
  return SL_ENOTFOUND;
}

static int ksrc_plan(void *ctx, uint32_t parallelism, sl_split_list_t *splits,
                     sl_error_t **out_err) {
  (void)ctx, (void)parallelism, (void)splits;
  return sl_error_set(out_err, SL_ENOTSUP, "kafka source: splits come "
                      "from its enumerator");
}

static void ksrc_destroy(void *ctx) {
  ksrc_t *s = ctx;
  if (s == NULL) return;
  sl_free(s->bootstrap);
  sl__kafka_strs_free(s->topics, s->n_topics);
  sl_free(s->group);
  for (uint32_t i = 0; i < s->n_offsets; i++)
    sl_free((char *)s->offsets[i].topic);
  sl_free(s->offsets);
  sl_schema_unref(s->value_schema);
  sl_schema_unref(s->schema);
  sl__kafka_strs_free(s->props, 2 * s->n_props);
  sl_free(s);
}

static const sl_source_vt_t kafka_vt = {
    "kafka", ksrc_plan, reader_open, reader_poll, reader_position,
    reader_close, ksrc_destroy, &kafka_enum_vt, reader_add_splits,
    reader_event,
};

/* ------------------------------------------------------------------ */

void sl_kafka_source_config_init(sl_kafka_source_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->start = SL_KAFKA_START_EARLIEST;
  cfg->format = SL_KAFKA_FORMAT_JSON;
  cfg->discovery_interval_ms = 30000;
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

int sl_kafka_source_create(const sl_kafka_source_config_t *cfg,
                           const sl_source_vt_t **out_vt, void **out_ctx,
                           sl_schema_t **out_schema, sl_error_t **out_err) {
  if (cfg->bootstrap_servers == NULL || cfg->bootstrap_servers[0] == '\0')
    return sl_error_set(out_err, SL_EINVAL,
                        "kafka source: bootstrap_servers is required");
  if (cfg->n_topics == 0 || cfg->topics == NULL)
    return sl_error_set(out_err, SL_EINVAL,
                        "kafka source: at least one topic is required");
  for (uint32_t i = 0; i < cfg->n_topics; i++)
    if (cfg->topics[i] == NULL || !topic_ok(cfg->topics[i]))
      return sl_error_set(out_err, SL_EINVAL,
                          "kafka source: '%s' is not a valid topic name "
                          "(1 to 249 of a-z A-Z 0-9 . _ -)",
                          cfg->topics[i] ? cfg->topics[i] : "");
  if (cfg->schema == NULL)
    return sl_error_set(out_err, SL_EINVAL, "kafka source: no schema");
  if ((unsigned)cfg->start > SL_KAFKA_START_OFFSETS)
    return sl_error_set(out_err, SL_EINVAL, "kafka source: unknown start");
  if ((unsigned)cfg->format > SL_KAFKA_FORMAT_BYTES)
    return sl_error_set(out_err, SL_EINVAL, "kafka source: unknown format");
  if (cfg->start == SL_KAFKA_START_COMMITTED && cfg->group_id == NULL)
    return sl_error_set(out_err, SL_EINVAL,
                        "kafka source: start committed needs a group_id");
  if (cfg->discovery_interval_ms < 0 ||
      cfg->discovery_interval_ms > SL_MAX_DURATION_MS ||
      cfg->timeout_ms < 0 || cfg->timeout_ms > 3600000)
    return sl_error_set(out_err, SL_EINVAL,
                        "kafka source: discovery_interval_ms or timeout_ms "
                        "out of range");
  for (uint32_t i = 0; i < cfg->n_start_offsets; i++)
    if (cfg->start_offsets[i].topic == NULL ||
        cfg->start_offsets[i].partition < 0 ||
        cfg->start_offsets[i].offset < 0)
      return sl_error_set(out_err, SL_EINVAL,
                          "kafka source: start offset %u needs a topic, a "
                          "partition >= 0 and an offset >= 0", i);
  static const char *const refused[] = {
      "bootstrap.servers", "group.id", "enable.auto.commit",
      "auto.offset.reset", "enable.auto.offset.store",
      "enable.partition.eof", NULL};
  char **props;
  uint32_t n_props;
  int prc = sl__kafka_props_copy(cfg->properties, refused, "kafka source",
                                 "source", &props, &n_props, out_err);
  if (prc != SL_OK) return prc;

  ksrc_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) {
    sl__kafka_strs_free(props, 2 * n_props);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  s->props = props;
  s->n_props = n_props;
  s->start = cfg->start;
  s->start_ts = cfg->start_timestamp_ms;
  s->format = cfg->format;
  s->delim = cfg->csv_delimiter ? cfg->csv_delimiter : ',';
  s->bounded = cfg->bounded;
  s->read_uncommitted = cfg->read_uncommitted;
  s->discovery_ms = cfg->discovery_interval_ms;
  s->timeout_ms = cfg->timeout_ms ? (int)cfg->timeout_ms : 10000;
  s->value_schema = sl_schema_ref((sl_schema_t *)cfg->schema);
  s->f_ts = s->f_hdr = s->f_key = s->f_part = s->f_off = -1;
  if ((s->bootstrap = sl_strdup(cfg->bootstrap_servers)) == NULL ||
      (cfg->group_id && (s->group = sl_strdup(cfg->group_id)) == NULL) ||
      (s->topics = sl_calloc(cfg->n_topics, sizeof(char *))) == NULL)
    goto nomem;
  for (; s->n_topics < cfg->n_topics; s->n_topics++)
    if ((s->topics[s->n_topics] = sl_strdup(cfg->topics[s->n_topics])) ==
        NULL)
      goto nomem;
  if (cfg->n_start_offsets) {
    s->offsets = sl_calloc(cfg->n_start_offsets, sizeof(*s->offsets));
    if (s->offsets == NULL) goto nomem;
    for (; s->n_offsets < cfg->n_start_offsets; s->n_offsets++) {
      s->offsets[s->n_offsets] = cfg->start_offsets[s->n_offsets];
      if ((s->offsets[s->n_offsets].topic =
               sl_strdup(cfg->start_offsets[s->n_offsets].topic)) == NULL)
        goto nomem;
    }
  }
  /* The output schema: the value's fields, then the metadata fields. */
  {
    uint32_t nv = sl_schema_n_fields(cfg->schema);
    sl_field_t *f = sl_calloc(nv + 5, sizeof(*f));
    if (f == NULL) goto nomem;
    for (uint32_t i = 0; i < nv; i++) f[i] = *sl_schema_field(cfg->schema, i);
    uint32_t n = nv;
    struct {
      const char *name;
      sl_type_id_t t;
      int *idx;
    } meta[] = {{cfg->timestamp_field, SL_TYPE_TIMESTAMP, &s->f_ts},
                {cfg->headers_field, SL_TYPE_STRING, &s->f_hdr},
                {cfg->key_field, SL_TYPE_STRING, &s->f_key},
                {cfg->partition_field, SL_TYPE_INT32, &s->f_part},
                {cfg->offset_field, SL_TYPE_INT64, &s->f_off}};
    for (size_t k = 0; k < 5; k++) {
      if (meta[k].name == NULL) continue;
      f[n].name = meta[k].name;
      f[n].type.id = (uint8_t)meta[k].t;
      f[n].type.nullable = true;
      *meta[k].idx = (int)n++;
    }
    sl_error_t *err = NULL;
    int rc = sl_schema_create(f, n, &s->schema, &err);
    sl_free(f);
    if (rc != SL_OK) {
      if (err) sl_error_prefix(err, "kafka source: metadata fields");
      if (out_err && *out_err == NULL) *out_err = err;
      else sl_error_destroy(err);
      ksrc_destroy(s);
      return rc;
    }
  }
  {
    /* Check the format against the schema now (string/bytes). */
    sl_kafka_decoder_t d;
    int rc = sl__kafka_decoder_init(&d, s->format, s->delim, s->value_schema,
                                    s->schema, out_err);
    if (rc == SL_OK) sl__kafka_decoder_close(&d);
    if (rc != SL_OK) {
      ksrc_destroy(s);
      return rc;
    }
  }
  *out_vt = &kafka_vt;
  *out_ctx = s;
  *out_schema = sl_schema_ref(s->schema);
  return SL_OK;
nomem:
  ksrc_destroy(s);
  return sl_error_set(out_err, SL_ENOMEM, "out of memory");
}
