//! Average-linkage agglomerative clustering of CPUs by latency, and the places where its merge
//! heights jump. Average linkage (UPGMA) smooths single noisy pairs, and its heights never
//! decrease, so a structural level shows up as a relative jump between consecutive merges
//! while the continuous bands of mesh interconnects merge smoothly without one.

/// One merge of two clusters; leaves are `0..n`, the cluster made by merge `k` is `n + k`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Merge {
    pub a: usize,
    pub b: usize,
    /// Mean latency between all members of `a` and all members of `b`.
    pub height: f64,
}

/// UPGMA over a symmetric distance matrix. O(n³) time, O(n²) memory: 256 CPUs take a few
/// milliseconds, 1024 about a second.
pub fn average_linkage(d: &[Vec<f64>]) -> Vec<Merge> {
    let n = d.len();
    let mut dist: Vec<Vec<f64>> = d.to_vec();
    let mut size = vec![1usize; n];
    let mut id: Vec<usize> = (0..n).collect();
    let mut active: Vec<bool> = vec![true; n];
    let mut merges = Vec::with_capacity(n.saturating_sub(1));
    for step in 0..n.saturating_sub(1) {
        let mut best = (f64::INFINITY, 0, 0);
        for i in 0..n {
            if !active[i] {
                continue;
            }
            for j in (i + 1)..n {
                if active[j] && dist[i][j] < best.0 {
                    best = (dist[i][j], i, j);
                }
            }
        }
        let (h, i, j) = best;
        merges.push(Merge {
            a: id[i],
            b: id[j],
            height: h,
        });
        // Lance–Williams update for average linkage; the merged cluster takes slot i.
        let (si, sj) = (size[i] as f64, size[j] as f64);
        for k in 0..n {
            if active[k] && k != i && k != j {
                let v = (si * dist[i][k] + sj * dist[j][k]) / (si + sj);
                dist[i][k] = v;
                dist[k][i] = v;
            }
        }
        size[i] += size[j];
        active[j] = false;
        id[i] = n + step;
    }
    merges
}

/// The clusters after the first `k` merges, each sorted, ordered by first member.
pub fn partition_after(n: usize, merges: &[Merge], k: usize) -> Vec<Vec<usize>> {
    let mut members: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    let mut alive = vec![true; n + merges.len()];
    for m in &merges[..k] {
        let mut v = std::mem::take(&mut members[m.a]);
        v.append(&mut std::mem::take(&mut members[m.b]));
        alive[m.a] = false;
        alive[m.b] = false;
        members.push(v);
    }
    let mut out: Vec<Vec<usize>> = members
        .into_iter()
        .enumerate()
        .filter(|(i, v)| alive[*i] && !v.is_empty())
        .map(|(_, v)| v)
        .collect();
    for v in &mut out {
        v.sort_unstable();
    }
    out.sort_by_key(|v| v[0]);
    out
}

/// Numbers of merges `k` after which the next merge height jumps by at least `min_ratio`
/// relative to the previous one: candidate level boundaries, lowest first.
pub fn jumps(merges: &[Merge], min_ratio: f64) -> Vec<usize> {
    let mut out = Vec::new();
    for k in 1..merges.len() {
        let (lo, hi) = (merges[k - 1].height, merges[k].height);
        if lo > 0.0 && hi >= lo * min_ratio {
            out.push(k);
        } else if lo <= 0.0 && hi > 0.0 {
            // Zero-latency pairs (a file listing one CPU twice) form their own level.
            out.push(k);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(n: usize, inner: usize, near: f64, far: f64) -> Vec<Vec<f64>> {
        (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if i == j {
                            0.0
                        } else if i / inner == j / inner {
                            near
                        } else {
                            far
                        }
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn finds_the_block_level() {
        let d = blocks(8, 4, 10.0, 50.0);
        let m = average_linkage(&d);
        assert_eq!(m.len(), 7);
        assert_eq!(jumps(&m, 1.2), vec![6]);
        assert_eq!(
            partition_after(8, &m, 6),
            vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]
        );
        assert!(m.windows(2).all(|w| w[0].height <= w[1].height));
    }
}
