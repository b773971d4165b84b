//! Kubernetes resource quantities (`500m`, `2Gi`, `1.5`, `1e3`), rounded up
//! the way `resource.Quantity` rounds `MilliValue()` and `Value()`.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityError {
    input: String,
    problem: &'static str,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid quantity {:?}: {}", self.input, self.problem)
    }
}

impl std::error::Error for QuantityError {}

/// The quantity in thousandths, rounded up: `"500m"` → 500, `"2"` → 2000.
/// Use for cpu.
pub fn milli_value(input: &str) -> Result<u64, QuantityError> {
    scaled(input, 3)
}

/// The quantity in whole units, rounded up: `"2Gi"` → 2147483648, `"1k"` → 1000.
/// Use for memory, storage, pods and extended resources.
pub fn value(input: &str) -> Result<u64, QuantityError> {
    scaled(input, 0)
}

fn scaled(input: &str, extra_pow10: i32) -> Result<u64, QuantityError> {
    let err = |problem| QuantityError { input: input.to_string(), problem };
    let s = input.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Err(err("negative quantities are not allowed here"));
    }
    let number_end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(err("expected a number"));
    }
    if frac_part.contains('.') {
        return Err(err("more than one decimal point"));
    }
    let mut mantissa: u128 = 0;
    for d in int_part.bytes().chain(frac_part.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(u128::from(d - b'0')))
            .ok_or_else(|| err("too large"))?;
    }
    let mut pow10 = extra_pow10 - frac_part.len() as i32;
    let mut binary: u128 = 1;
    match suffix {
        "" => {}
        "Ki" => binary = 1 << 10,
        "Mi" => binary = 1 << 20,
        "Gi" => binary = 1 << 30,
        "Ti" => binary = 1 << 40,
        "Pi" => binary = 1 << 50,
        "Ei" => binary = 1 << 60,
        "n" => pow10 -= 9,
        "u" => pow10 -= 6,
        "m" => pow10 -= 3,
        "k" => pow10 += 3,
        "M" => pow10 += 6,
        "G" => pow10 += 9,
        "T" => pow10 += 12,
        "P" => pow10 += 15,
        "E" => pow10 += 18,
        other => {
            let exp = other.strip_prefix(['e', 'E']).and_then(|e| e.parse::<i32>().ok()).ok_or_else(|| {
                err("unknown suffix (expected one of m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or eN)")
            })?;
            // `1e2147483647` must not wrap round to a tiny power.
            pow10 = pow10.checked_add(exp).ok_or_else(|| err("exponent out of range"))?;
        }
    }
    let mut value = mantissa.checked_mul(binary).ok_or_else(|| err("too large"))?;
    if pow10 >= 0 {
        let factor = 10u128.checked_pow(pow10 as u32).ok_or_else(|| err("too large"))?;
        value = value.checked_mul(factor).ok_or_else(|| err("too large"))?;
    } else {
        match 10u128.checked_pow((-pow10) as u32) {
            Some(div) => value = value.div_ceil(div),
            // Smaller than any representable unit but not zero: rounds up to 1.
            None => value = u128::from(value > 0),
        }
    }
    u64::try_from(value).map_err(|_| err("too large"))
}

/// How a quantity was written: Kubernetes writes a quantity it derives
/// from another (a default, a step of a range) in the other's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// `m`, `k`, `M`, `G`, … or no suffix.
    #[default]
    DecimalSi,
    /// `Ki`, `Mi`, `Gi`, …
    BinarySi,
    /// `1e3`.
    DecimalExponent,
}

/// The format `input` is written in, as `resource.ParseQuantity` tells it
/// from the suffix.
pub fn format_of(input: &str) -> Format {
    let s = input.trim();
    let suffix = s.trim_start_matches(|c: char| c.is_ascii_digit() || matches!(c, '.' | '+' | '-'));
    if suffix.ends_with('i') {
        Format::BinarySi
    } else if suffix.starts_with(['e', 'E']) && suffix.len() > 1 {
        Format::DecimalExponent
    } else {
        Format::DecimalSi
    }
}

/// `milli` thousandths written as `resource.Quantity` writes its canonical
/// form: binary suffixes for a whole number of at least 1024 in
/// `BinarySi` (`12Gi`, `1536`), else the largest decimal suffix that keeps
/// the number whole (`4G`, `1500m`, `12884901888`).
pub fn canonical(milli: u64, format: Format) -> String {
    if milli == 0 {
        return "0".to_string();
    }
    if format == Format::BinarySi && milli.is_multiple_of(1000) && milli >= 1024 * 1000 {
        let (mut amount, mut power) = (milli / 1000, 0);
        while power < 6 && amount.is_multiple_of(1024) {
            amount /= 1024;
            power += 1;
        }
        return format!("{amount}{}", ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power]);
    }
    // Remove every factor of ten, then step the exponent down to a
    // multiple of three (from -3: thousandths).
    let (mut amount, mut exponent) = (milli, -3i32);
    while amount.is_multiple_of(10) {
        amount /= 10;
        exponent += 1;
    }
    while exponent.rem_euclid(3) != 0 {
        amount *= 10;
        exponent -= 1;
    }
    let suffix = match (format, exponent) {
        (_, 0) => String::new(),
        (Format::DecimalExponent, e) => format!("e{e}"),
        (_, -3) => "m".into(),
        (_, e) => ["", "k", "M", "G", "T", "P", "E"].get((e / 3) as usize).map_or(format!("e{e}"), |s| s.to_string()),
    };
    format!("{amount}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_memory_forms() {
        assert_eq!(milli_value("500m").unwrap(), 500);
        assert_eq!(milli_value("2").unwrap(), 2000);
        assert_eq!(milli_value("0.1").unwrap(), 100);
        assert_eq!(milli_value("1.5").unwrap(), 1500);
        assert_eq!(milli_value("100u").unwrap(), 1, "rounds up like MilliValue");
        assert_eq!(value("2Gi").unwrap(), 2 << 30);
        assert_eq!(value("512Mi").unwrap(), 512 << 20);
        assert_eq!(value("1G").unwrap(), 1_000_000_000);
        assert_eq!(value("200M").unwrap(), 200_000_000);
        assert_eq!(value("1e3").unwrap(), 1000);
        assert_eq!(value("1.5Gi").unwrap(), 3 << 29);
        assert_eq!(value("110").unwrap(), 110);
        assert_eq!(value("1500m").unwrap(), 2, "rounds up like Value");
        assert_eq!(value("+4").unwrap(), 4);
    }

    #[test]
    fn canonical_forms_as_kube_writes_them() {
        let gi = 1000u64 << 30;
        assert_eq!(canonical(12 * gi, Format::BinarySi), "12Gi");
        assert_eq!(canonical(1536 * 1000, Format::BinarySi), "1536");
        assert_eq!(canonical(512 * 1000, Format::BinarySi), "512");
        assert_eq!(canonical(1500, Format::BinarySi), "1500m");
        assert_eq!(canonical(4_000_000_000_000, Format::DecimalSi), "4G");
        assert_eq!(canonical(12 * gi, Format::DecimalSi), "12884901888");
        assert_eq!(canonical(1500, Format::DecimalSi), "1500m");
        assert_eq!(canonical(100, Format::DecimalSi), "100m");
        assert_eq!(canonical(20_000, Format::DecimalSi), "20");
        assert_eq!(canonical(3_000_000, Format::DecimalExponent), "3e3");
        assert_eq!(canonical(0, Format::BinarySi), "0");
        assert_eq!(format_of("10Gi"), Format::BinarySi);
        assert_eq!(format_of("4G"), Format::DecimalSi);
        assert_eq!(format_of("100"), Format::DecimalSi);
        assert_eq!(format_of("1e3"), Format::DecimalExponent);
    }

    #[test]
    fn an_exponent_past_the_range_is_an_error_not_a_wrap() {
        for input in ["1e2147483647", "1E2147483647"] {
            let e = milli_value(input).unwrap_err();
            assert!(e.to_string().contains("exponent out of range"), "{input}: {e}");
        }
        assert!(value("1e30").unwrap_err().to_string().contains("too large"));
        assert_eq!(milli_value("1e-2147483648").unwrap(), 1, "smaller than a unit, not zero: rounds up");
    }

    #[test]
    fn errors_name_the_input() {
        assert_eq!(
            value("2Gb").unwrap_err().to_string(),
            "invalid quantity \"2Gb\": unknown suffix (expected one of m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or eN)"
        );
        assert!(value("-1").unwrap_err().to_string().contains("negative"));
        assert!(value("Gi").unwrap_err().to_string().contains("expected a number"));
        assert!(value("99999999999999999999Ei").unwrap_err().to_string().contains("too large"));
        assert!(value("1.2.3").is_err());
    }
}
