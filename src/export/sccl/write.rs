//! Writing a schedule as SCCL's algorithm JSON, and SCCL's coordinates of a schedule (steps,
//! rounds, chunks; docs/design/FORMATS.md "SCCL algorithm JSON", Export and Coordinates).
//!
//! SCCL's topology holds only ranks and a link multiplicity per ordered pair, so a schedule is
//! written only when every node of its topology is a rank and every transfer is one link between
//! two ranks; latencies are not written and bandwidths become multiplicities of the greatest
//! common divisor of the rank pairs' bandwidths. Everything else that cannot be said in the
//! format (non-uniform blocks, a copy in a reducing collective, a receive `ncclize` would turn
//! into a reduction) is refused with the step, transfer and piece, never dropped.

use super::{base_collective, buffer_maps, chunk_up, rules::sccl_problems, Addressing, ScclAlgorithm, ScclInstance, ScclStep, ScclTopology};
use crate::collective::CollectiveKind;
use crate::error::{Error, Result};
use crate::schedule::{Op, Schedule, Step, Transfer};
use crate::topology::Shape;
use crate::units::{rational_from_decimal, to_f64, Rational};
use num_integer::Integer;
use std::collections::BTreeMap;

/// The largest link multiplicity written: `ncclize` opens one channel per unit of a link's
/// multiplicity, and NCCL runs at most 32 channels (MAXCHANNELS).
pub const MAX_MULTIPLICITY: u64 = 32;

/// SCCL's coordinates of a schedule: what SCCL's synthesizer trades off (its Pareto frontier is
/// over steps and rounds per chunk; docs/design/FORMATS.md "SCCL algorithm JSON", Coordinates).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScclCoordinates {
    /// The number of steps S (each costs SCCL's alpha).
    pub steps: u64,
    /// Per step, its rounds: the least r >= 1 such that every rank pair's sends in the step fit
    /// in r times the pair's link multiplicity.
    pub rounds_per_step: Vec<u64>,
    /// R, the sum of `rounds_per_step`: the bandwidth cost in chunk transmissions over a link of
    /// multiplicity 1.
    pub rounds: u64,
    /// C, SCCL's `instance.chunks`: the chunks each chunk of SCCL's base collective is cut into
    /// (P for all_to_all, all_gather and reduce_scatter; R*P for all_reduce, whose base is one
    /// buffer).
    pub chunks: u64,
}

impl ScclCoordinates {
    /// R/C: the bandwidth cost in transmissions of one chunk of SCCL's base collective (an
    /// all_to_all block, a rank's all_gather block, a reduce_scatter output block, the
    /// all_reduce buffer) over a link of multiplicity 1.
    pub fn rounds_per_chunk(&self) -> Rational {
        Rational::new(self.rounds as i128, self.chunks.max(1) as i128)
    }
}

/// An SCCL algorithm written from a schedule.
#[derive(Clone, Debug)]
pub struct ScclExport {
    /// The algorithm, meeting every rule of the format.
    pub algorithm: ScclAlgorithm,
    /// The bandwidth of one unit of link multiplicity (GB/s); `None` without links.
    pub unit_gbps: Option<f64>,
    /// Its coordinates.
    pub coordinates: ScclCoordinates,
}

/// The ranks' links as SCCL sees them.
struct RankGraph {
    /// `links[dst][src]`: the multiplicity of the pair (rank indices).
    links: Vec<Vec<u64>>,
    unit: Option<Rational>,
    /// Per link id: its (sender, receiver) rank indices.
    pair_of_link: Vec<(u32, u32)>,
}

impl RankGraph {
    /// Checks that the topology is made of ranks only and sums the up links' bandwidths per
    /// rank pair into multiplicities of their greatest common divisor.
    fn of(s: &Schedule) -> Result<Self> {
        let (t, c) = (&s.header.topology, &s.header.collective);
        if let Some(node) = t.node_ids().find(|&v| c.rank_index(v).is_none()) {
            return Err(Error::bad(format!(
                "node {node} ({}, a {}) is not a rank of the collective: SCCL's topology holds only ranks",
                t.node(node).name,
                t.node(node).kind.as_str()
            )));
        }
        let n = c.num_ranks();
        let mut pair_of_link = Vec::with_capacity(t.num_links());
        let mut bandwidth: BTreeMap<(u32, u32), Rational> = BTreeMap::new();
        for (id, l) in t.links() {
            let pair = (c.rank_index(l.src).expect("every node is a rank") as u32, c.rank_index(l.dst).expect("every node is a rank") as u32);
            pair_of_link.push(pair);
            if l.up {
                let bw = rational_from_decimal(l.bandwidth_gbps).ok_or_else(|| Error::bad(format!("link {id}: bandwidth_gbps = {}", l.bandwidth_gbps)))?;
                *bandwidth.entry(pair).or_insert_with(|| Rational::from_integer(0)) += bw;
            }
        }
        // The gcd of rationals in lowest terms: gcd of the numerators over lcm of the denominators.
        let unit = bandwidth.values().fold(None, |acc: Option<Rational>, b| {
            Some(match acc {
                None => *b,
                Some(u) => Rational::new(u.numer().gcd(b.numer()), u.denom().lcm(b.denom())),
            })
        });
        let mut links = vec![vec![0u64; n]; n];
        for (&(a, b), bw) in &bandwidth {
            let m = (bw / unit.expect("a pair has a bandwidth")).to_integer();
            let m = u64::try_from(m).ok().filter(|&m| m <= MAX_MULTIPLICITY).ok_or_else(|| {
                Error::bad(format!(
                    "the links from rank {a} to rank {b} carry {m} x the greatest common divisor of the ranks' bandwidths ({} GB/s): more than {MAX_MULTIPLICITY} (ncclize opens one channel per unit, NCCL has at most {MAX_MULTIPLICITY})",
                    to_f64(&unit.expect("a pair has a bandwidth"))
                ))
            })?;
            links[b as usize][a as usize] = m;
        }
        Ok(RankGraph { links, unit, pair_of_link })
    }

    /// The rank pair of a transfer: it must be one link.
    fn pair(&self, t: usize, i: usize, tr: &Transfer) -> Result<(u32, u32)> {
        match tr.path[..] {
            [l] => Ok(self.pair_of_link[l.index()]),
            _ => Err(Error::bad(format!("step {t}, transfer {i}: its path has {} links; an SCCL send goes over one link between two ranks", tr.path.len()))),
        }
    }

    /// A step's rounds: the least r >= 1 with every pair's sends within r x its multiplicity.
    fn rounds(&self, sends: &BTreeMap<(u32, u32), u64>) -> u64 {
        sends.iter().map(|(&(a, b), &k)| k.div_ceil(self.links[b as usize][a as usize].max(1))).max().unwrap_or(1).max(1)
    }

    fn step_sends(&self, t: usize, step: &Step) -> Result<BTreeMap<(u32, u32), u64>> {
        let mut sends: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        for (i, tr) in step.transfers.iter().enumerate() {
            *sends.entry(self.pair(t, i, tr)?).or_default() += tr.pieces.len() as u64;
        }
        Ok(sends)
    }
}

fn uniform(s: &Schedule) -> Result<Addressing> {
    let c = &s.header.collective;
    if c.block_bytes.is_some() {
        return Err(Error::bad("collective.block_bytes: the blocks have different sizes, and SCCL's chunks all have one"));
    }
    Ok(Addressing { kind: c.kind, ranks: c.num_ranks() as u32, pieces: c.pieces })
}

/// SCCL's coordinates of a schedule (docs/design/FORMATS.md "SCCL algorithm JSON",
/// Coordinates): its steps, the rounds of each step and in all, and SCCL's chunks. Defined for
/// the schedules the format can hold: every node a rank, every transfer one link, uniform
/// blocks; otherwise [`Error::bad`] says which.
pub fn sccl_coordinates(s: &Schedule) -> Result<ScclCoordinates> {
    let addressing = uniform(s)?;
    let g = RankGraph::of(s)?;
    let rounds_per_step = s.steps.iter().enumerate().map(|(t, st)| Ok(g.rounds(&g.step_sends(t, st)?))).collect::<Result<Vec<u64>>>()?;
    Ok(ScclCoordinates { steps: s.steps.len() as u64, rounds: rounds_per_step.iter().sum(), rounds_per_step, chunks: addressing.chunks() })
}

/// The schedule as an SCCL algorithm (module docs). The schedule should be valid (`export`
/// verifies it first); the result is checked against every rule of the format, and a schedule
/// `ncclize` would lower wrongly (a receive of a chunk the receiver already holds, a rank that
/// sends and receives the same piece in one step) is refused with the rule.
pub fn sccl_algorithm(s: &Schedule) -> Result<ScclExport> {
    let addressing = uniform(s)?;
    if addressing.kind == CollectiveKind::AllReduce && addressing.ranks >= 2 {
        // Rules 8 and 9 leave no way to complete it: the rank whose first receive comes first
        // got it from a rank that still held only its own contribution, which then never gets
        // that first rank's without its own (docs/design/FORMATS.md "SCCL algorithm JSON").
        return Err(Error::bad(format!(
            "an all_reduce over {} ranks cannot be written as SCCL JSON that ncclize lowers correctly: ncclize makes every receive a reduction and refuses a rank that sends and receives an address in one step, and under these rules no all_reduce over 2 or more ranks completes (SCCL's own Allreduce algorithms fail in ncclize the same way)",
            addressing.ranks
        )));
    }
    let g = RankGraph::of(s)?;
    let reducing = addressing.kind.is_reducing();
    let mut steps = Vec::with_capacity(s.steps.len());
    for (t, step) in s.steps.iter().enumerate() {
        let mut sends = Vec::new();
        for (i, tr) in step.transfers.iter().enumerate() {
            let (a, b) = g.pair(t, i, tr)?;
            if (tr.op == Op::Reduce) != reducing {
                return Err(Error::bad(format!(
                    "step {t}, transfer {i}: a {} in {}: ncclize makes every receive of a reducing collective a reduction and no other receive one",
                    tr.op.as_str(),
                    addressing.kind
                )));
            }
            sends.extend(tr.pieces.iter().map(|p| [addressing.address(p), a as u64, b as u64]));
        }
        sends.sort_unstable();
        steps.push(ScclStep { msccl_type: "step".into(), rounds: g.rounds(&g.step_sends(t, step)?), sends });
    }
    let coordinates = ScclCoordinates {
        steps: steps.len() as u64,
        rounds_per_step: steps.iter().map(|s| s.rounds).collect(),
        rounds: steps.iter().map(|s| s.rounds).sum(),
        chunks: addressing.chunks(),
    };
    let collective = base_collective(addressing.kind, addressing.ranks);
    let (input_map, output_map) = buffer_maps(&chunk_up(&collective.chunks, coordinates.chunks));
    let instance = ScclInstance {
        msccl_type: "instance".into(),
        steps: coordinates.steps,
        extra_rounds: coordinates.rounds - coordinates.steps,
        chunks: coordinates.chunks,
        pipeline: None,
        extra_memory: None,
        allow_exchange: false,
    };
    let topology = ScclTopology { msccl_type: "topology".into(), name: topology_name(s), switches: Vec::new(), links: g.links };
    let name = format!("{}-{}-{}", collective.name, topology.name, instance_name(&instance));
    let algorithm = ScclAlgorithm { msccl_type: "algorithm".into(), name, instance, input_map, output_map, steps, collective, topology };
    let problems = sccl_problems(&algorithm);
    if let Some(first) = problems.first() {
        let more = if problems.len() > 1 { format!(" (and {} more)", problems.len() - 1) } else { String::new() };
        return Err(Error::bad(format!("the schedule cannot be written as SCCL JSON that ncclize lowers correctly: {first}{more}")));
    }
    Ok(ScclExport { algorithm, unit_gbps: g.unit.as_ref().map(to_f64), coordinates })
}

/// The file's text: compact JSON, keys in msccl-tools' order, sends and map entries ascending,
/// so the same schedule always gives the same bytes.
pub fn sccl_json(alg: &ScclAlgorithm) -> String {
    serde_json::to_string(alg).expect("an SCCL algorithm is JSON")
}

/// The topology's name: SCCL's own when the schedule was imported from SCCL, else the family.
fn topology_name(s: &Schedule) -> String {
    let meta = s.header.meta.as_ref();
    if let Some(name) = meta.filter(|m| m["imported_from"] == "sccl-json").and_then(|m| m["topology"].as_str()) {
        return name.to_string();
    }
    let t = &s.header.topology;
    let down = t.down_links().len();
    let faults = if down > 0 { format!(",down={down}") } else { String::new() };
    match t.shape() {
        Shape::Torus(x) if x.wrap.iter().all(|&w| w) => format!("Torus({}{faults})", x.dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")),
        Shape::Torus(x) => format!("Mesh({}{faults})", x.dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")),
        _ => format!("Custom(n={}{faults})", t.num_npus()),
    }
}

/// msccl's `Instance.__str__`: `steps=S[,rounds=R][,chunks=C]`.
fn instance_name(i: &ScclInstance) -> String {
    let mut s = format!("steps={}", i.steps);
    if i.extra_rounds > 0 {
        s += &format!(",rounds={}", i.steps + i.extra_rounds);
    }
    if i.chunks > 1 {
        s += &format!(",chunks={}", i.chunks);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::{torus_all_to_all, RingAlgorithm, Scheduler};
    use crate::collective::Collective;
    use crate::export::sccl::import_sccl;
    use crate::topology::{torus, TorusParams};

    /// A torus 3x4 whose dimension 1 links are twice as fast: the unit is the slower
    /// bandwidth, dimension-1 pairs have multiplicity 2, and a step carrying 2 pieces on a
    /// dimension-1 link takes one round, 2 on a dimension-0 link two.
    #[test]
    fn unequal_bandwidths_become_multiplicities_of_their_gcd() {
        let params = TorusParams { dims: vec![3, 4], wrap: vec![true, true], bandwidth_gbps: vec![32.0, 64.0], latency_ns: vec![100.0, 100.0] };
        let t = torus(&params).unwrap();
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 12, 1, None, &t).unwrap();
        let s = torus_all_to_all(&t, &c, RingAlgorithm::Ring, Scheduler::Sequential).unwrap();
        let export = sccl_algorithm(&s).unwrap();
        assert_eq!(export.unit_gbps, Some(32.0));
        let links = &export.algorithm.topology.links;
        // Node 0 = (0,0): (1,0) = node 1 along dimension 0, (0,1) = node 3 along dimension 1.
        assert_eq!((links[1][0], links[3][0], links[2][0], links[9][0]), (1, 2, 1, 2));
        assert_eq!(links.iter().flatten().filter(|&&m| m > 0).count(), t.num_links());
        for (t_idx, (step, rounds)) in s.steps.iter().zip(&export.coordinates.rounds_per_step).enumerate() {
            let need = step
                .transfers
                .iter()
                .map(|tr| {
                    let m = if s.header.topology.link(tr.path[0]).bandwidth_gbps == 64.0 { 2 } else { 1 };
                    (tr.pieces.len() as u64).div_ceil(m)
                })
                .max()
                .unwrap_or(1);
            assert_eq!(*rounds, need, "step {t_idx}");
        }
        // Read back without a spec: 1 GB/s per unit, so the links keep their ratio.
        let back = import_sccl(&export.algorithm, None).unwrap();
        let bw: Vec<f64> = back.header.topology.links().map(|(_, l)| l.bandwidth_gbps).collect();
        assert!(bw.iter().all(|&b| b == 1.0 || b == 2.0) && bw.contains(&2.0));
    }

    #[test]
    fn the_instance_name_is_msccls() {
        let i = |steps, extra_rounds, chunks| ScclInstance {
            msccl_type: "instance".into(),
            steps,
            extra_rounds,
            chunks,
            pipeline: None,
            extra_memory: None,
            allow_exchange: false,
        };
        assert_eq!(instance_name(&i(3, 0, 1)), "steps=3");
        assert_eq!(instance_name(&i(2, 1, 4)), "steps=2,rounds=3,chunks=4");
    }
}
