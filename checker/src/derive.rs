//! Re-derives each bound from the instance and a witness (docs/design/MODEL.md section 6, the "check"
//! column). Each function returns the value the witness proves; the caller compares it with the
//! claim.

use crate::instance::{BlockKind, Demands, Instance};
use crate::Q;
use num_bigint::BigInt;
use num_traits::{One, Signed, ToPrimitive, Zero};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Single-hop distance from `s` to `d`: a hop leaves a rank, passes through switches and npus
/// outside the collective only, and ends at a rank, because only ranks store (docs/design/MODEL.md
/// sections 1 and 3).
pub(crate) fn steps(inst: &Instance, s: usize, d: usize) -> Result<Q, String> {
    let dist = single_hops(inst, &inst.up_adjacency(), s);
    dist[d].map(|h| Q::from_integer(h.into())).ok_or_else(|| format!("node {d} cannot be reached from node {s} over up links"))
}

/// Single-hop distances from `s` to every rank over `adj` (the up links, or the up links
/// reversed for the distances to `s`); `None` where no hop chain reaches.
fn single_hops(inst: &Instance, adj: &[Vec<(usize, usize)>], s: usize) -> Vec<Option<u64>> {
    let stores = inst.rank_flags();
    let mut dist: Vec<Option<u64>> = vec![None; inst.nodes];
    dist[s] = Some(0);
    let mut queue = VecDeque::from([s]);
    while let Some(n) = queue.pop_front() {
        let here = dist[n].unwrap_or(0);
        // Everything reachable from n through switches only is one hop away.
        let mut stack = vec![n];
        let mut seen = vec![false; inst.nodes];
        while let Some(x) = stack.pop() {
            for &(_, y) in &adj[x] {
                if stores[y] {
                    if dist[y].is_none() {
                        dist[y] = Some(here + 1);
                        queue.push_back(y);
                    }
                } else if !std::mem::replace(&mut seen[y], true) {
                    stack.push(y);
                }
            }
        }
    }
    dist
}

/// Shortest path latency from `s` to `d`: link latencies plus the switch latency for every switch
/// passed through (docs/design/MODEL.md section 5).
pub(crate) fn latency(inst: &Instance, s: usize, d: usize) -> Result<Q, String> {
    latencies_from(inst, &[s])[d].clone().ok_or_else(|| format!("node {d} cannot be reached from node {s} over up links"))
}

/// Shortest path latencies from the nearest of `sources` to every node (`None`: not reachable over
/// up links), as [`latency`] measures a path.
pub(crate) fn latencies_from(inst: &Instance, sources: &[usize]) -> Vec<Option<Q>> {
    let adj = inst.up_adjacency();
    let mut dist: Vec<Option<Q>> = vec![None; inst.nodes];
    let mut heap = BinaryHeap::new();
    for &s in sources {
        dist[s] = Some(Q::zero());
        heap.push(Reverse((Q::zero(), s)));
    }
    while let Some(Reverse((dn, n))) = heap.pop() {
        if dist[n].as_ref().is_some_and(|x| *x < dn) {
            continue;
        }
        for &(l, y) in &adj[n] {
            let mut nd = &dn + &inst.links[l].latency_ns;
            if y >= inst.npus {
                nd += &inst.switch_latency_ns;
            }
            if dist[y].as_ref().is_none_or(|x| nd < *x) {
                dist[y] = Some(nd.clone());
                heap.push(Reverse((nd, y)));
            }
        }
    }
    dist
}

/// Shortest distances from `s` under link lengths `len` (`None`: not reachable over up links).
fn shortest<T>(inst: &Instance, adj: &[Vec<(usize, usize)>], len: &[T], s: usize) -> Vec<Option<T>>
where
    T: Clone + Ord + Zero,
    for<'a> &'a T: std::ops::Add<&'a T, Output = T>,
{
    let mut dist: Vec<Option<T>> = vec![None; inst.nodes];
    dist[s] = Some(T::zero());
    let mut heap = BinaryHeap::from([Reverse((T::zero(), s))]);
    while let Some(Reverse((dn, n))) = heap.pop() {
        if dist[n].as_ref().is_some_and(|x| *x < dn) {
            continue;
        }
        for &(l, y) in &adj[n] {
            let nd = &dn + &len[l];
            if dist[y].as_ref().is_none_or(|x| nd < *x) {
                dist[y] = Some(nd.clone());
                heap.push(Reverse((nd, y)));
            }
        }
    }
    dist
}

/// Integer link lengths, prepared once for many shortest-path searches.
enum Lengths<'a> {
    /// Every up link as long (the volume bound's): hops, breadth first, times that length.
    Equal(&'a BigInt),
    /// Every length fits in 64 bits (what collsched writes): the search adds machine integers; a
    /// path has fewer than 2^64 links, so its length stays below 2^128.
    Small(Vec<u128>),
    Big(&'a [BigInt]),
}

impl<'a> Lengths<'a> {
    fn new(adj: &[Vec<(usize, usize)>], len: &'a [BigInt]) -> Self {
        let mut up = adj.iter().flatten().map(|&(l, _)| &len[l]);
        if let Some(first) = up.next() {
            if up.all(|y| y == first) {
                return Lengths::Equal(first);
            }
        }
        match len.iter().map(|y| y.to_u64().map(u128::from)).collect::<Option<Vec<u128>>>() {
            Some(small) => Lengths::Small(small),
            None => Lengths::Big(len),
        }
    }

    /// Shortest distances from `s` (`None`: not reachable over up links).
    fn distances_from(&self, inst: &Instance, adj: &[Vec<(usize, usize)>], s: usize) -> Vec<Option<BigInt>> {
        match self {
            Lengths::Equal(y) => hops(inst, adj, s).into_iter().map(|h| h.map(|h| *y * BigInt::from(h))).collect(),
            Lengths::Small(len) => shortest(inst, adj, len, s).into_iter().map(|d| d.map(BigInt::from)).collect(),
            Lengths::Big(len) => shortest(inst, adj, len, s),
        }
    }
}

/// Hops from `s` over up links, breadth first (`None`: not reachable).
fn hops(inst: &Instance, adj: &[Vec<(usize, usize)>], s: usize) -> Vec<Option<u64>> {
    let mut dist = vec![None; inst.nodes];
    dist[s] = Some(0);
    let mut queue = std::collections::VecDeque::from([s]);
    while let Some(n) = queue.pop_front() {
        let d = dist[n].unwrap_or(0) + 1;
        for &(_, y) in &adj[n] {
            if dist[y].is_none() {
                dist[y] = Some(d);
                queue.push_back(y);
            }
        }
    }
    dist
}

/// `per_source(s)` for every source, in source order, the sources shared out over the machine's
/// threads (exact sums do not depend on the order they are added in).
fn over_sources<T: Send>(sources: &[usize], per_source: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let share = sources.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let parts: Vec<_> = sources.chunks(share).map(|part| scope.spawn(|| part.iter().map(|&s| per_source(s)).collect::<Vec<T>>())).collect();
        parts.into_iter().flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}

/// `sum over all_to_all demands of weight(bytes) x distance under len`. A uniform all_to_all sums
/// its distances as integers and weighs them once.
fn demand_distance(inst: &Instance, len: &[BigInt], weight: &(dyn Fn(&Q) -> Q + Sync), what: &str) -> Result<Q, String> {
    let adj = inst.up_adjacency();
    let lengths = Lengths::new(&adj, len);
    let reach = |dist: &[Option<BigInt>], s: usize, d: usize| dist[d].clone().ok_or_else(|| format!("node {d} cannot be reached from node {s} over up links"));
    match &inst.demands {
        Demands::UniformAllToAll(bytes) => {
            let per_source = over_sources(&inst.ranks, |s| {
                let dist = lengths.distances_from(inst, &adj, s);
                inst.ranks.iter().filter(|&&d| d != s).try_fold(BigInt::zero(), |total, &d| Ok(total + reach(&dist, s, d)?))
            });
            let total = per_source.into_iter().sum::<Result<BigInt, String>>()?;
            Ok(weight(bytes) * Q::from_integer(total))
        }
        Demands::AllToAll(list) => {
            let mut by_source: Vec<Vec<(usize, &Q)>> = vec![Vec::new(); inst.nodes];
            for (s, d, b) in list {
                by_source[*s].push((*d, b));
            }
            let sources: Vec<usize> = (0..inst.nodes).filter(|&s| !by_source[s].is_empty()).collect();
            let per_source = over_sources(&sources, |s| {
                let dist = lengths.distances_from(inst, &adj, s);
                let mut numerator = Q::zero();
                for &(d, bytes) in &by_source[s] {
                    let w = weight(bytes);
                    if !w.is_zero() {
                        numerator += w * Q::from_integer(reach(&dist, s, d)?);
                    }
                }
                Ok(numerator)
            });
            per_source.into_iter().sum()
        }
        Demands::Blocks { .. } => Err(format!("the {what} bound treats pieces as point-to-point demands: all_to_all only")),
    }
}

/// `sum over demands of bytes x distance under len`, over `sum over up links of capacity x len`,
/// with `len` given as integers over a common denominator (which cancels).
fn length_bound(inst: &Instance, len: &[BigInt], what: &str) -> Result<Q, String> {
    let denominator = inst.links.iter().zip(len).filter(|(l, _)| l.up).fold(Q::zero(), |acc, (l, y)| acc + &l.capacity * Q::from_integer(y.clone()));
    if !denominator.is_positive() {
        return Err(format!("the {what} lengths give every up link length 0"));
    }
    Ok(demand_distance(inst, len, &|bytes| bytes.clone(), what)? / denominator)
}

/// The volume bound: every byte crosses at least its hop distance in links (length 1 each).
pub(crate) fn volume(inst: &Instance) -> Result<Q, String> {
    let ones = vec![BigInt::one(); inst.links.len()];
    length_bound(inst, &ones, "volume")
}

/// The flow (LP dual) bound of lengths `y`: any y >= 0 gives a lower bound, because a routing
/// that finishes in time T puts at most `capacity x T` bytes on each link, so
/// `sum_e capacity_e y_e T >= sum_e y_e load_e >= sum_demands bytes x y-distance`.
pub(crate) fn flow(inst: &Instance, y: &[Q]) -> Result<Q, String> {
    length_bound(inst, &integer_lengths(inst, y)?, "flow")
}

/// Lengths `y` (one per link, none negative) scaled to integers: the bounds of lengths are ratios
/// of two expressions linear in y, so a common factor cancels, and integer Dijkstra avoids a gcd
/// per addition.
fn integer_lengths(inst: &Instance, y: &[Q]) -> Result<Vec<BigInt>, String> {
    if y.len() != inst.links.len() {
        return Err(format!("the witness has {} lengths for {} links", y.len(), inst.links.len()));
    }
    if let Some(i) = y.iter().position(|v| v.is_negative()) {
        return Err(format!("length of link {i} is negative"));
    }
    let lcm = y.iter().fold(BigInt::one(), |acc, v| {
        let g = gcd(acc.clone(), v.denom().clone());
        acc / g * v.denom()
    });
    Ok(y.iter().map(|v| v.numer() * (&lcm / v.denom())).collect())
}

fn gcd(mut a: BigInt, mut b: BigInt) -> BigInt {
    while !b.is_zero() {
        let r = &a % &b;
        a = std::mem::replace(&mut b, r);
    }
    a.abs()
}

/// The transmission-count bound (docs/design/MODEL.md section 6): every piece needs at least a
/// number of transfers, each of which leaves a rank over a link out of a rank and enters a rank
/// over a link into one; so the bytes crossing those links, summed over the schedule, are at
/// least `count x size` summed over pieces, and a step-synchronous schedule takes at least that
/// over the summed capacity of the up links leaving ranks (or, with `into`, entering ranks).
///
/// - all_to_all: each demand is carried by at least one transfer (from its source to its
///   destination);
/// - all_gather: a block must reach R-1 ranks that lack it, one destination per transfer: R-1
///   transfers for each of the R blocks;
/// - reduce_scatter: the R-1 contributions a block's destination lacks start at R-1 different
///   ranks and each must leave its rank: R-1 transfers for each of the R blocks;
/// - all_reduce: 2(R-1) transfers for each of the R blocks (the one-way gossip bound, proven in
///   MODEL.md section 6).
pub(crate) fn transmissions(inst: &Instance, into: bool) -> Result<Q, String> {
    let r = inst.ranks.len() as i64;
    let bytes = match &inst.demands {
        Demands::UniformAllToAll(b) => b * Q::from_integer((r * (r - 1)).into()),
        Demands::AllToAll(list) => list.iter().fold(Q::zero(), |acc, (_, _, b)| acc + b),
        Demands::Blocks { kind, block_bytes } => {
            let per_block = match kind {
                BlockKind::AllGather | BlockKind::ReduceScatter => r - 1,
                BlockKind::AllReduce => 2 * (r - 1),
            };
            block_bytes * Q::from_integer((r * per_block).into())
        }
    };
    let rank = inst.rank_flags();
    let capacity = inst.links.iter().filter(|l| l.up && rank[if into { l.dst } else { l.src }]).fold(Q::zero(), |acc, l| acc + &l.capacity);
    if capacity.is_zero() {
        return if bytes.is_zero() { Ok(Q::zero()) } else { Err("no up link leaves or enters a rank, yet bytes must move".into()) };
    }
    Ok(bytes / capacity)
}

/// Bytes that must leave `u` (a node set, as membership flags), by the collective's rule.
///
/// - all_to_all: the sum of demands from inside to outside (each must cross a link leaving u).
/// - all_gather: with a >= 1 ranks inside and b >= 1 outside, every inside rank's block is needed
///   outside and exists only inside at the start, so a copy of each of its pieces crosses: a blocks.
/// - reduce_scatter: every outside rank's block must end there reduced over all ranks, including
///   the a >= 1 inside ones, whose contributions exist only inside; pieces of different blocks are
///   never combined, so at least one value of each piece of those b blocks crosses: b blocks.
/// - all_reduce: the same argument for all R blocks (each is needed reduced outside): R blocks.
pub(crate) fn cut_crossing(inst: &Instance, u: &[bool]) -> Q {
    let a = inst.ranks.iter().filter(|&&r| u[r]).count() as i64;
    let b = inst.ranks.len() as i64 - a;
    match &inst.demands {
        Demands::UniformAllToAll(bytes) => bytes * Q::from_integer((a * b).into()),
        Demands::AllToAll(list) => list.iter().filter(|(s, d, _)| u[*s] && !u[*d]).fold(Q::zero(), |acc, (_, _, x)| acc + x),
        Demands::Blocks { kind, block_bytes } => {
            let blocks = match kind {
                BlockKind::AllGather if b >= 1 => a,
                BlockKind::ReduceScatter if a >= 1 => b,
                BlockKind::AllReduce if a >= 1 && b >= 1 => a + b,
                _ => 0,
            };
            block_bytes * Q::from_integer(blocks.into())
        }
    }
}

/// The membership flags of a cut's node set, complemented with `into` (the set whose outgoing
/// links are counted). Errors for a node out of range or named twice.
pub(crate) fn membership(inst: &Instance, nodes: &[usize], into: bool) -> Result<Vec<bool>, String> {
    let mut u = vec![false; inst.nodes];
    for &n in nodes {
        if n >= inst.nodes {
            return Err(format!("the cut names node {n}, but there are {} nodes", inst.nodes));
        }
        if std::mem::replace(&mut u[n], true) {
            return Err(format!("the cut names node {n} twice"));
        }
    }
    if into {
        u.iter_mut().for_each(|x| *x = !*x);
    }
    Ok(u)
}

/// The cut bound of node set `nodes`: bytes that must leave it over the capacity of the up links
/// leaving it. With `into`, the same for the complement (bytes that must enter the set).
pub(crate) fn cut(inst: &Instance, nodes: &[usize], into: bool) -> Result<Q, String> {
    let u = membership(inst, nodes, into)?;
    let crossing = cut_crossing(inst, &u);
    let capacity = inst.links.iter().filter(|l| l.up && u[l.src] && !u[l.dst]).fold(Q::zero(), |acc, l| acc + &l.capacity);
    if capacity.is_zero() {
        return if crossing.is_zero() { Ok(Q::zero()) } else { Err("no up link crosses the cut, yet bytes must cross it: the instance is infeasible".into()) };
    }
    Ok(crossing / capacity)
}

/// `ceil(a / b)` as a rational, for `b > 0`: a number of steps is whole.
fn ceil_ratio(a: &BigInt, b: &BigInt) -> Q {
    let (q, r) = (a / b, a % b);
    Q::from_integer(if r.is_zero() { q } else { q + 1 })
}

/// Transfers per piece (docs/design/MODEL.md section 6): all_to_all 1, all_gather and
/// reduce_scatter R-1, all_reduce 2(R-1).
fn transfers_per_piece(inst: &Instance) -> u64 {
    let r = inst.ranks.len() as u64;
    match &inst.demands {
        Demands::UniformAllToAll(_) | Demands::AllToAll(_) => 1,
        Demands::Blocks { kind: BlockKind::AllGather | BlockKind::ReduceScatter, .. } => r.saturating_sub(1),
        Demands::Blocks { kind: BlockKind::AllReduce, .. } => 2 * r.saturating_sub(1),
    }
}

/// The steps transmission-count bound (docs/design/MODEL.md sections 3 and 6): every piece needs
/// [`transfers_per_piece`] transfers, each from a rank to a rank, and in one step a link carries
/// one piece; so a step has at most as many transfers as there are up links leaving ranks (or,
/// with `into`, entering ranks), and the steps are at least the count over those links, rounded up.
pub(crate) fn steps_transmissions(inst: &Instance, into: bool) -> Result<Q, String> {
    let count = BigInt::from(inst.required_pieces()) * BigInt::from(transfers_per_piece(inst));
    let rank = inst.rank_flags();
    let links = inst.links.iter().filter(|l| l.up && rank[if into { l.dst } else { l.src }]).count();
    if links == 0 {
        return if count.is_zero() { Ok(Q::zero()) } else { Err("no up link leaves or enters a rank, yet pieces must move".into()) };
    }
    Ok(ceil_ratio(&count, &BigInt::from(links)))
}

/// Pieces that must leave `u` (membership flags), by the rule of [`cut_crossing`] counted in
/// pieces: all_to_all demands with bytes from inside to outside, `pieces` each; otherwise the
/// blocks [`cut_crossing`] counts, `pieces` each.
fn pieces_crossing(inst: &Instance, u: &[bool]) -> BigInt {
    let a = inst.ranks.iter().filter(|&&r| u[r]).count();
    let b = inst.ranks.len() - a;
    let blocks = match &inst.demands {
        Demands::UniformAllToAll(bytes) if bytes.is_positive() => a * b,
        Demands::UniformAllToAll(_) => 0,
        Demands::AllToAll(list) => list.iter().filter(|(s, d, x)| u[*s] && !u[*d] && x.is_positive()).count(),
        Demands::Blocks { kind, .. } => match kind {
            BlockKind::AllGather if b >= 1 => a,
            BlockKind::ReduceScatter if a >= 1 => b,
            BlockKind::AllReduce if a >= 1 && b >= 1 => a + b,
            _ => 0,
        },
    };
    BigInt::from(blocks) * BigInt::from(inst.pieces)
}

/// The steps cut bound of node set `nodes`: the pieces that must leave it, at most one per up
/// link leaving it and step, rounded up. With `into`, the same for the complement.
pub(crate) fn steps_cut(inst: &Instance, nodes: &[usize], into: bool) -> Result<Q, String> {
    let u = membership(inst, nodes, into)?;
    let pieces = pieces_crossing(inst, &u);
    let links = inst.links.iter().filter(|l| l.up && u[l.src] && !u[l.dst]).count();
    if links == 0 {
        return if pieces.is_zero() { Ok(Q::zero()) } else { Err("no up link crosses the cut, yet pieces must cross it: the instance is infeasible".into()) };
    }
    Ok(ceil_ratio(&pieces, &BigInt::from(links)))
}

/// The steps flow bound of lengths `y` (all_to_all): in T steps a link carries at most T pieces,
/// so `T x sum_e y_e >= sum_e y_e x pieces on e >= sum over pieces of y-distance`; the steps are at
/// least that ratio, rounded up. Every length 1 gives the volume bound, the indicator of a cut
/// the cut's.
pub(crate) fn steps_flow(inst: &Instance, y: &[Q]) -> Result<Q, String> {
    let ints = integer_lengths(inst, y)?;
    let denominator = inst.links.iter().zip(&ints).filter(|(l, _)| l.up).fold(BigInt::zero(), |acc, (_, y)| acc + y);
    if !denominator.is_positive() {
        return Err("the steps flow lengths give every up link length 0".into());
    }
    // A demand with bytes is `pieces` pieces; one without is none.
    let pieces = Q::from_integer(BigInt::from(inst.pieces));
    let weight = |bytes: &Q| if bytes.is_positive() { pieces.clone() } else { Q::zero() };
    let numerator = demand_distance(inst, &ints, &weight, "steps flow")?.to_integer();
    Ok(ceil_ratio(&numerator, &denominator))
}

/// The steps arrival bound (docs/design/MODEL.md section 6) of `rank` at `distance` d >= 1. A value
/// that starts at a rank u and is needed at a rank v crosses a chain of at least dist(u, v)
/// transfers in successive steps (a rank forwards only what it held at the start of the step);
/// the last enters v, the first leaves u. So, with `into`, each piece that `rank` needs from a
/// rank d or more hops away enters it in a step no earlier than d; such pieces: all_to_all and
/// all_gather, every such source's pieces; reduce_scatter, the pieces of the rank's own block
/// (each needs the farthest contribution); all_reduce, every piece. Without `into`, each piece
/// that a rank d or more hops away needs of `rank` leaves it in a step no later than T - d + 1:
/// all_to_all and reduce_scatter, every such destination's pieces; all_gather, the rank's own
/// block; all_reduce, every piece. A link carries one piece per step, so the up links entering
/// (leaving) the rank carry them in `links x (T - d + 1)` slots at most:
/// `T >= d - 1 + ceil(pieces / links)`.
pub(crate) fn steps_arrival(inst: &Instance, rank: usize, into: bool, distance: u64) -> Result<Q, String> {
    if rank >= inst.nodes || !inst.ranks.contains(&rank) {
        return Err(format!("node {rank} is not a rank of the collective"));
    }
    if distance == 0 {
        return Err("distance 0: the bound counts pieces at least one hop away".into());
    }
    let adj = if into {
        let mut reversed = vec![Vec::new(); inst.nodes];
        for (i, l) in inst.links.iter().enumerate().filter(|(_, l)| l.up) {
            reversed[l.dst].push((i, l.src));
        }
        reversed
    } else {
        inst.up_adjacency()
    };
    let dist = single_hops(inst, &adj, rank);
    let mut far = 0u64;
    for &x in inst.ranks.iter().filter(|&&x| x != rank) {
        let (s, d) = if into { (x, rank) } else { (rank, x) };
        if !inst.is_required_pair(s, d) {
            continue;
        }
        let h = dist[x].ok_or_else(|| format!("node {d} cannot be reached from node {s} over up links"))?;
        if h >= distance {
            far += 1;
        }
    }
    let (r, p) = (inst.ranks.len() as u64, u64::from(inst.pieces));
    let pieces = match (&inst.demands, into) {
        (Demands::UniformAllToAll(_) | Demands::AllToAll(_), _)
        | (Demands::Blocks { kind: BlockKind::AllGather, .. }, true)
        | (Demands::Blocks { kind: BlockKind::ReduceScatter, .. }, false) => far * p,
        (Demands::Blocks { kind: BlockKind::AllGather, .. }, false) | (Demands::Blocks { kind: BlockKind::ReduceScatter, .. }, true) => u64::from(far > 0) * p,
        (Demands::Blocks { kind: BlockKind::AllReduce, .. }, _) => u64::from(far > 0) * r * p,
    };
    let links = inst.links.iter().filter(|l| l.up && if into { l.dst == rank } else { l.src == rank }).count();
    if pieces == 0 {
        return Ok(Q::zero());
    }
    if links == 0 {
        return Err(format!("no up link {} node {rank}, yet pieces must", if into { "enters" } else { "leaves" }));
    }
    Ok(Q::from_integer(BigInt::from(distance - 1)) + ceil_ratio(&BigInt::from(pieces), &BigInt::from(links)))
}
