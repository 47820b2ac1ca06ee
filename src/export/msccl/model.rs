//! The MSCCL program model: one reading of an XML file, as the runtimes' reader reads it, shared
//! by the reader rules ([`super::check_program`]), the simulation ([`super::simulate()`]) and the
//! import ([`super::import_msccl`]).
//!
//! **How the reader reads** (msccl-executor-nccl and the older MSCCL use the same small XML
//! tokenizer from NCCL; docs/design/FORMATS.md "MSCCL XML"). What this module copies of it:
//! - of an element's attributes it keeps the first 16; of a repeated name the first wins; a
//!   name it does not know is ignored (each of these is a warning naming the element);
//! - integers are read as `strtol(value, NULL, 0)` reads them: a `0x` prefix is hex, a leading
//!   `0` octal, trailing text is ignored, no digits read as 0; then narrowed to a 32-bit int, as
//!   the runtimes' int attributes are (a value that is not a plain decimal, or does not fit, is a
//!   warning that says what the runtime reads); values are not unescaped;
//! - unknown elements are skipped with their contents, and only the first `<algo>` is read.
//!
//! What it refuses, as that tokenizer fails on it: a byte-order mark, an XML declaration or
//! processing instruction, text or tabs between elements, a tag broken over lines, single-quoted values, spaces around
//! `=`, CDATA, a DOCTYPE, children of `<step>`; and XML that is not well-formed.

use crate::collective::CollectiveKind;
use crate::lower::Buffer;
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;
use std::fmt;

/// The reader keeps at most this many attributes of an element.
const MAX_ATTRS: usize = 16;
/// The longest attribute value the reader's buffers hold (`MAX_STR_LEN`).
pub(super) const MAX_VALUE_LEN: usize = 255;

/// The runtime a file is judged for, told apart by its `<algo>` attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Runtime {
    /// msccl-executor-nccl (and RCCL's copy of it): `<algo>` carries `outofplace`, `minBytes`
    /// and `maxBytes`; reduce_scatter is spelled `reducescatter`.
    Executor,
    /// The older MSCCL runtime (microsoft/msccl), what msccl-tools 2.3 writes for: no
    /// `outofplace`; `minBytes`/`maxBytes` optional; reduce_scatter is spelled `reduce_scatter`.
    Legacy,
}

impl Runtime {
    /// The runtime's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Executor => "msccl-executor-nccl",
            Runtime::Legacy => "the older MSCCL runtime",
        }
    }

    /// How a file shows it is written for this runtime.
    pub fn dialect(self) -> &'static str {
        match self {
            Runtime::Executor => "its dialect: <algo> has outofplace, minBytes, maxBytes",
            Runtime::Legacy => "microsoft/msccl; the dialect msccl-tools 2.3 writes: <algo> has no outofplace",
        }
    }

    /// Steps per threadblock (`MSCCL_MAX_NUM_STEPS`: 64 in the executor's default build, 256 in
    /// the older runtime).
    pub fn max_steps(self) -> usize {
        match self {
            Runtime::Executor => 64,
            Runtime::Legacy => 256,
        }
    }

    /// Threadblocks per gpu (`MSCCL_MAX_NUM_THREAD_BLOCKS`).
    pub fn max_threadblocks(self) -> usize {
        match self {
            Runtime::Executor => 32 * 32,
            Runtime::Legacy => 216,
        }
    }

    /// The other runtime.
    pub fn other(self) -> Runtime {
        match self {
            Runtime::Executor => Runtime::Legacy,
            Runtime::Legacy => Runtime::Executor,
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The runtime protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Proto {
    /// Large messages.
    #[default]
    Simple,
    /// Low latency.
    LL,
    /// Low latency, 128-byte lines.
    LL128,
}

impl Proto {
    /// The attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Simple => "Simple",
            Proto::LL => "LL",
            Proto::LL128 => "LL128",
        }
    }

    fn from_attr(s: &str) -> Option<Proto> {
        [Proto::Simple, Proto::LL, Proto::LL128].into_iter().find(|p| p.as_str() == s)
    }
}

/// The collective an `<algo>` names in `coll`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Coll {
    /// `allreduce`.
    AllReduce,
    /// `allgather`.
    AllGather,
    /// `reducescatter` (executor) or `reduce_scatter` (older runtime).
    ReduceScatter,
    /// `alltoall`.
    AllToAll,
    /// `alltoallv` (executor only).
    AllToAllV,
    /// `reduce`.
    Reduce,
    /// `broadcast`.
    Broadcast,
    /// `gather` (executor only).
    Gather,
    /// `scatter` (executor only).
    Scatter,
    /// `send` (executor only).
    Send,
    /// `recv` (executor only).
    Recv,
    /// `custom` (older runtime only).
    Custom,
}

impl Coll {
    /// The collective as `runtime` spells it in `coll`, if it knows it.
    pub fn spelled(self, runtime: Runtime) -> Option<&'static str> {
        use Coll::*;
        match (self, runtime) {
            (AllReduce, _) => Some("allreduce"),
            (AllGather, _) => Some("allgather"),
            (ReduceScatter, Runtime::Executor) => Some("reducescatter"),
            (ReduceScatter, Runtime::Legacy) => Some("reduce_scatter"),
            (AllToAll, _) => Some("alltoall"),
            (Reduce, _) => Some("reduce"),
            (Broadcast, _) => Some("broadcast"),
            (AllToAllV, Runtime::Executor) => Some("alltoallv"),
            (Gather, Runtime::Executor) => Some("gather"),
            (Scatter, Runtime::Executor) => Some("scatter"),
            (Send, Runtime::Executor) => Some("send"),
            (Recv, Runtime::Executor) => Some("recv"),
            (Custom, Runtime::Legacy) => Some("custom"),
            _ => None,
        }
    }

    /// Reads `coll` in either runtime's spelling.
    pub fn from_attr(s: &str) -> Option<Coll> {
        use Coll::*;
        [AllReduce, AllGather, ReduceScatter, AllToAll, AllToAllV, Reduce, Broadcast, Gather, Scatter, Send, Recv, Custom]
            .into_iter()
            .find(|c| c.spelled(Runtime::Executor) == Some(s) || c.spelled(Runtime::Legacy) == Some(s))
    }

    /// The collective of this crate it is, if any.
    pub fn kind(self) -> Option<CollectiveKind> {
        match self {
            Coll::AllReduce => Some(CollectiveKind::AllReduce),
            Coll::AllGather => Some(CollectiveKind::AllGather),
            Coll::ReduceScatter => Some(CollectiveKind::ReduceScatter),
            Coll::AllToAll => Some(CollectiveKind::AllToAll),
            _ => None,
        }
    }
}

/// A step's `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// `s`: send `src`.
    Send,
    /// `r`: receive into `dst`.
    Recv,
    /// `rcs`: receive into `dst` and send it on.
    RecvCopySend,
    /// `rrs`: receive, reduce with `src`, send the result on.
    RecvReduceSend,
    /// `rrc`: receive, reduce with `src`, write the result to `dst`.
    RecvReduceCopy,
    /// `rrcs`: receive, reduce with `src`, write to `dst` and send on.
    RecvReduceCopySend,
    /// `cpy`: copy `src` to `dst` locally.
    Copy,
    /// `re`: reduce `src` into `dst` locally.
    Reduce,
    /// `nop`: only waits for its dependency.
    Nop,
}

impl StepKind {
    const ALL: [StepKind; 9] = [
        StepKind::Send,
        StepKind::Recv,
        StepKind::RecvCopySend,
        StepKind::RecvReduceSend,
        StepKind::RecvReduceCopy,
        StepKind::RecvReduceCopySend,
        StepKind::Copy,
        StepKind::Reduce,
        StepKind::Nop,
    ];

    /// The attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Send => "s",
            StepKind::Recv => "r",
            StepKind::RecvCopySend => "rcs",
            StepKind::RecvReduceSend => "rrs",
            StepKind::RecvReduceCopy => "rrc",
            StepKind::RecvReduceCopySend => "rrcs",
            StepKind::Copy => "cpy",
            StepKind::Reduce => "re",
            StepKind::Nop => "nop",
        }
    }

    fn from_attr(s: &str) -> Option<StepKind> {
        StepKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether it sends to the threadblock's `send` peer.
    pub fn sends(self) -> bool {
        matches!(self, StepKind::Send | StepKind::RecvCopySend | StepKind::RecvReduceSend | StepKind::RecvReduceCopySend)
    }

    /// Whether it receives from the threadblock's `recv` peer.
    pub fn receives(self) -> bool {
        matches!(self, StepKind::Recv | StepKind::RecvCopySend | StepKind::RecvReduceSend | StepKind::RecvReduceCopy | StepKind::RecvReduceCopySend)
    }

    /// Whether it reduces what it receives with its local `src`.
    pub fn reduces_received(self) -> bool {
        matches!(self, StepKind::RecvReduceSend | StepKind::RecvReduceCopy | StepKind::RecvReduceCopySend)
    }

    /// Whether it reads its local `src` chunks.
    pub fn reads_src(self) -> bool {
        matches!(self, StepKind::Send | StepKind::Copy | StepKind::Reduce) || self.reduces_received()
    }

    /// Whether it writes its local `dst` chunks.
    pub fn writes_dst(self) -> bool {
        matches!(self, StepKind::Recv | StepKind::RecvCopySend | StepKind::RecvReduceCopy | StepKind::RecvReduceCopySend | StepKind::Copy | StepKind::Reduce)
    }
}

impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A buffer and a chunk offset in it, as a step names them (`-1` where unused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// `i`, `o` or `s`.
    pub buffer: Buffer,
    /// The first chunk.
    pub offset: i64,
}

/// A step's wait on another threadblock (`depid`, `deps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dependency {
    /// `depid`: the threadblock id.
    pub tb: i64,
    /// `deps`: the step it waits for.
    pub step: i64,
}

/// One `<step>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The `s` attribute.
    pub s: i64,
    /// `type`.
    pub kind: StepKind,
    /// `srcbuf`, `srcoff`.
    pub src: Place,
    /// `dstbuf`, `dstoff`.
    pub dst: Place,
    /// `cnt`: chunks moved.
    pub cnt: i64,
    /// `depid`/`deps` when `depid` >= 0 (as the reader decides).
    pub dep: Option<Dependency>,
    /// `hasdep` as written (the reader wants 0 or 1).
    pub hasdep: i64,
    /// Line in the file.
    pub line: usize,
}

/// One `<tb>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Threadblock {
    /// `id`.
    pub id: i64,
    /// `send`: the peer it sends to, or -1.
    pub send: i64,
    /// `recv`: the peer it receives from, or -1.
    pub recv: i64,
    /// `chan`.
    pub chan: i64,
    /// Its steps in document order (the order they run in).
    pub steps: Vec<Step>,
    /// Line in the file.
    pub line: usize,
}

impl Threadblock {
    /// The peer it sends to.
    pub fn send_peer(&self) -> Option<usize> {
        usize::try_from(self.send).ok()
    }

    /// The peer it receives from.
    pub fn recv_peer(&self) -> Option<usize> {
        usize::try_from(self.recv).ok()
    }

    /// The kernel's step counter at every step that runs (`None` for `nop`s): what a step with
    /// `hasdep="1"` signals when it finishes, and what `deps` is compared with. The kernel folds
    /// the `nop`s before a step into that step's waits and advances the counter by one per wait,
    /// so the counter equals the step's position whenever every `nop` carries a dependency.
    pub fn counters(&self) -> Vec<Option<i64>> {
        let (mut counter, mut pending) = (0i64, 0i64);
        self.steps
            .iter()
            .map(|st| {
                if st.kind == StepKind::Nop {
                    pending += i64::from(st.dep.is_some());
                    return None;
                }
                let waits = pending + i64::from(st.dep.is_some());
                counter += (waits - 1).max(0);
                pending = 0;
                counter += 1;
                Some(counter - 1)
            })
            .collect()
    }

    /// The position of the step whose signal satisfies a wait for `deps`: the first step that
    /// runs, carries `hasdep="1"`, and whose counter is at least `deps` (the kernel waits until
    /// the threadblock's signalled counter reaches `deps`). `None`: the wait never ends.
    pub fn signal_for(&self, deps: i64) -> Option<usize> {
        let counters = self.counters();
        self.steps.iter().zip(counters).position(|(st, c)| st.hasdep == 1 && c.is_some_and(|c| c >= deps))
    }
}

/// One `<gpu>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// `id`: the rank.
    pub id: i64,
    /// `i_chunks`, `o_chunks`, `s_chunks`.
    pub chunks: [i64; 3],
    /// Its threadblocks in document order.
    pub tbs: Vec<Threadblock>,
    /// Line in the file.
    pub line: usize,
}

impl Gpu {
    /// Chunks declared for a buffer.
    pub fn declared(&self, b: Buffer) -> i64 {
        self.chunks[buffer_index(b)]
    }
}

/// The index of a buffer in `[i, o, s]` arrays.
pub fn buffer_index(b: Buffer) -> usize {
    match b {
        Buffer::Input => 0,
        Buffer::Output => 1,
        Buffer::Scratch => 2,
    }
}

/// An `<algo>` and everything in it, as the reader reads it. Attributes that one runtime
/// requires and the other does not are `Option`s; [`super::check_program`] says which are missing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// The runtime the file is written for: [`Runtime::Executor`] when `<algo>` has
    /// `outofplace`, else [`Runtime::Legacy`].
    pub runtime: Runtime,
    /// `name`.
    pub name: Option<String>,
    /// `proto` as written, and as understood.
    pub proto: Option<(String, Option<Proto>)>,
    /// `nchannels`.
    pub nchannels: Option<i64>,
    /// `nchunksperloop`.
    pub nchunksperloop: Option<i64>,
    /// `ngpus`.
    pub ngpus: Option<i64>,
    /// `coll` as written, and as understood.
    pub coll: Option<(String, Option<Coll>)>,
    /// `inplace`.
    pub inplace: Option<i64>,
    /// `outofplace` (executor only).
    pub outofplace: Option<i64>,
    /// `minBytes`.
    pub min_bytes: Option<i64>,
    /// `maxBytes`.
    pub max_bytes: Option<i64>,
    /// `nthreads` (older runtime only).
    pub nthreads: Option<i64>,
    /// The gpus in document order.
    pub gpus: Vec<Gpu>,
    /// The line of `<algo>`.
    pub line: usize,
}

impl Program {
    /// The collective, if `coll` names one.
    pub fn collective(&self) -> Option<Coll> {
        self.coll.as_ref().and_then(|(_, c)| *c)
    }

    /// The protocol it runs with: `proto`, Simple when it is missing or unknown (which
    /// [`super::check_program`] refuses).
    pub fn protocol(&self) -> Proto {
        self.proto.as_ref().and_then(|(_, p)| *p).unwrap_or_default()
    }
}

/// What is wrong with a file, each message naming the element (gpu, tb, step ids or line), the
/// attribute and its value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problems {
    /// What makes the runtime refuse the file, hang, or compute something else (empty: none).
    pub errors: Vec<String>,
    /// What the runtime ignores or reads differently than written.
    pub warnings: Vec<String>,
}

/// What reading a file gave: the program, unless the file cannot be read as one, and its problems.
#[derive(Clone, Debug, Default)]
pub struct Reading {
    /// The program; `None` when an element the runtime needs cannot be read.
    pub program: Option<Program>,
    /// What the reading found.
    pub problems: Problems,
}

/// Reads an MSCCL XML file (module docs: what of the reader's behaviour this copies).
pub fn read_program(xml: &str) -> Reading {
    let mut problems = Problems::default();
    let program = parse_tree(xml, &mut problems).and_then(|root| build_program(&root, &mut problems));
    Reading { program, problems }
}

/// An element as the reader keeps it.
#[derive(Debug)]
struct Node {
    name: String,
    attrs: Vec<(String, String)>,
    children: Vec<Node>,
    line: usize,
}

/// Line numbers of byte offsets.
struct Lines(Vec<usize>);

impl Lines {
    fn new(text: &str) -> Self {
        Lines(text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i).collect())
    }

    fn of(&self, offset: u64) -> usize {
        self.0.partition_point(|&nl| (nl as u64) < offset) + 1
    }
}

/// Parses the document into elements, checking the layout the runtime's tokenizer needs.
/// Returns the first `<algo>`.
fn parse_tree(xml: &str, out: &mut Problems) -> Option<Node> {
    // The tokenizer expects '<' as the first byte; the XML library would skip a byte-order mark
    // silently (and report the offsets after it 3 bytes off), so it is refused here, and the rest
    // is read without it so that later lines are still checked.
    let xml = match xml.strip_prefix('\u{feff}') {
        Some(rest) => {
            out.errors.push("line 1: a byte-order mark before `<algo>`, which the runtime's XML reader cannot parse".into());
            rest
        }
        None => xml,
    };
    let lines = Lines::new(xml);
    // What the XML library lets through but XML does not allow (XML 1.0, section 2): a control
    // character anywhere, and in an attribute value `<` or an `&` that starts no reference.
    if let Some(at) = xml.bytes().position(|b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')) {
        out.errors.push(format!("line {}: not well-formed XML: the control character {:#04x}", lines.of(at as u64), xml.as_bytes()[at]));
        return None;
    }
    let mut reader = Reader::from_str(xml);
    // Whether a DTD came before (it may declare entities, which the reader does not expand).
    let mut declared = false;
    let mut stack: Vec<Node> = Vec::new();
    let mut top: Vec<Node> = Vec::new();
    loop {
        let start = reader.buffer_position();
        let line = lines.of(start);
        let event = match reader.read_event() {
            Ok(e) => e,
            Err(e) => {
                out.errors.push(format!("line {}: not well-formed XML: {e}", lines.of(reader.error_position())));
                return None;
            }
        };
        let layout = |what: &str, out: &mut Problems| out.errors.push(format!("line {line}: {what}, which the runtime's XML reader cannot parse"));
        match event {
            Event::Start(e) | Event::Empty(e) if attribute_values_malformed(&e, declared).is_some() => {
                let what = attribute_values_malformed(&e, declared).unwrap_or_default();
                out.errors.push(format!("line {line}: <{}>: not well-formed XML: {what}", String::from_utf8_lossy(e.name().as_ref())));
                return None;
            }
            Event::Start(_) | Event::Empty(_) if stack.is_empty() && !top.is_empty() => {
                out.errors.push(format!("line {line}: not well-formed XML: a second root element (a document has one)"));
                return None;
            }
            Event::Start(e) | Event::Empty(e) if stack.last().is_some_and(|n| n.name == "step") => {
                layout(&format!("<{}> inside <step>", String::from_utf8_lossy(e.name().as_ref())), out);
            }
            Event::Start(e) => stack.push(element(&e, line, out)?),
            Event::Empty(e) => {
                let node = element(&e, line, out)?;
                attach(node, &mut stack, &mut top);
            }
            Event::End(e) => {
                let raw = xml.get(start as usize..reader.buffer_position() as usize).unwrap_or("");
                if raw.trim_start().bytes().any(|b| b.is_ascii_whitespace()) {
                    layout(&format!("the closing tag </{}> with white space", String::from_utf8_lossy(e.name().as_ref()).trim()), out);
                }
                if let Some(node) = stack.pop() {
                    attach(node, &mut stack, &mut top);
                }
            }
            Event::Text(t) if stack.is_empty() && !t.iter().all(u8::is_ascii_whitespace) => {
                let at = lines.of(start + t.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(0) as u64);
                out.errors.push(format!("line {at}: not well-formed XML: text outside the root element"));
                return None;
            }
            Event::GeneralRef(_) | Event::CData(_) if stack.is_empty() => {
                out.errors.push(format!("line {line}: not well-formed XML: text outside the root element"));
                return None;
            }
            Event::Text(t) if t.windows(3).any(|w| w == b"]]>") => {
                let at = lines.of(start + t.windows(3).position(|w| w == b"]]>").unwrap_or(0) as u64);
                out.errors.push(format!("line {at}: not well-formed XML: `]]>` in text"));
                return None;
            }
            Event::Text(t) => {
                if let Some(bad) = t.iter().position(|b| !matches!(b, b' ' | b'\n' | b'\r')) {
                    let what = if t.iter().all(u8::is_ascii_whitespace) { "a tab between elements" } else { "text between elements" };
                    let at = lines.of(start + bad as u64);
                    out.errors.push(format!("line {at}: {what}, which the runtime's XML reader cannot parse"));
                }
            }
            Event::GeneralRef(_) | Event::CData(_) => layout("text between elements", out),
            Event::Decl(_) => layout("an XML declaration <?xml ...?>", out),
            Event::PI(_) => layout("a processing instruction <?...?>", out),
            Event::DocType(_) => {
                declared = true;
                layout("a <!DOCTYPE>", out);
            }
            Event::Comment(c) => {
                let text: &[u8] = &c;
                if text.windows(2).any(|w| w == b"--") || text.ends_with(b"-") {
                    out.errors.push(format!("line {line}: not well-formed XML: `--` inside a comment"));
                    return None;
                }
            }
            Event::Eof => break,
        }
    }
    if let Some(open) = stack.last() {
        out.errors.push(format!("line {}: not well-formed XML: <{}> is never closed", open.line, open.name));
        return None;
    }
    let mut first = None;
    for n in top {
        if n.name != "algo" {
            out.warnings.push(format!("line {}: <{}> is not <algo>: the runtime ignores it", n.line, n.name));
        } else if first.is_some() {
            out.warnings.push(format!("line {}: a second <algo>: the runtime reads only the first", n.line));
        } else {
            first = Some(n);
        }
    }
    if first.is_none() {
        out.errors.push("no <algo> element".into());
    }
    first
}

fn attach(node: Node, stack: &mut [Node], top: &mut Vec<Node>) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(node),
        None => top.push(node),
    }
}

/// An element's name and attributes, refusing what the runtime's tokenizer cannot read.
fn element(e: &BytesStart<'_>, line: usize, out: &mut Problems) -> Option<Node> {
    let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
    if let Some(problem) = tag_layout(e) {
        out.errors.push(format!("line {line}: <{name}>: {problem}, which the runtime's XML reader cannot parse"));
    }
    let mut attrs = Vec::new();
    let mut iter = e.attributes();
    iter.with_checks(false);
    for a in iter {
        match a {
            Ok(a) => attrs.push((String::from_utf8_lossy(a.key.as_ref()).into_owned(), String::from_utf8_lossy(&a.value).into_owned())),
            Err(err) => {
                out.errors.push(format!("line {line}: <{name}>: not well-formed XML: {err}"));
                return None;
            }
        }
    }
    Some(Node { name, attrs, children: Vec::new(), line })
}

/// Whether `n` is an XML name as far as ASCII goes: it starts with a letter, `_`, `:` or a
/// non-ASCII byte, and goes on with those, digits, `-` and `.`.
fn is_xml_name(n: &[u8]) -> bool {
    let start = |b: u8| b.is_ascii_alphabetic() || b == b'_' || b == b':' || !b.is_ascii();
    n.first().is_some_and(|&b| start(b)) && n.iter().all(|&b| start(b) || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// What XML forbids in a tag that the XML library lets through: an element name that is no
/// name, and in its attribute values `<` and an `&` that starts no reference (`&amp;`, `&lt;`,
/// `&gt;`, `&quot;`, `&apos;`, `&#N;` or `&#xH;` of a character XML allows, or where the document
/// has a DTD (`declared`), any `&name;`, which it may declare).
fn attribute_values_malformed(e: &BytesStart<'_>, declared: bool) -> Option<String> {
    let raw: &[u8] = e;
    let name = e.name();
    if !is_xml_name(name.as_ref()) {
        return Some(format!("`{}` is no element name", String::from_utf8_lossy(name.as_ref())));
    }
    let mut quote: Option<u8> = None;
    for (i, &b) in raw.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) if b == b'<' => return Some("`<` in an attribute value".into()),
            Some(_) if b == b'&' => {
                let rest = &raw[i + 1..];
                let end = rest.iter().position(|&c| c == b';' || c == b'"' || c == b'\'' || c == b'&').filter(|&n| rest[n] == b';');
                let name = end.map(|n| &rest[..n]);
                // A character reference must name a character XML allows (section 2.2).
                let allowed = |radix: u32, digits: &[u8]| {
                    let code = std::str::from_utf8(digits).ok().filter(|d| !d.is_empty()).and_then(|d| u32::from_str_radix(d, radix).ok());
                    code.is_some_and(|c| matches!(c, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF))
                };
                let known = name.is_some_and(|n| {
                    matches!(n, b"amp" | b"lt" | b"gt" | b"quot" | b"apos")
                        || (declared && is_xml_name(n))
                        || n.strip_prefix(b"#x").is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit) && allowed(16, h))
                        || n.strip_prefix(b"#").is_some_and(|d| d.first() != Some(&b'x') && d.iter().all(u8::is_ascii_digit) && allowed(10, d))
                });
                if !known {
                    let shown = String::from_utf8_lossy(&raw[i..(i + 1 + end.map_or(0, |n| n + 1)).min(raw.len())]).into_owned();
                    return Some(format!("`{shown}` in an attribute value, which is no reference (a literal `&` is written `&amp;`)"));
                }
            }
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None => {}
        }
    }
    None
}

/// What in a tag's text the runtime's tokenizer fails on: it reads attributes separated by
/// spaces on one line, `key="value"` with double quotes and nothing around `=`.
fn tag_layout(e: &BytesStart<'_>) -> Option<&'static str> {
    let raw: &[u8] = e;
    if raw.iter().any(|&b| matches!(b, b'\n' | b'\r' | b'\t')) {
        return Some("a tag broken over lines or holding a tab");
    }
    let mut quote: Option<u8> = None;
    for (i, &b) in raw.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => {
                if b == b'\'' {
                    return Some("a single-quoted attribute value");
                }
                quote = Some(b);
            }
            None if b == b'=' && (!matches!(raw.get(i + 1), Some(b'"' | b'\'')) || i == 0 || raw[i - 1] == b' ') => {
                return Some("spaces around '='");
            }
            None => {}
        }
    }
    None
}

/// The attributes of one element as the reader sees them.
struct Attrs<'a> {
    node: &'a Node,
    /// Where, for messages: `<algo>`, `gpu 0`, `gpu 0 tb 1`, `gpu 0 tb 1 step 2`.
    at: String,
}

impl<'a> Attrs<'a> {
    /// Warns about what the reader ignores: attributes past the 16th, repeats, unknown names.
    fn new(node: &'a Node, at: String, known: &[&str], out: &mut Problems) -> Self {
        for (i, (k, v)) in node.attrs.iter().enumerate() {
            if v.len() > MAX_VALUE_LEN {
                out.errors.push(format!("line {}: {at}: {k} is {} characters long; the runtime's reader overflows past {MAX_VALUE_LEN}", node.line, v.len()));
            }
            if i >= MAX_ATTRS {
                out.warnings.push(format!("line {}: {at}: {k}=\"{v}\" is past the {MAX_ATTRS}th attribute: the runtime ignores it", node.line));
            } else if let Some((_, first)) = node.attrs[..i].iter().find(|(k2, _)| k2 == k) {
                out.warnings
                    .push(format!("line {}: {at}: attribute {k} given twice ({k}=\"{first}\", then {k}=\"{v}\"): the runtime reads the first", node.line));
            } else if !known.contains(&k.as_str()) {
                out.warnings.push(format!("line {}: {at}: unknown attribute {k}=\"{v}\": the runtime ignores it", node.line));
            }
        }
        Attrs { node, at }
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        self.node.attrs.iter().take(MAX_ATTRS).find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// A required attribute.
    fn text(&self, key: &str, out: &mut Problems) -> Option<&'a str> {
        let v = self.get(key);
        if v.is_none() {
            // Written, but past the attributes the reader keeps: say so, not that it is absent.
            let past = match self.node.attrs.iter().position(|(k, _)| k == key) {
                Some(i) => format!(" (it is the element's attribute {}; the runtime's reader keeps the first {MAX_ATTRS})", i + 1),
                None => String::new(),
            };
            out.errors.push(format!("line {}: {}: lacks the attribute {key}{past}", self.node.line, self.at));
        }
        v
    }

    /// An integer attribute as the runtime reads it ([`runtime_int`]), if present; a value it
    /// reads as other than written is a warning saying what it reads.
    fn int_opt(&self, key: &str, out: &mut Problems) -> Option<i64> {
        self.read_int(key, runtime_int, out)
    }

    /// A 64-bit attribute (`minBytes`, `maxBytes`: the runtimes read them into 64-bit
    /// integers), as `strtol` reads it, if present.
    fn int64_opt(&self, key: &str, out: &mut Problems) -> Option<i64> {
        self.read_int(key, strtol, out)
    }

    fn read_int(&self, key: &str, read: fn(&str) -> i64, out: &mut Problems) -> Option<i64> {
        let v = self.get(key)?;
        let (long, n) = (strtol(v), read(v));
        if long.to_string() != v {
            let narrowed = if long != n { format!(" (strtol reads {long}, narrowed to a 32-bit int)") } else { String::new() };
            out.warnings.push(format!("line {}: {}: {key}=\"{v}\" is not a plain integer: the runtime reads {n}{narrowed}", self.node.line, self.at));
        } else if long != n {
            out.warnings.push(format!(
                "line {}: {}: {key}=\"{v}\" does not fit a 32-bit int: the runtime reads {n} (narrowed to a 32-bit int)",
                self.node.line, self.at
            ));
        }
        Some(n)
    }

    /// A required integer attribute.
    fn int(&self, key: &str, out: &mut Problems) -> Option<i64> {
        self.text(key, out)?;
        self.int_opt(key, out)
    }

    fn buffer(&self, key: &str, out: &mut Problems) -> Option<Buffer> {
        let v = self.text(key, out)?;
        let b = [Buffer::Input, Buffer::Output, Buffer::Scratch].into_iter().find(|b| b.short() == v);
        if b.is_none() {
            out.errors.push(format!("line {}: {}: {key}=\"{v}\" is not a buffer (i, o or s)", self.node.line, self.at));
        }
        b
    }
}

/// What the runtimes' int attributes hold (all but `minBytes` and `maxBytes`, which are 64-bit):
/// `strtol(value, NULL, 0)` ([`strtol`]) stored in an `int` (msccl-executor-nccl's
/// `mscclXmlGetAttrInt`, MSCCL's `xmlGetAttrInt`), so narrowed to 32 bits as gcc does on x86-64
/// (two's complement, the low 32 bits): `4294967304` is 8, and a value strtol saturates to
/// LONG_MAX is -1.
fn runtime_int(v: &str) -> i64 {
    i64::from(strtol(v) as i32)
}

/// What `strtol(value, NULL, 0)` reads, saturating where it would overflow.
fn strtol(v: &str) -> i64 {
    let t = v.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (negative, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let hex = (t.starts_with("0x") || t.starts_with("0X")) && t[2..].starts_with(|c: char| c.is_ascii_hexdigit());
    let (radix, digits) = if hex {
        (16, &t[2..])
    } else if t.starts_with('0') {
        (8, t)
    } else {
        (10, t)
    };
    // Accumulated towards the sign's side, so a negative value reaches LONG_MIN exactly, as
    // strtol's does (and saturates there, as strtol does on overflow).
    let digits = digits.chars().map_while(|c| c.to_digit(radix)).map(i64::from);
    if negative {
        digits.fold(0i64, |n, d| n.saturating_mul(radix as i64).saturating_sub(d))
    } else {
        digits.fold(0i64, |n, d| n.saturating_mul(radix as i64).saturating_add(d))
    }
}

const ALGO_ATTRS: [&str; 11] = ["name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace", "outofplace", "minBytes", "maxBytes", "nthreads"];
const GPU_ATTRS: [&str; 4] = ["id", "i_chunks", "o_chunks", "s_chunks"];
const TB_ATTRS: [&str; 4] = ["id", "send", "recv", "chan"];
const STEP_ATTRS: [&str; 10] = ["s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep"];

fn build_program(root: &Node, out: &mut Problems) -> Option<Program> {
    let a = Attrs::new(root, "<algo>".into(), &ALGO_ATTRS, out);
    let proto = a.get("proto").map(|p| (p.to_string(), Proto::from_attr(p)));
    let coll = a.get("coll").map(|c| (c.to_string(), Coll::from_attr(c)));
    let runtime = if a.get("outofplace").is_some() { Runtime::Executor } else { Runtime::Legacy };
    let mut gpus = Some(Vec::new());
    for child in &root.children {
        match child.name.as_str() {
            "gpu" => match build_gpu(child, out) {
                Some(g) => {
                    if let Some(v) = gpus.as_mut() {
                        v.push(g)
                    }
                }
                None => gpus = None,
            },
            other => out.warnings.push(format!("line {}: <{other}> inside <algo>: the runtime ignores it", child.line)),
        }
    }
    Some(Program {
        runtime,
        name: a.get("name").map(str::to_string),
        proto,
        nchannels: a.int_opt("nchannels", out),
        nchunksperloop: a.int_opt("nchunksperloop", out),
        ngpus: a.int_opt("ngpus", out),
        coll,
        inplace: a.int_opt("inplace", out),
        outofplace: a.int_opt("outofplace", out),
        min_bytes: a.int64_opt("minBytes", out),
        max_bytes: a.int64_opt("maxBytes", out),
        nthreads: a.int_opt("nthreads", out),
        gpus: gpus?,
        line: root.line,
    })
}

fn build_gpu(node: &Node, out: &mut Problems) -> Option<Gpu> {
    let at = match node.attrs.iter().find(|(k, _)| k == "id") {
        Some((_, id)) => format!("gpu {id}"),
        None => format!("<gpu> at line {}", node.line),
    };
    let a = Attrs::new(node, at.clone(), &GPU_ATTRS, out);
    let (id, i, o, s) = (a.int("id", out), a.int("i_chunks", out), a.int("o_chunks", out), a.int("s_chunks", out));
    let mut tbs = Some(Vec::new());
    for child in &node.children {
        match child.name.as_str() {
            "tb" => match build_tb(child, &at, out) {
                Some(t) => {
                    if let Some(v) = tbs.as_mut() {
                        v.push(t)
                    }
                }
                None => tbs = None,
            },
            other => out.warnings.push(format!("line {}: <{other}> inside {at}: the runtime ignores it", child.line)),
        }
    }
    Some(Gpu { id: id?, chunks: [i?, o?, s?], tbs: tbs?, line: node.line })
}

fn build_tb(node: &Node, gpu: &str, out: &mut Problems) -> Option<Threadblock> {
    let at = match node.attrs.iter().find(|(k, _)| k == "id") {
        Some((_, id)) => format!("{gpu} tb {id}"),
        None => format!("{gpu} <tb> at line {}", node.line),
    };
    let a = Attrs::new(node, at.clone(), &TB_ATTRS, out);
    let (id, send, recv, chan) = (a.int("id", out), a.int("send", out), a.int("recv", out), a.int("chan", out));
    let mut steps = Some(Vec::new());
    for child in &node.children {
        match child.name.as_str() {
            "step" => match build_step(child, &at, out) {
                Some(s) => {
                    if let Some(v) = steps.as_mut() {
                        v.push(s)
                    }
                }
                None => steps = None,
            },
            other => out.warnings.push(format!("line {}: <{other}> inside {at}: the runtime ignores it", child.line)),
        }
    }
    Some(Threadblock { id: id?, send: send?, recv: recv?, chan: chan?, steps: steps?, line: node.line })
}

fn build_step(node: &Node, tb: &str, out: &mut Problems) -> Option<Step> {
    let at = match node.attrs.iter().find(|(k, _)| k == "s") {
        Some((_, s)) => format!("{tb} step {s}"),
        None => format!("{tb} <step> at line {}", node.line),
    };
    let a = Attrs::new(node, at.clone(), &STEP_ATTRS, out);
    let s = a.int("s", out);
    let kind = a.text("type", out).and_then(|t| {
        let k = StepKind::from_attr(t);
        if k.is_none() {
            let older = if t == "ra" { " (the older runtime's reader takes \"ra\", but its kernel stops the threadblock there)" } else { "" };
            out.errors.push(format!("line {}: {at}: type=\"{t}\" is not a step type{older}", node.line));
        }
        k
    });
    let src = a.buffer("srcbuf", out).zip(a.int("srcoff", out)).map(|(buffer, offset)| Place { buffer, offset });
    let dst = a.buffer("dstbuf", out).zip(a.int("dstoff", out)).map(|(buffer, offset)| Place { buffer, offset });
    let cnt = a.int("cnt", out);
    let (depid, deps, hasdep) = (a.int("depid", out), a.int("deps", out), a.int("hasdep", out));
    let dep = match (depid?, deps?) {
        (tb, step) if tb >= 0 => Some(Dependency { tb, step }),
        _ => None,
    };
    Some(Step { s: s?, kind: kind?, src: src?, dst: dst?, cnt: cnt?, dep, hasdep: hasdep?, line: node.line })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"<algo name="t" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" inplace="0" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
"#;

    #[test]
    fn reads_what_the_runtime_reads() {
        let r = read_program(ONE);
        assert!(r.problems.errors.is_empty() && r.problems.warnings.is_empty(), "{:?} {:?}", r.problems.errors, r.problems.warnings);
        let p = r.program.unwrap();
        assert_eq!(p.runtime, Runtime::Executor);
        assert_eq!(p.collective(), Some(Coll::AllGather));
        let st = &p.gpus[0].tbs[0].steps[0];
        assert_eq!((st.kind, st.cnt, st.dep, st.line), (StepKind::Send, 1, None, 4));
        let legacy = read_program(&ONE.replace(r#" outofplace="1" minBytes="0" maxBytes="0""#, ""));
        assert_eq!(legacy.program.unwrap().runtime, Runtime::Legacy);
    }

    #[test]
    fn repeated_unknown_and_missing_attributes_behave_as_in_the_reader() {
        let r = read_program(&ONE.replace(r#"cnt="1""#, r#"cnt="1" cnt="3" redop="sum""#));
        let st = &r.program.as_ref().unwrap().gpus[0].tbs[0].steps[0];
        assert_eq!(st.cnt, 1, "the first of a repeated attribute wins");
        assert!(
            r.problems
                .warnings
                .contains(&r#"line 4: gpu 0 tb 0 step 0: attribute cnt given twice (cnt="1", then cnt="3"): the runtime reads the first"#.to_string()),
            "{:?}",
            r.problems.warnings
        );
        assert!(
            r.problems.warnings.contains(&r#"line 4: gpu 0 tb 0 step 0: unknown attribute redop="sum": the runtime ignores it"#.to_string()),
            "{:?}",
            r.problems.warnings
        );
        // A value the reader has no meaning for names its line too, as a missing one does.
        for key in ["srcbuf", "dstbuf"] {
            let r = read_program(&ONE.replace(&format!(r#"{key}="{}""#, if key == "srcbuf" { "i" } else { "o" }), &format!(r#"{key}="x""#)));
            assert!(r.program.is_none());
            assert_eq!(r.problems.errors, [format!(r#"line 4: gpu 0 tb 0 step 0: {key}="x" is not a buffer (i, o or s)"#)]);
        }
        let r = read_program(&ONE.replace(r#" hasdep="0""#, ""));
        assert!(r.program.is_none());
        assert_eq!(r.problems.errors, vec!["line 4: gpu 0 tb 0 step 0: lacks the attribute hasdep".to_string()]);
        // Written after seven unknown attributes, hasdep is the 17th: the reader never sees it.
        let extra: String = (0..7).map(|i| format!(r#" x{i}="0""#)).collect();
        let late = ONE.replace(r#" hasdep="0""#, "").replace("<step ", &format!("<step{extra} ")).replace("/>", r#" hasdep="0"/>"#);
        let r = read_program(&late);
        assert!(r.program.is_none());
        let want = "line 4: gpu 0 tb 0 step 0: lacks the attribute hasdep (it is the element's attribute 17; the runtime's reader keeps the first 16)";
        assert!(r.problems.errors.iter().any(|e| e == want), "{:?}", r.problems.errors);
        // strtol: hex, octal, trailing text.
        let r = read_program(&ONE.replace(r#"cnt="1""#, r#"cnt="0x2""#).replace(r#"srcoff="0""#, r#"srcoff="1b""#));
        let st = &r.program.as_ref().unwrap().gpus[0].tbs[0].steps[0];
        assert_eq!((st.cnt, st.src.offset), (2, 1));
        assert!(
            r.problems.warnings.iter().any(|w| w == r#"line 4: gpu 0 tb 0 step 0: cnt="0x2" is not a plain integer: the runtime reads 2"#),
            "{:?}",
            r.problems.warnings
        );
        assert_eq!((strtol("010"), strtol(" -7"), strtol("x"), strtol("")), (8, -7, 0, 0));
        // strtol reads LONG_MIN exactly and saturates at LONG_MIN and LONG_MAX.
        assert_eq!(strtol("-9223372036854775808"), i64::MIN);
        assert_eq!(strtol("-9223372036854775807"), i64::MIN + 1);
        assert_eq!(strtol("-99999999999999999999999"), i64::MIN);
        assert_eq!(strtol("9223372036854775807"), i64::MAX);
        assert_eq!(strtol("99999999999999999999999"), i64::MAX);
        assert_eq!(strtol("-0x10"), -16);
        // Then narrowed to the runtime's 32-bit int: LONG_MIN is 0, 2^32 + 8 is 8, LONG_MAX -1.
        assert_eq!((runtime_int("-9223372036854775808"), runtime_int("4294967304"), runtime_int("99999999999999999999")), (0, 8, -1));
        assert_eq!((runtime_int("2147483647"), runtime_int("2147483648"), runtime_int("-2147483648")), (2147483647, -2147483648, -2147483648));
        let r = read_program(&ONE.replace(r#"s_chunks="0""#, r#"s_chunks="-9223372036854775808""#));
        assert_eq!(r.program.as_ref().unwrap().gpus[0].chunks[2], 0);
        assert!(
            r.problems.warnings.contains(
                &r#"line 2: gpu 0: s_chunks="-9223372036854775808" does not fit a 32-bit int: the runtime reads 0 (narrowed to a 32-bit int)"#.to_string()
            ),
            "{:?}",
            r.problems.warnings
        );
        let r = read_program(&ONE.replace(r#"cnt="1""#, r#"cnt="4294967297""#).replace(r#"srcoff="0""#, r#"srcoff="99999999999999999999""#));
        let st = &r.program.as_ref().unwrap().gpus[0].tbs[0].steps[0];
        assert_eq!((st.cnt, st.src.offset), (1, -1));
        assert!(
            r.problems.warnings.contains(
                &r#"line 4: gpu 0 tb 0 step 0: srcoff="99999999999999999999" is not a plain integer: the runtime reads -1 (strtol reads 9223372036854775807, narrowed to a 32-bit int)"#
                    .to_string()
            ),
            "{:?}",
            r.problems.warnings
        );
    }

    #[test]
    fn layout_the_tokenizer_cannot_read_is_refused() {
        for (bad, want) in [
            (format!("<?xml version=\"1.0\"?>\n{ONE}"), "line 1: an XML declaration"),
            (ONE.replace("    <tb", "\t<tb"), "line 3: a tab between elements"),
            (ONE.replace(r#"cnt="1" "#, "cnt='1' "), "line 4: <step>: a single-quoted attribute value"),
            (ONE.replace(r#" chan="0""#, "\n chan=\"0\""), "line 3: <tb>: a tag broken over lines"),
            (ONE.replace(r#"ngpus="2""#, r#"ngpus = "2""#), "line 1: <algo>: spaces around '='"),
            (ONE.replace("</tb>", "</tb >"), "line 5: the closing tag </tb> with white space"),
            (ONE.replace("</gpu>", "junk</gpu>"), "line 6: text between elements"),
            (ONE.replace("hasdep=\"0\"/>", "hasdep=\"0\"><x/></step>"), "line 4: <x> inside <step>"),
            (format!("\u{feff}{ONE}"), "line 1: a byte-order mark before `<algo>`"),
        ] {
            let r = read_program(&bad);
            assert!(r.problems.errors.iter().any(|e| e.starts_with(want)), "{want}: {:?}", r.problems.errors);
        }
        // A byte-order mark is the only problem of an otherwise good file (the offsets after it
        // once slid by its 3 bytes and blamed a plain `</algo>`).
        let r = read_program(&format!("\u{feff}{ONE}"));
        assert_eq!(r.problems.errors, ["line 1: a byte-order mark before `<algo>`, which the runtime's XML reader cannot parse"]);
        assert!(r.program.is_some());
        let r = read_program("<algo><gpu></algo>");
        assert!(r.problems.errors[0].contains("not well-formed"), "{:?}", r.problems.errors);
    }

    /// What XML forbids and the XML library lets through: the file cannot be read as a program
    /// (exit 2), and the message names the line.
    #[test]
    fn xml_that_is_not_well_formed_is_unreadable() {
        for (bad, want) in [
            (ONE.replace(r#"ngpus="2""#, r#"ngpus="2" name="a&b""#), "line 1: <algo>: not well-formed XML: `&` in an attribute value"),
            (ONE.replace(r#"ngpus="2""#, r#"ngpus="2" name="&foo;""#), "line 1: <algo>: not well-formed XML: `&foo;`"),
            (ONE.replace(r#"ngpus="2""#, r#"ngpus="2" name="a<b""#), "line 1: <algo>: not well-formed XML: `<`"),
            (ONE.replace(r#"ngpus="2""#, "ngpus=\"2\" name=\"a\u{1}\""), "line 1: not well-formed XML: the control character 0x01"),
            (ONE.replace("</algo>", "<!-- a -- b --></algo>"), "line 7: not well-formed XML: `--` inside a comment"),
            (format!("{ONE}\n{ONE}"), "line 9: not well-formed XML: a second root element"),
            (format!("{ONE}\njunk"), "line 9: not well-formed XML: text outside the root element"),
            (ONE.replace(r#"ngpus="2""#, r#"ngpus="2" name="a&#1;b""#), "line 1: <algo>: not well-formed XML: `&#1;`"),
            (ONE.replace(r#"ngpus="2""#, r#"ngpus="2" name="a&#xD800;b""#), "line 1: <algo>: not well-formed XML: `&#xD800;`"),
            (ONE.replace("</gpu>", "<1x/></gpu>"), "line 6: <1x>: not well-formed XML: `1x` is no element name"),
            (ONE.replace("</gpu>", "]]></gpu>"), "line 6: not well-formed XML: `]]>` in text"),
        ] {
            let r = read_program(&bad);
            assert!(r.program.is_none() && r.problems.errors.iter().any(|e| e.starts_with(want)), "{want}: {:?}", r.problems.errors);
        }
        // An entity a DTD may declare is a reader rule (the DOCTYPE), not unreadable.
        let r = read_program(&format!("<!DOCTYPE algo [<!ENTITY foo \"x\">]>\n{}", ONE.replace(r#"ngpus="2""#, r#"ngpus="2" name="a&foo;""#)));
        assert!(r.program.is_some() && r.problems.errors.iter().any(|e| e.contains("<!DOCTYPE>")), "{:?}", r.problems.errors);
        // References XML defines stay readable.
        let r = read_program(&ONE.replace(r#"ngpus="2""#, r#"ngpus="2" name="a&amp;b&#38;c&#x26;&lt;&gt;&quot;&apos;""#));
        assert!(r.program.is_some(), "{:?}", r.problems.errors);
    }
}
