/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Watermark arithmetic: generation per source split (largest event time
 * seen minus the allowed out-of-orderness), idleness of splits, and the
 * minimum over the inputs of a task.  The runtime keeps the state of each
 * input (runtime/runtime.h, sl_channel_t.wm and is_idle) and sends and
 * applies watermarks (runtime/task.c, "Event time"; runtime/source_out.c);
 * the rules live here.  See README.md and docs/event-time.md.
 *
 * A source with a watermark strategy tracks, per assigned split, the
 * largest event time seen and whether the split is idle or finished; its
 * watermark is the minimum over the active splits of (largest - delay - 1).
 * Other tasks keep the newest watermark of each input channel and take the
 * minimum over the inputs that are neither idle nor finished.  When every
 * input (split) is idle the task tells its receivers it is idle, so that it
 * does not hold them back; the first watermark or record makes it active
 * again.  Advancing the task's watermark fires the event-time timers of
 * the chain in chain order (records a timer emits reach the next operator
 * before the watermark does), then sends the watermark on every output.
 * At the end of the input the watermark becomes SL_WATERMARK_MAX.
 * Watermarks are not part of checkpoints: after a restore they start again
 * from SL_WATERMARK_MIN and the sources regenerate them.
 */
#include "time/time.h"

void sl__wm_min_init(sl_wm_min_t *m) {
  m->min = SL_WATERMARK_MAX;
  m->idle_max = SL_WATERMARK_MIN;
  m->n_active = 0;
  m->n_open = 0;
}

void sl__wm_min_add(sl_wm_min_t *m, int64_t wm, bool is_idle) {
  m->n_open++;
  if (wm > m->idle_max) m->idle_max = wm;
  if (is_idle) return;
  m->n_active++;
  if (wm < m->min) m->min = wm;
}

void sl__wmgen_combine(const sl_wmgen_t *g, uint32_t n_splits,
                       sl_wm_min_t *out) {
  int64_t delay = g->cfg->strategy == SL_WM_MONOTONOUS
                      ? 0 : g->cfg->max_out_of_orderness_us;
  sl__wm_min_init(out);
  for (uint32_t k = 0; k < n_splits; k++) {
    const sl_wm_split_t *sp = &g->splits[k];
    if (sp->is_finished) continue;
    int64_t v = sp->max_ts;
    if (v != SL_WATERMARK_MIN) {
      if (__builtin_sub_overflow(v, delay, &v) ||
          __builtin_sub_overflow(v, 1, &v))
        v = SL_WATERMARK_MIN;
    }
    sl__wm_min_add(out, v, sp->is_idle);
  }
}

bool sl__wmgen_tick(sl_wmgen_t *g, uint32_t n_splits, int64_t now) {
  if (now < g->next_ns) return false;
  const sl_watermark_config_t *c = g->cfg;
  for (uint32_t k = 0; k < n_splits; k++) {
    sl_wm_split_t *sp = &g->splits[k];
    if (sp->n_records != sp->n_seen || sp->active_ns == 0) {
      sp->n_seen = sp->n_records;
      sp->active_ns = now;
      sp->is_idle = false;
    } else if (c->idle_timeout_ms > 0 &&
               now - sp->active_ns >= c->idle_timeout_ms * 1000000) {
      sp->is_idle = true;
    }
  }
  g->next_ns = now + (c->interval_ms > 0 ? c->interval_ms : 200) * 1000000;
  return true;
}

bool sl__wmgen_on_record(sl_wmgen_t *g, int64_t ts) {
  sl_wm_split_t *sp = &g->splits[g->cur];
  if (ts > sp->max_ts) sp->max_ts = ts;
  sp->n_records++;
  if (!g->cfg->per_record) return false;
  sp->is_idle = false;
  return true;
}
