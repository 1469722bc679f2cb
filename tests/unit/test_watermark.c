/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the watermark arithmetic (src/time/watermark.c): the minimum
 * over active inputs, the flush of the largest when every input is idle,
 * finished inputs left out; a source's watermark per split (delay, the
 * saturation at the minimum), idleness after idle_timeout_ms without
 * records, and per-record emission.
 */
#include "time/time.h"
#include "sl_test.h"

SL_TEST(wm_min_over_active_inputs) {
  sl_wm_min_t m;
  sl__wm_min_init(&m);
  sl__wm_min_add(&m, 50, false);
  sl__wm_min_add(&m, 20, false);
  sl__wm_min_add(&m, 90, true); /* idle: not in the minimum */
  SL_ASSERT_EQ_INT(m.n_active, 2);
  SL_ASSERT_EQ_INT(m.n_open, 3);
  SL_ASSERT_EQ_INT(m.min, 20);
  SL_ASSERT_EQ_INT(m.idle_max, 90);
}

SL_TEST(wm_min_all_idle_or_none) {
  sl_wm_min_t m;
  sl__wm_min_init(&m);
  SL_ASSERT_EQ_INT(m.n_open, 0);
  SL_ASSERT_TRUE(m.idle_max == SL_WATERMARK_MIN);
  sl__wm_min_add(&m, 7, true);
  sl__wm_min_add(&m, 3, true);
  SL_ASSERT_EQ_INT(m.n_active, 0);
  SL_ASSERT_EQ_INT(m.idle_max, 7);
}

SL_TEST(wmgen_splits_delay_and_idleness) {
  sl_watermark_config_t cfg;
  sl_watermark_config_init(&cfg);
  cfg.strategy = SL_WM_BOUNDED;
  cfg.max_out_of_orderness_us = 10;
  cfg.idle_timeout_ms = 5;
  cfg.interval_ms = 1;
  sl_wm_split_t sp[3];
  memset(sp, 0, sizeof(sp));
  for (int i = 0; i < 3; i++) sp[i].max_ts = SL_WATERMARK_MIN;
  sl_wmgen_t g = {&cfg, 0, sp, 0, 0};
  g.cur = 0;
  SL_ASSERT_TRUE(!sl__wmgen_on_record(&g, 100));
  g.cur = 1;
  SL_ASSERT_TRUE(!sl__wmgen_on_record(&g, INT64_MIN + 3)); /* saturates */
  sp[2].is_finished = true;
  sl_wm_min_t m;
  sl__wmgen_combine(&g, 3, &m);
  SL_ASSERT_EQ_INT(m.n_open, 2);
  SL_ASSERT_TRUE(m.min == SL_WATERMARK_MIN);
  SL_ASSERT_EQ_INT(m.idle_max, 100 - 10 - 1);
  /* First tick: both splits active; no records for 5 ms: split 1 idle. */
  int64_t ms = 1000000;
  SL_ASSERT_TRUE(sl__wmgen_tick(&g, 3, 10 * ms));
  SL_ASSERT_TRUE(!sl__wmgen_tick(&g, 3, 10 * ms)); /* not due yet */
  g.cur = 0;
  SL_ASSERT_TRUE(!sl__wmgen_on_record(&g, 200));
  SL_ASSERT_TRUE(sl__wmgen_tick(&g, 3, 15 * ms));
  SL_ASSERT_TRUE(!sp[0].is_idle);
  SL_ASSERT_TRUE(sp[1].is_idle);
  sl__wmgen_combine(&g, 3, &m);
  SL_ASSERT_EQ_INT(m.n_active, 1);
  SL_ASSERT_EQ_INT(m.min, 200 - 10 - 1);
  /* Per record: a record makes its split active and asks for emission. */
  cfg.per_record = true;
  g.cur = 1;
  SL_ASSERT_TRUE(sl__wmgen_on_record(&g, 150));
  SL_ASSERT_TRUE(!sp[1].is_idle);
}
