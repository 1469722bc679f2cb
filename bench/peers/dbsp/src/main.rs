//! sluice-peer-dbsp: the Nexmark queries q0-q5, q7, q8 on Feldera's DBSP
//! (the `dbsp` crate), one worker thread, over events generated in this
//! process by a bit-exact port of bench/nexmark.c.  See README.md and the
//! peer contract: same command line and canonical output as
//! sluice-bench-nexmark and the Flink peer.

mod nexmark;
mod queries;

use std::collections::HashMap;
use std::io::Write;
use std::process::exit;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dbsp::circuit::{CircuitConfig, CircuitStorageConfig, StorageConfig, StorageOptions};
use dbsp::utils::Tup2;
use dbsp::{RootCircuit, Runtime, ZWeight};

use nexmark::{Event, Generator, Kind};
use queries::{AucT, BidT, Inputs, PerT};

/// The canonical rows of a run: row text -> weight (the integral of the
/// query's output changes), or only their total weight for timed runs.
pub struct Sink {
    pub weight: ZWeight,
    pub rows: Option<HashMap<String, ZWeight>>,
}

pub type SinkRef = Arc<Mutex<Sink>>;

struct Args {
    query: String,
    events: u64,
    seed: u64,
    rate: u64,
    checkpoint_ms: u64,
    ckpt_dir: Option<String>,
    out: Option<String>,
    batch: usize,
    dump_events: Option<u64>,
}

fn usage(msg: &str) -> ! {
    eprintln!("sluice-peer-dbsp: {msg}");
    eprintln!(
        "usage: sluice-peer-dbsp --query q0|q1|q2|q3|q4|q5|q7|q8 --events N [--seed S=42] \
         [--rate R=10000000] [--checkpoint-ms MS=1000 (0 = none)] [--ckpt-dir DIR] \
         [--out FILE] [--batch B=10000]\n       sluice-peer-dbsp --dump-events N [--seed S] [--rate R]"
    );
    exit(2);
}

fn num(flag: &str, v: Option<String>) -> u64 {
    match v.as_deref().map(str::parse::<u64>) {
        Some(Ok(n)) => n,
        _ => usage(&format!("{flag} needs a non-negative integer")),
    }
}

fn parse_args() -> Args {
    let mut a = Args {
        query: String::new(),
        events: 0,
        seed: 42,
        rate: 10_000_000,
        checkpoint_ms: 1000,
        ckpt_dir: None,
        out: None,
        batch: 10_000,
        dump_events: None,
    };
    let mut has_events = false;
    let mut it = std::env::args().skip(1);
    while let Some(f) = it.next() {
        match f.as_str() {
            "--query" => a.query = it.next().unwrap_or_else(|| usage("--query needs a name")),
            "--events" => {
                a.events = num(&f, it.next());
                has_events = true
            }
            "--seed" => a.seed = num(&f, it.next()),
            "--rate" => a.rate = num(&f, it.next()),
            "--checkpoint-ms" => a.checkpoint_ms = num(&f, it.next()),
            "--ckpt-dir" => a.ckpt_dir = it.next(),
            "--out" => a.out = it.next(),
            "--batch" => a.batch = num(&f, it.next()) as usize,
            "--state" => {
                let s = it.next().unwrap_or_default();
                if s != "hashmap" && s != "rocksdb" && s != "heap" {
                    usage("--state is hashmap, rocksdb or heap");
                }
                eprintln!("sluice-peer-dbsp: --state {s} ignored (DBSP keeps its own traces)");
            }
            "--dump-events" => a.dump_events = Some(num(&f, it.next())),
            "-h" | "--help" => usage("help"),
            _ => usage(&format!("unknown argument '{f}'")),
        }
    }
    if a.rate == 0 {
        usage("--rate must be > 0");
    }
    if a.batch == 0 {
        usage("--batch must be > 0");
    }
    if a.dump_events.is_none() {
        if a.query == "q6" {
            usage("q6 is not run by the peers (Flink's Nexmark does not support it)");
        }
        if !queries::NAMES.contains(&a.query.as_str()) {
            usage(&format!("no query '{}'", a.query));
        }
        if !has_events {
            usage("--events is required");
        }
    }
    a
}

fn dump_events(a: &Args, n: u64) {
    let g = Generator::new(nexmark::Config::new(a.seed, a.rate as f64));
    let mut e = Event::default();
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    for i in 0..n {
        g.generate(i, nexmark::date_time_us(i, a.rate), &mut e);
        let mut line: Vec<u8> = Vec::with_capacity(1200);
        let s = |line: &mut Vec<u8>, x: nexmark::Str| {
            line.push(b'\t');
            line.extend_from_slice(e.s(x));
        };
        let n = |line: &mut Vec<u8>, v: i64| {
            line.extend_from_slice(format!("\t{v}").as_bytes());
        };
        match e.kind {
            Kind::Person => {
                let p = &e.person;
                line.extend_from_slice(format!("P\t{}\t{}", e.event_id, e.date_time_us).as_bytes());
                n(&mut line, p.id);
                for x in [p.name, p.email_address, p.credit_card, p.city, p.state, p.extra] {
                    s(&mut line, x);
                }
            }
            Kind::Auction => {
                let x = &e.auction;
                line.extend_from_slice(format!("A\t{}\t{}", e.event_id, e.date_time_us).as_bytes());
                for v in [x.id, x.initial_bid, x.reserve, x.expires_us, x.seller, x.category] {
                    n(&mut line, v);
                }
                s(&mut line, x.item_name);
                s(&mut line, x.description);
                s(&mut line, x.extra);
            }
            Kind::Bid => {
                let b = &e.bid;
                line.extend_from_slice(format!("B\t{}\t{}", e.event_id, e.date_time_us).as_bytes());
                for v in [b.auction, b.bidder, b.price] {
                    n(&mut line, v);
                }
                for x in [b.channel, b.url, b.extra] {
                    s(&mut line, x);
                }
            }
        }
        line.push(b'\n');
        w.write_all(&line).unwrap();
    }
}

/// A directory for checkpoints: --ckpt-dir, or a fresh one under the
/// system temp dir that is removed at exit.
fn ckpt_dir(a: &Args) -> (std::path::PathBuf, bool) {
    if let Some(d) = &a.ckpt_dir {
        std::fs::create_dir_all(d).unwrap_or_else(|e| {
            eprintln!("sluice-peer-dbsp: --ckpt-dir {d}: {e}");
            exit(1)
        });
        return (d.into(), false);
    }
    let base = std::env::temp_dir();
    for k in 0..1000u32 {
        let p = base.join(format!("sluice-peer-dbsp-{}-{k}", std::process::id()));
        if std::fs::create_dir(&p).is_ok() {
            return (p, true);
        }
    }
    eprintln!("sluice-peer-dbsp: cannot make a temp dir");
    exit(1)
}

fn main() {
    let a = parse_args();
    if let Some(n) = a.dump_events {
        dump_events(&a, n);
        return;
    }
    let sink: SinkRef = Arc::new(Mutex::new(Sink {
        weight: 0,
        rows: a.out.as_ref().map(|_| HashMap::new()),
    }));

    let mut config = CircuitConfig::with_workers(1);
    let mut ckpt: Option<(std::path::PathBuf, bool)> = None;
    if a.checkpoint_ms > 0 {
        let (dir, remove) = ckpt_dir(&a);
        let storage = CircuitStorageConfig::for_config(
            StorageConfig {
                path: dir.to_string_lossy().into_owned(),
                cache: Default::default(),
            },
            StorageOptions::default(),
        )
        .unwrap_or_else(|e| {
            eprintln!("sluice-peer-dbsp: storage in {}: {e}", dir.display());
            exit(1)
        });
        config = config.with_storage(Some(storage));
        ckpt = Some((dir, remove));
    } else {
        eprintln!("sluice-peer-dbsp: no checkpoints (--checkpoint-ms 0)");
    }

    let query = a.query.clone();
    let sink2 = sink.clone();
    // Twice the event time of one input batch, and at least 1 s.
    let lateness = ((2 * a.batch as u128 * 1_000_000 / a.rate as u128) as i64).max(1_000_000);
    let (mut dbsp, inputs) = Runtime::init_circuit(config, move |circuit: &mut RootCircuit| {
        Ok(queries::build(circuit, &query, lateness, sink2))
    })
    .unwrap_or_else(|e| {
        eprintln!("sluice-peer-dbsp: building the circuit: {e}");
        exit(1)
    });
    let Inputs {
        bid,
        auction,
        person,
    } = inputs;

    let g = Generator::new(nexmark::Config::new(a.seed, a.rate as f64));
    let mut e = Event::default();
    let mut bids: Vec<Tup2<BidT, ZWeight>> = Vec::new();
    let mut auctions: Vec<Tup2<AucT, ZWeight>> = Vec::new();
    let mut persons: Vec<Tup2<PerT, ZWeight>> = Vec::new();
    let mut n_ckpt = 0u64;
    let ckpt_every = Duration::from_millis(a.checkpoint_ms);
    let mut last_ckpt = Instant::now();
    let mut i = 0u64;
    while i < a.events {
        let end = (i + a.batch as u64).min(a.events);
        while i < end {
            g.generate(i, nexmark::date_time_us(i, a.rate), &mut e);
            match e.kind {
                Kind::Bid if bid.is_some() => bids.push(Tup2(queries::bid_row(&e), 1)),
                Kind::Auction if auction.is_some() => {
                    auctions.push(Tup2(queries::auction_row(&e), 1))
                }
                Kind::Person if person.is_some() => persons.push(Tup2(queries::person_row(&e), 1)),
                _ => {}
            }
            i += 1;
        }
        if let Some(h) = &bid {
            h.append(&mut bids);
        }
        if let Some(h) = &auction {
            h.append(&mut auctions);
        }
        if let Some(h) = &person {
            h.append(&mut persons);
        }
        dbsp.transaction().unwrap_or_else(|e| {
            eprintln!("sluice-peer-dbsp: step: {e}");
            exit(1)
        });
        if ckpt.is_some() && last_ckpt.elapsed() >= ckpt_every {
            dbsp.checkpoint().run().unwrap_or_else(|e| {
                eprintln!("sluice-peer-dbsp: checkpoint: {e}");
                exit(1)
            });
            // Keep the latest checkpoint only, as Flink's retained count of 1.
            while dbsp.list_checkpoints().map(|l| l.len()).unwrap_or(0) > 1 {
                if dbsp.gc_checkpoint(Default::default()).map(|s| s.is_empty()).unwrap_or(true) {
                    break;
                }
            }
            n_ckpt += 1;
            last_ckpt = Instant::now();
        }
    }
    // The end of input: the relational answer of every window is complete
    // with the last step (see queries.rs).
    dbsp.kill().ok();
    if let Some((dir, remove)) = &ckpt {
        eprintln!("sluice-peer-dbsp: {n_ckpt} checkpoints in {}", dir.display());
        if *remove {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    let s = sink.lock().unwrap();
    if let (Some(path), Some(rows)) = (&a.out, &s.rows) {
        let mut lines: Vec<&String> = Vec::new();
        for (row, w) in rows {
            if *w < 0 {
                eprintln!("sluice-peer-dbsp: row with weight {w}: {row}");
                exit(1);
            }
            for _ in 0..*w {
                lines.push(row);
            }
        }
        lines.sort_unstable();
        let f = std::fs::File::create(path).unwrap_or_else(|e| {
            eprintln!("sluice-peer-dbsp: --out {path}: {e}");
            exit(1)
        });
        let mut w = std::io::BufWriter::new(f);
        for l in lines {
            w.write_all(l.as_bytes()).unwrap();
            w.write_all(b"\n").unwrap();
        }
        w.flush().unwrap();
    }
    println!("query={} events={} results={}", a.query, a.events, s.weight);
}
