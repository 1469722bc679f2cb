//! The Nexmark queries on DBSP's operators, written as relational views
//! over three input tables (bid, auction, person), the way Feldera compiles
//! the Nexmark SQL: every window is a key (window end or start), counts and
//! sums are linear aggregates, maxima are `Max` aggregates, and the windows
//! a watermark has passed are dropped from the traces (waterlines and
//! retainment policies: DBSP's form of lateness).
//!
//! The output of each query is a stream of changes; the canonical answer is
//! its integral after the last step (q4: the final row per category; q5,
//! q7: the final rows of each window).  Event times are non-decreasing, so
//! the answer of a window no longer changes once the waterline (the largest
//! event time seen) has passed its end, and after the last step every window
//! is final.

use std::fmt::Write;

use dbsp::algebra::F64;
use dbsp::dynamic::DynData;
use dbsp::operator::{Max, ZSetHandle};
use dbsp::typed_batch::{IndexedZSetReader, TypedBox, ZSet};
use dbsp::utils::{Tup10, Tup2, Tup3, Tup4, Tup5, Tup6, Tup7, Tup8};
use dbsp::{DBData, OrdIndexedZSet, OrdZSet, RootCircuit, Stream};

use crate::nexmark::Event;
use crate::SinkRef;

/// bid: auction, bidder, price, channel, url, date_time, extra
pub type BidT = Tup7<i64, i64, i64, String, String, i64, String>;
/// auction: id, item_name, description, initial_bid, reserve, date_time,
/// expires, seller, category, extra
pub type AucT = Tup10<i64, String, String, i64, i64, i64, i64, i64, i64, String>;
/// person: id, name, email_address, credit_card, city, state, date_time, extra
pub type PerT = Tup8<i64, String, String, String, String, String, i64, String>;

pub const NAMES: [&str; 8] = ["q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8"];

const SEC: i64 = 1_000_000;

pub fn bid_row(e: &Event) -> BidT {
    let b = &e.bid;
    Tup7(
        b.auction,
        b.bidder,
        b.price,
        e.string(b.channel),
        e.string(b.url),
        e.date_time_us,
        e.string(b.extra),
    )
}

pub fn auction_row(e: &Event) -> AucT {
    let a = &e.auction;
    Tup10(
        a.id,
        e.string(a.item_name),
        e.string(a.description),
        a.initial_bid,
        a.reserve,
        e.date_time_us,
        a.expires_us,
        a.seller,
        a.category,
        e.string(a.extra),
    )
}

pub fn person_row(e: &Event) -> PerT {
    let p = &e.person;
    Tup8(
        p.id,
        e.string(p.name),
        e.string(p.email_address),
        e.string(p.credit_card),
        e.string(p.city),
        e.string(p.state),
        e.date_time_us,
        e.string(p.extra),
    )
}

/// The input handles of the tables a query reads.
#[derive(Clone)]
pub struct Inputs {
    pub bid: Option<ZSetHandle<BidT>>,
    pub auction: Option<ZSetHandle<AucT>>,
    pub person: Option<ZSetHandle<PerT>>,
}

/// Adds up the query's output changes into the sink: their total weight
/// (the number of rows of the integral) and, for --out, the rows.
fn sink<R: DBData>(s: &Stream<RootCircuit, OrdZSet<R>>, sink: SinkRef, fmt: fn(&R, &mut String)) {
    s.inspect(move |batch: &OrdZSet<R>| {
        let mut k = sink.lock().unwrap();
        if k.rows.is_none() {
            k.weight += batch.weighted_count();
            return;
        }
        let mut line = String::new();
        for (r, _, d) in batch.iter() {
            k.weight += d;
            line.clear();
            fmt(&r, &mut line);
            let rows = k.rows.as_mut().unwrap();
            let e = rows.entry(line.clone()).or_insert(0);
            *e += d;
            if *e == 0 {
                rows.remove(&line);
            }
        }
    });
}

/// The waterline of a stream indexed by event time: the largest event time
/// seen minus `lateness`.  Event times are non-decreasing, so lateness 0
/// would do for the query's answer; `lateness` (more than the event time
/// one input batch spans) keeps the retainment policies below clear of the
/// question of whether a trace is trimmed with the bound of the step that
/// reads it or of the step before.
fn waterline(
    by_time: &Stream<RootCircuit, OrdIndexedZSet<i64, ()>>,
    lateness: i64,
) -> Stream<RootCircuit, TypedBox<i64, DynData>> {
    by_time.waterline_monotonic(|| i64::MIN, move |t| *t - lateness)
}

fn window_end(t: i64, size: i64) -> i64 {
    t - t.rem_euclid(size) + size
}

pub fn build(c: &mut RootCircuit, q: &str, lateness: i64, out: SinkRef) -> Inputs {
    let mut ins = Inputs {
        bid: None,
        auction: None,
        person: None,
    };
    let needs_bid = matches!(q, "q0" | "q1" | "q2" | "q4" | "q5" | "q7");
    let needs_auction = matches!(q, "q3" | "q4" | "q8");
    let needs_person = matches!(q, "q3" | "q8");
    let bids = if needs_bid {
        let (s, h) = c.add_input_zset::<BidT>();
        ins.bid = Some(h);
        Some(s)
    } else {
        None
    };
    let auctions = if needs_auction {
        let (s, h) = c.add_input_zset::<AucT>();
        ins.auction = Some(h);
        Some(s)
    } else {
        None
    };
    let persons = if needs_person {
        let (s, h) = c.add_input_zset::<PerT>();
        ins.person = Some(h);
        Some(s)
    } else {
        None
    };

    match q {
        // q0: every bid (auction, bidder, price, date_time, extra).
        "q0" => {
            let s = bids
                .unwrap()
                .map(|b: &BidT| Tup5(b.0, b.1, b.2, b.5, b.6.clone()));
            sink(&s, out, |r, l| {
                let _ = write!(l, "{}\t{}\t{}\t{}\t{}", r.0, r.1, r.2, r.3, r.4);
            });
        }
        // q1: price in another currency, price * 0.908 as float64.
        "q1" => {
            let s = bids
                .unwrap()
                .map(|b: &BidT| Tup5(b.0, b.1, F64::new(b.2 as f64 * 0.908), b.5, b.6.clone()));
            sink(&s, out, |r, l| {
                let _ = write!(l, "{}\t{}\t{:.3}\t{}\t{}", r.0, r.1, r.2.into_inner(), r.3, r.4);
            });
        }
        // q2: bids of every 123rd auction (auction, price).
        "q2" => {
            let s = bids
                .unwrap()
                .flat_map(|b: &BidT| (b.0 % 123 == 0).then_some(Tup2(b.0, b.2)));
            sink(&s, out, |r, l| {
                let _ = write!(l, "{}\t{}", r.0, r.1);
            });
        }
        // q3: auctions of category 10 joined with their sellers from OR, ID
        // or CA (a regular join: both tables kept whole, as Flink's).
        "q3" => {
            let a = auctions
                .unwrap()
                .flat_map_index(|a: &AucT| (a.8 == 10).then_some((a.7, a.0)));
            let p = persons.unwrap().flat_map_index(|p: &PerT| {
                matches!(p.5.as_str(), "OR" | "ID" | "CA")
                    .then(|| (p.0, Tup3(p.1.clone(), p.4.clone(), p.5.clone())))
            });
            let s = a.join(&p, |_seller, &id, Tup3(name, city, state)| {
                Tup4(name.clone(), city.clone(), state.clone(), id)
            });
            sink(&s, out, |r, l| {
                let _ = write!(l, "{}\t{}\t{}\t{}", r.0, r.1, r.2, r.3);
            });
        }
        // q4: per auction the highest bid with a.date_time <= b.date_time <=
        // a.expires, then per category the average (sum / count as float64)
        // and the count of such auctions.
        "q4" => {
            let bids = bids.unwrap();
            let wl = waterline(&bids.map_index(|b: &BidT| (b.5, ())), lateness);
            // id -> (category, date_time, expires)
            let a = auctions
                .unwrap()
                .map_index(|a: &AucT| (a.0, Tup3(a.8, a.5, a.6)));
            // auction -> (price, date_time)
            let b = bids.map_index(|b: &BidT| (b.0, Tup2(b.2, b.5)));
            // A bid at or after the waterline cannot match an auction that
            // expired before it; an auction still to come starts at or after
            // the waterline, so the bids before it cannot match it.
            a.integrate_trace_retain_values(&wl, |v: &Tup3<i64, i64, i64>, wl: &i64| v.2 >= *wl);
            b.integrate_trace_retain_values(&wl, |v: &Tup2<i64, i64>, wl: &i64| v.1 >= *wl);
            // (id, category, expires) -> price of each matching bid
            let matching = a.join_index(&b, |&id, &Tup3(cat, start, expires), &Tup2(price, t)| {
                (t >= start && t <= expires).then_some((Tup3(id, cat, expires), price))
            });
            // An expired auction's maximum is final.
            matching.integrate_trace_retain_keys(&wl, |k: &Tup3<i64, i64, i64>, wl: &i64| {
                k.2 >= *wl
            });
            let max = matching.aggregate(Max);
            let by_cat = max.map_index(|(k, price)| (k.1, Tup2(*price, 1i64)));
            let s = by_cat
                .aggregate_linear(|v: &Tup2<i64, i64>| *v)
                .map(|(cat, Tup2(sum, n))| {
                    Tup3(*cat, F64::new(*sum as f64 / *n as f64), *n)
                });
            sink(&s, out, |r, l| {
                let _ = write!(l, "{}\t{:.3}\t{}", r.0, r.1.into_inner(), r.2);
            });
        }
        // q5: bids per auction over sliding windows of 10 s every 2 s, then
        // per window the auctions with the most bids (auction, num,
        // window_end).
        "q5" => {
            let bids = bids.unwrap();
            let wl = waterline(&bids.map_index(|b: &BidT| (b.5, ())), lateness);
            // (window_end, auction) for each of the 5 windows of a bid.
            let per_window = bids.flat_map_index(|b: &BidT| {
                let (t, auction) = (b.5, b.0);
                let first_end = window_end(t, 2 * SEC);
                (0..5).map(move |k| (Tup2(first_end + k * 2 * SEC, auction), ()))
            });
            // A window that ended at or before the waterline gets no more bids.
            let counts = per_window.aggregate_linear_retain_keys(
                &wl,
                |k: &Tup2<i64, i64>, wl: &i64| k.0 > *wl,
                |_: &()| 1i64,
            );
            // window_end -> (count, auction)
            let by_window = counts.map_index(|(k, n)| (k.0, Tup2(*n, k.1)));
            by_window.integrate_trace_retain_keys(&wl, |w: &i64, wl: &i64| *w > *wl);
            let max = by_window.aggregate(Max);
            let s = by_window.join_flatmap(&max, |&wend, &Tup2(n, auction), &Tup2(top, _)| {
                (n == top).then_some(Tup3(auction, n, wend))
            });
            sink(&s, out, |r, l| {
                let _ = write!(l, "{}\t{}\t{}", r.0, r.1, r.2);
            });
        }
        // q7: per tumbling 10 s window, every bid at the window's highest
        // price (auction, price, bidder, date_time, extra, window_end).
        "q7" => {
            let bids = bids.unwrap();
            let wl = waterline(&bids.map_index(|b: &BidT| (b.5, ())), lateness);
            // window_end -> price
            let prices = bids.map_index(|b: &BidT| (window_end(b.5, 10 * SEC), b.2));
            prices.integrate_trace_retain_keys(&wl, |w: &i64, wl: &i64| *w > *wl);
            let max = prices.aggregate(Max).map_index(|(w, p)| (Tup2(*w, *p), ()));
            // (window_end, price) -> (auction, bidder, date_time, extra)
            let by_price = bids.map_index(|b: &BidT| {
                (
                    Tup2(window_end(b.5, 10 * SEC), b.2),
                    Tup4(b.0, b.1, b.5, b.6.clone()),
                )
            });
            by_price
                .integrate_trace_retain_keys(&wl, |k: &Tup2<i64, i64>, wl: &i64| k.0 > *wl);
            max.integrate_trace_retain_keys(&wl, |k: &Tup2<i64, i64>, wl: &i64| k.0 > *wl);
            let s = max.join(&by_price, |&Tup2(wend, price), &(), Tup4(a, bidder, t, extra)| {
                Tup6(*a, price, *bidder, *t, extra.clone(), wend)
            });
            sink(&s, out, |r, l| {
                let _ = write!(l, "{}\t{}\t{}\t{}\t{}\t{}", r.0, r.1, r.2, r.3, r.4, r.5);
            });
        }
        // q8: persons who opened an auction in the same tumbling 10 s
        // window, once per (person, window) (id, name, window_start).
        "q8" => {
            let auctions = auctions.unwrap();
            let wl = waterline(&auctions.map_index(|a: &AucT| (a.5, ())), lateness);
            let start = |t: i64| t - t.rem_euclid(10 * SEC);
            // (seller, window_start), once
            let sellers = auctions.map(move |a: &AucT| Tup2(a.7, start(a.5)));
            sellers.integrate_trace_retain_keys(&wl, |k: &Tup2<i64, i64>, wl: &i64| {
                k.1 + 10 * SEC > *wl
            });
            let sellers = sellers.distinct().map_index(|k| (*k, ()));
            // (id, window_start) -> name
            let people = persons
                .unwrap()
                .map_index(move |p: &PerT| (Tup2(p.0, start(p.6)), p.1.clone()));
            people.integrate_trace_retain_keys(&wl, |k: &Tup2<i64, i64>, wl: &i64| {
                k.1 + 10 * SEC > *wl
            });
            sellers.integrate_trace_retain_keys(&wl, |k: &Tup2<i64, i64>, wl: &i64| {
                k.1 + 10 * SEC > *wl
            });
            let s = people.join(&sellers, |&Tup2(id, ws), name, &()| Tup3(id, name.clone(), ws));
            sink(&s, out, |r, l| {
                let _ = write!(l, "{}\t{}\t{}", r.0, r.1, r.2);
            });
        }
        _ => unreachable!(),
    }
    ins
}
