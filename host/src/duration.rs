//! Durations as operators write them in flags and configuration files.

use std::time::Duration;

/// The longest duration taken: past it a deadline, lease or refresh
/// interval is a mistake, and `Instant + d` would overflow far beyond it.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// `250ms`, `2s`, `1.5s`, `1m`, `1h` (and `500ns`, `2us` or `2µs` for the
/// costs of a call): a positive number and a unit, at most a year.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| c.is_alphabetic()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.trim().parse().map_err(|_| format!("{text:?} is not a duration like 100ms or 2s"))?;
    let seconds = match unit {
        "ns" => value / 1e9,
        "us" | "µs" => value / 1e6,
        "ms" => value / 1e3,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        "" => return Err(format!("{text:?} has no unit; write e.g. 100ms, 2s or 1m")),
        other => return Err(format!("{text:?}: unknown unit {other:?} (use ns, us, ms, s, m or h)")),
    };
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("{text:?} must be a positive duration"));
    }
    match Duration::try_from_secs_f64(seconds) {
        Ok(d) if d <= MAX_DURATION => Ok(d),
        _ => Err(format!("{text:?} is longer than a year (8760h), the longest duration taken")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_errors() {
        assert_eq!(parse_duration("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration(" 2m ").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("100").unwrap_err().contains("no unit"));
        assert!(parse_duration("3d").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("8760h").is_ok());
        assert_eq!(parse_duration("500ns").unwrap(), Duration::from_nanos(500));
        assert_eq!(parse_duration("2us").unwrap(), Duration::from_micros(2));
        assert_eq!(parse_duration("1.5µs").unwrap(), Duration::from_nanos(1500));
        for huge in ["99999999999999999999999h", "8761h", "100000000000000000000000000000s"] {
            assert!(parse_duration(huge).unwrap_err().contains("longer than a year"), "{huge}");
        }
    }
}
