//! The nine TPC-C tables (clause 1.3): names, columns, keys and secondary indexes.
//!
//! Every table is a module with `TABLE` (its name), one `usize` constant per column giving
//! the column's position (what [`verso::RowView::get`] and [`verso::Transaction::update`]
//! take), `COLUMNS` (names and types, in position order), `PRIMARY_KEY` (column names, in
//! key order) and, where it has one, the name of its secondary index. Column names are the
//! specification's, in lower case (`c_w_id`, `ol_amount`, ...).
//!
//! Types, chosen so the CH-benCHmark queries can compute on them directly:
//! - identifiers, counts and quantities: `I64`;
//! - money and rates (`DECIMAL` in the specification): `F64`. Money is always a whole
//!   number of cents (every transaction rounds to cents before it stores), so sums of it
//!   can be compared exactly by converting to cents ([`to_cents`]);
//! - dates and times: `I64`, microseconds since the Unix epoch (UTC); `NULL` where the
//!   specification allows a null date (`ol_delivery_d`) or id (`o_carrier_id`);
//! - `CHAR`/`VARCHAR`: `Text`.
//!
//! Departures from the specification: the ORDER table is called `orders` (ORDER is an SQL
//! keyword; CH-benCHmark's queries call it `orders` too), and HISTORY, which has no key in
//! TPC-C, has a surrogate key column `h_seq` (see [`history`]).

use verso::{ColumnType, Database, PrimaryKeyIndex, Schema, TableId};

use crate::workload::LabError;

/// Declares a table's column positions and its `COLUMNS` list from one list, so a position
/// and its name cannot drift apart.
macro_rules! columns {
    (@position $position:expr;) => {};
    (@position $position:expr; ($doc:literal $name:ident) $($rest:tt)*) => {
        #[doc = $doc]
        pub const $name: usize = $position;
        columns!(@position $position + 1; $($rest)*);
    };
    ($($name:ident = $text:literal : $column_type:ident, $doc:literal;)+) => {
        columns!(@position 0; $(($doc $name))+);
        /// Every column, in position order: name and type.
        pub const COLUMNS: &[(&str, ColumnType)] = &[$(($text, ColumnType::$column_type)),+];
    };
}

/// WAREHOUSE: one row per warehouse (the scale factor).
pub mod warehouse {
    use super::ColumnType;
    /// The table's name.
    pub const TABLE: &str = "warehouse";
    columns! {
        W_ID = "w_id": I64, "Warehouse number, 1..=W.";
        W_NAME = "w_name": Text, "Name, 6..10 characters.";
        W_STREET_1 = "w_street_1": Text, "Street, 10..20 characters.";
        W_STREET_2 = "w_street_2": Text, "Street, 10..20 characters.";
        W_CITY = "w_city": Text, "City, 10..20 characters.";
        W_STATE = "w_state": Text, "State, 2 letters.";
        W_ZIP = "w_zip": Text, "Zip code: 4 digits then `11111`.";
        W_TAX = "w_tax": F64, "Sales tax rate, 0.0000..=0.2000.";
        W_YTD = "w_ytd": F64, "Year-to-date balance (money).";
    }
    /// Primary key columns, in key order.
    pub const PRIMARY_KEY: &[&str] = &["w_id"];
}

/// DISTRICT: `districts_per_warehouse` rows per warehouse (10 in the specification).
pub mod district {
    use super::ColumnType;
    /// The table's name.
    pub const TABLE: &str = "district";
    columns! {
        D_ID = "d_id": I64, "District number within its warehouse, 1..=10.";
        D_W_ID = "d_w_id": I64, "Its warehouse.";
        D_NAME = "d_name": Text, "Name, 6..10 characters.";
        D_STREET_1 = "d_street_1": Text, "Street, 10..20 characters.";
        D_STREET_2 = "d_street_2": Text, "Street, 10..20 characters.";
        D_CITY = "d_city": Text, "City, 10..20 characters.";
        D_STATE = "d_state": Text, "State, 2 letters.";
        D_ZIP = "d_zip": Text, "Zip code: 4 digits then `11111`.";
        D_TAX = "d_tax": F64, "Sales tax rate, 0.0000..=0.2000.";
        D_YTD = "d_ytd": F64, "Year-to-date balance (money).";
        D_NEXT_O_ID = "d_next_o_id": I64, "The id the district's next order gets.";
    }
    /// Primary key columns, in key order.
    pub const PRIMARY_KEY: &[&str] = &["d_w_id", "d_id"];
}

/// CUSTOMER: `customers_per_district` rows per district (3,000 in the specification).
pub mod customer {
    use super::ColumnType;
    /// The table's name.
    pub const TABLE: &str = "customer";
    columns! {
        C_ID = "c_id": I64, "Customer number within its district, 1..=3000.";
        C_D_ID = "c_d_id": I64, "Its district.";
        C_W_ID = "c_w_id": I64, "Its warehouse.";
        C_FIRST = "c_first": Text, "First name, 8..16 characters.";
        C_MIDDLE = "c_middle": Text, "Middle name: `OE`.";
        C_LAST = "c_last": Text, "Last name, three syllables (clause 4.3.2.3).";
        C_STREET_1 = "c_street_1": Text, "Street, 10..20 characters.";
        C_STREET_2 = "c_street_2": Text, "Street, 10..20 characters.";
        C_CITY = "c_city": Text, "City, 10..20 characters.";
        C_STATE = "c_state": Text, "State, 2 letters.";
        C_ZIP = "c_zip": Text, "Zip code: 4 digits then `11111`.";
        C_PHONE = "c_phone": Text, "Phone, 16 digits.";
        C_SINCE = "c_since": I64, "Date of registration (microseconds since the epoch).";
        C_CREDIT = "c_credit": Text, "`GC` (good credit) or `BC` (bad credit).";
        C_CREDIT_LIM = "c_credit_lim": F64, "Credit limit (money).";
        C_DISCOUNT = "c_discount": F64, "Discount rate, 0.0000..=0.5000.";
        C_BALANCE = "c_balance": F64, "Balance (money).";
        C_YTD_PAYMENT = "c_ytd_payment": F64, "Year-to-date payments (money).";
        C_PAYMENT_CNT = "c_payment_cnt": I64, "Number of payments.";
        C_DELIVERY_CNT = "c_delivery_cnt": I64, "Number of delivered orders.";
        C_DATA = "c_data": Text, "Miscellaneous data, 300..500 characters.";
    }
    /// Primary key columns, in key order.
    pub const PRIMARY_KEY: &[&str] = &["c_w_id", "c_d_id", "c_id"];
    /// Secondary index for customer-by-last-name (Payment, Order-Status): within a
    /// district, by last name then first name.
    pub const BY_NAME: &str = "customer_by_name";
    /// The columns of [`BY_NAME`], in key order.
    pub const BY_NAME_COLUMNS: &[&str] = &["c_w_id", "c_d_id", "c_last", "c_first"];
}

/// HISTORY: one row per payment (one per customer initially).
///
/// TPC-C gives HISTORY no key; Verso tables need one, so `h_seq` is a surrogate: the
/// customer's payment count after the payment (`c_payment_cnt`). The key
/// (`h_c_w_id`, `h_c_d_id`, `h_c_id`, `h_seq`) is unique without any shared counter,
/// because two payments of one customer write the same CUSTOMER row and so cannot both
/// commit with the same count.
pub mod history {
    use super::ColumnType;
    /// The table's name.
    pub const TABLE: &str = "history";
    columns! {
        H_C_ID = "h_c_id": I64, "The paying customer.";
        H_C_D_ID = "h_c_d_id": I64, "The customer's district.";
        H_C_W_ID = "h_c_w_id": I64, "The customer's warehouse.";
        H_D_ID = "h_d_id": I64, "The district paid at.";
        H_W_ID = "h_w_id": I64, "The warehouse paid at.";
        H_DATE = "h_date": I64, "When (microseconds since the epoch).";
        H_AMOUNT = "h_amount": F64, "Amount paid (money).";
        H_DATA = "h_data": Text, "Miscellaneous data, 12..24 characters.";
        H_SEQ = "h_seq": I64, "Surrogate key: the customer's payment count after this payment.";
    }
    /// Primary key columns, in key order.
    pub const PRIMARY_KEY: &[&str] = &["h_c_w_id", "h_c_d_id", "h_c_id", "h_seq"];
}

/// NEW_ORDER: the orders not yet delivered.
pub mod new_order {
    use super::ColumnType;
    /// The table's name.
    pub const TABLE: &str = "new_order";
    columns! {
        NO_O_ID = "no_o_id": I64, "The order.";
        NO_D_ID = "no_d_id": I64, "Its district.";
        NO_W_ID = "no_w_id": I64, "Its warehouse.";
    }
    /// Primary key columns, in key order: a district's oldest new order comes first.
    pub const PRIMARY_KEY: &[&str] = &["no_w_id", "no_d_id", "no_o_id"];
}

/// ORDER (named `orders`): one row per order.
pub mod orders {
    use super::ColumnType;
    /// The table's name.
    pub const TABLE: &str = "orders";
    columns! {
        O_ID = "o_id": I64, "Order number within its district.";
        O_D_ID = "o_d_id": I64, "Its district.";
        O_W_ID = "o_w_id": I64, "Its warehouse.";
        O_C_ID = "o_c_id": I64, "The ordering customer.";
        O_ENTRY_D = "o_entry_d": I64, "When it was entered (microseconds since the epoch).";
        O_CARRIER_ID = "o_carrier_id": I64, "Carrier, 1..=10; NULL until delivered.";
        O_OL_CNT = "o_ol_cnt": I64, "Number of order lines, 5..=15.";
        O_ALL_LOCAL = "o_all_local": I64, "1 if every line is supplied by the home warehouse, else 0.";
    }
    /// Primary key columns, in key order.
    pub const PRIMARY_KEY: &[&str] = &["o_w_id", "o_d_id", "o_id"];
    /// Secondary index for Order-Status (a customer's latest order).
    pub const BY_CUSTOMER: &str = "orders_by_customer";
    /// The columns of [`BY_CUSTOMER`], in key order.
    pub const BY_CUSTOMER_COLUMNS: &[&str] = &["o_w_id", "o_d_id", "o_c_id", "o_id"];
}

/// ORDER_LINE: 5..=15 rows per order.
pub mod order_line {
    use super::ColumnType;
    /// The table's name.
    pub const TABLE: &str = "order_line";
    columns! {
        OL_O_ID = "ol_o_id": I64, "The order.";
        OL_D_ID = "ol_d_id": I64, "Its district.";
        OL_W_ID = "ol_w_id": I64, "Its warehouse.";
        OL_NUMBER = "ol_number": I64, "Line number within the order, 1..=o_ol_cnt.";
        OL_I_ID = "ol_i_id": I64, "The item.";
        OL_SUPPLY_W_ID = "ol_supply_w_id": I64, "The supplying warehouse.";
        OL_DELIVERY_D = "ol_delivery_d": I64, "When delivered (microseconds since the epoch); NULL until then.";
        OL_QUANTITY = "ol_quantity": I64, "Quantity ordered.";
        OL_AMOUNT = "ol_amount": F64, "Amount (money).";
        OL_DIST_INFO = "ol_dist_info": Text, "The stock's district information, 24 characters.";
    }
    /// Primary key columns, in key order.
    pub const PRIMARY_KEY: &[&str] = &["ol_w_id", "ol_d_id", "ol_o_id", "ol_number"];
}

/// ITEM: the catalogue, `items` rows (100,000 in the specification), not per warehouse.
pub mod item {
    use super::ColumnType;
    /// The table's name.
    pub const TABLE: &str = "item";
    columns! {
        I_ID = "i_id": I64, "Item number, 1..=100000.";
        I_IM_ID = "i_im_id": I64, "Image id, 1..=10000.";
        I_NAME = "i_name": Text, "Name, 14..24 characters.";
        I_PRICE = "i_price": F64, "Price (money), 1.00..=100.00.";
        I_DATA = "i_data": Text, "Brand information, 26..50 characters; 10% contain `ORIGINAL`.";
    }
    /// Primary key columns, in key order.
    pub const PRIMARY_KEY: &[&str] = &["i_id"];
}

/// STOCK: one row per item per warehouse.
pub mod stock {
    use super::ColumnType;
    /// The table's name.
    pub const TABLE: &str = "stock";
    columns! {
        S_I_ID = "s_i_id": I64, "The item.";
        S_W_ID = "s_w_id": I64, "The warehouse.";
        S_QUANTITY = "s_quantity": I64, "Quantity in stock.";
        S_DIST_01 = "s_dist_01": Text, "District 1's information, 24 characters.";
        S_DIST_02 = "s_dist_02": Text, "District 2's information, 24 characters.";
        S_DIST_03 = "s_dist_03": Text, "District 3's information, 24 characters.";
        S_DIST_04 = "s_dist_04": Text, "District 4's information, 24 characters.";
        S_DIST_05 = "s_dist_05": Text, "District 5's information, 24 characters.";
        S_DIST_06 = "s_dist_06": Text, "District 6's information, 24 characters.";
        S_DIST_07 = "s_dist_07": Text, "District 7's information, 24 characters.";
        S_DIST_08 = "s_dist_08": Text, "District 8's information, 24 characters.";
        S_DIST_09 = "s_dist_09": Text, "District 9's information, 24 characters.";
        S_DIST_10 = "s_dist_10": Text, "District 10's information, 24 characters.";
        S_YTD = "s_ytd": I64, "Year-to-date quantity ordered.";
        S_ORDER_CNT = "s_order_cnt": I64, "Number of order lines.";
        S_REMOTE_CNT = "s_remote_cnt": I64, "Number of order lines from other warehouses.";
        S_DATA = "s_data": Text, "Make information, 26..50 characters; 10% contain `ORIGINAL`.";
    }
    /// Primary key columns, in key order.
    pub const PRIMARY_KEY: &[&str] = &["s_w_id", "s_i_id"];

    /// The position of `s_dist_XX` for district `district` (1..=10).
    pub fn dist_column(district: i64) -> usize {
        debug_assert!((1..=10).contains(&district), "district {district}");
        S_DIST_01 + (district - 1) as usize
    }
}

/// Every table's name, in the order they are created.
pub const TABLES: [&str; 9] = [
    warehouse::TABLE,
    district::TABLE,
    customer::TABLE,
    history::TABLE,
    new_order::TABLE,
    orders::TABLE,
    order_line::TABLE,
    item::TABLE,
    stock::TABLE,
];

fn schema_of(columns: &[(&str, ColumnType)], primary_key: &[&str]) -> Schema {
    columns
        .iter()
        .fold(Schema::new(), |schema, (name, column_type)| {
            schema.column(name, *column_type)
        })
        .primary_key(primary_key)
}

/// The schema of every table, with its name, in creation order.
pub fn schemas() -> [(&'static str, Schema); 9] {
    [
        (
            warehouse::TABLE,
            schema_of(warehouse::COLUMNS, warehouse::PRIMARY_KEY),
        ),
        (
            district::TABLE,
            schema_of(district::COLUMNS, district::PRIMARY_KEY),
        ),
        (
            customer::TABLE,
            schema_of(customer::COLUMNS, customer::PRIMARY_KEY)
                .index(customer::BY_NAME, customer::BY_NAME_COLUMNS),
        ),
        (
            history::TABLE,
            // Only inserted, never looked up: no hash index (see `PrimaryKeyIndex`).
            schema_of(history::COLUMNS, history::PRIMARY_KEY)
                .primary_key_index(PrimaryKeyIndex::OrderedOnly),
        ),
        (
            new_order::TABLE,
            schema_of(new_order::COLUMNS, new_order::PRIMARY_KEY),
        ),
        (
            orders::TABLE,
            schema_of(orders::COLUMNS, orders::PRIMARY_KEY)
                .index(orders::BY_CUSTOMER, orders::BY_CUSTOMER_COLUMNS),
        ),
        (
            order_line::TABLE,
            // Ten inserts per New-Order, reached only by scans (Stock-Level, Order-Status,
            // Delivery's `update_range`): no hash index.
            schema_of(order_line::COLUMNS, order_line::PRIMARY_KEY)
                .primary_key_index(PrimaryKeyIndex::OrderedOnly),
        ),
        (item::TABLE, schema_of(item::COLUMNS, item::PRIMARY_KEY)),
        (stock::TABLE, schema_of(stock::COLUMNS, stock::PRIMARY_KEY)),
    ]
}

/// The handles of the nine tables in one database.
#[derive(Clone, Copy, Debug)]
pub struct Tables {
    /// WAREHOUSE.
    pub warehouse: TableId,
    /// DISTRICT.
    pub district: TableId,
    /// CUSTOMER.
    pub customer: TableId,
    /// HISTORY.
    pub history: TableId,
    /// NEW_ORDER.
    pub new_order: TableId,
    /// ORDER (`orders`).
    pub orders: TableId,
    /// ORDER_LINE.
    pub order_line: TableId,
    /// ITEM.
    pub item: TableId,
    /// STOCK.
    pub stock: TableId,
}

impl Tables {
    /// Creates the nine tables (and their secondary indexes) in `db`.
    pub fn create(db: &Database) -> Result<Tables, LabError> {
        for (name, schema) in schemas() {
            db.create_table(name, schema)?;
        }
        Tables::open(db)
    }

    /// The handles of the tables [`Tables::create`] made in `db`.
    pub fn open(db: &Database) -> Result<Tables, LabError> {
        Ok(Tables {
            warehouse: db.table(warehouse::TABLE)?,
            district: db.table(district::TABLE)?,
            customer: db.table(customer::TABLE)?,
            history: db.table(history::TABLE)?,
            new_order: db.table(new_order::TABLE)?,
            orders: db.table(orders::TABLE)?,
            order_line: db.table(order_line::TABLE)?,
            item: db.table(item::TABLE)?,
            stock: db.table(stock::TABLE)?,
        })
    }
}

/// Money as a whole number of cents. Every money value Verso's TPC-C stores is a whole
/// number of cents (stored as the nearest `f64`), so this is exact for stored values and
/// lets sums be compared without a tolerance.
pub fn to_cents(money: f64) -> i64 {
    (money * 100.0).round() as i64
}

/// The `f64` stored for a number of cents.
pub fn from_cents(cents: i64) -> f64 {
    cents as f64 / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_match_the_column_lists() {
        assert_eq!(warehouse::COLUMNS[warehouse::W_YTD].0, "w_ytd");
        assert_eq!(warehouse::COLUMNS.len(), warehouse::W_YTD + 1);
        assert_eq!(district::COLUMNS[district::D_NEXT_O_ID].0, "d_next_o_id");
        assert_eq!(customer::COLUMNS[customer::C_DATA].0, "c_data");
        assert_eq!(customer::COLUMNS.len(), 21);
        assert_eq!(history::COLUMNS[history::H_SEQ].0, "h_seq");
        assert_eq!(new_order::COLUMNS[new_order::NO_W_ID].0, "no_w_id");
        assert_eq!(orders::COLUMNS[orders::O_ALL_LOCAL].0, "o_all_local");
        assert_eq!(
            order_line::COLUMNS[order_line::OL_DIST_INFO].0,
            "ol_dist_info"
        );
        assert_eq!(item::COLUMNS[item::I_DATA].0, "i_data");
        assert_eq!(stock::COLUMNS[stock::S_DATA].0, "s_data");
        assert_eq!(stock::COLUMNS[stock::dist_column(10)].0, "s_dist_10");
        assert_eq!(stock::COLUMNS.len(), 17);
    }

    #[test]
    fn cents_round_trip() {
        for cents in [-1_000_000, -1, 0, 1, 999, 1_000_000, 123_456_789] {
            assert_eq!(to_cents(from_cents(cents)), cents);
        }
        assert_eq!(to_cents(0.1 + 0.2), 30);
    }

    #[test]
    fn every_table_is_created_with_its_indexes() -> Result<(), LabError> {
        let db = Database::open(verso::Options::default())?;
        Tables::create(&db)?;
        assert_eq!(db.table_names(), TABLES.map(str::to_owned).to_vec());
        let txn = db.begin(verso::Isolation::Snapshot);
        let tables = Tables::open(&db)?;
        assert!(txn
            .scan_index(tables.customer, customer::BY_NAME, ..)?
            .next()
            .is_none());
        assert!(txn
            .scan_index(tables.orders, orders::BY_CUSTOMER, ..)?
            .next()
            .is_none());
        Ok(())
    }
}
