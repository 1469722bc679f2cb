/* SPDX-License-Identifier: Apache-2.0 */
#include "connectors/kafka/kafka_conf.h"

#include <string.h>

void sl__kafka_strs_free(char **l, uint32_t n) {
  if (l == NULL) return;
  for (uint32_t i = 0; i < n; i++) sl_free(l[i]);
  sl_free(l);
}

int sl__kafka_props_copy(const char *const *props,
                         const char *const *refused, const char *who,
                         const char *own, char ***out, uint32_t *out_n,
                         sl_error_t **out_err) {
  *out = NULL;
  *out_n = 0;
  uint32_t n = 0;
  for (; props && props[2 * n]; n++) {
    const char *name = props[2 * n];
    if (props[2 * n + 1] == NULL)
      return sl_error_set(out_err, SL_EINVAL, "%s: property '%s' has no "
                          "value", who, name);
    for (int k = 0; refused[k]; k++)
      if (strcmp(name, refused[k]) == 0)
        return sl_error_set(out_err, SL_EINVAL,
                            "%s: property '%s' is set by sluice (use the "
                            "%s's own settings)", who, name, own);
  }
  if (n == 0) return SL_OK;
  char **l = sl_calloc(2 * n, sizeof(char *));
  if (l == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  for (uint32_t i = 0; i < 2 * n; i++)
    if ((l[i] = sl_strdup(props[i])) == NULL) {
      sl__kafka_strs_free(l, i);
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
  *out = l;
  *out_n = n;
  return SL_OK;
}

int sl__kafka_conf_apply(rd_kafka_conf_t *conf, const char *const (*set)[2],
                         size_t n_set, char *const *props, uint32_t n_props,
                         const char *who, sl_error_t **out_err) {
  char errstr[512];
  for (size_t i = 0; i < n_set; i++)
    if (rd_kafka_conf_set(conf, set[i][0], set[i][1], errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK)
      return sl_error_set(out_err, SL_EINVAL, "%s: %s", who, errstr);
  for (uint32_t i = 0; i < n_props; i++)
    if (rd_kafka_conf_set(conf, props[2 * i], props[2 * i + 1], errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK)
      return sl_error_set(out_err, SL_EINVAL, "%s: property '%s': %s", who,
                          props[2 * i], errstr);
  return SL_OK;
}
