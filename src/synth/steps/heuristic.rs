//! A schedule for any size and any fault pattern: balanced shortest-hop routes, then list
//! scheduling into steps.
//!
//! Routing: every piece takes a shortest path in hops over links that are up. Among equal
//! shortest paths it takes one whose most-loaded link is least loaded so far (then the least
//! total load), so that pieces spread over the parallel routes a torus or fat tree offers; the
//! busiest link bounds the steps from below, which is what balancing lowers.
//!
//! Packing: step by step, every piece ready at its current node (it arrived in an earlier step)
//! asks for its next hop, longest remaining route first (the pieces that decide the makespan go
//! first), and gets it when every link of the hop is still free in this step: each link carries
//! at most one piece per step.

use super::encoding::Demand;
use crate::schedule::{Op, Step, Transfer};
use crate::synth::hops::HopGraph;

/// How many tie-break orders are tried; the routes and the packing are greedy, so different
/// orders among equals land on different makespans, and each try costs milliseconds.
const TRIES: u64 = 8;

/// Routes and packs the demand; returns the steps (empty when nothing moves), the fewest over
/// [`TRIES`] deterministic tie-break orders.
pub fn route_and_pack(hops: &HopGraph, demand: &Demand, num_links: usize) -> Vec<Step> {
    route_and_pack_until(hops, demand, num_links, None)
}

/// [`route_and_pack`], trying the orders after the first only while `deadline` has not passed (on
/// a 512-npu torus one order takes tens of seconds).
pub fn route_and_pack_until(hops: &HopGraph, demand: &Demand, num_links: usize, deadline: Option<std::time::Instant>) -> Vec<Step> {
    let mut best: Option<Vec<Step>> = None;
    for seed in 0..TRIES {
        if seed > 0 && deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            break;
        }
        let routes = balanced_routes(hops, demand, num_links, seed);
        let steps = pack(hops, demand, &routes, num_links, seed);
        if best.as_ref().is_none_or(|b| steps.len() < b.len()) {
            best = Some(steps);
        }
    }
    best.unwrap_or_default()
}

/// A deterministic tie-break key for item `i` under `seed` (seed 0 keeps the natural order).
fn tie(seed: u64, i: usize) -> u64 {
    if seed == 0 {
        return i as u64;
    }
    // splitmix64: a cheap, well-spread hash, so that no dependency on a random crate is needed.
    let mut z = (i as u64).wrapping_add(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The hops every piece takes, in order.
fn balanced_routes(hops: &HopGraph, demand: &Demand, num_links: usize, seed: u64) -> Vec<Vec<usize>> {
    let n = hops.out.len();
    let mut to_dest: Vec<Option<Vec<u32>>> = vec![None; n];
    for &(_, _, d) in &demand.pieces {
        if to_dest[d.index()].is_none() {
            to_dest[d.index()] = Some(hops.distances(d, true).into_iter().map(|x| x.unwrap_or(u32::MAX)).collect());
        }
    }
    // Longest pieces first: they have the fewest alternatives left once the short ones settle.
    let mut order: Vec<usize> = (0..demand.pieces.len()).collect();
    let dist = |i: usize| {
        let (_, s, d) = demand.pieces[i];
        to_dest[d.index()].as_ref().map_or(0, |v| v[s.index()])
    };
    order.sort_by_key(|&i| (std::cmp::Reverse(dist(i)), tie(seed, i)));
    let mut load = vec![0u32; num_links];
    let mut routes = vec![Vec::new(); demand.pieces.len()];
    for i in order {
        let (_, s, d) = demand.pieces[i];
        let Some(to_d) = to_dest[d.index()].as_ref() else { continue };
        let total = to_d[s.index()];
        if total == u32::MAX {
            continue;
        }
        let hop_load = |h: usize| hops.hops[h].path.iter().map(|l| load[l.index()]).max().unwrap_or(0);
        let hop_sum = |h: usize| hops.hops[h].path.iter().map(|l| load[l.index()] as u64).sum::<u64>();
        // cost[v] = (max load, total load) of the best shortest route from v to d, computed in
        // order of increasing distance to d (the shortest-path DAG towards d).
        let mut nodes: Vec<usize> = (0..n).filter(|&v| to_d[v] <= total).collect();
        nodes.sort_by_key(|&v| to_d[v]);
        let mut cost: Vec<Option<(u32, u64)>> = vec![None; n];
        let mut next: Vec<Option<usize>> = vec![None; n];
        cost[d.index()] = Some((0, 0));
        for v in nodes {
            if v == d.index() {
                continue;
            }
            for &h in &hops.out[v] {
                let w = hops.hops[h].to.index();
                if to_d[w].saturating_add(1) != to_d[v] {
                    continue;
                }
                let Some((m, sum)) = cost[w] else { continue };
                let c = (m.max(hop_load(h)), sum + hop_sum(h));
                if cost[v].is_none_or(|b| c < b) {
                    cost[v] = Some(c);
                    next[v] = Some(h);
                }
            }
        }
        let mut v = s.index();
        while v != d.index() {
            let Some(h) = next[v] else { break };
            routes[i].push(h);
            for l in &hops.hops[h].path {
                load[l.index()] += 1;
            }
            v = hops.hops[h].to.index();
        }
    }
    routes
}

/// List scheduling of the routes into steps.
fn pack(hops: &HopGraph, demand: &Demand, routes: &[Vec<usize>], num_links: usize, seed: u64) -> Vec<Step> {
    let mut position = vec![0usize; routes.len()];
    let mut active: Vec<usize> = (0..routes.len()).filter(|&i| !routes[i].is_empty()).collect();
    let mut busy = vec![usize::MAX; num_links];
    let mut steps = Vec::new();
    while !active.is_empty() {
        let t = steps.len();
        // Every active piece is ready: a piece moved in step t-1 sits at its new node now.
        active.sort_by_key(|&i| (std::cmp::Reverse(routes[i].len() - position[i]), tie(seed, i)));
        let mut step = Step::default();
        for &i in &active {
            let h = routes[i][position[i]];
            let path = &hops.hops[h].path;
            if path.iter().any(|l| busy[l.index()] == t) {
                continue;
            }
            for l in path {
                busy[l.index()] = t;
            }
            step.transfers.push(Transfer { path: path.clone(), op: Op::Copy, pieces: vec![demand.pieces[i].0] });
            position[i] += 1;
        }
        active.retain(|&i| position[i] < routes[i].len());
        steps.push(step);
    }
    steps
}
