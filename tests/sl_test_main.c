/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Runner for sluice test executables: `exe NAME` runs one test, `exe
 * --list` lists them, `exe` runs all in this process (for debugging).
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sl_test.h"

#define MAX_TESTS 512

static struct {
  const char *name;
  sl_test_fn fn;
} tests[MAX_TESTS];
static int n_tests;
static char test_dir[4096];

void sl__test_register(const char *name, sl_test_fn fn) {
  if (n_tests == MAX_TESTS) {
    fprintf(stderr, "too many tests\n");
    exit(2);
  }
  tests[n_tests].name = name;
  tests[n_tests].fn = fn;
  n_tests++;
}

const char *sl_test_dir(void) { return test_dir; }

const char *sl_test_bin_dir(void) {
  const char *d = getenv("SL_TEST_BIN_DIR");
  return d ? d : SL_TEST_DEFAULT_BIN_DIR;
}

const char *sl_test_src_dir(void) {
  const char *d = getenv("SL_TEST_SRC_DIR");
  return d ? d : SL_TEST_DEFAULT_SRC_DIR;
}

static void make_test_dir(const char *name) {
  const char *base = getenv("SL_TEST_TMP");
  if (base == NULL) base = "/tmp";
  snprintf(test_dir, sizeof(test_dir), "%s/sluice-test-%s-%d", base, name,
           (int)getpid());
  char cmd[4200 + 16];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", test_dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "cannot clean %s\n", test_dir);
    exit(2);
  }
  if (mkdir(test_dir, 0755) != 0) {
    fprintf(stderr, "cannot create %s: %s\n", test_dir, strerror(errno));
    exit(2);
  }
}

static void remove_test_dir(void) {
  if (getenv("SL_TEST_KEEP") != NULL) return;
  char cmd[4200 + 16];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", test_dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", test_dir);
}

char *sl_test_read_file(const char *path, size_t *out_len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len - 1 == 0) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
  }
  fclose(f);
  if (buf == NULL) return NULL;
  buf[len] = '\0';
  if (out_len) *out_len = len;
  return buf;
}

void sl_test_write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) SL_TEST_FAIL("cannot write %s: %s", path, strerror(errno));
  fputs(text, f);
  if (fclose(f) != 0) SL_TEST_FAIL("cannot write %s", path);
}

extern char **environ;

pid_t sl_test_spawn(const char *const *argv, const char *inject,
                    const char *stderr_path, int flags) {
  size_t n_env = 0;
  while (environ[n_env]) n_env++;
  char **env = calloc(n_env + 2, sizeof(char *));
  if (env == NULL) SL_TEST_FAIL("out of memory");
  size_t n = 0;
  for (char **e = environ; *e; e++)
    if (strncmp(*e, "SL_INJECT=", 10) != 0) env[n++] = *e;
  char envbuf[512];
  if (inject) {
    snprintf(envbuf, sizeof(envbuf), "SL_INJECT=%s", inject);
    env[n++] = envbuf;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (flags & SL_TEST_SPAWN_NO_STDOUT)
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(
      &fa, 2, stderr_path,
      O_WRONLY | O_CREAT | (flags & SL_TEST_SPAWN_APPEND ? O_APPEND : O_TRUNC),
      0644);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, env);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  if (rc != 0) SL_TEST_FAIL("cannot run %s: %s", argv[0], strerror(rc));
  return pid;
}

int sl_test_wait(pid_t pid) {
  int status;
  if (waitpid(pid, &status, 0) != pid)
    SL_TEST_FAIL("waitpid failed: %s", strerror(errno));
  return status;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc > 1 && strcmp(argv[1], "--list") == 0) {
    for (int i = 0; i < n_tests; i++) printf("%s\n", tests[i].name);
    return 0;
  }
  for (int i = 0; i < n_tests; i++) {
    if (argc > 1 && strcmp(argv[1], tests[i].name) != 0) continue;
    make_test_dir(tests[i].name);
    printf("running %s\n", tests[i].name);
    tests[i].fn();
    printf("ok %s\n", tests[i].name);
    remove_test_dir();
    if (argc > 1) return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "no test named '%s'\n", argv[1]);
    return 2;
  }
  return 0;
}
