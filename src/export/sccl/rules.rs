//! The rules an SCCL algorithm file meets when msccl-tools loads it and `ncclize` lowers it to
//! MSCCL XML that computes the collective (docs/design/FORMATS.md "SCCL algorithm JSON", rules
//! 1-10). They are checked on SCCL's own terms (its chunks, addresses and ranks), so they apply
//! to any file, and `verify FILE` reports them beside the rules of docs/design/MODEL.md section 4.

use super::{buffer_maps, chunk_up, ScclAlgorithm, ScclChunk};
use crate::collective::MAX_PIECES;
use std::collections::{BTreeMap, HashMap, HashSet};

/// A rule of the format (1-10) that the file breaks, and where: the field and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScclProblem {
    /// The rule's number in docs/design/FORMATS.md "SCCL algorithm JSON".
    pub rule: u8,
    /// What breaks it.
    pub what: String,
}

impl std::fmt::Display for ScclProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rule {}: {}", self.rule, self.what)
    }
}

fn broken(rule: u8, what: impl Into<String>) -> ScclProblem {
    ScclProblem { rule, what: what.into() }
}

/// The distinct rules among `problems`, ascending.
pub fn rules_broken(problems: &[ScclProblem]) -> Vec<u8> {
    let rules: std::collections::BTreeSet<u8> = problems.iter().map(|p| p.rule).collect();
    rules.into_iter().collect()
}

/// Every rule the file breaks, one message each, naming the field and value (empty: none).
pub fn sccl_problems(alg: &ScclAlgorithm) -> Vec<ScclProblem> {
    let mut out = structure_problems(alg);
    if !out.is_empty() {
        return out;
    }
    let chunked = chunk_up(&alg.collective.chunks, alg.instance.chunks);
    buffers(alg, &chunked, &mut out);
    rounds(alg, &mut out);
    Run::new(alg, &chunked).steps(alg, &mut out);
    out
}

/// Why a send `[addr, src, dst]` breaks rule 5 (it must name a chunk's address and two
/// different ranks joined by a link).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unsendable {
    /// No chunk of the collective has the address.
    Address,
    /// A rank out of range, or a send from a rank to itself.
    Ranks,
    /// `topology.links[dst][src] = 0`.
    Link,
}

fn unsendable([addr, src, dst]: [u64; 3], links: &[Vec<u64>], is_address: impl Fn(u64) -> bool) -> Option<Unsendable> {
    let n = links.len() as u64;
    if !is_address(addr) {
        Some(Unsendable::Address)
    } else if src >= n || dst >= n || src == dst {
        Some(Unsendable::Ranks)
    } else if links[dst as usize].get(src as usize).is_none_or(|&m| m == 0) {
        Some(Unsendable::Link)
    } else {
        None
    }
}

/// The algorithm without the sends that break rule 5 (which [`sccl_problems`] reports), so that
/// `verify` can import and check the rest of its steps; the algorithm itself when its header
/// breaks rules 1-2 (the import refuses it then).
pub fn without_unsendable(alg: &ScclAlgorithm) -> ScclAlgorithm {
    let mut out = alg.clone();
    if !structure_problems(alg).is_empty() {
        return out;
    }
    let addresses: HashSet<u64> = chunk_up(&alg.collective.chunks, alg.instance.chunks).iter().map(|c| c.addr).collect();
    for step in &mut out.steps {
        step.sends.retain(|&send| unsendable(send, &alg.topology.links, |a| addresses.contains(&a)).is_none());
    }
    out
}

/// Rules 1 and 2: the objects, the shapes of the matrix and the collective, and what `ncclize`
/// and collsched do not take (pipelining, triggers, switches). Later rules index by rank, so a
/// failure here stops the check (and the import: these are the file's header).
pub fn structure_problems(alg: &ScclAlgorithm) -> Vec<ScclProblem> {
    let mut out = Vec::new();
    let tags = [("msccl_type", &alg.msccl_type, "algorithm"), ("instance.msccl_type", &alg.instance.msccl_type, "instance")];
    let tags = tags
        .into_iter()
        .chain([("collective.msccl_type", &alg.collective.msccl_type, "collective"), ("topology.msccl_type", &alg.topology.msccl_type, "topology")]);
    for (field, value, want) in tags {
        if value != want {
            out.push(broken(1, format!("{field} = \"{value}\": expected \"{want}\"")));
        }
    }
    for (t, s) in alg.steps.iter().enumerate().filter(|(_, s)| s.msccl_type != "step") {
        out.push(broken(1, format!("steps[{t}].msccl_type = \"{}\": expected \"step\"", s.msccl_type)));
    }
    for (c, ch) in alg.collective.chunks.iter().enumerate().filter(|(_, c)| c.msccl_type != "chunk") {
        out.push(broken(1, format!("collective.chunks[{c}].msccl_type = \"{}\": expected \"chunk\"", ch.msccl_type)));
    }
    let n = alg.topology.links.len();
    if alg.collective.nodes != n as u64 {
        out.push(broken(1, format!("collective.nodes = {}, but topology.links has {n} rows (one per rank)", alg.collective.nodes)));
    }
    for (dst, row) in alg.topology.links.iter().enumerate() {
        if row.len() != n {
            out.push(broken(1, format!("topology.links[{dst}] has {} entries: expected {n} (links[dst][src])", row.len())));
        } else if row[dst] != 0 {
            out.push(broken(1, format!("topology.links[{dst}][{dst}] = {}: a rank has no link to itself", row[dst])));
        }
    }
    for (c, ch) in alg.collective.chunks.iter().enumerate() {
        if let Some(r) = ch.pre.iter().chain(&ch.post).find(|&&r| r as usize >= n) {
            out.push(broken(1, format!("collective.chunks[{c}] names rank {r}, but there are {n} ranks")));
        }
    }
    if alg.instance.chunks == 0 {
        out.push(broken(2, "instance.chunks = 0: must be at least 1"));
    } else if let Some(limit) = chunk_count_problem(alg, n) {
        out.push(limit);
    }
    if let Some(p) = alg.instance.pipeline {
        out.push(broken(2, format!("instance.pipeline = {p}: ncclize refuses pipelined algorithms (write null)")));
    }
    if !alg.collective.triggers.is_empty() {
        out.push(broken(
            2,
            format!("collective.triggers has {} ranks: triggered sends (distributed sub-problems) are not supported", alg.collective.triggers.len()),
        ));
    }
    if !alg.topology.switches.is_empty() {
        out.push(broken(2, format!("topology.switches has {} groups: shared-bandwidth groups are not supported (write [])", alg.topology.switches.len())));
    }
    if n == 0 {
        out.push(broken(1, "topology.links is empty: an algorithm needs at least one rank"));
    }
    out
}

/// The most (rank, chunk) pairs the rules track for a chunked collective (one flag each).
pub const MAX_RANK_CHUNKS: u64 = 1 << 26;

/// Why `instance.chunks` cuts the collective into more chunks than can be checked or imported,
/// judged before anything is sized by it: every one of our collectives over n ranks has at most
/// n^2 x [`MAX_PIECES`] chunks once cut (P = chunks / n^2 for all of them but all_gather's n x P),
/// and the rules keep a flag per (rank, chunk).
fn chunk_count_problem(alg: &ScclAlgorithm, n: usize) -> Option<ScclProblem> {
    let (c, base, n) = (alg.instance.chunks, alg.collective.chunks.len() as u64, n as u64);
    let chunked = base.checked_mul(c);
    let most = n.saturating_mul(n).saturating_mul(MAX_PIECES as u64);
    let shown = || chunked.map_or_else(|| format!("{base} x {c}"), |t| t.to_string());
    if chunked.is_none_or(|t| t > most) {
        return Some(broken(2, format!(
            "instance.chunks = {c}: the collective's {base} chunks cut into {c} each are {} chunks, more than {n}^2 x {MAX_PIECES} = {most} ({MAX_PIECES} pieces per block over {n} ranks, collsched's most)",
            shown()
        )));
    }
    if chunked.is_none_or(|t| t.saturating_mul(n) > MAX_RANK_CHUNKS) {
        return Some(broken(2, format!(
            "instance.chunks = {c}: the collective's {base} chunks cut into {c} each are {} chunks over {n} ranks, more than the {MAX_RANK_CHUNKS} (rank, chunk) pairs collsched checks",
            shown()
        )));
    }
    None
}

/// Rule 3: the buffer maps are the ones msccl-tools derives from the chunked collective
/// (`ncclize` lays out the input and output buffers by them).
fn buffers(alg: &ScclAlgorithm, chunked: &[ScclChunk], out: &mut Vec<ScclProblem>) {
    let (input, output) = buffer_maps(chunked);
    for (field, file, derived) in [("input_map", &alg.input_map, input), ("output_map", &alg.output_map, output)] {
        let sorted: BTreeMap<u32, Vec<u64>> = file
            .iter()
            .map(|(r, v)| {
                let mut v = v.clone();
                v.sort_unstable();
                (*r, v)
            })
            .collect();
        if sorted != derived {
            let rank = sorted.keys().chain(derived.keys()).find(|r| sorted.get(r) != derived.get(r)).copied().unwrap_or(0);
            out.push(broken(
                3,
                format!(
                    "{field}[\"{rank}\"] = {:?}, but the collective chunked {} times puts addresses {:?} there",
                    sorted.get(&rank).cloned().unwrap_or_default(),
                    alg.instance.chunks,
                    derived.get(&rank).cloned().unwrap_or_default()
                ),
            ));
        }
    }
}

/// Rule 4: the instance counts the steps and allows the rounds they use.
fn rounds(alg: &ScclAlgorithm, out: &mut Vec<ScclProblem>) {
    if alg.instance.steps != alg.steps.len() as u64 {
        out.push(broken(4, format!("instance.steps = {}, but the file has {} steps", alg.instance.steps, alg.steps.len())));
    }
    for (t, s) in alg.steps.iter().enumerate().filter(|(_, s)| s.rounds == 0) {
        out.push(broken(4, format!("steps[{t}].rounds = {}: every step takes at least one round", s.rounds)));
    }
    let used: u64 = alg.steps.iter().map(|s| s.rounds).sum();
    let allowed = alg.instance.steps.saturating_add(alg.instance.extra_rounds);
    if used > allowed {
        out.push(broken(
            4,
            format!("the steps take {used} rounds, more than instance.steps + instance.extra_rounds = {} + {}", alg.instance.steps, alg.instance.extra_rounds),
        ));
    }
}

/// Which rank holds which chunk, step by step, with SCCL's semantics (a send gives the
/// receiver every chunk at the address that the sender holds; msccl `check_implements`).
struct Run<'a> {
    n: usize,
    links: &'a [Vec<u64>],
    chunks: &'a [ScclChunk],
    at_address: HashMap<u64, Vec<usize>>,
    /// `holds[rank * chunks + chunk]`.
    holds: Vec<bool>,
}

impl<'a> Run<'a> {
    fn new(alg: &'a ScclAlgorithm, chunked: &'a [ScclChunk]) -> Self {
        let n = alg.topology.links.len();
        let mut at_address: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut holds = vec![false; n * chunked.len()];
        for (c, ch) in chunked.iter().enumerate() {
            at_address.entry(ch.addr).or_default().push(c);
            for &r in &ch.pre {
                holds[r as usize * chunked.len() + c] = true;
            }
        }
        Run { n, links: &alg.topology.links, chunks: chunked, at_address, holds }
    }

    fn held(&self, rank: usize, addr: u64) -> Vec<usize> {
        self.at_address[&addr].iter().copied().filter(|&c| self.holds[rank * self.chunks.len() + c]).collect()
    }

    /// Rules 5-10 over every step, then the postcondition.
    fn steps(mut self, alg: &ScclAlgorithm, out: &mut Vec<ScclProblem>) {
        for (t, step) in alg.steps.iter().enumerate() {
            self.step(t, step, out);
        }
        let missing: Vec<String> = (0..self.chunks.len())
            .flat_map(|c| self.chunks[c].post.iter().map(move |&r| (r as usize, c)))
            .filter(|&(r, c)| !self.holds[r * self.chunks.len() + c])
            .map(|(r, c)| format!("rank {r} lacks chunk {c} (address {})", self.chunks[c].addr))
            .collect();
        if let Some(first) = missing.first() {
            out.push(broken(10, format!("the postcondition fails for {} (rank, chunk) pairs, first: {first}", missing.len())));
        }
    }

    fn step(&mut self, t: usize, step: &super::ScclStep, out: &mut Vec<ScclProblem>) {
        let mut listed = HashSet::new();
        let mut util: BTreeMap<(usize, usize), u64> = BTreeMap::new();
        // Chunks each (receiver, address) holds or is given so far in this step.
        let mut arriving: HashMap<(usize, u64), HashSet<usize>> = HashMap::new();
        let (mut senders, mut receivers) = (HashSet::new(), HashSet::new());
        let mut moves = Vec::new();
        for (i, &[addr, src, dst]) in step.sends.iter().enumerate() {
            let at = format!("steps[{t}].sends[{i}] = [{addr}, {src}, {dst}]");
            let (s, d) = (src as usize, dst as usize);
            match unsendable([addr, src, dst], self.links, |a| self.at_address.contains_key(&a)) {
                Some(Unsendable::Address) => {
                    out.push(broken(5, format!("{at}: no chunk of the collective has address {addr}")));
                    continue;
                }
                Some(Unsendable::Ranks) => {
                    out.push(broken(5, format!("{at}: needs two different ranks below {}", self.n)));
                    continue;
                }
                Some(Unsendable::Link) => out.push(broken(5, format!("{at}: topology.links[{d}][{s}] = 0, there is no link from rank {s} to rank {d}"))),
                None => {}
            }
            if !listed.insert((addr, s, d)) {
                out.push(broken(5, format!("{at}: listed twice in the step")));
                continue;
            }
            *util.entry((s, d)).or_default() += 1;
            let carried = self.held(s, addr);
            if carried.is_empty() {
                out.push(broken(7, format!("{at}: rank {s} holds no chunk at address {addr} at the start of step {t}")));
            }
            let have = arriving.entry((d, addr)).or_insert_with(|| self.held(d, addr).into_iter().collect());
            if let Some(c) = carried.iter().find(|c| have.contains(c)) {
                out.push(broken(8, format!(
                    "{at}: rank {d} already holds (or is given in this step) chunk {c} at address {addr}; ncclize makes this receive a reduction (rrc), so the chunk would count twice"
                )));
            }
            have.extend(carried.iter().copied());
            senders.insert((s, addr));
            receivers.insert((d, addr));
            moves.push((carried, d));
        }
        let mut both: Vec<&(usize, u64)> = senders.intersection(&receivers).collect();
        both.sort_unstable();
        for &(rank, addr) in both {
            out.push(broken(
                9,
                format!(
                    "step {t}: rank {rank} both sends and receives address {addr}; ncclize refuses a receive and a send on the same buffer index in one step"
                ),
            ));
        }
        for (&(s, d), &u) in &util {
            let cap = self.links[d][s].saturating_mul(step.rounds);
            if u > cap && self.links[d][s] > 0 {
                out.push(broken(
                    6,
                    format!(
                        "step {t}: {u} sends from rank {s} to rank {d}, but links[{d}][{s}] x rounds = {} x {} = {cap}; msccl-tools refuses the file",
                        self.links[d][s], step.rounds
                    ),
                ));
            }
        }
        let width = self.chunks.len();
        for (carried, d) in moves {
            for c in carried {
                self.holds[d * width + c] = true;
            }
        }
    }
}
