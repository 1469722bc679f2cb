/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_version(): the version the library was built as.  The string comes
 * from the generated sl_version.h (project(VERSION) in CMakeLists.txt), so
 * a program can compare it with the SL_VERSION_STRING it was compiled
 * against.  See README.md.
 */
#include "core.h"

const char *sl_version(void) { return SL_VERSION_STRING; }
