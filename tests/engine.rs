//! The engine and the flow-level network model against closed forms: one flow
//! on one link, k flows sharing a link, a hand-solved max-min example with rates
//! changing mid-flight, ring allreduce 2(n-1)(α + S/(nB)), determinism of the
//! event log, link faults; and proptest invariants of the allocation.

use proptest::prelude::*;

use shardsim::engine::perturb::draw_link_failures;
use shardsim::engine::{
    Engine, EngineError, EventQueue, FaultKind, Jitter, LinkFault, Stragglers, Time,
};
use shardsim::net::patterns::{
    ring_allreduce_schedule, ring_links, run_ring_allreduce, run_ring_allreduce_per_chunk,
};
use shardsim::net::{Link, LinkId, NetError, NetSim, NetTimer, Network, Occurrence, Schedule};

const PS: u128 = 1_000_000_000_000;

/// `ceil(bytes * 1e12 / rate)` written out independently of the crate.
fn ceil_ps(bytes: u128, rate: u128) -> u64 {
    (bytes * PS).div_ceil(rate) as u64
}

/// Run `sim` to the end; (tag, delivery time) in delivery order.
fn deliveries(sim: &mut NetSim<()>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    while let Some(o) = sim.step().unwrap() {
        if let Occurrence::Delivered { at, tag } = o {
            out.push((tag, at.0));
        }
    }
    out
}

#[test]
fn one_flow_on_one_link_takes_latency_plus_bytes_over_bandwidth() {
    // (bytes, bytes/s, latency ps)
    let cases: [(u64, u64, u64); 6] = [
        (1_000_000, 100_000_000_000, 0),
        (1_000_000, 100_000_000_000, 1_500_000),
        (1, 3, 7),
        (4096, 25_000_000_000, 500_000),
        (123_456_789, 46_000_000_000, 2_000_000),
        (0, 1_000_000_000, 250),
    ];
    for (bytes, bw, lat) in cases {
        let mut sim = NetSim::new(&[Link::new(bw as f64, Time(lat))], 1).unwrap();
        sim.start_flow(9, &[0], bytes).unwrap();
        let got = deliveries(&mut sim);
        let want = lat + ceil_ps(bytes as u128, bw as u128);
        assert_eq!(got, vec![(9, want)], "bytes={bytes} bw={bw} lat={lat}");
    }
}

#[test]
fn k_flows_sharing_a_link_each_take_k_times_as_long() {
    let (bytes, bw, lat) = (3_000_000u64, 40_000_000_000u64, 1_000_000u64);
    for k in 1..=12u64 {
        let mut sim = NetSim::new(&[Link::new(bw as f64, Time(lat))], 1).unwrap();
        for f in 0..k {
            sim.start_flow(f, &[0], bytes).unwrap();
        }
        let got = deliveries(&mut sim);
        let want = lat + ceil_ps((k * bytes) as u128, bw as u128);
        assert_eq!(got.len() as u64, k);
        for (tag, t) in got {
            assert_eq!(t, want, "k={k} flow {tag}");
        }
    }
}

#[test]
fn max_min_shares_on_three_links_by_hand() {
    // L0 = 12 GB/s carries a, b, c; L1 = 10 GB/s carries a, d; L2 = 20 GB/s carries d, e.
    // Progressive filling: L0 saturates first (4 each); L1 leaves 6 for d; e gets 14.
    let links = [
        Link::new(12e9, Time::ZERO),
        Link::new(10e9, Time::ZERO),
        Link::new(20e9, Time::ZERO),
    ];
    let routes: [&[LinkId]; 5] = [&[0, 1], &[0], &[0], &[1, 2], &[2]];
    let mut net = Network::new(&links).unwrap();
    for (i, r) in routes.iter().enumerate() {
        net.start_flow(Time::ZERO, i as u64, r, 12_000_000, Time::ZERO)
            .unwrap();
    }
    net.flush(Time::ZERO).unwrap();
    let rates: Vec<f64> = (0..5).map(|s| net.flow_rate(s).unwrap().0).collect();
    assert_eq!(rates, vec![4e9, 4e9, 4e9, 6e9, 14e9]);

    // Finish times with e carrying 35 MB: e runs at 14 GB/s until d ends at 2 ms
    // (28 MB sent), then alone on L2 at 20 GB/s for 7 MB = 0.35 ms: 2.35 ms.
    let mut sim = NetSim::new(&links, 1).unwrap();
    let sizes = [
        12_000_000u64,
        12_000_000,
        12_000_000,
        12_000_000,
        35_000_000,
    ];
    for (i, r) in routes.iter().enumerate() {
        sim.start_flow(i as u64, r, sizes[i]).unwrap();
    }
    let mut got = deliveries(&mut sim);
    got.sort();
    assert_eq!(
        got,
        vec![
            (0, 3_000_000_000),
            (1, 3_000_000_000),
            (2, 3_000_000_000),
            (3, 2_000_000_000),
            (4, 2_350_000_000)
        ]
    );
}

/// 2(n-1)(α + ceil(S/n / B)) for the ring allreduce with chunk S/n.
fn ring_closed_form(n: u64, chunk: u64, bw: u64, alpha: u64) -> u64 {
    2 * (n - 1) * (alpha + ceil_ps(chunk as u128, bw as u128))
}

#[test]
fn ring_allreduce_matches_closed_form() {
    let (bw, alpha) = (50_000_000_000u64, 1_000_000u64);
    for n in [2usize, 3, 4, 8, 16] {
        let total = 48 << 20; // S: 48 MiB, divisible by every n here except 16 rounding
        let chunk = total / n as u64;
        let (sched, sends) = ring_allreduce_schedule(n, chunk, None).unwrap();
        assert_eq!(sends.len(), 2 * (n - 1));
        let mut sim = NetSim::new(&ring_links(n, bw as f64, Time(alpha)), 0).unwrap();
        let rep = sched.run(&mut sim).unwrap();
        assert!(rep.not_run.is_empty() && rep.undeliverable.is_empty());
        assert_eq!(
            rep.makespan.0,
            ring_closed_form(n as u64, chunk, bw, alpha),
            "n={n}"
        );

        // The reactive driver gives the same time, also with each step split
        // into 4 concurrent chunk flows (each gets B/4 for a quarter of the bytes).
        for chunks in [1usize, 4] {
            let mut sim = NetSim::new(&ring_links(n, bw as f64, Time(alpha)), 0).unwrap();
            let run = run_ring_allreduce(&mut sim, n, chunks, chunk / chunks as u64).unwrap();
            assert_eq!(run.flows, (2 * (n - 1) * n * chunks) as u64);
            assert_eq!(
                run.time.0,
                ring_closed_form(n as u64, chunk, bw, alpha),
                "n={n} chunks={chunks}"
            );
        }
    }
}

#[test]
fn ring_allreduce_with_reductions_adds_one_reduction_per_reduce_scatter_step() {
    let (bw, alpha, red) = (25_000_000_000u64, 2_000_000u64, 300_000u64);
    for n in [2usize, 5, 8] {
        let chunk = 1 << 20;
        let (sched, _) = ring_allreduce_schedule(n, chunk, Some(Time(red))).unwrap();
        let mut sim = NetSim::new(&ring_links(n, bw as f64, Time(alpha)), 0).unwrap();
        let rep = sched.run(&mut sim).unwrap();
        // n-1 reduce-scatter steps end in a reduction before the next send;
        // the last reduce-scatter reduction precedes the first all-gather send.
        let want = ring_closed_form(n as u64, chunk, bw, alpha) + (n as u64 - 1) * red;
        assert_eq!(rep.makespan.0, want, "n={n}");
    }
}

/// A small scenario with shared links, multi-hop routes, computations on
/// devices, jitter and a straggler; returns the CSV log.
fn jittered_scenario(seed: u64) -> String {
    let links: Vec<Link> = (0..6)
        .map(|i| Link::new(1e10 * (1 + i % 3) as f64, Time(500_000)))
        .collect();
    let mut sim = NetSim::new(&links, seed).unwrap();
    sim.enable_log();
    sim.set_jitter(Some(Jitter::new(0.2).unwrap()));
    sim.set_stragglers(Stragglers::draw(seed, 4, 1, 3.0).unwrap());
    let mut s = Schedule::new();
    let a = s.add_transfer(&[0, 1], 4 << 20, &[]).unwrap();
    let b = s.add_transfer(&[1, 2], 2 << 20, &[]).unwrap();
    let c = s.add_compute(2, Time(3_000_000), &[a, b]).unwrap();
    let d = s.add_transfer(&[3, 4, 5], 1 << 20, &[c]).unwrap();
    let e = s.add_compute(1, Time(1_000_000), &[a]).unwrap();
    s.add_transfer(&[5, 0], 8 << 20, &[d, e]).unwrap();
    for dev in 0..4 {
        s.add_compute(dev, Time(2_000_000), &[]).unwrap();
    }
    let rep = s.run(&mut sim).unwrap();
    assert!(rep.not_run.is_empty());
    sim.log().to_csv()
}

#[test]
fn same_seed_same_bytes_different_seed_different_bytes() {
    let a = jittered_scenario(42);
    let b = jittered_scenario(42);
    let c = jittered_scenario(43);
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.starts_with("time_ps,kind,subject,detail\n"));
    assert!(a.lines().count() > 8, "{a}");
    // The file written to disk is exactly the text.
    let dir = std::env::temp_dir().join(format!("shardsim-engine-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("events.csv");
    let mut sim: NetSim<()> = NetSim::new(&[Link::new(1e9, Time(10))], 42).unwrap();
    sim.enable_log();
    sim.start_flow(1, &[0], 100).unwrap();
    deliveries(&mut sim);
    sim.log().write_csv(&path).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), sim.log().to_csv());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two disjoint 2-hop paths from A to B: links 0,1 and links 2,3, 10 GB/s, 1 µs each.
fn two_paths() -> Vec<Link> {
    (0..4).map(|_| Link::new(1e10, Time(1_000_000))).collect()
}

#[test]
fn failed_link_mid_transfer_is_reported() {
    // 10 MB at 10 GB/s takes 1 ms; link 1 fails at 0.4 ms with 6 MB unsent.
    let mut sim: NetSim<()> = NetSim::new(&two_paths(), 0).unwrap();
    sim.add_fault(LinkFault {
        link: 1,
        at: Time(400_000_000),
        kind: FaultKind::Fail,
    })
    .unwrap();
    sim.start_flow(77, &[0, 1], 10_000_000).unwrap();
    sim.start_flow(78, &[2, 3], 1_000_000).unwrap();
    let mut seen = Vec::new();
    while let Some(o) = sim.step().unwrap() {
        seen.push(o);
    }
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0],
        Occurrence::Delivered {
            at: Time(100_000_000 + 2_000_000),
            tag: 78
        }
    );
    let Occurrence::Undeliverable(u) = &seen[1] else {
        panic!("{seen:?}")
    };
    assert_eq!((u.tag, u.link, u.at), (77, 1, Time(400_000_000)));
    assert!(
        (u.remaining_bytes - 6e6).abs() < 1.0,
        "{}",
        u.remaining_bytes
    );
    // A later flow over the failed link is reported at once, not hung.
    sim.start_flow(79, &[1], 10).unwrap();
    let Some(Occurrence::Undeliverable(u)) = sim.step().unwrap() else {
        panic!()
    };
    assert_eq!((u.tag, u.link), (79, 1));
    assert_eq!(sim.step().unwrap(), None);
}

#[test]
fn failed_link_mid_transfer_is_rerouted_by_the_callback() {
    let mut sim: NetSim<()> = NetSim::new(&two_paths(), 0).unwrap();
    sim.add_fault(LinkFault {
        link: 1,
        at: Time(400_000_000),
        kind: FaultKind::Fail,
    })
    .unwrap();
    sim.set_reroute(Box::new(|req| {
        assert_eq!(req.failed_links, &[1]);
        (req.route == [0, 1]).then(|| vec![2, 3])
    }));
    sim.start_flow(77, &[0, 1], 10_000_000).unwrap();
    // The 6 MB left take 0.6 ms on the other path, plus its 2 µs latency.
    assert_eq!(
        deliveries(&mut sim),
        vec![(77, 400_000_000 + 600_000_000 + 2_000_000)]
    );
}

#[test]
fn degraded_link_slows_the_rest_of_the_transfer() {
    let mut sim: NetSim<()> = NetSim::new(&two_paths(), 0).unwrap();
    sim.add_fault(LinkFault {
        link: 0,
        at: Time(400_000_000),
        kind: FaultKind::Degrade(0.25),
    })
    .unwrap();
    sim.start_flow(5, &[0, 1], 10_000_000).unwrap();
    // 4 MB at 10 GB/s, then 6 MB at 2.5 GB/s = 2.4 ms.
    assert_eq!(
        deliveries(&mut sim),
        vec![(5, 400_000_000 + 2_400_000_000 + 2_000_000)]
    );
}

#[test]
fn schedule_reports_tasks_behind_an_undeliverable_transfer() {
    let mut sim = NetSim::new(&two_paths(), 0).unwrap();
    sim.add_fault(LinkFault {
        link: 0,
        at: Time(1_000),
        kind: FaultKind::Fail,
    })
    .unwrap();
    let mut s = Schedule::new();
    let a = s.add_transfer(&[0, 1], 1 << 20, &[]).unwrap();
    let b = s.add_transfer(&[2, 3], 1 << 20, &[]).unwrap();
    let c = s.add_compute(0, Time(10), &[a, b]).unwrap();
    let rep = s.run(&mut sim).unwrap();
    assert_eq!(rep.undeliverable.len(), 1);
    assert_eq!(rep.undeliverable[0].0, a);
    assert!(rep.finish[b].is_some());
    assert_eq!(rep.not_run, vec![c]);
}

#[test]
fn bad_input_is_a_typed_error() {
    assert!(matches!(
        Network::new(&[Link::new(0.0, Time(1))]),
        Err(NetError::BadCapacity { .. })
    ));
    assert!(matches!(
        Network::new(&[Link::new(f64::NAN, Time(1))]),
        Err(NetError::BadCapacity { .. })
    ));
    let mut sim: NetSim<()> = NetSim::new(&two_paths(), 0).unwrap();
    assert!(matches!(
        sim.start_flow(0, &[9], 1),
        Err(NetError::UnknownLink { link: 9, .. })
    ));
    assert!(matches!(
        sim.start_flow(0, &[0, 0], 1),
        Err(NetError::RepeatedLink { link: 0 })
    ));
    assert!(sim
        .add_fault(LinkFault {
            link: 0,
            at: Time(1),
            kind: FaultKind::Degrade(1.5)
        })
        .is_err());
    assert!(sim
        .add_fault(LinkFault {
            link: 7,
            at: Time(1),
            kind: FaultKind::Fail
        })
        .is_err());
    let mut s = Schedule::new();
    assert!(matches!(
        s.add_compute(0, Time(1), &[0]),
        Err(NetError::BadDependency { task: 0, dep: 0 })
    ));
    // Time overflow is an error, not a wrap.
    let mut sim: NetSim<()> = NetSim::new(&[Link::new(1.0, Time(u64::MAX))], 0).unwrap();
    sim.start_flow(0, &[0], 1).unwrap();
    assert!(matches!(sim.step(), Err(NetError::Time(_))));
}

#[derive(Debug, Clone)]
struct Case {
    caps: Vec<f64>,
    flows: Vec<(Vec<LinkId>, u64, u64)>, // route, bytes, start ps
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..6).prop_flat_map(|nl| {
        let caps = prop::collection::vec(prop::sample::select(vec![1e9, 2.5e9, 1e10, 3e10]), nl);
        let route =
            prop::sample::subsequence((0..nl).collect::<Vec<_>>(), 1..=nl.min(3)).prop_shuffle();
        let flow = (route, 0u64..5_000_000, 0u64..3_000_000_000);
        (caps, prop::collection::vec(flow, 1..12)).prop_map(|(caps, flows)| Case { caps, flows })
    })
}

enum Ev {
    Start(usize),
    Timer(NetTimer),
}

/// Max-min conditions after a flush: no link over capacity, and every active
/// flow crosses a saturated link on which no flow has a higher rate.
fn check_allocation(net: &Network, caps: &[f64]) -> Result<(), TestCaseError> {
    for (l, &cap) in caps.iter().enumerate() {
        prop_assert!(
            net.link_load(l) <= cap * (1.0 + 1e-9),
            "link {l} over capacity"
        );
    }
    for l in 0..caps.len() {
        for &s in net.flows_on(l) {
            let (rate, route, _) = net.flow_rate(s).unwrap();
            prop_assert!(rate > 0.0);
            let bottlenecked = route.iter().any(|&m| {
                let saturated = net.link_load(m) >= caps[m] * (1.0 - 1e-9);
                let max_here = net
                    .flows_on(m)
                    .iter()
                    .map(|&o| net.flow_rate(o).unwrap().0)
                    .fold(0.0, f64::max);
                saturated && rate >= max_here * (1.0 - 1e-9)
            });
            prop_assert!(bottlenecked, "flow {s} rate {rate} has no bottleneck");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_networks_are_fair_and_finish(c in case()) {
        let links: Vec<Link> = c.caps.iter().map(|&cap| Link::new(cap, Time(1_000))).collect();
        let mut net = Network::new(&links).unwrap();
        let mut q = EventQueue::new();
        for (i, f) in c.flows.iter().enumerate() {
            q.push(Time(f.2), Ev::Start(i));
        }
        let (mut now, mut done) = (Time::ZERO, vec![false; c.flows.len()]);
        loop {
            if net.needs_flush() && q.peek_time().map_or(true, |t| t > now) {
                net.flush(now).unwrap();
                for (t, timer) in net.drain_timers() {
                    q.push(t, Ev::Timer(timer));
                }
                check_allocation(&net, &c.caps)?;
            }
            let Some((t, _, ev)) = q.pop() else { break };
            prop_assert!(t >= now, "time went back from {now} to {t}");
            now = t;
            match ev {
                Ev::Start(i) => {
                    let f = &c.flows[i];
                    let lat = net.route_latency(&f.0).unwrap();
                    net.start_flow(now, i as u64, &f.0, f.1, lat).unwrap();
                    for (t, timer) in net.drain_timers() {
                        q.push(t, Ev::Timer(timer));
                    }
                }
                Ev::Timer(timer) => {
                    if let Some(d) = net.on_timer(now, timer).unwrap() {
                        prop_assert!(!done[d.tag as usize]);
                        // Never before the flow could possibly finish alone.
                        let f = &c.flows[d.tag as usize];
                        let min_cap = f.0.iter().map(|&l| c.caps[l]).fold(f64::INFINITY, f64::min);
                        prop_assert!(now.0 as f64 >= f.2 as f64 + f.1 as f64 * 1e12 / min_cap - 1.0);
                        done[d.tag as usize] = true;
                    }
                }
            }
        }
        prop_assert!(done.iter().all(|&d| d), "unfinished flows: {done:?}");
        prop_assert_eq!(net.active_flows(), 0);
    }

    #[test]
    fn k_equal_sharers_finish_together_at_the_k_fold_time(k in 1u64..20, bytes in 1u64..10_000_000) {
        // k equal flows on one link all end together, at the exact k-fold time.
        let bw = 7_000_000_000u64;
        let mut sim = NetSim::new(&[Link::new(bw as f64, Time(0))], 1).unwrap();
        for f in 0..k {
            sim.start_flow(f, &[0], bytes).unwrap();
        }
        let got = deliveries(&mut sim);
        let want = ceil_ps((k * bytes) as u128, bw as u128);
        for (_, t) in got {
            prop_assert_eq!(t, want);
        }
    }
}

#[test]
fn store_and_forward_packets_add_one_packet_time_per_extra_hop() {
    // Pipelined store-and-forward over h equal hops: sum(latency) + (b + (h-1)p)/B;
    // a message smaller than a packet pays its whole transmission on every hop.
    let (bw, lat, packet) = (10_000_000_000u64, 700_000u64, 4096u64);
    for hops in 1..=4usize {
        for bytes in [1_000u64, 4_096, 1_000_000] {
            let links: Vec<Link> = (0..hops).map(|_| Link::new(bw as f64, Time(lat))).collect();
            let mut sim: NetSim<()> = NetSim::new(&links, 0).unwrap();
            sim.set_packet_bytes(Some(packet));
            let route: Vec<LinkId> = (0..hops).collect();
            sim.start_flow(1, &route, bytes).unwrap();
            let per_packet = ceil_ps(packet.min(bytes) as u128, bw as u128);
            let want = hops as u64 * lat
                + ceil_ps(bytes as u128, bw as u128)
                + (hops as u64 - 1) * per_packet;
            assert_eq!(
                deliveries(&mut sim),
                vec![(1, want)],
                "hops={hops} bytes={bytes}"
            );
        }
    }
}

/// Ring allreduce schedule on a ring with seeded random link failures and no
/// re-route: (task, link, time) of each undeliverable transfer, and the
/// number of tasks never run.
fn ring_with_drawn_failures(seed: u64) -> (Vec<(usize, LinkId, u64)>, usize) {
    let n = 8;
    let (sched, _) = ring_allreduce_schedule(n, 1 << 20, None).unwrap();
    let mut sim = NetSim::new(&ring_links(n, 1e10, Time(1_000_000)), seed).unwrap();
    // The whole allreduce takes 14 * ~106 µs; failures land in its first half.
    for f in draw_link_failures(seed, n, 2, Time(700_000_000)) {
        sim.add_fault(f).unwrap();
    }
    let rep = sched.run(&mut sim).unwrap();
    let und = rep
        .undeliverable
        .iter()
        .map(|(t, u)| (*t, u.link, u.at.0))
        .collect();
    (und, rep.not_run.len())
}

#[test]
fn seeded_link_failures_are_reported_reproducibly_without_hanging() {
    for seed in 0..6 {
        let (und, not_run) = ring_with_drawn_failures(seed);
        assert_eq!(
            (und.clone(), not_run),
            ring_with_drawn_failures(seed),
            "seed {seed}"
        );
        // Each failure hits a busy ring link (every link carries a transfer at
        // every step), so something is reported and the rest is accounted for.
        assert!(!und.is_empty(), "seed {seed}");
        assert!(not_run > 0, "seed {seed}");
    }
}

#[test]
fn engine_clock_never_goes_back() {
    let mut e: Engine<&str> = Engine::new();
    e.schedule_at(Time(10), "b").unwrap();
    e.schedule_at(Time(5), "a").unwrap();
    e.schedule_after(Time(10), "c").unwrap();
    assert_eq!(e.next(), Some((Time(5), "a")));
    assert!(matches!(
        e.schedule_at(Time(4), "x"),
        Err(EngineError::InThePast { .. })
    ));
    assert_eq!(e.next(), Some((Time(10), "b")));
    assert_eq!(e.next(), Some((Time(10), "c")));
    assert_eq!(e.next(), None);
    assert!(e.schedule_after(Time(u64::MAX), "y").is_err());
}

/// Faults as (link, time, Some(fraction) to degrade or None to fail).
type Faults = Vec<(usize, u64, Option<f64>)>;

fn faulty_case() -> impl Strategy<Value = (Case, Faults, bool)> {
    // Faults: (link, time, Some(fraction) to degrade or None to fail); and
    // whether a re-route callback (drop the failed links from the route) is set.
    let fault = (
        0usize..6,
        0u64..2_000_000_000,
        prop::option::of(0.05f64..1.0),
    );
    (case(), prop::collection::vec(fault, 0..4), any::<bool>())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn faults_never_hang_and_every_flow_is_accounted_for((c, faults, reroute) in faulty_case()) {
        let nl = c.caps.len();
        let links: Vec<Link> = c.caps.iter().map(|&cap| Link::new(cap, Time(1_000))).collect();
        let mut sim: NetSim<usize> = NetSim::new(&links, 5).unwrap();
        for &(link, at, frac) in &faults {
            let kind = frac.map_or(FaultKind::Fail, FaultKind::Degrade);
            sim.add_fault(LinkFault { link: link % nl, at: Time(at), kind }).unwrap();
        }
        if reroute {
            sim.set_reroute(Box::new(|req| {
                let r: Vec<LinkId> =
                    req.route.iter().copied().filter(|l| !req.failed_links.contains(l)).collect();
                (!r.is_empty()).then_some(r)
            }));
        }
        for (i, f) in c.flows.iter().enumerate() {
            sim.schedule_at(Time(f.2), i).unwrap();
        }
        let mut outcome = vec![0u32; c.flows.len()];
        let mut last = Time::ZERO;
        while let Some(o) = sim.step().unwrap() {
            let at = match &o {
                Occurrence::User { at, .. }
                | Occurrence::Delivered { at, .. }
                | Occurrence::Departed { at, .. } => *at,
                Occurrence::Undeliverable(u) => u.at,
            };
            prop_assert!(at >= last);
            last = at;
            match o {
                Occurrence::User { event, .. } => sim.start_flow(event as u64, &c.flows[event].0, c.flows[event].1).unwrap(),
                Occurrence::Delivered { tag, .. } => outcome[tag as usize] += 1,
                Occurrence::Departed { .. } => {}
                Occurrence::Undeliverable(u) => {
                    prop_assert!(sim.network().is_failed(u.link));
                    // With the callback, only a route with nothing left is given up.
                    if reroute {
                        prop_assert!(c.flows[u.tag as usize].0.iter().all(|&l| sim.network().is_failed(l)));
                    }
                    outcome[u.tag as usize] += 1;
                }
            }
        }
        prop_assert!(outcome.iter().all(|&n| n == 1), "{outcome:?}");
    }
}

/// Chunk aggregation is exact: a ring allreduce whose messages are `chunks`
/// concurrent flows takes the same time, to the picosecond, as one flow per
/// message carrying all chunks; with store-and-forward packets every chunk is
/// simulated.
#[test]
fn aggregated_chunks_time_exactly_as_separate_flows() {
    let (bw, alpha) = (25_000_000_000u64, 700_000u64);
    for n in [2usize, 4, 8] {
        for chunks in [1usize, 4, 16] {
            let chunk_bytes = 3_000_017u64;
            let links = ring_links(n, bw as f64, Time(alpha));
            let mut a = NetSim::new(&links, 0).unwrap();
            let agg = run_ring_allreduce(&mut a, n, chunks, chunk_bytes).unwrap();
            let mut b = NetSim::new(&links, 0).unwrap();
            let each = run_ring_allreduce_per_chunk(&mut b, n, chunks, chunk_bytes).unwrap();
            assert_eq!(agg.time, each.time, "n={n} chunks={chunks}");
            assert_eq!(agg.flows, each.flows);
            assert_eq!(each.simulated_flows, each.flows);
            assert_eq!(agg.simulated_flows * chunks as u64, each.flows);
            // With packets nothing is aggregated.
            let mut c = NetSim::new(&links, 0).unwrap();
            c.set_packet_bytes(Some(4096));
            let packets = run_ring_allreduce(&mut c, n, chunks, chunk_bytes).unwrap();
            assert_eq!(packets.simulated_flows, each.flows);
        }
    }
}

/// Larger random networks than `case`, with few distinct capacities (equal
/// shares tie often), flows over up to five links, and link faults.
fn crowded_case() -> impl Strategy<Value = (Case, Faults)> {
    let net = (2usize..14).prop_flat_map(|nl| {
        let caps = prop::collection::vec(prop::sample::select(vec![1e9, 2e9, 3e9, 1e10]), nl);
        let route =
            prop::sample::subsequence((0..nl).collect::<Vec<_>>(), 1..=nl.min(5)).prop_shuffle();
        let flow = (
            route,
            1u64..4_000_000,
            prop::sample::select(vec![0u64, 1_000_000, 7_000_000]),
        );
        (caps, prop::collection::vec(flow, 1..48)).prop_map(|(caps, flows)| Case { caps, flows })
    });
    let fault = (0usize..14, 0u64..3_000_000, prop::option::of(0.1f64..1.0));
    (net, prop::collection::vec(fault, 0..3))
}

/// Every occurrence of a run, in order; flows start at their times, and each
/// delivery starts nothing (the point is the rates, not a schedule).
fn run_case(c: &Case, faults: &Faults, exhaustive: bool) -> Vec<Occurrence<usize>> {
    let nl = c.caps.len();
    let links: Vec<Link> = c
        .caps
        .iter()
        .map(|&cap| Link::new(cap, Time(500)))
        .collect();
    let mut sim: NetSim<usize> = NetSim::new(&links, 3).unwrap();
    sim.set_exhaustive(exhaustive);
    for &(link, at, frac) in faults {
        let kind = frac.map_or(FaultKind::Fail, FaultKind::Degrade);
        sim.add_fault(LinkFault {
            link: link % nl,
            at: Time(at),
            kind,
        })
        .unwrap();
    }
    for (i, f) in c.flows.iter().enumerate() {
        sim.schedule_at(Time(f.2), i).unwrap();
    }
    let mut out = Vec::new();
    while let Some(o) = sim.step().unwrap() {
        if let Occurrence::User { event, .. } = o {
            let f = &c.flows[event];
            sim.start_flow(event as u64, &f.0, f.1).unwrap();
        }
        out.push(o);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Recomputing only what a change can move (held flows, tight links, the
    /// slack test) gives the same occurrences, to the picosecond and in the
    /// same order, as recomputing every flow over every link at every change.
    #[test]
    fn incremental_rates_equal_whole_network_recomputation((c, faults) in crowded_case()) {
        let full = run_case(&c, &faults, true);
        let incremental = run_case(&c, &faults, false);
        prop_assert_eq!(incremental, full);
    }
}

/// A tie between equal shares hands held flows to another link: links 3 and
/// 4 both give flows 3, 6 and 8 a sixth of 2 GB/s once flows 0, 1 and 5 join
/// link 3, and link 3 (the lower id) now freezes them. Link 4, outside the
/// recomputed set, would then share what is left among its other flows (2, 4
/// and 7) from another residual (2e9 - 3 x share, then / 3, instead of
/// 2e9 / 6): the last bits differ, and so does flow 2's remaining byte count
/// when link 0 fails. Found by the proptest above; the incremental filling
/// must recompute the old bottleneck too.
#[test]
fn a_tie_that_hands_held_flows_to_another_link_recomputes_the_old_one() {
    let c = Case {
        caps: vec![3e9, 2e9, 2e9, 2e9, 2e9, 2e9],
        flows: vec![
            (vec![3], 1, 1_000_000),
            (vec![3], 1, 1_000_000),
            (vec![0, 4], 524_622, 0),
            (vec![3, 4], 334, 0),
            (vec![4], 334, 0),
            (vec![3], 1, 1_000_000),
            (vec![3, 4], 334, 0),
            (vec![4], 334, 0),
            (vec![3, 4], 334, 0),
        ],
    };
    let faults = vec![(0, 1_000_310, None)];
    let full = run_case(&c, &faults, true);
    assert!(
        full.iter()
            .any(|o| matches!(o, Occurrence::Undeliverable(u) if u.tag == 2)),
        "flow 2 is still sending when link 0 fails: {full:?}"
    );
    assert_eq!(run_case(&c, &faults, false), full);
}
