//! The machine model and where it comes from.
//!
//! One tree of objects as in hwloc (see [`model`]); sources in [`source`] read it from Linux
//! sysfs, a synthetic spec, a JSON file or hwloc XML; views in [`view`] show it.

#[cfg(feature = "linux")]
pub mod affinity;
pub mod builder;
pub mod cpuset;
pub mod error;
pub mod io;
pub mod machine;
pub mod model;
pub mod source;
pub mod view;

pub use cpuset::{CpuListError, CpuSet};
pub use error::{
    HwlocXmlError, InvalidTree, JsonTopologyError, Result, TopologyError, XmlPosition,
};
pub use io::{OsDevice, OsDeviceKind, PciBridge, PciDevice};
pub use machine::{FlatPu, IoOrigin, PciChild};
pub use model::*;
