/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the fuzz targets: a private scratch directory for the
 * decoders that read files, a quiet log, and a way to stop on a broken
 * invariant that both libFuzzer and the replay driver report as a crash.
 * See docs/fuzzing.md.
 */
#ifndef SL_FUZZ_UTIL_H
#define SL_FUZZ_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sluice/sluice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant (not a rejected input): abort, which is a crash. */
#define SL_FUZZ_CHECK(x)                                                  \
  do {                                                                    \
    if (!(x)) {                                                           \
      fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__,     \
              __LINE__, #x);                                              \
      abort();                                                            \
    }                                                                     \
  } while (0)

static char sl_fuzz_dir_path[256];

static void sl_fuzz_rmdir(void) {
  if (sl_fuzz_dir_path[0] == '\0') return;
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sl_fuzz_dir_path);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", cmd + 7);
}

/*
 * Once per process: silence the log (every rejected input would print a
 * warning) and create a scratch directory in $SL_FUZZ_TMP, /dev/shm (the
 * decoders under test read files: memory is fastest) or /tmp.
 */
__attribute__((unused)) static const char *sl_fuzz_setup(void) {
  if (sl_fuzz_dir_path[0] != '\0') return sl_fuzz_dir_path;
  if (getenv("SL_FUZZ_VERBOSE") == NULL) sl_log_set_level(SL_LOG_FATAL);
  const char *bases[] = {getenv("SL_FUZZ_TMP"), "/dev/shm", "/tmp"};
  for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
    if (bases[i] == NULL) continue;
    snprintf(sl_fuzz_dir_path, sizeof(sl_fuzz_dir_path),
             "%s/sluice-fuzz-%d", bases[i], (int)getpid());
    if (mkdir(sl_fuzz_dir_path, 0700) == 0 || errno == EEXIST) {
      atexit(sl_fuzz_rmdir);
      return sl_fuzz_dir_path;
    }
  }
  fprintf(stderr, "fuzz: cannot create a scratch directory\n");
  abort();
}

/* Write bytes to dir/name (replacing it); aborts on I/O errors, which are
 * the machine's fault, not the input's. */
__attribute__((unused)) static void sl_fuzz_write(const char *path,
                                                  const uint8_t *p,
                                                  size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SL_FUZZ_CHECK(fd >= 0);
  size_t done = 0;
  while (done < n) {
    ssize_t k = write(fd, p + done, n - done);
    if (k < 0 && errno == EINTR) continue;
    SL_FUZZ_CHECK(k > 0);
    done += (size_t)k;
  }
  SL_FUZZ_CHECK(close(fd) == 0);
}

#endif
