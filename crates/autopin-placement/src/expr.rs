//! likwid-pin expressions → OS CPU ids in thread order.
//!
//! Forms (joined with `@`, each part contributes its CPUs in turn):
//! - `0-3,8` — physical CPU ids;
//! - `S1` — all of a domain's CPUs in logical order (threads of a core adjacent);
//! - `S1:0-3` or `L:S1:0-3` — logical indexes inside the domain, physical cores first;
//!   `L:0-3` means `L:N:0-3`;
//! - `E:S1:n[:chunk:stride]` — n threads taken `chunk` at a time, every `stride` positions, from
//!   the domain's logical order;
//! - `M:scatter[:n]` — round robin over all domains of a type (`N`, `S`, `D`, `C`, `M`), cores
//!   first inside each; `scatter` alone means `S:scatter`;
//! - `S:balanced[:n]` — n threads split evenly into consecutive blocks per domain, compactly
//!   (SMT siblings together) inside each; `cbalanced` fills cores first inside each domain;
//! - `G0:0-3`, `P:0000:3b:00.0:0-3`, `IF:ib0:0-3` — the CPUs local to a GPU (bus-id order),
//!   a PCI device or a device by its OS name, as a domain like the others.
//!
//! Unlike likwid-pin, a selection never wraps around: an index or count beyond a domain's
//! allowed CPUs is an error pointing at that number.

use autopin_topology::Machine;

use crate::cpulist::parse_items;
use crate::domains::{domains_of, find, valid_domains, Domain};
use crate::error::PlacementError;
use crate::view::{interleave, View};

const FORMS: &str = "valid forms: 0-3,8 (physical CPUs) | DOM | DOM:0-3 | L:DOM:0-3 | E:DOM:n[:chunk:stride] \
| T:scatter[:n] | T:balanced[:n] | T:cbalanced[:n], joined with @; DOM is N, S<i>, D<i>, C<i>, M<i>, G<i> (GPU), P:<bus id> or IF:<device>, T a domain type letter";

struct Ctx<'a> {
    expr: &'a str,
    view: View<'a>,
    ds: Vec<Domain>,
}

/// One `:`-separated field of a part, with its byte offset in the whole expression.
#[derive(Clone, Copy)]
struct Field<'a> {
    text: &'a str,
    pos: usize,
}

/// A pin expression with a thread count in front, `COUNT:EXPR`: `1:1` is one thread on
/// CPU 1, `2:S0:0-1` two threads on the first two CPUs of socket 0 (a number followed by a
/// colon is never a likwid-pin expression of its own, whose domains are letters). Returns
/// the count (None without one) and the CPUs in thread order. The count must be at least
/// 1; a count above the CPUs named wraps them as the list does.
pub fn team_expression(
    m: &Machine,
    expr: &str,
) -> Result<(Option<usize>, Vec<u32>), PlacementError> {
    let body = expr.trim_start();
    let lead = expr.len() - body.len();
    let digits = body.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 && body[digits..].starts_with(':') {
        let rest = &body[digits + 1..];
        let n: usize = body[..digits].parse().unwrap_or(0);
        if n == 0 {
            return Err(PlacementError::expr(
                expr,
                lead,
                "a thread count of 0",
                "COUNT:EXPR with a count of 1 or more, e.g. 1:1 for one thread on CPU 1",
            ));
        }
        let cpus = pin_expression(m, rest).map_err(|e| match e {
            PlacementError::Expr {
                position,
                message,
                valid,
                ..
            } => PlacementError::expr(expr, position + lead + digits + 1, message, valid),
            other => other,
        })?;
        return Ok((Some(n), cpus));
    }
    Ok((None, pin_expression(m, expr)?))
}

pub fn pin_expression(m: &Machine, expr: &str) -> Result<Vec<u32>, PlacementError> {
    let view = View::new(m);
    let ds = domains_of(&view);
    let ctx = Ctx { expr, view, ds };
    let lead = expr.len() - expr.trim_start().len();
    let body = expr.trim();
    if body.is_empty() {
        return Err(ctx.err(0, "empty expression", true));
    }
    let mut out = Vec::new();
    let mut offset = lead;
    for part in body.split('@') {
        let base = offset;
        offset += part.len() + 1;
        out.extend(ctx.part(part, base)?);
    }
    Ok(out)
}

impl<'a> Ctx<'a> {
    fn err(&self, position: usize, message: impl Into<String>, with_forms: bool) -> PlacementError {
        let valid = if with_forms {
            format!("{FORMS}\n{}", valid_domains(&self.ds))
        } else {
            valid_domains(&self.ds)
        };
        PlacementError::expr(self.expr, position, message, valid)
    }

    fn part(&self, text: &str, base: usize) -> Result<Vec<u32>, PlacementError> {
        if text.is_empty() {
            return Err(self.err(base, "empty part: nothing between '@' separators", true));
        }
        let mut fields = Vec::new();
        let mut pos = base;
        for t in text.split(':') {
            fields.push(Field { text: t, pos });
            pos += t.len() + 1;
        }
        let head = fields[0];
        if head.text.is_empty() {
            return Err(self.err(
                head.pos,
                "expected a domain, a keyword (E, L, scatter, balanced) or a CPU list",
                true,
            ));
        }
        if let Some(f) = fields.iter().skip(1).find(|f| f.text.is_empty()) {
            return Err(self.err(f.pos, "empty field after ':'", true));
        }
        let method = |f: &Field| {
            let t = f.text.to_ascii_lowercase();
            matches!(t.as_str(), "scatter" | "balanced" | "cbalanced").then_some(t)
        };
        if let Some(kw) = method(&head) {
            // `scatter[:n]` alone: over packages.
            if fields.len() > 2 {
                return Err(self.err(
                    fields[2].pos - 1,
                    "too many fields; expected scatter[:n]",
                    true,
                ));
            }
            return self.method(
                Field {
                    text: "S",
                    pos: head.pos,
                },
                &kw,
                fields.get(1).copied(),
            );
        }
        if fields.len() >= 2 {
            if let Some(kw) = method(&fields[1]) {
                if fields.len() > 3 {
                    return Err(self.err(
                        fields[3].pos - 1,
                        format!("too many fields; expected T:{kw}[:n]"),
                        true,
                    ));
                }
                return self.method(head, &kw, fields.get(2).copied());
            }
        }
        if head.text.eq_ignore_ascii_case("P") || head.text.eq_ignore_ascii_case("IF") {
            return self.device(head, &fields);
        }
        if head.text.eq_ignore_ascii_case("E") {
            return self.e_expr(&fields);
        }
        if head.text.eq_ignore_ascii_case("L") {
            return match fields.len() {
                2 => self.logical(
                    Field {
                        text: "N",
                        pos: head.pos,
                    },
                    fields[1],
                ),
                3 => self.logical(fields[1], fields[2]),
                1 => Err(self.err(head.pos + 1, "expected ':' and a domain after 'L'", true)),
                _ => Err(self.err(
                    fields[3].pos - 1,
                    "too many fields; expected L:DOM:list",
                    true,
                )),
            };
        }
        if head.text.as_bytes()[0].is_ascii_alphabetic() {
            return match fields.len() {
                1 => Ok(self.domain(head)?.cpus.clone()),
                2 => self.logical(head, fields[1]),
                _ => Err(self.err(
                    fields[2].pos - 1,
                    "too many fields; expected DOM:list",
                    true,
                )),
            };
        }
        if fields.len() > 1 {
            return Err(self.err(
                fields[1].pos - 1,
                "unexpected ':' after a physical CPU list",
                true,
            ));
        }
        self.physical(head)
    }

    fn domain(&self, f: Field) -> Result<&Domain, PlacementError> {
        let d = find(&self.ds, f.text).ok_or_else(|| {
            // A domain type without its number before a policy that was misspelt
            // (`M:scater`): say what was probably meant.
            let rest = self.expr[f.pos + f.text.len()..].trim_start_matches(':');
            let policy = rest.split(':').next().unwrap_or("");
            let hint = ["scatter"]
                .into_iter()
                .find(|p| policy != *p && !policy.is_empty() && strsim::levenshtein(policy, p) <= 2)
                .map(|p| format!(" (did you mean '{}:{p}'?)", f.text))
                .unwrap_or_default();
            let gpu = f.text.len() > 1
                && f.text.starts_with(['G', 'g'])
                && f.text[1..].bytes().all(|b| b.is_ascii_digit());
            let hint = match (gpu, self.view.m.gpus().len()) {
                (true, 0) => " (this machine description lists no GPU)".to_string(),
                (true, n) => format!(" (this machine has {n} GPU(s): G0-G{})", n - 1),
                _ => hint,
            };
            self.err(f.pos, format!("unknown domain '{}'{hint}", f.text), false)
        })?;
        if d.cpus.is_empty() {
            return Err(self.err(
                f.pos,
                format!("domain {} has no allowed CPUs", d.tag),
                false,
            ));
        }
        Ok(d)
    }

    /// `P:busid[:list]` and `IF:name[:list]`: the CPUs local to one I/O device. A bus id
    /// holds ':' itself (`domain:bus:device.function`, or `bus:device.function`).
    fn device(&self, head: Field, fields: &[Field]) -> Result<Vec<u32>, PlacementError> {
        let is_if = head.text.eq_ignore_ascii_case("IF");
        let Some(first) = fields.get(1) else {
            let what = if is_if {
                "a device name after 'IF' (e.g. IF:ib0)"
            } else {
                "a PCI bus id after 'P' (e.g. P:0000:3b:00.0)"
            };
            return Err(self.err(
                head.pos + head.text.len(),
                format!("expected ':' and {what}"),
                false,
            ));
        };
        let (tag, used) = if is_if {
            (format!("IF:{}", first.text), 1)
        } else {
            let joined = |n: usize| {
                fields
                    .get(1..1 + n)
                    .map(|f| f.iter().map(|x| x.text).collect::<Vec<_>>().join(":"))
            };
            let found = [3, 2].into_iter().find_map(|n| {
                joined(n)
                    .and_then(|t| autopin_topology::io::parse_busid(&t))
                    .map(|b| (format!("P:{b}"), n))
            });
            found.ok_or_else(|| {
                self.err(
                    first.pos,
                    "expected a PCI bus id (domain:bus:device.function in hex, a domain of up to 8 digits, e.g. 0000:3b:00.0 or 10000:01:00.0, or bus:device.function)",
                    false,
                )
            })?
        };
        if let Some(extra) = fields.get(2 + used) {
            return Err(self.err(
                extra.pos - 1,
                format!("too many fields; expected {}:list", tag),
                false,
            ));
        }
        let d = find(&self.ds, &tag).ok_or_else(|| {
            let names = self.view.m.io_names();
            let there = if names.is_empty() {
                "this machine description has no I/O devices (synthetic machines have none; sysfs and hwloc XML do)".to_string()
            } else {
                format!("the devices here: {}", names.join("; "))
            };
            self.err(first.pos, format!("no device {tag} on this machine; {there}"), false)
        })?;
        if d.cpus.is_empty() {
            return Err(self.err(
                first.pos,
                format!("the CPUs local to {} are none of the allowed ones", d.tag),
                false,
            ));
        }
        match fields.get(1 + used) {
            None => Ok(d.cpus.clone()),
            Some(list) => self.logical_in(d, *list),
        }
    }

    fn number(&self, f: Field, what: &str) -> Result<usize, PlacementError> {
        if let Some((i, c)) = f.text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
            return Err(self.err(
                f.pos + i,
                format!("unexpected character '{c}'; expected the {what} (a number)"),
                true,
            ));
        }
        match f.text.parse::<usize>() {
            Ok(n) if (1..=1 << 20).contains(&n) => Ok(n),
            Ok(0) => Err(self.err(f.pos, format!("the {what} must be at least 1"), false)),
            _ => Err(self.err(
                f.pos,
                format!("the {what} '{}' is too large", f.text),
                false,
            )),
        }
    }

    fn logical(&self, dom: Field, list: Field) -> Result<Vec<u32>, PlacementError> {
        self.logical_in(self.domain(dom)?, list)
    }

    fn logical_in(&self, d: &Domain, list: Field) -> Result<Vec<u32>, PlacementError> {
        let items = parse_items(self.expr, list.text, list.pos, "index")?;
        let n = d.cores_first.len();
        let mut out = Vec::new();
        for it in items {
            for idx in it.values() {
                let Some(&cpu) = d.cores_first.get(idx as usize) else {
                    let at = if idx == it.first {
                        it.position
                    } else {
                        it.position + it.first.to_string().len() + 1
                    };
                    return Err(self.err(
                        at,
                        format!("index {idx} is outside domain {}, which has {n} allowed hardware threads (valid indexes 0-{})", d.tag, n - 1),
                        false,
                    ));
                };
                out.push(cpu);
            }
        }
        Ok(out)
    }

    fn e_expr(&self, fields: &[Field]) -> Result<Vec<u32>, PlacementError> {
        if fields.len() < 2 {
            return Err(self.err(
                fields[0].pos + 1,
                "expected ':' and a domain after 'E'",
                true,
            ));
        }
        let d = self.domain(fields[1])?;
        let len = d.cpus.len();
        let (count, chunk, stride) = match fields.len() {
            2 => (len, 1, 1),
            3 => (self.number(fields[2], "thread count")?, 1, 1),
            5 => (
                self.number(fields[2], "thread count")?,
                self.number(fields[3], "chunk size")?,
                self.number(fields[4], "stride")?,
            ),
            4 => {
                return Err(self.err(
                    fields[3].pos + fields[3].text.len(),
                    "expected ':' and a stride after the chunk size",
                    true,
                ))
            }
            _ => {
                return Err(self.err(
                    fields[5].pos - 1,
                    "too many fields; expected E:DOM:n[:chunk:stride]",
                    true,
                ))
            }
        };
        let mut out = Vec::with_capacity(count);
        let mut offset = 0usize;
        while out.len() < count {
            for j in 0..chunk {
                if out.len() == count {
                    break;
                }
                let Some(&cpu) = d.cpus.get(offset + j) else {
                    return Err(self.err(
                        fields.get(2).map_or(fields[1].pos, |f| f.pos),
                        format!(
                            "thread {} would need position {} of domain {}, which has {len} allowed hardware threads (likwid-pin would wrap around; autopin does not)",
                            out.len(),
                            offset + j,
                            d.tag
                        ),
                        false,
                    ));
                };
                out.push(cpu);
            }
            offset += stride;
        }
        Ok(out)
    }

    /// The domains a scatter/balanced selector names: a type letter means all domains of
    /// that type that have allowed CPUs; a full tag means that one domain.
    fn selected(&self, sel: Field) -> Result<Vec<&Domain>, PlacementError> {
        let t = sel.text;
        if t.len() == 1 {
            let kind = t.to_ascii_uppercase().chars().next().unwrap_or('?');
            let ds: Vec<&Domain> = self
                .ds
                .iter()
                .filter(|d| d.kind == kind && !d.cpus.is_empty())
                .collect();
            if ds.is_empty() {
                return Err(self.err(
                    sel.pos,
                    format!("unknown domain type '{t}'; valid types: N, S, D, C, M"),
                    false,
                ));
            }
            return Ok(ds);
        }
        Ok(vec![self.domain(sel)?])
    }

    fn method(
        &self,
        sel: Field,
        kw: &str,
        count: Option<Field>,
    ) -> Result<Vec<u32>, PlacementError> {
        let ds = self.selected(sel)?;
        let total: usize = ds.iter().map(|d| d.cpus.len()).sum();
        let n = match count {
            Some(f) => self.number(f, "thread count")?,
            None => total,
        };
        let count_pos = count.map_or(sel.pos, |f| f.pos);
        if n > total {
            return Err(self.err(count_pos, format!("{n} threads requested but the selected domains have {total} allowed hardware threads"), false));
        }
        if kw == "scatter" {
            let lists: Vec<Vec<u32>> = ds.iter().map(|d| d.cores_first.clone()).collect();
            return Ok(interleave(&lists).into_iter().take(n).collect());
        }
        // balanced / cbalanced: consecutive blocks, as even as the domains allow.
        let quotas = even_quotas(n, &ds.iter().map(|d| d.cpus.len()).collect::<Vec<_>>());
        let mut out = Vec::with_capacity(n);
        for (d, q) in ds.iter().zip(quotas) {
            let order = if kw == "cbalanced" {
                &d.cores_first
            } else {
                &d.cpus
            };
            out.extend(order.iter().take(q));
        }
        Ok(out)
    }

    fn physical(&self, f: Field) -> Result<Vec<u32>, PlacementError> {
        let items = parse_items(self.expr, f.text, f.pos, "CPU")?;
        let online = self.view.m.online_cpuset();
        let mut out = Vec::new();
        for it in items {
            for cpu in it.values() {
                if !self.view.allowed.contains(cpu) {
                    let at = if cpu == it.first {
                        it.position
                    } else {
                        it.position + it.first.to_string().len() + 1
                    };
                    let why = if online.contains(cpu) {
                        format!(
                            "CPU {cpu} is not in the allowed set ({})",
                            self.view.allowed
                        )
                    } else {
                        format!("CPU {cpu} does not exist or is offline on this machine (allowed CPUs: {})", self.view.allowed)
                    };
                    return Err(self.err(at, why, false));
                }
                out.push(cpu);
            }
        }
        Ok(out)
    }
}

/// Splits n threads over domains of the given capacities: n / d each, the remainder to the
/// first ones, and what a small domain cannot take moves on to the next ones with room.
pub(crate) fn even_quotas(n: usize, caps: &[usize]) -> Vec<usize> {
    let mut q = vec![0; caps.len()];
    let mut left = n;
    while left > 0 {
        let open: Vec<usize> = (0..caps.len()).filter(|&i| q[i] < caps[i]).collect();
        if open.is_empty() {
            break;
        }
        let share = (left / open.len()).max(1);
        for &i in &open {
            let take = share.min(caps[i] - q[i]).min(left);
            q[i] += take;
            left -= take;
            if left == 0 {
                break;
            }
        }
    }
    q
}

#[cfg(test)]
mod team_tests {
    use super::*;

    #[test]
    fn a_count_in_front_sets_the_threads_and_keeps_the_expression() {
        let m = autopin_topology::source::synthetic::parse("package:2 core:2 pu:1").unwrap();
        assert_eq!(team_expression(&m, "1:1").unwrap(), (Some(1), vec![1]));
        assert_eq!(
            team_expression(&m, "2:S1:0-1").unwrap(),
            (Some(2), vec![2, 3])
        );
        assert_eq!(team_expression(&m, "0,1").unwrap(), (None, vec![0, 1]));
        assert_eq!(team_expression(&m, "S0:0").unwrap(), (None, vec![0]));
        let e = team_expression(&m, "0:1").unwrap_err().to_string();
        assert!(e.contains("thread count of 0"), "{e}");
        // An error in the expression points into the whole text.
        match team_expression(&m, "2:S9:0").unwrap_err() {
            PlacementError::Expr { position, .. } => assert!(position >= 2, "{position}"),
            other => panic!("{other:?}"),
        }
    }
}
