//! One shutdown for every server: a [`Shutdown`] handle that resolves once the process is asked
//! to stop, passed to each accept loop (the net/rpc plugin, the gRPC plugin, `serve`'s gRPC
//! listener, and `serve`'s HTTP loop), as tokio's mini-redis passes its shutdown signal.
//!
//! [`on_signals`] makes the usual one: signals are received on a thread of their own. The
//! serving runtime's workers may all be busy (decoding a large value, say), and tokio only
//! notices a signal when one of them polls its driver; a runtime on a dedicated thread always
//! does, so SIGTERM ends the process promptly whatever the workers are doing.
//!
//! (The module is crate-private, so this example is not run as a doctest.)
//!
//! ```ignore
//! # async fn demo() -> std::io::Result<()> {
//! use rollgate::shutdown::{on_signals, Signals};
//! let shutdown = on_signals(Signals::TermAndInt)?;
//! let reason = shutdown.clone().wait().await; // "SIGTERM" or "SIGINT"
//! # let _ = reason; Ok(()) }
//! ```

use std::io;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// Which signals end the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signals {
    /// SIGTERM only; SIGINT is ignored, as go-plugin plugins do (the host decides when the
    /// plugin ends; a Ctrl-C at the host's terminal reaches the whole process group).
    TermOnly,
    /// SIGTERM and SIGINT (a server run from a terminal or by a supervisor).
    TermAndInt,
}

/// Resolves once shutdown was asked for; clone it for every server that must stop.
#[derive(Debug, Clone)]
pub(crate) struct Shutdown {
    rx: watch::Receiver<Option<&'static str>>,
}

/// Asks every [`Shutdown`] of its [`channel`] to resolve.
#[derive(Debug)]
pub(crate) struct Trigger {
    tx: watch::Sender<Option<&'static str>>,
}

/// A trigger and the shutdown it fires.
pub(crate) fn channel() -> (Trigger, Shutdown) {
    let (tx, rx) = watch::channel(None);
    (Trigger { tx }, Shutdown { rx })
}

impl Trigger {
    /// Resolves the shutdowns with `reason` (the first reason given stays).
    pub(crate) fn fire(&self, reason: &'static str) {
        self.tx.send_if_modified(|r| {
            let first = r.is_none();
            if first {
                *r = Some(reason);
            }
            first
        });
    }
}

impl Shutdown {
    /// Whether shutdown was asked for already.
    #[cfg(test)]
    pub(crate) fn is_triggered(&self) -> bool {
        self.rx.borrow().is_some()
    }

    /// Waits for the shutdown; returns its reason (e.g. `"SIGTERM"`). The future owns the
    /// handle (and is `Send + 'static`), so it can be handed to a server as its stop future.
    pub(crate) async fn wait(mut self) -> &'static str {
        let reason = self.rx.wait_for(Option::is_some).await.map(|r| *r);
        match reason {
            Ok(Some(reason)) => reason,
            // The trigger is gone without firing: nothing will ever end the wait.
            _ => std::future::pending().await,
        }
    }
}

/// Installs the handlers for `which` on a thread of their own and returns the shutdown they
/// fire. Fails if the thread or the handlers cannot be set up.
pub(crate) fn on_signals(which: Signals) -> io::Result<Shutdown> {
    let (trigger, shutdown) = channel();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
    std::thread::Builder::new()
        .name("rollgate-signals".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            runtime.block_on(async move {
                let handlers = signal(SignalKind::terminate())
                    .and_then(|term| Ok((term, signal(SignalKind::interrupt())?)));
                let (mut term, mut int) = match handlers {
                    Ok(h) => h,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let reason = loop {
                    tokio::select! {
                        _ = term.recv() => break "SIGTERM",
                        _ = int.recv() => match which {
                            Signals::TermAndInt => break "SIGINT",
                            Signals::TermOnly => tracing::debug!("plugin: ignoring SIGINT, the host ends the plugin"),
                        },
                    }
                };
                trigger.fire(reason);
                // Keep the trigger (and so the channel) alive for late waiters.
                std::future::pending::<()>().await;
            });
        })?;
    ready_rx.recv().map_err(|_| {
        io::Error::other("the signal thread ended before installing its handlers")
    })??;
    Ok(shutdown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn every_clone_resolves_with_the_first_reason() {
        let (trigger, shutdown) = channel();
        let (a, b) = (shutdown.clone(), shutdown.clone());
        assert!(!shutdown.is_triggered());
        let early = tokio::time::timeout(Duration::from_millis(50), a.clone().wait()).await;
        assert!(early.is_err(), "resolved before the trigger fired");
        trigger.fire("SIGTERM");
        trigger.fire("SIGINT");
        assert_eq!(a.wait().await, "SIGTERM");
        assert_eq!(b.wait().await, "SIGTERM");
        assert!(shutdown.is_triggered());
    }

    #[tokio::test]
    async fn a_dropped_trigger_does_not_resolve_its_shutdown() {
        let (trigger, shutdown) = channel();
        drop(trigger);
        let orphan = tokio::time::timeout(Duration::from_millis(50), shutdown.wait()).await;
        assert!(
            orphan.is_err(),
            "a dropped trigger must not read as a shutdown"
        );
    }
}
