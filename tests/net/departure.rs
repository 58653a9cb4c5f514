//! Departure dependencies (`net::departure`): a task that waits for a
//! transfer to have *left* starts at its transmission end, not at its
//! delivery. Closed forms by hand: back-to-back sends over a link with
//! latency pay the latency once when the second waits for the first's
//! departure, twice when it waits for its delivery; a departure edge on a
//! computation is its completion; a schedule without departure edges runs
//! as before, event for event.

use shardsim::engine::Time;
use shardsim::net::{departure, Link, NetError, NetSim, Schedule};

/// `ceil(bytes * 1e12 / rate)`, written out independently of the crate.
fn ceil_ps(bytes: u128, rate: u128) -> u64 {
    (bytes * 1_000_000_000_000).div_ceil(rate) as u64
}

/// Two sends of `b` bytes from one sender over one link of capacity `c`
/// and latency `lat`, the second after the first (delivered or departed).
fn two_sends(depart: bool) -> (u64, Vec<Option<Time>>) {
    let (c, lat, b) = (25_000_000_000u128, 3_500_000u64, 1_048_576u128);
    let mut s = Schedule::new();
    let a = s.add_transfer(&[0], b as u64, &[]).unwrap();
    let gate = if depart { departure(a) } else { a };
    s.add_transfer(&[0], b as u64, &[gate]).unwrap();
    let mut sim: NetSim<usize> = NetSim::new(&[Link::new(c as f64, Time(lat))], 0).unwrap();
    let r = s.run(&mut sim).unwrap();
    assert!(r.not_run.is_empty() && r.undeliverable.is_empty());
    let tx = ceil_ps(b, c);
    let want = if depart { 2 * tx + lat } else { 2 * (tx + lat) };
    assert_eq!(r.makespan.0, want, "depart={depart}");
    (want, r.finish)
}

#[test]
fn a_send_after_the_last_one_left_pays_the_link_latency_once() {
    let (delivered, _) = two_sends(false);
    let (departed, finish) = two_sends(true);
    // 2 (b / C) + 2 lat against 2 (b / C) + lat.
    assert_eq!(delivered - departed, 3_500_000);
    // Finish times stay deliveries: the first send lands one latency after
    // it left, the second one transmission later.
    let tx = ceil_ps(1_048_576, 25_000_000_000);
    assert_eq!(
        finish,
        vec![Some(Time(tx + 3_500_000)), Some(Time(2 * tx + 3_500_000))]
    );
}

#[test]
fn a_departure_pipeline_of_k_sends_over_two_hops_pays_each_hop_latency_once() {
    // k sends from a to b over two links (latencies l0, l1, the second
    // slower), each after the previous one left: the sender streams them
    // back to back at the bottleneck, so the last lands k b / C_min + l0 +
    // l1 after the start.
    let (c0, c1) = (50_000_000_000u128, 20_000_000_000u128);
    let (l0, l1) = (700_000u64, 5_000_000u64);
    let (b, k) = (262_144u128, 6u64);
    let mut s = Schedule::new();
    let mut last = None;
    for _ in 0..k {
        let deps: Vec<usize> = last.map(departure).into_iter().collect();
        last = Some(s.add_transfer(&[0, 1], b as u64, &deps).unwrap());
    }
    let links = [
        Link::new(c0 as f64, Time(l0)),
        Link::new(c1 as f64, Time(l1)),
    ];
    let mut sim: NetSim<usize> = NetSim::new(&links, 0).unwrap();
    let r = s.run(&mut sim).unwrap();
    assert_eq!(r.makespan.0, k * ceil_ps(b, c1) + l0 + l1);
}

#[test]
fn a_departure_edge_on_a_computation_is_its_completion_and_a_bad_one_is_refused() {
    let mut s = Schedule::new();
    let c = s.add_compute(0, Time(2_000_000), &[]).unwrap();
    s.add_transfer(&[0], 1_000_000, &[departure(c)]).unwrap();
    let mut sim: NetSim<usize> = NetSim::new(&[Link::new(1e10, Time(1_000))], 0).unwrap();
    let r = s.run(&mut sim).unwrap();
    assert_eq!(
        r.makespan.0,
        2_000_000 + ceil_ps(1_000_000, 10_000_000_000) + 1_000
    );
    assert!(matches!(
        s.add_transfer(&[0], 1, &[departure(5)]),
        Err(NetError::BadDependency { task: 2, dep: 5 })
    ));
}

#[test]
fn without_departure_edges_a_run_reports_no_departures() {
    // The same schedule run by hand-stepping: no `Departed` occurrence
    // unless asked for, one per flow (before its delivery) when asked.
    let run = |ask: bool| {
        let mut sim: NetSim<()> = NetSim::new(&[Link::new(1e10, Time(500))], 0).unwrap();
        sim.report_departures(ask);
        sim.start_flow(0, &[0], 1_000_000).unwrap();
        sim.start_flow(1, &[0], 2_000_000).unwrap();
        let mut got = Vec::new();
        while let Some(o) = sim.step().unwrap() {
            got.push(format!("{o:?}"));
        }
        got
    };
    let plain = run(false);
    assert!(plain.iter().all(|o| !o.starts_with("Departed")));
    let asked = run(true);
    assert_eq!(asked.len(), plain.len() + 2);
    let kept: Vec<String> = asked
        .into_iter()
        .filter(|o| !o.starts_with("Departed"))
        .collect();
    assert_eq!(kept, plain);
}
