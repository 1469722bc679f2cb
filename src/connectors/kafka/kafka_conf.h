/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the Kafka source and sink share in configuring librdkafka: the
 * user's pass-through properties (checked against the settings sluice
 * manages, then copied) and a configuration made of sluice's settings and
 * those properties.  Internal.
 */
#ifndef SL_KAFKA_CONF_H
#define SL_KAFKA_CONF_H

#include <librdkafka/rdkafka.h>

#include "sluice/sluice.h"

/* Checks props (NULL-ended name, value pairs) and copies them into *out
 * (2 * *out_n strings; NULL and 0 without properties).  A property
 * without a value or one of refused (NULL-ended) is SL_EINVAL naming it:
 * "<who>: property 'x' is set by sluice (use the <own>'s own
 * settings)". */
int sl__kafka_props_copy(const char *const *props,
                         const char *const *refused, const char *who,
                         const char *own, char ***out, uint32_t *out_n,
                         sl_error_t **out_err);

/* Sets the n_set pairs of sluice's settings, then the n_props copied
 * properties, on conf; SL_EINVAL "<who>: ..." on the first refused one
 * (conf is left to the caller). */
int sl__kafka_conf_apply(rd_kafka_conf_t *conf, const char *const (*set)[2],
                         size_t n_set, char *const *props, uint32_t n_props,
                         const char *who, sl_error_t **out_err);

/* Frees n strings of l, then l. */
void sl__kafka_strs_free(char **l, uint32_t n);

#endif
