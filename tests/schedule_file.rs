//! The schedule file v1: round trips, byte-identical output, the JSON Schema, streaming, and
//! readers that never panic on bad bytes.

mod common;

use collsched::Spec;
use collsched::{fat_tree, torus, FatTreeParams, FaultPattern, NodeId, TorusParams};
use collsched::{read_schedule, write_schedule, Schedule};
use collsched::{Collective, CollectiveKind};
use proptest::prelude::*;

fn examples() -> Vec<Schedule> {
    let mut t = torus(&TorusParams::uniform(&[4, 3], 32.0, 100.0)).unwrap();
    FaultPattern { cables: vec![(NodeId(0), NodeId(1))], ..Default::default() }.apply(&mut t).unwrap();
    let a2a = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, 2, None, &t).unwrap();
    let ft =
        fat_tree(&FatTreeParams { levels: 2, k: 4, osr: 1.0, npus: 8, board: Some(4), bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 })
            .unwrap();
    let ar = Collective::new(CollectiveKind::AllReduce, (0..8).map(NodeId).collect(), 4096, 1, None, &ft).unwrap();
    let ring = torus(&TorusParams::uniform(&[5], 12.5, 0.1)).unwrap();
    let bb: Vec<Vec<u64>> = (0..5).map(|i| (0..5).map(|j| if i == j { 0 } else { 100 * (i + 1) as u64 + j as u64 }).collect()).collect();
    let skew = Collective::new(CollectiveKind::AllToAll, ring.node_ids().collect(), 1000, 3, Some(bb), &ring).unwrap();
    let mut with_meta = common::shortest_path_all_to_all(&ring, &skew);
    // Files written before `topology.shape` was a field kept the family in `meta.shape` (`null`
    // for a custom topology): still read.
    with_meta.header.meta = Some(serde_json::json!({"algorithm": "test", "shape": collsched::shape_json(&ring)}));
    // A custom topology (a ring of 3 under a switch per group, from an ASTRA-sim file).
    let astra = collsched::parse_astra("topology: [ Ring, Switch ]\nnpus_count: [ 3, 2 ]\nbandwidth: [ 50.0, 25.0 ]\nlatency: [ 500.0, 700.0 ]\n").unwrap();
    let ag = Collective::new(CollectiveKind::AllGather, (0..6).map(NodeId).collect(), 6000, 1, None, &astra).unwrap();
    let mut custom = common::ring_collective(&astra, &ag);
    custom.header.meta = Some(serde_json::json!({"algorithm": "test", "shape": collsched::shape_json(&astra)}));
    vec![common::shortest_path_all_to_all(&t, &a2a), common::ring_collective(&ft, &ar), with_meta, custom]
}

fn bytes(s: &Schedule) -> Vec<u8> {
    write_schedule(Vec::new(), s).unwrap()
}

#[test]
fn round_trip_is_byte_identical() {
    for s in examples() {
        let first = bytes(&s);
        let back = read_schedule(&first[..], "mem").unwrap();
        assert_eq!(back.steps, s.steps);
        assert_eq!(back.header.collective, s.header.collective);
        assert_eq!(bytes(&back), first, "writing what was read gives the same bytes");
        assert_eq!(bytes(&s), first, "the same input gives the same bytes");
    }
}

#[test]
fn the_shape_field_restores_the_family() {
    // Written as `topology.shape`, read back into a torus with coordinates.
    let s = &examples()[2];
    let text = String::from_utf8(bytes(s)).unwrap();
    assert!(text.contains("\"shape\": {\"torus\":{\"dims\":[5],\"wrap\":[true]}}"), "{}", &text[..400.min(text.len())]);
    let back = read_schedule(text.as_bytes(), "mem").unwrap();
    assert_eq!(back.header.topology.torus_shape().unwrap().dims, vec![5]);
    // The same family from the legacy `meta.shape` alone.
    let legacy = text.replace(",\n    \"shape\": {\"torus\":{\"dims\":[5],\"wrap\":[true]}}", "");
    assert_eq!(read_schedule(legacy.as_bytes(), "mem").unwrap().header.topology.torus_shape().unwrap().dims, vec![5]);
    // A shape that the lists do not form is refused, naming the field.
    let wrong = text.replace("\"dims\":[5]", "\"dims\":[6]");
    let e = read_schedule(wrong.as_bytes(), "f.json").unwrap_err();
    assert!(e.message().contains("topology.shape"), "{e}");
    // A custom topology writes no shape.
    assert!(!String::from_utf8(bytes(&examples()[3])).unwrap().contains("\"shape\": {"));
}

#[test]
fn a_meta_shape_that_contradicts_topology_shape_is_refused() {
    // examples()[2] writes the same family in both fields: read.
    let text = String::from_utf8(bytes(&examples()[2])).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["meta"]["shape"], v["topology"]["shape"]);
    read_schedule(text.as_bytes(), "f.json").unwrap();
    // Another family in meta.shape (lists a torus [5] cannot form either way), or `null` (a
    // custom topology): refused, naming both fields and values.
    for other in [serde_json::json!({"torus": {"dims": [1, 5], "wrap": [true, true]}}), serde_json::Value::Null] {
        v["meta"]["shape"] = other.clone();
        let e = read_schedule(serde_json::to_string(&v).unwrap().as_bytes(), "f.json").unwrap_err();
        let m = e.message();
        assert!(m.contains("f.json") && m.contains(&format!("meta.shape = {other} contradicts topology.shape = {}", v["topology"]["shape"])), "{e}");
    }
}

#[test]
fn block_bytes_with_a_nonzero_diagonal_are_refused() {
    // examples()[2] has non-uniform blocks with a zero diagonal: set one diagonal entry.
    let mut v: serde_json::Value = serde_json::from_slice(&bytes(&examples()[2])).unwrap();
    v["collective"]["block_bytes"][1][1] = 7.into();
    let e = read_schedule(serde_json::to_string(&v).unwrap().as_bytes(), "f.json").unwrap_err();
    assert!(
        e.message().contains("f.json") && e.message().contains("collective.block_bytes[1][1] = 7: an all_to_all sends no block from a rank to itself"),
        "{e}"
    );
    // A spec's block_bytes, the same way.
    let spec = r#"{"topology": {"torus": {"dims": [2], "bandwidth_gbps": 32.0, "latency_ns": 100.0}},
                   "collective": {"kind": "all_to_all", "bytes_per_rank": 1048576, "block_bytes": [[5, 300], [300, 0]]}}"#;
    let path = std::env::temp_dir().join(format!("collsched-diagonal-{}.spec.json", std::process::id()));
    std::fs::write(&path, spec).unwrap();
    let e = Spec::load(&path).unwrap().instance().unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(e.message().contains(&path.display().to_string()) && e.message().contains("collective.block_bytes[0][0] = 5"), "{e}");
}

#[test]
fn every_written_file_matches_the_schema() {
    let schema: serde_json::Value = serde_json::from_str(include_str!("../schema/schedule.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for s in examples() {
        let v: serde_json::Value = serde_json::from_slice(&bytes(&s)).unwrap();
        let errors: Vec<String> = validator.iter_errors(&v).map(|e| format!("{} at {}", e, e.instance_path)).collect();
        assert!(errors.is_empty(), "{errors:?}");
    }
    // and the schema is not vacuous
    let mut v: serde_json::Value = serde_json::from_slice(&bytes(&examples()[0])).unwrap();
    v["steps"][0]["transfers"][0]["op"] = "move".into();
    assert!(!validator.is_valid(&v));
}

#[test]
fn sorted_keys_put_steps_first_and_still_read() {
    let s = &examples()[1];
    let v: serde_json::Value = serde_json::from_slice(&bytes(s)).unwrap();
    // serde_json's Map is ordered by key: "collective", "format", "steps", "topology", "version".
    let sorted = serde_json::to_vec(&v).unwrap();
    let back = read_schedule(&sorted[..], "sorted").unwrap();
    assert_eq!(back.steps, s.steps);
}

#[test]
fn header_errors_are_named() {
    let good = String::from_utf8(bytes(&examples()[1])).unwrap();
    for (from, to, expect) in [
        ("\"version\": 1", "\"version\": 2", "version = 2"),
        ("\"format\": \"collsched.schedule\"", "\"format\": \"other\"", "format = \"other\""),
        ("\"kind\": \"all_reduce\"", "\"kind\": \"all_sum\"", "collective.kind = \"all_sum\""),
        ("\"pieces\": 1", "\"pieces\": 0", "pieces = 0"),
        ("\"ranks\": [0,", "\"ranks\": [99,", "ranks[0] = 99"),
        ("\"steps\":", "\"stepz\":", "unknown field `stepz`"),
        ("{\"path\": [", "{\"route\": [", "unknown field `route`"),
    ] {
        assert!(good.contains(from), "{from}");
        let bad = good.replacen(from, to, 1);
        let e = read_schedule(bad.as_bytes(), "f.json").unwrap_err();
        assert!(e.message().contains("f.json") && e.message().contains(expect), "{from} -> {e}");
    }
    let e = read_schedule(&b"{\"format\": \"collsched.schedule\",\n \"version\": 1,\n \"topology\": ]"[..], "f.json").unwrap_err();
    assert!(e.message().contains("line 3"), "{e}");
}

#[test]
fn objects_given_as_arrays_of_their_fields_are_refused() {
    // serde reads a struct from an array of its fields in order; the format names them.
    let good = String::from_utf8(bytes(&examples()[0])).unwrap();
    let v: serde_json::Value = serde_json::from_str(&good).unwrap();
    let node = v["topology"]["nodes"][1].to_string();
    let link = v["topology"]["links"][2].to_string();
    let collective = v["collective"].to_string();
    let transfer = v["steps"][1]["transfers"][0].to_string();
    let positional = |o: &str| {
        let o: serde_json::Value = serde_json::from_str(o).unwrap();
        serde_json::Value::Array(o.as_object().unwrap().values().cloned().collect()).to_string()
    };
    let compact: serde_json::Value = serde_json::from_str(&good).unwrap();
    let text = compact.to_string();
    for (object, field) in [(&node, "topology.nodes[1]"), (&link, "topology.links[2]"), (&collective, "collective"), (&transfer, "steps[1].transfers[0]")] {
        assert!(text.contains(object.as_str()), "{object}");
        let bad = text.replacen(object.as_str(), &positional(object), 1);
        let e = read_schedule(bad.as_bytes(), "f.json").unwrap_err();
        assert!(e.message().starts_with(&format!("f.json: field `{field}`: expected an object with named fields, found an array")), "{e}");
    }
    read_schedule(text.as_bytes(), "f.json").unwrap();
}

#[test]
fn transfers_that_carry_no_piece_are_counted() {
    use collsched::{verify_schedule, VerifyOptions};
    let mut s = examples().remove(0);
    let path = s.steps[0].transfers[0].path.clone();
    // A step of its own, so that it shares no link: valid, and counted.
    s.steps.push(collsched::Step { transfers: vec![collsched::Transfer { path, op: collsched::Op::Copy, pieces: vec![] }] });
    let r = verify_schedule(&s, &VerifyOptions::default()).unwrap();
    assert!(r.is_valid());
    assert_eq!(r.stats.empty_transfers, 1);
    s.steps.pop();
    assert_eq!(verify_schedule(&s, &VerifyOptions::default()).unwrap().stats.empty_transfers, 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = read_schedule(&data[..], "fuzz");
        let _ = Spec::parse(&String::from_utf8_lossy(&data), "fuzz").map(|s| s.instance());
        let _ = collsched::parse_astra(&String::from_utf8_lossy(&data));
    }

    #[test]
    fn mangled_astra_files_never_panic(kinds in proptest::collection::vec(0usize..4, 0..4), counts in proptest::collection::vec(0i64..6, 0..4),
                                       cut in 0usize..200) {
        let names = ["Ring", "FullyConnected", "Switch", "Bus"];
        let k: Vec<&str> = kinds.iter().map(|&i| names[i]).collect();
        let c: Vec<String> = counts.iter().map(|x| x.to_string()).collect();
        let text = format!("topology: [ {} ]\nnpus_count: [ {} ]\nbandwidth: [ {} ]\nlatency: [ {} ]\n", k.join(", "), c.join(", "), c.join(", "), c.join(", "));
        let _ = collsched::parse_astra(&text);
        let _ = collsched::parse_astra(&text[..cut.min(text.len())]);
    }

    #[test]
    fn mangled_files_never_panic(cut in 0usize..4000, flip in 0usize..4000, byte in any::<u8>(), which in 0usize..3) {
        let mut data = bytes(&examples()[which]);
        if flip < data.len() {
            data[flip] = byte;
        }
        data.truncate(cut.max(1) * 3);
        if let Ok(s) = read_schedule(&data[..], "fuzz") {
            let _ = collsched::verify_schedule(&s, &Default::default());
        }
    }

    #[test]
    fn random_json_specs_never_panic(dims in proptest::collection::vec(0usize..6, 0..4), bytes in 0u64..5000, kind in 0usize..5, pieces in 0u32..4,
                                     cable in proptest::collection::vec(0usize..7, 0..7), ranks in proptest::collection::vec(0u64..80, 0..5)) {
        let kinds = ["all_to_all", "all_gather", "reduce_scatter", "all_reduce", "bogus"];
        let text = serde_json::json!({
            "topology": {"torus": {"dims": dims, "bandwidth_gbps": 1.0, "latency_ns": 0.0}},
            "faults": {"cables": [[cable.iter().take(3).collect::<Vec<_>>(), cable.iter().skip(3).collect::<Vec<_>>()]]},
            "collective": {"kind": kinds[kind], "bytes_per_rank": bytes, "pieces": pieces, "ranks": ranks},
        }).to_string();
        if let Ok(s) = Spec::parse(&text, "fuzz") { let _ = s.instance(); }
    }
}

#[test]
fn peak_holdings_count_pieces_bound_elsewhere() {
    use collsched::{verify_schedule, VerifyOptions};
    let opts = VerifyOptions { track_relays: true, ..Default::default() };
    // A line of 3 (no wrap): node 0 holds its 2 pieces at the start; node 1 relays (0,2) and (2,0).
    let mut p = TorusParams::uniform(&[3], 10.0, 1.0);
    p.wrap = vec![false];
    let t = torus(&p).unwrap();
    let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 3000, 1, None, &t).unwrap();
    let s = common::shortest_path_all_to_all(&t, &c);
    let r = verify_schedule(&s, &opts).unwrap();
    assert!(r.is_valid());
    let (node, count, _) = r.stats.peak_relay.unwrap();
    assert_eq!(count, 2, "{:?}", r.stats.peak_relay);
    assert!(node.0 <= 2);
    // With 4 pieces per block every count doubles.
    let c4 = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 3000, 4, None, &t).unwrap();
    let r = verify_schedule(&common::shortest_path_all_to_all(&t, &c4), &opts).unwrap();
    assert_eq!(r.stats.peak_relay.unwrap().1, 8);
    // Reducing kinds: every rank holds its contributions to the other blocks at the start.
    let ar = Collective::new(CollectiveKind::ReduceScatter, t.node_ids().collect(), 3000, 1, None, &t).unwrap();
    let ring = torus(&TorusParams::uniform(&[3], 10.0, 1.0)).unwrap();
    let r =
        verify_schedule(&common::ring_collective(&ring, &Collective::new(ar.kind, ring.node_ids().collect(), 3000, 1, None, &ring).unwrap()), &opts).unwrap();
    assert!(r.is_valid());
    assert_eq!(r.stats.peak_relay.unwrap().1, 2);
    assert!(verify_schedule(&s, &VerifyOptions::default()).unwrap().stats.peak_relay.is_none());
}

#[test]
fn oversized_headers_are_refused_not_allocated() {
    // 4096 ranks with 65536 pieces per block would need about 70 PiB of state.
    let t = torus(&TorusParams::uniform(&[64, 64], 1.0, 0.0)).unwrap();
    let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 30, 65536, None, &t).unwrap();
    let huge = Schedule { header: collsched::ScheduleHeader { topology: t, collective: c, meta: None }, steps: vec![] };
    let e = collsched::verify_schedule(&huge, &Default::default()).unwrap_err();
    assert!(e.message().contains("GiB"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn certificate_and_xml_readers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300), flip in 0usize..3000, byte in any::<u8>()) {
        let text = String::from_utf8_lossy(&data).into_owned();
        let _ = collsched_checker::check_str(&text);
        let _ = collsched::check_xml(&text, collsched::Buffering::Runtime);
        // A real certificate and a real XML file with one byte changed.
        let s = &examples()[0];
        let programs = collsched::lower(s, &Default::default()).unwrap();
        let mut xml = collsched::msccl_xml(&programs, &Default::default()).unwrap().into_bytes();
        if flip < xml.len() { xml[flip] = byte; }
        let xml = String::from_utf8_lossy(&xml).into_owned();
        for buffering in [collsched::Buffering::Runtime, collsched::Buffering::Rendezvous] {
            let _ = collsched::check_xml(&xml, buffering);
        }
        let _ = collsched::import_msccl(&xml, None);
    }
}
