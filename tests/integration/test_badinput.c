/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bad input to the sluice command: each case is a pipeline file (or a flag)
 * with one mistake, and the exact message the user must see, naming the
 * file, line, column and field.  Every case must exit with code 2 (invalid
 * pipeline or usage) except runtime failures, which exit with 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sl_test.h"

extern char **environ;

typedef struct run_s {
  int status;
  char *out;
  char *err;
} run_t;

/* Run the sluice binary with argv (NULL-terminated, without argv[0]). */
static run_t run_cli(const char *const *args) {
  char bin[4096], outp[4200], errp[4200];
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(outp, sizeof(outp), "%s/stdout.txt", sl_test_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  const char *argv[32] = {bin};
  int n = 1;
  for (; args[n - 1]; n++) argv[n] = args[n - 1];
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int rc = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) SL_TEST_FAIL("cannot run %s: %s", bin, strerror(rc));
  run_t r;
  if (waitpid(pid, &r.status, 0) != pid) SL_TEST_FAIL("waitpid failed");
  r.out = sl_test_read_file(outp, NULL);
  r.err = sl_test_read_file(errp, NULL);
  return r;
}

static void run_free(run_t *r) {
  free(r->out);
  free(r->err);
}

/* Write text to <dir>/<name> and return the path (static buffer). */
static const char *write_pipeline(const char *name, const char *text) {
  static char path[4200];
  snprintf(path, sizeof(path), "%s/%s", sl_test_dir(), name);
  sl_test_write_file(path, text);
  return path;
}

/*
 * Validate `text` and expect exit code 2 and exactly one stderr line:
 * "sluice: <path>:<want>" where want starts after the path, or, when want
 * starts with '!', "sluice: <want+1>" (no file prefix).
 */
static void expect_invalid(const char *text, const char *extra, const char *want) {
  const char *path = write_pipeline("p.yaml", text);
  const char *args[6] = {"validate", path, NULL, NULL, NULL, NULL};
  if (extra) {
    args[2] = "--set";
    args[3] = extra;
  }
  run_t r = run_cli(args);
  char expect[4096];
  if (want[0] == '!')
    snprintf(expect, sizeof(expect), "sluice: %s\n", want + 1);
  else
    snprintf(expect, sizeof(expect), "sluice: %s:%s\n", path, want);
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 2)
    SL_TEST_FAIL("expected exit 2, got status %d; stderr: %s", r.status, r.err);
  SL_ASSERT_EQ_STR(r.err, expect);
  run_free(&r);
}

#define GEN "source: {type: generator, count: 10}\n"
#define SINK "sink: {type: stdout}\n"

SL_TEST(yaml_syntax_error) {
  expect_invalid("source:\n  type: generator\n count: 3\n" SINK, NULL,
                 "3:2: syntax error: did not find expected key (while "
                 "parsing a block mapping at line 1, column 1)");
}

SL_TEST(empty_file) {
  expect_invalid("", NULL, " the pipeline file is empty");
}

SL_TEST(missing_source) {
  expect_invalid("name: x\n" SINK, NULL,
                 "1:1: missing required field 'source'");
}

/* A duration in whole milliseconds, 0, or off (docs/pipeline.md). */
SL_TEST(bad_buffer_timeout) {
  expect_invalid(GEN SINK "buffer_timeout: -1\n", NULL,
                 "3:17: buffer_timeout: must not be negative, got '-1'");
  expect_invalid(GEN SINK "buffer_timeout: 10\n", NULL,
                 "3:17: buffer_timeout: '10' has no unit; expected us, ms, "
                 "s, m or h after the number");
  expect_invalid(GEN SINK "buffer_timeout: 1500us\n", NULL,
                 "3:17: buffer_timeout: must be a whole number of "
                 "milliseconds or off, got '1500us'");
}

SL_TEST(unknown_top_level_field) {
  expect_invalid(GEN SINK "paralelism: 2\n", NULL,
                 "3:1: paralelism: unknown field; expected one of: name, "
                 "parallelism, max_parallelism, buffer_size, "
                 "channel_buffers, buffer_timeout, checkpoint, restart, "
                 "source, transforms, sink, routes");
}

SL_TEST(unknown_source_type) {
  expect_invalid("source:\n  type: kinesis\n" SINK, NULL,
                 "2:9: source.type: expected one of generator, file, kafka, "
                 "mariadb-cdc, postgres-cdc, got 'kinesis'");
}

SL_TEST(kafka_source_without_topic) {
  expect_invalid("source:\n  type: kafka\n  bootstrap_servers: h:9092\n"
                 "  schema: [{name: a, type: int64}]\n" SINK, NULL,
                 "2:3: source: missing required field 'topic'");
}

SL_TEST(kafka_source_refused_property) {
  expect_invalid("source:\n  type: kafka\n  bootstrap_servers: h:9092\n"
                 "  topic: t\n  schema: [{name: a, type: int64}]\n"
                 "  properties: {auto.offset.reset: earliest}\n" SINK, NULL,
                 "2:3: source: kafka source: property 'auto.offset.reset' "
                 "is set by sluice (use the source's own settings)");
}

SL_TEST(kafka_source_bad_start_offset) {
  expect_invalid("source:\n  type: kafka\n  bootstrap_servers: h:9092\n"
                 "  topic: t\n  schema: [{name: a, type: int64}]\n"
                 "  start: offsets\n  start_offsets: [t/0:12, t-1]\n" SINK,
                 NULL,
                 "7:18: source.start_offsets[2]: 't-1' is not "
                 "topic/partition:offset");
}

SL_TEST(count_not_integer) {
  expect_invalid("source:\n  type: generator\n  count: lots\n" SINK, NULL,
                 "3:10: source.count: expected a non-negative integer, got "
                 "'lots'");
}

SL_TEST(zero_keys) {
  expect_invalid("source:\n  type: generator\n  keys: 0\n" SINK, NULL,
                 "3:9: source.keys: must be at least 1");
}

SL_TEST(unknown_generator_column) {
  expect_invalid("source:\n  type: generator\n  columns: [key, price]\n" SINK,
                 NULL,
                 "3:18: source.columns[2]: unknown column 'price'; expected "
                 "seq, split, key, amount, ts or payload");
}

SL_TEST(file_source_without_schema) {
  expect_invalid("source:\n  type: file\n  path: in.csv\n" SINK, NULL,
                 "2:3: source: missing required field 'schema'");
}

SL_TEST(unknown_field_type) {
  expect_invalid("source:\n  type: file\n  path: in.csv\n  schema:\n"
                 "    - {name: a, type: integer}\n" SINK,
                 NULL,
                 "5:23: source.schema[1].type: unknown type 'integer'; "
                 "expected bool, int32, int64, float64, decimal(p,s), "
                 "string, bytes or timestamp");
}

SL_TEST(decimal_too_wide) {
  expect_invalid("source:\n  type: file\n  path: in.csv\n  schema:\n"
                 "    - {name: a, type: \"decimal(40,2)\"}\n" SINK,
                 NULL,
                 "5:23: source.schema[1].type: 'decimal(40,2)' is not "
                 "supported: decimal precision must be 1..18 and scale at "
                 "most the precision");
}

SL_TEST(filter_unknown_field) {
  expect_invalid(GEN "transforms:\n  - filter: \"amout > 0\"\n" SINK, NULL,
                 "3:14: transforms[1].filter: unknown field 'amout'");
}

SL_TEST(filter_not_bool) {
  expect_invalid(GEN "transforms:\n  - filter: amount + 1\n" SINK, NULL,
                 "3:13: transforms[1].filter: a filter condition must be "
                 "bool, got int64");
}

SL_TEST(project_type_error) {
  expect_invalid(GEN "transforms:\n  - project:\n      x: \"key + 'a'\"\n" SINK,
                 NULL,
                 "4:15: transforms[1].project.x: operator '+' does not apply "
                 "to int64 and string");
}

SL_TEST(aggregate_unknown_function) {
  expect_invalid(GEN "transforms:\n  - aggregate:\n      key: [key]\n"
                 "      values: {total: median(amount)}\n" SINK,
                 NULL,
                 "5:23: transforms[1].aggregate.values.total: unknown "
                 "function 'median'; expected count, sum, min, max or avg");
}

SL_TEST(aggregate_missing_key_field) {
  expect_invalid(GEN "transforms:\n  - aggregate:\n      key: [account]\n"
                 "      values: {total: sum(amount)}\n" SINK,
                 NULL,
                 "4:12: transforms[1].aggregate.key: no field 'account' in "
                 "the input");
}

SL_TEST(final_needs_bounded_source) {
  expect_invalid("source: {type: generator}\ntransforms:\n  - aggregate:\n"
                 "      key: [key]\n      values: {n: count()}\n"
                 "      emit: final\n" SINK,
                 NULL,
                 "6:13: transforms[1].aggregate.emit: 'final' needs a "
                 "bounded source (set source.count)");
}

SL_TEST(file_sink_without_path) {
  expect_invalid(GEN "sink:\n  type: file\n", NULL,
                 "3:3: sink: missing required field 'path'");
}

SL_TEST(bad_sink_format) {
  expect_invalid(GEN "sink: {type: stdout, format: xml}\n", NULL,
                 "2:30: sink.format: expected one of csv, json, got 'xml'");
}

SL_TEST(parallelism_above_max) {
  expect_invalid("parallelism: 300\n" GEN SINK, NULL,
                 "1:14: parallelism: parallelism 300 is above "
                 "max_parallelism 128");
}

SL_TEST(bad_delimiter) {
  expect_invalid(GEN "sink: {type: stdout, delimiter: ';;'}\n", NULL,
                 "2:33: sink.delimiter: must be one character other than a "
                 "quote or line end");
}

/* Issue 12: options a sink would not use were accepted and ignored. */
SL_TEST(null_sink_with_header) {
  expect_invalid(GEN "sink: {type: \"null\", header: true}\n", NULL,
                 "2:30: sink.header: a null sink writes nothing, so it has "
                 "no 'header'");
}

SL_TEST(json_sink_with_delimiter) {
  expect_invalid(GEN "sink: {type: stdout, format: json, delimiter: ';'}\n",
                 NULL, "2:47: sink.delimiter: only a CSV sink has a "
                 "'delimiter' (format is json)");
}

SL_TEST(set_without_value) {
  expect_invalid(GEN SINK, "source.count",
                 "!--set source.count: expected KEY=VALUE, e.g. "
                 "source.count=100");
}

SL_TEST(set_bad_value_is_reported_at_the_flag) {
  expect_invalid(GEN SINK, "source.count=-5",
                 "!--set source.count=-5: source.count: expected a "
                 "non-negative integer, got '-5'");
}

SL_TEST(set_missing_list_item) {
  expect_invalid(GEN "transforms:\n  - filter: key > 1\n" SINK,
                 "transforms[3].filter=true",
                 "!--set transforms[3].filter=true: transforms has no item 3");
}

/* Event time and windows.  WGEN has watermarks on the generator's ts
 * column; WIN is a tumbling window without its size. */
#define WGEN "source:\n  type: generator\n  count: 10\n" \
             "  watermarks: {time_field: ts}\n"
#define WIN "transforms:\n  - window:\n      type: tumbling\n" \
            "      time_field: ts\n      key: [key]\n" \
            "      values: {n: count()}\n"

SL_TEST(window_needs_watermarks) {
  expect_invalid(GEN WIN "      size: 1s\n" SINK, NULL,
                 "4:7: transforms[1].window: a window needs event time: "
                 "give the source a 'watermarks' section with a time_field");
}

SL_TEST(watermarks_unknown_field) {
  expect_invalid("source:\n  type: generator\n"
                 "  watermarks: {time_field: ts, delay: 5s}\n" SINK,
                 NULL,
                 "3:32: source.watermarks.delay: unknown field; expected "
                 "one of: time_field, max_out_of_orderness, strategy, "
                 "idle_timeout, interval, per_record");
}

SL_TEST(watermarks_without_time_field) {
  expect_invalid("source:\n  type: generator\n"
                 "  watermarks: {per_record: true}\n" SINK,
                 NULL,
                 "3:15: source.watermarks: missing required field "
                 "'time_field'");
}

SL_TEST(watermarks_time_field_not_a_column) {
  expect_invalid("source:\n  type: generator\n  columns: [key, amount]\n"
                 "  watermarks: {time_field: ts}\n" SINK,
                 NULL,
                 "4:28: source.watermarks.time_field: no field 'ts' in the "
                 "source");
}

SL_TEST(watermarks_time_field_not_a_time) {
  expect_invalid("source:\n  type: generator\n  columns: [split, ts]\n"
                 "  watermarks: {time_field: split}\n" SINK,
                 NULL,
                 "4:28: source.watermarks.time_field: field 'split' is "
                 "int32; an event time must be timestamp or int64 "
                 "(microseconds)");
}

SL_TEST(duration_unknown_unit) {
  expect_invalid("source:\n  type: generator\n  watermarks:\n"
                 "    time_field: ts\n    max_out_of_orderness: 5sec\n" SINK,
                 NULL,
                 "5:27: source.watermarks.max_out_of_orderness: unknown "
                 "unit 'sec' in '5sec'; expected us, ms, s, m or h");
}

SL_TEST(duration_fraction) {
  expect_invalid("source:\n  type: generator\n  watermarks:\n"
                 "    time_field: ts\n    max_out_of_orderness: 1.5s\n" SINK,
                 NULL,
                 "5:27: source.watermarks.max_out_of_orderness: '1.5s': a "
                 "duration is a whole number; use a smaller unit (1500ms, "
                 "not 1.5s)");
}

SL_TEST(monotonous_with_out_of_orderness) {
  expect_invalid("source:\n  type: generator\n  watermarks:\n"
                 "    time_field: ts\n    strategy: monotonous\n"
                 "    max_out_of_orderness: 1s\n" SINK,
                 NULL,
                 "6:27: source.watermarks.max_out_of_orderness: a "
                 "monotonous strategy allows no disorder; leave this out or "
                 "use strategy: bounded");
}

SL_TEST(watermark_interval_below_a_millisecond) {
  expect_invalid("source:\n  type: generator\n  watermarks:\n"
                 "    time_field: ts\n    interval: 500us\n" SINK,
                 NULL,
                 "5:15: source.watermarks.interval: must be a whole number "
                 "of milliseconds, got '500us'");
}

SL_TEST(window_size_without_unit) {
  expect_invalid(WGEN WIN "      size: 1000\n" SINK, NULL,
                 "11:13: transforms[1].window.size: '1000' has no unit; "
                 "expected us, ms, s, m or h after the number");
}

SL_TEST(window_zero_size) {
  expect_invalid(WGEN WIN "      size: 0s\n" SINK, NULL,
                 "11:13: transforms[1].window.size: must be greater than 0");
}

SL_TEST(window_negative_size) {
  expect_invalid(WGEN WIN "      size: -1s\n" SINK, NULL,
                 "11:13: transforms[1].window.size: must not be negative, "
                 "got '-1s'");
}

SL_TEST(window_missing_size) {
  expect_invalid(WGEN WIN SINK, NULL,
                 "7:7: transforms[1].window: missing required field 'size' "
                 "for a tumbling window");
}

SL_TEST(tumbling_window_with_slide) {
  expect_invalid(WGEN WIN "      size: 1s\n      slide: 500ms\n" SINK, NULL,
                 "12:7: transforms[1].window.slide: only a sliding window "
                 "has a slide; a tumbling window moves by its size");
}

SL_TEST(cumulate_window_step) {
  expect_invalid(WGEN WIN "      size: 1s\n" SINK,
                 "transforms[1].window.type=cumulate",
                 "7:7: transforms[1].window: missing required field 'step' "
                 "for a cumulate window");
  expect_invalid(WGEN WIN "      size: 1s\n      step: 300ms\n" SINK,
                 "transforms[1].window.type=cumulate",
                 "12:13: transforms[1].window.step: must divide the size: a "
                 "cumulate window grows by its step up to its size");
  expect_invalid(WGEN WIN "      size: 1s\n      step: 500ms\n" SINK, NULL,
                 "12:7: transforms[1].window.step: only a cumulate window "
                 "has a step");
}

SL_TEST(session_window_without_gap) {
  expect_invalid(WGEN WIN SINK, "transforms[1].window.type=session",
                 "7:7: transforms[1].window: missing required field 'gap' "
                 "for a session window");
}

SL_TEST(window_unknown_field) {
  expect_invalid(WGEN WIN "      size: 1s\n      every: 1s\n" SINK, NULL,
                 "12:7: transforms[1].window.every: unknown field; expected "
                 "one of: type, time_field, size, slide, gap, step, offset, "
                 "allowed_lateness, key, values, late_sink");
}

SL_TEST(window_unknown_type) {
  expect_invalid(WGEN WIN "      size: 1s\n" SINK,
                 "transforms[1].window.type=hopping",
                 "!--set transforms[1].window.type=hopping: "
                 "transforms[1].window.type: expected one of tumbling, "
                 "sliding, session, cumulate, got 'hopping'");
}

SL_TEST(window_bad_duration_from_set) {
  expect_invalid(WGEN WIN "      size: 1s\n" SINK,
                 "transforms[1].window.size=5x",
                 "!--set transforms[1].window.size=5x: "
                 "transforms[1].window.size: unknown unit 'x' in '5x'; "
                 "expected us, ms, s, m or h");
}

SL_TEST(window_offset_not_below_size) {
  expect_invalid(WGEN WIN "      size: 1s\n      offset: 2s\n" SINK, NULL,
                 "12:15: transforms[1].window.offset: must be less than the "
                 "window's size");
}

SL_TEST(window_time_field_missing) {
  expect_invalid(WGEN WIN "      size: 1s\n" SINK,
                 "transforms[1].window.time_field=event_ts",
                 "!--set transforms[1].window.time_field=event_ts: "
                 "transforms[1].window.time_field: no field 'event_ts' in "
                 "the input");
}

SL_TEST(window_min_of_text) {
  expect_invalid("source:\n  type: generator\n  count: 10\n"
                 "  columns: [key, ts, payload]\n"
                 "  watermarks: {time_field: ts}\n"
                 "transforms:\n  - window:\n      type: tumbling\n"
                 "      time_field: ts\n      size: 1s\n      key: key\n"
                 "      values: {first: min(payload)}\n" SINK,
                 NULL,
                 "12:23: transforms[1].window.values.first: min(payload) "
                 "over a window takes numeric, bool or timestamp fields, "
                 "not string");
}

SL_TEST(late_sink_without_path) {
  expect_invalid(WGEN WIN "      size: 1s\n      late_sink: {type: file}\n"
                 SINK, NULL,
                 "12:18: transforms[1].window.late_sink: missing required "
                 "field 'path'");
}

/* Flags and files outside the pipeline text. */
static void expect_usage(const char *const *args, const char *want) {
  run_t r = run_cli(args);
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 2)
    SL_TEST_FAIL("expected exit 2, got status %d; stderr: %s", r.status, r.err);
  SL_ASSERT_EQ_STR(r.err, want);
  run_free(&r);
}

SL_TEST(bad_parallelism_flag) {
  const char *path = write_pipeline("p.yaml", GEN SINK);
  const char *args[] = {"run", path, "--parallelism", "many", NULL};
  expect_usage(args, "sluice: --parallelism: expected a positive integer up "
                     "to 32768, got 'many'\n");
}

SL_TEST(unknown_option) {
  const char *args[] = {"run", "x.yaml", "--fast", NULL};
  expect_usage(args, "sluice: unknown option '--fast' (see sluice --help)\n");
}

SL_TEST(missing_pipeline_file) {
  char path[4200];
  snprintf(path, sizeof(path), "%s/none.yaml", sl_test_dir());
  const char *args[] = {"validate", path, NULL};
  char want[4400];
  snprintf(want, sizeof(want),
           "sluice: cannot open pipeline file '%s': No such file or "
           "directory\n", path);
  expect_usage(args, want);
}

/* A pipeline that is valid but whose input does not exist fails when it
 * runs: exit 1, and the message names the source and the path. */
SL_TEST(missing_input_file_at_run) {
  char in[4200], text[8800];
  snprintf(in, sizeof(in), "%s/missing.csv", sl_test_dir());
  snprintf(text, sizeof(text),
           "source:\n  type: file\n  uid: orders\n  path: %s\n"
           "  schema: [{name: a, type: int64}]\n" SINK, in);
  const char *path = write_pipeline("p.yaml", text);
  const char *args[] = {"run", path, "--quiet", NULL};
  run_t r = run_cli(args);
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 1)
    SL_TEST_FAIL("expected exit 1, got status %d; stderr: %s", r.status, r.err);
  char want[9000];
  snprintf(want, sizeof(want),
           "sluice: job 'pipeline' failed: source 'orders': cannot open "
           "input '%s': No such file or directory\n", in);
  SL_ASSERT_EQ_STR(r.err, want);
  run_free(&r);
}

/* A malformed record stops the job with the file, line and column. */
SL_TEST(malformed_record_at_run) {
  char in[4200], text[8800];
  snprintf(in, sizeof(in), "%s/in.csv", sl_test_dir());
  sl_test_write_file(in, "1,2\n3,x\n");
  snprintf(text, sizeof(text),
           "parallelism: 1\nsource:\n  type: file\n  uid: orders\n"
           "  path: %s\n"
           "  schema: [{name: a, type: int64}, {name: b, type: int64}]\n"
           "sink: {type: \"null\"}\n", in);
  const char *path = write_pipeline("p.yaml", text);
  const char *args[] = {"run", path, "--quiet", NULL};
  run_t r = run_cli(args);
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 1)
    SL_TEST_FAIL("expected exit 1, got status %d; stderr: %s", r.status, r.err);
  char want[9000];
  snprintf(want, sizeof(want),
           "sluice: job 'pipeline' failed: operator 'orders' (subtask 1 of "
           "1): file '%s' line 2: column 2 (b): expected int64, got 'x'\n",
           in);
  SL_ASSERT_EQ_STR(r.err, want);
  run_free(&r);
}

/* ------------------------------------------------------------------ */
/* The shape of the document: aliases, nesting, repeated keys, documents
 * after the first, and malformed --set keys. */

SL_TEST(set_alias_cycle) {
  expect_invalid(GEN SINK, "source.columns=&a [key, *a]",
                 "!--set source.columns=&a [key, *a]: an alias refers to a "
                 "node that contains it (an alias cycle)");
}

SL_TEST(file_alias_cycle) {
  expect_invalid("source: &s {type: generator, watermarks: *s}\n" SINK, NULL,
                 "1:9: an alias refers to a node that contains it (an alias "
                 "cycle)");
}

/* Ten nested lists of ten aliases: 10^10 nodes once expanded. */
SL_TEST(alias_expansion_is_bounded) {
  char text[2048] = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; i++) {
    size_t n = strlen(text);
    snprintf(text + n, sizeof(text) - n, "a%d: &a%d [", i, i);
    for (int k = 0; k < 10; k++) {
      n = strlen(text);
      snprintf(text + n, sizeof(text) - n, "%s*a%d", k ? ", " : "", i - 1);
    }
    strncat(text, "]\n", sizeof(text) - strlen(text) - 1);
  }
  strncat(text, GEN SINK, sizeof(text) - strlen(text) - 1);
  expect_invalid(text, NULL,
                 "5:5: with its aliases expanded the document has more than "
                 "100000 nodes");
}

SL_TEST(nesting_is_bounded) {
  char text[512] = "source: ";
  for (int i = 0; i < 70; i++)
    strncat(text, "[", sizeof(text) - strlen(text) - 1);
  for (int i = 0; i < 70; i++)
    strncat(text, "]", sizeof(text) - strlen(text) - 1);
  strncat(text, "\n" SINK, sizeof(text) - strlen(text) - 1);
  expect_invalid(text, NULL, "1:73: nested more than 64 levels deep");
}

/* A second transforms list used to replace the first silently. */
SL_TEST(duplicate_top_level_key) {
  char want[4400];
  snprintf(want, sizeof(want),
           "!%s/p.yaml:5:1: transforms: duplicate key; it is first given at "
           "%s/p.yaml:2:1", sl_test_dir(), sl_test_dir());
  expect_invalid("source: {type: generator, count: 10}\n"
                 "transforms:\n  - filter: key > 0\n" SINK "transforms: []\n",
                 NULL, want);
}

SL_TEST(duplicate_nested_key) {
  char want[4400];
  snprintf(want, sizeof(want),
           "!%s/p.yaml:4:20: transforms[1].aggregate.emit: duplicate key; "
           "it is first given at %s/p.yaml:4:7", sl_test_dir(),
           sl_test_dir());
  expect_invalid(GEN "transforms:\n"
                 "  - aggregate: {key: key, values: {n: count()},\n"
                 "      emit: final, emit: updates}\n" SINK,
                 NULL, want);
}

SL_TEST(set_duplicate_key_in_value) {
  expect_invalid(GEN SINK, "source={type: generator, count: 1, count: 2}",
                 "!--set source={type: generator, count: 1, count: 2}: "
                 "source.count: duplicate key in the value");
}

SL_TEST(second_document) {
  expect_invalid(GEN SINK "---\nname: other\n", NULL,
                 "3:1: a second YAML document; a pipeline file holds one "
                 "document");
}

SL_TEST(set_key_with_trailing_dot) {
  expect_invalid(GEN SINK, "source.count.=abc",
                 "!--set source.count.=abc: malformed key 'source.count.'; "
                 "expected names joined by '.', each with an optional "
                 "1-based [N], as in transforms[1].filter");
}

SL_TEST(set_key_with_empty_name) {
  expect_invalid(GEN SINK, "source..count=1",
                 "!--set source..count=1: malformed key 'source..count'; "
                 "expected names joined by '.', each with an optional "
                 "1-based [N], as in transforms[1].filter");
}

SL_TEST(set_key_with_text_after_index) {
  expect_invalid(GEN "transforms:\n  - filter: key > 1\n" SINK,
                 "transforms[1]filter=true",
                 "!--set transforms[1]filter=true: malformed key "
                 "'transforms[1]filter'; expected names joined by '.', each "
                 "with an optional 1-based [N], as in transforms[1].filter");
}

/* ------------------------------------------------------------------ */
/* Files that are not pipeline files. */

SL_TEST(pipeline_file_is_a_device) {
  const char *args[] = {"validate", "/dev/zero", NULL};
  expect_usage(args, "sluice: pipeline file '/dev/zero' is a device or a "
                     "socket, not a regular file or a pipe\n");
}

SL_TEST(pipeline_file_is_a_directory) {
  const char *args[] = {"validate", sl_test_dir(), NULL};
  char want[4400];
  snprintf(want, sizeof(want), "sluice: pipeline file '%s' is a directory, "
           "not a regular file or a pipe\n", sl_test_dir());
  expect_usage(args, want);
}

SL_TEST(pipeline_file_above_1_mib) {
  char path[4200];
  snprintf(path, sizeof(path), "%s/big.yaml", sl_test_dir());
  FILE *f = fopen(path, "w");
  SL_ASSERT_TRUE(f != NULL);
  fputs(GEN SINK, f);
  for (int i = 0; i < 1 << 20; i += 16) fputs("# a comment ...\n", f);
  SL_ASSERT_EQ_INT(fclose(f), 0);
  const char *args[] = {"validate", path, NULL};
  char want[4400];
  snprintf(want, sizeof(want), "sluice: pipeline file '%s' has %d bytes; the "
           "limit is 1048576 (1 MiB)\n", path,
           (int)strlen(GEN SINK) + (1 << 20));
  expect_usage(args, want);
}

/* ------------------------------------------------------------------ */
/* Job names, checkpoints and durations. */

SL_TEST(job_name_escaping_the_checkpoint_dir) {
  expect_invalid("name: ../../x\n" GEN SINK, NULL,
                 "1:7: name: '../../x' is not a valid job name; use 1 to 100 "
                 "letters, digits, '.', '_' or '-', not starting with '.'");
}

SL_TEST(checkpoints_need_a_name) {
  expect_invalid("checkpoint: {dir: ckpt}\n" GEN SINK, NULL,
                 "1:13: checkpoint: a pipeline with checkpoints needs a "
                 "'name'; its checkpoints are kept in <dir>/<name>, so "
                 "pipelines that share a dir need different names");
}

SL_TEST(checkpoint_dir_empty) {
  expect_invalid("name: x\ncheckpoint: {dir: ''}\n" GEN SINK, NULL,
                 "2:19: checkpoint.dir: must not be empty");
}

/* The old maximum, INT64_MAX / 10^6 ms, overflowed in nanoseconds. */
SL_TEST(checkpoint_interval_above_the_maximum) {
  expect_invalid("name: x\ncheckpoint: {dir: c, interval_ms: 9223372036854}\n"
                 GEN SINK, NULL,
                 "2:35: checkpoint.interval_ms: 9223372036854 is too large; "
                 "the maximum is 31536000000");
}

SL_TEST(checkpoint_timeout_above_the_maximum) {
  expect_invalid("name: x\ncheckpoint: {dir: c, timeout_ms: 31536000001}\n"
                 GEN SINK, NULL,
                 "2:34: checkpoint.timeout_ms: 31536000001 is too large; the "
                 "maximum is 31536000000");
}

SL_TEST(watermark_idle_timeout_above_the_maximum) {
  expect_invalid("source:\n  type: generator\n  watermarks:\n"
                 "    time_field: ts\n    idle_timeout: 8761h\n" SINK,
                 NULL,
                 "5:19: source.watermarks.idle_timeout: '8761h' is too large; "
                 "the maximum is 8760h (a year)");
}

/* The same limits in the C API (sl_job.h). */
static char *job_create_err(const sl_job_config_t *cfg) {
  sl_job_t *job = NULL;
  sl_error_t *err = NULL;
  int rc = sl_job_create(cfg, &job, &err);
  SL_ASSERT_EQ_INT(rc, SL_EINVAL);
  SL_ASSERT_TRUE(job == NULL && err != NULL);
  char *msg = strdup(sl_error_message(err));
  sl_error_destroy(err);
  return msg;
}

SL_TEST(api_limits_of_checkpoint_durations_and_job_names) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.checkpoint.dir = sl_test_dir();
  cfg.checkpoint.interval_ms = INT64_MAX / 1000000;
  char *msg = job_create_err(&cfg);
  SL_ASSERT_EQ_STR(msg, "checkpoint intervals and timeouts must be at most "
                        "31536000000 ms (one year)");
  free(msg);
  cfg.checkpoint.interval_ms = 0;
  cfg.checkpoint.timeout_ms = SL_MAX_DURATION_MS + 1;
  msg = job_create_err(&cfg);
  SL_ASSERT_EQ_STR(msg, "checkpoint intervals and timeouts must be at most "
                        "31536000000 ms (one year)");
  free(msg);
  cfg.checkpoint.timeout_ms = 0;
  const char *bad[] = {"../../x", "a/b", ".hidden", "", "a b"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    cfg.name = bad[i];
    msg = job_create_err(&cfg);
    char want[256];
    snprintf(want, sizeof(want), "job name '%s' cannot name a checkpoint "
             "directory: use 1 to 100 letters, digits, '.', '_' or '-', not "
             "starting with '.'", bad[i]);
    SL_ASSERT_EQ_STR(msg, want);
    free(msg);
  }
  /* Without checkpoints a name is only a label. */
  cfg.checkpoint.dir = NULL;
  cfg.name = "a b";
  sl_job_t *job = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_create(&cfg, &job, &err), err);
  sl_job_destroy(job);
}

/*
 * Issue 12: a sink path equal to the source path truncated the input to 0
 * bytes (exit 0).  The same file by another spelling, a file inside an input
 * directory, and a subtask file of a parallel sink are refused as well; the
 * input is left as it was.
 */
SL_TEST(sink_path_is_source_path) {
  char in[4200], dir[4200], text[20000], want[20000];
  snprintf(in, sizeof(in), "%s/in.csv", sl_test_dir());
  snprintf(dir, sizeof(dir), "%s/indir", sl_test_dir());
  sl_test_write_file(in, "1,2\n3,4\n");
  SL_ASSERT_EQ_INT(mkdir(dir, 0755), 0);
  static const char *const sinks[][2] = {
      {"%s/in.csv", NULL},
      {"%s/./in.csv", NULL},
      {"%s/indir/out.csv", NULL},
      {"%s/in.csv", "sink.parallelism=2"}, /* writes in-0.csv, in-1.csv */
  };
  char in1[4200];
  snprintf(in1, sizeof(in1), "%s/in-1.csv", sl_test_dir());
  for (size_t i = 0; i < sizeof(sinks) / sizeof(sinks[0]); i++) {
    char out[4300], src[4300];
    snprintf(out, sizeof(out), sinks[i][0], sl_test_dir());
    snprintf(src, sizeof(src), "%s", i == 2 ? dir : i == 3 ? in1 : in);
    if (i == 3) sl_test_write_file(in1, "5,6\n");
    snprintf(text, sizeof(text),
             "source:\n  type: file\n  path: %s\n"
             "  schema: [{name: a, type: int64}, {name: b, type: int64}]\n"
             "sink:\n  type: file\n  path: %s\n", src, out);
    const char *path = write_pipeline("p.yaml", text);
    const char *args[] = {"run", path, "--quiet", NULL, NULL, NULL};
    if (sinks[i][1]) {
      args[3] = "--set";
      args[4] = sinks[i][1];
    }
    run_t r = run_cli(args);
    if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 2)
      SL_TEST_FAIL("case %zu: expected exit 2, got status %d; stderr: %s", i,
                   r.status, r.err);
    snprintf(want, sizeof(want),
             "sluice: %s:7:9: sink.path: output file '%s' is %s '%s' of the "
             "source; writing it would destroy the input\n",
             path, i == 3 ? in1 : out,
             i == 2 ? "in the input directory" : "the input file", src);
    SL_ASSERT_EQ_STR(r.err, want);
    run_free(&r);
  }
  size_t len;
  char *text_in = sl_test_read_file(in, &len);
  SL_ASSERT_EQ_STR(text_in, "1,2\n3,4\n");
  free(text_in);
  text_in = sl_test_read_file(in1, &len);
  SL_ASSERT_EQ_STR(text_in, "5,6\n");
  free(text_in);
}

#define FILESRC "source:\n  type: file\n  path: in.csv\n" \
                "  schema: [{name: a, type: int64}]\n"

SL_TEST(monitor_interval_zero) {
  expect_invalid(FILESRC "  monitor_interval: 0\n" SINK, NULL,
                 "5:21: source.monitor_interval: must be greater than 0");
}

SL_TEST(monitor_interval_without_unit) {
  expect_invalid(FILESRC "  monitor_interval: 5\n" SINK, NULL,
                 "5:21: source.monitor_interval: '5' has no unit; expected "
                 "us, ms, s, m or h after the number");
}

SL_TEST(monitor_interval_below_a_millisecond) {
  expect_invalid(FILESRC "  monitor_interval: 1500us\n" SINK, NULL,
                 "5:21: source.monitor_interval: must be a whole number of "
                 "milliseconds, got '1500us'");
}

SL_TEST(monitor_interval_on_a_generator) {
  expect_invalid("source:\n  type: generator\n  monitor_interval: 1s\n" SINK,
                 NULL,
                 "3:3: source.monitor_interval: unknown field; expected one "
                 "of: type, uid, parallelism, seed, count, rate, keys, skew, "
                 "zipf_exponent, payload_size, splits, columns, "
                 "start_time_us, time_step_us, watermarks");
}
