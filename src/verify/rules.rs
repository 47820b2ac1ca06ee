//! Rules 1-5 in one streaming pass: structure, no link sharing, causality, reduction soundness,
//! completion.
//!
//! State is flat: for copy-only collectives which npus hold each piece (one bit per (piece, npu),
//! or short holder lists when the bits would not fit: `presence`); for reducing
//! collectives one contributor set (a bitset over rank indices) per (piece, npu). Transfers of a
//! step read the state at the start of the step; their deliveries are collected and applied at
//! the end of the step (docs/design/MODEL.md section 3).

use super::fast_hash::FastHash;
use super::presence::Presence;
use super::{Diagnostic, Findings, Rule, Stats, VerifyOptions};
use crate::collective::{Collective, CollectiveKind};
use crate::schedule::{Op, ScheduleHeader, Step};
use crate::topology::{LinkId, NodeId, Topology};

const NONE: u32 = u32::MAX;

/// Copy-only kinds keep one bit per (piece, npu) up to this many bytes of bits, and holder lists
/// beyond (docs: `presence`).
const PIECE_BITS_LIMIT: u128 = 1 << 30;
const SLOTS: usize = 4;
/// Deliveries whose presence is loaded together (`Presence::warm`): enough loads in flight to
/// hide memory latency, few enough to stay in the first-level cache.
const WARM_BATCH: usize = 64;

fn key(piece: usize, node: usize) -> u64 {
    ((piece as u64) << 32) | node as u64
}

struct Delivery {
    node: u32,
    piece: u32,
    transfer: u32,
    op: Op,
    /// Offset of the carried contributor set in `carried` (reducing kinds).
    value: u32,
}

/// Which non-destination pieces each node holds and until when (for the peak-relay report).
enum Relays {
    Off,
    /// Few holders per piece (copy-only kinds): up to `SLOTS` (node, first hold, last send)
    /// entries inline per piece, the rare rest in a map. Inline entries keep the per-hop cost at
    /// one cache line.
    Slots {
        slots: Vec<[[u32; 3]; SLOTS]>,
        overflow: std::collections::HashMap<u64, [u32; 2], FastHash>,
    },
    /// Many holders per piece (reducing kinds): dense first-hold and last-send per (piece, npu).
    Dense {
        n_npus: usize,
        start: Vec<u32>,
        last: Vec<u32>,
    },
}

impl Relays {
    fn hold(&mut self, piece: usize, node: usize, from: u32) {
        match self {
            Relays::Off => {}
            Relays::Slots { slots, overflow } => {
                let row = &mut slots[piece];
                for e in row.iter_mut() {
                    if e[0] == node as u32 {
                        return;
                    }
                    if e[0] == NONE {
                        *e = [node as u32, from, NONE];
                        return;
                    }
                }
                overflow.entry(key(piece, node)).or_insert([from, NONE]);
            }
            Relays::Dense { n_npus, start, .. } => {
                let i = piece * *n_npus + node;
                if start[i] == NONE {
                    start[i] = from;
                }
            }
        }
    }

    fn sent(&mut self, piece: usize, node: usize, step: u32) {
        match self {
            Relays::Off => {}
            Relays::Slots { slots, overflow } => {
                for e in slots[piece].iter_mut() {
                    if e[0] == node as u32 {
                        e[2] = step;
                        return;
                    }
                    if e[0] == NONE {
                        return;
                    }
                }
                if let Some(e) = overflow.get_mut(&key(piece, node)) {
                    e[1] = step;
                }
            }
            Relays::Dense { n_npus, start, last } => {
                let i = piece * *n_npus + node;
                if start[i] != NONE {
                    last[i] = step;
                }
            }
        }
    }

    /// (node, count, step) of the largest number of non-destination pieces held at once.
    fn peak(&self, steps: u32, nodes: usize) -> Option<(NodeId, usize, usize)> {
        let end = steps.saturating_sub(1);
        let width = steps as usize + 1;
        // Difference counts per (node, step): +1 where a holding starts, -1 after it ends.
        let dense = nodes.checked_mul(width).is_some_and(|n| n <= 1 << 26);
        let mut diff: Vec<i32> = if dense { vec![0; nodes * width] } else { Vec::new() };
        let mut events: Vec<(u32, u32, i32)> = Vec::new();
        let mut add = |node: u32, s: u32, l: u32| {
            let e = if l == NONE { end } else { l.max(s) };
            if s > end {
                return;
            }
            if dense {
                diff[node as usize * width + s as usize] += 1;
                diff[node as usize * width + e as usize + 1] -= 1;
            } else {
                events.push((node, s, 1));
                events.push((node, e + 1, -1));
            }
        };
        match self {
            Relays::Off => return None,
            Relays::Slots { slots, overflow } => {
                slots.iter().flatten().filter(|e| e[0] != NONE).for_each(|e| add(e[0], e[1], e[2]));
                overflow.iter().for_each(|(&k, e)| add(k as u32, e[0], e[1]));
            }
            Relays::Dense { n_npus, start, last } => {
                for (i, (&s, &l)) in start.iter().zip(last).enumerate() {
                    if s != NONE {
                        add((i % n_npus) as u32, s, l);
                    }
                }
            }
        }
        if dense {
            for node in 0..nodes {
                for step in 0..width {
                    events.extend((diff[node * width + step] != 0).then_some((node as u32, step as u32, diff[node * width + step])));
                }
            }
        } else {
            events.sort_unstable();
        }
        let mut best: Option<(NodeId, usize, usize)> = None;
        let mut cur_node = NONE;
        let mut count: i64 = 0;
        for (node, step, delta) in events {
            if node != cur_node {
                cur_node = node;
                count = 0;
            }
            count += delta as i64;
            if count > 0 && best.is_none_or(|b| count as usize > b.1) && step <= end {
                best = Some((NodeId(node), count as usize, step as usize));
            }
        }
        best
    }
}

pub(super) struct CoreRules {
    topo: Topology,
    collective: Collective,
    allow_contention: bool,
    reducing: bool,
    n_npus: usize,
    link_src: Vec<u32>,
    link_dst: Vec<u32>,
    link_up: Vec<bool>,
    link_stamp: Vec<u32>,
    link_owner: Vec<u32>,
    node_stamp: Vec<u32>,
    epoch: u32,
    /// Copy-only kinds: which npus hold each piece.
    presence: Presence,
    /// Reducing kinds: contributor sets, `rwords` u64 per (piece, npu).
    rwords: usize,
    values: Vec<u64>,
    full: Vec<u64>,
    carried: Vec<u64>,
    scratch: Vec<u64>,
    deliveries: Vec<Delivery>,
    /// The piece index of each piece of the transfer at hand (`NONE` for an invalid id).
    piece_ix: Vec<u32>,
    relays: Relays,
    stats: Stats,
}

fn set_text(bits: &[u64]) -> String {
    let ranks: Vec<String> = (0..bits.len() * 64).filter(|&i| bits[i / 64] >> (i % 64) & 1 == 1).map(|i| i.to_string()).collect();
    if ranks.len() > 8 {
        format!("{{{}, ... ({} ranks)}}", ranks[..8].join(", "), ranks.len())
    } else {
        format!("{{{}}}", ranks.join(", "))
    }
}

impl CoreRules {
    pub(super) fn new(header: &ScheduleHeader, options: &VerifyOptions) -> Self {
        let topo = header.topology.clone();
        let c = header.collective.clone();
        let n_npus = topo.num_npus();
        let reducing = c.kind.is_reducing();
        let r = c.num_ranks();
        let rwords = r.div_ceil(64);
        let space = c.piece_space();
        let mut values = Vec::new();
        let dense_limit = match options.sparse_pieces {
            None => PIECE_BITS_LIMIT,
            Some(true) => 0,
            Some(false) => u128::MAX,
        };
        let mut presence = Presence::new(if reducing { 0 } else { space }, n_npus, dense_limit);
        let mut full = vec![0u64; rwords];
        for i in 0..r {
            full[i / 64] |= 1 << (i % 64);
        }
        let mut relays = match (options.track_relays, reducing) {
            (false, _) => Relays::Off,
            (true, false) => Relays::Slots { slots: vec![[[NONE; 3]; SLOTS]; space], overflow: Default::default() },
            (true, true) => Relays::Dense { n_npus, start: vec![NONE; space * n_npus], last: vec![NONE; space * n_npus] },
        };
        if reducing {
            values = vec![0u64; space * n_npus * rwords];
            for pi in 0..space {
                let j = pi / c.pieces as usize;
                for (ri, &node) in c.ranks.iter().enumerate() {
                    let at = (pi * n_npus + node.index()) * rwords;
                    values[at + ri / 64] |= 1 << (ri % 64);
                    if c.kind == CollectiveKind::ReduceScatter && ri != j {
                        relays.hold(pi, node.index(), 0);
                    }
                }
            }
        } else {
            for pi in 0..space {
                if !c.is_piece_index(pi) {
                    continue;
                }
                let id = c.piece_at(pi);
                let src = c.ranks[c.source(&id).expect("copy-only pieces have a source")].index();
                presence.insert(pi, src);
                if c.kind == CollectiveKind::AllToAll {
                    relays.hold(pi, src, 0);
                }
            }
        }
        let n_links = topo.num_links();
        let (mut link_src, mut link_dst, mut link_up) = (Vec::with_capacity(n_links), Vec::with_capacity(n_links), Vec::with_capacity(n_links));
        for (_, l) in topo.links() {
            link_src.push(l.src.0);
            link_dst.push(l.dst.0);
            link_up.push(l.up);
        }
        CoreRules {
            node_stamp: vec![0; topo.num_nodes()],
            topo,
            collective: c,
            allow_contention: options.allow_contention,
            reducing,
            n_npus,
            link_src,
            link_dst,
            link_up,
            link_stamp: vec![0; n_links],
            link_owner: vec![0; n_links],
            epoch: 0,
            presence,
            rwords,
            values,
            full,
            carried: Vec::new(),
            scratch: vec![0; rwords],
            deliveries: Vec::new(),
            piece_ix: Vec::new(),
            relays,
            stats: Stats::default(),
        }
    }

    fn node_text(&self, n: u32) -> String {
        let node = NodeId(n);
        match self.collective.rank_index(node) {
            Some(r) => format!("node {n} {} (rank {r})", self.topo.node(node).name),
            None => format!("node {n} {}", self.topo.node(node).name),
        }
    }

    /// Why a path cannot start or end at a node that is not a rank (docs/design/MODEL.md
    /// sections 1 and 3: only ranks store pieces), or `None` for a rank.
    fn not_a_rank(&self, n: u32) -> Option<String> {
        if self.collective.rank_index(NodeId(n)).is_some() {
            None
        } else if n as usize >= self.n_npus {
            Some(format!("a switch, {}", self.node_text(n)))
        } else {
            Some(format!(
                "{}, an npu outside the collective's ranks: only ranks store pieces, and a runtime runs no program on it, so a path may only pass \
                 through it (docs/design/MODEL.md sections 1 and 3)",
                self.node_text(n)
            ))
        }
    }

    fn is_destination(&self, piece: usize, node: usize) -> bool {
        let c = &self.collective;
        let rest = piece / c.pieces as usize;
        match c.kind {
            CollectiveKind::AllToAll => c.ranks[rest % c.num_ranks()].index() == node,
            CollectiveKind::ReduceScatter => c.ranks[rest].index() == node,
            CollectiveKind::AllGather | CollectiveKind::AllReduce => c.rank_index(NodeId(node as u32)).is_some(),
        }
    }

    fn value_at(&self, piece: usize, node: usize) -> usize {
        (piece * self.n_npus + node) * self.rwords
    }

    pub(super) fn step(&mut self, s: usize, step: &Step, out: &mut Findings) {
        let stamp = s as u32 + 1;
        self.deliveries.clear();
        self.carried.clear();
        let n_links = self.link_src.len();
        for (ti, tr) in step.transfers.iter().enumerate() {
            let diag = |rule: Rule, subject: Option<String>, message: String| Diagnostic { rule, step: Some(s), transfer: Some(ti), subject, message };
            self.stats.transfers += 1;
            self.stats.longest_path = self.stats.longest_path.max(tr.path.len());
            self.stats.piece_hops += (tr.pieces.len() * tr.path.len()) as u64;
            if tr.path.is_empty() {
                out.fail(diag(Rule::Structure, None, "the path is empty".into()));
                continue;
            }
            self.epoch += 1;
            let mut prev: Option<(u32, LinkId)> = None;
            let mut src: Option<u32> = None;
            // Single-hop: every interior node routes without storing, a switch or an npu that is
            // not a rank (docs/design/MODEL.md section 3).
            let mut interior_routers_only = true;
            for (h, &link) in tr.path.iter().enumerate() {
                let l = link.index();
                if l >= n_links {
                    out.fail(diag(Rule::Structure, Some(format!("link {link}")), format!("no such link (there are {n_links} links)")));
                    prev = None;
                    continue;
                }
                let (a, b) = (self.link_src[l], self.link_dst[l]);
                let subject = || Some(self.topo.describe_link(link));
                if h == 0 {
                    src = Some(a);
                    self.node_stamp[a as usize] = self.epoch;
                } else {
                    if self.collective.rank_index(NodeId(a)).is_some() {
                        interior_routers_only = false;
                    }
                    if let Some((p, pl)) = prev {
                        if p != a {
                            out.fail(diag(
                                Rule::Structure,
                                subject(),
                                format!(
                                    "the path is not connected: {} ends at {} but the next link starts at {}",
                                    self.topo.describe_link(pl),
                                    self.node_text(p),
                                    self.node_text(a)
                                ),
                            ));
                        }
                    }
                }
                if self.node_stamp[b as usize] == self.epoch {
                    out.fail(diag(Rule::Structure, subject(), format!("the path visits {} twice", self.node_text(b))));
                } else {
                    self.node_stamp[b as usize] = self.epoch;
                }
                if !self.link_up[l] {
                    out.fail(diag(Rule::Structure, subject(), "the link is down".into()));
                }
                if self.link_stamp[l] == stamp {
                    let d = diag(Rule::LinkSharing, subject(), format!("also used by transfer {}", self.link_owner[l]));
                    if self.allow_contention {
                        out.warn(d);
                    } else {
                        out.fail(d);
                    }
                } else {
                    self.link_stamp[l] = stamp;
                    self.link_owner[l] = ti as u32;
                }
                prev = Some((b, link));
            }
            let last = tr.path.last().filter(|l| l.index() < n_links).map(|l| self.link_dst[l.index()]);
            let mut ends_ok = true;
            for (end, node) in [("starts", src), ("ends", last)] {
                if let Some(why) = node.and_then(|n| self.not_a_rank(n)) {
                    out.fail(diag(Rule::Structure, None, format!("the path {end} at {why}")));
                    ends_ok = false;
                }
            }
            if interior_routers_only {
                self.stats.single_hop_transfers += 1;
            }
            if tr.op == Op::Reduce && !self.reducing {
                out.fail(diag(
                    Rule::Reduction,
                    None,
                    format!("reduce in a {} collective, whose pieces have no contributions to combine", self.collective.kind),
                ));
            }
            let endpoints = match (src, last) {
                (Some(a), Some(b)) if ends_ok => Some((a, b)),
                _ => None,
            };
            self.piece_ix.clear();
            self.piece_ix.extend(tr.pieces.iter().map(|p| self.collective.piece_index(p).map_or(NONE, |i| i as u32)));
            if let (Some((a, _)), false) = (endpoints, self.reducing) {
                let warm = self.piece_ix.iter().filter(|&&i| i != NONE).fold(0, |acc, &i| acc ^ self.presence.warm(i as usize, a as usize));
                std::hint::black_box(warm);
            }
            for (p, &pi) in tr.pieces.iter().zip(&self.piece_ix) {
                let Some(pi) = (pi != NONE).then_some(pi as usize) else {
                    let why = self.collective.piece_error(p).unwrap_or_default();
                    out.fail(diag(Rule::Structure, Some(format!("piece {p}")), why));
                    continue;
                };
                let Some((a, b)) = endpoints else { continue };
                let held = if self.reducing {
                    let at = self.value_at(pi, a as usize);
                    self.values[at..at + self.rwords].iter().any(|&w| w != 0)
                } else {
                    self.presence.holds(pi, a as usize)
                };
                if !held {
                    out.fail(diag(
                        Rule::Causality,
                        Some(format!("piece {p}")),
                        format!("{} does not hold the piece at the start of the step", self.node_text(a)),
                    ));
                    continue;
                }
                self.relays.sent(pi, a as usize, s as u32);
                let value = self.carried.len() as u32;
                if self.reducing {
                    let at = self.value_at(pi, a as usize);
                    self.carried.extend_from_slice(&self.values[at..at + self.rwords]);
                }
                self.deliveries.push(Delivery { node: b, piece: pi as u32, transfer: ti as u32, op: tr.op, value });
            }
        }
        if self.reducing {
            self.apply_reducing(s, out);
        } else {
            self.apply_copies(s);
        }
        self.stats.steps = s + 1;
    }

    fn apply_copies(&mut self, s: usize) {
        let deliveries = std::mem::take(&mut self.deliveries);
        for batch in deliveries.chunks(WARM_BATCH) {
            let warm = batch.iter().fold(0, |acc, d| acc ^ self.presence.warm(d.piece as usize, d.node as usize));
            std::hint::black_box(warm);
            for d in batch {
                let (pi, node) = (d.piece as usize, d.node as usize);
                if !self.presence.insert(pi, node) {
                    self.stats.wasted_copies += 1;
                } else if !self.is_destination(pi, node) {
                    self.relays.hold(pi, node, s as u32 + 1);
                }
            }
        }
        self.deliveries = deliveries;
    }

    fn apply_reducing(&mut self, s: usize, out: &mut Findings) {
        let mut deliveries = std::mem::take(&mut self.deliveries);
        deliveries.sort_unstable_by_key(|d| ((d.node as u64) << 32) | d.piece as u64);
        let rw = self.rwords;
        let mut i = 0;
        while i < deliveries.len() {
            let (node, pi) = (deliveries[i].node, deliveries[i].piece);
            let mut j = i;
            while j < deliveries.len() && deliveries[j].node == node && deliveries[j].piece == pi {
                j += 1;
            }
            let group = &deliveries[i..j];
            let first = group[0].value as usize;
            let piece = self.collective.piece_at(pi as usize);
            let diag = |t: u32, message: String| Diagnostic {
                rule: Rule::Reduction,
                step: Some(s),
                transfer: Some(t as usize),
                subject: Some(format!("piece {piece}")),
                message,
            };
            let at = self.value_at(pi as usize, node as usize);
            let all_reduce = group.iter().all(|d| d.op == Op::Reduce);
            let all_copy = group.iter().all(|d| d.op == Op::Copy);
            self.scratch.copy_from_slice(&self.carried[first..first + rw]);
            if all_reduce {
                for d in &group[1..] {
                    let v = &self.carried[d.value as usize..d.value as usize + rw];
                    if v.iter().zip(&self.scratch).any(|(a, b)| a & b != 0) {
                        let overlap: Vec<u64> = v.iter().zip(&self.scratch).map(|(a, b)| a & b).collect();
                        out.fail(diag(d.transfer, format!("reduces that reach {} in one step overlap on ranks {}", self.node_text(node), set_text(&overlap))));
                    }
                    for (m, x) in self.scratch.iter_mut().zip(v) {
                        *m |= x;
                    }
                }
                let old = &self.values[at..at + rw];
                if old.iter().zip(&self.scratch).any(|(a, b)| a & b != 0) {
                    let overlap: Vec<u64> = old.iter().zip(&self.scratch).map(|(a, b)| a & b).collect();
                    out.fail(diag(
                        group[0].transfer,
                        format!(
                            "double counting: {} already holds the contributions of ranks {} that the reduce adds again",
                            self.node_text(node),
                            set_text(&overlap)
                        ),
                    ));
                }
                for (o, m) in self.values[at..at + rw].iter_mut().zip(&self.scratch) {
                    *o |= m;
                }
            } else if all_copy {
                for d in &group[1..] {
                    if self.carried[d.value as usize..d.value as usize + rw] != self.scratch[..] {
                        out.fail(diag(d.transfer, format!("copies with different values reach {} in one step", self.node_text(node))));
                    } else {
                        self.stats.wasted_copies += 1;
                    }
                }
                let old = &self.values[at..at + rw];
                let lost: Vec<u64> = old.iter().zip(&self.scratch).map(|(o, c)| o & !c).collect();
                if lost.iter().any(|&w| w != 0) {
                    out.fail(diag(
                        group[0].transfer,
                        format!("the copy loses the contributions of ranks {} that {} held", set_text(&lost), self.node_text(node)),
                    ));
                } else if old == &self.scratch[..] {
                    self.stats.wasted_copies += 1;
                }
                self.values[at..at + rw].copy_from_slice(&self.scratch);
            } else {
                out.fail(diag(group[0].transfer, format!("a copy and a reduce of the same piece reach {} in one step", self.node_text(node))));
                for d in group {
                    for (o, x) in self.values[at..at + rw].iter_mut().zip(&self.carried[d.value as usize..d.value as usize + rw]) {
                        *o |= x;
                    }
                }
            }
            if !self.is_destination(pi as usize, node as usize) {
                self.relays.hold(pi as usize, node as usize, s as u32 + 1);
            }
            i = j;
        }
        self.deliveries = deliveries;
    }

    pub(super) fn finish(self, out: &mut Findings) -> Stats {
        let c = &self.collective;
        let mut stats = self.stats.clone();
        for pi in 0..c.piece_space() {
            if !c.is_required_index(pi) {
                continue;
            }
            let id = c.piece_at(pi);
            let dests: Vec<usize> = match c.destinations(&id) {
                crate::collective::Destinations::One(r) => vec![r],
                crate::collective::Destinations::All => (0..c.num_ranks()).collect(),
            };
            for r in dests {
                let node = c.ranks[r].index();
                let fail = |message: String| Diagnostic { rule: Rule::Completion, step: None, transfer: None, subject: Some(format!("piece {id}")), message };
                if self.reducing {
                    let at = self.value_at(pi, node);
                    let v = &self.values[at..at + self.rwords];
                    if v != &self.full[..] {
                        let missing: Vec<u64> = self.full.iter().zip(v).map(|(f, x)| f & !x).collect();
                        let have: u32 = v.iter().map(|w| w.count_ones()).sum();
                        out.fail(fail(format!(
                            "{} ends with the contributions of {have} of {} ranks (missing ranks {})",
                            self.node_text(node as u32),
                            c.num_ranks(),
                            set_text(&missing)
                        )));
                    }
                } else if !self.presence.holds(pi, node) {
                    out.fail(fail(format!("never reaches {}", self.node_text(node as u32))));
                }
            }
        }
        stats.peak_relay = self.relays.peak(stats.steps as u32, self.n_npus);
        stats
    }
}
