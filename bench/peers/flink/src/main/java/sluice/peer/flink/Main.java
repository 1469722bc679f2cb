// SPDX-License-Identifier: Apache-2.0
package sluice.peer.flink;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Comparator;
import java.util.stream.Stream;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.ExecutionOptions;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

/**
 * sluice's Flink peer: one Nexmark query on a local MiniCluster at
 * parallelism 1, events generated inside the job (bench/peers/flink/README.md
 * and the peer contract in bench/README.md).
 *
 * <pre>
 * sluice-peer-flink --query q0|q1|q2|q3|q4|q5|q7|q8 --events N [--seed S]
 *     [--rate R] [--checkpoint-ms MS] [--state hashmap|rocksdb]
 *     [--ckpt-dir DIR] [--out FILE]
 * sluice-peer-flink --dump-events N [--seed S] [--rate R]
 * </pre>
 */
public final class Main {
  private static final int P = 1 << Nexmark.PERSON, A = 1 << Nexmark.AUCTION,
      B = 1 << Nexmark.BID;

  private static void usage(String why) {
    System.err.println("sluice-peer-flink: " + why);
    System.err.println("usage: sluice-peer-flink --query q0|q1|q2|q3|q4|q5|q7|q8"
        + " --events N [--seed S (42)] [--rate R (10000000)]\n"
        + "         [--checkpoint-ms MS (1000; 0: none)]"
        + " [--state hashmap|rocksdb (hashmap)]\n"
        + "         [--ckpt-dir DIR (a temp dir, removed at exit)]"
        + " [--out FILE]\n"
        + "       sluice-peer-flink --dump-events N [--seed S] [--rate R]");
    System.exit(2);
  }

  public static void main(String[] args) throws Exception {
    String query = null, state = "hashmap", ckptDir = null, out = null;
    long events = -1, seed = 42, rate = 10000000, ckptMs = 1000, dump = -1;
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (i + 1 >= args.length) usage("missing value of " + a);
      String v = args[++i];
      try {
        switch (a) {
          case "--query" -> query = v;
          case "--events" -> events = Long.parseLong(v);
          case "--seed" -> seed = Long.parseUnsignedLong(v);
          case "--rate" -> rate = Long.parseLong(v);
          case "--checkpoint-ms" -> ckptMs = Long.parseLong(v);
          case "--state" -> state = v;
          case "--ckpt-dir" -> ckptDir = v;
          case "--out" -> out = v;
          case "--dump-events" -> dump = Long.parseLong(v);
          default -> usage("unknown option " + a);
        }
      } catch (NumberFormatException e) {
        usage("not a number: " + a + " " + v);
      }
    }
    if (rate <= 0) usage("--rate must be positive");
    if (dump >= 0) {
      dumpEvents(dump, seed, rate);
      return;
    }
    if (query == null || events < 0) usage("--query and --events are required");
    // Each table's source has at least one event (the generator source
    // cannot be empty).
    if (events < 50) usage("--events must be at least 50");
    if (query.equals("q6"))
      usage("q6 is not run (Flink's Nexmark has no q6; neither has sluice's)");
    if (!state.equals("hashmap") && !state.equals("rocksdb"))
      usage("--state is hashmap or rocksdb, not " + state);
    if (ckptMs < 0) usage("--checkpoint-ms must be >= 0");
    Q q = Q.of(query);
    if (q == null) usage("no query '" + query + "'");

    // One temp dir per run, removed at exit: Flink's io.tmp.dirs (RocksDB's
    // working files, the RPC system's extracted jar) and, without
    // --ckpt-dir, the checkpoints.
    Path runDir = Files.createTempDirectory("sluice-peer-flink-");
    Path dir = ckptDir == null ? runDir.resolve("checkpoints")
        : Paths.get(ckptDir).toAbsolutePath();
    Files.createDirectories(dir);
    Files.createDirectories(runDir.resolve("tmp"));
    // Flink's RPC loader extracts a jar into java.io.tmpdir and leaves it:
    // point it here before any Flink class reads the property.
    System.setProperty("java.io.tmpdir", runDir.resolve("tmp").toString());
    int rc = 0;
    try {
      long results = run(q, events, seed, rate, ckptMs, state, dir,
          runDir.resolve("tmp"), out);
      System.out.println("query=" + query + " events=" + events + " results="
          + results);
    } catch (Exception e) {
      e.printStackTrace();
      rc = 1;
    } finally {
      removeTree(runDir);
    }
    System.out.flush();
    System.exit(rc);
  }

  /** A query: its SQL, the tables it reads, the sink's columns. */
  record Q(String sql, int reads, String sinkColumns, boolean isFinal) {
    static Q of(String name) {
      return switch (name) {
        case "q0" -> new Q("SELECT auction, bidder, price, dt_us, extra FROM bid",
            B, "auction BIGINT, bidder BIGINT, price BIGINT, date_time BIGINT,"
            + " extra STRING", false);
        case "q1" -> new Q("SELECT auction, bidder, CAST(price AS DOUBLE) *"
            + " 0.908E0, dt_us, extra FROM bid", B, "auction BIGINT, bidder"
            + " BIGINT, price DOUBLE, date_time BIGINT, extra STRING", false);
        case "q2" -> new Q("SELECT auction, price FROM bid"
            + " WHERE MOD(auction, 123) = 0", B, "auction BIGINT, price BIGINT",
            false);
        case "q3" -> new Q("SELECT P.name, P.city, P.state, A.id"
            + " FROM auction AS A INNER JOIN person AS P ON A.seller = P.id"
            + " WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID'"
            + " OR P.state = 'CA')", A | P,
            "name STRING, city STRING, state STRING, id BIGINT", false);
        // Flink's Nexmark q4, with avg as a double (sum / count) and the
        // count of auctions; the bounds on the microsecond times.
        case "q4" -> new Q("SELECT Q.category, CAST(SUM(Q.final) AS DOUBLE)"
            + " / CAST(COUNT(*) AS DOUBLE), COUNT(*) FROM ("
            + " SELECT MAX(B.price) AS final, A.category FROM auction A, bid B"
            + " WHERE A.id = B.auction AND B.dt_us BETWEEN A.dt_us AND"
            + " A.expires_us GROUP BY A.id, A.category) Q GROUP BY Q.category",
            A | B, "category BIGINT, avg_price DOUBLE, auctions BIGINT", true);
        case "q5" -> new Q("SELECT AuctionBids.auction, AuctionBids.num,"
            + " AuctionBids.endtime FROM (" + Q5_COUNTS + ") AS AuctionBids"
            + " JOIN (SELECT MAX(CountBids.num) AS maxn, CountBids.starttime,"
            + " CountBids.endtime FROM (" + Q5_COUNTS + ") AS CountBids"
            + " GROUP BY CountBids.starttime, CountBids.endtime) AS MaxBids"
            + " ON AuctionBids.starttime = MaxBids.starttime"
            + " AND AuctionBids.endtime = MaxBids.endtime"
            + " AND AuctionBids.num >= MaxBids.maxn", B,
            "auction BIGINT, num BIGINT, window_end TIMESTAMP(3)", false);
        // The highest bids of each window: a window join of the window's
        // bids with its max price (Flink's Nexmark q7 joins on a BETWEEN
        // of times, inclusive at both ends: a bid at the window's end
        // would join the earlier window too).
        case "q7" -> new Q("SELECT B.auction, B.price, B.bidder, B.dt_us,"
            + " B.extra, B.window_end FROM (SELECT auction, price, bidder,"
            + " dt_us, extra, window_start, window_end FROM TABLE(TUMBLE("
            + "TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))) B"
            + " JOIN (SELECT MAX(price) AS maxprice, window_start, window_end"
            + " FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts),"
            + " INTERVAL '10' SECOND)) GROUP BY window_start, window_end) M"
            + " ON B.window_start = M.window_start AND B.window_end ="
            + " M.window_end AND B.price = M.maxprice", B,
            "auction BIGINT, price BIGINT, bidder BIGINT, date_time BIGINT,"
            + " extra STRING, window_end TIMESTAMP(3)", false);
        case "q8" -> new Q("SELECT P.id, P.name, P.starttime FROM ("
            + " SELECT id, name, window_start AS starttime, window_end AS"
            + " endtime FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(ts),"
            + " INTERVAL '10' SECOND)) GROUP BY id, name, window_start,"
            + " window_end) P JOIN ("
            + " SELECT seller, window_start AS starttime, window_end AS"
            + " endtime FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(ts),"
            + " INTERVAL '10' SECOND)) GROUP BY seller, window_start,"
            + " window_end) A ON P.id = A.seller AND P.starttime = A.starttime"
            + " AND P.endtime = A.endtime", P | A,
            "id BIGINT, name STRING, window_start TIMESTAMP(3)", false);
        default -> null;
      };
    }
  }

  private static final String Q5_COUNTS = "SELECT auction, COUNT(*) AS num,"
      + " window_start AS starttime, window_end AS endtime FROM TABLE(HOP("
      + "TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND,"
      + " INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end";

  // The tables' columns in the order NexmarkSourceFactory.Gen produces them.
  private static final String[] COLUMNS = {
    "id BIGINT, name STRING, emailAddress STRING, creditCard STRING,"
        + " city STRING, state STRING, dt_us BIGINT, extra STRING",
    "id BIGINT, itemName STRING, description STRING, initialBid BIGINT,"
        + " reserve BIGINT, dt_us BIGINT, expires_us BIGINT, seller BIGINT,"
        + " category BIGINT, extra STRING",
    "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,"
        + " dt_us BIGINT, extra STRING"};
  private static final String[] NAMES = {"person", "auction", "bid"};

  static long run(Q q, long events, long seed, long rate, long ckptMs,
      String state, Path dir, Path tmp, String out) throws Exception {
    Configuration conf = new Configuration();
    conf.set(CoreOptions.TMP_DIRS, tmp.toString());
    conf.set(CoreOptions.DEFAULT_PARALLELISM, 1);
    conf.set(ExecutionOptions.RUNTIME_MODE, RuntimeExecutionMode.STREAMING);
    conf.set(PipelineOptions.OBJECT_REUSE, true);
    if (ckptMs > 0) {
      conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL,
          Duration.ofMillis(ckptMs));
      conf.set(CheckpointingOptions.CHECKPOINTING_CONSISTENCY_MODE,
          CheckpointingMode.EXACTLY_ONCE);
    }
    conf.set(StateBackendOptions.STATE_BACKEND, state);
    conf.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS,
        state.equals("rocksdb"));
    conf.set(CheckpointingOptions.CHECKPOINT_STORAGE, "filesystem");
    conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, dir.toUri().toString());
    StreamExecutionEnvironment env =
        StreamExecutionEnvironment.createLocalEnvironment(1, conf);
    StreamTableEnvironment t = StreamTableEnvironment.create(env,
        EnvironmentSettings.inStreamingMode());
    var tc = t.getConfig();
    tc.set("table.local-time-zone", "UTC");
    // As Flink's own Nexmark setup (its flink-conf.yaml).
    tc.set("table.exec.mini-batch.enabled", "true");
    tc.set("table.exec.mini-batch.allow-latency", "2 s");
    tc.set("table.exec.mini-batch.size", "50000");

    // One source per kind read; the first also generates the kinds no
    // source reads (each event generated once, as sluice-bench-nexmark).
    // The watermark is the largest time seen less 1 ms (the millisecond of
    // ts), as DataStream's forMonotonousTimestamps: more events of that
    // millisecond may follow (10 per ms at 10,000 events/s), and with the
    // watermark at their time they would be late for a window ending next.
    int unread = (P | A | B) & ~q.reads();
    boolean isFirst = true;
    for (int k : new int[] {Nexmark.AUCTION, Nexmark.PERSON, Nexmark.BID}) {
      if ((q.reads() & (1 << k)) == 0) continue;
      t.executeSql("CREATE TEMPORARY TABLE " + NAMES[k] + " (" + COLUMNS[k]
          + ", ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '0.001' SECOND)"
          + " WITH ('connector' = 'sluice-nexmark', 'kind' = '" + NAMES[k]
          + "', 'events' = '" + events + "', 'seed' = '"
          + Long.toUnsignedString(seed) + "', 'rate' = '" + rate
          + "', 'drop' = '" + (isFirst ? unread : 0) + "')");
      isFirst = false;
    }
    t.executeSql("CREATE TEMPORARY TABLE answer (" + q.sinkColumns()
        + ") WITH ('connector' = 'sluice-canon', 'final' = '" + q.isFinal()
        + "'" + (out != null ? ", 'out' = '" + out.replace("'", "''") + "'"
            : "") + ")");
    if (System.getenv("SLUICE_PEER_EXPLAIN") != null)
      System.err.println(t.explainSql("INSERT INTO answer " + q.sql()));
    t.executeSql("INSERT INTO answer " + q.sql()).await();
    long r = CanonSinkFactory.RESULTS.get();
    if (r < 0) throw new IllegalStateException("the sink did not close");
    System.err.println("sluice-peer-flink: " + CanonSinkFactory.CHECKPOINTS.get()
        + " checkpoints (every " + ckptMs + " ms, " + state + ")");
    return r;
  }

  static void dumpEvents(long n, long seed, long rate) throws IOException {
    Nexmark nx = new Nexmark(seed, rate);
    Nexmark.Event e = new Nexmark.Event();
    try (BufferedOutputStream o = new BufferedOutputStream(System.out, 1 << 16)) {
      for (long i = 0; i < n; i++) {
        nx.generate(i, nx.dateTimeUs(i), e);
        Nexmark.dump(e, o);
      }
    }
  }

  /** Removes dir; again while the MiniCluster's last threads (checkpoint
   * clean-up, shutdown) still add files to it, for up to a second. */
  private static void removeTree(Path dir) {
    for (int i = 0; i < 20 && Files.exists(dir); i++) {
      try (Stream<Path> s = Files.walk(dir)) {
        s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      } catch (IOException | java.io.UncheckedIOException e) {
        // a file vanished or appeared while walking: try again
      }
      if (Files.exists(dir)) {
        try {
          Thread.sleep(50);
        } catch (InterruptedException e) {
          break;
        }
      }
    }
    if (Files.exists(dir))
      System.err.println("sluice-peer-flink: cannot remove " + dir);
  }
}
