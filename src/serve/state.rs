//! The state every request shares.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::{analysis, auth, http, ops, templates, Settings};
use crate::engine::Engine;

/// The state every request shares.
pub(crate) struct AppState {
    /// The analysis engine.
    pub engine: Engine,
    /// The templates in use.
    pub templates: templates::Store,
    /// Bearer-token authentication (the same token the gRPC listener checks).
    pub auth: Arc<auth::Auth>,
    /// Request, verdict and Prometheus query metrics.
    pub metrics: Arc<ops::Metrics>,
    /// Handler limits.
    pub settings: Settings,
    shutting_down: AtomicBool,
    /// Held by a reload, so that two never interleave.
    pub(super) reloading: Mutex<()>,
}

impl AppState {
    /// The state of a server that has just loaded its templates.
    pub(super) fn new(
        engine: Engine,
        templates: templates::Store,
        auth: Arc<auth::Auth>,
        metrics: Arc<ops::Metrics>,
        settings: Settings,
    ) -> AppState {
        AppState {
            engine,
            templates,
            auth,
            metrics,
            settings,
            shutting_down: AtomicBool::new(false),
            reloading: Mutex::new(()),
        }
    }

    /// The metrics a request selects, from the templates in use and this server's settings.
    /// An inline spec is parsed on the blocking pool: a long query can take the parser a
    /// noticeable time, which must not hold a worker that serves other requests.
    pub(crate) async fn plan(
        self: &Arc<Self>,
        selection: analysis::Selection,
        args: Vec<(String, String)>,
    ) -> Result<analysis::Plan, http::Rejection> {
        let is_template = matches!(selection, analysis::Selection::Template { .. });
        let plan = move |state: &AppState| {
            analysis::plan(
                &state.templates.current(),
                &selection,
                &args,
                &state.settings.trust,
            )
        };
        if is_template {
            return plan(self);
        }
        let state = self.clone();
        tokio::task::spawn_blocking(move || plan(&state))
            .await
            .unwrap_or_else(|e| {
                Err(http::Rejection::unprocessable(format!(
                    "the spec could not be read: {e}"
                )))
            })
    }

    /// Whether the shutdown signal came (`/readyz` then answers 503).
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }

    /// Marks the server as stopping.
    pub(super) fn start_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
    }
}
