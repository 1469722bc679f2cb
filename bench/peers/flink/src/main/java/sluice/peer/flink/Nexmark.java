// SPDX-License-Identifier: Apache-2.0
package sluice.peer.flink;

import java.io.Serializable;
import java.math.BigDecimal;
import java.math.MathContext;

/**
 * A bit-exact port of sluice's Nexmark generator (bench/nexmark.c): the same
 * splitmix64 stream seeded from (seed, event id), the same rules and the same
 * strings. Event i is a pure function of (config, i, date_time). All 64-bit
 * values are C's uint64_t/int64_t in Java longs: unsigned where nexmark.c is
 * unsigned (the high word of a 128-bit product, logical shifts).
 */
final class Nexmark implements Serializable {
  private static final long serialVersionUID = 1L;

  static final int PERSON = 0, AUCTION = 1, BID = 2;
  static final long T0_US = 1700000000000000L;
  static final int BUF = 1024; // SL_NEX_BUF: the strings of one event

  private static final int FIRST_PERSON_ID = 1000;
  private static final int FIRST_AUCTION_ID = 1000;
  private static final int FIRST_CATEGORY_ID = 10;
  private static final int NUM_CATEGORIES = 5;
  private static final int PERSON_PROPORTION = 1;
  private static final int AUCTION_PROPORTION = 3;
  private static final int TOTAL_PROPORTION = 50;
  private static final int PERSON_ID_LEAD = 10;
  private static final int AUCTION_ID_LEAD = 10;
  private static final int CHANNELS = 10000;

  private static final byte[][] FIRST_NAMES = bytes("Peter", "Paul", "Luke",
      "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter");
  private static final byte[][] LAST_NAMES = bytes("Shultz", "Abrams",
      "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris");
  private static final byte[][] CITIES = bytes("Phoenix", "Los Angeles",
      "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle",
      "Kent", "Cheyenne");
  private static final byte[][] STATES = bytes("AZ", "CA", "ID", "OR", "WA",
      "WY");
  private static final byte[][] HOT_CHANNELS = bytes("Google", "Facebook",
      "Baidu", "Apple");
  private static final byte[] SP = bytes(" ")[0], AT = bytes("@")[0],
      DOT_COM = bytes(".com")[0], SLASH = bytes("/")[0],
      URL_HEAD = bytes("https://www.nexmark.com/")[0],
      URL_HOT_TAIL = bytes("/item.htm?query=1")[0],
      URL_TAIL = bytes("/item.htm?query=1&channel_id=")[0],
      CHANNEL = bytes("channel-")[0];

  // sl_nexmark_config_t, with sl_nexmark_config_init's defaults.
  final long seed;
  final double eventsPerSecond;
  final int numActivePeople = 1000, numInFlightAuctions = 100;
  final int hotAuctionRatio = 2, hotSellerRatio = 4, hotBidderRatio = 4;
  final int avgPersonSize = 200, avgAuctionSize = 500, avgBidSize = 100;
  /** The integer rate R of date_time_us(i) = T0 + i * 1000000 / R. */
  final long rate;

  Nexmark(long seed, long rate) {
    this.seed = seed;
    this.rate = rate;
    this.eventsPerSecond = (double) rate;
  }

  long dateTimeUs(long i) {
    return T0_US + Long.divideUnsigned(i * 1000000L, rate);
  }

  static int kind(long id) {
    long rem = Long.remainderUnsigned(id, TOTAL_PROPORTION);
    if (rem < PERSON_PROPORTION) return PERSON;
    if (rem < PERSON_PROPORTION + AUCTION_PROPORTION) return AUCTION;
    return BID;
  }

  /** One generated event; strings are (offset, length) in buf. */
  static final class Event {
    int kind;
    long eventId, dateTimeUs;
    // person: id; auction: id initialBid reserve expires seller category;
    // bid: auction bidder price
    long id, initialBid, reserve, expiresUs, seller, category;
    long auction, bidder, price;
    // person: name email creditCard city state extra;
    // auction: itemName description extra; bid: channel url extra
    final int[] off = new int[6], len = new int[6];
    byte[] buf;
    int bufLen;

    int nStrings() {
      return kind == PERSON ? 6 : 3;
    }
  }

  // ---- randomness: splitmix64 ---------------------------------------------

  private static final class Rng {
    long s;

    Rng(long s) {
      this.s = s;
    }

    long next64() {
      long z = (s += 0x9e3779b97f4a7c15L);
      z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
      z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
      return z ^ (z >>> 31);
    }

    /** Uniform in [0, n): the high word of the unsigned 128-bit product. */
    long below(long n) {
      return umulh(next64(), n);
    }

    double unit() {
      return (double) (next64() >>> 11) * 0x1.0p-53;
    }
  }

  /** The high 64 bits of the unsigned 128-bit product a * b. */
  static long umulh(long a, long b) {
    return Math.multiplyHigh(a, b) + ((a >> 63) & b) + ((b >> 63) & a);
  }

  // ---- ids ----------------------------------------------------------------

  private static long lastPerson(long id) {
    long epoch = Long.divideUnsigned(id, TOTAL_PROPORTION);
    long off = Long.remainderUnsigned(id, TOTAL_PROPORTION);
    if (off >= PERSON_PROPORTION) off = PERSON_PROPORTION - 1;
    return epoch * PERSON_PROPORTION + off;
  }

  private static long lastAuction(long id) {
    long epoch = Long.divideUnsigned(id, TOTAL_PROPORTION);
    long off = Long.remainderUnsigned(id, TOTAL_PROPORTION);
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

  private long nextPerson(long id, Rng r) {
    long n = lastPerson(id) + 1;
    long active = n < numActivePeople ? n : numActivePeople;
    return n - active + r.below(active + PERSON_ID_LEAD);
  }

  private long nextAuction(long id, Rng r) {
    long max = lastAuction(id);
    long min = max - numInFlightAuctions;
    if (min < 0) min = 0;
    return min + r.below(max - min + 1 + AUCTION_ID_LEAD);
  }

  private static final double LN_1E6 = 13.815510557964274;

  private static long nextPrice(Rng r) {
    double x = r.unit() * LN_1E6;
    double v = StrictMath.exp(x) * 100.0;
    // llround(exp(x) * 100.0): glibc's exp and fdlibm's may differ in the
    // last bit; that changes the rounding only next to a half, where the
    // exponential is recomputed correctly rounded (as glibc's nearly always
    // is).
    double frac = v - Math.floor(v);
    if (Math.abs(frac - 0.5) < 1e-13 * v + 1e-12) v = preciseExp(x) * 100.0;
    return Math.round(v);
  }

  private static final MathContext MC = new MathContext(60);

  /** exp(x) correctly rounded to a double (x in [0, 14)). */
  static double preciseExp(double x) {
    BigDecimal y = new BigDecimal(x).divide(BigDecimal.valueOf(1024), MC);
    BigDecimal sum = BigDecimal.ONE, term = BigDecimal.ONE;
    for (int k = 1; k < 40; k++) {
      term = term.multiply(y, MC).divide(BigDecimal.valueOf(k), MC);
      sum = sum.add(term, MC);
    }
    for (int i = 0; i < 10; i++) sum = sum.multiply(sum, MC);
    return sum.doubleValue();
  }

  // ---- strings ------------------------------------------------------------

  /** sbuf_t: appends truncated at the buffer's end, as nexmark.c's. */
  private static final class SBuf {
    final byte[] p;
    int len;

    SBuf(byte[] p) {
      this.p = p;
    }

    int put(byte[] s) {
      int n = Math.min(s.length, p.length - len);
      System.arraycopy(s, 0, p, len, n);
      len += n;
      return n;
    }

    /** n lower-case letters or spaces, eight per 64-bit draw. */
    void appendRandom(Rng r, int n) {
      if (n > p.length - len) n = p.length - len;
      int at = len;
      for (int i = 0; i < n;) {
        long x = r.next64();
        for (int k = 0; k < 8 && i < n; k++, i++) {
          int c = (int) umulh(x, 27);
          x = x * 27;
          p[at + i] = c == 26 ? (byte) ' ' : (byte) ('a' + c);
        }
      }
      len += n;
    }

    void appendU64(long v, int minDigits) {
      byte[] tmp = new byte[24];
      int n = 0;
      do {
        tmp[n++] = (byte) ('0' + Long.remainderUnsigned(v, 10));
        v = Long.divideUnsigned(v, 10);
      } while (v != 0 || n < minDigits);
      while (n > 0 && len < p.length) p[len++] = tmp[--n];
    }
  }

  private static final int PAD_POOL = 64 * 1024;
  private static final byte[] PAD = new byte[PAD_POOL + BUF];

  static {
    SBuf b = new SBuf(PAD);
    b.appendRandom(new Rng(0x70616464696e67L), PAD.length);
  }

  /** Padding toward avg: (avg - current) +-20% characters of the pool. */
  private static void extra(Event e, int slot, SBuf b, Rng r, int current,
      int avg) {
    e.off[slot] = b.len;
    if (current >= avg) {
      e.len[slot] = 0;
      return;
    }
    int want = avg - current;
    long delta = Math.round(want * 0.2);
    long n = want - delta + r.below(2 * delta + 1);
    if (n > b.p.length - b.len) n = b.p.length - b.len;
    long from = r.below(PAD_POOL);
    System.arraycopy(PAD, (int) from, b.p, b.len, (int) n);
    b.len += (int) n;
    e.len[slot] = (int) n;
  }

  /** sl_nexmark_generate into e (a fresh buffer for its strings). */
  void generate(long id, long dateTimeUs, Event e) {
    Rng r = new Rng(seed ^ (id * 0xd1342543de82ef95L));
    r.next64();
    SBuf b = new SBuf(new byte[BUF]);
    e.buf = b.p;
    e.kind = kind(id);
    e.eventId = id;
    e.dateTimeUs = dateTimeUs;
    if (e.kind == PERSON) {
      e.id = lastPerson(id) + FIRST_PERSON_ID;
      int start = b.len;
      b.put(FIRST_NAMES[(int) r.below(FIRST_NAMES.length)]);
      b.put(SP);
      b.put(LAST_NAMES[(int) r.below(LAST_NAMES.length)]);
      e.off[0] = start;
      e.len[0] = b.len - start;
      start = b.len;
      b.appendRandom(r, 7);
      b.put(AT);
      b.appendRandom(r, 5);
      b.put(DOT_COM);
      e.off[1] = start;
      e.len[1] = b.len - start;
      start = b.len;
      for (int g = 0; g < 4; g++) {
        if (g != 0) b.put(SP);
        b.appendU64(r.below(10000), 4);
      }
      e.off[2] = start;
      e.len[2] = b.len - start;
      e.off[3] = b.len;
      e.len[3] = b.put(CITIES[(int) r.below(CITIES.length)]);
      e.off[4] = b.len;
      e.len[4] = b.put(STATES[(int) r.below(STATES.length)]);
      int cur = 8 + e.len[0] + e.len[1] + e.len[2] + e.len[3] + e.len[4];
      extra(e, 5, b, r, cur, avgPersonSize);
    } else if (e.kind == AUCTION) {
      e.id = lastAuction(id) + FIRST_AUCTION_ID;
      long seller = r.below(hotSellerRatio) > 0
          ? (lastPerson(id) / hotSellerRatio) * hotSellerRatio
          : nextPerson(id, r);
      e.seller = seller + FIRST_PERSON_ID;
      e.category = FIRST_CATEGORY_ID + r.below(NUM_CATEGORIES);
      e.initialBid = nextPrice(r);
      e.reserve = e.initialBid + nextPrice(r);
      e.off[0] = b.len;
      b.appendRandom(r, 20);
      e.len[0] = b.len - e.off[0];
      e.off[1] = b.len;
      b.appendRandom(r, 100);
      e.len[1] = b.len - e.off[1];
      double events = (double) numInFlightAuctions * TOTAL_PROPORTION
          / AUCTION_PROPORTION;
      double horizonUs = events / eventsPerSecond * 1e6;
      long span = doubleToU64(horizonUs * 2) + 1;
      e.expiresUs = dateTimeUs + 1 + r.below(span);
      int cur = 8 + e.len[0] + e.len[1] + 8 + 8 + 8 + 8 + 8;
      extra(e, 2, b, r, cur, avgAuctionSize);
    } else {
      long auction = r.below(hotAuctionRatio) > 0
          ? (lastAuction(id) / hotAuctionRatio) * hotAuctionRatio
          : nextAuction(id, r);
      long bidder = r.below(hotBidderRatio) > 0
          ? (lastPerson(id) / hotBidderRatio) * hotBidderRatio + 1
          : nextPerson(id, r);
      e.auction = auction + FIRST_AUCTION_ID;
      e.bidder = bidder + FIRST_PERSON_ID;
      e.price = nextPrice(r);
      if (r.below(10) == 0) {
        int h = (int) r.below(HOT_CHANNELS.length);
        e.off[0] = b.len;
        e.len[0] = b.put(HOT_CHANNELS[h]);
        int start = b.len;
        b.put(URL_HEAD);
        b.put(HOT_CHANNELS[h]);
        b.put(URL_HOT_TAIL);
        e.off[1] = start;
        e.len[1] = b.len - start;
      } else {
        long ch = r.below(CHANNELS);
        int start = b.len;
        b.put(CHANNEL);
        b.appendU64(ch, 1);
        e.off[0] = start;
        e.len[0] = b.len - start;
        Rng cr = new Rng(0x6a09e667f3bcc909L ^ ch);
        start = b.len;
        b.put(URL_HEAD);
        b.appendRandom(cr, 5);
        b.put(SLASH);
        b.appendRandom(cr, 5);
        b.put(SLASH);
        b.appendRandom(cr, 5);
        b.put(URL_TAIL);
        b.appendU64(ch, 1);
        e.off[1] = start;
        e.len[1] = b.len - start;
      }
      extra(e, 2, b, r, 8 * 4, avgBidSize);
    }
    e.bufLen = b.len;
  }

  /** C's (uint64_t) conversion of a non-negative double below 2^64. */
  private static long doubleToU64(double d) {
    if (d < 9.223372036854775807E18) return (long) d;
    return (long) (d - 9.223372036854775807E18) ^ Long.MIN_VALUE;
  }

  private static byte[][] bytes(String... s) {
    byte[][] out = new byte[s.length][];
    for (int i = 0; i < s.length; i++)
      out[i] = s[i].getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    return out;
  }

  // ---- the text dump (the generator check: bench/peers/check-generator.sh)

  /** One line per event, as bench/peers/nexmark_dump.c prints it. */
  static void dump(Event e, java.io.OutputStream out) throws java.io.IOException {
    StringBuilder s = new StringBuilder(128);
    char k = e.kind == PERSON ? 'P' : e.kind == AUCTION ? 'A' : 'B';
    s.append(k).append('\t').append(e.eventId).append('\t')
        .append(e.dateTimeUs);
    if (e.kind == PERSON) {
      s.append('\t').append(e.id);
    } else if (e.kind == AUCTION) {
      s.append('\t').append(e.id).append('\t').append(e.initialBid)
          .append('\t').append(e.reserve).append('\t').append(e.expiresUs)
          .append('\t').append(e.seller).append('\t').append(e.category);
    } else {
      s.append('\t').append(e.auction).append('\t').append(e.bidder)
          .append('\t').append(e.price);
    }
    out.write(s.toString().getBytes(java.nio.charset.StandardCharsets.US_ASCII));
    for (int i = 0; i < e.nStrings(); i++) {
      out.write('\t');
      out.write(e.buf, e.off[i], e.len[i]);
    }
    out.write('\n');
  }
}
