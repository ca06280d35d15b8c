//! The S3 test server (`mod.rs`, moto) does what the checkpoints on object storage rely on, with
//! the client the host uses (object_store): objects in, out, listed and deleted; a conditional
//! create refused when the key exists, and exactly one winner of a race of creates; a
//! conditional update on the current ETag only; multipart uploads. And the fault proxy in front
//! of it forwards every request, keeps connections alive, and injects what it is told to, with
//! object_store's answer to each fault pinned down: a 503 is retried, a put whose body is cut
//! mid-way is retried (even a conditional create), a create whose answer is lost is retried and
//! then fails with AlreadyExists, a dropped read is retried, a delay delays. Each test
//! skips, loudly, when there is no server (and fails under `CI=true`).

use std::time::{Duration, Instant};

use object_store::aws::AmazonS3ConfigKey;
use object_store::path::Path as ObjectPath;
use object_store::{
    ClientConfigKey, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion,
    WriteMultipart,
};
use weir_test_servers::fault_proxy::{Action, Fault, Seen};
use weir_test_servers::rng::Rng;

use super::{block_on, s3_or_skip};

/// `PutOptions` with `mode`.
fn mode(mode: PutMode) -> PutOptions {
    PutOptions {
        mode,
        ..PutOptions::default()
    }
}

/// `(method, status)` of each request the proxy saw, in order.
fn outcomes(seen: &[Seen]) -> Vec<(&str, Option<u16>)> {
    seen.iter().map(|s| (s.method.as_str(), s.status)).collect()
}

#[test]
fn s3_server_puts_gets_lists_and_deletes_objects() {
    let Some(s3) = s3_or_skip("s3_server_puts_gets_lists_and_deletes_objects") else {
        return;
    };
    let env = s3.env();
    assert!(
        env.contains(&("AWS_ENDPOINT_URL".to_string(), s3.endpoint())),
        "{env:?}"
    );
    let bucket = s3.bucket("basics");
    let store = s3.store(&bucket);
    // The environment's names configured the client (the endpoint, plain HTTP).
    let builder = env.iter().fold(
        object_store::aws::AmazonS3Builder::new(),
        |builder, (name, value)| builder.with_config(name.to_lowercase().parse().unwrap(), value),
    );
    assert_eq!(
        builder.get_config_value(&AmazonS3ConfigKey::Endpoint),
        Some(s3.endpoint())
    );
    assert_eq!(
        builder.get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp)),
        Some("true".to_string())
    );

    s3.put(&bucket, "job/chk-00001/_metadata", b"meta");
    s3.put(&bucket, "job/chk-00001/task-0", b"state of task 0");
    s3.put(&bucket, "job/chk-00002/task-0", b"");
    s3.put(&bucket, "top", b"top");
    assert_eq!(
        s3.get(&bucket, "job/chk-00001/task-0").as_deref(),
        Some(&b"state of task 0"[..])
    );
    assert_eq!(
        s3.get(&bucket, "job/chk-00002/task-0").as_deref(),
        Some(&b""[..])
    );
    assert_eq!(s3.get(&bucket, "job/missing"), None);
    assert_eq!(
        s3.list(&bucket, ""),
        [
            ("job/chk-00001/_metadata".to_string(), 4),
            ("job/chk-00001/task-0".to_string(), 15),
            ("job/chk-00002/task-0".to_string(), 0),
            ("top".to_string(), 3),
        ]
    );
    assert_eq!(s3.list(&bucket, "job/chk-00002").len(), 1);

    block_on(store.delete(&ObjectPath::from("job/chk-00001/task-0"))).unwrap();
    assert_eq!(s3.get(&bucket, "job/chk-00001/task-0"), None);
    assert_eq!(s3.list(&bucket, "job/chk-00001").len(), 1);
    // Buckets are apart.
    assert!(s3.list(&s3.bucket("basics"), "").is_empty());
}

#[test]
fn s3_server_refuses_a_create_of_an_existing_key_and_a_stale_update() {
    let Some(s3) = s3_or_skip("s3_server_refuses_a_create_of_an_existing_key_and_a_stale_update")
    else {
        return;
    };
    let bucket = s3.bucket("conditional");
    let store = s3.store(&bucket);
    let key = ObjectPath::from("job/chk-00001/_metadata");
    let created = block_on(store.put_opts(&key, PutPayload::from("first"), mode(PutMode::Create)))
        .expect("the first create");
    let again = block_on(store.put_opts(&key, PutPayload::from("second"), mode(PutMode::Create)));
    assert!(
        matches!(again, Err(object_store::Error::AlreadyExists { .. })),
        "{again:?}"
    );
    assert_eq!(
        s3.get(&bucket, key.as_ref()).as_deref(),
        Some(&b"first"[..])
    );

    // If-Match: the current ETag updates, a stale one is refused.
    let current = UpdateVersion {
        e_tag: created.e_tag.clone(),
        version: None,
    };
    let updated = block_on(store.put_opts(
        &key,
        PutPayload::from("updated"),
        mode(PutMode::Update(current.clone())),
    ))
    .expect("an update on the current ETag");
    assert_ne!(updated.e_tag, created.e_tag);
    let stale = block_on(store.put_opts(
        &key,
        PutPayload::from("stale"),
        mode(PutMode::Update(current)),
    ));
    assert!(
        matches!(stale, Err(object_store::Error::Precondition { .. })),
        "{stale:?}"
    );
    assert_eq!(
        s3.get(&bucket, key.as_ref()).as_deref(),
        Some(&b"updated"[..])
    );
}

#[test]
fn s3_server_lets_exactly_one_of_eight_concurrent_creates_win() {
    let Some(s3) = s3_or_skip("s3_server_lets_exactly_one_of_eight_concurrent_creates_win") else {
        return;
    };
    let bucket = s3.bucket("race");
    let store = s3.store(&bucket);
    for round in 0..3 {
        let key = ObjectPath::from(format!("race/{round}/_metadata"));
        let results = block_on(async {
            let tasks: Vec<_> = (0..8)
                .map(|i| {
                    let (store, key) = (store.clone(), key.clone());
                    tokio::spawn(async move {
                        let payload = PutPayload::from(format!("writer {i}"));
                        store.put_opts(&key, payload, mode(PutMode::Create)).await
                    })
                })
                .collect();
            let mut results = Vec::new();
            for task in tasks {
                results.push(task.await.expect("a create task"));
            }
            results
        });
        let winners: Vec<usize> = (0..8).filter(|&i| results[i].is_ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for (i, result) in results.iter().enumerate() {
            if i != winners[0] {
                assert!(
                    matches!(result, Err(object_store::Error::AlreadyExists { .. })),
                    "round {round}, writer {i}: {result:?}"
                );
            }
        }
        assert_eq!(
            s3.get(&bucket, key.as_ref()),
            Some(format!("writer {}", winners[0]).into_bytes()),
            "round {round}: the object is not the winner's"
        );
    }
}

#[test]
fn s3_server_round_trips_a_12_mib_multipart_upload_through_the_proxy() {
    let Some(s3) = s3_or_skip("s3_server_round_trips_a_12_mib_multipart_upload_through_the_proxy")
    else {
        return;
    };
    let bucket = s3.bucket("multipart");
    let proxy = s3.proxy();
    let store = s3.store_via(&proxy, &bucket);
    // Random bytes, no pattern: a part sent twice or out of order would show.
    let data = Rng::new(0x5eed).bytes(12 << 20);
    let key = ObjectPath::from("job/chk-00001/big");
    block_on(async {
        let upload = store
            .put_multipart(&key)
            .await
            .expect("start a multipart upload");
        let mut writer = WriteMultipart::new_with_chunk_size(upload, 5 << 20);
        writer.write(&data);
        writer.finish().await.expect("finish the multipart upload");
    });
    let got = s3.get(&bucket, key.as_ref()).expect("the uploaded object");
    assert_eq!(got.len(), data.len());
    assert!(got == data, "the object differs from what was uploaded");

    // Start, three parts (5 + 5 + 2 MiB), complete: all through the proxy, all answered 200.
    let seen = proxy.requests();
    let parts: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.query().contains("partNumber="))
        .collect();
    assert_eq!(parts.len(), 3, "{seen:#?}");
    let mut sizes: Vec<u64> = parts.iter().map(|s| s.body_bytes).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [2 << 20, 5 << 20, 5 << 20]);
    assert!(
        seen.iter()
            .all(|s| s.status == Some(200) && s.fault.is_none()),
        "{seen:#?}"
    );
    assert!(
        seen[0].method == "POST" && seen[0].query().contains("uploads"),
        "{seen:#?}"
    );
    let last = seen.last().unwrap();
    assert!(
        last.method == "POST" && last.query().contains("uploadId="),
        "{seen:#?}"
    );
}

#[test]
fn fault_proxy_503_twice_is_retried_by_object_store_and_the_put_succeeds() {
    let Some(s3) =
        s3_or_skip("fault_proxy_503_twice_is_retried_by_object_store_and_the_put_succeeds")
    else {
        return;
    };
    let bucket = s3.bucket("slowdown");
    let proxy = s3.proxy();
    let store = s3.store_via(&proxy, &bucket);
    proxy.add(
        Fault::new(Action::Status(503))
            .method("PUT")
            .path_contains("/_metadata")
            .times(2),
    );
    let key = ObjectPath::from("job/chk-00001/_metadata");
    block_on(store.put_opts(&key, PutPayload::from("meta"), mode(PutMode::Create)))
        .expect("the put, on its third try");
    assert_eq!(s3.get(&bucket, key.as_ref()).as_deref(), Some(&b"meta"[..]));
    let seen = proxy.requests();
    assert_eq!(
        outcomes(&seen),
        [("PUT", Some(503)), ("PUT", Some(503)), ("PUT", Some(200))],
        "{seen:#?}"
    );
    assert_eq!(seen[0].fault, Some(Action::Status(503)));
    assert_eq!(seen[2].fault, None);
    assert!(proxy.remaining().is_empty());
    // The client kept its connection across the answers: the injected 503s keep it alive.
    assert!(
        seen.iter().all(|s| s.connection == seen[0].connection),
        "{seen:#?}"
    );

    // Rules match only what they name: a GET passes a PUT-only rule.
    proxy.clear_requests();
    proxy.add(Fault::new(Action::Status(500)).method("PUT"));
    block_on(store.get(&key)).expect("a GET through the proxy");
    assert_eq!(outcomes(&proxy.requests()), [("GET", Some(200))]);
    proxy.clear();
    assert!(proxy.remaining().is_empty());
}

#[test]
fn fault_proxy_cut_body_put_is_retried_by_object_store_even_a_create() {
    let Some(s3) = s3_or_skip("fault_proxy_cut_body_put_is_retried_by_object_store_even_a_create")
    else {
        return;
    };
    let bucket = s3.bucket("cut-body");
    let proxy = s3.proxy();
    let store = s3.store_via(&proxy, &bucket);
    let body = PutPayload::from(vec![7u8; 256 << 10]);

    // A connection closed while the body is sent is a hyper "incomplete message", which
    // object_store takes for a request not sent, and retries whatever the request: a
    // conditional create as well as an overwrite.
    for (key, put_mode) in [
        ("job/chk-00001/_metadata", PutMode::Create),
        ("job/chk-00001/task-0", PutMode::Overwrite),
    ] {
        proxy.clear_requests();
        proxy.add(Fault::new(Action::CutBody).method("PUT"));
        let location = ObjectPath::from(key);
        block_on(store.put_opts(&location, body.clone(), mode(put_mode.clone())))
            .unwrap_or_else(|e| panic!("{put_mode:?} of {key}, on its second try: {e}"));
        let seen = proxy.requests();
        assert_eq!(
            outcomes(&seen),
            [("PUT", None), ("PUT", Some(200))],
            "{seen:#?}"
        );
        assert_eq!(seen[0].fault, Some(Action::CutBody));
        assert_eq!(
            seen[0].upstream_status, None,
            "a cut request reached the server"
        );
        assert_eq!(seen[0].body_bytes, 128 << 10);
        assert_eq!(seen[1].body_bytes, 256 << 10);
        assert_ne!(seen[0].connection, seen[1].connection, "{seen:#?}");
        assert_eq!(s3.get(&bucket, key).map(|b| b.len()), Some(256 << 10));
    }
}

#[test]
fn fault_proxy_lost_answer_to_a_create_makes_its_retry_fail_with_already_exists() {
    let Some(s3) =
        s3_or_skip("fault_proxy_lost_answer_to_a_create_makes_its_retry_fail_with_already_exists")
    else {
        return;
    };
    let bucket = s3.bucket("lost-answer");
    let proxy = s3.proxy();
    let store = s3.store_via(&proxy, &bucket);
    proxy.add(Fault::new(Action::LoseAnswer).method("PUT"));
    let key = ObjectPath::from("job/chk-00001/_metadata");
    // The create took effect; its answer was lost; object_store retries it, and the retry finds
    // the object there: the writer is told AlreadyExists about its own object.
    let put = block_on(store.put_opts(&key, PutPayload::from("mine"), mode(PutMode::Create)));
    assert!(
        matches!(put, Err(object_store::Error::AlreadyExists { .. })),
        "{put:?}"
    );
    assert_eq!(s3.get(&bucket, key.as_ref()).as_deref(), Some(&b"mine"[..]));
    let seen = proxy.requests();
    assert_eq!(
        outcomes(&seen),
        [("PUT", None), ("PUT", Some(412))],
        "{seen:#?}"
    );
    assert_eq!(seen[0].fault, Some(Action::LoseAnswer));
    assert_eq!(seen[0].upstream_status, Some(200));
}

#[test]
fn fault_proxy_dropped_get_is_retried_and_a_delay_delays() {
    let Some(s3) = s3_or_skip("fault_proxy_dropped_get_is_retried_and_a_delay_delays") else {
        return;
    };
    let bucket = s3.bucket("drop-delay");
    s3.put(&bucket, "object", b"payload");
    let proxy = s3.proxy();
    let store = s3.store_via(&proxy, &bucket);
    let key = ObjectPath::from("object");
    let get = || {
        block_on(async { store.get(&key).await?.bytes().await })
            .map(|b| b.to_vec())
            .expect("a GET through the proxy")
    };

    // A GET is safe: a connection dropped before any answer is retried.
    proxy.add(Fault::new(Action::Drop).method("GET"));
    assert_eq!(get(), b"payload");
    let seen = proxy.requests();
    assert_eq!(
        outcomes(&seen),
        [("GET", None), ("GET", Some(200))],
        "{seen:#?}"
    );
    assert_eq!(seen[0].fault, Some(Action::Drop));

    let delay = Duration::from_millis(800);
    proxy.clear_requests();
    proxy.add(Fault::new(Action::Delay(delay)).path_contains("/object"));
    let started = Instant::now();
    assert_eq!(get(), b"payload");
    assert!(started.elapsed() >= delay, "{:?}", started.elapsed());
    let seen = proxy.requests();
    assert_eq!(outcomes(&seen), [("GET", Some(200))]);
    assert_eq!(seen[0].fault, Some(Action::Delay(delay)));
}
