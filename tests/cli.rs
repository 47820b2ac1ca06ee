//! The binary as a user runs it: outputs and exit codes of every path.

mod common;

use collsched::write_schedule_file;
use collsched::{torus, TorusParams};
use collsched::{Collective, CollectiveKind};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_collsched"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn tmp(name: &str) -> PathBuf {
    common::scratch("cli").join(name)
}

const RING_SPEC: &str = r#"{
  "topology": {"torus": {"dims": [6], "bandwidth_gbps": 32.0, "latency_ns": 100.0}},
  "collective": {"kind": "all_to_all", "bytes_per_rank": 6000, "pieces": 1}
}"#;

fn ring_schedule(dir_name: &str) -> (PathBuf, PathBuf) {
    let t = torus(&TorusParams::uniform(&[6], 32.0, 100.0)).unwrap();
    let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 6000, 1, None, &t).unwrap();
    let s = common::shortest_path_all_to_all(&t, &c);
    let path = tmp(&format!("{dir_name}.json"));
    write_schedule_file(&path, &s).unwrap();
    let spec = tmp(&format!("{dir_name}.spec.json"));
    std::fs::write(&spec, RING_SPEC).unwrap();
    (path, spec)
}

/// A folder `dir_name` holding the ring's spec (`ring.json`) and its certificate from `bound`
/// (`ring.cert.json`): the folder and the certificate.
fn ring_certificate(dir_name: &str) -> (PathBuf, PathBuf) {
    let dir = tmp(dir_name);
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("ring.json");
    std::fs::write(&spec, RING_SPEC).unwrap();
    let cert = dir.join("ring.cert.json");
    let o = run(&["bound", s(&spec), "--certificate", s(&cert)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    (dir, cert)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `bound SPEC --certificate CERT --schedule SCHED`, then `proof check CERT`, both passing:
/// the check's output.
fn attach_and_check(spec: &Path, sched: &Path, cert: &Path) -> Output {
    let o = run(&["bound", s(spec), "--certificate", s(cert), "--schedule", s(sched)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["proof", "check", s(cert)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    o
}

#[test]
fn verify_a_valid_schedule() {
    let (path, spec) = ring_schedule("valid");
    let o = run(&["verify", s(&path)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("valid: all_to_all") && out.contains("step-synchronous time"), "{out}");
    let o = run(&["verify", s(&path), "--spec", s(&spec), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["valid"], true);
    assert!(v["cost"]["time_ns"].as_f64().unwrap() > 0.0);
}

#[test]
fn verify_reports_each_failure_on_its_own_line() {
    let (path, _) = ring_schedule("broken");
    let body = std::fs::read_to_string(&path).unwrap();
    // Two transfers onto one link: duplicate the first transfer of step 0.
    let start = body.find("{\"transfers\": [").unwrap() + "{\"transfers\": [".len();
    let end = body[start..].find("]]}").unwrap() + start + 3;
    let first = body[start..end].to_string();
    let broken = format!("{}{}, {}", &body[..start], first, &body[start..]);
    std::fs::write(&path, broken).unwrap();
    let o = run(&["verify", s(&path)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out.lines().find(|l| l.contains("rule 2 no link sharing")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.starts_with("step 0, transfer 1 (link 0: (0)->(1))"), "{line}");
    assert!(out.contains("INVALID"));
}

#[test]
fn bad_input_exits_2_with_the_file_named() {
    let missing = tmp("nope.json");
    let o = run(&["verify", s(&missing)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("nope.json: cannot read"), "{}", text(&o));

    let garbage = tmp("garbage.json");
    std::fs::write(&garbage, "{\n  \"format\": \"collsched.schedule\",\n  oops\n}").unwrap();
    let o = run(&["verify", s(&garbage)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("garbage.json") && text(&o).contains("line 3"), "{}", text(&o));

    let (path, _) = ring_schedule("specbad");
    let spec = tmp("bad.spec.json");
    std::fs::write(&spec, RING_SPEC.replace("\"latency_ns\": 100.0", "\"latency_ns\": 100.0, \"color\": \"red\"")).unwrap();
    let o = run(&["verify", s(&path), "--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("bad.spec.json") && text(&o).contains("`color`"), "{}", text(&o));

    std::fs::write(&spec, RING_SPEC.replace("[6]", "[7]")).unwrap();
    let o = run(&["verify", s(&path), "--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("is not the spec's"), "{}", text(&o));

    std::fs::write(&spec, RING_SPEC.replace("\"collective\"", "\"faults\": {\"cables\": [[0, 2]]}, \"collective\"")).unwrap();
    let o = run(&["verify", s(&path), "--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("faults.cables[0]") && text(&o).contains("(0)-(2) does not exist"), "{}", text(&o));

    // A byte-order mark is named as such, in a schedule and in a spec.
    let bom = tmp("bom.json");
    std::fs::write(&bom, [b"\xEF\xBB\xBF".as_slice(), &std::fs::read(&path).unwrap()].concat()).unwrap();
    std::fs::write(&spec, format!("\u{feff}{RING_SPEC}")).unwrap();
    for args in [vec!["verify", s(&bom)], vec!["bound", s(&spec)]] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("byte-order mark") && text(&o).contains(args[1]), "{}", text(&o));
    }
}

#[test]
fn a_fault_that_cuts_a_rank_off_exits_3() {
    let (path, _) = ring_schedule("cut");
    let spec = tmp("cut.spec.json");
    std::fs::write(&spec, RING_SPEC.replace("\"collective\"", "\"faults\": {\"cables\": [[0, 1], [1, 2]]}, \"collective\"")).unwrap();
    let o = run(&["verify", s(&path), "--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("rank 1 (node 1, (1)) is cut off"), "{}", text(&o));
}

#[test]
fn a_new_fault_breaks_an_old_schedule() {
    let (path, _) = ring_schedule("newfault");
    let spec = tmp("newfault.spec.json");
    std::fs::write(&spec, RING_SPEC.replace("\"collective\"", "\"faults\": {\"cables\": [[0, 1]]}, \"collective\"")).unwrap();
    let o = run(&["verify", s(&path), "--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("rule 1 structure: the link is down"), "{}", text(&o));
}

#[test]
fn cost_prints_time_and_utilization() {
    let (path, _) = ring_schedule("cost");
    let o = run(&["cost", s(&path), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["per_group"]["custom"]["utilization"].as_f64().is_some() || v["per_group"]["dim0"]["utilization"].as_f64().is_some(), "{v}");
    // Per link, for either model: every link of the ring of 6 that is up, busiest first, its
    // utilization its bytes at 32 GB/s over the model's time, the links' bytes their groups'.
    for model in ["sync", "event"] {
        let o = run(&["cost", s(&path), "--model", model, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let links = v["per_link"].as_array().unwrap();
        assert_eq!(links.len(), 12, "{v}");
        let time = v["time_ns"].as_f64().unwrap();
        let used: Vec<f64> = links.iter().map(|l| l["utilization"].as_f64().unwrap()).collect();
        assert!(used.windows(2).all(|w| w[0] >= w[1]) && used[0] > 0.0, "{used:?}");
        for l in links {
            let want = l["bytes"].as_f64().unwrap() / 32.0 / time;
            assert!((l["utilization"].as_f64().unwrap() - want).abs() < 1e-12, "{l}");
        }
        let group_bytes: f64 = v["per_group"].as_object().unwrap().values().map(|g| g["bytes"].as_f64().unwrap()).sum();
        assert_eq!(links.iter().map(|l| l["bytes"].as_f64().unwrap()).sum::<f64>(), group_bytes);
        let o = run(&["cost", s(&path), "--model", model]);
        assert!(text(&o).contains("busiest links (8 of 12 (--json lists every link)):"), "{}", text(&o));
    }
    let o = run(&["cost", s(&tmp("missing.json"))]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn cost_sums_a_groups_bytes_exactly() {
    // A ring all_gather of 3 npus at 2^64 - 1 bytes: each of the 6 links carries one block of
    // (2^64 - 1) / 3 bytes; a float sum printed 36893488147419103232.
    let out = tmp("cost_exact.json");
    let o = run(&["generate", "--torus", "3", "--collective", "all_gather", "--algorithm", "ring", "--bytes", "18446744073709551615", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["cost", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let expected = (u128::from(u64::MAX) / 3 * 6).to_string();
    assert!(text(&o).lines().any(|l| l.starts_with("dim0") && l.split_whitespace().nth(2) == Some(&expected)), "{}", text(&o));
}

#[test]
fn help_has_examples() {
    for sub in ["verify", "cost"] {
        let o = run(&[sub, "--help"]);
        assert_eq!(o.status.code(), Some(0));
        assert!(text(&o).contains("Example"), "{sub}: {}", text(&o));
    }
}

#[test]
fn generate_from_flags_then_verify_and_cost() {
    let out = tmp("flags.json");
    let o = run(&[
        "generate",
        "--torus",
        "4x4",
        "--fail",
        "(0,0)-(1,0)",
        "--bytes",
        "1MiB",
        "--algorithm",
        "foldedring",
        "--scheduler",
        "dimrotation",
        "-o",
        s(&out),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["verify", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["cost", s(&out), "--model", "event", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["time_ns"].as_f64().unwrap() > 0.0);
    // The link groups count the links that are up: 32 links in dimension 0, the cable's two down.
    let o = run(&["cost", s(&out), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["per_group"]["dim0"]["links"].as_u64(), v["per_group"]["dim1"]["links"].as_u64()), (Some(30), Some(32)), "{v}");
    let o = run(&["bound", "--torus", "4x4x4", "--fail", "(0,0,0)-(1,0,0)", "--collective", "all_to_all", "--bytes", "4MiB", "--print-spec"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let spec: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(spec["faults"]["cables"][0][1], serde_json::json!([1, 0, 0]));
    let o = run(&["generate", "--torus", "4x4", "--fail", "(0,0)-(2,0)", "--algorithm", "halfring"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("(0,0)-(2,0) does not exist"), "{}", text(&o));
    let o = run(&["generate", "--torus", "4", "--fail", "0-1", "--fail", "2-3", "--algorithm", "foldedring"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}

/// A ring with a failed cable is a line: Ring and HalfRing refuse it (exit 3, the ring and the
/// cable named, foldedring and for an all-to-all of two or more dimensions MATE offered); they ran
/// FoldedRing there unasked and exited 0. HalfRing under MATE and FoldedRing still run.
#[test]
fn ring_and_halfring_refuse_a_ring_with_a_failed_cable() {
    let out = tmp("failed-ring.json");
    let refused: [&[&str]; 4] = [
        &["--torus", "5", "--algorithm", "ring", "--fail", "(1)-(2)", "--bytes", "4KiB"],
        &["--torus", "4x4", "--algorithm", "halfring", "--scheduler", "dimrotation", "--fail", "(0,0)-(1,0)"],
        &["--torus", "4x4", "--algorithm", "ring", "--scheduler", "pipeline", "--fail", "(0,0)-(1,0)"],
        &["--torus", "4x4", "--algorithm", "halfring", "--collective", "all_reduce", "--fail", "(0,0)-(1,0)"],
    ];
    for args in refused {
        let o = run(&[&["generate"], args, &["-o", s(&out)]].concat());
        assert_eq!(o.status.code(), Some(3), "{args:?}: {}", text(&o));
        let t = text(&o);
        assert!(t.contains("ring along dimension 0 through") && t.contains(" down") && t.contains("foldedring"), "{args:?}: {t}");
        let multi_a2a = args.contains(&"4x4") && !args.contains(&"all_reduce");
        assert_eq!(t.contains("--scheduler mate|matee"), multi_a2a, "{args:?}: {t}");
    }
    let o = run(&["generate", "--torus", "5", "--algorithm", "ring", "--fail", "(1)-(2)", "--bytes", "4KiB", "-o", s(&out)]);
    assert!(text(&o).contains("(1)-(2) down") && text(&o).contains("(0) (1) (2) (3) (4)"), "{}", text(&o));
    for args in [
        &["--torus", "4x4", "--algorithm", "halfring", "--scheduler", "mate", "--fail", "(0,0)-(1,0)"][..],
        &["--torus", "4x4", "--algorithm", "halfring", "--scheduler", "matee", "--fail", "(0,0)-(1,0)"],
        &["--torus", "5", "--algorithm", "foldedring", "--fail", "(1)-(2)", "--bytes", "4KiB"],
        &["--torus", "4x4", "--algorithm", "foldedring", "--collective", "all_gather", "--fail", "(0,0)-(1,0)"],
    ] {
        let o = run(&[&["generate"], args, &["-o", s(&out)]].concat());
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    }
}

#[test]
fn dimension_order_routing_is_caught_by_rule_7() {
    let out = tmp("dor.json");
    let o = run(&["generate", "--torus", "4x4", "--algorithm", "dor", "-o", s(&out)]);
    // Dimension-order routing shares links by design: written, with the sharing as a note.
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("links shared within a step (rule 2), by design"), "{}", text(&o));
    let spec = tmp("dor.spec.json");
    std::fs::write(
        &spec,
        r#"{"topology": {"torus": {"dims": [4, 4], "bandwidth_gbps": 32, "latency_ns": 100}},
            "collective": {"kind": "all_to_all", "bytes_per_rank": "1MiB"},
            "method": {"generate": {"algorithm": "dor"}}, "expect": {"allow_contention": true}}"#,
    )
    .unwrap();
    let o = run(&["generate", s(&spec), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["verify", s(&out), "--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("rule 7 routing deadlock freedom"), "{}", text(&o));
    assert!(!text(&o).contains("rule 2 no link sharing:"), "{}", text(&o));
    // A certificate may attach it where its spec allows the sharing (the bounds do not assume
    // rule 2; the attachment is checked under rules 1-5, which its cost needs), not otherwise.
    let cert = tmp("dor.cert.json");
    let o = attach_and_check(&spec, &out, &cert);
    assert!(text(&o).contains("SHA-256 matches"), "{}", text(&o));
    let strict = tmp("dor.strict.spec.json");
    std::fs::write(&strict, std::fs::read_to_string(&spec).unwrap().replace(r#", "expect": {"allow_contention": true}"#, "")).unwrap();
    let o = run(&["bound", s(&strict), "--schedule", s(&out), "--certificate", s(&tmp("dor.strict.cert.json"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("rule 2 no link sharing"), "{}", text(&o));
    // The sharing allowed when the certificate was made and forbidden since: the spec changed,
    // and so does its hash; a certificate naming a strict spec fails on the sharing.
    let bare = tmp("dor.strict.bare.cert.json");
    let o = run(&["bound", s(&strict), "--certificate", s(&bare)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let strict_hash = serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&bare).unwrap()).unwrap()["spec_sha256"].clone();
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&cert).unwrap()).unwrap();
    v["spec"] = serde_json::json!(strict.file_name().unwrap().to_str().unwrap());
    v["spec_sha256"] = strict_hash;
    std::fs::write(&cert, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let o = run(&["proof", "check", s(&cert)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("fails verification") && text(&o).contains("rule 2 no link sharing"), "{}", text(&o));
}

#[test]
fn eval_writes_tables_and_plots() {
    let dir = tmp("eval");
    let o = run(&["eval", "--tori", "3x3,4", "--out", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.contains("HalfRing+DimRotation") && md.contains("3x3 torus"), "{md}");
    for f in ["torus.md", "torus.csv", "torus_3x3.svg", "torus_4.svg"] {
        assert!(dir.join(f).exists(), "{f}");
    }
    let o = run(&["eval", "--tori", "3xz"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // A torus listed twice is a slip (it wrote its plot twice and failed with exit 5, leaving
    // it); a torus a method cannot run on is named with the method. Neither writes anything.
    for (tori, code, says) in [("4x4,4x4", 2, "4x4 is listed twice"), ("2x2", 3, "on the 2x2 torus with a failed cable")] {
        let dir = fresh(&format!("eval-{tori}"));
        std::fs::remove_dir(&dir).unwrap();
        let o = run(&["eval", "--tori", tori, "--out", s(&dir)]);
        assert_eq!(o.status.code(), Some(code), "{tori}: {}", text(&o));
        assert!(text(&o).contains(says), "{tori}: {}", text(&o));
        assert!(!dir.exists(), "{tori}: nothing is written");
    }
}

/// An output path that is one of the command's inputs (by any name) is refused before anything
/// is written: the input stays as it was.
#[test]
fn an_output_that_is_an_input_is_refused() {
    let (path, _) = ring_schedule("output-is-input");
    let before = std::fs::read(&path).unwrap();
    let o = run(&["cost", s(&path), "--svg", s(&path)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("is also an input of this command"), "{}", text(&o));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let spec = tmp("output-is-input.spec.json");
    std::fs::write(&spec, RING_SPEC).unwrap();
    let o = run(&["bound", s(&spec), "--certificate", s(&spec)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&spec).unwrap(), RING_SPEC);
    // Names the command makes count too: the spec `bound` writes beside the certificate (here
    // the --schedule input), the XML `export` names after its input.
    let dir = tmp("output-is-input");
    std::fs::create_dir_all(&dir).unwrap();
    let sched = dir.join("x.spec.json");
    std::fs::copy(&path, &sched).unwrap();
    let o = run(&["bound", "--torus", "6", "--bytes", "6000", "--schedule", s(&sched), "--certificate", s(&dir.join("x.cert.json"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("x.spec.json: is also an input of this command"), "{}", text(&o));
    assert_eq!(std::fs::read(&sched).unwrap(), before);
    assert!(!dir.join("x.cert.json").exists());
    let xml = dir.join("b.xml");
    std::fs::copy(&path, &xml).unwrap();
    let o = run(&["export", s(&xml), "--to", "msccl-xml", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("b.xml: is also an input of this command"), "{}", text(&o));
    assert_eq!(std::fs::read(&xml).unwrap(), before);
    // Two outputs of one command at one path.
    let out = dir.join("two.json");
    let o = run(&["generate", "--torus", "4", "--algorithm", "halfring", "-o", s(&out), "--topology-svg", s(&dir.join(".").join("two.json"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("named for two outputs") && !out.exists(), "{}", text(&o));
}

#[test]
fn cost_svg_is_written() {
    let (path, _) = ring_schedule("svg");
    let out = tmp("timeline.svg");
    let o = run(&["cost", s(&path), "--svg", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(std::fs::read_to_string(&out).unwrap().starts_with("<svg"));
    let o = run(&["cost", s(&path), "--fifo"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn certificates_reject_a_changed_spec_or_schedule() {
    let dir = tmp("proofs");
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("ring.json");
    std::fs::write(
        &spec,
        RING_SPEC.replace("\"pieces\": 1", "\"pieces\": 2").replace("}\n}", "},\n  \"method\": {\"generate\": {\"algorithm\": \"halfring\"}}\n}"),
    )
    .unwrap();
    let sched = dir.join("ring.schedule.json");
    let cert = dir.join("ring.cert.json");
    let o = run(&["generate", s(&spec), "-o", s(&sched)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = attach_and_check(&spec, &sched, &cert);
    // Five steps claims (distance, transmissions, cut, flow: a ring of 6 with 2 pieces per block,
    // 108 piece-links over 12 links, 9 steps; arrival) and five on time.
    assert!(text(&o).contains("10 claims hold"), "{}", text(&o));
    assert!(text(&o).contains("steps bound 9"), "{}", text(&o));
    assert!(text(&o).contains("SHA-256 matches"), "{}", text(&o));
    // A missing schedule is regenerated from the spec that generates it, byte for byte.
    let body = std::fs::read(&sched).unwrap();
    std::fs::remove_file(&sched).unwrap();
    let o = run(&["proof", "check", s(&cert)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("regenerated from its spec"), "{}", text(&o));
    assert_eq!(std::fs::read(&sched).unwrap(), body);
    // A claimed bound above what its witness supports: rejected with the claim named.
    let original = std::fs::read_to_string(&cert).unwrap();
    let v: serde_json::Value = serde_json::from_str(&original).unwrap();
    let volume = v["claims"].as_array().unwrap().iter().find(|c| c["bound"] == "volume").unwrap()["value"].as_str().unwrap().to_string();
    std::fs::write(&cert, original.replacen(&format!("\"value\": \"{volume}\""), r#""value": "1000000""#, 1)).unwrap();
    let o = run(&["proof", "check", s(&cert)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("(volume)"), "{}", text(&o));
    std::fs::write(&cert, &original).unwrap();
    // A schedule that changed: one step dropped.
    let body = std::fs::read_to_string(&sched).unwrap();
    let mut sv: serde_json::Value = serde_json::from_str(&body).unwrap();
    sv["steps"].as_array_mut().unwrap().pop();
    std::fs::write(&sched, serde_json::to_string(&sv).unwrap()).unwrap();
    let o = run(&["proof", "check", s(&cert)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("its SHA-256 differs"), "{}", text(&o));
    std::fs::write(&sched, body).unwrap();
    // A spec that changed.
    std::fs::write(&spec, std::fs::read_to_string(&spec).unwrap().replace("32.0", "64.0")).unwrap();
    let o = run(&["proof", "check", s(&cert)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("changed since the certificate was made"), "{}", text(&o));
    let o = run(&["proof", "check", s(&dir.join("missing"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn export_msccl_xml_and_rule_6_in_verify() {
    let out = tmp("xml-src.json");
    let o = run(&["generate", "--torus", "4x4", "--fail", "(0,0)-(1,0)", "--algorithm", "foldedring", "--scheduler", "dimrotation", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dir = tmp("xml");
    let o = run(&["export", s(&out), "--to", "msccl-xml", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("reader rules pass") && text(&o).contains("rule 6 holds"), "{}", text(&o));
    let xml = std::fs::read_to_string(dir.join("xml-src.xml")).unwrap();
    assert!(xml.contains("<algo") && xml.contains("coll=\"alltoall\""), "{}", &xml[..200.min(xml.len())]);
    let o = run(&["export", s(&out), "--to", "chakra-et", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(dir.join("xml-src.0.et").exists() && dir.join("xml-src.system.json").exists());
    let o = run(&["export", s(&out), "--to", "nccl", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // Rule 6 streams with the other rules: there is no size above which it is skipped.
    let o = run(&["verify", s(&out), "--rule6-limit", "10"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let spec = tmp("dl.spec.json");
    std::fs::write(
        &spec,
        r#"{"topology": {"torus": {"dims": [4, 4], "bandwidth_gbps": 32.0, "latency_ns": 100.0}},
            "faults": {"cables": [[[0, 0], [1, 0]]]},
            "collective": {"kind": "all_to_all", "bytes_per_rank": "1MiB"},
            "expect": {"deadlock_free": true}}"#,
    )
    .unwrap();
    let o = run(&["verify", s(&out), "--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("NOT CHECKED"), "{}", text(&o));
}

#[test]
fn synthesize_finds_certified_schedules_and_names_cut_off_ranks() {
    let out = tmp("synth.json");
    let o = run(&["synthesize", "--torus", "5", "--fail", "0-1", "--objective", "steps", "-o", s(&out), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["steps_status"], "optimal (certified)", "{v}");
    let o = run(&["verify", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A faulty 4x4x4 at 8 MiB: the synthesized schedule beats every hand-written schedule on
    // this instance and comes within 5% of the certified bound, in a 20 s budget.
    let o = run(&["synthesize", "--torus", "4x4x4", "--fail", "(0,0,0)-(1,0,0)", "--bytes", "8MiB", "-o", s(&out), "--json", "--pareto", "--time-limit", "20"]);
    assert!(matches!(o.status.code(), Some(0 | 4)), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["gap_to_certified_bound"].as_f64().unwrap() < 0.05, "{v}");
    let synth_ns = v["time_ns"].as_f64().unwrap();
    let candidates = v["candidates"].as_array().unwrap();
    for hand in ["HalfRing+DimRotation", "MATE", "MATEe"] {
        let e = candidates.iter().find(|e| e["name"] == hand).unwrap_or_else(|| panic!("{hand} not tried: {v}"));
        assert!(synth_ns < e["time_ns"].as_f64().unwrap(), "{hand}: {v}");
    }
    assert!(!v["pareto"].as_array().unwrap().is_empty(), "{v}");
    // SCCL's coordinates beside time for the single-hop candidates: the fewest-steps schedule
    // moves one piece per link per step, so its rounds equal its steps and its chunks its pieces.
    let fewest = candidates.iter().find(|e| e["name"] == "fewest steps").unwrap_or_else(|| panic!("{v}"));
    assert_eq!(fewest["sccl"]["steps"], fewest["steps"], "{v}");
    assert_eq!(fewest["sccl"]["rounds"], fewest["steps"], "{v}");
    assert_eq!(fewest["sccl"]["chunks"], fewest["pieces"], "{v}");
    assert!(candidates.iter().any(|e| e["name"] == "MATEe" && e["sccl"].is_null()), "routed detours have no SCCL form: {v}");
    let o = run(&["verify", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mate = tmp("matee.json");
    let o = run(&[
        "generate",
        "--torus",
        "4x4x4",
        "--fail",
        "(0,0,0)-(1,0,0)",
        "--bytes",
        "8MiB",
        "--algorithm",
        "halfring",
        "--scheduler",
        "matee",
        "-o",
        s(&mate),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let m: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(synth_ns < m["time_ns"].as_f64().unwrap(), "synthesized {synth_ns} ns vs MATEe {}", m["time_ns"]);
    let o = run(&["synthesize", "--torus", "4", "--fail", "0-1", "--fail", "2-3", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("is cut off"), "{}", text(&o));
}

#[test]
fn synthesize_gathers_and_reduces_on_a_faulty_torus() {
    // No hand-written generator takes a torus with a failed cable for these kinds: the trees
    // (spreading; layered, whose all_reduce halves may be pipelined) must give a schedule that
    // verify accepts, with its gap to the bound.
    let out = tmp("synth-gather.json");
    for kind in ["all_gather", "reduce_scatter", "all_reduce"] {
        let o = run(&["synthesize", "--torus", "4x4", "--fail", "(0,0)-(1,0)", "--collective", kind, "--bytes", "1MiB", "-o", s(&out), "--json"]);
        assert_eq!(o.status.code(), Some(0), "{kind}: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let chosen = v["chosen"].as_str().unwrap();
        assert!(chosen.starts_with("spreading trees") || chosen.starts_with("layered trees"), "{kind}: {v}");
        assert!(v["gap_to_certified_bound"].as_f64().is_some(), "{kind}: {v}");
        let o = run(&["verify", s(&out)]);
        assert_eq!(o.status.code(), Some(0), "{kind}: {}", text(&o));
    }
    // A rank cut off on two sides: no schedule exists, and the answer says so (exit 3).
    let o = run(&["synthesize", "--torus", "4", "--fail", "0-1", "--fail", "1-2", "--collective", "all_gather", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("is cut off"), "{}", text(&o));
}

#[test]
fn synthesize_takes_the_layered_trees_near_the_bound_on_a_faulty_pod() {
    // 4x4x4 with a failed cable at 8 MiB: the layered trees (synth::trees) meet the certified
    // bound of the gathering kinds within 1% (the cut around a rank of the cable) and beat every
    // other candidate for all_reduce, its halves pipelined (7.8% above the bound, measured);
    // what synthesize writes verifies.
    let out = tmp("synth-layered.json");
    for (kind, max_gap) in [("all_gather", 0.01), ("reduce_scatter", 0.01), ("all_reduce", 0.09)] {
        let o =
            run(&["synthesize", "--torus", "4x4x4", "--fail", "(0,0,0)-(1,0,0)", "--collective", kind, "--bytes", "8MiB", "-o", s(&out), "--json", "--pareto"]);
        assert_eq!(o.status.code(), Some(0), "{kind}: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let chosen = v["chosen"].as_str().unwrap();
        assert!(chosen.starts_with("layered trees"), "{kind}: {v}");
        assert_eq!(chosen.contains("halves pipelined"), kind == "all_reduce", "{kind}: {chosen}");
        let fastest = v["candidates"].as_array().unwrap().iter().map(|e| e["time_ns"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
        assert_eq!(v["time_ns"].as_f64().unwrap(), fastest, "{kind}: {v}");
        let gap = v["gap_to_certified_bound"].as_f64().unwrap();
        assert!((0.0..max_gap).contains(&gap), "{kind}: gap {gap}");
        let o = run(&["verify", s(&out)]);
        assert_eq!(o.status.code(), Some(0), "{kind}: {}", text(&o));
    }
}

#[test]
fn synthesized_group_schedules_on_custom_networks_verify_with_deadlock_freedom() {
    // An ASTRA-sim network (a ring in one dimension, a switch in the other) and a mesh with a
    // failed npu, each with a group of ranks: npus outside the group may route paths but run no
    // program, so what synthesize writes must lower to the ranks' programs (rule 6, checked by
    // `verify` by default) and the written file must read back (custom topologies have no shape).
    let dir = tmp("groups");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("net.yml"), "topology: [ Ring, Switch ]\nnpus_count: [ 4, 4 ]\nbandwidth: [ 50.0, 25.0 ]\nlatency: [ 500.0, 700.0 ]\n").unwrap();
    let topologies = [
        (r#"{"astra_network": "net.yml"}"#, r#"{}"#, "[0, 1, 2, 5, 9, 14]"),
        (r#"{"torus": {"dims": [3, 4], "wrap": [false, true], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}"#, r#"{"nodes": [[1, 1]]}"#, "[0, 2, 3, 7, 9, 11]"),
    ];
    for (i, (topology, faults, ranks)) in topologies.iter().enumerate() {
        for kind in ["all_to_all", "all_gather", "reduce_scatter", "all_reduce"] {
            let spec = dir.join(format!("{i}_{kind}.spec.json"));
            std::fs::write(
                &spec,
                format!(r#"{{"topology": {topology}, "faults": {faults}, "collective": {{"kind": "{kind}", "bytes_per_rank": "1MiB", "ranks": {ranks}}}}}"#),
            )
            .unwrap();
            let out = dir.join(format!("{i}_{kind}.json"));
            let o = run(&["synthesize", s(&spec), "-o", s(&out), "--time-limit", "10"]);
            assert!(matches!(o.status.code(), Some(0 | 4)), "{i} {kind}: {}", text(&o));
            let o = run(&["verify", s(&out), "--spec", s(&spec)]);
            assert_eq!(o.status.code(), Some(0), "{i} {kind}: {}", text(&o));
            // Runtimes take it too; 1 MiB over 6 ranks is no whole number of bytes per piece,
            // so the Chakra messages round up.
            for to in ["msccl-xml", "chakra-et"] {
                let o = run(&["export", s(&out), "--to", to, "-o", s(&dir.join(to))]);
                assert_eq!(o.status.code(), Some(0), "{i} {kind} {to}: {}", text(&o));
            }
        }
    }
    // The fewest-steps search hops from rank to rank (docs/design/MODEL.md section 3), routing
    // through the npus outside the group: on a diagonal group and on 5 ranks of a 4x4 torus, every
    // kind verifies with the deadlock rules, for either objective, and nothing is left to warn.
    for (name, ranks) in [("diagonal", "[0, 5, 10, 15]"), ("five", "[0, 1, 6, 11, 13]")] {
        for kind in ["all_to_all", "all_gather", "reduce_scatter", "all_reduce"] {
            let spec = dir.join(format!("{name}_{kind}.spec.json"));
            std::fs::write(
                &spec,
                format!(
                    r#"{{"topology": {{"torus": {{"dims": [4, 4], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}}}, "collective": {{"kind": "{kind}", "bytes_per_rank": "1MiB", "ranks": {ranks}}}}}"#
                ),
            )
            .unwrap();
            let out = dir.join(format!("{name}_{kind}.json"));
            for objective in ["steps", "time"] {
                let o = run(&["synthesize", s(&spec), "--objective", objective, "-o", s(&out), "--time-limit", "20"]);
                assert_eq!(o.status.code(), Some(0), "{name} {kind} {objective}: {}", text(&o));
                assert!(!text(&o).contains("warning"), "{name} {kind} {objective}: {}", text(&o));
                let o = run(&["verify", s(&out), "--spec", s(&spec)]);
                assert_eq!(o.status.code(), Some(0), "{name} {kind} {objective}: {}", text(&o));
            }
        }
    }
}

#[test]
fn synthesize_takes_the_steps_objective_for_every_kind() {
    // all_gather on a ring of 6 and on a line of 6 (SCCL: 3 and 5 steps), reduce_scatter the
    // same reversed, all_reduce on a ring of 5 (reduce_scatter then all_gather, 2 + 2, meets the
    // bound: 2 x 4 transfers for each of 5 blocks over 10 links): each optimal and certified.
    let out = tmp("synth-steps.json");
    for (kind, fail, steps) in
        [("all_gather", None, 3), ("all_gather", Some("0-1"), 5), ("reduce_scatter", None, 3), ("reduce_scatter", Some("2-3"), 5), ("all_reduce", None, 4)]
    {
        let torus = if kind == "all_reduce" { "5" } else { "6" };
        let mut args = vec!["synthesize", "--torus", torus, "--collective", kind, "--objective", "steps", "-o", s(&out), "--json"];
        if let Some(cable) = fail {
            args.extend(["--fail", cable]);
        }
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{kind} {fail:?}: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!((v["steps"].as_u64(), v["steps_lower_bound"].as_u64()), (Some(steps), Some(steps)), "{kind} {fail:?}: {v}");
        assert_eq!(v["steps_status"], "optimal (certified)", "{kind} {fail:?}: {v}");
        let o = run(&["verify", s(&out)]);
        assert_eq!(o.status.code(), Some(0), "{kind} {fail:?}: {}", text(&o));
        assert!(text(&o).contains(&format!("valid: {kind}")), "{}", text(&o));
    }
    // The text output names the bound, the steps and the status; a line of 4 all_reduce is
    // certified by the arrival bound (the program also refutes 4 and 5 steps).
    let o = run(&["synthesize", "--torus", "4", "--fail", "0-1", "--collective", "all_reduce", "--objective", "steps", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("fewest steps: bound 6 steps, found 6: optimal (certified)"), "{}", text(&o));
    let o = run(&["verify", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Ranks 0, 2 and 5 of a fat tree with boards of 2: a single hop may also pass through the
    // board mates 1, 3 and 4, which the solver's shortest paths leave out (one step would do:
    // each rank sends one block over its leaf link and one through its mate), so its optimality
    // is claimed over shortest paths only.
    let spec = tmp("fat-tree-group.spec.json");
    std::fs::write(
        &spec,
        r#"{"topology": {"fat_tree": {"levels": 2, "k": 4, "osr": 1, "npus": 8, "board": 2, "bandwidth_gbps": 1.0, "latency_ns": 0.0, "switch_latency_ns": 0.0}},
            "collective": {"kind": "all_to_all", "bytes_per_rank": 6000, "ranks": [0, 2, 5]}}"#,
    )
    .unwrap();
    let o = run(&["synthesize", s(&spec), "--objective", "steps", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("found 2: optimal among schedules over shortest paths (solver-attested; longer single hops were not searched)"), "{}", text(&o));
}

#[test]
fn generate_runs_ring_collectives_on_tori_and_folds_around_a_failed_cable() {
    let out = tmp("folded-allreduce.json");
    for (torus, fail, algorithm, kind) in
        [("6", "2-3", "foldedring", "all_reduce"), ("4x4", "(0,0)-(1,0)", "foldedring", "all_gather"), ("5", "0-1", "foldedring", "reduce_scatter")]
    {
        let o = run(&["generate", "--torus", torus, "--fail", fail, "--algorithm", algorithm, "--collective", kind, "-o", s(&out)]);
        assert_eq!(o.status.code(), Some(0), "{torus} {algorithm} {kind}: {}", text(&o));
        let o = run(&["verify", s(&out)]);
        assert_eq!(o.status.code(), Some(0), "{torus} {algorithm} {kind}: {}", text(&o));
        assert!(text(&o).contains(&format!("valid: {kind}")), "{}", text(&o));
    }
    let _ = std::fs::remove_file(&out);
    let o = run(&[
        "generate",
        "--torus",
        "6x3",
        "--fail",
        "(0,0)-(1,0)",
        "--fail",
        "(3,0)-(4,0)",
        "--algorithm",
        "foldedring",
        "--collective",
        "all_gather",
        "-o",
        s(&out),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("2 failed cables"), "{}", text(&o));
    let o = run(&["generate", "--torus", "4x4", "--algorithm", "halfring", "--scheduler", "dimrotation", "--collective", "all_gather", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("method.generate.scheduler"), "{}", text(&o));
    assert!(!out.exists());
}

#[test]
fn every_subcommand_reports_its_error_paths() {
    let missing = tmp("absent.json");
    let out = tmp("errors-out.json");
    let _ = std::fs::remove_file(&out);
    // (arguments, exit code, what the message must name)
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["generate", "--torus", "4x0", "--algorithm", "halfring", "-o", s(&out)], 2, "dims[1] = 0"),
        (vec!["generate", "--torus", "4", "--fail", "0-1", "--fail", "1-2", "--algorithm", "halfring", "-o", s(&out)], 3, "is cut off"),
        (vec!["bound", s(&missing)], 2, "absent.json: cannot read"),
        (vec!["bound", "--torus", "4", "--fail", "0-1", "--fail", "1-2"], 3, "is cut off"),
        (vec!["bound", s(&missing), "--torus", "4"], 2, "not both"),
        (vec!["synthesize", "--torus", "4", "--solver", "gurobi", "-o", s(&out)], 2, "'gurobi' for '--solver"),
        #[cfg(not(feature = "smt"))]
        (vec!["synthesize", "--torus", "4", "--solver", "smt", "-o", s(&out)], 2, "--features smt"),
        #[cfg(not(feature = "highs"))]
        (vec!["synthesize", "--torus", "4", "--solver", "highs", "-o", s(&out)], 2, "--features highs"),
        (vec!["cost", s(&missing)], 2, "absent.json: cannot read"),
        (vec!["export", s(&missing), "--to", "msccl-xml", "-o", s(&out)], 2, "absent.json: cannot read"),
        (vec!["eval", "--tori", "4xq", "--out", s(&out)], 2, "`4xq`"),
        (vec!["proof", "check", s(&missing)], 2, "absent.json"),
    ];
    for (args, code, says) in cases {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
        assert!(!out.exists(), "{args:?} left {} behind", out.display());
    }
    let (schedule, _) = ring_schedule("errors");
    let o = run(&["export", s(&schedule), "--to", "bogus", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--to bogus"), "{}", text(&o));
    // A time limit too short for the search: the best schedule so far is written, with its gap.
    let o = run(&["synthesize", "--torus", "6x6x6", "--fail", "(0,0,0)-(1,0,0)", "--time-limit", "1", "-o", s(&out), "--json"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["limit_reached"], true, "{v}");
    assert!(v["gap_to_certified_bound"].as_f64().unwrap() > 0.0, "{v}");
    let o = run(&["verify", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A limit that cuts a search short does not matter when the answer meets the certified
    // bound: a ring of 3 is bandwidth-optimal in one step.
    let o = run(&["synthesize", "--torus", "3", "--time-limit", "0.001", "-o", s(&out), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["limit_reached"].as_bool(), v["gap_to_certified_bound"].as_f64()), (Some(false), Some(0.0)), "{v}");
}

#[test]
fn bound_builds_a_spec_from_flags_and_certifies_it() {
    let dir = tmp("bound-flags");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cert = dir.join("pod.cert.json");
    let o = run(&["bound", "--torus", "4x4", "--fail", "(0,0)-(1,0)", "--bytes", "8MiB", "--certificate", s(&cert), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(dir.join("pod.spec.json").exists());
    let o = run(&["proof", "check", s(&cert)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The written spec is the one certified: changing it breaks the certificate.
    let spec = std::fs::read_to_string(dir.join("pod.spec.json")).unwrap();
    assert!(spec.contains("\"8MiB\""), "{spec}");
    std::fs::write(dir.join("pod.spec.json"), spec.replace("\"8MiB\"", "\"4MiB\"")).unwrap();
    let o = run(&["proof", "check", s(&cert)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn verify_reads_msccl_xml() {
    let out = tmp("xmlv.json");
    let o = run(&["generate", "--torus", "4", "--algorithm", "halfring", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dir = tmp("xmlv");
    let o = run(&["export", s(&out), "--to", "msccl-xml", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let xml = dir.join("xmlv.xml");
    let o = run(&["verify", s(&xml)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("valid:"), "{}", text(&o));
    // A send whose receive was deleted: the runtime would hang or lose data.
    let body = std::fs::read_to_string(&xml).unwrap();
    let at = body.find("type=\"r\"").unwrap();
    let start = body[..at].rfind("<step").unwrap();
    let end = at + body[at..].find("/>").unwrap() + 2;
    std::fs::write(&xml, format!("{}{}", &body[..start], &body[end..])).unwrap();
    let o = run(&["verify", s(&xml)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("INVALID"), "{}", text(&o));
}

/// Two gpus exchange their all-to-all blocks of `p` chunks, each threadblock sending first
/// (`send_first`) or receiving first, as MSCCLang writes such a program; in the executor's
/// dialect or the older runtime's.
fn exchange_xml(p: usize, send_first: bool, executor: bool) -> String {
    let selection = if executor { r#" outofplace="1" minBytes="0" maxBytes="0""# } else { "" };
    let mut x = format!(r#"<algo name="exchange" proto="Simple" nchannels="1" nchunksperloop="{}" ngpus="2" coll="alltoall" inplace="0"{selection}>"#, 2 * p);
    for g in 0..2 {
        let other = 1 - g;
        let send = format!(r#"type="s" srcbuf="i" srcoff="{}" dstbuf="o" dstoff="{}""#, other * p, g * p);
        let recv = format!(r#"type="r" srcbuf="i" srcoff="{}" dstbuf="o" dstoff="{}""#, g * p, other * p);
        let (first, second) = if send_first { (send, recv) } else { (recv, send) };
        x += &format!("\n  <gpu id=\"{g}\" i_chunks=\"{}\" o_chunks=\"{}\" s_chunks=\"0\">", 2 * p, 2 * p);
        x += &format!("\n    <tb id=\"0\" send=\"{other}\" recv=\"{other}\" chan=\"0\">");
        for (s, body) in [first, second].iter().enumerate() {
            x += &format!("\n      <step s=\"{s}\" {body} cnt=\"{p}\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />");
        }
        x += "\n    </tb>\n    <tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\">";
        x += &format!(
            "\n      <step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"{0}\" dstbuf=\"o\" dstoff=\"{0}\" cnt=\"{p}\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />",
            g * p
        );
        x += "\n    </tb>\n  </gpu>";
    }
    x + "\n</algo>"
}

fn verify_xml_file(name: &str, xml: &str, extra: &[&str]) -> Output {
    let path = tmp(name);
    std::fs::write(&path, xml).unwrap();
    let mut args = vec!["verify", s(&path)];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn verify_xml_accepts_what_runs_on_the_runtime_buffering() {
    for (executor, runtime) in [(true, "judged for msccl-executor-nccl"), (false, "judged for the older MSCCL runtime")] {
        let o = verify_xml_file(&format!("exchange1-{executor}.xml"), &exchange_xml(1, true, executor), &[]);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(0), "{out}");
        assert!(out.starts_with(runtime), "{out}");
        assert!(out.contains("under the runtime's buffering (8 slots per connection, 4 slots per chunk with proto Simple)"), "{out}");
        assert!(out.contains("out-of-place: runs to its end (6 steps); every chunk ends where alltoall wants it"), "{out}");
        assert!(out.contains("out-of-place: relies on buffering: deadlock under rendezvous"), "{out}");
        assert!(
            out.contains("  gpu 0 tb 0 step 0 (s, 1 chunk to gpu 1 on channel 0) waits for gpu 1 tb 0 to receive it; gpu 1 tb 0 is at its step 0 (s, 1 chunk to gpu 0 on channel 0)"),
            "{out}"
        );
        assert!(out.contains("imported as 1 steps, 2 transfers over 2 ranks"), "{out}");
        assert!(out.trim_end().ends_with("relies on the runtime's buffering; deadlocks under rendezvous)"), "{out}");
        // The strict answer.
        let o = verify_xml_file(&format!("exchange1-{executor}.xml"), &exchange_xml(1, true, executor), &["--rendezvous"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("rule 6 deadlock freedom (out-of-place): deadlock under rendezvous"), "{}", text(&o));
    }
    // The older dialect is also told what the current reader would say.
    let o = verify_xml_file("exchange1-legacy.xml", &exchange_xml(1, true, false), &[]);
    assert!(text(&o).contains("note: msccl-executor-nccl would refuse this file: line 1: <algo> lacks the attribute minBytes (and 2 more)"), "{}", text(&o));
}

/// In place, a collective whose aliasing is not modelled (broadcast, custom) is run with separate
/// buffers for deadlock freedom, and reported as out of place is; a deadlock is still found.
#[test]
fn in_place_runs_of_other_collectives_are_run_for_deadlock_freedom() {
    let legacy = exchange_xml(1, true, false);
    for coll in ["broadcast", "custom"] {
        let xml = legacy.replacen(r#"coll="alltoall" inplace="0""#, &format!(r#"coll="{coll}" inplace="1""#), 1);
        let o = verify_xml_file(&format!("ip-{coll}.xml"), &xml, &[]);
        assert_eq!(o.status.code(), Some(0), "{coll}: {}", text(&o));
        assert!(text(&o).contains("in-place: runs to its end") && text(&o).contains("for deadlock freedom only"), "{coll}: {}", text(&o));
        assert!(!text(&o).contains("not run"), "{coll}: {}", text(&o));
        let o = verify_xml_file(
            &format!("ip-{coll}-recv-first.xml"),
            &exchange_xml(1, false, false).replacen(r#"coll="alltoall" inplace="0""#, &format!(r#"coll="{coll}" inplace="1""#), 1),
            &[],
        );
        assert_eq!(o.status.code(), Some(1), "{coll}: {}", text(&o));
        assert!(text(&o).contains("rule 6 deadlock freedom (in-place)"), "{coll}: {}", text(&o));
    }
}

/// ASTRA-sim networks that are not tori take the switched algorithms wherever every pair of
/// ranks is joined by a direct link or through switches; one message says what runs where.
#[test]
fn switched_algorithms_on_astra_networks_without_switches() {
    let net = |name: &str, text: &str| {
        std::fs::write(tmp(name), text).unwrap();
    };
    net("fc.yml", "topology: [ FullyConnected ]\nnpus_count: [ 8 ]\nbandwidth: [ 56.0 ]\nlatency: [ 500.0 ]\n");
    net("rfs.yml", "topology: [ Ring, FullyConnected, Switch ]\nnpus_count: [ 2, 2, 2 ]\nbandwidth: [ 56.0, 28.0, 14.0 ]\nlatency: [ 500.0, 500.0, 500.0 ]\n");
    let spec = |network: &str, algorithm: &str| {
        let path = tmp(&format!("{network}-{algorithm}.spec.json"));
        let body = format!(
            r#"{{"topology": {{"astra_network": "{network}.yml"}}, "collective": {{"kind": "all_to_all", "bytes_per_rank": 65536}}, "method": {{"generate": {{"algorithm": "{algorithm}"}}}}}}"#
        );
        std::fs::write(&path, body).unwrap();
        path
    };
    let out = tmp("fc-out.json");
    for algorithm in ["pairwise", "bruck"] {
        let o = run(&["generate", s(&spec("fc", algorithm)), "-o", s(&out)]);
        assert_eq!(o.status.code(), Some(0), "{algorithm}: {}", text(&o));
    }
    let o = run(&["generate", s(&spec("fc", "halfring")), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("is not a torus") && text(&o).contains("pairwise, bruck"), "{}", text(&o));
    let o = run(&["generate", s(&spec("rfs", "bruck")), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("over a direct link or through switches") && text(&o).contains("never through other npus"), "{}", text(&o));
}

/// A file that cannot be read as an MSCCL program is unreadable (exit 2, naming the file, the
/// line and the attribute); one that reads but breaks a reader rule fails (exit 1).
#[test]
fn unreadable_xml_exits_2_and_rule_breaking_xml_exits_1() {
    let good = exchange_xml(1, true, true);
    assert_eq!(verify_xml_file("readable.xml", &good, &[]).status.code(), Some(0));
    let step = good.lines().position(|l| l.contains("<step")).unwrap() + 1;
    let algo = good.lines().position(|l| l.contains("<algo")).unwrap() + 1;
    let cases = [
        ("u-empty.xml", String::new(), "no <algo> element".to_string()),
        ("u-trunc.xml", "<algo".to_string(), "line 1: not well-formed XML".to_string()),
        ("u-hasdep.xml", good.replacen(r#" hasdep="0""#, "", 1), format!("line {step}: gpu 0 tb 0 step 0: lacks the attribute hasdep")),
        ("u-type.xml", good.replacen(r#"type="s""#, r#"type="ra""#, 1), format!("line {step}: gpu 0 tb 0 step 0: type=\"ra\" is not a step type")),
        (
            "u-srcbuf.xml",
            good.replacen(r#"srcbuf="i""#, r#"srcbuf="x""#, 1),
            format!("line {step}: gpu 0 tb 0 step 0: srcbuf=\"x\" is not a buffer (i, o or s)"),
        ),
        (
            "u-dstbuf.xml",
            good.replacen(r#"dstbuf="o""#, r#"dstbuf="q""#, 1),
            format!("line {step}: gpu 0 tb 0 step 0: dstbuf=\"q\" is not a buffer (i, o or s)"),
        ),
        ("u-proto.xml", good.replacen(r#" proto="Simple""#, "", 1), format!("line {algo}: <algo> lacks the attribute proto")),
        ("u-minbytes.xml", good.replacen(r#" minBytes="0""#, "", 1), format!("line {algo}: <algo> lacks the attribute minBytes")),
    ];
    for (name, xml, why) in cases {
        let o = verify_xml_file(name, &xml, &[]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", text(&o));
        assert!(text(&o).contains(name) && text(&o).contains("cannot be read as an MSCCL program") && text(&o).contains(&why), "{name}: {}", text(&o));
    }
    // Readable, but a threadblock on a channel the algorithm does not have: a rule fails.
    let o = verify_xml_file("u-chan.xml", &good.replacen(r#"chan="0""#, r#"chan="3""#, 1), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

/// Under LL and LL128 a chunk is one slot of the runtime's FIFO (four under Simple): two gpus that
/// each send 3 chunks to the other and then receive run under LL and hang under Simple (12 slots
/// > 8); 8 chunks each way under LL run, 9 hang. The report says the slots per chunk and why.
#[test]
fn verify_xml_sizes_chunks_in_slots_by_the_protocol() {
    let ll = |p: usize| exchange_xml(p, true, true).replacen(r#"proto="Simple""#, r#"proto="LL""#, 1);
    for (name, xml, code) in [("simple3.xml", exchange_xml(3, true, true), 1), ("ll3.xml", ll(3), 0), ("ll8.xml", ll(8), 0), ("ll9.xml", ll(9), 1)] {
        let o = verify_xml_file(name, &xml, &[]);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(code), "{name}: {out}");
        let model = if name.starts_with("simple") { "4 slots per chunk with proto Simple" } else { "1 slot per chunk with proto LL" };
        assert!(out.contains(&format!("under the runtime's buffering (8 slots per connection, {model})")), "{name}: {out}");
        assert_eq!(out.contains("rule 6 deadlock freedom (out-of-place): deadlock"), code == 1, "{name}: {out}");
    }
    let o = verify_xml_file("ll1-rendezvous.xml", &ll(1), &["--rendezvous"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("deadlock under rendezvous"), "{}", text(&o));
}

/// NCCL's tokenizer fails on the first byte of a file that begins with a byte-order mark: a
/// reader rule at line 1 (exit 1). It was blamed on the last line's plain `</algo>`.
#[test]
fn verify_xml_refuses_a_byte_order_mark_at_line_1() {
    let good = exchange_xml(1, true, true);
    let o = verify_xml_file("bom.xml", &format!("\u{feff}{good}"), &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("MSCCL reader rule: line 1: a byte-order mark before `<algo>`, which the runtime's XML reader cannot parse"), "{out}");
    assert!(!out.contains("</algo>"), "{out}");
    // A stray byte before the root element is text outside it, which XML does not allow.
    let o = verify_xml_file("stray.xml", &format!("x{good}"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("line 1: not well-formed XML: text outside the root element"), "{}", text(&o));
    // What only NCCL's tokenizer fails on in well-formed XML is a reader rule too (exit 1, not
    // unreadable), reported with the file's other reader rules.
    let quoted = good.replacen(r#"ngpus="2""#, "ngpus='2'", 1);
    for (name, xml, why) in [
        ("decl.xml", format!("<?xml version=\"1.0\"?>\n{good}"), "line 1: an XML declaration"),
        ("quote.xml", quoted, "<algo>: a single-quoted attribute value"),
        ("close.xml", good.replacen("</tb>", "</tb >", 1), "the closing tag </tb> with white space"),
    ] {
        let o = verify_xml_file(name, &xml, &[]);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {out}");
        assert!(out.lines().any(|l| l.starts_with("MSCCL reader rule: ") && l.contains(why)), "{name}: {out}");
        assert!(!out.contains("cannot be read as an MSCCL program"), "{name}: {out}");
    }
}

#[test]
fn verify_xml_rejects_overflowing_and_receive_first_exchanges_with_the_cycle() {
    let o = verify_xml_file("exchange3.xml", &exchange_xml(3, true, true), &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("rule 6 deadlock freedom (out-of-place): deadlock under the runtime's buffering (8 slots per connection, 4 slots per chunk with proto Simple): 2 threadblocks wait on each other in a cycle:"), "{out}");
    for g in 0..2 {
        let line = format!(
            "  gpu {g} tb 0 step 0 (s, 3 chunks to gpu {o} on channel 0) has written 8 of its 12 slots and the 8 slots of its connection are full: it waits for gpu {o} tb 0 to receive, which is at its step 0 (s, 3 chunks to gpu {g} on channel 0)",
            o = 1 - g
        );
        assert!(out.contains(&line), "{line}\n{out}");
    }
    assert!(out.trim_end().ends_with("(msccl-executor-nccl; under the runtime's buffering)"), "{out}");
    let o = verify_xml_file("receive-first.xml", &exchange_xml(1, false, false), &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("  gpu 0 tb 0 step 0 (r, 1 chunk from gpu 1 on channel 0) waits for gpu 1 tb 0 to send it; gpu 1 tb 0 is at its step 0 (r, 1 chunk from gpu 0 on channel 0)"), "{out}");
    assert!(out.contains("  gpu 1 tb 0 step 0 (r, 1 chunk from gpu 0 on channel 0) waits for gpu 0 tb 0 to send it"), "{out}");
}

/// `expect.deadlock_free = false` on an MSCCL XML file: the exchange that overflows its
/// connection's slots deadlocks as expected (exit 0, the cycle a note); the one that fits fails
/// rule 8.
#[test]
fn verify_xml_asserts_an_expected_deadlock() {
    let spec = tmp("exchange-deadlock.spec.json");
    std::fs::write(
        &spec,
        r#"{"topology": {"torus": {"dims": [2], "bandwidth_gbps": 1.0, "latency_ns": 10.0}}, "collective": {"kind": "all_to_all", "bytes_per_rank": 8000}, "expect": {"deadlock_free": false}}"#,
    )
    .unwrap();
    let o = verify_xml_file("exchange3-expected.xml", &exchange_xml(3, true, true), &["--spec", s(&spec)]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("rule 6 deadlock freedom (out-of-place), as expect.deadlock_free = false expects: deadlock under the runtime's buffering"), "{out}");
    assert!(out.contains("valid: "), "{out}");
    let o = verify_xml_file("exchange1-expected.xml", &exchange_xml(1, true, true), &["--spec", s(&spec)]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("rule 8 bound conformance: expect.deadlock_free = false, but every placement runs to its end"), "{out}");
}

#[test]
fn verify_xml_runs_in_place_rings_in_both_dialects() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/msccl");
    for (file, coll, steps) in [
        ("allreduce_ring_inplace.xml", "allreduce", 6),
        ("allreduce_ring_inplace.executor.xml", "allreduce", 6),
        ("allgather_ring_inplace.xml", "allgather", 3),
        ("allgather_ring_inplace.executor.xml", "allgather", 3),
    ] {
        let path = data.join(file);
        let o = run(&["verify", s(&path)]);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(0), "{file}: {out}");
        assert!(out.contains(&format!("every chunk ends where {coll} wants it")) && out.contains("in-place: runs to its end"), "{file}: {out}");
        assert!(out.contains("in-place: relies on buffering"), "{file}: {out}");
        assert!(out.contains(&format!("imported as {steps} steps")), "{file}: {out}");
        let o = run(&["verify", s(&path), "--rendezvous", "--json"]);
        assert_eq!(o.status.code(), Some(1), "{file}: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["valid"], false);
        assert!(v["failures"][0].as_str().unwrap().starts_with("rule 6 deadlock freedom (in-place): deadlock under rendezvous"), "{v}");
    }
}

#[test]
fn exported_xml_passes_the_strict_check() {
    let out = tmp("xmlstrict.json");
    let o = run(&["generate", "--torus", "3x3", "--algorithm", "halfring", "--scheduler", "dimrotation", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dir = tmp("xmlstrict");
    for (legacy, runtime) in [(false, "msccl-executor-nccl"), (true, "the older MSCCL runtime")] {
        let mut args = vec!["export", s(&out), "--to", "msccl-xml", "-o", s(&dir)];
        if legacy {
            args.push("--legacy");
        }
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(text(&o).contains(&format!("for {runtime}; its reader rules pass; rule 6 holds: under rendezvous (no buffering)")), "{}", text(&o));
        assert!(text(&o).contains("so it runs with any buffer size"), "{}", text(&o));
        let o = run(&["verify", s(&dir.join("xmlstrict.xml")), "--rendezvous"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(text(&o).contains(&format!("judged for {runtime}")) && text(&o).contains("under rendezvous, so with any buffer size"), "{}", text(&o));
    }
    let o = run(&["verify", s(&out), "--rendezvous"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// What a progress bar or spinner would leave in a stream: carriage returns, escape sequences,
/// and the glyphs of indicatif's bars (block elements, braille spinners, our `[==>  ]`).
fn progress_drawing(stream: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stream);
    let glyph = |c: char| matches!(c, '\r' | '\x1b' | '\u{2580}'..='\u{259f}' | '\u{2800}'..='\u{28ff}');
    (text.chars().any(glyph) || text.contains("=>") || text.contains("[=")).then(|| format!("{text:?}"))
}

#[test]
fn no_progress_bars_off_a_terminal() {
    // The tests run the binary with stderr piped: eval and verify must draw nothing there.
    let dir = tmp("eval-quiet");
    let o = run(&["eval", "--tori", "3x3,4", "--fat-trees", "--out", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(progress_drawing(&o.stderr), None);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.lines().count() == 2 && err.lines().all(|l| l.starts_with("wrote ")), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("2L-k16-osr1"));

    // A schedule file large enough that verify shows a bar on a terminal.
    let big = tmp("big.json");
    let o = run(&["generate", "--torus", "10x10", "--algorithm", "halfring", "--scheduler", "dimrotation", "-o", s(&big)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(std::fs::metadata(&big).unwrap().len() >= 1 << 20, "the file must be large enough to get a bar on a terminal");
    let o = run(&["verify", s(&big)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(o.stderr.is_empty(), "{:?}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(progress_drawing(&o.stdout), None);
}

#[test]
fn a_relay_at_an_npu_outside_the_group_is_rejected_and_routing_through_it_is_single_hop() {
    use collsched::NodeId;
    use collsched::PieceId;
    use collsched::{Op, Schedule, ScheduleHeader, Step, Transfer};
    // A ring of 4 npus; the all-to-all runs over npus 0 and 2 only.
    let t = torus(&TorusParams::uniform(&[4], 32.0, 100.0)).unwrap();
    let c = Collective::new(CollectiveKind::AllToAll, vec![NodeId(0), NodeId(2)], 6000, 1, None, &t).unwrap();
    let l = |a: u32, b: u32| t.link_between(NodeId(a), NodeId(b)).unwrap();
    let header = ScheduleHeader { topology: t.clone(), collective: c, meta: None };
    // Routed through npu 1 (and 3 the other way) in one step: valid, and single-hop.
    let routed = Schedule {
        header: header.clone(),
        steps: vec![Step {
            transfers: vec![
                Transfer { path: vec![l(0, 1), l(1, 2)], op: Op::Copy, pieces: vec![PieceId::a2a(0, 1, 0)] },
                Transfer { path: vec![l(2, 3), l(3, 0)], op: Op::Copy, pieces: vec![PieceId::a2a(1, 0, 0)] },
            ],
        }],
    };
    let path = tmp("group-routed.json");
    write_schedule_file(&path, &routed).unwrap();
    let o = run(&["verify", s(&path), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["stats"]["single_hop_transfers"], 2, "{v}");
    // Stored at npu 1 and forwarded a step later: npu 1 runs no program.
    let relayed = Schedule {
        header,
        steps: vec![
            Step {
                transfers: vec![
                    Transfer::hop(l(0, 1), Op::Copy, vec![PieceId::a2a(0, 1, 0)]),
                    Transfer { path: vec![l(2, 3), l(3, 0)], op: Op::Copy, pieces: vec![PieceId::a2a(1, 0, 0)] },
                ],
            },
            Step { transfers: vec![Transfer::hop(l(1, 2), Op::Copy, vec![PieceId::a2a(0, 1, 0)])] },
        ],
    };
    let path = tmp("group-relayed.json");
    write_schedule_file(&path, &relayed).unwrap();
    let o = run(&["verify", s(&path)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("step 0, transfer 0: rule 1 structure: the path ends at node 1 (1), an npu outside the collective's ranks"), "{out}");
    assert!(out.contains("step 1, transfer 0: rule 1 structure: the path starts at node 1 (1), an npu outside"), "{out}");
    assert!(out.contains("a runtime runs no program on it"), "{out}");
    assert!(out.contains("rule 6 deadlock freedom: cannot lower the schedule: the path ends at node 1"), "{out}");
}

#[test]
fn zst_schedule_files_are_the_same_json_compressed() {
    let plain = tmp("zst-src.json");
    let packed = tmp("zst-src.json.zst");
    for out in [&plain, &packed] {
        let o = run(&["generate", "--torus", "4x4", "--algorithm", "halfring", "--scheduler", "dimrotation", "-o", s(out)]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    let stored = std::fs::read(&packed).unwrap();
    assert_eq!(&stored[..4], &[0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
    assert_eq!(zstd::decode_all(&stored[..]).unwrap(), std::fs::read(&plain).unwrap());
    for args in [vec!["verify"], vec!["cost"], vec!["cost", "--model", "event"]] {
        let outs: Vec<String> = [&plain, &packed]
            .iter()
            .map(|f| {
                let o = run(&[args.clone(), vec![s(f)]].concat());
                assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
                String::from_utf8_lossy(&o.stdout).into_owned()
            })
            .collect();
        assert_eq!(outs[0], outs[1], "{args:?}");
    }
    let dir = tmp("zst-xml");
    let o = run(&["export", s(&packed), "--to", "msccl-xml", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(dir.join("zst-src.xml").exists());
    // Plain bytes under a .zst name: an error naming the file (exit 2), no panic.
    let bad = tmp("notzst.json.zst");
    std::fs::copy(&plain, &bad).unwrap();
    let o = run(&["verify", s(&bad)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("notzst.json.zst"), "{}", text(&o));
}

fn msccl_data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/msccl").join(file)
}

fn spec_data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/specs").join(file)
}

#[test]
fn verify_xml_holds_the_file_to_the_spec() {
    let xml = msccl_data("ag_ring_legacy_inplace.xml");
    // Another collective, or another number of ranks: exit 2, as for the JSON formats.
    for (spec, want) in [("spec_t4_all_reduce.json", "(all_reduce over 4 ranks)"), ("spec_t44.json", "(all_to_all over 16 ranks)")] {
        let o = run(&["verify", s(&xml), "--spec", s(&spec_data(spec))]);
        assert_eq!(o.status.code(), Some(2), "{spec}: {}", text(&o));
        assert!(text(&o).contains("the file's collective (coll=\"allgather\" over ngpus=\"4\") is not the spec's") && text(&o).contains(want), "{}", text(&o));
    }
    // Pieces per block, when the spec fixes them: the file has 4 chunks over 4 gpus, 1 per block.
    let pieces = tmp("ag4_pieces2.spec.json");
    std::fs::write(
        &pieces,
        r#"{"topology": {"torus": {"dims": [4], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}, "collective": {"kind": "all_gather", "bytes_per_rank": "4KiB", "pieces": 2}}"#,
    )
    .unwrap();
    let o = run(&["verify", s(&xml), "--spec", s(&pieces)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("the file cuts blocks into 1 pieces (nchunksperloop=\"4\" over ngpus=\"4\"), the spec into 2"), "{}", text(&o));
    // The spec's expect is asserted on the import.
    let o = run(&["verify", s(&xml), "--spec", s(&spec_data("spec_t4_ag_maxsteps1.json"))]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("rule 8 bound conformance: expect.max_steps = 1: the schedule has 3 steps"), "{}", text(&o));
    let o = run(&["verify", s(&xml)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// Integers are read as the runtime reads them: strtol, then narrowed to a 32-bit int; the
/// warning says what it reads and the rules judge that.
#[test]
fn verify_xml_refuses_huge_integers_without_panicking() {
    for (file, want) in [
        (
            "xml_srcoff_overflow_panic.xml",
            "srcoff=\"99999999999999999999999\" is not a plain integer: the runtime reads -1 (strtol reads 9223372036854775807, narrowed to a 32-bit int)",
        ),
        ("xml_srcoff_overflow_panic.xml", "srcoff=\"-1\" with cnt=\"1\" is outside the buffer"),
        ("xml_s_chunks_i64max_panic.xml", "gpu 0: s_chunks=\"9223372036854775807\" does not fit a 32-bit int: the runtime reads -1"),
        ("xml_s_chunks_i64max_panic.xml", "gpu 0: s_chunks=\"-1\" is negative"),
        ("xml_s_chunks_2p31_abort.xml", "gpu 0: s_chunks=\"-2147483648\" is negative"),
    ] {
        for extra in [&[][..], &["--rendezvous"][..], &["--json"][..]] {
            let path = msccl_data(file);
            let mut args = vec!["verify", s(&path)];
            args.extend_from_slice(extra);
            let o = run(&args);
            assert_eq!(o.status.code(), Some(1), "{file}: {}", text(&o));
            // (JSON escapes the quotes.)
            assert!(text(&o).replace("\\\"", "\"").contains(want), "{file}: {}", text(&o));
        }
    }
    // LONG_MIN narrows to 0: a file the runtime reads with no scratch, so it runs.
    let o = run(&["verify", s(&msccl_data("xml_strtol_longmin.xml"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("gpu 0: s_chunks=\"-9223372036854775808\" does not fit a 32-bit int: the runtime reads 0"), "{}", text(&o));
    // Values past 2^32 wrap to what the runtime reads: 8 chunks per loop, offset 0, count 1 (before,
    // each failed on the unwrapped value); a 20-digit value is -1, not a positive number.
    let xml = std::fs::read_to_string(msccl_data("allgather_ring_inplace.executor.xml")).unwrap();
    for (from, to, want, code) in [
        (r#"nchunksperloop="4""#, r#"nchunksperloop="4294967300""#, r#"<algo>: nchunksperloop="4294967300" does not fit a 32-bit int: the runtime reads 4"#, 0),
        (r#"srcoff="0""#, r#"srcoff="4294967296""#, r#"srcoff="4294967296" does not fit a 32-bit int: the runtime reads 0"#, 0),
        (r#"cnt="1""#, r#"cnt="4294967297""#, r#"cnt="4294967297" does not fit a 32-bit int: the runtime reads 1"#, 0),
        (r#"nchunksperloop="4""#, r#"nchunksperloop="99999999999999999999""#, r#"<algo>: nchunksperloop="-1" is not a positive number"#, 1),
    ] {
        assert!(xml.contains(from), "{from}");
        let path = tmp("xml-wrap32.xml");
        std::fs::write(&path, xml.replacen(from, to, 1)).unwrap();
        let o = run(&["verify", s(&path)]);
        assert_eq!(o.status.code(), Some(code), "{to}: {}", text(&o));
        assert!(text(&o).contains(want), "{to}: {}", text(&o));
    }
}

/// Under rendezvous a fused step (rrs) whose sender is ready waits on its own send's receiver:
/// the cycle printed for a MSCCLang ring all-reduce is the 4 threadblocks that wait in a ring,
/// each on the next, not a matched pair (gpu 0's s and gpu 1's rrs).
#[test]
fn verify_xml_prints_a_real_rendezvous_cycle_through_fused_steps() {
    let o = run(&["verify", s(&msccl_data("allreduce_a100_ring_4_2_2.xml")), "--rendezvous"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("4 threadblocks wait on each other in a cycle:"), "{out}");
    let lines: Vec<&str> = out.lines().skip_while(|l| !l.contains("wait on each other in a cycle:")).skip(1).take_while(|l| l.starts_with("  gpu ")).collect();
    let tb = |text: &str| -> (u32, u32) {
        let w: Vec<&str> = text.split_whitespace().collect();
        (w[1].parse().unwrap(), w[3].parse().unwrap())
    };
    let members: Vec<(u32, u32)> = lines.iter().map(|l| tb(l.trim_start())).collect();
    assert_eq!(members, [(0, 0), (1, 0), (2, 0), (3, 0)], "{out}");
    for (i, l) in lines.iter().enumerate() {
        let waited = tb(&l[l.find("waits for ").unwrap() + "waits for ".len()..]);
        assert_eq!(waited, members[(i + 1) % members.len()], "{l}");
    }
    assert!(lines[1].contains("gpu 1 tb 0 step 0 (rrs, 1 chunk from gpu 0 to gpu 2 on channel 0) can take what gpu 0 tb 0 is ready to send only as it passes it on: it waits for gpu 2 tb 0 to receive it"), "{out}");
}

#[test]
fn verify_xml_fails_a_legacy_file_never_picked() {
    // The older runtime picks a file for minBytes <= bytes < maxBytes: maxBytes="0" never.
    let o = run(&["verify", s(&msccl_data("xml_legacy_maxbytes0.xml"))]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("maxBytes=\"0\": the runtime never picks this algorithm (the older MSCCL runtime picks it for minBytes <= bytes < maxBytes)"),
        "{}",
        text(&o)
    );
}

/// A read that the run meets after the unordered write it races with: the line still names the
/// writer first (docs/design/FORMATS.md "Data races").
#[test]
fn a_read_after_write_race_names_the_writer_first() {
    let mut xml = String::from(
        r#"<algo name="t" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="alltoall" inplace="0" outofplace="1" minBytes="0" maxBytes="0">"#,
    );
    for g in 0..2 {
        let o = 1 - g;
        xml += &format!(
            r#"
  <gpu id="{g}" i_chunks="2" o_chunks="2" s_chunks="1">
    <tb id="0" send="{o}" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="{o}" dstbuf="o" dstoff="{g}" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="{o}" chan="0">
      <step s="0" type="r" srcbuf="i" srcoff="{g}" dstbuf="o" dstoff="{o}" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="2" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="{g}" dstbuf="o" dstoff="{g}" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="cpy" srcbuf="o" srcoff="{o}" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>"#
        );
    }
    xml += "\n</algo>\n";
    let o = verify_xml_file("race-read-after.xml", &xml, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let races: Vec<&str> = std::str::from_utf8(&o.stdout).unwrap().lines().filter(|l| l.starts_with("data race")).collect();
    assert_eq!(races.len(), 2, "{}", text(&o));
    for line in races {
        assert!(line.ends_with("tb 1 step 0 (r) writes it, unordered with tb 2 step 1 (cpy), which reads it"), "{line}");
    }
}

#[test]
fn verify_xml_finds_write_after_read_races_whatever_the_buffering() {
    let racy = msccl_data("race_war.xml");
    for extra in [&[][..], &["--rendezvous"][..]] {
        let mut args = vec!["verify", s(&racy)];
        args.extend_from_slice(extra);
        let o = run(&args);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(1), "{out}");
        // One line per gpu, naming the chunk and both steps, the writer first.
        for g in 0..3 {
            let line = out.lines().find(|l| l.starts_with(&format!("data race (in-place): gpu {g} buffer s chunk 0: "))).unwrap_or_else(|| panic!("{out}"));
            assert!(line.ends_with("tb 1 step 2 (r) writes it, unordered with tb 0 step 1 (s), which reads it"), "{line}");
        }
        assert!(!out.contains("runs under rendezvous too"), "{out}");
    }
    let fixed = msccl_data("race_fixed.xml");
    let o = run(&["verify", s(&fixed)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("data race"), "{}", text(&o));
}

#[test]
fn verify_xml_imports_a_receive_into_scratch_then_a_local_reduce() {
    let ar = msccl_data("ar2_re.xml");
    let o = run(&["verify", s(&ar)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Reducing a chunk with itself is still caught: gpu 1 reduces its own chunk into i.
    let body = std::fs::read_to_string(&ar).unwrap();
    let wrong = body.replacen(
        r#"<step s="2" type="re" srcbuf="s" srcoff="0" dstbuf="i" dstoff="1""#,
        r#"<step s="2" type="re" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1""#,
        1,
    );
    assert_ne!(wrong, body);
    let o = verify_xml_file("ar2_re_wrong.xml", &wrong, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn export_writes_the_channels_asked_for_or_refuses_them() {
    let out = tmp("xmlchan.json");
    let o = run(&["generate", "--torus", "4", "--algorithm", "halfring", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for c in [1, 2, 3, 8, 32] {
        let dir = tmp(&format!("xmlchan{c}"));
        let o = run(&["export", s(&out), "--to", "msccl-xml", "--channels", &c.to_string(), "-o", s(&dir)]);
        assert_eq!(o.status.code(), Some(0), "{c}: {}", text(&o));
        let noun = if c == 1 { "channel" } else { "channels" };
        assert!(text(&o).contains(&format!("nchannels=\"{c}\" ({c} {noun}")), "{c}: {}", text(&o));
        let xml = std::fs::read_to_string(dir.join("xmlchan.xml")).unwrap();
        assert!(xml.contains(&format!("nchannels=\"{c}\"")), "{c}: {}", &xml[..200.min(xml.len())]);
        let o = run(&["verify", s(&dir.join("xmlchan.xml")), "--rendezvous"]);
        assert_eq!(o.status.code(), Some(0), "{c}: {}", text(&o));
    }
    // The same range for every format that takes the flag, refused before anything is lowered.
    for to in ["msccl-xml", "chakra-et"] {
        for c in ["0", "33", "40", "2147483648"] {
            let dir = tmp(&format!("xmlchan-bad-{to}-{c}"));
            let o = run(&["export", s(&out), "--to", to, "--channels", c, "-o", s(&dir)]);
            assert_eq!(o.status.code(), Some(2), "{to} {c}: {}", text(&o));
            assert!(text(&o).contains(&format!("--channels {c}: expected 1 to 32")) && !text(&o).contains("wrote"), "{to} {c}: {}", text(&o));
            assert!(!dir.exists(), "{to} {c}: nothing is written");
        }
    }
    let dir = tmp("xmlchan-chakra32");
    let o = run(&["export", s(&out), "--to", "chakra-et", "--channels", "32", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// A pairwise all_to_all over 64 ranks has one transfer per pair: its pairs start at channels of
/// their own, so 63 peers spread over 2 channels (all on channel 0 they were 63 receiving
/// threadblocks, and MSCCL's readers take 32). A schedule whose gpus hold more elements than the
/// reader stores is refused after one lowering: more channels only add threadblocks.
#[test]
fn exports_spread_peers_over_channels_and_stop_where_channels_cannot_help() {
    let out = tmp("xml-pairwise64.json");
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/specs/fattree_2L-k8-osr1_pairwise_ep64.json");
    let o = run(&["generate", spec, "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dir = fresh("xml-pairwise64");
    let o = run(&["export", s(&out), "--to", "msccl-xml", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("nchannels=\"2\""), "{}", text(&o));
    let o = run(&["verify", s(&dir.join("xml-pairwise64.xml")), "--rendezvous"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // HalfRing+DimRotation on 4x4x8: 4229 elements on gpu 0 at one channel.
    let big = tmp("xml-too-many.json");
    let o = run(&["generate", "--torus", "4x4x8", "--algorithm", "halfring", "--scheduler", "dimrotation", "-o", s(&big)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dir = fresh("xml-too-many");
    let o = run(&["export", s(&big), "--to", "msccl-xml", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("(1 channel(s); more channels only add threadblocks)") && text(&o).contains("elements for this gpu"), "{}", text(&o));
    assert!(!dir.join("xml-too-many.xml").exists());
}

/// A fresh, empty folder of its own for one test.
fn fresh(name: &str) -> PathBuf {
    let d = tmp(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A repro file of the black-box tests, in tests/data/repro.
fn repro(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/repro").join(name)
}

fn mkfifo(path: &Path) {
    let o = Command::new("mkfifo").arg(path).output().unwrap();
    assert!(o.status.success(), "mkfifo: {}", text(&o));
}

fn is_fifo(path: &Path) -> bool {
    std::os::unix::fs::FileTypeExt::is_fifo(&std::fs::symlink_metadata(path).unwrap().file_type())
}

#[test]
fn outputs_follow_symlinks_and_write_through_fifos() {
    let dir = fresh("special-outputs");
    let spec = repro("ring8_halfring.json");
    let (sched, _) = ring_schedule("special-outputs-src");
    // A symlink stays a link; its target gets the schedule (or the picture).
    std::fs::write(dir.join("target.json"), "{}").unwrap();
    std::os::unix::fs::symlink("target.json", dir.join("link.json")).unwrap();
    std::fs::write(dir.join("target.svg"), "old").unwrap();
    std::os::unix::fs::symlink("target.svg", dir.join("link.svg")).unwrap();
    let o = run(&["generate", s(&spec), "-o", s(&dir.join("link.json"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["cost", s(&sched), "--svg", s(&dir.join("link.svg"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for (link, target, holds) in [("link.json", "target.json", "\"format\": \"collsched.schedule\""), ("link.svg", "target.svg", "<svg")] {
        assert!(std::fs::symlink_metadata(dir.join(link)).unwrap().file_type().is_symlink(), "{link}");
        assert!(std::fs::read_to_string(dir.join(target)).unwrap().contains(holds), "{target}");
    }
    let o = run(&["verify", s(&dir.join("link.json"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A FIFO stays a FIFO, and its reader gets every byte.
    for (name, args) in [("out.json", vec!["generate", s(&spec), "-o"]), ("out.svg", vec!["cost", s(&sched), "--svg"])] {
        let fifo = dir.join(name);
        mkfifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(&fifo).unwrap())
        };
        let o = run(&[&args[..], &[s(&fifo)]].concat());
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o));
        let got = reader.join().unwrap();
        assert!(is_fifo(&fifo), "{name}");
        if name == "out.json" {
            let v: serde_json::Value = serde_json::from_slice(&got).unwrap();
            assert_eq!(v["format"], "collsched.schedule");
        } else {
            assert!(got.starts_with(b"<svg"), "{}", String::from_utf8_lossy(&got));
        }
    }
    // No temporary file left behind anywhere.
    let mut names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["link.json", "link.svg", "out.json", "out.svg", "target.json", "target.svg"]);
}

#[test]
fn every_output_flag_creates_missing_folders_alike() {
    // CLI.md: an output path's missing folders are created, for every command and flag alike.
    let dir = fresh("missing-parents");
    let (sched, _) = ring_schedule("missing-parents-src");
    let spec = repro("ring8_halfring.json");
    let out = dir.join("a/b/x.json");
    let o = run(&["generate", s(&spec), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(out.is_file());
    let svg = dir.join("c/d/x.svg");
    let o = run(&["cost", s(&sched), "--svg", s(&svg)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(svg.is_file());
    // A parent that is a file is a write error (exit 5) for both, with nothing written.
    for (args, what) in [(vec!["generate", s(&spec), "-o"], "x.json"), (vec!["cost", s(&sched), "--svg"], "x.svg")] {
        let under_file = out.join(what);
        let o = run(&[&args[..], &[s(&under_file)]].concat());
        assert_eq!(o.status.code(), Some(5), "{what}: {}", text(&o));
        assert!(!text(&o).contains("wrote"), "{}", text(&o));
    }
}

#[test]
fn a_spec_with_trailing_characters_is_refused() {
    let out = fresh("trailing").join("x.json");
    let spec = repro("spec_trailing_garbage.json");
    for cmd in ["generate", "bound"] {
        let o = if cmd == "bound" { run(&[cmd, s(&spec)]) } else { run(&[cmd, s(&spec), "-o", s(&out)]) };
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", text(&o));
        assert!(text(&o).contains("spec_trailing_garbage.json") && text(&o).contains("trailing characters"), "{cmd}: {}", text(&o));
    }
    assert!(!out.exists());
}

#[test]
fn negative_or_absurd_time_limits_are_refused() {
    let dir = fresh("time-limits");
    let out = dir.join("x.json");
    let spec = repro("spec_time_limit_negative.json");
    for cmd in ["synthesize", "generate", "bound"] {
        let o = if cmd == "bound" { run(&[cmd, s(&spec)]) } else { run(&[cmd, s(&spec), "-o", s(&out)]) };
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", text(&o));
        assert!(
            text(&o).contains("spec_time_limit_negative.json: method.synthesize.time_limit_s = -1: must be a positive number of seconds"),
            "{cmd}: {}",
            text(&o)
        );
    }
    let body = std::fs::read_to_string(&spec).unwrap();
    let huge = dir.join("huge.json");
    std::fs::write(&huge, body.replace("\"time_limit_s\": -1", "\"time_limit_s\": 1e300")).unwrap();
    let o = run(&["synthesize", s(&huge), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("method.synthesize.time_limit_s = 1e300:") && text(&o).contains("must be a positive number of seconds"), "{}", text(&o));
    for flag in ["--time-limit=-1", "--time-limit=1e300", "--time-limit=0"] {
        let o = run(&["synthesize", "--torus", "4", "--bytes", "4KiB", flag, "-o", s(&out)]);
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", text(&o));
        assert!(text(&o).contains("--time-limit = ") && text(&o).contains("must be a positive number of seconds"), "{flag}: {}", text(&o));
        assert!(!text(&o).contains("000000000000"), "the value as written, not in 300 digits: {}", text(&o));
    }
    assert!(!out.exists());
}

#[test]
fn certificates_name_their_files_relative_to_their_folder() {
    let dir = fresh("cert-paths");
    let spec = dir.join("ring8.json");
    std::fs::copy(repro("ring8_halfring.json"), &spec).unwrap();
    let o = run(&["generate", s(&spec), "-o", s(&dir.join("ring8.sched.json"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Run from the folder with bare names, and with the certificate in a subfolder.
    for (cert, spec_name, sched_name) in [("ring8.cert.json", "ring8.json", "ring8.sched.json"), ("certs/r.cert.json", "../ring8.json", "../ring8.sched.json")]
    {
        let o = bin().current_dir(&dir).args(["bound", "ring8.json", "--certificate", cert, "--schedule", "ring8.sched.json"]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{cert}: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join(cert)).unwrap()).unwrap();
        assert_eq!((v["spec"].as_str(), v["schedule"]["file"].as_str()), (Some(spec_name), Some(sched_name)), "{cert}");
    }
    // A copy of the folder checks its own files: the originals are gone.
    let copy = fresh("cert-paths-copy");
    for f in ["ring8.json", "ring8.sched.json", "ring8.cert.json"] {
        std::fs::copy(dir.join(f), copy.join(f)).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let o = run(&["proof", "check", s(&copy.join("ring8.cert.json"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A certificate that names its spec by an absolute path is refused, not followed.
    let cert = copy.join("ring8.cert.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&cert).unwrap()).unwrap();
    v["spec"] = copy.join("ring8.json").to_str().unwrap().into();
    std::fs::write(&cert, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let o = run(&["proof", "check", s(&cert)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("an absolute path"), "{}", text(&o));
}

#[test]
fn proof_check_of_a_folder_checks_only_its_certificates() {
    let dir = fresh("proof-folder");
    let spec = dir.join("ring8.json");
    std::fs::copy(repro("ring8_halfring.json"), &spec).unwrap();
    let sched = dir.join("schedules/ring8.json");
    let o = run(&["generate", s(&spec), "-o", s(&sched)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["bound", s(&spec), "--certificate", s(&dir.join("certificates/ring8.cert.json")), "--schedule", s(&sched)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A certificate by content under another name is checked too; other JSON is passed over.
    std::fs::copy(dir.join("certificates/ring8.cert.json"), dir.join("certificates/copy.json")).unwrap();
    std::fs::write(dir.join("index.json"), "{\"classes\": []}").unwrap();
    let o = run(&["proof", "check", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("2 certificates, 2 hold, 0 fail"), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("passed over 3 files"), "{}", text(&o));
    // A broken file named as a certificate is not passed over: it is unreadable (exit 2).
    std::fs::write(dir.join("certificates/broken.cert.json"), "{}").unwrap();
    let o = run(&["proof", "check", s(&dir)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("3 certificates, 2 hold, 0 fail, 1 unreadable"), "{}", text(&o));
}

#[test]
fn cost_refuses_a_schedule_that_breaks_rule_1() {
    let dir = fresh("cost-oob");
    let sched = repro("sched_link_oob.json");
    let svg = dir.join("x.svg");
    for extra in [vec![], vec!["--model", "event"], vec!["--json"], vec!["--svg", s(&svg)]] {
        let o = run(&[&["cost", s(&sched)][..], &extra[..]].concat());
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", text(&o));
        assert!(text(&o).contains("sched_link_oob.json") && text(&o).contains("rule 1"), "{extra:?}: {}", text(&o));
        assert!(o.stdout.is_empty(), "{extra:?}: {}", text(&o));
    }
    assert!(!svg.exists());
    // export refuses it the same way.
    let o = run(&["export", s(&sched), "--to", "msccl-xml", "-o", s(&dir.join("xml"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// A spec whose collective differs from the schedule's only in the order of its ranks (or in
/// the size): the message names what differs, not two identical descriptions.
#[test]
fn verify_spec_names_what_differs_in_the_collective() {
    let (path, spec) = ring_schedule("spec-rank-order");
    for (from, to, want) in [
        (
            r#""pieces": 1"#,
            r#""pieces": 1, "ranks": [0, 1, 2, 3, 5, 4]"#,
            "ranks[4] is node 4 in the schedule, node 5 in the spec (the same ranks in another order",
        ),
        (r#""pieces": 1"#, r#""pieces": 1, "ranks": [0, 1, 2]"#, "the schedule has 6 ranks, the spec 3"),
        (r#""bytes_per_rank": 6000"#, r#""bytes_per_rank": 6006"#, "the schedule has 6000 bytes per rank, the spec 6006"),
    ] {
        std::fs::write(&spec, RING_SPEC.replace(from, to)).unwrap();
        let o = run(&["verify", s(&path), "--spec", s(&spec)]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(
            text(&o).contains("the schedule's collective (all_to_all over 6 ranks, 6000 bytes per rank) is not the spec's: ") && text(&o).contains(want),
            "{}",
            text(&o)
        );
    }
}

/// `verify --spec` runs a schedule on the spec's network, its failed links down: a schedule
/// made for a failed cable runs on the healthy network, a healthy one fails rule 1 on the link a
/// new fault took down (does the old schedule survive the fault?). A certificate is for one
/// instance: `bound --schedule` refuses a schedule for other failed links (exit 2, the link
/// named), whichever of the two has it down.
#[test]
fn verify_spec_runs_a_schedule_on_the_specs_faults_and_bound_wants_them_equal() {
    let dir = fresh("verify-other-faults");
    let ag = ["--torus", "4", "--collective", "all_gather", "--bytes", "4KiB"];
    // A schedule of the flags and the spec they build.
    let made = |name: &str, flags: &[&str]| -> (PathBuf, PathBuf) {
        let (sched, spec) = (dir.join(format!("{name}.json")), dir.join(format!("{name}.spec.json")));
        let o = run(&[&["generate"], &ag[..], flags, &["-o", s(&sched)]].concat());
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let o = run(&[&["generate"], &ag[..], flags, &["--print-spec"]].concat());
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        std::fs::write(&spec, &o.stdout).unwrap();
        let o = run(&["verify", s(&sched), "--spec", s(&spec)]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        (sched, spec)
    };
    let (h, healthy) = made("h", &["--algorithm", "ring"]);
    let (f, faulty) = made("f", &["--algorithm", "foldedring", "--fail", "0-1"]);
    let o = run(&["verify", s(&f), "--spec", s(&healthy)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["verify", s(&h), "--spec", s(&faulty)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("rule 1 structure: the link is down"), "{}", text(&o));
    for (sched, spec, why) in [(&f, &healthy, "the schedule has it down, the spec up"), (&h, &faulty, "the schedule has it up, the spec down")] {
        let want = format!("link 0: (0)->(1): {why} (a schedule for other faults)");
        let o = run(&["bound", s(spec), "--schedule", s(sched)]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(&want), "{}", text(&o));
    }
}

/// One rank moves nothing: `synthesize` says so, not that the kind has no bound, and prints no
/// percentage above a bound of 0 (a fat tree's event-driven line said `NaN%`).
#[test]
fn synthesize_of_one_rank_says_it_moves_nothing() {
    let dir = fresh("one-rank");
    let torus = r#"{"torus": {"dims": [1], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}"#;
    let fat_tree = r#"{"fat_tree": {"levels": 2, "k": 4, "osr": 1, "npus": 8, "bandwidth_gbps": 32.0, "latency_ns": 100.0}}"#;
    for (i, topology) in [torus, fat_tree].into_iter().enumerate() {
        let spec = dir.join(format!("{i}.spec.json"));
        let body = format!(r#"{{"topology": {topology}, "collective": {{"kind": "all_reduce", "bytes_per_rank": "1MiB", "ranks": [0]}}}}"#);
        std::fs::write(&spec, body).unwrap();
        let o = run(&["synthesize", s(&spec), "-o", s(&dir.join(format!("{i}.json")))]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!text(&o).contains("no certified bandwidth bound") && !text(&o).contains("NaN"), "{}", text(&o));
        assert!(text(&o).contains("one rank moves nothing") || text(&o).contains("there is nothing to move"), "{}", text(&o));
    }
}

#[test]
fn read_errors_name_the_field_and_the_file() {
    let dir = fresh("field-names");
    let (path, _) = ring_schedule("field-names-src");
    let body = std::fs::read_to_string(&path).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&body).unwrap();
    // A negative block size.
    let mut bad = v.clone();
    let n = bad["collective"]["ranks"].as_array().unwrap().len();
    let mut blocks = vec![vec![1000u64; n]; n];
    blocks[0][1] = 77777;
    bad["collective"]["block_bytes"] = serde_json::json!(blocks);
    let text_body = serde_json::to_string(&bad).unwrap().replacen("77777", "-1", 1);
    let file = dir.join("negative.json");
    std::fs::write(&file, text_body).unwrap();
    let o = run(&["verify", s(&file)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("negative.json") && text(&o).contains("field `collective.block_bytes[0][1]`"), "{}", text(&o));
    // A shape whose family does not match the lists: the field is topology.shape.
    v["topology"]["shape"] = serde_json::json!({"torus": {"dims": [7], "wrap": [true]}});
    let file = dir.join("shape.json");
    std::fs::write(&file, serde_json::to_string(&v).unwrap()).unwrap();
    let o = run(&["verify", s(&file)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("shape.json") && text(&o).contains("remove topology.shape") && !text(&o).contains("meta.shape"), "{}", text(&o));
    // A per-dimension value that is neither a number nor a list, in a spec.
    let spec = dir.join("spec.json");
    std::fs::write(&spec, RING_SPEC.replace("\"bandwidth_gbps\": 32.0", "\"bandwidth_gbps\": \"fast\"")).unwrap();
    let o = run(&["bound", s(&spec)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("spec.json: field `topology.torus.bandwidth_gbps`: \"fast\": expected a number, or a list with one number per dimension"),
        "{}",
        text(&o)
    );
}

/// `verify --spec` judges `expect` against the best certified bandwidth bound, as `bound` and
/// `synthesize` report it: on a 4x4 torus whose second dimension runs at 8 GB/s, HalfRing with
/// DimRotation meets the cut bound (2.5x the volume bound, which spreads bytes over all links);
/// and a schedule built for other bandwidths is not the spec's instance (exit 2).
#[test]
fn verify_spec_uses_the_best_certified_bound_and_the_specs_bandwidths() {
    let dir = fresh("verify-best-bound");
    let spec = dir.join("slow.spec.json");
    std::fs::write(
        &spec,
        r#"{"topology": {"torus": {"dims": [4, 4], "bandwidth_gbps": [32.0, 8.0], "latency_ns": 100.0}}, "collective": {"kind": "all_to_all", "bytes_per_rank": "1MiB"},
            "method": {"generate": {"algorithm": "halfring", "scheduler": "dimrotation"}}, "expect": {"bandwidth_optimal": true, "max_gap_pct": 1}}"#,
    )
    .unwrap();
    let out = dir.join("slow.json");
    let o = run(&["generate", s(&spec), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["verify", s(&out), "--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let fast = dir.join("fast.json");
    let o = run(&["generate", "--torus", "4x4", "--algorithm", "halfring", "--scheduler", "dimrotation", "-o", s(&fast)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["verify", s(&fast), "--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("the schedule's 32 GB/s and 100 ns are not the spec's 8 GB/s and 100 ns"), "{}", text(&o));
}

/// `expect.deadlock_free = false` asserts that rules 6 or 7 find a deadlock: a baseline meant to
/// deadlock (dimension-order routing on a ring of 8) then verifies, its deadlock reported, and a
/// deadlock-free schedule fails rule 8.
#[test]
fn expect_deadlock_free_false_asserts_a_deadlock() {
    let dir = fresh("expect-deadlock");
    for (algorithm, contention, code) in [("dor", ", \"allow_contention\": true", 0), ("halfring", "", 1)] {
        let spec = dir.join(format!("{algorithm}.spec.json"));
        std::fs::write(
            &spec,
            format!(
                "{{\"topology\": {{\"torus\": {{\"dims\": [8], \"bandwidth_gbps\": 1.0, \"latency_ns\": 10.0}}}}, \"collective\": {{\"kind\": \"all_to_all\", \"bytes_per_rank\": 8000}}, \"method\": {{\"generate\": {{\"algorithm\": \"{algorithm}\"}}}}, \"expect\": {{\"deadlock_free\": false{contention}}}}}"
            ),
        )
        .unwrap();
        let out = dir.join(format!("{algorithm}.json"));
        let o = run(&["generate", s(&spec), "-o", s(&out)]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let o = run(&["verify", s(&out), "--spec", s(&spec)]);
        assert_eq!(o.status.code(), Some(code), "{algorithm}: {}", text(&o));
        if code == 1 {
            assert!(text(&o).contains("expect.deadlock_free = false, but rules 6 and 7 hold"), "{}", text(&o));
        }
    }
}

/// Bandwidths and latencies: one check for every command (docs/design/MODEL.md section 2), exit
/// 2 naming the file, the field and the value, never a panic, never a partial output file.
#[test]
fn numbers_out_of_range_or_too_precise_exit_2_and_write_nothing() {
    let spec = tmp("ovf.spec.json");
    std::fs::write(
        &spec,
        r#"{"topology":{"torus":{"dims":[3,5],"bandwidth_gbps":[3.3333333333333335,1.4142135623730951],"latency_ns":[0.5,1e-9]}},
            "collective":{"kind":"all_to_all","bytes_per_rank":1048576},"method":{"generate":{"algorithm":"halfring","scheduler":"sequential"}}}"#,
    )
    .unwrap();
    let out = tmp("ovf.out.json");
    let o = run(&["generate", s(&spec), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("ovf.spec.json") && text(&o).contains("bandwidth_gbps[0] = 3.3333333333333335"), "{}", text(&o));
    assert!(!out.exists());

    // Many different denominators: the exact sums outgrow i128; an error, not a panic.
    std::fs::write(
        &spec,
        r#"{"topology":{"torus":{"dims":[3,3,3,3,3],"bandwidth_gbps":[1.23456789,9.87654323,5.55555557,7.77777773,3.14159267],
            "latency_ns":[0.123456789,0.987654323,0.555555557,0.777777773,0.314159267]}},
            "collective":{"kind":"all_to_all","bytes_per_rank":1048573},"method":{"generate":{"algorithm":"halfring","scheduler":"sequential"}}}"#,
    )
    .unwrap();
    let o = run(&["generate", s(&spec), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("128-bit"), "{}", text(&o));
    assert!(!out.exists());
    // The same from a schedule file: every command that costs it names the file.
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/cost/exact_sum_outgrows_i128.json");
    for args in [vec!["verify", file], vec!["cost", file], vec!["cost", file, "--model", "event"]] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("exact_sum_outgrows_i128.json: the exact cost does not fit in 128-bit integers"), "{args:?}: {}", text(&o));
    }

    let cert = tmp("x.cert.json");
    for (flag, value) in [("--bandwidth", "1e38"), ("--bandwidth", "1e-40"), ("--bandwidth", "1e39"), ("--latency", "1e39"), ("--bandwidth", "nan")] {
        let o = run(&["bound", "--torus", "4", flag, value, "--certificate", s(&cert)]);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {}", text(&o));
        assert!(text(&o).contains(flag) && !text(&o).contains("null"), "{}", text(&o));
        assert!(!cert.exists());
    }
    let o = run(&["generate", "--torus", "4", "--algorithm", "halfring", "--latency", "1e38", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!out.exists());

    std::fs::write(&spec, RING_SPEC.replace("32.0", "1e-308")).unwrap();
    let o = run(&["bound", s(&spec)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("ovf.spec.json") && text(&o).contains("bandwidth_gbps") && text(&o).contains("1e-308") && text(&o).len() < 400, "{}", text(&o));
}

/// Sizes are exact integers: no trip through f64, no clamping; bad ones are named.
#[test]
fn byte_sizes_are_exact_and_bad_ones_named() {
    let out = tmp("bytes.out.json");
    let o = run(&["generate", "--torus", "4", "--algorithm", "halfring", "--bytes", "9007199254740993", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(std::fs::read_to_string(&out).unwrap().contains("9007199254740993"));
    for too_big in ["18446744073709551617", "17179869184GiB"] {
        let o = run(&["bound", "--torus", "4", "--bytes", too_big]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(too_big) && text(&o).contains("--bytes"), "{}", text(&o));
    }
    let spec = tmp("bytes.spec.json");
    for bad in ["1.5", "-4"] {
        std::fs::write(&spec, RING_SPEC.replace("6000", bad)).unwrap();
        let o = run(&["bound", s(&spec)]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("bytes.spec.json") && text(&o).contains("collective.bytes_per_rank") && text(&o).contains(bad), "{}", text(&o));
        assert!(!text(&o).contains("untagged"), "{}", text(&o));
    }
    let o = run(&["generate", "--torus", "4x4", "--algorithm", "halfring", "--scheduler", "pipeline", "--chunks", "100000", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("chunks = 100000") && !text(&o).contains("collective.pieces"), "{}", text(&o));
}

/// The two-npu all_to_all schedule file of docs/design/FORMATS.md, with `extra` members (each
/// ending in a comma) before `steps` and `after` members (each starting with one) after it.
fn formats_example(extra: &str, after: &str) -> String {
    format!(
        r#"{{"format": "collsched.schedule", "version": 1,
  "topology": {{"nodes": [{{"id": 0, "kind": "npu", "name": "(0,0)"}}, {{"id": 1, "kind": "npu", "name": "(1,0)"}}],
    "links": [{{"id": 0, "src": 0, "dst": 1, "bandwidth_gbps": 32.0, "latency_ns": 100.0, "up": true}},
              {{"id": 1, "src": 1, "dst": 0, "bandwidth_gbps": 32.0, "latency_ns": 100.0, "up": true}}],
    "switch_latency_ns": 0.0}},
  "collective": {{"kind": "all_to_all", "ranks": [0, 1], "bytes_per_rank": 1048576, "pieces": 1}},
  {extra}
  "steps": [{{"transfers": [{{"path": [0], "op": "copy", "pieces": [[0, 1, 0]]}}, {{"path": [1], "op": "copy", "pieces": [[1, 0, 0]]}}]}}]{after}
}}"#
    )
}

/// The schedule file's `bytes_per_rank` is a JSON integer or a string with a unit, parsed as a
/// spec's; bad ones are named as written.
#[test]
fn schedule_file_sizes_take_units() {
    let path = tmp("bpr.json");
    for (value, bytes) in [("\"4MiB\"", 4u64 << 20), ("\"1.5KiB\"", 1536), ("\"1GB\"", 1_000_000_000), ("18446744073709551615", u64::MAX)] {
        std::fs::write(&path, formats_example("", "").replace("1048576", value)).unwrap();
        let o = run(&["verify", s(&path), "--json"]);
        assert_eq!(o.status.code(), Some(0), "{value}: {}", text(&o));
        assert_eq!(collsched::read_schedule_file(&path).unwrap().header.collective.bytes_per_rank, bytes, "{value}");
    }
    for (value, named) in [
        ("\"17179869184GiB\"", "17179869184GiB` is more than 2^64-1"),
        ("18446744073709551616", "an integer above 2^64-1"),
        ("1.5", "1.5: not a whole number"),
        ("5040.0", "5040.0: not a JSON integer"),
        ("-5", "-5"),
        ("0", "bytes_per_rank = 0"),
        ("\"4XB\"", "unknown size unit"),
    ] {
        std::fs::write(&path, formats_example("", "").replace("1048576", value)).unwrap();
        let o = run(&["verify", s(&path)]);
        assert_eq!(o.status.code(), Some(2), "{value}: {}", text(&o));
        assert!(text(&o).contains("collective.bytes_per_rank") && text(&o).contains(named), "{value}: {}", text(&o));
        assert!(!text(&o).contains("floating point"), "{value}: {}", text(&o));
    }
    // Through zstd as well.
    let zst = tmp("bpr.json.zst");
    let body = formats_example("", "").replace("1048576", "\"4MiB\"");
    std::fs::write(&zst, zstd::encode_all(body.as_bytes(), 3).unwrap()).unwrap();
    let o = run(&["verify", s(&zst)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn meta_shape_is_read_wherever_meta_stands() {
    // A legacy `meta.shape` the lists do not form is refused, before the steps or after them.
    let meta = r#""meta": {"shape": {"torus": {"dims": [3], "wrap": [true]}}}"#;
    for (name, body) in [("meta-first", formats_example(&format!("{meta},"), "")), ("meta-last", formats_example("", &format!(",\n  {meta}")))] {
        let path = tmp(&format!("{name}.json"));
        std::fs::write(&path, body).unwrap();
        let o = run(&["verify", s(&path)]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", text(&o));
        assert!(text(&o).contains("meta.shape"), "{name}: {}", text(&o));
    }
    // Without `meta` the example is valid.
    let plain = tmp("meta-none.json");
    std::fs::write(&plain, formats_example("", "")).unwrap();
    let o = run(&["verify", s(&plain)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A 4x4 torus whose family stands only in a `meta` after the steps keeps its dimensions.
    let written = tmp("meta-last-4x4.json");
    let o = run(&["generate", "--torus", "4x4", "--algorithm", "halfring", "--scheduler", "sequential", "-o", s(&written)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let original = std::fs::read_to_string(&written).unwrap();
    let shape = r#"{"torus":{"dims":[4,4],"wrap":[true,true]}}"#;
    let mut moved = original.replace(&format!(",\n    \"shape\": {shape}"), "");
    let meta_line = moved.lines().find(|l| l.starts_with("  \"meta\": ")).unwrap().to_string();
    moved = moved.replace(&format!("{meta_line}\n"), "");
    let end = moved.rfind('}').unwrap();
    moved.replace_range(end.., &format!(",\n  \"meta\": {{\"shape\": {shape}}}\n}}\n"));
    assert!(moved.len() < original.len() && !moved.contains(",\n    \"shape\"") && moved.contains("\"meta\": {\"shape\""));
    let path = tmp("meta-last-4x4-moved.json");
    std::fs::write(&path, moved).unwrap();
    let o = run(&["cost", s(&path)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("dim0") && text(&o).contains("dim1") && !text(&o).contains("custom"), "{}", text(&o));
}

#[test]
fn proof_check_says_unreadable_certificates_are_bad_input() {
    let (dir, cert) = ring_certificate("proofs-unreadable");
    // Not JSON, and a certificate with a key the format does not have: unreadable (2), named.
    let cut_off = dir.join("cut-off.cert.json");
    std::fs::write(&cut_off, "{\n").unwrap();
    let original = std::fs::read_to_string(&cert).unwrap();
    let extra = dir.join("extra.cert.json");
    std::fs::write(&extra, original.replacen('{', "{\"surprise\": 1, ", 1)).unwrap();
    for bad in [&cut_off, &extra] {
        let o = run(&["proof", "check", s(bad)]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(s(bad)) && text(&o).contains("not a certificate"), "{}", text(&o));
    }
    // A folder: every certificate is reported, and an unreadable one decides the code over one
    // that fails.
    let volume = dir.join("volume.cert.json");
    let v: serde_json::Value = serde_json::from_str(&original).unwrap();
    let claimed = v["claims"].as_array().unwrap().iter().find(|c| c["bound"] == "volume").unwrap()["value"].as_str().unwrap().to_string();
    std::fs::write(&volume, original.replacen(&format!("\"value\": \"{claimed}\""), r#""value": "1000000""#, 1)).unwrap();
    let o = run(&["proof", "check", s(&dir)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("4 certificates, 1 hold, 1 fail, 2 unreadable"), "{}", text(&o));
    std::fs::remove_file(&cut_off).unwrap();
    std::fs::remove_file(&extra).unwrap();
    let o = run(&["proof", "check", s(&dir)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn proof_check_says_a_malformed_claim_or_instance_is_bad_input() {
    let (_, cert) = ring_certificate("proofs-malformed-claim");
    let good: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&cert).unwrap()).unwrap();
    let edits: [fn(&mut serde_json::Value); 3] = [
        |c| drop(c["claims"][0].as_object_mut().unwrap().remove("value")),
        |c| c["claims"][0]["bound"] = "foo".into(),
        |c| drop(c["instance"].as_object_mut().unwrap().remove("links")),
    ];
    for edit in edits {
        let mut c = good.clone();
        edit(&mut c);
        std::fs::write(&cert, c.to_string()).unwrap();
        let o = run(&["proof", "check", s(&cert)]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stdout).starts_with("BAD "), "{}", text(&o));
    }
}

#[test]
fn proof_check_calls_a_certificate_the_format_does_not_describe_bad() {
    // Each defect names its field and where; none is read as a certificate that holds or fails.
    let dir = fresh("proofs-format");
    let cert = certified(&dir, "r4", &["--torus", "4", "--algorithm", "ring", "--collective", "all_gather", "--bytes", "4KiB"]);
    let original = std::fs::read_to_string(&cert).unwrap();
    let good: serde_json::Value = serde_json::from_str(&original).unwrap();
    let at = |bound: &str| good["claims"].as_array().unwrap().iter().position(|c| c["bound"] == bound).unwrap();
    let (cut, steps_cut, steps) = (at("cut"), at("steps_cut"), at("steps"));
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut c = good.clone();
        f(&mut c);
        serde_json::to_string_pretty(&c).unwrap()
    };
    let remove = |c: &mut serde_json::Value, field: &str| drop(c.as_object_mut().unwrap().remove(field));
    let cases: Vec<(String, String)> = vec![
        // An attached schedule without its file or hash: its times would be claims nobody checks.
        (edit(&|c| remove(&mut c["schedule"], "file")), "schedule: missing field `file`".into()),
        (edit(&|c| remove(&mut c["schedule"], "sha256")), "schedule: missing field `sha256`".into()),
        (
            edit(&|c| {
                remove(&mut c["schedule"], "file");
                c["schedule"]["bandwidth_ns"] = c["claims"][cut]["value"].clone();
                c["schedule"]["bandwidth_optimal"] = true.into();
            }),
            "schedule: missing field `file`".into(),
        ),
        // A cut witness that does not say which side it counts.
        (edit(&|c| remove(&mut c["claims"][cut]["witness"], "into")), format!("claim {cut} (cut): missing field `into`")),
        (edit(&|c| remove(&mut c["claims"][steps_cut]["witness"], "into")), format!("claim {steps_cut} (steps_cut): missing field `into`")),
        // A key twice, inside the instance and a claim.
        (original.replacen("\"up\": true", "\"up\": true, \"up\": false", 1), "duplicate key `up` in `instance.links[0]`".into()),
        (original.replacen("\"bound\": \"steps\"", "\"bound\": \"steps\", \"bound\": \"steps\"", 1), format!("duplicate key `bound` in `claims[{steps}]`")),
        // Values that are no rationals, negative, or not a whole number of steps.
        (edit(&|c| c["claims"][cut]["value"] = "1e3".into()), format!("claim {cut} (cut): value: `1e3` is not a rational")),
        (edit(&|c| c["claims"][cut]["value"] = " 5".into()), format!("claim {cut} (cut): value: ` 5` is not a rational")),
        (edit(&|c| c["claims"][cut]["value"] = "-1".into()), format!("claim {cut} (cut): value: `-1` is negative")),
        (edit(&|c| c["claims"][steps]["value"] = "3/2".into()), format!("claim {steps} (steps): value: `3/2` is not a whole number of steps")),
        (edit(&|c| c["spec_sha256"] = "abc".into()), "spec_sha256 = \"abc\": expected 64 hex digits".into()),
        // No spec, or no format.
        (edit(&|c| remove(c, "spec")), "missing field `spec`".into()),
        (edit(&|c| c["spec"] = serde_json::Value::Null), "missing field `spec`".into()),
        (edit(&|c| remove(c, "format")), "missing field `format`".into()),
    ];
    for (text_of, said) in cases {
        std::fs::write(&cert, &text_of).unwrap();
        let o = run(&["proof", "check", s(&cert)]);
        assert_eq!(o.status.code(), Some(2), "{said}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stdout).starts_with("BAD ") && text(&o).contains(&said), "{said}: {}", text(&o));
    }
    std::fs::write(&cert, &original).unwrap();
    let o = run(&["proof", "check", s(&cert)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn certificates_written_through_a_link_name_their_files_from_where_they_land() {
    // `ln -s nodir/t.json sl/dang.json`: the certificate lands in sl/nodir, created for it, and
    // names the spec from there; it checks by either name.
    let dir = fresh("cert-link");
    std::fs::write(dir.join("ring.json"), RING_SPEC).unwrap();
    std::fs::create_dir_all(dir.join("sl")).unwrap();
    std::os::unix::fs::symlink("nodir/t.json", dir.join("sl/dang.json")).unwrap();
    let o = bin().current_dir(&dir).args(["bound", "ring.json", "--certificate", "sl/dang.json"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("sl/nodir/t.json")).unwrap()).unwrap();
    assert_eq!(v["spec"].as_str(), Some("../../ring.json"));
    for name in ["sl/nodir/t.json", "sl/dang.json"] {
        let o = bin().current_dir(&dir).args(["proof", "check", name]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o));
    }
}

/// `generate` with shorthand flags, then `bound` of the same flags certifying it (the spec is
/// written beside the certificate); returns the certificate.
fn certified(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let sched = dir.join(format!("{name}.json"));
    let cert = dir.join(format!("{name}.cert.json"));
    let o = run(&[&["generate"], flags, &["-o", s(&sched)]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&[&["bound"], flags, &["--schedule", s(&sched), "--certificate", s(&cert)]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    cert
}

#[test]
fn proof_check_refuses_a_schedule_of_another_instance() {
    let dir = tmp("proofs-other-instance");
    std::fs::create_dir_all(&dir).unwrap();
    let ag = ["--collective", "all_gather", "--bytes", "4KiB"];
    // Another network: a 2x2 torus schedule in a ring-of-4 certificate, with its own hash and
    // costs, so that only the instance tells them apart.
    let ring = certified(&dir, "r4", &[&["--torus", "4", "--algorithm", "ring"], &ag[..]].concat());
    let torus = certified(&dir, "t22", &[&["--torus", "2x2", "--algorithm", "ring"], &ag[..]].concat());
    // Other faults on the same network: cable 2-3 down instead of 0-1 (the same cost, by symmetry).
    let f01 = certified(&dir, "f01", &[&["--torus", "4", "--fail", "0-1", "--algorithm", "foldedring"], &ag[..]].concat());
    let f23 = certified(&dir, "f23", &[&["--torus", "4", "--fail", "2-3", "--algorithm", "foldedring"], &ag[..]].concat());
    for (cert, other, why) in [(&ring, &torus, "is not the spec's"), (&f01, &f23, "the schedule has it down, the spec up")] {
        let read = |p: &Path| -> serde_json::Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
        let mut c = read(cert);
        let theirs = read(other)["schedule"].clone();
        for field in ["file", "sha256", "bandwidth_ns", "time_ns"] {
            c["schedule"][field] = theirs[field].clone();
        }
        c["schedule"].as_object_mut().unwrap().remove("bandwidth_optimal");
        std::fs::write(cert, c.to_string()).unwrap();
        let o = run(&["proof", "check", s(cert)]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("is not for the certificate's instance") && text(&o).contains(why), "{}", text(&o));
    }
    // `bound` refuses to attach it in the first place.
    let o = run(&[&["bound", "--torus", "4", "--schedule", s(&dir.join("t22.json")), "--certificate", s(&dir.join("x.cert.json"))], &ag[..]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not for the spec's instance"), "{}", text(&o));
}

#[test]
fn a_failed_chakra_export_leaves_no_traces() {
    let sched = tmp("chakra-blocked.json");
    let o = run(&["generate", "--torus", "5", "--algorithm", "halfring", "-o", s(&sched)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dir = tmp("chakra-blocked");
    let _ = std::fs::remove_dir_all(&dir);
    // Rank 3's trace cannot be written (a folder in its place): exit 5, and no other file appears;
    // a file there before stays as it was.
    std::fs::create_dir_all(dir.join("chakra-blocked.3.et")).unwrap();
    std::fs::write(dir.join("chakra-blocked.0.et"), "before").unwrap();
    let o = run(&["export", s(&sched), "--to", "chakra-et", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    let mut left: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["chakra-blocked.0.et", "chakra-blocked.3.et"], "{}", text(&o));
    assert_eq!(std::fs::read_to_string(dir.join("chakra-blocked.0.et")).unwrap(), "before");
    // Unblocked, every file appears.
    std::fs::remove_dir(dir.join("chakra-blocked.3.et")).unwrap();
    let o = run(&["export", s(&sched), "--to", "chakra-et", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 6);
}

/// Sizes near 2^64: the traces' total outgrows int64 (a panic before), and a message that
/// `comm_size` (int64) cannot hold is refused, naming it, with nothing written.
#[test]
fn chakra_export_of_sizes_near_2_64() {
    for (ranks, pieces, code) in [(4, 2, 0), (2, 1, 2)] {
        let t = torus(&TorusParams::uniform(&[ranks], 1.0, 0.0)).unwrap();
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), u64::MAX, pieces, None, &t).unwrap();
        let sched = tmp(&format!("chakra-huge-{ranks}.json"));
        write_schedule_file(&sched, &common::shortest_path_all_to_all(&t, &c)).unwrap();
        let dir = tmp(&format!("chakra-huge-{ranks}"));
        let _ = std::fs::remove_dir_all(&dir);
        let o = run(&["export", s(&sched), "--to", "chakra-et", "-o", s(&dir)]);
        assert_eq!(o.status.code(), Some(code), "{}", text(&o));
        if code == 0 {
            assert_eq!(std::fs::read_dir(&dir).unwrap().count(), ranks + 1);
        } else {
            assert!(text(&o).contains("9223372036854775808 bytes cannot be represented as comm_size (int64"), "{}", text(&o));
            assert_eq!(text(&o).matches(s(&sched)).count(), 1, "the file is named once: {}", text(&o));
            assert!(!dir.exists(), "{}", text(&o));
        }
    }
}

/// The printed totals are exact integers: 12 messages of 2^62 bytes (each 2^62 - 1/4 rounded up)
/// carry 12 x 2^62, the schedule's transfers 3 x (2^64 - 1); they went through f64 before.
#[test]
fn chakra_export_prints_exact_byte_totals() {
    let spec = tmp("chakra-exact.spec.json");
    std::fs::write(
        &spec,
        r#"{"topology": {"torus": {"dims": [4], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}, "collective": {"kind": "all_gather", "bytes_per_rank": 18446744073709551615}, "method": {"generate": {"algorithm": "ring"}}}"#,
    )
    .unwrap();
    let sched = tmp("chakra-exact.json");
    let o = run(&["generate", s(&spec), "-o", s(&sched)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dir = tmp("chakra-exact");
    let _ = std::fs::remove_dir_all(&dir);
    let o = run(&["export", s(&sched), "--to", "chakra-et", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("12 sends carry 55340232221128654848 bytes in all, the schedule's transfers 55340232221128654845, each message rounded up"),
        "{}",
        text(&o)
    );
}

#[test]
fn an_sccl_algorithm_is_recognized_through_zstd() {
    let ring4 = include_str!("data/sccl/ring4_alltoall.msccl.json");
    let plain = tmp("ring4.msccl.json");
    std::fs::write(&plain, ring4).unwrap();
    let packed = tmp("ring4.msccl.json.zst");
    std::fs::write(&packed, zstd::encode_all(ring4.as_bytes(), 1).unwrap()).unwrap();
    let want = text(&run(&["verify", s(&plain)])).replace(s(&plain), "FILE");
    let o = run(&["verify", s(&packed)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(text(&o).replace(s(&packed), "FILE"), want);
}

#[test]
fn a_max_gap_pct_out_of_range_is_refused() {
    let (path, _) = ring_schedule("negative-gap");
    let spec = tmp("negative-gap.spec.json");
    // Negative is a mistake; 1e39 was accepted and then failed rule 8 as "not a usable number"
    // (exit 1) on a schedule 0% above its bound.
    for gap in ["-1", "1e39"] {
        std::fs::write(&spec, RING_SPEC.replace("\"pieces\": 1}", &format!("\"pieces\": 1}},\n  \"expect\": {{\"max_gap_pct\": {gap}}}"))).unwrap();
        for args in [vec!["verify", s(&path), "--spec", s(&spec)], vec!["bound", s(&spec)]] {
            let o = run(&args);
            assert_eq!(o.status.code(), Some(2), "{gap} {args:?}: {}", text(&o));
            assert!(text(&o).contains(&format!("{}: expect.max_gap_pct = {gap}: must be a percentage", s(&spec))), "{}", text(&o));
        }
    }
}

/// A 16-npu fat tree (2 levels, k = 8, no boards) all_to_all at 1 MiB, with `faults`.
fn ft16_spec(name: &str, faults: &str, method: &str) -> PathBuf {
    let spec = tmp(name);
    std::fs::write(
        &spec,
        format!(
            r#"{{"topology": {{"fat_tree": {{"levels": 2, "k": 8, "osr": 1, "npus": 16, "board": null, "bandwidth_gbps": 400, "latency_ns": 25, "switch_latency_ns": 1000}}}}, "faults": {faults}, "collective": {{"kind": "all_to_all", "bytes_per_rank": "1MiB"}}{method}}}"#
        ),
    )
    .unwrap();
    spec
}

#[test]
fn synthesize_on_a_fat_tree_is_never_behind_generate_and_takes_each_objective() {
    for (name, faults) in [("ft16", "{}"), ("ft16f", r#"{"cables": [[16, 20]]}"#)] {
        let spec = ft16_spec(&format!("{name}.spec.json"), faults, "");
        let out = tmp(&format!("{name}-synth.json"));
        // The time objective: no slower, step-synchronously, than the hand-written bruck
        // (FT16: 17.64 us; it wrote 42.81 us when it chose by event-driven time).
        let o = run(&["synthesize", s(&spec), "-o", s(&out), "--json", "--time-limit", "20"]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let synth_ns = v["time_ns"].as_f64().unwrap();
        let gen = ft16_spec(&format!("{name}-bruck.spec.json"), faults, r#", "method": {"generate": {"algorithm": "bruck"}}"#);
        let bruck = tmp(&format!("{name}-bruck.json"));
        let o = run(&["generate", s(&gen), "-o", s(&bruck)]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o));
        let o = run(&["cost", s(&bruck), "--json"]);
        let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(synth_ns <= c["time_ns"].as_f64().unwrap(), "{name}: synthesize {v} against bruck {}", c["time_ns"]);
        // The event objective: the least event-driven time, at most the time objective's.
        let o = run(&["synthesize", s(&spec), "--objective", "event", "-o", s(&out), "--json", "--time-limit", "20"]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o));
        let e: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(e["event_driven_ns"].as_f64().unwrap() <= v["event_driven_ns"].as_f64().unwrap(), "{name}: {e} against {v}");
    }
    // The steps objective: the greedy slotted pairwise's 18 steps (single hops, one piece per
    // block, no link shared) beat the search's 21, and the status line counts them.
    let spec = ft16_spec("ft16f-steps.spec.json", r#"{"cables": [[16, 20]]}"#, "");
    let out = tmp("ft16f-steps.json");
    let o = run(&["synthesize", s(&spec), "--objective", "steps", "-o", s(&out), "--json", "--time-limit", "20"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["steps"].as_u64().unwrap() <= 18, "{v}");
    assert_eq!(v["steps_status_of_written"], true, "{v}");
    let o = run(&["synthesize", s(&spec), "--objective", "steps", "-o", s(&out), "--time-limit", "20"]);
    let steps = v["steps"].as_u64().unwrap();
    assert!(text(&o).contains(&format!("found {steps}: ")), "{}", text(&o));
    let o = run(&["verify", s(&out), "--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// FORMATS.md `method`: `scheduler` may be left out on a one-dimensional torus only; an
/// all_to_all on a torus of more dimensions without one is refused (exit 2, naming the file, the
/// field and the schedulers), never run as a silent Sequential, from a spec file or from flags.
#[test]
fn a_multi_dimensional_torus_needs_a_scheduler() {
    let dir = tmp("no-scheduler");
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("torus.json");
    std::fs::write(
        &spec,
        r#"{"topology": {"torus": {"dims": [4, 4, 4], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}, "collective": {"kind": "all_to_all", "bytes_per_rank": "1MiB"}, "method": {"generate": {"algorithm": "halfring"}}}"#,
    )
    .unwrap();
    let out = dir.join("out.json");
    let o = run(&["generate", s(&spec), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    for part in ["torus.json", "method.generate.scheduler", "sequential, pipeline, dimrotation, mate, matee"] {
        assert!(text(&o).contains(part), "{part}: {}", text(&o));
    }
    assert!(!out.exists());
    let o = run(&["generate", "--torus", "4x4", "--algorithm", "halfring", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("method.generate.scheduler") && text(&o).contains("--scheduler"), "{}", text(&o));
    assert!(!out.exists());
    // One dimension (of size > 1), or a kind that runs dimension after dimension: no choice to make.
    for args in [vec!["--torus", "5"], vec!["--torus", "5x1"], vec!["--torus", "4x4", "--collective", "all_gather"]] {
        let o = run(&[&["generate"], &args[..], &["--algorithm", "halfring", "-o", s(&out)]].concat());
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    }
}

/// Ring and HalfRing need wrap-around: on a mesh they cannot run (exit 3, saying why and that
/// foldedring runs on a line); foldedring on a line still runs.
#[test]
fn ring_and_half_ring_are_refused_on_a_mesh() {
    let out = tmp("mesh-ring.json");
    let _ = std::fs::remove_file(&out);
    for algorithm in ["ring", "halfring"] {
        let o = run(&["generate", "--torus", "5", "--mesh", "--algorithm", algorithm, "-o", s(&out)]);
        assert_eq!(o.status.code(), Some(3), "{algorithm}: {}", text(&o));
        for part in ["line of 5 npus without wrap-around", algorithm, "foldedring runs on a line"] {
            assert!(text(&o).contains(part), "{part}: {}", text(&o));
        }
        assert!(!out.exists());
    }
    let o = run(&["generate", "--torus", "5", "--mesh", "--algorithm", "foldedring", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["generate", "--torus", "4x4", "--mesh", "--algorithm", "foldedring", "--scheduler", "dimrotation", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// `chunks` on a switched topology: the double binary tree pipelines over them (meta records
/// them, 2h + chunks - 1 logical steps); the algorithms that do not pipeline refuse more than one
/// (exit 2, naming file, field and value) instead of ignoring it.
#[test]
fn switched_chunks_pipeline_the_double_binary_tree_or_are_refused() {
    let dir = tmp("switched-chunks");
    std::fs::create_dir_all(&dir).unwrap();
    let topology = r#"{"fat_tree": {"levels": 2, "k": 8, "osr": 1, "npus": 16, "bandwidth_gbps": 400.0, "latency_ns": 25.0, "switch_latency_ns": 1000.0}}"#;
    let write = |name: &str, kind: &str, algorithm: &str, chunks: u32| {
        let spec = dir.join(format!("{name}.json"));
        std::fs::write(
            &spec,
            format!(
                r#"{{"topology": {topology}, "collective": {{"kind": "{kind}", "bytes_per_rank": "1MiB"}}, "method": {{"generate": {{"algorithm": "{algorithm}", "chunks": {chunks}}}}}}}"#
            ),
        )
        .unwrap();
        spec
    };
    let out = dir.join("out.json");
    let spec = write("dbt", "all_reduce", "double_binary_tree", 4);
    let o = run(&["generate", s(&spec), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    // 16 ranks: trees of height 4.
    assert_eq!(
        (v["meta"]["chunks"].as_u64(), v["meta"]["pieces"].as_u64(), v["meta"]["logical_steps"].as_u64()),
        (Some(4), Some(8), Some(11)),
        "{}",
        v["meta"]
    );
    let o = run(&["verify", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::remove_file(&out).unwrap();
    for (name, kind, algorithm) in [("pairwise", "all_to_all", "pairwise"), ("ring", "all_reduce", "ring"), ("hd", "all_reduce", "halving_doubling")] {
        let spec = write(name, kind, algorithm, 4);
        let o = run(&["generate", s(&spec), "-o", s(&out)]);
        assert_eq!(o.status.code(), Some(2), "{algorithm}: {}", text(&o));
        for part in [format!("{name}.json"), "method.generate.chunks` = 4".into(), format!("{algorithm} does not pipeline")] {
            assert!(text(&o).contains(&part), "{part}: {}", text(&o));
        }
        assert!(!out.exists());
        let spec = write(name, kind, algorithm, 1);
        let o = run(&["generate", s(&spec), "-o", s(&out)]);
        assert_eq!(o.status.code(), Some(0), "{algorithm}: {}", text(&o));
        std::fs::remove_file(&out).unwrap();
    }
    let spec = write("dbt0", "all_reduce", "double_binary_tree", 0);
    let o = run(&["generate", s(&spec), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("chunks` = 0"), "{}", text(&o));
}

/// A huge `chunks` for the torus pipeline scheduler is refused (exit 2, naming it) before the
/// phases of that many chunks are placed: under a 4 GB address-space limit it used to abort.
#[test]
fn huge_pipeline_chunks_are_refused_before_allocating() {
    let out = tmp("huge-chunks.json");
    let limited = |args: &[&str]| {
        let line = "ulimit -v 4000000; exec \"$0\" \"$@\"";
        Command::new("sh").arg("-c").arg(line).arg(env!("CARGO_BIN_EXE_collsched")).args(args).output().unwrap()
    };
    for chunks in ["100000000", "2147483648", "4294967296"] {
        let o = limited(&["generate", "--torus", "4x4", "--algorithm", "halfring", "--scheduler", "pipeline", "--chunks", chunks, "-o", s(&out)]);
        assert_eq!(o.status.code(), Some(2), "{chunks}: {}", text(&o));
        assert!(text(&o).contains(&format!("chunks = {chunks}: makes")) && text(&o).contains("more than 65536"), "{chunks}: {}", text(&o));
    }
    let spec = tmp("huge-chunks.spec.json");
    std::fs::write(
        &spec,
        r#"{"topology": {"torus": {"dims": [4, 4], "bandwidth_gbps": 32, "latency_ns": 100}},
            "collective": {"kind": "all_to_all", "bytes_per_rank": 1024},
            "method": {"generate": {"algorithm": "halfring", "scheduler": "pipeline", "chunks": 100000000}}}"#,
    )
    .unwrap();
    let o = limited(&["generate", s(&spec), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains(s(&spec)) && text(&o).contains("chunks = 100000000"), "{}", text(&o));
    assert!(!out.exists());
}

/// Spec mismatches and spec fields judged after the spec was read name the files.
#[test]
fn spec_errors_after_reading_name_the_files() {
    let spec = tmp("xml-allgather.spec.json");
    std::fs::write(
        &spec,
        r#"{"topology": {"torus": {"dims": [2], "bandwidth_gbps": 32, "latency_ns": 100}}, "collective": {"kind": "all_gather", "bytes_per_rank": 1024}}"#,
    )
    .unwrap();
    let o = verify_xml_file("xml-mismatch.xml", &exchange_xml(1, true, true), &["--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("xml-mismatch.xml") && text(&o).contains(s(&spec)) && text(&o).contains("is not the spec's"), "{}", text(&o));
    if !cfg!(feature = "smt") {
        let smt = tmp("smt.spec.json");
        std::fs::write(
            &smt,
            r#"{"topology": {"torus": {"dims": [4], "bandwidth_gbps": 32, "latency_ns": 100}}, "collective": {"kind": "all_to_all", "bytes_per_rank": 1024},
                "method": {"synthesize": {"solver": "smt"}}}"#,
        )
        .unwrap();
        let o = run(&["synthesize", s(&smt), "-o", s(&tmp("smt-out.json"))]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(&format!("{}: method.synthesize.solver = \"smt\"", s(&smt))), "{}", text(&o));
    }
}

/// `verify --json` gives no cost for a schedule that breaks rule 1, as `cost` refuses it.
#[test]
fn verify_json_has_no_cost_when_rule_1_fails() {
    let (path, _) = ring_schedule("rule1-json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["steps"][0]["transfers"][0]["pieces"][0] = serde_json::json!([0, 9, 0]);
    std::fs::write(&path, v.to_string()).unwrap();
    let o = run(&["verify", s(&path), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(r["failure_counts"]["rule1"].as_u64().unwrap() > 0 && r["cost"].is_null(), "{r}");
    assert_eq!(run(&["cost", s(&path)]).status.code(), Some(2));
}

/// A valid schedule exports to MSCCL XML whatever its file is called: `<algo name>` is its stem
/// without the characters the readers would not unescape, cut to the 255 bytes they hold.
#[test]
fn msccl_xml_export_takes_any_file_name() {
    let (path, _) = ring_schedule("export-names");
    let dir = tmp("export-names-out");
    let long = "&".repeat(100);
    let body = std::fs::read(&path).unwrap();
    for (stem, name) in [(long.as_str(), "_".repeat(100)), ("a\"b&<x", "a_b__x".to_string()), (&"x".repeat(200), "x".repeat(200))] {
        let file = path.with_file_name(format!("{stem}.json"));
        std::fs::write(&file, &body).unwrap();
        for legacy in [&[][..], &["--legacy"][..]] {
            let o = run(&[&["export", s(&file), "--to", "msccl-xml", "-o", s(&dir)], legacy].concat());
            assert_eq!(o.status.code(), Some(0), "{stem} {legacy:?}: {}", text(&o));
            let xml_path = dir.join(format!("{stem}.xml"));
            let xml = std::fs::read_to_string(&xml_path).unwrap();
            assert!(xml.starts_with(&format!("<algo name=\"{name}\" ")), "{stem}: {}", &xml[..300.min(xml.len())]);
            let o = run(&["verify", s(&xml_path)]);
            assert_eq!(o.status.code(), Some(0), "{stem} {legacy:?}: {}", text(&o));
            assert!(!text(&o).contains("warning"), "{stem} {legacy:?}: {}", text(&o));
        }
    }
}

/// Every export refusal (exit 2) names the input file, once: non-uniform `block_bytes`, which
/// MSCCL XML's equal chunks cannot express (the message named no file), for every format.
#[test]
fn export_refusals_name_the_file() {
    let (path, _) = ring_schedule("export-refusals-src");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let n = v["collective"]["ranks"].as_array().unwrap().len();
    let mut blocks: Vec<Vec<u64>> = (0..n).map(|i| (0..n).map(|j| if i == j { 0 } else { 1000 }).collect()).collect();
    blocks[0][1] = 2000;
    v["collective"]["block_bytes"] = serde_json::json!(blocks);
    let file = tmp("export-refusals.json");
    std::fs::write(&file, serde_json::to_string(&v).unwrap()).unwrap();
    let o = run(&["verify", s(&file)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["export", s(&file), "--to", "msccl-xml", "-o", s(&tmp("export-refusals-out"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains(&format!("{}: --to msccl-xml: ", s(&file))) && text(&o).contains("different sizes (block_bytes)"), "{}", text(&o));
    assert_eq!(text(&o).matches(s(&file)).count(), 1, "{}", text(&o));
    // A schedule that fails verification: named once, as before.
    let mut broken = v.clone();
    broken["steps"].as_array_mut().unwrap().truncate(1);
    std::fs::write(&file, serde_json::to_string(&broken).unwrap()).unwrap();
    for to in ["msccl-xml", "chakra-et", "sccl-json"] {
        let o = run(&["export", s(&file), "--to", to, "-o", s(&tmp("export-refusals-out"))]);
        assert_eq!(o.status.code(), Some(2), "{to}: {}", text(&o));
        assert!(text(&o).contains("nothing to export"), "{to}: {}", text(&o));
        assert_eq!(text(&o).matches(s(&file)).count(), 1, "{to}: {}", text(&o));
    }
}

/// `--legacy` and `--channels` are refused where they do not apply.
#[test]
fn export_refuses_flags_its_format_does_not_take() {
    let (path, _) = ring_schedule("export-flags");
    let dir = tmp("export-flags-out");
    for (to, flags, named) in
        [("sccl-json", &["--legacy"][..], "--legacy"), ("chakra-et", &["--legacy"][..], "--legacy"), ("sccl-json", &["--channels", "2"][..], "--channels 2")]
    {
        let o = run(&[&["export", s(&path), "--to", to, "-o", s(&dir)], flags].concat());
        assert_eq!(o.status.code(), Some(2), "{to} {flags:?}: {}", text(&o));
        assert!(text(&o).contains(named) && text(&o).contains(&format!("not to --to {to}")), "{to} {flags:?}: {}", text(&o));
        assert!(!dir.exists(), "{to} {flags:?}: nothing is written");
    }
}

/// `--print-spec` prints only a spec that reads back, else exits 2 with the message a command
/// reading it gives.
#[test]
fn print_spec_refuses_what_reading_it_back_refuses() {
    let spec = tmp("print-bad-rank.spec.json");
    std::fs::write(&spec, r#"{"topology": {"torus": {"dims": [4], "bandwidth_gbps": 32, "latency_ns": 100}}, "collective": {"kind": "all_to_all", "bytes_per_rank": 1024, "ranks": [9]}}"#)
        .unwrap();
    let printed = run(&["bound", s(&spec), "--print-spec"]);
    let read = run(&["bound", s(&spec)]);
    assert_eq!(printed.status.code(), Some(2), "{}", text(&printed));
    assert!(
        printed.stdout.is_empty() && text(&printed).contains("collective.ranks[0]") && text(&printed) == text(&read),
        "{}\n{}",
        text(&printed),
        text(&read)
    );
    let o = run(&["generate", "--torus", "4", "--fail", "0-9", "--algorithm", "foldedring", "--print-spec"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(o.stdout.is_empty() && text(&o).contains("faults.cables[0]"), "{}", text(&o));
    let o = run(&["generate", "--torus", "4", "--fail", "0-1", "--algorithm", "foldedring", "--print-spec"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The faults cutting a rank off is the instance's, not the spec's: printed (the command exits 3).
    let o = run(&["generate", "--torus", "4", "--fail", "0-1", "--fail", "2-3", "--algorithm", "foldedring", "--print-spec"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// `--print-spec` runs the command's own checks of its input (method, algorithm, scheduler,
/// chunks, pieces, solver, time limit), not only the topology's, faults' and collective's: what
/// the command refuses with exit 2 is refused with its message and nothing printed. It printed
/// each of these and exited 0.
#[test]
fn print_spec_runs_the_commands_own_checks() {
    let subset = tmp("print-subset.spec.json");
    std::fs::write(
        &subset,
        r#"{"topology": {"torus": {"dims": [4, 4], "bandwidth_gbps": 32, "latency_ns": 100}},
            "collective": {"kind": "all_to_all", "bytes_per_rank": 1024, "ranks": [0, 1, 2]},
            "method": {"generate": {"algorithm": "halfring", "scheduler": "dimrotation"}}}"#,
    )
    .unwrap();
    let smt = tmp("print-smt.spec.json");
    std::fs::write(
        &smt,
        r#"{"topology": {"torus": {"dims": [4, 4], "bandwidth_gbps": 32, "latency_ns": 100}},
            "collective": {"kind": "all_to_all", "bytes_per_rank": 1024}, "method": {"synthesize": {"solver": "smt"}}}"#,
    )
    .unwrap();
    let out = tmp("print-checks.json");
    let mut cases: Vec<Vec<&str>> = vec![
        vec!["generate", "--torus", "4x4", "--algorithm", "pairwise"],
        vec!["generate", "--torus", "4x4", "--algorithm", "halfring"],
        vec!["generate", "--torus", "4x4", "--algorithm", "halfring", "--scheduler", "dimrotation", "--chunks", "3"],
        vec!["generate", "--torus", "4x4", "--algorithm", "halfring", "--scheduler", "dimrotation", "--pieces", "7"],
        vec!["generate", "--torus", "4", "--algorithm", "halfring", "--pieces", "7"],
        vec!["generate", "--torus", "4x4", "--algorithm", "dor", "--collective", "all_gather"],
        vec!["generate", "--torus", "4x4"],
        vec!["generate", s(&subset)],
        vec!["synthesize", "--torus", "4x4", "--time-limit", "0"],
        vec!["sweep", "--torus", "4x4", "--faults", "cables", "--time-limit", "0"],
    ];
    // A solver this build lacks (the smt feature is off in the test build unless asked for).
    if !cfg!(feature = "smt") {
        cases.push(vec!["synthesize", "--torus", "4x4", "--solver", "smt"]);
        cases.push(vec!["synthesize", s(&smt)]);
    }
    for args in cases {
        let command = run(&[&args[..], &["-o", s(&out)]].concat());
        assert_eq!(command.status.code(), Some(2), "{args:?}: {}", text(&command));
        let printed = run(&[&args[..], &["--print-spec"]].concat());
        assert_eq!(printed.status.code(), Some(2), "{args:?}: {}", text(&printed));
        assert!(printed.stdout.is_empty(), "{args:?}: {}", text(&printed));
        assert_eq!(String::from_utf8_lossy(&printed.stderr), String::from_utf8_lossy(&command.stderr), "{args:?}");
    }
}

/// A cable (undirected) or node listed twice among the faults is refused, naming both entries.
#[test]
fn a_fault_listed_twice_is_refused() {
    let o = run(&["bound", "--torus", "4", "--fail", "0-1", "--fail", "1-0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("faults.cables[1] = (1)-(0): the same cable as faults.cables[0] = (0)-(1)"), "{}", text(&o));
    let spec = tmp("twice.spec.json");
    std::fs::write(
        &spec,
        r#"{"topology": {"torus": {"dims": [4, 4], "bandwidth_gbps": 32, "latency_ns": 100}}, "faults": {"nodes": [[1, 1], 2, [1, 1]]},
            "collective": {"kind": "all_to_all", "bytes_per_rank": 1024}}"#,
    )
    .unwrap();
    let o = run(&["bound", s(&spec)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains(s(&spec)) && text(&o).contains("faults.nodes[2] = (1,1): the same node as faults.nodes[0]"), "{}", text(&o));
}

/// An ASTRA-sim network file in another YAML spelling (JSON after a byte-order mark) is the same
/// network; a count too large is named by the file's key and the value as written (exit 2).
#[test]
fn astra_networks_in_json_and_with_huge_counts() {
    let dir = tmp("astra-spellings");
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("net.spec.json");
    std::fs::write(&spec, r#"{"topology": {"astra_network": "net.yml"}, "collective": {"kind": "all_to_all", "bytes_per_rank": 1024}}"#).unwrap();
    std::fs::write(dir.join("net.yml"), "\u{feff}{\"topology\": [\"Ring\"], \"npus_count\": [8], \"bandwidth\": [50.0], \"latency\": [500.0]}").unwrap();
    let json = run(&["bound", s(&spec)]);
    assert_eq!(json.status.code(), Some(0), "{}", text(&json));
    std::fs::write(dir.join("net.yml"), "topology: [ 'Ring' ]\nnpus_count: [ 8 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n").unwrap();
    let yaml = run(&["bound", s(&spec)]);
    assert_eq!((yaml.status.code(), text(&yaml)), (Some(0), text(&json)));
    std::fs::write(dir.join("net.yml"), "topology: [ Ring ]\nnpus_count: [ 99999999999999999999 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n").unwrap();
    let o = run(&["bound", s(&spec)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("net.yml: npus_count[0] = 99999999999999999999: more than 4194304 npus"), "{}", text(&o));
}

/// An ASTRA-sim network of `Ring` dimensions is a torus (FORMATS.md), and a sweep takes it as one.
#[test]
fn sweep_takes_an_astra_network_of_rings_as_a_torus() {
    let dir = tmp("astra-rings");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("net.yml"), "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n").unwrap();
    let spec = dir.join("rings.spec.json");
    std::fs::write(&spec, r#"{"topology": {"astra_network": "net.yml"}, "collective": {"kind": "all_to_all", "bytes_per_rank": 1024}}"#).unwrap();
    let out = dir.join("sweep");
    let o = run(&["sweep", s(&spec), "--faults", "cables", "--time-limit", "20", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let index: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["sweep"]["topology"]["torus"]["dims"], serde_json::json!([4]), "{index}");
    assert_eq!(index["sweep"]["fault_count"], 4);
    let o = run(&["proof", "check", s(&out.join("certificates"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A network with a switch is not a torus: still refused.
    std::fs::write(dir.join("net.yml"), "topology: [ Switch ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n").unwrap();
    let o = run(&["sweep", s(&spec), "--faults", "cables", "-o", s(&dir.join("sweep2"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("a sweep needs `topology.torus` or `topology.fat_tree`"), "{}", text(&o));
}

/// One-way links (custom networks): a reduce_scatter or all_reduce on a directed ring of 3, and
/// two random directed graphs (reduce_scatter over 3 of 4 npus, all_reduce over 5 with 2 pieces)
/// whose hand-made schedules verify, are solved under every objective: the layered trees ran only
/// over hops whose way back is up and their refusal ended the search (exit 3). A rank that no
/// other can reach is still infeasible under every objective.
#[test]
fn synthesize_solves_directed_custom_networks_under_every_objective() {
    for (name, hand) in [("c2_15", true), ("c2_95", true), ("ring3_rs", false), ("ring3_ar", false)] {
        let spec = spec_data(&format!("directed_{name}.json"));
        if hand {
            let mine = spec_data(&format!("directed_{name}_hand.schedule.json"));
            let o = run(&["verify", s(&mine), "--spec", s(&spec)]);
            assert_eq!(o.status.code(), Some(0), "{name} by hand: {}", text(&o));
        }
        for objective in ["time", "event", "steps"] {
            let out = tmp(&format!("directed_{name}_{objective}.json"));
            let o = run(&["synthesize", s(&spec), "--objective", objective, "-o", s(&out), "--time-limit", "20"]);
            assert_eq!(o.status.code(), Some(0), "{name} {objective}: {}", text(&o));
            let o = run(&["verify", s(&out), "--spec", s(&spec)]);
            assert_eq!(o.status.code(), Some(0), "{name} {objective}: {}", text(&o));
        }
    }
    // Node 0 sends to 1 and 2, but no link is up into it.
    let cut = tmp("directed_cut.spec.json");
    let link = |id: u32, src: u32, dst: u32| format!(r#"{{"id": {id}, "src": {src}, "dst": {dst}, "bandwidth_gbps": 32, "latency_ns": 100, "up": true}}"#);
    let links = [link(0, 0, 1), link(1, 1, 2), link(2, 2, 1), link(3, 0, 2)].join(", ");
    let nodes = r#"[{"id": 0, "kind": "npu", "name": "a"}, {"id": 1, "kind": "npu", "name": "b"}, {"id": 2, "kind": "npu", "name": "c"}]"#;
    for kind in ["reduce_scatter", "all_reduce", "all_gather"] {
        let text_of =
            format!(r#"{{"topology": {{"custom": {{"nodes": {nodes}, "links": [{links}]}}}}, "collective": {{"kind": "{kind}", "bytes_per_rank": "3KiB"}}}}"#);
        std::fs::write(&cut, text_of).unwrap();
        for objective in ["time", "event", "steps"] {
            let o = run(&["synthesize", s(&cut), "--objective", objective, "-o", s(&tmp("directed_cut.json"))]);
            assert_eq!(o.status.code(), Some(3), "{kind} {objective}: {}", text(&o));
            assert!(text(&o).contains("cut off"), "{kind} {objective}: {}", text(&o));
        }
    }
}

/// A certificate whose collective lacks a field its kind needs (`piece_bytes`, `pieces`) or has
/// a kind the format does not know is unreadable (BAD, exit 2), as a missing link field is; a
/// well-formed claim that does not hold still fails (exit 1).
#[test]
fn proof_check_calls_a_collective_it_cannot_read_bad() {
    for name in ["cert_missing_piece_bytes.cert.json", "cert_missing_pieces.cert.json", "cert_kind_bogus.cert.json"] {
        let o = run(&["proof", "check", s(&repro(name))]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", text(&o));
        assert!(text(&o).starts_with("BAD ") && text(&o).contains("instance.collective: kind"), "{name}: {}", text(&o));
    }
    let good = repro("cert_ring4_all_gather.cert.json");
    let o = run(&["proof", "check", s(&good)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    // Its first claim: at least 2 steps (a witness 2 hops apart); 3 does not hold.
    assert_eq!(v["claims"][0]["value"], "2");
    v["claims"][0]["value"] = "3".into();
    let raised = tmp("cert_ring4_raised.cert.json");
    std::fs::write(&raised, v.to_string()).unwrap();
    std::fs::copy(repro("cert_ring4_all_gather.spec.json"), tmp("cert_ring4_all_gather.spec.json")).unwrap();
    let o = run(&["proof", "check", s(&raised)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).starts_with("FAIL ") && text(&o).contains("claim 0 (steps): the witness supports 2 steps, the claim is 3 steps"), "{}", text(&o));
}

/// `--print-spec` writes every flag that maps to a spec field, `--solver` and `--time-limit`
/// (`method.synthesize`) among them: the printed spec run again gives the same schedule file as
/// the flags. It left out `method`, so a spec printed with `--time-limit 0.001` ran with 60 s.
#[test]
fn a_printed_spec_runs_as_its_flags_do() {
    let runs: [(&str, &[&str]); 3] = [
        ("synthesize", &["--torus", "5", "--fail", "0-1", "--bytes", "64KiB", "--time-limit", "30", "--solver", "ilp"]),
        ("generate", &["--torus", "4x4", "--algorithm", "halfring", "--scheduler", "pipeline", "--chunks", "3", "--bytes", "96KiB"]),
        ("generate", &["--torus", "4x4", "--algorithm", "halfring", "--scheduler", "dimrotation", "--pieces", "4"]),
    ];
    for (i, (command, flags)) in runs.iter().enumerate() {
        let (a, b, spec) = (tmp(&format!("round-{i}-flags.json")), tmp(&format!("round-{i}-spec.json")), tmp(&format!("round-{i}.spec.json")));
        let o = run(&[&[*command][..], flags, &["--print-spec"]].concat());
        assert_eq!(o.status.code(), Some(0), "{flags:?}: {}", text(&o));
        std::fs::write(&spec, &o.stdout).unwrap();
        let by_flags = run(&[&[*command][..], flags, &["-o", s(&a)]].concat());
        let by_spec = run(&[*command, s(&spec), "-o", s(&b)]);
        assert_eq!(by_flags.status.code(), Some(0), "{flags:?}: {}", text(&by_flags));
        assert_eq!(by_spec.status.code(), Some(0), "{flags:?}: {}", text(&by_spec));
        assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(), "{flags:?}: the schedule files differ");
        if *command == "synthesize" {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["method"], serde_json::json!({"synthesize": {"solver": "ilp", "time_limit_s": 30.0}}), "{v}");
        }
    }
    // A time limit that cuts the search short: the printed spec stops at the same limit (exit 4).
    let spec = tmp("round-limit.spec.json");
    let flags = ["--torus", "4x4", "--bytes", "1MiB", "--time-limit", "0.001"];
    let o = run(&[&["synthesize"][..], &flags, &["--print-spec"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::write(&spec, &o.stdout).unwrap();
    let by_flags = run(&[&["synthesize"][..], &flags, &["-o", s(&tmp("round-limit-a.json"))]].concat());
    let by_spec = run(&["synthesize", s(&spec), "-o", s(&tmp("round-limit-b.json"))]);
    assert_eq!(by_flags.status.code(), by_spec.status.code(), "{}\n{}", text(&by_flags), text(&by_spec));
}

/// A printed spec names its ASTRA-sim network file by an absolute path, so that it reads the file
/// wherever the printed spec is saved. It copied the path as written, relative to the folder of
/// the spec it read: saved elsewhere, it failed with exit 2 "cannot read".
#[test]
fn a_printed_spec_finds_its_astra_network_from_anywhere() {
    let dir = tmp("astra-print");
    std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
    std::fs::write(dir.join("net.yml"), "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n").unwrap();
    let spec = dir.join("net.spec.json");
    std::fs::write(&spec, r#"{"topology": {"astra_network": "net.yml"}, "collective": {"kind": "all_gather", "bytes_per_rank": 1024}}"#).unwrap();
    let o = run(&["bound", s(&spec), "--print-spec"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let named = v["topology"]["astra_network"].as_str().unwrap();
    assert!(Path::new(named).is_absolute() && Path::new(named) == dir.join("net.yml").canonicalize().unwrap(), "{v}");
    let printed = dir.join("elsewhere/printed.spec.json");
    std::fs::write(&printed, &o.stdout).unwrap();
    let (from_printed, from_spec) = (run(&["bound", s(&printed)]), run(&["bound", s(&spec)]));
    assert_eq!(from_printed.status.code(), Some(0), "{}", text(&from_printed));
    assert_eq!(from_printed.stdout, from_spec.stdout);
}

/// A command of several outputs that fails to write one leaves none of them: the spec written
/// beside a certificate, or the topology picture written before the schedule, was left behind
/// (exit 5 with `dd.spec.json` or `t.svg` in place). Files that were there before stay.
#[test]
fn a_failed_write_leaves_no_companion_file() {
    let dir = tmp("companions");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("dd.cert.json")).unwrap();
    let o = run(&["bound", "--torus", "4x4", "--certificate", s(&dir.join("dd.cert.json"))]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert!(!dir.join("dd.spec.json").exists(), "{}", text(&o));
    std::fs::write(dir.join("afile"), "a file").unwrap();
    let svg = dir.join("t.svg");
    let o = run(&["generate", "--torus", "4", "--algorithm", "ring", "-o", s(&dir.join("afile/o.json")), "--topology-svg", s(&svg)]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert!(!svg.exists(), "{}", text(&o));
    // A picture that was there before stays as it was.
    std::fs::write(&svg, "before").unwrap();
    let o = run(&["generate", "--torus", "4", "--algorithm", "ring", "-o", s(&dir.join("afile/o.json")), "--topology-svg", s(&svg)]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&svg).unwrap(), "before");
    let mut names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["afile", "dd.cert.json", "t.svg"]);
    // Both written when both can be.
    let o = run(&["generate", "--torus", "4", "--algorithm", "ring", "-o", s(&dir.join("o.json")), "--topology-svg", s(&svg)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(dir.join("o.json").exists() && std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let o = run(&["bound", "--torus", "4x4", "--certificate", s(&dir.join("ok.cert.json"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(dir.join("ok.spec.json").exists() && dir.join("ok.cert.json").exists());
}

/// The tutorial quotes the binary's messages: the rank cut off (section 4). It quoted an older
/// wording, which CI, running only its commands, did not see.
#[test]
fn the_tutorial_quotes_the_cut_off_message_as_printed() {
    let tutorial = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/tutorial.md")).unwrap();
    let o = run(&["generate", "--torus", "4", "--fail", "0-1", "--fail", "2-3", "--algorithm", "foldedring"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let message = String::from_utf8_lossy(&o.stderr);
    let quoted = format!("$ ./target/release/collsched generate --torus 4 --fail 0-1 --fail 2-3 --algorithm foldedring\n{message}");
    assert!(tutorial.contains(&quoted), "docs/tutorial.md should quote:\n{quoted}");
}

#[test]
fn a_fat_tree_all_reduce_is_measured_against_the_crossing_bound() {
    // 16 npus on boards of 4 under a 2-level tree of k = 8: a chain crossing between boards twice
    // pays 2 x 3,100 ns; otherwise every board takes the other three boards' vectors over its four
    // leaf links, 3,100 + 3 x 64 KiB / (4 x 400 bytes/ns) = 3,222.88 ns, which bandwidth plus
    // latency (3,100 + 40.32 ns) falls short of.
    let spec = tmp("crossing.spec.json");
    std::fs::write(
        &spec,
        r#"{"topology": {"fat_tree": {"levels": 2, "k": 8, "osr": 1, "npus": 16, "board": 4, "bandwidth_gbps": 400.0, "latency_ns": 25.0, "switch_latency_ns": 1000.0}},
            "collective": {"kind": "all_reduce", "bytes_per_rank": "64KiB"}}"#,
    )
    .unwrap();
    let o = run(&["bound", s(&spec)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("crossing            3222.880000 (80572/25) ns"), "{}", text(&o));
    assert!(text(&o).contains("time bound          3222.880000 (80572/25) ns (the crossing bound)"), "{}", text(&o));
    let out = tmp("crossing.json");
    let o = run(&["synthesize", s(&spec), "-o", s(&out), "--time-limit", "20"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("above the certified crossing bound (3.2229 us)"), "{}", text(&o));
    // The certificate with the schedule attached checks, and says which bound it holds it to.
    let cert = tmp("crossing.cert.json");
    let o = attach_and_check(&spec, &out, &cert);
    assert!(text(&o).contains("time bound 3222.880000 (80572/25) (crossing)"), "{}", text(&o));
}

/// `--max-diagnostics` keeps an imported XML file's failures per rule as it keeps a schedule
/// file's, and counts the rest (msccl-tools' one-step all-reduce onto a ring of four: eight
/// transfers share links).
#[test]
fn verify_xml_keeps_the_imported_failures_to_the_limit() {
    let spec = tmp("ring4_all_reduce.json");
    std::fs::write(
        &spec,
        r#"{"topology": {"torus": {"dims": [4], "bandwidth_gbps": 32, "latency_ns": 100}}, "collective": {"kind": "all_reduce", "bytes_per_rank": 1048576}}"#,
    )
    .unwrap();
    let xml = msccl_data("allreduce_1step_4.xml");
    let o = run(&["verify", s(&xml), "--spec", s(&spec), "--max-diagnostics", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert_eq!(out.lines().filter(|l| l.starts_with("imported schedule: step")).count(), 1, "{out}");
    assert!(out.contains("imported schedule: ... rule 2 no link sharing: 7 more failures not shown"), "{out}");
    let all = text(&run(&["verify", s(&xml), "--spec", s(&spec)]));
    assert_eq!(all.lines().filter(|l| l.starts_with("imported schedule: step")).count(), 8, "{all}");
}
