/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The schema the text-format fuzz targets parse into: every type, nullable
 * and not.  Seeds in corpus/csv and corpus/json follow its column order.
 */
#ifndef SL_FUZZ_SCHEMA_H
#define SL_FUZZ_SCHEMA_H

#include "fuzz_util.h"

__attribute__((unused)) static const sl_schema_t *sl_fuzz_schema(void) {
  static sl_schema_t *schema;
  if (schema != NULL) return schema;
  static const sl_field_t f[] = {
      {.name = "b", .type = {.id = SL_TYPE_BOOL}},
      {.name = "i32", .type = {.id = SL_TYPE_INT32, .nullable = true}},
      {.name = "i64", .type = {.id = SL_TYPE_INT64}},
      {.name = "f", .type = {.id = SL_TYPE_FLOAT64, .nullable = true}},
      {.name = "d",
       .type = {.id = SL_TYPE_DECIMAL, .precision = 10, .scale = 2}},
      {.name = "s", .type = {.id = SL_TYPE_STRING, .nullable = true}},
      {.name = "y", .type = {.id = SL_TYPE_BYTES, .nullable = true}},
      {.name = "t", .type = {.id = SL_TYPE_TIMESTAMP, .nullable = true}}};
  SL_FUZZ_CHECK(sl_schema_create(f, 8, &schema, NULL) == SL_OK);
  return schema;
}

/* The two input schemas of the channel-state target's task. */
__attribute__((unused)) static const sl_schema_t *sl_fuzz_channel_schema(
    int input) {
  static sl_schema_t *schemas[2];
  if (schemas[input] != NULL) return schemas[input];
  static const sl_field_t f0[] = {
      {.name = "id", .type = {.id = SL_TYPE_INT64}},
      {.name = "name", .type = {.id = SL_TYPE_STRING, .nullable = true}},
      {.name = "ok", .type = {.id = SL_TYPE_BOOL}}};
  static const sl_field_t f1[] = {
      {.name = "x", .type = {.id = SL_TYPE_FLOAT64, .nullable = true}},
      {.name = "b", .type = {.id = SL_TYPE_BYTES}},
      {.name = "n", .type = {.id = SL_TYPE_INT32}}};
  SL_FUZZ_CHECK(sl_schema_create(input ? f1 : f0, 3, &schemas[input], NULL) ==
                SL_OK);
  return schemas[input];
}

#endif
