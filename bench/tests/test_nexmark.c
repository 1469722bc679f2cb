/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Nexmark generator (bench/nexmark.h): proportions, id rules, hot
 * keys, sizes, and the encoding the driver's rings carry.  Expectations
 * come from the generator's rules (the original's), not from its output.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nexmark.h"
#include "sl_test.h"

static sl_nex_event_t ev, ev2;

static sl_nexmark_config_t cfg(void) {
  sl_nexmark_config_t c;
  sl_nexmark_config_init(&c);
  c.seed = 42;
  c.events_per_second = 100000;
  return c;
}

SL_TEST(proportions_are_1_3_46_per_50) {
  sl_nexmark_config_t c = cfg();
  uint64_t n[3] = {0, 0, 0};
  for (uint64_t i = 0; i < 50000; i++) {
    sl_nexmark_generate(&c, i, (int64_t)i, &ev);
    SL_ASSERT_EQ_INT(ev.kind, sl_nexmark_kind(&c, i));
    n[ev.kind]++;
  }
  SL_ASSERT_EQ_INT(n[SL_NEX_PERSON], 1000);
  SL_ASSERT_EQ_INT(n[SL_NEX_AUCTION], 3000);
  SL_ASSERT_EQ_INT(n[SL_NEX_BID], 46000);
}

SL_TEST(ids_refer_to_people_and_auctions_that_exist_or_lead) {
  sl_nexmark_config_t c = cfg();
  int64_t persons = 0, auctions = 0; /* created so far */
  for (uint64_t i = 0; i < 200000; i++) {
    sl_nexmark_generate(&c, i, (int64_t)i, &ev);
    if (ev.kind == SL_NEX_PERSON) {
      SL_ASSERT_EQ_INT(ev.person.id, 1000 + persons);
      persons++;
    } else if (ev.kind == SL_NEX_AUCTION) {
      SL_ASSERT_EQ_INT(ev.auction.id, 1000 + auctions);
      auctions++;
      /* Sellers: among the persons so far plus the lead of 10. */
      SL_ASSERT_TRUE(ev.auction.seller >= 1000);
      SL_ASSERT_TRUE(ev.auction.seller < 1000 + persons + 10);
      SL_ASSERT_TRUE(ev.auction.category >= 10 && ev.auction.category < 15);
      SL_ASSERT_TRUE(ev.auction.reserve > ev.auction.initial_bid);
      SL_ASSERT_TRUE(ev.auction.expires_us > ev.date_time_us);
    } else {
      SL_ASSERT_TRUE(ev.bid.auction >= 1000);
      SL_ASSERT_TRUE(ev.bid.auction < 1000 + auctions + 10);
      /* In flight: not older than the last 100 auctions (hot ones are the
       * latest multiple of 2). */
      SL_ASSERT_TRUE(ev.bid.auction >= 1000 + auctions - 1 - 100 - 1);
      SL_ASSERT_TRUE(ev.bid.bidder >= 1000);
      SL_ASSERT_TRUE(ev.bid.bidder < 1000 + persons + 10);
      SL_ASSERT_TRUE(ev.bid.price >= 100 && ev.bid.price <= 100000000);
    }
  }
}

SL_TEST(hot_auctions_and_channels_have_their_shares) {
  sl_nexmark_config_t c = cfg();
  uint64_t bids = 0, hot_auction = 0, hot_channel = 0;
  for (uint64_t i = 0; i < 500000; i++) {
    if (sl_nexmark_kind(&c, i) != SL_NEX_BID) continue;
    sl_nexmark_generate(&c, i, (int64_t)i, &ev);
    bids++;
    /* The hot auction of a bid is the latest auction id rounded down to a
     * multiple of 2; the other half picks among ~111 in flight, of which
     * about 1/2 are also multiples of 2 and one is that very id. */
    int64_t latest = (int64_t)((i / 50) * 3 + 2) - 1000 + 1000;
    int64_t hot = (latest / 2) * 2 + 1000;
    if (ev.bid.auction == hot) hot_auction++;
    if (ev.bid.channel.len < 8 || memcmp(ev.bid.channel.p, "channel-", 8) != 0)
      hot_channel++;
  }
  double p = (double)hot_auction / (double)bids;
  /* P(hot) = 1/2 + 1/2 * P(uniform pick hits it) ~ 0.5 + 0.5/111. */
  double want = 0.5 + 0.5 / 111.0;
  double se = sqrt(want * (1 - want) / (double)bids);
  SL_ASSERT_TRUE(fabs(p - want) < 5 * se + 0.005);
  double q = (double)hot_channel / (double)bids;
  double se_q = sqrt(0.1 * 0.9 / (double)bids);
  SL_ASSERT_TRUE(fabs(q - 0.1) < 5 * se_q);
}

/* The size the original's generator pads toward: 8 bytes per number and
 * the strings, a bid's channel and url aside. */
static size_t counted_size(const sl_nex_event_t *e) {
  if (e->kind == SL_NEX_PERSON)
    return 8 + e->person.name.len + e->person.email_address.len +
           e->person.credit_card.len + e->person.city.len +
           e->person.state.len + e->person.extra.len;
  if (e->kind == SL_NEX_AUCTION)
    return 8 + e->auction.item_name.len + e->auction.description.len +
           5 * 8 + e->auction.extra.len;
  return 4 * 8 + e->bid.extra.len;
}

SL_TEST(sizes_average_to_the_configured_ones_and_fit_the_bounds) {
  sl_nexmark_config_t c = cfg();
  double sum[3] = {0, 0, 0};
  uint64_t n[3] = {0, 0, 0};
  size_t max[3] = {0, 0, 0};
  static uint8_t buf[4096];
  for (uint64_t i = 0; i < 200000; i++) {
    sl_nexmark_generate(&c, i, (int64_t)i, &ev);
    size_t len = sl_nexmark_encode(&ev, buf, sizeof(buf));
    SL_ASSERT_TRUE(len > 0);
    sum[ev.kind] += (double)counted_size(&ev);
    n[ev.kind]++;
    if (len > max[ev.kind]) max[ev.kind] = len;
  }
  SL_ASSERT_TRUE(max[SL_NEX_BID] <= SL_NEXMARK_MAX_BID);
  SL_ASSERT_TRUE(max[SL_NEX_PERSON] <= SL_NEXMARK_MAX_PERSON);
  SL_ASSERT_TRUE(max[SL_NEX_AUCTION] <= SL_NEXMARK_MAX_AUCTION);
  double want[3] = {200, 500, 100};
  for (int k = 0; k < 3; k++) {
    double avg = sum[k] / (double)n[k];
    SL_ASSERT_TRUE(fabs(avg - want[k]) <= 0.1 * want[k]);
  }
}

SL_TEST(encoding_round_trips_and_rejects_every_truncation) {
  sl_nexmark_config_t c = cfg();
  static uint8_t buf[SL_NEXMARK_MAX_ENCODED];
  for (uint64_t i = 0; i < 10000; i++) {
    sl_nexmark_generate(&c, i, (int64_t)i * 10, &ev);
    size_t len = sl_nexmark_encode(&ev, buf, sizeof(buf));
    SL_ASSERT_TRUE(len > 0);
    SL_ASSERT_EQ_INT(sl_nexmark_encode(&ev, buf, len - 1), 0);
    len = sl_nexmark_encode(&ev, buf, sizeof(buf));
    SL_ASSERT_EQ_INT(sl_nexmark_decode(buf, len, &ev2), 0);
    SL_ASSERT_EQ_INT(ev2.kind, ev.kind);
    SL_ASSERT_EQ_INT(ev2.event_id, ev.event_id);
    if (ev.kind == SL_NEX_BID) {
      SL_ASSERT_EQ_INT(ev2.bid.auction, ev.bid.auction);
      SL_ASSERT_EQ_INT(ev2.bid.bidder, ev.bid.bidder);
      SL_ASSERT_EQ_INT(ev2.bid.price, ev.bid.price);
      SL_ASSERT_EQ_INT(ev2.bid.url.len, ev.bid.url.len);
      SL_ASSERT_TRUE(memcmp(ev2.bid.url.p, ev.bid.url.p, ev.bid.url.len) == 0);
      SL_ASSERT_EQ_INT(ev2.bid.extra.len, ev.bid.extra.len);
    } else if (ev.kind == SL_NEX_AUCTION) {
      SL_ASSERT_EQ_INT(ev2.auction.seller, ev.auction.seller);
      SL_ASSERT_EQ_INT(ev2.auction.expires_us, ev.auction.expires_us);
      SL_ASSERT_TRUE(memcmp(ev2.auction.description.p, ev.auction.description.p,
                            ev.auction.description.len) == 0);
    } else {
      SL_ASSERT_EQ_INT(ev2.person.state.len, ev.person.state.len);
      SL_ASSERT_TRUE(memcmp(ev2.person.name.p, ev.person.name.p,
                            ev.person.name.len) == 0);
    }
    if (i < 200) /* every prefix is rejected (ASan checks the reads) */
      for (size_t k = 0; k < len; k++) {
        uint8_t *cut = malloc(k ? k : 1);
        memcpy(cut, buf, k);
        SL_ASSERT_EQ_INT(sl_nexmark_decode(cut, k, &ev2), -1);
        free(cut);
      }
  }
}

SL_TEST(an_event_is_a_function_of_its_number) {
  sl_nexmark_config_t c = cfg();
  static uint8_t a[SL_NEXMARK_MAX_ENCODED], b[SL_NEXMARK_MAX_ENCODED];
  for (uint64_t i = 0; i < 1000; i += 7) {
    sl_nexmark_generate(&c, i, 5, &ev);
    size_t la = sl_nexmark_encode(&ev, a, sizeof(a));
    sl_nexmark_generate(&c, 999, 5, &ev2); /* something in between */
    sl_nexmark_generate(&c, i, 5, &ev2);
    size_t lb = sl_nexmark_encode(&ev2, b, sizeof(b));
    SL_ASSERT_EQ_INT(la, lb);
    SL_ASSERT_TRUE(memcmp(a, b, la) == 0);
  }
}
