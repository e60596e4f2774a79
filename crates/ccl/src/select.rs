//! Algorithm selection as MPICH's collective selection framework (Csel) does it: a tree of
//! conditions with algorithms at the leaves, read from YAML, pruned when a communicator is
//! known so that each call walks only what can still apply.
//!
//! ```yaml
//! collective=reduce-scatter:        # a condition; its value is the subtree it guards
//!   stack=fabric:
//!     topology=ring:
//!       coll_size<=2: {algorithm: ring}
//!       coll_size=any:
//!         msg_size<=524288: {algorithm: direct}
//!         msg_size=any: {algorithm: ring, workers: 2}   # a leaf: an algorithm and knobs
//!     topology=any: {algorithm: ring}
//!   stack=any: {algorithm: auto}
//! ```
//!
//! The first sibling whose condition holds is taken. Conditions: `collective=NAME`
//! (`meshsim op`'s names; combine runs as reduce), `coll_size<=N`, `coll_size=pow2`,
//! `msg_size<=N` (the call's nccl-tests size, bytes), `topology=ring|line`, `stack=fabric|edm`,
//! and `X=any` for each. As the seed asks, siblings test one variable, and every subtree but a
//! list of collectives is complete: its last sibling is `X=any`. A collective the tree does
//! not name runs the library's defaults. A leaf's `algorithm` is `auto` (the library's own rule,
//! tt-metal's where it has the collective) or one the collective runs on that stack; its knobs
//! (`links`, `workers`, `packet_size`, `bidir`) fill only what the caller left unset.

use std::fmt;

pub use crate::op::Algorithm;
use crate::op::{Bidir, Collective, Stack, Topology};

impl Algorithm {
    /// The algorithms `collective` (as a tree names it) runs on `stack`, `auto` first: what
    /// the stack's transport says ([`crate::transport::Transport::algorithms`]); on no stack in
    /// particular, the fabric's (the EDM's `auto` is among them).
    pub fn choices(collective: &str, stack: Option<Stack>) -> &'static [Algorithm] {
        match Collective::named(collective) {
            Some(c) => crate::stacks::transport(stack.unwrap_or(Stack::Fabric)).algorithms(c),
            None => &[Algorithm::Auto],
        }
    }
}

/// What a leaf chooses: an algorithm and knobs (`None`: the library's default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Choice {
    /// The algorithm (`None` is `auto`).
    pub algorithm: Option<Algorithm>,
    /// Links per hop.
    pub links: Option<usize>,
    /// Workers per link and direction.
    pub workers: Option<usize>,
    /// The fabric's packet payload, bytes.
    pub packet_bytes: Option<u64>,
    /// Bidirectional mode.
    pub bidir: Option<Bidir>,
}

impl fmt::Display for Choice {
    /// A leaf's keys as the tree writes them: `algorithm: ring, workers: 2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "algorithm: {}", self.algorithm.unwrap_or(Algorithm::Auto))?;
        if let Some(l) = self.links {
            write!(f, ", links: {l}")?;
        }
        if let Some(w) = self.workers {
            write!(f, ", workers: {w}")?;
        }
        if let Some(p) = self.packet_bytes {
            write!(f, ", packet_size: {p}")?;
        }
        if let Some(b) = self.bidir {
            write!(f, ", bidir: {b}")?;
        }
        Ok(())
    }
}

/// The variable a condition tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Var {
    Collective,
    CollSize,
    MsgSize,
    Topology,
    Stack,
}

impl Var {
    fn name(self) -> &'static str {
        match self {
            Var::Collective => "collective",
            Var::CollSize => "coll_size",
            Var::MsgSize => "msg_size",
            Var::Topology => "topology",
            Var::Stack => "stack",
        }
    }

    /// Known when a communicator is made (so pruned then).
    fn is_static(self) -> bool {
        matches!(self, Var::CollSize | Var::Topology | Var::Stack)
    }
}

/// A condition of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Cond {
    Collective(String),
    CollSizeLe(u64),
    CollSizePow2,
    MsgSizeLe(u64),
    Topology(Topology),
    Stack(Stack),
    Any(Var),
}

/// The collectives a tree may name.
fn collective_names() -> impl Iterator<Item = &'static str> {
    Collective::ALL.into_iter().map(Collective::name)
}

impl Cond {
    fn var(&self) -> Var {
        match self {
            Cond::Collective(_) => Var::Collective,
            Cond::CollSizeLe(_) | Cond::CollSizePow2 => Var::CollSize,
            Cond::MsgSizeLe(_) => Var::MsgSize,
            Cond::Topology(_) => Var::Topology,
            Cond::Stack(_) => Var::Stack,
            Cond::Any(v) => *v,
        }
    }

    fn parse(key: &str) -> Result<Cond, String> {
        let unknown = || {
            format!(
                "unknown condition '{key}' (collective=NAME, coll_size<=N, coll_size=pow2, msg_size<=N, topology=ring|line, stack=fabric|edm, or X=any)"
            )
        };
        let number = |v: &str| v.parse::<u64>().map_err(|_| format!("'{key}': '{v}' is not a whole number"));
        if let Some(v) = key.strip_prefix("coll_size<=") {
            return Ok(Cond::CollSizeLe(number(v)?));
        }
        if let Some(v) = key.strip_prefix("msg_size<=") {
            return Ok(Cond::MsgSizeLe(number(v)?));
        }
        let (var, value) = key.split_once('=').ok_or_else(unknown)?;
        let var = match var {
            "collective" => Var::Collective,
            "coll_size" => Var::CollSize,
            "msg_size" => Var::MsgSize,
            "topology" => Var::Topology,
            "stack" => Var::Stack,
            _ => return Err(unknown()),
        };
        if value == "any" {
            return Ok(Cond::Any(var));
        }
        match var {
            Var::Collective if Collective::named(value).is_some() => Ok(Cond::Collective(value.to_owned())),
            Var::Collective => Err(format!(
                "'{key}': unknown collective '{value}' ({})",
                collective_names().collect::<Vec<_>>().join(", ")
            )),
            Var::CollSize if value == "pow2" => Ok(Cond::CollSizePow2),
            Var::Topology => Ok(Cond::Topology(value.parse().map_err(|e| format!("'{key}': {e}"))?)),
            Var::Stack => Ok(Cond::Stack(value.parse().map_err(|e| format!("'{key}': {e}"))?)),
            _ => Err(unknown()),
        }
    }

    fn holds(&self, at: &Point) -> Option<bool> {
        Some(match self {
            Cond::Any(_) => true,
            Cond::Collective(c) => c == at.collective.as_deref()?,
            Cond::CollSizeLe(n) => at.coll_size? as u64 <= *n,
            Cond::CollSizePow2 => at.coll_size?.is_power_of_two(),
            Cond::MsgSizeLe(n) => at.msg_size? <= *n,
            Cond::Topology(t) => *t == at.topology?,
            Cond::Stack(s) => *s == at.stack?,
        })
    }
}

impl fmt::Display for Cond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cond::Collective(c) => write!(f, "collective={c}"),
            Cond::CollSizeLe(n) => write!(f, "coll_size<={n}"),
            Cond::CollSizePow2 => write!(f, "coll_size=pow2"),
            Cond::MsgSizeLe(n) => write!(f, "msg_size<={n}"),
            Cond::Topology(t) => write!(f, "topology={t}"),
            Cond::Stack(s) => write!(f, "stack={s}"),
            Cond::Any(v) => write!(f, "{}=any", v.name()),
        }
    }
}

/// A node: conditions with their subtrees, in order, or a leaf.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Branch(Vec<(Cond, Node)>),
    Leaf(Choice),
}

impl Node {
    fn count(&self) -> usize {
        match self {
            Node::Leaf(_) => 1,
            Node::Branch(kids) => 1 + kids.iter().map(|(_, n)| n.count()).sum::<usize>(),
        }
    }
}

/// What is known of a call: at communicator creation the static part, at the call all of it.
#[derive(Clone, Debug, Default)]
struct Point {
    collective: Option<String>,
    coll_size: Option<usize>,
    msg_size: Option<u64>,
    topology: Option<Topology>,
    stack: Option<Stack>,
}

/// A selection tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Select {
    root: Node,
}

/// The tree meshsim embeds: tt-metal's choices where it has the collective.
pub const DEFAULT_TREE: &str = include_str!("../../../configs/select/default.yaml");

impl Select {
    /// The embedded default tree.
    pub fn default_tree() -> Select {
        Select::parse(DEFAULT_TREE).expect("the embedded selection tree is valid")
    }

    /// Reads a tree from YAML text; a malformed one is an error naming the node.
    pub fn parse(text: &str) -> Result<Select, String> {
        let value: serde_yaml::Value = meshsim_topology::input::from_yaml(text).map_err(|e| e.to_string())?;
        let root = node(&value, &mut Vec::new(), &[])?;
        if matches!(root, Node::Leaf(_)) {
            return Err("the tree is a single leaf: start with conditions (collective=...)".into());
        }
        Ok(Select { root })
    }

    /// Nodes in the tree (conditions and leaves, the root counted).
    pub fn nodes(&self) -> usize {
        self.root.count()
    }

    /// The tree for calls on a communicator of `coll_size` ranks on `topology` over `stack`:
    /// conditions on those are resolved and their branches that cannot apply removed.
    pub fn prune(&self, coll_size: usize, topology: Topology, stack: Stack) -> Select {
        let at = Point {
            coll_size: Some(coll_size),
            topology: Some(topology),
            stack: Some(stack),
            ..Point::default()
        };
        Select { root: prune(&self.root, &at).unwrap_or(Node::Branch(Vec::new())) }
    }

    /// The choice for `collective` with a message of `msg_size` bytes on a communicator of
    /// `coll_size` ranks on `topology` over `stack`: the leaf the walk reaches, or the
    /// library's defaults when no branch applies.
    pub fn choose(
        &self,
        collective: Collective,
        coll_size: usize,
        msg_size: u64,
        topology: Topology,
        stack: Stack,
    ) -> Choice {
        let at = Point {
            collective: Some(collective.name().to_owned()),
            coll_size: Some(coll_size),
            msg_size: Some(msg_size),
            topology: Some(topology),
            stack: Some(stack),
        };
        let mut n = &self.root;
        loop {
            match n {
                Node::Leaf(c) => return *c,
                Node::Branch(kids) => match kids.iter().find(|(c, _)| c.holds(&at) == Some(true)) {
                    Some((_, next)) => n = next,
                    None => return Choice::default(),
                },
            }
        }
    }

    /// The tree as YAML, in the format [`Select::parse`] reads.
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        write_node(&self.root, 0, &mut out);
        out
    }

    /// This tree with `collective`'s subtree replaced by `subtree` (conditions on the other
    /// variables, as `tune` writes them), placed first.
    pub fn with_collective(&self, collective: &str, subtree: Select) -> Select {
        let mut kids = vec![(Cond::Collective(collective.to_owned()), subtree.root)];
        if let Node::Branch(old) = &self.root {
            kids.extend(old.iter().filter(|(c, _)| *c != Cond::Collective(collective.to_owned())).cloned());
        }
        Select { root: Node::Branch(kids) }
    }

    /// The subtree `collective` takes from the top level, as a tree of its own (a leaf of
    /// defaults when the tree does not name it).
    pub fn collective(&self, collective: &str) -> Select {
        let Node::Branch(kids) = &self.root else { return self.clone() };
        let hit = kids.iter().find(|(c, _)| {
            matches!(c, Cond::Collective(x) if x == collective) || *c == Cond::Any(Var::Collective)
        });
        Select { root: hit.map_or(Node::Leaf(Choice::default()), |(_, n)| n.clone()) }
    }

    /// A tree built by `tune`: for a communicator of exactly `coll_size` ranks on `topology`
    /// over `stack`, `steps` (`(largest msg_size, choice)` in increasing size, the last taken
    /// for every larger message too); everything else goes to `otherwise`.
    pub fn tuned(
        coll_size: usize,
        topology: Topology,
        stack: Stack,
        steps: &[(u64, Choice)],
        otherwise: &Select,
    ) -> Select {
        let mut sizes: Vec<(Cond, Node)> = Vec::new();
        for (i, &(size, choice)) in steps.iter().enumerate() {
            let cond = if i + 1 == steps.len() { Cond::Any(Var::MsgSize) } else { Cond::MsgSizeLe(size) };
            sizes.push((cond, Node::Leaf(choice)));
        }
        let fallback = otherwise.root.clone();
        let mut by_size = Vec::new();
        if coll_size > 1 {
            by_size.push((Cond::CollSizeLe(coll_size as u64 - 1), fallback.clone()));
        }
        by_size.push((Cond::CollSizeLe(coll_size as u64), Node::Branch(sizes)));
        by_size.push((Cond::Any(Var::CollSize), fallback.clone()));
        let by_topology = vec![
            (Cond::Topology(topology), Node::Branch(by_size)),
            (Cond::Any(Var::Topology), fallback.clone()),
        ];
        let by_stack =
            vec![(Cond::Stack(stack), Node::Branch(by_topology)), (Cond::Any(Var::Stack), fallback)];
        Select { root: Node::Branch(by_stack) }
    }
}

/// Reads one node at `path` (conditions from the root, for messages) under `collectives`
/// (the collective conditions on the way, whose algorithms a leaf must name).
fn node(v: &serde_yaml::Value, path: &mut Vec<String>, collectives: &[String]) -> Result<Node, String> {
    let here = |path: &[String]| if path.is_empty() { "the tree".to_owned() } else { path.join(" > ") };
    let map = v.as_mapping().ok_or_else(|| {
        format!("{}: a node is a mapping of conditions, or a leaf with an algorithm", here(path))
    })?;
    if map.contains_key("algorithm") {
        return leaf(map, path, collectives).map(Node::Leaf);
    }
    if map.is_empty() {
        return Err(format!("{}: an empty node (give conditions, or a leaf with an algorithm)", here(path)));
    }
    let mut kids: Vec<(Cond, Node)> = Vec::new();
    for (k, sub) in map {
        let key = k.as_str().ok_or_else(|| format!("{}: a condition is a string", here(path)))?;
        let cond = Cond::parse(key).map_err(|e| format!("{}: {e}", here(path)))?;
        path.push(key.to_owned());
        if let Some((first, _)) = kids.first().filter(|(c, _)| c.var() != cond.var()) {
            return Err(format!(
                "{}: siblings test one variable, but '{first}' tests {} and '{cond}' {}",
                here(path),
                first.var().name(),
                cond.var().name()
            ));
        }
        if let Some((prev, _)) = kids.iter().find(|(p, _)| shadows(p, &cond)) {
            return Err(format!("{}: unreachable: '{prev}' before it takes every case it would", here(path)));
        }
        let mut under = collectives.to_vec();
        match &cond {
            Cond::Collective(c) => under = vec![c.clone()],
            Cond::Any(Var::Collective) => under = collective_names().map(str::to_owned).collect(),
            _ => {}
        }
        let n = node(sub, path, &under)?;
        path.pop();
        kids.push((cond, n));
    }
    let var = kids[0].0.var();
    if var != Var::Collective && kids.last().is_some_and(|(c, _)| *c != Cond::Any(var)) {
        return Err(format!(
            "{}: incomplete: the last of its {} conditions must be {}=any",
            here(path),
            var.name(),
            var.name()
        ));
    }
    Ok(Node::Branch(kids))
}

/// Whether `prev`, an earlier sibling, takes every case `next` would.
fn shadows(prev: &Cond, next: &Cond) -> bool {
    match (prev, next) {
        (Cond::Any(_), _) => true,
        (Cond::CollSizeLe(a), Cond::CollSizeLe(b)) | (Cond::MsgSizeLe(a), Cond::MsgSizeLe(b)) => a >= b,
        (a, b) => a == b,
    }
}

/// Reads a leaf: an algorithm every collective above it runs, and knobs.
fn leaf(map: &serde_yaml::Mapping, path: &[String], collectives: &[String]) -> Result<Choice, String> {
    let here = if path.is_empty() { "the tree".to_owned() } else { path.join(" > ") };
    let mut c = Choice::default();
    let stack =
        path.iter().rev().find_map(|p| p.strip_prefix("stack=")).and_then(|s| s.parse::<Stack>().ok());
    for (k, v) in map {
        let key = k.as_str().unwrap_or("");
        let text = || {
            v.as_str().map(str::to_owned).or_else(|| v.as_u64().map(|n| n.to_string())).unwrap_or_default()
        };
        let number = |what: &str| {
            v.as_u64()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{here}: {what} must be a whole number from 1, got '{}'", text()))
        };
        match key {
            "algorithm" => {
                let a: Algorithm = text().parse().map_err(|e| format!("{here}: {e}"))?;
                if collectives.is_empty() && a != Algorithm::Auto {
                    return Err(format!(
                        "{here}: algorithm '{a}' outside any collective=... (only auto applies to every collective)"
                    ));
                }
                if a != Algorithm::Auto && stack != Some(Stack::Fabric) {
                    return Err(format!(
                        "{here}: algorithm '{a}' needs a stack=fabric condition above it (the edm stack's plans follow the topology: auto)"
                    ));
                }
                if let Some(bad) = collectives.iter().find(|c| !Algorithm::choices(c, stack).contains(&a)) {
                    let stack_note = stack.map_or(String::new(), |s| format!(" on the {s} stack"));
                    let names: Vec<&str> =
                        Algorithm::choices(bad, stack).iter().map(|a| a.as_str()).collect();
                    return Err(format!(
                        "{here}: '{a}' is not an algorithm of {bad}{stack_note} ({})",
                        names.join(", ")
                    ));
                }
                c.algorithm = (a != Algorithm::Auto).then_some(a);
            }
            "links" => c.links = Some(number("links")? as usize),
            "workers" => c.workers = Some(number("workers")? as usize),
            "packet_size" => c.packet_bytes = Some(number("packet_size")?),
            "bidir" => c.bidir = Some(text().parse().map_err(|e| format!("{here}: {e}"))?),
            other => {
                return Err(format!(
                    "{here}: unknown leaf key '{other}' (algorithm, links, workers, packet_size, bidir)"
                ));
            }
        }
    }
    Ok(c)
}

/// `n` with the conditions `at` decides resolved: of siblings on a known variable only the
/// first that holds remains, in its parent's place; `None` when no branch can apply.
fn prune(n: &Node, at: &Point) -> Option<Node> {
    let Node::Branch(kids) = n else { return Some(n.clone()) };
    let var = kids.first()?.0.var();
    if var.is_static() {
        let (_, taken) = kids.iter().find(|(c, _)| c.holds(at) == Some(true))?;
        return prune(taken, at);
    }
    let kept: Vec<(Cond, Node)> = kids.iter().filter_map(|(c, k)| Some((c.clone(), prune(k, at)?))).collect();
    (!kept.is_empty()).then_some(Node::Branch(kept))
}

fn write_node(n: &Node, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    match n {
        Node::Leaf(c) => out.push_str(&format!(" {{{c}}}\n")),
        Node::Branch(kids) => {
            if depth > 0 {
                out.push('\n');
            }
            for (c, k) in kids {
                out.push_str(&format!("{pad}{c}:"));
                write_node(k, depth + 1, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::RedOp;

    #[test]
    fn the_default_tree_picks_tt_metals_direct_reduce_scatter_only_where_tt_metal_does() {
        let t = Select::default_tree();
        let rs = Collective::ReduceScatter(RedOp::Sum);
        let pick = |n, size, topo, stack| t.choose(rs, n, size, topo, stack).algorithm;
        assert_eq!(pick(8, 512 << 10, Topology::Ring, Stack::Fabric), Some(Algorithm::Direct));
        assert_eq!(pick(8, (512 << 10) + 1, Topology::Ring, Stack::Fabric), Some(Algorithm::Ring));
        assert_eq!(pick(2, 1024, Topology::Ring, Stack::Fabric), Some(Algorithm::Ring));
        assert_eq!(pick(8, 1024, Topology::Line, Stack::Fabric), Some(Algorithm::Ring));
        assert_eq!(pick(8, 1024, Topology::Ring, Stack::Edm), None);
        // A collective the tree leaves to the library.
        assert_eq!(
            t.choose(Collective::AllGather, 8, 1024, Topology::Ring, Stack::Fabric),
            Choice::default()
        );
    }

    #[test]
    fn pruning_for_a_communicator_leaves_only_what_a_call_can_still_take() {
        let t = Select::default_tree();
        let p = t.prune(8, Topology::Ring, Stack::Fabric);
        assert!(p.nodes() < t.nodes(), "{} of {}", p.nodes(), t.nodes());
        // Every choice is the same from the pruned tree.
        for c in [
            Collective::ReduceScatter(RedOp::Sum),
            Collective::Reduce { red: RedOp::Sum, root: 0 },
            Collective::AllGather,
        ] {
            for size in [1024, 512 << 10, 1 << 20, 1 << 30] {
                assert_eq!(
                    p.choose(c, 8, size, Topology::Ring, Stack::Fabric),
                    t.choose(c, 8, size, Topology::Ring, Stack::Fabric)
                );
            }
        }
        // The tree reads back as written.
        assert_eq!(Select::parse(&t.to_yaml()).unwrap(), t);
        let yaml = "collective=reduce-scatter:
  stack=fabric:
    coll_size<=4: {algorithm: ring}
    coll_size=pow2:
      msg_size<=1024: {algorithm: direct}
      msg_size=any: {algorithm: ring}
    coll_size=any: {algorithm: auto}
  stack=any: {algorithm: auto}
collective=all-gather:
  stack=fabric: {algorithm: relay}
  stack=any: {algorithm: auto}
";
        let s = Select::parse(yaml).unwrap();
        assert_eq!(s.nodes(), 12);
        // An 8-rank fabric ring keeps the collectives, pow2's size branches and the relay leaf.
        let p = s.prune(8, Topology::Ring, Stack::Fabric);
        assert_eq!(p.nodes(), 5);
        assert_eq!(
            p.to_yaml(),
            "collective=reduce-scatter:\n  msg_size<=1024: {algorithm: direct}\n  msg_size=any: {algorithm: ring}\ncollective=all-gather: {algorithm: relay}\n"
        );
        // On the edm stack each collective is one leaf.
        assert_eq!(s.prune(6, Topology::Line, Stack::Edm).nodes(), 3);
    }

    #[test]
    fn malformed_trees_name_the_node() {
        let bad = [
            (
                "collective=all-gather:\n  msg_sise<=4: {algorithm: auto}\n",
                "collective=all-gather: unknown condition 'msg_sise<=4'",
            ),
            (
                "collective=gather:\n  stack=fabric: {algorithm: relay}\n  stack=any: {algorithm: auto}\n",
                "collective=gather > stack=fabric: 'relay' is not an algorithm of gather on the fabric stack (auto, direct)",
            ),
            (
                "collective=all-gather:\n  msg_size<=4096: {algorithm: auto}\n",
                "collective=all-gather: incomplete: the last of its msg_size conditions must be msg_size=any",
            ),
            (
                "collective=all-gather:\n  msg_size<=4096: {algorithm: auto}\n  msg_size<=1024: {algorithm: auto}\n  msg_size=any: {algorithm: auto}\n",
                "collective=all-gather > msg_size<=1024: unreachable: 'msg_size<=4096' before it takes every case it would",
            ),
            (
                "collective=all-gather:\n  msg_size=any: {algorithm: auto}\n  msg_size<=1024: {algorithm: auto}\n",
                "unreachable: 'msg_size=any'",
            ),
            (
                "collective=all-gather:\n  msg_size<=4096: {algorithm: auto}\n  stack=any: {algorithm: auto}\n",
                "siblings test one variable",
            ),
            (
                "collective=reduce:\n  stack=any: {algorithm: auto, wokers: 2}\n",
                "collective=reduce > stack=any: unknown leaf key 'wokers'",
            ),
            ("collective=reduce:\n  stack=any: 3\n", "collective=reduce > stack=any: a node is a mapping"),
            (
                "coll_size<=4: {algorithm: direct}\ncoll_size=any: {algorithm: auto}\n",
                "coll_size<=4: algorithm 'direct' outside any collective",
            ),
            (
                "collective=gather: {algorithm: direct}\n",
                "collective=gather: algorithm 'direct' needs a stack=fabric condition",
            ),
            ("collective=allgather: {algorithm: auto}\n", "unknown collective 'allgather'"),
            ("algorithm: auto\n", "a single leaf"),
        ];
        for (yaml, want) in bad {
            let e = Select::parse(yaml).unwrap_err();
            assert!(e.contains(want), "{yaml}: {e}");
        }
    }
}
