/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replay driver of the fuzz targets: runs LLVMFuzzerTestOneInput on every
 * file named on the command line, or in the directories named there, so
 * that the seed corpora in tests/fuzz/corpus/ run under ctest in every
 * build, without libFuzzer (as Fluent Bit's tests/internal/fuzzers/
 * local_test.c does).  A missing or empty corpus is an error: a corpus that
 * silently replays nothing tests nothing.  See docs/fuzzing.md.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "replay: cannot open '%s': %s\n", path, strerror(errno));
    return -1;
  }
  size_t cap = 4096, len = 0, n;
  uint8_t *buf = malloc(cap);
  while (buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      uint8_t *nb = realloc(buf, cap * 2);
      if (nb == NULL) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  int is_err = ferror(f);
  fclose(f);
  if (buf == NULL || is_err) {
    fprintf(stderr, "replay: cannot read '%s'\n", path);
    free(buf);
    return -1;
  }
  /* An exact-size copy, so that ASan sees reads past the end. */
  uint8_t *exact = malloc(len ? len : 1);
  if (exact == NULL) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, len);
  free(buf);
  fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays the regular files of dir in name order; returns how many. */
static long replay_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    fprintf(stderr, "replay: cannot open corpus '%s': %s\n", dir,
            strerror(errno));
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **nn = realloc(names, cap * sizeof(*names));
      if (nn == NULL) break;
      names = nn;
    }
    names[n] = strdup(de->d_name);
    if (names[n] != NULL) n++;
  }
  closedir(d);
  if (n) qsort(names, n, sizeof(*names), cmp_str);
  long done = 0;
  for (size_t i = 0; i < n; i++) {
    size_t l = strlen(dir) + strlen(names[i]) + 2;
    char *p = malloc(l);
    struct stat st;
    if (p != NULL) {
      snprintf(p, l, "%s/%s", dir, names[i]);
      if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
        if (replay_file(p) != 0) done = -1;
        else if (done >= 0) done++;
      }
    }
    free(p);
    free(names[i]);
  }
  free(names);
  return done;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  if (argc < 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  long total = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: '%s': %s\n", argv[i], strerror(errno));
      return 1;
    }
    long n = S_ISDIR(st.st_mode) ? replay_dir(argv[i])
                                 : (replay_file(argv[i]) == 0 ? 1 : -1);
    if (n < 0) return 1;
    if (n == 0) {
      fprintf(stderr, "replay: corpus '%s' is empty\n", argv[i]);
      return 1;
    }
    total += n;
  }
  fprintf(stderr, "replay: %ld inputs, no crash\n", total);
  return 0;
}
