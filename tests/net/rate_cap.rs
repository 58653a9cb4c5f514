//! A flow's own rate cap (`start_flow_capped`): by hand, a capped flow
//! leaves its links' bandwidth to the others; proptests: a capped flow never
//! runs above its cap and every flow is held by its cap or by a saturated
//! link on which it is among the fastest (max-min with caps); the incremental
//! recomputation equals the whole-network one with caps; caps that cannot
//! bind change nothing, to the picosecond.

use proptest::prelude::*;

use shardsim::engine::{EventQueue, FaultKind, LinkFault, Time};
use shardsim::net::{Link, LinkId, NetError, NetSim, NetTimer, Network, Occurrence, Schedule};

/// `ceil(bytes * 1e12 / rate)`, written out independently of the crate.
fn ceil_ps(bytes: u128, rate: u128) -> u64 {
    (bytes * 1_000_000_000_000).div_ceil(rate) as u64
}

#[test]
fn a_capped_flow_runs_at_its_cap_and_leaves_the_rest_of_the_link_to_others() {
    // One 10 GB/s link, 1 us latency. Flow 0 capped at 2 GB/s, flow 1 not:
    // flow 1 gets 8 GB/s (not the even 5 GB/s); once flow 1 is done, flow 0
    // still runs at 2 GB/s.
    let lat = 1_000_000;
    let mut sim: NetSim<()> = NetSim::new(&[Link::new(1e10, Time(lat))], 0).unwrap();
    sim.start_flow_capped(0, &[0], 4_000_000, 2e9).unwrap();
    sim.start_flow(1, &[0], 8_000_000).unwrap();
    let mut got = Vec::new();
    while let Some(o) = sim.step().unwrap() {
        if let Occurrence::Delivered { at, tag } = o {
            got.push((tag, at.0));
        }
    }
    let one = ceil_ps(8_000_000, 8_000_000_000) + lat;
    let zero = ceil_ps(4_000_000, 2_000_000_000) + lat;
    assert_eq!(got, vec![(1, one), (0, zero)]);
}

#[test]
fn a_cap_above_the_links_changes_nothing_and_a_bad_cap_is_an_error() {
    let run = |cap: f64| {
        let mut sim: NetSim<()> = NetSim::new(&[Link::new(1e10, Time(5))], 0).unwrap();
        sim.start_flow_capped(0, &[0], 1_000_000, cap).unwrap();
        sim.start_flow(1, &[0], 3_000_000).unwrap();
        let mut got = Vec::new();
        while let Some(o) = sim.step().unwrap() {
            got.push(format!("{o:?}"));
        }
        got
    };
    assert_eq!(run(2e10), run(f64::INFINITY));
    let mut sim: NetSim<()> = NetSim::new(&[Link::new(1e10, Time(5))], 0).unwrap();
    for bad in [0.0, -1.0, f64::NAN] {
        assert!(matches!(
            sim.start_flow_capped(0, &[0], 1, bad),
            Err(NetError::BadRateCap(_))
        ));
    }
    let mut s = Schedule::new();
    assert!(matches!(
        s.add_transfer_capped(&[0], 1, 0.0, &[]),
        Err(NetError::BadRateCap(_))
    ));
}

/// A schedule's capped transfer runs like the flow it starts: a 1 MB
/// transfer capped at 1 GB/s beside an uncapped one on a 3 GB/s link.
#[test]
fn a_schedules_capped_transfer_runs_at_its_cap() {
    let mut s = Schedule::new();
    let a = s.add_transfer_capped(&[0], 1_000_000, 1e9, &[]).unwrap();
    let b = s.add_transfer(&[0], 2_000_000, &[]).unwrap();
    let mut sim: NetSim<usize> = NetSim::new(&[Link::new(3e9, Time(0))], 0).unwrap();
    let r = s.run(&mut sim).unwrap();
    assert_eq!(r.finish[a], Some(Time(ceil_ps(1_000_000, 1_000_000_000))));
    assert_eq!(r.finish[b], Some(Time(ceil_ps(2_000_000, 2_000_000_000))));
}

/// A flow: route, bytes, start ps, rate cap (None: uncapped).
type Flow = (Vec<LinkId>, u64, u64, Option<f64>);

#[derive(Debug, Clone)]
struct Case {
    capacities: Vec<f64>,
    flows: Vec<Flow>,
}

fn case(max_links: usize, max_flows: usize) -> impl Strategy<Value = Case> {
    (2usize..max_links).prop_flat_map(move |nl| {
        let capacities = prop::collection::vec(prop::sample::select(vec![1e9, 2e9, 3e9, 1e10]), nl);
        let route =
            prop::sample::subsequence((0..nl).collect::<Vec<_>>(), 1..=nl.min(4)).prop_shuffle();
        let cap = prop::option::of(prop::sample::select(vec![3e8, 5e8, 1e9, 2.5e9, 4e9]));
        let flow = (
            route,
            1u64..4_000_000,
            prop::sample::select(vec![0u64, 1_000_000, 7_000_000]),
            cap,
        );
        (capacities, prop::collection::vec(flow, 1..max_flows))
            .prop_map(|(capacities, flows)| Case { capacities, flows })
    })
}

/// Max-min with caps after a flush: no link over capacity, no flow over its
/// cap, and every flow either runs at its cap or crosses a saturated link on
/// which no flow runs faster.
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
            let own = net.flow_cap(s).unwrap();
            prop_assert!(rate > 0.0);
            prop_assert!(rate <= own, "flow {s} at {rate} over its cap {own}");
            prop_assert!(
                route.iter().all(|&m| m < caps.len()),
                "a private link in a route"
            );
            let at_cap = rate >= own * (1.0 - 1e-9);
            let bottlenecked = route.iter().any(|&m| {
                let saturated = net.link_load(m) >= caps[m] * (1.0 - 1e-9);
                let fastest = net
                    .flows_on(m)
                    .iter()
                    .map(|&o| net.flow_rate(o).unwrap().0)
                    .fold(0.0, f64::max);
                saturated && rate >= fastest * (1.0 - 1e-9)
            });
            prop_assert!(
                at_cap || bottlenecked,
                "flow {s} at {rate}: no cap or link holds it"
            );
        }
    }
    Ok(())
}

enum Ev {
    Start(usize),
    Timer(NetTimer),
}

/// Every occurrence of a run on `NetSim` (flows start at their times with
/// `cap_of`'s cap, deliveries start nothing), whole-network recomputation
/// or incremental.
fn run_case(
    c: &Case,
    faults: &[(usize, u64, Option<f64>)],
    exhaustive: bool,
    cap_of: &dyn Fn(&Flow) -> f64,
) -> Vec<Occurrence<usize>> {
    let nl = c.capacities.len();
    let links: Vec<Link> = c
        .capacities
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
            sim.start_flow_capped(event as u64, &f.0, f.1, cap_of(f))
                .unwrap();
        }
        out.push(o);
    }
    out
}

fn faults() -> impl Strategy<Value = Vec<(usize, u64, Option<f64>)>> {
    let fault = (0usize..10, 0u64..3_000_000, prop::option::of(0.1f64..1.0));
    prop::collection::vec(fault, 0..3)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    /// After every flush: max-min with caps, no flow over its cap.
    #[test]
    fn capped_flows_never_exceed_their_caps_and_the_rest_is_max_min(c in case(7, 16)) {
        let links: Vec<Link> = c.capacities.iter().map(|&x| Link::new(x, Time(1_000))).collect();
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
                check_allocation(&net, &c.capacities)?;
            }
            let Some((t, _, ev)) = q.pop() else { break };
            now = t;
            match ev {
                Ev::Start(i) => {
                    let f = &c.flows[i];
                    let lat = net.route_latency(&f.0).unwrap();
                    let cap = f.3.unwrap_or(f64::INFINITY);
                    net.start_flow_capped(now, i as u64, &f.0, f.1, lat, cap).unwrap();
                    for (t, timer) in net.drain_timers() {
                        q.push(t, Ev::Timer(timer));
                    }
                }
                Ev::Timer(timer) => {
                    if let Some(d) = net.on_timer(now, timer).unwrap() {
                        // Never before its bytes could pass at its cap.
                        let f = &c.flows[d.tag as usize];
                        if let Some(cap) = f.3 {
                            prop_assert!(now.0 as f64 >= f.2 as f64 + f.1 as f64 * 1e12 / cap - 1.0);
                        }
                        done[d.tag as usize] = true;
                    }
                }
            }
        }
        prop_assert!(done.iter().all(|&d| d));
        prop_assert_eq!(net.active_flows(), 0);
    }

    /// The incremental recomputation (held flows, tight links, the slack
    /// test) equals the whole-network one with caps too, faults included.
    #[test]
    fn incremental_rates_with_caps_equal_whole_network_recomputation(
        c in case(12, 40), f in faults()
    ) {
        let cap = |f: &Flow| f.3.unwrap_or(f64::INFINITY);
        prop_assert_eq!(run_case(&c, &f, false, &cap), run_case(&c, &f, true, &cap));
        // Every flow capped: the flushes where only capped flows start on
        // links with slack take the short path (`flush_at_caps`).
        let all = |f: &Flow| f.3.unwrap_or(5e8);
        prop_assert_eq!(run_case(&c, &f, false, &all), run_case(&c, &f, true, &all));
    }

    /// Caps at or above the slowest link of a flow's route cannot bind:
    /// the run is the uncapped run, to the picosecond and in order.
    #[test]
    fn caps_that_cannot_bind_change_nothing(c in case(12, 40), f in faults()) {
        let none = |_: &Flow| f64::INFINITY;
        let slowest = |f: &Flow| {
            f.0.iter().map(|&l| c.capacities[l]).fold(f64::INFINITY, f64::min)
        };
        let loose = |f: &Flow| slowest(f) * 1.5;
        let exact = |f: &Flow| slowest(f);
        let want = run_case(&c, &f, false, &none);
        prop_assert_eq!(&run_case(&c, &f, false, &loose), &want);
        prop_assert_eq!(&run_case(&c, &f, false, &exact), &want);
    }
}
