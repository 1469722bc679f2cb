/* SPDX-License-Identifier: Apache-2.0 */
/*
 * State compatibility through the sluice command: a pipeline runs until
 * its first checkpoint commits and is killed there (SL_INJECT
 * coordinator.after_metadata_rename=kill:1, no timing involved); then its
 * file is edited under the same uids — an aggregate value added, values
 * reordered, count -> avg, a window's kind — and `sluice run --resume`
 * must exit 1 with the exact message naming the operator, the state and
 * both layouts, leaving the checkpoint intact: the unedited file then
 * resumes from it and exits 0.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sl_test.h"


/* Run `sluice run <pipeline> --resume --quiet [--set ...]`, optionally
 * with SL_INJECT; stderr goes to <test dir>/stderr.txt.  Returns the wait
 * status. */
static int run_sluice(const char *pipeline, const char *inject,
                      const char *set) {
  char bin[4096], errp[4300];
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  const char *argv[] = {bin, "run", pipeline, "--resume", "--quiet",
                        set ? "--set" : NULL, set, NULL};
  return sl_test_wait(
      sl_test_spawn(argv, inject, errp, SL_TEST_SPAWN_NO_STDOUT));
}

static char *read_stderr(void) {
  char p[4300];
  snprintf(p, sizeof(p), "%s/stderr.txt", sl_test_dir());
  FILE *f = fopen(p, "rb");
  SL_ASSERT_TRUE(f != NULL);
  static char buf[65536];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* A generator job, rate-limited so that the first checkpoint (every 20 ms)
 * commits long before its input ends; the resumed runs lift the rate. */
static void write_pipeline(char *path, size_t size, const char *name,
                           const char *transform) {
  snprintf(path, size, "%s/%s.yaml", sl_test_dir(), name);
  char text[8192];
  snprintf(text, sizeof(text),
           "name: compat\nparallelism: 1\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 20}\n"
           "source:\n  type: generator\n  uid: gen\n  seed: 7\n"
           "  count: 200000\n  keys: 50\n  splits: 1\n  rate: 20000\n"
           "  columns: [key, amount, ts]\n  time_step_us: 1000\n"
           "  watermarks: {time_field: ts, max_out_of_orderness: 10ms}\n"
           "transforms:\n%s"
           "sink: {type: file, path: %s/out.csv}\n",
           sl_test_dir(), transform, sl_test_dir());
  sl_test_write_file(path, text);
}

static void expect_exit(int st, int code, const char *what) {
  if (!WIFEXITED(st) || WEXITSTATUS(st) != code)
    SL_TEST_FAIL("%s: expected exit %d, got status %d; stderr:\n%s", what,
                 code, st, read_stderr());
}

/* Checkpoint 1 of the original file, then the edited file fails with
 * `want` (exit 1), and the original resumes from the intact checkpoint. */
static void check_edit(const char *original, const char *edited,
                       const char *want) {
  char p0[4300], p1[4300];
  write_pipeline(p0, sizeof(p0), "original", original);
  int st = run_sluice(p0, "coordinator.after_metadata_rename=kill:1", NULL);
  if (!WIFSIGNALED(st))
    SL_TEST_FAIL("the first run was not killed at its first checkpoint "
                 "(status %d); stderr:\n%s", st, read_stderr());
  char meta[4400];
  snprintf(meta, sizeof(meta), "%s/ckpt/compat/chk-1/_metadata",
           sl_test_dir());
  struct stat sb;
  SL_ASSERT_EQ_INT(stat(meta, &sb), 0);

  write_pipeline(p1, sizeof(p1), "edited", edited);
  st = run_sluice(p1, NULL, "source.rate=0");
  expect_exit(st, 1, "resume of the edited pipeline");
  const char *err = read_stderr();
  if (strstr(err, want) == NULL)
    SL_TEST_FAIL("expected in stderr:\n%s\ngot:\n%s", want, err);

  /* The checkpoint is intact and still the newest. */
  SL_ASSERT_EQ_INT(stat(meta, &sb), 0);
  char chk2[4400];
  snprintf(chk2, sizeof(chk2), "%s/ckpt/compat/chk-2", sl_test_dir());
  SL_ASSERT_TRUE(stat(chk2, &sb) != 0);
  st = run_sluice(p0, NULL, "source.rate=0");
  expect_exit(st, 0, "resume of the original pipeline");
}

#define AGG(values)                                                         \
  "  - aggregate:\n      key: [key]\n      values: " values "\n"           \
  "      emit: final\n    uid: totals\n"
#define MSG_HEAD                                                            \
  "sluice: job 'compat' failed: operator 'totals' (subtask 1 of 1): "      \
  "state 'accumulator' does not match the checkpoint: the checkpoint "     \
  "holds version 1 with layout [key key:int64; sum(amount):int64, "        \
  "count():int64], the operator declares version 1 with layout "
#define MSG_TAIL                                                            \
  "; sluice cannot migrate state yet, so resume with the definition the "  \
  "checkpoint was taken with\n"

SL_TEST(aggregate_value_added_exits_1) {
  check_edit(AGG("{total: sum(amount), n: count()}"),
             AGG("{total: sum(amount), n: count(), top: max(amount)}"),
             MSG_HEAD "[key key:int64; sum(amount):int64, count():int64, "
                      "max(amount):int64]" MSG_TAIL);
}

SL_TEST(aggregate_values_reordered_exits_1) {
  check_edit(AGG("{total: sum(amount), n: count()}"),
             AGG("{n: count(), total: sum(amount)}"),
             MSG_HEAD "[key key:int64; count():int64, sum(amount):int64]"
                      MSG_TAIL);
}

SL_TEST(aggregate_count_to_avg_exits_1) {
  check_edit(AGG("{total: sum(amount), n: count()}"),
             AGG("{total: sum(amount), n: avg(amount)}"),
             MSG_HEAD "[key key:int64; sum(amount):int64, avg(amount):bytes]"
                      MSG_TAIL);
}

#define WIN(spec)                                                           \
  "  - window:\n      " spec "\n      time_field: ts\n"                     \
  "      key: [key]\n      values: {n: count(), total: sum(amount)}\n"      \
  "    uid: per-second\n"

SL_TEST(window_kind_changed_exits_1) {
  check_edit(WIN("type: tumbling\n      size: 1s"),
             WIN("type: session\n      gap: 1s"),
             "sluice: job 'compat' failed: operator 'per-second' (subtask 1 "
             "of 1): state 'window.acc' does not match the checkpoint: the "
             "checkpoint holds version 2 with layout [per key: slices of "
             "1000000 us (offset 0 us), tumbling 1000000 us; "
             "key key:int64; count():int64, sum(amount):int64], the "
             "operator declares version 1 with layout [session; key "
             "key:int64; count():int64, sum(amount):int64]" MSG_TAIL);
}
