//! Run options as text (the scenario's `[run]` section and `shardsim exec`'s
//! flags share this vocabulary) turned into [`TimedOptions`]: stragglers
//! `DEVICE:FACTOR`, link faults `FROM->TO@TIME[:FRACTION]`, seeded draws
//! `COUNT:FACTOR` and `COUNT@WINDOW`.

use crate::engine::perturb::draw_link_failures;
use crate::engine::{FaultKind, Jitter, LinkFault, Stragglers, Time};
use crate::exec::timed::{OomPolicy, TimedOptions};
use crate::topology::{Duration, LinkId, Topology};

use super::spec::RunSpec;
use super::ScenarioError;

fn bad(what: &str, text: &str, why: &str) -> ScenarioError {
    ScenarioError::Options(format!("{what} {text}: {why}"))
}

/// Split `text` at `sep` into a count and the rest.
fn count_and<'a>(
    what: &str,
    text: &'a str,
    sep: char,
    example: &str,
) -> Result<(usize, &'a str), ScenarioError> {
    let (n, rest) = text
        .split_once(sep)
        .ok_or_else(|| bad(what, text, &format!("expected {example}")))?;
    let n = n.trim().parse().map_err(|_| bad(what, text, "bad count"))?;
    Ok((n, rest.trim()))
}

/// The most link failures `random_link_failures` may draw (each is an event
/// of the run; a count of billions would exhaust memory before it starts).
pub const MAX_DRAWN_LINK_FAILURES: usize = 1_000_000;

/// Parse `DEVICE:FACTOR`.
pub fn parse_straggler(text: &str) -> Result<(u64, f64), ScenarioError> {
    let what = "straggler";
    let (d, f) = text
        .split_once(':')
        .ok_or_else(|| bad(what, text, "expected DEVICE:FACTOR, e.g. 3:1.5"))?;
    let d = d
        .trim()
        .parse()
        .map_err(|_| bad(what, text, "bad device id"))?;
    let f = f
        .trim()
        .parse()
        .map_err(|_| bad(what, text, "bad factor"))?;
    Ok((d, f))
}

/// Parse `FROM->TO@TIME[:FRACTION]` against `topo`.
pub fn parse_fault(text: &str, topo: &Topology) -> Result<LinkFault, ScenarioError> {
    let b = |why: &str| bad("link fault", text, why);
    let (link, rest) = text
        .split_once('@')
        .ok_or_else(|| b("expected FROM->TO@TIME[:FRACTION], e.g. n0.gpu3->n0.nvswitch@20us"))?;
    let (from, to) = link
        .split_once("->")
        .ok_or_else(|| b("expected FROM->TO before @"))?;
    let (time, fraction) = match rest.split_once(':') {
        Some((t, f)) => (t, Some(f)),
        None => (rest, None),
    };
    let component = |name: &str| {
        topo.by_name(name.trim())
            .ok_or_else(|| b(&format!("no component named {}", name.trim())))
    };
    let (a, z) = (component(from)?, component(to)?);
    let id = topo
        .out_links(a)
        .into_iter()
        .find(|&l| topo.link(l).to == z)
        .ok_or_else(|| b("no link between these components"))?;
    let at = Duration::parse(time.trim()).map_err(|e| b(&e.to_string()))?;
    let kind = match fraction {
        None => FaultKind::Fail,
        Some(f) => FaultKind::Degrade(
            f.trim()
                .parse()
                .map_err(|_| b("the fraction must be a number in (0, 1]"))?,
        ),
    };
    let fault = LinkFault {
        link: id.0 as usize,
        at: Time(at.ps()),
        kind,
    };
    fault.validate().map_err(|e| b(&e.to_string()))?;
    Ok(fault)
}

/// The timed-run options of `run` on `topo` with `devices` devices.
pub fn timed_options(
    run: &RunSpec,
    topo: &Topology,
    devices: u64,
) -> Result<TimedOptions, ScenarioError> {
    let opt = |e: crate::engine::PerturbError| ScenarioError::Options(e.to_string());
    let mut opts = TimedOptions {
        seed: run.seed,
        on_oom: if run.continue_on_oom {
            OomPolicy::Continue
        } else {
            OomPolicy::Stop
        },
        ..TimedOptions::default()
    };
    if let Some(j) = run.jitter {
        opts.jitter = Some(Jitter::new(j).map_err(opt)?);
    }
    let mut stragglers = Stragglers::new();
    for s in &run.stragglers {
        let (d, f) = parse_straggler(s)?;
        if d >= devices {
            return Err(bad("straggler", s, &format!("there are {devices} devices")));
        }
        stragglers.insert(d, f).map_err(opt)?;
    }
    if let Some(text) = &run.random_stragglers {
        let what = "random stragglers";
        let (count, f) = count_and(what, text, ':', "COUNT:FACTOR, e.g. 2:1.5")?;
        let f: f64 = f.parse().map_err(|_| bad(what, text, "bad factor"))?;
        for (d, f) in Stragglers::draw(run.seed, devices, count, f)
            .map_err(opt)?
            .iter()
        {
            stragglers.insert(d, f).map_err(opt)?;
        }
    }
    opts.stragglers = stragglers;
    opts.faults = run
        .link_faults
        .iter()
        .map(|f| parse_fault(f, topo))
        .collect::<Result<_, _>>()?;
    if let Some(text) = &run.random_link_failures {
        let what = "random link failures";
        let (count, window) = count_and(what, text, '@', "COUNT@WINDOW, e.g. 2@50us")?;
        // The draws are kept as a list: bound it before allocating.
        if count > MAX_DRAWN_LINK_FAILURES {
            return Err(bad(
                what,
                text,
                &format!("at most {MAX_DRAWN_LINK_FAILURES} failures can be drawn"),
            ));
        }
        let window = Duration::parse(window).map_err(|e| bad(what, text, &e.to_string()))?;
        opts.faults.extend(draw_link_failures(
            run.seed,
            topo.links().len(),
            count,
            Time(window.ps()),
        ));
    }
    Ok(opts)
}

/// The stragglers and link faults a run applies, one line each (drawn ones
/// included, so a seeded run says what it drew).
pub fn describe_perturbations(opts: &TimedOptions, topo: &Topology) -> Vec<String> {
    let mut out = Vec::new();
    for (d, f) in opts.stragglers.iter() {
        out.push(format!("straggler: device {d} computes {f}x slower"));
    }
    for f in &opts.faults {
        let link = topo.link(LinkId(f.link as u32));
        let name = |c| topo.component(c).name.clone();
        let what = match f.kind {
            FaultKind::Fail => "fails".to_string(),
            FaultKind::Degrade(x) => format!("degrades to {x} of its bandwidth"),
        };
        out.push(format!(
            "link fault: {} -> {} {what} at {:.3} us",
            name(link.from),
            name(link.to),
            f.at.0 as f64 / 1e6
        ));
    }
    out
}
