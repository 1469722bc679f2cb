/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Nexmark event generator: persons, auctions and bids with the rules
 * of the standard generator (the nexmark/nexmark and Apache Beam
 * GeneratorConfig, PersonGenerator, AuctionGenerator, BidGenerator):
 *
 *  - of every 50 events, 1 is a person, 3 are auctions and 46 are bids,
 *    by event number (event_id % 50: 0 person, 1-3 auctions, else bid);
 *  - ids follow from the event number (first person and auction id 1000);
 *    a bid's auction is a hot one (a multiple of 2 among the latest) with
 *    probability 1/2, else one of the last 100 in flight (plus a lead of
 *    10); a bid's bidder and an auction's seller are hot (a multiple of 4
 *    among the latest persons) with probability 3/4, else one of the last
 *    1000 active persons (plus 10);
 *  - 5 categories from 10; prices 100 * 10^(6u) cents (u uniform); reserve
 *    = initial bid + another price; an auction lasts a uniform time up to
 *    twice the time the generator takes for 100 in-flight auctions at the
 *    configured rate;
 *  - names, cities and states from the original short lists; e-mail,
 *    item names, descriptions and urls from random lower-case strings;
 *    hot channels (Google, Facebook, Baidu, Apple) with probability 1/10,
 *    else "channel-N" of 10,000;
 *  - `extra` pads each event to the average sizes 200 (person), 500
 *    (auction) and 100 (bid) bytes, within +-20%, counted as the original
 *    does: 8 bytes per number, string lengths, a bid's channel and url
 *    not counted.
 *
 * Randomness is a splitmix64 stream seeded from (seed, event_id), so event
 * i is a pure function of (config, i, date_time): any process can make it
 * again.  The values therefore differ from the Java generator's; the rules
 * and distributions are the same.
 */
#ifndef SL_BENCH_NEXMARK_H
#define SL_BENCH_NEXMARK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sl_nex_kind_e {
  SL_NEX_PERSON = 0,
  SL_NEX_AUCTION = 1,
  SL_NEX_BID = 2
} sl_nex_kind_t;

typedef struct sl_nex_str_s {
  const char *p; /* not NUL-terminated */
  uint32_t len;
} sl_nex_str_t;

#define SL_NEX_BUF 1024
/* An upper bound of the encoded size of each kind (sl_nexmark_encode). */
#define SL_NEXMARK_MAX_BID 320
#define SL_NEXMARK_MAX_PERSON 400
#define SL_NEXMARK_MAX_AUCTION 900
#define SL_NEXMARK_MAX_ENCODED SL_NEXMARK_MAX_AUCTION

typedef struct sl_nex_event_s {
  sl_nex_kind_t kind;
  int64_t event_id;
  int64_t date_time_us;
  union {
    struct {
      int64_t id;
      sl_nex_str_t name, email_address, credit_card, city, state, extra;
    } person;
    struct {
      int64_t id;
      sl_nex_str_t item_name, description;
      int64_t initial_bid, reserve, expires_us, seller, category;
      sl_nex_str_t extra;
    } auction;
    struct {
      int64_t auction, bidder, price;
      sl_nex_str_t channel, url, extra;
    } bid;
  };
  char buf[SL_NEX_BUF]; /* the strings of a generated event */
} sl_nex_event_t;

typedef struct sl_nexmark_config_s {
  uint64_t seed;
  double events_per_second;   /* for auction lengths; default 10,000 */
  uint32_t num_active_people; /* 1000 */
  uint32_t num_in_flight_auctions; /* 100 */
  uint32_t hot_auction_ratio, hot_seller_ratio, hot_bidder_ratio; /* 2 4 4 */
  uint32_t avg_person_size, avg_auction_size, avg_bid_size; /* 200 500 100 */
} sl_nexmark_config_t;

void sl_nexmark_config_init(sl_nexmark_config_t *c);
/** @brief The kind of event event_id (cheap: no generation). */
sl_nex_kind_t sl_nexmark_kind(const sl_nexmark_config_t *c, uint64_t event_id);
void sl_nexmark_generate(const sl_nexmark_config_t *c, uint64_t event_id,
                         int64_t date_time_us, sl_nex_event_t *out);
/** @brief Compact little-endian encoding (date_time is not included: the
 * ring carries it); returns bytes written, 0 if cap is too small. */
size_t sl_nexmark_encode(const sl_nex_event_t *e, uint8_t *buf, size_t cap);
/** @brief Decode; strings point into buf.  0, or -1 if malformed or
 * truncated (never reads past len). */
int sl_nexmark_decode(const uint8_t *buf, size_t len, sl_nex_event_t *out);

#ifdef __cplusplus
}
#endif
#endif
