/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Return codes and the error object.  Codes below SL_ERRBASE are the
 * engine's own; other negative codes are negated errno values.  See
 * README.md.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

struct sl_error_s {
  int code;
  bool is_retriable;
  bool is_fatal;
  char *msg;
};

static const struct {
  int code;
  const char *name;
  const char *text;
} engine_codes[] = {
    {SL_ECORRUPT, "SL_ECORRUPT", "data is corrupt"},
    {SL_EAGAIN, "SL_EAGAIN", "resource temporarily unavailable"},
    {SL_ECLOSED, "SL_ECLOSED", "already closed"},
    {SL_ECANCELED, "SL_ECANCELED", "cancelled"},
    {SL_ENOMEM, "SL_ENOMEM", "out of memory"},
    {SL_EINVAL, "SL_EINVAL", "invalid argument"},
    {SL_ETYPE, "SL_ETYPE", "wrong type"},
    {SL_ENOTSUP, "SL_ENOTSUP", "not supported"},
    {SL_ENOTFOUND, "SL_ENOTFOUND", "not found"},
    {SL_EPARSE, "SL_EPARSE", "parse error"},
    {SL_ESTATE, "SL_ESTATE", "invalid state for this call"},
    {SL_EUSER, "SL_EUSER", "user function failed"},
    {SL_EIO, "SL_EIO", "input/output error"},
    {SL_EOVERFLOW, "SL_EOVERFLOW", "overflow"},
    {SL_EFAILED, "SL_EFAILED", "component has failed and refuses work"},
};

static const struct {
  int err;
  const char *name;
} errno_names[] = {
    {EPERM, "EPERM"},   {ENOENT, "ENOENT"}, {EIO, "EIO"},
    {EBADF, "EBADF"},   {EAGAIN, "EAGAIN"}, {ENOMEM, "ENOMEM"},
    {EACCES, "EACCES"}, {EEXIST, "EEXIST"}, {ENOTDIR, "ENOTDIR"},
    {EISDIR, "EISDIR"}, {EINVAL, "EINVAL"}, {ENOSPC, "ENOSPC"},
    {EPIPE, "EPIPE"},   {ENAMETOOLONG, "ENAMETOOLONG"},
    {ECONNREFUSED, "ECONNREFUSED"}, {ETIMEDOUT, "ETIMEDOUT"},
    {EROFS, "EROFS"},   {EMFILE, "EMFILE"}, {EINTR, "EINTR"},
};

const char *sl_strerror(int code) {
  if (code == SL_OK) return "success";
  for (size_t i = 0; i < SL_ARRAY_LEN(engine_codes); i++)
    if (engine_codes[i].code == code) return engine_codes[i].text;
  if (code < 0 && code > SL_ERRBASE) return strerror(-code);
  return "unknown error";
}

const char *sl_errname(int code) {
  if (code == SL_OK) return "SL_OK";
  for (size_t i = 0; i < SL_ARRAY_LEN(engine_codes); i++)
    if (engine_codes[i].code == code) return engine_codes[i].name;
  for (size_t i = 0; i < SL_ARRAY_LEN(errno_names); i++)
    if (-errno_names[i].err == code) return errno_names[i].name;
  return "SL_EUNKNOWN";
}

static sl_error_t *error_vcreate(int code, const char *fmt, va_list ap) {
  sl_error_t *err = sl_calloc(1, sizeof(*err));
  if (err == NULL) return NULL;
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  err->msg = sl_malloc((size_t)n + 1);
  if (err->msg == NULL) {
    sl_free(err);
    return NULL;
  }
  vsnprintf(err->msg, (size_t)n + 1, fmt, ap);
  err->code = code;
  return err;
}

sl_error_t *sl_error_create(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sl_error_t *err = error_vcreate(code, fmt, ap);
  va_end(ap);
  return err;
}

int sl_error_set(sl_error_t **out_err, int code, const char *fmt, ...) {
  if (out_err == NULL || *out_err != NULL) return code;
  va_list ap;
  va_start(ap, fmt);
  *out_err = error_vcreate(code, fmt, ap);
  va_end(ap);
  return code;
}

int sl_error_code(const sl_error_t *err) { return err ? err->code : SL_OK; }

const char *sl_error_message(const sl_error_t *err) {
  if (err == NULL) return "no error";
  return err->msg ? err->msg : "(no message)";
}

bool sl_error_is_retriable(const sl_error_t *err) {
  return err && err->is_retriable;
}
bool sl_error_is_fatal(const sl_error_t *err) { return err && err->is_fatal; }
void sl_error_set_retriable(sl_error_t *err, bool v) {
  if (err) err->is_retriable = v;
}
void sl_error_set_fatal(sl_error_t *err, bool v) {
  if (err) err->is_fatal = v;
}

int sl__error_fatal(sl_error_t **out_err, int code) {
  if (out_err && *out_err) {
    (*out_err)->is_fatal = true;
    (*out_err)->is_retriable = false;
  }
  return code;
}

int sl__error_retriable(sl_error_t **out_err, int code) {
  if (out_err && *out_err && !(*out_err)->is_fatal)
    (*out_err)->is_retriable = true;
  return code;
}

void sl_error_prefix(sl_error_t *err, const char *fmt, ...) {
  if (err == NULL) return;
  char pre[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof(pre), fmt, ap);
  va_end(ap);
  size_t n = strlen(pre) + 2 + strlen(err->msg) + 1;
  char *m = sl_malloc(n);
  if (m == NULL) return; /* keep the old message rather than lose it */
  snprintf(m, n, "%s: %s", pre, err->msg);
  sl_free(err->msg);
  err->msg = m;
}

void sl_error_destroy(sl_error_t *err) {
  if (err == NULL) return;
  sl_free(err->msg);
  sl_free(err);
}
