//! Owned rows with their column names, and the conversions between rows and a program's
//! own types: [`Row`], [`FromValue`], [`FromRow`], [`IntoRow`].
//!
//! A [`Row`] is what the scan iterators ([`Transaction::scan`](crate::Transaction::scan))
//! and [`Transaction::get_row`](crate::Transaction::get_row) return: the values, owned, plus
//! a reference to the table's column names (no copy of them per row), so columns are read
//! by name or by position:
//!
//! ```
//! use verso::{ColumnType, Database, FromRow, IntoRow, Isolation, Options, Row, Schema};
//!
//! struct Account {
//!     id: u64,
//!     owner: String,
//!     balance: i64,
//! }
//!
//! impl FromRow for Account {
//!     fn from_row(row: &Row<'_>) -> verso::Result<Self> {
//!         let (id, owner, balance) = (row.get("id")?, row.get("owner")?, row.get("balance")?);
//!         Ok(Account { id, owner, balance })
//!     }
//! }
//!
//! impl IntoRow for &Account {
//!     fn into_row(self) -> Vec<verso::Value> {
//!         // In the table's column order, as `Transaction::insert` takes a row.
//!         (self.id, self.owner.as_str(), self.balance).into_row()
//!     }
//! }
//!
//! let db = Database::open(Options::default())?;
//! let accounts = db.create_table(
//!     "accounts",
//!     Schema::new()
//!         .column("id", ColumnType::U64)
//!         .column("owner", ColumnType::Text)
//!         .column("balance", ColumnType::I64)
//!         .primary_key(&["id"]),
//! )?;
//! let mut txn = db.begin(Isolation::Snapshot);
//! let ada = Account { id: 1, owner: "ada".into(), balance: 100 };
//! txn.insert(accounts, &ada.into_row())?;
//!
//! let row = txn.get_row(accounts, &[1u64.into()])?.expect("inserted");
//! assert_eq!(row.get::<i64>("balance")?, 100);
//! assert_eq!(row.get::<&str>(1)?, "ada"); // by position
//! let read: Account = row.decode()?;
//! assert_eq!((read.id, read.owner.as_str(), read.balance), (1, "ada", 100));
//! // Tuples decode by position.
//! let (id, owner, balance): (u64, String, i64) = row.decode()?;
//! # let _ = (id, owner, balance);
//! # Ok::<(), verso::Error>(())
//! ```

use std::fmt;
use std::ops::Deref;

use crate::error::{Error, Result};
use crate::schema::TableSchema;
use crate::value::Value;

/// One row, owned, with its table's column names: read a column by name or by position
/// with [`Row::get`], map the row to a type of your own with [`Row::decode`].
///
/// It dereferences to `[Value]` (the values in column order), so `row[2]`, `row.len()` and
/// `row.iter()` work as on a `Vec<Value>`; [`Row::into_values`] gives the vector. The
/// lifetime is the database's: a row outlives the transaction that read it.
#[derive(Clone)]
pub struct Row<'db> {
    schema: &'db TableSchema,
    values: Vec<Value>,
}

impl<'db> Row<'db> {
    pub(crate) fn new(schema: &'db TableSchema, values: Vec<Value>) -> Self {
        debug_assert_eq!(values.len(), schema.arity());
        Row { schema, values }
    }

    /// The value of a column, by name (`"balance"`) or position (`2`), converted to `T`:
    /// `i64`, `u64`, `f64`, `String`, `Vec<u8>`, `&str` and `&[u8]` (borrowed from the
    /// row), [`Value`], or `Option` of any of them for a column that may be NULL.
    ///
    /// Fails with [`Error::UnknownColumn`] for a name or position the table does not have,
    /// and with [`Error::ValueConversion`] for a value that is not a `T` (a NULL read as
    /// anything but an `Option`, an `I64` read as `u64`): no conversion guesses.
    pub fn get<'r, T: FromValue<'r>>(&'r self, column: impl ColumnIndex) -> Result<T> {
        let position = self.position(&column)?;
        let value = &self.values[position];
        T::from_value(value).ok_or_else(|| Error::ValueConversion {
            table: self.schema.name.clone(),
            column: self.schema.column_names[position].clone(),
            value: describe(value),
            target: T::type_name(),
        })
    }

    /// The value of a column, by name or position, as it is stored.
    pub fn value(&self, column: impl ColumnIndex) -> Result<&Value> {
        Ok(&self.values[self.position(&column)?])
    }

    /// The row as a type of your own (see [`FromRow`]), or as a tuple of its columns in
    /// order: `let (id, name): (u64, String) = row.decode()?`.
    pub fn decode<T: FromRow>(&self) -> Result<T> {
        T::from_row(self)
    }

    /// The values, in the table's column order.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// The values, in the table's column order, without the column names.
    pub fn into_values(self) -> Vec<Value> {
        self.values
    }

    /// The table's column names, in order.
    pub fn column_names(&self) -> impl ExactSizeIterator<Item = &'db str> + 'db {
        self.schema.column_names.iter().map(String::as_str)
    }

    /// The name of the table the row belongs to.
    pub fn table_name(&self) -> &'db str {
        &self.schema.name
    }

    fn position(&self, column: &impl ColumnIndex) -> Result<usize> {
        column
            .position_in(&self.schema.column_names)
            .ok_or_else(|| Error::UnknownColumn {
                table: self.schema.name.clone(),
                column: column.to_string(),
            })
    }
}

impl Deref for Row<'_> {
    type Target = [Value];

    fn deref(&self) -> &[Value] {
        &self.values
    }
}

impl From<Row<'_>> for Vec<Value> {
    fn from(row: Row<'_>) -> Self {
        row.values
    }
}

impl IntoIterator for Row<'_> {
    type Item = Value;
    type IntoIter = std::vec::IntoIter<Value>;

    fn into_iter(self) -> Self::IntoIter {
        self.values.into_iter()
    }
}

/// Rows are equal when their values are (whatever table they came from).
impl PartialEq for Row<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.values == other.values
    }
}

impl PartialEq<Vec<Value>> for Row<'_> {
    fn eq(&self, other: &Vec<Value>) -> bool {
        &self.values == other
    }
}

impl PartialEq<[Value]> for Row<'_> {
    fn eq(&self, other: &[Value]) -> bool {
        self.values == other
    }
}

impl PartialEq<Row<'_>> for Vec<Value> {
    fn eq(&self, other: &Row<'_>) -> bool {
        self == &other.values
    }
}

/// `accounts { id: U64(1), owner: Text("ada"), balance: I64(100) }`.
impl fmt::Debug for Row<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut row = f.debug_struct(&self.schema.name);
        for (name, value) in self.schema.column_names.iter().zip(&self.values) {
            row.field(name, value);
        }
        row.finish()
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "NULL".into(),
        value => format!("{value:?}"),
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for usize {}
    impl Sealed for &str {}
    impl Sealed for String {}
    impl Sealed for &String {}
}

/// What names a column of a [`Row`]: its position (`usize`) or its name (`&str`,
/// `String`).
pub trait ColumnIndex: sealed::Sealed + fmt::Display {
    /// The column's position among `names`, if the table has it.
    #[doc(hidden)]
    fn position_in(&self, names: &[String]) -> Option<usize>;
}

impl ColumnIndex for usize {
    fn position_in(&self, names: &[String]) -> Option<usize> {
        (*self < names.len()).then_some(*self)
    }
}

impl ColumnIndex for &str {
    fn position_in(&self, names: &[String]) -> Option<usize> {
        names.iter().position(|name| name == self)
    }
}

impl ColumnIndex for String {
    fn position_in(&self, names: &[String]) -> Option<usize> {
        self.as_str().position_in(names)
    }
}

impl ColumnIndex for &String {
    fn position_in(&self, names: &[String]) -> Option<usize> {
        self.as_str().position_in(names)
    }
}

/// A Rust type a column's [`Value`] converts to, exactly: `I64` to `i64`, `U64` to `u64`,
/// `F64` to `f64`, `Text` to `String` or `&str`, `Bytes` to `Vec<u8>` or `&[u8]`; NULL
/// only to `Option<T>` (as `None`). `'a` is the row's borrow, for the borrowed types.
pub trait FromValue<'a>: Sized {
    /// The value as `Self`, or `None` if it is not one.
    fn from_value(value: &'a Value) -> Option<Self>;

    /// How errors name the type (`i64`, `Option<String>`, …).
    fn type_name() -> String {
        std::any::type_name::<Self>().to_owned()
    }
}

macro_rules! from_value {
    ($($ty:ty, $name:literal, $value:ident => $convert:expr;)*) => {$(
        impl<'a> FromValue<'a> for $ty {
            fn from_value($value: &'a Value) -> Option<Self> {
                $convert
            }

            fn type_name() -> String {
                $name.to_owned()
            }
        }
    )*};
}

from_value! {
    i64, "i64", value => value.as_i64();
    u64, "u64", value => value.as_u64();
    f64, "f64", value => value.as_f64();
    String, "String", value => value.as_text().map(str::to_owned);
    &'a str, "&str", value => value.as_text();
    Vec<u8>, "Vec<u8>", value => value.as_bytes().map(<[u8]>::to_vec);
    &'a [u8], "&[u8]", value => value.as_bytes();
    Value, "Value", value => Some(value.clone());
    &'a Value, "&Value", value => Some(value);
}

impl<'a, T: FromValue<'a>> FromValue<'a> for Option<T> {
    fn from_value(value: &'a Value) -> Option<Self> {
        match value {
            Value::Null => Some(None),
            value => T::from_value(value).map(Some),
        }
    }

    fn type_name() -> String {
        format!("Option<{}>", T::type_name())
    }
}

/// A type a [`Row`] converts to: implement it for your own structs (reading the columns
/// by name with [`Row::get`]), then read rows with [`Row::decode`]. Tuples of up to eight
/// [`FromValue`] types decode a row by position, and `Vec<Value>` takes the values as they
/// are.
pub trait FromRow: Sized {
    /// Builds `Self` from the row, failing (typically with [`Error::UnknownColumn`] or
    /// [`Error::ValueConversion`]) if the row does not have what it needs.
    fn from_row(row: &Row<'_>) -> Result<Self>;
}

impl FromRow for Vec<Value> {
    fn from_row(row: &Row<'_>) -> Result<Self> {
        Ok(row.values.clone())
    }
}

/// A type that becomes a whole row, its values in the table's column order, as
/// [`Transaction::insert`](crate::Transaction::insert) takes them:
/// `txn.insert(table, &account.into_row())`. Tuples of up to eight values that convert
/// into [`Value`] are rows already: `(1u64, "ada", 100i64).into_row()`.
pub trait IntoRow {
    /// The values, in the table's column order.
    fn into_row(self) -> Vec<Value>;
}

impl IntoRow for Vec<Value> {
    fn into_row(self) -> Vec<Value> {
        self
    }
}

macro_rules! tuple_rows {
    ($($len:literal: $($name:ident $index:tt),+;)*) => {$(
        impl<$($name),+> FromRow for ($($name,)+)
        where
            $($name: for<'a> FromValue<'a>,)+
        {
            fn from_row(row: &Row<'_>) -> Result<Self> {
                if row.len() != $len {
                    return Err(Error::WrongArity {
                        what: format!("row of {} decoded as a tuple", row.table_name()),
                        expected: row.len(),
                        found: $len,
                    });
                }
                Ok(($(row.get::<$name>($index)?,)+))
            }
        }

        impl<$($name: Into<Value>),+> IntoRow for ($($name,)+) {
            fn into_row(self) -> Vec<Value> {
                vec![$(self.$index.into()),+]
            }
        }
    )*};
}

tuple_rows! {
    1: A 0;
    2: A 0, B 1;
    3: A 0, B 1, C 2;
    4: A 0, B 1, C 2, D 3;
    5: A 0, B 1, C 2, D 3, E 4;
    6: A 0, B 1, C 2, D 3, E 4, F 5;
    7: A 0, B 1, C 2, D 3, E 4, F 5, G 6;
    8: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7;
}
