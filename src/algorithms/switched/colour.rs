//! Edge colouring of bipartite multigraphs with as many colours as the largest degree (König's
//! theorem), by the alternating-path method.
//!
//! The balanced router uses it to give every leaf-to-leaf flow of a step its own spine: edges of
//! one colour share no endpoint, so flows of one colour share no uplink and no downlink. The
//! fat-tree synthesizer (`crate::synth::switched`) uses it for its slots and spines.

const FREE: usize = usize::MAX;

/// Colours the edges `(left, right)` of a bipartite multigraph so that edges meeting at a vertex
/// differ. Returns each edge's colour and the number of colours (the largest degree).
pub(crate) fn colour_edges(left: usize, right: usize, edges: &[(usize, usize)]) -> (Vec<usize>, usize) {
    let mut degree_left = vec![0usize; left];
    let mut degree_right = vec![0usize; right];
    for &(u, v) in edges {
        degree_left[u] += 1;
        degree_right[v] += 1;
    }
    let delta = degree_left.iter().chain(&degree_right).copied().max().unwrap_or(0);
    // at_left[u * delta + c]: the edge of colour c at left vertex u (FREE if none).
    let mut at_left = vec![FREE; left * delta];
    let mut at_right = vec![FREE; right * delta];
    let mut colour = vec![FREE; edges.len()];
    for (e, &(u, v)) in edges.iter().enumerate() {
        // Both exist: u and v have fewer than delta coloured edges so far.
        let a = (0..delta).find(|&c| at_left[u * delta + c] == FREE).expect("a free colour at the left end");
        let b = (0..delta).find(|&c| at_right[v * delta + c] == FREE).expect("a free colour at the right end");
        if at_right[v * delta + a] != FREE {
            // Colour a is taken at v: swap a and b along the a/b path that starts at v. The path
            // enters left vertices by a-edges, and u has none, so it never reaches u; after the
            // swap, a is free at both ends.
            let mut path = Vec::new();
            let (mut x, mut on_right, mut want) = (v, true, a);
            loop {
                let next = if on_right { at_right[x * delta + want] } else { at_left[x * delta + want] };
                if next == FREE {
                    break;
                }
                path.push(next);
                x = if on_right { edges[next].0 } else { edges[next].1 };
                on_right = !on_right;
                want = if want == a { b } else { a };
            }
            for &p in &path {
                let (pu, pv) = edges[p];
                at_left[pu * delta + colour[p]] = FREE;
                at_right[pv * delta + colour[p]] = FREE;
            }
            for &p in &path {
                let (pu, pv) = edges[p];
                colour[p] = if colour[p] == a { b } else { a };
                at_left[pu * delta + colour[p]] = p;
                at_right[pv * delta + colour[p]] = p;
            }
        }
        colour[e] = a;
        at_left[u * delta + a] = e;
        at_right[v * delta + a] = e;
    }
    (colour, delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(left: usize, right: usize, edges: &[(usize, usize)]) {
        let (colour, delta) = colour_edges(left, right, edges);
        let mut seen = std::collections::HashSet::new();
        for (e, &(u, v)) in edges.iter().enumerate() {
            assert!(colour[e] < delta);
            assert!(seen.insert((0, u, colour[e])), "left {u} has colour {} twice", colour[e]);
            assert!(seen.insert((1, v, colour[e])), "right {v} has colour {} twice", colour[e]);
        }
    }

    #[test]
    fn regular_multigraphs_need_only_their_degree() {
        // An 8-regular bipartite graph (u -> 3u + 5s mod 8), then a dense pseudo-random multigraph.
        let mut edges = Vec::new();
        for u in 0..8 {
            for s in 0..8 {
                edges.push((u, (u * 3 + s * 5) % 8));
            }
        }
        check(8, 8, &edges);
        let mut edges = Vec::new();
        let mut x = 7usize;
        for _ in 0..500 {
            x = (x * 1103515245 + 12345) % (1 << 31);
            edges.push((x % 13, (x / 13) % 9));
        }
        check(13, 9, &edges);
        let (_, delta) = colour_edges(3, 3, &[(0, 0), (0, 0), (1, 2)]);
        assert_eq!(delta, 2);
        assert_eq!(colour_edges(2, 2, &[]).1, 0);
    }
}
