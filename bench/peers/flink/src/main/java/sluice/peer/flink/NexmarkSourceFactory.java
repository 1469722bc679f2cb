// SPDX-License-Identifier: Apache-2.0
package sluice.peer.flink;

import java.util.Set;

import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.source.DynamicTableSource;
import org.apache.flink.table.connector.source.ScanTableSource;
import org.apache.flink.table.connector.source.SourceProvider;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.factories.DynamicTableSourceFactory;
import org.apache.flink.table.factories.FactoryUtil;

/**
 * The table connector 'sluice-nexmark': one kind of Nexmark event (person,
 * auction or bid), generated inside the job by the port of bench/nexmark.c.
 * The rows of a kind, in order of event number, with the columns of
 * {@link Main}'s DDL (the last one the event time as TIMESTAMP(3)).
 *
 * Like sluice-bench-nexmark, every source of a query visits the event
 * numbers 0..N-1 and generates only those of its kind; the option 'drop'
 * (a bitmask of kinds) makes one source also generate, and drop, the kinds
 * no source of the query reads, so each event is generated exactly once.
 * The source is Flink's DataGeneratorSource (a checkpointed number sequence)
 * over the ordinals of the kind's events; ordinal k is a pure function of k.
 */
public final class NexmarkSourceFactory implements DynamicTableSourceFactory {
  static final ConfigOption<String> KIND =
      ConfigOptions.key("kind").stringType().noDefaultValue();
  static final ConfigOption<Long> EVENTS =
      ConfigOptions.key("events").longType().noDefaultValue();
  static final ConfigOption<Long> SEED =
      ConfigOptions.key("seed").longType().defaultValue(42L);
  static final ConfigOption<Long> RATE =
      ConfigOptions.key("rate").longType().defaultValue(10000000L);
  static final ConfigOption<Integer> DROP =
      ConfigOptions.key("drop").intType().defaultValue(0);

  @Override
  public String factoryIdentifier() {
    return "sluice-nexmark";
  }

  @Override
  public Set<ConfigOption<?>> requiredOptions() {
    return Set.of(KIND, EVENTS);
  }

  @Override
  public Set<ConfigOption<?>> optionalOptions() {
    return Set.of(SEED, RATE, DROP);
  }

  @Override
  public DynamicTableSource createDynamicTableSource(Context context) {
    FactoryUtil.TableFactoryHelper helper =
        FactoryUtil.createTableFactoryHelper(this, context);
    helper.validate();
    ReadableConfig o = helper.getOptions();
    int kind = switch (o.get(KIND)) {
      case "person" -> Nexmark.PERSON;
      case "auction" -> Nexmark.AUCTION;
      case "bid" -> Nexmark.BID;
      default -> throw new IllegalArgumentException("kind: " + o.get(KIND));
    };
    return new Source(kind, o.get(EVENTS), o.get(SEED), o.get(RATE),
        o.get(DROP), context.getPhysicalRowDataType());
  }

  static final class Source implements ScanTableSource {
    final int kind, drop;
    final long events, seed, rate;
    final org.apache.flink.table.types.DataType type;

    Source(int kind, long events, long seed, long rate, int drop,
        org.apache.flink.table.types.DataType type) {
      this.kind = kind;
      this.events = events;
      this.seed = seed;
      this.rate = rate;
      this.drop = drop;
      this.type = type;
    }

    @Override
    public ChangelogMode getChangelogMode() {
      return ChangelogMode.insertOnly();
    }

    @Override
    public ScanRuntimeProvider getScanRuntimeProvider(ScanContext ctx) {
      TypeInformation<RowData> ti = ctx.createTypeInformation(type);
      Gen g = new Gen(kind, events, seed, rate, drop);
      return SourceProvider.of(new DataGeneratorSource<>(g, g.count(), ti), 1);
    }

    @Override
    public DynamicTableSource copy() {
      return new Source(kind, events, seed, rate, drop, type);
    }

    @Override
    public String asSummaryString() {
      return "sluice-nexmark";
    }
  }

  /** Ordinal k of a kind's events -> its row. */
  static final class Gen implements GeneratorFunction<Long, RowData> {
    private static final long serialVersionUID = 1L;
    final int kind, drop;
    final long events;
    final Nexmark nx;
    final int[] offs; // the kind's event numbers mod 50
    private transient Nexmark.Event ev, scratch;
    private transient long sink; // keeps dropped events' generation alive
    static volatile long sinkOut;

    Gen(int kind, long events, long seed, long rate, int drop) {
      this.kind = kind;
      this.events = events;
      this.nx = new Nexmark(seed, rate);
      this.drop = drop;
      int n = 0;
      int[] o = new int[50];
      for (int i = 0; i < 50; i++)
        if (Nexmark.kind(i) == kind) o[n++] = i;
      this.offs = java.util.Arrays.copyOf(o, n);
    }

    long count() {
      long n = events / 50 * offs.length;
      for (int o : offs)
        if (o < events % 50) n++;
      return n;
    }

    long eventNumber(long k) {
      return k / offs.length * 50 + offs[(int) (k % offs.length)];
    }

    private void dropRange(long from, long to) { // (from, to) exclusive
      for (long j = from + 1; j < to; j++) {
        if ((drop & (1 << Nexmark.kind(j))) == 0) continue;
        nx.generate(j, nx.dateTimeUs(j), scratch);
        sink += scratch.buf[scratch.bufLen - 1] + scratch.price;
      }
    }

    @Override
    public RowData map(Long ordinal) {
      if (ev == null) {
        ev = new Nexmark.Event();
        scratch = new Nexmark.Event();
      }
      long k = ordinal;
      long id = eventNumber(k);
      if (drop != 0) {
        dropRange(k == 0 ? -1 : eventNumber(k - 1), id);
        if (k == count() - 1) dropRange(id, events);
      }
      long t = nx.dateTimeUs(id);
      Nexmark.Event e = ev;
      nx.generate(id, t, e);
      TimestampData ts = TimestampData.fromEpochMillis(Math.floorDiv(t, 1000L));
      switch (kind) {
        case Nexmark.PERSON:
          return GenericRowData.of(e.id, s(e, 0), s(e, 1), s(e, 2), s(e, 3),
              s(e, 4), t, s(e, 5), ts);
        case Nexmark.AUCTION:
          return GenericRowData.of(e.id, s(e, 0), s(e, 1), e.initialBid,
              e.reserve, t, e.expiresUs, e.seller, e.category, s(e, 2), ts);
        default:
          return GenericRowData.of(e.auction, e.bidder, e.price, s(e, 0),
              s(e, 1), t, s(e, 2), ts);
      }
    }

    private static StringData s(Nexmark.Event e, int i) {
      return StringData.fromBytes(e.buf, e.off[i], e.len[i]);
    }

    @Override
    public void close() {
      sinkOut = sink;
    }
  }
}
