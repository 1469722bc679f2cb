/* SPDX-License-Identifier: Apache-2.0 */
/*
 * State compatibility on restore.  A state's schema is its kind, its
 * serializer version and its layout (a human-readable description of the
 * value bytes, e.g. "key region:string; sum(amount):int64, count():int64"
 * for the keyed aggregate); its fingerprint is a 64-bit hash of the three.
 * The state file stores all of them per state (docs/checkpoint-format.md),
 * and when an operator declares a state that was restored,
 * sl__state_check_compat() compares the checkpoint's schema with the
 * declaration before the operator can read any value: a difference is an
 * error naming the state and both layouts (the caller's prefix names the
 * operator), fatal so that no restart retries it.  sluice does not migrate
 * state yet (savepoints will).  See README.md.
 */
#include <stdio.h>

#include <xxhash.h>

#include "state/state.h"

static const char *const kind_names[] = {"?", "value", "list", "map",
                                         "reducing"};

static const char *kind_name(sl_state_kind_t kind) {
  return kind >= SL_STATE_VALUE && kind <= SL_STATE_REDUCING
             ? kind_names[kind]
             : "?";
}

uint64_t sl__state_fingerprint(const sl_state_desc_t *desc) {
  /* Head: "SLSF", u8 kind, u32le version.  NULL and "" are the same
   * layout (none). */
  uint8_t head[9];
  memcpy(head, "SLSF", 4);
  head[4] = (uint8_t)desc->kind;
  sl__put_u32le(head + 5, desc->version ? desc->version : 1);
  /* xxh3-64 of the layout, seeded with xxh3-64 of the head. */
  const char *layout = desc->layout ? desc->layout : "";
  return XXH3_64bits_withSeed(layout, strlen(layout),
                              XXH3_64bits(head, sizeof(head)));
}

static const char *layout_or_none(const char *layout) {
  return layout && layout[0] ? layout : "(no layout declared)";
}

int sl__state_check_compat(const sl_state_desc_t *stored, uint64_t stored_fp,
                           bool has_fp, const sl_state_desc_t *declared,
                           sl_error_t **out_err) {
  uint32_t sv = stored->version ? stored->version : 1;
  uint32_t dv = declared->version ? declared->version : 1;
  int rc = SL_OK;
  if (stored->kind != declared->kind) {
    rc = sl_error_set(out_err, SL_EINVAL,
                      "state '%s' is a %s state in the checkpoint but is "
                      "declared as a %s state",
                      declared->name, kind_name(stored->kind),
                      kind_name(declared->kind));
  } else if (sv != dv ||
             (has_fp && stored_fp != sl__state_fingerprint(declared))) {
    rc = sl_error_set(out_err, SL_EINVAL,
                      "state '%s' does not match the checkpoint: the "
                      "checkpoint holds version %u with layout [%s], the "
                      "operator declares version %u with layout [%s]; sluice "
                      "cannot migrate state yet, so resume with the "
                      "definition the checkpoint was taken with",
                      declared->name, sv, layout_or_none(stored->layout), dv,
                      layout_or_none(declared->layout));
  }
  if (rc != SL_OK && out_err) sl_error_set_fatal(*out_err, true);
  if (rc == SL_OK && !has_fp && declared->layout && declared->layout[0])
    sl_log(SL_LOG_WARN,
           "state '%s' comes from a checkpoint written without state "
           "layouts (state file version 1 or 2); its layout [%s] is not "
           "checked", declared->name, declared->layout);
  return rc;
}

void sl__state_layout_schema(sl_acc_t *b, const sl_schema_t *schema) {
  for (uint32_t i = 0; i < sl_schema_n_fields(schema); i++) {
    const sl_field_t *f = sl_schema_field(schema, i);
    char tb[48];
    sl__acc_printf(b, "%s%s:%s%s", i ? ", " : "", f->name,
                   sl_type_format(f->type, tb, sizeof(tb)),
                   f->type.nullable ? "?" : "");
  }
}

char *sl__state_layout_finish(sl_acc_t *b) {
  uint8_t *s;
  size_t len;
  return sl__acc_finish(b, &s, &len) == SL_OK ? (char *)s : NULL;
}
