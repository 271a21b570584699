//! A TPC-C terminal's inputs: which transaction comes next and what it is asked to do
//! (clauses 2.4.1-2.8.1 and 5.2.3), drawn from one seeded stream.
//!
//! Verso's worker ([`super::TpccWorker`]) and the peers' (`crate::peers::workloads::tpcc`)
//! both draw through a [`Terminal`], so with the same seed they run the same mix with the
//! same keys; only how each reaches its data differs.

use super::random::{last_name_into, NurandConstants, TpccRandom};
use super::transactions::{DELIVERY, NEW_ORDER, ORDER_STATUS, PAYMENT, STOCK_LEVEL};
use super::TpccConfig;
use crate::workload::LabError;

/// One order line's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderItem {
    /// The item (one past the catalogue for the deliberate rollback).
    pub item_id: i64,
    /// The supplying warehouse.
    pub supply_warehouse: i64,
    /// Quantity ordered, 1..=10.
    pub quantity: i64,
}

/// New-Order's input (its lines go to a buffer the caller keeps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOrderInput {
    /// Home warehouse.
    pub w_id: i64,
    /// District.
    pub d_id: i64,
    /// Customer.
    pub c_id: i64,
}

/// Who a Payment or Order-Status is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CustomerChoice {
    /// By id (40%).
    Id(i64),
    /// By last name (60%): the name is in [`Terminal::last_name`].
    LastName,
}

/// Payment's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaymentInput {
    /// The warehouse paid at.
    pub w_id: i64,
    /// The district paid at.
    pub d_id: i64,
    /// The customer's warehouse (another one 15% of the time).
    pub c_w_id: i64,
    /// The customer's district.
    pub c_d_id: i64,
    /// The customer.
    pub customer: CustomerChoice,
    /// The amount, in cents.
    pub amount_cents: i64,
}

/// Draws a terminal's transactions.
#[derive(Clone, Debug)]
pub struct Terminal {
    config: TpccConfig,
    constants: NurandConstants,
    random: TpccRandom,
    home_warehouses: Vec<i64>,
    last_name: String,
    /// Stock-Level's district when the terminal has one of its own (paced terminals,
    /// clause 2.8.1.1); else drawn per transaction.
    stock_level_district: Option<i64>,
}

impl Terminal {
    /// Terminal `worker` of `workers`: it owns the warehouses `w` with `(w - 1) % workers ==
    /// worker` and picks one of them per transaction; with more workers than warehouses,
    /// worker `i` uses warehouse `i % W + 1`, several sharing one (clause 2.1.1 binds each
    /// terminal to one warehouse).
    pub fn new(
        config: &TpccConfig,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Terminal, LabError> {
        config.validate()?;
        if workers == 0 || worker >= workers {
            return Err(LabError::BadOption(format!(
                "tpcc: worker {worker} of {workers}"
            )));
        }
        let warehouses = config.warehouses as usize;
        let home_warehouses: Vec<i64> = if workers >= warehouses {
            vec![(worker % warehouses) as i64 + 1]
        } else {
            (worker..warehouses)
                .step_by(workers)
                .map(|w| w as i64 + 1)
                .collect()
        };
        debug_assert!(!home_warehouses.is_empty());
        Ok(Terminal {
            config: config.clone(),
            constants: config.nurand_constants(),
            random: TpccRandom::new(seed ^ (worker as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)),
            home_warehouses,
            last_name: String::with_capacity(16),
            stock_level_district: None,
        })
    }

    /// Gives the terminal district `d_id` of its warehouse for every Stock-Level, as
    /// clause 2.8.1.1 asks of a terminal (a constant, unique `(W_ID, D_ID)` per terminal
    /// of a warehouse) and DBT2's terminals do. Paced terminals have one; the closed
    /// loop's workers, which are no terminals, draw it per transaction.
    pub fn fix_stock_level_district(&mut self, d_id: i64) {
        debug_assert!((1..=i64::from(self.config.districts_per_warehouse)).contains(&d_id));
        self.stock_level_district = Some(d_id);
    }

    /// The last name the latest [`CustomerChoice::LastName`] asked for.
    pub fn last_name(&self) -> &str {
        &self.last_name
    }

    /// The next transaction type of the standard mix (clause 5.2.3: 45% New-Order, 43%
    /// Payment, 4% each of Order-Status, Delivery and Stock-Level).
    pub fn next_kind(&mut self) -> usize {
        match self.random.uniform(1, 100) {
            1..=45 => NEW_ORDER,
            46..=88 => PAYMENT,
            89..=92 => ORDER_STATUS,
            93..=96 => DELIVERY,
            _ => STOCK_LEVEL,
        }
    }

    fn home_warehouse(&mut self) -> i64 {
        match self.home_warehouses.as_slice() {
            [only] => *only,
            many => many[self.random.uniform(0, many.len() as i64 - 1) as usize],
        }
    }

    /// A warehouse other than `home` (only called with two or more warehouses).
    fn remote_warehouse(&mut self, home: i64) -> i64 {
        let warehouses = i64::from(self.config.warehouses);
        debug_assert!(warehouses > 1);
        let other = self.random.uniform(1, warehouses - 1);
        if other >= home {
            other + 1
        } else {
            other
        }
    }

    fn district_id(&mut self) -> i64 {
        self.random
            .uniform(1, i64::from(self.config.districts_per_warehouse))
    }

    /// NURand(1023, 1, 3000) (clause 2.1.6), over the configured customers.
    fn customer_id(&mut self) -> i64 {
        let customers = i64::from(self.config.customers_per_district);
        self.random
            .nurand(1023, 1, customers, self.constants.customer_id)
    }

    /// NURand(8191, 1, 100000), over the configured items.
    fn item_id(&mut self) -> i64 {
        let items = i64::from(self.config.items);
        self.random.nurand(8191, 1, items, self.constants.item_id)
    }

    /// The customer of a Payment or Order-Status: 60% by last name, drawn with
    /// NURand(255, 0, 999) into [`Terminal::last_name`], otherwise by id (clauses 2.5.1.2
    /// and 2.6.1.2).
    fn draw_customer(&mut self) -> CustomerChoice {
        if self.random.percent(60) {
            let number = self.random.nurand(
                255,
                0,
                self.config.last_name_max(),
                self.constants.last_name_run,
            );
            last_name_into(number, &mut self.last_name);
            CustomerChoice::LastName
        } else {
            CustomerChoice::Id(self.customer_id())
        }
    }

    /// New-Order's input (clause 2.4.1), its lines into `lines`: 5..=15 lines, 1% of orders
    /// with an unused item as the last line (it must roll back), 1% of lines from another
    /// warehouse when there is one.
    pub fn new_order(&mut self, lines: &mut Vec<OrderItem>) -> NewOrderInput {
        let w_id = self.home_warehouse();
        let d_id = self.district_id();
        let c_id = self.customer_id();
        let line_count = self.random.uniform(5, 15);
        let roll_back = self.random.percent(1);
        let items = i64::from(self.config.items);
        let remote_possible = self.config.warehouses > 1;
        lines.clear();
        for number in 1..=line_count {
            let item_id = if roll_back && number == line_count {
                items + 1 // an unused item id: the order must roll back (clause 2.4.1.4)
            } else {
                self.item_id()
            };
            let supply_warehouse = if remote_possible && self.random.percent(1) {
                self.remote_warehouse(w_id)
            } else {
                w_id
            };
            let quantity = self.random.uniform(1, 10);
            lines.push(OrderItem {
                item_id,
                supply_warehouse,
                quantity,
            });
        }
        NewOrderInput { w_id, d_id, c_id }
    }

    /// Payment's input (clause 2.5.1): 85% pay at their home warehouse, 15% at another one.
    pub fn payment(&mut self) -> PaymentInput {
        let w_id = self.home_warehouse();
        let d_id = self.district_id();
        let (c_w_id, c_d_id) = if self.config.warehouses == 1 || self.random.percent(85) {
            (w_id, d_id)
        } else {
            let remote = self.remote_warehouse(w_id);
            (remote, self.district_id())
        };
        let customer = self.draw_customer();
        let amount_cents = self.random.cents(100, 500_000);
        PaymentInput {
            w_id,
            d_id,
            c_w_id,
            c_d_id,
            customer,
            amount_cents,
        }
    }

    /// Order-Status's input (clause 2.6.1): warehouse, district, customer.
    pub fn order_status(&mut self) -> (i64, i64, CustomerChoice) {
        let w_id = self.home_warehouse();
        let d_id = self.district_id();
        (w_id, d_id, self.draw_customer())
    }

    /// Delivery's input (clause 2.7.1): warehouse and carrier.
    pub fn delivery(&mut self) -> (i64, i64) {
        let w_id = self.home_warehouse();
        (w_id, self.random.uniform(1, 10))
    }

    /// Stock-Level's input (clause 2.8.1): warehouse, district and threshold.
    pub fn stock_level(&mut self) -> (i64, i64, i64) {
        let w_id = self.home_warehouse();
        let d_id = match self.stock_level_district {
            Some(d_id) => d_id,
            None => self.district_id(),
        };
        (w_id, d_id, self.random.uniform(10, 20))
    }
}
