//! MCTOP's machine description files (`.mct`): a header
//! `#<host> #HWCs <n> #Nodes <nodes> SMT <0|1>`, then one `x y cycles` line per pair of
//! hardware contexts, then optional sections, each opened by a `#Name <count>` line:
//! `#Mem_latencies` (`hwc node cycles`), `#Mem_bw-READ`/`#Mem_bw1-READ`/`#Mem_bw-WRITE`/
//! `#Mem_bw1-WRITE` (`socket node GB/s`, all threads / one thread), `#Cache_levels`
//! (`Cache_level i Latency c SizeOS kb SizeEst kb`) and `#Power_measurements` (kept unread).

use crate::error::{LatencyError, Result};
use crate::matrix::{LatencyMatrix, Unit};

#[derive(Debug, Clone, PartialEq)]
pub struct MctFile {
    pub host: String,
    pub hwcs: usize,
    pub nodes: usize,
    pub smt: bool,
    /// Core-to-core latencies in cycles.
    pub matrix: LatencyMatrix,
    /// `mem_latency[hwc][node]` in cycles; `None` where the file gives 0 (not measured).
    pub mem_latency: Vec<Vec<Option<f64>>>,
    pub bandwidth: Vec<Bandwidth>,
    /// `(level, latency cycles, size in KiB)`, level 1 = L1.
    pub caches: Vec<(u8, f64, u64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bandwidth {
    /// `true` for the one-thread measurement (`Mem_bw1-*`).
    pub single: bool,
    pub write: bool,
    pub from_socket: usize,
    pub node: usize,
    pub gbs: f64,
}

#[derive(Clone, Copy, PartialEq)]
enum Section {
    Latency,
    MemLatency,
    Bw { single: bool, write: bool },
    Caches,
    Other,
}

pub fn parse(text: &str, file: &str) -> Result<MctFile> {
    // A section header may be glued to the end of the previous line (MCTOP writes
    // `... SizeEst 22528#Power_measurements 6`); split such lines first.
    let mut lines: Vec<(usize, &str)> = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let l = l.trim();
        match l.find('#') {
            Some(p) if p > 0 => {
                lines.push((i + 1, l[..p].trim()));
                lines.push((i + 1, &l[p..]));
            }
            _ => lines.push((i + 1, l)),
        }
    }
    let mut it = lines.into_iter().filter(|(_, l)| !l.is_empty());
    let (hline, header) = it
        .next()
        .ok_or_else(|| LatencyError::parse(file, 1, "empty file"))?;
    let (host, hwcs, nodes, smt) =
        parse_header(header).map_err(|m| LatencyError::parse(file, hline, m))?;
    if hwcs < 2 {
        return Err(LatencyError::parse(
            file,
            hline,
            format!("#HWCs {hwcs}: at least 2 hardware contexts are needed"),
        ));
    }
    let mut lat: Vec<Vec<Option<f64>>> = vec![vec![None; hwcs]; hwcs];
    let mut mem_latency = vec![vec![None; nodes]; hwcs];
    let mut bandwidth = Vec::new();
    let mut caches = Vec::new();
    let mut section = Section::Latency;
    for (n, line) in it {
        if let Some(h) = line.strip_prefix('#') {
            let name = h.split_whitespace().next().unwrap_or("");
            section = match name {
                "Mem_latencies" => Section::MemLatency,
                "Mem_bw-READ" => Section::Bw {
                    single: false,
                    write: false,
                },
                "Mem_bw1-READ" => Section::Bw {
                    single: true,
                    write: false,
                },
                "Mem_bw-WRITE" => Section::Bw {
                    single: false,
                    write: true,
                },
                "Mem_bw1-WRITE" => Section::Bw {
                    single: true,
                    write: true,
                },
                "Cache_levels" => Section::Caches,
                _ => Section::Other,
            };
            continue;
        }
        let err = |m: String| LatencyError::parse(file, n, m);
        match section {
            Section::Other => {}
            Section::Latency => {
                let (x, y, v) = triple(line).map_err(err)?;
                let (x, y) = (
                    index(x, hwcs, "HWC").map_err(err)?,
                    index(y, hwcs, "HWC").map_err(err)?,
                );
                lat[x][y] = Some(v);
            }
            Section::MemLatency => {
                let (x, y, v) = triple(line).map_err(err)?;
                let (x, y) = (
                    index(x, hwcs, "HWC").map_err(err)?,
                    index(y, nodes, "node").map_err(err)?,
                );
                mem_latency[x][y] = (v > 0.0).then_some(v);
            }
            Section::Bw { single, write } => {
                let (x, y, v) = triple(line).map_err(err)?;
                let (x, y) = (
                    index(x, nodes, "socket").map_err(err)?,
                    index(y, nodes, "node").map_err(err)?,
                );
                bandwidth.push(Bandwidth {
                    single,
                    write,
                    from_socket: x,
                    node: y,
                    gbs: v,
                });
            }
            Section::Caches => {
                let t: Vec<&str> = line.split_whitespace().collect();
                let num = |k: usize| t.get(k).and_then(|s| s.parse::<f64>().ok());
                match (t.first(), num(1), num(3), num(5)) {
                    (Some(&"Cache_level"), Some(l), Some(c), Some(kb)) if l >= 1.0 => caches.push((l as u8, c, kb as u64)),
                    (Some(&"Cache_level"), Some(_), Some(_), Some(_)) => {} // level 0: registers
                    _ => {
                        return Err(err(format!(
                            "`{line}` is not a cache line (expected `Cache_level <i> Latency <cycles> SizeOS <KiB> SizeEst <KiB>`)"
                        )))
                    }
                }
            }
        }
    }
    let mut values = vec![vec![0.0; hwcs]; hwcs];
    for i in 0..hwcs {
        for j in 0..hwcs {
            if i == j {
                continue;
            }
            values[i][j] = match (lat[i][j], lat[j][i]) {
                (Some(a), Some(b)) => (a + b) / 2.0,
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => {
                    return Err(LatencyError::file(
                        std::path::Path::new(file),
                        format!("no latency line `{i} {j} <cycles>` for hardware contexts {i} and {j} (#HWCs {hwcs} needs every pair)"),
                    ))
                }
            };
        }
    }
    let matrix = LatencyMatrix {
        cpus: (0..hwcs as u32).collect(),
        values,
        unit: Unit::Cycles,
        ghz: None,
        source: file.to_string(),
    };
    Ok(MctFile {
        host,
        hwcs,
        nodes,
        smt,
        matrix,
        mem_latency,
        bandwidth,
        caches,
    })
}

fn parse_header(line: &str) -> std::result::Result<(String, usize, usize, bool), String> {
    let bad = || {
        format!(
            "`{line}` is not an MCTOP header (expected `#<host> #HWCs <n> #Nodes <n> SMT <0|1>`)"
        )
    };
    let t: Vec<&str> = line.split_whitespace().collect();
    let host = t
        .first()
        .and_then(|h| h.strip_prefix('#'))
        .ok_or_else(bad)?
        .to_string();
    let value = |key: &str| -> std::result::Result<usize, String> {
        let p = t.iter().position(|k| *k == key).ok_or_else(bad)?;
        t.get(p + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{key} must be followed by a whole number in `{line}`"))
    };
    let hwcs = value("#HWCs")?;
    let nodes = value("#Nodes")?.max(1);
    let smt = value("SMT")?;
    if smt > 1 {
        return Err(format!("SMT must be 0 or 1, found {smt}"));
    }
    Ok((host, hwcs, nodes, smt == 1))
}

fn triple(line: &str) -> std::result::Result<(usize, usize, f64), String> {
    let t: Vec<&str> = line.split_whitespace().collect();
    let bad = || format!("`{line}` is not `<index> <index> <value>`");
    if t.len() != 3 {
        return Err(bad());
    }
    let x = t[0].parse().map_err(|_| bad())?;
    let y = t[1].parse().map_err(|_| bad())?;
    let v: f64 = t[2].parse().map_err(|_| bad())?;
    if !(0.0..=super::MAX_VALUE).contains(&v) {
        return Err(format!("value {} must be a number from 0 to 1e9", t[2]));
    }
    Ok((x, y, v))
}

fn index(i: usize, n: usize, what: &str) -> std::result::Result<usize, String> {
    if i < n {
        Ok(i)
    } else {
        Err(format!(
            "{what} {i} is out of range (the header declares {n}, numbered 0-{})",
            n - 1
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "#box #HWCs 4 #Nodes 1 SMT 1\n0 1 30\n0 2 100\n0 3 100\n1 2 100\n1 3 100\n2 3 30\n\
        #Mem_latencies 1\n0 0 300\n#Mem_bw-READ 1\n0 0 12.5\n#Cache_levels 2\nCache_level 1 Latency 4 SizeOS 32 SizeEst 32#Power_measurements 1\nPower_x 1 2\n";

    #[test]
    fn reads_header_matrix_and_sections() {
        let f = parse(SMALL, "s.mct").unwrap();
        assert_eq!(
            (f.host.as_str(), f.hwcs, f.nodes, f.smt),
            ("box", 4, 1, true)
        );
        assert_eq!(f.matrix.get(3, 2), 30.0);
        assert_eq!(f.mem_latency[0][0], Some(300.0));
        assert_eq!(f.mem_latency[1][0], None);
        assert_eq!(f.bandwidth.len(), 1);
        assert_eq!(f.caches, vec![(1, 4.0, 32)]);
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("#box #HWCs 2 #Nodes 1 SMT 0\n0 1 x\n", "b.mct")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("b.mct:2: `0 1 x` is not"), "{e}");
        let e = parse("#box #HWCs 2 #Nodes 1 SMT 0\n0 5 3\n", "b.mct")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("b.mct:2: HWC 5 is out of range"), "{e}");
        let e = parse("#box HWCs 2\n", "b.mct").unwrap_err().to_string();
        assert!(
            e.starts_with("b.mct:1: `#box HWCs 2` is not an MCTOP header"),
            "{e}"
        );
        let e = parse("#box #HWCs 3 #Nodes 1 SMT 0\n0 1 3\n", "b.mct")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no latency line `0 2"), "{e}");
    }
}
