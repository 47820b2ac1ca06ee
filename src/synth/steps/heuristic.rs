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
use crate::topology::hops::HopGraph;

/// How many tie-break orders are tried; the routes and the packing are greedy, so different
/// orders among equals land on different makespans, and each try costs milliseconds.
const TRIES: u64 = 8;

/// Routes and packs the demand; returns the steps (empty when nothing moves), the fewest over
/// [`TRIES`] deterministic tie-break orders.
pub fn route_and_pack(hops: &HopGraph, demand: &Demand, num_links: usize) -> Vec<Step> {
    route_and_pack_until(hops, demand, num_links, None)
}

/// [`route_and_pack`], trying the orders after the first only while `deadline` has not passed (on
/// an 8x8x8 torus with a failed cable one order takes about 2 s, release build).
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
    // Scratch kept across pieces: the npus on the piece's shortest routes (its zone), layer by
    // layer away from the source, and each one's best route on to the destination.
    let mut zone: Vec<usize> = Vec::new();
    let mut seen = vec![usize::MAX; n];
    let mut cost: Vec<Option<(u32, u64)>> = vec![None; n];
    let mut next: Vec<Option<usize>> = vec![None; n];
    for i in order {
        let (_, s, d) = demand.pieces[i];
        let Some(to_d) = to_dest[d.index()].as_ref() else { continue };
        if to_d[s.index()] == u32::MAX {
            continue;
        }
        // The zone: every npu a shortest route from s to d passes (the hops that bring d one
        // closer, followed from s), in order of decreasing distance to d.
        zone.clear();
        zone.push(s.index());
        seen[s.index()] = i;
        let mut k = 0;
        while k < zone.len() {
            let v = zone[k];
            k += 1;
            for &h in &hops.out[v] {
                let w = hops.hops[h].to.index();
                if seen[w] != i && to_d[w].saturating_add(1) == to_d[v] {
                    seen[w] = i;
                    zone.push(w);
                }
            }
        }
        let hop_load = |h: usize| hops.hops[h].path.iter().map(|l| load[l.index()]).max().unwrap_or(0);
        let hop_sum = |h: usize| hops.hops[h].path.iter().map(|l| load[l.index()] as u64).sum::<u64>();
        // cost[v] = (max load, total load) of the best shortest route from v to d, computed in
        // order of increasing distance to d (the shortest-path DAG towards d, within the zone).
        for &v in zone.iter().rev() {
            next[v] = None;
            if v == d.index() {
                cost[v] = Some((0, 0));
                continue;
            }
            let mut best: Option<(u32, u64)> = None;
            for &h in &hops.out[v] {
                let w = hops.hops[h].to.index();
                if to_d[w].saturating_add(1) != to_d[v] {
                    continue;
                }
                let Some((m, sum)) = cost[w] else { continue };
                let c = (m.max(hop_load(h)), sum + hop_sum(h));
                if best.is_none_or(|b| c < b) {
                    best = Some(c);
                    next[v] = Some(h);
                }
            }
            cost[v] = best;
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

/// List scheduling of the routes into steps: every step offers the next hop of each unfinished
/// piece, longest remaining route first, ties by [`tie`], and a hop is taken when its links are
/// still free in the step.
fn pack(hops: &HopGraph, demand: &Demand, routes: &[Vec<usize>], num_links: usize, seed: u64) -> Vec<Step> {
    if hops.hops.iter().all(|h| h.path.len() == 1) {
        pack_by_link(hops, demand, routes, num_links, seed)
    } else {
        pack_by_bucket(hops, demand, routes, num_links, seed)
    }
}

/// [`pack`] where every hop is one link (a torus): a piece moves exactly when it heads the
/// queue of pieces waiting for its link, and its priority (remaining hops, then key) only changes
/// when it moves, so each link keeps a heap and a step pops one piece per link.
fn pack_by_link(hops: &HopGraph, demand: &Demand, routes: &[Vec<usize>], num_links: usize, seed: u64) -> Vec<Step> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    // The most remaining hops first, then the smallest key.
    type Waiting = (usize, Reverse<u64>, usize);
    let link_of = |i: usize, at: usize| hops.hops[routes[i][at]].path[0].index();
    let mut queue: Vec<BinaryHeap<Waiting>> = vec![BinaryHeap::new(); num_links];
    let mut left = 0usize;
    for (i, r) in routes.iter().enumerate().filter(|(_, r)| !r.is_empty()) {
        queue[link_of(i, 0)].push((r.len(), Reverse(tie(seed, i)), i));
        left += 1;
    }
    let mut position = vec![0usize; routes.len()];
    let mut movers: Vec<Waiting> = Vec::new();
    let mut steps = Vec::new();
    while left > 0 {
        movers.clear();
        movers.extend(queue.iter_mut().filter_map(BinaryHeap::pop));
        // The transfers in the order the priority list offers them.
        movers.sort_unstable_by(|a, b| b.cmp(a));
        let mut step = Step::default();
        for &(remaining, key, i) in &movers {
            let path = &hops.hops[routes[i][position[i]]].path;
            step.transfers.push(Transfer { path: path.clone(), op: Op::Copy, pieces: vec![demand.pieces[i].0] });
            position[i] += 1;
            if remaining > 1 {
                queue[link_of(i, position[i])].push((remaining - 1, key, i));
            } else {
                left -= 1;
            }
        }
        steps.push(step);
    }
    steps
}

/// [`pack`] over hops of several links (a fat tree). The pieces wait in buckets by remaining
/// hops, each bucket in tie order; a piece that moves drops to the next bucket, merged in by its
/// key, so that no step sorts.
fn pack_by_bucket(hops: &HopGraph, demand: &Demand, routes: &[Vec<usize>], num_links: usize, seed: u64) -> Vec<Step> {
    let key: Vec<u64> = (0..routes.len()).map(|i| tie(seed, i)).collect();
    let longest = routes.iter().map(Vec::len).max().unwrap_or(0);
    let mut buckets: Vec<Vec<usize>> = vec![Vec::new(); longest + 1];
    let mut by_key: Vec<usize> = (0..routes.len()).filter(|&i| !routes[i].is_empty()).collect();
    by_key.sort_by_key(|&i| key[i]);
    for i in by_key {
        buckets[routes[i].len()].push(i);
    }
    let mut position = vec![0usize; routes.len()];
    let mut busy = vec![usize::MAX; num_links];
    let mut moved: Vec<Vec<usize>> = vec![Vec::new(); longest + 2];
    let mut steps = Vec::new();
    while buckets.iter().any(|b| !b.is_empty()) {
        let t = steps.len();
        let mut step = Step::default();
        for r in (1..=longest).rev() {
            buckets[r].retain(|&i| {
                let path = &hops.hops[routes[i][position[i]]].path;
                if path.iter().any(|l| busy[l.index()] == t) {
                    return true;
                }
                for l in path {
                    busy[l.index()] = t;
                }
                step.transfers.push(Transfer { path: path.clone(), op: Op::Copy, pieces: vec![demand.pieces[i].0] });
                position[i] += 1;
                moved[r].push(i);
                false
            });
        }
        // The pieces that moved out of bucket r + 1 join bucket r, in key order.
        for r in 1..=longest {
            if moved[r + 1].is_empty() {
                continue;
            }
            buckets[r] = merge_by_key(&buckets[r], &moved[r + 1], &key);
            moved[r + 1].clear();
        }
        moved[1].clear();
        steps.push(step);
    }
    steps
}

/// The union of two lists sorted by `key`, sorted by `key`.
fn merge_by_key(a: &[usize], b: &[usize], key: &[u64]) -> Vec<usize> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut x, mut y) = (0, 0);
    while x < a.len() && y < b.len() {
        if key[a[x]] <= key[b[y]] {
            out.push(a[x]);
            x += 1;
        } else {
            out.push(b[y]);
            y += 1;
        }
    }
    out.extend_from_slice(&a[x..]);
    out.extend_from_slice(&b[y..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Collective, CollectiveKind};
    use crate::synth::steps::tests::fail_picked_cables;
    use crate::topology::{torus, TorusParams};

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 32, ..Default::default() })]

        /// On a torus every hop is one link, so the per-link queues must take exactly the pieces
        /// the general bucket scan takes, in the same order, for every tie-break order.
        #[test]
        fn link_queues_pack_as_the_bucket_scan(
            dims in proptest::collection::vec(2usize..7, 1..=3),
            cuts in proptest::collection::vec((0usize..1000, 0usize..8), 0..=3),
            pieces in 1u32..=3,
            seed in 0u64..4,
        ) {
            let mut t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
            fail_picked_cables(&mut t, &cuts);
            let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, pieces, None, &t).unwrap();
            let hops = HopGraph::new(&t);
            let demand = Demand::all_to_all(&c, t.num_npus());
            let routes = balanced_routes(&hops, &demand, t.num_links(), seed);
            let by_link = pack_by_link(&hops, &demand, &routes, t.num_links(), seed);
            let by_bucket = pack_by_bucket(&hops, &demand, &routes, t.num_links(), seed);
            proptest::prop_assert_eq!(by_link, by_bucket);
        }
    }
}
