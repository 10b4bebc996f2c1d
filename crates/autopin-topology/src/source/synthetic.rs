//! Synthetic machines from a spec string in hwloc's spirit: `package:2 numa:1 l3:1 l2:2 core:2
//! pu:2`, levels from the top down, each `type:count` meaning "count of these in each object of
//! the level above". Caches take an optional size, `l3:1(8MB)` or `l2:2(size=1MiB,ways=16)`.
//! PUs get OS indexes in depth-first order, like hwloc's synthetic backend.

use crate::builder::{Builder, NumaSpec};
use crate::cpuset::CpuSet;
use crate::error::{Result, TopologyError};
use crate::model::*;

/// The valid level names, for error messages.
pub const LEVEL_NAMES: &str =
    "package (pack, socket), die, group, numa (node), l1d (l1), l1i, l2, l3, l4, core, pu";

#[derive(Debug, Clone)]
enum Level {
    Package,
    Die,
    Group,
    Numa,
    Cache(u8, CacheKind),
    Core,
    Pu,
}

struct LevelSpec {
    level: Level,
    count: u32,
    size: u64,
    ways: Option<u32>,
    line_size: u32,
}

/// Most PUs a synthetic machine may have; keeps a typo from allocating the world.
const MAX_PUS: u64 = 1 << 16;

pub fn parse(spec: &str) -> Result<Machine> {
    let levels = parse_levels(spec)?;
    let total: u64 = levels.iter().map(|l| l.count as u64).product();
    let err = |position: usize, message: String| TopologyError::Spec {
        spec: spec.to_string(),
        position,
        message,
    };
    if total > MAX_PUS {
        return Err(err(
            0,
            format!("describes {total} PUs; at most {MAX_PUS} are supported"),
        ));
    }
    let mut b = Builder::new();
    b.info.insert("source".into(), format!("synthetic:{spec}"));
    let has_core = levels.iter().any(|l| matches!(l.level, Level::Core));
    let mut objects_at_level: u64 = 1;
    for l in &levels {
        objects_at_level *= l.count as u64;
        let width = total / objects_at_level;
        for j in 0..objects_at_level {
            let set: CpuSet = ((j * width) as u32..((j + 1) * width) as u32).collect();
            let os = Some(j as u32);
            match &l.level {
                Level::Package => b.add(Object::new(ObjType::Package, os, set)),
                Level::Die => b.add(Object::new(ObjType::Die, os, set)),
                Level::Group => b.add(Object::new(ObjType::Group, None, set)),
                Level::Numa => {
                    // A NUMA level is also a grouping level: its CPUs stay together.
                    b.add(Object::new(ObjType::Group, None, set.clone()));
                    b.add_numa(NumaSpec {
                        os_index: j as u32,
                        cpuset: set,
                        initiators: CpuSet::new(),
                        memory: 0,
                        kind: None,
                        tier: None,
                    });
                }
                Level::Cache(level, kind) => {
                    let mut o = Object::new(ObjType::Cache, None, set);
                    o.cache = Some(CacheAttr {
                        level: *level,
                        kind: *kind,
                        size: l.size,
                        line_size: l.line_size,
                        ways: l.ways,
                    });
                    b.add(o);
                }
                Level::Core => b.add(Object::new(ObjType::Core, os, set)),
                Level::Pu => {
                    if !has_core {
                        b.add(Object::new(ObjType::Core, os, set.clone()));
                    }
                    b.add_pu(j as u32, true, None);
                }
            }
        }
    }
    if !levels.iter().any(|l| matches!(l.level, Level::Numa)) {
        b.add_numa(NumaSpec {
            os_index: 0,
            cpuset: (0..total as u32).collect(),
            initiators: CpuSet::new(),
            memory: 0,
            kind: None,
            tier: None,
        });
    }
    Ok(b.build())
}

fn parse_levels(spec: &str) -> Result<Vec<LevelSpec>> {
    let err = |position: usize, message: String| TopologyError::Spec {
        spec: spec.to_string(),
        position,
        message,
    };
    let mut out: Vec<LevelSpec> = Vec::new();
    let bytes = spec.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i] != b':' && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let name = &spec[start..i];
        let level = match name.to_ascii_lowercase().as_str() {
            "package" | "pack" | "socket" => Level::Package,
            "die" => Level::Die,
            "group" => Level::Group,
            "numa" | "node" | "numanode" => Level::Numa,
            "l1" | "l1d" => Level::Cache(1, CacheKind::Data),
            "l1i" => Level::Cache(1, CacheKind::Instruction),
            "l2" => Level::Cache(2, CacheKind::Unified),
            "l3" => Level::Cache(3, CacheKind::Unified),
            "l4" => Level::Cache(4, CacheKind::Unified),
            "core" => Level::Core,
            "pu" => Level::Pu,
            _ => {
                return Err(err(
                    start,
                    format!("unknown level '{name}'; valid levels: {LEVEL_NAMES}"),
                ))
            }
        };
        if i >= bytes.len() || bytes[i] != b':' {
            return Err(err(i, format!("expected ':' and a count after '{name}'")));
        }
        i += 1;
        let nstart = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let count: u32 = spec[nstart..i]
            .parse()
            .map_err(|_| err(nstart, format!("expected a count after '{name}:'")))?;
        if count == 0 {
            return Err(err(nstart, "a count must be at least 1".into()));
        }
        let mut ls = LevelSpec {
            level,
            count,
            size: 0,
            ways: None,
            line_size: 0,
        };
        if i < bytes.len() && bytes[i] == b'(' {
            let astart = i + 1;
            let close = spec[astart..]
                .find(')')
                .map(|p| astart + p)
                .ok_or_else(|| err(i, "'(' without a closing ')'".into()))?;
            if !matches!(ls.level, Level::Cache(..)) {
                return Err(err(i, format!("only caches take attributes, not '{name}'")));
            }
            let mut apos = astart;
            for attr in spec[astart..close].split(',') {
                let (key, value) = match attr.split_once('=') {
                    Some((k, v)) => (k.trim(), v.trim()),
                    None => ("size", attr.trim()),
                };
                match key {
                    "size" => {
                        ls.size = parse_size(value).ok_or_else(|| {
                            err(apos, format!("'{value}' is not a size (e.g. 32KiB, 8MB)"))
                        })?
                    }
                    "ways" => {
                        ls.ways =
                            Some(value.parse().map_err(|_| {
                                err(apos, format!("'{value}' is not a number of ways"))
                            })?)
                    }
                    "linesize" => {
                        ls.line_size = value
                            .parse()
                            .map_err(|_| err(apos, format!("'{value}' is not a line size")))?
                    }
                    _ => {
                        return Err(err(
                            apos,
                            format!("unknown cache attribute '{key}'; valid: size, ways, linesize"),
                        ))
                    }
                }
                apos += attr.len() + 1;
            }
            i = close + 1;
        }
        if i < bytes.len() && !bytes[i].is_ascii_whitespace() {
            return Err(err(i, "expected a space before the next level".into()));
        }
        if let Some(prev) = out.last() {
            if matches!(prev.level, Level::Pu) {
                return Err(err(start, "'pu' must be the last level".into()));
            }
        }
        out.push(ls);
    }
    match out.last() {
        Some(l) if matches!(l.level, Level::Pu) => Ok(out),
        Some(_) => Err(err(spec.len(), "the last level must be 'pu'".into())),
        None => Err(err(
            0,
            format!("empty spec; example: 'package:2 l3:1 core:4 pu:2' (levels: {LEVEL_NAMES})"),
        )),
    }
}

/// `32KiB`, `32KB`, `8M`, `1GiB`, plain bytes. Decimal and binary suffixes both mean powers of
/// 1024, as cache sizes always are.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: u64 = s[..digits].parse().ok()?;
    let mult = match s[digits..].trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_sockets_smt() {
        let m = parse("package:2 l3:1(8MB) core:4 pu:2").unwrap();
        m.validate().unwrap();
        assert_eq!(m.objects_of(ObjType::Package).len(), 2);
        assert_eq!(m.objects_of(ObjType::Core).len(), 8);
        assert_eq!(m.pus().len(), 16);
        let l3 = m.caches_of_level(3);
        assert_eq!(l3.len(), 2);
        assert_eq!(m.obj(l3[1]).cpuset.to_list(), "8-15");
        assert_eq!(m.obj(l3[0]).cache.as_ref().unwrap().size, 8 << 20);
        // The L3 equals its package's CPUs and is nested below it.
        assert_eq!(m.obj(m.obj(l3[0]).parent.unwrap()).ty, ObjType::Package);
        assert_eq!(m.numa_nodes.len(), 1);
    }

    #[test]
    fn numa_levels_attach_to_packages() {
        let m = parse("package:2 numa:1 l3:1 l2:2 core:2 pu:2").unwrap();
        assert_eq!(m.numa_nodes.len(), 2);
        let first_pu = m.pu_by_os(0).unwrap();
        assert_eq!(m.numa_of(first_pu), vec![0]);
        assert_eq!(m.numa_of(m.pu_by_os(15).unwrap()), vec![1]);
        assert_eq!(m.obj(m.numa_nodes[1].attached_to).ty, ObjType::Package);
    }

    #[test]
    fn errors_name_the_position() {
        let e = parse("package:2 foo:3 pu:1").unwrap_err().to_string();
        assert!(
            e.contains("position 10") && e.contains("unknown level 'foo'"),
            "{e}"
        );
        assert!(parse("package:2")
            .unwrap_err()
            .to_string()
            .contains("last level"));
        assert!(parse("package:x pu:1")
            .unwrap_err()
            .to_string()
            .contains("count"));
        assert!(parse("package:0 pu:1").is_err());
        assert!(parse("").is_err());
        assert!(parse("package:1000 core:1000 pu:1000").is_err());
        assert!(parse("l3:1(huge) pu:1")
            .unwrap_err()
            .to_string()
            .contains("not a size"));
    }

    #[test]
    fn implicit_cores() {
        let m = parse("package:2 pu:2").unwrap();
        assert_eq!(m.objects_of(ObjType::Core).len(), 4);
    }
}
