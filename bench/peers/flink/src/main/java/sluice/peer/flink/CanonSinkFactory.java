// SPDX-License-Identifier: Apache-2.0
package sluice.peer.flink;

import java.io.BufferedOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.StatefulSinkWriter;
import org.apache.flink.api.connector.sink2.SupportsWriterState;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.sink.DynamicTableSink;
import org.apache.flink.table.connector.sink.SinkV2Provider;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.factories.DynamicTableSinkFactory;
import org.apache.flink.table.factories.FactoryUtil;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.LogicalTypeRoot;
import org.apache.flink.types.RowKind;

/**
 * The table connector 'sluice-canon': the canonical answer of the peer
 * contract. Each row counts as one result; with 'out' set, it is also written
 * as one line, fields TAB-separated (BIGINT decimal, DOUBLE "%.3f" of its
 * exact binary value rounded half-even as C's printf, STRING raw bytes,
 * TIMESTAMP as microseconds since the epoch). An append-only answer must get
 * inserts only. With 'final' = true (q4), the changelog is folded into the
 * last row per key (field 0), written and counted when the input ends.
 * Parallelism 1, one JVM: the count is handed to {@link Main} in a static.
 */
public final class CanonSinkFactory implements DynamicTableSinkFactory {
  static final ConfigOption<String> OUT =
      ConfigOptions.key("out").stringType().defaultValue("");
  static final ConfigOption<Boolean> FINAL =
      ConfigOptions.key("final").booleanType().defaultValue(false);

  /** Rows of the canonical answer, set when the writer closes. */
  static final AtomicLong RESULTS = new AtomicLong(-1);

  @Override
  public String factoryIdentifier() {
    return "sluice-canon";
  }

  @Override
  public Set<ConfigOption<?>> requiredOptions() {
    return Set.of();
  }

  @Override
  public Set<ConfigOption<?>> optionalOptions() {
    return Set.of(OUT, FINAL);
  }

  @Override
  public DynamicTableSink createDynamicTableSink(Context context) {
    FactoryUtil.TableFactoryHelper helper =
        FactoryUtil.createTableFactoryHelper(this, context);
    helper.validate();
    ReadableConfig o = helper.getOptions();
    List<LogicalType> types =
        context.getCatalogTable().getResolvedSchema().toPhysicalRowDataType()
            .getLogicalType().getChildren();
    return new TableSink(types.toArray(new LogicalType[0]), o.get(OUT),
        o.get(FINAL));
  }

  static final class TableSink implements DynamicTableSink {
    final LogicalType[] types;
    final String out;
    final boolean isFinal;

    TableSink(LogicalType[] types, String out, boolean isFinal) {
      this.types = types;
      this.out = out;
      this.isFinal = isFinal;
    }

    @Override
    public ChangelogMode getChangelogMode(ChangelogMode requested) {
      return isFinal ? ChangelogMode.all() : ChangelogMode.insertOnly();
    }

    @Override
    public SinkRuntimeProvider getSinkRuntimeProvider(Context context) {
      return SinkV2Provider.of(new CanonSink(types, out, isFinal));
    }

    @Override
    public DynamicTableSink copy() {
      return new TableSink(types, out, isFinal);
    }

    @Override
    public String asSummaryString() {
      return "sluice-canon";
    }
  }

  /** Checkpoints the sink took part in (its snapshotState calls). */
  static final AtomicLong CHECKPOINTS = new AtomicLong();

  /** The sink keeps no state; it is a stateful writer only to count the
   * checkpoints (reported on stderr). */
  static final class CanonSink implements Sink<RowData>,
      SupportsWriterState<RowData, Long> {
    private static final long serialVersionUID = 1L;
    final LogicalType[] types;
    final String out;
    final boolean isFinal;

    CanonSink(LogicalType[] types, String out, boolean isFinal) {
      this.types = types;
      this.out = out;
      this.isFinal = isFinal;
    }

    @Override
    public StatefulSinkWriter<RowData, Long> createWriter(WriterInitContext ctx)
        throws IOException {
      return new Writer(this);
    }

    @Override
    public StatefulSinkWriter<RowData, Long> restoreWriter(
        WriterInitContext ctx, Collection<Long> state) throws IOException {
      return new Writer(this);
    }

    @Override
    public SimpleVersionedSerializer<Long> getWriterStateSerializer() {
      return new SimpleVersionedSerializer<>() {
        @Override
        public int getVersion() {
          return 1;
        }

        @Override
        public byte[] serialize(Long v) {
          return new byte[0];
        }

        @Override
        public Long deserialize(int version, byte[] b) {
          return 0L;
        }
      };
    }
  }

  static final class Writer implements StatefulSinkWriter<RowData, Long> {
    final LogicalTypeRoot[] roots;
    final boolean isFinal;
    final OutputStream out; // null: count only
    final Map<Long, byte[]> last = new LinkedHashMap<>();
    final StringBuilder line = new StringBuilder(256);
    long results;

    Writer(CanonSink k) throws IOException {
      roots = new LogicalTypeRoot[k.types.length];
      for (int i = 0; i < roots.length; i++)
        roots[i] = k.types[i].getTypeRoot();
      isFinal = k.isFinal;
      out = k.out.isEmpty() ? null
          : new BufferedOutputStream(new FileOutputStream(k.out), 1 << 16);
    }

    @Override
    public void write(RowData row, Context ctx) throws IOException {
      RowKind kind = row.getRowKind();
      if (!isFinal) {
        if (kind != RowKind.INSERT && kind != RowKind.UPDATE_AFTER)
          throw new IOException("canonical sink: a " + kind
              + " row in an append-only answer");
        results++;
        if (out != null) out.write(format(row));
        return;
      }
      // The final value per key (field 0): +I/+U replace it, -D removes
      // it, -U is followed by its +U.
      if (kind == RowKind.UPDATE_BEFORE) return;
      long key = row.getLong(0);
      if (kind == RowKind.DELETE) last.remove(key);
      else last.put(key, out != null ? format(row) : null);
    }

    private byte[] format(RowData row) {
      StringBuilder s = line;
      s.setLength(0);
      for (int i = 0; i < roots.length; i++) {
        if (i > 0) s.append('\t');
        if (row.isNullAt(i)) {
          s.append("NULL");
          continue;
        }
        switch (roots[i]) {
          case BIGINT -> s.append(row.getLong(i));
          case INTEGER -> s.append(row.getInt(i));
          case DOUBLE -> s.append(new BigDecimal(row.getDouble(i))
              .setScale(3, RoundingMode.HALF_EVEN).toPlainString());
          case TIMESTAMP_WITHOUT_TIME_ZONE -> {
            var t = row.getTimestamp(i, 3);
            s.append(t.getMillisecond() * 1000L
                + t.getNanoOfMillisecond() / 1000);
          }
          case CHAR, VARCHAR ->
            s.append(new String(row.getString(i).toBytes(),
                StandardCharsets.ISO_8859_1));
          default -> throw new IllegalStateException("canonical sink: type "
              + roots[i]);
        }
      }
      s.append('\n');
      return s.toString().getBytes(StandardCharsets.ISO_8859_1);
    }

    @Override
    public void flush(boolean endOfInput) throws IOException {
      if (out != null) out.flush();
    }

    @Override
    public List<Long> snapshotState(long checkpointId) {
      CHECKPOINTS.incrementAndGet();
      return List.of();
    }

    @Override
    public void close() throws IOException {
      if (isFinal) {
        results = last.size();
        if (out != null)
          for (byte[] b : last.values()) out.write(b);
      }
      if (out != null) out.close();
      RESULTS.set(results);
    }
  }
}
