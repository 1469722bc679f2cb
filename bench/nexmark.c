/* SPDX-License-Identifier: Apache-2.0 */
/* The Nexmark event generator (nexmark.h). */
#include "nexmark.h"

#include <math.h>
#include <string.h>

#define FIRST_PERSON_ID 1000
#define FIRST_AUCTION_ID 1000
#define FIRST_CATEGORY_ID 10
#define NUM_CATEGORIES 5
#define PERSON_PROPORTION 1
#define AUCTION_PROPORTION 3
#define TOTAL_PROPORTION 50
#define PERSON_ID_LEAD 10
#define AUCTION_ID_LEAD 10
#define CHANNELS 10000

static const char *const first_names[] = {"Peter", "Paul",  "Luke", "John",
                                          "Saul",  "Vicky", "Kate", "Julie",
                                          "Sarah", "Deiter", "Walter"};
static const char *const last_names[] = {"Shultz", "Abrams", "Spencer",
                                         "White",  "Bartels", "Walton",
                                         "Smith",  "Jones",  "Noris"};
static const char *const cities[] = {"Phoenix", "Los Angeles", "San Francisco",
                                     "Boise",   "Portland",    "Bend",
                                     "Redmond", "Seattle",     "Kent",
                                     "Cheyenne"};
static const char *const states[] = {"AZ", "CA", "ID", "OR", "WA", "WY"};
static const char *const hot_channels[] = {"Google", "Facebook", "Baidu",
                                           "Apple"};
#define N(a) (sizeof(a) / sizeof((a)[0]))

void sl_nexmark_config_init(sl_nexmark_config_t *c) {
  memset(c, 0, sizeof(*c));
  c->events_per_second = 10000;
  c->num_active_people = 1000;
  c->num_in_flight_auctions = 100;
  c->hot_auction_ratio = 2;
  c->hot_seller_ratio = 4;
  c->hot_bidder_ratio = 4;
  c->avg_person_size = 200;
  c->avg_auction_size = 500;
  c->avg_bid_size = 100;
}

sl_nex_kind_t sl_nexmark_kind(const sl_nexmark_config_t *c, uint64_t id) {
  (void)c;
  uint64_t rem = id % TOTAL_PROPORTION;
  if (rem < PERSON_PROPORTION) return SL_NEX_PERSON;
  if (rem < PERSON_PROPORTION + AUCTION_PROPORTION) return SL_NEX_AUCTION;
  return SL_NEX_BID;
}

/* ---- randomness: splitmix64 ------------------------------------------- */

typedef struct rng_s {
  uint64_t s;
} rng_t;

static uint64_t next64(rng_t *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n), n >= 1 (multiply-shift: bias below 2^-32 here). */
static uint64_t below(rng_t *r, uint64_t n) {
  return (uint64_t)(((unsigned __int128)next64(r) * n) >> 64);
}

static double unit(rng_t *r) { return (double)(next64(r) >> 11) * 0x1.0p-53; }

/* ---- ids (the original lastBase0 and nextBase0 rules) ----------------- */

static int64_t last_person(uint64_t id) {
  uint64_t epoch = id / TOTAL_PROPORTION, off = id % TOTAL_PROPORTION;
  if (off >= PERSON_PROPORTION) off = PERSON_PROPORTION - 1;
  return (int64_t)(epoch * PERSON_PROPORTION + off);
}

static int64_t last_auction(uint64_t id) {
  int64_t epoch = (int64_t)(id / TOTAL_PROPORTION);
  int64_t off = (int64_t)(id % TOTAL_PROPORTION);
  if (off < PERSON_PROPORTION) {
    epoch--;
    off = AUCTION_PROPORTION - 1;
  } else if (off >= PERSON_PROPORTION + AUCTION_PROPORTION) {
    off = AUCTION_PROPORTION - 1;
  } else {
    off -= PERSON_PROPORTION;
  }
  return epoch * AUCTION_PROPORTION + off;
}

static int64_t next_person(const sl_nexmark_config_t *c, uint64_t id,
                           rng_t *r) {
  int64_t n = last_person(id) + 1;
  int64_t active = n < (int64_t)c->num_active_people ? n
                                                     : c->num_active_people;
  return n - active + (int64_t)below(r, (uint64_t)(active + PERSON_ID_LEAD));
}

static int64_t next_auction(const sl_nexmark_config_t *c, uint64_t id,
                            rng_t *r) {
  int64_t max = last_auction(id);
  int64_t min = max - (int64_t)c->num_in_flight_auctions;
  if (min < 0) min = 0;
  return min + (int64_t)below(r, (uint64_t)(max - min + 1 + AUCTION_ID_LEAD));
}

static int64_t next_price(rng_t *r) {
  /* 10^(6u) as e^(6u ln 10): exp is several times cheaper than pow. */
  return (int64_t)llround(exp(unit(r) * 13.815510557964274) * 100.0);
}

/* ---- strings ------------------------------------------------------------ */

typedef struct sbuf_s {
  char *p;
  uint32_t len, cap;
} sbuf_t;

static sl_nex_str_t put(sbuf_t *b, const char *s, uint32_t n) {
  if (n > b->cap - b->len) n = b->cap - b->len;
  memcpy(b->p + b->len, s, n);
  sl_nex_str_t out = {b->p + b->len, n};
  b->len += n;
  return out;
}

static sl_nex_str_t put_cstr(sbuf_t *b, const char *s) {
  return put(b, s, (uint32_t)strlen(s));
}

/* n lower-case letters with an occasional space (the original's
 * nextString: 'a'..'z' and ' ', uniform), appended.  Eight characters per
 * 64-bit draw: each is the high word of x * 27, and the low word, uniform
 * again, feeds the next (multiply-shift digit extraction; the bias stays
 * far below what a benchmark payload could notice).  One draw per
 * character made padding the driver's main cost. */
static void append_random(sbuf_t *b, rng_t *r, uint32_t n) {
  if (n > b->cap - b->len) n = b->cap - b->len;
  char *p = b->p + b->len;
  for (uint32_t i = 0; i < n;) {
    uint64_t x = next64(r);
    for (uint32_t k = 0; k < 8 && i < n; k++, i++) {
      unsigned __int128 m = (unsigned __int128)x * 27u;
      uint32_t c = (uint32_t)(m >> 64);
      x = (uint64_t)m;
      p[i] = c == 26 ? ' ' : (char)('a' + c);
    }
  }
  b->len += n;
}

static sl_nex_str_t random_str(sbuf_t *b, rng_t *r, uint32_t n) {
  uint32_t start = b->len;
  append_random(b, r, n);
  sl_nex_str_t s = {b->p + start, b->len - start};
  return s;
}

static void append_u64(sbuf_t *b, uint64_t v, int min_digits) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v || n < min_digits);
  while (n > 0 && b->len < b->cap) b->p[b->len++] = tmp[--n];
}

/* Padding text: 64 KiB of random characters made once from a fixed seed.
 * No query reads the padding; drawing it character by character made it
 * the driver's main cost (90 characters per event on average). */
#define PAD_POOL (64u * 1024u)
static char pad_pool[PAD_POOL + SL_NEX_BUF];

__attribute__((constructor)) static void pad_pool_init(void) {
  rng_t r = {0x70616464696e67ull};
  sbuf_t b = {pad_pool, 0, sizeof(pad_pool)};
  append_random(&b, &r, (uint32_t)sizeof(pad_pool));
}

/* Pad toward the average size: nothing if the event is already that big,
 * else (avg - current) +-20% characters, the original's nextExtra length,
 * as a slice of the padding text at a random offset. */
static sl_nex_str_t extra(sbuf_t *b, rng_t *r, uint32_t current,
                          uint32_t avg) {
  if (current >= avg) return (sl_nex_str_t){b->p + b->len, 0};
  uint32_t want = avg - current;
  uint32_t delta = (uint32_t)llround(want * 0.2);
  uint32_t n = want - delta + (uint32_t)below(r, 2u * delta + 1);
  if (n > b->cap - b->len) n = b->cap - b->len;
  uint32_t start = b->len;
  memcpy(b->p + start, pad_pool + below(r, PAD_POOL), n);
  b->len += n;
  return (sl_nex_str_t){b->p + start, n};
}

void sl_nexmark_generate(const sl_nexmark_config_t *c, uint64_t id,
                         int64_t date_time_us, sl_nex_event_t *e) {
  rng_t r = {c->seed ^ (id * 0xd1342543de82ef95ull)};
  next64(&r);
  sbuf_t b = {e->buf, 0, SL_NEX_BUF};
  e->kind = sl_nexmark_kind(c, id);
  e->event_id = (int64_t)id;
  e->date_time_us = date_time_us;
  if (e->kind == SL_NEX_PERSON) {
    e->person.id = last_person(id) + FIRST_PERSON_ID;
    uint32_t start = b.len;
    put_cstr(&b, first_names[below(&r, N(first_names))]);
    put(&b, " ", 1);
    put_cstr(&b, last_names[below(&r, N(last_names))]);
    e->person.name = (sl_nex_str_t){b.p + start, b.len - start};
    start = b.len;
    append_random(&b, &r, 7);
    put(&b, "@", 1);
    append_random(&b, &r, 5);
    put(&b, ".com", 4);
    e->person.email_address = (sl_nex_str_t){b.p + start, b.len - start};
    start = b.len;
    for (int g = 0; g < 4; g++) {
      if (g) put(&b, " ", 1);
      append_u64(&b, below(&r, 10000), 4);
    }
    e->person.credit_card = (sl_nex_str_t){b.p + start, b.len - start};
    e->person.city = put_cstr(&b, cities[below(&r, N(cities))]);
    e->person.state = put_cstr(&b, states[below(&r, N(states))]);
    uint32_t cur = 8 + e->person.name.len + e->person.email_address.len +
                   e->person.credit_card.len + e->person.city.len +
                   e->person.state.len;
    e->person.extra = extra(&b, &r, cur, c->avg_person_size);
  } else if (e->kind == SL_NEX_AUCTION) {
    e->auction.id = last_auction(id) + FIRST_AUCTION_ID;
    int64_t seller = below(&r, c->hot_seller_ratio) > 0
                         ? (last_person(id) / c->hot_seller_ratio) *
                               c->hot_seller_ratio
                         : next_person(c, id, &r);
    e->auction.seller = seller + FIRST_PERSON_ID;
    e->auction.category = FIRST_CATEGORY_ID + (int64_t)below(&r, NUM_CATEGORIES);
    e->auction.initial_bid = next_price(&r);
    e->auction.reserve = e->auction.initial_bid + next_price(&r);
    e->auction.item_name = random_str(&b, &r, 20);
    e->auction.description = random_str(&b, &r, 100);
    /* Up to twice the time the generator needs for the in-flight
     * auctions' worth of events (the original's nextAuctionLengthMs). */
    double events = (double)c->num_in_flight_auctions * TOTAL_PROPORTION /
                    AUCTION_PROPORTION;
    double horizon_us = events / c->events_per_second * 1e6;
    uint64_t span = (uint64_t)(horizon_us * 2) + 1;
    e->auction.expires_us = date_time_us + 1 + (int64_t)below(&r, span);
    uint32_t cur = 8 + e->auction.item_name.len + e->auction.description.len +
                   8 + 8 + 8 + 8 + 8;
    e->auction.extra = extra(&b, &r, cur, c->avg_auction_size);
  } else {
    int64_t auction = below(&r, c->hot_auction_ratio) > 0
                          ? (last_auction(id) / c->hot_auction_ratio) *
                                c->hot_auction_ratio
                          : next_auction(c, id, &r);
    int64_t bidder = below(&r, c->hot_bidder_ratio) > 0
                         ? (last_person(id) / c->hot_bidder_ratio) *
                                   c->hot_bidder_ratio +
                               1
                         : next_person(c, id, &r);
    e->bid.auction = auction + FIRST_AUCTION_ID;
    e->bid.bidder = bidder + FIRST_PERSON_ID;
    e->bid.price = next_price(&r);
    if (below(&r, 10) == 0) {
      uint64_t h = below(&r, N(hot_channels));
      e->bid.channel = put_cstr(&b, hot_channels[h]);
      uint32_t start = b.len;
      put_cstr(&b, "https://www.nexmark.com/");
      put_cstr(&b, hot_channels[h]);
      put_cstr(&b, "/item.htm?query=1");
      e->bid.url = (sl_nex_str_t){b.p + start, b.len - start};
    } else {
      uint64_t ch = below(&r, CHANNELS);
      uint32_t start = b.len;
      put_cstr(&b, "channel-");
      append_u64(&b, ch, 1);
      e->bid.channel = (sl_nex_str_t){b.p + start, b.len - start};
      /* The url of a channel is fixed: its own stream of letters. */
      rng_t cr = {0x6a09e667f3bcc909ull ^ ch};
      start = b.len;
      put_cstr(&b, "https://www.nexmark.com/");
      append_random(&b, &cr, 5);
      put(&b, "/", 1);
      append_random(&b, &cr, 5);
      put(&b, "/", 1);
      append_random(&b, &cr, 5);
      put_cstr(&b, "/item.htm?query=1&channel_id=");
      append_u64(&b, ch, 1);
      e->bid.url = (sl_nex_str_t){b.p + start, b.len - start};
    }
    /* As the original: numbers only (channel and url not counted). */
    uint32_t cur = 8 * 4;
    e->bid.extra = extra(&b, &r, cur, c->avg_bid_size);
  }
}

/* ---- encoding ------------------------------------------------------------ */

typedef struct wr_s {
  uint8_t *p;
  size_t len, cap;
  int is_full;
} wr_t;

static void w64(wr_t *w, int64_t v) {
  if (w->cap - w->len < 8) { w->is_full = 1; return; }
  memcpy(w->p + w->len, &v, 8); /* little-endian hosts only (x86, arm64) */
  w->len += 8;
}

static void wstr(wr_t *w, sl_nex_str_t s) {
  if (s.len > 0xffff || w->cap - w->len < 2u + s.len) { w->is_full = 1; return; }
  uint16_t n = (uint16_t)s.len;
  memcpy(w->p + w->len, &n, 2);
  memcpy(w->p + w->len + 2, s.p, s.len);
  w->len += 2u + s.len;
}

size_t sl_nexmark_encode(const sl_nex_event_t *e, uint8_t *buf, size_t cap) {
  wr_t w = {buf, 0, cap, 0};
  if (cap < 1) return 0;
  buf[w.len++] = (uint8_t)e->kind;
  w64(&w, e->event_id);
  if (e->kind == SL_NEX_PERSON) {
    w64(&w, e->person.id);
    wstr(&w, e->person.name);
    wstr(&w, e->person.email_address);
    wstr(&w, e->person.credit_card);
    wstr(&w, e->person.city);
    wstr(&w, e->person.state);
    wstr(&w, e->person.extra);
  } else if (e->kind == SL_NEX_AUCTION) {
    w64(&w, e->auction.id);
    wstr(&w, e->auction.item_name);
    wstr(&w, e->auction.description);
    w64(&w, e->auction.initial_bid);
    w64(&w, e->auction.reserve);
    w64(&w, e->auction.expires_us);
    w64(&w, e->auction.seller);
    w64(&w, e->auction.category);
    wstr(&w, e->auction.extra);
  } else {
    w64(&w, e->bid.auction);
    w64(&w, e->bid.bidder);
    w64(&w, e->bid.price);
    wstr(&w, e->bid.channel);
    wstr(&w, e->bid.url);
    wstr(&w, e->bid.extra);
  }
  return w.is_full ? 0 : w.len;
}

typedef struct rd_s {
  const uint8_t *p;
  size_t len, off;
  int is_bad;
} rd_t;

static int64_t r64(rd_t *r) {
  int64_t v = 0;
  if (r->len - r->off < 8) { r->is_bad = 1; return 0; }
  memcpy(&v, r->p + r->off, 8);
  r->off += 8;
  return v;
}

static sl_nex_str_t rstr(rd_t *r) {
  sl_nex_str_t s = {NULL, 0};
  uint16_t n;
  if (r->len - r->off < 2) { r->is_bad = 1; return s; }
  memcpy(&n, r->p + r->off, 2);
  if (r->len - r->off - 2 < n) { r->is_bad = 1; return s; }
  s.p = (const char *)r->p + r->off + 2;
  s.len = n;
  r->off += 2u + n;
  return s;
}

int sl_nexmark_decode(const uint8_t *buf, size_t len, sl_nex_event_t *e) {
  rd_t r = {buf, len, 0, 0};
  if (len < 1 || buf[0] > SL_NEX_BID) return -1;
  e->kind = (sl_nex_kind_t)buf[0];
  r.off = 1;
  e->event_id = r64(&r);
  e->date_time_us = 0;
  if (e->kind == SL_NEX_PERSON) {
    e->person.id = r64(&r);
    e->person.name = rstr(&r);
    e->person.email_address = rstr(&r);
    e->person.credit_card = rstr(&r);
    e->person.city = rstr(&r);
    e->person.state = rstr(&r);
    e->person.extra = rstr(&r);
  } else if (e->kind == SL_NEX_AUCTION) {
    e->auction.id = r64(&r);
    e->auction.item_name = rstr(&r);
    e->auction.description = rstr(&r);
    e->auction.initial_bid = r64(&r);
    e->auction.reserve = r64(&r);
    e->auction.expires_us = r64(&r);
    e->auction.seller = r64(&r);
    e->auction.category = r64(&r);
    e->auction.extra = rstr(&r);
  } else {
    e->bid.auction = r64(&r);
    e->bid.bidder = r64(&r);
    e->bid.price = r64(&r);
    e->bid.channel = rstr(&r);
    e->bid.url = rstr(&r);
    e->bid.extra = rstr(&r);
  }
  return r.is_bad || r.off != len ? -1 : 0;
}
