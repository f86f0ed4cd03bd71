//! SIGTERM and SIGINT in plugin mode, received on a thread of their own.
//!
//! The serving runtime's workers may all be busy (decoding a large value, say), and tokio only
//! notices a signal when one of them polls its driver; a runtime on a dedicated thread always
//! does, so SIGTERM ends the plugin promptly whatever the workers are doing. SIGINT is ignored,
//! as go-plugin plugins do: the host decides when the plugin ends.

use std::future::Future;
use std::io;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::oneshot;

/// Installs the handlers and returns a future that resolves on SIGTERM. Fails if the thread
/// or the handlers cannot be set up.
pub(crate) fn sigterm() -> io::Result<impl Future<Output = ()> + Send + 'static> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
    let (term_tx, term_rx) = oneshot::channel::<()>();
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
                loop {
                    tokio::select! {
                        _ = term.recv() => break,
                        _ = int.recv() => tracing::debug!("plugin: ignoring SIGINT, the host ends the plugin"),
                    }
                }
                let _ = term_tx.send(());
            });
        })?;
    ready_rx.recv().map_err(|_| {
        io::Error::other("the signal thread ended before installing its handlers")
    })??;
    Ok(async move {
        if term_rx.await.is_err() {
            // The thread is gone without a signal: nothing will ever end the wait.
            std::future::pending::<()>().await;
        }
    })
}
