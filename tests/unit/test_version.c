/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The version: sl_version() of the library agrees with the generated
 * sl_version.h it was built with, and the string agrees with the numbers.
 * (`sluice --version` is checked by sl-it-cli-version-and-help, the
 * installed one by sl-it-install-exports.)
 */
#include <stdio.h>
#include <string.h>

#include "sl_test.h"
#include "sluice/sluice.h"

SL_TEST(version_matches_header) {
  SL_ASSERT_EQ_STR(sl_version(), SL_VERSION_STRING);
  char want[64];
  snprintf(want, sizeof(want), "%d.%d.%d", SL_VERSION_MAJOR,
           SL_VERSION_MINOR, SL_VERSION_PATCH);
  SL_ASSERT_EQ_STR(SL_VERSION_STRING, want);
  SL_ASSERT_EQ_INT(SL_VERSION_NUMBER, SL_VERSION_MAJOR * 10000 +
                                          SL_VERSION_MINOR * 100 +
                                          SL_VERSION_PATCH);
}
