//! DRAConsumableCapacity (beta, on by default in v1.36): a device that
//! allows multiple allocations is shared by claims, each consuming part of
//! its capacities. What a request consumes is what it asks, rounded up to
//! what the capacity's request policy allows (its default when it asks
//! nothing, the whole capacity without a default); the shares of a device
//! never add up to more than its capacity. On a device that is not shared,
//! a capacity request only filters: it must fit the capacity.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1 as api;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use wasmsched_rules::quantity::{Format, canonical, format_of, milli_value};

/// An amount of a capacity, in thousandths, with the format Kubernetes
/// writes it back in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount {
    pub milli: u64,
    pub format: Format,
}

impl Amount {
    /// `None` for a quantity the API server would not have taken.
    pub fn of(q: &Quantity) -> Option<Amount> {
        Some(Amount { milli: milli_value(&q.0).ok()?, format: format_of(&q.0) })
    }

    /// As `resource.Quantity` writes it.
    pub fn quantity(&self) -> String {
        canonical(self.milli, self.format)
    }
}

/// One capacity of a device and its request policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    pub name: String,
    pub value: Amount,
    pub policy: Option<RequestPolicy>,
}

/// How requests may consume a capacity.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RequestPolicy {
    pub default: Option<Amount>,
    pub range: Option<ValidRange>,
    /// Ascending.
    pub values: Vec<Amount>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ValidRange {
    pub min: Amount,
    pub step: Option<Amount>,
    pub max: Option<Amount>,
}

/// What a request asks of each capacity, by name.
pub type Requests = Vec<(String, Amount)>;

impl Capacity {
    /// A device's capacities; an unreadable value offers nothing.
    pub fn all_of(capacity: Option<&BTreeMap<String, api::DeviceCapacity>>) -> Vec<Capacity> {
        let zero = Amount { milli: 0, format: Format::DecimalSi };
        capacity
            .into_iter()
            .flatten()
            .map(|(name, c)| Capacity {
                name: name.clone(),
                value: Amount::of(&c.value).unwrap_or(zero),
                policy: c.request_policy.as_ref().map(policy),
            })
            .collect()
    }

    /// What a request asking `requested` (or nothing) consumes of it:
    /// kube's `calculateConsumedCapacity`.
    pub fn consumed(&self, requested: Option<Amount>) -> Amount {
        let Some(requested) = requested else {
            return self.policy.as_ref().and_then(|p| p.default).unwrap_or(self.value);
        };
        let Some(policy) = &self.policy else { return requested };
        if let Some(range) = &policy.range {
            return round_up_range(requested, range);
        }
        if !policy.values.is_empty() {
            return policy.values.iter().find(|v| requested.milli <= v.milli).copied().unwrap_or(requested);
        }
        requested
    }

    /// Whether `consumed` breaks the request policy (above the range's
    /// maximum, off its steps, not one of the valid values).
    fn violates(&self, consumed: Amount) -> bool {
        let Some(policy) = &self.policy else { return false };
        if policy.default.is_some_and(|d| d.milli == consumed.milli) {
            return false;
        }
        if let Some(range) = &policy.range {
            let above = range.max.is_some_and(|max| consumed.milli > max.milli);
            let off_step = range.step.is_some_and(|step| {
                step.milli > 0 && !consumed.milli.abs_diff(range.min.milli).is_multiple_of(step.milli)
            });
            return above || off_step;
        }
        !policy.values.is_empty() && !policy.values.iter().any(|v| v.milli == consumed.milli)
    }
}

/// Below the minimum: the minimum; else up to the next step above it, in
/// the step's format.
fn round_up_range(requested: Amount, range: &ValidRange) -> Amount {
    if requested.milli < range.min.milli {
        return range.min;
    }
    let Some(step) = range.step.filter(|s| s.milli > 0) else { return requested };
    let steps = (requested.milli - range.min.milli).div_ceil(step.milli);
    Amount { milli: range.min.milli.saturating_add(step.milli.saturating_mul(steps)), format: step.format }
}

fn policy(p: &api::CapacityRequestPolicy) -> RequestPolicy {
    RequestPolicy {
        default: p.default.as_ref().and_then(Amount::of),
        range: p.valid_range.as_ref().and_then(|r| {
            Some(ValidRange {
                min: Amount::of(&r.min)?,
                step: r.step.as_ref().and_then(Amount::of),
                max: r.max.as_ref().and_then(Amount::of),
            })
        }),
        values: p.valid_values.iter().flatten().filter_map(Amount::of).collect(),
    }
}

/// A request's capacity requests; unreadable amounts ask nothing.
pub fn requests(capacity: Option<&api::CapacityRequirements>) -> Requests {
    let requests = capacity.and_then(|c| c.requests.as_ref()).into_iter().flatten();
    requests.filter_map(|(name, q)| Some((name.clone(), Amount::of(q)?))).collect()
}

/// kube's `CmpRequestOverCapacity`: whether a request asking `requests`
/// fits a device with `capacities`, beside `used(name)` consumed already.
/// A request for a capacity the device does not have never fits.
pub fn fits(capacities: &[Capacity], requests: &Requests, used: impl Fn(&str) -> u64) -> bool {
    if requests.iter().any(|(name, _)| !capacities.iter().any(|c| c.name == *name)) {
        return false;
    }
    capacities.iter().all(|c| {
        let consumed = c.consumed(asked(requests, &c.name));
        !c.violates(consumed) && used(&c.name).saturating_add(consumed.milli) <= c.value.milli
    })
}

/// What a share of the device takes of each of its capacities (the
/// allocation's `consumedCapacity`).
pub fn consumption(capacities: &[Capacity], requests: &Requests) -> Vec<(String, Amount)> {
    capacities.iter().map(|c| (c.name.clone(), c.consumed(asked(requests, &c.name)))).collect()
}

fn asked(requests: &Requests, name: &str) -> Option<Amount> {
    requests.iter().find(|(n, _)| n == name).map(|(_, a)| *a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gi(n: u64) -> Amount {
        Amount { milli: (n * 1000) << 30, format: Format::BinarySi }
    }

    fn bandwidth(policy: Option<RequestPolicy>) -> Vec<Capacity> {
        vec![Capacity { name: "bandwidth".into(), value: gi(40), policy }]
    }

    fn stepped() -> Option<RequestPolicy> {
        Some(RequestPolicy {
            default: Some(gi(4)),
            range: Some(ValidRange { min: gi(4), step: Some(gi(4)), max: Some(gi(32)) }),
            values: vec![],
        })
    }

    #[test]
    fn a_request_is_rounded_up_to_the_policy_and_defaults_when_silent() {
        let c = &bandwidth(stepped())[0];
        assert_eq!(c.consumed(Some(gi(10))).quantity(), "12Gi");
        assert_eq!(c.consumed(Some(gi(1))).quantity(), "4Gi");
        assert_eq!(c.consumed(None).quantity(), "4Gi");
        let whole = &bandwidth(None)[0];
        assert_eq!(whole.consumed(None).quantity(), "40Gi", "no default: the whole capacity");
        let values =
            &bandwidth(Some(RequestPolicy { default: Some(gi(8)), range: None, values: vec![gi(8), gi(16)] }))[0];
        assert_eq!(values.consumed(Some(gi(9))).quantity(), "16Gi");
        assert!(values.violates(values.consumed(Some(gi(17)))), "above every valid value");
    }

    #[test]
    fn shares_never_add_up_past_the_capacity() {
        let caps = bandwidth(stepped());
        let ask = |n| vec![("bandwidth".to_string(), gi(n))];
        assert!(fits(&caps, &ask(10), |_| (24 * 1000) << 30), "12Gi beside 24Gi is 36Gi of 40Gi");
        assert!(!fits(&caps, &ask(10), |_| (32 * 1000) << 30));
        assert!(!fits(&caps, &ask(33), |_| 0), "above the range's maximum");
        assert!(!fits(&caps, &vec![("memory".to_string(), gi(1))], |_| 0), "a capacity the device lacks");
        assert!(fits(&caps, &vec![], |_| 0));
    }
}
