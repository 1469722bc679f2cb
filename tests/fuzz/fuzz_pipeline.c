/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the pipeline loader (src/cli/pipeline.c): YAML text through
 * sl_pipeline_load_text and, when it loads, sl_pipeline_build, which checks
 * every field, compiles expressions and creates the job (without running
 * it).  Lines of the input that start with "#set " (YAML comments) are
 * also given as --set overrides, in order, so the fuzzer reaches the
 * override grafting too.  Every failure must come with a message.  The
 * process works in its scratch directory, so relative paths stay there.
 */
#include "cli/pipeline.h"
#include "fuzz_util.h"

#define MAX_SETS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool in_dir;
  const char *dir = sl_fuzz_setup();
  if (!in_dir) {
    SL_FUZZ_CHECK(chdir(dir) == 0);
    in_dir = true;
  }
  if (size > (1u << 20)) return 0;
  char *text = malloc(size + 1);
  SL_FUZZ_CHECK(text != NULL);
  memcpy(text, data, size);
  text[size] = '\0';
  /* The --set lines, NUL-terminated copies. */
  char *sets[MAX_SETS];
  uint32_t n_sets = 0;
  for (size_t i = 0; i < size && n_sets < MAX_SETS; i++) {
    if ((i > 0 && text[i - 1] != '\n') || size - i < 5 ||
        memcmp(text + i, "#set ", 5) != 0)
      continue;
    size_t end = i + 5;
    while (end < size && text[end] != '\n' && text[end] != '\0') end++;
    sets[n_sets] = strndup(text + i + 5, end - i - 5);
    SL_FUZZ_CHECK(sets[n_sets] != NULL);
    n_sets++;
  }
  sl_pipeline_t *pl = NULL;
  char *msg = NULL;
  int rc = sl_pipeline_load_text("fuzz.yaml", text, size,
                                 (const char *const *)sets, n_sets, &pl, &msg);
  if (rc == SL_OK) {
    SL_FUZZ_CHECK(pl != NULL && msg == NULL);
    sl_job_t *job = NULL;
    rc = sl_pipeline_build(pl, NULL, &job, &msg);
    if (rc == SL_OK) {
      (void)sl_pipeline_is_unbounded(pl);
      SL_FUZZ_CHECK(sl_pipeline_name(pl) != NULL);
      sl_job_destroy(job);
    } else {
      SL_FUZZ_CHECK(msg != NULL);
    }
    sl_pipeline_destroy(pl);
  } else if (rc != SL_ENOMEM) {
    SL_FUZZ_CHECK(msg != NULL);
  }
  free(msg);
  for (uint32_t i = 0; i < n_sets; i++) free(sets[i]);
  free(text);
  return 0;
}
