//! A credit loop as a closed queueing network: its packets go round it, each queueing at the
//! stations on its way and spending the rest of the loop in latencies; its period per packet by
//! exact mean value analysis (Reiser and Lavenberg's recursion over 1..N customers).

/// The period (one over the throughput) of a closed network of `customers` going round
/// queueing stations and a pure delay of `think`: mean value analysis, each station given as
/// (its demand per visit, the demand other traffic puts on it per customer's round). The other
/// traffic is open: it moves as fast as the loop does, so it holds a station a fraction of the
/// time (its demand over the period) that slows the loop's own service there; the period and
/// that fraction are found together, a fixed point of a few rounds.
pub(crate) fn period(customers: usize, stations: &[(f64, f64)], think: f64) -> f64 {
    if think + stations.iter().map(|s| s.0).sum::<f64>() <= 0.0 {
        return 0.0;
    }
    let closed = |background: &[f64]| {
        let mut queue = vec![0.0; stations.len()];
        let (mut period, mut throughput) = (think, 0.0);
        for n in 1..=customers {
            // Service is deterministic: a packet that arrives finds the one in service half
            // done (residual life: its own loop keeps the station busy `throughput x d` of the
            // time), and the other traffic's wait is M/D/1's.
            let resid: Vec<f64> = stations
                .iter()
                .zip(&queue)
                .zip(background)
                .map(|((&(d, _), q), b)| d * (1.0 + q - throughput * d / 2.0) * (1.0 + b / (2.0 * (1.0 - b))))
                .collect();
            let cycle = think + resid.iter().sum::<f64>();
            throughput = n as f64 / cycle;
            for (q, r) in queue.iter_mut().zip(&resid) {
                *q = throughput * r;
            }
            period = 1.0 / throughput;
        }
        period
    };
    // No station serves the loop's packets faster than their own demand there (the
    // residual-life correction is approximate and may dip below it); how the station is
    // shared with the other traffic is the flow net's to say.
    let bound = stations.iter().map(|&(d, _)| d).fold(0.0, f64::max);
    let mut period = closed(&vec![0.0; stations.len()]).max(bound);
    for _ in 0..20 {
        let background: Vec<f64> = stations.iter().map(|&(_, o)| (o / period).min(0.95)).collect();
        let next = closed(&background).max(bound);
        if (next - period).abs() <= 1e-6 * period {
            return next;
        }
        period = next;
    }
    period
}

#[cfg(test)]
mod tests {
    use super::period as mva_period;

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
}
