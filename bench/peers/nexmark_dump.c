/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prints the Nexmark events 0..N-1 of bench/nexmark.c, one per line, fields
 * separated by TAB, so that a peer's port of the generator can be checked
 * byte for byte (`<peer> --dump-events N` prints the same form):
 *
 *   P event_id date_time id name email_address credit_card city state extra
 *   A event_id date_time id item_name description initial_bid reserve
 *     expires seller category extra
 *   B event_id date_time auction bidder price channel url extra
 *
 * Usage: nexmark_dump N [seed=42] [rate=10000000]
 * Build: cc -O2 -o nexmark_dump bench/peers/nexmark_dump.c bench/nexmark.c -lm
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "../nexmark.h"

static void s(const sl_nex_str_t x) {
  putchar('\t');
  fwrite(x.p, 1, x.len, stdout);
}

static void n(int64_t v) { printf("\t%" PRId64, v); }

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s N [seed] [rate]\n", argv[0]);
    return 2;
  }
  uint64_t count = strtoull(argv[1], NULL, 10);
  uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 42;
  int64_t rate = argc > 3 ? strtoll(argv[3], NULL, 10) : 10000000;
  sl_nexmark_config_t c;
  sl_nexmark_config_init(&c);
  c.seed = seed;
  c.events_per_second = (double)rate;
  static sl_nex_event_t e;
  for (uint64_t i = 0; i < count; i++) {
    int64_t dt = 1700000000000000LL + (int64_t)(i * 1000000ull / (uint64_t)rate);
    sl_nexmark_generate(&c, i, dt, &e);
    if (e.kind == SL_NEX_PERSON) {
      printf("P\t%" PRId64 "\t%" PRId64, e.event_id, e.date_time_us);
      n(e.person.id);
      s(e.person.name), s(e.person.email_address), s(e.person.credit_card);
      s(e.person.city), s(e.person.state), s(e.person.extra);
    } else if (e.kind == SL_NEX_AUCTION) {
      printf("A\t%" PRId64 "\t%" PRId64, e.event_id, e.date_time_us);
      n(e.auction.id);
      s(e.auction.item_name), s(e.auction.description);
      n(e.auction.initial_bid), n(e.auction.reserve), n(e.auction.expires_us);
      n(e.auction.seller), n(e.auction.category);
      s(e.auction.extra);
    } else {
      printf("B\t%" PRId64 "\t%" PRId64, e.event_id, e.date_time_us);
      n(e.bid.auction), n(e.bid.bidder), n(e.bid.price);
      s(e.bid.channel), s(e.bid.url), s(e.bid.extra);
    }
    putchar('\n');
  }
  return 0;
}
