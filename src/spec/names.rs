//! The closed lists of names that specs and flags use (docs/design/FORMATS.md "Input specs"):
//! algorithms, schedulers, routings and solvers, each an enum that reads and writes its exact
//! file name, so that a misspelt name is refused where it is read, with the list of valid ones.

use std::fmt;

/// Defines an enum over a closed list of file names, with `name`, `ALL`, `NAMES`, `Display`,
/// `FromStr` (so clap flags parse it) and serde as those names.
macro_rules! closed_list {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in the order of the contract's list.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];
            /// Every file name, in the same order.
            pub const NAMES: &'static [&'static str] = &[$($text,)+];

            /// The name as written in spec and schedule files.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The value of a file name; `None` for any other text.
            pub fn from_name(text: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.name() == text)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(text: &str) -> Result<Self, String> {
                Self::from_name(text).ok_or_else(|| format!("expected one of {}", Self::NAMES.join(", ")))
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                text.parse().map_err(|e: String| serde::de::Error::custom(format!("\"{text}\": {e}")))
            }
        }
    };
}

closed_list! {
    /// The algorithms a spec's `method.generate.algorithm` names (docs/design/ALGORITHMS.md).
    pub enum Algorithm {
        /// One ring, both ways round (tori).
        Ring => "ring",
        /// One ring, the short way only (tori).
        HalfRing => "halfring",
        /// A ring folded around a failed cable (tori).
        FoldedRing => "foldedring",
        /// Pairwise exchange (switched).
        Pairwise => "pairwise",
        /// Bruck's algorithm (switched).
        Bruck => "bruck",
        /// Recursive halving then doubling (switched).
        HalvingDoubling => "halving_doubling",
        /// Two complementary binary trees (switched).
        DoubleBinaryTree => "double_binary_tree",
        /// Recursive doubling all-gather (switched).
        RecursiveDoubling => "recursive_doubling",
        /// Recursive halving reduce-scatter (switched).
        RecursiveHalving => "recursive_halving",
        /// Hardware dimension-order routing (tori).
        Dor => "dor",
        /// Hardware fault-aware routing, faulty dimension first (tori).
        Wfr => "wfr",
    }
}

closed_list! {
    /// The schedulers a spec's `method.generate.scheduler` names (docs/design/ALGORITHMS.md,
    /// "Many dimensions").
    pub enum SchedulerName {
        /// Dimensions one after another.
        Sequential => "sequential",
        /// Chunks through the dimensions in order (`chunks` beside it).
        Pipeline => "pipeline",
        /// One chunk per dimension, each starting on its own.
        DimRotation => "dimrotation",
        /// HalfRing + DimRotation with an acceleration phase for a faulty ring.
        Mate => "mate",
        /// MATE with the faulty ring working in the normal phases too.
        Matee => "matee",
    }
}

closed_list! {
    /// How transfers are routed through switches (`method.generate.routing`).
    pub enum Routing {
        /// Every pair on its first shortest path (lowest-numbered next hop); transfers of a step
        /// often share uplinks (a baseline, verified with contention allowed).
        SinglePath => "single_path",
        /// Each flow of a step on its own spine (or core) where the tree allows it; steps that
        /// need more than the tree carries at once are split into contention-free sub-steps.
        Balanced => "balanced",
    }
}

closed_list! {
    /// Which exact backend a synthesis uses (`method.synthesize.solver`, `--solver`).
    pub enum Solver {
        /// microlp for programs of up to `synth::AUTO_ILP_VARIABLES` variables, z3 above when
        /// the build has it (measured), microlp otherwise.
        Auto => "auto",
        /// good_lp with microlp.
        Ilp => "ilp",
        /// z3 with pseudo-boolean constraints (cargo feature `smt`: links the system libz3).
        Smt => "smt",
        /// good_lp with HiGHS (cargo feature `highs`: a C++ build that needs cmake and libclang).
        Highs => "highs",
    }
}

impl Algorithm {
    /// Whether the algorithm shares links by design (routed baselines whose contention the
    /// event-driven cost prices, docs/design/MODEL.md rule 2).
    pub fn shares_links(self) -> bool {
        matches!(self, Algorithm::Dor | Algorithm::Wfr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_serde() {
        for &a in Algorithm::ALL {
            assert_eq!(a.name().parse::<Algorithm>(), Ok(a));
            assert_eq!(serde_json::to_string(&a).unwrap(), format!("\"{a}\""));
            assert_eq!(serde_json::from_str::<Algorithm>(&format!("\"{a}\"")).unwrap(), a);
        }
        assert_eq!(SchedulerName::NAMES, ["sequential", "pipeline", "dimrotation", "mate", "matee"]);
        assert_eq!(Routing::from_name("single_path"), Some(Routing::SinglePath));
        assert_eq!(Solver::from_name("ILP"), None);
        let e = serde_json::from_str::<Solver>("\"cbc\"").unwrap_err().to_string();
        assert!(e.contains("\"cbc\": expected one of auto, ilp, smt, highs"), "{e}");
    }
}
