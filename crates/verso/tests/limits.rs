//! Size limits give typed errors, never a panic, and leave the transaction usable.

mod common;

use verso::{ColumnType, Error, Isolation, Schema, Value, MAX_VALUE_BYTES};

#[test]
fn values_up_to_the_limit_round_trip_and_longer_ones_are_refused() {
    for options in common::all_configurations() {
        if common::is_disk(&options) {
            continue; // its rows must fit a page: `disk_rows_up_to_a_page_round_trip...`
        }
        let db = verso::Database::open(options).expect("open");
        let table = db
            .create_table(
                "blobs",
                Schema::new()
                    .column("id", ColumnType::U64)
                    .column("data", ColumnType::Bytes)
                    .column("note", ColumnType::Text)
                    .primary_key(&["id"]),
            )
            .expect("create");
        let mut txn = db.begin(Isolation::Snapshot);
        let largest = vec![7u8; MAX_VALUE_BYTES];
        txn.insert(
            table,
            &[Value::U64(1), Value::Bytes(largest.clone()), Value::Null],
        )
        .expect("a value of exactly the limit fits");

        let too_long = Value::Bytes(vec![0; MAX_VALUE_BYTES + 1]);
        let error = txn
            .insert(table, &[Value::U64(2), too_long.clone(), Value::Null])
            .expect_err("one byte over the limit");
        assert!(
            matches!(error, Error::ValueTooLarge { bytes, limit, .. }
                if bytes == MAX_VALUE_BYTES + 1 && limit == MAX_VALUE_BYTES),
            "{}: {error:?}",
            db.design()
        );
        let text = Value::Text("x".repeat(MAX_VALUE_BYTES + 1));
        assert!(matches!(
            txn.update(table, &[Value::U64(1)], &[(2, text)]),
            Err(Error::ValueTooLarge { .. })
        ));
        // The transaction is still usable and nothing of the failed calls stuck.
        assert_eq!(txn.get(table, &[Value::U64(2)]).expect("get"), None);
        txn.commit().expect("commit");
        let check = db.begin(Isolation::Snapshot);
        let row = check
            .get(table, &[Value::U64(1)])
            .expect("get")
            .expect("row");
        assert_eq!(row[1], Value::Bytes(largest));
        assert_eq!(row[2], Value::Null);
    }
}

/// The disk engine keeps each row version in one heap page (PostgreSQL's TOAST, which
/// moves long values out of line, is not built), or in InnoDB's design in one entry of its
/// clustered B+-tree's leaf (a quarter of a page; InnoDB's off-page columns are not built):
/// a row up to that room round-trips, a longer one is refused with a typed error before
/// anything is written, and the transaction stays usable.
#[test]
fn disk_rows_up_to_a_page_round_trip_and_longer_ones_are_refused() {
    for options in common::disk_configurations() {
        let db = common::open(&options);
        let table = db
            .create_table(
                "blobs",
                Schema::new()
                    .column("id", ColumnType::U64)
                    .column("data", ColumnType::Bytes)
                    .primary_key(&["id"]),
            )
            .expect("create");
        let mut txn = db.begin(Isolation::Snapshot);
        let room = match options.disk_storage {
            verso::disk::DiskStorage::Undo => {
                verso::disk::MAX_BTREE_ENTRY_BYTES - verso::disk::clustered::RECORD_HEADER_BYTES
            }
            _ => verso::disk::heap_page::MAX_TUPLE_DATA_BYTES,
        };
        let fits = vec![7u8; room - 64];
        txn.insert(table, &[Value::U64(1), Value::Bytes(fits.clone())])
            .expect("a row that fits a page");
        let error = txn
            .insert(table, &[Value::U64(2), Value::Bytes(vec![0; 9000])])
            .expect_err("a row larger than a page");
        assert!(matches!(error, Error::EntryTooLarge { .. }), "{error:?}");
        assert!(matches!(
            txn.update(table, &[Value::U64(1)], &[(1, Value::Bytes(vec![1; 9000]))]),
            Err(Error::EntryTooLarge { .. })
        ));
        assert_eq!(txn.get(table, &[Value::U64(2)]).expect("get"), None);
        txn.commit().expect("commit");
        let check = db.begin(Isolation::Snapshot);
        let row = check
            .get(table, &[Value::U64(1)])
            .expect("get")
            .expect("row");
        assert_eq!(row[1], Value::Bytes(fits));
    }
}

/// Memory spaces (Wu et al. §4.4) need `verso::research::MemorySpaces` as the global allocator, which
/// this test binary does not install: `open` says so (`tests/memory_spaces.rs` installs it).
#[test]
fn memory_spaces_are_refused_without_their_global_allocator() {
    assert!(!verso::research::memory_spaces_installed());
    match verso::Database::open(verso::Options::default().memory_spaces(2)) {
        Err(verso::Error::UnsupportedConfiguration { reason }) => {
            assert!(reason.contains("global allocator"), "{reason}")
        }
        other => panic!("{:?}", other.map(|db| db.design())),
    }
}
