//! Why a machine could not be read.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A file could not be read or made no sense; always names the file.
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    /// A synthetic spec was wrong at a character position.
    #[error("synthetic spec '{spec}', position {position}: {message}")]
    Spec {
        spec: String,
        position: usize,
        message: String,
    },
    #[error("{0}")]
    Invalid(String),
    /// An hwloc XML file that could not be imported.
    #[error("{path}: {source}")]
    HwlocXml {
        path: PathBuf,
        source: HwlocXmlError,
    },
}

impl TopologyError {
    pub fn file(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        TopologyError::File {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Why a machine's object tree breaks an invariant ([`crate::Machine::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTree {
    #[error("the first object must be the Machine")]
    NoMachineFirst,
    #[error("object {parent} has a child {child} that does not exist")]
    MissingChild { parent: usize, child: usize },
    #[error("object {child} is a child of {parent} but names another parent")]
    OtherParent { parent: usize, child: usize },
    #[error("object {child} covers CPUs outside its parent {parent}")]
    OutsideParent { parent: usize, child: usize },
    #[error("object {0} has no parent")]
    NoParent(usize),
    #[error("PU object {0} must cover exactly its own CPU")]
    PuNotOneCpu(usize),
    #[error("object {object} names NUMA node {node}, which does not exist")]
    MissingNumaNode { object: usize, node: usize },
    #[error("the NUMA distance matrix does not match the number of nodes")]
    DistanceShape,
    #[error("NUMA node {0} is attached to an object that does not exist")]
    NumaAttachedToNothing(u32),
    #[error("NUMA node {0} sits behind a memory-side cache that does not exist")]
    NumaBehindMissingCache(u32),
    #[error("memory-side cache {0} names a NUMA node, an object or a holding cache that does not exist (a holding cache must come before it)")]
    MemCacheDangling(usize),
    #[error("PCI bridge {0} names a parent bridge that does not come before it")]
    BridgeParentAfter(usize),
    #[error("PCI bridge {0} is attached to an object that does not exist")]
    BridgeAttachedToNothing(usize),
    #[error("PCI device {0} is attached to an object that does not exist")]
    PciAttachedToNothing(String),
    #[error("PCI device {0} sits behind a bridge that does not exist")]
    PciBehindMissingBridge(String),
}

/// Why a text is not a topology JSON document ([`crate::source::json::from_str`]).
#[derive(Debug, thiserror::Error)]
pub enum JsonTopologyError {
    /// Not JSON of the document's shape, at a line and column.
    #[error("not an autopin topology JSON document (line {line}, column {column}): {cause}")]
    NotADocument {
        line: usize,
        column: usize,
        cause: serde_json::Error,
    },
    /// A document whose object tree is not valid.
    #[error("inconsistent topology: {0}")]
    Inconsistent(InvalidTree),
}

/// Where in an hwloc XML text something is: a line, and the column where known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct XmlPosition {
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: Option<usize>,
}

impl XmlPosition {
    pub fn new(line: usize, column: Option<usize>) -> Self {
        XmlPosition { line, column }
    }
}

/// `line 3, column 5` (or `line 3`).
impl std::fmt::Display for XmlPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}", self.line)?;
        if let Some(c) = self.column {
            write!(f, ", column {c}")?;
        }
        Ok(())
    }
}

/// Why a text is not an hwloc XML topology ([`crate::source::hwloc_xml::from_str`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HwlocXmlError {
    /// Something wrong at a place in the text: `line 3, column 1: a PU object without
    /// os_index`.
    #[error("{position}: {message}")]
    At {
        position: XmlPosition,
        message: String,
    },
    /// A well-formed topology without a single PU.
    #[error("the XML describes no PU objects (processing units), so there is nothing to pin to")]
    NoPus,
    /// Objects whose CPU sets do not nest into a valid tree.
    #[error("the objects in the XML do not form a valid tree: {0}")]
    Inconsistent(InvalidTree),
}

impl HwlocXmlError {
    /// Where in the text, when the error is about a place.
    pub fn position(&self) -> Option<XmlPosition> {
        match self {
            HwlocXmlError::At { position, .. } => Some(*position),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, TopologyError>;
