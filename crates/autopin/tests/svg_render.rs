//! Every SVG autopin writes, rendered to PNG with rsvg-convert at a small and a large size
//! (2 and 256 CPUs, 2 and 8 strategies), checked for what a person would see as wrong:
//! something drawn outside the canvas (a colour bar running off the bottom, a label or title
//! cut at the edge), an empty picture, or a heatmap whose colours do not span its scale.
//!
//! The PNGs stay in `$TMPDIR/autopin-svg-check/` for a look.

use assert_cmd::Command;
use autopin_latency::{heatmap, infer, Hints, LatencyMatrix, Unit};
use autopin_testkit::require;
use std::path::{Path, PathBuf};

/// Room around the canvas in the overflow render; anything drawn there is outside the canvas.
const MARGIN: f64 = 40.0;

fn out_dir() -> PathBuf {
    // Kept for a look after the run, inside the build directory, not in /tmp.
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("svg-check");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn autopin() -> Command {
    Command::cargo_bin("autopin").unwrap()
}

/// The value of attribute `name` in the root `<svg ...>` tag.
fn root_attr(svg: &str, name: &str) -> Option<String> {
    let start = svg.find("<svg")?;
    let tag = &svg[start..start + svg[start..].find('>')?];
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    Some(tag[at..at + tag[at..].find('"')?].to_string())
}

/// The root tag with width, height and viewBox replaced by a canvas `MARGIN` larger on every
/// side, so what lies outside the original canvas shows up in the render.
fn with_margin(svg: &str, w: f64, h: f64) -> String {
    let start = svg.find("<svg").unwrap();
    let end = start + svg[start..].find('>').unwrap();
    let mut tag = svg[start..end].to_string();
    for name in ["width", "height", "viewBox"] {
        if let Some(v) = root_attr(&format!("{tag}>"), name) {
            tag = tag.replacen(&format!(" {name}=\"{v}\""), "", 1);
        }
    }
    let (ew, eh) = (w + 2.0 * MARGIN, h + 2.0 * MARGIN);
    tag = tag.replacen(
        "<svg",
        &format!(
            r#"<svg width="{ew}" height="{eh}" viewBox="{} {} {ew} {eh}""#,
            -MARGIN, -MARGIN
        ),
        1,
    );
    format!("{}{tag}{}", &svg[..start], &svg[end..])
}

struct Png {
    w: usize,
    h: usize,
    rgb: Vec<[u8; 3]>,
}

impl Png {
    fn read(path: &Path) -> Png {
        let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        let ch = info.color_type.samples();
        assert!(ch >= 3, "{}: expected RGB(A)", path.display());
        let rgb = buf[..info.buffer_size()]
            .chunks(ch)
            .map(|p| [p[0], p[1], p[2]])
            .collect();
        Png {
            w: info.width as usize,
            h: info.height as usize,
            rgb,
        }
    }
    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        self.rgb[y * self.w + x]
    }
    fn has_colour(&self, c: [u8; 3], tol: u8) -> bool {
        self.rgb
            .iter()
            .any(|p| (0..3).all(|i| p[i].abs_diff(c[i]) <= tol))
    }
}

fn rsvg(svg: &Path, png: &Path, zoom: f64) {
    let out = std::process::Command::new("rsvg-convert")
        .args(["-b", "white", "-z", &zoom.to_string(), "-o"])
        .arg(png)
        .arg(svg)
        .output()
        .expect("run rsvg-convert");
    assert!(
        out.status.success(),
        "rsvg-convert {}: {}",
        svg.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Renders `svg` (named `name`) and asserts it is a picture inside its canvas; returns the
/// render at its own size.
fn check(name: &str, svg: &str) -> Png {
    let dir = out_dir();
    let w: f64 = root_attr(svg, "width").expect("width").parse().unwrap();
    let h: f64 = root_attr(svg, "height").expect("height").parse().unwrap();
    assert!(
        w >= 100.0 && h >= 80.0,
        "{name}: canvas {w}×{h} is too small to read"
    );
    let path = dir.join(format!("{name}.svg"));
    std::fs::write(&path, svg).unwrap();
    let png_path = dir.join(format!("{name}.png"));
    rsvg(&path, &png_path, 1.0);
    rsvg(&path, &dir.join(format!("{name}@2x.png")), 2.0);

    let wide = dir.join(format!("{name}.margin.svg"));
    std::fs::write(&wide, with_margin(svg, w, h)).unwrap();
    let wide_png = dir.join(format!("{name}.margin.png"));
    rsvg(&wide, &wide_png, 1.0);
    let img = Png::read(&wide_png);
    // One pixel of tolerance: an edge stroke's antialiasing may bleed by half a pixel.
    let m = MARGIN as usize;
    let inside =
        |x: usize, y: usize| x + 1 >= m && x <= m + w as usize && y + 1 >= m && y <= m + h as usize;
    let mut outside = Vec::new();
    for y in 0..img.h {
        for x in 0..img.w {
            if !inside(x, y) && img.at(x, y) != [255, 255, 255] {
                outside.push((x as i64 - m as i64, y as i64 - m as i64));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "{name}: {} pixel(s) drawn outside the {w}×{h} canvas, e.g. at {:?} (see {})",
        outside.len(),
        &outside[..outside.len().min(5)],
        wide_png.display()
    );
    let img = Png::read(&png_path);
    let ink = img.rgb.iter().filter(|p| **p != [255, 255, 255]).count();
    assert!(
        ink * 50 > img.rgb.len(),
        "{name}: almost nothing drawn ({ink} pixels)"
    );
    img
}

fn latency_matrix(n: usize, group: usize) -> LatencyMatrix {
    LatencyMatrix {
        cpus: (0..n as u32).collect(),
        values: (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| match (i == j, i / 2 == j / 2, i / group == j / group) {
                        (true, _, _) => 0.0,
                        (_, true, _) => 8.0,
                        (_, _, true) => 40.0,
                        _ => 130.0 + (i + j) as f64 % 7.0,
                    })
                    .collect()
            })
            .collect(),
        unit: Unit::Nanoseconds,
        ghz: None,
        source: "synthetic matrix".into(),
    }
}

/// The ends of the heatmap's colour ramp and its middle.
const LOW: [u8; 3] = [68, 1, 84];
const HIGH: [u8; 3] = [253, 231, 37];
const MIDDLE: [u8; 3] = [33, 145, 140];

#[test]
fn latency_heatmaps_fit_and_use_their_scale() {
    require!(
        autopin_testkit::have("rsvg-convert"),
        "rsvg-convert not installed (librsvg2-bin)"
    );
    // Two CPUs: one latency, so one colour, which is the one the legend shows.
    let mut two = latency_matrix(2, 2);
    two.values = vec![vec![0.0, 93.1], vec![93.1, 0.0]];
    let inf = infer(&two, &Hints::default()).unwrap();
    let img = check("heatmap-2cpus", &heatmap::render(&two, &inf));
    assert!(
        img.has_colour(MIDDLE, 2),
        "the one latency has the legend's colour"
    );
    assert!(
        !img.has_colour(LOW, 2),
        "no cell may take the bottom colour of a one-value scale"
    );

    let big = latency_matrix(256, 32);
    let inf = infer(&big, &Hints::default()).unwrap();
    let img = check("heatmap-256cpus", &heatmap::render(&big, &inf));
    assert!(
        img.has_colour(LOW, 2) && img.has_colour(HIGH, 2),
        "cells span the colour scale"
    );
}

#[test]
fn topology_drawings_fit() {
    require!(
        autopin_testkit::have("rsvg-convert"),
        "rsvg-convert not installed (librsvg2-bin)"
    );
    let small = autopin()
        .args(["topology", "--synthetic", "pu:2", "--format", "svg"])
        .assert()
        .success();
    check(
        "topology-2cpus",
        &String::from_utf8_lossy(&small.get_output().stdout),
    );
    let root = autopin_testkit::hwloc_dump("256ppc-8n8s4t");
    let big = autopin()
        .args(["topology", "--format", "svg", "--sysfs-root"])
        .arg(&root)
        .assert()
        .success();
    check(
        "topology-256cpus",
        &String::from_utf8_lossy(&big.get_output().stdout),
    );
    // The I/O objects drawn in their packages: PCI devices, OS devices and bridges.
    let xml = autopin_testkit::data("hwloc-xml/24em64t-2n6c2t-pci.xml");
    let io = autopin()
        .args(["topology", "--format", "svg", "--whole-io", "--load"])
        .arg(&xml)
        .assert()
        .success();
    check(
        "topology-whole-io",
        &String::from_utf8_lossy(&io.get_output().stdout),
    );
}

#[test]
fn compare_box_plots_fit() {
    require!(
        autopin_testkit::have("rsvg-convert"),
        "rsvg-convert not installed (librsvg2-bin)"
    );
    let dir = tempfile::tempdir().unwrap();
    for strategies in [
        &["none", "0"][..],
        &[
            "none", "0", "1", "0,1", "compact", "scatter", "balanced", "cores",
        ],
    ] {
        let svg = dir.path().join("box.svg");
        let mut cmd = autopin();
        cmd.args(["compare", "-q", "--runs", "2", "--seed", "1", "--svg"])
            .arg(&svg);
        for s in strategies {
            cmd.args(["--strategy", s]);
        }
        cmd.args(["--", "true"]).assert().success();
        check(
            &format!("compare-{}-strategies", strategies.len()),
            &std::fs::read_to_string(&svg).unwrap(),
        );
    }
}

#[test]
fn report_timeline_fits() {
    require!(
        autopin_testkit::have("rsvg-convert"),
        "rsvg-convert not installed (librsvg2-bin)"
    );
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let svg = dir.path().join("t.svg");
    // A single-threaded shell loop of a few seconds: enough for probes and a timeline.
    autopin()
        .args(["run", "-q", "--start", "os", "--report"])
        .arg(&report)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 1500000 ]; do i=$((i+1)); done",
        ])
        .assert()
        .success();
    autopin()
        .arg("report")
        .arg(&report)
        .arg("--svg")
        .arg(&svg)
        .assert()
        .success();
    let text = std::fs::read_to_string(&svg).unwrap();
    // Axis labels are plain numbers: no `3.162e2`.
    for label in text.split("text-anchor=\"end\">").skip(1) {
        let label = &label[..label.find('<').unwrap()];
        assert!(
            !label.contains("e-") && !label.contains("e0") && !label.contains("e+"),
            "axis label {label:?}"
        );
    }
    // The legend explains every bar there is: the start-up's grey when there is one (the
    // first tick of this program may already be the OS placement's probe), and the
    // warm-ups' pale.
    assert_eq!(
        text.contains("fill=\"#cccccc\" fill-opacity=\"1\"/>\n"),
        text.contains("start-up: the program ran where the OS placed it"),
        "{text}"
    );
    assert!(text.contains("pale: a warm-up after a move"), "{text}");
    check("report-timeline", &text);
}
