//! Shape inference from connectivity alone, and rings and lines built on the shape.
//!
//! Files may have arbitrary chip ids and no coordinates, so the shape is read off the simple
//! chip graph (one edge per connected pair):
//! - a path is a **line**, a cycle a **ring** (a 4-cycle is reported as the 2x2 mesh it is);
//! - a **mesh** R x C is recognised from a corner: the distances to it and to the nearest other
//!   corner give every chip's coordinates, which are then checked edge by edge;
//! - a **torus** R x C (R, C >= 3) is recognised from "straight" walks: at every chip the four
//!   neighbours pair up into opposite directions (the pair with no common neighbour but the
//!   chip, or adjacent to each other in a 3-long dimension); walking straight gives the rings
//!   that are the rows and columns, which are then checked edge by edge. A 4x4 torus (which is
//!   a 4-cube, with no preferred pairing) may come out as irregular.
//!
//! When connectivity alone finds none of these and the file gives every chip coordinates that
//! fill an R x C grid whose every neighbouring pair is linked, the cluster is that **mesh**
//! with other links besides (a Blackhole Galaxy's links between trays: `mesh 4x8 and 10 other
//! pairs`).
//!
//! Everything else is **irregular**. All of it is linear or near-linear in the number of chips,
//! so a 64x64 mesh resolves in milliseconds.

use std::collections::VecDeque;
use std::fmt;

use crate::ids::ChipIdx;

/// A rows x columns arrangement of chips (`rows <= cols`), row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// `at[r * cols + c]` is the chip at row `r`, column `c`.
    pub at: Vec<ChipIdx>,
    /// Whether rows and columns wrap around.
    pub torus: bool,
    /// Linked pairs of chips that are not neighbours on the grid (a mesh read from the file's
    /// coordinates may have some; the fabric does not use them).
    pub other_pairs: usize,
}

impl Grid {
    /// The chip at row `r`, column `c`.
    pub fn chip(&self, r: usize, c: usize) -> ChipIdx {
        self.at[r * self.cols + c]
    }

    /// Each row left to right, then each column top to bottom.
    pub fn rows_and_columns(&self) -> Vec<Vec<ChipIdx>> {
        let rows = (0..self.rows).map(|r| (0..self.cols).map(|c| self.chip(r, c)).collect());
        let cols = (0..self.cols).map(|c| (0..self.rows).map(|r| self.chip(r, c)).collect());
        rows.chain(cols).collect()
    }

    /// A cycle through every chip along grid edges, if the grid has one: along row 0, snake
    /// back through the other rows over columns 1.., and return up column 0 (needs an even
    /// row count; the grid is transposed when only the column count is even). A torus with an
    /// odd number of chips has no such cycle here; the caller falls back to a search.
    pub fn hamiltonian_cycle(&self) -> Option<Vec<ChipIdx>> {
        let (rows, cols) = (self.rows, self.cols);
        let at = |r: usize, c: usize| self.chip(r, c);
        let (even_rows, get): (bool, Box<dyn Fn(usize, usize) -> ChipIdx>) = if rows % 2 == 0 {
            (true, Box::new(at))
        } else if cols % 2 == 0 {
            (false, Box::new(move |r, c| at(c, r)))
        } else {
            return None;
        };
        let (r_n, c_n) = if even_rows { (rows, cols) } else { (cols, rows) };
        if r_n < 2 || c_n < 2 {
            return None;
        }
        let mut cycle: Vec<ChipIdx> = (0..c_n).map(|c| get(0, c)).collect();
        for r in 1..r_n {
            if r % 2 == 1 {
                cycle.extend((1..c_n).rev().map(|c| get(r, c)));
            } else {
                cycle.extend((1..c_n).map(|c| get(r, c)));
            }
        }
        cycle.extend((1..r_n).rev().map(|r| get(r, 0)));
        Some(cycle)
    }
}

/// The shape of a cluster's chip graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One chip.
    Single,
    /// A chain of n chips.
    Line(usize),
    /// A cycle of n chips.
    Ring(usize),
    /// A 2D mesh.
    Mesh(Grid),
    /// A 2D torus.
    Torus(Grid),
    /// Anything else (including disconnected clusters).
    Irregular,
}

impl fmt::Display for Shape {
    /// `line 2`, `ring 8`, `mesh 2x4`, `torus 4x8`, `single`, `irregular`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Single => write!(f, "single"),
            Shape::Line(n) => write!(f, "line {n}"),
            Shape::Ring(n) => write!(f, "ring {n}"),
            Shape::Mesh(g) if g.other_pairs > 0 => {
                write!(f, "mesh {}x{} and {} other pairs", g.rows, g.cols, g.other_pairs)
            }
            Shape::Mesh(g) => write!(f, "mesh {}x{}", g.rows, g.cols),
            Shape::Torus(g) => write!(f, "torus {}x{}", g.rows, g.cols),
            Shape::Irregular => write!(f, "irregular"),
        }
    }
}

type Adj = [Vec<ChipIdx>];

fn deg(adj: &Adj, v: ChipIdx) -> usize {
    adj[v.0 as usize].len()
}

fn adjacent(adj: &Adj, a: ChipIdx, b: ChipIdx) -> bool {
    adj[a.0 as usize].binary_search(&b).is_ok()
}

fn bfs(adj: &Adj, from: ChipIdx) -> Vec<Option<usize>> {
    let mut dist = vec![None; adj.len()];
    dist[from.0 as usize] = Some(0);
    let mut q = VecDeque::from([from]);
    while let Some(v) = q.pop_front() {
        let d = dist[v.0 as usize].expect("queued");
        for &w in &adj[v.0 as usize] {
            if dist[w.0 as usize].is_none() {
                dist[w.0 as usize] = Some(d + 1);
                q.push_back(w);
            }
        }
    }
    dist
}

/// Infers the shape of the simple graph given by sorted neighbour lists.
pub(crate) fn infer(adj: &Adj) -> Shape {
    let n = adj.len();
    if n == 1 {
        return Shape::Single;
    }
    if bfs(adj, ChipIdx(0)).iter().any(Option::is_none) {
        return Shape::Irregular;
    }
    let edges: usize = adj.iter().map(Vec::len).sum::<usize>() / 2;
    let all = |d: usize| (0..n).all(|v| deg(adj, ChipIdx(v as u32)) == d);
    if edges == n - 1 && (0..n).all(|v| deg(adj, ChipIdx(v as u32)) <= 2) {
        return Shape::Line(n);
    }
    if let Some(g) = mesh(adj) {
        return Shape::Mesh(g);
    }
    if all(2) {
        return Shape::Ring(n);
    }
    if all(4) {
        if let Some(g) = torus(adj) {
            return Shape::Torus(g);
        }
    }
    Shape::Irregular
}

/// Orients and checks a coordinate assignment; returns the grid with `rows <= cols`.
fn grid_from_coords(
    adj: &Adj,
    coords: &[(usize, usize)],
    rows: usize,
    cols: usize,
    torus: bool,
) -> Option<Grid> {
    let n = adj.len();
    if rows * cols != n {
        return None;
    }
    let mut at = vec![None; n];
    for (v, &(r, c)) in coords.iter().enumerate() {
        if r >= rows || c >= cols || at[r * cols + c].replace(ChipIdx(v as u32)).is_some() {
            return None;
        }
    }
    let step = |a: usize, b: usize, len: usize| {
        let d = a.abs_diff(b);
        d == 1 || (torus && d == len - 1)
    };
    let mut edges = 0;
    for (v, nbrs) in adj.iter().enumerate() {
        let (r, c) = coords[v];
        for w in nbrs {
            let (r2, c2) = coords[w.0 as usize];
            let ok = (r == r2 && step(c, c2, cols)) || (c == c2 && step(r, r2, rows));
            if !ok {
                return None;
            }
            edges += 1;
        }
    }
    let expected = if torus { 2 * n } else { rows * (cols - 1) + cols * (rows - 1) };
    if edges / 2 != expected {
        return None;
    }
    let at: Vec<ChipIdx> = at.into_iter().collect::<Option<_>>()?;
    let grid = Grid { rows, cols, at, torus, other_pairs: 0 };
    Some(if rows <= cols { grid } else { transpose(&grid) })
}

fn transpose(g: &Grid) -> Grid {
    let at = (0..g.cols).flat_map(|c| (0..g.rows).map(move |r| (r, c))).map(|(r, c)| g.chip(r, c)).collect();
    Grid { rows: g.cols, cols: g.rows, at, torus: g.torus, other_pairs: g.other_pairs }
}

/// A mesh read off the file's coordinates (`(x, y)` per chip): they fill an R x C grid
/// (R, C >= 2) and every pair of grid neighbours is linked; linked pairs that are not grid
/// neighbours are counted, not refused.
pub(crate) fn mesh_from_coords(adj: &Adj, coords: &[(i64, i64)]) -> Option<Grid> {
    let n = adj.len();
    let (x0, y0) = (coords.iter().map(|c| c.0).min()?, coords.iter().map(|c| c.1).min()?);
    let cols = usize::try_from(coords.iter().map(|c| c.0).max()? - x0).ok()? + 1;
    let rows = usize::try_from(coords.iter().map(|c| c.1).max()? - y0).ok()? + 1;
    if rows < 2 || cols < 2 || rows * cols != n {
        return None;
    }
    let mut at = vec![None; n];
    for (v, &(x, y)) in coords.iter().enumerate() {
        let (r, c) = ((y - y0) as usize, (x - x0) as usize);
        if at[r * cols + c].replace(ChipIdx(v as u32)).is_some() {
            return None;
        }
    }
    let at: Vec<ChipIdx> = at.into_iter().collect::<Option<_>>()?;
    let mut grid = Grid { rows, cols, at, torus: false, other_pairs: 0 };
    for r in 0..rows {
        for c in 0..cols {
            let me = grid.chip(r, c);
            let right = c + 1 < cols && !adjacent(adj, me, grid.chip(r, c + 1));
            let down = r + 1 < rows && !adjacent(adj, me, grid.chip(r + 1, c));
            if right || down {
                return None;
            }
        }
    }
    let pairs: usize = adj.iter().map(Vec::len).sum::<usize>() / 2;
    grid.other_pairs = pairs - (rows * (cols - 1) + cols * (rows - 1));
    // Every row's and column's ends linked, and nothing else: the grid is a torus (a 4x4
    // torus, which connectivity alone cannot tell from a 4-cube, is one by its coordinates).
    let wraps = rows >= 3
        && cols >= 3
        && grid.other_pairs == rows + cols
        && (0..rows).all(|r| adjacent(adj, grid.chip(r, 0), grid.chip(r, cols - 1)))
        && (0..cols).all(|c| adjacent(adj, grid.chip(0, c), grid.chip(rows - 1, c)));
    if wraps {
        grid.torus = true;
        grid.other_pairs = 0;
    }
    Some(if rows <= cols { grid } else { transpose(&grid) })
}

/// Recognises an R x C mesh (R, C >= 2).
fn mesh(adj: &Adj) -> Option<Grid> {
    let n = adj.len();
    if (0..n).any(|v| deg(adj, ChipIdx(v as u32)) > 4) {
        return None;
    }
    let corners: Vec<ChipIdx> = (0..n).map(|v| ChipIdx(v as u32)).filter(|&v| deg(adj, v) == 2).collect();
    let &a = corners.first()?;
    let da = bfs(adj, a);
    let &b = corners.iter().filter(|&&c| c != a).min_by_key(|&&c| (da[c.0 as usize], c))?;
    let w = da[b.0 as usize]?;
    let db = bfs(adj, b);
    let mut coords = Vec::with_capacity(n);
    for v in 0..n {
        let (x, y) = (da[v]?, db[v]?);
        let x2 = (x + w).checked_sub(y)?;
        let y2 = (x + y).checked_sub(w)?;
        if x2 % 2 != 0 || y2 % 2 != 0 {
            return None;
        }
        // Row along the a -> b direction's normal; column along a -> b.
        coords.push((y2 / 2, x2 / 2));
    }
    let rows = coords.iter().map(|&(r, _)| r).max()? + 1;
    grid_from_coords(adj, &coords, rows, w + 1, false)
}

/// Whether `x` and `y` (both neighbours of `cur`) close a square: share a neighbour besides `cur`.
fn squares(adj: &Adj, cur: ChipIdx, x: ChipIdx, y: ChipIdx) -> bool {
    adj[x.0 as usize].iter().any(|&z| z != cur && adjacent(adj, z, y))
}

/// The neighbour of `cur` opposite to `prev` in a 4-regular grid-like graph.
///
/// The two perpendicular neighbours each close a square with `prev`; the opposite one does
/// not, unless the dimension is 3 long (then it is adjacent to `prev`) or 4 long (then it closes
/// a square through the chip two steps away, and is told apart as the one neighbour that closes
/// squares with both perpendicular ones). `None` when the graph gives no answer (a 4x4 torus).
fn straight(adj: &Adj, prev: ChipIdx, cur: ChipIdx) -> Option<ChipIdx> {
    let others: Vec<ChipIdx> = adj[cur.0 as usize].iter().copied().filter(|&w| w != prev).collect();
    if others.len() != 3 {
        return None;
    }
    let only = |v: Vec<ChipIdx>| if let [w] = v[..] { Some(w) } else { None };
    if let Some(w) = only(others.iter().copied().filter(|&w| adjacent(adj, w, prev)).collect()) {
        return Some(w);
    }
    let no_square: Vec<ChipIdx> = others.iter().copied().filter(|&w| !squares(adj, cur, w, prev)).collect();
    if !no_square.is_empty() {
        return only(no_square);
    }
    only(
        others
            .iter()
            .copied()
            .filter(|&w| others.iter().filter(|&&o| o != w).all(|&o| squares(adj, cur, w, o)))
            .collect(),
    )
}

fn walk_ring(adj: &Adj, start: ChipIdx, first: ChipIdx) -> Option<Vec<ChipIdx>> {
    let mut ring = vec![start, first];
    loop {
        let (prev, cur) = (ring[ring.len() - 2], ring[ring.len() - 1]);
        let next = straight(adj, prev, cur)?;
        if next == start {
            return Some(ring);
        }
        if ring.len() > adj.len() {
            return None;
        }
        ring.push(next);
    }
}

/// Recognises an R x C torus (R, C >= 3) in a 4-regular graph.
fn torus(adj: &Adj) -> Option<Grid> {
    let n = adj.len();
    let o = ChipIdx(0);
    let nbrs = &adj[0];
    let a = nbrs[0];
    let row = walk_ring(adj, o, a)?;
    let opposite_a = straight(adj, a, o)?;
    let b = *nbrs.iter().find(|&&w| w != a && w != opposite_a)?;
    let cols = row.len();
    let rows = n / cols;
    if rows < 3 || cols < 3 {
        return None;
    }
    let mut coords = vec![(usize::MAX, usize::MAX); n];
    let mut above = b; // chip at (row 1, column c-1)
    for (c, &x) in row.iter().enumerate() {
        let up = if c == 0 {
            b
        } else {
            *adj[x.0 as usize].iter().find(|&&w| adjacent(adj, w, above) && !row.contains(&w))?
        };
        let column = walk_ring(adj, x, up)?;
        if column.len() != rows {
            return None;
        }
        for (r, &v) in column.iter().enumerate() {
            coords[v.0 as usize] = (r, c);
        }
        above = up;
    }
    grid_from_coords(adj, &coords, rows, cols, true)
}

/// The chips of a cycle graph in cycle order, from chip 0 towards its lower neighbour.
pub(crate) fn cycle_order(adj: &Adj) -> Vec<ChipIdx> {
    let mut order = vec![ChipIdx(0)];
    let mut prev = ChipIdx(0);
    let mut cur = adj[0][0];
    while cur != ChipIdx(0) {
        order.push(cur);
        let next = *adj[cur.0 as usize].iter().find(|&&w| w != prev).expect("a cycle");
        prev = cur;
        cur = next;
    }
    order
}

/// The chips of a path graph from its lower-indexed end.
pub(crate) fn line_order(adj: &Adj) -> Vec<ChipIdx> {
    let start =
        (0..adj.len()).map(|v| ChipIdx(v as u32)).find(|&v| deg(adj, v) <= 1).expect("a path has an end");
    let mut order = vec![start];
    let mut prev = None;
    let mut cur = start;
    while let Some(&next) = adj[cur.0 as usize].iter().find(|&&w| Some(w) != prev) {
        order.push(next);
        prev = Some(cur);
        cur = next;
    }
    order
}

/// Rotates a cycle to start at its lowest chip and to go towards the lower of its two
/// neighbours there, so equal cycles print the same.
pub(crate) fn canonical_cycle(mut cycle: Vec<ChipIdx>) -> Vec<ChipIdx> {
    let n = cycle.len();
    let start = (0..n).min_by_key(|&i| cycle[i]).expect("non-empty");
    cycle.rotate_left(start);
    if n > 2 && cycle[n - 1] < cycle[1] {
        cycle[1..].reverse();
    }
    cycle
}

/// Node expansions allowed to the cycle search before it gives up.
const SEARCH_BUDGET: usize = 200_000;

/// A bounded depth-first search for a cycle through every chip over edges where `usable`
/// holds, trying neighbours with the fewest onward options first (Warnsdorff's rule).
pub(crate) fn search_cycle(adj: &Adj, usable: &dyn Fn(ChipIdx, ChipIdx) -> bool) -> Option<Vec<ChipIdx>> {
    let n = adj.len();
    if n < 3 {
        return None;
    }
    let ok: Vec<Vec<ChipIdx>> =
        (0..n).map(|v| adj[v].iter().copied().filter(|&w| usable(ChipIdx(v as u32), w)).collect()).collect();
    let start = ChipIdx(0);
    let mut on_path = vec![false; n];
    let mut path = vec![start];
    on_path[0] = true;
    // Stack of candidate lists, one per path position.
    let mut stack: Vec<Vec<ChipIdx>> = vec![order_candidates(&ok, &on_path, start)];
    let mut budget = SEARCH_BUDGET;
    while let Some(cands) = stack.last_mut() {
        let cur = *path.last().expect("path holds the start");
        if path.len() == n {
            if ok[cur.0 as usize].contains(&start) {
                return Some(path);
            }
        } else if let Some(next) = cands.pop() {
            budget = budget.checked_sub(1)?;
            on_path[next.0 as usize] = true;
            path.push(next);
            let c = order_candidates(&ok, &on_path, next);
            stack.push(c);
            continue;
        }
        stack.pop();
        let last = path.pop().expect("non-empty");
        on_path[last.0 as usize] = false;
    }
    None
}

/// Unvisited neighbours of `v`, ordered so that `pop()` yields the most constrained first.
fn order_candidates(ok: &[Vec<ChipIdx>], on_path: &[bool], v: ChipIdx) -> Vec<ChipIdx> {
    let onward = |w: ChipIdx| ok[w.0 as usize].iter().filter(|x| !on_path[x.0 as usize]).count();
    let mut c: Vec<ChipIdx> = ok[v.0 as usize].iter().copied().filter(|w| !on_path[w.0 as usize]).collect();
    c.sort_by_key(|&w| (std::cmp::Reverse(onward(w)), std::cmp::Reverse(w)));
    c
}
