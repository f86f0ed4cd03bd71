//! go-plugin's control stream (`Control.Ping`, `Control.Quit`, `Dispenser.Dispense`) and its
//! stream broker: `Dispense` hands out an id, the host opens a new stream and writes the id
//! (little-endian `uint32`), the plugin writes it back and serves `Plugin` on that stream.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::watch;

use super::argo::DISPENSE_NAME;
use super::gob::{Decoder, GobError, Ignored, Step};
use super::netrpc::{self, not_found, MessageReader, Outcome, Reply, Service};
use super::yamux::{SessionHandle, Stream};

/// Dispensed ids not yet claimed by a stream; more dispenses than this are refused.
const MAX_PENDING: usize = 1024;
/// How long a new broker stream may take to send its id.
const ID_TIMEOUT: Duration = Duration::from_secs(10);

/// Ids handed out by `Dispense`, each claimable by one stream.
#[derive(Debug, Default)]
pub(crate) struct Dispensed {
    next: AtomicU32,
    pending: Mutex<HashSet<u32>>,
}

impl Dispensed {
    fn reserve(&self) -> Option<u32> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.len() >= MAX_PENDING {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        pending.insert(id);
        Some(id)
    }

    fn take(&self, id: u32) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
    }
}

/// A decoded control-stream call.
#[derive(Debug)]
pub(crate) enum ControlCall {
    Ping,
    Quit,
    Dispense(String),
}

/// The `Control` and `Dispenser` services of one session.
pub(crate) struct ControlService {
    pub(crate) dispensed: Arc<Dispensed>,
    pub(crate) quit: watch::Sender<bool>,
    pub(crate) session: SessionHandle,
}

impl Service for ControlService {
    type Call = ControlCall;

    fn feed(
        &self,
        method: &str,
        dec: &mut Decoder,
        msg: &[u8],
    ) -> Result<Step<Result<ControlCall, String>>, GobError> {
        let call = match method {
            "Control.Ping" => Ok(ControlCall::Ping),
            "Control.Quit" => Ok(ControlCall::Quit),
            "Dispenser.Dispense" => {
                return Ok(match dec.feed::<String>(msg)? {
                    Step::Value(name) => Step::Value(Ok(ControlCall::Dispense(name))),
                    Step::NeedMore => Step::NeedMore,
                    Step::TypeDefined => Step::TypeDefined,
                })
            }
            _ => Err(not_found(method, &["Control", "Dispenser"])),
        };
        Ok(match dec.feed::<Ignored>(msg)? {
            Step::Value(_) => Step::Value(call),
            Step::NeedMore => Step::NeedMore,
            Step::TypeDefined => Step::TypeDefined,
        })
    }

    async fn call(self: Arc<Self>, call: ControlCall) -> Outcome {
        match call {
            ControlCall::Ping => Outcome::ok(Reply::Empty),
            ControlCall::Quit => {
                let session = self.session.clone();
                let quit = self.quit.clone();
                Outcome {
                    reply: Ok(Reply::Empty),
                    // Once the answer is on the socket, tell serve() to return.
                    after: Some(
                        async move {
                            session.flush().await;
                            quit.send_replace(true);
                        }
                        .boxed(),
                    ),
                }
            }
            ControlCall::Dispense(name) if name == DISPENSE_NAME => {
                match self.dispensed.reserve() {
                    Some(id) => Outcome::ok(Reply::Uint(u64::from(id))),
                    None => Outcome::err("too many pending dispenses"),
                }
            }
            ControlCall::Dispense(name) => Outcome::err(format!("unknown plugin type: {name}")),
        }
    }
}

/// Serves a stream the host opened after a `Dispense`: checks and echoes its id, then serves
/// `service` on it. A stream with an unknown id is reset.
pub(crate) async fn serve_dispensed<S: Service>(
    service: Arc<S>,
    dispensed: Arc<Dispensed>,
    stream: Stream,
) {
    let mut reader = MessageReader::new(stream.clone());
    let id = match tokio::time::timeout(ID_TIMEOUT, reader.read_exact(4)).await {
        Ok(Some(b)) if b.len() == 4 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        _ => {
            tracing::warn!(stream = stream.id(), "go-plugin: broker stream sent no id");
            stream.reset();
            return;
        }
    };
    if !dispensed.take(id) {
        tracing::warn!(
            stream = stream.id(),
            id,
            "go-plugin: broker stream with an id never dispensed"
        );
        stream.reset();
        return;
    }
    if stream.write_all(&id.to_le_bytes()).await.is_err() {
        return;
    }
    netrpc::serve(service, reader).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispensed_ids_are_claimed_once() {
        let d = Dispensed::default();
        let a = d.reserve().unwrap();
        let b = d.reserve().unwrap();
        assert_ne!(a, b);
        assert!(d.take(a));
        assert!(!d.take(a));
        assert!(!d.take(999));
        assert!(d.take(b));
    }
}
