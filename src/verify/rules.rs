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

/// Reducing kinds whose contributor sets per (piece, npu) would take more than this many bytes
/// are checked piece by piece ([`ByPiece`]).
const DENSE_CONTRIBUTORS_LIMIT: u128 = 64 << 20;

/// A transfer a reducing kind's piece-by-piece pass replays: where it is and what it does.
struct End {
    step: u32,
    /// Its index in the step.
    index: u32,
    src: u32,
    dst: u32,
    op: Op,
}

/// Reducing kinds, piece by piece: the transfers with valid ends and the pieces each carries,
/// recorded while the steps stream by (about 8 bytes per piece-hop at the end); rules 3-5 are then
/// checked with one piece's contributor sets in memory at a time
/// ([`CoreRules::check_by_piece`]), instead of a set per (piece, npu) throughout (on a 16x16x16
/// torus at 6 pieces per block that is 51 GiB).
struct ByPiece {
    ends: Vec<End>,
    /// Per recorded transfer, where its pieces start in `pieces`.
    start: Vec<u64>,
    /// The piece indices the recorded transfers carry, in stream order.
    pieces: Vec<u32>,
}

/// The relays' records of a range of pieces, for one thread of the piece-by-piece pass: the
/// dense records of the pieces from `first` on, or none.
enum RelayShare<'a> {
    Off,
    Dense { n_npus: usize, first: usize, start: &'a mut [u32], last: &'a mut [u32] },
}

impl RelayShare<'_> {
    /// As [`Relays::hold`].
    fn hold(&mut self, piece: usize, node: usize, from: u32) {
        if let RelayShare::Dense { n_npus, first, start, .. } = self {
            hold_dense(start, (piece - *first) * *n_npus + node, from);
        }
    }

    /// As [`Relays::sent`].
    fn sent(&mut self, piece: usize, node: usize, step: u32) {
        if let RelayShare::Dense { n_npus, first, start, last } = self {
            sent_dense(start, last, (piece - *first) * *n_npus + node, step);
        }
    }
}

/// A (piece, npu) of the dense relay records, at `i`, first held from step `from` (the first
/// hold counts).
fn hold_dense(start: &mut [u32], i: usize, from: u32) {
    if start[i] == NONE {
        start[i] = from;
    }
}

/// A (piece, npu) of the dense relay records, at `i`, sent in `step`: its last send, when it was
/// held as a relay.
fn sent_dense(start: &[u32], last: &mut [u32], i: usize, step: u32) {
    if start[i] != NONE {
        last[i] = step;
    }
}

/// One piece's contributor sets in the piece-by-piece pass: a row per npu, set to the npu's own
/// contribution when the piece first uses it.
struct PieceRows {
    rw: usize,
    vals: Vec<u64>,
    /// The piece whose value each row holds (`NONE`: none yet).
    piece: Vec<u32>,
}

impl PieceRows {
    /// Where `node`'s value of piece `pi` starts in `vals`.
    fn at(&mut self, c: &Collective, pi: usize, node: u32) -> usize {
        let at = node as usize * self.rw;
        if self.piece[node as usize] != pi as u32 {
            self.piece[node as usize] = pi as u32;
            self.vals[at..at + self.rw].fill(0);
            if let Some(r) = c.rank_index(NodeId(node)) {
                self.vals[at + r / 64] |= 1 << (r % 64);
            }
        }
        at
    }
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
            Relays::Dense { n_npus, start, .. } => hold_dense(start, piece * *n_npus + node, from),
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
            Relays::Dense { n_npus, start, last } => sent_dense(start, last, piece * *n_npus + node, step),
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
    /// Per piece index: the `epoch` of the last transfer that listed it (a piece listed twice in
    /// one transfer is a rule-1 failure).
    piece_stamp: Vec<u32>,
    epoch: u32,
    /// Copy-only kinds: which npus hold each piece.
    presence: Presence,
    /// Reducing kinds: contributor sets, `rwords` u64 per (piece, npu), or the transfers to
    /// replay piece by piece (`by_piece`, and `values` is empty).
    rwords: usize,
    by_piece: Option<ByPiece>,
    values: Vec<u64>,
    full: Vec<u64>,
    carried: Vec<u64>,
    scratch: Vec<u64>,
    deliveries: Vec<Delivery>,
    /// Copy-only kinds: the step's deliveries, (node, piece).
    copies: Vec<(u32, u32)>,
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
        let dense_bytes = space as u128 * n_npus as u128 * rwords as u128 * 8;
        let by_piece = (reducing && options.sparse_pieces.unwrap_or(dense_bytes > DENSE_CONTRIBUTORS_LIMIT)).then(|| ByPiece {
            ends: Vec::new(),
            start: Vec::new(),
            pieces: Vec::new(),
        });
        if reducing {
            if by_piece.is_none() {
                values = vec![0u64; space * n_npus * rwords];
            }
            // Every rank starts with its own contribution (piece by piece: set when first used)
            // and, in a reduce_scatter, holds the pieces of every other block.
            let start_relays = c.kind == CollectiveKind::ReduceScatter && !matches!(relays, Relays::Off);
            if by_piece.is_none() || start_relays {
                for pi in 0..space {
                    let j = pi / c.pieces as usize;
                    for (ri, &node) in c.ranks.iter().enumerate() {
                        if by_piece.is_none() {
                            let at = (pi * n_npus + node.index()) * rwords;
                            values[at + ri / 64] |= 1 << (ri % 64);
                        }
                        if start_relays && ri != j {
                            relays.hold(pi, node.index(), 0);
                        }
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
            piece_stamp: vec![0; space],
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
            by_piece,
            values,
            full,
            carried: Vec::new(),
            scratch: vec![0; rwords],
            deliveries: Vec::new(),
            copies: Vec::new(),
            piece_ix: Vec::new(),
            relays,
            stats: Stats::default(),
        }
    }

    fn node_text(&self, n: u32) -> String {
        node_text(&self.topo, &self.collective, n)
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

    fn value_at(&self, piece: usize, node: usize) -> usize {
        (piece * self.n_npus + node) * self.rwords
    }

    pub(super) fn step(&mut self, s: usize, step: &Step, out: &mut Findings) {
        let stamp = s as u32 + 1;
        self.deliveries.clear();
        self.copies.clear();
        if !self.reducing {
            // Sized to the step (the largest step's pieces, not the next power of two).
            self.copies.reserve_exact(step.transfers.iter().map(|t| t.pieces.len()).sum());
        }
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
            self.epoch = self.epoch.wrapping_add(1);
            if self.epoch == 0 {
                // Wrapped: stale stamps could match the new epochs.
                self.node_stamp.fill(0);
                self.piece_stamp.fill(0);
                self.epoch = 1;
            }
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
                    let owner = self.link_owner[l];
                    let why = if owner as usize == ti { "the path crosses it twice".to_string() } else { format!("also used by transfer {owner}") };
                    let d = diag(Rule::LinkSharing, subject(), why);
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
            if tr.pieces.is_empty() {
                self.stats.empty_transfers += 1;
            }
            if tr.op == Op::Reduce && !self.reducing {
                out.fail(diag(
                    Rule::Reduction,
                    None,
                    format!("reduce in an {} collective, whose pieces have no contributions to combine", self.collective.kind),
                ));
            }
            let endpoints = match (src, last) {
                (Some(a), Some(b)) if ends_ok => Some((a, b)),
                _ => None,
            };
            if let (Some(bp), Some((a, b))) = (&mut self.by_piece, endpoints) {
                bp.start.push(bp.pieces.len() as u64);
                bp.ends.push(End { step: s as u32, index: ti as u32, src: a, dst: b, op: tr.op });
            }
            self.piece_ix.clear();
            self.piece_ix.extend(tr.pieces.iter().map(|p| self.collective.piece_index(p).map_or(NONE, |i| i as u32)));
            if let (Some((a, _)), false) = (endpoints, self.reducing) {
                let warm = self.piece_ix.iter().filter(|&&i| i != NONE).fold(0, |acc, &i| acc ^ self.presence.warm(i as usize, a as usize));
                std::hint::black_box(warm);
            }
            for (k, (p, &pi)) in tr.pieces.iter().zip(&self.piece_ix).enumerate() {
                let Some(pi) = (pi != NONE).then_some(pi as usize) else {
                    let why = self.collective.piece_error(p).unwrap_or_default();
                    out.fail(diag(Rule::Structure, Some(format!("piece {p}")), why));
                    continue;
                };
                // A transfer carries a piece once: listed twice it would be delivered (and
                // costed) twice, whatever the op.
                if self.piece_stamp[pi] == self.epoch {
                    let first = self.piece_ix.iter().position(|&x| x as usize == pi).expect("listed before");
                    out.fail(diag(Rule::Structure, Some(format!("piece {p}")), format!("listed twice in the transfer's pieces (at {first} and {k})")));
                    continue;
                }
                self.piece_stamp[pi] = self.epoch;
                let Some((a, b)) = endpoints else { continue };
                if let Some(bp) = &mut self.by_piece {
                    bp.pieces.push(pi as u32);
                    continue;
                }
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
                if self.reducing {
                    self.deliveries.push(Delivery { node: b, piece: pi as u32, transfer: ti as u32, op: tr.op, value });
                } else {
                    self.copies.push((b, pi as u32));
                }
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
        let copies = std::mem::take(&mut self.copies);
        for batch in copies.chunks(WARM_BATCH) {
            let warm = batch.iter().fold(0, |acc, &(node, pi)| acc ^ self.presence.warm(pi as usize, node as usize));
            std::hint::black_box(warm);
            for &(node, pi) in batch {
                let (pi, node) = (pi as usize, node as usize);
                if !self.presence.insert(pi, node) {
                    self.stats.wasted_copies += 1;
                } else if !is_destination(&self.collective, pi, node) {
                    self.relays.hold(pi, node, s as u32 + 1);
                }
            }
        }
        self.copies = copies;
    }

    fn apply_reducing(&mut self, s: usize, out: &mut Findings) {
        let mut deliveries = std::mem::take(&mut self.deliveries);
        deliveries.sort_unstable_by_key(|d| ((d.node as u64) << 32) | d.piece as u64);
        let rw = self.rwords;
        for group in deliveries.chunk_by(|a, b| a.node == b.node && a.piece == b.piece) {
            let (node, pi) = (group[0].node, group[0].piece as usize);
            let at = self.value_at(pi, node as usize);
            let (topo, c) = (&self.topo, &self.collective);
            merge_deliveries(
                group,
                &self.carried,
                &mut self.values[at..at + rw],
                &mut self.scratch,
                &mut self.stats.wasted_copies,
                &|| node_text(topo, c, node),
                &mut |t, message| out.fail(reduction_diag(c, s, t, pi, message)),
            );
            if !is_destination(&self.collective, pi, node as usize) {
                self.relays.hold(pi, node as usize, s as u32 + 1);
            }
        }
        self.deliveries = deliveries;
    }

    /// Rules 3-5 of a reducing collective piece by piece, over the transfers `bp` recorded: one
    /// piece's contributor sets in memory at a time, its transfers in step order, each step's
    /// sends reading the values at its start. Pieces are independent here, so ranges of them run
    /// on the threads at hand, each with its own sets and findings, merged in piece order (the
    /// findings are those of one pass over the pieces in order).
    fn check_by_piece(&mut self, bp: ByPiece, out: &mut Findings) {
        use rayon::prelude::*;
        let ByPiece { ends, mut start, pieces } = bp;
        start.push(pieces.len() as u64);
        // The recorded transfers of each piece, in stream (so step) order.
        let space = self.collective.piece_space();
        let mut offset = vec![0u64; space + 1];
        pieces.iter().for_each(|&p| offset[p as usize + 1] += 1);
        for i in 0..space {
            offset[i + 1] += offset[i];
        }
        let mut order = vec![0u32; pieces.len()];
        let mut fill = offset.clone();
        for (e, w) in start.windows(2).enumerate() {
            for &p in &pieces[w[0] as usize..w[1] as usize] {
                order[fill[p as usize] as usize] = e as u32;
                fill[p as usize] += 1;
            }
        }
        drop((pieces, fill));
        // Ranges of pieces with about equal numbers of transfers, a few per thread.
        let parts = (rayon::current_num_threads() * 4).min(space.max(1));
        let total = offset[space];
        let mut bounds = vec![0usize];
        for k in 1..parts {
            let at = offset.partition_point(|&o| o < total * k as u64 / parts as u64).min(space);
            if at > *bounds.last().expect("starts at 0") {
                bounds.push(at);
            }
        }
        bounds.push(space);
        // The relays' first-hold and last-send records of each range (dense per piece and npu for
        // the reducing kinds, the only ones checked piece by piece).
        let mut relays = std::mem::replace(&mut self.relays, Relays::Off);
        let shares: Vec<RelayShare> = match &mut relays {
            Relays::Dense { n_npus, start, last } => {
                let n = *n_npus;
                let (mut start, mut last) = (start.as_mut_slice(), last.as_mut_slice());
                bounds
                    .windows(2)
                    .map(|w| {
                        let (s, rest_s) = std::mem::take(&mut start).split_at_mut((w[1] - w[0]) * n);
                        let (l, rest_l) = std::mem::take(&mut last).split_at_mut((w[1] - w[0]) * n);
                        (start, last) = (rest_s, rest_l);
                        RelayShare::Dense { n_npus: n, first: w[0], start: s, last: l }
                    })
                    .collect()
            }
            _ => bounds.windows(2).map(|_| RelayShare::Off).collect(),
        };
        let limit = out.limit();
        let this = &*self;
        let results: Vec<(Findings, u64)> = bounds
            .windows(2)
            .zip(shares)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|(w, mut share)| {
                let mut found = Findings::new(limit);
                let wasted = this.check_pieces(w[0]..w[1], &ends, &offset, &order, &mut share, &mut found);
                (found, wasted)
            })
            .collect();
        self.relays = relays;
        for (found, wasted) in results {
            out.absorb(found);
            self.stats.wasted_copies += wasted;
        }
    }

    /// [`CoreRules::check_by_piece`] over the pieces of `range`: their transfers are
    /// `order[offset[pi]..offset[pi + 1]]`, indices into `ends`. Returns the copies that changed
    /// nothing.
    fn check_pieces(&self, range: std::ops::Range<usize>, ends: &[End], offset: &[u64], order: &[u32], relays: &mut RelayShare, out: &mut Findings) -> u64 {
        let (topo, c, rw) = (&self.topo, &self.collective, self.rwords);
        let mut rows = PieceRows { rw, vals: vec![0u64; self.n_npus * rw], piece: vec![NONE; self.n_npus] };
        let (mut carried, mut deliveries, mut scratch, mut wasted) = (Vec::new(), Vec::new(), vec![0u64; rw], 0u64);
        for pi in range {
            let ids = &order[offset[pi] as usize..offset[pi + 1] as usize];
            for group in ids.chunk_by(|&a, &b| ends[a as usize].step == ends[b as usize].step) {
                let s = ends[group[0] as usize].step as usize;
                carried.clear();
                deliveries.clear();
                for &e in group {
                    let end = &ends[e as usize];
                    let at = rows.at(c, pi, end.src);
                    if rows.vals[at..at + rw].iter().all(|&w| w == 0) {
                        out.fail(Diagnostic {
                            rule: Rule::Causality,
                            step: Some(s),
                            transfer: Some(end.index as usize),
                            subject: Some(format!("piece {}", c.piece_at(pi))),
                            message: format!("{} does not hold the piece at the start of the step", node_text(topo, c, end.src)),
                        });
                        continue;
                    }
                    relays.sent(pi, end.src as usize, s as u32);
                    deliveries.push(Delivery { node: end.dst, piece: pi as u32, transfer: end.index, op: end.op, value: carried.len() as u32 });
                    carried.extend_from_slice(&rows.vals[at..at + rw]);
                }
                deliveries.sort_by_key(|d: &Delivery| d.node);
                for group in deliveries.chunk_by(|a, b| a.node == b.node) {
                    let node = group[0].node;
                    let at = rows.at(c, pi, node);
                    merge_deliveries(
                        group,
                        &carried,
                        &mut rows.vals[at..at + rw],
                        &mut scratch,
                        &mut wasted,
                        &|| node_text(topo, c, node),
                        &mut |t, message| out.fail(reduction_diag(c, s, t, pi, message)),
                    );
                    if !is_destination(c, pi, node as usize) {
                        relays.hold(pi, node as usize, s as u32 + 1);
                    }
                }
            }
            if c.is_required_index(pi) {
                for r in self.destinations(pi) {
                    let node = c.ranks[r].index() as u32;
                    let at = rows.at(c, pi, node);
                    self.check_final(pi, node, &rows.vals[at..at + rw], out);
                }
            }
        }
        wasted
    }

    /// The rank indices that must end with piece `pi`.
    fn destinations(&self, pi: usize) -> Vec<usize> {
        let c = &self.collective;
        match c.destinations(&c.piece_at(pi)) {
            crate::collective::Destinations::One(r) => vec![r],
            crate::collective::Destinations::All => (0..c.num_ranks()).collect(),
        }
    }

    /// Rule 5 for a reducing kind: `node` ends with every contribution to piece `pi` (`v`).
    fn check_final(&self, pi: usize, node: u32, v: &[u64], out: &mut Findings) {
        if v != &self.full[..] {
            let missing: Vec<u64> = self.full.iter().zip(v).map(|(f, x)| f & !x).collect();
            let have: u32 = v.iter().map(|w| w.count_ones()).sum();
            out.fail(Diagnostic {
                rule: Rule::Completion,
                step: None,
                transfer: None,
                subject: Some(format!("piece {}", self.collective.piece_at(pi))),
                message: format!(
                    "{} ends with the contributions of {have} of {} ranks (missing ranks {})",
                    self.node_text(node),
                    self.collective.num_ranks(),
                    set_text(&missing)
                ),
            });
        }
    }

    pub(super) fn finish(mut self, out: &mut Findings) -> Stats {
        if let Some(bp) = self.by_piece.take() {
            self.check_by_piece(bp, out);
        } else {
            let c = &self.collective;
            for pi in (0..c.piece_space()).filter(|&pi| c.is_required_index(pi)) {
                for r in self.destinations(pi) {
                    let node = c.ranks[r].index();
                    if self.reducing {
                        let at = self.value_at(pi, node);
                        self.check_final(pi, node as u32, &self.values[at..at + self.rwords], out);
                    } else if !self.presence.holds(pi, node) {
                        out.fail(Diagnostic {
                            rule: Rule::Completion,
                            step: None,
                            transfer: None,
                            subject: Some(format!("piece {}", c.piece_at(pi))),
                            message: format!("never reaches {}", self.node_text(node as u32)),
                        });
                    }
                }
            }
        }
        let mut stats = self.stats.clone();
        stats.peak_relay = self.relays.peak(stats.steps as u32, self.n_npus);
        stats
    }
}

/// Applies the deliveries of one piece to one node in one step to the node's value `old` (rule
/// 4, docs/design/MODEL.md section 3): reduces merge when their contributor sets are pairwise
/// disjoint and disjoint from `old`; copies replace `old` when they agree and lose nothing of it.
/// `carried` holds the delivered values; failures go to `fail` with the transfer they name, and
/// `who` describes the node.
fn merge_deliveries(
    group: &[Delivery],
    carried: &[u64],
    old: &mut [u64],
    scratch: &mut [u64],
    wasted: &mut u64,
    who: &dyn Fn() -> String,
    fail: &mut dyn FnMut(u32, String),
) {
    let rw = old.len();
    let value = |d: &Delivery| &carried[d.value as usize..d.value as usize + rw];
    let overlap = |a: &[u64], b: &[u64]| a.iter().zip(b).any(|(x, y)| x & y != 0).then(|| a.iter().zip(b).map(|(x, y)| x & y).collect::<Vec<u64>>());
    scratch.copy_from_slice(value(&group[0]));
    if group.iter().all(|d| d.op == Op::Reduce) {
        for d in &group[1..] {
            if let Some(both) = overlap(value(d), scratch) {
                fail(d.transfer, format!("reduces that reach {} in one step overlap on ranks {}", who(), set_text(&both)));
            }
            scratch.iter_mut().zip(value(d)).for_each(|(m, x)| *m |= x);
        }
        if let Some(both) = overlap(old, scratch) {
            fail(
                group[0].transfer,
                format!("double counting: {} already holds the contributions of ranks {} that the reduce adds again", who(), set_text(&both)),
            );
        }
        old.iter_mut().zip(scratch.iter()).for_each(|(o, m)| *o |= m);
    } else if group.iter().all(|d| d.op == Op::Copy) {
        for d in &group[1..] {
            if value(d) != &scratch[..] {
                fail(d.transfer, format!("copies with different values reach {} in one step", who()));
            } else {
                *wasted += 1;
            }
        }
        if old.iter().zip(scratch.iter()).any(|(o, c)| o & !c != 0) {
            let lost: Vec<u64> = old.iter().zip(scratch.iter()).map(|(o, c)| o & !c).collect();
            fail(group[0].transfer, format!("the copy loses the contributions of ranks {} that {} held", set_text(&lost), who()));
        } else if old == &scratch[..] {
            *wasted += 1;
        }
        old.copy_from_slice(scratch);
    } else {
        fail(group[0].transfer, format!("a copy and a reduce of the same piece reach {} in one step", who()));
        for d in group {
            old.iter_mut().zip(value(d)).for_each(|(o, x)| *o |= x);
        }
    }
}

/// A rule-4 diagnostic of transfer `transfer` of step `step` about piece `pi`.
fn reduction_diag(c: &Collective, step: usize, transfer: u32, pi: usize, message: String) -> Diagnostic {
    Diagnostic { rule: Rule::Reduction, step: Some(step), transfer: Some(transfer as usize), subject: Some(format!("piece {}", c.piece_at(pi))), message }
}

/// Node `n` as diagnostics name it, with its rank where it has one.
fn node_text(topo: &Topology, c: &Collective, n: u32) -> String {
    let node = NodeId(n);
    match c.rank_index(node) {
        Some(r) => format!("node {n} {} (rank {r})", topo.node(node).name),
        None => format!("node {n} {}", topo.node(node).name),
    }
}

/// Whether `node` must end with piece `pi`.
fn is_destination(c: &Collective, piece: usize, node: usize) -> bool {
    let rest = piece / c.pieces as usize;
    match c.kind {
        CollectiveKind::AllToAll => c.ranks[rest % c.num_ranks()].index() == node,
        CollectiveKind::ReduceScatter => c.ranks[rest].index() == node,
        CollectiveKind::AllGather | CollectiveKind::AllReduce => c.rank_index(NodeId(node as u32)).is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{torus, TorusParams};

    /// A reducing kind checks piece by piece once a set per (piece, npu) would pass the limit
    /// (16x16x16 all_reduce: 8 GiB), keeping one piece's sets (2 MiB); a small one stays dense,
    /// and the options force either way.
    #[test]
    fn large_reducing_collectives_are_checked_piece_by_piece() {
        let header = |dims: &[usize]| {
            let t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).unwrap();
            let c = Collective::new(CollectiveKind::AllReduce, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
            ScheduleHeader { topology: t, collective: c, meta: None }
        };
        let big = CoreRules::new(&header(&[16, 16, 16]), &VerifyOptions::default());
        assert!(big.by_piece.is_some() && big.values.is_empty());
        let small = header(&[4, 4]);
        assert!(CoreRules::new(&small, &VerifyOptions::default()).by_piece.is_none());
        let lean = VerifyOptions { sparse_pieces: Some(true), ..Default::default() };
        assert!(CoreRules::new(&small, &lean).by_piece.is_some());
    }
}
