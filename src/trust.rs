//! How far to trust a result: the accuracy record (`configs/accuracy.csv`, which
//! `meshsim calibrate --update-accuracy` writes; see `accuracy.rs`) as built into meshsim, read
//! back for the op at hand — the model's error against tt-metal's published points nearest to
//! it, and on the flow model its error against the packet model.

use meshsim_ccl::op::SimModel;

/// One calibration point in the record.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Point {
    /// The calibration set: link, fabric, ccl or blackhole (`meshsim calibrate`'s flags).
    pub(crate) set: String,
    /// The model that simulated it: packet or flow.
    pub(crate) model: String,
    /// The architecture of the machine it ran on.
    pub(crate) arch: String,
    /// What the table sums it under: a benchmark, or an op and topology.
    pub(crate) group: String,
    /// The point's `measure` as `calibrate` prints it.
    pub(crate) measure: String,
    pub(crate) size_bytes: u64,
    pub(crate) published: f64,
    pub(crate) simulated: f64,
    pub(crate) error_pct: f64,
    pub(crate) tolerance_pct: f64,
    pub(crate) ok: bool,
}

/// The set of the flow model's points against the packet model rather than hardware.
pub(crate) const FLOW_SET: &str = "flow-vs-packet";

/// A mean |error| at or above this is large: the prediction is read as trends and
/// bottlenecks rather than times (docs/guide.md, "How accurate it is").
pub(crate) const LARGE_ERROR_PCT: f64 = 10.0;

/// The record's name of an architecture.
pub(crate) fn arch_name(arch: meshsim_topology::Arch) -> &'static str {
    if arch == meshsim_topology::Arch::Blackhole { "Blackhole" } else { "Wormhole" }
}

/// The record as built into meshsim: `configs/accuracy.csv` at compile time.
pub(crate) fn built_in() -> &'static [Point] {
    static RECORD: std::sync::OnceLock<Vec<Point>> = std::sync::OnceLock::new();
    RECORD.get_or_init(|| {
        csv::Reader::from_reader(include_str!("../configs/accuracy.csv").as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap_or_default()
    })
}

/// How far to trust an op's prediction: the record's points nearest to it — tt-metal's published
/// measurements of the same op on the same architecture, on the same topology and number of
/// chips where there are some — and the model's error against them.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Trust {
    /// What the figures are of, e.g. `tt-metal's Wormhole sweep of all-gather on a ring of 8`;
    /// `None` when no published measurement of the op on the architecture is recorded.
    pub(crate) basis: Option<String>,
    /// How many published points.
    pub(crate) points: usize,
    /// How many of them the model meets within their tolerance.
    pub(crate) within_tolerance: usize,
    /// Their tolerance, percent (the largest, where they differ).
    pub(crate) tolerance_pct: Option<f64>,
    /// The model's mean |error| against them, percent.
    pub(crate) mean_abs_error_pct: Option<f64>,
    /// Its largest error, signed, percent.
    pub(crate) worst_error_pct: Option<f64>,
    /// Whether the mean |error| is large (at least [`LARGE_ERROR_PCT`]) or the op is not
    /// calibrated: the time is then an indication, not a figure to plan on.
    pub(crate) large: bool,
    /// On the flow model: its error against the packet model on the regression scenarios of
    /// the same op and architecture (`regress --model flow`); `None` on the packet model or
    /// where no such scenario runs.
    pub(crate) against_packet: Option<AgainstPacket>,
}

/// The flow model's error against the packet model on the regression scenarios of one op.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct AgainstPacket {
    /// How many scenarios.
    pub(crate) scenarios: usize,
    /// How many are within the flow model's bound (3 % from 1 MiB per rank, 10 % below).
    pub(crate) within_bound: usize,
    /// The mean |error|, percent.
    pub(crate) mean_abs_error_pct: f64,
    /// The largest error, signed, percent.
    pub(crate) worst_error_pct: f64,
}

/// Serializes a [`Trust`] as its few words ([`Trust::short`]): a table's `accuracy` column.
pub(crate) fn as_short<S: serde::Serializer>(t: &Trust, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.short())
}

/// The mean |error| and the signed largest error of `points`.
pub(crate) fn spread(points: &[&Point]) -> (f64, f64) {
    let mean = points.iter().map(|p| p.error_pct.abs()).sum::<f64>() / points.len().max(1) as f64;
    let worst =
        points.iter().map(|p| p.error_pct).fold(0.0, |w: f64, e| if e.abs() > w.abs() { e } else { w });
    (mean, worst)
}

impl Trust {
    /// The record's word on `op` (its JSON name, `all_gather`) on `arch`'s chips, run as a
    /// `topology` of `chips` on `model`.
    pub(crate) fn of(
        arch: meshsim_topology::Arch,
        op: &str,
        (topology, chips): (&str, usize),
        model: SimModel,
    ) -> Trust {
        Self::from_record(built_in(), arch, op, (topology, chips), model)
    }

    pub(crate) fn from_record(
        record: &[Point],
        arch: meshsim_topology::Arch,
        op: &str,
        (topology, chips): (&str, usize),
        model: SimModel,
    ) -> Trust {
        let arch = arch_name(arch);
        let op = op.replace('_', "-");
        let model = model.to_string();
        let of_op: Vec<&Point> = record
            .iter()
            .filter(|p| {
                p.set != FLOW_SET
                    && p.arch == arch
                    && p.model == model
                    && p.group.starts_with(&format!("{op} "))
            })
            .collect();
        let flow: Vec<&Point> = record
            .iter()
            .filter(|p| {
                p.set == FLOW_SET && p.arch == arch && p.group == format!("{op} (against the packet model)")
            })
            .collect();
        let against_packet = (model == SimModel::Flow.to_string() && !flow.is_empty()).then(|| {
            let (mean, worst) = spread(&flow);
            AgainstPacket {
                scenarios: flow.len(),
                within_bound: flow.iter().filter(|p| p.ok).count(),
                mean_abs_error_pct: mean,
                worst_error_pct: worst,
            }
        });
        let exact = format!("{op} {topology}-{chips}");
        let same: Vec<&Point> = of_op.iter().copied().filter(|p| p.group == exact).collect();
        let (points, basis) = if !same.is_empty() {
            (same, format!("tt-metal's {arch} sweep of {op} on a {topology} of {chips}"))
        } else {
            let mut groups: Vec<&str> =
                of_op.iter().map(|p| p.group.trim_start_matches(&format!("{op} "))).collect();
            groups.dedup();
            (
                of_op,
                format!("tt-metal's {arch} sweep of {op} on {} (not this communicator)", groups.join(", ")),
            )
        };
        if points.is_empty() {
            return Trust {
                basis: None,
                points: 0,
                within_tolerance: 0,
                tolerance_pct: None,
                mean_abs_error_pct: None,
                worst_error_pct: None,
                large: true,
                against_packet,
            };
        }
        let (mean, worst) = spread(&points);
        Trust {
            basis: Some(basis),
            points: points.len(),
            within_tolerance: points.iter().filter(|p| p.ok).count(),
            tolerance_pct: points.iter().map(|p| p.tolerance_pct).reduce(f64::max),
            mean_abs_error_pct: Some(mean),
            worst_error_pct: Some(worst),
            large: mean >= LARGE_ERROR_PCT,
            against_packet,
        }
    }

    /// The record's word on one op a session ran (a workload's op, a regression scenario's).
    pub(crate) fn of_op(arch: meshsim_topology::Arch, o: &meshsim_ccl::request::OpResult) -> Trust {
        Self::of(arch, o.collective.name(), (&o.topology.to_string(), o.chips.len()), o.model)
    }

    /// A few words for a table's column: `4.2 % vs hw`, `18.0 % vs hw, large`, `not
    /// calibrated`; on the flow model also `10.3 % vs packet`. [`Trust::line`] says it in full.
    pub(crate) fn short(&self) -> String {
        let hw = match self.mean_abs_error_pct {
            Some(mean) if self.large => format!("{mean:.1} % vs hw, large"),
            Some(mean) => format!("{mean:.1} % vs hw"),
            None => "not calibrated".into(),
        };
        match &self.against_packet {
            Some(a) => format!("{hw}; {:.1} % vs packet", a.mean_abs_error_pct),
            None => hw,
        }
    }

    /// One line for a text header.
    pub(crate) fn line(&self, arch: meshsim_topology::Arch, op: &str) -> String {
        let flow = self.against_packet.as_ref().map_or(String::new(), |a| {
            format!(
                "; the flow model against the packet model: mean |error| {:.1} % (worst {:+.1} %, {} of {} regression scenarios of this op within bound)",
                a.mean_abs_error_pct, a.worst_error_pct, a.within_bound, a.scenarios
            )
        });
        self.hardware_line(arch, op) + &flow
    }

    /// The line's part against hardware.
    fn hardware_line(&self, arch: meshsim_topology::Arch, op: &str) -> String {
        let (Some(basis), Some(mean), Some(worst), Some(tol)) =
            (&self.basis, self.mean_abs_error_pct, self.worst_error_pct, self.tolerance_pct)
        else {
            return format!(
                "not calibrated: no published {} measurement of {} is recorded; read the time as an indication (docs/guide.md)",
                arch_name(arch),
                op.replace('_', "-")
            );
        };
        let verdict = if self.large {
            "; large: read the time as trends and bottlenecks, not a figure to plan on"
        } else {
            ""
        };
        format!(
            "mean |error| {mean:.1} % (worst {worst:+.1} %, {} of {} within ±{tol:.0} %) against {basis}, up to 16 MiB{verdict} (docs/guide.md)",
            self.within_tolerance, self.points
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_op_is_trusted_as_far_as_its_nearest_published_points() {
        use meshsim_topology::Arch;
        let row = |arch: &str, model: &str, group: &str, error_pct: f64| Point {
            set: "ccl".into(),
            model: model.into(),
            arch: arch.into(),
            group: group.into(),
            measure: String::new(),
            size_bytes: 1 << 20,
            published: 100.0,
            simulated: 100.0 + error_pct,
            error_pct,
            tolerance_pct: 20.0,
            ok: error_pct.abs() <= 20.0,
        };
        let record = [
            row("Wormhole", "packet", "all-gather ring-8", -30.0),
            row("Wormhole", "packet", "all-gather ring-8", 10.0),
            row("Wormhole", "packet", "all-gather line-2", 4.0),
            row("Wormhole", "flow", "all-gather ring-8", -2.0),
            row("Blackhole", "packet", "all-gather ring-8", 80.0),
        ];
        let t = Trust::from_record(&record, Arch::WormholeB0, "all_gather", ("ring", 8), SimModel::Packet);
        assert_eq!(
            (t.points, t.within_tolerance, t.mean_abs_error_pct, t.worst_error_pct),
            (2, 1, Some(20.0), Some(-30.0))
        );
        assert!(
            t.large && t.basis.as_deref() == Some("tt-metal's Wormhole sweep of all-gather on a ring of 8")
        );
        // Another communicator: every point of the op on the architecture, said so.
        let t = Trust::from_record(&record, Arch::WormholeB0, "all_gather", ("line", 4), SimModel::Packet);
        assert_eq!(t.points, 3);
        assert!(t.basis.unwrap().ends_with("on ring-8, line-2 (not this communicator)"));
        // Each model its own points; an op with none is not calibrated.
        let t = Trust::from_record(&record, Arch::WormholeB0, "all_gather", ("ring", 8), SimModel::Flow);
        assert_eq!((t.points, t.large), (1, false));
        let t = Trust::from_record(&record, Arch::Blackhole, "all_reduce", ("ring", 8), SimModel::Packet);
        assert!(t.basis.is_none() && t.large);
        assert!(
            t.line(Arch::Blackhole, "all_reduce")
                .starts_with("not calibrated: no published Blackhole measurement of all-reduce")
        );
        // The flow model also says how far it is from the packet model on the op's scenarios.
        let mut with_flow = record.to_vec();
        let mut against = row("Wormhole", "flow", "all-gather (against the packet model)", 4.0);
        against.set = FLOW_SET.into();
        with_flow.push(against);
        let t = Trust::from_record(&with_flow, Arch::WormholeB0, "all_gather", ("ring", 8), SimModel::Flow);
        let a = t.against_packet.as_ref().unwrap();
        assert_eq!((a.scenarios, a.within_bound, a.worst_error_pct), (1, 1, 4.0));
        assert!(t.line(Arch::WormholeB0, "all_gather").contains("the flow model against the packet model"));
        // Those points are not hardware's, and the packet model has none.
        let t = Trust::from_record(&with_flow, Arch::WormholeB0, "all_gather", ("ring", 8), SimModel::Packet);
        assert!(t.against_packet.is_none() && t.points == 2);
        assert_eq!(t.short(), "20.0 % vs hw, large");
        let t = Trust::from_record(&with_flow, Arch::WormholeB0, "all_gather", ("ring", 8), SimModel::Flow);
        assert_eq!(t.short(), "2.0 % vs hw; 4.0 % vs packet");
        let t = Trust::from_record(&record, Arch::Blackhole, "all_reduce", ("ring", 8), SimModel::Packet);
        assert_eq!(t.short(), "not calibrated");
        // The built-in record has the CCL sweep's points.
        assert!(Trust::of(Arch::WormholeB0, "reduce_scatter", ("line", 4), SimModel::Packet).points > 0);
    }
}
