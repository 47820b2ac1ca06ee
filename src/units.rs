//! Exact quantities: byte counts and times as rationals, and the parsing of sizes such as `4MiB`.
//!
//! Piece sizes are exact rationals (docs/design/MODEL.md section 2): `S/(R*P)` need not be a whole number of
//! bytes. Bandwidths and latencies come from JSON as decimals; they are turned into the rational
//! their shortest decimal form denotes, so that `12.5` GB/s is exactly `25/2`, not the nearest
//! binary fraction.

use num_rational::Ratio;
use num_traits::{ToPrimitive, Zero};

/// An exact rational number (bytes, nanoseconds, bytes per nanosecond).
pub type Rational = Ratio<i128>;

/// The rational that the shortest decimal representation of `x` denotes.
///
/// Returns `None` for non-finite values or values whose decimal form does not fit.
pub fn rational_from_decimal(x: f64) -> Option<Rational> {
    if !x.is_finite() {
        return None;
    }
    // `{:e}` gives the shortest round-trip digits with an exponent: "1.25e1".
    let s = format!("{x:e}");
    let (mantissa, exp) = s.split_once('e')?;
    let exp: i32 = exp.parse().ok()?;
    let negative = mantissa.starts_with('-');
    let mantissa = mantissa.trim_start_matches('-');
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: i128 = format!("{int_part}{frac_part}").parse().ok()?;
    let scale = exp - frac_part.len() as i32;
    let pow = |e: u32| 10i128.checked_pow(e);
    let value = if scale >= 0 { Rational::from_integer(digits.checked_mul(pow(scale as u32)?)?) } else { Rational::new(digits, pow((-scale) as u32)?) };
    Some(if negative { -value } else { value })
}

/// The same number as the certificate checker's exact rational: the one conversion between the
/// two number types (exact, whatever the sizes, since the checker's integers are unbounded).
pub fn to_checker(r: &Rational) -> collsched_checker::Q {
    collsched_checker::Q::new((*r.numer()).into(), (*r.denom()).into())
}

/// Converts a rational to the nearest `f64`.
pub fn to_f64(r: &Rational) -> f64 {
    if r.is_zero() {
        return 0.0;
    }
    r.numer().to_f64().unwrap_or(f64::NAN) / r.denom().to_f64().unwrap_or(f64::NAN)
}

/// Parses a byte size: a plain integer or a number with a unit (`B`, `KB`, `KiB`, `MB`, `MiB`,
/// `GB`, `GiB`, `TB`, `TiB`; decimal units are powers of 1000, binary ones of 1024).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" | "kB" => 1_000,
        "KiB" | "K" | "k" => 1 << 10,
        "MB" => 1_000_000,
        "MiB" | "M" => 1 << 20,
        "GB" => 1_000_000_000,
        "GiB" | "G" => 1 << 30,
        "TB" => 1_000_000_000_000,
        "TiB" | "T" => 1 << 40,
        other => return Err(format!("unknown size unit `{other}` in `{text}`")),
    };
    let value: f64 = num.parse().map_err(|_| format!("`{text}` is not a size (examples: 4096, 8KiB, 4MiB, 1GB)"))?;
    let bytes = value * factor as f64;
    if bytes.fract() != 0.0 || !(1.0..=u64::MAX as f64).contains(&bytes) {
        return Err(format!("`{text}` is not a whole positive number of bytes"));
    }
    Ok(bytes as u64)
}

/// Formats a byte count with a binary unit where it divides evenly (`4MiB`, `1536B`).
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (name, size) in UNITS {
        if bytes >= size && bytes % size == 0 {
            return format!("{}{name}", bytes / size);
        }
    }
    format!("{bytes}B")
}

/// Formats nanoseconds with a readable unit.
pub fn format_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.4} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.4} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.4} us", ns / 1e3)
    } else {
        format!("{ns:.2} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_exact() {
        assert_eq!(rational_from_decimal(12.5), Some(Rational::new(25, 2)));
        assert_eq!(rational_from_decimal(0.1), Some(Rational::new(1, 10)));
        assert_eq!(rational_from_decimal(32.0), Some(Rational::from_integer(32)));
        assert_eq!(rational_from_decimal(1e-3), Some(Rational::new(1, 1000)));
        assert_eq!(rational_from_decimal(f64::NAN), None);
    }

    #[test]
    fn conversion_to_the_checker_is_exact() {
        for r in [Rational::new(25, 2), Rational::new(-7, 3), Rational::from_integer(i128::MAX), Rational::new(1, i128::MAX)] {
            assert_eq!(to_checker(&r), collsched_checker::parse_q(&r.to_string()).unwrap());
        }
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_bytes("4MiB"), Ok(4 << 20));
        assert_eq!(parse_bytes("8KiB"), Ok(8192));
        assert_eq!(parse_bytes("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("4 parsecs").is_err());
        assert_eq!(format_bytes(4 << 20), "4MiB");
        assert_eq!(format_bytes(1000), "1000B");
    }
}
