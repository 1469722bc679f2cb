/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Common definitions of the sluice public API: return codes, the error
 * object, the replaceable allocator and logging.  Every other public header
 * includes this one.  See src/core/README.md.
 */
#ifndef SLUICE_SL_COMMON_H
#define SLUICE_SL_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sl_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * SL_API marks every function of the public API.  The library is compiled
 * with -fvisibility=hidden, so libsluice.so exports exactly the functions
 * declared with SL_API in include/sluice/ and nothing of the engine's
 * internals (sl__ functions that public inline functions call are part of
 * the API too, and marked).  A declaration added to a public header without
 * SL_API links against the static library but not against the shared one;
 * the install test (sl-it-install-*) checks that the exported symbols and
 * the declared ones are the same set.
 */
#if defined(__GNUC__) || defined(__clang__)
#define SL_API __attribute__((visibility("default")))
#else
#define SL_API
#endif

/**
 * @brief Version of the library the program runs with, "MAJOR.MINOR.PATCH"
 * (SL_VERSION_STRING of the headers it was built from).  Static storage.
 * @thread any
 */
SL_API const char *sl_version(void);

/*
 * Return codes.  Every fallible function returns int: SL_OK, or a negative
 * code.  OS failures are the negated errno; engine codes live in a block
 * below -30000 so that they never collide with errno.
 */
#define SL_OK 0
#define SL_ERRBASE   (-30000)
#define SL_ECORRUPT  (SL_ERRBASE - 1)  /* data failed validation */
#define SL_EAGAIN    (SL_ERRBASE - 2)  /* not now: retry later */
#define SL_ECLOSED   (SL_ERRBASE - 3)  /* object already closed */
#define SL_ECANCELED (SL_ERRBASE - 4)  /* operation was cancelled */
#define SL_ENOMEM    (SL_ERRBASE - 5)  /* allocation failed */
#define SL_EINVAL    (SL_ERRBASE - 6)  /* invalid argument or config */
#define SL_ETYPE     (SL_ERRBASE - 7)  /* value of the wrong type */
#define SL_ENOTSUP   (SL_ERRBASE - 8)  /* not supported */
#define SL_ENOTFOUND (SL_ERRBASE - 9)  /* no such key, field or file */
#define SL_EPARSE    (SL_ERRBASE - 10) /* malformed input text */
#define SL_ESTATE    (SL_ERRBASE - 11) /* call not valid in this state */
#define SL_EUSER     (SL_ERRBASE - 12) /* a user function failed */
#define SL_EIO       (SL_ERRBASE - 13) /* I/O failed (see message) */
#define SL_EOVERFLOW (SL_ERRBASE - 14) /* arithmetic or size overflow */
#define SL_EFAILED   (SL_ERRBASE - 15) /* component is in FAILED state */
#define SL_ERRLAST   (SL_ERRBASE - 16)

/** @brief Human-readable text for a return code.  @thread any */
SL_API const char *sl_strerror(int code);
/** @brief Symbolic name of a return code ("SL_EINVAL", "ENOENT").  @thread any */
SL_API const char *sl_errname(int code);

/*
 * Error object: a code plus a message, and whether retrying can help.
 * Functions that need to say more than a code take sl_error_t **out_err;
 * out_err may be NULL.  The caller frees the object with sl_error_destroy.
 */
typedef struct sl_error_s sl_error_t;

/** @brief Create an error.  Returns NULL only when memory is exhausted. */
SL_API sl_error_t *sl_error_create(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/** @brief Code of the error.  @thread any */
SL_API int sl_error_code(const sl_error_t *err);
/** @brief Message of the error; borrowed, valid until destroy. */
SL_API const char *sl_error_message(const sl_error_t *err);
SL_API bool sl_error_is_retriable(const sl_error_t *err);
SL_API bool sl_error_is_fatal(const sl_error_t *err);
SL_API void sl_error_set_retriable(sl_error_t *err, bool is_retriable);
SL_API void sl_error_set_fatal(sl_error_t *err, bool is_fatal);
/** @brief Prepend context: "context: old message".  Keeps the code. */
SL_API void sl_error_prefix(sl_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
SL_API void sl_error_destroy(sl_error_t *err);

/**
 * @brief Store a new error into *out_err (if out_err is not NULL and *out_err
 * is NULL) and return code.  Convenient for "return sl_error_set(...)".
 */
SL_API int sl_error_set(sl_error_t **out_err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Allocator.  Every allocation in the library goes through these, which can
 * be replaced before any other call (process-wide).
 */
typedef struct sl_allocator_s {
  void *(*malloc_fn)(size_t size);
  void *(*calloc_fn)(size_t n, size_t size);
  void *(*realloc_fn)(void *p, size_t size);
  void (*free_fn)(void *p);
} sl_allocator_t;

/** @brief Replace the allocator.  @thread any, before other calls. */
SL_API void sl_set_allocator(const sl_allocator_t *alloc);
SL_API void *sl_malloc(size_t size);
SL_API void *sl_calloc(size_t n, size_t size);
SL_API void *sl_realloc(void *p, size_t size);
SL_API void sl_free(void *p);
SL_API char *sl_strdup(const char *s);
SL_API char *sl_strndup(const char *s, size_t n);

/* Logging. */
typedef enum sl_log_level_e {
  SL_LOG_DEBUG = 0,
  SL_LOG_INFO = 1,
  SL_LOG_WARN = 2,
  SL_LOG_ERROR = 3,
  SL_LOG_FATAL = 4
} sl_log_level_t;

typedef void (*sl_log_cb)(sl_log_level_t level, const char *msg, void *user);

/** @brief Minimum level that is logged (default INFO).  @thread any */
SL_API void sl_log_set_level(sl_log_level_t level);
/** @brief Route log lines to cb (NULL restores stderr).  @thread any */
SL_API void sl_log_set_callback(sl_log_cb cb, void *user);
SL_API void sl_log(sl_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
