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

/// The least bandwidth a link may have, GB/s (1 MB/s).
pub const MIN_BANDWIDTH_GBPS: f64 = 1e-3;
/// The greatest bandwidth a link may have, GB/s (1 PB/s).
pub const MAX_BANDWIDTH_GBPS: f64 = 1e6;
/// The greatest latency a link or switch may have, ns (1000 s).
pub const MAX_LATENCY_NS: f64 = 1e12;
/// The most significant decimal digits a bandwidth or latency may have.
///
/// Values are taken exactly (docs/design/MODEL.md section 2); a value that needs more digits,
/// such as `3.3333333333333335` (10/3 as a binary float), would make exact sums over links of
/// different bandwidths outgrow 128-bit integers, so it is refused rather than rounded.
pub const MAX_SIGNIFICANT_DIGITS: usize = 9;

/// A float as a user would write it: its shortest form, in exponent notation when the plain
/// decimal would be long (`1e-308`, not three hundred digits).
pub fn show_f64(x: f64) -> String {
    let plain = format!("{x}");
    if plain.len() > 20 {
        format!("{x:e}")
    } else {
        plain
    }
}

/// The number of significant digits of the shortest decimal form of `x` (0 for zero).
fn significant_digits(x: f64) -> usize {
    if x == 0.0 {
        return 0;
    }
    let s = format!("{:e}", x.abs());
    let mantissa = s.split_once('e').map_or(s.as_str(), |(m, _)| m);
    mantissa.chars().filter(|c| c.is_ascii_digit()).count()
}

/// A link bandwidth (GB/s) checked into the usable range and made exact; the error says why
/// (the caller names the file and field).
pub fn checked_bandwidth(gbps: f64) -> Result<Rational, String> {
    if !gbps.is_finite() {
        return Err(format!("{}: not a number", show_f64(gbps)));
    }
    if !(MIN_BANDWIDTH_GBPS..=MAX_BANDWIDTH_GBPS).contains(&gbps) {
        return Err(format!("{}: a bandwidth must be between {MIN_BANDWIDTH_GBPS} and {MAX_BANDWIDTH_GBPS:e} GB/s", show_f64(gbps)));
    }
    exact_with_few_digits(gbps)
}

/// A link or switch latency (ns) checked into the usable range and made exact.
pub fn checked_latency(ns: f64) -> Result<Rational, String> {
    if !ns.is_finite() {
        return Err(format!("{}: not a number", show_f64(ns)));
    }
    if !(0.0..=MAX_LATENCY_NS).contains(&ns) {
        return Err(format!("{}: a latency must be between 0 and {MAX_LATENCY_NS:e} ns", show_f64(ns)));
    }
    exact_with_few_digits(ns)
}

fn exact_with_few_digits(x: f64) -> Result<Rational, String> {
    let digits = significant_digits(x);
    if digits > MAX_SIGNIFICANT_DIGITS {
        return Err(format!(
            "{}: has {digits} significant digits; values are taken exactly, write at most {MAX_SIGNIFICANT_DIGITS} (for example {:.*e})",
            show_f64(x),
            MAX_SIGNIFICANT_DIGITS - 1,
            x
        ));
    }
    rational_from_decimal(x).ok_or_else(|| format!("{}: not a usable decimal", show_f64(x)))
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
/// `GB`, `GiB`, `TB`, `TiB`, `PB`, `PiB`, `EB`, `EiB`; decimal units are powers of 1000, binary
/// ones of 1024).
///
/// Exact: integer arithmetic throughout (`1.5KiB` is 1536 bytes); a size that is not a whole
/// number of bytes, or is 0, or exceeds 2^64-1 bytes is refused, never rounded or clamped.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("`{text}` is negative: a size is a whole number of bytes, at least 1"));
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let exponent = unit.strip_prefix(['e', 'E']).is_some_and(|e| e.trim_start_matches(['+', '-']).starts_with(|c: char| c.is_ascii_digit()));
    if exponent && !num.is_empty() {
        return Err(format!("`{text}` has an exponent: write the bytes out or with a unit (1e3 is 1000 or 1KB)"));
    }
    let factor: u128 = match unit.trim() {
        "" | "B" => 1,
        "KB" | "kB" => 1_000,
        "KiB" | "K" | "k" => 1 << 10,
        "MB" => 1_000_000,
        "MiB" | "M" => 1 << 20,
        "GB" => 1_000_000_000,
        "GiB" | "G" => 1 << 30,
        "TB" => 1_000_000_000_000,
        "TiB" | "T" => 1 << 40,
        "PB" => 1_000_000_000_000_000,
        "PiB" | "P" => 1 << 50,
        "EB" => 1_000_000_000_000_000_000,
        "EiB" | "E" => 1 << 60,
        _ if num.is_empty() => return Err(format!("`{text}` is not a size (examples: 4096, 8KiB, 4MiB, 1GB)")),
        other => return Err(format!("unknown size unit `{other}` in `{text}` (B, KB, KiB, MB, MiB, GB, GiB, TB, TiB, PB, PiB, EB, EiB)")),
    };
    let not_a_size = || format!("`{text}` is not a size (examples: 4096, 8KiB, 4MiB, 1GB)");
    let too_big = || format!("`{text}` is more than 2^64-1 = {} bytes", u64::MAX);
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return Err(not_a_size());
    }
    // value = digits / 10^scale * factor, in integers; leading zeros do not count.
    let frac = frac_part.trim_end_matches('0');
    let digits = format!("{int_part}{frac}");
    let digits = digits.trim_start_matches('0');
    let mantissa: u128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| too_big())? };
    let scale = 10u128.checked_pow(frac.len() as u32).ok_or_else(|| format!("`{text}` is not a whole number of bytes"))?;
    let scaled = mantissa.checked_mul(factor).ok_or_else(too_big)?;
    if scaled % scale != 0 {
        return Err(format!("`{text}` is not a whole number of bytes"));
    }
    let bytes = scaled / scale;
    if bytes == 0 {
        return Err(format!("`{text}` is 0 bytes: a size must be at least 1 byte"));
    }
    u64::try_from(bytes).map_err(|_| too_big())
}

/// The plural ending of a noun counted `n` times: `""` for one, `"s"` otherwise.
pub fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `n` pieces per block, in words ("1 piece per block", "6 pieces per block").
pub fn per_block(n: u32) -> String {
    format!("{n} piece{} per block", plural(u64::from(n)))
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
    fn counts_in_words() {
        assert_eq!((plural(0), plural(1), plural(2)), ("s", "", "s"));
        assert_eq!((per_block(1).as_str(), per_block(6).as_str()), ("1 piece per block", "6 pieces per block"));
    }

    #[test]
    fn conversion_to_the_checker_is_exact() {
        for r in [Rational::new(25, 2), Rational::new(-7, 3), Rational::from_integer(i128::MAX), Rational::new(1, i128::MAX)] {
            assert_eq!(to_checker(&r), collsched_checker::parse_q(&r.to_string()).unwrap());
        }
    }

    #[test]
    fn bandwidths_and_latencies_are_checked() {
        assert_eq!(checked_bandwidth(12.5), Ok(Rational::new(25, 2)));
        assert_eq!(checked_latency(0.0), Ok(Rational::zero()));
        assert_eq!(checked_latency(1e12), Ok(Rational::from_integer(1_000_000_000_000)));
        for bad in [f64::NAN, f64::INFINITY, 0.0, 1e-4, 1e-40, 1e-308, 1e38, 1e39, 3.3333333333333335, std::f64::consts::SQRT_2] {
            let e = checked_bandwidth(bad).unwrap_err();
            assert!(e.len() < 200, "{e}");
        }
        assert!(checked_bandwidth(1e-308).unwrap_err().starts_with("1e-308"));
        for bad in [-1.0, 1e13, 1e38, 0.123456789012345] {
            assert!(checked_latency(bad).is_err(), "{bad}");
        }
        assert!(checked_bandwidth(3.33333333).is_ok());
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_bytes("4MiB"), Ok(4 << 20));
        assert_eq!(parse_bytes("8KiB"), Ok(8192));
        assert_eq!(parse_bytes("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("4 parsecs").is_err());
        // Exact, in integers: no rounding through f64, no clamping.
        assert_eq!(parse_bytes("9007199254740993"), Ok(9_007_199_254_740_993));
        assert_eq!(parse_bytes("18446744073709551615"), Ok(u64::MAX));
        assert!(parse_bytes("18446744073709551616").unwrap_err().contains("2^64-1"));
        assert!(parse_bytes("17179869184GiB").unwrap_err().contains("2^64-1"));
        assert_eq!(parse_bytes("1.5KiB"), Ok(1536));
        assert_eq!(parse_bytes("0.50KB"), Ok(500));
        assert!(parse_bytes("1.5B").is_err());
        assert!(parse_bytes("0.0").is_err());
        assert!(parse_bytes(".").is_err());
        assert!(parse_bytes("1.2.3").is_err());
        // Each refusal says what is wrong with the text, not that its tail is an unknown unit.
        assert!(parse_bytes("-4KiB").unwrap_err().contains("negative"));
        assert!(parse_bytes("1e3").unwrap_err().contains("exponent"));
        assert!(parse_bytes("99999999999EiB").unwrap_err().contains("2^64-1"));
        assert!(parse_bytes("KiB").unwrap_err().contains("is not a size"));
        assert!(parse_bytes("4 parsecs").unwrap_err().contains("unknown size unit `parsecs`"));
        assert_eq!(parse_bytes("1EiB"), Ok(1 << 60));
        assert_eq!(parse_bytes("2PB"), Ok(2_000_000_000_000_000));
        assert_eq!(format_bytes(4 << 20), "4MiB");
        assert_eq!(format_bytes(1000), "1000B");
    }
}
