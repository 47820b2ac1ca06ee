//! The step-synchronous cost: a step lasts as long as its busiest link takes to move its bytes,
//! plus the largest path latency in the step; the schedule's time is the sum over steps.
//!
//! Everything is exact: bytes per link are integer weights times one rational unit, bandwidths
//! and latencies are the rationals their decimal forms denote.

use crate::error::{Error, Result};
use crate::schedule::{ScheduleHeader, Step};
use crate::units::{rational_from_decimal, to_f64, Rational};
use num_traits::{CheckedAdd, CheckedDiv, CheckedMul, Zero};

/// The step-synchronous cost of a schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncCost {
    /// Per step: the bandwidth term (busiest link's bytes over its bandwidth), ns.
    pub step_bandwidth_ns: Vec<Rational>,
    /// Per step: the largest path latency, ns.
    pub step_latency_ns: Vec<Rational>,
    /// Per link: bytes carried over the whole schedule.
    pub link_bytes: Vec<Rational>,
    /// Bytes per rank (S) for the bandwidth figure.
    pub bytes_per_rank: u64,
    /// The sums of the terms, computed once (checked) when the meter finishes.
    totals: Totals,
}

/// The sums of a cost's terms, ns.
#[derive(Clone, Debug, Default, PartialEq)]
struct Totals {
    bandwidth: Rational,
    latency: Rational,
    time: Rational,
}

impl SyncCost {
    /// Sum of the bandwidth terms (the time with every latency set to 0), ns.
    pub fn bandwidth_ns(&self) -> Rational {
        self.totals.bandwidth
    }

    /// Sum of the latency terms, ns.
    pub fn latency_ns(&self) -> Rational {
        self.totals.latency
    }

    /// The schedule's time, ns.
    pub fn time_ns(&self) -> Rational {
        self.totals.time
    }

    /// All-to-all bandwidth as the field reports it: bytes per rank over time, GB/s.
    pub fn algo_bandwidth_gbps(&self) -> f64 {
        let t = to_f64(&self.time_ns());
        if t > 0.0 {
            self.bytes_per_rank as f64 / t
        } else {
            f64::INFINITY
        }
    }
}

/// Accumulates the step-synchronous cost step by step.
#[derive(Clone, Debug)]
pub struct SyncMeter {
    bandwidth: Vec<Rational>,
    latency: Vec<Rational>,
    switch_latency: Rational,
    is_switch_src: Vec<bool>,
    stamp: Vec<u32>,
    steps_seen: u32,
    weight_sum: Vec<u128>,
    touched: Vec<u32>,
    link_weight_total: Vec<u128>,
    unit: Rational,
    weights_uniform: bool,
    piece_weights: Vec<u64>,
    cost: SyncCost,
    collective: crate::collective::Collective,
    /// The first step whose exact arithmetic outgrew 128-bit integers, if any.
    overflow: Option<usize>,
}

impl SyncMeter {
    /// Prepares the meter for a schedule's header.
    pub fn new(header: &ScheduleHeader) -> Result<Self> {
        let t = &header.topology;
        let c = &header.collective;
        let mut bandwidth = Vec::with_capacity(t.num_links());
        let mut latency = Vec::with_capacity(t.num_links());
        let mut is_switch_src = Vec::with_capacity(t.num_links());
        for (id, l) in t.links() {
            let bw = rational_from_decimal(l.bandwidth_gbps)
                .ok_or_else(|| Error::bad(format!("link {id}: bandwidth_gbps = {} is not a usable decimal", l.bandwidth_gbps)))?;
            let lat =
                rational_from_decimal(l.latency_ns).ok_or_else(|| Error::bad(format!("link {id}: latency_ns = {} is not a usable decimal", l.latency_ns)))?;
            bandwidth.push(bw);
            latency.push(lat);
            is_switch_src.push(!t.is_npu(l.src));
        }
        let switch_latency = rational_from_decimal(t.switch_latency_ns()).ok_or_else(|| Error::bad("switch_latency_ns is not a usable decimal"))?;
        let piece_weights = if c.is_uniform() { Vec::new() } else { (0..c.piece_space()).map(|i| c.piece_weight_at(i)).collect() };
        Ok(SyncMeter {
            bandwidth,
            latency,
            switch_latency,
            is_switch_src,
            stamp: vec![0; t.num_links()],
            steps_seen: 0,
            weight_sum: vec![0; t.num_links()],
            touched: Vec::new(),
            link_weight_total: vec![0; t.num_links()],
            unit: c.weight_unit(),
            weights_uniform: c.is_uniform(),
            piece_weights,
            cost: SyncCost {
                step_bandwidth_ns: Vec::new(),
                step_latency_ns: Vec::new(),
                link_bytes: Vec::new(),
                bytes_per_rank: c.bytes_per_rank,
                totals: Totals::default(),
            },
            collective: c.clone(),
            overflow: None,
        })
    }

    /// Adds one step. Links and pieces out of range are skipped (the verifier reports them).
    pub fn step(&mut self, step: &Step) {
        let n_links = self.bandwidth.len();
        let mut max_latency = Rational::zero();
        let mut overflow = false;
        for tr in &step.transfers {
            let mut w: u128 = 0;
            if self.weights_uniform {
                w = tr.pieces.len() as u128;
            } else {
                for p in &tr.pieces {
                    if let Some(i) = self.collective.piece_index(p) {
                        w += self.piece_weights[i] as u128;
                    }
                }
            }
            let mut lat = Rational::zero();
            for (i, l) in tr.path.iter().enumerate() {
                let l = l.index();
                if l >= n_links {
                    continue;
                }
                if self.stamp[l] != self.steps_seen + 1 {
                    self.stamp[l] = self.steps_seen + 1;
                    self.touched.push(l as u32);
                }
                self.weight_sum[l] += w;
                let hop = if i > 0 && self.is_switch_src[l] { self.latency[l].checked_add(&self.switch_latency) } else { Some(self.latency[l]) };
                match hop.and_then(|h| lat.checked_add(&h)) {
                    Some(sum) => lat = sum,
                    None => overflow = true,
                }
            }
            if lat > max_latency {
                max_latency = lat;
            }
        }
        let mut max_bw = Rational::zero();
        for &l in &self.touched {
            let l = l as usize;
            let w = std::mem::take(&mut self.weight_sum[l]);
            self.link_weight_total[l] += w;
            let t =
                i128::try_from(w).ok().and_then(|w| self.unit.checked_mul(&Rational::from_integer(w))).and_then(|bytes| bytes.checked_div(&self.bandwidth[l]));
            match t {
                Some(t) if t > max_bw => max_bw = t,
                Some(_) => {}
                None => overflow = true,
            }
        }
        self.touched.clear();
        if overflow && self.overflow.is_none() {
            self.overflow = Some(self.steps_seen as usize);
        }
        self.cost.step_bandwidth_ns.push(max_bw);
        self.cost.step_latency_ns.push(max_latency);
        self.steps_seen += 1;
    }

    /// The cost so far.
    ///
    /// Fails (bad input, not a panic) when the exact sums outgrow 128-bit integers: bandwidths
    /// and latencies whose decimals share no denominator, summed over many steps.
    pub fn finish(mut self) -> Result<SyncCost> {
        let too_big = |what: &str| {
            Error::bad(format!(
                "the exact cost does not fit in 128-bit integers ({what}): the bandwidths and latencies have too many different \
                 denominators; write them with fewer significant digits"
            ))
        };
        if let Some(step) = self.overflow {
            return Err(too_big(&format!("step {step}")));
        }
        let sum = |terms: &[Rational]| terms.iter().try_fold(Rational::zero(), |acc, t| acc.checked_add(t));
        let bandwidth = sum(&self.cost.step_bandwidth_ns).ok_or_else(|| too_big("the sum of the bandwidth terms"))?;
        let latency = sum(&self.cost.step_latency_ns).ok_or_else(|| too_big("the sum of the latency terms"))?;
        let time = bandwidth.checked_add(&latency).ok_or_else(|| too_big("the time"))?;
        self.cost.totals = Totals { bandwidth, latency, time };
        self.cost.link_bytes = self
            .link_weight_total
            .iter()
            .map(|&w| i128::try_from(w).ok().and_then(|w| self.unit.checked_mul(&Rational::from_integer(w))))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| too_big("the bytes a link carries"))?;
        Ok(self.cost)
    }
}
