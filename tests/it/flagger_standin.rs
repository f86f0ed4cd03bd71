//! Whole canary runs of a Flagger stand-in against the real `rollgate serve` binary on
//! 127.0.0.1, which judges with the real Prometheus of the test harness (generated data).
//!
//! Flagger cannot run here, so [`Flagger`] below replays the rules of Flagger v1.44.0
//! (github.com/fluxcd/flagger, tag v1.44.0) that decide a canary's fate from its webhooks, for
//! the progressive-canary strategy. Each rule cites the file and function it comes from:
//!
//! - `pkg/controller/scheduler.go`: `advanceCanary` (the order of one interval),
//!   `checkCanaryStatus`, `runAnalysis`, `runCanary`, `rollback`, `nextStepWeight`,
//!   `maxWeight`;
//! - `pkg/controller/scheduler_hooks.go`: `runConfirmRolloutHooks`,
//!   `runConfirmTrafficIncreaseHooks`, `runConfirmPromotionHooks`, `runPreRolloutHooks`,
//!   `runPostRolloutHooks`, `runRollbackHooks`;
//! - `pkg/controller/webhook.go`: `CallWebhook`, `callWebhook` (payload, 10 s default timeout,
//!   only 200-202 pass, a 4xx body becomes the error);
//! - github.com/hashicorp/go-retryablehttp v0.7.8 (Flagger's go.mod) `client.go`: `Do`,
//!   `baseRetryPolicy` (retry transport errors, 429 and 5xx but 501), `DefaultBackoff`
//!   (1 s * 2^attempt up to 30 s, `Retry-After` on 429/503), the drained body and
//!   "giving up after N attempt(s)";
//! - `pkg/apis/flagger/v1beta1/canary.go`: `GetAnalysisThreshold` (default 1);
//! - `pkg/canary/status.go`: `syncCanaryStatus` (a sync resets weight, failed checks and
//!   iterations to the values given).
//!
//! Kubernetes itself (readiness, scaling, routing) is assumed healthy: those steps never fail
//! here, so a run's fate is decided by the webhooks alone. Intervals are not waited for (the
//! data does not change with time); the retry back-off is waited for, as Flagger waits.

use crate::serve_common;
use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use serve_common::{error_rate_template, path_str, template_dir, ServeProcess};
use support::stub::closed_port;

/// `flaggerv1.CanaryPhase` values the canary strategy goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Initialized,
    Waiting,
    Progressing,
    WaitingPromotion,
    Promoting,
    Finalising,
    Succeeded,
    Failed,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Initialized => "Initialized",
            Phase::Waiting => "Waiting",
            Phase::Progressing => "Progressing",
            Phase::WaitingPromotion => "WaitingPromotion",
            Phase::Promoting => "Promoting",
            Phase::Finalising => "Finalising",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }
}

/// One entry of `spec.analysis.webhooks`.
#[derive(Debug, Clone)]
struct Webhook {
    name: String,
    /// `type`; empty is `rollout` (`runAnalysis`: `webhook.Type == "" || == RolloutHook`).
    kind: String,
    url: String,
    /// `timeout`; `CallWebhook`: shorter than 2 characters is 10s.
    timeout: Duration,
    /// `retries`: go-retryablehttp's `RetryMax`.
    retries: u32,
    metadata: BTreeMap<String, String>,
}

/// `spec.analysis` of a Canary.
#[derive(Debug, Clone)]
struct Analysis {
    threshold: u32,
    max_weight: u32,
    step_weight: u32,
    iterations: i64,
    webhooks: Vec<Webhook>,
}

impl Analysis {
    /// Reads `spec.analysis` of a Canary manifest; `url_base` replaces each URL's scheme and
    /// host (the cluster DNS name of the service becomes the test server).
    fn from_canary_yaml(yaml: &str, url_base: &str) -> Analysis {
        let canary: Value = serde_yaml_ng::from_str(yaml).expect("Canary YAML");
        let a = &canary["spec"]["analysis"];
        let number = |v: &Value, default: u64| v.as_u64().unwrap_or(default) as u32;
        let webhooks = a["webhooks"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|w| {
                let url = w["url"].as_str().expect("webhook url");
                let path = url
                    .splitn(4, '/')
                    .nth(3)
                    .map(|p| format!("/{p}"))
                    .unwrap_or_default();
                let timeout = match w["timeout"].as_str() {
                    Some(t) if t.len() >= 2 => parse_go_duration(t),
                    _ => Duration::from_secs(10),
                };
                Webhook {
                    name: w["name"].as_str().unwrap_or_default().to_string(),
                    kind: w["type"].as_str().unwrap_or_default().to_string(),
                    url: format!("{url_base}{path}"),
                    timeout,
                    retries: number(&w["retries"], 0),
                    metadata: w["metadata"]
                        .as_object()
                        .map(|m| {
                            m.iter()
                                .map(|(k, v)| {
                                    (k.clone(), v.as_str().expect("string metadata").to_string())
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                }
            })
            .collect();
        Analysis {
            // `GetAnalysisThreshold`: 0 or unset is 1.
            threshold: number(&a["threshold"], 1).max(1),
            // `maxWeight`: unset is the total weight, 100.
            max_weight: number(&a["maxWeight"], 100),
            step_weight: number(&a["stepWeight"], 0),
            iterations: a["iterations"].as_i64().unwrap_or(0),
            webhooks,
        }
    }
}

/// Only the units a Canary's hook timeout uses here.
fn parse_go_duration(s: &str) -> Duration {
    if let Some(ms) = s.strip_suffix("ms") {
        Duration::from_millis(ms.parse().expect("ms"))
    } else if let Some(secs) = s.strip_suffix('s') {
        Duration::from_secs(secs.parse().expect("seconds"))
    } else if let Some(mins) = s.strip_suffix('m') {
        Duration::from_secs(60 * mins.parse::<u64>().expect("minutes"))
    } else {
        panic!("duration {s}")
    }
}

/// The canary's status fields the scheduler reads.
#[derive(Debug, Clone, Copy)]
struct Status {
    phase: Phase,
    canary_weight: u32,
    failed_checks: u32,
    iterations: i64,
}

/// One webhook call as Flagger made it: after all its attempts.
#[derive(Debug, Clone)]
struct Call {
    tick: usize,
    hook: String,
    /// The phase sent in the payload.
    phase: Phase,
    /// The canary's weight when the call was made.
    weight: u32,
    /// Status of each attempt (0: no answer).
    attempts: Vec<u16>,
    /// `Err` is the error Flagger gets back from `CallWebhook`.
    result: Result<(), String>,
}

/// How one run ended.
#[derive(Debug)]
struct Run {
    status: Status,
    /// Intervals run (scheduler ticks), including the one that ended the run.
    ticks: usize,
    /// Failed checks when the canary was rolled back (the rollback's sync resets them).
    failed_checks_at_rollback: Option<u32>,
    calls: Vec<Call>,
    /// (Warning|Normal, message), as Flagger records Kubernetes events.
    events: Vec<(&'static str, String)>,
}

impl Run {
    fn calls_of(&self, hook: &str) -> Vec<&Call> {
        self.calls.iter().filter(|c| c.hook == hook).collect()
    }

    fn has_event(&self, needle: &str) -> bool {
        self.events.iter().any(|(_, m)| m.contains(needle))
    }
}

/// The stand-in scheduler for one canary (`podinfo.test`) and one revision.
struct Flagger {
    client: reqwest::Client,
    analysis: Analysis,
    status: Status,
    checksum: String,
    tick: usize,
    calls: Vec<Call>,
    events: Vec<(&'static str, String)>,
    failed_checks_at_rollback: Option<u32>,
}

const NAME: &str = "podinfo";
const NAMESPACE: &str = "test";

impl Flagger {
    fn new(analysis: Analysis) -> Flagger {
        Flagger {
            client: reqwest::Client::builder().no_proxy().build().unwrap(),
            analysis,
            // A new revision was detected on an initialized canary.
            status: Status {
                phase: Phase::Initialized,
                canary_weight: 0,
                failed_checks: 0,
                iterations: 0,
            },
            checksum: "6d8f5cb8b7".to_string(),
            tick: 0,
            calls: Vec::new(),
            events: Vec::new(),
            failed_checks_at_rollback: None,
        }
    }

    fn warn(&mut self, message: String) {
        self.events.push(("Warning", message));
    }

    fn info(&mut self, message: String) {
        self.events.push(("Normal", message));
    }

    /// Intervals until the canary Succeeded or Failed, at most `bound` of them.
    async fn run(mut self, bound: usize) -> Run {
        while self.tick < bound && !matches!(self.status.phase, Phase::Succeeded | Phase::Failed) {
            self.tick += 1;
            self.advance().await;
        }
        Run {
            status: self.status,
            ticks: self.tick,
            failed_checks_at_rollback: self.failed_checks_at_rollback,
            calls: self.calls,
            events: self.events,
        }
    }

    /// One interval: `scheduler.go` `advanceCanary`, from `checkCanaryStatus` on.
    async fn advance(&mut self) {
        // `checkCanaryStatus`: outside Progressing, WaitingPromotion, Promoting and Finalising,
        // a new revision first passes the confirm-rollout gate, then the canary is synced to
        // Progressing (weight, failed checks and iterations 0) and the interval ends.
        if !matches!(
            self.status.phase,
            Phase::Progressing | Phase::WaitingPromotion | Phase::Promoting | Phase::Finalising
        ) {
            if !self.confirm_rollout().await {
                return;
            }
            self.status = Status {
                phase: Phase::Progressing,
                canary_weight: 0,
                failed_checks: 0,
                iterations: 0,
            };
            return;
        }
        // "check if we should rollback": rollback hooks in Progressing, Waiting and
        // WaitingPromotion only; a pass rolls back at once.
        if matches!(
            self.status.phase,
            Phase::Progressing | Phase::Waiting | Phase::WaitingPromotion
        ) && self.rollback_signalled(self.status.phase).await
        {
            self.warn(format!(
                "Rolling back {NAME}.{NAMESPACE} manual webhook invoked"
            ));
            self.rollback().await;
            return;
        }
        // Promoting: `runPromotionTrafficShift` without `stepWeightPromotion` routes all
        // traffic to the primary and moves to Finalising.
        if self.status.phase == Phase::Promoting {
            self.status.canary_weight = 0;
            self.status.phase = Phase::Finalising;
            return;
        }
        // Finalising: scaled to zero, Succeeded, then the post-rollout hooks.
        if self.status.phase == Phase::Finalising {
            self.status.phase = Phase::Succeeded;
            self.post_rollout(Phase::Succeeded).await;
            return;
        }
        // "check if the number of failed checks reached the threshold".
        if matches!(
            self.status.phase,
            Phase::Progressing | Phase::WaitingPromotion
        ) && self.status.failed_checks >= self.analysis.threshold
        {
            self.rollback().await;
            return;
        }
        // Without traffic on the canary yet the pre-rollout hooks run, afterwards the analysis
        // (`runAnalysis`: rollout hooks); a failure adds a failed check and ends the interval.
        if self.status.canary_weight == 0 && self.status.iterations == 0 {
            self.info(format!("Starting canary analysis for {NAME}.{NAMESPACE}"));
            if !self.pre_rollout().await {
                self.status.failed_checks += 1;
                return;
            }
        } else if !self.rollout().await {
            self.status.failed_checks += 1;
            return;
        }
        // The canary strategy: `nextStepWeight` is `stepWeight`; the confirm-traffic-increase
        // gate runs outside Promoting, WaitingPromotion and Finalising, then `runCanary`.
        if self.analysis.step_weight > 0 {
            if !matches!(
                self.status.phase,
                Phase::Promoting | Phase::WaitingPromotion | Phase::Finalising
            ) && !self.confirm_traffic_increase().await
            {
                return;
            }
            self.run_canary().await;
        }
    }

    /// `runCanary`: one step of weight below `maxWeight`; at it, the confirm-promotion gate,
    /// then Promoting.
    async fn run_canary(&mut self) {
        if self.status.canary_weight < self.analysis.max_weight {
            // Capped at the total weight, not at `maxWeight`.
            self.status.canary_weight =
                (self.status.canary_weight + self.analysis.step_weight).min(100);
            self.info(format!(
                "Advance {NAME}.{NAMESPACE} canary weight {}",
                self.status.canary_weight
            ));
            return;
        }
        if !self.confirm_promotion().await {
            return;
        }
        self.status.phase = Phase::Promoting;
    }

    /// `rollback`: all traffic to the primary, synced to Failed (weight 0, failed checks 0),
    /// then the post-rollout hooks.
    async fn rollback(&mut self) {
        if self.status.failed_checks >= self.analysis.threshold {
            self.warn(format!(
                "Rolling back {NAME}.{NAMESPACE} failed checks threshold reached {}",
                self.status.failed_checks
            ));
        }
        self.failed_checks_at_rollback = Some(self.status.failed_checks);
        self.warn(format!("Canary failed! Scaling down {NAME}.{NAMESPACE}"));
        self.status = Status {
            phase: Phase::Failed,
            canary_weight: 0,
            failed_checks: 0,
            iterations: self.status.iterations,
        };
        self.post_rollout(Phase::Failed).await;
    }

    /// The hooks of one type, called in order until the first that fails (every
    /// `run*Hooks` of `scheduler_hooks.go`, and `runAnalysis`): that hook's name and error.
    async fn first_failure(&mut self, kind: &str, phase: Phase) -> Option<(String, String)> {
        for hook in self.hooks(kind) {
            if let Err(e) = self.call(&hook, phase).await {
                return Some((hook.name, e));
            }
        }
        None
    }

    /// `runConfirmRolloutHooks`: sent with the canary's phase; a failure sets Waiting.
    async fn confirm_rollout(&mut self) -> bool {
        let Some((name, _)) = self
            .first_failure("confirm-rollout", self.status.phase)
            .await
        else {
            return true;
        };
        if self.status.phase != Phase::Waiting {
            self.status.phase = Phase::Waiting;
            self.warn(format!(
                "Halt {NAME}.{NAMESPACE} advancement waiting for approval {name}"
            ));
        }
        false
    }

    /// Runs the hooks of `kind`; at a failure, records the warning `event(hook, error)`.
    async fn passes(&mut self, kind: &str, event: fn(&str, &str) -> String) -> bool {
        match self.first_failure(kind, Phase::Progressing).await {
            None => true,
            Some((name, e)) => {
                self.warn(event(&name, &e));
                false
            }
        }
    }

    /// `runPreRolloutHooks`: the error (a 4xx body) is in the event.
    async fn pre_rollout(&mut self) -> bool {
        self.passes("pre-rollout", |name, e| {
            format!("Halt {NAME}.{NAMESPACE} advancement pre-rollout check {name} failed {e}")
        })
        .await
    }

    /// `runAnalysis`: type `rollout` or none; the error is in the event.
    async fn rollout(&mut self) -> bool {
        self.passes("rollout", |name, e| {
            format!("Halt {NAME}.{NAMESPACE} advancement external check {name} failed {e}")
        })
        .await
    }

    /// `runConfirmTrafficIncreaseHooks`: the event does not carry the error.
    async fn confirm_traffic_increase(&mut self) -> bool {
        self.passes("confirm-traffic-increase", |name, _| {
            format!(
                "Halt {NAME}.{NAMESPACE} advancement waiting for traffic increase approval {name}"
            )
        })
        .await
    }

    /// `runConfirmPromotionHooks`: the first failure sets WaitingPromotion; later ones set
    /// the status iterations to `analysis.iterations - 1`.
    async fn confirm_promotion(&mut self) -> bool {
        let Some((name, _)) = self
            .first_failure("confirm-promotion", Phase::Progressing)
            .await
        else {
            return true;
        };
        if self.status.phase != Phase::WaitingPromotion {
            self.status.phase = Phase::WaitingPromotion;
            self.warn(format!(
                "Halt {NAME}.{NAMESPACE} advancement waiting for promotion approval {name}"
            ));
        } else {
            self.status.iterations = self.analysis.iterations - 1;
        }
        false
    }

    /// `runPostRolloutHooks`: sent with Succeeded or Failed; a failure is only an event.
    async fn post_rollout(&mut self, phase: Phase) {
        if let Some((name, e)) = self.first_failure("post-rollout", phase).await {
            self.warn(format!("Post-rollout hook {name} failed {e}"));
        }
    }

    /// `runRollbackHooks`: true at the first hook that passes; a failing one means "do not
    /// roll back" and the next is asked.
    async fn rollback_signalled(&mut self, phase: Phase) -> bool {
        for hook in self.hooks("rollback") {
            if self.call(&hook, phase).await.is_ok() {
                self.warn(format!("Rollback check {} passed", hook.name));
                return true;
            }
            self.info(format!(
                "Rollback hook {} not signaling a rollback",
                hook.name
            ));
        }
        false
    }

    fn hooks(&self, kind: &str) -> Vec<Webhook> {
        self.analysis
            .webhooks
            .iter()
            .filter(|w| w.kind == kind || (kind == "rollout" && w.kind.is_empty()))
            .cloned()
            .collect()
    }

    /// `CallWebhook` through go-retryablehttp: `retries + 1` attempts, each with the hook's
    /// timeout; transport errors, 429 and 5xx other than 501 are retried after
    /// `DefaultBackoff`; a retried failure's body is drained and the error is
    /// `POST URL giving up after N attempt(s)[: unexpected HTTP status ...]`; otherwise a
    /// status above 202 returns its body as the error.
    async fn call(&mut self, hook: &Webhook, phase: Phase) -> Result<(), String> {
        // `CanaryWebhookPayload`, marshalled in struct order; metadata omitted when empty.
        let mut payload = json!({
            "name": NAME,
            "namespace": NAMESPACE,
            "phase": phase.name(),
            "checksum": self.checksum,
        });
        if !hook.metadata.is_empty() {
            payload["metadata"] = json!(hook.metadata);
        }
        let attempts_max = hook.retries + 1;
        let mut attempts = Vec::new();
        let mut check_err: Option<String> = None;
        let mut result = None;
        for attempt in 0..attempts_max {
            let answer = self
                .client
                .post(&hook.url)
                .timeout(hook.timeout)
                .header("Content-Type", "application/json")
                .body(payload.to_string())
                .send()
                .await;
            let mut retry_after = None;
            match answer {
                Err(e) => {
                    attempts.push(0);
                    check_err = Some(format!("Post {:?}: {e}", hook.url));
                }
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    attempts.push(status);
                    if status == 429 || (status >= 500 && status != 501) {
                        check_err = (status != 429).then(|| {
                            format!(
                                "unexpected HTTP status {status} {}",
                                resp.status().canonical_reason().unwrap_or("")
                            )
                        });
                        if status == 429 || status == 503 {
                            retry_after = resp
                                .headers()
                                .get("retry-after")
                                .and_then(|v| v.to_str().ok())
                                .and_then(|v| v.parse::<u64>().ok())
                                .map(Duration::from_secs);
                        }
                        // Drained to reuse the connection; nobody reads it.
                        let _ = resp.bytes().await;
                    } else {
                        let body = resp.text().await.unwrap_or_default();
                        result = Some(if status > 202 { Err(body) } else { Ok(()) });
                        break;
                    }
                }
            }
            if attempt + 1 < attempts_max {
                let backoff = Duration::from_secs(1 << attempt).min(Duration::from_secs(30));
                tokio::time::sleep(retry_after.unwrap_or(backoff)).await;
            }
        }
        let result = result.unwrap_or_else(|| {
            Err(match check_err {
                Some(e) => format!(
                    "POST {} giving up after {attempts_max} attempt(s): {e}",
                    hook.url
                ),
                None => format!(
                    "POST {} giving up after {attempts_max} attempt(s)",
                    hook.url
                ),
            })
        });
        self.calls.push(Call {
            tick: self.tick,
            hook: hook.name.clone(),
            phase,
            weight: self.status.canary_weight,
            attempts,
            result: result.clone(),
        });
        result
    }
}

/// `rollgate serve` with the error-rate template over the shared Prometheus, or over a closed
/// port (Prometheus down).
fn server(prometheus_down: bool) -> (tempfile::TempDir, ServeProcess) {
    let dir = template_dir(&[(
        "error-rate.yaml",
        error_rate_template("error-rate", "inconclusive"),
    )]);
    let down = closed_port();
    let prometheus = if prometheus_down {
        down.as_str()
    } else {
        support::prom::shared().url.as_str()
    };
    let server = ServeProcess::start(&[
        "--templates",
        path_str(dir.path()),
        "--prometheus",
        prometheus,
    ]);
    (dir, server)
}

/// A Canary wired as docs/serve.md says: the error ratio on a `rollout` hook (failures count),
/// the same evidence on the `confirm-promotion` gate (Inconclusive holds), post-rollout for the
/// record; `extra` webhooks are appended.
fn canary(service: &str, extra: &str) -> String {
    format!(
        r#"apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {{name: podinfo, namespace: test}}
spec:
  analysis:
    interval: 1m
    threshold: 2
    maxWeight: 30
    stepWeight: 10
    webhooks:
      - name: error-rate
        type: rollout
        url: http://rollgate.rollgate.svc.cluster.local:8080/flagger/v1/check
        timeout: 10s
        retries: 1
        metadata: {{hook: rollout, template: error-rate, args.service: {service}}}
      - name: error-rate-evidence
        type: confirm-promotion
        url: http://rollgate.rollgate.svc.cluster.local:8080/flagger/v1/check
        metadata: {{hook: confirm-promotion, template: error-rate, args.service: {service}}}
      - name: record
        type: post-rollout
        url: http://rollgate.rollgate.svc.cluster.local:8080/flagger/v1/check
        metadata: {{hook: post-rollout, template: error-rate, args.service: {service}}}
{extra}"#
    )
}

/// One whole run of the Canary `yaml` against `server`, at most `bound` intervals.
async fn drive(server: &ServeProcess, yaml: &str, bound: usize) -> Run {
    let analysis = Analysis::from_canary_yaml(yaml, &server.url);
    Flagger::new(analysis).run(bound).await
}

fn statuses(calls: &[&Call]) -> Vec<u16> {
    calls.iter().flat_map(|c| c.attempts.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_canary_is_promoted() {
    let (_dir, server) = server(false);
    let run = drive(&server, &canary("healthy", ""), 50).await;
    // 1 Progressing, 2 weight 10, 3 20, 4 30, 5 promotion gate passes, 6 Finalising,
    // 7 Succeeded.
    assert_eq!(run.status.phase, Phase::Succeeded, "{run:#?}");
    assert_eq!(run.ticks, 7, "{run:#?}");
    assert_eq!(statuses(&run.calls_of("error-rate")), vec![200, 200, 200]);
    assert_eq!(statuses(&run.calls_of("error-rate-evidence")), vec![200]);
    let record = run.calls_of("record");
    assert_eq!(record.len(), 1);
    assert_eq!(record[0].phase, Phase::Succeeded);
    assert_eq!(record[0].attempts, vec![200]);
    assert!(
        run.events.iter().all(|(kind, _)| *kind == "Normal"),
        "{:?}",
        run.events
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_canary_is_rolled_back_after_threshold_failed_checks() {
    let (_dir, server) = server(false);
    let run = drive(&server, &canary("bad", ""), 50).await;
    // 1 Progressing, 2 weight 10 (pre-rollout: no hook), 3 and 4 failed checks,
    // 5 threshold reached: rolled back.
    assert_eq!(run.status.phase, Phase::Failed, "{run:#?}");
    assert_eq!(run.ticks, 5, "{run:#?}");
    assert_eq!(run.failed_checks_at_rollback, Some(2));
    assert_eq!(statuses(&run.calls_of("error-rate")), vec![412, 412]);
    // Never promoted, never asked about promotion.
    assert!(run.calls_of("error-rate-evidence").is_empty());
    // The 412 body is the reason in Flagger's event.
    assert!(
        run.has_event(
            "Halt podinfo.test advancement external check error-rate failed Failed: error-ratio: "
        ),
        "{:?}",
        run.events
    );
    assert!(run.has_event("failed checks threshold reached 2"));
    // post-rollout learns of the rollback with phase Failed; its 412 is only an event that
    // carries the body too.
    let record = run.calls_of("record");
    assert_eq!(record.len(), 1);
    assert_eq!(record[0].phase, Phase::Failed);
    assert!(run.has_event("Post-rollout hook record failed Failed: error-ratio: "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_traffic_canary_is_neither_promoted_nor_rolled_back() {
    let (_dir, server) = server(false);
    let rollback = r#"      - name: error-rate-rollback
        type: rollback
        url: http://rollgate.rollgate.svc.cluster.local:8080/flagger/v1/rollback
        metadata: {hook: rollback, template: error-rate, args.service: lowtraffic}
"#;
    let bound = 20;
    let run = drive(&server, &canary("lowtraffic", rollback), bound).await;
    // The run's bound is reached: still waiting for promotion, nothing counted.
    assert_eq!(run.ticks, bound);
    assert_eq!(run.status.phase, Phase::WaitingPromotion, "{run:#?}");
    assert_eq!(run.status.failed_checks, 0);
    assert_eq!(run.status.canary_weight, 30);
    assert_eq!(run.failed_checks_at_rollback, None);
    // From tick 3 on, every rollout call passes with 202 (Inconclusive is no failed check).
    let rollout = run.calls_of("error-rate");
    assert_eq!(rollout.len(), bound - 2);
    assert!(statuses(&rollout).iter().all(|s| *s == 202));
    // From tick 5 on the promotion gate holds it with 409.
    let gate = run.calls_of("error-rate-evidence");
    assert_eq!(gate.len(), bound - 4);
    assert!(statuses(&gate).iter().all(|s| *s == 409));
    assert_eq!(gate[0].tick, 5);
    // The rollback hook is asked in Progressing and then in WaitingPromotion, and says no.
    let rb = run.calls_of("error-rate-rollback");
    assert_eq!(rb.len(), bound - 1);
    assert!(statuses(&rb).iter().all(|s| *s == 409));
    assert_eq!(rb[0].phase, Phase::Progressing);
    assert_eq!(rb.last().unwrap().phase, Phase::WaitingPromotion);
    assert!(run.calls_of("record").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_hook_type_the_check_endpoint_counts_inconclusive_on_rollout_hooks() {
    // The codes /flagger/v1/check had before hook types stay (409 for Inconclusive), and on a
    // rollout hook Flagger counts that 409 as a failed check: this is why `hook` exists.
    let (_dir, server) = server(false);
    let yaml = canary("lowtraffic", "").replace("{hook: rollout, ", "{");
    let run = drive(&server, &yaml, 50).await;
    assert_eq!(run.status.phase, Phase::Failed, "{run:#?}");
    assert_eq!(run.ticks, 5);
    assert_eq!(statuses(&run.calls_of("error-rate")), vec![409, 409]);
    assert!(run.has_event("failed Inconclusive: error-ratio: too little traffic"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_down_is_retried_then_counted_as_flagger_counts_a_failed_hook() {
    let (_dir, server) = server(true);
    let run = drive(&server, &canary("healthy", ""), 50).await;
    // Each rollout call: 503, one retry after Flagger's 1 s back-off, 503 again: one failed
    // check. Two of them reach the threshold.
    assert_eq!(run.status.phase, Phase::Failed, "{run:#?}");
    assert_eq!(run.ticks, 5);
    assert_eq!(run.failed_checks_at_rollback, Some(2));
    let rollout = run.calls_of("error-rate");
    assert_eq!(statuses(&rollout), vec![503, 503, 503, 503]);
    // The 5xx body is drained: the event says only that Flagger gave up.
    let err = rollout[0].result.clone().unwrap_err();
    assert!(
        err.ends_with(
            "giving up after 2 attempt(s): unexpected HTTP status 503 Service Unavailable"
        ),
        "{err}"
    );
    assert!(!err.contains("Error:"), "{err}");
    assert!(run.has_event("external check error-rate failed POST "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_rollback_hook_rolls_back_at_its_first_interval_in_progressing() {
    let (_dir, server) = server(false);
    let rollback = r#"      - name: error-rate-rollback
        type: rollback
        url: http://rollgate.rollgate.svc.cluster.local:8080/flagger/v1/rollback
        metadata: {template: error-rate, args.service: bad}
"#;
    let run = drive(&server, &canary("bad", rollback), 50).await;
    // Tick 1 is Initialized (no rollback hook there); tick 2 asks it in Progressing: 200.
    assert_eq!(run.status.phase, Phase::Failed, "{run:#?}");
    assert_eq!(run.ticks, 2);
    assert_eq!(run.failed_checks_at_rollback, Some(0));
    let rb = run.calls_of("error-rate-rollback");
    assert_eq!(rb.len(), 1);
    assert_eq!((rb[0].tick, rb[0].phase), (2, Phase::Progressing));
    assert_eq!(rb[0].attempts, vec![200]);
    assert!(run.has_event("manual webhook invoked"));
    assert!(run.calls_of("error-rate").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_rollout_gate_keeps_a_low_traffic_revision_waiting() {
    let (_dir, server) = server(false);
    let yaml = r#"apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {name: podinfo, namespace: test}
spec:
  analysis:
    threshold: 1
    stepWeight: 50
    webhooks:
      - name: primary-evidence
        type: confirm-rollout
        url: http://rollgate.rollgate.svc.cluster.local:8080/flagger/v1/check
        metadata: {hook: confirm-rollout, template: error-rate, args.service: lowtraffic}
"#;
    let run = drive(&server, yaml, 6).await;
    assert_eq!(run.status.phase, Phase::Waiting, "{run:#?}");
    assert_eq!(run.ticks, 6);
    let gate = run.calls_of("primary-evidence");
    assert_eq!(statuses(&gate), vec![409; 6]);
    // Sent with the canary's own phase: Initialized first, then Waiting.
    assert_eq!(gate[0].phase, Phase::Initialized);
    assert_eq!(gate[5].phase, Phase::Waiting);
    // With evidence the same gate lets the analysis start and the canary through.
    let run = drive(&server, &yaml.replace("lowtraffic", "healthy"), 50).await;
    assert_eq!(run.status.phase, Phase::Succeeded, "{run:#?}");
    // 1 Progressing, 2 weight 50, 3 weight 100, 4 Promoting, 5 Finalising, 6 Succeeded.
    assert_eq!(run.ticks, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_traffic_increase_gate_is_first_asked_at_weight_zero() {
    // Why the canary's own evidence gates promotion, not traffic increase: the first
    // confirm-traffic-increase call comes before any traffic reached the canary, and a hold
    // there keeps the weight at 0 (only pre-rollout hooks run at 0; nothing is counted).
    let (_dir, server) = server(false);
    let gate = r#"      - name: traffic-gate
        type: confirm-traffic-increase
        url: http://rollgate.rollgate.svc.cluster.local:8080/flagger/v1/check
        metadata: {hook: confirm-traffic-increase, template: error-rate, args.service: lowtraffic}
"#;
    let run = drive(&server, &canary("healthy", gate), 8).await;
    assert_eq!(run.status.phase, Phase::Progressing, "{run:#?}");
    assert_eq!(run.status.canary_weight, 0);
    assert_eq!(run.status.failed_checks, 0);
    let calls = run.calls_of("traffic-gate");
    assert_eq!(calls.len(), 7);
    assert!(calls.iter().all(|c| c.weight == 0 && c.attempts == [409]));
    assert!(run.calls_of("error-rate").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_canary_wires_each_hook_with_its_type() {
    // manifests/flagger/canary.yaml through the stand-in: its hook types, `hook` metadata,
    // retries and endpoints as shipped; only the analysis each hook selects is replaced by the
    // test template on a scenario service (the shipped templates read labels the generated
    // data does not have).
    let (_dir, server) = server(false);
    let shipped = std::fs::read_to_string("manifests/flagger/canary.yaml").unwrap();
    // healthy: 1 Progressing, 2 pre-rollout and weight 10, ..., 6 weight 50, 7 both promotion
    // gates pass, 8 Finalising, 9 Succeeded. bad: the rollback hook rolls back at tick 2.
    // lowtraffic: waits for promotion until the bound.
    for (service, phase, ticks) in [
        ("healthy", Phase::Succeeded, 9),
        ("bad", Phase::Failed, 2),
        ("lowtraffic", Phase::WaitingPromotion, 40),
    ] {
        let mut analysis = Analysis::from_canary_yaml(&shipped, &server.url);
        assert!(analysis.webhooks.len() >= 5, "{analysis:?}");
        for w in &mut analysis.webhooks {
            assert_eq!(
                w.metadata.get("hook").map(String::as_str),
                Some(w.kind.as_str()),
                "{}: metadata.hook must repeat the type",
                w.name
            );
            w.metadata.retain(|k, _| k == "hook");
            w.metadata.insert("template".into(), "error-rate".into());
            w.metadata.insert("args.service".into(), service.into());
        }
        let run = Flagger::new(analysis).run(40).await;
        assert_eq!(run.status.phase, phase, "{service}: {run:#?}");
        assert_eq!(run.ticks, ticks, "{service}: {run:#?}");
        assert_eq!(run.status.failed_checks, 0, "{service}");
        assert_eq!(run.failed_checks_at_rollback.unwrap_or(0), 0, "{service}");
    }
}
