//! Translation-invariant schedules on a healthy torus: a schedule for every source at once from a
//! problem over one source's pieces, which meets the certified bound where the time-expanded
//! program is too large (all_to_all on the 4x4: 8 steps, the 4x4x4: 32; all_gather on the 5x5).
//!
//! Translating a schedule by a torus vector g moves the piece from s onto the piece from s + g.
//! If the schedule is the union of the translates of one source's transfers, then a link at step
//! t carries one piece per transfer of source 0's pieces that crosses a link *of the same
//! direction* at step t. So "one piece per link per step" (docs/design/MODEL.md section 3)
//! becomes: per direction and step, at most one transfer of source 0's pieces.
//!
//! - all_to_all: a piece of source 0 is a job with one unit operation per hop on the "machine" of
//!   its direction, at most one per step; the steps needed are the largest of a direction's load
//!   and a job's length (König: a bipartite multigraph of largest degree T has a proper edge
//!   colouring with T colours, and a torus route may take its moves in any order). The routes
//!   are shortest, the pieces that cross half a ring of even size split evenly between its two
//!   directions. No solver is needed.
//! - all_gather: the program of `gather` for source 0's pieces alone, with the hops of each
//!   direction sharing one piece per step (1,300 variables at the 6x6 torus's 9 steps);
//!   reduce_scatter, its time reversal over the transposed hops, likewise; all_reduce: the
//!   program of `allreduce` for block 0's pieces alone.
//!
//! The schedules are candidates like the heuristics'; they are optimal where they meet the
//! certified bound (docs/design/MODEL.md section 6).

use super::allreduce::AllReduce;
use super::gather::Multicast;
use super::Program;
use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::Result;
use crate::schedule::{Op, Step, Transfer};
use crate::synth::backends::{ProgramFamily, Solver};
use crate::topology::hops::HopGraph;
use crate::topology::{LinkId, NodeId, Topology, TorusShape};
use std::collections::BTreeSet;
use std::time::Instant;

/// The torus of `t` when translations map the instance onto itself: no down link, no switch,
/// every dimension of more than 2 npus wraps, and every npu is a rank.
fn symmetric_torus<'a>(t: &'a Topology, c: &Collective) -> Option<&'a TorusShape> {
    let shape = t.torus_shape()?;
    let applies =
        t.num_switches() == 0 && t.down_links().is_empty() && c.num_ranks() == t.num_npus() && shape.dims.iter().zip(&shape.wrap).all(|(&k, &w)| w || k <= 2);
    applies.then_some(shape)
}

/// The direction of a torus link: its dimension and its step along it (1 or k - 1 for a ring
/// of k; a dimension of size 2 has one, 1).
fn direction_of(t: &Topology, shape: &TorusShape, link: LinkId) -> (usize, usize) {
    let (a, b) = (shape.coord(t.link(link).src), shape.coord(t.link(link).dst));
    let dim = (0..shape.ndims()).find(|&i| a[i] != b[i]).unwrap_or(0);
    let k = shape.dims[dim];
    (dim, (b[dim] + k - a[dim]) % k)
}

/// `link` translated by the coordinate of `by`.
fn translate(t: &Topology, shape: &TorusShape, link: LinkId, by: NodeId) -> Option<LinkId> {
    let g = shape.coord(by);
    let moved = |v: NodeId| {
        let c: Vec<usize> = shape.coord(v).iter().zip(&g).zip(&shape.dims).map(|((&x, &d), &k)| (x + d) % k).collect();
        shape.node_at(&c)
    };
    t.link_between(moved(t.link(link).src)?, moved(t.link(link).dst)?)
}

/// The translation-invariant all_gather, reduce_scatter or all_reduce of `c` over `hops` (single
/// links between its ranks) with the fewest steps from `from` up to `below` (exclusive), or
/// `None` when it does not apply, no horizon below `below` is feasible, `deadline` passes first,
/// or a program is larger than the backend takes ([`Solver::max_variables`]).
///
/// Errors: only for a backend this build lacks.
pub fn translation_invariant_blocks(
    t: &Topology,
    c: &Collective,
    hops: &HopGraph,
    solver: Solver,
    (from, below): (u32, u32),
    deadline: Instant,
) -> Result<Option<Vec<Step>>> {
    let Some(shape) = symmetric_torus(t, c) else { return Ok(None) };
    let root = NodeId(0);
    let (Some(x0), true) = (c.rank_index(root), hops.hops.iter().all(|h| h.path.len() == 1)) else { return Ok(None) };
    let pieces: Vec<PieceId> = (0..c.pieces).map(|k| PieceId::block(x0 as u32, k)).collect();
    let mut directions: Vec<(usize, usize)> = Vec::new();
    let mut shared: Vec<Vec<usize>> = Vec::new();
    for (h, hop) in hops.hops.iter().enumerate() {
        let d = direction_of(t, shape, hop.path[0]);
        match directions.iter().position(|&x| x == d) {
            Some(i) => shared[i].push(h),
            None => {
                directions.push(d);
                shared.push(vec![h]);
            }
        }
    }
    let sourced = |pieces: Vec<PieceId>| pieces.into_iter().map(|p| (p, root)).collect();
    let program = match c.kind {
        CollectiveKind::AllGather => Program::Multicast(Multicast::new(hops.clone(), sourced(pieces), c.ranks.clone(), shared, false)),
        CollectiveKind::ReduceScatter => Program::Multicast(Multicast::new(hops.transposed(), sourced(pieces), c.ranks.clone(), shared, true)),
        CollectiveKind::AllReduce => Program::AllReduce(AllReduce::with(hops.clone(), pieces, c.ranks.clone(), shared)),
        CollectiveKind::AllToAll => return Ok(None),
    };
    for horizon in from.max(1)..below {
        let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else { return Ok(None) };
        let variables = program.variables(horizon);
        let solver = solver.resolve_for(ProgramFamily::Sets, variables);
        if variables > solver.max_variables(ProgramFamily::Sets) {
            return Ok(None);
        }
        let mut backend = solver.backend(variables)?;
        match program.solve(backend.as_mut(), horizon, left) {
            Some(Some(steps)) => return Ok(Some(translated(t, shape, c, &steps))),
            Some(None) => continue,
            None => return Ok(None),
        }
    }
    Ok(None)
}

/// Every translate of source 0's steps: the transfer of piece (x0, k) over a link becomes, for
/// every npu g, the transfer of piece (rank of g, k) over the link moved by g.
fn translated(t: &Topology, shape: &TorusShape, c: &Collective, steps: &[Step]) -> Vec<Step> {
    steps
        .iter()
        .map(|step| Step {
            transfers: step
                .transfers
                .iter()
                .flat_map(|x| {
                    let k = x.pieces[0].parts()[1];
                    t.node_ids().filter_map(move |g| {
                        let link = translate(t, shape, x.path[0], g)?;
                        Some(Transfer { path: vec![link], op: x.op, pieces: vec![PieceId::block(c.rank_index(g)? as u32, k)] })
                    })
                })
                .collect(),
        })
        .collect()
}

/// A direction of the torus: a dimension and a sign (a dimension of size 2 has one, `+`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Direction {
    dim: usize,
    positive: bool,
}

/// The translation-invariant all_to_all of `c` on `t`, or `None` when it does not apply: `t` must
/// be a torus with no down link whose every dimension of more than 2 npus wraps, and `c` a
/// uniform all_to_all over all its npus; or when `deadline` passes first.
pub fn translation_invariant(t: &Topology, c: &Collective, deadline: Instant) -> Option<Vec<Step>> {
    let shape = symmetric_torus(t, c).filter(|_| c.kind == CollectiveKind::AllToAll && c.is_uniform())?;
    let dims = &shape.dims;
    let directions: Vec<Direction> = (0..dims.len())
        .filter(|&i| dims[i] >= 2)
        .flat_map(|i| [true, false].into_iter().filter(move |&p| p || dims[i] > 2).map(move |p| Direction { dim: i, positive: p }))
        .collect();
    let jobs = routes(dims, &directions, c.pieces);
    let mut load = vec![0u32; directions.len()];
    jobs.iter().flat_map(|j| &j.moves).for_each(|&e| load[e] += 1);
    let steps = load.iter().copied().chain(jobs.iter().map(|j| j.moves.len() as u32)).max().unwrap_or(0);
    let colours = edge_colouring(&jobs, directions.len(), steps as usize, deadline)?;
    Some(unfold(t, c, &directions, &jobs, &colours, steps))
}

/// One piece of source 0: its displacement, part, and the directions of its moves.
struct Job {
    displacement: Vec<usize>,
    part: u32,
    moves: Vec<usize>,
}

/// Shortest routes for every displacement and part; where a displacement is half an even ring,
/// its moves go one way or the other, alternating between the jobs that need the choice.
fn routes(dims: &[usize], directions: &[Direction], pieces: u32) -> Vec<Job> {
    let n: usize = dims.iter().product();
    let index = |dim: usize, positive: bool| directions.iter().position(|d| d.dim == dim && d.positive == positive);
    let mut flip = vec![false; dims.len()];
    let mut jobs = Vec::new();
    for id in 1..n {
        let mut rest = id;
        let displacement: Vec<usize> = dims
            .iter()
            .map(|&k| {
                let x = rest % k;
                rest /= k;
                x
            })
            .collect();
        for part in 0..pieces {
            let mut moves = Vec::new();
            for (dim, (&x, &k)) in displacement.iter().zip(dims).enumerate() {
                let positive = if 2 * x == k && k > 2 {
                    flip[dim] = !flip[dim];
                    flip[dim]
                } else {
                    2 * x <= k
                };
                let hops = if positive { x } else { k - x };
                if let Some(e) = index(dim, positive || k == 2) {
                    moves.extend(std::iter::repeat_n(e, hops));
                }
            }
            jobs.push(Job { displacement: displacement.clone(), part, moves });
        }
    }
    jobs
}

/// A colour (step) per move of every job: the moves of one job, and the moves of one direction,
/// get distinct colours out of `colours` (at least every job's length and direction's load).
/// König's theorem by alternating paths: colour each edge (job, direction) with a colour a free
/// at the job; if a is taken at the direction, swap a with a colour b free there along the a/b
/// path from the direction, which cannot reach the job (the graph is bipartite). `None` when
/// `deadline` passes first.
///
/// A job's few colours are its moves' own (`colour`), not a row of every colour, and each
/// direction keeps its free colours in a set: rows of every colour per job, and scans of them,
/// were quadratic in the pieces (65,536 pieces of a 2-npu all_to_all: 68 GB).
fn edge_colouring(jobs: &[Job], directions: usize, colours: usize, deadline: Instant) -> Option<Vec<Vec<usize>>> {
    // at_dir[direction][colour] = the edge (job, move index) of that colour there.
    let mut at_dir: Vec<Vec<Option<(usize, usize)>>> = vec![vec![None; colours]; directions];
    let mut free: Vec<BTreeSet<usize>> = vec![(0..colours).collect(); directions];
    let mut colour: Vec<Vec<usize>> = jobs.iter().map(|j| vec![usize::MAX; j.moves.len()]).collect();
    let at_job = |colour: &[Vec<usize>], j: usize, x: usize| colour[j].iter().position(|&c| c == x);
    for (j, job) in jobs.iter().enumerate() {
        if j % 1024 == 0 && Instant::now() >= deadline {
            return None;
        }
        for (m, &e) in job.moves.iter().enumerate() {
            let a = (0..colours).find(|&x| at_job(&colour, j, x).is_none()).expect("a job has fewer moves than colours");
            if at_dir[e][a].is_some() {
                let b = *free[e].first().expect("a direction has fewer moves than colours");
                // The path from e alternating a, b, a, ...: collect it, then swap its colours.
                let mut path = Vec::new();
                let (mut node_is_dir, mut node, mut want) = (true, e, a);
                loop {
                    let edge = if node_is_dir { at_dir[node][want] } else { at_job(&colour, node, want).map(|mm| (node, mm)) };
                    let Some((jj, mm)) = edge else { break };
                    path.push((jj, mm));
                    (node_is_dir, node) = if node_is_dir { (false, jj) } else { (true, jobs[jj].moves[mm]) };
                    want = if want == a { b } else { a };
                }
                for &(jj, mm) in &path {
                    let (ee, old) = (jobs[jj].moves[mm], colour[jj][mm]);
                    at_dir[ee][old] = None;
                    free[ee].insert(old);
                }
                for &(jj, mm) in &path {
                    let ee = jobs[jj].moves[mm];
                    let new = if colour[jj][mm] == a { b } else { a };
                    colour[jj][mm] = new;
                    at_dir[ee][new] = Some((jj, mm));
                    free[ee].remove(&new);
                }
            }
            colour[j][m] = a;
            at_dir[e][a] = Some((j, m));
            free[e].remove(&a);
        }
    }
    Some(colour)
}

/// Every source's translate of the coloured jobs, step by step.
fn unfold(t: &Topology, c: &Collective, directions: &[Direction], jobs: &[Job], colours: &[Vec<usize>], steps: u32) -> Vec<Step> {
    let shape = t.torus_shape().expect("checked by the caller");
    let dims = &shape.dims;
    let shift = |coord: &mut [usize], d: Direction| {
        let k = dims[d.dim];
        coord[d.dim] = if d.positive { (coord[d.dim] + 1) % k } else { (coord[d.dim] + k - 1) % k };
    };
    let mut out: Vec<Step> = (0..steps).map(|_| Step::default()).collect();
    for (job, colour) in jobs.iter().zip(colours) {
        let mut order: Vec<usize> = (0..job.moves.len()).collect();
        order.sort_by_key(|&m| colour[m]);
        for source in 0..t.num_npus() as u32 {
            let from = NodeId(source);
            let mut coord = shape.coord(from);
            let target: Vec<usize> = coord.iter().zip(&job.displacement).zip(dims).map(|((&x, &d), &k)| (x + d) % k).collect();
            let (Some(i), Some(j)) = (c.rank_index(from), shape.node_at(&target).and_then(|v| c.rank_index(v))) else { continue };
            let piece = PieceId::a2a(i as u32, j as u32, job.part);
            for &m in &order {
                let here = shape.node_at(&coord).expect("a torus coordinate");
                shift(&mut coord, directions[job.moves[m]]);
                let there = shape.node_at(&coord).expect("a torus coordinate");
                let Some(link) = t.link_between(here, there) else { continue };
                out[colour[m]].transfers.push(Transfer { path: vec![link], op: Op::Copy, pieces: vec![piece] });
            }
        }
    }
    out.retain(|s| !s.transfers.is_empty());
    out
}
