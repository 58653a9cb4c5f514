//! The deterministic discrete-event core: integer picosecond time with checked
//! arithmetic and one rounding rule (`time`), an event queue ordered by
//! (time, sequence number) (`queue`), per-component seeded ChaCha streams
//! (`rng`), jitter, stragglers and link faults (`perturb`), and a CSV event log
//! (`log`). The `Engine` ties the queue to a clock that never goes backwards.
//! Higher layers (the network model, collectives, execution) define their own
//! event payloads and react to each event as it is popped.

pub mod log;
pub mod perturb;
pub mod queue;
pub mod rng;
pub mod time;

pub use log::{EventLog, LogRecord};
pub use perturb::{FaultKind, Jitter, LinkFault, PerturbError, Stragglers};
pub use queue::EventQueue;
pub use rng::{component_rng, component_seed, ComponentRng};
pub use time::{transfer_ps, transfer_ps_exact, Time, TimeOverflow, PS_PER_SEC};

use thiserror::Error;

/// Errors of the simulation loop.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum EngineError {
    #[error(transparent)]
    Time(#[from] TimeOverflow),
    #[error("event scheduled at {at} which is before the current time {now}")]
    InThePast { at: Time, now: Time },
}

/// An event queue plus the current time. `schedule_*` refuses the past; `next`
/// advances the clock to the popped event, so observed times never decrease.
pub struct Engine<E> {
    queue: EventQueue<E>,
    now: Time,
    processed: u64,
}

impl<E> Default for Engine<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> Engine<E> {
    pub fn new() -> Self {
        Engine {
            queue: EventQueue::new(),
            now: Time::ZERO,
            processed: 0,
        }
    }

    pub fn now(&self) -> Time {
        self.now
    }

    /// Schedule `event` at absolute time `at` (>= now).
    pub fn schedule_at(&mut self, at: Time, event: E) -> Result<(), EngineError> {
        if at < self.now {
            return Err(EngineError::InThePast { at, now: self.now });
        }
        self.queue.push(at, event);
        Ok(())
    }

    /// Schedule `event` after `delay` from now.
    pub fn schedule_after(&mut self, delay: Time, event: E) -> Result<(), EngineError> {
        let at = self.now.checked_add(delay)?;
        self.queue.push(at, event);
        Ok(())
    }

    /// Pop the next event and advance the clock to it.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<(Time, E)> {
        let (t, _, e) = self.queue.pop()?;
        debug_assert!(t >= self.now);
        self.now = t;
        self.processed += 1;
        Some((t, e))
    }

    /// Time of the next pending event.
    pub fn peek_time(&self) -> Option<Time> {
        self.queue.peek_time()
    }

    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Events popped so far.
    pub fn processed(&self) -> u64 {
        self.processed
    }
}
