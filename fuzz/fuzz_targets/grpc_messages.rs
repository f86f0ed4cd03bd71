//! gRPC: the protobuf request of every `rollgate.v1.MetricProviderService` method, decoded
//! with prost and served by the real service (convert layer, spec reading, engine) on an
//! empty Replay backend. Input: one byte choosing the method, then the message.
//! Invariants: no panic; with no recorded data, Run and Analyze never answer Successful.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use prost::Message;
use rollgate::engine::{AddressPolicy, Engine};
use rollgate::grpc::pb;
use rollgate::grpc::pb::metric_provider_service_server::MetricProviderService;
use rollgate::grpc::service::{MetricProvider, ServiceOptions};
use rollgate::prometheus::{Backend, Replay};
use tonic::Request;

fn setup() -> &'static (tokio::runtime::Runtime, MetricProvider) {
    static S: OnceLock<(tokio::runtime::Runtime, MetricProvider)> = OnceLock::new();
    S.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let replay = Replay::from_json(r#"{"version":1,"entries":[]}"#).expect("empty replay");
        let engine = Arc::new(Engine::new(
            Backend::Replay(replay),
            AddressPolicy::default(),
        ));
        let options = ServiceOptions {
            trust: rollgate::engine::Trust::NETWORK,
            ..ServiceOptions::default()
        };
        (rt, MetricProvider::new(engine, options))
    })
}

fn phase(m: &Option<pb::Measurement>) -> Option<i32> {
    m.as_ref().map(|m| m.phase)
}

fuzz_target!(|data: &[u8]| {
    fuzz_support::caught_panics_are_not_crashes();
    let Some((&sel, msg)) = data.split_first() else {
        return;
    };
    let (rt, svc) = setup();
    let successful = pb::Phase::Successful as i32;
    rt.block_on(async {
        match sel % 8 {
            0 => {
                if let Ok(req) = pb::RunRequest::decode(msg) {
                    if let Ok(r) = svc.run(Request::new(req)).await {
                        let p = phase(&r.get_ref().measurement);
                        assert_ne!(p, Some(successful), "Run Successful with no data: {r:?}");
                    }
                }
            }
            1 => {
                if let Ok(req) = pb::ResumeRequest::decode(msg) {
                    let _ = svc.resume(Request::new(req)).await;
                }
            }
            2 => {
                if let Ok(req) = pb::TerminateRequest::decode(msg) {
                    let _ = svc.terminate(Request::new(req)).await;
                }
            }
            3 => {
                if let Ok(req) = pb::GarbageCollectRequest::decode(msg) {
                    let _ = svc.garbage_collect(Request::new(req)).await;
                }
            }
            4 => {
                if let Ok(req) = pb::GetMetadataRequest::decode(msg) {
                    let _ = svc.get_metadata(Request::new(req)).await;
                }
            }
            5 => {
                if let Ok(req) = pb::AnalyzeRequest::decode(msg) {
                    if let Ok(r) = svc.analyze(Request::new(req)).await {
                        let p = phase(&r.get_ref().measurement);
                        assert_ne!(
                            p,
                            Some(successful),
                            "Analyze Successful with no data: {r:?}"
                        );
                    }
                }
            }
            6 => {
                if let Ok(req) = pb::InitPluginRequest::decode(msg) {
                    let _ = svc.init_plugin(Request::new(req)).await;
                }
            }
            _ => {
                if let Ok(req) = pb::TypeRequest::decode(msg) {
                    let _ = svc.r#type(Request::new(req)).await;
                }
            }
        }
    });
});
