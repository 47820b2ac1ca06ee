//! Classes of fault patterns: the orbits of the sweep's cases under the symmetry group, each
//! member with the word of generators that maps the class representative onto it.
//!
//! An orbit is found exactly by a breadth-first search from its first case over the images
//! under every generator (a generated group's orbit is the connected component of its
//! generators' graph). The search runs over every image, also images that are not cases of the
//! sweep (a translate of an OCS is a set of cables no OCS carries), so two OCSes are in one class
//! exactly when a symmetry maps one's cables onto the other's. The representative of a class is
//! its first case in the sweep's order, and classes are numbered in the order of their
//! representatives: the same inputs always give the same classes.

use super::patterns::FaultCase;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};

/// One member of a class: its case and the generators (in order) that map the class
/// representative's cables onto its cables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The index of the case in the sweep's order.
    pub case: usize,
    /// Generator indices, applied first to last.
    pub word: Vec<u16>,
}

/// An orbit of cases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Class {
    /// The members in the sweep's order; the first is the representative (empty word).
    pub members: Vec<Member>,
}

impl Class {
    /// The representative's case index.
    pub fn representative(&self) -> usize {
        self.members[0].case
    }
}

/// The classes of `cases` under the group whose generators permute the cables as
/// `cable_maps[g]` does.
pub fn orbits(cases: &[FaultCase], cable_maps: &[Vec<u32>]) -> Vec<Class> {
    let case_of: HashMap<&[u32], usize> = cases.iter().enumerate().map(|(i, c)| (c.cables.as_slice(), i)).collect();
    let mut assigned = vec![false; cases.len()];
    let mut classes = Vec::new();
    for start in 0..cases.len() {
        if assigned[start] {
            continue;
        }
        let mut members = orbit_members(&cases[start].cables, cable_maps, &case_of);
        members.sort_by_key(|m| m.case);
        for m in &members {
            assigned[m.case] = true;
        }
        debug_assert_eq!(members[0].case, start, "earlier cases are in earlier classes");
        classes.push(Class { members });
    }
    classes
}

/// The cases in the orbit of `start`, each with a shortest word reaching it.
fn orbit_members(start: &[u32], cable_maps: &[Vec<u32>], case_of: &HashMap<&[u32], usize>) -> Vec<Member> {
    // Every image seen, with the image it was reached from and the generator used.
    let mut reached: HashMap<Vec<u32>, Option<(Vec<u32>, u16)>> = HashMap::from([(start.to_vec(), None)]);
    let mut queue = VecDeque::from([start.to_vec()]);
    let mut members = Vec::new();
    while let Some(set) = queue.pop_front() {
        if let Some(&case) = case_of.get(set.as_slice()) {
            members.push(Member { case, word: word_to(&set, &reached) });
        }
        for (g, map) in cable_maps.iter().enumerate() {
            let mut image: Vec<u32> = set.iter().map(|&c| map[c as usize]).collect();
            image.sort_unstable();
            if let Entry::Vacant(v) = reached.entry(image.clone()) {
                v.insert(Some((set.clone(), g as u16)));
                queue.push_back(image);
            }
        }
    }
    members
}

fn word_to(set: &[u32], reached: &HashMap<Vec<u32>, Option<(Vec<u32>, u16)>>) -> Vec<u16> {
    let mut word = Vec::new();
    let mut at = set.to_vec();
    while let Some(Some((from, g))) = reached.get(&at) {
        word.push(*g);
        at = from.clone();
    }
    word.reverse();
    word
}

#[cfg(test)]
mod tests {
    use super::super::patterns::{enumerate, Cables, FaultFamily};
    use super::*;
    use crate::topology::symmetry::{CoordinateMap, SymmetryGroup};
    use crate::topology::{fat_tree, torus, FatTreeParams, Topology, TorusParams};
    use std::collections::BTreeSet;

    fn classes_of(t: &Topology, family: FaultFamily) -> (Vec<FaultCase>, Vec<Class>) {
        let cables = Cables::of(t);
        let group = SymmetryGroup::of(t).unwrap();
        let maps: Vec<Vec<u32>> = group.generators.iter().map(|g| cables.permutation(&g.map)).collect();
        let cases = enumerate(t, &cables, family).unwrap();
        let classes = orbits(&cases, &maps);
        // Every word maps the representative onto its member.
        for class in &classes {
            let rep = &cases[class.representative()].cables;
            for m in &class.members {
                let a = group.element(t, &m.word);
                let perm = cables.permutation(&a);
                let mut image: Vec<u32> = rep.iter().map(|&c| perm[c as usize]).collect();
                image.sort_unstable();
                assert_eq!(image, cases[m.case].cables);
            }
        }
        (cases, classes)
    }

    fn sizes(classes: &[Class]) -> Vec<usize> {
        classes.iter().map(|c| c.members.len()).collect()
    }

    fn mesh(dims: &[usize]) -> Topology {
        let mut p = TorusParams::uniform(dims, 32.0, 100.0);
        p.wrap = vec![false; dims.len()];
        torus(&p).unwrap()
    }

    #[test]
    fn single_cables_by_hand() {
        // Every cable of a square torus is a translate or a transpose of every other.
        let (_, c) = classes_of(&torus(&TorusParams::uniform(&[4, 4], 32.0, 100.0)).unwrap(), FaultFamily::Cables);
        assert_eq!(sizes(&c), vec![32]);
        let (_, c) = classes_of(&torus(&TorusParams::uniform(&[8, 8, 8], 32.0, 100.0)).unwrap(), FaultFamily::Cables);
        assert_eq!(sizes(&c), vec![1536]);
        // 3x4: no dimension swap, so one class per dimension (12 cables each).
        let (cases, c) = classes_of(&torus(&TorusParams::uniform(&[3, 4], 32.0, 100.0)).unwrap(), FaultFamily::Cables);
        assert_eq!(sizes(&c), vec![12, 12]);
        assert_eq!(cases.len(), 24);
        // A 4x4 mesh: a cable is at the end or the middle of its line, on a border line or an
        // inner one: 4 classes of 6, 6, 6 and 6 (12 per dimension, swapped by the transpose).
        let (_, c) = classes_of(&mesh(&[4, 4]), FaultFamily::Cables);
        assert_eq!(sizes(&c).iter().sum::<usize>(), 24);
        assert_eq!(sizes(&c), vec![8, 4, 8, 4]);
    }

    #[test]
    fn ocs_classes_by_hand() {
        // One cube: every OCS carries one wrap cable, all alike.
        let (_, c) = classes_of(&torus(&TorusParams::uniform(&[4, 4, 4], 32.0, 100.0)).unwrap(), FaultFamily::Ocs { cube: 4 });
        assert_eq!(sizes(&c), vec![48]);
        // 8x4x4: the 16 OCSes of dimension 0 join the two cubes; those of dimensions 1 and 2 (32,
        // swapped by the transpose of the two radix-4 dimensions) wrap within each cube.
        let (_, c) = classes_of(&torus(&TorusParams::uniform(&[8, 4, 4], 32.0, 100.0)).unwrap(), FaultFamily::Ocs { cube: 4 });
        assert_eq!(sizes(&c), vec![16, 32]);
    }

    /// Every coordinate map of a torus whose dimensions all have the same kind, listed
    /// outright (not by generators).
    fn all_coordinate_maps(dims: &[usize]) -> Vec<CoordinateMap> {
        let nd = dims.len();
        let mut out = Vec::new();
        for axes in itertools::Itertools::permutations(0..nd, nd) {
            for reflect_bits in 0..1u32 << nd {
                let reflect: Vec<bool> = (0..nd).map(|d| reflect_bits >> d & 1 == 1).collect();
                let shifts = itertools::Itertools::multi_cartesian_product(dims.iter().map(|&n| 0..n));
                for shift in shifts {
                    out.push(CoordinateMap { axes: axes.clone(), reflect: reflect.clone(), shift });
                }
            }
        }
        out
    }

    #[test]
    fn cable_pairs_of_4x4x4_match_brute_force() {
        let t = torus(&TorusParams::uniform(&[4, 4, 4], 32.0, 100.0)).unwrap();
        let (cases, classes) = classes_of(&t, FaultFamily::CablePairs);
        // Brute force: the least image of every pair under every one of the 3072 coordinate maps.
        let s = t.torus_shape().unwrap();
        let cables = Cables::of(&t);
        let table = crate::topology::symmetry::LinkTable::of(&t).unwrap();
        let perms: Vec<Vec<u32>> = all_coordinate_maps(&s.dims)
            .iter()
            .map(|m| cables.permutation(&crate::topology::symmetry::Automorphism::new(&t, &table, m.permutation(s).unwrap()).unwrap()))
            .collect();
        assert_eq!(perms.len(), 3072);
        let canonical = |case: &FaultCase| {
            perms
                .iter()
                .map(|p| {
                    let mut image: Vec<u32> = case.cables.iter().map(|&c| p[c as usize]).collect();
                    image.sort_unstable();
                    image
                })
                .min()
                .unwrap()
        };
        let forms: Vec<Vec<u32>> = cases.iter().map(canonical).collect();
        let distinct: BTreeSet<&Vec<u32>> = forms.iter().collect();
        assert_eq!(classes.len(), distinct.len());
        for class in &classes {
            let rep = &forms[class.representative()];
            assert!(class.members.iter().all(|m| &forms[m.case] == rep));
        }
    }

    #[test]
    fn fat_tree_cables_by_hand() {
        let tree = |levels, k, npus, board| {
            fat_tree(&FatTreeParams { levels, k, osr: 1.0, npus, board, bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 }).unwrap()
        };
        // npu-leaf and leaf-spine cables.
        let (_, c) = classes_of(&tree(2, 8, 16, None), FaultFamily::Cables);
        assert_eq!(sizes(&c), vec![16, 16]);
        // Boards of two leaves add board cables inside a leaf (2 x 2 x 6) and across (2 x 16).
        let (_, c) = classes_of(&tree(2, 8, 16, Some(8)), FaultFamily::Cables);
        let mut s = sizes(&c);
        s.sort();
        assert_eq!(s, vec![16, 16, 24, 32]);
        // 3 levels: npu-ToR, ToR-aggregation, aggregation-core.
        let (_, c) = classes_of(&tree(3, 4, 8, None), FaultFamily::Cables);
        assert_eq!(sizes(&c), vec![8, 8, 8]);
    }
}
