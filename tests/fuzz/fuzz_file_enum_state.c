/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the monitored file source's enumerator state decoder (the
 * bytes a checkpoint's _metadata keeps for it, given back to the
 * enumerator's create on a restore; src/connectors/file/file_source.c),
 * through the public API only.  A state that decodes must survive a round
 * trip: snapshotted, decoded again and snapshotted, the bytes are equal.
 * A state that does not decode is an error with a message, never a crash.
 */
#include "fuzz_util.h"

static const sl_source_vt_t *g_vt;
static void *g_ctx;

static void setup(void) {
  if (g_vt) return;
  sl_fuzz_setup();
  sl_field_t f[] = {{"a", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *schema = NULL;
  SL_FUZZ_CHECK(sl_schema_create(f, 1, &schema, NULL) == SL_OK);
  const char *paths[] = {"in"};
  sl_file_source_config_t cfg = {0};
  cfg.paths = paths;
  cfg.n_paths = 1;
  cfg.schema = schema;
  cfg.monitor_interval_ms = 1;
  SL_FUZZ_CHECK(sl_file_source_create(&cfg, &g_vt, &g_ctx, NULL) == SL_OK);
  SL_FUZZ_CHECK(g_vt->enumerator != NULL);
  sl_schema_unref(schema);
}

static int decode(const uint8_t *p, size_t n, void **out, sl_error_t **err) {
  sl_enum_init_t init = {3, p, n, 9};
  return g_vt->enumerator->create(g_ctx, &init, out, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  if (size > (1u << 20)) return 0;
  /* The state in its own allocation, so reads past it are seen. */
  uint8_t *p = malloc(size ? size : 1);
  SL_FUZZ_CHECK(p != NULL);
  if (size) memcpy(p, data, size);
  void *en = NULL;
  sl_error_t *err = NULL;
  int rc = decode(p, size, &en, &err);
  if (rc != SL_OK) {
    SL_FUZZ_CHECK(err != NULL && sl_error_message(err)[0] != '\0');
    sl_error_destroy(err);
    free(p);
    return 0;
  }
  const sl_enum_vt_t *evt = g_vt->enumerator;
  sl_bytes_t s1, s2;
  sl_bytes_init(&s1);
  sl_bytes_init(&s2);
  SL_FUZZ_CHECK(evt->snapshot(en, 10, &s1) == SL_OK);
  void *en2 = NULL;
  SL_FUZZ_CHECK(decode(s1.data, s1.len, &en2, NULL) == SL_OK);
  SL_FUZZ_CHECK(evt->snapshot(en2, 11, &s2) == SL_OK);
  SL_FUZZ_CHECK(s1.len == s2.len && memcmp(s1.data, s2.data, s1.len) == 0);
  evt->close(en);
  evt->close(en2);
  sl_bytes_close(&s1);
  sl_bytes_close(&s2);
  free(p);
  return 0;
}
