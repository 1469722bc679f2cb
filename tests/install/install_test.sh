#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs this build of sluice into a fresh prefix and uses it as a user
# would, from outside the source tree (tests/install/CMakeLists.txt).
#
#   install_test.sh WAY BUILD_DIR SRC_DIR WORK_DIR LIBDIR VERSION SOVERSION
#                   [SANITIZERS]
#
# WAY prefix: `cmake --install BUILD_DIR --prefix WORK_DIR/prefix` into a
#     fresh prefix (the fixture of the other ways), and check that the
#     libraries, headers, pkg-config files and CMake package are there.
# WAY pkgconfig: build examples/word_count.c and examples/account_balance.c
#     with `pkg-config --cflags --libs sluice` (shared library) and
#     `sluice-static` (static library), run them and check their output
#     with the checks of sl-it-example-*; the shared programs must need
#     libsluice.so.SOVERSION and the static ones must not.
# WAY cmake: the same word count through find_package(sluice) in a small
#     CMake project (tests/install/consumer), targets sluice::sluice and
#     sluice::sluice_static.
# WAY exports: libsluice.so exports exactly the functions declared SL_API
#     in the installed headers, and every function declared there is
#     SL_API; the installed command prints the version.
# WAY headers: every installed header compiles on its own, as C99 with
#     -pedantic and, when a C++ compiler is there, as C++11.
# SANITIZERS (a build with SL_SANITIZE) is passed to the compiler as
# -fsanitize=..., as the library needs its runtime.
set -euo pipefail
way=$1 build=$2 src=$3 work=$4 libdir=$5 version=$6 soversion=$7
san=${8:-}
fail() { echo "sl-it-install-$way: $*" >&2; exit 1; }

prefix=$work/prefix
lib=$prefix/$libdir
if [ "$way" = prefix ]; then
  rm -rf "$prefix"
  mkdir -p "$work"
  cmake --install "$build" --prefix "$prefix" >"$work/install.log" ||
    { cat "$work/install.log" >&2; fail "cmake --install failed"; }
  for f in "$lib/libsluice.so.$version" "$lib/libsluice.so.$soversion" \
           "$lib/libsluice.so" "$lib/libsluice.a" \
           "$prefix/include/sluice/sluice.h" \
           "$prefix/include/sluice/sl_version.h" \
           "$lib/pkgconfig/sluice.pc" "$lib/pkgconfig/sluice-static.pc" \
           "$lib/cmake/sluice/sluiceConfig.cmake" \
           "$lib/cmake/sluice/sluiceConfigVersion.cmake" \
           "$prefix/bin/sluice"; do
    [ -e "$f" ] || fail "cmake --install did not install $f"
  done
  # The pkg-config files name the prefix they were installed into.
  grep -qx "prefix=$prefix" "$lib/pkgconfig/sluice.pc" ||
    fail "$lib/pkgconfig/sluice.pc does not say prefix=$prefix"
  echo "sl-it-install-$way: ok"
  exit 0
fi
[ -f "$lib/libsluice.so" ] || fail "nothing installed in $prefix"
work=$work/$way
rm -rf "$work"
mkdir -p "$work"

cc=${CC:-cc}
# The flags of a careful user; the public headers must compile cleanly
# under them as plain C11 without sluice's own definitions.
cflags=(-std=c11 -O1 -g -Wall -Wextra -Wno-unused-parameter -Werror
        -D_POSIX_C_SOURCE=200809L)
sanflags=()
[ -n "$san" ] && sanflags=(-fsanitize="$san" -fno-omit-frame-pointer)
export PKG_CONFIG_PATH=$lib/pkgconfig
export LD_LIBRARY_PATH=$lib # no rpath: the shared programs find it here
td=$src/examples/testdata

needs_libsluice() { # program: does its dynamic section need libsluice?
  readelf -d "$1" | grep -q "NEEDED.*\[libsluice\.so\.$soversion\]"
}
check_word_count() { # program
  "$1" --parallelism 3 "$td/word_count_input.txt" >"$1.out" ||
    fail "$1 failed"
  awk -f "$td/word_count_check.awk" "$1.out" | LC_ALL=C sort |
    diff -u "$td/word_count_expected.txt" - ||
    fail "$1: word counts differ from $td/word_count_expected.txt"
}
check_account_balance() { # program
  (cd "$work" && rm -rf account_balance &&
   "$1" --records 20000 --keys 300 --parallelism 3 "$1.csv") ||
    fail "$1 failed"
  awk -v records=20000 -v keys=300 -f "$td/account_balance_check.awk" \
    "$1.csv" || fail "$1: wrong balances in $1.csv"
}

case $way in
pkgconfig)
  command -v pkg-config >/dev/null || fail "pkg-config is not installed"
  [ "$(pkg-config --modversion sluice)" = "$version" ] ||
    fail "pkg-config --modversion sluice is not $version"
  for ex in word_count account_balance; do
    for kind in shared static; do
      pc=sluice; [ $kind = static ] && pc=sluice-static
      # shellcheck disable=SC2046 # the flags are words
      "$cc" "${cflags[@]}" "${sanflags[@]}" "$src/examples/$ex.c" \
        -o "$work/$ex-$kind" $(pkg-config --cflags --libs $pc) ||
        fail "cannot build $ex.c with pkg-config $pc"
      if [ $kind = shared ]; then
        needs_libsluice "$work/$ex-$kind" ||
          fail "$ex-$kind does not need libsluice.so.$soversion"
      else
        needs_libsluice "$work/$ex-$kind" &&
          fail "$ex-$kind needs libsluice.so, expected the static library"
      fi
      "check_$ex" "$work/$ex-$kind"
    done
  done
  ;;
cmake)
  cmake -S "$src/tests/install/consumer" -B "$work/consumer" \
    -DCMAKE_PREFIX_PATH="$prefix" -DSL_WANT_VERSION="$version" \
    -DSL_EXAMPLE="$src/examples/word_count.c" \
    -DCMAKE_C_FLAGS="${cflags[*]} ${sanflags[*]}" \
    -DCMAKE_EXE_LINKER_FLAGS="${sanflags[*]}" >"$work/consumer.log" 2>&1 ||
    { cat "$work/consumer.log" >&2; fail "find_package(sluice) failed"; }
  cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1 ||
    { cat "$work/consumer.log" >&2; fail "the consumer does not build"; }
  needs_libsluice "$work/consumer/word_count_shared" ||
    fail "sluice::sluice did not link libsluice.so.$soversion"
  needs_libsluice "$work/consumer/word_count_static" &&
    fail "sluice::sluice_static linked the shared library"
  check_word_count "$work/consumer/word_count_shared"
  check_word_count "$work/consumer/word_count_static"
  ;;
exports)
  inc=$prefix/include/sluice
  # Function declarations start in column 0 with their return type.
  undeclared=$(grep -HnE '^[A-Za-z_][^(]*[^A-Za-z0-9_]sl_[a-z0-9_]+\(' \
                 "$inc"/*.h | grep -vE ':(SL_API|static|typedef|#)' || true)
  [ -z "$undeclared" ] ||
    fail "public functions declared without SL_API:"$'\n'"$undeclared"
  sed -n 's/^SL_API [^(]*[^A-Za-z0-9_]\(sl_[a-z0-9_]*\)(.*/\1/p' \
    "$inc"/*.h | LC_ALL=C sort -u >"$work/declared.txt"
  nm -D --defined-only --format=posix "$lib/libsluice.so" |
    awk '{print $1}' | LC_ALL=C sort -u >"$work/exported.txt"
  [ "$(wc -l <"$work/declared.txt")" -gt 100 ] ||
    fail "found few SL_API declarations in $inc"
  diff -u --label declared-SL_API --label exported-by-libsluice.so \
    "$work/declared.txt" "$work/exported.txt" ||
    fail "libsluice.so exports another set than the SL_API declarations"
  [ "$("$prefix/bin/sluice" --version)" = "sluice $version" ] ||
    fail "the installed sluice --version does not print sluice $version"
  ;;
headers)
  cxx=${CXX:-c++}
  command -v "$cxx" >/dev/null ||
    fail "no C++ compiler ($cxx) to check the headers as C++11 (tools/deps installs g++)"
  for h in "$prefix/include/sluice/"*.h; do
    b=${h##*/}
    printf '#include <sluice/%s>\nint sl_test_unit_is_not_empty;\n' "$b" \
      >"$work/one.c"
    "$cc" -std=c99 -pedantic -Wall -Wextra -Werror -Wstrict-prototypes \
      -fsyntax-only -I"$prefix/include" "$work/one.c" ||
      fail "sluice/$b does not compile alone as C99"
    cp "$work/one.c" "$work/one.cc"
    "$cxx" -std=c++11 -Wall -Wextra -Werror -fsyntax-only \
      -I"$prefix/include" "$work/one.cc" ||
      fail "sluice/$b does not compile alone as C++11"
  done
  ;;
*) fail "unknown way '$way'" ;;
esac
echo "sl-it-install-$way: ok"
