//! Collectives on switched networks (fat trees, or any topology with switches), docs/design/ALGORITHMS.md
//! "Switched (fat-tree) algorithms".
//!
//! Three parts, one module each:
//! - `plan`: the algorithms as logical steps of rank-to-rank flows (Pairwise, Bruck, Ring,
//!   Halving-Doubling, Double Binary Tree, Recursive Doubling, Recursive Halving);
//! - `route`: each flow becomes one transfer routed through the switches (or over a direct board
//!   link), on its first shortest path or balanced so that no two transfers share a link;
//! - `colour`: the König edge colouring the balanced router uses.

pub(crate) mod colour;
mod plan;
pub(crate) mod route;
#[cfg(test)]
mod tests;

use crate::collective::{Collective, CollectiveKind};
use crate::error::{Error, Result};
use crate::schedule::{Schedule, ScheduleHeader};
pub use crate::spec::Routing;
use crate::topology::Topology;
use plan::Plan;
use route::Router;

/// A collective algorithm for switched networks (docs/design/ALGORITHMS.md, "Switched (fat-tree) algorithms").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SwitchedAlgorithm {
    /// all_to_all: in step s = 1..p-1 rank i sends its block to rank i+s.
    Pairwise,
    /// all_to_all: ceil(log2 p) rounds; in round r blocks whose remaining distance has bit r set
    /// move 2^r ranks on, forwarded through intermediate ranks.
    Bruck,
    /// all_reduce (reduce-scatter then all-gather), all_gather or reduce_scatter around the ranks
    /// in order.
    Ring,
    /// all_reduce: recursive-halving reduce-scatter, then recursive-doubling all-gather, among the
    /// largest power of two of the ranks (the others folded onto them first, unfolded last).
    HalvingDoubling,
    /// all_reduce: two complementary binary trees, each reducing then broadcasting half the data.
    DoubleBinaryTree,
    /// all_gather by exchanges at distances 1, 2, 4, ... (beyond a power of two, folded likewise).
    RecursiveDoubling,
    /// reduce_scatter by exchanges at distances p/2, p/4, ..., 1 (beyond a power of two, folded
    /// likewise).
    RecursiveHalving,
}

impl SwitchedAlgorithm {
    /// Every algorithm, in the order of docs/design/ALGORITHMS.md.
    pub const ALL: [SwitchedAlgorithm; 7] = [
        SwitchedAlgorithm::Pairwise,
        SwitchedAlgorithm::Bruck,
        SwitchedAlgorithm::Ring,
        SwitchedAlgorithm::HalvingDoubling,
        SwitchedAlgorithm::DoubleBinaryTree,
        SwitchedAlgorithm::RecursiveDoubling,
        SwitchedAlgorithm::RecursiveHalving,
    ];

    /// The name used in spec and schedule files (`pairwise`, `bruck`, `ring`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            SwitchedAlgorithm::Pairwise => "pairwise",
            SwitchedAlgorithm::Bruck => "bruck",
            SwitchedAlgorithm::Ring => "ring",
            SwitchedAlgorithm::HalvingDoubling => "halving_doubling",
            SwitchedAlgorithm::DoubleBinaryTree => "double_binary_tree",
            SwitchedAlgorithm::RecursiveDoubling => "recursive_doubling",
            SwitchedAlgorithm::RecursiveHalving => "recursive_halving",
        }
    }

    /// The collective kinds the algorithm generates.
    pub fn kinds(self) -> &'static [CollectiveKind] {
        use CollectiveKind::*;
        match self {
            SwitchedAlgorithm::Pairwise | SwitchedAlgorithm::Bruck => &[AllToAll],
            SwitchedAlgorithm::Ring => &[AllGather, ReduceScatter, AllReduce],
            SwitchedAlgorithm::HalvingDoubling | SwitchedAlgorithm::DoubleBinaryTree => &[AllReduce],
            SwitchedAlgorithm::RecursiveDoubling => &[AllGather],
            SwitchedAlgorithm::RecursiveHalving => &[ReduceScatter],
        }
    }
}

/// Generates the collective over `collective.ranks` (a group of any npus, in its order) on a fat
/// tree, or any topology where every pair of ranks is joined by a direct link or through
/// switches (a full mesh, an ASTRA-sim network of fully connected and switch dimensions).
///
/// Every rank-to-rank message is one transfer whose path goes through switches only (npu -> leaf
/// [-> spine/aggregation [-> core -> aggregation] -> leaf] -> npu), or over the direct link when
/// both npus sit on one board. The algorithm chooses P, and the returned schedule's collective
/// uses it: 1, but for the double binary tree, whose two trees each carry one half of every block
/// pipelined in chunks: `collective.pieces` when it is even, else twice the chunks per tree that
/// run fastest. `collective.pieces` is otherwise ignored. Meta records the algorithm, the
/// routing, P, the number of logical steps (and the double binary tree's chunks per tree).
///
/// Errors: [`Error::bad`] for an algorithm that does not generate the collective's kind, or a
/// topology that joins two ranks only
/// through other npus (`route::unrouted`); [`Error::infeasible`] when failed links leave two
/// ranks without such a path.
pub fn switched(topology: &Topology, collective: &Collective, algorithm: SwitchedAlgorithm, routing: Routing) -> Result<Schedule> {
    let kind = collective.kind;
    if !algorithm.kinds().contains(&kind) {
        let kinds: Vec<&str> = algorithm.kinds().iter().map(|k| k.as_str()).collect();
        return Err(Error::bad(format!(
            "field `method.generate.algorithm` = \"{}\": it does not generate {kind} (it generates {})",
            algorithm.as_str(),
            kinds.join(", ")
        )));
    }
    let p = collective.num_ranks();
    let (pieces, plan): (u32, Plan) = match (algorithm, kind) {
        (SwitchedAlgorithm::Pairwise, _) => (1, plan::pairwise(p)),
        (SwitchedAlgorithm::Bruck, _) => (1, plan::bruck(p)),
        (SwitchedAlgorithm::Ring, CollectiveKind::AllGather) => (1, plan::ring_all_gather(p)),
        (SwitchedAlgorithm::Ring, CollectiveKind::ReduceScatter) => (1, plan::ring_reduce_scatter(p)),
        (SwitchedAlgorithm::Ring, _) => (1, [plan::ring_reduce_scatter(p), plan::ring_all_gather(p)].concat()),
        (SwitchedAlgorithm::HalvingDoubling, _) => (1, plan::halving_doubling(p)),
        (SwitchedAlgorithm::DoubleBinaryTree, _) => return double_binary_tree(topology, collective, routing),
        (SwitchedAlgorithm::RecursiveDoubling, _) => (1, plan::recursive_doubling(p)),
        (SwitchedAlgorithm::RecursiveHalving, _) => (1, plan::recursive_halving(p)),
    };
    routed(topology, collective, algorithm, routing, pieces, &plan, serde_json::Map::new())
}

/// The double binary tree at the chunks per tree that `collective.pieces` gives (half of it, when
/// it is even), or else at the count whose schedule is fastest step-synchronously, the fewer
/// chunks on a tie (more chunks pipeline the trees deeper, each costing a step's latency): the
/// fastest of 1, 2, 4, ..., [`MAX_DBT_CHUNKS`], then every count between its neighbours (b/2 + 1
/// to 2b - 1 around the best power of two b). The time is not a function of the count's powers of
/// two alone: 12 chunks beat 8 and 16, 128 beat 64. Every count of 1 to 128 would cost some
/// twenty seconds on 64 ranks; the two passes cost a few of the counts they land near. Neither
/// goes above [`MAX_DBT_CHUNKS`] (ALGORITHMS.md says so): when 128 is the best power of two, its
/// window ends at 127, as 129 to 255 would add 127 counts, each dearer than 128, for gains
/// measured at 0.1-0.4%.
fn double_binary_tree(topology: &Topology, collective: &Collective, routing: Routing) -> Result<Schedule> {
    let p = collective.num_ranks();
    let given = collective.pieces as usize;
    let timed = |chunks: usize| -> Result<(crate::units::Rational, usize, Schedule)> {
        let extra = serde_json::Map::from_iter([("chunks".to_string(), serde_json::json!(chunks))]);
        let s = routed(topology, collective, SwitchedAlgorithm::DoubleBinaryTree, routing, 2 * chunks as u32, &plan::double_binary_tree(p, chunks), extra)?;
        let mut meter = crate::cost::SyncMeter::new(&s.header)?;
        s.steps.iter().for_each(|step| meter.step(step));
        Ok((meter.finish()?.time_ns(), chunks, s))
    };
    if given >= 2 && given % 2 == 0 {
        return Ok(timed(given / 2)?.2);
    }
    let powers: Vec<usize> = (0..).map(|i| 1 << i).take_while(|&c| c <= MAX_DBT_CHUNKS).collect();
    let coarse = fastest(powers, &timed)?.expect("a power of two");
    let fine = fastest((coarse.1 / 2 + 1..(2 * coarse.1).min(MAX_DBT_CHUNKS + 1)).filter(|c| !c.is_power_of_two()).collect(), &timed)?;
    Ok(fine.into_iter().chain([coarse]).min_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1))).expect("the coarse pass").2)
}

/// Of `counts` (none: `None`), the one whose schedule is fastest, then the fewest chunks; the
/// counts run in parallel and the choice does not depend on the order they finish in.
fn fastest<T: Send>(
    counts: Vec<usize>,
    timed: &(impl Fn(usize) -> Result<(crate::units::Rational, usize, T)> + Sync),
) -> Result<Option<(crate::units::Rational, usize, T)>> {
    use rayon::prelude::*;
    counts.into_par_iter().map(timed).try_reduce_with(|a, b| Ok(if (&b.0, b.1) < (&a.0, a.1) { b } else { a })).transpose()
}

/// The most chunks per tree the double binary tree tries on its own (a spec's `pieces` gives more).
const MAX_DBT_CHUNKS: usize = 128;

/// Routes `plan` over `pieces` per block (meta: the algorithm, routing, pieces, logical steps and
/// `extra`).
fn routed(
    topology: &Topology,
    collective: &Collective,
    algorithm: SwitchedAlgorithm,
    routing: Routing,
    pieces: u32,
    plan: &Plan,
    extra: serde_json::Map<String, serde_json::Value>,
) -> Result<Schedule> {
    let coll = Collective::new(collective.kind, collective.ranks.clone(), collective.bytes_per_rank, pieces, collective.block_bytes.clone(), topology)?;
    let mut router = Router::new(topology, &coll, routing);
    let mut steps = Vec::new();
    for flows in plan {
        steps.extend(router.route(flows)?);
    }
    let mut meta = serde_json::json!({
        "algorithm": algorithm.as_str(),
        "routing": routing.name(),
        "pieces": pieces,
        "logical_steps": plan.len(),
    });
    meta.as_object_mut().expect("an object").extend(extra);
    Ok(Schedule { header: ScheduleHeader { topology: topology.clone(), collective: coll, meta: Some(meta) }, steps })
}
