/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Text forms of single values, shared by the CSV and JSON formats: parsing
 * text into one field of a row builder, and formatting one field of a row
 * as text.  Numbers are read and written in the C locale whatever the
 * process locale is, and timestamps use days-from-civil arithmetic, so
 * neither the locale nor the time zone changes a result.  The forms are
 * specified in docs/formats.md.  See README.md.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"
#include "sluice/sl_format.h"

#define ECHO_MAX 40 /* bytes of input text quoted in a message */

/* ------------------------------------------------------------------ */
/* The C locale for strtod and snprintf("%g")                          */

/*
 * strtod and printf read and write the decimal point of LC_NUMERIC, which
 * an embedding application may have set to a locale with a decimal comma.
 * uselocale() switches only the calling thread, and only for the duration
 * of the call, so it is safe in a multi-threaded engine.  If the locale
 * object cannot be created we carry on with the process locale.
 */
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale = (locale_t)0;

static void c_locale_init(void) {
  c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

static locale_t numeric_enter(void) {
  pthread_once(&c_locale_once, c_locale_init);
  return c_locale ? uselocale(c_locale) : (locale_t)0;
}

static void numeric_leave(locale_t old) {
  if (old) uselocale(old);
}

/* ------------------------------------------------------------------ */
/* Messages                                                            */

/*
 * Length of the valid UTF-8 sequence at p (at most n bytes) and its code
 * point, or 0 when the bytes are not valid UTF-8 (overlong forms and
 * surrogates are not valid).
 */
static size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *out_cp) {
  size_t len;
  uint32_t cp, min;
  if (p[0] < 0x80) {
    *out_cp = p[0];
    return 1;
  } else if ((p[0] & 0xe0) == 0xc0) {
    len = 2, cp = p[0] & 0x1fu, min = 0x80;
  } else if ((p[0] & 0xf0) == 0xe0) {
    len = 3, cp = p[0] & 0x0fu, min = 0x800;
  } else if ((p[0] & 0xf8) == 0xf0) {
    len = 4, cp = p[0] & 0x07u, min = 0x10000;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t k = 1; k < len; k++) {
    if ((p[k] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[k] & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  *out_cp = cp;
  return len;
}

/* Code points that print as nothing or move the text: shown escaped. */
static bool is_invisible(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0xad ||
         (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
         (cp >= 0x2060 && cp <= 0x2064) || cp == 0xfeff;
}

/*
 * Copy at most ECHO_MAX bytes of text into buf for an error message, with
 * "..." when cut (by ECHO_MAX or by size).  Bytes a reader could not see
 * are escaped, so the message stays on one line and shows what is really
 * there: \n, \r, \t, and \xHH for other control characters, bytes that are
 * not UTF-8, and invisible characters such as a byte order mark (U+FEFF is
 * \xEF\xBB\xBF).  The cut never splits a UTF-8 sequence or an escape.  buf
 * should hold SL_ECHO_SIZE bytes.
 */
void sl__format_echo(const char *text, size_t len, char *buf, size_t size) {
  static const char hex[] = "0123456789ABCDEF";
  const unsigned char *p = (const unsigned char *)text;
  size_t o = 0, k = 0;
  bool is_cut = false;
  if (size < 4) {
    if (size) buf[0] = '\0';
    return;
  }
  while (k < len) {
    char esc[16];
    size_t n_out = 0;
    uint32_t cp = 0;
    size_t n_in = utf8_decode(p + k, len - k, &cp);
    if (n_in == 0 || (n_in == 1 && (cp < 0x20 || cp == 0x7f)) ||
        is_invisible(cp)) {
      if (n_in == 0) n_in = 1;
      for (size_t i = 0; i < n_in; i++) {
        unsigned char c = p[k + i];
        esc[n_out++] = '\\';
        if (c == '\n' || c == '\r' || c == '\t') {
          esc[n_out++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else {
          esc[n_out++] = 'x';
          esc[n_out++] = hex[c >> 4];
          esc[n_out++] = hex[c & 15];
        }
      }
    } else {
      memcpy(esc, p + k, n_in);
      n_out = n_in;
    }
    if (k + n_in > ECHO_MAX || o + n_out + 4 > size) {
      is_cut = true;
      break;
    }
    memcpy(buf + o, esc, n_out);
    o += n_out;
    k += n_in;
  }
  if (is_cut) {
    memcpy(buf + o, "...", 4);
  } else {
    buf[o] = '\0';
  }
}

/* "int64", "decimal(10,2)"; bytes say how they are written. */
static const char *type_label(sl_type_t t, char *buf, size_t size) {
  if (t.id == SL_TYPE_BYTES) return "base64 bytes";
  return sl_type_format(t, buf, size);
}

static int expected_error(sl_error_t **out_err, sl_type_t t,
                          const char *text, size_t len) {
  char echo[SL_ECHO_SIZE], what[32];
  sl__format_echo(text, len, echo, sizeof(echo));
  return sl_error_set(out_err, SL_EPARSE, "expected %s, got '%s'",
                      type_label(t, what, sizeof(what)), echo);
}

static int range_error(sl_error_t **out_err, sl_type_t t, const char *text,
                       size_t len) {
  char echo[SL_ECHO_SIZE], what[32];
  sl__format_echo(text, len, echo, sizeof(echo));
  return sl_error_set(out_err, SL_EPARSE, "'%s' is out of range for %s", echo,
                      type_label(t, what, sizeof(what)));
}

static int nomem_error(sl_error_t **out_err, int rc) {
  if (rc == SL_ENOMEM) return sl_error_set(out_err, rc, "out of memory");
  return sl_error_set(out_err, rc, "value does not fit in a row");
}

/* ------------------------------------------------------------------ */
/* Integers                                                            */

/* [+-]digits.  SL_EPARSE on bad syntax, SL_EOVERFLOW out of int64 range. */
static int parse_i64(const char *s, size_t len, int64_t *out) {
  size_t i = 0;
  bool is_neg = false;
  if (i < len && (s[i] == '+' || s[i] == '-')) {
    is_neg = s[i] == '-';
    i++;
  }
  if (i == len) return SL_EPARSE;
  uint64_t lim = is_neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  uint64_t v = 0;
  bool is_over = false;
  for (; i < len; i++) {
    unsigned d = (unsigned)((unsigned char)s[i] - '0');
    if (d > 9) return SL_EPARSE;
    if (is_over) continue;
    if (v > (lim - d) / 10) {
      is_over = true;
    } else {
      v = v * 10 + d;
    }
  }
  if (is_over) return SL_EOVERFLOW;
  *out = (is_neg && v > 0) ? -(int64_t)(v - 1) - 1 : (int64_t)v;
  return SL_OK;
}

/* Decimal digits of v into buf (at least 21 bytes); returns the length. */
static size_t format_i64(int64_t v, char *buf) {
  char tmp[24];
  size_t n = 0, k = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) buf[k++] = '-';
  while (n) buf[k++] = tmp[--n];
  buf[k] = '\0';
  return k;
}

/* ------------------------------------------------------------------ */
/* float64                                                             */

/*
 * Shortest of %.15g, %.16g and %.17g that reads back as the same double
 * (17 digits always do), in the C locale; NaN, Infinity and -Infinity for
 * the values JSON and printf have no portable spelling for.  Returns the
 * number of significant digits used, or 0 for a non-finite value.  buf
 * must hold 32 bytes.
 */
int sl__format_f64(double v, char *buf, size_t size) {
  if (isnan(v)) {
    snprintf(buf, size, "NaN");
    return 0;
  }
  if (isinf(v)) {
    snprintf(buf, size, "%s", v < 0 ? "-Infinity" : "Infinity");
    return 0;
  }
  locale_t old = numeric_enter();
  int prec;
  for (prec = 15; prec < 17; prec++) {
    snprintf(buf, size, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  if (prec == 17) snprintf(buf, size, "%.17g", v);
  numeric_leave(old);
  return prec;
}

/*
 * Anything C strtod accepts in the C locale (so also nan, inf, infinity in
 * any case, and hex floats), except leading white space.  An underflow to
 * zero or a denormal is accepted; an overflow to infinity is SL_EOVERFLOW.
 */
static int parse_f64(const char *text, size_t len, double *out) {
  char stack[64];
  char *buf = stack;
  if (len == 0 || text[0] == ' ' || (text[0] >= '\t' && text[0] <= '\r'))
    return SL_EPARSE;
  if (len >= sizeof(stack)) {
    buf = sl_malloc(len + 1);
    if (buf == NULL) return SL_ENOMEM;
  }
  memcpy(buf, text, len);
  buf[len] = '\0';
  locale_t old = numeric_enter();
  errno = 0;
  char *end;
  double v = strtod(buf, &end);
  int saved = errno;
  numeric_leave(old);
  bool is_whole = end == buf + len;
  if (buf != stack) sl_free(buf);
  if (!is_whole) return SL_EPARSE;
  if (saved == ERANGE && isinf(v)) return SL_EOVERFLOW;
  *out = v;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* decimal(p,s)                                                        */

enum { DEC_OK, DEC_SYNTAX, DEC_SCALE, DEC_RANGE };

/*
 * [+-] digits [. digits] [e [+-] digits], at least one digit before the
 * exponent.  The value must need no more than `scale` fraction digits
 * (counting the digits written, so "1.50" needs two) and no more than
 * `precision` digits in all once scaled.  Exact: no floating point.
 */
static int parse_decimal(const char *s, size_t len, unsigned precision,
                         unsigned scale, int64_t *out) {
  size_t i = 0;
  bool is_neg = false;
  if (i < len && (s[i] == '+' || s[i] == '-')) {
    is_neg = s[i] == '-';
    i++;
  }
  uint64_t sig = 0;   /* significant digits, while there are at most 18 */
  int64_t n_sig = 0;  /* digits after leading zeros */
  int64_t n_frac = 0; /* digits after the point */
  size_t n_digits = 0;
  bool is_frac = false;
  for (; i < len; i++) {
    char c = s[i];
    if (c == '.' && !is_frac) {
      is_frac = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    n_digits++;
    if (is_frac) n_frac++;
    if (sig == 0 && c == '0') continue;
    if (n_sig < 19) sig = sig * 10 + (uint64_t)(c - '0');
    n_sig++;
  }
  if (n_digits == 0) return DEC_SYNTAX;
  int64_t exp = 0;
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    bool is_exp_neg = false;
    i++;
    if (i < len && (s[i] == '+' || s[i] == '-')) {
      is_exp_neg = s[i] == '-';
      i++;
    }
    size_t start = i;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
      if (exp < 1000000) exp = exp * 10 + (s[i] - '0'); /* saturates */
    if (i == start) return DEC_SYNTAX;
    if (is_exp_neg) exp = -exp;
  }
  if (i != len) return DEC_SYNTAX;
  int64_t eff_frac = n_frac - exp; /* fraction digits the value needs */
  if (eff_frac > (int64_t)scale) return DEC_SCALE;
  if (n_sig == 0) {
    *out = 0;
    return DEC_OK;
  }
  int64_t pad = (int64_t)scale - eff_frac;
  if (n_sig + pad > (int64_t)precision) return DEC_RANGE;
  for (int64_t k = 0; k < pad; k++) sig *= 10; /* < 10^18: no overflow */
  *out = is_neg ? -(int64_t)sig : (int64_t)sig;
  return DEC_OK;
}

/* Exactly `scale` fraction digits: -12345 at scale 2 is "-123.45". */
static int format_decimal(int64_t v, unsigned scale, sl_bytes_t *out) {
  char digits[64];
  char text[72];
  size_t n = 0, k = 0;
  if (scale > 40) return SL_EINVAL;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    digits[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  while (n <= scale) digits[n++] = '0';
  if (v < 0) text[k++] = '-';
  while (n > scale) text[k++] = digits[--n];
  if (scale) {
    text[k++] = '.';
    while (n) text[k++] = digits[--n];
  }
  return sl_bytes_append(out, text, k);
}

/* ------------------------------------------------------------------ */
/* Timestamps                                                          */

/*
 * Days since 1970-01-01 of a proleptic Gregorian date, and back (Howard
 * Hinnant's algorithms, exact for every int64 day count we produce).  An
 * era is 400 years; shifting the year to start in March puts the leap day
 * last, so the day of the year has a closed form.
 */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *out_y, unsigned *out_m,
                            unsigned *out_d) {
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  unsigned doe = (unsigned)(z - era * 146097);
  unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  unsigned mp = (5 * doy + 2) / 153;
  unsigned m = mp < 10 ? mp + 3 : mp - 9;
  *out_d = doy - (153 * mp + 2) / 5 + 1;
  *out_m = m;
  *out_y = (int64_t)yoe + era * 400 + (m <= 2);
}

static unsigned days_in_month(int64_t y, unsigned m) {
  static const unsigned char dim[12] = {31, 28, 31, 30, 31, 30,
                                        31, 31, 30, 31, 30, 31};
  bool is_leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && is_leap ? 29u : dim[m - 1];
}

/* Exactly n digits at s[*i]; advances *i. */
static bool read_digits(const char *s, size_t len, size_t *i, size_t n,
                        unsigned *out) {
  unsigned v = 0;
  if (len - *i < n) return false;
  for (size_t k = 0; k < n; k++) {
    char c = s[*i + k];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (unsigned)(c - '0');
  }
  *i += n;
  *out = v;
  return true;
}

static bool read_char(const char *s, size_t len, size_t *i, char c) {
  if (*i < len && s[*i] == c) {
    (*i)++;
    return true;
  }
  return false;
}

/*
 * [+-]digits (microseconds), or [+-]YYYY[YY]-MM-DD(T|t| )HH:MM:SS[.f{1,9}]
 * (Z|z|+HH:MM|-HH:MM).  Fraction digits past the sixth are dropped, which
 * rounds toward the past.  SL_EPARSE, or SL_EOVERFLOW outside int64.
 */
static int parse_timestamp(const char *s, size_t len, int64_t *out) {
  size_t i = 0;
  bool is_integer = len > 0;
  for (size_t k = (len && (s[0] == '+' || s[0] == '-')) ? 1 : 0; k < len; k++)
    if (s[k] < '0' || s[k] > '9') is_integer = false;
  if (is_integer) return parse_i64(s, len, out);

  bool is_neg = false;
  if (i < len && (s[i] == '+' || s[i] == '-')) {
    is_neg = s[i] == '-';
    i++;
  }
  int64_t year = 0;
  size_t start = i;
  for (; i < len && s[i] >= '0' && s[i] <= '9' && i - start < 6; i++)
    year = year * 10 + (s[i] - '0');
  if (i - start < 4) return SL_EPARSE;
  if (is_neg) year = -year;
  unsigned mon, day, hh, mm, ss, oh = 0, om = 0;
  if (!read_char(s, len, &i, '-') || !read_digits(s, len, &i, 2, &mon) ||
      !read_char(s, len, &i, '-') || !read_digits(s, len, &i, 2, &day))
    return SL_EPARSE;
  if (!read_char(s, len, &i, 'T') && !read_char(s, len, &i, 't') &&
      !read_char(s, len, &i, ' '))
    return SL_EPARSE;
  if (!read_digits(s, len, &i, 2, &hh) || !read_char(s, len, &i, ':') ||
      !read_digits(s, len, &i, 2, &mm) || !read_char(s, len, &i, ':') ||
      !read_digits(s, len, &i, 2, &ss))
    return SL_EPARSE;
  int64_t frac = 0;
  if (read_char(s, len, &i, '.')) {
    size_t n = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, n++)
      if (n < 6) frac = frac * 10 + (s[i] - '0');
    if (n < 1 || n > 9) return SL_EPARSE;
    for (; n < 6; n++) frac *= 10;
  }
  int off_sign = 0;
  if (read_char(s, len, &i, 'Z') || read_char(s, len, &i, 'z')) {
    off_sign = 0;
  } else if (i < len && (s[i] == '+' || s[i] == '-')) {
    off_sign = s[i] == '-' ? -1 : 1;
    i++;
    if (!read_digits(s, len, &i, 2, &oh) || !read_char(s, len, &i, ':') ||
        !read_digits(s, len, &i, 2, &om))
      return SL_EPARSE;
  } else {
    return SL_EPARSE;
  }
  if (i != len) return SL_EPARSE;
  if (mon < 1 || mon > 12 || day < 1 || day > days_in_month(year, mon) ||
      hh > 23 || mm > 59 || ss > 59 || oh > 23 || om > 59)
    return SL_EPARSE;

  /* |year| < 10^6, so the seconds fit easily; the microseconds may not. */
  int64_t secs = days_from_civil(year, mon, day) * 86400 +
                 (int64_t)hh * 3600 + (int64_t)mm * 60 + (int64_t)ss -
                 off_sign * ((int64_t)oh * 3600 + (int64_t)om * 60);
  if (secs < 0 && frac > 0) { /* keep secs * 10^6 from overflowing early */
    secs += 1;
    frac -= 1000000;
  }
  int64_t us;
  if (__builtin_mul_overflow(secs, (int64_t)1000000, &us) ||
      __builtin_add_overflow(us, frac, &us))
    return SL_EOVERFLOW;
  *out = us;
  return SL_OK;
}

/* "YYYY-MM-DDTHH:MM:SS.ffffffZ"; years outside 0..9999 get a sign. */
static int format_timestamp(int64_t us, sl_bytes_t *out) {
  int64_t secs = us / 1000000, frac = us % 1000000;
  if (frac < 0) {
    frac += 1000000;
    secs -= 1;
  }
  int64_t days = secs / 86400, sod = secs % 86400;
  if (sod < 0) {
    sod += 86400;
    days -= 1;
  }
  int64_t y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  char text[64];
  int n = snprintf(text, sizeof(text),
                   (y >= 0 && y <= 9999)
                       ? "%04lld-%02u-%02uT%02u:%02u:%02u.%06uZ"
                       : "%+05lld-%02u-%02uT%02u:%02u:%02u.%06uZ",
                   (long long)y, m, d, (unsigned)(sod / 3600),
                   (unsigned)(sod / 60 % 60), (unsigned)(sod % 60),
                   (unsigned)frac);
  return sl_bytes_append(out, text, (size_t)n);
}

/* ------------------------------------------------------------------ */
/* Base64 (RFC 4648, standard alphabet, with padding)                  */

static const char b64_chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

static int b64_encode(const uint8_t *p, size_t n, sl_bytes_t *out) {
  /* Empty bytes encode to nothing.  Returning here matters: out->data may
   * still be NULL, and NULL + 0 is undefined behaviour in C. */
  if (n == 0) return SL_OK;
  size_t need = (n + 2) / 3 * 4;
  int rc = sl_bytes_reserve(out, need);
  if (rc != SL_OK) return rc;
  char *d = (char *)out->data + out->len;
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    *d++ = b64_chars[v >> 18];
    *d++ = b64_chars[(v >> 12) & 63];
    *d++ = b64_chars[(v >> 6) & 63];
    *d++ = b64_chars[v & 63];
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)p[i] << 16;
    *d++ = b64_chars[v >> 18];
    *d++ = b64_chars[(v >> 12) & 63];
    *d++ = '=';
    *d++ = '=';
  } else if (n - i == 2) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
    *d++ = b64_chars[v >> 18];
    *d++ = b64_chars[(v >> 12) & 63];
    *d++ = b64_chars[(v >> 6) & 63];
    *d++ = '=';
  }
  out->len += need;
  return SL_OK;
}

/*
 * Strict decoding: the length is a multiple of 4, '=' appears only as the
 * last one or two characters, and the bits that padding leaves over are
 * zero, so every byte string has exactly one accepted encoding.  dst needs
 * len / 4 * 3 bytes.
 */
static bool b64_decode(const char *s, size_t len, uint8_t *dst,
                       size_t *out_len) {
  if (len % 4 != 0) return false;
  size_t n = 0;
  for (size_t i = 0; i < len; i += 4) {
    bool is_last = i + 4 == len;
    int a = b64_value((unsigned char)s[i]);
    int b = b64_value((unsigned char)s[i + 1]);
    if (a < 0 || b < 0) return false;
    if (is_last && s[i + 2] == '=' && s[i + 3] == '=') {
      if (b & 15) return false;
      dst[n++] = (uint8_t)(a << 2 | b >> 4);
      break;
    }
    int c = b64_value((unsigned char)s[i + 2]);
    if (c < 0) return false;
    if (is_last && s[i + 3] == '=') {
      if (c & 3) return false;
      dst[n++] = (uint8_t)(a << 2 | b >> 4);
      dst[n++] = (uint8_t)((b & 15) << 4 | c >> 2);
      break;
    }
    int d = b64_value((unsigned char)s[i + 3]);
    if (d < 0) return false;
    dst[n++] = (uint8_t)(a << 2 | b >> 4);
    dst[n++] = (uint8_t)((b & 15) << 4 | c >> 2);
    dst[n++] = (uint8_t)((c & 3) << 6 | d);
  }
  *out_len = n;
  return true;
}

/* ------------------------------------------------------------------ */
/* Public entry points                                                 */

static bool equals_nocase(const char *s, size_t len, const char *word) {
  size_t n = strlen(word);
  if (len != n) return false;
  for (size_t k = 0; k < n; k++) {
    char c = s[k];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != word[k]) return false;
  }
  return true;
}

static int parse_bytes(const char *text, size_t len, sl_type_t t,
                       sl_row_builder_t *b, uint32_t field,
                       sl_error_t **out_err) {
  uint8_t stack[256];
  uint8_t *buf = stack;
  size_t cap = len / 4 * 3, n = 0;
  if (cap > sizeof(stack)) {
    buf = sl_malloc(cap);
    if (buf == NULL) return nomem_error(out_err, SL_ENOMEM);
  }
  int rc = SL_OK;
  if (!b64_decode(text, len, buf, &n)) {
    rc = expected_error(out_err, t, text, len);
  } else if (n > UINT32_MAX) {
    rc = nomem_error(out_err, SL_EOVERFLOW);
  } else {
    rc = sl_row_builder_set_str(b, field, buf, (uint32_t)n);
    if (rc != SL_OK) nomem_error(out_err, rc);
  }
  if (buf != stack) sl_free(buf);
  return rc;
}

int sl_value_parse(const char *text, size_t len, sl_type_t t,
                   sl_row_builder_t *b, uint32_t field,
                   sl_error_t **out_err) {
  switch (t.id) {
  case SL_TYPE_BOOL:
    if (equals_nocase(text, len, "true") || (len == 1 && text[0] == '1')) {
      sl_row_builder_set_bool(b, field, true);
    } else if (equals_nocase(text, len, "false") ||
               (len == 1 && text[0] == '0')) {
      sl_row_builder_set_bool(b, field, false);
    } else {
      return expected_error(out_err, t, text, len);
    }
    return SL_OK;
  case SL_TYPE_INT32:
  case SL_TYPE_INT64: {
    int64_t v = 0;
    int rc = parse_i64(text, len, &v);
    bool is_int32 = t.id == SL_TYPE_INT32;
    if (rc == SL_OK && is_int32 && (v < INT32_MIN || v > INT32_MAX))
      rc = SL_EOVERFLOW;
    if (rc == SL_EOVERFLOW) return range_error(out_err, t, text, len);
    if (rc != SL_OK) return expected_error(out_err, t, text, len);
    sl_row_builder_set_i64(b, field, v);
    return SL_OK;
  }
  case SL_TYPE_FLOAT64: {
    double v = 0;
    int rc = parse_f64(text, len, &v);
    if (rc == SL_ENOMEM) return nomem_error(out_err, rc);
    if (rc == SL_EOVERFLOW) return range_error(out_err, t, text, len);
    if (rc != SL_OK) return expected_error(out_err, t, text, len);
    sl_row_builder_set_f64(b, field, v);
    return SL_OK;
  }
  case SL_TYPE_DECIMAL: {
    int64_t v = 0;
    char echo[SL_ECHO_SIZE], what[32];
    switch (parse_decimal(text, len, t.precision, t.scale, &v)) {
    case DEC_OK:
      sl_row_builder_set_i64(b, field, v);
      return SL_OK;
    case DEC_SCALE:
      sl__format_echo(text, len, echo, sizeof(echo));
      return sl_error_set(out_err, SL_EPARSE,
                          "'%s' has more fraction digits than %s allows",
                          echo, sl_type_format(t, what, sizeof(what)));
    case DEC_RANGE:
      return range_error(out_err, t, text, len);
    default:
      return expected_error(out_err, t, text, len);
    }
  }
  case SL_TYPE_TIMESTAMP: {
    int64_t v = 0;
    int rc = parse_timestamp(text, len, &v);
    if (rc == SL_EOVERFLOW) return range_error(out_err, t, text, len);
    if (rc != SL_OK) return expected_error(out_err, t, text, len);
    sl_row_builder_set_i64(b, field, v);
    return SL_OK;
  }
  case SL_TYPE_STRING: {
    if (len > UINT32_MAX) return nomem_error(out_err, SL_EOVERFLOW);
    int rc = sl_row_builder_set_str(b, field, text, (uint32_t)len);
    if (rc != SL_OK) return nomem_error(out_err, rc);
    return SL_OK;
  }
  case SL_TYPE_BYTES:
    return parse_bytes(text, len, t, b, field, out_err);
  }
  return sl_error_set(out_err, SL_EINVAL, "unknown type id %u", t.id);
}

int sl_value_format(const sl_row_t *row, uint32_t i, sl_bytes_t *out) {
  if (sl_row_is_null(row, i)) return SL_OK;
  const sl_field_t *f = sl_schema_field(row->schema, i);
  char text[32];
  switch (f->type.id) {
  case SL_TYPE_BOOL:
    return sl_bytes_append_str(out, sl_row_get_bool(row, i) ? "true" : "false");
  case SL_TYPE_INT32:
  case SL_TYPE_INT64: {
    size_t n = format_i64(sl_row_get_i64(row, i), text);
    return sl_bytes_append(out, text, n);
  }
  case SL_TYPE_FLOAT64:
    sl__format_f64(sl_row_get_f64(row, i), text, sizeof(text));
    return sl_bytes_append_str(out, text);
  case SL_TYPE_DECIMAL:
    return format_decimal(sl_row_get_i64(row, i), f->type.scale, out);
  case SL_TYPE_STRING: {
    sl_slice_t s = sl_row_get_str(row, i);
    return sl_bytes_append(out, s.ptr, s.len);
  }
  case SL_TYPE_BYTES: {
    sl_slice_t s = sl_row_get_str(row, i);
    return b64_encode(s.ptr, s.len, out);
  }
  case SL_TYPE_TIMESTAMP:
    return format_timestamp(sl_row_get_i64(row, i), out);
  }
  return SL_EINVAL;
}
