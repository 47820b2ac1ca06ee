//! What `collsched verify FILE.xml` answers for an MSCCL XML file (docs/design/CLI.md): the
//! runtime it is judged for (by its dialect), whether that runtime's reader takes it, and, for
//! every placement the file declares (out-of-place, in-place), whether it runs to its end under
//! the chosen buffering and leaves every chunk where its collective wants it. Under the
//! runtime's buffering it also says whether the program relies on that buffering (it would
//! deadlock under rendezvous).

use super::model::{read_program, Problems, Program, Runtime};
use super::rules::check_program;
use super::simulate::{simulate, Buffering, Execution, Placement, SimError};

/// The run of one placement.
#[derive(Clone, Debug)]
pub struct PlacementRun {
    /// Out-of-place or in-place.
    pub placement: Placement,
    /// The run under the buffering asked for.
    pub outcome: Result<Execution, SimError>,
    /// Under the runtime's buffering, when the run finished: what rendezvous gives (`None`:
    /// not asked, or it also finishes). `Some` means the program relies on buffering.
    pub without_buffering: Option<SimError>,
}

impl PlacementRun {
    /// Whether it ran to its end with every chunk in place.
    pub fn is_valid(&self) -> bool {
        self.outcome.as_ref().is_ok_and(Execution::is_correct)
    }
}

/// What a file gets.
#[derive(Clone, Debug)]
pub struct XmlReport {
    /// The program, when the file can be read as one.
    pub program: Option<Program>,
    /// The runtime judged for.
    pub runtime: Option<Runtime>,
    /// The buffering model the runs used.
    pub buffering: Buffering,
    /// The reading and the runtime's reader rules.
    pub problems: Problems,
    /// Why the other runtime's reader would refuse the file (empty: it takes it too).
    pub other_runtime_refuses: Vec<String>,
    /// One run per declared placement (none when the reader refuses the file).
    pub runs: Vec<PlacementRun>,
}

impl XmlReport {
    /// Whether the runtime reads the file and every declared placement runs correctly.
    pub fn is_valid(&self) -> bool {
        self.program.is_some() && self.problems.errors.is_empty() && !self.runs.is_empty() && self.runs.iter().all(PlacementRun::is_valid)
    }

    /// Whether some placement runs only thanks to the runtime's buffering.
    pub fn relies_on_buffering(&self) -> bool {
        self.runs.iter().any(|r| r.without_buffering.is_some())
    }
}

/// Checks a file (module docs).
pub fn check_xml(xml: &str, buffering: Buffering) -> XmlReport {
    let reading = read_program(xml);
    let mut problems = reading.problems;
    let Some(program) = reading.program else {
        return XmlReport { program: None, runtime: None, buffering, problems, other_runtime_refuses: Vec::new(), runs: Vec::new() };
    };
    let runtime = program.runtime;
    let rules = check_program(&program, runtime);
    problems.errors.extend(rules.errors);
    problems.warnings.extend(rules.warnings);
    let other_runtime_refuses = check_program(&program, runtime.other()).errors;
    let runs = if problems.errors.is_empty() { Placement::declared(&program).into_iter().map(|pl| run(&program, pl, buffering)).collect() } else { Vec::new() };
    XmlReport { program: Some(program), runtime: Some(runtime), buffering, problems, other_runtime_refuses, runs }
}

fn run(p: &Program, placement: Placement, buffering: Buffering) -> PlacementRun {
    let outcome = simulate(p, placement, buffering);
    let without_buffering = match (&outcome, buffering) {
        (Ok(_), Buffering::Runtime) => simulate(p, placement, Buffering::Rendezvous).err(),
        _ => None,
    };
    PlacementRun { placement, outcome, without_buffering }
}

/// The reader-rule errors of a file for the runtime of its dialect (empty: the reader takes it).
pub fn check_reader_rules(xml: &str) -> Vec<String> {
    let reading = read_program(xml);
    let mut errors = reading.problems.errors;
    if let Some(p) = &reading.program {
        errors.extend(check_program(p, p.runtime).errors);
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FILES: [&str; 2] =
        [include_str!("../../../tests/data/msccl/allreduce_ring_inplace.xml"), include_str!("../../../tests/data/msccl/allgather_ring_inplace.executor.xml")];

    /// The file with its `k`-th attribute value (counted over the whole file) replaced.
    fn with_value(xml: &str, k: usize, value: &str) -> String {
        let starts: Vec<usize> = xml.match_indices("=\"").map(|(i, _)| i + 2).collect();
        let Some(&start) = starts.get(k % starts.len().max(1)) else { return xml.to_string() };
        let end = start + xml[start..].find('"').unwrap_or(0);
        format!("{}{value}{}", &xml[..start], &xml[end..])
    }

    /// Every attribute value in turn at the ends of what strtol reads (and beyond): no panic,
    /// no allocation sized by the value, and nothing is valid that names such a count.
    #[test]
    fn huge_integers_in_any_attribute_never_panic() {
        for xml in FILES {
            let attributes = xml.matches("=\"").count();
            for k in 0..attributes {
                for value in ["99999999999999999999999", "-99999999999999999999999", "9223372036854775807", "-9223372036854775808", "2147483648"] {
                    let xml = with_value(xml, k, value);
                    for buffering in [Buffering::Runtime, Buffering::Rendezvous] {
                        let _ = check_xml(&xml, buffering);
                    }
                    let _ = super::super::import::import_msccl(&xml, None);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// Attribute values changed to small numbers or step types keep many files readable, so
        /// the rules, both runs and the import see odd but accepted programs: none panics, and
        /// what runs under rendezvous also runs under the runtime's buffering.
        #[test]
        fn mutated_attributes_never_panic(file in 0usize..2, edits in proptest::collection::vec((0usize..400, -2i64..6, 0usize..12), 1..4)) {
            let mut xml = FILES[file].to_string();
            for (k, n, kind) in edits {
                let kinds = ["s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop"];
                let value = if kind < kinds.len() { kinds[kind].to_string() } else { n.to_string() };
                xml = with_value(&xml, k, &value);
            }
            let buffered = check_xml(&xml, Buffering::Runtime);
            let strict = check_xml(&xml, Buffering::Rendezvous);
            // More buffering never hurts: what runs without it runs with it.
            prop_assert!(!strict.is_valid() || buffered.is_valid());
            prop_assert!(!buffered.relies_on_buffering() || !strict.is_valid());
            let _ = super::super::import::import_msccl(&xml, None);
        }
    }
}
