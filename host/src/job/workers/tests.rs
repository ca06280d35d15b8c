use super::*;

/// The id of the job's checkpoints the plans are made for.
const ID: &str = "00c0ffee00c0ffee";

/// Kafka `in` (p=2) → `split` (p=2) → key-hash → `count` (p=2) → Kafka `out` (p=2): the job of
/// the workers' acceptance test, with `extra` appended to the file.
fn two_stages(extra: &str) -> Job {
    let text = format!(
        "name = \"wc\"\n\
         [checkpoint]\ninterval = \"1s\"\ndirectory = \"s3://bucket/jobs/wc\"\n\
         [[source]]\nname = \"in\"\ntype = \"kafka\"\nparallelism = 2\n\
         bootstrap = \"k:9092\"\ntopics = [\"lines\"]\n\
         [[operator]]\nname = \"split\"\nmodule = \"split.wasm\"\nparallelism = 2\n\
         inputs = [\"in\"]\n\
         [[operator]]\nname = \"count\"\nmodule = \"count.wasm\"\nparallelism = 2\n\
         inputs = [{{ from = \"split\", partition = \"key-hash\" }}]\n\
         [[sink]]\nname = \"out\"\ntype = \"kafka\"\nparallelism = 2\ninputs = [\"count\"]\n\
         bootstrap = \"k:9092\"\ntopic = \"counts\"\n{extra}"
    );
    Job::from_str(&text, "/jobs", "wc.toml").unwrap()
}

fn names(job: &Job) -> Vec<&str> {
    job.vertices.iter().map(|v| v.name.as_str()).collect()
}

fn edges(job: &Job) -> Vec<(&str, &str, u32, Partitioner)> {
    job.edges
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str(), e.port, e.partitioner))
        .collect()
}

fn source<'j>(job: &'j Job, name: &str) -> &'j KafkaSourceSettings {
    match &job.vertex(name).unwrap().kind {
        VertexKind::Source(SourceKind::Kafka(s)) => s,
        other => panic!("{name} is {other:?}"),
    }
}

fn sink<'j>(job: &'j Job, name: &str) -> &'j KafkaSinkSettings {
    match &job.vertex(name).unwrap().kind {
        VertexKind::Sink(SinkKind::Kafka(s)) => s,
        other => panic!("{name} is {other:?}"),
    }
}

#[test]
fn a_worker_parses_from_i_of_n_and_refuses_the_rest() {
    assert_eq!("1/3".parse::<Worker>(), Ok(Worker { index: 1, count: 3 }));
    assert_eq!("0/1".parse::<Worker>().unwrap().to_string(), "0/1");
    for bad in ["3/3", "1", "-1/3", "a/b", "1/0", ""] {
        let error = bad.parse::<Worker>().unwrap_err();
        assert!(error.contains("write I/N"), "{bad}: {error}");
    }
}

#[test]
fn a_key_hash_edge_cuts_the_job_into_two_stages_joined_by_a_key_group_topic() {
    let job = two_stages("");
    let worker = Worker { index: 1, count: 3 };
    let stages = plan(&job, worker, ID).unwrap();
    assert_eq!(stages.len(), 2);
    let (first, second) = (&stages[0], &stages[1]);
    assert_eq!(names(first), ["in", "split", "exchange-count-0"]);
    assert_eq!(
        edges(first),
        [
            ("in", "split", 0, Partitioner::Forward),
            ("split", "exchange-count-0", 0, Partitioner::Forward)
        ]
    );
    assert_eq!(names(second), ["exchange-count-0", "count", "out"]);
    assert_eq!(
        edges(second),
        [
            ("exchange-count-0", "count", 0, Partitioner::Forward),
            ("count", "out", 0, Partitioner::Forward)
        ]
    );
    // The exchange: written by key group, read by the owners of the key groups.
    let topic = "weir.wc.split.count.0.00c0ffee00c0ffee";
    let out = sink(first, "exchange-count-0");
    assert_eq!(out.topic, SinkTopic::Fixed(topic.into()));
    assert_eq!(out.partitioning, SinkPartitioning::KeyGroups(128));
    assert_eq!(out.delivery, Delivery::ExactlyOnce);
    assert_eq!(out.transactional_id_prefix, format!("{topic}.w1"));
    assert_eq!(out.marker_topic, format!("{topic}.markers"));
    let read = source(second, "exchange-count-0");
    assert_eq!(read.topics, TopicSelection::Names(vec![topic.into()]));
    assert_eq!(
        read.share,
        PartitionShare {
            by: ShareBy::KeyGroups(128),
            slice: Some((2, 6))
        }
    );
    assert_eq!(read.isolation, Isolation::ReadCommitted);
    // The job's own connectors: this worker's share and transactional ids.
    assert_eq!(source(first, "in").share.slice, Some((2, 6)));
    assert_eq!(source(first, "in").share.by, ShareBy::Hash);
    assert_eq!(
        sink(second, "out").transactional_id_prefix,
        "weir.wc.out.w1"
    );
    assert_eq!(sink(second, "out").marker_topic, "weir.wc.out.markers");
    // Each stage of each worker checkpoints on its own.
    for (stage, job) in stages.iter().enumerate() {
        assert_eq!(
            job.checkpoint.storage_root(),
            std::path::PathBuf::from(format!("s3://bucket/jobs/wc/worker-1-of-3/stage-{stage}"))
        );
        assert!(
            job.checkpoint
                .directory
                .ends_with(format!("worker-1-of-3/stage-{stage}")),
            "{:?}",
            job.checkpoint.directory
        );
    }
}

#[test]
fn every_key_group_partition_has_exactly_one_reader_over_the_workers() {
    let job = two_stages("");
    let mut readers = vec![0; 128];
    for index in 0..3 {
        let stages = plan(&job, Worker { index, count: 3 }, ID).unwrap();
        let share = source(&stages[1], "exchange-count-0").share;
        for subtask in 0..2 {
            for (partition, seen) in readers.iter_mut().enumerate() {
                let reader =
                    crate::connectors::kafka::source::reader(&share, "t", partition as i32, 128, 2);
                if reader == Some(subtask) {
                    *seen += 1;
                }
            }
        }
    }
    assert!(readers.iter().all(|&n| n == 1), "{readers:?}");
}

#[test]
fn a_job_without_key_hash_edges_is_one_stage_of_shares() {
    let text = "name = \"copy\"\n[checkpoint]\ninterval = \"1s\"\n\
         [[source]]\nname = \"in\"\ntype = \"kafka\"\nparallelism = 3\n\
         bootstrap = \"k:9092\"\ntopics = [\"a\"]\n\
         [[sink]]\nname = \"out\"\ntype = \"kafka\"\nparallelism = 3\ninputs = [\"in\"]\n\
         bootstrap = \"k:9092\"\ntopic = \"b\"\n";
    let job = Job::from_str(text, "/jobs", "copy.toml").unwrap();
    let stages = plan(&job, Worker { index: 1, count: 2 }, ID).unwrap();
    assert_eq!(stages.len(), 1);
    assert_eq!(names(&stages[0]), ["in", "out"]);
    assert_eq!(source(&stages[0], "in").share.slice, Some((3, 6)));
    assert_eq!(
        sink(&stages[0], "out").transactional_id_prefix,
        "weir.copy.out.w1"
    );
}

#[test]
fn what_cannot_cross_workers_is_refused_by_name() {
    let worker = Worker { index: 0, count: 3 };
    let file = "name = \"f\"\n[checkpoint]\ninterval = \"1s\"\n\
         [[source]]\nname = \"lines\"\ntype = \"file\"\npath = \"in.txt\"\n\
         [[sink]]\nname = \"out\"\ntype = \"kafka\"\ninputs = [\"lines\"]\n\
         bootstrap = \"k:9092\"\ntopic = \"b\"\n";
    let error = plan(&Job::from_str(file, "/jobs", "f.toml").unwrap(), worker, ID).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("source `lines` is a file source"),
        "{error}"
    );
    let mut few = two_stages("");
    few.vertices
        .iter_mut()
        .find(|v| v.name == "count")
        .unwrap()
        .max_parallelism = 4;
    let error = plan(&few, worker, ID).unwrap_err();
    assert_eq!(
        error.to_string(),
        "`count` has 4 key groups, fewer than its 6 subtasks over 3 workers: set \
         max_parallelism to at least 6"
    );
    let mut broadcast = two_stages("");
    broadcast.edges[1].partitioner = Partitioner::Broadcast;
    assert!(matches!(
        plan(&broadcast, worker, ID),
        Err(WorkersError::Broadcast { .. })
    ));
}
