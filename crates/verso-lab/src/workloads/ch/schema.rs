//! CH-benCHmark's three tables beyond TPC-C: SUPPLIER (10,000 rows), NATION (62), REGION (5),
//! their names, and their population (Cole et al., DBTest 2011, §3).
//!
//! CH joins them to TPC-C through computed keys, not stored ones:
//! - a stock row `(s_w_id, s_i_id)` is supplied by supplier `(s_w_id * s_i_id) mod 10000`
//!   ([`supplier_of_stock`]), so suppliers are keyed `0..10000`;
//! - a customer belongs to the nation whose key is the ASCII code of the first character of
//!   `c_state` ([`nation_of_state`]), so nation keys are the ASCII codes of `0-9A-Za-z`.

use verso::{ColumnType, Database, Isolation, Schema, TableId, Value};

use crate::rng::SplitMix64;
use crate::workload::{LabError, LoadProgress};

/// SUPPLIER: 10,000 suppliers, keyed `0..10000` because CH computes a stock row's supplier
/// as `(s_w_id * s_i_id) mod 10000`.
pub mod supplier {
    /// The table's name.
    pub const TABLE: &str = "supplier";
    /// Supplier key (primary key), `0..SUPPLIER_COUNT`.
    pub const SU_SUPPKEY: usize = 0;
    /// Name: `Supplier#` and the key in nine digits.
    pub const SU_NAME: usize = 1;
    /// Address, 10..40 letters and digits.
    pub const SU_ADDRESS: usize = 2;
    /// The supplier's nation (a nation key).
    pub const SU_NATIONKEY: usize = 3;
    /// Phone number, `CC-ddd-ddd-dddd` with the nation's country code.
    pub const SU_PHONE: usize = 4;
    /// Account balance, -999.99..=9999.99.
    pub const SU_ACCTBAL: usize = 5;
    /// Comment; five contain `bad` (Q16 excludes those suppliers).
    pub const SU_COMMENT: usize = 6;
    /// Column names, in position order.
    pub const COLUMNS: [&str; 7] = [
        "su_suppkey",
        "su_name",
        "su_address",
        "su_nationkey",
        "su_phone",
        "su_acctbal",
        "su_comment",
    ];
}

/// NATION: CH-benCHmark's 62 nations.
pub mod nation {
    /// The table's name.
    pub const TABLE: &str = "nation";
    /// Nation key (primary key): the ASCII code of a character of `0-9A-Za-z`.
    pub const N_NATIONKEY: usize = 0;
    /// Name.
    pub const N_NAME: usize = 1;
    /// The nation's region (a region key).
    pub const N_REGIONKEY: usize = 2;
    /// Comment.
    pub const N_COMMENT: usize = 3;
    /// Column names, in position order.
    pub const COLUMNS: [&str; 4] = ["n_nationkey", "n_name", "n_regionkey", "n_comment"];
}

/// REGION: five regions.
pub mod region {
    /// The table's name.
    pub const TABLE: &str = "region";
    /// Region key (primary key), 1..=5.
    pub const R_REGIONKEY: usize = 0;
    /// Name.
    pub const R_NAME: usize = 1;
    /// Comment.
    pub const R_COMMENT: usize = 2;
    /// Column names, in position order.
    pub const COLUMNS: [&str; 3] = ["r_regionkey", "r_name", "r_comment"];
}

/// Number of suppliers; CH computes a stock row's supplier modulo this.
pub const SUPPLIER_COUNT: i64 = 10_000;

/// The five regions, by key.
pub const REGIONS: [(i64, &str); 5] = [
    (1, "Africa"),
    (2, "America"),
    (3, "Asia"),
    (4, "Australia"),
    (5, "Europe"),
];

/// CH-benCHmark's 62 nations with their region keys, in key order: the nation at position
/// `p` has the key [`nation_key`]`(p)`, the ASCII code of the `p`-th character of `0-9A-Za-z`.
/// (The list, including its spelling "Finnland", is the benchmark's.)
pub const NATIONS: [(&str, i64); 62] = [
    ("Australia", 4),
    ("Belgium", 5),
    ("Cameroon", 1),
    ("Denmark", 5),
    ("Ecuador", 2),
    ("France", 5),
    ("Germany", 5),
    ("Hungary", 5),
    ("Italy", 5),
    ("Japan", 3),
    ("Kenya", 1),
    ("Lithuania", 5),
    ("Mexico", 2),
    ("Netherlands", 5),
    ("Oman", 1),
    ("Portugal", 5),
    ("Qatar", 1),
    ("Rwanda", 1),
    ("Serbia", 5),
    ("Togo", 1),
    ("United States", 2),
    ("Vietnam", 3),
    ("Singapore", 3),
    ("Cambodia", 3),
    ("Yemen", 1),
    ("Zimbabwe", 1),
    ("Argentina", 2),
    ("Bolivia", 2),
    ("Canada", 2),
    ("Dominican Republic", 2),
    ("Egypt", 1),
    ("Finnland", 5),
    ("Ghana", 1),
    ("Haiti", 2),
    ("India", 3),
    ("Jamaica", 4),
    ("Kazakhstan", 3),
    ("Luxembourg", 5),
    ("Morocco", 1),
    ("Norway", 5),
    ("Poland", 5),
    ("Peru", 2),
    ("Nicaragua", 2),
    ("Romania", 5),
    ("South Africa", 1),
    ("Thailand", 3),
    ("United Kingdom", 5),
    ("Venezuela", 2),
    ("Liechtenstein", 5),
    ("Austria", 5),
    ("Laos", 3),
    ("Zambia", 1),
    ("Switzerland", 5),
    ("China", 3),
    ("Papua New Guinea", 4),
    ("East Timor", 4),
    ("Bulgaria", 5),
    ("Brazil", 2),
    ("Albania", 5),
    ("Andorra", 5),
    ("Belize", 2),
    ("Botswana", 1),
];

const NATION_KEY_CHARACTERS: &[u8; 62] =
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The key of the nation at `position` in [`NATIONS`].
///
/// # Panics
/// If `position` is not below 62 (a programming error: positions come from the list).
pub fn nation_key(position: usize) -> i64 {
    i64::from(NATION_KEY_CHARACTERS[position])
}

/// CH's `mod((s_w_id * s_i_id), 10000)`: the supplier of a stock row.
pub fn supplier_of_stock(warehouse: i64, item: i64) -> i64 {
    (warehouse * item).rem_euclid(SUPPLIER_COUNT)
}

/// CH's `ascii(substr(c_state, 1, 1))`: the nation of a customer (`None` for an empty
/// state).
pub fn nation_of_state(state: &str) -> Option<i64> {
    state.bytes().next().map(i64::from)
}

/// Every `SUPPLIERS_WITH_COMPLAINTS_STRIDE`-th supplier (from key 7) has `bad` in its
/// comment: five suppliers, like TPC-H's five "Customer Complaints" suppliers per 10,000,
/// and supplier 7 is reached by the first items of warehouse 1 even in a tiny database.
const SUPPLIERS_WITH_COMPLAINTS_STRIDE: i64 = 2_000;
const FIRST_SUPPLIER_WITH_COMPLAINTS: i64 = 7;

/// Whether supplier `key` is one whose comment contains `bad`.
pub fn supplier_has_complaints(key: i64) -> bool {
    key % SUPPLIERS_WITH_COMPLAINTS_STRIDE == FIRST_SUPPLIER_WITH_COMPLAINTS
}

/// The handles of the three tables in one database.
#[derive(Clone, Copy, Debug)]
pub struct ExtraTables {
    /// SUPPLIER.
    pub supplier: TableId,
    /// NATION.
    pub nation: TableId,
    /// REGION.
    pub region: TableId,
}

impl ExtraTables {
    /// Creates SUPPLIER, NATION and REGION (keys and integers `I64`, the balance `F64`,
    /// the rest `Text`, like TPC-C's tables).
    pub fn create(db: &Database) -> Result<ExtraTables, LabError> {
        use ColumnType::{Text, F64, I64};
        let schema = |names: &[&str], types: &[ColumnType]| {
            debug_assert_eq!(names.len(), types.len());
            names
                .iter()
                .zip(types)
                .fold(Schema::new(), |schema, (name, column_type)| {
                    schema.column(name, *column_type)
                })
                .primary_key(&names[..1])
        };
        db.create_table(region::TABLE, schema(&region::COLUMNS, &[I64, Text, Text]))?;
        db.create_table(
            nation::TABLE,
            schema(&nation::COLUMNS, &[I64, Text, I64, Text]),
        )?;
        db.create_table(
            supplier::TABLE,
            schema(&supplier::COLUMNS, &[I64, Text, Text, I64, Text, F64, Text]),
        )?;
        ExtraTables::open(db)
    }

    /// The handles of the tables [`ExtraTables::create`] made in `db`.
    pub fn open(db: &Database) -> Result<ExtraTables, LabError> {
        Ok(ExtraTables {
            supplier: db.table(supplier::TABLE)?,
            nation: db.table(nation::TABLE)?,
            region: db.table(region::TABLE)?,
        })
    }
}

/// Rows of the three tables: 5 regions, 62 nations, 10,000 suppliers.
pub const EXTRA_ROWS: u64 = 5 + 62 + SUPPLIER_COUNT as u64;

/// Suppliers inserted per transaction while loading.
const LOAD_BATCH_ROWS: i64 = 1_000;

/// Creates and loads the three tables. Deterministic in `seed`.
pub fn load(db: &Database, seed: u64, progress: &dyn LoadProgress) -> Result<(), LabError> {
    let tables = ExtraTables::create(db)?;
    let mut random = SplitMix64::new(seed ^ 0x6368_6265_6e63_686d); // "chbenchm"

    let mut txn = db.begin(Isolation::Snapshot);
    for (key, name) in REGIONS {
        let comment = sentence(&mut random, 31, 115);
        txn.insert(tables.region, &[key.into(), name.into(), comment.into()])?;
    }
    for (position, (name, region_key)) in NATIONS.into_iter().enumerate() {
        let comment = sentence(&mut random, 31, 114);
        let row = [
            nation_key(position).into(),
            name.into(),
            region_key.into(),
            comment.into(),
        ];
        txn.insert(tables.nation, &row)?;
    }
    txn.commit()?;
    progress.advance((REGIONS.len() + NATIONS.len()) as u64);

    let mut key = 0;
    while key < SUPPLIER_COUNT {
        let batch_end = (key + LOAD_BATCH_ROWS).min(SUPPLIER_COUNT);
        let mut txn = db.begin(Isolation::Snapshot);
        for supplier_key in key..batch_end {
            txn.insert(tables.supplier, &supplier_row(supplier_key, &mut random))?;
        }
        txn.commit()?;
        progress.advance((batch_end - key) as u64);
        key = batch_end;
    }
    Ok(())
}

/// One supplier, populated as TPC-H populates SUPPLIER (CH's §3 refers to it): a name from
/// the key, a random address, a uniformly random nation, a phone number whose country code
/// follows the nation, a balance in [-999.99, 9999.99], and a random comment.
fn supplier_row(key: i64, random: &mut SplitMix64) -> [Value; 7] {
    let nation_position = random.below(NATIONS.len() as u64) as usize;
    let address = alphanumeric(random, 10, 40);
    let phone = format!(
        "{}-{}-{}-{}",
        10 + nation_position,
        100 + random.below(900),
        100 + random.below(900),
        1000 + random.below(9000)
    );
    let balance_cents = random.below(1_099_999) as i64 - 99_999;
    let mut comment = sentence(random, 25, 100);
    if supplier_has_complaints(key) {
        let middle = comment.len() / 2;
        comment.insert_str(middle, " bad ");
    }
    [
        key.into(),
        format!("Supplier#{key:09}").into(),
        address.into(),
        nation_key(nation_position).into(),
        phone.into(),
        (balance_cents as f64 / 100.0).into(),
        comment.into(),
    ]
}

/// Words of generated comments. None contains `bad`, so only the planted suppliers match
/// Q16's `su_comment like '%bad%'`.
const COMMENT_WORDS: [&str; 24] = [
    "furiously",
    "quickly",
    "carefully",
    "slyly",
    "final",
    "regular",
    "pending",
    "express",
    "ironic",
    "special",
    "deposits",
    "requests",
    "packages",
    "accounts",
    "theodolites",
    "instructions",
    "foxes",
    "beans",
    "sleep",
    "haggle",
    "nag",
    "wake",
    "among",
    "above",
];

/// Uniform in `low..=high`.
fn between(random: &mut SplitMix64, low: usize, high: usize) -> usize {
    low + random.below((high - low + 1) as u64) as usize
}

/// Letters and digits, between `min_len` and `max_len` of them.
fn alphanumeric(random: &mut SplitMix64, min_len: usize, max_len: usize) -> String {
    let len = between(random, min_len, max_len);
    (0..len)
        .map(|_| char::from(NATION_KEY_CHARACTERS[random.below(62) as usize]))
        .collect()
}

/// Words from [`COMMENT_WORDS`], between `min_len` and `max_len` characters long.
fn sentence(random: &mut SplitMix64, min_len: usize, max_len: usize) -> String {
    let target = between(random, min_len, max_len);
    let mut sentence = String::with_capacity(target + 16);
    while sentence.len() < target {
        if !sentence.is_empty() {
            sentence.push(' ');
        }
        sentence.push_str(COMMENT_WORDS[random.below(COMMENT_WORDS.len() as u64) as usize]);
    }
    sentence.truncate(max_len);
    sentence
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nation_keys_are_the_ascii_codes_of_alphanumerics() {
        assert_eq!(nation_key(0), i64::from(b'0'));
        assert_eq!(nation_key(10), i64::from(b'A'));
        assert_eq!(nation_key(61), i64::from(b'z'));
        assert_eq!(NATIONS[6].0, "Germany");
        assert_eq!(nation_of_state("6x"), Some(nation_key(6)));
        assert_eq!(nation_of_state(""), None);
    }

    #[test]
    fn stock_rows_map_onto_every_supplier() {
        assert_eq!(supplier_of_stock(1, 10_007), 7);
        assert_eq!(supplier_of_stock(3, 5_000), 5_000);
        let complaining = (0..SUPPLIER_COUNT)
            .filter(|&key| supplier_has_complaints(key))
            .count();
        assert_eq!(complaining, 5);
    }

    #[test]
    fn comments_never_say_bad_by_chance() {
        let mut random = SplitMix64::new(1);
        for _ in 0..1_000 {
            let comment = sentence(&mut random, 25, 100);
            assert!(!comment.contains("bad"));
            assert!((25..=100).contains(&comment.len()), "{comment:?}");
        }
    }
}
