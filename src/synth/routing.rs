//! Synthesis for the time objective (docs/design/MODEL.md section 5): store-and-forward schedules whose
//! step-synchronous time at the collective's size is small, for any topology and fault pattern.
//!
//! The fewest-steps program moves one piece per link per step; the time objective instead lets a
//! link carry several pieces in one step, and a step lasts as long as its busiest link. So the
//! problem is a routing in the **time-expanded graph**: nodes (npu, step), a hop edge
//! `(u, t) -> (v, t + 1)` per single hop and step, a waiting edge `(u, t) -> (u, t + 1)`; every
//! piece takes one path from `(source, 0)` to `(destination, T)`, and the time is
//! `sum over steps of (max over links of the bytes crossing it / its bandwidth + the step's path
//! latency)`.
//!
//! We route pieces one at a time on shortest paths of that graph under an exponential congestion
//! price (the multiplicative-weights idea of the flow bound, made integral): crossing link `l` in
//! step `t` costs `exp(beta * load(l, t) / L) * (exp(beta * tau / L) - 1)`, the increase of the
//! potential `sum exp(beta * load / L)`, where `tau` is the piece's time on the link and `L` the
//! mean load a link would carry per step if the volume were spread evenly. A potential that
//! punishes every step's busiest links drives every step's maximum down together, which is what
//! the sum of per-step maxima needs. Then rounds of rip-up and re-route: each piece in turn is
//! taken out and routed again against everyone else's loads.
//!
//! A piece's search is confined to its **zone**, the npus on walks from its source to its
//! destination at most [`DETOUR`] hops longer than the shortest (waiting is never limited): on an
//! 8x8x8 torus 40 npus on average instead of 512, so a routing run takes 10 s instead of 70 s,
//! and no instance measured routed better with a larger zone.
//!
//! On a switched topology a hop holds several links; two different hops may not share a link in
//! one step (rule 2), so a hop is offered in a step only if its links are free there or held by
//! that same hop (whose transfer then carries one more piece).
//!
//! The caller chooses the horizon `T` and the number of pieces per block (latency against
//! granularity) and keeps the best verified schedule: [`candidates`] sweeps them.

use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::schedule::{Op, Step, Transfer};
use crate::topology::hops::HopGraph;
use crate::topology::{NodeId, Topology};
use crate::units::to_f64;
use rayon::prelude::*;
use std::time::Instant;

/// Rounds of rip-up and re-route after the first routing (more rounds changed nothing on the
/// faulty 5x5 and 4x4x4 tori: the routing has settled by then).
const REROUTE_ROUNDS: u32 = 3;

/// Price steepness tried for every horizon, relative to the mean per-step load; the runs of one
/// horizon go in parallel. Measured on faulty 4x4, 5x5 and 4x4x4 tori with 2-8 pieces per block:
/// 8 and 16 were best everywhere (5x5, 4 pieces: 183.9 us at 8, 178.7 us at 16, 181.3 us at 32;
/// 3 and 6 never better).
const BETAS: [f64; 2] = [8.0, 16.0];

/// Extra hops beyond its shortest path a piece's walk may take ([`TimedParams::detour`]). One
/// lets a piece round an odd ring the other way where that is one hop longer (5x5 with a failed
/// cable: 178.7 us, against 194.4 us with no detour; any detour: 178.7 us); on a bipartite
/// network (even radixes) every walk's excess is even, so one is none, which is what the pod
/// sizes need: the zone of an 8x8x8 piece holds 40 npus on average against 512, a routing run
/// takes 10 s instead of 70 s, and no case measured routed better with more (4x4, 5x5, 4x4x4,
/// 5x5x5, 6x6x6 and 8x8x8 with a failed cable, 1, 2 and 4 pieces per block: the same times or
/// better).
const DETOUR: u32 = 1;

/// No hop holds this link in this step.
const FREE: u32 = u32::MAX;

/// In [`Router::route`]'s scratch: the piece waited (or started) here.
const WAIT: u32 = u32::MAX;

/// In [`Router::route`]'s scratch: the npu is not in the zone.
const OUTSIDE: u32 = u32::MAX;

/// In [`Arc::link`]: the hop crosses several links (through switches or npus outside the group).
const MULTI: u32 = u32::MAX;

/// A hop as the search relaxes it: where it leads, which hop, and its link when it has one.
///
/// A hop of one link owns that link alone (a link between two endpoints lies on no other hop), so
/// it is always open and its price is one product; only hops of several links go through
/// [`Router::open`] and [`Router::price`].
#[derive(Clone, Copy, Debug)]
struct Arc {
    to: u32,
    hop: u32,
    link: u32,
}

/// One routing run's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimedParams {
    /// The horizon T: steps available.
    pub steps: u32,
    /// Steepness of the congestion price (larger: closer to the maximum, rougher landscape).
    pub beta: f64,
    /// Extra hops a piece's walk may take beyond its shortest path: it stays among the npus
    /// `v` with `d(source, v) + d(v, destination) <= d(source, destination) + detour`
    /// (`u32::MAX`: anywhere). Waiting is never limited.
    pub detour: u32,
}

/// A piece to route: its id, ends, and time on a link of bandwidth 1 byte/ns (its bytes).
#[derive(Clone, Copy, Debug)]
struct Item {
    id: PieceId,
    from: NodeId,
    to: NodeId,
    bytes: f64,
}

/// The state of one routing run.
struct Router<'a> {
    hops: &'a HopGraph,
    /// Nanoseconds per byte of every link.
    ns_per_byte: Vec<f64>,
    steps: usize,
    links: usize,
    /// `load[t * links + l]`: nanoseconds link l is busy in step t.
    load: Vec<f64>,
    /// `owner[t * links + l]`: the hop holding link l in step t, or [`FREE`].
    owner: Vec<u32>,
    /// `users[t * hops + h]`: pieces crossing hop h in step t.
    users: Vec<u32>,
    /// The price scale: beta / (mean per-link, per-step load).
    scale: f64,
    /// `pot[t * links + l] = exp(scale * load[t * links + l])`, kept in step with `load`.
    pot: Vec<f64>,
    /// The routed piece's `exp(scale * its time on link l) - 1`, per link.
    factor: Vec<f64>,
    /// Scratch of [`Self::route`]: the cheapest price to reach (step, npu of the zone), and the
    /// hop taken.
    best: Vec<f64>,
    came: Vec<u32>,
    /// Hops towards every destination (by npu id), for pruning.
    to_dest: Vec<Option<Vec<u32>>>,
    /// The hops leaving npu v: `arcs[first[v]..first[v + 1]]`.
    arcs: Vec<Arc>,
    first: Vec<usize>,
    /// The bytes [`Self::factor`] was computed for.
    factor_bytes: Option<f64>,
    /// Extra hops a piece's walk may take beyond its shortest path ([`TimedParams::detour`]).
    detour: u32,
    /// Hops from every source (by npu id), for the zone; only with a finite detour.
    from_src: Vec<Option<Vec<u32>>>,
    /// Scratch of [`Self::route`]: the npus of the zone, and each npu's place in it (or
    /// [`OUTSIDE`]).
    zone: Vec<u32>,
    slot: Vec<u32>,
    /// Scratch of [`Self::route`]: the zone's arcs by the zone's numbering, and each zone npu's
    /// hops to the destination.
    local: Vec<Arc>,
    local_first: Vec<usize>,
    to_go: Vec<u32>,
}

impl<'a> Router<'a> {
    fn new(t: &Topology, hops: &'a HopGraph, items: &[Item], params: TimedParams) -> Self {
        let links = t.num_links();
        let ns_per_byte: Vec<f64> = t.link_ids().map(|l| 1.0 / t.link(l).bandwidth_gbps.max(f64::MIN_POSITIVE)).collect();
        let steps = params.steps as usize;
        let mut to_dest: Vec<Option<Vec<u32>>> = vec![None; hops.out.len()];
        let mut volume = 0.0;
        for it in items {
            let d = it.to.index();
            if to_dest[d].is_none() {
                to_dest[d] = Some(hops.distances(it.to, true).into_iter().map(|x| x.unwrap_or(u32::MAX)).collect());
            }
            let dist = to_dest[d].as_ref().map_or(0, |v| v[it.from.index()]);
            volume += it.bytes * dist as f64;
        }
        let up = t.links().filter(|(_, l)| l.up).map(|(_, l)| l.bandwidth_gbps).sum::<f64>().max(f64::MIN_POSITIVE);
        let mean = (volume / up / steps.max(1) as f64).max(f64::MIN_POSITIVE);
        let mut first = vec![0];
        let mut arcs = Vec::with_capacity(hops.hops.len());
        for out in &hops.out {
            arcs.extend(out.iter().map(|&h| {
                let hop = &hops.hops[h];
                let link = if let [l] = hop.path[..] { l.index() as u32 } else { MULTI };
                Arc { to: hop.to.index() as u32, hop: h as u32, link }
            }));
            first.push(arcs.len());
        }
        Router {
            hops,
            ns_per_byte,
            steps,
            links,
            load: vec![0.0; steps * links],
            owner: vec![FREE; steps * links],
            users: vec![0; steps * hops.hops.len()],
            scale: params.beta / mean,
            pot: vec![1.0; steps * links],
            factor: vec![0.0; links],
            best: Vec::new(),
            came: Vec::new(),
            to_dest,
            arcs,
            first,
            factor_bytes: None,
            detour: params.detour,
            from_src: vec![None; hops.out.len()],
            zone: Vec::with_capacity(hops.out.len()),
            slot: vec![OUTSIDE; hops.out.len()],
            local: Vec::new(),
            local_first: Vec::new(),
            to_go: Vec::new(),
        }
    }

    /// Whether hop h may carry one more piece in step t (its links free or already its own).
    fn open(&self, t: usize, h: usize) -> bool {
        self.hops.hops[h].path.iter().all(|l| {
            let o = self.owner[t * self.links + l.index()];
            o == FREE || o == h as u32
        })
    }

    /// The potential's increase if the piece being routed ([`Self::set_piece`]) crosses hop h
    /// in step t.
    fn price(&self, t: usize, h: usize) -> f64 {
        self.hops.hops[h].path.iter().map(|l| self.pot[t * self.links + l.index()] * self.factor[l.index()]).sum()
    }

    /// Prepares the per-link price factors of a piece of `bytes` (kept while the pieces' sizes
    /// repeat, as they do in a uniform all_to_all).
    fn set_piece(&mut self, bytes: f64) {
        if self.factor_bytes == Some(bytes) {
            return;
        }
        self.factor_bytes = Some(bytes);
        for (f, npb) in self.factor.iter_mut().zip(&self.ns_per_byte) {
            *f = (self.scale * bytes * npb).min(600.0).exp_m1();
        }
    }

    /// Adds (`sign` = 1) or removes (-1) a piece of `bytes` on hop h in step t.
    fn apply(&mut self, t: usize, h: usize, bytes: f64, sign: i32) {
        let hi = t * self.hops.hops.len() + h;
        if sign > 0 {
            self.users[hi] += 1;
        } else {
            self.users[hi] -= 1;
        }
        let holds = self.users[hi] > 0;
        for l in &self.hops.hops[h].path {
            let i = t * self.links + l.index();
            self.load[i] = (self.load[i] + sign as f64 * bytes * self.ns_per_byte[l.index()]).max(0.0);
            self.pot[i] = (self.scale * self.load[i]).min(600.0).exp();
            self.owner[i] = if holds { h as u32 } else { FREE };
        }
    }

    /// The cheapest time-expanded path of a piece: the hop taken in each step (`None` = wait).
    fn route(&mut self, it: &Item) -> Option<Vec<Option<usize>>> {
        self.set_piece(it.bytes);
        let (s, d) = (it.from.index(), it.to.index());
        if self.detour != u32::MAX && self.from_src[s].is_none() {
            self.from_src[s] = Some(self.hops.distances(it.from, false).into_iter().map(|x| x.unwrap_or(u32::MAX)).collect());
        }
        let to_d = self.to_dest[d].as_ref()?;
        if to_d[s] as usize > self.steps {
            return None;
        }
        // The zone: npus on walks from s to d at most `detour` hops longer than the shortest,
        // found by a search from s (every npu on a shortest path from s to a zone npu is in the
        // zone), numbered in the order found; `slot[v]` is v's number.
        let reach = to_d[s].saturating_add(self.detour);
        // `from_src[s]` is there exactly when the detour is finite.
        let within = |v: usize| self.from_src[s].as_ref().is_none_or(|from_s| from_s[v].saturating_add(to_d[v]) <= reach);
        let mut zone = std::mem::take(&mut self.zone);
        let mut slot = std::mem::take(&mut self.slot);
        // The zone's arcs, `local[first[z]..first[z + 1]]` leaving its npu z, each with the
        // number of the npu it enters in `to`.
        let mut local = std::mem::take(&mut self.local);
        let mut first = std::mem::take(&mut self.local_first);
        zone.clear();
        local.clear();
        first.clear();
        zone.push(s as u32);
        slot[s] = 0;
        while first.len() < zone.len() {
            let v = zone[first.len()] as usize;
            first.push(local.len());
            if v == d {
                continue;
            }
            for a in &self.arcs[self.first[v]..self.first[v + 1]] {
                let u = a.to as usize;
                if slot[u] == OUTSIDE {
                    if !within(u) {
                        continue;
                    }
                    slot[u] = zone.len() as u32;
                    zone.push(a.to);
                }
                local.push(Arc { to: slot[u], ..*a });
            }
        }
        first.push(local.len());
        // Hops left to d from each npu of the zone.
        let mut to_go = std::mem::take(&mut self.to_go);
        to_go.clear();
        to_go.extend(zone.iter().map(|&v| to_d[v as usize]));
        // best[t][z] for the zone's npu z, with the move that reached it.
        let m = zone.len();
        let mut best = std::mem::take(&mut self.best);
        let mut came = std::mem::take(&mut self.came);
        best.clear();
        best.resize((self.steps + 1) * m, f64::INFINITY);
        came.clear();
        came.resize((self.steps + 1) * m, WAIT);
        best[0] = 0.0;
        let dz = slot[d] as usize;
        for t in 0..self.steps {
            let left = (self.steps - t - 1) as u32;
            let pot = &self.pot[t * self.links..(t + 1) * self.links];
            for z in 0..m {
                let here = best[t * m + z];
                if !here.is_finite() {
                    continue;
                }
                // Waiting is free (a destination keeps its pieces); so is staying en route.
                if to_go[z] <= left || z == dz {
                    let w = (t + 1) * m + z;
                    if here < best[w] {
                        best[w] = here;
                        came[w] = WAIT;
                    }
                }
                for a in &local[first[z]..first[z + 1]] {
                    if to_go[a.to as usize] > left {
                        continue;
                    }
                    let price = if a.link != MULTI {
                        pot[a.link as usize] * self.factor[a.link as usize]
                    } else if self.open(t, a.hop as usize) {
                        self.price(t, a.hop as usize)
                    } else {
                        continue;
                    };
                    let c = here + price;
                    let w = (t + 1) * m + a.to as usize;
                    if c < best[w] {
                        best[w] = c;
                        came[w] = a.hop;
                    }
                }
            }
        }
        let found = dz < m && best[self.steps * m + dz].is_finite();
        let mut moves = vec![None; self.steps];
        if found {
            let mut v = d;
            for t in (0..self.steps).rev() {
                let h = came[(t + 1) * m + slot[v] as usize];
                if h != WAIT {
                    moves[t] = Some(h as usize);
                    v = self.hops.hops[h as usize].from.index();
                }
            }
        }
        // Leave the scratch as found: every npu outside the zone.
        for &v in &zone {
            slot[v as usize] = OUTSIDE;
        }
        self.best = best;
        self.came = came;
        self.zone = zone;
        self.slot = slot;
        self.local = local;
        self.local_first = first;
        self.to_go = to_go;
        found.then_some(moves)
    }

    fn place(&mut self, it: &Item, moves: &[Option<usize>], sign: i32) {
        for (t, m) in moves.iter().enumerate() {
            if let Some(h) = *m {
                self.apply(t, h, it.bytes, sign);
            }
        }
    }
}

/// The pieces of an all_to_all with their sizes, farthest and largest first.
fn items(t: &Topology, c: &Collective) -> Vec<Item> {
    let mut out: Vec<(u32, Item)> = Vec::new();
    let up = crate::topology::UpAdjacency::new(t);
    let dist: Vec<Vec<Option<u32>>> = c.ranks.iter().map(|&r| up.hop_distances(r)).collect();
    for i in (0..c.piece_space()).filter(|&i| c.is_required_index(i)) {
        let id = c.piece_at(i);
        let (s, d) = (id.parts()[0] as usize, id.parts()[1] as usize);
        let item = Item { id, from: c.ranks[s], to: c.ranks[d], bytes: to_f64(&c.piece_size_at(i)) };
        out.push((dist[s][c.ranks[d].index()].unwrap_or(0), item));
    }
    out.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.bytes.total_cmp(&a.1.bytes)));
    out.into_iter().map(|x| x.1).collect()
}

/// Routes an all_to_all in the time-expanded graph with `params.steps` steps; returns the steps
/// (idle steps dropped) and the estimated step-synchronous time in ns, or `None` when some piece
/// cannot arrive within the horizon.
///
/// Errors: a collective other than all_to_all.
pub(crate) fn route_in_time(t: &Topology, c: &Collective, hops: &HopGraph, params: TimedParams, deadline: Instant) -> Result<Option<(Vec<Step>, f64)>> {
    if c.kind != CollectiveKind::AllToAll {
        return Err(Error::bad(format!("time-objective synthesis: the collective is {}; only all_to_all is synthesized so far", c.kind)));
    }
    let items = items(t, c);
    let mut router = Router::new(t, hops, &items, params);
    let mut routes: Vec<Vec<Option<usize>>> = Vec::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        if i % 256 == 0 && Instant::now() >= deadline {
            return Ok(None);
        }
        let Some(moves) = router.route(it) else { return Ok(None) };
        router.place(it, &moves, 1);
        routes.push(moves);
    }
    for _ in 0..REROUTE_ROUNDS {
        for (i, it) in items.iter().enumerate() {
            if i % 256 == 0 && Instant::now() >= deadline {
                // Out of time: the routes so far are complete and consistent.
                return Ok(Some(assemble(t, hops, &items, &routes, params.steps as usize)));
            }
            router.place(it, &routes[i], -1);
            let moves = router.route(it).unwrap_or_else(|| routes[i].clone());
            router.place(it, &moves, 1);
            routes[i] = moves;
        }
    }
    Ok(Some(assemble(t, hops, &items, &routes, params.steps as usize)))
}

/// One transfer per (step, hop) carrying its pieces; idle steps dropped; the time estimate.
fn assemble(t: &Topology, hops: &HopGraph, items: &[Item], routes: &[Vec<Option<usize>>], steps: usize) -> (Vec<Step>, f64) {
    let mut per_step: Vec<std::collections::BTreeMap<usize, Vec<usize>>> = vec![Default::default(); steps];
    for (i, moves) in routes.iter().enumerate() {
        for (s, m) in moves.iter().enumerate() {
            if let Some(h) = *m {
                per_step[s].entry(h).or_default().push(i);
            }
        }
    }
    let mut out = Vec::new();
    let mut time = 0.0;
    for hop_pieces in per_step.into_iter().filter(|m| !m.is_empty()) {
        let mut step = Step::default();
        let mut busiest: f64 = 0.0;
        let mut latency: f64 = 0.0;
        for (h, mut pieces) in hop_pieces {
            pieces.sort_by_key(|&i| items[i].id);
            let path = hops.hops[h].path.clone();
            let bytes: f64 = pieces.iter().map(|&i| items[i].bytes).sum();
            for l in &path {
                busiest = busiest.max(bytes / t.link(*l).bandwidth_gbps);
            }
            latency = latency.max(t.path_latency_ns(&path));
            step.transfers.push(Transfer { path, op: Op::Copy, pieces: pieces.iter().map(|&i| items[i].id).collect() });
        }
        time += busiest + latency;
        out.push(step);
    }
    (out, time)
}

/// One point of the sweep: pieces per block, horizon, price steepness, and what it gave.
#[derive(Clone, Debug)]
pub struct TimedCandidate {
    /// Pieces per block of the collective it was routed for.
    pub pieces: u32,
    /// The run's settings.
    pub params: TimedParams,
    /// The collective (with `pieces`).
    pub collective: Collective,
    /// The steps (idle steps dropped).
    pub steps: Vec<Step>,
    /// Estimated step-synchronous time in ns (the verifier's exact cost is the judge).
    pub time_ns: f64,
}

/// What a sweep found.
#[derive(Clone, Debug, Default)]
pub struct Sweep {
    /// The best schedule found for each piece count, cheapest first.
    pub found: Vec<TimedCandidate>,
    /// Whether the deadline stopped the sweep before it tried everything.
    pub cut_short: bool,
}

/// Sweeps pieces per block (`piece_counts`), horizons from the farthest piece's hops upward, and
/// price steepness, within `deadline`.
///
/// The horizons tried for each piece count: the eccentricity D (the farthest required piece in
/// hops), D+1, D+2, and larger ones (D+4, D+7, ...) while the largest so far is the best. A
/// horizon above D gives routes room to detour and wait, at one more step latency each.
pub fn candidates(t: &Topology, c: &Collective, piece_counts: &[u32], deadline: Instant, progress: &mut dyn FnMut(&str)) -> Result<Sweep> {
    // Npus outside the group route paths but never store (they run no program).
    let hops = HopGraph::with_endpoints(t, &c.rank_mask(t));
    let eccentricity = c
        .ranks
        .iter()
        .map(|&r| {
            let d = hops.distances(r, false);
            c.ranks.iter().filter_map(|&q| d[q.index()]).max().unwrap_or(0)
        })
        .max()
        .unwrap_or(0);
    let mut found: Vec<TimedCandidate> = Vec::new();
    let mut cut_short = false;
    'counts: for &p in piece_counts {
        let cp = Collective::new(c.kind, c.ranks.clone(), c.bytes_per_rank, p, c.block_bytes.clone(), t)?;
        let mut best_here = f64::INFINITY;
        let mut extra_steps: Vec<u32> = vec![0, 1, 2];
        let mut k = 0;
        while k < extra_steps.len() {
            let steps = eccentricity.max(1) + extra_steps[k];
            k += 1;
            if Instant::now() >= deadline {
                cut_short = true;
                break 'counts;
            }
            let betas: Vec<String> = BETAS.iter().map(|b| b.to_string()).collect();
            progress(&format!("time-expanded routing: {p} piece(s) per block, {steps} steps, beta {}", betas.join(" and ")));
            // The steepnesses are independent runs: in parallel, taken in order.
            let runs: Vec<_> = BETAS
                .par_iter()
                .map(|&beta| {
                    let params = TimedParams { steps, beta, detour: DETOUR };
                    (params, route_in_time(t, &cp, &hops, params, deadline))
                })
                .collect();
            for (params, run) in runs {
                if let Some((s, time_ns)) = run? {
                    if time_ns < best_here && k == extra_steps.len() && extra_steps.len() < 10 {
                        // The largest horizon so far was the best: try a larger one.
                        extra_steps.push(extra_steps[k - 1] * 3 / 2 + 1);
                    }
                    if time_ns < best_here {
                        // Keep the best schedule per piece count only: on a 512-npu torus each
                        // is hundreds of MB.
                        found.retain(|f| f.pieces != p);
                        found.push(TimedCandidate { pieces: p, params, collective: cp.clone(), steps: s, time_ns });
                    }
                    best_here = best_here.min(time_ns);
                }
            }
        }
    }
    found.sort_by(|a, b| a.time_ns.total_cmp(&b.time_ns));
    Ok(Sweep { found, cut_short: cut_short || Instant::now() >= deadline })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::steps::tests::fail_picked_cables;
    use crate::topology::{torus, TorusParams};
    use crate::verify::{verify_schedule, VerifyOptions};

    fn a2a(t: &Topology, pieces: u32) -> Collective {
        Collective::new(CollectiveKind::AllToAll, t.node_ids().filter(|&v| t.is_npu(v)).collect(), 8 << 20, pieces, None, t).unwrap()
    }

    fn far() -> Instant {
        Instant::now() + std::time::Duration::from_secs(3600)
    }

    fn verified_time(t: &Topology, c: &Collective, steps: Vec<Step>) -> f64 {
        let s = crate::schedule::Schedule { header: crate::schedule::ScheduleHeader { topology: t.clone(), collective: c.clone(), meta: None }, steps };
        let r = verify_schedule(&s, &VerifyOptions::default()).unwrap();
        assert!(r.is_valid(), "{:?}", r.findings.failures().iter().take(3).collect::<Vec<_>>());
        to_f64(&r.cost.unwrap().time_ns())
    }

    #[test]
    fn a_group_routes_through_npus_outside_it_without_storing_there() {
        // Every other npu of a 4x4 torus with a failed cable: the candidates' paths pass npus
        // outside the group, which run no program, so rule 6 must lower the ranks alone.
        let mut t = torus(&TorusParams::uniform(&[4, 4], 32.0, 100.0)).unwrap();
        crate::synth::steps::tests::fail_cable(&mut t, 0, 1);
        let ranks: Vec<NodeId> = t.node_ids().filter(|v| v.0 % 2 == 0).collect();
        let c = Collective::new(CollectiveKind::AllToAll, ranks, 8 << 20, 1, None, &t).unwrap();
        let sweep = candidates(&t, &c, &[1, 2], far(), &mut |_| {}).unwrap();
        assert!(!sweep.found.is_empty());
        for r in sweep.found {
            let s = crate::schedule::Schedule {
                header: crate::schedule::ScheduleHeader { topology: t.clone(), collective: r.collective.clone(), meta: None },
                steps: r.steps.clone(),
            };
            verified_time(&t, &r.collective, r.steps);
            crate::lower::lower(&s, &Default::default()).unwrap();
        }
    }

    #[test]
    fn routes_verify_and_the_estimate_is_the_exact_cost() {
        let mut t = torus(&TorusParams::uniform(&[4, 3], 32.0, 100.0)).unwrap();
        let l = t.link_between(NodeId(0), NodeId(1)).unwrap();
        t.set_down(l);
        let l = t.link_between(NodeId(1), NodeId(0)).unwrap();
        t.set_down(l);
        let hops = HopGraph::new(&t);
        for p in [1, 2] {
            let c = a2a(&t, p);
            for steps in [4, 6] {
                let (s, est) = route_in_time(&t, &c, &hops, TimedParams { steps, beta: 4.0, detour: u32::MAX }, far()).unwrap().unwrap();
                assert!(s.len() <= steps as usize);
                let exact = verified_time(&t, &c, s);
                assert!((exact - est).abs() < 1e-6 * exact, "estimate {est} vs exact {exact}");
            }
        }
    }

    #[test]
    fn a_horizon_below_the_farthest_piece_finds_nothing() {
        let t = torus(&TorusParams::uniform(&[5, 5], 32.0, 100.0)).unwrap();
        let hops = HopGraph::new(&t);
        assert!(route_in_time(&t, &a2a(&t, 1), &hops, TimedParams { steps: 3, beta: 4.0, detour: u32::MAX }, far()).unwrap().is_none());
        assert!(route_in_time(&t, &a2a(&t, 1), &hops, TimedParams { steps: 4, beta: 4.0, detour: u32::MAX }, far()).unwrap().is_some());
    }

    #[test]
    fn one_detour_rounds_odd_rings_and_routes_as_well_as_any() {
        // On a 5x5 torus with a failed cable, a piece two hops away the short way is three the
        // other: with no detour it cannot take the other way and the routing is over 5% slower.
        let mut t = torus(&TorusParams::uniform(&[5, 5], 32.0, 100.0)).unwrap();
        crate::synth::steps::tests::fail_cable(&mut t, 0, 1);
        let hops = HopGraph::new(&t);
        let c = a2a(&t, 2);
        let time = |detour| route_in_time(&t, &c, &hops, TimedParams { steps: 5, beta: 8.0, detour }, far()).unwrap().unwrap().1;
        let (none, one, any) = (time(0), time(DETOUR), time(u32::MAX));
        assert!(none > 1.05 * one, "no detour {none} vs one {one}");
        assert!(one <= any * 1.001, "one detour {one} vs any {any}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

        /// Over sizes, fault positions (failed cables anywhere, up to two), piece counts,
        /// horizons and detours: every routed schedule verifies, its estimate is its exact cost,
        /// and a horizon at the farthest piece's distance always finds one (waiting is free, and
        /// every zone holds a shortest path).
        #[test]
        fn routed_schedules_verify_over_sizes_and_faults(
            dims in proptest::prop_oneof![proptest::collection::vec(3usize..6, 1..=2), proptest::collection::vec(2usize..4, 3..=3)],
            cuts in proptest::collection::vec((0usize..1000, 0usize..8), 0..=2),
            pieces in 1u32..=3,
            extra in 0u32..=2,
            beta in proptest::prop_oneof![proptest::strategy::Just(8.0), proptest::strategy::Just(16.0)],
            detour in proptest::prop_oneof![proptest::strategy::Just(0), proptest::strategy::Just(1), proptest::strategy::Just(2), proptest::strategy::Just(u32::MAX)],
        ) {
            let mut t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
            fail_picked_cables(&mut t, &cuts);
            let ranks: Vec<NodeId> = t.node_ids().filter(|&v| t.is_npu(v)).collect();
            proptest::prop_assume!(t.check_connected(&ranks).is_ok());
            let c = a2a(&t, pieces);
            let hops = HopGraph::new(&t);
            let ecc = ranks.iter().map(|&r| hops.distances(r, false).into_iter().flatten().max().unwrap_or(0)).max().unwrap_or(0);
            let (s, est) = route_in_time(&t, &c, &hops, TimedParams { steps: ecc.max(1) + extra, beta, detour }, far()).unwrap().unwrap();
            let exact = verified_time(&t, &c, s);
            proptest::prop_assert!((exact - est).abs() <= 1e-6 * exact, "estimate {} vs exact {}", est, exact);
        }
    }
}
