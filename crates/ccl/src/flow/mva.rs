//! A credit loop as a closed queueing network: its packets go round it, each queueing at the
//! stations on its way and spending the rest of the loop in latencies; its period per packet by
//! exact mean value analysis (Reiser and Lavenberg's recursion over 1..N customers).

/// The period (one over the throughput) of a closed network of `customers` going round
/// queueing stations and a pure delay of `think`: mean value analysis, each station given as
/// (its demand per visit, the demand other traffic puts on it per customer's round). The other
/// traffic is open: it moves as fast as the loop does, so it holds a station a fraction of the
/// time (its demand over the period, and never more than its share of the station's work:
/// where the loop and the others together would fill a station, the flow net's share of it
/// sets the pace) that slows the loop's own service there. The period and those fractions are
/// found together: the period is the one the loop keeps under the fractions it gives
/// ([`keeps`]), found by halving.
pub(crate) fn period(customers: usize, stations: &[(f64, f64)], think: f64) -> f64 {
    if think + stations.iter().map(|s| s.0).sum::<f64>() <= 0.0 {
        return 0.0;
    }
    // `keeps` falls as the period grows, so that period is one point, between the period
    // without other traffic and what that leaves (iterating `keeps` from either end may swing
    // between the two for ever).
    let mut low = keeps(customers, stations, think, f64::INFINITY);
    let mut high = keeps(customers, stations, think, low);
    while high - low > 1e-9 * high {
        let mid = 0.5 * (low + high);
        if keeps(customers, stations, think, mid) > mid {
            low = mid;
        } else {
            high = mid;
        }
    }
    0.5 * (low + high)
}

/// The period the loop keeps when the other traffic holds each station its fraction of a
/// period `p` (none at an infinite one): the less often the loop goes round, the more of its
/// time the others hold. No station serves the loop's packets faster than their own demand
/// there (the residual-life correction is approximate and may dip below it); how the station
/// is shared with the other traffic is the flow net's to say.
fn keeps(customers: usize, stations: &[(f64, f64)], think: f64, p: f64) -> f64 {
    let background: Vec<f64> = stations.iter().map(|&(d, o)| (o / p.max(d + o)).min(0.95)).collect();
    let mut queue = vec![0.0; stations.len()];
    let (mut period, mut throughput) = (think, 0.0);
    for n in 1..=customers {
        // Service is deterministic: a packet that arrives finds the one in service half
        // done (residual life: its own loop keeps the station busy `throughput x d` of the
        // time), and the other traffic's wait is M/D/1's.
        let resid: Vec<f64> = stations
            .iter()
            .zip(&queue)
            .zip(&background)
            .map(|((&(d, _), q), b)| d * (1.0 + q - throughput * d / 2.0) * (1.0 + b / (2.0 * (1.0 - b))))
            .collect();
        let cycle = think + resid.iter().sum::<f64>();
        throughput = n as f64 / cycle;
        for (q, r) in queue.iter_mut().zip(&resid) {
            *q = throughput * r;
        }
        period = 1.0 / throughput;
    }
    let bound = stations.iter().map(|&(d, _)| d).fold(0.0, f64::max);
    period.max(bound)
}

#[cfg(test)]
mod tests {
    use super::{keeps, period as mva_period};

    /// One packet round a loop meets no one: its period is the loop's time (and a loop of no
    /// time has none).
    #[test]
    fn a_lone_packet_goes_round_at_the_loop_s_time() {
        let p = mva_period(1, &[(300.0, 0.0), (200.0, 0.0)], 1000.0);
        assert!((p - 1500.0).abs() < 1e-9, "{p}");
        assert_eq!(mva_period(8, &[(0.0, 5.0)], 0.0), 0.0);
    }

    /// Many credits make the busiest station the bound, never beaten; few make the loop's
    /// time over the credits the bound; where the two meet, queueing puts the period above
    /// both.
    #[test]
    fn credits_trade_the_loop_s_bound_for_the_busiest_station_s() {
        let stations = [(350.0, 0.0), (180.0, 0.0), (190.0, 0.0)];
        let many = mva_period(64, &stations, 1500.0);
        assert!((350.0..360.0).contains(&many), "{many}");
        let few = mva_period(2, &stations, 1500.0);
        assert!(few >= (1500.0 + 720.0) / 2.0 * 0.999, "{few}");
        let knee = mva_period(6, &stations, 1500.0);
        let bound = ((1500.0 + 720.0) / 6.0f64).max(350.0);
        assert!(knee > bound * 1.1, "{knee} vs {bound}");
    }

    /// Other traffic at a station slows the loop's packets there.
    #[test]
    fn other_traffic_at_a_station_slows_the_loop() {
        let quiet = mva_period(8, &[(350.0, 0.0), (180.0, 0.0)], 1500.0);
        let busy = mva_period(8, &[(350.0, 0.0), (180.0, 160.0)], 1500.0);
        assert!(busy > quiet, "{busy} vs {quiet}");
    }

    /// Where iterating the period and the others' fractions swings between two values for
    /// ever (a sender channel's loop on a Galaxy torus row, its NoC port busy with the other
    /// planes' writes), the period is the one the loop keeps.
    #[test]
    fn the_period_is_the_one_the_loop_keeps() {
        let stations = [
            (348_800.0, 10_560.0),
            (190_000.0, 0.0),
            (313_000.0, 188_000.0),
            (188_000.0, 313_000.0),
            (266_000.0, 426_571.0),
        ];
        let p = mva_period(8, &stations, 318_000.0);
        assert!((keeps(8, &stations, 318_000.0, p) - p).abs() < 1e-6 * p, "{p}");
        let alone = keeps(8, &stations, 318_000.0, f64::INFINITY);
        assert!(p > alone * 1.2, "{p} vs {alone} without the others");
    }

    /// The others hold a station no more than their share of its work: a lone packet at a
    /// station where the others do as much as it waits M/D/1's half a service, not more.
    #[test]
    fn the_others_hold_no_more_than_their_share() {
        let p = mva_period(1, &[(100.0, 100.0)], 0.0);
        assert!((p - 150.0).abs() < 1e-6, "{p}");
    }
}
