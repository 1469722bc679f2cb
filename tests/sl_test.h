/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sluice test framework.  SL_TEST(name) defines a test; each test
 * executable runs one test by name (argv[1]) in its own process, so CTest
 * registers one entry per test.  Assertions print both sides and exit.
 */
#ifndef SL_TEST_H
#define SL_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "sluice/sluice.h"

typedef void (*sl_test_fn)(void);
void sl__test_register(const char *name, sl_test_fn fn);
/* Directory for the test's scratch files (created fresh, per test). */
const char *sl_test_dir(void);
/* Path of the build's bin directory (for tests that run the sluice CLI). */
const char *sl_test_bin_dir(void);
/* Path of the source tree (for example pipelines). */
const char *sl_test_src_dir(void);

#define SL_TEST(name)                                                   \
  static void sl_test_##name(void);                                     \
  __attribute__((constructor)) static void sl_test_reg_##name(void) {   \
    sl__test_register(#name, sl_test_##name);                           \
  }                                                                     \
  static void sl_test_##name(void)

#define SL_TEST_FAIL(...)                                               \
  do {                                                                  \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                     \
    fprintf(stderr, __VA_ARGS__);                                       \
    fprintf(stderr, "\n");                                              \
    fflush(stdout);                                                     \
    fflush(stderr);                                                     \
    exit(1);                                                            \
  } while (0)

#define SL_ASSERT_TRUE(x)                                               \
  do {                                                                  \
    if (!(x)) SL_TEST_FAIL("assertion failed: %s", #x);                 \
  } while (0)

#define SL_ASSERT_EQ_INT(a, b)                                          \
  do {                                                                  \
    long long sl_a_ = (long long)(a), sl_b_ = (long long)(b);           \
    if (sl_a_ != sl_b_)                                                 \
      SL_TEST_FAIL("%s == %s: %lld != %lld", #a, #b, sl_a_, sl_b_);     \
  } while (0)

#define SL_ASSERT_NE_INT(a, b)                                          \
  do {                                                                  \
    long long sl_a_ = (long long)(a), sl_b_ = (long long)(b);           \
    if (sl_a_ == sl_b_)                                                 \
      SL_TEST_FAIL("%s != %s: both %lld", #a, #b, sl_a_);               \
  } while (0)

#define SL_ASSERT_LE_INT(a, b)                                          \
  do {                                                                  \
    long long sl_a_ = (long long)(a), sl_b_ = (long long)(b);           \
    if (!(sl_a_ <= sl_b_))                                              \
      SL_TEST_FAIL("%s <= %s: %lld > %lld", #a, #b, sl_a_, sl_b_);      \
  } while (0)

#define SL_ASSERT_EQ_DBL(a, b, eps)                                     \
  do {                                                                  \
    double sl_a_ = (double)(a), sl_b_ = (double)(b);                    \
    if (!(sl_a_ - sl_b_ <= (eps) && sl_b_ - sl_a_ <= (eps)))            \
      SL_TEST_FAIL("%s == %s: %.17g != %.17g", #a, #b, sl_a_, sl_b_);   \
  } while (0)

#define SL_ASSERT_EQ_STR(a, b)                                          \
  do {                                                                  \
    const char *sl_a_ = (a), *sl_b_ = (b);                              \
    if (sl_a_ == NULL || sl_b_ == NULL || strcmp(sl_a_, sl_b_) != 0)    \
      SL_TEST_FAIL("%s == %s:\n  '%s'\n  '%s'", #a, #b,                 \
                   sl_a_ ? sl_a_ : "(null)", sl_b_ ? sl_b_ : "(null)"); \
  } while (0)

#define SL_ASSERT_EQ_PTR(a, b)                                          \
  do {                                                                  \
    const void *sl_a_ = (a), *sl_b_ = (b);                              \
    if (sl_a_ != sl_b_) SL_TEST_FAIL("%s == %s: %p != %p", #a, #b,      \
                                     sl_a_, sl_b_);                     \
  } while (0)

/* Assert SL_OK; on failure print the code name and the error message. */
#define SL_ASSERT_OK_E(expr, err)                                       \
  do {                                                                  \
    int sl_rc_ = (expr);                                                \
    if (sl_rc_ != SL_OK)                                                \
      SL_TEST_FAIL("%s: %s (%s)%s%s", #expr, sl_errname(sl_rc_),        \
                   sl_strerror(sl_rc_), (err) ? ": " : "",              \
                   (err) ? sl_error_message(err) : "");                 \
  } while (0)
#define SL_ASSERT_OK(expr) SL_ASSERT_OK_E(expr, (sl_error_t *)NULL)

/* Read a whole file into a NUL-terminated buffer (caller frees). */
char *sl_test_read_file(const char *path, size_t *out_len);
/* Write a file; fails the test on error. */
void sl_test_write_file(const char *path, const char *text);

/* sl_test_spawn flags. */
#define SL_TEST_SPAWN_APPEND 1    /* append stderr instead of truncating */
#define SL_TEST_SPAWN_NO_STDOUT 2 /* stdout to /dev/null */
/* Start argv[0] (a program such as bin/sluice) with this environment
 * less any SL_INJECT, plus SL_INJECT=inject when inject is not NULL, and
 * its stderr in stderr_path.  Fails the test when it cannot start.
 * Returns the child's pid. */
pid_t sl_test_spawn(const char *const *argv, const char *inject,
                    const char *stderr_path, int flags);
/* Wait for a child of sl_test_spawn; returns its wait status. */
int sl_test_wait(pid_t pid);

#endif
