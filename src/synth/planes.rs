//! All-to-all on a 3-D torus too large for the flat searches, by **planes and lines**
//! (docs/design/ALGORITHMS.md "Planes and lines").
//!
//! Pick a *line* dimension along which no link has failed; the other two span the *planes*. Every
//! piece moves in two stages: within its source's plane to its destination's plane coordinates,
//! and along its line to the destination's line coordinate, or the other way round. The pieces are
//! cut into two chunks that take the stages in opposite orders, so in either phase one chunk uses
//! the plane links and the other the line links, all at once (DimRotation with a plane as one
//! "dimension"). On an equal-radix torus both stages move the same link load per phase.
//!
//! Every plane runs one schedule: the time-expanded routing ([`super::routing`]) of a plane
//! all-to-all on a 2-D torus that has every plane's failed links (projected along the line), so it
//! is valid in each plane. The lines run a store-and-forward schedule built greedily into the
//! plane schedule's steps: each step a line link carries at most what the busiest plane link
//! carries in that step, the pieces with the most hops left first, so the lines do not lengthen
//! the steps. A step of the plane schedule is so one step of the whole, all planes and lines
//! together.
//!
//! The chunks: with a line of a multiple of 4 npus the pieces to even line offsets take the plane
//! first and those to odd offsets the line first (one piece per block; both halves cross the same
//! summed ring distance); otherwise every block has two pieces, piece 0 plane first and piece 1
//! line first.

use super::routing::{self, TimedCandidate};
use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::Result;
use crate::schedule::{Op, Step, Transfer};
use crate::topology::{torus, LinkClass, LinkId, NodeId, Topology, TorusParams, TorusShape};
use crate::units::to_f64;
use rayon::prelude::*;
use std::time::Instant;

/// Piece counts per plane block tried by the plane routing, in this order while time remains,
/// those that divide the original pieces a plane block carries (16x16 with a failed cable: 4
/// pieces routed 1.2% above the plane's bound).
const PLANE_PIECE_COUNTS: [u32; 7] = [4, 2, 8, 6, 3, 5, 1];

/// How the original pieces are cut into the two chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunks {
    /// One piece per block: line offsets even go plane first, odd line first.
    Parity,
    /// Two pieces per block: piece 0 plane first, piece 1 line first.
    Halves,
}

impl Chunks {
    /// The chunk of piece `k` of a block whose ends lie `offset` apart along the line (0: plane
    /// first, 1: line first).
    fn of(self, offset: usize, k: u32) -> usize {
        match self {
            Chunks::Parity => offset % 2,
            Chunks::Halves => k as usize,
        }
    }

    fn pieces(self) -> u32 {
        match self {
            Chunks::Parity => 1,
            Chunks::Halves => 2,
        }
    }

    /// `(offset, piece)` of the blocks in `chunk`, in order: what one plane block of that chunk's
    /// plane stage carries (one per line coordinate of the far end).
    fn members(self, n: usize, chunk: usize) -> Vec<(usize, u32)> {
        (0..n).flat_map(|d| (0..self.pieces()).map(move |k| (d, k))).filter(|&(d, k)| self.of(d, k) == chunk).collect()
    }
}

/// The torus split into planes and lines, and the links by node, dimension and direction.
struct Split {
    shape: TorusShape,
    line: usize,
    plane: [usize; 2],
    /// `links[(node * 3 + dim) * 2 + negative]`.
    links: Vec<LinkId>,
}

impl Split {
    fn link(&self, node: NodeId, dim: usize, positive: bool) -> LinkId {
        self.links[(node.index() * 3 + dim) * 2 + usize::from(!positive)]
    }

    /// The npu at plane position `p` (plane dim 0 fastest) and line coordinate `z`.
    fn node(&self, p: usize, z: usize) -> NodeId {
        let n0 = self.shape.dims[self.plane[0]];
        let mut coord = [0usize; 3];
        coord[self.plane[0]] = p % n0;
        coord[self.plane[1]] = p / n0;
        coord[self.line] = z;
        NodeId(self.shape.node_at(&coord).expect("in range").0)
    }

    fn line_len(&self) -> usize {
        self.shape.dims[self.line]
    }
}

/// The split of `t` for `c`, when planes and lines apply: a 3-D torus of rings, every npu a rank in
/// node order, uniform blocks, and a dimension along which no link has failed (the one whose
/// planes hold the fewest distinct failed positions).
fn split(t: &Topology, c: &Collective) -> Option<Split> {
    let shape = t.torus_shape()?.clone();
    let uniform_ranks = c.ranks.len() == t.num_nodes() && c.ranks.iter().enumerate().all(|(i, r)| r.index() == i);
    if shape.ndims() != 3 || !(0..3).all(|d| shape.is_ring(d)) || !uniform_ranks || !c.is_uniform() || c.kind != CollectiveKind::AllToAll {
        return None;
    }
    let mut links = vec![LinkId(u32::MAX); t.num_nodes() * 6];
    for (id, l) in t.links() {
        if let LinkClass::TorusDim { dim, positive } = l.class {
            links[(l.src.index() * 3 + dim as usize) * 2 + usize::from(!positive)] = id;
        }
    }
    let down: Vec<(usize, NodeId)> = t
        .down_links()
        .iter()
        .filter_map(|&l| match t.link(l).class {
            LinkClass::TorusDim { dim, .. } => Some((dim as usize, t.link(l).src)),
            _ => None,
        })
        .collect();
    let line = (0..3).filter(|&d| down.iter().all(|&(dim, _)| dim != d)).min_by_key(|&d| {
        let mut positions: Vec<(usize, usize, usize)> =
            down.iter().map(|&(dim, src)| (dim, shape.coord_in(src, (d + 1) % 3), shape.coord_in(src, (d + 2) % 3))).collect();
        positions.sort_unstable();
        positions.dedup();
        positions.len()
    })?;
    let plane = [(0..3).find(|&d| d != line)?, (0..3).rev().find(|&d| d != line)?];
    Some(Split { shape, line, plane, links })
}

/// The plane: a 2-D torus of the plane dimensions' speeds with every plane's failed links.
fn plane_topology(t: &Topology, s: &Split) -> Result<Topology> {
    let speed = |dim: usize| {
        t.links().find(|(_, l)| matches!(l.class, LinkClass::TorusDim { dim: d, .. } if d as usize == dim)).map(|(_, l)| (l.bandwidth_gbps, l.latency_ns))
    };
    let (b0, l0) = speed(s.plane[0]).unwrap_or((1.0, 0.0));
    let (b1, l1) = speed(s.plane[1]).unwrap_or((1.0, 0.0));
    let dims = [s.shape.dims[s.plane[0]], s.shape.dims[s.plane[1]]];
    let mut p = torus(&TorusParams { dims: dims.to_vec(), wrap: vec![true, true], bandwidth_gbps: vec![b0, b1], latency_ns: vec![l0, l1] })?;
    for l in t.down_links() {
        let link = t.link(l);
        let LinkClass::TorusDim { dim, positive } = link.class else { continue };
        let Some(which) = s.plane.iter().position(|&d| d == dim as usize) else { continue };
        let at = NodeId((s.shape.coord_in(link.src, s.plane[0]) + dims[0] * s.shape.coord_in(link.src, s.plane[1])) as u32);
        let projected = p.out_links(at).find(|&pl| p.link(pl).class == LinkClass::TorusDim { dim: which as u8, positive });
        if let Some(pl) = projected {
            p.set_down(pl);
        }
    }
    Ok(p)
}

/// A plan: the whole instance's collective and steps.
pub struct Planned {
    /// The collective (pieces per block as the chunks need).
    pub collective: Collective,
    /// The steps.
    pub steps: Vec<Step>,
    /// Pieces per plane block of the plane routing.
    pub plane_pieces: u32,
    /// The plane routing's horizon.
    pub horizon: u32,
}

/// What a plane routing that the deadline cut short before it routed every piece gets once more,
/// at the first piece count (a 16x16 plane's first horizon takes a few seconds).
const LATE_ROUTING: std::time::Duration = std::time::Duration::from_secs(20);

/// The planes-and-lines schedule of `c` on `t` over the fastest plane routing found before
/// `deadline` (`None` when the split does not apply or the routing found nothing), and whether the
/// deadline cut the routing's sweep short. A sweep cut short before its first routing is run once
/// more past the deadline ([`LATE_ROUTING`]).
pub fn plan(t: &Topology, c: &Collective, deadline: Instant, progress: &mut dyn FnMut(&str)) -> Result<(Option<Planned>, bool)> {
    let Some(s) = split(t, c) else { return Ok((None, false)) };
    let n = s.line_len();
    let chunks = if n % 4 == 0 { Chunks::Parity } else { Chunks::Halves };
    let members = [chunks.members(n, 0), chunks.members(n, 1)];
    // Both plane stages carry the same pieces per plane block (n/2 or n); `Halves` is even split.
    let per_plane_block = members[0].len();
    if members[1].len() != per_plane_block {
        return Ok((None, false));
    }
    let r = c.num_ranks() as u128;
    let plane = plane_topology(t, &s)?;
    let plane_ranks = plane.num_nodes() as u128;
    // Plane bytes per rank: a plane block carries `per_plane_block` original pieces.
    let numer = u128::from(c.bytes_per_rank) * plane_ranks * per_plane_block as u128;
    let denom = r * u128::from(chunks.pieces());
    if numer % denom != 0 || plane.check_connected(&plane.node_ids().collect::<Vec<_>>()).is_err() {
        return Ok((None, false));
    }
    let pc = Collective::new(CollectiveKind::AllToAll, plane.node_ids().collect(), (numer / denom) as u64, 1, None, &plane)?;
    let counts: Vec<u32> = PLANE_PIECE_COUNTS.iter().copied().filter(|&p| per_plane_block % p as usize == 0).collect();
    let mut sweep = routing::candidates(&plane, &pc, &counts, deadline, progress)?;
    if sweep.found.is_empty() && sweep.cut_short {
        // Nothing else answers an all_to_all this large: a late plane routing beats none.
        sweep = routing::candidates(&plane, &pc, &counts[..1], Instant::now() + LATE_ROUTING, progress)?;
        sweep.cut_short = true;
    }
    let Some(best) = sweep.found.into_iter().next() else { return Ok((None, sweep.cut_short)) };
    let collective = Collective::new(CollectiveKind::AllToAll, c.ranks.clone(), c.bytes_per_rank, chunks.pieces(), None, t)?;
    progress(&format!("planes and lines: composing {} plane steps on every plane and line", best.steps.len()));
    let steps = compose(t, &s, &plane, &best, &members, chunks, &collective);
    let planned = Planned { collective, steps, plane_pieces: best.pieces, horizon: best.params.steps };
    Ok((Some(planned), sweep.cut_short))
}

/// The two phases: the plane schedule in every plane, the greedy line schedule in every line.
fn compose(t: &Topology, s: &Split, plane: &Topology, routed: &TimedCandidate, members: &[Vec<(usize, u32)>; 2], chunks: Chunks, c: &Collective) -> Vec<Step> {
    let n = s.line_len();
    let piece_bytes = to_f64(&c.piece_size_at(0));
    let line_gbps = t.link(s.link(s.node(0, 0), s.line, true)).bandwidth_gbps;
    // What a line link may carry in each plane step: as many pieces as fit in the time the busiest
    // plane link takes.
    let plane_piece_bytes = to_f64(&routed.collective.piece_size_at(0));
    let capacity: Vec<usize> = routed
        .steps
        .iter()
        .map(|st| {
            let ns = st.transfers.iter().map(|tr| tr.pieces.len() as f64 * plane_piece_bytes / min_gbps(plane, &tr.path)).fold(0.0, f64::max);
            ((ns * line_gbps / piece_bytes) * (1.0 + 1e-9)).floor().max(1.0) as usize
        })
        .collect();
    let mut out = Vec::new();
    for (phase, plane_members) in members.iter().enumerate() {
        // The plane stage carries the chunk that goes plane first in phase 0, the other in phase 1.
        let plane_steps = plane_phase(s, plane, routed, plane_members, phase);
        let line_chunk = 1 - phase;
        let line_steps = line_phase(s, n, &capacity, chunks, line_chunk, phase);
        let len = plane_steps.len().max(line_steps.len());
        let (mut ps, mut ls) = (plane_steps.into_iter(), line_steps.into_iter());
        for _ in 0..len {
            let mut step = ps.next().unwrap_or_default();
            step.transfers.extend(ls.next().unwrap_or_default().transfers);
            out.push(step);
        }
    }
    out
}

/// The least bandwidth along a path.
fn min_gbps(t: &Topology, path: &[LinkId]) -> f64 {
    path.iter().map(|&l| t.link(l).bandwidth_gbps).fold(f64::INFINITY, f64::min)
}

/// The plane stage of `phase` in every plane: plane piece `[i, j, k]` carries the original pieces
/// of the `k`-th share of `members` between plane positions i and j.
fn plane_phase(s: &Split, plane: &Topology, routed: &TimedCandidate, members: &[(usize, u32)], phase: usize) -> Vec<Step> {
    let n = s.line_len();
    let share = members.len() / routed.pieces as usize;
    let plane_dims = [s.plane[0], s.plane[1]];
    routed
        .steps
        .par_iter()
        .map(|st| {
            let mut transfers = Vec::with_capacity(st.transfers.len() * n);
            for z in 0..n {
                for tr in &st.transfers {
                    let path: Vec<LinkId> = tr
                        .path
                        .iter()
                        .map(|&pl| {
                            let link = plane.link(pl);
                            let LinkClass::TorusDim { dim, positive } = link.class else { unreachable!("a torus has torus links only") };
                            s.link(s.node(link.src.index(), z), plane_dims[dim as usize], positive)
                        })
                        .collect();
                    let mut pieces = Vec::with_capacity(tr.pieces.len() * share);
                    for pp in &tr.pieces {
                        let parts = pp.parts();
                        let (i, j, k) = (parts[0] as usize, parts[1] as usize, parts[2] as usize);
                        for &(d, piece) in &members[k * share..(k + 1) * share] {
                            // Phase 0: from line coordinate z to z + d; phase 1: from z - d to z.
                            let (zs, zd) = if phase == 0 { (z, (z + d) % n) } else { ((z + n - d) % n, z) };
                            pieces.push(PieceId::a2a(s.node(i, zs).0, s.node(j, zd).0, piece));
                        }
                    }
                    transfers.push(Transfer { path, op: Op::Copy, pieces });
                }
            }
            Step { transfers }
        })
        .collect()
}

/// One member of a line block in flight: from line coordinate `from` to `from + offset`, the
/// block's `member`-th (a plane position of the far end with a piece), now at `at`.
#[derive(Clone, Copy, Debug)]
struct Parcel {
    from: usize,
    offset: usize,
    positive: bool,
    member: usize,
    at: usize,
}

/// The line stage of `phase` (carrying `chunk`) on one line, greedily: each step every line link
/// carries up to the step's capacity of the parcels waiting at its tail, those with the most hops
/// left first; then copied to every line. Phase 0 moves a piece from its source's line position
/// (the chunk goes line first), phase 1 to its destination's (plane first, then line).
fn line_phase(s: &Split, n: usize, capacity: &[usize], chunks: Chunks, chunk: usize, phase: usize) -> Vec<Step> {
    let plane_ranks = s.shape.num_nodes() / n;
    // The members of a line block at offset d: (plane position of the far end, piece).
    let members = |d: usize| -> Vec<(usize, u32)> {
        (0..plane_ranks).flat_map(|q| (0..chunks.pieces()).map(move |k| (q, k))).filter(|&(_, k)| chunks.of(d, k) == chunk).collect()
    };
    let by_offset: Vec<Vec<(usize, u32)>> = (0..n).map(members).collect();
    // Every unit of every block, with its direction (half of the antipodal ones each way).
    let mut waiting: Vec<Vec<Parcel>> = vec![Vec::new(); n * 2];
    for from in 0..n {
        for (d, block) in by_offset.iter().enumerate().skip(1) {
            let m = block.len();
            for member in 0..m {
                let positive = 2 * d < n || (2 * d == n && member < m / 2);
                waiting[from * 2 + usize::from(!positive)].push(Parcel { from, offset: d, positive, member, at: from });
            }
        }
    }
    let hops_left = |p: &Parcel| {
        let to = (p.from + p.offset) % n;
        if p.positive {
            (to + n - p.at) % n
        } else {
            (p.at + n - to) % n
        }
    };
    let last = capacity.iter().copied().max().unwrap_or(1);
    let mut steps: Vec<Vec<(usize, bool, Vec<Parcel>)>> = Vec::new();
    while waiting.iter().any(|w| !w.is_empty()) {
        let cap = capacity.get(steps.len()).copied().unwrap_or(last);
        let mut moves = Vec::new();
        let mut arriving: Vec<Vec<Parcel>> = vec![Vec::new(); n * 2];
        for (slot, queue) in waiting.iter_mut().enumerate() {
            if queue.is_empty() {
                continue;
            }
            let (at, positive) = (slot / 2, slot % 2 == 0);
            // Most hops left first; ties by block and member, so the schedule is deterministic.
            queue.sort_by_key(|p| (std::cmp::Reverse(hops_left(p)), p.from, p.offset, p.member));
            let take = cap.min(queue.len());
            let moved: Vec<Parcel> = queue.drain(..take).collect();
            let next = if positive { (at + 1) % n } else { (at + n - 1) % n };
            for p in &moved {
                let q = Parcel { at: next, ..*p };
                if hops_left(&q) > 0 {
                    arriving[next * 2 + usize::from(!positive)].push(q);
                }
            }
            moves.push((at, positive, moved));
        }
        for (slot, mut a) in arriving.into_iter().enumerate() {
            waiting[slot].append(&mut a);
        }
        steps.push(moves);
    }
    steps
        .into_par_iter()
        .map(|moves| {
            let mut transfers = Vec::new();
            for column in 0..plane_ranks {
                for (at, positive, parcels) in &moves {
                    let link = s.link(s.node(column, *at), s.line, *positive);
                    let pieces = parcels
                        .iter()
                        .map(|p| {
                            let (q, k) = by_offset[p.offset][p.member];
                            let to = (p.from + p.offset) % n;
                            // Phase 0: this column is the source's, q the destination's plane
                            // position; phase 1 the other way round.
                            let (src, dst) = if phase == 0 { (s.node(column, p.from), s.node(q, to)) } else { (s.node(q, p.from), s.node(column, to)) };
                            PieceId::a2a(src.0, dst.0, k)
                        })
                        .collect();
                    transfers.push(Transfer::hop(link, Op::Copy, pieces));
                }
            }
            Step { transfers }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{Schedule, ScheduleHeader};
    use std::time::Duration;

    /// A cable by the coordinates of its ends.
    type Cable = ([usize; 3], [usize; 3]);

    /// A torus with `cables` failed, and its all_to_all.
    fn instance(dims: &[usize], cables: &[Cable]) -> (Topology, Collective) {
        let mut t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).unwrap();
        let shape = t.torus_shape().unwrap().clone();
        for (a, b) in cables {
            let (a, b) = (shape.node_at(a).unwrap(), shape.node_at(b).unwrap());
            for (x, y) in [(a, b), (b, a)] {
                t.set_down(t.link_between(x, y).unwrap());
            }
        }
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 3 << 20, 1, None, &t).unwrap();
        (t, c)
    }

    fn planned(t: &Topology, c: &Collective) -> Planned {
        let deadline = Instant::now() + Duration::from_secs(3);
        plan(t, c, deadline, &mut |_| {}).unwrap().0.expect("planes and lines apply")
    }

    /// Lines of 4 (one piece per block) and of 6 and 5 (two), healthy and with failed cables in
    /// one or both plane dimensions.
    #[test]
    fn planes_and_lines_verify_with_every_rule() {
        let cases: [(&[usize], &[Cable]); 5] = [
            (&[4, 4, 4], &[([0, 0, 0], [1, 0, 0])]),
            (&[4, 4, 4], &[]),
            (&[6, 4, 6], &[([1, 2, 3], [1, 3, 3]), ([5, 0, 0], [0, 0, 0])]),
            (&[5, 3, 4], &[([2, 1, 0], [2, 1, 1])]),
            (&[4, 6, 5], &[([0, 0, 0], [0, 0, 1]), ([3, 5, 2], [3, 5, 3])]),
        ];
        for (dims, cables) in cases {
            assert_verifies(dims, cables);
        }
    }

    fn assert_verifies(dims: &[usize], cables: &[Cable]) {
        let (t, c) = instance(dims, cables);
        let p = planned(&t, &c);
        let s = Schedule { header: ScheduleHeader { topology: t.clone(), collective: p.collective.clone(), meta: None }, steps: p.steps };
        let r = crate::verify::verify_every_rule(&s);
        assert!(r.is_valid(), "{dims:?} {cables:?}: {:?}", r.findings.failures().first());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 12, failure_persistence: None, ..Default::default() })]

        /// Any radixes 3-6, one or two failed cables in two of the dimensions at any positions: the
        /// schedule verifies with every rule.
        #[test]
        fn any_torus_and_faults_verify(dims in proptest::collection::vec(3usize..7, 3), spared in 0usize..3, faults in proptest::collection::vec((0usize..2, 0usize..216), 0..3)) {
            let cables: Vec<Cable> = faults
                .iter()
                .map(|&(which, at)| {
                    let dim = (spared + 1 + which) % 3;
                    let a = [at % dims[0], at / 6 % dims[1], at / 36 % dims[2]];
                    let mut b = a;
                    b[dim] = (a[dim] + 1) % dims[dim];
                    (a, b)
                })
                .collect();
            let mut unique = cables.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_verifies(&dims, &unique);
        }
    }
}
