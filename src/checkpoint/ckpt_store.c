/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checkpoint storage: state files, blobs, the metadata file and the
 * directory layout <dir>/<job>/chk-<id>/.  Formats: docs/checkpoint-format.md.
 *
 * DESIGN NOTES
 *
 * A checkpoint directory goes through these states:
 *
 *   (absent) --task files written--> PARTIAL --_metadata renamed--> COMPLETE
 *      PARTIAL --abort/cleanup--> (absent)
 *      COMPLETE --subsumed beyond retention--> (absent)
 *
 * Invariants:
 *  S1. Only a directory whose _metadata reads back with a valid checksum is
 *      a restore point; state files without metadata are garbage.
 *  S2. _metadata appears atomically: written to _metadata.tmp, fsynced,
 *      renamed, and the directory and the job directory fsynced
 *      (sl__ckpt_durable_replace; the rename is the single commit point).
 *  S3. Every file the metadata names was fsynced before the metadata was
 *      written, and its size and index checksum are in the metadata, so a
 *      truncated or replaced file is detected before it is trusted.
 *  S4. Every length read from a file is checked against the bytes present
 *      before use.
 *  S5. Encoders fail closed: bytes are accumulated with a sticky error
 *      (sl_acc_t, and the writer's rc) that is checked once before they
 *      are hashed, renamed or acknowledged, so a file whose checksum is
 *      valid always parses; a state file's size and checksum are handed
 *      back only for a whole, fsynced file.
 *  S6. Removal mirrors the commit: _metadata first and an fsync of the
 *      directory, then the other files (sl__ckpt_remove_dir), every error
 *      checked.  Out of memory or an I/O error while reading is reported,
 *      never taken for corruption (only corruption falls back to an older
 *      checkpoint).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "checkpoint/checkpoint.h"
#include "core/inject.h"

#define STATE_MAGIC "SLST"
/* 2: timers carry their time domain; 3: states carry layout+fingerprint */
#define STATE_VERSION 3
#define STATE_FOOTER_MAGIC "SLSTEND"
#define META_MAGIC "SLCM"
/* 2: a source operator may carry its enumerator's state */
#define META_VERSION 2
#define META_FOOTER_MAGIC "SLCMEND"
#define WBUF (1u << 20)

/* ------------------------------------------------------------------ */
/* Small helpers. */

void sl__ckpt_subtask_clear(sl_ckpt_subtask_t *s) {
  sl_free(s->state_file);
  sl_free(s->channel_file);
  for (uint32_t i = 0; i < s->n_opstates; i++) {
    sl_ckpt_opstate_t *o = &s->opstates[i];
    for (uint32_t k = 0; k < o->n_entries; k++) sl_free(o->entries[k].bytes);
    sl_free(o->entries);
    sl_free(o->name);
  }
  sl_free(s->opstates);
  memset(s, 0, sizeof(*s));
}

void sl__ckpt_meta_clear(sl_ckpt_meta_t *m) {
  for (uint32_t i = 0; i < m->n_ops; i++) {
    for (uint32_t k = 0; k < m->ops[i].n_subtasks; k++)
      sl__ckpt_subtask_clear(&m->ops[i].subtasks[k]);
    sl_free(m->ops[i].subtasks);
    sl_free(m->ops[i].uid);
    sl_free(m->ops[i].enum_state);
  }
  sl_free(m->ops);
  sl_free(m->job);
  sl_free(m->dir);
  memset(m, 0, sizeof(*m));
}

const sl_ckpt_op_t *sl__ckpt_meta_op(const sl_ckpt_meta_t *m,
                                     const char *uid) {
  for (uint32_t i = 0; i < m->n_ops; i++)
    if (strcmp(m->ops[i].uid, uid) == 0) return &m->ops[i];
  return NULL;
}

const sl_ckpt_opstate_t *sl__ckpt_opstate(const sl_ckpt_subtask_t *s,
                                          const char *name) {
  for (uint32_t i = 0; i < s->n_opstates; i++)
    if (strcmp(s->opstates[i].name, name) == 0) return &s->opstates[i];
  return NULL;
}

char *sl__ckpt_file_name(const char *uid, uint32_t subtask, const char *ext) {
  sl_acc_t b;
  sl__acc_init(&b);
  for (const char *p = uid; *p; p++) {
    unsigned char c = (unsigned char)*p;
    bool is_safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                   (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (is_safe) sl__acc_put(&b, p, 1);
    else sl__acc_printf(&b, "%%%02x", c);
  }
  sl__acc_printf(&b, "-%u%s", subtask, ext);
  uint8_t *name;
  size_t len;
  if (sl__acc_finish(&b, &name, &len) != SL_OK) return NULL;
  return (char *)name;
}

int sl__ckpt_mkdirs(const char *path, sl_error_t **out_err) {
  char *p = sl_strdup(path);
  if (p == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s != '\0') continue;
    char c = *s;
    *s = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
      int e = errno;
      int rc = sl_error_set(out_err, -e, "cannot create directory '%s': %s",
                            p, strerror(e));
      sl_free(p);
      return rc;
    }
    *s = c;
    if (c == '\0') break;
  }
  sl_free(p);
  return SL_OK;
}

static int fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = fsync(fd) == 0 ? SL_OK : -errno;
  close(fd);
  return rc;
}

/* Buffered writer that counts bytes. */
typedef struct wfile_s {
  int fd;
  const char *path;
  sl_bytes_t buf;
  uint64_t off;
  int rc;
} wfile_t;

static int wflush(wfile_t *w) {
  size_t done = 0;
  while (w->rc == SL_OK && done < w->buf.len) {
    ssize_t n = write(w->fd, w->buf.data + done, w->buf.len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) w->rc = -errno;
    else done += (size_t)n;
  }
  w->buf.len = 0;
  return w->rc;
}

/* Appends only; callers flush (state sections hash the buffer first). */
static int wput(wfile_t *w, const void *p, size_t n) {
  if (w->rc != SL_OK) return w->rc;
  if (sl_bytes_append(&w->buf, p, n) != SL_OK) return w->rc = SL_ENOMEM;
  w->off += n;
  return SL_OK;
}

static int wvarint(wfile_t *w, uint64_t v) {
  uint8_t tmp[SL_VARINT_MAX];
  return wput(w, tmp, sl__put_varint(tmp, v));
}

static int wu64(wfile_t *w, uint64_t v) {
  uint8_t b[8];
  sl__put_u64le(b, v);
  return wput(w, b, 8);
}

static int wopen(wfile_t *w, const char *path, sl_error_t **out_err) {
  memset(w, 0, sizeof(*w));
  sl_bytes_init(&w->buf);
  w->path = path;
  w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd < 0) {
    int e = errno;
    /* I/O errors of checkpoint files are retriable: a later checkpoint
     * or attempt may succeed (the one at hand is aborted). */
    return sl__error_retriable(
        out_err, sl_error_set(out_err, -e, "cannot create checkpoint file "
                              "'%s': %s", path, strerror(e)));
  }
  return SL_OK;
}

/* Flush, fsync and close; after an fsync failure the file is not trusted
 * (and the caller must not retry and go on). */
static int wclose(wfile_t *w, sl_error_t **out_err) {
  int rc = wflush(w);
  if (rc == SL_OK && fsync(w->fd) != 0) rc = -errno;
  if (close(w->fd) != 0 && rc == SL_OK) rc = -errno;
  sl_bytes_close(&w->buf);
  if (rc != SL_OK)
    return sl__error_retriable(
        out_err, sl_error_set(out_err, rc, "cannot write checkpoint file "
                              "'%s': %s", w->path, sl_strerror(rc)));
  return SL_OK;
}

/* Read cursor over a byte range; every read is bounds-checked (S4). */
typedef struct rcur_s {
  const uint8_t *p, *end;
  bool is_bad;
  bool is_oom; /* is_bad because memory ran out, not because of the data */
} rcur_t;

static uint64_t rvarint(rcur_t *c) {
  uint64_t v = 0;
  size_t k = c->is_bad ? 0 : sl__get_varint(c->p, (size_t)(c->end - c->p), &v);
  if (k == 0) {
    c->is_bad = true;
    return 0;
  }
  c->p += k;
  return v;
}

static const uint8_t *rbytes(rcur_t *c, uint64_t n) {
  if (c->is_bad || (uint64_t)(c->end - c->p) < n) {
    c->is_bad = true;
    return NULL;
  }
  const uint8_t *p = c->p;
  c->p += n;
  return p;
}

static uint32_t ru32(rcur_t *c) {
  const uint8_t *p = rbytes(c, 4);
  return p ? sl__get_u32le(p) : 0;
}

static uint64_t ru64(rcur_t *c) {
  const uint8_t *p = rbytes(c, 8);
  return p ? sl__get_u64le(p) : 0;
}

static char *rstr(rcur_t *c) {
  uint64_t n = rvarint(c);
  if (n > 65536) c->is_bad = true;
  const uint8_t *p = rbytes(c, n);
  if (p == NULL) return NULL;
  char *str = sl_strndup((const char *)p, (size_t)n);
  if (str == NULL) c->is_oom = c->is_bad = true;
  return str;
}

/* ------------------------------------------------------------------ */
/* State files. */

static int cmp_timer(const void *a, const void *b) {
  const sl_ckpt_timer_t *x = a, *y = b;
  if (x->kg != y->kg) return x->kg < y->kg ? -1 : 1;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

int sl__ckpt_write_state(const char *path, const sl_kstate_snap_t *snap,
                         uint32_t kg_start, uint32_t kg_end,
                         const sl_ckpt_timer_t *timers, uint32_t n_timers,
                         uint64_t *out_size, uint64_t *out_checksum,
                         sl_error_t **out_err) {
  wfile_t w;
  int rc = wopen(&w, path, out_err);
  if (rc != SL_OK) return rc;
  uint32_t n_kg = kg_end - kg_start + 1;
  uint64_t *idx = sl_calloc((size_t)n_kg * 3, sizeof(uint64_t));
  sl_ckpt_timer_t *tm = n_timers ? sl_malloc(n_timers * sizeof(*tm)) : NULL;
  XXH3_state_t *hs = XXH3_createState();
  uint64_t ck = 0;
  sl_acc_t hdr, ib;
  sl__acc_init(&hdr);
  sl__acc_init(&ib);
  if (idx == NULL || (n_timers && tm == NULL) || hs == NULL) {
    rc = SL_ENOMEM;
    goto out;
  }
  if (n_timers) {
    memcpy(tm, timers, n_timers * sizeof(*tm));
    qsort(tm, n_timers, sizeof(*tm), cmp_timer);
  }
  /* Header: it goes into the index checksum too. */
  uint32_t n_states = sl__kstate_snap_n_states(snap);
  sl__acc_put(&hdr, STATE_MAGIC, 4);
  uint8_t ver[4] = {STATE_VERSION, 0, 0, 0};
  sl__acc_put(&hdr, ver, 4);
  sl__acc_put_u32le(&hdr, kg_start);
  sl__acc_put_u32le(&hdr, kg_end);
  sl__acc_put_u32le(&hdr, n_states);
  for (uint32_t i = 0; i < n_states; i++) {
    const sl_state_desc_t *d = sl__kstate_snap_desc(snap, i);
    sl__acc_put_str(&hdr, d->name);
    sl__acc_put_u8(&hdr, (uint8_t)d->kind);
    sl__acc_put_varint(&hdr, d->version);
    /* Version 3: the layout and fingerprint checked on restore. */
    sl__acc_put_str(&hdr, d->layout ? d->layout : "");
    sl__acc_put_u64le(&hdr, sl__state_fingerprint(d));
  }
  /* Checked once, before anything of it is hashed or written (S5). */
  if ((rc = sl__acc_status(&hdr)) != SL_OK) goto out;
  wput(&w, hdr.b.data, hdr.b.len);
  uint32_t ti = 0;
  for (uint32_t kg = kg_start; kg <= kg_end && w.rc == SL_OK; kg++) {
    uint64_t start = w.off;
    size_t buf_start = w.buf.len; /* for the section checksum */
    XXH3_64bits_reset(hs);
    for (uint32_t s = 0; s < n_states; s++) {
      const sl_cowmap_snap_t *ms = sl__kstate_snap_map(snap, s, kg);
      wvarint(&w, ms ? sl__cowmap_snap_size(ms) : 0);
      if (ms == NULL) continue;
      sl_cowmap_iter_t it;
      sl__cowmap_snap_iter(ms, &it);
      const sl_cowmap_entry_t *e;
      while ((e = sl__cowmap_next(&it)) != NULL) {
        wvarint(&w, e->klen);
        wvarint(&w, e->nslen);
        wvarint(&w, e->vlen);
        wput(&w, e->key, e->klen);
        wput(&w, e->val, e->vlen);
        /* Hash what is buffered before the flush drops it. */
        if (w.buf.len >= WBUF) {
          XXH3_64bits_update(hs, w.buf.data + buf_start, w.buf.len - buf_start);
          wflush(&w);
          buf_start = 0;
        }
      }
    }
    uint32_t tj = ti;
    while (tj < n_timers && tm[tj].kg == kg) tj++;
    wvarint(&w, tj - ti);
    for (; ti < tj; ti++) {
      wvarint(&w, sl__zigzag(tm[ti].ts));
      wvarint(&w, ((uint64_t)tm[ti].len << 1) | (tm[ti].domain & 1));
      wput(&w, tm[ti].key, tm[ti].len);
    }
    XXH3_64bits_update(hs, w.buf.data + buf_start, w.buf.len - buf_start);
    uint64_t *x = &idx[(size_t)(kg - kg_start) * 3];
    x[0] = start;
    x[1] = w.off - start;
    x[2] = XXH3_64bits_digest(hs);
    if (w.buf.len >= WBUF) wflush(&w);
  }
  if (ti != n_timers && w.rc == SL_OK) {
    rc = sl_error_set(out_err, SL_EINVAL,
                      "checkpoint file '%s': a timer lies outside the key "
                      "groups %u..%u", path, kg_start, kg_end);
    goto out;
  }
  /* Index, then the footer with the checksum of header and index. */
  uint64_t index_off = w.off;
  for (size_t k = 0; k < (size_t)n_kg * 3; k++) sl__acc_put_u64le(&ib, idx[k]);
  if ((rc = sl__acc_status(&ib)) != SL_OK) goto out;
  wput(&w, ib.b.data, ib.b.len);
  XXH3_64bits_reset(hs);
  XXH3_64bits_update(hs, hdr.b.data, hdr.b.len);
  XXH3_64bits_update(hs, ib.b.data ? ib.b.data : (const uint8_t *)"",
                     ib.b.len);
  ck = XXH3_64bits_digest(hs);
  wu64(&w, hdr.b.len);
  wu64(&w, index_off);
  wu64(&w, ck);
  wput(&w, STATE_FOOTER_MAGIC, 8);
  /* The writer's error is sticky too: one check covers every append. */
  rc = w.rc;
out:
  if (rc == SL_OK) rc = SL_INJECT("task.state_file_before_fsync");
  {
    int crc = wclose(&w, rc == SL_OK ? out_err : NULL);
    if (rc == SL_OK) rc = crc;
  }
  if (rc == SL_ENOMEM)
    sl_error_set(out_err, rc, "out of memory writing '%s'", path);
  else if (rc != SL_OK) /* retriable as wclose's errors: say why */
    sl__error_retriable(out_err, sl_error_set(out_err, rc, "cannot write "
                        "checkpoint file '%s': %s", path, sl_strerror(rc)));
  if (rc == SL_OK) { /* S5: size and checksum only for a whole file */
    *out_size = w.off;
    *out_checksum = ck;
  } else {
    unlink(path); /* garbage; best effort (S1 makes it harmless) */
  }
  sl_free(idx);
  sl_free(tm);
  if (hs) XXH3_freeState(hs);
  sl__acc_close(&hdr);
  sl__acc_close(&ib);
  return rc;
}

static int pread_all(int fd, uint8_t *p, size_t n, uint64_t off) {
  size_t done = 0;
  while (done < n) {
    ssize_t k = pread(fd, p + done, n - done, (off_t)(off + done));
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -errno;
    if (k == 0) return SL_ECORRUPT; /* shorter than it said */
    done += (size_t)k;
  }
  return SL_OK;
}

/* An open state file whose footer, header and index passed their checks.
 * Key groups are read with pread, so several threads may read distinct key
 * groups of one file at once (sl__ckpt_state_read_kg). */
struct sl_ckpt_sfile_s {
  int fd;
  const char *path; /* borrowed */
  uint8_t *ib;      /* the index: (offset, length, checksum) per key group */
  uint64_t hdr_len, index_off;
  uint32_t f_start, f_end, n_states;
  bool is_v2;
};

void sl__ckpt_state_close(sl_ckpt_sfile_t *f) {
  if (f == NULL) return;
  if (f->fd >= 0) close(f->fd);
  sl_free(f->ib);
  sl_free(f);
}

int sl__ckpt_state_open(const char *path, uint64_t size, uint64_t checksum,
                        const sl_ckpt_reader_t *rd, sl_ckpt_sfile_t **out,
                        sl_error_t **out_err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return sl_error_set(out_err, e == ENOENT ? SL_ECORRUPT : -e,
                        "checkpoint file '%s' cannot be opened: %s", path,
                        strerror(e));
  }
  sl_ckpt_sfile_t *f = sl_calloc(1, sizeof(*f));
  if (f == NULL) {
    close(fd);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory reading '%s'",
                        path);
  }
  f->fd = fd;
  f->path = path;
  uint8_t *hdr = NULL;
  sl_state_desc_t *descs = NULL;
  uint64_t *fps = NULL;
  uint32_t n_states = 0;
  int rc = SL_OK;
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != size || size < 32) {
    rc = sl_error_set(out_err, SL_ECORRUPT,
                      "checkpoint file '%s' is truncated or was replaced: "
                      "%lld bytes, expected %llu",
                      path, (long long)st.st_size, (unsigned long long)size);
    goto out;
  }
  uint8_t foot[32];
  if ((rc = pread_all(fd, foot, 32, size - 32)) != SL_OK) goto io;
  uint64_t hdr_len = sl__get_u64le(foot), index_off = sl__get_u64le(foot + 8);
  uint64_t ck = sl__get_u64le(foot + 16);
  if (memcmp(foot + 24, STATE_FOOTER_MAGIC, 8) != 0 || ck != checksum ||
      hdr_len < 16 || hdr_len > index_off || index_off > size - 32) {
    rc = sl_error_set(out_err, SL_ECORRUPT,
                      "checkpoint file '%s' is corrupt: bad footer or "
                      "checksum", path);
    goto out;
  }
  uint64_t ilen = size - 32 - index_off;
  hdr = sl_malloc(hdr_len);
  f->ib = sl_malloc(ilen ? ilen : 1);
  if (hdr == NULL || f->ib == NULL) goto nomem;
  if ((rc = pread_all(fd, hdr, hdr_len, 0)) != SL_OK) goto io;
  if ((rc = pread_all(fd, f->ib, ilen, index_off)) != SL_OK) goto io;
  uint64_t got;
  {
    XXH3_state_t *hs = XXH3_createState();
    if (hs == NULL) goto nomem;
    XXH3_64bits_reset(hs);
    XXH3_64bits_update(hs, hdr, hdr_len);
    XXH3_64bits_update(hs, f->ib, ilen);
    got = XXH3_64bits_digest(hs);
    XXH3_freeState(hs);
  }
  if (got != ck) {
    rc = sl_error_set(out_err, SL_ECORRUPT,
                      "checkpoint file '%s' is corrupt: checksum mismatch",
                      path);
    goto out;
  }
  rcur_t c = {hdr, hdr + hdr_len, false, false};
  const uint8_t *magic = rbytes(&c, 4);
  const uint8_t *ver = rbytes(&c, 4);
  uint32_t f_start = ru32(&c), f_end = ru32(&c);
  n_states = ru32(&c);
  if (c.is_bad || memcmp(magic, STATE_MAGIC, 4) != 0) goto corrupt;
  if (ver[0] < 1 || ver[0] > STATE_VERSION) {
    rc = sl_error_set(out_err, SL_ECORRUPT,
                      "checkpoint file '%s' has format version %u; this "
                      "sluice reads versions 1 to %u", path, ver[0],
                      STATE_VERSION);
    goto out;
  }
  f->is_v2 = ver[0] >= 2;
  bool has_layouts = ver[0] >= 3;
  /* The count of key groups in 64 bits: 0..UINT32_MAX would wrap to 0 in
   * 32 and let an empty index pass (found by fuzzing, S4). */
  if (f_end < f_start || ilen != ((uint64_t)f_end - f_start + 1) * 24 ||
      n_states > 4096)
    goto corrupt;
  descs = sl_calloc(n_states + 1, sizeof(*descs));
  fps = sl_calloc(n_states + 1, sizeof(*fps));
  if (descs == NULL || fps == NULL) goto nomem;
  for (uint32_t i = 0; i < n_states; i++) {
    descs[i].name = rstr(&c);
    const uint8_t *k = rbytes(&c, 1);
    descs[i].kind = k ? (sl_state_kind_t)k[0] : 0;
    uint64_t v = rvarint(&c);
    descs[i].version = (uint32_t)v;
    if (has_layouts) {
      char *layout = rstr(&c);
      fps[i] = ru64(&c);
      /* An empty layout is none (sl_state_desc_t.layout NULL). */
      if (layout && layout[0] == '\0') {
        sl_free(layout);
        layout = NULL;
      }
      descs[i].layout = layout;
    }
    if (c.is_oom) goto nomem;
    if (v > UINT32_MAX) goto corrupt;
    if (c.is_bad || descs[i].name == NULL) goto corrupt;
  }
  f->hdr_len = hdr_len;
  f->index_off = index_off;
  f->f_start = f_start;
  f->f_end = f_end;
  f->n_states = n_states;
  if (rd->on_states &&
      (rc = rd->on_states(rd->user, descs, has_layouts ? fps : NULL,
                          n_states)) != SL_OK)
    goto out;
  goto out;
corrupt:
  rc = sl_error_set(out_err, SL_CORRUPT("state file structure"),
                    "checkpoint file '%s' is corrupt: malformed contents",
                    path);
  goto out;
nomem:
  rc = sl_error_set(out_err, SL_ENOMEM, "out of memory reading '%s'", path);
  goto out;
io:
  rc = sl_error_set(out_err, rc,
                    "cannot read checkpoint file '%s': %s", path,
                    rc == SL_ECORRUPT ? "it is shorter than its index says"
                                      : sl_strerror(rc));
out:
  if (descs)
    for (uint32_t i = 0; i < n_states; i++) {
      sl_free((char *)descs[i].name);
      sl_free((char *)descs[i].layout);
    }
  sl_free(descs);
  sl_free(fps);
  sl_free(hdr);
  if (rc != SL_OK) {
    sl__ckpt_state_close(f);
    return rc;
  }
  *out = f;
  return SL_OK;
}

bool sl__ckpt_state_has_kg(const sl_ckpt_sfile_t *f, uint32_t kg) {
  return kg >= f->f_start && kg <= f->f_end;
}

int sl__ckpt_state_read_kg(sl_ckpt_sfile_t *f, uint32_t kg,
                           const sl_ckpt_reader_t *rd, sl_bytes_t *scratch,
                           sl_error_t **out_err) {
  const char *path = f->path;
  if (!sl__ckpt_state_has_kg(f, kg)) return SL_OK;
  int rc = SL_OK;
  const uint8_t *x = f->ib + (size_t)(kg - f->f_start) * 24;
  uint64_t off = sl__get_u64le(x), len = sl__get_u64le(x + 8);
  uint64_t sck = sl__get_u64le(x + 16);
  if (off < f->hdr_len || off > f->index_off || len > f->index_off - off)
    goto corrupt;
  scratch->len = 0;
  if (sl_bytes_reserve(scratch, len ? len : 1) != SL_OK)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory reading '%s'",
                        path);
  uint8_t *sec = scratch->data;
  if ((rc = pread_all(f->fd, sec, len, off)) != SL_OK)
    return sl_error_set(out_err, rc,
                        "cannot read checkpoint file '%s': %s", path,
                        rc == SL_ECORRUPT ? "it is shorter than its index "
                                            "says"
                                          : sl_strerror(rc));
  if (XXH3_64bits(sec, len) != sck)
    return sl_error_set(out_err, SL_ECORRUPT,
                        "checkpoint file '%s' is corrupt: key group %u fails "
                        "its checksum", path, kg);
  rcur_t s = {sec, sec + len, false, false};
  for (uint32_t i = 0; i < f->n_states && !s.is_bad; i++) {
    uint64_t n = rvarint(&s);
    /* A count no section of this length can hold is corrupt, and is never
     * handed to on_count (each entry takes at least three bytes). */
    if (!s.is_bad && n > (uint64_t)(s.end - s.p) / 3) s.is_bad = true;
    if (rd->on_count && !s.is_bad &&
        (rc = rd->on_count(rd->user, i, kg, n)) != SL_OK)
      return rc;
    for (uint64_t k = 0; k < n && !s.is_bad; k++) {
      uint64_t kl = rvarint(&s), nl = rvarint(&s), vl = rvarint(&s);
      if (nl > kl || kl > UINT32_MAX / 2 || vl > UINT32_MAX / 2) {
        s.is_bad = true;
        break;
      }
      const uint8_t *key = rbytes(&s, kl), *val = rbytes(&s, vl);
      if (s.is_bad) break;
      if ((rc = rd->on_entry(rd->user, i, kg, key, (uint32_t)kl,
                             (uint32_t)nl, val, (uint32_t)vl)) != SL_OK)
        return rc;
    }
  }
  uint64_t nt = rvarint(&s);
  for (uint64_t k = 0; k < nt && !s.is_bad; k++) {
    int64_t ts = sl__unzigzag(rvarint(&s));
    uint64_t kl = rvarint(&s);
    uint8_t domain = 0; /* version 1: processing time only */
    if (f->is_v2) {
      domain = (uint8_t)(kl & 1);
      kl >>= 1;
    }
    const uint8_t *key = rbytes(&s, kl);
    if (s.is_bad) break;
    if (rd->on_timer && (rc = rd->on_timer(rd->user, kg, domain, ts, key,
                                           (uint32_t)kl)) != SL_OK)
      return rc;
  }
  if (s.is_bad || s.p != s.end) goto corrupt;
  return SL_OK;
corrupt:
  return sl_error_set(out_err, SL_CORRUPT("state file structure"),
                      "checkpoint file '%s' is corrupt: malformed contents",
                      path);
}

int sl__ckpt_read_state(const char *path, uint64_t size, uint64_t checksum,
                        uint32_t kg_start, uint32_t kg_end,
                        const sl_ckpt_reader_t *rd, sl_error_t **out_err) {
  sl_ckpt_sfile_t *f = NULL;
  int rc = sl__ckpt_state_open(path, size, checksum, rd, &f, out_err);
  if (rc != SL_OK) return rc;
  sl_bytes_t sec;
  sl_bytes_init(&sec);
  for (uint64_t kg64 = kg_start; kg64 <= kg_end && rc == SL_OK; kg64++)
    rc = sl__ckpt_state_read_kg(f, (uint32_t)kg64, rd, &sec, out_err);
  sl_bytes_close(&sec);
  sl__ckpt_state_close(f);
  return rc;
}

int sl__ckpt_write_blob(const char *path, const uint8_t *p, size_t len,
                        uint64_t *out_checksum, sl_error_t **out_err) {
  wfile_t w;
  int rc = wopen(&w, path, out_err);
  if (rc != SL_OK) return rc;
  wput(&w, p, len);
  rc = wclose(&w, out_err);
  if (rc == SL_OK) *out_checksum = XXH3_64bits(p, len);
  return rc;
}

int sl__ckpt_read_blob(const char *path, uint64_t size, uint64_t checksum,
                       uint8_t **out, sl_error_t **out_err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return sl_error_set(out_err, SL_ECORRUPT,
                        "checkpoint file '%s' cannot be opened: %s", path,
                        strerror(e));
  }
  struct stat st;
  int rc = SL_OK;
  uint8_t *p = NULL;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != size) {
    rc = sl_error_set(out_err, SL_ECORRUPT,
                      "checkpoint file '%s' is truncated or was replaced",
                      path);
    goto out;
  }
  p = sl_malloc(size ? size : 1);
  if (p == NULL) {
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
    goto out;
  }
  if ((rc = pread_all(fd, p, size, 0)) != SL_OK ||
      XXH3_64bits(p, size) != checksum) {
    rc = sl_error_set(out_err, SL_ECORRUPT,
                      "checkpoint file '%s' is corrupt: checksum mismatch",
                      path);
    sl_free(p);
    p = NULL;
    goto out;
  }
  *out = p;
out:
  close(fd);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Metadata. */

/* Encode m into *out (owned by the caller).  The accumulator is checked
 * once, before the checksum is computed: a failed append can never yield a
 * file whose checksum is valid and whose contents do not parse (S2). */
static int encode_meta(const sl_ckpt_meta_t *m, uint8_t **out,
                       size_t *out_len) {
  sl_acc_t b;
  sl__acc_init(&b);
  sl__acc_put(&b, META_MAGIC, 4);
  uint8_t v[4] = {META_VERSION, m->kind, m->mode, 0};
  sl__acc_put(&b, v, 4);
  sl__acc_put_u64le(&b, m->id);
  sl__acc_put_u64le(&b, (uint64_t)m->time_ns);
  sl__acc_put_varint(&b, m->max_parallelism);
  sl__acc_put_str(&b, m->job);
  sl__acc_put_varint(&b, m->n_ops);
  for (uint32_t i = 0; i < m->n_ops; i++) {
    const sl_ckpt_op_t *op = &m->ops[i];
    sl__acc_put_str(&b, op->uid);
    sl__acc_put_varint(&b, op->parallelism);
    sl__acc_put_varint(&b, op->n_subtasks);
    for (uint32_t k = 0; k < op->n_subtasks; k++) {
      const sl_ckpt_subtask_t *s = &op->subtasks[k];
      sl__acc_put_varint(&b, s->subtask);
      sl__acc_put_varint(&b, s->kg_start);
      sl__acc_put_varint(&b, s->kg_end);
      sl__acc_put_str(&b, s->state_file);
      sl__acc_put_u64le(&b, s->state_size);
      sl__acc_put_u64le(&b, s->state_checksum);
      sl__acc_put_str(&b, s->channel_file);
      sl__acc_put_u64le(&b, s->channel_size);
      sl__acc_put_u64le(&b, s->channel_checksum);
      sl__acc_put_varint(&b, s->n_opstates);
      for (uint32_t o = 0; o < s->n_opstates; o++) {
        const sl_ckpt_opstate_t *os = &s->opstates[o];
        sl__acc_put_str(&b, os->name);
        sl__acc_put_varint(&b, os->n_entries);
        for (uint32_t e = 0; e < os->n_entries; e++) {
          sl__acc_put_varint(&b, os->entries[e].key);
          sl__acc_put_varint(&b, os->entries[e].len);
          sl__acc_put(&b, os->entries[e].bytes, os->entries[e].len);
        }
      }
    }
    sl__acc_put_varint(&b, op->has_enum_state ? 1 : 0);
    if (op->has_enum_state) {
      sl__acc_put_varint(&b, op->enum_state_len);
      sl__acc_put(&b, op->enum_state, op->enum_state_len);
    }
  }
  int rc = sl__acc_status(&b);
  if (rc != SL_OK) {
    sl__acc_close(&b);
    return rc;
  }
  sl__acc_put_u64le(&b, XXH3_64bits(b.b.data, b.b.len));
  sl__acc_put(&b, META_FOOTER_MAGIC, 8);
  return sl__acc_finish(&b, out, out_len);
}

/* Unlink a temporary file left by a failed replace; best effort. */
static void unlink_quietly(const char *path) {
  int e = errno;
  unlink(path);
  errno = e;
}

static char *parent_dir(const char *dir) {
  const char *slash = strrchr(dir, '/');
  if (slash == NULL) return sl_strdup(".");
  if (slash == dir) return sl_strdup("/");
  return sl_strndup(dir, (size_t)(slash - dir));
}

int sl__ckpt_durable_replace(const char *dir, const char *name,
                             const uint8_t *p, size_t len, bool is_new_dir,
                             const char *before_rename,
                             const char *after_rename, bool *out_is_renamed,
                             sl_error_t **out_err) {
  if (out_is_renamed) *out_is_renamed = false;
  sl_acc_t tmp, fin;
  sl__acc_init(&tmp);
  sl__acc_init(&fin);
  sl__acc_printf(&tmp, "%s/%s.tmp", dir, name);
  sl__acc_printf(&fin, "%s/%s", dir, name);
  char *parent = is_new_dir ? parent_dir(dir) : NULL;
  int rc = sl__acc_status(&tmp);
  if (rc == SL_OK) rc = sl__acc_status(&fin);
  if (rc == SL_OK && is_new_dir && parent == NULL) rc = SL_ENOMEM;
  if (rc != SL_OK) {
    rc = sl_error_set(out_err, rc, "out of memory replacing '%s/%s'", dir,
                      name);
    goto out;
  }
  const char *tpath = (const char *)tmp.b.data;
  const char *fpath = (const char *)fin.b.data;
  uint64_t ck;
  /* 1. Write and fsync the temporary file (wclose fsyncs). */
  if ((rc = sl__ckpt_write_blob(tpath, p, len, &ck, out_err)) != SL_OK) {
    unlink_quietly(tpath);
    goto out;
  }
  if (before_rename && (rc = SL_INJECT(before_rename)) != SL_OK) {
    sl_error_set(out_err, rc, "injected failure before renaming '%s'",
                 tpath);
    unlink_quietly(tpath);
    goto out;
  }
  /* 2. Rename over the final name: from here on the new file is what a
   * reader finds, whatever happens next. */
  if (rename(tpath, fpath) != 0) {
    int e = errno;
    rc = sl_error_set(out_err, -e, "cannot rename '%s': %s", tpath,
                      strerror(e));
    unlink_quietly(tpath);
    goto out;
  }
  if (out_is_renamed) *out_is_renamed = true;
  /* 3. fsync the directory (the rename), and its parent when the
   * directory itself is new (its entry in the parent). */
  if ((rc = fsync_dir(dir)) != SL_OK) {
    sl_error_set(out_err, rc, "cannot fsync directory '%s': %s", dir,
                 sl_strerror(rc));
    goto out;
  }
  if (is_new_dir && (rc = fsync_dir(parent)) != SL_OK) {
    sl_error_set(out_err, rc, "cannot fsync directory '%s': %s", parent,
                 sl_strerror(rc));
    goto out;
  }
  if (after_rename && (rc = SL_INJECT(after_rename)) != SL_OK)
    sl_error_set(out_err, rc, "injected failure after renaming '%s'", fpath);
out:
  if (rc != SL_OK && rc != SL_ENOMEM && rc != SL_EFAILED)
    sl__error_retriable(out_err, rc);
  sl_free(parent);
  sl__acc_close(&tmp);
  sl__acc_close(&fin);
  return rc;
}

int sl__ckpt_write_meta(const char *ckdir, const sl_ckpt_meta_t *m,
                        bool *out_is_renamed, sl_error_t **out_err) {
  if (out_is_renamed) *out_is_renamed = false;
  uint8_t *data = NULL;
  size_t len = 0;
  int rc = encode_meta(m, &data, &len);
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "out of memory encoding the metadata "
                        "of '%s'", ckdir);
  if ((rc = SL_INJECT("coordinator.before_metadata_write")) != SL_OK) {
    sl_error_set(out_err, rc, "injected failure before writing '%s/_metadata'",
                 ckdir);
    goto out;
  }
  /* The checkpoint directory was made for this checkpoint: its entry in
   * the job directory must be durable too before the commit counts. */
  rc = sl__ckpt_durable_replace(ckdir, "_metadata", data, len, true,
                                "coordinator.before_metadata_rename",
                                "coordinator.after_metadata_rename",
                                out_is_renamed, out_err);
out:
  sl_free(data);
  return rc;
}

static int decode_meta(const uint8_t *p, size_t len, sl_ckpt_meta_t *m) {
  if (len < 16 + 4 || memcmp(p + len - 8, META_FOOTER_MAGIC, 8) != 0)
    return SL_CORRUPT("metadata footer");
  uint64_t ck = sl__get_u64le(p + len - 16);
  if (XXH3_64bits(p, len - 16) != ck) return SL_CORRUPT("metadata checksum");
  rcur_t c = {p, p + len - 16, false, false};
  /* Out of memory is not corruption: say which it was. */
#define META_BAD(what) (c.is_oom ? SL_ENOMEM : SL_CORRUPT(what))
  const uint8_t *magic = rbytes(&c, 4), *v = rbytes(&c, 4);
  if (c.is_bad || memcmp(magic, META_MAGIC, 4) != 0) return META_BAD("magic");
  /* Version 1 (before enumerators) is read as is: no enumerator state. */
  if (v[0] != 1 && v[0] != META_VERSION) return SL_ENOTSUP;
  uint8_t version = v[0];
  m->kind = v[1];
  m->mode = v[2];
  m->id = ru64(&c);
  m->time_ns = (int64_t)ru64(&c);
  m->max_parallelism = (uint32_t)rvarint(&c);
  m->job = rstr(&c);
  uint64_t n_ops = rvarint(&c);
  if (c.is_bad || n_ops > 100000) return META_BAD("ops");
  m->ops = sl_calloc(n_ops + 1, sizeof(sl_ckpt_op_t));
  if (m->ops == NULL) return SL_ENOMEM;
  for (uint64_t i = 0; i < n_ops && !c.is_bad; i++) {
    sl_ckpt_op_t *op = &m->ops[m->n_ops++];
    op->uid = rstr(&c);
    op->parallelism = (uint32_t)rvarint(&c);
    uint64_t ns = rvarint(&c);
    if (c.is_bad || ns > SL_MAX_PARALLELISM_LIMIT) return META_BAD("subtasks");
    op->subtasks = sl_calloc(ns + 1, sizeof(sl_ckpt_subtask_t));
    if (op->subtasks == NULL) return SL_ENOMEM;
    for (uint64_t k = 0; k < ns && !c.is_bad; k++) {
      sl_ckpt_subtask_t *s = &op->subtasks[op->n_subtasks++];
      s->subtask = (uint32_t)rvarint(&c);
      s->kg_start = (uint32_t)rvarint(&c);
      s->kg_end = (uint32_t)rvarint(&c);
      s->state_file = rstr(&c);
      s->state_size = ru64(&c);
      s->state_checksum = ru64(&c);
      s->channel_file = rstr(&c);
      s->channel_size = ru64(&c);
      s->channel_checksum = ru64(&c);
      if (s->state_file && s->state_file[0] == '\0') {
        sl_free(s->state_file);
        s->state_file = NULL;
      }
      if (s->channel_file && s->channel_file[0] == '\0') {
        sl_free(s->channel_file);
        s->channel_file = NULL;
      }
      uint64_t no = rvarint(&c);
      if (c.is_bad || no > 64) return META_BAD("opstates");
      s->opstates = sl_calloc(no + 1, sizeof(sl_ckpt_opstate_t));
      if (s->opstates == NULL) return SL_ENOMEM;
      for (uint64_t o = 0; o < no && !c.is_bad; o++) {
        sl_ckpt_opstate_t *os = &s->opstates[s->n_opstates++];
        os->name = rstr(&c);
        uint64_t ne = rvarint(&c);
        if (c.is_bad || ne > (1u << 20)) return META_BAD("entries");
        os->entries = sl_calloc(ne + 1, sizeof(sl_ckpt_entry_t));
        if (os->entries == NULL) return SL_ENOMEM;
        for (uint64_t e = 0; e < ne && !c.is_bad; e++) {
          sl_ckpt_entry_t *en = &os->entries[os->n_entries];
          en->key = (uint32_t)rvarint(&c);
          uint64_t el = rvarint(&c);
          const uint8_t *eb = rbytes(&c, el);
          if (c.is_bad) break;
          en->bytes = sl_malloc(el ? el : 1);
          if (en->bytes == NULL) return SL_ENOMEM;
          if (el) memcpy(en->bytes, eb, el);
          en->len = (uint32_t)el;
          os->n_entries++;
        }
        if (os->name == NULL) c.is_bad = true;
      }
      if (s->kg_end >= m->max_parallelism && s->kg_end >= s->kg_start)
        c.is_bad = true;
    }
    if (version >= 2 && !c.is_bad) {
      uint64_t has = rvarint(&c);
      if (has > 1) c.is_bad = true;
      if (has == 1 && !c.is_bad) {
        uint64_t el = rvarint(&c);
        const uint8_t *eb = rbytes(&c, el);
        if (!c.is_bad) {
          op->enum_state = sl_malloc(el ? el : 1);
          if (op->enum_state == NULL) return SL_ENOMEM;
          if (el) memcpy(op->enum_state, eb, el);
          op->enum_state_len = (size_t)el;
          op->has_enum_state = true;
        }
      }
    }
    if (op->uid == NULL) c.is_bad = true;
  }
  if (c.is_bad || c.p != c.end || m->job == NULL) return META_BAD("contents");
  return SL_OK;
}
#undef META_BAD

int sl__ckpt_read_meta(const char *ckdir, sl_ckpt_meta_t *out,
                       sl_error_t **out_err) {
  memset(out, 0, sizeof(*out));
  sl_bytes_t path;
  sl_bytes_init(&path);
  if (sl_bytes_printf(&path, "%s/_metadata", ckdir) != SL_OK)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  /* O_NONBLOCK: a FIFO in place of _metadata must not block the open
   * (it would wait for a writer forever); it is refused below. */
  int fd = open((char *)path.data, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    int rc = sl_error_set(out_err, e == ENOENT ? SL_ENOTFOUND : -e,
                          "checkpoint '%s' has no readable _metadata: %s",
                          ckdir, strerror(e));
    sl_bytes_close(&path);
    return rc;
  }
  struct stat st;
  uint8_t *buf = NULL;
  int rc;
  if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
    rc = sl_error_set(out_err, SL_ECORRUPT, "checkpoint metadata '%s' is not "
                      "a regular file", (char *)path.data);
    goto out;
  }
  if (fstat(fd, &st) != 0 || st.st_size > (64 << 20)) {
    rc = sl_error_set(out_err, SL_ECORRUPT, "checkpoint metadata '%s' is "
                      "unreadable or too large", (char *)path.data);
    goto out;
  }
  buf = sl_malloc((size_t)st.st_size + 1);
  if (buf == NULL) {
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
    goto out;
  }
  rc = pread_all(fd, buf, (size_t)st.st_size, 0);
  if (rc == SL_OK) rc = decode_meta(buf, (size_t)st.st_size, out);
  if (rc == SL_ENOTSUP)
    rc = sl_error_set(out_err, SL_ECORRUPT, "checkpoint metadata '%s' has a "
                      "format version this sluice cannot read",
                      (char *)path.data);
  else if (rc == SL_ENOMEM)
    sl_error_set(out_err, rc, "out of memory");
  else if (rc != SL_OK)
    rc = sl_error_set(out_err, SL_ECORRUPT, "checkpoint metadata '%s' is "
                      "truncated or corrupt", (char *)path.data);
  if (rc == SL_OK && (out->dir = sl_strdup(ckdir)) == NULL)
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
  if (rc != SL_OK) sl__ckpt_meta_clear(out);
out:
  sl_free(buf);
  close(fd);
  sl_bytes_close(&path);
  return rc;
}

static int check_one(const char *dir, const char *file, uint64_t size,
                     sl_error_t **out_err) {
  if (file == NULL) return SL_OK;
  if (strchr(file, '/') || strcmp(file, "..") == 0)
    return sl_error_set(out_err, SL_ECORRUPT,
                        "checkpoint '%s' names an invalid file '%s'", dir,
                        file);
  sl_bytes_t p;
  sl_bytes_init(&p);
  if (sl_bytes_printf(&p, "%s/%s", dir, file) != SL_OK)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  struct stat st;
  int rc = SL_OK;
  if (stat((char *)p.data, &st) != 0)
    rc = sl_error_set(out_err, SL_ECORRUPT,
                      "checkpoint file '%s/%s' is missing", dir, file);
  else if (!S_ISREG(st.st_mode))
    rc = sl_error_set(out_err, SL_ECORRUPT,
                      "checkpoint file '%s/%s' is not a regular file", dir,
                      file);
  else if ((uint64_t)st.st_size != size)
    rc = sl_error_set(out_err, SL_ECORRUPT,
                      "checkpoint file '%s/%s' is truncated: %lld bytes, "
                      "expected %llu", dir, file, (long long)st.st_size,
                      (unsigned long long)size);
  sl_bytes_close(&p);
  return rc;
}

int sl__ckpt_check_files(const sl_ckpt_meta_t *m, sl_error_t **out_err) {
  for (uint32_t i = 0; i < m->n_ops; i++)
    for (uint32_t k = 0; k < m->ops[i].n_subtasks; k++) {
      const sl_ckpt_subtask_t *s = &m->ops[i].subtasks[k];
      int rc = check_one(m->dir, s->state_file, s->state_size, out_err);
      if (rc == SL_OK)
        rc = check_one(m->dir, s->channel_file, s->channel_size, out_err);
      if (rc != SL_OK) return rc;
    }
  return SL_OK;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The id of a directory named chk-<id>, or 0 when the name is not one
 * sluice makes: digits only, no leading zero, at most SL_CKPT_MAX_ID.  A
 * name that looks like a checkpoint but whose id is out of range (for
 * example chk-18446744073709551615) is ignored with a warning rather than
 * let the next id wrap (K2 of coordinator.c). */
static uint64_t parse_ckpt_name(const char *jobdir, const char *name) {
  if (strncmp(name, "chk-", 4) != 0) return 0;
  const char *d = name + 4;
  size_t n = strspn(d, "0123456789");
  if (n == 0 || d[n] != '\0' || d[0] == '0') return 0;
  uint64_t id = 0;
  bool is_over = n > 19;
  for (size_t i = 0; i < n && !is_over; i++) {
    uint64_t x = (uint64_t)(d[i] - '0');
    if (id > (SL_CKPT_MAX_ID - x) / 10) is_over = true;
    else id = id * 10 + x;
  }
  if (is_over) {
    sl_log(SL_LOG_WARN, "ignoring '%s/%s': checkpoint ids above %llu are "
           "not used by sluice", jobdir, name,
           (unsigned long long)SL_CKPT_MAX_ID);
    return 0;
  }
  return id;
}

int sl__ckpt_list(const char *jobdir, uint64_t **out_ids, uint32_t *out_n,
                  sl_error_t **out_err) {
  *out_ids = NULL;
  *out_n = 0;
  DIR *d = opendir(jobdir);
  if (d == NULL) {
    if (errno == ENOENT) return SL_OK;
    int e = errno;
    return sl_error_set(out_err, -e, "cannot read checkpoint directory '%s': "
                        "%s", jobdir, strerror(e));
  }
  uint64_t *ids = NULL;
  uint32_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    uint64_t id = parse_ckpt_name(jobdir, de->d_name);
    if (id == 0) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      uint64_t *x = sl_realloc(ids, cap * sizeof(uint64_t));
      if (x == NULL) {
        sl_free(ids);
        closedir(d);
        return sl_error_set(out_err, SL_ENOMEM, "out of memory");
      }
      ids = x;
    }
    ids[n++] = id;
  }
  closedir(d);
  if (n) qsort(ids, n, sizeof(uint64_t), cmp_u64);
  *out_ids = ids;
  *out_n = n;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* The id high-water mark: <jobdir>/_checkpoint_ids. */

#define HW_NAME "_checkpoint_ids"
#define HW_MAGIC "SLID"
#define HW_VERSION 1
#define HW_SIZE 24 /* magic, version, reserved[3], u64 id, u64 checksum */

int sl__ckpt_read_high_water(const char *jobdir, uint64_t *out_id,
                             sl_error_t **out_err) {
  sl_acc_t path;
  sl__acc_init(&path);
  sl__acc_printf(&path, "%s/%s", jobdir, HW_NAME);
  if (sl__acc_status(&path) != SL_OK) {
    sl__acc_close(&path);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  const char *fp = (const char *)path.b.data;
  int rc = SL_OK;
  int fd = open(fp, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) *out_id = 0; /* never written: no id used yet */
    else rc = sl_error_set(out_err, -e, "cannot open '%s': %s", fp,
                           strerror(e));
    sl__acc_close(&path);
    return rc;
  }
  uint8_t b[HW_SIZE + 1];
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != HW_SIZE ||
      pread_all(fd, b, HW_SIZE, 0) != SL_OK ||
      memcmp(b, HW_MAGIC, 4) != 0 || b[4] != HW_VERSION ||
      XXH3_64bits(b, 16) != sl__get_u64le(b + 16) ||
      sl__get_u64le(b + 8) > SL_CKPT_MAX_ID) {
    /* Without it sluice cannot promise that no id is used twice, so it
     * refuses to guess. */
    rc = sl_error_set(out_err, SL_CORRUPT("id high-water mark"),
                      "checkpoint id file '%s' is damaged; it records the "
                      "highest checkpoint id ever used.  Remove it only if "
                      "no checkpoint id of this job was ever used above "
                      "the largest chk-N directory", fp);
  } else {
    *out_id = sl__get_u64le(b + 8);
  }
  close(fd);
  sl__acc_close(&path);
  return rc;
}

int sl__ckpt_write_high_water(const char *jobdir, uint64_t id,
                              bool is_new_dir, sl_error_t **out_err) {
  uint8_t b[HW_SIZE];
  memset(b, 0, sizeof(b));
  memcpy(b, HW_MAGIC, 4);
  b[4] = HW_VERSION;
  sl__put_u64le(b + 8, id);
  sl__put_u64le(b + 16, XXH3_64bits(b, 16));
  return sl__ckpt_durable_replace(jobdir, HW_NAME, b, HW_SIZE, is_new_dir,
                                  NULL, NULL, NULL, out_err);
}

int sl__ckpt_next_id(const char *jobdir, uint64_t *out_next,
                     uint64_t *out_high_water, sl_error_t **out_err) {
  uint64_t hw = 0, *ids = NULL;
  uint32_t n = 0;
  int rc = sl__ckpt_read_high_water(jobdir, &hw, out_err);
  if (rc == SL_OK) rc = sl__ckpt_list(jobdir, &ids, &n, out_err);
  if (rc != SL_OK) return rc;
  uint64_t top = hw;
  if (n && ids[n - 1] > top) top = ids[n - 1];
  sl_free(ids);
  if (top >= SL_CKPT_MAX_ID) /* only reachable by hand-made files */
    return sl_error_set(out_err, SL_EOVERFLOW,
                        "checkpoint ids of '%s' are exhausted (the highest "
                        "used is %llu)", jobdir, (unsigned long long)top);
  *out_next = top + 1;
  *out_high_water = hw;
  return SL_OK;
}

int sl__ckpt_load_latest(const char *jobdir, sl_ckpt_meta_t *out,
                         sl_error_t **out_err) {
  return sl__ckpt_load_latest_below(jobdir, UINT64_MAX, out, out_err);
}

int sl__ckpt_load_latest_below(const char *jobdir, uint64_t below,
                               sl_ckpt_meta_t *out, sl_error_t **out_err) {
  uint64_t *ids;
  uint32_t n;
  int rc = sl__ckpt_list(jobdir, &ids, &n, out_err);
  if (rc != SL_OK) return rc;
  bool saw_any = false;
  rc = SL_ENOTFOUND;
  for (uint32_t i = n; i-- > 0;) {
    if (ids[i] >= below) continue;
    sl_bytes_t dir;
    sl_bytes_init(&dir);
    sl_error_t *err = NULL;
    int r = sl_bytes_printf(&dir, "%s/chk-%llu", jobdir,
                            (unsigned long long)ids[i]);
    if (r != SL_OK) {
      memset(out, 0, sizeof(*out));
      r = sl_error_set(&err, r, "out of memory");
    } else {
      r = sl__ckpt_read_meta((char *)dir.data, out, &err);
    }
    if (r == SL_OK) r = sl__ckpt_check_files(out, &err);
    if (r == SL_OK) {
      sl_bytes_close(&dir);
      rc = SL_OK;
      break;
    }
    if (r != SL_ENOTFOUND && r != SL_ECORRUPT) {
      /* Out of memory or an I/O error says nothing about this checkpoint:
       * fail rather than fall back to an older one (fail closed). */
      sl__ckpt_meta_clear(out);
      sl_bytes_close(&dir);
      sl_free(ids);
      if (out_err && *out_err == NULL) *out_err = err;
      else sl_error_destroy(err);
      return r;
    }
    if (r != SL_ENOTFOUND) {
      /* A checkpoint that looked complete but is damaged: say so. */
      saw_any = true;
      sl_log(SL_LOG_WARN, "skipping checkpoint %llu: %s",
             (unsigned long long)ids[i], sl_error_message(err));
    }
    sl__ckpt_meta_clear(out);
    sl_error_destroy(err);
    sl_bytes_close(&dir);
  }
  sl_free(ids);
  if (rc == SL_ENOTFOUND && saw_any)
    return sl_error_set(out_err, SL_ECORRUPT,
                        "no usable checkpoint in '%s': every completed "
                        "checkpoint is missing files or corrupt", jobdir);
  if (rc == SL_ENOTFOUND)
    return sl_error_set(out_err, SL_ENOTFOUND,
                        "no completed checkpoint in '%s'", jobdir);
  return rc;
}

/* Removal mirrors the commit (S6): first _metadata goes, and the
 * directory is fsynced, so the checkpoint is durably no restore point;
 * only then the files it named go.  A crash in between leaves a PARTIAL
 * directory, which is garbage by S1, never a _metadata naming missing
 * files. */
int sl__ckpt_remove_dir(const char *ckdir, sl_error_t **out_err) {
  sl_acc_t p;
  sl__acc_init(&p);
  sl__acc_printf(&p, "%s/_metadata", ckdir);
  if (sl__acc_status(&p) != SL_OK) {
    sl__acc_close(&p);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  int rc = SL_OK;
  if (unlink((char *)p.b.data) != 0 && errno != ENOENT) {
    int e = errno;
    rc = sl_error_set(out_err, -e, "cannot remove '%s': %s",
                      (char *)p.b.data, strerror(e));
    sl__acc_close(&p);
    return rc;
  }
  sl__acc_close(&p);
  if ((rc = fsync_dir(ckdir)) != SL_OK) {
    if (rc == -ENOENT) return SL_OK; /* already gone */
    return sl_error_set(out_err, rc, "cannot fsync directory '%s': %s", ckdir,
                        sl_strerror(rc));
  }
  DIR *d = opendir(ckdir);
  if (d == NULL) {
    int e = errno;
    if (e == ENOENT) return SL_OK;
    return sl_error_set(out_err, -e, "cannot read '%s': %s", ckdir,
                        strerror(e));
  }
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    sl__acc_init(&p);
    sl__acc_printf(&p, "%s/%s", ckdir, de->d_name);
    int r = sl__acc_status(&p);
    if (r != SL_OK) r = sl_error_set(out_err, r, "out of memory");
    else if (unlink((char *)p.b.data) != 0 && errno != ENOENT) {
      int e = errno;
      r = sl_error_set(out_err, -e, "cannot remove '%s': %s",
                       (char *)p.b.data, strerror(e));
    }
    if (rc == SL_OK) rc = r;
    sl__acc_close(&p);
  }
  closedir(d);
  if (rc == SL_OK && rmdir(ckdir) != 0 && errno != ENOENT) {
    int e = errno;
    rc = sl_error_set(out_err, -e, "cannot remove directory '%s': %s", ckdir,
                      strerror(e));
  }
  return rc;
}
