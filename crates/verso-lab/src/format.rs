//! Numbers for people: thousands separators, short forms (`1.2M`), byte sizes.

/// `1234567.8` as `1,234,568` (negative numbers and non-finite values print as 0).
pub fn thousands(x: f64) -> String {
    let digits = if x.is_finite() {
        format!("{:.0}", x.max(0.0))
    } else {
        "0".to_owned()
    };
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count in at most four significant characters and a suffix: `210`, `41,213` below a
/// hundred thousand, then `120k`, `1.2M`, `3.4G`.
pub fn compact(x: f64) -> String {
    if !x.is_finite() {
        return "-".to_owned();
    }
    let magnitude = x.abs();
    if magnitude < 100_000.0 {
        if magnitude >= 100.0 || x.fract() == 0.0 {
            return signed(x, thousands(magnitude));
        }
        return format!("{x:.1}");
    }
    let (scaled, suffix) = if magnitude < 1e6 {
        (magnitude / 1e3, "k")
    } else if magnitude < 1e9 {
        (magnitude / 1e6, "M")
    } else {
        (magnitude / 1e9, "G")
    };
    let digits = if scaled < 10.0 {
        format!("{scaled:.1}")
    } else {
        format!("{scaled:.0}")
    };
    signed(x, format!("{digits}{suffix}"))
}

/// An axis label: like [`compact`], but with a suffix from a thousand up (`1.5k`, `80k`),
/// and at most two decimals below it, so tick labels stay short and alike.
pub fn axis(x: f64) -> String {
    let magnitude = x.abs();
    if !x.is_finite() {
        "-".to_owned()
    } else if magnitude >= 100_000.0 {
        compact(x)
    } else if magnitude >= 1_000.0 {
        let scaled = magnitude / 1e3;
        let digits = if scaled < 10.0 && (scaled * 10.0).fract() != 0.0 {
            format!("{scaled:.1}")
        } else if scaled < 10.0 {
            format!("{scaled}")
        } else {
            format!("{scaled:.0}")
        };
        signed(x, format!("{digits}k"))
    } else if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        let text = format!("{x:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

fn signed(x: f64, text: String) -> String {
    if x < 0.0 {
        format!("-{text}")
    } else {
        text
    }
}

/// Bytes as `512 B`, `3.4 KiB`, `120 MiB`, `1.5 GiB`.
pub fn bytes(x: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    if !x.is_finite() || x < 0.0 {
        return "-".to_owned();
    }
    let mut value = x;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} B")
    } else if value < 10.0 {
        format!("{value:.1} {}", UNITS[unit])
    } else {
        format!("{value:.0} {}", UNITS[unit])
    }
}

/// A ratio `a / b` as `3.1x` (or `-` when `b` is 0).
pub fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() {
        let r = a / b;
        if r >= 10.0 {
            format!("{r:.0}x")
        } else {
            format!("{r:.2}x")
        }
    } else {
        "-".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1_234_567.8), "1,234,568");
        assert_eq!(thousands(f64::NAN), "0");
    }

    #[test]
    fn compact_uses_suffixes_for_large_numbers() {
        assert_eq!(compact(3.0), "3");
        assert_eq!(compact(2.5), "2.5");
        assert_eq!(compact(41_213.0), "41,213");
        assert_eq!(compact(120_000.0), "120k");
        assert_eq!(compact(1_200_000.0), "1.2M");
        assert_eq!(compact(-1_200_000.0), "-1.2M");
        assert_eq!(compact(3.4e9), "3.4G");
    }

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(axis(0.0), "0");
        assert_eq!(axis(0.25), "0.25");
        assert_eq!(axis(2.5), "2.5");
        assert_eq!(axis(1_500.0), "1.5k");
        assert_eq!(axis(2_000.0), "2k");
        assert_eq!(axis(80_000.0), "80k");
        assert_eq!(axis(1_200_000.0), "1.2M");
    }

    #[test]
    fn bytes_and_ratios() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(3.5 * 1024.0), "3.5 KiB");
        assert_eq!(bytes(120.0 * 1024.0 * 1024.0), "120 MiB");
        assert_eq!(ratio(3.1, 1.0), "3.10x");
        assert_eq!(ratio(31.0, 1.0), "31x");
        assert_eq!(ratio(1.0, 0.0), "-");
    }
}
