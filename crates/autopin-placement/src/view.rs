//! The machine as placement sees it: only allowed PUs, and the orders the policies and
//! expressions are built from (logical, cores-first, scatter).

use autopin_topology::{CpuSet, Machine, ObjId, ObjType};

pub(crate) struct View<'a> {
    pub m: &'a Machine,
    /// Allowed PUs (object ids) in logical order: the threads of a core are adjacent.
    pub pus: Vec<ObjId>,
    pub allowed: CpuSet,
}

impl<'a> View<'a> {
    pub fn new(m: &'a Machine) -> Self {
        let pus: Vec<ObjId> = m.pus().into_iter().filter(|&p| is_allowed(m, p)).collect();
        let allowed = pus.iter().filter_map(|&p| m.obj(p).os_index).collect();
        View { m, pus, allowed }
    }

    pub fn os(&self, pu: ObjId) -> u32 {
        self.m.obj(pu).os_index.unwrap_or(0)
    }

    pub fn oses(&self, pus: &[ObjId]) -> Vec<u32> {
        pus.iter().map(|&p| self.os(p)).collect()
    }

    /// The core of a PU (the PU itself when the model has no core object above it).
    pub fn core_of(&self, pu: ObjId) -> ObjId {
        self.m.ancestor_of_type(pu, ObjType::Core).unwrap_or(pu)
    }

    /// Allowed PUs inside an object, in logical order.
    pub fn pus_in(&self, obj: ObjId) -> Vec<ObjId> {
        let set = &self.m.obj(obj).cpuset;
        self.pus
            .iter()
            .copied()
            .filter(|&p| set.contains(self.os(p)))
            .collect()
    }

    /// Allowed PUs inside a CPU set, in logical order.
    pub fn pus_in_set(&self, set: &CpuSet) -> Vec<ObjId> {
        self.pus
            .iter()
            .copied()
            .filter(|&p| set.contains(self.os(p)))
            .collect()
    }

    /// Physical cores first: the first thread of every core (in the given order), then the
    /// second thread of every core that has one, and so on. Works for cores with different
    /// thread counts (hybrid CPUs, partly allowed cores).
    pub fn cores_first(&self, pus: &[ObjId]) -> Vec<ObjId> {
        let mut cores: Vec<(ObjId, Vec<ObjId>)> = Vec::new();
        for &p in pus {
            let c = self.core_of(p);
            match cores.iter_mut().find(|(id, _)| *id == c) {
                Some((_, v)) => v.push(p),
                None => cores.push((c, vec![p])),
            }
        }
        let rounds = cores.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
        let mut out = Vec::with_capacity(pus.len());
        for r in 0..rounds {
            out.extend(cores.iter().filter_map(|(_, v)| v.get(r).copied()));
        }
        out
    }

    /// Allowed PUs below `obj` spread as far apart as possible: the children of every object
    /// take turns, so consecutive threads land in different packages, then different caches,
    /// then different cores, and SMT siblings come last.
    pub fn scatter_order(&self, obj: ObjId) -> Vec<ObjId> {
        let o = self.m.obj(obj);
        if o.ty == ObjType::Pu {
            return if is_allowed(self.m, obj) {
                vec![obj]
            } else {
                Vec::new()
            };
        }
        let lists: Vec<Vec<ObjId>> = o
            .children
            .iter()
            .map(|&c| self.scatter_order(c))
            .filter(|l| !l.is_empty())
            .collect();
        interleave(&lists)
    }

    /// Packages that hold allowed PUs, in logical order; a machine without package objects
    /// counts as one package (the root).
    pub fn packages(&self) -> Vec<ObjId> {
        let p: Vec<ObjId> = self
            .m
            .objects_of(ObjType::Package)
            .into_iter()
            .filter(|&p| !self.pus_in(p).is_empty())
            .collect();
        if p.is_empty() {
            vec![0]
        } else {
            p
        }
    }
}

pub(crate) fn is_allowed(m: &Machine, pu: ObjId) -> bool {
    m.obj(pu).pu.as_ref().is_none_or(|a| a.allowed && a.online)
}

/// Round-robin merge: first elements of every list, then second elements, ...
pub(crate) fn interleave<T: Copy>(lists: &[Vec<T>]) -> Vec<T> {
    let longest = lists.iter().map(|l| l.len()).max().unwrap_or(0);
    let mut out = Vec::with_capacity(lists.iter().map(|l| l.len()).sum());
    for r in 0..longest {
        out.extend(lists.iter().filter_map(|l| l.get(r).copied()));
    }
    out
}
