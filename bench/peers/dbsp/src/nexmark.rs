//! The Nexmark event generator of bench/nexmark.c, ported bit for bit: the
//! same splitmix64 stream seeded from (seed, event_id), the same rules and
//! the same strings, so that this program sees exactly the events sluice's
//! sluice-bench-nexmark and the Flink peer see.

const FIRST_PERSON_ID: i64 = 1000;
const FIRST_AUCTION_ID: i64 = 1000;
const FIRST_CATEGORY_ID: i64 = 10;
const NUM_CATEGORIES: u64 = 5;
const PERSON_PROPORTION: u64 = 1;
const AUCTION_PROPORTION: u64 = 3;
const TOTAL_PROPORTION: u64 = 50;
const PERSON_ID_LEAD: i64 = 10;
const AUCTION_ID_LEAD: i64 = 10;
const CHANNELS: u64 = 10000;

const FIRST_NAMES: [&str; 11] = [
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
];
const LAST_NAMES: [&str; 9] = [
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
];
const CITIES: [&str; 10] = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
];
const STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
const HOT_CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];

/// sl_nexmark_config_t with sl_nexmark_config_init's defaults.
#[derive(Clone, Debug)]
pub struct Config {
    pub seed: u64,
    pub events_per_second: f64,
    pub num_active_people: u32,
    pub num_in_flight_auctions: u32,
    pub hot_auction_ratio: u32,
    pub hot_seller_ratio: u32,
    pub hot_bidder_ratio: u32,
    pub avg_person_size: u32,
    pub avg_auction_size: u32,
    pub avg_bid_size: u32,
}

impl Config {
    pub fn new(seed: u64, events_per_second: f64) -> Self {
        Config {
            seed,
            events_per_second,
            num_active_people: 1000,
            num_in_flight_auctions: 100,
            hot_auction_ratio: 2,
            hot_seller_ratio: 4,
            hot_bidder_ratio: 4,
            avg_person_size: 200,
            avg_auction_size: 500,
            avg_bid_size: 100,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Person,
    Auction,
    Bid,
}

pub fn kind(id: u64) -> Kind {
    let rem = id % TOTAL_PROPORTION;
    if rem < PERSON_PROPORTION {
        Kind::Person
    } else if rem < PERSON_PROPORTION + AUCTION_PROPORTION {
        Kind::Auction
    } else {
        Kind::Bid
    }
}

/// A string of the event: a range of Event::buf.
#[derive(Clone, Copy, Debug, Default)]
pub struct Str {
    pub off: u32,
    pub len: u32,
}

#[derive(Clone, Debug, Default)]
pub struct Person {
    pub id: i64,
    pub name: Str,
    pub email_address: Str,
    pub credit_card: Str,
    pub city: Str,
    pub state: Str,
    pub extra: Str,
}

#[derive(Clone, Debug, Default)]
pub struct Auction {
    pub id: i64,
    pub item_name: Str,
    pub description: Str,
    pub initial_bid: i64,
    pub reserve: i64,
    pub expires_us: i64,
    pub seller: i64,
    pub category: i64,
    pub extra: Str,
}

#[derive(Clone, Debug, Default)]
pub struct Bid {
    pub auction: i64,
    pub bidder: i64,
    pub price: i64,
    pub channel: Str,
    pub url: Str,
    pub extra: Str,
}

/// One generated event; its strings live in buf (reused from event to
/// event, as sl_nex_event_t's).
pub struct Event {
    pub kind: Kind,
    pub event_id: i64,
    pub date_time_us: i64,
    pub person: Person,
    pub auction: Auction,
    pub bid: Bid,
    pub buf: Vec<u8>,
}

impl Default for Event {
    fn default() -> Self {
        Event {
            kind: Kind::Person,
            event_id: 0,
            date_time_us: 0,
            person: Person::default(),
            auction: Auction::default(),
            bid: Bid::default(),
            buf: Vec::with_capacity(BUF),
        }
    }
}

impl Event {
    pub fn s(&self, s: Str) -> &[u8] {
        &self.buf[s.off as usize..(s.off + s.len) as usize]
    }
    pub fn string(&self, s: Str) -> String {
        // The generator makes ASCII only.
        unsafe { String::from_utf8_unchecked(self.s(s).to_vec()) }
    }
}

/// SL_NEX_BUF: the room for an event's strings.
const BUF: usize = 1024;

// ---- randomness: splitmix64 ------------------------------------------------

struct Rng {
    s: u64,
}

impl Rng {
    #[inline]
    fn next64(&mut self) -> u64 {
        self.s = self.s.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, n), n >= 1 (multiply-shift).
    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        ((self.next64() as u128 * n as u128) >> 64) as u64
    }
    #[inline]
    fn unit(&mut self) -> f64 {
        (self.next64() >> 11) as f64 * (1.0 / 9007199254740992.0)
    }
}

// ---- ids ---------------------------------------------------------------------

fn last_person(id: u64) -> i64 {
    let epoch = id / TOTAL_PROPORTION;
    let mut off = id % TOTAL_PROPORTION;
    if off >= PERSON_PROPORTION {
        off = PERSON_PROPORTION - 1;
    }
    (epoch * PERSON_PROPORTION + off) as i64
}

fn last_auction(id: u64) -> i64 {
    let mut epoch = (id / TOTAL_PROPORTION) as i64;
    let mut off = (id % TOTAL_PROPORTION) as i64;
    let pp = PERSON_PROPORTION as i64;
    let ap = AUCTION_PROPORTION as i64;
    if off < pp {
        epoch -= 1;
        off = ap - 1;
    } else if off >= pp + ap {
        off = ap - 1;
    } else {
        off -= pp;
    }
    epoch * ap + off
}

fn next_person(c: &Config, id: u64, r: &mut Rng) -> i64 {
    let n = last_person(id) + 1;
    let active = if n < c.num_active_people as i64 {
        n
    } else {
        c.num_active_people as i64
    };
    n - active + r.below((active + PERSON_ID_LEAD) as u64) as i64
}

fn next_auction(c: &Config, id: u64, r: &mut Rng) -> i64 {
    let max = last_auction(id);
    let mut min = max - c.num_in_flight_auctions as i64;
    if min < 0 {
        min = 0;
    }
    min + r.below((max - min + 1 + AUCTION_ID_LEAD) as u64) as i64
}

fn next_price(r: &mut Rng) -> i64 {
    // llround(exp(u * 6 ln 10) * 100): f64::round rounds half away from zero.
    ((r.unit() * 13.815510557964274).exp() * 100.0).round() as i64
}

// ---- strings -------------------------------------------------------------------

fn put(b: &mut Vec<u8>, s: &[u8]) -> Str {
    let off = b.len() as u32;
    let n = s.len().min(BUF - b.len());
    b.extend_from_slice(&s[..n]);
    Str { off, len: n as u32 }
}

fn append_random(b: &mut Vec<u8>, r: &mut Rng, n: usize, cap: usize) {
    let n = n.min(cap - b.len());
    let mut i = 0;
    while i < n {
        let mut x = r.next64();
        let mut k = 0;
        while k < 8 && i < n {
            let m = x as u128 * 27;
            let c = (m >> 64) as u8;
            x = m as u64;
            b.push(if c == 26 { b' ' } else { b'a' + c });
            k += 1;
            i += 1;
        }
    }
}

fn random_str(b: &mut Vec<u8>, r: &mut Rng, n: usize) -> Str {
    let off = b.len();
    append_random(b, r, n, BUF);
    Str {
        off: off as u32,
        len: (b.len() - off) as u32,
    }
}

fn append_u64(b: &mut Vec<u8>, mut v: u64, min_digits: usize) {
    let mut tmp = [0u8; 24];
    let mut n = 0;
    loop {
        tmp[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 && n >= min_digits {
            break;
        }
    }
    while n > 0 && b.len() < BUF {
        n -= 1;
        b.push(tmp[n]);
    }
}

const PAD_POOL: usize = 64 * 1024;

/// The padding text: 64 KiB (+ SL_NEX_BUF) of random characters from a fixed seed.
pub struct Generator {
    pub config: Config,
    pad_pool: Vec<u8>,
}

impl Generator {
    pub fn new(config: Config) -> Self {
        let mut r = Rng {
            s: 0x70616464696e67,
        };
        let mut pad_pool = Vec::with_capacity(PAD_POOL + BUF);
        append_random(&mut pad_pool, &mut r, PAD_POOL + BUF, PAD_POOL + BUF);
        Generator { config, pad_pool }
    }

    fn extra(&self, b: &mut Vec<u8>, r: &mut Rng, current: u32, avg: u32) -> Str {
        if current >= avg {
            return Str {
                off: b.len() as u32,
                len: 0,
            };
        }
        let want = avg - current;
        let delta = (want as f64 * 0.2).round() as u32;
        let mut n = (want - delta + r.below(2 * delta as u64 + 1) as u32) as usize;
        n = n.min(BUF - b.len());
        let start = r.below(PAD_POOL as u64) as usize;
        put(b, &self.pad_pool[start..start + n])
    }

    /// sl_nexmark_generate.
    pub fn generate(&self, id: u64, date_time_us: i64, e: &mut Event) {
        let c = &self.config;
        let mut r = Rng {
            s: c.seed ^ id.wrapping_mul(0xd1342543de82ef95),
        };
        r.next64();
        let b = &mut e.buf;
        b.clear();
        e.kind = kind(id);
        e.event_id = id as i64;
        e.date_time_us = date_time_us;
        match e.kind {
            Kind::Person => {
                let p = &mut e.person;
                p.id = last_person(id) + FIRST_PERSON_ID;
                let start = b.len() as u32;
                put(b, FIRST_NAMES[r.below(FIRST_NAMES.len() as u64) as usize].as_bytes());
                put(b, b" ");
                put(b, LAST_NAMES[r.below(LAST_NAMES.len() as u64) as usize].as_bytes());
                p.name = Str {
                    off: start,
                    len: b.len() as u32 - start,
                };
                let start = b.len() as u32;
                append_random(b, &mut r, 7, BUF);
                put(b, b"@");
                append_random(b, &mut r, 5, BUF);
                put(b, b".com");
                p.email_address = Str {
                    off: start,
                    len: b.len() as u32 - start,
                };
                let start = b.len() as u32;
                for g in 0..4 {
                    if g > 0 {
                        put(b, b" ");
                    }
                    append_u64(b, r.below(10000), 4);
                }
                p.credit_card = Str {
                    off: start,
                    len: b.len() as u32 - start,
                };
                p.city = put(b, CITIES[r.below(CITIES.len() as u64) as usize].as_bytes());
                p.state = put(b, STATES[r.below(STATES.len() as u64) as usize].as_bytes());
                let cur = 8
                    + p.name.len
                    + p.email_address.len
                    + p.credit_card.len
                    + p.city.len
                    + p.state.len;
                p.extra = self.extra(b, &mut r, cur, c.avg_person_size);
            }
            Kind::Auction => {
                let a = &mut e.auction;
                a.id = last_auction(id) + FIRST_AUCTION_ID;
                let hs = c.hot_seller_ratio as i64;
                let seller = if r.below(c.hot_seller_ratio as u64) > 0 {
                    (last_person(id) / hs) * hs
                } else {
                    next_person(c, id, &mut r)
                };
                a.seller = seller + FIRST_PERSON_ID;
                a.category = FIRST_CATEGORY_ID + r.below(NUM_CATEGORIES) as i64;
                a.initial_bid = next_price(&mut r);
                a.reserve = a.initial_bid + next_price(&mut r);
                a.item_name = random_str(b, &mut r, 20);
                a.description = random_str(b, &mut r, 100);
                let events = c.num_in_flight_auctions as f64 * TOTAL_PROPORTION as f64
                    / AUCTION_PROPORTION as f64;
                let horizon_us = events / c.events_per_second * 1e6;
                let span = (horizon_us * 2.0) as u64 + 1;
                a.expires_us = date_time_us + 1 + r.below(span) as i64;
                let cur = 8 + a.item_name.len + a.description.len + 8 + 8 + 8 + 8 + 8;
                a.extra = self.extra(b, &mut r, cur, c.avg_auction_size);
            }
            Kind::Bid => {
                let bd = &mut e.bid;
                let ha = c.hot_auction_ratio as i64;
                let auction = if r.below(c.hot_auction_ratio as u64) > 0 {
                    (last_auction(id) / ha) * ha
                } else {
                    next_auction(c, id, &mut r)
                };
                let hb = c.hot_bidder_ratio as i64;
                let bidder = if r.below(c.hot_bidder_ratio as u64) > 0 {
                    (last_person(id) / hb) * hb + 1
                } else {
                    next_person(c, id, &mut r)
                };
                bd.auction = auction + FIRST_AUCTION_ID;
                bd.bidder = bidder + FIRST_PERSON_ID;
                bd.price = next_price(&mut r);
                if r.below(10) == 0 {
                    let h = HOT_CHANNELS[r.below(HOT_CHANNELS.len() as u64) as usize];
                    bd.channel = put(b, h.as_bytes());
                    let start = b.len() as u32;
                    put(b, b"https://www.nexmark.com/");
                    put(b, h.as_bytes());
                    put(b, b"/item.htm?query=1");
                    bd.url = Str {
                        off: start,
                        len: b.len() as u32 - start,
                    };
                } else {
                    let ch = r.below(CHANNELS);
                    let start = b.len() as u32;
                    put(b, b"channel-");
                    append_u64(b, ch, 1);
                    bd.channel = Str {
                        off: start,
                        len: b.len() as u32 - start,
                    };
                    // The url of a channel is fixed: its own stream of letters.
                    let mut cr = Rng {
                        s: 0x6a09e667f3bcc909 ^ ch,
                    };
                    let start = b.len() as u32;
                    put(b, b"https://www.nexmark.com/");
                    append_random(b, &mut cr, 5, BUF);
                    put(b, b"/");
                    append_random(b, &mut cr, 5, BUF);
                    put(b, b"/");
                    append_random(b, &mut cr, 5, BUF);
                    put(b, b"/item.htm?query=1&channel_id=");
                    append_u64(b, ch, 1);
                    bd.url = Str {
                        off: start,
                        len: b.len() as u32 - start,
                    };
                }
                // As the original: numbers only (channel and url not counted).
                bd.extra = self.extra(b, &mut r, 8 * 4, c.avg_bid_size);
            }
        }
    }
}

/// The event time of event i at rate R events/s (the contract's integer formula).
#[inline]
pub fn date_time_us(i: u64, rate: u64) -> i64 {
    1_700_000_000_000_000i64 + ((i as u128 * 1_000_000u128) / rate as u128) as i64
}
