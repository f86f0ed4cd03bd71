//! Reloading: SIGHUP, or `--reload-interval` noticing a change, re-reads the templates, the
//! token and the TLS files. Each keeps its old value when its new one is broken.

use std::sync::Arc;
use std::time::Duration;

use super::credentials::Credentials;
use super::state::AppState;
use super::watch;

/// Reloads templates, token and TLS files, one reload at a time, off the async workers.
pub(super) async fn reload(state: Arc<AppState>, credentials: Credentials) {
    let work = tokio::task::spawn_blocking(move || {
        let _one_at_a_time = state.reloading.lock();
        match state.templates.reload() {
            Ok(set) => {
                for warning in &set.warnings {
                    tracing::warn!(warning = %warning, "template warning");
                }
                for error in &set.lint_errors {
                    tracing::error!(error = %error, "template fails lint; not ready until it is fixed");
                }
                state.metrics.observe_reload(true, set.len());
                tracing::info!(templates = set.len(), "templates reloaded");
            }
            Err(e) => {
                let kept = state.templates.current().len();
                state.metrics.observe_reload(false, kept);
                tracing::error!(error = %e, kept_templates = kept, "template reload failed; the templates in use stay");
            }
        }
        credentials.reload();
        tracing::info!("reload done");
    });
    if let Err(e) = work.await {
        tracing::error!(error = %e, "reload task failed");
    }
}

/// Reloads whenever the watched files change, until shutdown. A broken change is tried once:
/// the next attempt waits for the next change.
pub(super) async fn reload_on_change(
    state: Arc<AppState>,
    credentials: Credentials,
    every: Duration,
    watched: watch::Watched,
    mut seen: watch::Fingerprint,
) {
    let watched = Arc::new(watched);
    while !state.is_shutting_down() {
        tokio::time::sleep(every).await;
        let reading = watched.clone();
        let Ok(now) = tokio::task::spawn_blocking(move || reading.fingerprint()).await else {
            continue;
        };
        if now != seen {
            tracing::info!("watched files changed: reloading");
            seen = now;
            reload(state.clone(), credentials.clone()).await;
        }
    }
}
