#!/usr/bin/env python3
"""Checks that an `autopin run` report adds up, from its own fields alone.

usage: bench/check_report.py REPORT.json [...]   (exit 1 when a report breaks a rule)

Every index the report states names one of its candidates, with that candidate's label
(probes, decisions, the decision in force, the timeline); no cost is negative; a decision's
margin is its rate over the runner-up's; and a final pinning that stacks the program's
threads (a CPU named twice in its `cpus`) won by autopin's rule for risky decisions: its
rate over every other candidate's in that search, with Welch's 95% interval on the log of
the probes' tick rates (start-up probes left out), lies above zero. The interval is
computed here again from `probes[].ticks`, not taken from the report.
"""
import json
import math
import statistics
import sys

# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom.
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
       2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
       2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t95(df):
    if df >= 30:
        # Cornish-Fisher expansion about the normal quantile: within 0.001 above 30.
        z = 1.959964
        return z + (z ** 3 + z) / (4 * df)
    lo = max(1, int(math.floor(df)))
    hi = min(30, lo + 1)
    f = df - lo
    return T95[lo - 1] * (1 - f) + T95[hi - 1] * f


def evidence(report, search, cand, higher):
    """(work, time, log ticks) of a candidate's probes of a search, start-up left out."""
    work = time = 0.0
    logs = []
    for p in report["probes"]:
        if p["search"] != search or p["candidate"] != cand or p.get("startup"):
            continue
        if p["duration"] <= 0:
            continue
        score = p["rate"] if higher else (1 / p["rate"] if p["rate"] > 0 else 0)
        work += score * p["duration"]
        time += p["duration"]
        for t in p.get("ticks", []):
            s = t if higher else (1 / t if t > 0 else 0)
            if s > 0:
                logs.append(math.log(s))
    return work, time, logs


def significant_win(a, b):
    """Whether a's rate beats b's with the 95% interval above zero (as autopin reads it)."""
    (wa, ta, la), (wb, tb, lb) = a, b
    if ta <= 0 or tb <= 0 or wa <= 0 or wb <= 0:
        return False
    d = math.log((wa / ta) / (wb / tb))
    va = statistics.variance(la) if len(la) >= 2 else None
    vb = statistics.variance(lb) if len(lb) >= 2 else None
    if va is None and vb is None:
        return False
    da, db = len(la), len(lb)
    if va is None:
        if da < 1:
            return False
        va, dfa = vb, db
    else:
        dfa = da
    if vb is None:
        if db < 1:
            return False
        vb, dfb = va, dfa
    else:
        dfb = db
    ea, eb = va / da, vb / db
    se2 = ea + eb
    denom = ea * ea / max(dfa - 1, 1) + eb * eb / max(dfb - 1, 1)
    df = se2 * se2 / denom if denom > 0 else 1e6
    return d - t95(max(df, 1.0)) * math.sqrt(se2) > 0


def check(path):
    r = json.load(open(path))
    errors = []
    cands = r["candidates"]
    n = len(cands)
    label = lambda i: cands[i]["label"] if 0 <= i < n else None
    for i, c in enumerate(cands):
        if c["index"] != i:
            errors.append(f"candidate {i} says index {c['index']}")
    for p in r["probes"]:
        if label(p["candidate"]) != p["label"]:
            errors.append(f"probe at {p['start']:.2f} s: candidate {p['candidate']} is not {p['label']!r}")
    ds = list(r["decisions"]) + ([r["decision"]] if r.get("decision") else [])
    for d in ds:
        if label(d["candidate_index"]) != d["candidate"]:
            errors.append(f"decision at {d['at']:.2f} s: candidate_index {d['candidate_index']} is not {d['candidate']!r}")
        if d.get("search_cost") is not None and d["search_cost"] < 0:
            errors.append(f"decision at {d['at']:.2f} s: search_cost {d['search_cost']} < 0")
        if d.get("margin") is not None and d.get("rate") and d.get("runner_up_rate"):
            higher = r["objective"]["higher_is_better"]
            a, b = d["rate"], d["runner_up_rate"]
            want = a / b - 1 if higher else b / a - 1
            if abs(want - d["margin"]) > 1e-6 * max(1, abs(want)):
                errors.append(f"decision at {d['at']:.2f} s: margin {d['margin']} is not rate/runner_up_rate - 1 = {want}")
    for t in r["timeline"]:
        if t["candidate"] is not None and not 0 <= t["candidate"] < n:
            errors.append(f"timeline at {t['t']:.2f} s: candidate {t['candidate']} of {n}")
    if r.get("search_cost", 0) < 0:
        errors.append(f"search_cost {r['search_cost']} < 0")
    # The last decision of each phase is a pinning in force at some time: stacked ones must
    # have won by the rule.
    last = {}
    for d in r["decisions"]:
        last[d.get("phase")] = d
    stacked_finals = 0
    for phase, d in last.items():
        cpus = d.get("cpus")
        if not cpus or len(set(cpus)) == len(cpus) or d.get("strategy") == "memory":
            continue
        stacked_finals += 1
        higher = r["objective"]["higher_is_better"]
        mine = evidence(r, d["search"], d["candidate_index"], higher)
        for i, c in enumerate(cands):
            if i == d["candidate_index"]:
                continue
            cc = c.get("cpus")
            if cc is not None and len(set(cc)) < min(len(cc), len(cpus)):
                continue  # another stacked candidate
            other = evidence(r, d["search"], i, higher)
            if other[1] <= 0:
                continue
            if not significant_win(mine, other):
                errors.append(f"phase {phase}: stacked {d['candidate']!r} kept without a significant win over {c['label']!r}")
    return errors, stacked_finals


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        sys.exit(2)
    bad = 0
    for path in sys.argv[1:]:
        try:
            errors, stacked = check(path)
        except (OSError, ValueError, KeyError) as e:
            errors, stacked = [f"cannot read: {e}"], 0
        print(f"{path}: {'ok' if not errors else 'BROKEN'} ({stacked} stacked final pinning(s))")
        for e in errors:
            print(f"  {e}")
        bad += bool(errors)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
