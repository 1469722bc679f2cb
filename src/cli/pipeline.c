/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pipeline files (docs/pipeline.md).  libyaml loads the document with the
 * position of every node; --set overrides are grafted into it as new nodes
 * that remember which flag they came from.  The interpreter then walks the
 * document once, checking every key against the fields it knows, and builds
 * the job through the public API.  The first error stops it, with
 * "FILE:LINE:COLUMN: FIELD: message".
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "cli/pipeline.h"
#include "connectors/mariadb/cdc_source.h"

#define MAX_TRANSFORMS 64
/* Limits on what is read (docs/pipeline.md): the size of a pipeline file,
 * how deep its nodes nest, and how many nodes it has once every alias is
 * expanded (a few nested aliases can stand for billions of nodes). */
#define MAX_FILE_SIZE (1u << 20)
#define MAX_DEPTH 64
#define MAX_EXPANDED 100000
/* Job names become a directory <checkpoint dir>/<name>. */
#define MAX_NAME_LEN 100

struct sl_pipeline_s {
  char *file;
  yaml_document_t doc;
  bool has_doc;
  int n_file_nodes;         /* nodes at index > this came from --set */
  char **set_origin;        /* per added node: the --set text */
  int n_set_origin;
  char *msg;                /* first error */
  char *name;
  bool is_unbounded;
  /* The postgres sinks (the sink, late sinks of windows), for sluice
   * validate --connect, in the order they were built. */
  struct pg_check_s *pg;
  uint32_t n_pg;
};

/* A postgres sink to check: its context (owned by the job once built),
 * where it is in the file, uid, schema (a reference) and parallelism. */
typedef struct pg_check_s {
  void *ctx;
  char *path;
  char *uid;
  sl_schema_t *schema;
  uint32_t par;
} pg_check_t;

/* ------------------------------------------------------------------ */
/* Errors and positions. */

static yaml_node_t *node(sl_pipeline_t *pl, int idx) {
  return idx ? yaml_document_get_node(&pl->doc, idx) : NULL;
}

static void where(sl_pipeline_t *pl, int idx, char *buf, size_t size) {
  if (idx > pl->n_file_nodes && idx - pl->n_file_nodes <= pl->n_set_origin) {
    snprintf(buf, size, "--set %s", pl->set_origin[idx - pl->n_file_nodes - 1]);
    return;
  }
  yaml_node_t *n = node(pl, idx);
  if (n == NULL) {
    snprintf(buf, size, "%s", pl->file);
    return;
  }
  snprintf(buf, size, "%s:%zu:%zu", pl->file, n->start_mark.line + 1,
           n->start_mark.column + 1);
}

static int fail_at(sl_pipeline_t *pl, int idx, int line_off, int col_abs,
                   const char *field, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Record the first error; col_abs > 0 replaces the node's column. */
static int fail_at(sl_pipeline_t *pl, int idx, int line_off, int col_abs,
                   const char *field, const char *fmt, ...) {
  if (pl->msg) return SL_EINVAL;
  char pos[512], msg[1024];
  yaml_node_t *n = node(pl, idx);
  if (col_abs > 0 && n && idx <= pl->n_file_nodes)
    snprintf(pos, sizeof(pos), "%s:%zu:%d", pl->file,
             n->start_mark.line + 1 + (size_t)line_off, col_abs);
  else
    where(pl, idx, pos, sizeof(pos));
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  size_t len = strlen(pos) + strlen(field) + strlen(msg) + 8;
  pl->msg = sl_malloc(len);
  if (pl->msg)
    snprintf(pl->msg, len, "%s: %s%s%s", pos, field, field[0] ? ": " : "",
             msg);
  return SL_EINVAL;
}

#define FAIL(pl, idx, field, ...) fail_at(pl, idx, 0, 0, field, __VA_ARGS__)

/* ------------------------------------------------------------------ */
/* Document access. */

static bool is_scalar(sl_pipeline_t *pl, int idx) {
  yaml_node_t *n = node(pl, idx);
  return n && n->type == YAML_SCALAR_NODE;
}

static const char *scalar(sl_pipeline_t *pl, int idx) {
  yaml_node_t *n = node(pl, idx);
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value
                                          : NULL;
}

static const char *type_word(sl_pipeline_t *pl, int idx) {
  yaml_node_t *n = node(pl, idx);
  if (n == NULL) return "nothing";
  switch (n->type) {
  case YAML_SCALAR_NODE: return "a scalar";
  case YAML_SEQUENCE_NODE: return "a list";
  case YAML_MAPPING_NODE: return "a mapping";
  default: return "nothing";
  }
}

/* Value index of key in mapping idx, 0 if absent; *key_idx gets the key. */
static int map_get(sl_pipeline_t *pl, int idx, const char *key, int *key_idx) {
  yaml_node_t *n = node(pl, idx);
  if (n == NULL || n->type != YAML_MAPPING_NODE) return 0;
  int found = 0;
  for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
       p < n->data.mapping.pairs.top; p++) {
    const char *k = scalar(pl, p->key);
    if (k && strcmp(k, key) == 0) {
      found = p->value; /* the last one wins, as with --set */
      if (key_idx) *key_idx = p->key;
    }
  }
  return found;
}

static void join_path(char *buf, size_t size, const char *path,
                      const char *key) {
  int n = path[0] ? snprintf(buf, size, "%s.%s", path, key)
                  : snprintf(buf, size, "%s", key);
  if (n < 0 || (size_t)n >= size) buf[size - 1] = '\0'; /* long names: cut */
}

/* Every key of mapping idx must be in allowed (NULL-terminated). */
static int check_keys(sl_pipeline_t *pl, int idx, const char *path,
                      const char *const *allowed) {
  yaml_node_t *n = node(pl, idx);
  if (n == NULL || n->type != YAML_MAPPING_NODE)
    return FAIL(pl, idx, path, "expected a mapping, got %s",
                type_word(pl, idx));
  for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
       p < n->data.mapping.pairs.top; p++) {
    const char *k = scalar(pl, p->key);
    if (k == NULL) return FAIL(pl, p->key, path, "keys must be scalars");
    bool ok = false;
    for (const char *const *a = allowed; *a; a++)
      if (strcmp(*a, k) == 0) ok = true;
    if (!ok) {
      char f[256], list[1024] = "";
      join_path(f, sizeof(f), path, k);
      for (const char *const *a = allowed; *a; a++) {
        strncat(list, *a, sizeof(list) - strlen(list) - 1);
        if (a[1]) strncat(list, ", ", sizeof(list) - strlen(list) - 1);
      }
      return FAIL(pl, p->key, f, "unknown field; expected one of: %s", list);
    }
  }
  return SL_OK;
}

static int get_str(sl_pipeline_t *pl, int map, const char *path,
                   const char *key, bool required, const char **out) {
  char f[256];
  join_path(f, sizeof(f), path, key);
  int v = map_get(pl, map, key, NULL);
  if (v == 0) {
    if (required)
      return FAIL(pl, map, path, "missing required field '%s'", key);
    return SL_OK;
  }
  if (!is_scalar(pl, v))
    return FAIL(pl, v, f, "expected a string, got %s", type_word(pl, v));
  *out = scalar(pl, v);
  return SL_OK;
}

static int get_u64(sl_pipeline_t *pl, int map, const char *path,
                   const char *key, uint64_t max, uint64_t *out) {
  char f[256];
  join_path(f, sizeof(f), path, key);
  int v = map_get(pl, map, key, NULL);
  if (v == 0) return SL_OK;
  const char *s = scalar(pl, v);
  char *end = NULL;
  errno = 0;
  unsigned long long x = s && isdigit((unsigned char)s[0])
                             ? strtoull(s, &end, 10)
                             : 0;
  if (s == NULL || end == NULL || *end != '\0' || errno != 0)
    return FAIL(pl, v, f, "expected a non-negative integer, got %s%s%s",
                s ? "'" : "", s ? s : type_word(pl, v), s ? "'" : "");
  if (x > max)
    return FAIL(pl, v, f, "%llu is too large; the maximum is %llu", x,
                (unsigned long long)max);
  *out = x;
  return SL_OK;
}

static int get_u32(sl_pipeline_t *pl, int map, const char *path,
                   const char *key, uint32_t min, uint32_t max,
                   uint32_t *out) {
  uint64_t x = *out;
  int v = map_get(pl, map, key, NULL);
  int rc = get_u64(pl, map, path, key, max, &x);
  if (rc != SL_OK) return rc;
  if (v && x < min) {
    char f[256];
    join_path(f, sizeof(f), path, key);
    return FAIL(pl, v, f, "must be at least %u, got %llu", min,
                (unsigned long long)x);
  }
  *out = (uint32_t)x;
  return SL_OK;
}

static int get_double(sl_pipeline_t *pl, int map, const char *path,
                      const char *key, double *out) {
  char f[256];
  join_path(f, sizeof(f), path, key);
  int v = map_get(pl, map, key, NULL);
  if (v == 0) return SL_OK;
  const char *s = scalar(pl, v);
  char *end = NULL;
  double x = s ? strtod(s, &end) : 0;
  if (s == NULL || end == s || *end != '\0' || !isfinite(x) || x < 0)
    return FAIL(pl, v, f, "expected a non-negative number, got %s%s%s",
                s ? "'" : "", s ? s : type_word(pl, v), s ? "'" : "");
  *out = x;
  return SL_OK;
}

static int get_bool(sl_pipeline_t *pl, int map, const char *path,
                    const char *key, bool *out) {
  char f[256];
  join_path(f, sizeof(f), path, key);
  int v = map_get(pl, map, key, NULL);
  if (v == 0) return SL_OK;
  const char *s = scalar(pl, v);
  if (s && (strcmp(s, "true") == 0 || strcmp(s, "yes") == 0)) *out = true;
  else if (s && (strcmp(s, "false") == 0 || strcmp(s, "no") == 0)) *out = false;
  else
    return FAIL(pl, v, f, "expected true or false, got %s%s%s", s ? "'" : "",
                s ? s : type_word(pl, v), s ? "'" : "");
  return SL_OK;
}

/* One of choices (NULL-terminated); *out = index. */
static int get_enum(sl_pipeline_t *pl, int map, const char *path,
                    const char *key, const char *const *choices, int *out) {
  char f[256];
  join_path(f, sizeof(f), path, key);
  int v = map_get(pl, map, key, NULL);
  if (v == 0) return SL_OK;
  const char *s = scalar(pl, v);
  for (int i = 0; s && choices[i]; i++)
    if (strcmp(s, choices[i]) == 0) {
      *out = i;
      return SL_OK;
    }
  char list[256] = "";
  for (int i = 0; choices[i]; i++) {
    strncat(list, choices[i], sizeof(list) - strlen(list) - 1);
    if (choices[i + 1]) strncat(list, ", ", sizeof(list) - strlen(list) - 1);
  }
  return FAIL(pl, v, f, "expected one of %s, got %s%s%s", list, s ? "'" : "",
              s ? s : type_word(pl, v), s ? "'" : "");
}

static int get_delim(sl_pipeline_t *pl, int map, const char *path, char *out) {
  const char *s = NULL;
  int rc = get_str(pl, map, path, "delimiter", false, &s);
  if (rc != SL_OK || s == NULL) return rc;
  if (strcmp(s, "\\t") == 0 || strcmp(s, "tab") == 0) s = "\t";
  if (strlen(s) != 1 || s[0] == '"' || s[0] == '\n' || s[0] == '\r') {
    char f[256];
    join_path(f, sizeof(f), path, "delimiter");
    return FAIL(pl, map_get(pl, map, "delimiter", NULL), f,
                "must be one character other than a quote or line end");
  }
  *out = s[0];
  return SL_OK;
}

/*
 * A duration: a whole number and a unit, "500us", "200ms", "5s", "1m",
 * "1h" (a bare "0" is zero), stored in microseconds.  Fractions are
 * refused rather than rounded: "1.5s" is written "1500ms".
 */
static int get_duration(sl_pipeline_t *pl, int map, const char *path,
                        const char *key, int64_t *out_us) {
  static const struct {
    const char *unit;
    int64_t us;
  } units[] = {{"us", 1}, {"ms", 1000}, {"s", 1000000},
               {"m", 60000000}, {"h", 3600000000}};
  char f[256];
  join_path(f, sizeof(f), path, key);
  int v = map_get(pl, map, key, NULL);
  if (v == 0) return SL_OK;
  const char *s = scalar(pl, v);
  if (s == NULL)
    return FAIL(pl, v, f, "expected a duration such as 500ms or 5s, got %s",
                type_word(pl, v));
  if (s[0] == '-')
    return FAIL(pl, v, f, "must not be negative, got '%s'", s);
  char *end = NULL;
  errno = 0;
  unsigned long long x = isdigit((unsigned char)s[0]) ? strtoull(s, &end, 10)
                                                      : 0;
  if (end == NULL)
    return FAIL(pl, v, f, "expected a duration such as 500us, 200ms, 5s, 1m "
                "or 1h, got '%s'", s);
  if (*end == '.')
    return FAIL(pl, v, f, "'%s': a duration is a whole number; use a smaller "
                "unit (1500ms, not 1.5s)", s);
  int64_t mult = 0;
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
    if (strcmp(end, units[i].unit) == 0) mult = units[i].us;
  if (*end == '\0' && x == 0) mult = 1;
  if (mult == 0 && *end == '\0')
    return FAIL(pl, v, f, "'%s' has no unit; expected us, ms, s, m or h "
                "after the number", s);
  if (mult == 0)
    return FAIL(pl, v, f, "unknown unit '%s' in '%s'; expected us, ms, s, m "
                "or h", end, s);
  if (errno != 0 || x > (unsigned long long)(INT64_MAX / mult))
    return FAIL(pl, v, f, "'%s' is too large", s);
  *out_us = (int64_t)x * mult;
  return SL_OK;
}

/* A duration of at least 1ms that the API takes in milliseconds. */
static int get_duration_ms(sl_pipeline_t *pl, int map, const char *path,
                           const char *key, int64_t *out_ms) {
  int64_t us = -1;
  int rc = get_duration(pl, map, path, key, &us);
  if (rc != SL_OK || us < 0) return rc;
  char f[256];
  join_path(f, sizeof(f), path, key);
  int v = map_get(pl, map, key, NULL);
  if (us == 0) return FAIL(pl, v, f, "must be greater than 0");
  if (us / 1000 > SL_MAX_DURATION_MS)
    return FAIL(pl, v, f, "'%s' is too large; the maximum is 8760h (a year)",
                scalar(pl, v));
  if (us % 1000 != 0)
    return FAIL(pl, v, f, "must be a whole number of milliseconds, got '%s'",
                scalar(pl, v));
  *out_ms = us / 1000;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Loading and --set. */

/*
 * The shape of a loaded document, checked before anything reads it: no
 * alias cycle (libyaml resolves an alias to the node it names, so "&a [x,
 * *a]" is a list that contains itself, and any recursive walk never ends),
 * at most MAX_DEPTH levels, at most MAX_EXPANDED nodes with every alias
 * expanded, and no mapping with the same key twice (YAML forbids it; libyaml
 * keeps both, and map_get would silently take the last one).
 */
typedef enum {
  SHAPE_OK,
  SHAPE_CYCLE,
  SHAPE_DEEP,
  SHAPE_BIG,
  SHAPE_DUP
} shape_why_t;

typedef struct shape_s {
  yaml_document_t *doc;
  uint8_t *state;     /* per node: 0 not seen, 1 being walked, 2 done */
  uint32_t *n_nodes;  /* per done node: nodes below it, expanded */
  shape_why_t why;
  int at;             /* the node of the problem */
  int first;          /* SHAPE_DUP: the first key */
  char path[256];     /* SHAPE_DUP: the field of the repeated key */
} shape_t;

typedef struct key_ref_s {
  const char *key;
  int idx;    /* key node */
  size_t pos; /* order in the mapping */
} key_ref_t;

static int cmp_key_ref(const void *a, const void *b) {
  const key_ref_t *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  if (c) return c;
  return (x->pos > y->pos) - (x->pos < y->pos);
}

static void shape_join(char *buf, size_t size, const char *path,
                       const char *key, long index) {
  int n;
  if (key)
    n = path[0] ? snprintf(buf, size, "%s.%s", path, key)
                : snprintf(buf, size, "%s", key);
  else
    n = snprintf(buf, size, "%s[%ld]", path, index);
  if (n < 0 || (size_t)n >= size) buf[size - 1] = '\0';
}

/* A mapping's repeated key: the one whose second occurrence comes first. */
static bool shape_dup(shape_t *sh, yaml_node_t *n, const char *path) {
  size_t count =
      (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
  if (count < 2) return false;
  key_ref_t *refs = sl_calloc(count, sizeof(*refs));
  if (refs == NULL) return false; /* the walk goes on; map_get copes */
  size_t m = 0;
  for (size_t i = 0; i < count; i++) {
    int k = n->data.mapping.pairs.start[i].key;
    yaml_node_t *kn = yaml_document_get_node(sh->doc, k);
    if (kn == NULL || kn->type != YAML_SCALAR_NODE) continue;
    refs[m].key = (const char *)kn->data.scalar.value;
    refs[m].idx = k;
    refs[m].pos = i;
    m++;
  }
  qsort(refs, m, sizeof(*refs), cmp_key_ref);
  size_t best = 0;
  bool has = false;
  for (size_t i = 1; i < m; i++) {
    if (strcmp(refs[i].key, refs[i - 1].key) != 0) continue;
    if (!has || refs[i].pos < refs[best].pos) best = i;
    has = true;
  }
  if (has) {
    size_t first = best;
    while (first > 0 && strcmp(refs[first - 1].key, refs[best].key) == 0)
      first--;
    sh->why = SHAPE_DUP;
    sh->at = refs[best].idx;
    sh->first = refs[first].idx;
    shape_join(sh->path, sizeof(sh->path), path, refs[best].key, 0);
  }
  sl_free(refs);
  return has;
}

/* Nodes at and below idx (aliases expanded), or 0 after a problem. */
static uint32_t shape_walk(shape_t *sh, int idx, int depth, const char *path) {
  yaml_node_t *n = yaml_document_get_node(sh->doc, idx);
  if (n == NULL) return 1;
  if (sh->state[idx] == 2) return sh->n_nodes[idx];
  if (sh->state[idx] == 1) {
    sh->why = SHAPE_CYCLE;
    sh->at = idx;
    return 0;
  }
  if (depth > MAX_DEPTH) {
    sh->why = SHAPE_DEEP;
    sh->at = idx;
    return 0;
  }
  sh->state[idx] = 1;
  uint64_t total = 1;
  char sub[256];
  if (n->type == YAML_SEQUENCE_NODE) {
    size_t count =
        (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    for (size_t i = 0; i < count; i++) {
      shape_join(sub, sizeof(sub), path, NULL, (long)i + 1);
      uint32_t c =
          shape_walk(sh, n->data.sequence.items.start[i], depth + 1, sub);
      if (c == 0) return 0;
      total += c;
      if (total > MAX_EXPANDED) break;
    }
  } else if (n->type == YAML_MAPPING_NODE) {
    if (shape_dup(sh, n, path)) return 0;
    size_t count =
        (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    for (size_t i = 0; i < count; i++) {
      yaml_node_pair_t pr = n->data.mapping.pairs.start[i];
      yaml_node_t *kn = yaml_document_get_node(sh->doc, pr.key);
      const char *k = kn && kn->type == YAML_SCALAR_NODE
                          ? (const char *)kn->data.scalar.value
                          : "?";
      shape_join(sub, sizeof(sub), path, k, 0);
      uint32_t ck = shape_walk(sh, pr.key, depth + 1, sub);
      if (ck == 0) return 0;
      uint32_t cv = shape_walk(sh, pr.value, depth + 1, sub);
      if (cv == 0) return 0;
      total += (uint64_t)ck + cv;
      if (total > MAX_EXPANDED) break;
    }
  }
  if (total > MAX_EXPANDED) {
    sh->why = SHAPE_BIG;
    sh->at = idx;
    return 0;
  }
  sh->state[idx] = 2;
  sh->n_nodes[idx] = (uint32_t)total;
  return (uint32_t)total;
}

/*
 * Check the shape of doc; on a problem write "ORIGIN[:LINE:COL]: message"
 * into err (with positions when has_marks: a file, not a --set value).
 * base is the field of the root node ("" for a file, the key of a --set).
 */
static int check_shape(yaml_document_t *doc, const char *origin,
                       bool has_marks, const char *base, char *err,
                       size_t err_size) {
  if (yaml_document_get_root_node(doc) == NULL) return SL_OK;
  size_t n_nodes = (size_t)(doc->nodes.top - doc->nodes.start);
  shape_t sh = {doc, sl_calloc(n_nodes + 1, 1),
                sl_calloc(n_nodes + 1, sizeof(uint32_t)), SHAPE_OK, 0, 0, ""};
  if (sh.state == NULL || sh.n_nodes == NULL) {
    sl_free(sh.state);
    sl_free(sh.n_nodes);
    snprintf(err, err_size, "%s: out of memory", origin);
    return SL_ENOMEM;
  }
  shape_walk(&sh, 1, 0, base);
  sl_free(sh.state);
  sl_free(sh.n_nodes);
  if (sh.why == SHAPE_OK) return SL_OK;
  char pos[600], first[600];
  yaml_node_t *n = yaml_document_get_node(doc, sh.at);
  if (has_marks && n)
    snprintf(pos, sizeof(pos), "%s:%zu:%zu", origin, n->start_mark.line + 1,
             n->start_mark.column + 1);
  else
    snprintf(pos, sizeof(pos), "%s", origin);
  switch (sh.why) {
  case SHAPE_CYCLE:
    snprintf(err, err_size, "%s: an alias refers to a node that contains "
             "it (an alias cycle)", pos);
    break;
  case SHAPE_DEEP:
    snprintf(err, err_size, "%s: nested more than %d levels deep", pos,
             MAX_DEPTH);
    break;
  case SHAPE_BIG:
    snprintf(err, err_size, "%s: with its aliases expanded the document has "
             "more than %d nodes", pos, MAX_EXPANDED);
    break;
  default: {
    yaml_node_t *f = yaml_document_get_node(doc, sh.first);
    if (has_marks && f) {
      snprintf(first, sizeof(first), "%s:%zu:%zu", origin,
               f->start_mark.line + 1, f->start_mark.column + 1);
      snprintf(err, err_size, "%s: %s: duplicate key; it is first given at "
               "%s", pos, sh.path, first);
    } else {
      snprintf(err, err_size, "%s: %s: duplicate key in the value", pos,
               sh.path);
    }
    break;
  }
  }
  return SL_EINVAL;
}

static int copy_node(yaml_document_t *dst, yaml_document_t *src, int idx) {
  yaml_node_t *n = yaml_document_get_node(src, idx);
  if (n == NULL) return 0;
  if (n->type == YAML_SCALAR_NODE)
    return yaml_document_add_scalar(dst, NULL, n->data.scalar.value,
                                    (int)n->data.scalar.length,
                                    n->data.scalar.style);
  if (n->type == YAML_SEQUENCE_NODE) {
    int s = yaml_document_add_sequence(dst, NULL, YAML_FLOW_SEQUENCE_STYLE);
    if (s == 0) return 0;
    size_t count = (size_t)(n->data.sequence.items.top -
                            n->data.sequence.items.start);
    for (size_t i = 0; i < count; i++) {
      /* src nodes may move when we add to dst?  No: different docs. */
      int item = n->data.sequence.items.start[i];
      int c = copy_node(dst, src, item);
      if (c == 0 || !yaml_document_append_sequence_item(dst, s, c)) return 0;
      n = yaml_document_get_node(src, idx);
    }
    return s;
  }
  int m = yaml_document_add_mapping(dst, NULL, YAML_FLOW_MAPPING_STYLE);
  if (m == 0) return 0;
  size_t count =
      (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
  for (size_t i = 0; i < count; i++) {
    yaml_node_pair_t p = n->data.mapping.pairs.start[i];
    int k = copy_node(dst, src, p.key);
    int v = copy_node(dst, src, p.value);
    if (k == 0 || v == 0 || !yaml_document_append_mapping_pair(dst, m, k, v))
      return 0;
  }
  return m;
}

static int load_doc(const char *text, size_t len, yaml_document_t *doc,
                    char *err, size_t err_size, const char *origin) {
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) {
    snprintf(err, err_size, "%s: out of memory", origin);
    return SL_ENOMEM;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  if (!yaml_parser_load(&parser, doc)) {
    if (parser.context)
      snprintf(err, err_size,
               "%s:%zu:%zu: syntax error: %s (%s at line %zu, column %zu)",
               origin, parser.problem_mark.line + 1,
               parser.problem_mark.column + 1,
               parser.problem ? parser.problem : "invalid YAML",
               parser.context, parser.context_mark.line + 1,
               parser.context_mark.column + 1);
    else
      snprintf(err, err_size, "%s:%zu:%zu: syntax error: %s", origin,
               parser.problem_mark.line + 1, parser.problem_mark.column + 1,
               parser.problem ? parser.problem : "invalid YAML");
    yaml_parser_delete(&parser);
    return SL_EPARSE;
  }
  /* One document only: a second one would be ignored without a word. */
  yaml_document_t extra;
  int rc = SL_OK;
  if (!yaml_parser_load(&parser, &extra)) {
    snprintf(err, err_size, "%s:%zu:%zu: syntax error in a second YAML "
             "document: %s; a pipeline file holds one document", origin,
             parser.problem_mark.line + 1, parser.problem_mark.column + 1,
             parser.problem ? parser.problem : "invalid YAML");
    rc = SL_EPARSE;
  } else {
    if (yaml_document_get_root_node(&extra) != NULL) {
      snprintf(err, err_size, "%s:%zu:%zu: a second YAML document; a "
               "pipeline file holds one document", origin,
               extra.start_mark.line + 1, extra.start_mark.column + 1);
      rc = SL_EINVAL;
    }
    yaml_document_delete(&extra);
  }
  yaml_parser_delete(&parser);
  if (rc != SL_OK) yaml_document_delete(doc);
  return rc;
}

static int doc_n_nodes(yaml_document_t *doc) {
  return (int)(doc->nodes.top - doc->nodes.start);
}

/*
 * The key of a --set, [set, eq): NAME ('[' ... ']')? ('.' NAME ...)*, with
 * no empty NAME and no NAME of 256 bytes or more.  What is inside the
 * brackets is checked by apply_set, which says that indexes are 1-based.
 */
static bool is_set_key(const char *set, const char *eq) {
  const char *p = set;
  for (;;) {
    const char *name = p;
    while (p < eq && *p != '.' && *p != '[' && *p != ']') p++;
    if (p == name || p - name >= 256) return false;
    if (p < eq && *p == '[') {
      while (p < eq && *p != ']') p++;
      if (p == eq) return true; /* apply_set reports the index */
      p++;
    }
    if (p == eq) return true;
    if (*p != '.') return false;
    p++;
  }
}

/* Parse "a.b[2].c=value" and graft value into the document. */
static int apply_set(sl_pipeline_t *pl, const char *set) {
  const char *eq = strchr(set, '=');
  char pos[600];
  snprintf(pos, sizeof(pos), "--set %s", set);
  if (eq == NULL || eq == set) {
    pl->msg = sl_strdup(pos);
    if (pl->msg) {
      sl_free(pl->msg);
      size_t n = strlen(pos) + 64;
      pl->msg = sl_malloc(n);
      if (pl->msg)
        snprintf(pl->msg, n, "%s: expected KEY=VALUE, e.g. source.count=100",
                 pos);
    }
    return SL_EINVAL;
  }
  if (!is_set_key(set, eq)) {
    size_t l = strlen(pos) + (size_t)(eq - set) + 160;
    pl->msg = sl_malloc(l);
    if (pl->msg)
      snprintf(pl->msg, l, "%s: malformed key '%.*s'; expected names joined "
               "by '.', each with an optional 1-based [N], as in "
               "transforms[1].filter", pos, (int)(eq - set), set);
    return SL_EINVAL;
  }
  /* The value is YAML too, so lists work: --set source.columns=[key]. */
  yaml_document_t vdoc;
  char err[1024];
  const char *val = eq + 1;
  int rc = load_doc(val, strlen(val), &vdoc, err, sizeof(err), pos);
  if (rc != SL_OK) {
    pl->msg = sl_strdup(err);
    return rc;
  }
  char base[256];
  snprintf(base, sizeof(base), "%.*s", (int)(eq - set), set);
  if ((rc = check_shape(&vdoc, pos, false, base, err, sizeof(err))) !=
      SL_OK) {
    yaml_document_delete(&vdoc);
    pl->msg = sl_strdup(err);
    return rc;
  }
  int vroot = yaml_document_get_root_node(&vdoc) ? 1 : 0;
  int before = doc_n_nodes(&pl->doc);
  int newv;
  if (vroot)
    newv = copy_node(&pl->doc, &vdoc, 1);
  else
    newv = yaml_document_add_scalar(&pl->doc, NULL, (yaml_char_t *)"", 0,
                                    YAML_PLAIN_SCALAR_STYLE);
  yaml_document_delete(&vdoc);
  if (newv == 0) return SL_ENOMEM;
  /* Walk the key path, creating mappings as needed. */
  int cur = 1;
  char seg[256];
  const char *p = set;
  char path[512] = "";
  while (p < eq) {
    size_t n = 0;
    while (p < eq && *p != '.' && *p != '[' && n + 1 < sizeof(seg))
      seg[n++] = *p++;
    seg[n] = '\0';
    long index = -1;
    if (p < eq && *p == '[') {
      char *end;
      index = strtol(p + 1, &end, 10);
      if (end >= eq || *end != ']' || index < 1) {
        size_t l = strlen(pos) + 80;
        pl->msg = sl_malloc(l);
        if (pl->msg)
          snprintf(pl->msg, l, "%s: list indexes are 1-based, as in "
                   "transforms[1].emit", pos);
        return SL_EINVAL;
      }
      p = end + 1;
    }
    bool is_last = p >= eq;
    if (p < eq && *p == '.') p++;
    if (n == 0) {
      size_t l = strlen(pos) + 40;
      pl->msg = sl_malloc(l);
      if (pl->msg) snprintf(pl->msg, l, "%s: empty key", pos);
      return SL_EINVAL;
    }
    char prev[sizeof(path)];
    memcpy(prev, path, sizeof(path));
    if (snprintf(path, sizeof(path), "%s%s%s", prev, prev[0] ? "." : "", seg) >=
        (int)sizeof(path))
      path[sizeof(path) - 1] = '\0';
    yaml_node_t *cn = node(pl, cur);
    if (cn == NULL || cn->type != YAML_MAPPING_NODE) {
      size_t l = strlen(pos) + strlen(path) + 64;
      pl->msg = sl_malloc(l);
      if (pl->msg) snprintf(pl->msg, l, "%s: %s is not inside a mapping", pos, path);
      return SL_EINVAL;
    }
    int child = map_get(pl, cur, seg, NULL);
    if (index >= 0) {
      yaml_node_t *sq = node(pl, child);
      if (sq == NULL || sq->type != YAML_SEQUENCE_NODE ||
          index > sq->data.sequence.items.top - sq->data.sequence.items.start) {
        size_t l = strlen(pos) + strlen(path) + 64;
        pl->msg = sl_malloc(l);
        if (pl->msg)
          snprintf(pl->msg, l, "%s: %s has no item %ld", pos, path, index);
        return SL_EINVAL;
      }
      int item = sq->data.sequence.items.start[index - 1];
      if (is_last) {
        sq->data.sequence.items.start[index - 1] = newv;
        break;
      }
      cur = item;
      continue;
    }
    if (is_last) {
      /* Replace the value of an existing key, or add the key. */
      yaml_node_t *m = node(pl, cur);
      bool replaced = false;
      for (yaml_node_pair_t *pp = m->data.mapping.pairs.start;
           pp < m->data.mapping.pairs.top; pp++) {
        const char *k = scalar(pl, pp->key);
        if (k && strcmp(k, seg) == 0) {
          pp->value = newv;
          replaced = true;
        }
      }
      if (!replaced) {
        int k = yaml_document_add_scalar(&pl->doc, NULL, (yaml_char_t *)seg,
                                         (int)strlen(seg),
                                         YAML_PLAIN_SCALAR_STYLE);
        if (k == 0 || !yaml_document_append_mapping_pair(&pl->doc, cur, k, newv))
          return SL_ENOMEM;
      }
      break;
    }
    if (child == 0) {
      int m = yaml_document_add_mapping(&pl->doc, NULL, YAML_BLOCK_MAPPING_STYLE);
      int k = yaml_document_add_scalar(&pl->doc, NULL, (yaml_char_t *)seg,
                                       (int)strlen(seg), YAML_PLAIN_SCALAR_STYLE);
      if (m == 0 || k == 0 || !yaml_document_append_mapping_pair(&pl->doc, cur, k, m))
        return SL_ENOMEM;
      child = m;
    }
    cur = child;
  }
  /* Remember where the new nodes came from. */
  int after = doc_n_nodes(&pl->doc);
  char **o = sl_realloc(pl->set_origin, (size_t)(after - pl->n_file_nodes) *
                                         sizeof(char *));
  if (o == NULL) return SL_ENOMEM;
  pl->set_origin = o;
  for (int i = before; i < after; i++) {
    o[i - pl->n_file_nodes] = sl_strdup(set);
    pl->n_set_origin++;
  }
  return SL_OK;
}

static char *msg_printf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static char *msg_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *m = sl_malloc((size_t)n + 1);
  if (m == NULL) return NULL;
  va_start(ap, fmt);
  vsnprintf(m, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return m;
}

/*
 * Read the pipeline file: a regular file or a pipe (a FIFO, or /dev/stdin
 * or <(...) when they are pipes) of at most MAX_FILE_SIZE bytes.  Anything
 * else (a directory, /dev/zero, a terminal, a socket) is refused before it
 * is read, so that no read can go on forever.
 */
static int read_pipeline_file(const char *path, sl_bytes_t *text,
                              char **out_msg) {
  struct stat st;
  if (stat(path, &st) != 0) {
    int e = errno;
    *out_msg = msg_printf("cannot open pipeline file '%s': %s", path,
                          strerror(e));
    return -e;
  }
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    *out_msg = msg_printf("pipeline file '%s' is %s, not a regular file or "
                          "a pipe", path,
                          S_ISDIR(st.st_mode) ? "a directory" : "a device "
                          "or a socket");
    return SL_EINVAL;
  }
  if (S_ISREG(st.st_mode) && st.st_size > (off_t)MAX_FILE_SIZE) {
    *out_msg = msg_printf("pipeline file '%s' has %lld bytes; the limit is "
                          "%u (1 MiB)", path, (long long)st.st_size,
                          MAX_FILE_SIZE);
    return SL_EINVAL;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    *out_msg = msg_printf("cannot open pipeline file '%s': %s", path,
                          strerror(e));
    return -e;
  }
  /* The file may have been replaced between stat and open. */
  if (fstat(fd, &st) != 0 || (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))) {
    close(fd);
    *out_msg = msg_printf("pipeline file '%s' is not a regular file or a "
                          "pipe", path);
    return SL_EINVAL;
  }
  int rc = SL_OK;
  char chunk[65536];
  for (;;) {
    ssize_t got = read(fd, chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int e = errno;
      *out_msg = msg_printf("cannot read pipeline file '%s': %s", path,
                            strerror(e));
      rc = -e;
      break;
    }
    if (got == 0) break;
    if (text->len + (size_t)got > MAX_FILE_SIZE) {
      *out_msg = msg_printf("pipeline file '%s' has more than %u bytes (1 "
                            "MiB), the limit", path, MAX_FILE_SIZE);
      rc = SL_EINVAL;
      break;
    }
    if ((rc = sl_bytes_append(text, chunk, (size_t)got)) != SL_OK) {
      *out_msg = msg_printf("out of memory reading pipeline file '%s'", path);
      break;
    }
  }
  close(fd);
  return rc;
}

int sl_pipeline_load(const char *path, const char *const *sets,
                     uint32_t n_sets, sl_pipeline_t **out, char **out_msg) {
  *out_msg = NULL;
  sl_bytes_t text;
  sl_bytes_init(&text);
  int rc = read_pipeline_file(path, &text, out_msg);
  if (rc != SL_OK) {
    sl_bytes_close(&text);
    return rc;
  }
  rc = sl_pipeline_load_text(path, text.data ? (char *)text.data : "",
                             text.len, sets, n_sets, out, out_msg);
  sl_bytes_close(&text);
  return rc;
}

int sl_pipeline_load_text(const char *path, const char *text, size_t len,
                          const char *const *sets, uint32_t n_sets,
                          sl_pipeline_t **out, char **out_msg) {
  *out_msg = NULL;
  sl_pipeline_t *pl = sl_calloc(1, sizeof(*pl));
  if (pl == NULL) return SL_ENOMEM;
  pl->file = sl_strdup(path);
  char err[1200];
  int rc = load_doc(text, len, &pl->doc, err, sizeof(err), path);
  if (rc != SL_OK) {
    *out_msg = sl_strdup(err);
    sl_pipeline_destroy(pl);
    return rc;
  }
  pl->has_doc = true;
  if ((rc = check_shape(&pl->doc, path, true, "", err, sizeof(err))) !=
      SL_OK) {
    *out_msg = sl_strdup(err);
    sl_pipeline_destroy(pl);
    return rc;
  }
  if (yaml_document_get_root_node(&pl->doc) == NULL) {
    size_t n = strlen(path) + 64;
    *out_msg = sl_malloc(n);
    if (*out_msg) snprintf(*out_msg, n, "%s: the pipeline file is empty", path);
    sl_pipeline_destroy(pl);
    return SL_EINVAL;
  }
  pl->n_file_nodes = doc_n_nodes(&pl->doc);
  for (uint32_t i = 0; i < n_sets; i++) {
    if (node(pl, 1)->type != YAML_MAPPING_NODE) break; /* reported later */
    rc = apply_set(pl, sets[i]);
    if (rc != SL_OK) {
      *out_msg = pl->msg ? pl->msg : sl_strdup("out of memory applying --set");
      pl->msg = NULL;
      sl_pipeline_destroy(pl);
      return rc;
    }
  }
  *out = pl;
  return SL_OK;
}

void sl_pipeline_destroy(sl_pipeline_t *pl) {
  if (pl == NULL) return;
  if (pl->has_doc) yaml_document_delete(&pl->doc);
  for (int i = 0; i < pl->n_set_origin; i++) sl_free(pl->set_origin[i]);
  sl_free(pl->set_origin);
  sl_free(pl->file);
  sl_free(pl->msg);
  sl_free(pl->name);
  for (uint32_t i = 0; i < pl->n_pg; i++) {
    sl_free(pl->pg[i].path);
    sl_free(pl->pg[i].uid);
    sl_schema_unref(pl->pg[i].schema);
  }
  sl_free(pl->pg);
  sl_free(pl);
}

bool sl_pipeline_is_unbounded(const sl_pipeline_t *pl) {
  return pl->is_unbounded;
}
const char *sl_pipeline_name(const sl_pipeline_t *pl) {
  return pl->name ? pl->name : "pipeline";
}

/* ------------------------------------------------------------------ */
/* Building the job. */

typedef struct build_s {
  sl_pipeline_t *pl;
  sl_job_t *job;
  sl_stream_t *s;
  const sl_schema_t *schema; /* of s */
  bool is_bounded;
  bool has_watermarks; /* the source has a watermarks section */
  int src_paths;       /* the file source's path node, or 0 */
  bool is_connect;     /* validate --connect: sinks check their servers */
  bool has_ckpt_dir;   /* checkpoint.dir is set (even under validate) */
  uint32_t parallelism;    /* the job's */
  uint32_t max_concurrent; /* checkpoint.max_concurrent */
  const sl_job_config_t *jcfg; /* the job's settings (checkpoint, restart) */
  bool is_validate;
  /* s comes from an aggregate keyed by these fields (its output has them
   * under the same names) through operators of the same parallelism,
   * keyed_par (0: the job's): rows of one key are in one subtask. */
  const char *keyed[64];
  uint32_t n_keyed;
  uint32_t keyed_par;
  /* The route being built (routes:, docs/pipeline.md "Routes"), or
   * route_uid NULL: its source tables, sink table and key, the uid suffix
   * of its source and sink, its index (for the server ids). */
  const char *route_uid;
  const char *route_tables[256];
  uint32_t n_route_tables;
  const char *route_table;
  const char *route_key[32];
  uint32_t n_route_key;
  int route_key_node;
  uint32_t route_index;
  char route_src_uid[300], route_snk_uid[300];
} build_t;

/* Schema of a file source: a list of {name, type, nullable}. */
static int parse_schema(sl_pipeline_t *pl, int seq, const char *path,
                        sl_schema_t **out) {
  yaml_node_t *n = node(pl, seq);
  if (n == NULL || n->type != YAML_SEQUENCE_NODE)
    return FAIL(pl, seq, path, "expected a list of fields, got %s",
                type_word(pl, seq));
  size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (count == 0) return FAIL(pl, seq, path, "needs at least one field");
  sl_field_t *fields = sl_calloc(count, sizeof(sl_field_t));
  if (fields == NULL) return SL_ENOMEM;
  int rc = SL_OK;
  static const char *keys[] = {"name", "type", "nullable", NULL};
  for (size_t i = 0; i < count && rc == SL_OK; i++) {
    int item = node(pl, seq)->data.sequence.items.start[i];
    char p[256];
    snprintf(p, sizeof(p), "%s[%zu]", path, i + 1);
    if ((rc = check_keys(pl, item, p, keys)) != SL_OK) break;
    const char *name = NULL, *type = NULL;
    bool nullable = false;
    if ((rc = get_str(pl, item, p, "name", true, &name)) != SL_OK) break;
    if ((rc = get_str(pl, item, p, "type", true, &type)) != SL_OK) break;
    if ((rc = get_bool(pl, item, p, "nullable", &nullable)) != SL_OK) break;
    sl_type_t t;
    int trc = sl_type_parse(type, &t);
    if (trc != SL_OK) {
      char f[300];
      join_path(f, sizeof(f), p, "type");
      rc = FAIL(pl, map_get(pl, item, "type", NULL), f,
                trc == SL_EINVAL
                    ? "'%s' is not supported: decimal precision must be 1..18 "
                      "and scale at most the precision"
                    : "unknown type '%s'; expected bool, int32, int64, "
                      "float64, decimal(p,s), string, bytes or timestamp",
                type);
      break;
    }
    t.nullable = nullable;
    fields[i].name = name;
    fields[i].type = t;
  }
  if (rc == SL_OK) {
    sl_error_t *err = NULL;
    rc = sl_schema_create(fields, (uint32_t)count, out, &err);
    if (rc != SL_OK) FAIL(pl, seq, path, "%s", sl_error_message(err));
    sl_error_destroy(err);
  }
  sl_free(fields);
  return rc;
}

static int str_list(sl_pipeline_t *pl, int idx, const char *path,
                    const char **out, uint32_t max, uint32_t *out_n) {
  yaml_node_t *n = node(pl, idx);
  if (n && n->type == YAML_SCALAR_NODE) {
    out[0] = scalar(pl, idx);
    *out_n = 1;
    return SL_OK;
  }
  if (n == NULL || n->type != YAML_SEQUENCE_NODE)
    return FAIL(pl, idx, path, "expected a list, got %s", type_word(pl, idx));
  uint32_t count = (uint32_t)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (count == 0) return FAIL(pl, idx, path, "the list is empty");
  if (count > max) return FAIL(pl, idx, path, "at most %u items", max);
  for (uint32_t i = 0; i < count; i++) {
    int it = n->data.sequence.items.start[i];
    if (!is_scalar(pl, it)) {
      char p[256];
      snprintf(p, sizeof(p), "%s[%u]", path, i + 1);
      return FAIL(pl, it, p, "expected a string, got %s", type_word(pl, it));
    }
    out[i] = scalar(pl, it);
  }
  *out_n = count;
  return SL_OK;
}

static int job_error(build_t *b, int idx, const char *field) {
  const sl_error_t *e = sl_job_error(b->job);
  int rc = FAIL(b->pl, idx, field, "%s",
                e ? sl_error_message(e) : "cannot add the operator");
  /* Out of memory is not the pipeline's fault; a builder without an
   * error object failed for want of memory too. */
  return e == NULL || sl_error_code(e) == SL_ENOMEM ? SL_ENOMEM : rc;
}

/* An event-time field: timestamp or int64 microseconds in schema. */
static int check_time_field(sl_pipeline_t *pl, int idx, const char *field,
                            const sl_schema_t *schema, const char *name,
                            const char *where) {
  int i = sl_schema_index(schema, name);
  if (i < 0)
    return FAIL(pl, idx, field, "no field '%s' in the %s", name, where);
  sl_type_t t = sl_schema_field(schema, (uint32_t)i)->type;
  if (t.id != SL_TYPE_TIMESTAMP && t.id != SL_TYPE_INT64)
    return FAIL(pl, idx, field, "field '%s' is %s; an event time must be "
                "timestamp or int64 (microseconds)", name,
                sl_type_name((sl_type_id_t)t.id));
  return SL_OK;
}

/* source.watermarks: the event time of the source (docs/pipeline.md). */
static int build_watermarks(build_t *b, int src) {
  sl_pipeline_t *pl = b->pl;
  int wv = map_get(pl, src, "watermarks", NULL);
  if (wv == 0) return SL_OK;
  const char *path = "source.watermarks";
  static const char *keys[] = {"time_field", "max_out_of_orderness",
                               "strategy", "idle_timeout", "interval",
                               "per_record", NULL};
  static const char *strategies[] = {"bounded", "monotonous", NULL};
  sl_watermark_config_t cfg;
  sl_watermark_config_init(&cfg);
  int strategy = 0;
  int rc;
  if ((rc = check_keys(pl, wv, path, keys)) ||
      (rc = get_str(pl, wv, path, "time_field", true, &cfg.time_field)) ||
      (rc = get_duration(pl, wv, path, "max_out_of_orderness",
                         &cfg.max_out_of_orderness_us)) ||
      (rc = get_enum(pl, wv, path, "strategy", strategies, &strategy)) ||
      (rc = get_duration_ms(pl, wv, path, "idle_timeout",
                            &cfg.idle_timeout_ms)) ||
      (rc = get_duration_ms(pl, wv, path, "interval", &cfg.interval_ms)) ||
      (rc = get_bool(pl, wv, path, "per_record", &cfg.per_record)))
    return rc;
  if ((rc = check_time_field(pl, map_get(pl, wv, "time_field", NULL),
                             "source.watermarks.time_field",
                             sl_stream_schema(b->s), cfg.time_field,
                             "source")) != SL_OK)
    return rc;
  cfg.strategy = strategy ? SL_WM_MONOTONOUS : SL_WM_BOUNDED;
  if (cfg.strategy == SL_WM_MONOTONOUS && cfg.max_out_of_orderness_us != 0)
    return FAIL(pl, map_get(pl, wv, "max_out_of_orderness", NULL),
                "source.watermarks.max_out_of_orderness",
                "a monotonous strategy allows no disorder; leave this out or "
                "use strategy: bounded");
  if (sl_source_watermarks(b->s, &cfg) == NULL)
    return job_error(b, wv, path);
  b->has_watermarks = true;
  return SL_OK;
}

/*
 * source: {type: kafka, ...} (docs/pipeline.md).  topic may be a string or
 * a list; start is earliest, latest, committed, timestamp (with
 * start_timestamp_ms) or offsets (with start_offsets, a list of
 * "topic/partition:offset"); metadata names the fields that carry the
 * record's timestamp, headers, key, partition and offset; properties are
 * passed to librdkafka.
 */
static int build_kafka_source(build_t *b, int src, const char **uid,
                              uint32_t *par) {
  sl_pipeline_t *pl = b->pl;
  static const char *keys[] = {
      "type", "uid", "parallelism", "bootstrap_servers", "topic", "group_id",
      "start", "start_timestamp_ms", "start_offsets", "format", "delimiter",
      "schema", "metadata", "bounded", "read_committed",
      "discovery_interval", "timeout", "properties", "watermarks", NULL};
  int rc = check_keys(pl, src, "source", keys);
  if (rc != SL_OK) return rc;
  sl_kafka_source_config_t cfg;
  sl_kafka_source_config_init(&cfg);
  const char *topics[64];
  uint32_t n_topics = 0;
  int tv = map_get(pl, src, "topic", NULL);
  if (tv == 0) return FAIL(pl, src, "source", "missing required field 'topic'");
  static const char *starts[] = {"earliest", "latest", "committed",
                                 "timestamp", "offsets", NULL};
  static const char *fmts[] = {"json", "csv", "string", "bytes", NULL};
  int start = 0, fmt = 0;
  bool read_committed = true;
  uint64_t ts = 0;
  if ((rc = str_list(pl, tv, "source.topic", topics, 64, &n_topics)) ||
      (rc = get_str(pl, src, "source", "uid", false, uid)) ||
      (rc = get_u32(pl, src, "source", "parallelism", 1,
                    SL_MAX_PARALLELISM_LIMIT, par)) ||
      (rc = get_str(pl, src, "source", "bootstrap_servers", true,
                    &cfg.bootstrap_servers)) ||
      (rc = get_str(pl, src, "source", "group_id", false, &cfg.group_id)) ||
      (rc = get_enum(pl, src, "source", "start", starts, &start)) ||
      (rc = get_u64(pl, src, "source", "start_timestamp_ms", INT64_MAX,
                    &ts)) ||
      (rc = get_enum(pl, src, "source", "format", fmts, &fmt)) ||
      (rc = get_delim(pl, src, "source", &cfg.csv_delimiter)) ||
      (rc = get_bool(pl, src, "source", "bounded", &cfg.bounded)) ||
      (rc = get_bool(pl, src, "source", "read_committed", &read_committed)) ||
      (rc = get_duration_ms(pl, src, "source", "timeout", &cfg.timeout_ms)))
    return rc;
  /* discovery_interval: a duration, or off (0) for one listing. */
  int dv = map_get(pl, src, "discovery_interval", NULL);
  const char *dstr = dv ? scalar(pl, dv) : NULL;
  if (dstr && (strcmp(dstr, "off") == 0 || strcmp(dstr, "0") == 0))
    cfg.discovery_interval_ms = 0;
  else if ((rc = get_duration_ms(pl, src, "source", "discovery_interval",
                                 &cfg.discovery_interval_ms)) != SL_OK)
    return rc;
  cfg.topics = topics;
  cfg.n_topics = n_topics;
  cfg.start = (sl_kafka_start_t)(start < 0 ? 0 : start);
  cfg.start_timestamp_ms = (int64_t)ts;
  cfg.format = (sl_kafka_format_t)(fmt < 0 ? 0 : fmt);
  cfg.read_uncommitted = !read_committed;
  int stv = map_get(pl, src, "start_timestamp_ms", NULL);
  if (cfg.start == SL_KAFKA_START_TIMESTAMP && stv == 0)
    return FAIL(pl, src, "source", "start: timestamp needs "
                "start_timestamp_ms");
  /* start_offsets: ["topic/partition:offset", ...] */
  sl_kafka_partition_offset_t offs[256];
  char *off_topics[256];
  uint32_t n_offs = 0;
  int ov = map_get(pl, src, "start_offsets", NULL);
  if (cfg.start == SL_KAFKA_START_OFFSETS && ov == 0)
    return FAIL(pl, src, "source", "start: offsets needs start_offsets");
  if (ov) {
    const char *items[256];
    if ((rc = str_list(pl, ov, "source.start_offsets", items, 256,
                       &n_offs)) != SL_OK)
      return rc;
    for (uint32_t i = 0; i < n_offs; i++) {
      const char *it = items[i], *slash = strrchr(it, '/');
      const char *colon = slash ? strchr(slash, ':') : NULL;
      char *e1 = NULL, *e2 = NULL;
      long part = slash ? strtol(slash + 1, &e1, 10) : -1;
      long long off = colon ? strtoll(colon + 1, &e2, 10) : -1;
      if (slash == NULL || slash == it || colon == NULL || e1 != colon ||
          part < 0 || part > INT32_MAX || e2 == colon + 1 || *e2 != '\0' ||
          off < 0) {
        for (uint32_t k = 0; k < i; k++) sl_free(off_topics[k]);
        char f[64];
        snprintf(f, sizeof(f), "source.start_offsets[%u]", i + 1);
        return FAIL(pl, ov, f, "'%s' is not topic/partition:offset", it);
      }
      off_topics[i] = sl_strndup(it, (size_t)(slash - it));
      offs[i].topic = off_topics[i];
      offs[i].partition = (int32_t)part;
      offs[i].offset = off;
    }
    cfg.start_offsets = offs;
    cfg.n_start_offsets = n_offs;
  }
  /* metadata: {timestamp: f, headers: f, key: f, partition: f, offset: f} */
  int mv = map_get(pl, src, "metadata", NULL);
  static const char *mkeys[] = {"timestamp", "headers", "key", "partition",
                                "offset", NULL};
  if (mv && ((rc = check_keys(pl, mv, "source.metadata", mkeys)) ||
             (rc = get_str(pl, mv, "source.metadata", "timestamp", false,
                           &cfg.timestamp_field)) ||
             (rc = get_str(pl, mv, "source.metadata", "headers", false,
                           &cfg.headers_field)) ||
             (rc = get_str(pl, mv, "source.metadata", "key", false,
                           &cfg.key_field)) ||
             (rc = get_str(pl, mv, "source.metadata", "partition", false,
                           &cfg.partition_field)) ||
             (rc = get_str(pl, mv, "source.metadata", "offset", false,
                           &cfg.offset_field))))
    goto out;
  /* properties: {name: value, ...} */
  const char *props[2 * 64 + 1];
  uint32_t n_props = 0;
  int pv = map_get(pl, src, "properties", NULL);
  if (pv) {
    yaml_node_t *n = node(pl, pv);
    if (n == NULL || n->type != YAML_MAPPING_NODE) {
      rc = FAIL(pl, pv, "source.properties", "expected a mapping, got %s",
                type_word(pl, pv));
      goto out;
    }
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
         p < n->data.mapping.pairs.top; p++) {
      const char *k = scalar(pl, p->key), *v = scalar(pl, p->value);
      if (k == NULL || v == NULL || n_props == 64) {
        rc = FAIL(pl, p->key, "source.properties",
                  n_props == 64 ? "at most 64 properties"
                                : "expected name: value scalars");
        goto out;
      }
      props[2 * n_props] = k;
      props[2 * n_props + 1] = v;
      n_props++;
    }
  }
  props[2 * n_props] = NULL;
  cfg.properties = props;
  int sv = map_get(pl, src, "schema", NULL);
  sl_schema_t *vschema = NULL, *schema = NULL;
  if (sv == 0 && (cfg.format == SL_KAFKA_FORMAT_STRING ||
                  cfg.format == SL_KAFKA_FORMAT_BYTES)) {
    sl_field_t f = {"value",
                    {(uint8_t)(cfg.format == SL_KAFKA_FORMAT_STRING
                                   ? SL_TYPE_STRING
                                   : SL_TYPE_BYTES),
                     0, 0, true}};
    rc = sl_schema_create(&f, 1, &vschema, NULL);
  } else if (sv == 0) {
    rc = FAIL(pl, src, "source", "missing required field 'schema'");
  } else {
    rc = parse_schema(pl, sv, "source.schema", &vschema);
  }
  if (rc != SL_OK) goto out;
  cfg.schema = vschema;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_error_t *err = NULL;
  rc = sl_kafka_source_create(&cfg, &vt, &ctx, &schema, &err);
  sl_schema_unref(vschema);
  if (rc != SL_OK) {
    FAIL(pl, src, "source", "%s", sl_error_message(err));
    sl_error_destroy(err);
    goto out;
  }
  b->is_bounded = cfg.bounded;
  pl->is_unbounded = !cfg.bounded;
  b->s = sl_job_source(b->job, *uid, vt, ctx, schema);
  sl_schema_unref(schema);
out:
  for (uint32_t k = 0; k < n_offs; k++) sl_free(off_topics[k]);
  return rc;
}

static int get_connect_timeout(sl_pipeline_t *pl, int snk, const char *path,
                               int64_t *out_ms);

/*
 * source: {type: mariadb-cdc, ...} (docs/pipeline.md, docs/cdc-mariadb.md).
 * The source connects when the pipeline is built (also by validate): the
 * output fields are the captured tables' columns, which only the server
 * knows.  A declared chunk_key that is not the primary key adds the
 * reconciler keyed by primary key after the source.
 */
static int build_cdc_source(build_t *b, int src, const char **uid,
                            uint32_t *par) {
  sl_pipeline_t *pl = b->pl;
  static const char *keys[] = {
      "type", "uid", "parallelism", "host", "port", "user", "password",
      "password_env", "tables", "chunk_key", "chunk_rows", "startup", "gtid",
      "server_id", "heartbeat", "connect_timeout", "metadata", NULL};
  int rc = check_keys(pl, src, "source", keys);
  if (rc != SL_OK) return rc;
  sl_mariadb_cdc_config_t cfg;
  sl_mariadb_cdc_config_init(&cfg);
  uint32_t port = 3306;
  const char *pw_env = NULL;
  int startup = 0;
  int64_t hb_ms = 0, connect_ms = 0;
  static const char *startups[] = {"initial", "snapshot", "latest", "gtid",
                                   NULL};
  const char *tables[256];
  uint32_t n_tables = 0;
  int tv = map_get(pl, src, "tables", NULL);
  if (b->route_uid) {
    if (tv)
      return FAIL(pl, tv, "source.tables", "with 'routes', each route lists "
                  "its tables (routes[N].tables), not the source");
    memcpy(tables, b->route_tables, b->n_route_tables * sizeof(tables[0]));
    n_tables = b->n_route_tables;
  } else if (tv == 0) {
    return FAIL(pl, src, "source", "missing required field 'tables' (a list "
                "of db.table patterns)");
  } else if ((rc = str_list(pl, tv, "source.tables", tables, 256,
                            &n_tables)) != SL_OK) {
    return rc;
  }
  if ((rc = get_str(pl, src, "source", "uid", false, uid)) ||
      (rc = get_u32(pl, src, "source", "parallelism", 1,
                    SL_MAX_PARALLELISM_LIMIT, par)) ||
      (rc = get_str(pl, src, "source", "host", false, &cfg.host)) ||
      (rc = get_u32(pl, src, "source", "port", 1, 65535, &port)) ||
      (rc = get_str(pl, src, "source", "user", true, &cfg.user)) ||
      (rc = get_str(pl, src, "source", "password", false, &cfg.password)) ||
      (rc = get_str(pl, src, "source", "password_env", false, &pw_env)) ||
      (rc = get_str(pl, src, "source", "chunk_key", false, &cfg.chunk_key)) ||
      (rc = get_u64(pl, src, "source", "chunk_rows", 1u << 30,
                    &cfg.chunk_rows)) ||
      (rc = get_enum(pl, src, "source", "startup", startups, &startup)) ||
      (rc = get_str(pl, src, "source", "gtid", false, &cfg.start_gtid)) ||
      (rc = get_u32(pl, src, "source", "server_id", 1, UINT32_MAX - 1024,
                    &cfg.server_id)) ||
      (rc = get_duration_ms(pl, src, "source", "heartbeat", &hb_ms)) ||
      (rc = get_connect_timeout(pl, src, "source", &connect_ms)))
    return rc;
  int cv = map_get(pl, src, "chunk_rows", NULL);
  if (cv && cfg.chunk_rows == 0)
    return FAIL(pl, cv, "source.chunk_rows", "must be at least 1");
  if (pw_env != NULL) {
    if (cfg.password != NULL)
      return FAIL(pl, map_get(pl, src, "password_env", NULL),
                  "source.password_env",
                  "give either password or password_env, not both");
    if ((cfg.password = getenv(pw_env)) == NULL)
      return FAIL(pl, map_get(pl, src, "password_env", NULL),
                  "source.password_env", "environment variable %s is not set",
                  pw_env);
  }
  cfg.start = (sl_mariadb_cdc_start_t)(startup < 0 ? 0 : startup);
  int gv = map_get(pl, src, "gtid", NULL);
  if (cfg.start == SL_MARIADB_CDC_START_GTID && gv == 0)
    return FAIL(pl, src, "source", "startup: gtid needs 'gtid' (a GTID "
                "position such as \"0-1-100\")");
  if (cfg.start != SL_MARIADB_CDC_START_GTID && gv != 0)
    return FAIL(pl, gv, "source.gtid", "only with 'startup: gtid'");
  if (hb_ms > 3600000)
    return FAIL(pl, map_get(pl, src, "heartbeat", NULL), "source.heartbeat",
                "must be at most 1h");
  int mv = map_get(pl, src, "metadata", NULL);
  if (mv) {
    const char *m[8];
    uint32_t n = 0;
    if ((rc = str_list(pl, mv, "source.metadata", m, 8, &n)) != SL_OK)
      return rc;
    for (uint32_t i = 0; i < n; i++) {
      if (strcmp(m[i], "table") == 0) cfg.with_table = true;
      else if (strcmp(m[i], "position") == 0) cfg.with_position = true;
      else if (strcmp(m[i], "op_ts") == 0) cfg.with_op_ts = true;
      else
        return FAIL(pl, mv, "source.metadata", "unknown metadata '%s'; "
                    "expected table, position or op_ts", m[i]);
    }
  }
  if (b->route_uid) {
    /* Each route's source has its own replication connections: route n
     * (from 0) takes the server ids server_id + 1024 n onward. */
    uint64_t base = cfg.server_id ? cfg.server_id : 5400;
    base += 1024ull * b->route_index;
    if (base > UINT32_MAX - 1024)
      return FAIL(pl, src, "source", "route %u: server ids from %llu are "
                  "beyond the range of server ids; give a smaller "
                  "'server_id'", b->route_index + 1,
                  (unsigned long long)base);
    cfg.server_id = (uint32_t)base;
    snprintf(b->route_src_uid, sizeof(b->route_src_uid), "%s-%s", *uid,
             b->route_uid);
    *uid = b->route_src_uid;
  }
  cfg.port = (int)port;
  cfg.tables = tables;
  cfg.n_tables = n_tables;
  cfg.heartbeat_ms = (uint32_t)hb_ms;
  cfg.connect_timeout_ms = (uint32_t)connect_ms;
  if (cfg.start != SL_MARIADB_CDC_START_SNAPSHOT && !b->has_ckpt_dir &&
      !b->is_validate)
    sl_log(SL_LOG_WARN, "mariadb-cdc: the pipeline has no checkpoint dir: a "
           "restart reads the tables again from the start");
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema = NULL;
  sl_error_t *err = NULL;
  int vf = -1;
  rc = sl_mariadb_cdc_source_create(&cfg, &vt, &ctx, &schema, &vf, &err);
  if (rc != SL_OK) {
    FAIL(pl, src, "source", "%s", sl_error_message(err));
    sl_error_destroy(err);
    return rc;
  }
  b->is_bounded = cfg.start == SL_MARIADB_CDC_START_SNAPSHOT;
  pl->is_unbounded = !b->is_bounded;
  b->s = sl_job_source(b->job, *uid, vt, ctx, schema);
  if (vf >= 0 && b->s) {
    const uint32_t *pk;
    uint32_t n_pk;
    sl__mariadb_cdc_pk(ctx, &pk, &n_pk);
    char ruid[300];
    snprintf(ruid, sizeof(ruid), "%s-reconcile", *uid);
    b->s = sl__cdc_reconcile(b->s, ruid, pk, n_pk);
  }
  sl_schema_unref(schema);
  return SL_OK;
}

/*
 * source: {type: postgres-cdc, ...} (docs/pipeline.md,
 * docs/cdc-postgres.md).  Connects when the pipeline is built (also by
 * validate): the output fields are the captured tables' columns.  The
 * slot's flush lags by the job's checkpoint.retain.
 */
static int build_pgcdc_source(build_t *b, int src, const char **uid,
                              uint32_t *par) {
  sl_pipeline_t *pl = b->pl;
  static const char *keys[] = {
      "type", "uid", "parallelism", "conninfo", "password", "password_env",
      "tables", "slot", "publication", "chunk_rows", "startup", "heartbeat",
      "connect_timeout", "metadata", "watermarks", NULL};
  int rc = check_keys(pl, src, "source", keys);
  if (rc != SL_OK) return rc;
  sl_postgres_cdc_config_t cfg;
  sl_postgres_cdc_config_init(&cfg);
  const char *pw_env = NULL;
  int startup = 0;
  int64_t hb_ms = 0, connect_ms = 0;
  static const char *startups[] = {"initial", "snapshot", "latest", NULL};
  const char *tables[256];
  uint32_t n_tables = 0;
  int tv = map_get(pl, src, "tables", NULL);
  if (tv == 0)
    return FAIL(pl, src, "source", "missing required field 'tables' (a list "
                "of schema.table patterns)");
  if ((rc = str_list(pl, tv, "source.tables", tables, 256, &n_tables)) ||
      (rc = get_str(pl, src, "source", "uid", false, uid)) ||
      (rc = get_u32(pl, src, "source", "parallelism", 1,
                    SL_MAX_PARALLELISM_LIMIT, par)) ||
      (rc = get_str(pl, src, "source", "conninfo", true, &cfg.conninfo)) ||
      (rc = get_str(pl, src, "source", "password", false, &cfg.password)) ||
      (rc = get_str(pl, src, "source", "password_env", false, &pw_env)) ||
      (rc = get_str(pl, src, "source", "slot", false, &cfg.slot)) ||
      (rc = get_str(pl, src, "source", "publication", false,
                    &cfg.publication)) ||
      (rc = get_u64(pl, src, "source", "chunk_rows", 1u << 30,
                    &cfg.chunk_rows)) ||
      (rc = get_enum(pl, src, "source", "startup", startups, &startup)) ||
      (rc = get_duration_ms(pl, src, "source", "heartbeat", &hb_ms)) ||
      (rc = get_connect_timeout(pl, src, "source", &connect_ms)))
    return rc;
  int cv = map_get(pl, src, "chunk_rows", NULL);
  if (cv && cfg.chunk_rows == 0)
    return FAIL(pl, cv, "source.chunk_rows", "must be at least 1");
  if (pw_env != NULL) {
    if (cfg.password != NULL)
      return FAIL(pl, map_get(pl, src, "password_env", NULL),
                  "source.password_env",
                  "give either password or password_env, not both");
    if ((cfg.password = getenv(pw_env)) == NULL)
      return FAIL(pl, map_get(pl, src, "password_env", NULL),
                  "source.password_env", "environment variable %s is not set",
                  pw_env);
  }
  cfg.start = (sl_postgres_cdc_start_t)(startup < 0 ? 0 : startup);
  if (cfg.start != SL_POSTGRES_CDC_START_SNAPSHOT && cfg.slot == NULL)
    return FAIL(pl, src, "source", "missing required field 'slot' (the "
                "name of the job's replication slot: one per job and source, "
                "a-z, 0-9 and _)");
  int hv = map_get(pl, src, "heartbeat", NULL);
  if (hv && (hb_ms < 100 || hb_ms > 3600000))
    return FAIL(pl, hv, "source.heartbeat", "must be from 100ms to 1h");
  int mv = map_get(pl, src, "metadata", NULL);
  if (mv) {
    const char *m[8];
    uint32_t n = 0;
    if ((rc = str_list(pl, mv, "source.metadata", m, 8, &n)) != SL_OK)
      return rc;
    for (uint32_t i = 0; i < n; i++) {
      if (strcmp(m[i], "table") == 0) cfg.with_table = true;
      else if (strcmp(m[i], "position") == 0) cfg.with_position = true;
      else if (strcmp(m[i], "op_ts") == 0) cfg.with_op_ts = true;
      else
        return FAIL(pl, mv, "source.metadata", "unknown metadata '%s'; "
                    "expected table, position or op_ts", m[i]);
    }
  }
  cfg.tables = tables;
  cfg.n_tables = n_tables;
  cfg.heartbeat_ms = (uint32_t)hb_ms;
  cfg.connect_timeout_ms = (uint32_t)connect_ms;
  cfg.retain = b->jcfg ? b->jcfg->checkpoint.retain : 0;
  if (cfg.start != SL_POSTGRES_CDC_START_SNAPSHOT && !b->has_ckpt_dir &&
      !b->is_validate)
    sl_log(SL_LOG_WARN, "postgres-cdc: the pipeline has no checkpoint dir: a "
           "restart reads the tables again from the start");
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema = NULL;
  sl_error_t *err = NULL;
  rc = sl_postgres_cdc_source_create(&cfg, &vt, &ctx, &schema, &err);
  if (rc != SL_OK) {
    FAIL(pl, src, "source", "%s", sl_error_message(err));
    sl_error_destroy(err);
    return rc;
  }
  b->is_bounded = cfg.start == SL_POSTGRES_CDC_START_SNAPSHOT;
  pl->is_unbounded = !b->is_bounded;
  b->s = sl_job_source(b->job, *uid, vt, ctx, schema);
  sl_schema_unref(schema);
  return SL_OK;
}

static int build_source(build_t *b, int src) {
  sl_pipeline_t *pl = b->pl;
  static const char *types[] = {"generator", "file", "kafka", "mariadb-cdc",
                                "postgres-cdc", NULL};
  int type = -1;
  int rc = get_enum(pl, src, "source", "type", types, &type);
  if (rc != SL_OK) return rc;
  if (type < 0) return FAIL(pl, src, "source", "missing required field 'type'");
  if (b->route_uid && type != 3)
    return FAIL(pl, map_get(pl, src, "type", NULL), "source.type", "'routes' "
                "need a mariadb-cdc source (a route sends captured tables to "
                "a sink table)");
  const char *uid = "source";
  uint32_t par = 0;
  sl_error_t *err = NULL;
  if (type == 0) {
    static const char *keys[] = {"type", "uid", "parallelism", "seed",
                                 "count", "rate", "keys", "skew",
                                 "zipf_exponent", "payload_size", "splits",
                                 "columns", "start_time_us", "time_step_us",
                                 "watermarks", NULL};
    if ((rc = check_keys(pl, src, "source", keys)) != SL_OK) return rc;
    sl_gen_config_t cfg;
    sl_gen_config_init(&cfg);
    uint64_t u;
    int skew = 0;
    static const char *skews[] = {"uniform", "zipf", NULL};
    if ((rc = get_str(pl, src, "source", "uid", false, &uid)) ||
        (rc = get_u32(pl, src, "source", "parallelism", 1, SL_MAX_PARALLELISM_LIMIT, &par)) ||
        (rc = get_u64(pl, src, "source", "seed", UINT64_MAX, &cfg.seed)) ||
        (rc = get_u64(pl, src, "source", "count", UINT64_MAX, &cfg.count)) ||
        (rc = get_double(pl, src, "source", "rate", &cfg.rate)) ||
        (rc = get_u64(pl, src, "source", "keys", UINT64_MAX, &cfg.keys)) ||
        (rc = get_enum(pl, src, "source", "skew", skews, &skew)) ||
        (rc = get_double(pl, src, "source", "zipf_exponent", &cfg.zipf_exponent)) ||
        (rc = get_u32(pl, src, "source", "payload_size", 0, 32768, &cfg.payload_size)) ||
        (rc = get_u32(pl, src, "source", "splits", 0, 1u << 16, &cfg.splits)))
      return rc;
    u = (uint64_t)cfg.time_step_us;
    if ((rc = get_u64(pl, src, "source", "time_step_us", INT64_MAX, &u))) return rc;
    cfg.time_step_us = (int64_t)u;
    u = (uint64_t)cfg.start_time_us;
    if ((rc = get_u64(pl, src, "source", "start_time_us", INT64_MAX, &u))) return rc;
    cfg.start_time_us = (int64_t)u;
    cfg.skew = skew ? SL_GEN_ZIPF : SL_GEN_UNIFORM;
    int kv = map_get(pl, src, "keys", NULL);
    if (kv && cfg.keys == 0) return FAIL(pl, kv, "source.keys", "must be at least 1");
    int zv = map_get(pl, src, "zipf_exponent", NULL);
    if (zv && !(cfg.zipf_exponent > 0))
      return FAIL(pl, zv, "source.zipf_exponent", "must be greater than 0");
    int cv = map_get(pl, src, "columns", NULL);
    if (cv) {
      const char *cols[8];
      uint32_t n = 0;
      if ((rc = str_list(pl, cv, "source.columns", cols, 8, &n)) != SL_OK) return rc;
      static const char *names[] = {"seq", "split", "key", "amount", "ts", "payload"};
      cfg.columns = 0;
      for (uint32_t i = 0; i < n; i++) {
        int bit = -1;
        for (int k = 0; k < 6; k++)
          if (strcmp(cols[i], names[k]) == 0) bit = k;
        if (bit < 0) {
          char p[64];
          snprintf(p, sizeof(p), "source.columns[%u]", i + 1);
          yaml_node_t *sq = node(pl, cv);
          int it = sq->type == YAML_SEQUENCE_NODE ? sq->data.sequence.items.start[i] : cv;
          return FAIL(pl, it, p,
                      "unknown column '%s'; expected seq, split, key, amount, "
                      "ts or payload",
                      cols[i]);
        }
        cfg.columns |= 1u << bit;
      }
    }
    b->is_bounded = cfg.count != 0;
    pl->is_unbounded = cfg.count == 0;
    const sl_source_vt_t *vt;
    void *ctx;
    sl_schema_t *schema;
    rc = sl_gen_source_create(&cfg, &vt, &ctx, &schema, &err);
    if (rc != SL_OK) {
      FAIL(pl, src, "source", "%s", sl_error_message(err));
      sl_error_destroy(err);
      return rc;
    }
    b->s = sl_job_source(b->job, uid, vt, ctx, schema);
    sl_schema_unref(schema);
  } else if (type == 2) {
    if ((rc = build_kafka_source(b, src, &uid, &par)) != SL_OK) return rc;
  } else if (type == 3) {
    if ((rc = build_cdc_source(b, src, &uid, &par)) != SL_OK) return rc;
  } else if (type == 4) {
    if ((rc = build_pgcdc_source(b, src, &uid, &par)) != SL_OK) return rc;
  } else {
    static const char *keys[] = {"type", "uid", "parallelism", "path",
                                 "format", "header", "delimiter", "schema",
                                 "watermarks", "monitor_interval", NULL};
    if ((rc = check_keys(pl, src, "source", keys)) != SL_OK) return rc;
    sl_file_source_config_t cfg = {0};
    int fmt = 0;
    static const char *fmts[] = {"csv", "json", NULL};
    const char *paths[256];
    uint32_t n_paths = 0;
    int pv = map_get(pl, src, "path", NULL);
    if (pv == 0) return FAIL(pl, src, "source", "missing required field 'path'");
    b->src_paths = pv;
    if ((rc = str_list(pl, pv, "source.path", paths, 256, &n_paths)) ||
        (rc = get_str(pl, src, "source", "uid", false, &uid)) ||
        (rc = get_u32(pl, src, "source", "parallelism", 1, SL_MAX_PARALLELISM_LIMIT, &par)) ||
        (rc = get_enum(pl, src, "source", "format", fmts, &fmt)) ||
        (rc = get_bool(pl, src, "source", "header", &cfg.csv_header)) ||
        (rc = get_delim(pl, src, "source", &cfg.csv_delimiter)) ||
        (rc = get_duration_ms(pl, src, "source", "monitor_interval",
                              &cfg.monitor_interval_ms)))
      return rc;
    int sv = map_get(pl, src, "schema", NULL);
    if (sv == 0) return FAIL(pl, src, "source", "missing required field 'schema'");
    sl_schema_t *schema;
    if ((rc = parse_schema(pl, sv, "source.schema", &schema)) != SL_OK) return rc;
    cfg.paths = paths;
    cfg.n_paths = n_paths;
    cfg.format = fmt ? SL_FORMAT_JSON : SL_FORMAT_CSV;
    cfg.schema = schema;
    const sl_source_vt_t *vt;
    void *ctx;
    rc = sl_file_source_create(&cfg, &vt, &ctx, &err);
    if (rc != SL_OK) {
      sl_schema_unref(schema);
      FAIL(pl, src, "source", "%s", sl_error_message(err));
      sl_error_destroy(err);
      return rc;
    }
    /* Monitoring a directory never ends: new files keep coming. */
    b->is_bounded = cfg.monitor_interval_ms == 0;
    pl->is_unbounded = cfg.monitor_interval_ms > 0;
    b->s = sl_job_source(b->job, uid, vt, ctx, schema);
    sl_schema_unref(schema);
  }
  if (b->s == NULL) return job_error(b, src, "source");
  if ((rc = build_watermarks(b, src)) != SL_OK) return rc;
  if (par) sl_stream_set_parallelism(b->s, par);
  b->schema = sl_stream_schema(b->s);
  return SL_OK;
}

/* Report an expression error at its position inside the YAML scalar. */
static int expr_error(build_t *b, int idx, const char *field, uint32_t col,
                      const sl_error_t *err) {
  sl_pipeline_t *pl = b->pl;
  const char *msg = sl_error_message(err);
  /* The compiler's messages start with "column N: "; we give the position. */
  if (strncmp(msg, "column ", 7) == 0) {
    const char *c = strchr(msg, ':');
    if (c && c[1] == ' ') msg = c + 2;
  }
  yaml_node_t *n = node(pl, idx);
  if (col > 0 && n && idx <= pl->n_file_nodes &&
      n->start_mark.line == n->end_mark.line) {
    int quote = n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    return fail_at(pl, idx, 0, (int)(n->start_mark.column + 1 + quote + col - 1),
                   field, "%s", msg);
  }
  if (col > 0) return FAIL(pl, idx, field, "column %u of the expression: %s", col, msg);
  return FAIL(pl, idx, field, "%s", msg);
}

static int compile(build_t *b, int idx, const char *field, sl_expr_t **out) {
  const char *text = scalar(b->pl, idx);
  if (text == NULL)
    return FAIL(b->pl, idx, field, "expected an expression, got %s",
                type_word(b->pl, idx));
  uint32_t col = 0;
  sl_error_t *err = NULL;
  int rc = sl_expr_compile(text, b->schema, out, &col, &err);
  if (rc != SL_OK) {
    expr_error(b, idx, field, col, err);
    sl_error_destroy(err);
  }
  return rc;
}

static int parse_agg(build_t *b, int idx, const char *field, sl_agg_t *out) {
  const char *s = scalar(b->pl, idx);
  if (s == NULL)
    return FAIL(b->pl, idx, field, "expected a function such as sum(amount)");
  static const struct {
    const char *name;
    sl_agg_fn_t fn;
  } fns[] = {{"count", SL_AGG_COUNT}, {"sum", SL_AGG_SUM},
             {"min", SL_AGG_MIN},     {"max", SL_AGG_MAX},
             {"avg", SL_AGG_AVG}};
  const char *lp = strchr(s, '(');
  const char *rp = strrchr(s, ')');
  if (lp == NULL || rp == NULL || rp < lp || rp[1] != '\0')
    return FAIL(b->pl, idx, field,
                "expected count(), count(f), sum(f), min(f), max(f) or "
                "avg(f), got '%s'",
                s);
  size_t nl = (size_t)(lp - s);
  out->fn = 0;
  for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
    if (strlen(fns[i].name) == nl && strncmp(s, fns[i].name, nl) == 0)
      out->fn = fns[i].fn;
  if (out->fn == 0)
    return FAIL(b->pl, idx, field,
                "unknown function '%.*s'; expected count, sum, min, max or avg",
                (int)nl, s);
  const char *a = lp + 1;
  while (a < rp && isspace((unsigned char)*a)) a++;
  const char *e = rp;
  while (e > a && isspace((unsigned char)e[-1])) e--;
  out->field = NULL;
  if (e > a) {
    char *f = sl_strndup(a, (size_t)(e - a));
    if (f == NULL) return SL_ENOMEM;
    if (sl_schema_index(b->schema, f) < 0) {
      int rc = FAIL(b->pl, idx, field, "no field '%s' in the input", f);
      sl_free(f);
      return rc;
    }
    out->field = f;
  } else if (out->fn != SL_AGG_COUNT) {
    return FAIL(b->pl, idx, field, "%.*s() needs a field", (int)nl, s);
  }
  return SL_OK;
}

/* key: [FIELDS] of an aggregate or a window, each a field of the input. */
static int parse_key(build_t *b, int map, const char *path,
                     const char **out, uint32_t *out_n) {
  sl_pipeline_t *pl = b->pl;
  int kv = map_get(pl, map, "key", NULL);
  if (kv == 0) return FAIL(pl, map, path, "missing required field 'key'");
  char kf[300];
  join_path(kf, sizeof(kf), path, "key");
  uint32_t n = 0;
  int rc = str_list(pl, kv, kf, out, 64, &n);
  if (rc != SL_OK) return rc;
  for (uint32_t i = 0; i < n; i++)
    if (sl_schema_index(b->schema, out[i]) < 0)
      return FAIL(pl, kv, kf, "no field '%s' in the input", out[i]);
  *out_n = n;
  return SL_OK;
}

static void free_aggs(sl_agg_t *aggs, uint32_t n) {
  if (aggs == NULL) return;
  for (uint32_t i = 0; i < n; i++) sl_free((char *)aggs[i].field);
  sl_free(aggs);
}

/* values: {NAME: FN, ...} of an aggregate or a window; the caller frees
 * *out_aggs with free_aggs(). */
static int parse_values(build_t *b, int map, const char *path,
                        sl_agg_t **out_aggs, uint32_t *out_n) {
  sl_pipeline_t *pl = b->pl;
  int vv = map_get(pl, map, "values", NULL);
  char vf[300];
  join_path(vf, sizeof(vf), path, "values");
  if (vv == 0) return FAIL(pl, map, path, "missing required field 'values'");
  yaml_node_t *vm = node(pl, vv);
  if (vm->type != YAML_MAPPING_NODE)
    return FAIL(pl, vv, vf, "expected a mapping such as 'total: sum(amount)'");
  uint32_t count = (uint32_t)(vm->data.mapping.pairs.top - vm->data.mapping.pairs.start);
  if (count == 0) return FAIL(pl, vv, vf, "needs at least one value");
  sl_agg_t *aggs = sl_calloc(count, sizeof(sl_agg_t));
  if (aggs == NULL) return SL_ENOMEM;
  int rc = SL_OK;
  for (uint32_t i = 0; i < count && rc == SL_OK; i++) {
    yaml_node_pair_t p = node(pl, vv)->data.mapping.pairs.start[i];
    aggs[i].name = scalar(pl, p.key);
    char ff[400];
    join_path(ff, sizeof(ff), vf, aggs[i].name ? aggs[i].name : "?");
    rc = parse_agg(b, p.value, ff, &aggs[i]);
  }
  if (rc != SL_OK) {
    free_aggs(aggs, count);
    return rc;
  }
  *out_aggs = aggs;
  *out_n = count;
  return SL_OK;
}

static int build_sink(build_t *b, int snk, const char *path, const char *uid,
                      sl_stream_t *in);

/* A window duration that must be > 0 when given. */
static int get_window_duration(sl_pipeline_t *pl, int wv, const char *path,
                               const char *key, int64_t *out_us) {
  int64_t us = *out_us;
  int rc = get_duration(pl, wv, path, key, &us);
  if (rc != SL_OK) return rc;
  int v = map_get(pl, wv, key, NULL);
  if (v && us <= 0) {
    char f[300];
    join_path(f, sizeof(f), path, key);
    return FAIL(pl, v, f, "must be greater than 0");
  }
  *out_us = us;
  return SL_OK;
}

/*
 * window: a windowed aggregate in event time (docs/pipeline.md).  The
 * source must have watermarks, or no window would ever fire before the
 * end of the input.  late_sink takes the rows that come after their
 * window was cleaned up.
 */
static int build_window(build_t *b, int wv, const char *f, const char *uid) {
  sl_pipeline_t *pl = b->pl;
  static const char *keys[] = {"type", "time_field", "size", "slide", "gap",
                               "step", "offset", "allowed_lateness", "key",
                               "values", "late_sink", NULL};
  int rc = check_keys(pl, wv, f, keys);
  if (rc != SL_OK) return rc;
  if (!b->has_watermarks)
    return FAIL(pl, wv, f, "a window needs event time: give the source a "
                "'watermarks' section with a time_field");
  static const char *types[] = {"tumbling", "sliding", "session", "cumulate",
                                NULL};
  int type = -1;
  if ((rc = get_enum(pl, wv, f, "type", types, &type)) != SL_OK) return rc;
  if (type < 0) return FAIL(pl, wv, f, "missing required field 'type'");
  /* Fields of other kinds of window, and required ones (bit: type). */
  static const struct {
    const char *key;
    unsigned allowed, required;
    const char *msg;
  } fields[] = {
      {"size", 11, 11, "a session window has no size; it ends after a gap "
                       "without rows"},
      {"slide", 2, 2, "only a sliding window has a slide; a tumbling window "
                      "moves by its size"},
      {"gap", 4, 4, "only a session window has a gap"},
      {"step", 8, 8, "only a cumulate window has a step"},
      {"offset", 11, 0, "a session window has no offset"},
  };
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
    int kidx = 0;
    bool is_given = map_get(pl, wv, fields[i].key, &kidx) != 0;
    if (is_given && !(fields[i].allowed & (1u << type))) {
      char ff[300];
      join_path(ff, sizeof(ff), f, fields[i].key);
      return FAIL(pl, kidx, ff, "%s", fields[i].msg);
    }
    if (!is_given && (fields[i].required & (1u << type)))
      return FAIL(pl, wv, f, "missing required field '%s' for a %s window",
                  fields[i].key, types[type]);
  }
  sl_window_spec_t spec;
  sl_window_spec_init(&spec);
  spec.kind = type == 0   ? SL_WINDOW_TUMBLING
              : type == 1 ? SL_WINDOW_SLIDING
              : type == 2 ? SL_WINDOW_SESSION
                          : SL_WINDOW_CUMULATE;
  if ((rc = get_str(pl, wv, f, "time_field", true, &spec.time_field)) ||
      (rc = get_window_duration(pl, wv, f, "size", &spec.size_us)) ||
      (rc = get_window_duration(pl, wv, f, "slide", &spec.slide_us)) ||
      (rc = get_window_duration(pl, wv, f, "gap", &spec.gap_us)) ||
      (rc = get_window_duration(pl, wv, f, "step", &spec.step_us)) ||
      (rc = get_duration(pl, wv, f, "offset", &spec.offset_us)) ||
      (rc = get_duration(pl, wv, f, "allowed_lateness",
                         &spec.allowed_lateness_us)))
    return rc;
  char tf[300];
  join_path(tf, sizeof(tf), f, "time_field");
  if ((rc = check_time_field(pl, map_get(pl, wv, "time_field", NULL), tf,
                             b->schema, spec.time_field, "input")) != SL_OK)
    return rc;
  if (type == 3 && spec.size_us % spec.step_us != 0) {
    char sf[300];
    join_path(sf, sizeof(sf), f, "step");
    return FAIL(pl, map_get(pl, wv, "step", NULL), sf,
                "must divide the size: a cumulate window grows by its step "
                "up to its size");
  }
  int64_t period = type == 1 ? spec.slide_us : spec.size_us;
  if (type != 2 && spec.offset_us >= period) {
    char of[300];
    join_path(of, sizeof(of), f, "offset");
    return FAIL(pl, map_get(pl, wv, "offset", NULL), of,
                "must be less than the window's %s",
                type == 1 ? "slide" : "size");
  }
  const char *key_fields[64];
  uint32_t n_keys = 0, n_aggs = 0;
  sl_agg_t *aggs = NULL;
  if ((rc = parse_key(b, wv, f, key_fields, &n_keys)) ||
      (rc = parse_values(b, wv, f, &aggs, &n_aggs)))
    return rc;
  /* Window accumulators are fixed-width: min and max of text are refused
   * here, at the value, rather than by the engine at the window. */
  int vv = map_get(pl, wv, "values", NULL);
  for (uint32_t i = 0; i < n_aggs; i++) {
    if (aggs[i].fn != SL_AGG_MIN && aggs[i].fn != SL_AGG_MAX) continue;
    int fi = sl_schema_index(b->schema, aggs[i].field);
    uint8_t t = sl_schema_field(b->schema, (uint32_t)fi)->type.id;
    if (t != SL_TYPE_STRING && t != SL_TYPE_BYTES) continue;
    char vf[400];
    snprintf(vf, sizeof(vf), "%s.values.%s", f,
             aggs[i].name ? aggs[i].name : "?");
    int av = node(pl, vv)->data.mapping.pairs.start[i].value;
    rc = FAIL(pl, av, vf, "%s over a window takes numeric, bool or "
              "timestamp fields, not %s", scalar(pl, av),
              sl_type_name((sl_type_id_t)t));
    free_aggs(aggs, n_aggs);
    return rc;
  }
  if (uid == NULL) uid = "window";
  sl_stream_t *k = sl_stream_key_by_fields(b->s, key_fields, n_keys);
  sl_stream_t *w = sl_stream_window_aggregate(k, uid, &spec, aggs, n_aggs);
  free_aggs(aggs, n_aggs);
  if (w == NULL) return job_error(b, wv, f);
  int lv = map_get(pl, wv, "late_sink", NULL);
  if (lv) {
    char lf[300], luid[300];
    join_path(lf, sizeof(lf), f, "late_sink");
    snprintf(luid, sizeof(luid), "%s-late", uid);
    sl_stream_t *late = sl_stream_late_rows(w);
    if (late == NULL) return job_error(b, lv, lf);
    if ((rc = build_sink(b, lv, lf, luid, late)) != SL_OK) return rc;
  }
  b->s = w;
  return SL_OK;
}

static int build_transform(build_t *b, int t, const char *path) {
  sl_pipeline_t *pl = b->pl;
  yaml_node_t *n = node(pl, t);
  if (n == NULL || n->type != YAML_MAPPING_NODE)
    return FAIL(pl, t, path, "expected a mapping such as 'filter: ...', got %s",
                type_word(pl, t));
  int fk = 0, pk = 0, ak = 0, wk = 0;
  int fv = map_get(pl, t, "filter", &fk), pv = map_get(pl, t, "project", &pk),
      av = map_get(pl, t, "aggregate", &ak), wv = map_get(pl, t, "window", &wk);
  int n_kinds = (fv != 0) + (pv != 0) + (av != 0) + (wv != 0);
  if (n_kinds != 1)
    return FAIL(pl, t, path,
                n_kinds ? "give exactly one of filter, project, aggregate, "
                          "window"
                        : "missing the transform: filter, project, aggregate "
                          "or window");
  static const char *keys[] = {"filter", "project", "aggregate", "window",
                               "uid", "parallelism", NULL};
  int rc = check_keys(pl, t, path, keys);
  if (rc != SL_OK) return rc;
  const char *uid = NULL;
  uint32_t par = 0;
  if ((rc = get_str(pl, t, path, "uid", false, &uid)) ||
      (rc = get_u32(pl, t, path, "parallelism", 1, SL_MAX_PARALLELISM_LIMIT, &par)))
    return rc;
  char f[256];
  if (fv) {
    join_path(f, sizeof(f), path, "filter");
    sl_expr_t *e;
    if ((rc = compile(b, fv, f, &e)) != SL_OK) return rc;
    sl_type_t rt = sl_expr_result_type(e);
    if (rt.id != SL_TYPE_BOOL) {
      sl_expr_destroy(e);
      return FAIL(pl, fv, f, "a filter condition must be bool, got %s",
                  sl_type_name((sl_type_id_t)rt.id));
    }
    b->s = sl_stream_filter_expr(b->s, uid, e);
    if (b->s == NULL) return job_error(b, fv, f);
    if ((par ? par : b->parallelism) !=
        (b->keyed_par ? b->keyed_par : b->parallelism))
      b->n_keyed = 0;
  } else if (pv) {
    join_path(f, sizeof(f), path, "project");
    yaml_node_t *m = node(pl, pv);
    if (m == NULL || m->type != YAML_MAPPING_NODE)
      return FAIL(pl, pv, f, "expected a mapping of output names to "
                  "expressions, got %s", type_word(pl, pv));
    uint32_t count = (uint32_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
    if (count == 0) return FAIL(pl, pv, f, "needs at least one field");
    const char **names = sl_calloc(count, sizeof(char *));
    sl_expr_t **exprs = sl_calloc(count, sizeof(sl_expr_t *));
    if (names == NULL || exprs == NULL) {
      sl_free(names);
      sl_free(exprs);
      return SL_ENOMEM;
    }
    uint32_t done = 0;
    for (; done < count; done++) {
      yaml_node_pair_t p = node(pl, pv)->data.mapping.pairs.start[done];
      names[done] = scalar(pl, p.key);
      char ff[300];
      join_path(ff, sizeof(ff), f, names[done] ? names[done] : "?");
      if (names[done] == NULL) {
        rc = FAIL(pl, p.key, f, "output names must be scalars");
        break;
      }
      if ((rc = compile(b, p.value, ff, &exprs[done])) != SL_OK) break;
    }
    if (rc != SL_OK) {
      for (uint32_t i = 0; i < done; i++) sl_expr_destroy(exprs[i]);
    } else {
      b->s = sl_stream_project(b->s, uid, names, exprs, count);
      if (b->s == NULL) rc = job_error(b, pv, f);
      b->n_keyed = 0; /* it may rename or drop the key */
    }
    sl_free(names);
    sl_free(exprs);
    if (rc != SL_OK) return rc;
  } else if (av) {
    join_path(f, sizeof(f), path, "aggregate");
    static const char *akeys[] = {"key", "values", "emit", NULL};
    if ((rc = check_keys(pl, av, f, akeys)) != SL_OK) return rc;
    const char *key_fields[64];
    uint32_t n_keys = 0;
    if ((rc = parse_key(b, av, f, key_fields, &n_keys)) != SL_OK) return rc;
    static const char *emits[] = {"updates", "final", NULL};
    int emit = 0;
    if ((rc = get_enum(pl, av, f, "emit", emits, &emit)) != SL_OK) return rc;
    if (emit == 1 && !b->is_bounded) {
      char ef[300];
      join_path(ef, sizeof(ef), f, "emit");
      return FAIL(pl, map_get(pl, av, "emit", NULL), ef,
                  "'final' needs a bounded source (set source.count)");
    }
    sl_agg_t *aggs = NULL;
    uint32_t count = 0;
    if ((rc = parse_values(b, av, f, &aggs, &count)) != SL_OK) return rc;
    sl_stream_t *k = sl_stream_key_by_fields(b->s, key_fields, n_keys);
    b->s = sl_stream_aggregate(k, uid ? uid : "aggregate", aggs, count,
                               emit ? SL_AGG_EMIT_FINAL : SL_AGG_EMIT_UPDATES);
    free_aggs(aggs, count);
    if (b->s == NULL) return job_error(b, av, f);
    for (uint32_t i = 0; i < n_keys; i++) b->keyed[i] = key_fields[i];
    b->n_keyed = n_keys;
    b->keyed_par = par;
  } else {
    join_path(f, sizeof(f), path, "window");
    if ((rc = build_window(b, wv, f, uid)) != SL_OK) return rc;
    b->n_keyed = 0;
  }
  if (par) sl_stream_set_parallelism(b->s, par);
  b->schema = sl_stream_schema(b->s);
  return SL_OK;
}

/*
 * Options a sink of this type and format would not use are refused, never
 * ignored: a null sink writes nothing, and JSON has no header or delimiter.
 * type: 0 file, 1 stdout, 2 null; fmt: 0 csv, 1 json.
 */
static int check_sink_options(sl_pipeline_t *pl, int snk, const char *path,
                              int type, int fmt) {
  static const char *csv_only[] = {"header", "delimiter", NULL};
  static const char *writes[] = {"format", "header", "delimiter", "changelog",
                                 NULL};
  const char *const *keys = type == 2 ? writes : fmt == 1 ? csv_only : NULL;
  for (uint32_t i = 0; keys && keys[i]; i++) {
    int v = map_get(pl, snk, keys[i], NULL);
    if (v == 0) continue;
    char f[300];
    join_path(f, sizeof(f), path, keys[i]);
    return FAIL(pl, v, f, type == 2 ? "a null sink writes nothing, so it has "
                "no '%s'" : "only a CSV sink has a '%s' (format is json)",
                keys[i]);
  }
  return SL_OK;
}

/*
 * Is out (a file the sink would truncate) the input file in (1), or in the
 * input directory in (2), or neither (0)?  Compared by device and inode, so
 * links and other spellings of a path are caught; a file that does not
 * exist yet is no input file.
 */
static int is_input_file(const char *out, const char *in) {
  struct stat si, so;
  if (stat(in, &si) != 0) return 0;
  if (!S_ISDIR(si.st_mode))
    return stat(out, &so) == 0 && so.st_dev == si.st_dev &&
           so.st_ino == si.st_ino;
  char dir[4096];
  const char *slash = strrchr(out, '/');
  if (slash == NULL) snprintf(dir, sizeof(dir), ".");
  else if (slash == out) snprintf(dir, sizeof(dir), "/");
  else snprintf(dir, sizeof(dir), "%.*s", (int)(slash - out), out);
  return stat(dir, &so) == 0 && so.st_dev == si.st_dev &&
                 so.st_ino == si.st_ino
             ? 2
             : 0;
}

/*
 * A file sink must not write a file the file source reads: the sink
 * truncates it before the source gets to it (issue 12: the input ended up
 * empty, exit 0).  par is the sink's parallelism; at par > 1 the files are
 * "<stem>-<i><ext>", named as file_sink.c names them.
 */
static int check_sink_path(build_t *b, int snk, const char *path,
                           const char *out_path, uint32_t par) {
  sl_pipeline_t *pl = b->pl;
  const char *ins[256];
  uint32_t n_ins = 0;
  if (b->src_paths == 0 ||
      str_list(pl, b->src_paths, "source.path", ins, 256, &n_ins) != SL_OK)
    return SL_OK;
  const char *slash = strrchr(out_path, '/');
  const char *dot = strrchr(out_path, '.');
  if (dot == NULL || (slash && dot < slash) || dot == out_path ||
      (slash && dot == slash + 1))
    dot = out_path + strlen(out_path);
  for (uint32_t i = 0; i < par; i++) {
    char out[4096];
    if (par == 1)
      snprintf(out, sizeof(out), "%s", out_path);
    else
      snprintf(out, sizeof(out), "%.*s-%u%s", (int)(dot - out_path), out_path,
               i, dot);
    for (uint32_t k = 0; k < n_ins; k++) {
      int is_in = is_input_file(out, ins[k]);
      if (is_in == 0) continue;
      char f[300];
      join_path(f, sizeof(f), path, "path");
      return FAIL(pl, map_get(pl, snk, "path", NULL), f,
                  "output file '%s' is %s '%s' of the source; writing it "
                  "would destroy the input", out,
                  is_in == 1 ? "the input file" : "in the input directory",
                  ins[k]);
    }
  }
  return SL_OK;
}

/*
 * The stream an upsert sink with a key reads (docs/pipeline.md, "Sink
 * parallelism and keys"): in keyed by the sink's key, so that all rows of
 * one key go to one sink subtask in order, unless they already do: in
 * comes from an aggregate keyed by some of the key's fields at the sink's
 * parallelism, and stays forward.  A round-robin edge (what a different
 * parallelism gives otherwise) would send one key's rows to several
 * subtasks: an older update could overwrite a newer one, and exactly-once
 * subtasks would wait for each other's prepared row locks.
 */
static sl_stream_t *upsert_input(build_t *b, sl_stream_t *in,
                                 const char *const *key, uint32_t n_key,
                                 uint32_t par) {
  if (n_key == 0) return in;
  bool is_keyed = in == b->s && b->n_keyed > 0 &&
                  (par ? par : b->parallelism) ==
                      (b->keyed_par ? b->keyed_par : b->parallelism);
  for (uint32_t i = 0; is_keyed && i < b->n_keyed; i++) {
    bool found = false;
    for (uint32_t k = 0; k < n_key && !found; k++)
      found = strcmp(b->keyed[i], key[k]) == 0;
    is_keyed = found;
  }
  return is_keyed ? in : sl_stream_key_by_fields(in, key, n_key);
}

/*
 * connect_timeout of the database sinks: a duration of 1ms to 1h (the
 * same key and form for postgres and mariadb), in milliseconds; *out_ms
 * is left alone when the key is absent.
 */
static int get_connect_timeout(sl_pipeline_t *pl, int snk, const char *path,
                               int64_t *out_ms) {
  int rc = get_duration_ms(pl, snk, path, "connect_timeout", out_ms);
  if (rc != SL_OK) return rc;
  if (*out_ms > 3600000) {
    char f[256];
    join_path(f, sizeof(f), path, "connect_timeout");
    int v = map_get(pl, snk, "connect_timeout", NULL);
    return FAIL(pl, v, f, "must be at most 1h, got '%s'", scalar(pl, v));
  }
  return SL_OK;
}

/*
 * sink: {type: mariadb, ...} (docs/pipeline.md).  Checked without
 * connecting: the settings, and that the XA transaction id of an
 * exactly-once sink ("sl/<job name>/<sink uid>") fits MariaDB's 64 bytes.
 * The password comes from the file (password) or, better, from an
 * environment variable (password_env).
 */
/*
 * A route's sink (routes:): the route's table and key (when it has one)
 * instead of the sink mapping's, and the uid "<sink uid>-<route uid>".
 * The sink mapping must not name a table of its own.
 */
static int route_sink(build_t *b, int snk, const char *path,
                      const char **uid, const char **table, const char **key,
                      uint32_t *n_key, int *key_node) {
  if (b->route_uid == NULL) return SL_OK;
  int tv = map_get(b->pl, snk, "table", NULL);
  if (tv) {
    char f[300];
    join_path(f, sizeof(f), path, "table");
    return FAIL(b->pl, tv, f, "with 'routes', each route names its sink "
                "table (routes[N].table), not the sink");
  }
  *table = b->route_table;
  if (b->n_route_key) {
    memcpy(key, b->route_key, b->n_route_key * sizeof(key[0]));
    *n_key = b->n_route_key;
    *key_node = b->route_key_node;
  }
  snprintf(b->route_snk_uid, sizeof(b->route_snk_uid), "%s-%s", *uid,
           b->route_uid);
  *uid = b->route_snk_uid;
  return SL_OK;
}

static int build_mariadb_sink(build_t *b, int snk, const char *path,
                              const char *uid, sl_stream_t *in) {
  sl_pipeline_t *pl = b->pl;
  static const char *keys[] = {"type", "uid", "parallelism", "host", "port",
                               "user", "password", "password_env",
                               "database", "table", "key", "mode",
                               "delivery", "batch_size", "commit_table",
                               "fence_table", "epoch_column",
                               "connect_timeout", NULL};
  int rc = check_keys(pl, snk, path, keys);
  if (rc != SL_OK) return rc;
  sl_mariadb_sink_config_t cfg;
  sl_mariadb_sink_config_init(&cfg);
  uint32_t par = 0, port = SL_MARIADB_DEFAULT_PORT;
  const char *pw_env = NULL;
  int mode = 1, delivery = 0;
  int64_t connect_ms = 0;
  static const char *modes[] = {"insert", "upsert", NULL};
  static const char *deliveries[] = {"exactly-once", "at-least-once", NULL};
  if ((rc = get_str(pl, snk, path, "uid", false, &uid)) ||
      (rc = get_u32(pl, snk, path, "parallelism", 1, SL_MAX_PARALLELISM_LIMIT,
                    &par)) ||
      (rc = get_str(pl, snk, path, "host", true, &cfg.host)) ||
      (rc = get_u32(pl, snk, path, "port", 1, 65535, &port)) ||
      (rc = get_str(pl, snk, path, "user", true, &cfg.user)) ||
      (rc = get_str(pl, snk, path, "password", false, &cfg.password)) ||
      (rc = get_str(pl, snk, path, "password_env", false, &pw_env)) ||
      (rc = get_str(pl, snk, path, "database", true, &cfg.database)) ||
      (rc = get_str(pl, snk, path, "table", b->route_uid == NULL,
                    &cfg.table)) ||
      (rc = get_enum(pl, snk, path, "mode", modes, &mode)) ||
      (rc = get_enum(pl, snk, path, "delivery", deliveries, &delivery)) ||
      (rc = get_u32(pl, snk, path, "batch_size", 1, 100000,
                    &cfg.batch_rows)) ||
      (rc = get_str(pl, snk, path, "commit_table", false,
                    &cfg.commit_table)) ||
      (rc = get_str(pl, snk, path, "fence_table", false,
                    &cfg.fence_table)) ||
      (rc = get_str(pl, snk, path, "epoch_column", false,
                    &cfg.epoch_column)) ||
      (rc = get_connect_timeout(pl, snk, path, &connect_ms)))
    return rc;
  cfg.connect_timeout_ms = (uint32_t)connect_ms; /* 0: the default */
  char f[300];
  if (cfg.password != NULL && pw_env != NULL) {
    join_path(f, sizeof(f), path, "password_env");
    return FAIL(pl, map_get(pl, snk, "password_env", NULL), f,
                "give either password or password_env, not both");
  }
  if (pw_env != NULL) {
    cfg.password = getenv(pw_env);
    if (cfg.password == NULL) {
      join_path(f, sizeof(f), path, "password_env");
      return FAIL(pl, map_get(pl, snk, "password_env", NULL), f,
                  "environment variable %s is not set", pw_env);
    }
  }
  const char *key[32];
  uint32_t n_key = 0;
  int kv = map_get(pl, snk, "key", NULL);
  if (kv) {
    join_path(f, sizeof(f), path, "key");
    if ((rc = str_list(pl, kv, f, key, 32, &n_key)) != SL_OK) return rc;
  }
  if ((rc = route_sink(b, snk, path, &uid, &cfg.table, key, &n_key, &kv)) !=
      SL_OK)
    return rc;
  cfg.port = (int)port;
  cfg.key = key;
  cfg.n_key = n_key;
  cfg.mode = mode == 0 ? SL_MARIADB_INSERT : SL_MARIADB_UPSERT;
  cfg.delivery =
      delivery == 0 ? SL_DELIVERY_EXACTLY_ONCE : SL_DELIVERY_AT_LEAST_ONCE;
  /* Exactly-once commits at completed checkpoints: the job needs them.
   * delivery defaults to exactly-once here, so the message says what to
   * set either way. */
  if (cfg.delivery == SL_DELIVERY_EXACTLY_ONCE && !b->has_ckpt_dir) {
    join_path(f, sizeof(f), path, "delivery");
    int dv = map_get(pl, snk, "delivery", NULL);
    return FAIL(pl, dv ? dv : snk, f, "exactly-once (the default of a "
                "mariadb sink) commits when a checkpoint completes, and "
                "this pipeline has no 'checkpoint: {dir: ...}', so nothing "
                "would ever be committed; add one or set 'delivery: "
                "at-least-once'");
  }
  /* The xid's gtrid: "sl/" + job name + "/" + uid. */
  size_t gl = 3 + strlen(sl_pipeline_name(pl)) + 1 + strlen(uid);
  if (cfg.delivery == SL_DELIVERY_EXACTLY_ONCE && gl > 64) {
    join_path(f, sizeof(f), path, "uid");
    return FAIL(pl, snk, f, "the XA transaction id \"sl/%s/%s\" is %zu "
                "bytes; MariaDB allows 64: shorten the pipeline's name or "
                "the sink uid", sl_pipeline_name(pl), uid, gl);
  }
  const sl_sink_vt_t *vt;
  void *ctx;
  sl_error_t *err = NULL;
  if (b->is_connect &&
      (rc = sl_mariadb_sink_check(&cfg, sl_stream_schema(in), &err)) !=
          SL_OK) {
    FAIL(pl, snk, path, "%s", err ? sl_error_message(err) : sl_strerror(rc));
    sl_error_destroy(err);
    return rc;
  }
  for (uint32_t k = 0; k < n_key; k++)
    if (sl_schema_index(sl_stream_schema(in), key[k]) < 0) {
      join_path(f, sizeof(f), path, "key");
      return FAIL(pl, kv, f, "no column '%s' in the rows the sink gets",
                  key[k]);
    }
  rc = sl_mariadb_sink_create(&cfg, &vt, &ctx, &err);
  if (rc != SL_OK) {
    FAIL(pl, snk, path, "%s", err ? sl_error_message(err) : sl_strerror(rc));
    sl_error_destroy(err);
    return rc;
  }
  rc = sl_stream_sink(cfg.mode == SL_MARIADB_UPSERT
                          ? upsert_input(b, in, key, n_key, par)
                          : in,
                      uid, vt, ctx);
  if (rc != SL_OK) return job_error(b, snk, path);
  if (par) sl_stream_set_sink_parallelism(in, par);
  return SL_OK;
}

static int get_i64_ms(sl_pipeline_t *pl, int map, const char *path,
                      const char *key, int64_t *out);

/*
 * delivery, and the options of an exactly-once file sink (docs/pipeline.md):
 * roll_size, roll_interval_ms, bucket_by (field, date, hour), bucket_field.
 * Exactly-once commits when checkpoints complete, so it needs a checkpoint
 * directory; the options of exactly-once are refused without it.
 */
static int get_delivery(build_t *b, int snk, const char *path, int type,
                        sl_file_sink_config_t *cfg) {
  sl_pipeline_t *pl = b->pl;
  static const char *deliveries[] = {"at-least-once", "exactly-once", NULL};
  static const char *buckets[] = {"field", "date", "hour", NULL};
  int d = 0, by = -1;
  char f[300];
  int rc = get_enum(pl, snk, path, "delivery", deliveries, &d);
  if (rc != SL_OK) return rc;
  int dv = map_get(pl, snk, "delivery", NULL);
  join_path(f, sizeof(f), path, "delivery");
  if (dv && type != 0)
    return FAIL(pl, dv, f, "only a file sink has a 'delivery' (stdout and "
                "null sinks cannot take back what they wrote)");
  static const char *eo_only[] = {"roll_size", "roll_interval_ms", "bucket_by",
                                  "bucket_field", NULL};
  for (uint32_t i = 0; d == 0 && eo_only[i]; i++) {
    int v = map_get(pl, snk, eo_only[i], NULL);
    if (v == 0) continue;
    join_path(f, sizeof(f), path, eo_only[i]);
    return FAIL(pl, v, f, "'%s' is an option of 'delivery: exactly-once'",
                eo_only[i]);
  }
  if (d == 0) return SL_OK;
  if (!b->has_ckpt_dir)
    return FAIL(pl, dv, f, "'delivery: exactly-once' commits the output "
                "when a checkpoint completes, and this pipeline has no "
                "'checkpoint: {dir: ...}', so nothing would ever be "
                "committed; add a checkpoint section or use "
                "'delivery: at-least-once'");
  cfg->delivery = SL_DELIVERY_EXACTLY_ONCE;
  const char *field = NULL;
  if ((rc = get_u64(pl, snk, path, "roll_size", UINT64_MAX, &cfg->roll_size)) ||
      (rc = get_i64_ms(pl, snk, path, "roll_interval_ms",
                       &cfg->roll_interval_ms)) ||
      (rc = get_enum(pl, snk, path, "bucket_by", buckets, &by)) ||
      (rc = get_str(pl, snk, path, "bucket_field", by >= 0, &field)))
    return rc;
  if (field && by < 0) {
    join_path(f, sizeof(f), path, "bucket_field");
    return FAIL(pl, map_get(pl, snk, "bucket_field", NULL), f,
                "'bucket_field' needs 'bucket_by: field|date|hour'");
  }
  if (by >= 0) {
    int idx = sl_schema_index(b->schema, field);
    join_path(f, sizeof(f), path, "bucket_field");
    int fv = map_get(pl, snk, "bucket_field", NULL);
    if (idx < 0)
      return FAIL(pl, fv, f, "no column '%s' in the rows the sink gets",
                  field);
    if (by > 0 && sl_schema_field(b->schema, (uint32_t)idx)->type.id !=
                      SL_TYPE_TIMESTAMP)
      return FAIL(pl, fv, f, "'bucket_by: %s' needs a timestamp column; "
                  "'%s' is not one", buckets[by], field);
    cfg->bucket = (sl_file_bucket_t)(by + 1);
    cfg->bucket_field = field;
  }
  return SL_OK;
}

/* Append "key='value'" to a libpq conninfo, quoting as libpq wants. */
static int conninfo_add(sl_bytes_t *ci, const char *key, const char *val) {
  int rc = sl_bytes_printf(ci, "%s%s='", ci->len ? " " : "", key);
  for (const char *p = val; rc == SL_OK && *p; p++) {
    if (*p == '\\' || *p == '\'') rc = sl_bytes_append(ci, "\\", 1);
    if (rc == SL_OK) rc = sl_bytes_append(ci, p, 1);
  }
  if (rc == SL_OK) rc = sl_bytes_append(ci, "'", 1);
  return rc;
}

/*
 * sink: {type: postgres, ...} (docs/pipeline.md).  Checked without
 * connecting: the options, the key and version fields against the rows
 * the sink gets, a checkpoint dir for exactly-once.  The connection, the
 * table and the server settings are checked when the job starts, or by
 * sluice validate --connect (sl_pipeline_check_connect).
 */
static int build_pg_sink(build_t *b, int snk, const char *path,
                         const char *uid, sl_stream_t *in) {
  sl_pipeline_t *pl = b->pl;
  static const char *keys[] = {
      "type", "uid", "parallelism", "conninfo", "host", "port", "dbname",
      "user", "password", "sslmode", "table", "key", "mode", "delivery",
      "batch_size", "commit_table", "epoch_column", "version_field",
      "connect_timeout", "lock_timeout_ms", "fence_table", NULL};
  int rc = check_keys(pl, snk, path, keys);
  if (rc != SL_OK) return rc;
  static const char *modes[] = {"insert", "upsert", NULL};
  static const char *deliveries[] = {"exactly-once", "at-least-once", NULL};
  const char *conninfo = NULL, *table = NULL;
  const char *parts[6] = {NULL};
  static const char *part_keys[] = {"host", "port", "dbname", "user",
                                    "password", "sslmode"};
  uint32_t par = 0;
  int mode = 0, delivery = 0;
  int64_t connect_ms = 0;
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  const char *key_list[32];
  uint32_t n_key = 0;
  char f[300];
  if ((rc = get_str(pl, snk, path, "uid", false, &uid)) ||
      (rc = get_u32(pl, snk, path, "parallelism", 1, SL_MAX_PARALLELISM_LIMIT,
                    &par)) ||
      (rc = get_str(pl, snk, path, "conninfo", false, &conninfo)) ||
      (rc = get_str(pl, snk, path, "table", b->route_uid == NULL, &table)) ||
      (rc = get_enum(pl, snk, path, "mode", modes, &mode)) ||
      (rc = get_enum(pl, snk, path, "delivery", deliveries, &delivery)) ||
      (rc = get_u32(pl, snk, path, "batch_size", 1, 1000000,
                    &cfg.batch_size)) ||
      (rc = get_str(pl, snk, path, "commit_table", false,
                    &cfg.commit_table)) ||
      (rc = get_str(pl, snk, path, "epoch_column", false,
                    &cfg.epoch_column)) ||
      (rc = get_str(pl, snk, path, "version_field", false,
                    &cfg.version_field)) ||
      (rc = get_connect_timeout(pl, snk, path, &connect_ms)) ||
      (rc = get_u32(pl, snk, path, "lock_timeout_ms", 1, 3600000,
                    &cfg.lock_timeout_ms)) ||
      (rc = get_str(pl, snk, path, "fence_table", false, &cfg.fence_table)))
    return rc;
  /* libpq's connect_timeout is in whole seconds: rounded up. */
  cfg.connect_timeout_s = (uint32_t)((connect_ms + 999) / 1000);
  for (int i = 0; i < 6; i++)
    if ((rc = get_str(pl, snk, path, part_keys[i], false, &parts[i])))
      return rc;
  int kv = map_get(pl, snk, "key", NULL);
  if (kv && (rc = str_list(pl, kv, "sink.key", key_list, 32, &n_key)))
    return rc;
  if ((rc = route_sink(b, snk, path, &uid, &table, key_list, &n_key, &kv)) !=
      SL_OK)
    return rc;
  join_path(f, sizeof(f), path, "conninfo");
  bool has_parts = false;
  for (int i = 0; i < 6; i++) has_parts |= parts[i] != NULL;
  if (conninfo && has_parts)
    return FAIL(pl, map_get(pl, snk, "conninfo", NULL), f,
                "give either 'conninfo' or host/port/dbname/user/password/"
                "sslmode, not both");
  if (!conninfo && !has_parts)
    return FAIL(pl, snk, path, "missing required field 'conninfo' (a libpq "
                "connection string such as 'host=db port=5432 dbname=app "
                "user=sluice') or 'host'");
  if (parts[1]) {
    char *end;
    long port = strtol(parts[1], &end, 10);
    if (*end != '\0' || port < 1 || port > 65535) {
      join_path(f, sizeof(f), path, "port");
      return FAIL(pl, map_get(pl, snk, "port", NULL), f,
                  "expected a port number from 1 to 65535, got '%s'",
                  parts[1]);
    }
  }
  cfg.mode = mode ? SL_PG_MODE_UPSERT : SL_PG_MODE_INSERT;
  cfg.delivery = delivery ? SL_DELIVERY_AT_LEAST_ONCE
                          : SL_DELIVERY_EXACTLY_ONCE;
  cfg.key = key_list;
  cfg.n_key = n_key;
  cfg.max_concurrent_checkpoints = b->max_concurrent;
  if (cfg.delivery == SL_DELIVERY_EXACTLY_ONCE && !b->has_ckpt_dir) {
    int dv = map_get(pl, snk, "delivery", NULL);
    join_path(f, sizeof(f), path, dv ? "delivery" : "type");
    return FAIL(pl, dv ? dv : snk, dv ? f : path,
                "a postgres sink with 'delivery: exactly-once' (the "
                "default) commits when a checkpoint completes, and this "
                "pipeline has no 'checkpoint: {dir: ...}', so nothing would "
                "ever be committed; add a checkpoint section or use "
                "'delivery: at-least-once' with 'mode: upsert'");
  }
  for (uint32_t k = 0; k < n_key; k++)
    if (sl_schema_index(b->schema, key_list[k]) < 0)
      return FAIL(pl, kv, "sink.key", "no column '%s' in the rows the sink "
                  "gets", key_list[k]);
  if (cfg.version_field && sl_schema_index(b->schema, cfg.version_field) < 0) {
    join_path(f, sizeof(f), path, "version_field");
    return FAIL(pl, map_get(pl, snk, "version_field", NULL), f,
                "no column '%s' in the rows the sink gets", cfg.version_field);
  }
  sl_bytes_t ci;
  sl_bytes_init(&ci);
  if (conninfo) {
    rc = sl_bytes_append_str(&ci, conninfo);
  } else {
    for (int i = 0; i < 6 && rc == SL_OK; i++)
      if (parts[i]) rc = conninfo_add(&ci, part_keys[i], parts[i]);
  }
  if (rc == SL_OK) rc = sl_bytes_append(&ci, "", 1);
  if (rc != SL_OK) {
    sl_bytes_close(&ci);
    return FAIL(pl, snk, path, "out of memory");
  }
  cfg.conninfo = (const char *)ci.data;
  cfg.table = table;
  const sl_sink_vt_t *vt;
  void *ctx;
  sl_error_t *err = NULL;
  rc = sl_pg_sink_create(&cfg, &vt, &ctx, &err);
  sl_bytes_close(&ci);
  if (rc != SL_OK) {
    FAIL(pl, snk, path, "%s", err ? sl_error_message(err) : sl_strerror(rc));
    sl_error_destroy(err);
    return rc;
  }
  rc = sl_stream_sink(cfg.mode == SL_PG_MODE_UPSERT
                          ? upsert_input(b, in, key_list, n_key, par)
                          : in,
                      uid, vt, ctx);
  if (rc != SL_OK) return job_error(b, snk, path);
  if (par) sl_stream_set_sink_parallelism(in, par);
  /* Every postgres sink is checked by validate --connect, not only the
   * last one built. */
  pg_check_t *pg = sl_realloc(pl->pg, (pl->n_pg + 1) * sizeof(*pg));
  if (pg == NULL) return FAIL(pl, snk, path, "out of memory");
  pl->pg = pg;
  pg = &pl->pg[pl->n_pg];
  pg->ctx = ctx;
  pg->path = sl_strdup(path);
  pg->uid = sl_strdup(uid);
  pg->schema = sl_schema_ref((sl_schema_t *)sl_stream_schema(in));
  pg->par = par ? par : b->parallelism;
  pl->n_pg++;
  if (pg->path == NULL || pg->uid == NULL)
    return FAIL(pl, snk, path, "out of memory");
  return SL_OK;
}

int sl_pipeline_check_connect(sl_pipeline_t *pl, char **out_msg) {
  *out_msg = NULL;
  int rc = SL_OK;
  for (uint32_t i = 0; i < pl->n_pg && rc == SL_OK; i++) {
    const pg_check_t *pg = &pl->pg[i];
    sl_error_t *err = NULL;
    rc = sl_pg_sink_check(pg->ctx, pl->name, pg->uid, pg->schema, pg->par,
                          &err);
    if (rc != SL_OK) {
      const char *m = err ? sl_error_message(err) : sl_strerror(rc);
      size_t n = strlen(m) + strlen(pg->path) + 8;
      *out_msg = sl_malloc(n);
      if (*out_msg) snprintf(*out_msg, n, "%s: %s", pg->path, m);
    }
    sl_error_destroy(err);
  }
  return rc;
}

/*
 * sink: {type: kafka, ...} (docs/pipeline.md).  key is a field or a list
 * of fields (checked against the rows the sink gets); delivery is
 * at-least-once or exactly-once (transactions, with
 * transactional_id_prefix and transaction_pool_size); properties are
 * passed to librdkafka.  The servers and the topic are checked when the
 * job starts.
 */
static int build_kafka_sink(build_t *b, int snk, const char *path,
                            const char *uid, sl_stream_t *in) {
  sl_pipeline_t *pl = b->pl;
  static const char *keys[] = {"type", "uid", "parallelism",
                               "bootstrap_servers", "topic", "key", "format",
                               "delimiter", "changelog", "delivery",
                               "timeout", "properties",
                               "transactional_id_prefix",
                               "transaction_pool_size", "check_timing",
                               NULL};
  int rc = check_keys(pl, snk, path, keys);
  if (rc != SL_OK) return rc;
  static const char *fmts[] = {"json", "csv", NULL};
  static const char *deliveries[] = {"at-least-once", "exactly-once", NULL};
  static const char *checks[] = {"refuse", "warn", NULL};
  sl_kafka_sink_config_t cfg;
  sl_kafka_sink_config_init(&cfg);
  uint32_t par = 0;
  int fmt = 0, delivery = 0, check = 0;
  const char *key_list[32];
  uint32_t n_key = 0;
  char f[300];
  if ((rc = get_str(pl, snk, path, "uid", false, &uid)) ||
      (rc = get_u32(pl, snk, path, "parallelism", 1, SL_MAX_PARALLELISM_LIMIT,
                    &par)) ||
      (rc = get_str(pl, snk, path, "bootstrap_servers", true,
                    &cfg.bootstrap_servers)) ||
      (rc = get_str(pl, snk, path, "topic", true, &cfg.topic)) ||
      (rc = get_enum(pl, snk, path, "format", fmts, &fmt)) ||
      (rc = get_delim(pl, snk, path, &cfg.csv_delimiter)) ||
      (rc = get_bool(pl, snk, path, "changelog", &cfg.changelog)) ||
      (rc = get_enum(pl, snk, path, "delivery", deliveries, &delivery)) ||
      (rc = get_duration_ms(pl, snk, path, "timeout", &cfg.timeout_ms)) ||
      (rc = get_str(pl, snk, path, "transactional_id_prefix", false,
                    &cfg.transactional_id_prefix)) ||
      (rc = get_u32(pl, snk, path, "transaction_pool_size", 1, 1000,
                    &cfg.transaction_pool_size)) ||
      (rc = get_enum(pl, snk, path, "check_timing", checks, &check)))
    return rc;
  cfg.format = fmt == 1 ? SL_FORMAT_CSV : SL_FORMAT_JSON;
  cfg.delivery =
      delivery == 1 ? SL_DELIVERY_EXACTLY_ONCE : SL_DELIVERY_AT_LEAST_ONCE;
  if (delivery != 1 && (cfg.transactional_id_prefix ||
                        cfg.transaction_pool_size)) {
    join_path(f, sizeof(f), path,
              cfg.transactional_id_prefix ? "transactional_id_prefix"
                                          : "transaction_pool_size");
    return FAIL(pl,
                map_get(pl, snk,
                        cfg.transactional_id_prefix
                            ? "transactional_id_prefix"
                            : "transaction_pool_size",
                        NULL),
                f, "needs 'delivery: exactly-once'");
  }
  int kv = map_get(pl, snk, "key", NULL);
  join_path(f, sizeof(f), path, "key");
  if (kv && (rc = str_list(pl, kv, f, key_list, 32, &n_key))) return rc;
  for (uint32_t k = 0; k < n_key; k++)
    if (sl_schema_index(b->schema, key_list[k]) < 0)
      return FAIL(pl, kv, f, "no column '%s' in the rows the sink gets",
                  key_list[k]);
  cfg.key_fields = n_key ? key_list : NULL;
  cfg.n_key_fields = n_key;
  /* properties: {name: value, ...} */
  const char *props[2 * 64 + 1];
  uint32_t n_props = 0;
  int pv = map_get(pl, snk, "properties", NULL);
  join_path(f, sizeof(f), path, "properties");
  if (pv) {
    yaml_node_t *n = node(pl, pv);
    if (n == NULL || n->type != YAML_MAPPING_NODE)
      return FAIL(pl, pv, f, "expected a mapping, got %s", type_word(pl, pv));
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
         p < n->data.mapping.pairs.top; p++) {
      const char *k = scalar(pl, p->key), *v = scalar(pl, p->value);
      if (k == NULL || v == NULL || n_props == 64)
        return FAIL(pl, p->key, f,
                    n_props == 64 ? "at most 64 properties"
                                  : "expected name: value scalars");
      props[2 * n_props] = k;
      props[2 * n_props + 1] = v;
      n_props++;
    }
  }
  props[2 * n_props] = NULL;
  cfg.properties = props;
  const sl_sink_vt_t *vt;
  void *ctx;
  sl_error_t *err = NULL;
  rc = sl_kafka_sink_create(&cfg, &vt, &ctx, &err);
  if (rc != SL_OK) {
    FAIL(pl, snk, path, "%s", err ? sl_error_message(err) : sl_strerror(rc));
    sl_error_destroy(err);
    return rc;
  }
  /* The timing check (point 4 of docs/connectors.md's exactly-once
   * section): the broker is asked when the job runs and by validate
   * --connect. */
  rc = sl_kafka_sink_check_timing(&cfg, &b->jcfg->checkpoint,
                                  &b->jcfg->restart,
                                  !b->is_validate || b->is_connect,
                                  check == 1, &err);
  if (rc != SL_OK) {
    FAIL(pl, snk, path, "%s", err ? sl_error_message(err) : sl_strerror(rc));
    sl_error_destroy(err);
    vt->destroy(ctx);
    return rc;
  }
  rc = sl_stream_sink(in, uid, vt, ctx);
  if (rc != SL_OK) return job_error(b, snk, path);
  if (par) sl_stream_set_sink_parallelism(in, par);
  return SL_OK;
}

/* The sink at path ("sink", or a window's late_sink) on stream in. */
static int build_sink(build_t *b, int snk, const char *path, const char *uid,
                      sl_stream_t *in) {
  sl_pipeline_t *pl = b->pl;
  if (!node(pl, snk) || node(pl, snk)->type != YAML_MAPPING_NODE)
    return FAIL(pl, snk, path, "expected a mapping such as '{type: file, "
                "path: out.csv}', got %s", type_word(pl, snk));
  static const char *types[] = {"file",    "stdout", "null", "postgres",
                                "mariadb", "kafka",  NULL};
  int type = -1;
  int rc = get_enum(pl, snk, path, "type", types, &type);
  if (rc != SL_OK) return rc;
  if (type < 0) return FAIL(pl, snk, path, "missing required field 'type'");
  if (b->route_uid && type != 3 && type != 4)
    return FAIL(pl, map_get(pl, snk, "type", NULL), path, "'routes' need a "
                "postgres or mariadb sink (each route names its table)");
  if (type == 3) return build_pg_sink(b, snk, path, uid, in);
  if (type == 4) return build_mariadb_sink(b, snk, path, uid, in);
  if (type == 5) return build_kafka_sink(b, snk, path, uid, in);
  static const char *keys[] = {"type", "uid", "parallelism", "path", "format",
                               "header", "delimiter", "changelog",
                               "delivery", "roll_size", "roll_interval_ms",
                               "bucket_by", "bucket_field", NULL};
  if ((rc = check_keys(pl, snk, path, keys)) != SL_OK) return rc;
  const char *out_path = NULL;
  uint32_t par = 0;
  int fmt = 0;
  static const char *fmts[] = {"csv", "json", NULL};
  sl_file_sink_config_t cfg = {0};
  if ((rc = get_str(pl, snk, path, "uid", false, &uid)) ||
      (rc = get_u32(pl, snk, path, "parallelism", 1, SL_MAX_PARALLELISM_LIMIT, &par)) ||
      (rc = get_str(pl, snk, path, "path", type == 0, &out_path)) ||
      (rc = get_enum(pl, snk, path, "format", fmts, &fmt)) ||
      (rc = get_bool(pl, snk, path, "header", &cfg.csv_header)) ||
      (rc = get_bool(pl, snk, path, "changelog", &cfg.changelog)) ||
      (rc = get_delim(pl, snk, path, &cfg.csv_delimiter)) ||
      (rc = check_sink_options(pl, snk, path, type, fmt)))
    return rc;
  if (type != 0 && out_path) {
    char pf[300];
    join_path(pf, sizeof(pf), path, "path");
    return FAIL(pl, map_get(pl, snk, "path", NULL), pf,
                "only a file sink has a path");
  }
  if ((rc = get_delivery(b, snk, path, type, &cfg)) != SL_OK) return rc;
  if (type == 0 && cfg.delivery == SL_DELIVERY_AT_LEAST_ONCE &&
      (rc = check_sink_path(b, snk, path, out_path, par ? par : 1)) != SL_OK)
    return rc;
  if (type == 0 && cfg.delivery == SL_DELIVERY_EXACTLY_ONCE &&
      (rc = check_sink_path(b, snk, path, out_path, 1)) != SL_OK)
    return rc;
  const sl_sink_vt_t *vt;
  void *ctx;
  sl_error_t *err = NULL;
  cfg.path = out_path;
  cfg.format = fmt ? SL_FORMAT_JSON : SL_FORMAT_CSV;
  if (type == 0) rc = sl_file_sink_create(&cfg, &vt, &ctx, &err);
  else if (type == 1) rc = sl_stdout_sink_create_cfg(&cfg, &vt, &ctx, &err);
  else rc = sl_null_sink_create(&vt, &ctx);
  if (rc != SL_OK) {
    FAIL(pl, snk, path, "%s", err ? sl_error_message(err) : sl_strerror(rc));
    sl_error_destroy(err);
    return rc;
  }
  rc = sl_stream_sink(in, uid, vt, ctx);
  if (rc != SL_OK) return job_error(b, snk, path);
  /* A file sink defaults to one file; others follow the job.  This finds
   * the sink just added: the newest one on in's operator. */
  if (par || type == 0) sl_stream_set_sink_parallelism(in, par ? par : 1);
  return SL_OK;
}

static int get_i64_ms(sl_pipeline_t *pl, int map, const char *path,
                      const char *key, int64_t *out) {
  uint64_t v = (uint64_t)*out;
  int rc = get_u64(pl, map, path, key, (uint64_t)SL_MAX_DURATION_MS, &v);
  if (rc == SL_OK) *out = (int64_t)v;
  return rc;
}

/* The checkpoint: and restart: sections (docs/pipeline.md). */
static int build_recovery(sl_pipeline_t *pl, int root, sl_job_config_t *cfg) {
  int rc = SL_OK;
  int cv = map_get(pl, root, "checkpoint", NULL);
  if (cv) {
    static const char *keys[] = {"dir", "interval_ms", "timeout_ms",
                                 "min_pause_ms", "max_concurrent", "mode",
                                 "alignment_timeout_ms", "retain", NULL};
    static const char *modes[] = {"aligned", "unaligned", "at-least-once",
                                  NULL};
    sl_checkpoint_config_t *ck = &cfg->checkpoint;
    int mode = 0;
    if ((rc = check_keys(pl, cv, "checkpoint", keys)) ||
        (rc = get_str(pl, cv, "checkpoint", "dir", true, &ck->dir)) ||
        (rc = ck->dir[0] ? SL_OK
                         : FAIL(pl, map_get(pl, cv, "dir", NULL),
                                "checkpoint.dir", "must not be empty")) ||
        (rc = get_i64_ms(pl, cv, "checkpoint", "interval_ms", &ck->interval_ms)) ||
        (rc = get_i64_ms(pl, cv, "checkpoint", "timeout_ms", &ck->timeout_ms)) ||
        (rc = get_i64_ms(pl, cv, "checkpoint", "min_pause_ms", &ck->min_pause_ms)) ||
        (rc = get_u32(pl, cv, "checkpoint", "max_concurrent", 1, 64, &ck->max_concurrent)) ||
        (rc = get_enum(pl, cv, "checkpoint", "mode", modes, &mode)) ||
        (rc = get_i64_ms(pl, cv, "checkpoint", "alignment_timeout_ms",
                         &ck->alignment_timeout_ms)) ||
        (rc = get_u32(pl, cv, "checkpoint", "retain", 1, 1000, &ck->retain)))
      return rc;
    ck->mode = (sl_ckpt_mode_t)mode;
  }
  int rv = map_get(pl, root, "restart", NULL);
  if (rv) {
    static const char *keys[] = {"strategy", "max_attempts", "delay_ms",
                                 "max_delay_ms", "multiplier", NULL};
    static const char *kinds[] = {"none", "fixed-delay", "exponential", NULL};
    sl_restart_config_t *r = &cfg->restart;
    int kind = 1;
    double mult = 2;
    if ((rc = check_keys(pl, rv, "restart", keys)) ||
        (rc = get_enum(pl, rv, "restart", "strategy", kinds, &kind)) ||
        (rc = get_u32(pl, rv, "restart", "max_attempts", 0, 1u << 30, &r->max_attempts)) ||
        (rc = get_i64_ms(pl, rv, "restart", "delay_ms", &r->delay_ms)) ||
        (rc = get_i64_ms(pl, rv, "restart", "max_delay_ms", &r->max_delay_ms)) ||
        (rc = get_double(pl, rv, "restart", "multiplier", &mult)))
      return rc;
    r->kind = (sl_restart_kind_t)kind;
    r->multiplier = mult;
  }
  return rc;
}

/* The rule of sl_job.h (SL_MAX_JOB_NAME): one safe path component. */
static bool is_job_name(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > SL_MAX_JOB_NAME || name[0] == '.') return false;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)name[i]) && name[i] != '.' &&
        name[i] != '_' && name[i] != '-')
      return false;
  return true;
}

/*
 * routes: [{tables: [PATTERNS], table: NAME, key: [COLUMNS], uid: NAME}]
 * (docs/pipeline.md "Routes"): one chain per route in one job, each the
 * mariadb-cdc `source` mapping with the route's tables and the `sink`
 * mapping with the route's table (and key), uids "<uid>-<route uid>".
 * The chains share the job's checkpoints, so one checkpoint commits every
 * route's output of its epoch.
 */
static int build_routes(build_t *b, int rv, int src, int snk, int tv) {
  sl_pipeline_t *pl = b->pl;
  yaml_node_t *rn = node(pl, rv);
  if (rn->type != YAML_SEQUENCE_NODE)
    return FAIL(pl, rv, "routes", "expected a list of routes such as "
                "'{tables: [shop.orders], table: orders}', got %s",
                type_word(pl, rv));
  size_t count = (size_t)(rn->data.sequence.items.top -
                          rn->data.sequence.items.start);
  if (count == 0) return FAIL(pl, rv, "routes", "needs at least one route");
  if (count > 64) return FAIL(pl, rv, "routes", "at most 64 routes");
  if (tv)
    return FAIL(pl, tv, "transforms", "transforms are not supported with "
                "'routes' yet (each route goes from its tables to its sink "
                "table as captured)");
  static const char *keys[] = {"tables", "table", "key", "uid", NULL};
  const char *uids[64];
  for (size_t i = 0; i < count; i++) {
    int r = rn->data.sequence.items.start[i];
    char p[64], f[96];
    snprintf(p, sizeof(p), "routes[%zu]", i + 1);
    if (node(pl, r)->type != YAML_MAPPING_NODE)
      return FAIL(pl, r, p, "expected a mapping such as '{tables: "
                  "[shop.orders], table: orders}', got %s", type_word(pl, r));
    int rc = check_keys(pl, r, p, keys);
    if (rc != SL_OK) return rc;
    int rt = map_get(pl, r, "tables", NULL);
    if (rt == 0)
      return FAIL(pl, r, p, "missing required field 'tables' (the captured "
                  "tables of this route, db.table patterns)");
    snprintf(f, sizeof(f), "%s.tables", p);
    if ((rc = str_list(pl, rt, f, b->route_tables, 256,
                       &b->n_route_tables)) != SL_OK)
      return rc;
    if ((rc = get_str(pl, r, p, "table", true, &b->route_table)) != SL_OK)
      return rc;
    b->n_route_key = 0;
    b->route_key_node = map_get(pl, r, "key", NULL);
    snprintf(f, sizeof(f), "%s.key", p);
    if (b->route_key_node &&
        (rc = str_list(pl, b->route_key_node, f, b->route_key, 32,
                       &b->n_route_key)) != SL_OK)
      return rc;
    b->route_uid = b->route_table;
    if ((rc = get_str(pl, r, p, "uid", false, &b->route_uid)) != SL_OK)
      return rc;
    uids[i] = b->route_uid;
    for (size_t k = 0; k < i; k++)
      if (strcmp(uids[k], b->route_uid) == 0) {
        int uv = map_get(pl, r, "uid", NULL);
        snprintf(f, sizeof(f), "%s.uid", p);
        return FAIL(pl, uv ? uv : r, f, "'%s' is the uid of routes[%zu] "
                    "too; give each route a uid of its own (the default "
                    "is its table)", b->route_uid, k + 1);
      }
    b->route_index = (uint32_t)i;
    /* A chain of its own: nothing of the previous route's stream. */
    b->s = NULL;
    b->schema = NULL;
    b->n_keyed = 0;
    b->keyed_par = 0;
    if ((rc = build_source(b, src)) != SL_OK) return rc;
    if ((rc = build_sink(b, snk, "sink", "sink", b->s)) != SL_OK) return rc;
  }
  b->route_uid = NULL;
  return SL_OK;
}

/* buffer_timeout: a duration in whole milliseconds (0: every record at
 * once) or "off", as Flink's execution.buffer-timeout (docs/pipeline.md). */
static int get_buffer_timeout(sl_pipeline_t *pl, int root, int64_t *out_ms) {
  int v = map_get(pl, root, "buffer_timeout", NULL);
  if (v == 0) return SL_OK;
  const char *s = scalar(pl, v);
  if (s && strcmp(s, "off") == 0) {
    *out_ms = -1;
    return SL_OK;
  }
  int64_t us = -1;
  int rc = get_duration(pl, root, "", "buffer_timeout", &us);
  if (rc != SL_OK) return rc;
  if (us / 1000 > SL_MAX_DURATION_MS)
    return FAIL(pl, v, "buffer_timeout", "'%s' is too large; the maximum is "
                "8760h (a year)", s);
  if (us % 1000 != 0)
    return FAIL(pl, v, "buffer_timeout", "must be a whole number of "
                "milliseconds or off, got '%s'", s);
  *out_ms = us / 1000;
  return SL_OK;
}

int sl_pipeline_build(sl_pipeline_t *pl, const sl_pipeline_run_t *run,
                      sl_job_t **out_job, char **out_msg) {
  *out_msg = NULL;
  int root = 1;
  uint32_t parallelism = run ? run->parallelism : 0;
  static const char *keys[] = {"name", "parallelism", "max_parallelism",
                               "buffer_size", "channel_buffers",
                               "buffer_timeout", "checkpoint",
                               "restart", "source", "transforms", "sink",
                               "routes", NULL};
  build_t b = {pl, NULL, NULL, NULL, false};
  b.is_connect = run != NULL && run->is_validate && run->is_connect;
  b.is_validate = run != NULL && run->is_validate;
  int rc = check_keys(pl, root, "", keys);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  const char *name = "pipeline";
  if (rc == SL_OK)
    rc = get_str(pl, root, "", "name", false, &name);
  int name_v = map_get(pl, root, "name", NULL);
  if (rc == SL_OK && name_v && !is_job_name(name))
    rc = FAIL(pl, name_v, "name", "'%s' is not a valid job name; use 1 to %d "
              "letters, digits, '.', '_' or '-', not starting with '.'",
              name, SL_MAX_JOB_NAME);
  if (rc == SL_OK)
    rc = get_u32(pl, root, "", "parallelism", 1, SL_MAX_PARALLELISM_LIMIT,
                 &cfg.parallelism);
  if (rc == SL_OK)
    rc = get_u32(pl, root, "", "max_parallelism", 1, SL_MAX_PARALLELISM_LIMIT,
                 &cfg.max_parallelism);
  if (rc == SL_OK)
    rc = get_u32(pl, root, "", "buffer_size", 256, 64u << 20, &cfg.buffer_size);
  if (rc == SL_OK)
    rc = get_u32(pl, root, "", "channel_buffers", 1, 1024, &cfg.channel_buffers);
  if (rc == SL_OK)
    rc = get_buffer_timeout(pl, root, &cfg.buffer_timeout_ms);
  if (rc == SL_OK) rc = build_recovery(pl, root, &cfg);
  b.has_ckpt_dir = cfg.checkpoint.dir != NULL;
  b.max_concurrent = cfg.checkpoint.max_concurrent;
  /* Checkpoints are kept in <dir>/<name>: without a name of its own, every
   * pipeline would be 'pipeline', and one would restore another's. */
  int ckpt_v = map_get(pl, root, "checkpoint", NULL);
  if (rc == SL_OK && ckpt_v && name_v == 0)
    rc = FAIL(pl, ckpt_v, "checkpoint",
              "a pipeline with checkpoints needs a 'name'; its checkpoints "
              "are kept in <dir>/<name>, so pipelines that share a dir need "
              "different names");
  /* validate writes nothing: the job gets no checkpoint directory, which
   * sl_job_create would create. */
  if (rc == SL_OK && run && run->is_validate) cfg.checkpoint.dir = NULL;
  if (rc == SL_OK && run) {
    cfg.restore_from = run->restore_from;
    if (run->is_resume && cfg.checkpoint.dir == NULL) {
      rc = FAIL(pl, root, "", "--resume needs a checkpoint section with a dir");
    }
    cfg.resume_latest = run->is_resume;
    cfg.allow_duplicate_sink_output = run->allow_duplicate_sink_output;
  }
  if (rc == SL_OK && parallelism) cfg.parallelism = parallelism;
  b.parallelism = cfg.parallelism;
  b.jcfg = &cfg;
  if (rc == SL_OK && cfg.parallelism > cfg.max_parallelism) {
    int pv = map_get(pl, root, "parallelism", NULL);
    rc = FAIL(pl, pv ? pv : root, pv ? "parallelism" : "",
              "parallelism %u is above max_parallelism %u", cfg.parallelism,
              cfg.max_parallelism);
  }
  int src = map_get(pl, root, "source", NULL);
  int snk = map_get(pl, root, "sink", NULL);
  if (rc == SL_OK && src == 0)
    rc = FAIL(pl, root, "", "missing required field 'source'");
  if (rc == SL_OK && snk == 0)
    rc = FAIL(pl, root, "", "missing required field 'sink'");
  if (rc == SL_OK) {
    sl_free(pl->name);
    pl->name = sl_strdup(name);
    cfg.name = name;
    sl_error_t *err = NULL;
    rc = sl_job_create(&cfg, &b.job, &err);
    if (rc != SL_OK) FAIL(pl, root, "", "%s", sl_error_message(err));
    sl_error_destroy(err);
  }
  int rv = map_get(pl, root, "routes", NULL);
  if (rc == SL_OK && rv) {
    rc = build_routes(&b, rv, src, snk, map_get(pl, root, "transforms",
                                                NULL));
    goto built;
  }
  if (rc == SL_OK) rc = build_source(&b, src);
  int tv = map_get(pl, root, "transforms", NULL);
  if (rc == SL_OK && tv) {
    yaml_node_t *tn = node(pl, tv);
    if (tn->type != YAML_SEQUENCE_NODE) {
      rc = FAIL(pl, tv, "transforms", "expected a list, got %s",
                type_word(pl, tv));
    } else {
      size_t count = (size_t)(tn->data.sequence.items.top - tn->data.sequence.items.start);
      if (count > MAX_TRANSFORMS)
        rc = FAIL(pl, tv, "transforms", "at most %d transforms",
                  MAX_TRANSFORMS);
      for (size_t i = 0; i < count && rc == SL_OK; i++) {
        char p[64];
        snprintf(p, sizeof(p), "transforms[%zu]", i + 1);
        rc = build_transform(&b, node(pl, tv)->data.sequence.items.start[i], p);
      }
    }
  }
  if (rc == SL_OK) rc = build_sink(&b, snk, "sink", "sink", b.s);
built:
  if (rc != SL_OK) {
    sl_job_destroy(b.job);
    *out_msg = pl->msg ? pl->msg : sl_strdup(sl_strerror(rc));
    pl->msg = NULL;
    return rc;
  }
  *out_job = b.job;
  return SL_OK;
}
