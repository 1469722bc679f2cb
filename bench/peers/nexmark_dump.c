/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-nexmark-dump: events 0..N-1 of bench/nexmark.c as text, one line
 * per event, so that the peers' ports of the generator can be diffed
 * against it (bench/peers/check-generator.sh):
 *
 *   P event_id date_time id name email_address credit_card city state extra
 *   A event_id date_time id initial_bid reserve expires seller category
 *     item_name description extra
 *   B event_id date_time auction bidder price channel url extra
 *
 * fields TAB-separated; date_time = 1700000000000000 + i * 1000000 / R.
 *
 *   sluice-nexmark-dump --events N [--seed S (42)] [--rate R (10000000)]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nexmark.h"

static void str(sl_nex_str_t s) {
  putchar('\t');
  fwrite(s.p, 1, s.len, stdout);
}

int main(int argc, char **argv) {
  uint64_t events = 0, seed = 42, rate = 10000000;
  for (int i = 1; i + 1 < argc; i += 2) {
    uint64_t v = strtoull(argv[i + 1], NULL, 10);
    if (strcmp(argv[i], "--events") == 0) events = v;
    else if (strcmp(argv[i], "--seed") == 0) seed = v;
    else if (strcmp(argv[i], "--rate") == 0) rate = v;
    else {
      fprintf(stderr, "usage: %s --events N [--seed S] [--rate R]\n",
              argv[0]);
      return 2;
    }
  }
  if (rate == 0) {
    fprintf(stderr, "%s: --rate must be positive\n", argv[0]);
    return 2;
  }
  sl_nexmark_config_t c;
  sl_nexmark_config_init(&c);
  c.seed = seed;
  c.events_per_second = (double)rate;
  static sl_nex_event_t e;
  for (uint64_t i = 0; i < events; i++) {
    int64_t t = 1700000000000000ll + (int64_t)(i * 1000000u / rate);
    sl_nexmark_generate(&c, i, t, &e);
    if (e.kind == SL_NEX_PERSON) {
      printf("P\t%" PRId64 "\t%" PRId64 "\t%" PRId64, e.event_id,
             e.date_time_us, e.person.id);
      str(e.person.name), str(e.person.email_address);
      str(e.person.credit_card), str(e.person.city), str(e.person.state);
      str(e.person.extra);
    } else if (e.kind == SL_NEX_AUCTION) {
      printf("A\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64
             "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64,
             e.event_id, e.date_time_us, e.auction.id, e.auction.initial_bid,
             e.auction.reserve, e.auction.expires_us, e.auction.seller,
             e.auction.category);
      str(e.auction.item_name), str(e.auction.description);
      str(e.auction.extra);
    } else {
      printf("B\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64
             "\t%" PRId64, e.event_id, e.date_time_us, e.bid.auction,
             e.bid.bidder, e.bid.price);
      str(e.bid.channel), str(e.bid.url), str(e.bid.extra);
    }
    putchar('\n');
  }
  return fflush(stdout) == 0 ? 0 : 1;
}
