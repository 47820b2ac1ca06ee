//! The checker on certificates small enough to re-derive on paper. Each value below is worked out
//! in the comment beside it, not taken from the code that builds certificates.

use collsched_checker::{check_bounds_str, check_str, parse_q, same_instance, Q};
use serde_json::{json, Value};

fn q(s: &str) -> Q {
    parse_q(s).unwrap()
}

/// A ring of 3 npus, both directions: 6 links of 2 bytes/ns and 10 ns each. Links, in order:
/// 0->1, 1->0, 1->2, 2->1, 2->0, 0->2. `down` lists link indices that are down.
fn ring3(down: &[usize], collective: Value) -> Value {
    let pairs = [(0, 1), (1, 0), (1, 2), (2, 1), (2, 0), (0, 2)];
    let links: Vec<Value> =
        pairs.iter().enumerate().map(|(i, (s, d))| json!({"src": s, "dst": d, "capacity": "2", "latency_ns": "10", "up": !down.contains(&i)})).collect();
    json!({"nodes": 3, "npus": 3, "switch_latency_ns": "0", "links": links, "collective": collective})
}

fn a2a(block: &str) -> Value {
    json!({"kind": "all_to_all", "ranks": [0, 1, 2], "block_bytes": block})
}

fn cert(instance: Value, claims: Value) -> Value {
    json!({"format": "collsched.certificate", "version": 1, "spec": "spec.json", "spec_sha256": "0".repeat(64), "instance": instance, "claims": claims})
}

fn derived(c: &Value) -> Vec<Q> {
    check_str(&c.to_string()).unwrap_or_else(|e| panic!("{e}")).claims.into_iter().map(|c| c.derived).collect()
}

fn rejected(c: &Value) -> String {
    check_str(&c.to_string()).expect_err("the certificate must be rejected").message
}

#[test]
fn healthy_ring_of_three_all_to_all() {
    // 6 blocks of 12 bytes, each one hop: volume = 6*12*1 / (6 links * 2) = 6 ns. The cut {0}
    // must send 2 blocks (24 bytes) over its 2 outgoing links (4 bytes/ns): 6 ns. Lengths 1 on
    // every link are the volume bound again: 6 ns. Each block needs one transfer, leaving a rank
    // over the 6 links out of ranks: 72 / 12 = 6 ns. Farthest pair: 1 hop, 10 ns.
    let c = cert(
        ring3(&[], a2a("12")),
        json!([
            {"bound": "steps", "value": "1", "witness": {"source": 0, "destination": 2}},
            {"bound": "latency", "value": "10", "witness": {"source": 0, "destination": 2}},
            {"bound": "volume", "value": "6"},
            {"bound": "cut", "value": "6", "witness": {"nodes": [0], "into": false}},
            {"bound": "flow", "value": "6", "witness": {"lengths": ["1", "1", "1", "1", "1", "1"]}},
            {"bound": "transmissions", "value": "6", "witness": {"into": true}}
        ]),
    );
    assert_eq!(derived(&c), ["1", "10", "6", "6", "6", "6"].map(q));
    let report = check_str(&c.to_string()).unwrap();
    assert_eq!(report.bandwidth_bound, Some(q("6")));
}

#[test]
fn a_failed_cable_makes_a_line() {
    // Cable 2-0 down (links 4 and 5): the line 0 - 1 - 2. Blocks 0<->2 take 2 hops, 20 ns.
    // volume = (4 blocks * 1 hop + 2 blocks * 2 hops) * 12 / (4 up links * 2) = 96 / 8 = 12 ns.
    // The cut {0}: 24 bytes over one link of 2 bytes/ns = 12 ns; the cut {0, 1} into 2 likewise.
    // Lengths (1, 0, 0, 0, -, -) charge only link 0->1: 2 blocks cross it, 24 over 2 = 12 ns.
    let c = cert(
        ring3(&[4, 5], a2a("12")),
        json!([
            {"bound": "steps", "value": "2", "witness": {"source": 0, "destination": 2}},
            {"bound": "latency", "value": "20", "witness": {"source": 2, "destination": 0}},
            {"bound": "volume", "value": "12"},
            {"bound": "cut", "value": "12", "witness": {"nodes": [0], "into": false}},
            {"bound": "cut", "value": "12", "witness": {"nodes": [2], "into": true}},
            {"bound": "flow", "value": "12", "witness": {"lengths": ["1", "0", "0", "0", "5", "7"]}},
            {"bound": "flow", "value": "12", "witness": {"lengths": ["3", "3", "3", "3", "5", "7"]}}
        ]),
    );
    // The last lengths are 3 on every up link (the down ones do not count): the volume bound.
    assert_eq!(derived(&c), ["2", "20", "12", "12", "12", "12", "12"].map(q));
    // A claim above what its witness proves fails, and names the claim.
    let over = cert(ring3(&[4, 5], a2a("12")), json!([{"bound": "cut", "value": "25/2", "witness": {"nodes": [0], "into": false}}]));
    assert!(rejected(&over).contains("claim 0 (cut)"), "{}", rejected(&over));
}

#[test]
fn gathering_and_reducing_kinds_count_transmissions() {
    // 3 ranks, blocks of 2 pieces of 3 bytes = 6 bytes. all_gather: each of 3 blocks needs 2
    // transfers: 36 bytes over 12 bytes/ns leaving ranks = 3 ns. reduce_scatter the same. all_reduce
    // twice as many: 6 ns. The cut {0} for all_gather: block 0 must leave, 6 bytes over 4 = 3/2 ns.
    for (kind, expected) in [("all_gather", "3"), ("reduce_scatter", "3"), ("all_reduce", "6")] {
        let c = cert(
            ring3(&[], json!({"kind": kind, "ranks": [0, 1, 2], "piece_bytes": "3", "pieces": 2})),
            json!([{"bound": "transmissions", "value": expected, "witness": {"into": false}}]),
        );
        assert_eq!(derived(&c), [q(expected)], "{kind}");
    }
    let c = cert(
        ring3(&[], json!({"kind": "all_gather", "ranks": [0, 1, 2], "piece_bytes": "3", "pieces": 2})),
        json!([{"bound": "cut", "value": "3/2", "witness": {"nodes": [0], "into": false}}]),
    );
    assert_eq!(derived(&c), [q("3/2")]);
    // The flow bound is for point-to-point demands only.
    let c = cert(
        ring3(&[], json!({"kind": "all_reduce", "ranks": [0, 1, 2], "piece_bytes": "3", "pieces": 2})),
        json!([{"bound": "flow", "value": "1", "witness": {"lengths": ["1", "1", "1", "1", "1", "1"]}}]),
    );
    assert!(rejected(&c).contains("all_to_all only"));
}

#[test]
fn steps_claims_count_pieces_per_link_and_step() {
    // The line 0 - 1 - 2 (cable 2-0 down), all_to_all with 2 pieces per block: 12 pieces.
    // Transmissions: 12 transfers over the 4 up links leaving ranks: 3 steps. The cut {0}: blocks
    // 0->1 and 0->2, 4 pieces, over 1 link: 4 steps. Flow, every up length 1 (the volume): 8
    // pieces of 1 hop and 4 of 2 hops, 16 over 4 links: 4 steps; lengths 1 on 0->1 alone: 4 pieces
    // cross it, over 1: 4 steps; lengths 1 on 0->1 and 2 on 1->0: (4 + 2 x 4) / 3 = 4 steps.
    let line = |collective: Value, claims: Value| cert(ring3(&[4, 5], collective), claims);
    let a2a2 = json!({"kind": "all_to_all", "ranks": [0, 1, 2], "block_bytes": "12", "pieces": 2});
    let c = line(
        a2a2.clone(),
        json!([
            {"bound": "steps_transmissions", "value": "3", "witness": {"into": false}},
            {"bound": "steps_cut", "value": "4", "witness": {"nodes": [0], "into": false}},
            {"bound": "steps_flow", "value": "4", "witness": {"lengths": ["1", "1", "1", "1", "0", "0"]}},
            {"bound": "steps_flow", "value": "4", "witness": {"lengths": ["1", "0", "0", "0", "0", "0"]}},
            {"bound": "steps_flow", "value": "4", "witness": {"lengths": ["1", "2", "0", "0", "0", "0"]}},
            {"bound": "steps", "value": "2", "witness": {"source": 0, "destination": 2}}
        ]),
    );
    assert_eq!(derived(&c), ["3", "4", "4", "4", "4", "2"].map(q));
    let report = check_str(&c.to_string()).unwrap();
    assert_eq!((report.steps_bound, report.bandwidth_bound), (Some(q("4")), None));
    // Without `pieces` an all_to_all has one piece per block: the cut {0} needs 2 steps.
    let c = line(a2a("12"), json!([{"bound": "steps_cut", "value": "3", "witness": {"nodes": [0], "into": false}}]));
    assert!(rejected(&c).contains("the witness supports 2 steps, the claim is 3 steps"), "{}", rejected(&c));
    // all_reduce on the healthy ring, 1 piece per block: 3 blocks x 2 x 2 transfers over 6 links
    // leaving ranks: 2 steps. all_gather: 3 x 2 over 6: 1 step; its cut into {0} (complement
    // {1, 2} sends blocks 1 and 2 over links 1->0 and 2->0): 1 step; reduce_scatter out of {0}:
    // blocks 1 and 2 need 0's contribution: 2 pieces over 2 links: 1 step.
    let blocks = |kind: &str| json!({"kind": kind, "ranks": [0, 1, 2], "piece_bytes": "3", "pieces": 1});
    for (kind, claims, expected) in [
        ("all_reduce", json!([{"bound": "steps_transmissions", "value": "2", "witness": {"into": true}}]), vec!["2"]),
        (
            "all_gather",
            json!([{"bound": "steps_transmissions", "value": "1", "witness": {"into": false}}, {"bound": "steps_cut", "value": "1", "witness": {"nodes": [0], "into": true}}]),
            vec!["1", "1"],
        ),
        ("reduce_scatter", json!([{"bound": "steps_cut", "value": "1", "witness": {"nodes": [0], "into": false}}]), vec!["1"]),
    ] {
        let c = cert(ring3(&[], blocks(kind)), claims);
        assert_eq!(derived(&c), expected.into_iter().map(q).collect::<Vec<_>>(), "{kind}");
    }
    // A steps flow is for point-to-point demands only; a lying count is caught.
    let c = cert(ring3(&[], blocks("all_gather")), json!([{"bound": "steps_flow", "value": "1", "witness": {"lengths": ["1", "1", "1", "1", "1", "1"]}}]));
    assert!(rejected(&c).contains("all_to_all only"));
    let c = cert(ring3(&[], blocks("all_reduce")), json!([{"bound": "steps_transmissions", "value": "3", "witness": {"into": false}}]));
    assert!(rejected(&c).contains("supports 2 steps"));
    let c = line(json!({"kind": "all_to_all", "ranks": [0, 1, 2], "block_bytes": "12", "pieces": 0}), json!([]));
    assert!(rejected(&c).contains("pieces = 0"));
}

#[test]
fn a_non_rank_npu_routes_but_does_not_store() {
    // Ranks 0 and 2 only: npu 1 routes, so 0 -> 1 -> 2 is a single hop (1 step), though 2 links.
    let c = cert(
        ring3(&[4, 5], json!({"kind": "all_to_all", "ranks": [0, 2], "block_bytes": "12"})),
        json!([{"bound": "steps", "value": "1", "witness": {"source": 0, "destination": 2}}]),
    );
    assert_eq!(derived(&c), [q("1")]);
    let two = cert(
        ring3(&[4, 5], json!({"kind": "all_to_all", "ranks": [0, 2], "block_bytes": "12"})),
        json!([{"bound": "steps", "value": "2", "witness": {"source": 0, "destination": 2}}]),
    );
    assert!(rejected(&two).contains("supports 1 steps"));
}

#[test]
fn schedule_attachments_are_held_to_the_bounds() {
    let claims = json!([
        {"bound": "latency", "value": "10", "witness": {"source": 0, "destination": 1}},
        {"bound": "volume", "value": "6"}
    ]);
    let with = |mut schedule: Value| {
        let mut c = cert(ring3(&[], a2a("12")), claims.clone());
        schedule["file"] = json!("schedule.json");
        schedule["sha256"] = json!("a".repeat(64));
        c["schedule"] = schedule;
        c
    };
    // HalfRing on 3 nodes: one step moving each block one hop, 12 bytes / 2 = 6 ns, plus 10 ns.
    assert!(check_str(&with(json!({"bandwidth_ns": "6", "time_ns": "16", "bandwidth_optimal": true})).to_string()).is_ok());
    assert!(rejected(&with(json!({"bandwidth_ns": "6", "time_ns": "15"}))).contains("below the proven time bound"));
    assert!(rejected(&with(json!({"bandwidth_ns": "11/2", "time_ns": "20"}))).contains("below the proven bandwidth bound"));
    assert!(rejected(&with(json!({"bandwidth_ns": "7", "time_ns": "20", "bandwidth_optimal": true}))).contains("claims bandwidth-optimal"));
    // The flag is a claim either way: denying an optimum the bound shows is false too.
    assert!(rejected(&with(json!({"bandwidth_ns": "6", "time_ns": "16", "bandwidth_optimal": false}))).contains("claims not bandwidth-optimal"));
    assert!(check_str(&with(json!({"bandwidth_ns": "7", "time_ns": "20", "bandwidth_optimal": false})).to_string()).is_ok());
}

#[test]
fn malformed_certificates_say_where() {
    let good = cert(ring3(&[], a2a("12")), json!([{"bound": "volume", "value": "6"}]));
    let mut c = good.clone();
    c["version"] = json!(2);
    assert!(rejected(&c).contains("version 2"));
    let mut c = good.clone();
    c["instance"]["links"][3]["capacity"] = json!("0");
    assert!(rejected(&c).contains("instance.links[3].capacity"));
    let mut c = good.clone();
    c["claims"][0]["value"] = json!("six");
    assert!(rejected(&c).contains("claim 0 (volume): value"));
    let mut c = good.clone();
    c["claims"][0]["extra"] = json!(1);
    assert!(rejected(&c).contains("unknown field"));
    let mut c = good.clone();
    c["claims"] = json!([{"bound": "steps", "value": "1", "witness": {"source": 0, "destination": 0}}]);
    assert!(rejected(&c).contains("needs nothing"));
    // A node count no network has is refused before anything is sized by it (2^63 nodes made the
    // checker abort on a capacity overflow; 2^40 would have asked for a terabyte).
    for nodes in [1u64 << 63, 1 << 40, (1 << 30) + 1] {
        let mut c = good.clone();
        c["instance"]["nodes"] = json!(nodes);
        assert!(rejected(&c).contains(&format!("instance: nodes = {nodes} with 3 ranks")), "{nodes}");
    }
    let mut c = good;
    c["instance"]["nodes"] = json!(1 << 29);
    assert!(rejected(&c).contains("the ranks times the nodes must be at most 2^30"));
}

/// An object of the format given as an array of its values in order (serde reads a struct from
/// one) is unreadable, as a spec's or a schedule file's is refused: a link, a witness or the
/// schedule so written checked.
#[test]
fn objects_given_as_arrays_are_unreadable() {
    let mut good =
        cert(ring3(&[], a2a("12")), json!([{"bound": "volume", "value": "6"}, {"bound": "steps", "value": "1", "witness": {"source": 0, "destination": 2}}]));
    good["schedule"] = json!({"file": "s.json", "sha256": "0".repeat(64), "bandwidth_ns": "6", "time_ns": "16"});
    assert!(check_str(&good.to_string()).is_ok(), "{:?}", check_str(&good.to_string()).err().map(|e| e.message));
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit); 4] = [
        ("instance.links[0]", |c| c["instance"]["links"][0] = json!([0, 1, "2", "10", true])),
        ("instance.collective", |c| c["instance"]["collective"] = json!(["all_to_all", [0, 1, 2], "12"])),
        ("claims[1].witness", |c| c["claims"][1]["witness"] = json!([0, 2])),
        ("schedule", |c| c["schedule"] = json!(["6", "16"])),
    ];
    for (field, edit) in edits {
        let mut c = good.clone();
        edit(&mut c);
        let e = check_str(&c.to_string()).expect_err(field);
        assert!(
            e.unreadable && e.message.contains(&format!("field `{field}`: expected an object with named fields, found an array")),
            "{field}: {}",
            e.message
        );
    }
}

#[test]
fn structural_defects_inside_claims_and_instance_are_unreadable() {
    // A claim or an instance the format does not describe cannot be read as a certificate, as at
    // the top level; a witness that does not support its value is a certificate that fails.
    let good =
        cert(ring3(&[], a2a("12")), json!([{"bound": "volume", "value": "6"}, {"bound": "steps", "value": "1", "witness": {"source": 0, "destination": 2}}]));
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit); 8] = [
        ("claim without value", |c| drop(c["claims"][0].as_object_mut().unwrap().remove("value"))),
        ("claim with an unknown field", |c| c["claims"][1]["extra"] = json!(1)),
        ("witness with an unknown field", |c| c["claims"][1]["witness"]["extra"] = json!(1)),
        ("unknown bound", |c| c["claims"][0]["bound"] = json!("foo")),
        ("volume with a witness", |c| c["claims"][0]["witness"] = json!({"into": false})),
        ("instance with an unknown field", |c| c["instance"]["extra"] = json!(1)),
        ("instance without links", |c| drop(c["instance"].as_object_mut().unwrap().remove("links"))),
        ("a link of the wrong type", |c| c["instance"]["links"][0]["up"] = json!("yes")),
    ];
    for (what, edit) in edits {
        let mut c = good.clone();
        edit(&mut c);
        let e = check_str(&c.to_string()).expect_err(what);
        assert!(e.unreadable, "{what}: {}", e.message);
        if what.contains("claim") || what.contains("witness") || what.contains("bound") {
            assert!(e.message.starts_with("claim "), "{what}: {}", e.message);
        }
    }
    let mut c = good;
    c["claims"][0]["value"] = json!("7");
    let e = check_str(&c.to_string()).expect_err("a claim above its witness");
    assert!(!e.unreadable && e.message.contains("claim 0 (volume)"), "{}", e.message);
}

#[test]
fn rationals_parse_exactly() {
    assert_eq!(q("12.5"), Q::new(25.into(), 2.into()));
    assert_eq!(q("-3/6"), Q::new((-1).into(), 2.into()));
    for bad in ["", "1/0", "1.", "x", "--1", "1e3", "+4", " 5", "4 ", "0x10", "1/-2", "-", ".5"] {
        assert!(parse_q(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_end_of_a_line_waits_for_the_far_end() {
    // The line 0 - 1 - 2 (cable 2-0 down, links 4 and 5). all_reduce at 2 pieces per block: 6
    // pieces, each of which needs node 2's contribution at node 0, 2 hops away, so it enters 0
    // over its one up link (1->0) in step 2 or later: 1 + ceil(6 / 1) = 7 steps. Out of 0 alike
    // (0's contribution must reach 2 by the last step): 7. The same at distance 1 counts every
    // piece from step 1: 0 + 6 = 6.
    let blocks = |kind: &str, pieces: u32| json!({"kind": kind, "ranks": [0, 1, 2], "piece_bytes": "3", "pieces": pieces});
    let arrival = |value: &str, rank: usize, into: bool, distance: u64| json!({"bound": "steps_arrival", "value": value, "witness": {"rank": rank, "into": into, "distance": distance}});
    let c = cert(ring3(&[4, 5], blocks("all_reduce", 2)), json!([arrival("7", 0, true, 2), arrival("7", 0, false, 2), arrival("6", 0, true, 1)]));
    assert_eq!(derived(&c), ["7", "7", "6"].map(q));
    assert_eq!(check_str(&c.to_string()).unwrap().steps_bound, Some(q("7")));
    // The middle rank has two links each way and every rank one hop away: 0 + ceil(6 / 2) = 3.
    let c = cert(ring3(&[4, 5], blocks("all_reduce", 2)), json!([arrival("4", 1, true, 1)]));
    assert!(rejected(&c).contains("the witness supports 3 steps, the claim is 4 steps"), "{}", rejected(&c));
    // all_gather into 0: node 2's 2 pieces arrive in step 2 or later (1 + 2 = 3); node 1's and
    // 2's, 4 pieces, from step 1 (0 + 4 = 4). Out of 0 only its own 2 pieces: 1 + 2 = 3.
    // reduce_scatter into 0: only 0's own block, 2 pieces: 1 + 2 = 3; out of 0 the blocks of 1 and 2
    // at distance 1 (4 pieces, 4 steps), of 2 alone at distance 2 (1 + 2 = 3).
    let c = cert(ring3(&[4, 5], blocks("all_gather", 2)), json!([arrival("3", 0, true, 2), arrival("4", 0, true, 1), arrival("3", 0, false, 2)]));
    assert_eq!(derived(&c), ["3", "4", "3"].map(q));
    let c = cert(ring3(&[4, 5], blocks("reduce_scatter", 2)), json!([arrival("3", 0, true, 2), arrival("4", 0, false, 1), arrival("3", 0, false, 2)]));
    assert_eq!(derived(&c), ["3", "4", "3"].map(q));
    // all_to_all (one piece per block) into 0: from 2 alone at distance 2: 1 + 1 = 2.
    let c = cert(ring3(&[4, 5], a2a("12")), json!([arrival("2", 0, true, 2)]));
    assert_eq!(derived(&c), ["2"].map(q));
    // Nothing is 3 hops away: the witness supports nothing; a non-rank and distance 0 are refused.
    let c = cert(ring3(&[4, 5], blocks("all_reduce", 1)), json!([arrival("1", 0, true, 3)]));
    assert!(rejected(&c).contains("supports 0 steps"), "{}", rejected(&c));
    let c = cert(ring3(&[4, 5], blocks("all_reduce", 1)), json!([arrival("1", 7, true, 1)]));
    assert!(rejected(&c).contains("not a rank"), "{}", rejected(&c));
    let c = cert(ring3(&[4, 5], blocks("all_reduce", 1)), json!([arrival("1", 0, true, 0)]));
    assert!(rejected(&c).contains("distance 0"), "{}", rejected(&c));
}

#[test]
fn a_collective_without_the_fields_of_its_kind_is_unreadable() {
    // all_gather over the ring of 3 in blocks of two 3-byte pieces (the transmissions bound of
    // `gathering_and_reducing_kinds_count_transmissions`): it holds as read. Without
    // `piece_bytes` or `pieces`, with a field of another kind, or with a kind the format does not
    // have, the instance cannot be read (as a link without `capacity`); `pieces = 0` is read and
    // fails.
    let gather = json!({"kind": "all_gather", "ranks": [0, 1, 2], "piece_bytes": "3", "pieces": 2});
    let good = cert(ring3(&[], gather), json!([{"bound": "transmissions", "value": "3", "witness": {"into": false}}]));
    check_str(&good.to_string()).unwrap_or_else(|e| panic!("{e}"));
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit); 5] = [
        ("without piece_bytes", |c| drop(c["instance"]["collective"].as_object_mut().unwrap().remove("piece_bytes"))),
        ("without pieces", |c| drop(c["instance"]["collective"].as_object_mut().unwrap().remove("pieces"))),
        ("an unknown kind", |c| c["instance"]["collective"]["kind"] = json!("bogus")),
        ("all_gather with block_bytes", |c| c["instance"]["collective"]["block_bytes"] = json!("12")),
        ("all_to_all with piece_bytes", |c| c["instance"]["collective"]["kind"] = json!("all_to_all")),
    ];
    for (what, edit) in edits {
        let mut c = good.clone();
        edit(&mut c);
        let e = check_str(&c.to_string()).expect_err(what);
        assert!(e.unreadable && e.message.contains("instance.collective: kind"), "{what}: {}", e.message);
    }
    let mut c = good;
    c["instance"]["collective"]["pieces"] = json!(0);
    let e = check_str(&c.to_string()).expect_err("no pieces");
    assert!(!e.unreadable, "{}", e.message);
}

/// A ring of 3 all_to_all with a schedule attached, every field the format has.
fn attached() -> Value {
    let mut c =
        cert(ring3(&[], a2a("12")), json!([{"bound": "volume", "value": "6"}, {"bound": "cut", "value": "6", "witness": {"nodes": [0], "into": false}}]));
    c["schedule"] = json!({"file": "s.json", "sha256": "a".repeat(64), "bandwidth_ns": "6", "time_ns": "16", "bandwidth_optimal": true});
    c
}

fn unreadable(c: &str) -> String {
    let e = check_str(c).expect_err("the certificate must be unreadable");
    assert!(e.unreadable, "read as a certificate that fails: {}", e.message);
    e.message
}

#[test]
fn an_attached_schedule_names_its_file_and_hash() {
    // The times of an attachment are checked against the file by the command around the
    // checker; without `file` (or `sha256`) they would be claims nobody checks.
    check_str(&attached().to_string()).unwrap_or_else(|e| panic!("{e}"));
    for field in ["file", "sha256", "bandwidth_ns", "time_ns"] {
        let mut c = attached();
        c["schedule"].as_object_mut().unwrap().remove(field);
        let m = unreadable(&c.to_string());
        assert!(m.contains("schedule:") && m.contains(&format!("missing field `{field}`")), "{m}");
    }
    // `bandwidth_optimal` left out claims nothing.
    let mut c = attached();
    c["schedule"].as_object_mut().unwrap().remove("bandwidth_optimal");
    check_str(&c.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let mut c = attached();
    c["schedule"]["sha256"] = json!("abc");
    assert!(unreadable(&c.to_string()).contains("schedule.sha256 = \"abc\""));
    let mut c = attached();
    c["schedule"]["time_ns"] = json!("-16");
    assert!(unreadable(&c.to_string()).contains("schedule.time_ns"));
}

#[test]
fn a_certificate_names_its_spec_and_format() {
    let mut c = attached();
    c.as_object_mut().unwrap().remove("spec");
    assert!(unreadable(&c.to_string()).contains("missing field `spec`"));
    c["spec"] = Value::Null;
    assert!(unreadable(&c.to_string()).contains("missing field `spec`"));
    // While a certificate is built it has no file to name yet.
    c.as_object_mut().unwrap().remove("spec");
    check_bounds_str(&c.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let mut c = attached();
    c["spec_sha256"] = json!("abc");
    assert!(unreadable(&c.to_string()).contains("spec_sha256 = \"abc\": expected 64 hex digits"));
    let mut c = attached();
    c.as_object_mut().unwrap().remove("format");
    assert!(unreadable(&c.to_string()).contains("missing field `format`"));
}

#[test]
fn a_cut_witness_says_which_side() {
    for bound in ["cut", "steps_cut"] {
        let c = cert(ring3(&[], a2a("12")), json!([{"bound": bound, "value": "1", "witness": {"nodes": [0]}}]));
        let m = unreadable(&c.to_string());
        assert!(m.starts_with(&format!("claim 0 ({bound}):")) && m.contains("missing field `into`"), "{m}");
    }
}

#[test]
fn a_key_twice_is_unreadable_at_every_depth() {
    let text = attached().to_string();
    // Each edit doubles one key in place (JSON keeps no order of meaning; the last would win).
    let cases = [
        ("\"capacity\":\"2\"", "\"capacity\":\"2\",\"capacity\":\"9\"", "duplicate key `capacity` in `instance.links[0]`"),
        ("\"nodes\":[0]", "\"nodes\":[0],\"nodes\":[1]", "duplicate key `nodes` in `claims[1].witness`"),
        ("\"bound\":\"volume\"", "\"bound\":\"volume\",\"bound\":\"volume\"", "duplicate key `bound` in `claims[0]`"),
        ("\"npus\":3", "\"npus\":3,\"npus\":3", "duplicate key `npus` in `instance`"),
        ("\"version\":1", "\"version\":1,\"version\":1", "duplicate key `version` in the top level"),
        ("\"time_ns\":\"16\"", "\"time_ns\":\"16\",\"time_ns\":\"99\"", "duplicate key `time_ns` in `schedule`"),
    ];
    for (once, twice, said) in cases {
        assert!(text.contains(once), "{once}");
        let m = unreadable(&text.replacen(once, twice, 1));
        assert!(m.contains(said), "{said}: {m}");
    }
}

#[test]
fn claim_values_are_rationals_the_format_writes() {
    let with = |bound: &str, value: &str| {
        let c = match bound {
            "volume" => cert(ring3(&[], a2a("12")), json!([{"bound": "volume", "value": value}])),
            _ => cert(ring3(&[], a2a("12")), json!([{"bound": "steps", "value": value, "witness": {"source": 0, "destination": 2}}])),
        };
        c.to_string()
    };
    for bad in ["1e3", "0x10", "", "1/0", "+4", "262144/1.0", " 5", "4 ", "-1", "-1/2", "six", ".5", "5."] {
        let m = unreadable(&with("volume", bad));
        assert!(m.starts_with("claim 0 (volume): value: ") && m.contains(&format!("`{bad}`")), "{bad}: {m}");
    }
    // Steps are counted whole (docs/design/MODEL.md section 6).
    for bad in ["7/2", "3.5", "1/2"] {
        let m = unreadable(&with("steps", bad));
        assert!(m.contains("not a whole number of steps"), "{bad}: {m}");
    }
    for good in ["1", "0", "1.0", "2/2"] {
        check_str(&with("steps", good)).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    // Malformed numbers of the instance and of a flow witness are unreadable too.
    let mut c = cert(ring3(&[], a2a("12")), json!([{"bound": "volume", "value": "6"}]));
    c["instance"]["links"][2]["latency_ns"] = json!("1e1");
    assert!(unreadable(&c.to_string()).contains("instance.links[2].latency_ns"));
    let c = cert(ring3(&[], a2a("12")), json!([{"bound": "flow", "value": "1", "witness": {"lengths": ["1", "1", "1", "1", "1", " 1"]}}]));
    assert!(unreadable(&c.to_string()).contains("length of link 5"));
}

#[test]
fn a_claim_just_above_its_witness_shows_the_difference() {
    // 6 ns proven; 6.0000000001 claimed: rounded to six decimals both read 6.
    let c = cert(ring3(&[], a2a("12")), json!([{"bound": "volume", "value": "6.0000000001"}]));
    let m = rejected(&c);
    assert!(m.contains("the witness supports 6 ns, the claim is 6.0000000001 ns"), "{m}");
    // A fraction whose decimals do not end is shown as the fraction.
    let c = cert(ring3(&[], a2a("12")), json!([{"bound": "volume", "value": "6000000001/999999999"}]));
    let m = rejected(&c);
    assert!(m.contains("the witness supports 6 ns, the claim is 6000000001/999999999 ns"), "{m}");
}

/// An instance is the same whatever spelling its exact numbers take (`"12"`, `"12.0"`, `"24/2"`);
/// `proof check` compared the text, and a spec's instance written `"1048576.0"` failed as "not
/// the one the spec describes".
#[test]
fn instances_compare_as_exact_numbers() {
    let a = ring3(&[], a2a("12"));
    let mut b = ring3(&[], a2a("12.0"));
    b["links"][0]["capacity"] = json!("4/2");
    b["switch_latency_ns"] = json!("0/5");
    assert!(same_instance(&a, &b).unwrap());
    assert!(!same_instance(&a, &ring3(&[0], a2a("12"))).unwrap(), "a link down");
    assert!(!same_instance(&a, &ring3(&[], a2a("13"))).unwrap(), "other bytes");
    assert!(same_instance(&a, &json!({"nodes": 3})).is_err(), "not an instance");
}

/// Three npus 0, 1, 2 under one switch (node 3): links 0->3, 3->0, 1->3, 3->1, 2->3, 3->2, each
/// 1 byte/ns and 10 ns; the switch adds 100 ns. So every path between npus takes 120 ns.
fn star3(collective: Value) -> Value {
    let pairs = [(0, 3), (3, 0), (1, 3), (3, 1), (2, 3), (3, 2)];
    let links: Vec<Value> = pairs.iter().map(|(s, d)| json!({"src": s, "dst": d, "capacity": "1", "latency_ns": "10", "up": true})).collect();
    json!({"nodes": 4, "npus": 3, "switch_latency_ns": "100", "links": links, "collective": collective})
}

#[test]
fn groups_count_crossings_and_direct_demand() {
    // all_reduce of 3 ranks, blocks of one 6-byte piece: each rank holds 18 bytes.
    let ar = json!({"kind": "all_reduce", "ranks": [0, 1, 2], "piece_bytes": "6", "pieces": 1});
    // transmissions: 3 pieces x 2(R-1) = 4 transfers x 6 bytes = 72 over the 3 links out of
    // ranks: 24 ns. group_transmissions with groups {0, 1} and {2}: 2(G-1) = 2 crossings per
    // piece, 36 bytes, over the links leaving the groups (0->3, 1->3, 2->3): 12 ns. Latency: 120.
    //
    // crossing, singleton groups: Lx = 120 between any two, L2 = 120 + 120 = 240 (through the
    // third group; 3 x 120 otherwise). At the threshold 120 (the latency bound) every pair must
    // be direct: the cut {0} sends 0's whole vector to each of 1 and 2, 36 bytes over one link of
    // 1 byte/ns: 120 + 36 = 156. At 240 nothing must be direct: 240 + 24 = 264. The bound is 156
    // (every rank sending its vector to both others in one step takes exactly that), above the
    // bandwidth + latency bound of 144.
    let groups = json!([[0], [1], [2]]);
    let claims = json!([
        {"bound": "latency", "value": "120", "witness": {"source": 0, "destination": 2}},
        {"bound": "transmissions", "value": "24", "witness": {"into": false}},
        {"bound": "crossing", "value": "156", "witness": {"groups": groups, "cuts": [{"nodes": [0], "into": false}]}},
        {"bound": "group_transmissions", "value": "12", "witness": {"groups": [[0, 1], [2]], "into": false}},
        // Without a cut only the bandwidth bound counts: min(120 + 24, 240 + 24).
        {"bound": "crossing", "value": "144", "witness": {"groups": groups, "cuts": []}}
    ]);
    let c = cert(star3(ar.clone()), claims);
    assert_eq!(derived(&c), ["120", "24", "156", "12", "144"].map(q));
    let report = check_str(&c.to_string()).unwrap();
    assert_eq!(report.bandwidth_bound, Some(q("24")));
    assert_eq!(report.time_bound, Some(q("156")));

    // A schedule faster than the crossing bound is refused, though above bandwidth + latency.
    let mut fast = c.clone();
    fast["schedule"] = json!({"file": "s.json", "sha256": "0".repeat(64), "bandwidth_ns": "36", "time_ns": "150"});
    assert!(rejected(&fast).contains("time 150 ns is below the proven time bound 156 ns"), "{}", rejected(&fast));

    // Claiming more than the witness supports, a cut that splits a group, a rank in no group.
    let over = cert(star3(ar.clone()), json!([{"bound": "crossing", "value": "157", "witness": {"groups": groups, "cuts": [{"nodes": [0], "into": false}]}}]));
    // Without latency and bandwidth claims: min(0 + 36, 240 + 0), the cut alone.
    assert!(rejected(&over).contains("claim 0 (crossing): the witness supports 36 ns, the claim is 157 ns"), "{}", rejected(&over));
    let split =
        cert(star3(ar.clone()), json!([{"bound": "crossing", "value": "0", "witness": {"groups": [[0, 1], [2]], "cuts": [{"nodes": [0], "into": false}]}}]));
    assert!(rejected(&split).contains("cut 0 splits the group of rank 1"), "{}", rejected(&split));
    let missing = cert(star3(ar.clone()), json!([{"bound": "group_transmissions", "value": "0", "witness": {"groups": [[0, 1]], "into": false}}]));
    assert!(rejected(&missing).contains("rank 2 is in no group"), "{}", rejected(&missing));
    let twice = cert(star3(ar.clone()), json!([{"bound": "group_transmissions", "value": "0", "witness": {"groups": [[0, 1, 3], [2, 3]], "into": false}}]));
    assert!(rejected(&twice).contains("node 3 is in group 0 and in group 1"), "{}", rejected(&twice));
    let repeated = cert(star3(ar), json!([{"bound": "group_transmissions", "value": "0", "witness": {"groups": [[0, 1, 1], [2]], "into": false}}]));
    assert!(rejected(&repeated).contains("group 0 names node 1 twice"), "{}", rejected(&repeated));

    // all_to_all has no crossing bound (its demands are direct already).
    let a2a3 = cert(star3(a2a("6")), json!([{"bound": "crossing", "value": "0", "witness": {"groups": groups, "cuts": []}}]));
    assert!(rejected(&a2a3).contains("for all_gather, reduce_scatter and all_reduce"), "{}", rejected(&a2a3));
    // all_to_all over groups {0, 1} and {2}: 4 of the 6 demands cross, 24 bytes, over 3 links
    // leaving groups: 8 ns; entering them (3->0, 3->1, 3->2) likewise.
    let a2a_groups = cert(star3(a2a("6")), json!([{"bound": "group_transmissions", "value": "8", "witness": {"groups": [[0, 1], [2]], "into": true}}]));
    assert_eq!(derived(&a2a_groups), [q("8")]);
}

#[test]
fn a_crossing_claim_names_at_most_256_groups() {
    // 300 npus, every one its own group: the checker refuses to weigh 89,700 pairs of groups
    // through every third, before reading further.
    let links: Vec<Value> = (0..300).map(|i| json!({"src": i, "dst": (i + 1) % 300, "capacity": "1", "latency_ns": "1", "up": true})).collect();
    let ranks: Vec<usize> = (0..300).collect();
    let instance = json!({"nodes": 300, "npus": 300, "switch_latency_ns": "0", "links": links,
        "collective": {"kind": "all_reduce", "ranks": ranks, "piece_bytes": "1", "pieces": 1}});
    let groups: Vec<Vec<usize>> = (0..300).map(|i| vec![i]).collect();
    let c = cert(instance, json!([{"bound": "crossing", "value": "0", "witness": {"groups": groups, "cuts": []}}]));
    let e = check_str(&c.to_string()).expect_err("refused");
    assert!(e.unreadable && e.message.contains("300 groups; a crossing claim names at most 256"), "{}", e.message);
}
