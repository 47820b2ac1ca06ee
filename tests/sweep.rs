//! `collsched sweep` as a user runs it: shards merged give the bytes of one run, one fault's
//! schedule handed out verifies, every class certificate re-checks, and bad input says why.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_collsched")).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn tmp(name: &str) -> PathBuf {
    let d = common::scratch("sweep").join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every file under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p).into_iter().map(|f| Path::new(p.file_name().unwrap()).join(f)));
        } else {
            out.push(PathBuf::from(p.file_name().unwrap()));
        }
    }
    out.sort();
    out
}

/// A 4x4 mesh: 24 cables in 4 classes (end or middle of a line, border or inner line).
const MESH: [&str; 10] = ["sweep", "--torus", "4x4", "--mesh", "--bytes", "64KiB", "--faults", "cables", "--time-limit", "30"];

#[test]
fn shards_merged_are_the_unsharded_sweep_byte_for_byte() {
    let whole = tmp("whole");
    let o = run(&[&MESH[..], &["--verify-members", "sample", "2", "-o", s(&whole)]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("24 faults in 4 classes"), "{}", text(&o));
    let shards: Vec<PathBuf> = (0..3).map(|k| tmp(&format!("shard{k}"))).collect();
    for (k, dir) in shards.iter().enumerate() {
        let shard = format!("{k}/3");
        let o = run(&[&MESH[..], &["--verify-members", "sample", "2", "--shard", &shard, "-o", s(dir)]].concat());
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    // Round robin: shard 0 takes classes 0 and 3.
    let shard0: serde_json::Value = serde_json::from_slice(&std::fs::read(shards[0].join("index.json")).unwrap()).unwrap();
    let taken: Vec<u64> = shard0["classes"].as_array().unwrap().iter().map(|c| c["class"].as_u64().unwrap()).collect();
    assert_eq!(taken, vec![0, 3]);
    let merged = tmp("merged");
    // Any order of the shard folders.
    let o = run(&["sweep", "merge", s(&shards[2]), s(&shards[0]), s(&shards[1]), "-o", s(&merged)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(files(&whole), files(&merged));
    assert!(files(&whole).len() >= 3 + 3 * 4, "{:?}", files(&whole));
    for f in files(&whole) {
        assert!(std::fs::read(whole.join(&f)).unwrap() == std::fs::read(merged.join(&f)).unwrap(), "{} differs", f.display());
    }
    // A shard missing, or given twice.
    let o = run(&["sweep", "merge", s(&shards[0]), s(&shards[1]), "-o", s(&tmp("partial"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("shard 2/3 is missing"), "{}", text(&o));
    let o = run(&["sweep", "merge", s(&shards[0]), s(&shards[0]), s(&shards[1]), "-o", s(&tmp("twice"))]);
    assert!(o.status.code() == Some(2) && text(&o).contains("both are shard 0/3"), "{}", text(&o));
    // A schedule changed after its shard wrote it.
    let sched = shards[1].join("schedules/c00001.json");
    let mut bytes = std::fs::read(&sched).unwrap();
    bytes.push(b'\n');
    std::fs::write(&sched, bytes).unwrap();
    let o = run(&["sweep", "merge", s(&shards[0]), s(&shards[1]), s(&shards[2]), "-o", s(&tmp("changed"))]);
    assert!(o.status.code() == Some(2) && text(&o).contains("changed since its shard wrote it"), "{}", text(&o));

    // Every class certificate re-checks without the sweep: bounds, spec, schedule hash and cost.
    let o = run(&["proof", "check", s(&whole.join("certificates"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("4 certificates, 4 hold"), "{}", text(&o));
    // The whole folder: its specs, schedules and index are passed over (and said so), not failed.
    let o = run(&["proof", "check", s(&whole)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("4 certificates, 4 hold, 0 fail"), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("that are not certificates"), "{}", text(&o));

    // One fault's schedule, mapped from its class's, verifies and costs what the index says.
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(whole.join("index.json")).unwrap()).unwrap();
    let fault = index["faults"].as_array().unwrap().iter().find(|f| f["symmetry"]["reflect"][1] == true).unwrap();
    let out = whole.join("member.json");
    let o = run(&["sweep", "schedule", s(&whole), fault["name"].as_str().unwrap(), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["verify", s(&out), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["cost"]["time_ns"], fault["time_ns"]);
    let o = run(&["sweep", "schedule", s(&whole), "(9,9)-(9,8)", "-o", s(&out)]);
    assert!(o.status.code() == Some(2) && text(&o).contains("no fault numbered or named"), "{}", text(&o));

    // The sweep's own files are inputs: writing over them (the class schedule read, the index,
    // or a shard merged into itself) is refused and leaves them as they were.
    let name = fault["name"].as_str().unwrap();
    let class_file = whole.join(index["classes"][fault["class"].as_u64().unwrap() as usize]["schedule"]["file"].as_str().unwrap());
    for target in [class_file.clone(), whole.join("index.json")] {
        let before = std::fs::read(&target).unwrap();
        let o = run(&["sweep", "schedule", s(&whole), name, "-o", s(&target)]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("is also an input of this command"), "{}", text(&o));
        assert_eq!(std::fs::read(&target).unwrap(), before);
    }
    let before = std::fs::read(shards[0].join("index.json")).unwrap();
    let o = run(&["sweep", "merge", s(&shards[0]), s(&shards[1]), s(&shards[2]), "-o", s(&shards[0])]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(std::fs::read(shards[0].join("index.json")).unwrap(), before);
    // A class schedule changed since the sweep is bad input, not a bug of ours.
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&class_file).unwrap()).unwrap();
    v["meta"]["note"] = serde_json::json!("edited");
    std::fs::write(&class_file, serde_json::to_vec(&v).unwrap()).unwrap();
    let o = run(&["sweep", "schedule", s(&whole), name, "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("changed since the sweep wrote it"), "{}", text(&o));
}

#[test]
fn a_cut_off_npu_makes_its_class_infeasible_and_the_rest_is_written() {
    // A fat tree without boards: a failed npu-leaf cable cuts the npu off.
    let spec = tmp("tree").with_extension("json");
    std::fs::create_dir_all(spec.parent().unwrap()).unwrap();
    std::fs::write(
        &spec,
        r#"{"topology": {"fat_tree": {"levels": 2, "k": 4, "osr": 1, "npus": 8, "bandwidth_gbps": 400, "latency_ns": 25, "switch_latency_ns": 1000}},
            "collective": {"kind": "all_to_all", "bytes_per_rank": "64KiB"}}"#,
    )
    .unwrap();
    let out = tmp("tree-out");
    let o = run(&["sweep", s(&spec), "--faults", "cables", "--time-limit", "20", "--verify-members", "all", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("class 0 (npu0-leaf0, 8 faults): infeasible: specs/c00000.spec.json: rank 0 (node 0, npu0) is cut off"), "{}", text(&o));
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    let classes = index["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 2);
    assert_eq!(classes[0]["status"], "infeasible");
    assert_eq!((classes[1]["status"].as_str(), classes[1]["members_verified"].as_u64()), (Some("ok"), Some(7)));
    // Every member but the representative (whose schedule is the class's) was verified.
    let members: Vec<&serde_json::Value> = index["faults"].as_array().unwrap().iter().filter(|f| f["class"] == 1).collect();
    assert!(members.iter().all(|f| f["symmetry"]["nodes"].is_array()));
    assert!(members.iter().all(|f| (f["verified"] == true) == (f["fault"] != classes[1]["representative"])));
}

#[test]
fn bad_input_is_named_with_exit_2() {
    let out = tmp("bad");
    let cases: [(&[&str], &str); 17] = [
        (&["--torus", "4x4", "--faults", "cables", "--shard", "3/2"], "--shard 3/2: K must be below N"),
        (&["--torus", "6x4", "--faults", "ocs"], "radix 6 is not made of cubes of side 4"),
        // A radix below the cube side is no cube at all.
        (&["--torus", "3x3", "--faults", "ocs"], "radix 3 is not made of cubes of side 4"),
        (&["--torus", "4x2", "--faults", "ocs"], "radix 2 is not made of cubes of side 4"),
        (&["--torus", "4x4", "--faults", "cables", "--fail", "(0,0)-(1,0)"], "a sweep enumerates the faults itself"),
        (&["--torus", "4x4"], "--faults cables|pairs|ocs is needed"),
        (&["--torus", "4x4", "--faults", "cables", "--verify-members", "sample", "x"], "--verify-members sample x"),
        (&["--torus", "4x4", "--faults", "ocs", "--cube", "0"], "the cube side must be at least 1"),
        (&["--torus", "4x4", "--faults", "cables", "--jobs", "0"], "--jobs 0: at least 1"),
        // Threads past the cap are refused before any is started (not a failed pool, exit 6).
        (&["--torus", "4x4", "--faults", "cables", "--jobs", "100000000"], "--jobs 100000000: at most 1024"),
        (&["--torus", "4x4", "--faults", "cables", "--jobs", "1025"], "--jobs 1025: at most 1024"),
        (&["--torus", "4x4", "--faults", "cables", "--cube", "2"], "--cube 2: applies to --faults ocs only"),
        (&["--torus", "4x4", "--faults", "pairs", "--cube", "4"], "--cube 4: applies to --faults ocs only"),
        (&["--torus", "4x4", "--faults", "cables", "--shard", " 1/3"], "plain digits"),
        (&["--torus", "4x4", "--faults", "cables", "--shard", "+1/3"], "plain digits"),
        (&["--torus", "4x4", "--faults", "cables", "--shard", "01/3"], "plain digits"),
        (&["--torus", "4x4", "--faults", "cables", "--shard", "0/18446744073709551616"], "18446744073709551616 is too large"),
    ];
    for (args, message) in cases {
        let o = run(&[&["sweep"], args, &["-o", s(&out)]].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(message), "{args:?}: {}", text(&o));
    }
    let spec = tmp("custom").with_extension("json");
    std::fs::create_dir_all(spec.parent().unwrap()).unwrap();
    std::fs::write(
        &spec,
        r#"{"topology": {"custom": {"nodes": [{"id": 0, "kind": "npu"}, {"id": 1, "kind": "npu"}],
            "links": [{"id": 0, "src": 0, "dst": 1, "bandwidth_gbps": 1, "latency_ns": 0}, {"id": 1, "src": 1, "dst": 0, "bandwidth_gbps": 1, "latency_ns": 0}]}},
            "collective": {"kind": "all_to_all", "bytes_per_rank": 64}}"#,
    )
    .unwrap();
    let o = run(&["sweep", s(&spec), "--faults", "cables", "-o", s(&out)]);
    assert!(o.status.code() == Some(2) && text(&o).contains("a sweep needs `topology.torus` or `topology.fat_tree`"), "{}", text(&o));
    assert!(!out.exists(), "nothing is written on bad input");
}

#[test]
fn a_failed_sweep_or_merge_leaves_what_was_there_and_nothing_else() {
    // A sweep that cannot write one class's schedule (a folder in its place): exit 5, and the
    // output folder holds only what it held before, unchanged.
    let out = tmp("blocked");
    std::fs::create_dir_all(out.join("schedules/c00003.json")).unwrap();
    std::fs::write(out.join("summary.md"), "before").unwrap();
    let o = run(&["sweep", "--torus", "4x4", "--faults", "pairs", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert_eq!(files(&out), vec![PathBuf::from("summary.md")], "{}", text(&o));
    assert_eq!(std::fs::read_to_string(out.join("summary.md")).unwrap(), "before");
    // Merging shards one of which lost a schedule, or has one changed: exit 2, and the output
    // folder is never made.
    let shards = [tmp("pairs-0"), tmp("pairs-1")];
    for (k, dir) in shards.iter().enumerate() {
        let o = run(&["sweep", "--torus", "4x4", "--faults", "pairs", "--shard", &format!("{k}/2"), "-o", s(dir)]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    let lost = tmp("pairs-0-lost");
    let changed = tmp("pairs-0-changed");
    for copy in [&lost, &changed] {
        std::fs::create_dir_all(copy.join("schedules")).unwrap();
        for f in files(&shards[0]) {
            std::fs::create_dir_all(copy.join(&f).parent().unwrap()).unwrap();
            std::fs::copy(shards[0].join(&f), copy.join(&f)).unwrap();
        }
    }
    std::fs::remove_file(lost.join("schedules/c00002.json")).unwrap();
    let mut body = std::fs::read(changed.join("schedules/c00002.json")).unwrap();
    body.push(b'\n');
    std::fs::write(changed.join("schedules/c00002.json"), body).unwrap();
    for bad in [&lost, &changed] {
        let merged = tmp("merged-bad");
        let o = run(&["sweep", "merge", s(bad), s(&shards[1]), "-o", s(&merged)]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("c00002.json"), "{}", text(&o));
        assert!(!merged.exists(), "{}", text(&o));
    }
}

#[test]
fn merge_checks_every_fault_against_its_class() {
    // A 4x4 torus: 32 cables, one class. An index edited after its shard was written (a fault's
    // time, or a symmetry that no longer carries the class's failed cable onto the fault's) is
    // refused with the folder, fault and field named, and nothing is written.
    let dir = tmp("one-class");
    let o = run(&["sweep", "--torus", "4x4", "--faults", "cables", "--time-limit", "10", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let merged = tmp("one-class-merged");
    let o = run(&["sweep", "merge", s(&dir), "-o", s(&merged)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A cable is undirected: named with its ends the other way round, it is the same fault.
    let out = tmp("reversed.json");
    let o = run(&["sweep", "schedule", s(&dir), "(1,0)-(0,0)", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("fault 0 ((0,0)-(1,0))"), "{}", text(&o));
    let index = std::fs::read_to_string(dir.join("index.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&index).unwrap();
    let fault = &v["faults"][1];
    assert_eq!(fault["class"], 0);
    let mut time = v.clone();
    time["faults"][1]["time_ns"] = serde_json::json!(fault["time_ns"].as_f64().unwrap() + 1.0);
    let mut symmetry = v.clone();
    let shift = fault["symmetry"]["shift"][1].as_u64().unwrap();
    symmetry["faults"][1]["symmetry"]["shift"][1] = serde_json::json!((shift + 1) % 4);
    for (edited, field) in [(time, "time_ns"), (symmetry, "symmetry")] {
        std::fs::write(dir.join("index.json"), serde_json::to_string_pretty(&edited).unwrap()).unwrap();
        let merged = tmp("one-class-bad");
        let o = run(&["sweep", "merge", s(&dir), "-o", s(&merged)]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let named = format!("{}: fault 1 ({})", dir.join("index.json").display(), fault["name"].as_str().unwrap());
        assert!(text(&o).contains(&named) && text(&o).contains(&format!("`{field}`")), "{}", text(&o));
        assert!(!merged.exists(), "{}", text(&o));
    }
    std::fs::write(dir.join("index.json"), index).unwrap();
}

#[test]
fn a_shard_folder_hands_out_its_faults_by_class_number() {
    // A 4x4 torus, every pair of cables: 496 faults in 11 classes; shard 1/3 holds classes
    // 1, 4, 7 and 10, so a class number is not a position in its list of classes.
    let pairs = ["sweep", "--torus", "4x4", "--faults", "pairs", "--time-limit", "10"];
    let (whole, shard) = (tmp("pairs-whole"), tmp("pairs-shard1"));
    let o = run(&[&pairs[..], &["-o", s(&whole)]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&[&pairs[..], &["--shard", "1/3", "-o", s(&shard)]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(shard.join("index.json")).unwrap()).unwrap();
    let classes: Vec<u64> = index["classes"].as_array().unwrap().iter().map(|c| c["class"].as_u64().unwrap()).collect();
    assert_eq!(classes, vec![1, 4, 7, 10]);
    // Every fault of the shard (by number, and one by name) gives the unsharded folder's schedule.
    let faults = index["faults"].as_array().unwrap();
    let firsts: Vec<&serde_json::Value> = classes.iter().map(|&c| faults.iter().find(|f| f["class"] == c).unwrap()).collect();
    for (i, f) in firsts.iter().enumerate() {
        let fault = if i == 0 { f["name"].as_str().unwrap().to_string() } else { f["fault"].to_string() };
        let (a, b) = (tmp(&format!("from-shard-{i}.json")), tmp(&format!("from-whole-{i}.json")));
        let o = run(&["sweep", "schedule", s(&shard), &fault, "-o", s(&a)]);
        assert_eq!(o.status.code(), Some(0), "{fault}: {}", text(&o));
        assert!(text(&o).contains(&format!("class {}", f["class"])), "{}", text(&o));
        let o = run(&["sweep", "schedule", s(&whole), &fault, "-o", s(&b)]);
        assert_eq!(o.status.code(), Some(0), "{fault}: {}", text(&o));
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap(), "{fault}");
    }
    // A fault of another shard: said so, exit 2.
    let o = run(&["sweep", "schedule", s(&shard), "0", "-o", s(&tmp("other.json"))]);
    assert!(o.status.code() == Some(2) && text(&o).contains("another shard's folder lists it"), "{}", text(&o));
    // An index naming a class of another shard, or no class at all: bad input, never a panic.
    let original = std::fs::read_to_string(shard.join("index.json")).unwrap();
    let number = firsts[0]["fault"].clone();
    let first = number.to_string();
    for (dir, original, class, message) in [
        (&shard, original.clone(), 2, "class 2: not in this folder (shard 1/3): the folder of shard 2/3 holds it".to_string()),
        (&shard, original, 99, "class 99: no such class (the sweep has 11 classes".to_string()),
        (&whole, std::fs::read_to_string(whole.join("index.json")).unwrap(), 99, "class 99: no such class".to_string()),
    ] {
        let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
        let f = v["faults"].as_array_mut().unwrap().iter_mut().find(|f| f["fault"] == number).unwrap();
        f["class"] = serde_json::json!(class);
        std::fs::write(dir.join("index.json"), serde_json::to_string(&v).unwrap()).unwrap();
        let o = run(&["sweep", "schedule", s(dir), &first, "-o", s(&tmp("edited.json"))]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(&message), "{}", text(&o));
        std::fs::write(dir.join("index.json"), original).unwrap();
    }
}

/// The three shards of a 4x4 torus's pairs of cables (496 faults in 11 classes): shard 0 holds
/// classes 0, 3, 6, 9, shard 1 classes 1, 4, 7, 10.
fn pair_shards(name: &str) -> Vec<PathBuf> {
    (0..3)
        .map(|k| {
            let dir = tmp(&format!("{name}-{k}"));
            let shard = format!("{k}/3");
            let o = run(&["sweep", "--torus", "4x4", "--faults", "pairs", "--time-limit", "20", "--shard", &shard, "-o", s(&dir)]);
            assert_eq!(o.status.code(), Some(0), "{}", text(&o));
            dir
        })
        .collect()
}

/// `sweep merge` of the shards into a fresh folder of the shards' name: its output, and whether
/// the folder was made.
fn merge_shards(shards: &[PathBuf]) -> (Output, bool) {
    let merged = tmp(&format!("{}-merged", shards[0].file_name().unwrap().to_str().unwrap()));
    let o = run(&[&["sweep", "merge"][..], &shards.iter().map(|d| s(d)).collect::<Vec<_>>(), &["-o", s(&merged)]].concat());
    (o, merged.exists())
}

#[test]
fn merge_refuses_a_class_certificate_that_does_not_check() {
    let shards = pair_shards("certs");
    let cert = shards[1].join("certificates/c00004.cert.json");
    let original = std::fs::read_to_string(&cert).unwrap();
    let mut raised: serde_json::Value = serde_json::from_str(&original).unwrap();
    let steps = raised["claims"].as_array_mut().unwrap().iter_mut().find(|c| c["bound"] == "steps").unwrap();
    steps["value"] = serde_json::json!((steps["value"].as_str().unwrap().parse::<u64>().unwrap() + 5).to_string());
    // A weaker claim still holds (a lower bound below the derived one), but it is not the sweep's.
    let mut lowered: serde_json::Value = serde_json::from_str(&original).unwrap();
    let steps = lowered["claims"].as_array_mut().unwrap().iter_mut().find(|c| c["bound"] == "steps").unwrap();
    let derived = steps["value"].as_str().unwrap().parse::<u64>().unwrap();
    steps["value"] = serde_json::json!((derived - 1).to_string());
    let weaker = format!("claim 0 (steps): value {}, where the sweep writes the value the checker derives, {derived}", derived - 1);
    // Class 1's certificate holds, but for class 1's spec and schedule, not class 4's.
    let other = std::fs::read_to_string(shards[1].join("certificates/c00001.cert.json")).unwrap();
    let compact = serde_json::to_string(&serde_json::from_str::<serde_json::Value>(&original).unwrap()).unwrap();
    for (body, message) in [
        ("not json".to_string(), "not a readable certificate"),
        (serde_json::to_string_pretty(&raised).unwrap(), "does not check: claim 0 (steps)"),
        (serde_json::to_string_pretty(&lowered).unwrap() + "\n", weaker.as_str()),
        (compact, "not as the sweep writes it"),
        (other, "field `spec`: names \"../specs/c00001.spec.json\", not the class's ../specs/c00004.spec.json"),
    ] {
        std::fs::write(&cert, body).unwrap();
        let (o, written) = merge_shards(&shards);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let named = format!("{}: class 4 (", shards[1].display());
        assert!(text(&o).contains(&named) && text(&o).contains("certificates/c00004.cert.json: ") && text(&o).contains(message), "{}", text(&o));
        assert!(!written, "{}", text(&o));
    }
    std::fs::write(&cert, original).unwrap();
    let (o, written) = merge_shards(&shards);
    assert!(o.status.code() == Some(0) && written, "{}", text(&o));
}

#[test]
fn merge_refuses_a_class_entry_its_schedule_and_certificate_do_not_give() {
    // A class's time (or bound) edited together with its faults', so that every fault is still
    // its class's: the class's own numbers are recomputed from its schedule and certificate.
    let shards = pair_shards("numbers");
    let path = shards[1].join("index.json");
    let original = std::fs::read_to_string(&path).unwrap();
    for field in ["time_ns", "bound_ns", "gap"] {
        let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
        v["classes"][0]["schedule"][field] = serde_json::json!(1.0);
        for f in v["faults"].as_array_mut().unwrap().iter_mut().filter(|f| f["class"] == 1) {
            f[field] = serde_json::json!(1.0);
        }
        std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
        let (o, written) = merge_shards(&shards);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let named = format!("{}: class 1 (", path.display());
        assert!(text(&o).contains(&named) && text(&o).contains(&format!("field `schedule.{field}`: 1.0, where")), "{}", text(&o));
        assert!(!written, "{}", text(&o));
    }
    std::fs::write(&path, original).unwrap();
}

#[test]
fn merge_refuses_a_shard_holding_classes_of_another_label() {
    let shards = pair_shards("labels");
    let (a, b) = (shards[0].join("index.json"), shards[1].join("index.json"));
    let (text_a, text_b) = (std::fs::read_to_string(&a).unwrap(), std::fs::read_to_string(&b).unwrap());
    std::fs::write(&a, text_a.replace("\"shard\": {\"index\":0,\"count\":3}", "\"shard\": {\"index\":1,\"count\":3}")).unwrap();
    std::fs::write(&b, text_b.replace("\"shard\": {\"index\":1,\"count\":3}", "\"shard\": {\"index\":0,\"count\":3}")).unwrap();
    let (o, written) = merge_shards(&shards);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains(&format!("{}: class 0: not of shard 1/3", a.display())), "{}", text(&o));
    assert!(!written, "{}", text(&o));
}

#[test]
fn merge_of_different_sweeps_names_the_fields_that_differ() {
    let shards = pair_shards("sweeps");
    let cables = tmp("sweeps-cables-2");
    let o = run(&["sweep", "--torus", "4x4", "--faults", "cables", "--time-limit", "20", "--shard", "2/3", "-o", s(&cables)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (o, written) = merge_shards(&[shards[0].clone(), shards[1].clone(), cables.clone()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let named = format!("`faults`: \"cables\" in {}, \"pairs\" in {}", cables.display(), shards[0].display());
    assert!(text(&o).contains(&named), "{}", text(&o));
    assert!(!written, "{}", text(&o));
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// A copy of a sweep's folder.
fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    for f in files(from) {
        std::fs::create_dir_all(to.join(&f).parent().unwrap()).unwrap();
        std::fs::copy(from.join(&f), to.join(&f)).unwrap();
    }
}

#[test]
fn merge_holds_every_entry_to_the_sweep_its_header_describes() {
    // The 4x4 mesh's 4 classes in two shards: shard 0 holds classes 0 and 2. An index entry
    // edited by hand is refused (exit 2, nothing written) with the folder, the class or fault,
    // the field and the value named, though every fault is still its class's and every number
    // still what the class's files give: the sweep, planned again from the header, says what
    // each entry is.
    let shards: Vec<PathBuf> = (0..2)
        .map(|k| {
            let dir = tmp(&format!("held-{k}"));
            let o = run(&[&MESH[..], &["--verify-members", "sample", "2", "--shard", &format!("{k}/2"), "-o", s(&dir)]].concat());
            assert_eq!(o.status.code(), Some(0), "{}", text(&o));
            dir
        })
        .collect();
    let original = read_json(&shards[0].join("index.json"));
    let faults = original["faults"].as_array().unwrap();
    // Two faults of class 0 other than its representative.
    let of0: Vec<usize> = faults.iter().enumerate().filter(|(_, f)| f["class"] == 0).map(|(i, _)| i).skip(1).take(2).collect();
    let (a, b) = (of0[0], of0[1]);
    let sampled = faults.iter().position(|f| f["verified"].is_null() && f["class"] == 0).unwrap();
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let edits: Vec<(&str, Edit, String)> = vec![
        (
            "a fault's entry given another fault's name, faults and symmetry",
            Box::new(move |v| {
                for k in ["name", "faults", "symmetry"] {
                    v["faults"][a][k] = v["faults"][b][k].clone();
                }
            }),
            format!("fault {} ({}): field `faults`", faults[a]["fault"], faults[b]["name"].as_str().unwrap()),
        ),
        (
            "two faults' numbers swapped",
            Box::new(move |v| {
                let n = v["faults"][a]["fault"].clone();
                v["faults"][a]["fault"] = v["faults"][b]["fault"].clone();
                v["faults"][b]["fault"] = n;
            }),
            format!("fault {} ({}): field `faults`", faults[b]["fault"], faults[a]["name"].as_str().unwrap()),
        ),
        (
            "a fault's name",
            Box::new(move |v| v["faults"][a]["name"] = "(9,9)-(9,8)".into()),
            "fault".to_string() + " " + &faults[a]["fault"].to_string() + " ((9,9)-(9,8)): field `name`: \"(9,9)-(9,8)\", where the sweep gives",
        ),
        ("a class's member count", Box::new(|v| v["classes"][0]["members"] = 99.into()), "field `members`: 99, where the sweep gives".to_string()),
        (
            "a class's representative",
            Box::new(|v| v["classes"][0]["representative"] = 1.into()),
            "field `representative`: 1, where the sweep gives 0".to_string(),
        ),
        ("a class's name", Box::new(|v| v["classes"][0]["name"] = "(0,0)-(0,1)".into()), "class 0 ((0,0)-(0,1)): field `name`".to_string()),
        (
            "a verified flag",
            Box::new(move |v| v["faults"][sampled]["verified"] = true.into()),
            "field `verified`: true, where the sweep gives absent".to_string(),
        ),
        (
            "a class's verified members",
            Box::new(|v| v["classes"][0]["members_verified"] = 5.into()),
            "field `members_verified`: 5, where the sweep gives 2".to_string(),
        ),
        ("the candidate chosen", Box::new(|v| v["classes"][0]["schedule"]["chosen"] = "xyz".into()), "field `schedule.chosen`: \"xyz\", where".to_string()),
        (
            "an ok class called infeasible, its schedule left in the folder",
            Box::new(|v| {
                let c = v["classes"][0].as_object_mut().unwrap();
                c.remove("schedule");
                c.insert("status".into(), "infeasible".into());
                c.insert("reason".into(), "made up".into());
                c.insert("members_verified".into(), 0.into());
                for f in v["faults"].as_array_mut().unwrap().iter_mut().filter(|f| f["class"] == 0) {
                    let f = f.as_object_mut().unwrap();
                    for k in ["schedule", "time_ns", "bound_ns", "gap", "verified"] {
                        f.remove(k);
                    }
                }
            }),
            "field `status`: \"infeasible\", but the folder holds its schedules/c00000.json".to_string(),
        ),
        (
            "an ok class without its schedule",
            Box::new(|v| {
                v["classes"][0].as_object_mut().unwrap().remove("schedule");
            }),
            "field `status`: \"ok\", but the class has no `schedule`".to_string(),
        ),
    ];
    let path = shards[0].join("index.json");
    for (what, edit, message) in &edits {
        let mut v = original.clone();
        edit(&mut v);
        std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
        let (o, written) = merge_shards(&shards);
        assert_eq!(o.status.code(), Some(2), "{what}: {}", text(&o));
        assert!(text(&o).contains(&format!("{}: ", path.display())) && text(&o).contains(message.as_str()), "{what}: {}", text(&o));
        assert!(!written, "{what}: {}", text(&o));
    }
    std::fs::write(&path, serde_json::to_string(&original).unwrap()).unwrap();
    // A header edited alike in every shard: the class specs are not the sweep's it describes.
    let edited: Vec<PathBuf> = shards
        .iter()
        .map(|d| {
            let copy = PathBuf::from(format!("{}-bw", d.display()));
            copy_dir(d, &copy);
            let mut v = read_json(&copy.join("index.json"));
            v["sweep"]["topology"]["torus"]["bandwidth_gbps"] = serde_json::json!(64.0);
            std::fs::write(copy.join("index.json"), serde_json::to_string(&v).unwrap()).unwrap();
            copy
        })
        .collect();
    let (o, written) = merge_shards(&edited);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("specs/c00000.spec.json: not the spec the sweep writes for class 0"), "{}", text(&o));
    assert!(!written, "{}", text(&o));
    let (o, written) = merge_shards(&shards);
    assert!(o.status.code() == Some(0) && written, "{}", text(&o));
}

#[test]
fn shards_that_spell_a_size_differently_are_one_sweep() {
    // `"bytes_per_rank": 65536` in a spec and `--bytes 64KiB` on the command line: one sweep.
    let spec = tmp("spelled").with_extension("json");
    std::fs::create_dir_all(spec.parent().unwrap()).unwrap();
    std::fs::write(
        &spec,
        r#"{"topology": {"torus": {"dims": [4, 4], "wrap": [false, false], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}, "collective": {"kind": "all_to_all", "bytes_per_rank": 65536}}"#,
    )
    .unwrap();
    let (a, b) = (tmp("spelled-0"), tmp("spelled-1"));
    let o = run(&["sweep", s(&spec), "--faults", "cables", "--time-limit", "30", "--shard", "0/2", "-o", s(&a)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&[&MESH[..], &["--shard", "1/2", "-o", s(&b)]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (o, written) = merge_shards(&[b.clone(), a.clone()]);
    assert!(o.status.code() == Some(0) && written, "{}", text(&o));
    // The merged header is shard 0's, in whatever order the shards are given.
    let merged = b.with_file_name("spelled-1-merged");
    assert_eq!(read_json(&merged.join("index.json"))["sweep"]["collective"]["bytes_per_rank"], 65536);
}

#[test]
fn a_class_schedule_that_does_not_verify_is_bad_input_naming_it() {
    // A class schedule with a step deleted and its SHA-256 in the index updated: the library is
    // bad input (exit 2, the file named), not a mapping of ours that broke (exit 6).
    let dir = tmp("deleted-step");
    let o = run(&["sweep", "--torus", "4x4", "--faults", "cables", "--time-limit", "10", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut index = read_json(&dir.join("index.json"));
    let file = dir.join(index["classes"][0]["schedule"]["file"].as_str().unwrap());
    let mut schedule = read_json(&file);
    schedule["steps"].as_array_mut().unwrap().remove(1);
    let bytes = serde_json::to_vec(&schedule).unwrap();
    std::fs::write(&file, &bytes).unwrap();
    let sha = {
        let out = Command::new("sha256sum").arg(&file).output().unwrap();
        String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
    };
    index["classes"][0]["schedule"]["sha256"] = sha.into();
    std::fs::write(dir.join("index.json"), serde_json::to_string(&index).unwrap()).unwrap();
    let o = run(&["sweep", "schedule", s(&dir), "3", "-o", s(&tmp("deleted-step.json"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains(&format!("{}: the class schedule of fault 3", file.display())) && text(&o).contains("does not verify"), "{}", text(&o));
}

#[test]
fn a_fault_asked_for_by_name_is_the_one_whose_faults_it_names() {
    // Fault 3's name edited to fault 6's: asked for by that name, fault 3's faults would be
    // mapped under fault 6's name. The name is held to the faults it stands for.
    let dir = tmp("renamed");
    let o = run(&[&MESH[..], &["-o", s(&dir)]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut index = read_json(&dir.join("index.json"));
    let name = index["faults"][6]["name"].as_str().unwrap().to_string();
    let o = run(&["sweep", "schedule", s(&dir), &name, "-o", s(&tmp("renamed-6.json"))]);
    assert!(o.status.code() == Some(0) && text(&o).contains("fault 6 ("), "{}", text(&o));
    index["faults"][3]["name"] = name.clone().into();
    std::fs::write(dir.join("index.json"), serde_json::to_string(&index).unwrap()).unwrap();
    for asked in [name.as_str(), "3"] {
        let out = tmp("renamed.json");
        let o = run(&["sweep", "schedule", s(&dir), asked, "-o", s(&out)]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(&format!("fault 3: field `name`: \"{name}\", where its faults give")), "{}", text(&o));
        assert!(!out.exists());
    }
}

#[test]
fn a_folder_whose_index_json_is_not_a_sweeps_is_refused() {
    // A user's own index.json would be overwritten, and the folder then taken for a library.
    let dir = tmp("users-index");
    std::fs::create_dir_all(dir.join("schedules")).unwrap();
    std::fs::write(dir.join("index.json"), r#"{"my": "data"}"#).unwrap();
    std::fs::write(dir.join("schedules/c00007.json"), "mine").unwrap();
    let before = files(&dir);
    let o = run(&[&MESH[..], &["-o", s(&dir)]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains(&format!("{}: there already, and not a sweep's index", dir.join("index.json").display())), "{}", text(&o));
    assert_eq!(files(&dir), before);
    assert_eq!(std::fs::read_to_string(dir.join("index.json")).unwrap(), r#"{"my": "data"}"#);
    // A merge into it: the same.
    let shard = tmp("users-index-shard");
    let o = run(&[&MESH[..], &["-o", s(&shard)]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["sweep", "merge", s(&shard), "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(files(&dir), before);
}

#[test]
fn a_sweep_or_merge_replaces_the_library_it_finds_in_its_folder() {
    // 11 classes of pairs, then 4 classes of the mesh's cables into the same folder: the earlier
    // library's class files go, a user's files stay, and every certificate left checks.
    let dir = tmp("replaced");
    let o = run(&["sweep", "--torus", "4x4", "--faults", "pairs", "--time-limit", "10", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    std::fs::write(dir.join("schedules/mine.json"), "{}").unwrap();
    let mut pairs = files(&dir);
    let o = run(&[&MESH[..], &["-o", s(&dir)]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let classes: Vec<String> =
        (0..4).flat_map(|c| [format!("certificates/c{c:05}.cert.json"), format!("schedules/c{c:05}.json"), format!("specs/c{c:05}.spec.json")]).collect();
    let mut expected: Vec<PathBuf> = ["gaps.svg", "index.json", "notes.txt", "schedules/mine.json", "summary.md"].iter().map(PathBuf::from).collect();
    expected.extend(classes.iter().map(PathBuf::from));
    expected.sort();
    assert_eq!(files(&dir), expected);
    let o = run(&["proof", "check", s(&dir.join("certificates"))]);
    assert!(o.status.code() == Some(0) && text(&o).contains("4 certificates, 4 hold"), "{}", text(&o));
    // A merge into a folder that holds a library: the same.
    let shards: Vec<PathBuf> = (0..2)
        .map(|k| {
            let d = tmp(&format!("replaced-shard-{k}"));
            let o = run(&["sweep", "--torus", "4x4", "--faults", "pairs", "--time-limit", "10", "--shard", &format!("{k}/2"), "-o", s(&d)]);
            assert_eq!(o.status.code(), Some(0), "{}", text(&o));
            d
        })
        .collect();
    let o = run(&["sweep", "merge", s(&shards[0]), s(&shards[1]), "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    pairs.sort();
    assert_eq!(files(&dir), pairs);
    let o = run(&[&MESH[..], &["--shard", "0/1", "-o", s(&shards[0])]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["sweep", "merge", s(&shards[0]), "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(files(&dir), expected);
}

#[test]
fn merge_help_lists_every_exit_code_merge_gives() {
    let o = run(&["sweep", "merge", "--help"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for code in ["0 merged", "2 shards missing", "3 a class is infeasible", "4 a class reached its time limit", "5 a file could not be written"] {
        assert!(text(&o).contains(code), "{code}: {}", text(&o));
    }
}
