//! Time reversal: a gathering schedule run backwards is a reducing one.
//!
//! In an all-gather where every npu receives each piece once, each piece travels down a tree
//! rooted at its source, and an npu forwards a piece only after it has received it. Run the steps
//! in reverse order over the reverse links, with `reduce` instead of `copy`: an npu then sends its
//! partial value of a piece towards the root only after every child has merged its own into it,
//! the subtrees are disjoint (no contribution counted twice), and the root ends with everyone's.
//! That is a reduce-scatter; followed by the all-gather it is an all-reduce. Run backwards with
//! `copy`, a reduce-scatter whose pieces each go up a tree is likewise an all-gather.

use super::{Op, Step, Transfer};
use crate::error::{Error, Result};
use crate::topology::{LinkId, NodeId, Topology};
use std::collections::HashMap;

/// The reverse of every link: the i-th up link from `b` to `a` (in id order) for the i-th link
/// from `a` to `b`, so parallel cables pair one to one; `None` when it is missing or down (or the
/// link itself is down).
pub fn reverse_links(t: &Topology) -> Vec<Option<LinkId>> {
    let mut by_ends: HashMap<(NodeId, NodeId), Vec<LinkId>> = HashMap::new();
    for (l, link) in t.links() {
        by_ends.entry((link.src, link.dst)).or_default().push(l);
    }
    let mut reverse = vec![None; t.num_links()];
    for ((a, b), links) in &by_ends {
        let Some(back) = by_ends.get(&(*b, *a)) else { continue };
        for (&l, &r) in links.iter().zip(back) {
            if t.link(l).up && t.link(r).up {
                reverse[l.index()] = Some(r);
            }
        }
    }
    reverse
}

/// `steps` (an all-gather's) run backwards with `reduce` over the reverse links.
///
/// Errors: [`Error::infeasible`] when a link of some path has no reverse that is up.
pub fn reversed_as_reduce(t: &Topology, steps: &[Step]) -> Result<Vec<Step>> {
    reversed(t, steps, Op::Reduce)
}

/// `steps` run backwards over the reverse links, every transfer with `op`: an all-gather's with
/// `reduce` is a reduce-scatter, a reduce-scatter's (each piece up a tree to its block's rank)
/// with `copy` an all-gather (each piece down the same tree from its source).
///
/// Errors: [`Error::infeasible`] when a link of some path has no reverse that is up.
pub fn reversed(t: &Topology, steps: &[Step], op: Op) -> Result<Vec<Step>> {
    let reverse = reverse_links(t);
    steps
        .iter()
        .rev()
        .map(|step| {
            let transfers = step
                .transfers
                .iter()
                .map(|x| {
                    let path = x
                        .path
                        .iter()
                        .rev()
                        .map(|l| reverse[l.index()].ok_or_else(|| Error::infeasible(format!("no up link runs against {}", t.describe_link(*l)))))
                        .collect::<Result<Vec<_>>>()?;
                    Ok(Transfer { path, op, pieces: x.pieces.clone() })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Step { transfers })
        })
        .collect()
}
