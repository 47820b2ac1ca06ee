//! MATE and MATEe (docs/design/ALGORITHMS.md, "Many dimensions"): HalfRing + DimRotation on a torus whose
//! faulty rings (rings with failed cables) are relieved by acceleration phases over detours through
//! parallel healthy rings.
//!
//! Shape of the schedule:
//! - Normal slots, as DimRotation: one chunk per dimension of size > 1, chunk i visits the
//!   dimensions i, i+1, ... Healthy rings run HalfRing, lines route along the line. A faulty ring
//!   sends nothing (MATE) or a share of its chunk by FoldedRing (MATEe).
//! - After every slot, acceleration: every faulty ring moves what is left of the chunk it held in
//!   that slot. It has to come right after the slot and not at the end, because the chunk's later
//!   phases (other dimensions) start from where the pieces sit after this dimension's phase.
//!   Each plane that holds the faulty ring offers a virtual ring: the CW hop r_c => r_{c+1} is the
//!   routed detour up to a healthy parallel ring on the + side, along it, and back down; the ACW
//!   hop r_{c+1} => r_c is the mirror over the - side. At every ring node the four links of that
//!   plane are then used once each (up-out, down-in for CW; down-out, up-in for ACW), so the
//!   virtual ring runs HalfRing at full speed, and planes are orthogonal, so their virtual rings
//!   never share a link. With one failed cable a share also runs by FoldedRing inside the ring.
//!   A plane with a usable side on one side only offers a one-sided virtual ring (CW and ACW hops
//!   over that side, taking turns on its cross cables). A failed cable in a dimension of size 2
//!   (one cable) leaves nothing to fold: all its data goes over the detours, each side of a
//!   plane one of its own. Faulty rings whose links do not meet share one acceleration phase;
//!   those that compete for links get phases of their own.
//!
//! Shares are counted in part indices: every chunk holds `q` part indices of every block
//! (P = chunks * q pieces per block), and each plan carries a whole number of them. Plans that run
//! at the same time are merged on a common clock: a sub-step that moves w part indices per link
//! lasts w units, a unit of a dimension of radix N over links of bandwidth B lasts a whole number
//! of ticks proportional to 1/(N B) (one part index of a block is S/(N P) bytes; a detour moves
//! at the slower of its ring's and its plane's links: [`Clock`]), and every change of sub-step in
//! any plan starts a new step. So a short plan never pads a long one, MATEe's share ends with the
//! slowest healthy ring by bandwidth as well as radix, and on equal radices and bandwidths the
//! step-synchronous bandwidth term is exactly the longest plan's units. Plans of unequal ticks would cut each
//! other's units on that clock, so there each radix merges alone and the radices are laid out as
//! DimRotation lays out a slot's phases (the slowest at full rate, the others filling its steps):
//! 3x5 with a cable of a 3-ring down, MATE, 0.9 -> 0.85 S/B, the 5-ring's slots plus acceleration.

use super::dims::{cable_up, down_cables, names, spread};
use super::ring::{Move as RingMove, Part, RingKind, RingPlan};
use super::scheduler::place;
use super::Scheduler;
use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::schedule::{Op, Schedule, ScheduleHeader, Step, Transfer};
use crate::topology::{LinkId, NodeId, Topology, TorusShape};
use crate::units::{rational_from_decimal, Rational};
use num_traits::Zero;
use std::collections::{BTreeSet, HashSet};
use std::rc::Rc;

/// The most part indices per chunk tried when sizing the shares: more would round the shares
/// more finely but multiply the pieces (and the verifier's work) for a few percent at most.
const MAX_PARTS_PER_CHUNK: usize = 12;

/// MATE (enhanced = false) or MATEe (enhanced = true) all-to-all on a faulty torus.
///
/// `topology` is a torus (or mesh) with the faults applied as down links; `collective` an
/// all-to-all over every npu in id order (its `pieces` is ignored: the generator picks the part
/// indices per chunk that give the fastest rounding of the shares, at most 12, and P = chunks times
/// that). Healthy rings run HalfRing + DimRotation. A ring with failed cables sends nothing in the
/// normal phases (MATE) or a share of its data by FoldedRing (MATEe, one failed cable only); the
/// rest goes in an acceleration phase after every slot, over detour rings through healthy
/// parallel rings (one per plane, two-sided or one-sided), plus FoldedRing inside the ring where
/// it can run. The meta records the
/// shares, pieces, faulty rings, planes and acceleration groups.
///
/// Errors: [`Error::bad`] for a topology that is not a torus or a collective that is not an
/// all-to-all over every npu in id order; [`Error::infeasible`] for a failed cable in a line of
/// three or more npus (no wrap-around), or a ring that FoldedRing cannot run (two or more failed
/// cables, or the one cable of a dimension of size 2) and that no plane offers a detour to.
pub fn torus_mate(topology: &Topology, collective: &Collective, enhanced: bool) -> Result<Schedule> {
    let name = if enhanced { "matee" } else { "mate" };
    let shape = super::torus_all_to_all_shape(topology, collective, name)?;
    let torus = Torus::new(topology, shape)?;
    // Without a faulty ring MATE and MATEe are HalfRing + DimRotation, whose steps fit the
    // phases of unequal radices exactly (the merge below cuts a short ring's sub-steps where a
    // longer ring's change: 3x5 took 0.733 S/B where DimRotation takes the 5-ring's 0.6). A mesh
    // line, which HalfRing refuses, stays with the merge.
    if torus.faulty.is_empty() {
        if let Ok(mut s) = super::torus_all_to_all(topology, collective, super::RingAlgorithm::HalfRing, Scheduler::DimRotation) {
            if let Some(meta) = s.header.meta.as_mut().and_then(|m| m.as_object_mut()) {
                meta.insert("scheduler".into(), name.into());
                meta.insert("faulty_rings".into(), serde_json::json!([]));
                meta.insert("acceleration_groups".into(), serde_json::json!([]));
            }
            return Ok(s);
        }
    }
    let choice = choose(&torus, enhanced);
    let (chunks, phases) = place(Scheduler::DimRotation, torus.dims.len())?;
    let q = choice.parts;
    let pieces = u32::try_from(chunks * q).map_err(|_| Error::bad(format!("{name}: {chunks} chunks are too many pieces")))?;
    let coll =
        Collective::new(CollectiveKind::AllToAll, collective.ranks.clone(), collective.bytes_per_rank, pieces, collective.block_bytes.clone(), topology)?;

    let coords: Vec<Vec<usize>> = (0..shape.num_nodes() as u32).map(|v| shape.coord(NodeId(v))).collect();
    let slots = phases.iter().map(|p| p.slot + 1).max().unwrap_or(0);
    let mut steps = Vec::new();
    for slot in 0..slots {
        // tables[a]: which pairs make up each block in this slot's phase on active dimension a.
        let mut tables: Vec<Option<(usize, Rc<Table>)>> = vec![None; torus.dims.len()];
        let mut tracks = Vec::new();
        for p in phases.iter().filter(|p| p.slot == slot) {
            let d = &torus.dims[p.dim];
            let done: Vec<usize> = p.done.iter().map(|&a| torus.dims[a].dim).collect();
            let table = Rc::new(pair_table(shape, &coords, d.dim, &done));
            let parts: Vec<u32> = (p.chunk * q..(p.chunk + 1) * q).map(|k| k as u32).collect();
            for line in &d.lines {
                match line.faulty {
                    None => tracks.push(plan_track(&d.plan, &line.nodes, d.n, &table, &parts, d.tick, false, &|a, b| direct(topology, &line.nodes, a, b))?),
                    Some(f) if choice.splits[f].normal > 0 => {
                        let ring = &torus.faulty[f];
                        let plan = RingPlan::new(RingKind::Folded { failed: ring.down[0] }, d.n);
                        let share = &parts[..choice.splits[f].normal];
                        tracks.push(plan_track(&plan, &ring.nodes, d.n, &table, share, d.tick, false, &|a, b| direct(topology, &ring.nodes, a, b))?);
                    }
                    Some(_) => {}
                }
            }
            tables[p.dim] = Some((p.chunk, table));
        }
        steps.extend(lay_out(topology, &tracks));
        for group in &torus.groups {
            let mut tracks = Vec::new();
            for &f in group {
                let ring = &torus.faulty[f];
                let d = &torus.dims[ring.active];
                let Some((chunk, table)) = &tables[ring.active] else { continue };
                let split = &choice.splits[f];
                let parts: Vec<u32> = (chunk * q + split.normal..(chunk + 1) * q).map(|k| k as u32).collect();
                let (folded, mut rest) = parts.split_at(split.folded);
                if !folded.is_empty() {
                    let plan = RingPlan::new(RingKind::Folded { failed: ring.down[0] }, d.n);
                    tracks.push(plan_track(&plan, &ring.nodes, d.n, table, folded, d.tick, false, &|a, b| direct(topology, &ring.nodes, a, b))?);
                }
                // The virtual ring runs what the dimension's healthy rings run (HalfRing; the
                // single hop each way in a dimension of size 2).
                for (detour, &count) in ring.detours.iter().zip(&split.virt) {
                    let (mine, later) = rest.split_at(count);
                    rest = later;
                    tracks.push(plan_track(&d.plan, &ring.nodes, d.n, table, mine, detour.tick, detour.serial, &|a, b| Ok(detour.hop(d.n, a, b)))?);
                }
                debug_assert!(rest.is_empty(), "every remaining part index has a plan");
            }
            steps.extend(lay_out(topology, &tracks));
        }
    }

    let rings = faulty_rings_json(&torus, &choice, q);
    let meta = serde_json::json!({
        "algorithm": "halfring",
        "scheduler": name,
        "chunks": chunks,
        "pieces": pieces,
        "parts_per_chunk": q,
        "faulty_rings": rings,
        "acceleration_groups": torus.groups,
    });
    Ok(Schedule { header: ScheduleHeader { topology: topology.clone(), collective: coll, meta: Some(meta) }, steps })
}

/// The schedule's `meta.faulty_rings`: per faulty ring its nodes and failed cables, the share of
/// parts it keeps on its own ring (and the share the bandwidth terms aim at), and where the
/// acceleration phases send the rest (folded, over detours through which planes).
fn faulty_rings_json(torus: &Torus, choice: &Choice, q: usize) -> Vec<serde_json::Value> {
    torus
        .faulty
        .iter()
        .zip(&choice.splits)
        .map(|(r, s)| {
            let n = r.nodes.len();
            serde_json::json!({
                "dim": r.dim,
                "nodes": r.nodes.iter().map(|v| v.0).collect::<Vec<_>>(),
                "failed_cables": r.down.iter().map(|&c| [r.nodes[c].0, r.nodes[(c + 1) % n].0]).collect::<Vec<_>>(),
                "share": s.normal as f64 / q as f64,
                "share_parts": s.normal,
                // T_HalfRing / T_FoldedRing by bandwidth terms: their units for two part indices.
                "target_share": if r.folds() { Some(units(&RingPlan::new(RingKind::HalfRing, n), 2) as f64 / (n * (n - 1)) as f64) } else { None },
                "acceleration": {"folded_parts": s.folded, "detour_parts": s.virt},
                "planes": r.detours.iter().map(|d| serde_json::json!({"dim": d.plane, "up": d.up, "down": d.down, "one_sided": d.up.is_none() || d.down.is_none()})).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// `table[node * n + d]`: the (source, destination) rank pairs whose pieces sit at `node` and are
/// bound for coordinate `d` of dimension `x`, in a phase on `x` after the dimensions `done`.
type Table = Vec<Vec<(u32, u32)>>;

/// Where a piece sits follows from the dimensions its chunk has finished: their coordinates are
/// the destination's, the others still the source's (faulty rings included: their acceleration
/// ends before the chunk's next phase).
fn pair_table(shape: &TorusShape, coords: &[Vec<usize>], x: usize, done: &[usize]) -> Table {
    let n = shape.dims[x];
    let mut finished = vec![false; shape.ndims()];
    for &d in done {
        finished[d] = true;
    }
    let strides: Vec<usize> = (0..shape.ndims()).map(|d| shape.stride(d)).collect();
    let mut table = vec![Vec::new(); coords.len() * n];
    for (i, ci) in coords.iter().enumerate() {
        for (j, cj) in coords.iter().enumerate() {
            if i == j || ci[x] == cj[x] {
                continue;
            }
            let at: usize = (0..shape.ndims()).map(|d| (if finished[d] { cj[d] } else { ci[d] }) * strides[d]).sum();
            table[at * n + cj[x]].push((i as u32, j as u32));
        }
    }
    table
}

/// A dimension of size > 1 and its lines.
struct Dim {
    dim: usize,
    n: usize,
    /// Ticks per unit ([`Clock`]).
    tick: usize,
    /// What its healthy lines run: HalfRing on a ring, routing along a line.
    plan: RingPlan,
    lines: Vec<Line>,
}

struct Line {
    nodes: Vec<NodeId>,
    /// Index into [`Torus::faulty`] for a ring with failed cables.
    faulty: Option<usize>,
}

/// The virtual ring one plane offers a faulty ring.
struct Detour {
    /// The other dimension of the plane.
    plane: usize,
    /// How far the healthy parallel rings are on the + and - sides (the nearest healthy ones);
    /// `None` for a side the detour does not use.
    up: Option<usize>,
    down: Option<usize>,
    /// `cw[c]`: r_c => r_{c+1} over the + side; `acw[c]`: r_{c+1} => r_c over the - side (over
    /// the one side for a one-sided detour).
    cw: Vec<Vec<LinkId>>,
    acw: Vec<Vec<LinkId>>,
    /// A one-sided detour of a ring of three or more: its CW and ACW hops leave and enter the ring
    /// nodes over the same cross cables, so they take turns (each sub-step runs its CW moves,
    /// then its ACW ones) and the detour runs at half speed.
    serial: bool,
    /// Ticks per unit over its links (the slower of the ring's and the plane's).
    tick: usize,
}

impl Detour {
    /// The routed path of the virtual hop between ring positions `a` and `b` (neighbours).
    fn hop(&self, n: usize, a: usize, b: usize) -> Vec<LinkId> {
        if b == (a + 1) % n {
            self.cw[a].clone()
        } else {
            debug_assert_eq!(a, (b + 1) % n, "HalfRing moves one hop at a time");
            self.acw[b].clone()
        }
    }
}

struct FaultyRing {
    dim: usize,
    /// Index into [`Torus::dims`].
    active: usize,
    nodes: Vec<NodeId>,
    /// The failed cables (cable c joins positions c and c + 1 mod n).
    down: Vec<usize>,
    detours: Vec<Detour>,
    /// Every link its acceleration may use: its own and its detours'.
    links: HashSet<LinkId>,
}

impl FaultyRing {
    /// FoldedRing runs only around a single failed cable of a ring of three or more (a dimension
    /// of size 2 is one cable: down, nothing is left to fold over).
    fn folds(&self) -> bool {
        self.down.len() == 1 && self.nodes.len() > 2
    }
}

struct Torus {
    dims: Vec<Dim>,
    faulty: Vec<FaultyRing>,
    /// Faulty rings whose acceleration runs at the same time (disjoint links).
    groups: Vec<Vec<usize>>,
}

/// The up link `a -> b`; the plans only use cables found up, so a miss is a bug, reported rather
/// than written into a schedule the verifier would reject.
fn up_link(topo: &Topology, a: NodeId, b: NodeId) -> Result<LinkId> {
    match topo.link_between(a, b) {
        Some(l) if topo.link(l).up => Ok(l),
        _ => Err(Error::internal(format!("mate: no up link {}->{} for a planned hop", topo.node(a).name, topo.node(b).name))),
    }
}

/// The path of a plan's hop between positions of a ring or line.
fn direct(topo: &Topology, nodes: &[NodeId], a: usize, b: usize) -> Result<Vec<LinkId>> {
    Ok(vec![up_link(topo, nodes[a], nodes[b])?])
}

/// The common clock of the plans: a unit (one part index of one block of a dimension of radix n,
/// S/(n P) bytes) over links of bandwidth B lasts 1/(n B), counted in ticks so that every such
/// time is a whole number of them. Without usable bandwidths (or where the counts would be too
/// large) every dimension is taken at one bandwidth: lcm(radices) / n ticks.
struct Clock {
    /// Per dimension of the shape: its radix and its links' bandwidth as an exact rational.
    dims: Vec<(usize, Option<Rational>)>,
    /// Ticks are `scale / (n B)`.
    scale: Rational,
}

impl Clock {
    /// The most ticks a unit may take: plans sum units times ticks in `usize`.
    const MAX_TICK: i128 = 1 << 32;

    fn new(topo: &Topology, shape: &TorusShape, active: &[usize]) -> Self {
        let bandwidth = |d: usize| {
            let start = NodeId(0);
            let nodes = shape.line(start, d);
            topo.link_between(nodes[0], nodes[1]).and_then(|l| rational_from_decimal(topo.link(l).bandwidth_gbps)).filter(|b| *b > Rational::zero())
        };
        let with_bandwidth: Vec<(usize, Option<Rational>)> =
            (0..shape.ndims()).map(|d| (shape.dims[d], if shape.dims[d] > 1 { bandwidth(d) } else { None })).collect();
        let scale_of = |dims: &[(usize, Option<Rational>)]| -> Option<Rational> {
            let mut scale: i128 = 1;
            for &a in active {
                for &b in active {
                    let rate = Rational::from_integer(dims[a].0 as i128) * dims[b].1?;
                    let p = *rate.numer();
                    scale = scale.checked_div(gcd_i128(scale, p))?.checked_mul(p)?;
                }
            }
            let scale = Rational::from_integer(scale);
            let fits = active
                .iter()
                .all(|&a| active.iter().all(|&b| (scale / (Rational::from_integer(dims[a].0 as i128) * dims[b].1.unwrap())).to_integer() <= Self::MAX_TICK));
            fits.then_some(scale)
        };
        if let Some(scale) = scale_of(&with_bandwidth) {
            return Clock { dims: with_bandwidth, scale };
        }
        let one: Vec<(usize, Option<Rational>)> = with_bandwidth.iter().map(|&(n, _)| (n, Some(Rational::from_integer(1)))).collect();
        let scale = scale_of(&one).unwrap_or_else(|| Rational::from_integer(1));
        Clock { dims: one, scale }
    }

    /// Ticks a unit of dimension `a`'s blocks takes over links of dimension `b`.
    fn tick(&self, a: usize, b: usize) -> usize {
        let rate = Rational::from_integer(self.dims[a].0 as i128) * self.dims[b].1.unwrap_or_else(|| Rational::from_integer(1));
        usize::try_from((self.scale / rate).ceil().to_integer()).unwrap_or(1).max(1)
    }
}

fn gcd_i128(a: i128, b: i128) -> i128 {
    if b == 0 {
        a.abs()
    } else {
        gcd_i128(b, a % b)
    }
}

impl Torus {
    fn new(topo: &Topology, shape: &TorusShape) -> Result<Self> {
        let active: Vec<usize> = (0..shape.ndims()).filter(|&d| shape.dims[d] > 1).collect();
        let clock = Clock::new(topo, shape, &active);
        let mut dims = Vec::new();
        let mut faulty = Vec::new();
        for (a, &dim) in active.iter().enumerate() {
            let n = shape.dims[dim];
            let ring = shape.is_ring(dim);
            let mut lines = Vec::new();
            for start in (0..shape.num_nodes() as u32).map(NodeId).filter(|&v| shape.coord_in(v, dim) == 0) {
                let nodes = shape.line(start, dim);
                let down = down_cables(topo, &nodes, ring);
                let index = if down.is_empty() {
                    None
                } else if !ring && n > 2 {
                    let c = down[0];
                    return Err(Error::infeasible(format!(
                        "mate: the line along dimension {dim} through {} ({}) has its cable {}-{} down: MATE accelerates rings, and a line \
                         without wrap-around has no other way between its two sides (MATE routes around the failed cable of a \
                         dimension of size 2 only)",
                        topo.node(start).name,
                        names(topo, &nodes),
                        topo.node(nodes[c]).name,
                        topo.node(nodes[c + 1]).name
                    )));
                } else {
                    faulty.push(FaultyRing { dim, active: a, nodes: nodes.clone(), down, detours: Vec::new(), links: HashSet::new() });
                    Some(faulty.len() - 1)
                };
                lines.push(Line { nodes, faulty: index });
            }
            let plan = RingPlan::new(if ring { RingKind::HalfRing } else { RingKind::Line }, n);
            dims.push(Dim { dim, n, tick: clock.tick(dim, dim), plan, lines });
        }
        for ring in &mut faulty {
            for &y in active.iter().filter(|&&y| y != ring.dim) {
                let mut found = detours(topo, shape, &ring.nodes, ring.dim, y)?;
                // A detour moves the ring's units over its own links and the plane's cross links:
                // at the slower of the two.
                let tick = clock.tick(ring.dim, ring.dim).max(clock.tick(ring.dim, y));
                for d in &mut found {
                    d.tick = tick;
                }
                ring.detours.extend(found);
            }
            if !ring.folds() && ring.detours.is_empty() {
                let n = ring.nodes.len();
                let cables: Vec<String> =
                    ring.down.iter().map(|&c| format!("{}-{}", topo.node(ring.nodes[c]).name, topo.node(ring.nodes[(c + 1) % n]).name)).collect();
                let why = if n == 2 { "a dimension of size 2 is one cable" } else { "it folds around one failed cable only" };
                return Err(Error::infeasible(format!(
                    "mate: the ring along dimension {} through {} ({}) has {} failed cables ({}): FoldedRing cannot run in it ({why}), and no \
                     plane offers a detour (no healthy parallel ring reachable over up cables on either side)",
                    ring.dim,
                    topo.node(ring.nodes[0]).name,
                    names(topo, &ring.nodes),
                    ring.down.len(),
                    cables.join(", ")
                )));
            }
            let n = ring.nodes.len();
            for c in 0..n {
                for (u, v) in [(ring.nodes[c], ring.nodes[(c + 1) % n]), (ring.nodes[(c + 1) % n], ring.nodes[c])] {
                    if let Some(l) = topo.link_between(u, v) {
                        ring.links.insert(l);
                    }
                }
            }
            let paths: Vec<LinkId> = ring.detours.iter().flat_map(|d| d.cw.iter().chain(&d.acw)).flatten().copied().collect();
            ring.links.extend(paths);
        }
        // Greedy: a faulty ring joins the first group none of whose rings shares a link with it.
        let mut groups: Vec<(Vec<usize>, HashSet<LinkId>)> = Vec::new();
        for (f, ring) in faulty.iter().enumerate() {
            match groups.iter_mut().find(|(_, used)| used.is_disjoint(&ring.links)) {
                Some((members, used)) => {
                    members.push(f);
                    used.extend(ring.links.iter().copied());
                }
                None => groups.push((vec![f], ring.links.clone())),
            }
        }
        Ok(Torus { dims, faulty, groups: groups.into_iter().map(|(m, _)| m).collect() })
    }
}

/// The virtual rings of the plane (x, y) for the ring `ring` along x: detours up to the nearest
/// healthy parallel ring on each side of y reachable over up cables from every ring node.
///
/// With both sides usable and apart, one two-sided detour (CW over the + side, ACW over the -
/// side). With one side (the other cut off, absent on a mesh edge or in a dimension y of size 2,
/// or meeting the first), a one-sided detour that runs at half speed. A ring of size 2 (one
/// cable) has only the hop each way between its two nodes, over opposite links of one side: each
/// side is a detour at full speed of its own.
fn detours(topo: &Topology, shape: &TorusShape, ring: &[NodeId], x: usize, y: usize) -> Result<Vec<Detour>> {
    let n = ring.len();
    let ny = shape.dims[y];
    let healthy = |r: &[NodeId]| down_cables(topo, r, r.len() > 2).is_empty();
    // columns[p][k]: position p's node k steps away along y on this side (k = 0 is the ring).
    let side = |positive: bool| -> Option<Vec<Vec<NodeId>>> {
        let mut columns: Vec<Vec<NodeId>> = ring.iter().map(|&v| vec![v]).collect();
        for _ in 1..ny {
            for col in columns.iter_mut() {
                let last = *col.last().unwrap();
                let next = shape.neighbor(last, y, positive).filter(|&nb| cable_up(topo, last, nb))?;
                col.push(next);
            }
            let far: Vec<NodeId> = columns.iter().map(|c| *c.last().unwrap()).collect();
            if healthy(&far) {
                return Some(columns);
            }
        }
        None
    };
    let (mut up, mut down) = (side(true), side(false));
    if let (Some(u), Some(d)) = (&up, &down) {
        // The two sides must not meet, or the CW and ACW detours would share links: keep the
        // nearer one.
        let (ku, kd) = (u[0].len() - 1, d[0].len() - 1);
        if ku + kd >= ny {
            if ku <= kd {
                down = None;
            } else {
                up = None;
            }
        }
    }
    let chain = |nodes: &[NodeId]| -> Result<Vec<LinkId>> { nodes.windows(2).map(|w| up_link(topo, w[0], w[1])).collect() };
    // The routed hop r_a => r_b over a side: up its columns, along its far ring, back down.
    let hop = |cols: &[Vec<NodeId>], a: usize, b: usize| -> Result<Vec<LinkId>> {
        let k = cols[0].len() - 1;
        let mut p = chain(&cols[a])?;
        p.push(up_link(topo, cols[a][k], cols[b][k])?);
        p.extend(chain(&cols[b].iter().rev().copied().collect::<Vec<_>>())?);
        Ok(p)
    };
    let build = |cw_side: &[Vec<NodeId>], acw_side: &[Vec<NodeId>], serial: bool, up: Option<usize>, down: Option<usize>| -> Result<Detour> {
        debug_assert!((0..n).all(|p| shape.coord_in(*cw_side[p].last().unwrap(), x) == p), "a parallel ring keeps the ring's positions");
        let cw = (0..n).map(|c| hop(cw_side, c, (c + 1) % n)).collect::<Result<Vec<_>>>()?;
        let acw = (0..n).map(|c| hop(acw_side, (c + 1) % n, c)).collect::<Result<Vec<_>>>()?;
        Ok(Detour { plane: y, up, down, cw, acw, serial, tick: 0 })
    };
    let depth = |cols: &Vec<Vec<NodeId>>| cols[0].len() - 1;
    match (&up, &down) {
        (Some(u), Some(d)) if n > 2 => Ok(vec![build(u, d, false, Some(depth(u)), Some(depth(d)))?]),
        (Some(u), Some(d)) => Ok(vec![build(u, u, false, Some(depth(u)), None)?, build(d, d, false, None, Some(depth(d)))?]),
        (Some(u), None) => Ok(vec![build(u, u, n > 2, Some(depth(u)), None)?]),
        (None, Some(d)) => Ok(vec![build(d, d, n > 2, None, Some(depth(d)))?]),
        (None, None) => Ok(Vec::new()),
    }
}

/// One transfer of a track: the block `block` of its pair table moves along `path`, one part
/// index per unit of its sub-step, in the order of `parts`.
struct Move {
    path: Vec<LinkId>,
    block: usize,
    parts: Vec<u32>,
}

/// A sub-step of a track: `units` units of `tick` ticks each.
struct SubStep {
    tick: usize,
    units: usize,
    moves: Vec<Move>,
}

/// One plan on one ring or line with the part indices it carries, ready to merge.
struct Track {
    table: Rc<Table>,
    subs: Vec<SubStep>,
}

/// How many units a plan lasts carrying `w` part indices: a sub-step of whole blocks moves w per
/// link, one of halves ceil(w/2) (the CW half takes the odd one).
fn units(plan: &RingPlan, w: usize) -> usize {
    plan.substeps().iter().map(|s| if s.iter().any(|m| m.part != Part::Whole) { w.div_ceil(2) } else { w }).sum()
}

/// How many units `plan` lasts over `detour` carrying `w` part indices (a one-sided detour runs
/// every sub-step's CW moves, then its ACW ones).
fn detour_units(plan: &RingPlan, detour: &Detour, n: usize, w: usize) -> usize {
    if !detour.serial {
        return units(plan, w);
    }
    plan.substeps().iter().map(|s| turns(s, n).iter().map(|t| t.iter().map(|m| part_range(m.part, w).len()).max().unwrap_or(0)).sum::<usize>()).sum()
}

/// Which of `w` part indices (by position) a move of `part` carries.
fn part_range(part: Part, w: usize) -> std::ops::Range<usize> {
    let first = w.div_ceil(2);
    match part {
        Part::Whole => 0..w,
        Part::First => 0..first,
        Part::Second => first..w,
    }
}

/// A sub-step's moves in two turns, CW then ACW (by their first hop).
fn turns(sub: &[RingMove], n: usize) -> [Vec<&RingMove>; 2] {
    let (cw, acw): (Vec<&RingMove>, Vec<&RingMove>) = sub.iter().partition(|m| m.path[1] == (m.path[0] + 1) % n);
    [cw, acw]
}

/// `plan` on the ring or line `nodes` carrying the part indices `parts`; `hop(a, b)` is the path
/// of a hop between positions. `serial` runs every sub-step's CW moves, then its ACW ones (a
/// one-sided detour, whose two directions share the cross links).
#[allow(clippy::too_many_arguments)]
fn plan_track(
    plan: &RingPlan,
    nodes: &[NodeId],
    n: usize,
    table: &Rc<Table>,
    parts: &[u32],
    tick: usize,
    serial: bool,
    hop: &dyn Fn(usize, usize) -> Result<Vec<LinkId>>,
) -> Result<Track> {
    let mut subs = Vec::new();
    if parts.is_empty() {
        return Ok(Track { table: table.clone(), subs });
    }
    let first = parts.len().div_ceil(2);
    let to_move = |m: &RingMove| -> Result<Option<Move>> {
        let mine = &parts[part_range(m.part, parts.len())];
        if mine.is_empty() {
            return Ok(None);
        }
        let mut path = Vec::new();
        for w in m.path.windows(2) {
            path.extend(hop(w[0], w[1])?);
        }
        Ok(Some(Move { path, block: nodes[m.origin].index() * n + m.dest, parts: mine.to_vec() }))
    };
    for s in plan.substeps() {
        if serial {
            for turn in turns(s, n) {
                let moves: Vec<Move> = turn.into_iter().map(&to_move).collect::<Result<Vec<_>>>()?.into_iter().flatten().collect();
                let units = moves.iter().map(|m| m.parts.len()).max().unwrap_or(0);
                if units > 0 {
                    subs.push(SubStep { tick, units, moves });
                }
            }
            continue;
        }
        let halves = s.iter().any(|m| m.part != Part::Whole);
        let moves: Vec<Move> = s.iter().map(&to_move).collect::<Result<Vec<_>>>()?.into_iter().flatten().collect();
        subs.push(SubStep { tick, units: if halves { first } else { parts.len() }, moves });
    }
    Ok(Track { table: table.clone(), subs })
}

/// Runs tracks (on disjoint links) at the same time. Tracks of one tick (one radix) merge on their
/// common clock ([`merge`], exact: every cut falls on a unit boundary). Tracks of several radices
/// would cut each other's units where their sub-steps change (a unit is a whole part index and
/// goes where it starts, so a step could hold a short ring's unit beside a sliver of a long
/// ring's: 3x5 with a cable of a 3-ring down, MATE, took 0.9 S/B where the slowest ring and the
/// acceleration take 0.85); there each radix merges alone and the radices are laid out as
/// DimRotation lays out the phases of one slot ([`spread`]: the slowest runs at full rate and the
/// others fill its steps, a step cut in two where a sub-step would not fit).
fn lay_out(topo: &Topology, tracks: &[Track]) -> Vec<Step> {
    let mut ticks: Vec<usize> = tracks.iter().filter_map(|t| t.subs.first().map(|s| s.tick)).collect();
    ticks.sort_unstable();
    ticks.dedup();
    if ticks.len() <= 1 {
        return merge(tracks);
    }
    let phases: Vec<Vec<Step>> = ticks
        .iter()
        .map(|&tick| {
            let same: Vec<&Track> = tracks.iter().filter(|t| t.subs.first().is_some_and(|s| s.tick == tick)).collect();
            merge(&same)
        })
        .collect();
    let len = phases.iter().map(Vec::len).max().unwrap_or(0);
    let mut steps = spread(topo, phases, len);
    steps.retain(|s| !s.transfers.is_empty());
    steps
}

/// Runs tracks (on disjoint links) at the same time: every sub-step boundary of any track starts
/// a new step, and the unit that starts at tick t of a sub-step goes in the step holding t. A
/// part index therefore leaves a node only in a later step than the one that brought it.
fn merge<T: std::borrow::Borrow<Track>>(tracks: &[T]) -> Vec<Step> {
    let mut cuts = BTreeSet::from([0usize]);
    for t in tracks {
        let t = t.borrow();
        let mut at = 0;
        for s in &t.subs {
            at += s.units * s.tick;
            cuts.insert(at);
        }
    }
    let cuts: Vec<usize> = cuts.into_iter().collect();
    let mut steps = vec![Step::default(); cuts.len() - 1];
    for t in tracks {
        let t = t.borrow();
        let mut start = 0;
        for s in &t.subs {
            let end = start + s.units * s.tick;
            let (i0, i1) = (cuts.binary_search(&start).unwrap(), cuts.binary_search(&end).unwrap());
            for (i, step) in steps.iter_mut().enumerate().take(i1).skip(i0) {
                let lo = (cuts[i] - start).div_ceil(s.tick);
                let hi = (cuts[i + 1] - start).div_ceil(s.tick).min(s.units);
                for m in &s.moves {
                    let ks = &m.parts[lo.min(m.parts.len())..hi.min(m.parts.len())];
                    let pieces: Vec<PieceId> = ks.iter().flat_map(|&k| t.table[m.block].iter().map(move |&(a, b)| PieceId::a2a(a, b, k))).collect();
                    if !pieces.is_empty() {
                        step.transfers.push(Transfer { path: m.path.clone(), op: Op::Copy, pieces });
                    }
                }
            }
            start = end;
        }
    }
    steps.retain(|s| !s.transfers.is_empty());
    steps
}

/// The part indices of one chunk a faulty ring sends in the normal slot, by FoldedRing and over
/// each detour in the acceleration phase.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Split {
    normal: usize,
    folded: usize,
    virt: Vec<usize>,
}

struct Choice {
    /// Part indices per chunk.
    parts: usize,
    splits: Vec<Split>,
}

/// Ticks a faulty ring's acceleration lasts for `rem` part indices, and the best split of them
/// between FoldedRing and the detour rings (each part index to the detour that then ends first:
/// evenly over equal detours, half as many to a one-sided one).
fn accelerate(ring: &FaultyRing, d: &Dim, rem: usize) -> (usize, Split) {
    let n = d.n;
    let k = ring.detours.len();
    let cost = |i: usize, w: usize| detour_units(&d.plan, &ring.detours[i], n, w) * ring.detours[i].tick;
    let folds = if ring.folds() { 0..=rem } else { 0..=0 };
    let mut best: Option<(usize, Split)> = None;
    for qf in folds {
        if k == 0 && qf != rem {
            continue;
        }
        let r = rem - qf;
        let mut virt = vec![0; k];
        for _ in 0..r {
            let i = (0..k).min_by_key(|&i| (cost(i, virt[i] + 1), i)).expect("a ring with parts for detours has detours");
            virt[i] += 1;
        }
        let ticks = (0..k).map(|i| cost(i, virt[i])).max().unwrap_or(0).max(n * (n - 1) / 2 * qf * d.tick);
        if best.as_ref().is_none_or(|(t, _)| ticks < *t) {
            best = Some((ticks, Split { normal: 0, folded: qf, virt }));
        }
    }
    best.expect("a ring without detours folds")
}

/// Ticks of one slot and its acceleration phases (every slot is alike under DimRotation).
fn slot_ticks(t: &Torus, healthy: usize, splits: &[Split], accel: &[usize]) -> usize {
    let folded = t.faulty.iter().zip(splits).map(|(r, s)| r.nodes.len() * (r.nodes.len() - 1) / 2 * s.normal * t.dims[r.active].tick).max().unwrap_or(0);
    let phases: usize = t.groups.iter().map(|g| g.iter().map(|&f| accel[f]).max().unwrap_or(0)).sum();
    healthy.max(folded) + phases
}

/// Picks the part indices per chunk and every faulty ring's split for the shortest estimated time
/// per byte. MATEe also tries every normal share per ring (keeping MATE's zero shares when that is
/// no worse), so it is never slower than MATE on the estimate, which is exact on equal radices.
fn choose(t: &Torus, enhanced: bool) -> Choice {
    let mut best: Option<(usize, usize, Vec<Split>)> = None;
    for q in 1..=MAX_PARTS_PER_CHUNK {
        let healthy = t.dims.iter().map(|d| units(&d.plan, q) * d.tick).max().unwrap_or(0);
        let mut plain = Vec::new();
        let mut tuned = Vec::new();
        for r in &t.faulty {
            let d = &t.dims[r.active];
            let fold_ticks = |w: usize| d.n * (d.n - 1) / 2 * w * d.tick;
            plain.push(accelerate(r, d, q));
            let shares = if enhanced && r.folds() { 0..=q } else { 0..=0 };
            let mut pick: Option<(usize, usize, Split)> = None;
            for normal in shares {
                let (ticks, mut split) = accelerate(r, d, q - normal);
                split.normal = normal;
                let total = healthy.max(fold_ticks(normal)) + ticks;
                if pick.as_ref().is_none_or(|(b, _, _)| total < *b) {
                    pick = Some((total, ticks, split));
                }
            }
            let (_, ticks, split) = pick.expect("share 0 is always tried");
            tuned.push((ticks, split));
        }
        let mut options = vec![plain];
        if enhanced {
            options.push(tuned);
        }
        for option in options {
            let accel: Vec<usize> = option.iter().map(|(ticks, _)| *ticks).collect();
            let splits: Vec<Split> = option.into_iter().map(|(_, s)| s).collect();
            let total = slot_ticks(t, healthy, &splits, &accel);
            // Compare time per part index: total / q.
            if best.as_ref().is_none_or(|(bt, bq, _)| total * bq < bt * q) {
                best = Some((total, q, splits));
            }
        }
    }
    let (_, parts, splits) = best.expect("at least one part count is tried");
    Choice { parts, splits }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::{torus_all_to_all, RingAlgorithm};
    use crate::topology::{torus, tpuv4_ocs_cables, FaultPattern, TorusParams};
    use crate::units::Rational;
    use crate::verify::{verify_schedule, Report, VerifyOptions};

    fn topo(dims: &[usize], bandwidth: f64, cables: &[(u32, u32)]) -> Topology {
        let mut t = torus(&TorusParams::uniform(dims, bandwidth, 100.0)).unwrap();
        FaultPattern { cables: cables.iter().map(|&(a, b)| (NodeId(a), NodeId(b))).collect(), ..Default::default() }.apply(&mut t).unwrap();
        t
    }

    fn a2a(t: &Topology, bytes: u64, block_bytes: Option<Vec<Vec<u64>>>) -> Collective {
        Collective::new(CollectiveKind::AllToAll, t.node_ids().take(t.num_npus()).collect(), bytes, 1, block_bytes, t).unwrap()
    }

    fn check(sched: &Schedule, what: &str) -> Report {
        let report = verify_schedule(sched, &VerifyOptions::default()).unwrap();
        let first: Vec<String> = report.findings.failures().iter().take(3).map(|d| d.to_string()).collect();
        assert!(report.is_valid(), "{what}: {first:?}");
        report
    }

    fn run(t: &Topology, c: &Collective, enhanced: bool) -> (Schedule, Report) {
        let what = format!("{} on {:?} with {:?} down", if enhanced { "MATEe" } else { "MATE" }, t.torus_shape().unwrap().dims, t.down_links().len());
        let sched = torus_mate(t, c, enhanced).unwrap_or_else(|e| panic!("{what}: {e}"));
        let report = check(&sched, &what);
        (sched, report)
    }

    fn bandwidth(r: &Report) -> Rational {
        r.cost.as_ref().unwrap().bandwidth_ns()
    }

    #[test]
    fn without_a_fault_mate_is_dimrotation_on_unequal_radices_too() {
        // 3x5: the 5-ring's HalfRing time, 3/5 S/B (the merge of the two rings' phases took
        // 11/15); 2x3x4 and 5x5x3 alike.
        for dims in [vec![3, 5], vec![2, 3, 4], vec![5, 5, 3]] {
            let t = topo(&dims, 32.0, &[]);
            let c = a2a(&t, 1 << 20, None);
            let reference = check(&torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap(), "dimrotation");
            for enhanced in [false, true] {
                let (s, report) = run(&t, &c, enhanced);
                assert_eq!(bandwidth(&report), bandwidth(&reference), "{dims:?} enhanced {enhanced}");
                assert_eq!(s.header.meta.as_ref().unwrap()["scheduler"], if enhanced { "matee" } else { "mate" });
            }
        }
    }

    #[test]
    fn with_a_fault_on_unequal_radices_the_normal_slots_last_what_the_slowest_ring_does() {
        // 3x5 with a cable of a 3-ring down, MATE: the normal slots are DimRotation's (the
        // 5-ring's 3/5 S/B over both slots; the merge of the 3-ring's and 5-ring's sub-steps
        // on one clock took 13/20), and each of the two acceleration phases moves the faulty
        // ring's four part indices of its chunk, 1 by FoldedRing (3 sub-steps of 1) and 3 over
        // the detour ring (one HalfRing sub-step of 3): 3 part indices of 5 pairs, 3 * 5 *
        // S / (15 * 8 pieces) = S/8 each, 1/4 S/B in all.
        let t = topo(&[3, 5], 32.0, &[cable(&[3, 5], &[0, 0], 0)]);
        let c = a2a(&t, 1 << 20, None);
        let healthy = topo(&[3, 5], 32.0, &[]);
        let reference =
            check(&torus_all_to_all(&healthy, &a2a(&healthy, 1 << 20, None), RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap(), "dimrotation");
        let s_over_b = Rational::new(1 << 20, 32);
        let (s, report) = run(&t, &c, false);
        assert_eq!(s.header.meta.as_ref().unwrap()["parts_per_chunk"], 4);
        assert_eq!(bandwidth(&report), bandwidth(&reference) + s_over_b / 4);
        assert_eq!(bandwidth(&reference), s_over_b * Rational::new(3, 5));
        // MATEe and other shapes: never slower than before the fix (the bandwidth terms, in S/B,
        // that the single clock gave).
        for (dims, fault, dim, enhanced, before) in [
            (vec![3usize, 5], vec![0usize, 0], 0, true, Rational::new(106, 150)),
            (vec![4, 5], vec![0, 0], 1, false, Rational::new(101, 90)),
            (vec![5, 5, 3], vec![0, 0, 0], 2, false, Rational::new(82, 105)),
        ] {
            let t = topo(&dims, 32.0, &[cable(&dims, &fault, dim)]);
            let (_, report) = run(&t, &a2a(&t, 1 << 20, None), enhanced);
            assert!(bandwidth(&report) < before * s_over_b, "{dims:?} enhanced {enhanced}: {}", bandwidth(&report) / s_over_b);
        }
    }

    #[test]
    fn matee_sizes_its_share_by_the_bandwidths_too() {
        // 5x5x3 with the 3-ring at 64 GB/s and a cable of it down: FoldedRing there takes S/64,
        // less than the 5-rings' HalfRing at 32 GB/s, so MATEe keeps all of the faulty ring's
        // data in the normal slots (share 1) and takes FoldedRing + DimRotation's time; the share
        // sized by radices alone (0.6) took 53,760 ns against 48,384. 4x4 with the faulty
        // dimension at 32 GB/s and the other at 16: the share that ends with the 16 GB/s rings is
        // 2/3 (it was 1/3, the equal-bandwidth value).
        let with = |dims: &[usize], gbps: &[f64], fault: &[usize], dim: usize| {
            let mut t = torus(&TorusParams { bandwidth_gbps: gbps.to_vec(), ..TorusParams::uniform(dims, 32.0, 0.0) }).unwrap();
            let (a, b) = cable(dims, fault, dim);
            FaultPattern { cables: vec![(NodeId(a), NodeId(b))], ..Default::default() }.apply(&mut t).unwrap();
            t
        };
        let t = with(&[5, 5, 3], &[32.0, 32.0, 64.0], &[0, 0, 0], 2);
        let c = a2a(&t, 2_580_480, None);
        let folded = bandwidth(&check(&torus_all_to_all(&t, &c, RingAlgorithm::FoldedRing, Scheduler::DimRotation).unwrap(), "foldedring"));
        let (s, report) = run(&t, &c, true);
        assert_eq!(s.header.meta.as_ref().unwrap()["faulty_rings"][0]["share"], 1.0);
        assert_eq!(bandwidth(&report), folded);
        assert_eq!(folded, Rational::from_integer(48_384));

        let t = with(&[4, 4], &[32.0, 16.0], &[0, 0], 0);
        let (s, report) = run(&t, &a2a(&t, 1 << 20, None), true);
        let share = s.header.meta.as_ref().unwrap()["faulty_rings"][0]["share"].as_f64().unwrap();
        assert!((share - 2.0 / 3.0).abs() < 1e-9, "share {share}");
        assert!(bandwidth(&report) < Rational::from_integer(49_152), "{}", bandwidth(&report));
    }

    /// Node id of a coordinate.
    fn at(t: &Topology, c: &[usize]) -> u32 {
        t.torus_shape().unwrap().node_at(c).unwrap().0
    }

    /// The cable from `c` one step + along `dim`.
    fn cable(dims: &[usize], c: &[usize], dim: usize) -> (u32, u32) {
        let t = topo(dims, 1.0, &[]);
        let mut d = c.to_vec();
        d[dim] = (d[dim] + 1) % dims[dim];
        (at(&t, c), at(&t, &d))
    }

    /// The bandwidth terms of FoldedRing + DimRotation and of both MATEs, which must be valid.
    fn compare(dims: &[usize], cables: &[(u32, u32)], bytes: u64, gbps: f64) -> (Rational, Rational, Rational) {
        let t = topo(dims, gbps, cables);
        let c = a2a(&t, bytes, None);
        let folded = torus_all_to_all(&t, &c, RingAlgorithm::FoldedRing, Scheduler::DimRotation).unwrap();
        let folded = bandwidth(&check(&folded, "FoldedRing + DimRotation"));
        let mate = bandwidth(&run(&t, &c, false).1);
        let matee = bandwidth(&run(&t, &c, true).1);
        (folded, mate, matee)
    }

    #[test]
    fn healthy_tori_run_half_ring_with_dim_rotation() {
        for dims in [vec![4usize, 4], vec![5, 5], vec![3, 3, 3], vec![8, 4]] {
            let t = topo(&dims, 10.0, &[]);
            let c = a2a(&t, 1 << 12, None);
            let reference = torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap();
            let reference = bandwidth(&check(&reference, "HalfRing + DimRotation"));
            for enhanced in [false, true] {
                let (s, report) = run(&t, &c, enhanced);
                assert!(s.header.meta.unwrap()["faulty_rings"].as_array().unwrap().is_empty());
                // Equal radices: the same time; mixed radices: the common clock lets the short
                // dimensions' sub-steps overlap the long one's instead of padding them.
                assert!(bandwidth(&report) <= reference, "{dims:?}");
                if dims.iter().all(|&d| d == dims[0]) {
                    assert_eq!(bandwidth(&report), reference, "{dims:?}");
                }
            }
        }
    }

    #[test]
    fn one_failed_cable_anywhere_in_2d() {
        for dims in [[4usize, 4], [5, 5]] {
            let t = topo(&dims, 10.0, &[]);
            let cables: Vec<(u32, u32)> = t.links().filter(|(_, l)| l.src < l.dst).map(|(_, l)| (l.src.0, l.dst.0)).collect();
            for cable in cables {
                let t = topo(&dims, 10.0, &[cable]);
                let c = a2a(&t, 1 << 12, None);
                let (mate, rm) = run(&t, &c, false);
                let (matee, re) = run(&t, &c, true);
                assert!(bandwidth(&re) <= bandwidth(&rm), "{dims:?} {cable:?}");
                for s in [&mate, &matee] {
                    let meta = s.header.meta.as_ref().unwrap();
                    assert_eq!(meta["faulty_rings"].as_array().unwrap().len(), 1);
                    assert_eq!(meta["faulty_rings"][0]["planes"].as_array().unwrap().len(), 1, "{meta}");
                    assert_eq!(meta["pieces"], serde_json::json!(s.header.collective.pieces));
                }
                assert_eq!(mate.header.meta.as_ref().unwrap()["faulty_rings"][0]["share_parts"], 0);
            }
        }
    }

    #[test]
    fn one_failed_cable_in_every_dimension_in_3d() {
        for dims in [[3usize, 3, 3], [4, 4, 4]] {
            for dim in 0..3 {
                for c in [[0, 0, 0], [dims[0] - 1, 1, 2], [1, dims[1] - 1, 0]] {
                    let t = topo(&dims, 10.0, &[cable(&dims, &c, dim)]);
                    let a = a2a(&t, 1 << 16, None);
                    let (_, rm) = run(&t, &a, false);
                    let (s, re) = run(&t, &a, true);
                    assert!(bandwidth(&re) <= bandwidth(&rm));
                    let ring = &s.header.meta.as_ref().unwrap()["faulty_rings"][0];
                    assert_eq!(ring["dim"], dim);
                    assert_eq!(ring["planes"].as_array().unwrap().len(), 2, "two planes hold the ring on a 3-D torus");
                }
            }
        }
    }

    #[test]
    fn two_failed_cables_in_one_ring_go_over_the_detours() {
        for (dims, cables) in [
            (vec![4usize, 4], vec![(0u32, 1u32), (2, 3)]),
            (vec![4, 4], vec![(5, 9), (13, 1)]),
            (vec![5, 5], vec![(5, 6), (8, 9)]),
            (vec![5, 5], vec![(2, 7), (12, 17)]),
            (vec![4, 4, 4], vec![(16, 17), (18, 19)]),
        ] {
            let t = topo(&dims, 10.0, &cables);
            let c = a2a(&t, 1 << 12, None);
            let (mate, rm) = run(&t, &c, false);
            let (matee, re) = run(&t, &c, true);
            assert_eq!(bandwidth(&rm), bandwidth(&re), "MATEe is MATE when FoldedRing cannot run");
            assert_eq!(mate.steps, matee.steps);
            let ring = &matee.header.meta.as_ref().unwrap()["faulty_rings"][0];
            assert_eq!(ring["failed_cables"].as_array().unwrap().len(), 2);
            assert_eq!(ring["share_parts"], 0);
            assert_eq!(ring["acceleration"]["folded_parts"], 0);
            // The one-dimensional generator refuses such a ring.
            assert!(torus_all_to_all(&t, &c, RingAlgorithm::FoldedRing, Scheduler::DimRotation).is_err());
        }
    }

    #[test]
    fn faults_in_several_rings() {
        for (dims, cables) in [
            // A row and a column.
            (vec![4usize, 4], vec![(0u32, 1u32), (5, 9)]),
            // A row and a column through one node, both failed cables at that node: neither
            // plane has a side reachable from every ring node, so both rings fold alone.
            (vec![4, 4], vec![(0, 1), (0, 4)]),
            // Two neighbouring rows: each one's detour must pass over the other.
            (vec![4, 4], vec![(0, 1), (6, 7)]),
            (vec![5, 5], vec![(0, 1), (12, 17), (20, 24)]),
            // Dimensions 0 and 2 of a 3-D torus, and two rings of one dimension far apart.
            (vec![4, 4, 4], vec![(0, 1), (21, 37), (42, 43)]),
        ] {
            let t = topo(&dims, 10.0, &cables);
            let c = a2a(&t, 1 << 14, None);
            let (mate, rm) = run(&t, &c, false);
            let (_, re) = run(&t, &c, true);
            assert!(bandwidth(&re) <= bandwidth(&rm));
            let meta = mate.header.meta.unwrap();
            assert_eq!(meta["faulty_rings"].as_array().unwrap().len(), cables.len(), "{meta}");
        }
        // A mesh dimension offers the rings at its edges a one-sided plane, those between a
        // two-sided one.
        let mut p = TorusParams::uniform(&[4, 4], 10.0, 100.0);
        p.wrap = vec![true, false];
        for (cable, one_sided) in [((4u32, 5u32), false), ((0, 1), true), ((12, 15), true), ((9, 10), false)] {
            let mut t = torus(&p).unwrap();
            FaultPattern { cables: vec![(NodeId(cable.0), NodeId(cable.1))], ..Default::default() }.apply(&mut t).unwrap();
            for enhanced in [false, true] {
                let (s, _) = run(&t, &a2a(&t, 4096, None), enhanced);
                let meta = s.header.meta.unwrap();
                let planes = meta["faulty_rings"][0]["planes"].as_array().unwrap();
                assert_eq!(planes.len(), 1, "{cable:?}");
                assert_eq!(planes[0]["one_sided"], one_sided, "{cable:?}");
            }
        }
        // Rows 0 and 1 of a 4x4: row 1's lower side is row 0 (faulty), so it goes on to row 3.
        let t = topo(&[4, 4], 10.0, &[(0, 1), (6, 7)]);
        let s = torus_mate(&t, &a2a(&t, 4096, None), true).unwrap();
        let planes = &s.header.meta.as_ref().unwrap()["faulty_rings"][1]["planes"];
        assert_eq!(planes, &serde_json::json!([{"dim": 1, "up": 1, "down": 2, "one_sided": false}]));
    }

    #[test]
    fn ocs_failures() {
        for dims in [vec![4usize, 4, 4], vec![8, 4, 4]] {
            let mut t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
            let cables = tpuv4_ocs_cables(t.torus_shape().unwrap(), 2, &[2, 3], 4).unwrap();
            assert_eq!(cables.len(), dims[0] / 4);
            FaultPattern { cables, ..Default::default() }.apply(&mut t).unwrap();
            let c = a2a(&t, 1 << 16, None);
            let first = t.down_links().iter().map(|&l| t.link(l)).map(|l| (l.src.0, l.dst.0)).min().unwrap();
            let single = topo(&dims, 32.0, &[first]);
            for enhanced in [false, true] {
                let (s, report) = run(&t, &c, enhanced);
                let meta = s.header.meta.unwrap();
                // Parallel faulty rings of one OCS share one acceleration phase, so the OCS
                // failure costs what one failed cable does (the paper's claim).
                assert_eq!(meta["acceleration_groups"].as_array().unwrap().len(), 1, "{meta}");
                assert_eq!(bandwidth(&report), bandwidth(&run(&single, &c, enhanced).1), "{dims:?}");
                let folded = torus_all_to_all(&t, &c, RingAlgorithm::FoldedRing, Scheduler::DimRotation).unwrap();
                let healthy = topo(&dims, 32.0, &[]);
                let healthy = torus_all_to_all(&healthy, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap();
                let (f, h) = (bandwidth(&check(&folded, "folded")), bandwidth(&check(&healthy, "healthy")));
                eprintln!(
                    "OCS {dims:?} enhanced {enhanced}: mate {} folded {} healthy {}",
                    crate::units::to_f64(&bandwidth(&report)),
                    crate::units::to_f64(&f),
                    crate::units::to_f64(&h)
                );
                assert!(bandwidth(&report) < f);
            }
        }
    }

    #[test]
    fn non_uniform_blocks() {
        for (dims, cables) in [(vec![4usize, 4], vec![(5u32, 6u32)]), (vec![3, 3, 3], vec![(4, 13)]), (vec![5, 5], vec![(0, 1), (3, 4)])] {
            let t = topo(&dims, 10.0, &cables);
            let r = t.num_npus();
            let sizes: Vec<Vec<u64>> = (0..r).map(|i| (0..r).map(|j| if i == j { 0 } else { ((i * 7 + j * 3) % 11) as u64 * 100 }).collect()).collect();
            for enhanced in [false, true] {
                let (skewed, _) = run(&t, &a2a(&t, 0, Some(sizes.clone())), enhanced);
                let (uniform, _) = run(&t, &a2a(&t, 64 * r as u64, None), enhanced);
                assert_eq!(skewed.steps, uniform.steps);
            }
        }
    }

    #[test]
    fn unroutable_rings_are_refused() {
        // A failed npu: both rings through it lose two cables, and no detour reaches it.
        let mut t = torus(&TorusParams::uniform(&[4, 4], 10.0, 100.0)).unwrap();
        FaultPattern { nodes: vec![NodeId(5)], ..Default::default() }.apply(&mut t).unwrap();
        let e = torus_mate(&t, &a2a(&t, 4096, None), false).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::ExitCode::Infeasible);
        assert!(e.message().contains("2 failed cables"), "{e}");
        // A ring alone (no other dimension) with two failed cables.
        let t = topo(&[5], 10.0, &[(0, 1), (2, 3)]);
        assert!(torus_mate(&t, &a2a(&t, 4096, None), true).unwrap_err().message().contains("no plane"));
        // A line without wrap-around.
        let mut p = TorusParams::uniform(&[4, 4], 10.0, 100.0);
        p.wrap = vec![false, true];
        let mut t = torus(&p).unwrap();
        FaultPattern { cables: vec![(NodeId(0), NodeId(1))], ..Default::default() }.apply(&mut t).unwrap();
        assert!(torus_mate(&t, &a2a(&t, 4096, None), true).unwrap_err().message().contains("line along dimension 0"));
        // One failed cable of a ring alone: FoldedRing only, still valid.
        let t = topo(&[5], 10.0, &[(0, 1)]);
        run(&t, &a2a(&t, 4096, None), true);
    }

    #[test]
    fn no_routing_or_runtime_deadlock() {
        use crate::verify::{DeadlockCheck, RoutingDeadlock, Verifier};
        let mut ocs = torus(&TorusParams::uniform(&[4, 4, 4], 10.0, 100.0)).unwrap();
        FaultPattern { cables: tpuv4_ocs_cables(ocs.torus_shape().unwrap(), 2, &[2, 3], 4).unwrap(), ..Default::default() }.apply(&mut ocs).unwrap();
        for t in [topo(&[4, 4], 10.0, &[(0, 1)]), topo(&[5, 5], 10.0, &[(5, 6), (8, 9)]), ocs] {
            for enhanced in [false, true] {
                let s = torus_mate(&t, &a2a(&t, 1 << 12, None), enhanced).unwrap();
                let mut v = Verifier::new(VerifyOptions::default())
                    .with_check(Box::new(RoutingDeadlock::new()))
                    .with_check(Box::new(DeadlockCheck::new(crate::lower::LowerOptions::default())));
                crate::schedule::StepSink::begin(&mut v, &s.header).unwrap();
                for (i, st) in s.steps.iter().enumerate() {
                    v.check_step(i, st);
                }
                let report = v.finish().unwrap();
                let first: Vec<String> = report.findings.failures().iter().take(3).map(|d| d.to_string()).collect();
                assert!(report.is_valid(), "{first:?}");
            }
        }
    }

    /// The bandwidth term of FoldedRing + DimRotation, if it runs.
    fn dim_rotation(t: &Topology, c: &Collective) -> Option<Rational> {
        torus_all_to_all(t, c, RingAlgorithm::FoldedRing, Scheduler::DimRotation).ok().map(|s| bandwidth(&check(&s, "FoldedRing + DimRotation")))
    }

    /// The planes of every faulty ring in a schedule's meta.
    fn planes(s: &Schedule) -> Vec<Vec<serde_json::Value>> {
        let meta = s.header.meta.as_ref().unwrap();
        meta["faulty_rings"].as_array().unwrap().iter().map(|r| r["planes"].as_array().unwrap().clone()).collect()
    }

    #[test]
    fn one_sided_planes_where_the_other_side_is_cut() {
        // 4x4: a row's failed cable (0,0)-(1,0) cuts the + side of the column through (0,0),
        // whose own failed cable is (0,1)-(0,2); the column at x = 1 loses its - side the same way.
        // Each column still detours over its other side, at half speed, in its own acceleration
        // phase (the row's detours cross it).
        let (a, b, c) = (0u32, 1u32, 4u32);
        for second in [(c, 8u32), (5, 9), (9, 13)] {
            let t = topo(&[4, 4], 32.0, &[(a, b), second]);
            let coll = a2a(&t, 1 << 20, None);
            let (mate, rm) = run(&t, &coll, false);
            let (_, re) = run(&t, &coll, true);
            assert!(planes(&mate).iter().all(|p| !p.is_empty()), "{second:?}: {:?}", planes(&mate));
            let folded = dim_rotation(&t, &coll).unwrap();
            assert!(bandwidth(&rm) <= folded && bandwidth(&re) < folded, "{second:?}");
        }
    }

    #[test]
    fn dimensions_of_size_2() {
        // 2x4 (node (x, y) is x + 2y): a failed cable of a 4-ring detours over its only parallel
        // ring, one-sided.
        let t = topo(&[2, 4], 32.0, &[(0, 2)]);
        let coll = a2a(&t, 1 << 20, None);
        let (mate, rm) = run(&t, &coll, false);
        let (_, re) = run(&t, &coll, true);
        assert_eq!(planes(&mate), vec![vec![serde_json::json!({"dim": 0, "up": 1, "down": null, "one_sided": true})]]);
        let folded = dim_rotation(&t, &coll).unwrap();
        assert!(bandwidth(&re) <= bandwidth(&rm) && bandwidth(&rm) < folded);
        // The failed cable of the size-2 dimension: that "ring" cannot run at all, so all its data
        // goes over both sides of the 4-ring plane, each a detour at full speed.
        let t = topo(&[2, 4], 32.0, &[(0, 1)]);
        for enhanced in [false, true] {
            let (s, _) = run(&t, &coll, enhanced);
            let ring = &s.header.meta.as_ref().unwrap()["faulty_rings"][0];
            assert_eq!(ring["planes"].as_array().unwrap().len(), 2, "{ring}");
            assert_eq!(ring["share_parts"], 0);
            assert_eq!(ring["acceleration"]["folded_parts"], 0);
        }
        assert!(dim_rotation(&t, &coll).is_none());
        // 2x2x2: every plane is one-sided; with both cables of a node's two other dimensions up,
        // the detours run.
        let t = topo(&[2, 2, 2], 32.0, &[(0, 1)]);
        for enhanced in [false, true] {
            let (s, _) = run(&t, &a2a(&t, 1 << 12, None), enhanced);
            assert_eq!(planes(&s)[0].len(), 2);
        }
    }

    /// Whether the ring along `x` through `nodes` has a healthy parallel ring along some other
    /// dimension reachable over up cables from every node (straight along that dimension, either
    /// way): an oracle written apart from [`detours`].
    fn has_detour(t: &Topology, nodes: &[u32], x: usize) -> bool {
        let shape = t.torus_shape().unwrap();
        let up = |a: NodeId, b: NodeId| cable_up(t, a, b);
        let healthy = |r: &[NodeId]| (0..r.len()).all(|i| up(r[i], r[(i + 1) % r.len()]));
        (0..shape.ndims()).filter(|&y| y != x && shape.dims[y] > 1).any(|y| {
            [true, false].into_iter().any(|positive| {
                let mut cur: Vec<NodeId> = nodes.iter().map(|&v| NodeId(v)).collect();
                for _ in 1..shape.dims[y] {
                    let next: Option<Vec<NodeId>> = cur.iter().map(|&v| shape.neighbor(v, y, positive).filter(|&w| up(v, w))).collect();
                    let Some(next) = next else { return false };
                    if healthy(&next) {
                        return true;
                    }
                    cur = next;
                }
                false
            })
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// Over small tori (sizes 2 to 5, two or three dimensions) and one or two failed cables
        /// anywhere: MATE and MATEe verify, every faulty ring that has a detour gets a plane, and
        /// a refusal names a ring that has none.
        #[test]
        fn every_faulty_ring_with_a_detour_gets_a_plane(
            dims in proptest::collection::vec(2usize..=5, 2..=3),
            cuts in proptest::collection::vec((0usize..1000, 0usize..3), 1..=2),
            enhanced in proptest::bool::ANY,
        ) {
            let healthy = topo(&dims, 32.0, &[]);
            let shape = healthy.torus_shape().unwrap().clone();
            let cables: Vec<(u32, u32)> = cuts
                .iter()
                .map(|&(at, dim)| {
                    let dim = dim % dims.len();
                    let v = NodeId((at % shape.num_nodes()) as u32);
                    let w = shape.neighbor(v, dim, true).or_else(|| shape.neighbor(v, dim, false)).unwrap();
                    (v.0.min(w.0), v.0.max(w.0))
                })
                .collect();
            let t = topo(&dims, 32.0, &cables);
            // Faults that cut a rank off are refused before any algorithm runs.
            let Ok(coll) = Collective::new(CollectiveKind::AllToAll, t.node_ids().take(t.num_npus()).collect(), 1 << 12, 1, None, &t) else {
                return Ok(());
            };
            match torus_mate(&t, &coll, enhanced) {
                Ok(s) => {
                    check(&s, "MATE");
                    for ring in s.header.meta.as_ref().unwrap()["faulty_rings"].as_array().unwrap() {
                        let nodes: Vec<u32> = ring["nodes"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
                        let x = ring["dim"].as_u64().unwrap() as usize;
                        let planes = ring["planes"].as_array().unwrap();
                        proptest::prop_assert_eq!(planes.is_empty(), !has_detour(&t, &nodes, x), "{:?} {:?}: {}", dims, cables, ring);
                    }
                }
                Err(e) => {
                    proptest::prop_assert_eq!(e.exit_code(), crate::error::ExitCode::Infeasible, "{}", e);
                    proptest::prop_assert!(e.message().contains("no plane"), "{:?} {:?}: {}", dims, cables, e);
                }
            }
        }
    }

    /// Bandwidth terms at 8 MiB per npu and 32 GB/s, one failed cable in dimension 0 (ns,
    /// step-synchronous, latency 0; asserted exactly below):
    ///
    /// | torus | HalfRing+DimRotation healthy | FoldedRing+DimRotation | MATE | MATEe |
    /// |---|---|---|---|---|
    /// | 4x4x4 | 131072 | 393216 (3.00x) | 196608 (1.50x) | 174762.7 (1.33x) |
    /// | 5x5x5 | 157286.4 | 524288 (3.33x) | 227191.5 (1.44x) | 209715.2 (1.33x) |
    ///
    /// (times relative to healthy). With shares rounded to at most 12 part indices per chunk;
    /// the unrounded optimum is 1.43x / 1.29x on 4x4x4.
    #[test]
    fn mate_beats_folded_ring() {
        const S: u64 = 8 << 20;
        for dims in [vec![4usize, 4, 4], vec![5, 5, 5]] {
            let healthy = {
                let t = topo(&dims, 32.0, &[]);
                let s = torus_all_to_all(&t, &a2a(&t, S, None), RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap();
                bandwidth(&check(&s, "healthy"))
            };
            let (folded, mate, matee) = compare(&dims, &[cable(&dims, &[1, 2, 3], 0)], S, 32.0);
            let f = crate::units::to_f64;
            eprintln!("{dims:?}: healthy {} folded {} mate {} matee {}", f(&healthy), f(&folded), f(&mate), f(&matee));
            assert!(mate < folded && matee <= mate && healthy < matee, "{dims:?}");
            let expected = if dims[0] == 4 { [(3, 1), (3, 2), (4, 3)] } else { [(10, 3), (13, 9), (4, 3)] };
            // MATEe's share is T_HalfRing / T_FoldedRing exactly here: N/(4(N-1)) = 1/3 for N = 4,
            // (N+1)/(4N) = 3/10 for N = 5.
            let t = topo(&dims, 32.0, &[cable(&dims, &[1, 2, 3], 0)]);
            let meta = torus_mate(&t, &a2a(&t, S, None), true).unwrap().header.meta.unwrap();
            let ring = &meta["faulty_rings"][0];
            assert_eq!(ring["share"], ring["target_share"], "{meta}");
            for ((name, term), (num, den)) in [("folded", folded), ("mate", mate), ("matee", matee)].into_iter().zip(expected) {
                assert_eq!(term / healthy, Rational::new(num, den), "{dims:?} {name}");
            }
        }
    }
}
